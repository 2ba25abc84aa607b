//! Issue 26 through the operator on memkube, with Redis servers of the tests' own (keyspace
//! notifications are a server-wide setting): an `LPUSH` scales a Deployment from zero with
//! `pollingInterval: 30` and no poll tick (the manual ticks never fire unless a test ticks
//! them) well under a second; where notifications are off, or the subscription breaks on a
//! server that stopped notifying, the object scales at the next poll as before. PostgreSQL's
//! `listenChannel` likewise: `INSERT` + `NOTIFY` scales from zero with no tick, an `INSERT`
//! without a `NOTIFY` at the next poll. Redis streams on a server without keyspace
//! notifications: an `XADD` scales from zero through the blocking `XREAD` with no tick; where
//! the server refuses that read (an ACL without `XREAD`), at the next poll.

mod common;
mod scenarios;

#[allow(dead_code)]
#[path = "../../scalers/tests/common/mod.rs"]
mod redis_common;

use std::time::{Duration, Instant};

use common::world::becomes_ready;
use keda_api::ScaledObject;
use memkube::MemKube;
use redis::AsyncCommands;
use redis_common::{OwnRedis, own_redis, unique};
use scenarios::{Operator, World};

async fn world(test: &str) -> Option<(MemKube, World)> {
    common::world::world(test, keda_scalers::Registry::builtin()).await
}

/// A ScaledObject `name` on Deployment `name`, 0 <-> 1, polled every 30 s, on `list` of `r`.
fn object(name: &str, r: &OwnRedis, list: &str) -> String {
    format!(
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata:\n  name: {name}\nspec:\n  \
         scaleTargetRef:\n    name: {name}\n  pollingInterval: 30\n  minReplicaCount: 0\n  \
         maxReplicaCount: 10\n  triggers:\n    - type: redis\n      metadata:\n        \
         address: {}\n        listName: {list}\n        listLength: \"5\"\n",
        r.address
    )
}

/// A Deployment at 0 and its object, polled once and Ready.
async fn started(w: &World, name: &str, r: &OwnRedis, list: &str) -> (Operator, ScaledObject) {
    w.deployment(name, 0).await;
    let op = w.start_operator();
    let so = w.create(&object(name, r, list)).await;
    w.polls_reach(&op, &so, 1).await;
    becomes_ready(w, name).await;
    assert_eq!(w.replicas(name).await, 0);
    (op, so)
}

/// Waits (at most `within`) for `name` to have 1 replica; returns how long it took.
async fn scaled_within(w: &World, name: &str, within: Duration) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < within {
        if w.replicas(name).await == 1 {
            return Some(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    None
}

#[tokio::test]
async fn an_lpush_scales_from_zero_without_a_poll_tick() {
    let test = "wake lpush";
    let Some(mut r) = own_redis(test, "Kl").await else {
        return;
    };
    let Some((_server, w)) = world(test).await else {
        return;
    };
    let list = unique("wake");
    let (op, so) = started(&w, "woken", &r, &list).await;
    assert_eq!(r.subscribers_become(1).await, 1, "the subscription is up");
    let _: () = r.connection.lpush(&list, "job").await.expect("LPUSH");
    let took = scaled_within(&w, "woken", Duration::from_secs(5))
        .await
        .expect("the push scaled from zero with no tick");
    assert!(took < Duration::from_secs(1), "activation took {took:?}");
    assert_eq!(w.polls(&op, &so), 2, "one early read, no tick");
    // Active now: more pushes do not make the loop read again before its interval.
    for _ in 0..20 {
        let _: () = r.connection.lpush(&list, "job").await.expect("LPUSH");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        w.polls(&op, &so),
        2,
        "a busy source is not read on every push"
    );
    op.stop().await;
}

#[tokio::test]
async fn without_notifications_the_next_poll_scales_from_zero() {
    let test = "wake off";
    let Some(mut r) = own_redis(test, "").await else {
        return;
    };
    let Some((_server, w)) = world(test).await else {
        return;
    };
    let list = unique("off");
    let (op, so) = started(&w, "polled", &r, &list).await;
    let _: () = r.connection.lpush(&list, "job").await.expect("LPUSH");
    assert!(
        scaled_within(&w, "polled", Duration::from_millis(1500))
            .await
            .is_none(),
        "scaled with no notification and no tick"
    );
    assert_eq!(r.subscribers().await, 0);
    w.poll_after(&op, &so, 30).await;
    assert_eq!(w.replicas("polled").await, 1, "the poll scaled from zero");
    op.stop().await;
}

#[tokio::test]
async fn a_broken_subscription_catches_up_or_falls_back_to_polling() {
    let test = "wake broken";
    let Some(mut r) = own_redis(test, "Kl").await else {
        return;
    };
    let Some((_server, w)) = world(test).await else {
        return;
    };
    // Killed while an item arrives: the reconnect wakes the loop, which reads the real value.
    let list = unique("killed");
    let (op, _so) = started(&w, "caught-up", &r, &list).await;
    assert_eq!(r.subscribers_become(1).await, 1);
    assert_eq!(r.kill_subscribers().await, 1);
    let _: () = r.connection.lpush(&list, "job").await.expect("LPUSH");
    assert!(
        scaled_within(&w, "caught-up", Duration::from_secs(5))
            .await
            .is_some(),
        "the item pushed while the subscription was down scaled from zero"
    );
    op.stop().await;

    // Killed on a server that stopped notifying: no subscription comes back, and the object
    // scales at its next poll.
    let list = unique("stopped");
    let (op, so) = started(&w, "fell-back", &r, &list).await;
    assert_eq!(r.subscribers_become(1).await, 1);
    r.set_notifications("").await;
    assert_eq!(r.kill_subscribers().await, 1);
    let _: () = r.connection.lpush(&list, "job").await.expect("LPUSH");
    assert!(
        scaled_within(&w, "fell-back", Duration::from_millis(1500))
            .await
            .is_none(),
        "scaled with no notification and no tick"
    );
    assert_eq!(r.subscribers().await, 0);
    w.poll_after(&op, &so, 30).await;
    assert_eq!(
        w.replicas("fell-back").await,
        1,
        "the poll scaled from zero"
    );
    op.stop().await;
}

#[tokio::test]
async fn a_thousand_scaled_objects_on_one_redis_hold_one_subscription_connection() {
    let test = "wake thousand";
    let Some(mut r) = own_redis(test, "Kl").await else {
        return;
    };
    let Some((_server, w)) = world(test).await else {
        return;
    };
    let op = w.start_operator();
    let prefix = unique("many");
    let mut objects = Vec::new();
    for i in 0..1000 {
        let name = format!("many-{i}");
        w.deployment(&name, 0).await;
        objects.push(w.create(&object(&name, &r, &format!("{prefix}-{i}"))).await);
    }
    for so in &objects {
        w.polls_reach(&op, so, 1).await;
    }
    assert_eq!(
        r.subscribers_become(1).await,
        1,
        "one subscription connection for 1,000 ScaledObjects"
    );
    // Every object's key is watched on it.
    let mut watched = 0;
    for _ in 0..100 {
        let channels: Vec<String> = redis::cmd("PUBSUB")
            .arg("CHANNELS")
            .arg(format!("__keyspace@0__:{prefix}-*"))
            .query_async(&mut r.connection)
            .await
            .expect("PUBSUB CHANNELS");
        watched = channels.len();
        if watched == 1000 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(watched, 1000, "every object's list is subscribed");
    // And the one connection wakes the right object.
    let _: () = r
        .connection
        .lpush(format!("{prefix}-999"), "job")
        .await
        .expect("LPUSH");
    scaled_within(&w, "many-999", Duration::from_secs(5))
        .await
        .expect("the push scaled the last object from zero with no tick");
    assert_eq!(
        w.replicas("many-0").await,
        0,
        "another object stayed at zero"
    );
    assert_eq!(r.subscribers().await, 1);
    op.stop().await;
}

/// A ScaledObject `name` on Deployment `name`, 0 <-> 1, polled every 30 s, on `stream` of `r`.
fn stream_object(name: &str, r: &OwnRedis, stream: &str) -> String {
    format!(
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata:\n  name: {name}\nspec:\n  \
         scaleTargetRef:\n    name: {name}\n  pollingInterval: 30\n  minReplicaCount: 0\n  \
         maxReplicaCount: 10\n  triggers:\n    - type: redis-streams\n      metadata:\n        \
         address: {}\n        stream: {stream}\n        streamLength: \"5\"\n",
        r.address
    )
}

const XREAD: &str = "keda-rs-xread";

#[tokio::test]
async fn an_xadd_scales_from_zero_through_the_blocking_read_or_falls_back_to_polling() {
    let test = "wake xread";
    let Some(mut r) = own_redis(test, "").await else {
        return;
    };
    let Some((_server, w)) = world(test).await else {
        return;
    };
    let stream = unique("wake-stream");
    let name = "read";
    w.deployment(name, 0).await;
    let op = w.start_operator();
    let so = w.create(&stream_object(name, &r, &stream)).await;
    w.polls_reach(&op, &so, 1).await;
    becomes_ready(&w, name).await;
    assert_eq!(r.named_become(XREAD, 1).await, 1, "the blocking read is up");
    assert_eq!(r.subscribers().await, 0, "no keyspace subscription");
    let _: String = r
        .connection
        .xadd(&stream, "*", &[("job", "1")])
        .await
        .expect("XADD");
    let took = scaled_within(&w, name, Duration::from_secs(5))
        .await
        .expect("the XADD scaled from zero with no tick");
    assert!(took < Duration::from_secs(2), "activation took {took:?}");
    assert_eq!(w.polls(&op, &so), 2, "one early read, no tick");

    // Back to zero through the cooldown; then the server refuses XREAD to this user: the
    // blocking read breaks, and the object scales at its next poll.
    let _: i64 = redis::cmd("DEL")
        .arg(&stream)
        .query_async(&mut r.connection)
        .await
        .expect("DEL");
    w.poll_after(&op, &so, 301).await;
    assert_eq!(w.replicas(name).await, 0, "the cooldown scaled to zero");
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("default")
        .arg("-xread")
        .query_async(&mut r.connection)
        .await
        .expect("ACL SETUSER");
    // Let the read in flight end (it blocks at most a second) and fail.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let _: String = r
        .connection
        .xadd(&stream, "*", &[("job", "1")])
        .await
        .expect("XADD");
    assert!(
        scaled_within(&w, name, Duration::from_millis(1500))
            .await
            .is_none(),
        "scaled with XREAD refused and no tick"
    );
    w.poll_after(&op, &so, 30).await;
    assert_eq!(w.replicas(name).await, 1, "the poll scaled from zero");
    op.stop().await;
}

/// Runs `sql` on the test PostgreSQL (127.0.0.1:5432, trust auth, database `test`) with `psql`;
/// returns its unaligned output.
async fn psql(sql: &str) -> String {
    let output = tokio::process::Command::new("psql")
        .args([
            "-h",
            "127.0.0.1",
            "-U",
            "postgres",
            "-d",
            "test",
            "-Atc",
            sql,
        ])
        .output()
        .await
        .expect("psql runs (scripts/services.sh installs it)");
    assert!(output.status.success(), "psql {sql}");
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

#[tokio::test]
async fn an_insert_and_notify_scales_from_zero_without_a_poll_tick() {
    let test = "wake postgresql";
    let attempt = tokio::net::TcpStream::connect("127.0.0.1:5432");
    if redis_common::service_or_skip(test, "PostgreSQL at 127.0.0.1:5432", attempt)
        .await
        .is_none()
    {
        return;
    }
    let Some((_server, w)) = world(test).await else {
        return;
    };
    let (jobs, channel) = (unique("pg-jobs"), unique("pg-chan"));
    psql(&format!("CREATE TABLE \"{jobs}\" (state text)")).await;
    let name = "listening";
    w.deployment(name, 0).await;
    let op = w.start_operator();
    let so = w
        .create(&format!(
            "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata:\n  name: {name}\nspec:\n  \
             scaleTargetRef:\n    name: {name}\n  pollingInterval: 30\n  minReplicaCount: 0\n  \
             maxReplicaCount: 10\n  triggers:\n    - type: postgresql\n      metadata:\n        \
             host: 127.0.0.1\n        port: \"5432\"\n        userName: postgres\n        \
             dbName: test\n        sslmode: disable\n        targetQueryValue: \"1\"\n        \
             listenChannel: {channel}\n        query: SELECT COUNT(*) FROM \"{jobs}\" WHERE state = 'pending'\n"
        ))
        .await;
    w.polls_reach(&op, &so, 1).await;
    becomes_ready(&w, name).await;
    assert_eq!(w.replicas(name).await, 0);
    let listening =
        format!("SELECT COUNT(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN \"{channel}\"%'");
    let start = Instant::now();
    while psql(&listening).await != "1" {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the listening connection"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // An INSERT alone wakes nothing: the next poll scales.
    psql(&format!("INSERT INTO \"{jobs}\" VALUES ('pending')")).await;
    assert!(
        scaled_within(&w, name, Duration::from_millis(1500))
            .await
            .is_none(),
        "scaled with no NOTIFY and no tick"
    );
    w.poll_after(&op, &so, 30).await;
    assert_eq!(w.replicas(name).await, 1, "the poll scaled from zero");

    // Back to zero through the cooldown, then INSERT + NOTIFY scales with no tick.
    psql(&format!("DELETE FROM \"{jobs}\"")).await;
    w.poll_after(&op, &so, 301).await;
    assert_eq!(w.replicas(name).await, 0, "the cooldown scaled to zero");
    let polls = w.polls(&op, &so);
    psql(&format!(
        "INSERT INTO \"{jobs}\" VALUES ('pending'); NOTIFY \"{channel}\""
    ))
    .await;
    let took = scaled_within(&w, name, Duration::from_secs(5))
        .await
        .expect("INSERT + NOTIFY scaled from zero with no tick");
    assert!(took < Duration::from_secs(1), "activation took {took:?}");
    assert_eq!(w.polls(&op, &so), polls + 1, "one early read, no tick");
    op.stop().await;
    psql(&format!("DROP TABLE \"{jobs}\"")).await;
}
