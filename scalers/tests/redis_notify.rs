//! Issue 26: the Redis scalers' wake-ups from keyspace notifications, against real Redis
//! servers of the tests' own (`redis-server` on a free loopback port, so the server-wide
//! `notify-keyspace-events` and `CLIENT KILL` touch nobody else): one subscription connection
//! for a thousand triggers, a wake on `LPUSH` and `XADD`, none where the server does not
//! notify, and a subscription that comes back after it was killed. Streams on servers without
//! keyspace notifications: one blocking `XREAD` connection for all of them, a wake on `XADD`,
//! a catch-up after the connection was killed, and a key of another type that does not stop the
//! others.

#[allow(dead_code)]
mod common;

use std::time::Duration;

use common::{OwnRedis, own_redis, unique};
use keda_scalers::pool::ClientPools;
use keda_scalers::{BuiltScaler, Registry, ScalerContext, Wake};
use redis::AsyncCommands;

async fn build(
    registry: &Registry,
    pools: &ClientPools,
    trigger_type: &str,
    metadata: &[(&str, &str)],
) -> BuiltScaler {
    let mut ctx = ScalerContext::new(trigger_type, 0);
    ctx.metadata = metadata
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    ctx.clients = pools.clone();
    registry.build(ctx).await.expect("the trigger builds")
}

async fn list_scaler(r: &OwnRedis, pools: &ClientPools, list: &str) -> BuiltScaler {
    build(
        &Registry::builtin(),
        pools,
        "redis",
        &[("address", &r.address), ("listName", list)],
    )
    .await
}

/// Whether `wake` fires within `within`.
async fn woken(wake: &mut Wake, within: Duration) -> bool {
    matches!(tokio::time::timeout(within, wake.woken()).await, Ok(true))
}

/// Pushes to `list` until `wake` fires (the subscription is set up in the background, and a
/// push before it exists is not seen): returns whether it fired within 5 s.
async fn push_until_woken(r: &mut OwnRedis, list: &str, wake: &mut Wake) -> bool {
    for _ in 0..50 {
        let _: () = r.connection.lpush(list, "job").await.expect("LPUSH");
        if woken(wake, Duration::from_millis(100)).await {
            return true;
        }
    }
    false
}

#[tokio::test]
async fn a_thousand_triggers_on_one_server_hold_one_subscription_connection() {
    let Some(mut r) = own_redis("redis notify 1000", "Kl").await else {
        return;
    };
    let pools = ClientPools::new();
    let lists: Vec<String> = (0..1000)
        .map(|i| format!("{}-{i}", unique("many")))
        .collect();
    let mut scalers = Vec::new();
    for list in &lists {
        scalers.push(list_scaler(&r, &pools, list).await);
    }
    assert_eq!(
        r.subscribers_become(1).await,
        1,
        "one subscription connection"
    );
    let mut first = scalers[0].scaler().wake().expect("a standalone list wakes");
    let mut last = scalers[999]
        .scaler()
        .wake()
        .expect("a standalone list wakes");
    assert!(
        push_until_woken(&mut r, &lists[999], &mut last).await,
        "LPUSH woke its trigger"
    );
    assert!(
        !woken(&mut first, Duration::from_millis(300)).await,
        "a push to another key woke a trigger"
    );
    // Still one connection, however many keys it watches.
    assert_eq!(r.subscribers().await, 1);
    for s in &scalers {
        s.scaler().close().await;
    }
    assert_eq!(
        r.subscribers_become(0).await,
        0,
        "the last close ends the subscription"
    );
    assert!(
        scalers[0].scaler().wake().is_none(),
        "a closed scaler has no wake-ups"
    );
}

#[tokio::test]
async fn a_stream_entry_wakes_the_streams_trigger() {
    let Some(mut r) = own_redis("redis notify streams", "Kt").await else {
        return;
    };
    let pools = ClientPools::new();
    let stream = unique("stream");
    let group = "workers";
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(&stream)
        .arg(group)
        .arg("$")
        .arg("MKSTREAM")
        .query_async(&mut r.connection)
        .await
        .expect("XGROUP CREATE");
    let s = build(
        &Registry::builtin(),
        &pools,
        "redis-streams",
        &[
            ("address", &r.address),
            ("stream", &stream),
            ("consumerGroup", group),
            ("pendingEntriesCount", "5"),
        ],
    )
    .await;
    let mut wake = s.scaler().wake().expect("a standalone stream wakes");
    assert_eq!(r.subscribers_become(1).await, 1);
    let mut fired = false;
    for _ in 0..50 {
        let _: String = r
            .connection
            .xadd(&stream, "*", &[("job", "1")])
            .await
            .expect("XADD");
        if woken(&mut wake, Duration::from_millis(100)).await {
            fired = true;
            break;
        }
    }
    assert!(fired, "XADD woke the streams trigger");
    assert_eq!(
        r.named(XREAD).await.len(),
        0,
        "no blocking read where keyspace notifications wake"
    );
    s.scaler().close().await;
}

const XREAD: &str = "keda-rs-xread";

async fn stream_scaler(r: &OwnRedis, pools: &ClientPools, stream: &str) -> BuiltScaler {
    build(
        &Registry::builtin(),
        pools,
        "redis-streams",
        &[("address", &r.address), ("stream", stream)],
    )
    .await
}

async fn xadd(r: &mut OwnRedis, stream: &str) {
    let _: String = r
        .connection
        .xadd(stream, "*", &[("job", "1")])
        .await
        .expect("XADD");
}

#[tokio::test]
async fn without_notifications_one_blocking_read_wakes_every_stream_trigger() {
    let Some(mut r) = own_redis("redis xread", "").await else {
        return;
    };
    let pools = ClientPools::new();
    let streams: Vec<String> = (0..200).map(|i| format!("{}-{i}", unique("xs"))).collect();
    let mut scalers = Vec::new();
    for stream in &streams {
        scalers.push(stream_scaler(&r, &pools, stream).await);
    }
    assert_eq!(r.named_become(XREAD, 1).await, 1, "one blocking connection");
    assert_eq!(r.subscribers().await, 0, "no keyspace subscription");
    let mut first = scalers[0]
        .scaler()
        .wake()
        .expect("a standalone stream wakes");
    let mut last = scalers[199]
        .scaler()
        .wake()
        .expect("a standalone stream wakes");
    // One XADD, no retries: the stream is read from the newest id at its build, so an entry
    // added before the blocking read took the stream in is answered all the same.
    xadd(&mut r, &streams[199]).await;
    assert!(
        woken(&mut last, Duration::from_secs(3)).await,
        "XADD woke its trigger"
    );
    assert!(
        !woken(&mut first, Duration::from_millis(300)).await,
        "an entry in another stream woke a trigger"
    );
    // A burst wakes a few times at most (each answer jumps to the newest entry), then the
    // read is quiet.
    for _ in 0..50 {
        xadd(&mut r, &streams[0]).await;
    }
    assert!(woken(&mut first, Duration::from_secs(3)).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A wake from the middle of the burst may still be pending (wakes coalesce): take it.
    let _ = woken(&mut first, Duration::from_millis(50)).await;
    assert!(
        !woken(&mut first, Duration::from_millis(1500)).await,
        "the burst kept waking after it ended"
    );
    let read = scalers[0]
        .scaler()
        .metrics_and_activity(&format!("s0-redis-streams-{}", streams[0]))
        .await
        .expect("reads");
    assert_eq!(read.values[0].value, 50.0, "the poll reads the real length");
    assert_eq!(r.named(XREAD).await.len(), 1);
    for s in &scalers {
        s.scaler().close().await;
    }
    assert_eq!(
        r.named_become(XREAD, 0).await,
        0,
        "the last close ends the blocking read"
    );
}

#[tokio::test]
async fn a_killed_blocking_read_comes_back_and_answers_what_came_meanwhile() {
    let Some(mut r) = own_redis("redis xread killed", "").await else {
        return;
    };
    let pools = ClientPools::new();
    let stream = unique("xkilled");
    let s = stream_scaler(&r, &pools, &stream).await;
    let mut wake = s.scaler().wake().expect("wakes");
    assert_eq!(r.named_become(XREAD, 1).await, 1);
    xadd(&mut r, &stream).await;
    assert!(woken(&mut wake, Duration::from_secs(3)).await);
    assert_eq!(r.kill_named(XREAD).await, 1);
    // Added while the connection is down: the first read after the reconnect answers it.
    xadd(&mut r, &stream).await;
    assert!(
        woken(&mut wake, Duration::from_secs(5)).await,
        "the entry added while the read was down woke the trigger"
    );
    assert_eq!(r.named_become(XREAD, 1).await, 1, "back");
    xadd(&mut r, &stream).await;
    assert!(
        woken(&mut wake, Duration::from_secs(3)).await,
        "XADD wakes again"
    );
    s.scaler().close().await;
    assert_eq!(r.named_become(XREAD, 0).await, 0);
}

#[tokio::test]
async fn a_key_of_another_type_does_not_stop_the_other_streams_waking() {
    let Some(mut r) = own_redis("redis xread wrongtype", "").await else {
        return;
    };
    let pools = ClientPools::new();
    let (list, stream) = (unique("xlist"), unique("xstream"));
    let _: () = r.connection.lpush(&list, "job").await.expect("LPUSH");
    // A tenant's stream trigger on a list: its polls fail; the shared read leaves it out.
    let wrong = stream_scaler(&r, &pools, &list).await;
    let s = stream_scaler(&r, &pools, &stream).await;
    let mut wake = s.scaler().wake().expect("wakes");
    assert_eq!(r.named_become(XREAD, 1).await, 1);
    let mut fired = false;
    for _ in 0..30 {
        xadd(&mut r, &stream).await;
        if woken(&mut wake, Duration::from_millis(200)).await {
            fired = true;
            break;
        }
    }
    assert!(fired, "XADD woke the stream's trigger beside a list key");
    wrong.scaler().close().await;
    s.scaler().close().await;
}

#[tokio::test]
async fn no_subscription_is_held_where_the_server_does_not_notify() {
    let Some(mut r) = own_redis("redis notify off", "").await else {
        return;
    };
    let pools = ClientPools::new();
    let list = unique("off");
    let s = list_scaler(&r, &pools, &list).await;
    let mut wake = s
        .scaler()
        .wake()
        .expect("the trigger still offers wake-ups");
    // Give the subscriber time to read the setting and decide.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        r.subscribers().await,
        0,
        "no subscription without notifications"
    );
    let _: () = r.connection.lpush(&list, "job").await.expect("LPUSH");
    assert!(!woken(&mut wake, Duration::from_millis(500)).await);
    // The setting was read, never changed.
    let flags: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("notify-keyspace-events")
        .query_async(&mut r.connection)
        .await
        .expect("CONFIG GET");
    assert_eq!(flags.get(1).map(String::as_str), Some(""));
    // The trigger reads the real value all the same (the poll).
    let read = s
        .scaler()
        .metrics_and_activity(&format!("s0-redis-{list}"))
        .await
        .expect("reads");
    assert!(read.active);
    s.scaler().close().await;
}

#[tokio::test]
async fn a_killed_subscription_comes_back_and_wakes_its_triggers() {
    let Some(mut r) = own_redis("redis notify killed", "Kl").await else {
        return;
    };
    let pools = ClientPools::new();
    let list = unique("killed");
    let s = list_scaler(&r, &pools, &list).await;
    let mut wake = s.scaler().wake().expect("wakes");
    assert!(push_until_woken(&mut r, &list, &mut wake).await);
    assert_eq!(r.subscribers_become(1).await, 1);
    assert_eq!(r.kill_subscribers().await, 1);
    // Back, and every trigger is woken once: something may have arrived unseen meanwhile.
    assert!(
        woken(&mut wake, Duration::from_secs(5)).await,
        "the reconnect woke the trigger"
    );
    assert_eq!(r.subscribers_become(1).await, 1);
    assert!(
        push_until_woken(&mut r, &list, &mut wake).await,
        "pushes wake again"
    );
    s.scaler().close().await;
    assert_eq!(r.subscribers_become(0).await, 0);
}
