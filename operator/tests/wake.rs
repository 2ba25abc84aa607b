//! Issue 26 through the operator on memkube, with Redis servers of the tests' own (keyspace
//! notifications are a server-wide setting): an `LPUSH` scales a Deployment from zero with
//! `pollingInterval: 30` and no poll tick (the manual ticks never fire unless a test ticks
//! them) well under a second; where notifications are off, or the subscription breaks on a
//! server that stopped notifying, the object scales at the next poll as before. PostgreSQL's
//! `listenChannel` likewise: `INSERT` + `NOTIFY` scales from zero with no tick, an `INSERT`
//! without a `NOTIFY` at the next poll. Redis streams on a server without keyspace
//! notifications: an `XADD` scales from zero through the blocking `XREAD` with no tick; where
//! the server refuses that read (an ACL without `XREAD`), at the next poll. NATS JetStream: a
//! publish scales from zero through the core NATS subscription with no tick; Kafka: a produce,
//! through the cluster client's end-offset refresh. Adaptive polling: a `metrics-api` value
//! rising below its activation threshold is read again after the fast interval, with no tick,
//! never sooner than the minimum interval.

mod common;
mod scenarios;

#[allow(dead_code)]
#[path = "../../scalers/tests/nats_jetstream/client.rs"]
mod nats_client;
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

/// A ScaledObject `name` on Deployment `name`, 0 <-> 1, polled every `interval` s, with one
/// trigger of `trigger_type` and `metadata` (YAML lines, indented by 8).
fn object_with(name: &str, interval: u64, trigger_type: &str, metadata: &[(&str, &str)]) -> String {
    let metadata: String = metadata
        .iter()
        .map(|(k, v)| format!("        {k}: \"{v}\"\n"))
        .collect();
    format!(
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata:\n  name: {name}\nspec:\n  \
         scaleTargetRef:\n    name: {name}\n  pollingInterval: {interval}\n  minReplicaCount: 0\n  \
         maxReplicaCount: 10\n  triggers:\n    - type: {trigger_type}\n      metadata:\n{metadata}"
    )
}

/// A Deployment at 0 and `yaml`'s object, polled once and Ready at 0.
async fn started_with(w: &World, name: &str, yaml: &str) -> (Operator, ScaledObject) {
    w.deployment(name, 0).await;
    let op = w.start_operator();
    let so = w.create(yaml).await;
    w.polls_reach(&op, &so, 1).await;
    becomes_ready(w, name).await;
    assert_eq!(w.replicas(name).await, 0);
    (op, so)
}

/// The monitoring endpoint and client port of the NATS server `scripts/services.sh` runs.
async fn nats_or_skip(test: &str) -> Option<(String, nats_client::NatsClient)> {
    let attempt = async {
        let mut last = String::new();
        for port in [8222u16, 8223] {
            let monitoring = format!("127.0.0.1:{port}");
            let varz = tokio::net::TcpStream::connect(&monitoring).await;
            if let Err(e) = varz {
                last = e.to_string();
                continue;
            }
            // The client port is the monitoring port minus 4000 on this machine (4222/8222,
            // 4223/8223, scripts/services.sh).
            let client =
                nats_client::NatsClient::connect(&format!("127.0.0.1:{}", port - 4000)).await?;
            return Ok((monitoring, client));
        }
        Err(last)
    };
    redis_common::service_or_skip(test, "NATS with JetStream and monitoring", attempt).await
}

#[tokio::test]
async fn a_nats_publish_scales_from_zero_without_a_poll_tick() {
    let test = "wake nats";
    let Some((monitoring, mut nats)) = nats_or_skip(test).await else {
        return;
    };
    let Some((_server, w)) = world(test).await else {
        return;
    };
    let stream = unique("wake");
    nats.create_stream(&stream, 1).await.expect("stream");
    nats.create_consumer(&stream, "workers", 1)
        .await
        .expect("consumer");
    let yaml = object_with(
        "nats-woken",
        30,
        "nats-jetstream",
        &[
            ("natsServerMonitoringEndpoint", &monitoring),
            ("account", "$G"),
            ("stream", &stream),
            ("consumer", "workers"),
        ],
    );
    let (op, so) = started_with(&w, "nats-woken", &yaml).await;
    // The subscription is set up in the background: publish until a read follows.
    let mut took = None;
    for _ in 0..20 {
        nats.publish(&stream, 1).await.expect("publish");
        if let Some(t) = scaled_within(&w, "nats-woken", Duration::from_millis(250)).await {
            took = Some(t);
            break;
        }
    }
    let took = took.expect("a publish scaled from zero with no tick");
    assert!(took < Duration::from_secs(1), "activation took {took:?}");
    assert!(w.polls(&op, &so) >= 2, "read on the wake");
    op.stop().await;
    nats.delete_stream(&stream).await.expect("delete");
}

/// A producer of one message per request (tansu's high watermark after a batch is wrong; see
/// scalers/tests/kafka), or `None` without the broker.
async fn kafka_or_skip(test: &str) -> Option<rdkafka::producer::FutureProducer> {
    let attempt = async {
        use rdkafka::consumer::Consumer;
        let mut config = rdkafka::ClientConfig::new();
        config
            .set("bootstrap.servers", redis_common::KAFKA_BOOTSTRAP)
            .set("socket.connection.setup.timeout.ms", "2000");
        let probe: rdkafka::consumer::BaseConsumer = config.create().map_err(|e| e.to_string())?;
        tokio::task::spawn_blocking(move || probe.fetch_metadata(None, Duration::from_secs(2)))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        config
            .set("linger.ms", "0")
            .set("batch.num.messages", "1")
            .set("max.in.flight.requests.per.connection", "1")
            .create::<rdkafka::producer::FutureProducer>()
            .map_err(|e| e.to_string())
    };
    redis_common::service_or_skip(test, "the Kafka-protocol broker", attempt).await
}

/// Creates `topic` (one partition) on the test broker.
async fn create_topic(topic: &str) {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    let admin: AdminClient<rdkafka::client::DefaultClientContext> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", redis_common::KAFKA_BOOTSTRAP)
        .create()
        .expect("admin client");
    for result in admin
        .create_topics(
            &[NewTopic::new(topic, 1, TopicReplication::Fixed(1))],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(5))),
        )
        .await
        .expect("create topics")
    {
        result.expect("topic created");
    }
}

#[tokio::test]
async fn a_kafka_produce_scales_from_zero_without_a_poll_tick() {
    let test = "wake kafka";
    let Some(producer) = kafka_or_skip(test).await else {
        return;
    };
    let Some((_server, w)) = world(test).await else {
        return;
    };
    let topic = unique("wake");
    create_topic(&topic).await;
    // offsetResetPolicy earliest: an empty topic has no lag, one message is a lag of 1.
    let yaml = object_with(
        "kafka-woken",
        30,
        "kafka",
        &[
            ("bootstrapServers", redis_common::KAFKA_BOOTSTRAP),
            ("consumerGroup", &unique("g")),
            ("topic", &topic),
            ("offsetResetPolicy", "earliest"),
            ("lagThreshold", "5"),
        ],
    );
    let (op, so) = started_with(&w, "kafka-woken", &yaml).await;
    // Let the refresh take its baseline.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let polls = w.polls(&op, &so);
    producer
        .send(
            rdkafka::producer::FutureRecord::<(), _>::to(&topic).payload("job"),
            Duration::from_secs(5),
        )
        .await
        .map_err(|(e, _)| e)
        .expect("delivered");
    let took = scaled_within(&w, "kafka-woken", Duration::from_secs(5))
        .await
        .expect("the produce scaled from zero with no tick");
    assert!(took < Duration::from_secs(1), "activation took {took:?}");
    assert!(w.polls(&op, &so) > polls, "read on the wake");
    op.stop().await;
}

/// An HTTP server answering `{"value": <value>}` to every request, counting them.
async fn value_server(
    value: std::sync::Arc<std::sync::atomic::AtomicU64>,
) -> (String, tokio::task::JoinHandle<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("addr").to_string();
    let task = tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let value = value.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 16_384 {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let body = format!(
                    "{{\"value\": {}}}",
                    value.load(std::sync::atomic::Ordering::SeqCst)
                );
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            });
        }
    });
    (address, task)
}

#[tokio::test]
async fn a_rising_value_below_activation_is_polled_sooner_within_the_bounds() {
    let test = "adaptive polling";
    let Some((_server, w)) = world(test).await else {
        return;
    };
    let value = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (address, _serving) = value_server(value.clone()).await;
    // pollingInterval 10 s: the fast interval is 1 s (a tenth, and the minimum).
    let yaml = object_with(
        "adaptive",
        10,
        "metrics-api",
        &[
            ("url", &format!("http://{address}/stats")),
            ("valueLocation", "value"),
            ("targetValue", "10"),
            ("activationTargetValue", "5"),
        ],
    );
    let (op, so) = started_with(&w, "adaptive", &yaml).await;
    // Nothing changes: no sooner poll.
    w.poll_after(&op, &so, 10).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(w.polls(&op, &so), 2, "polled sooner with nothing happening");
    // Work arriving, below activation: the next reads come after the fast interval, no tick.
    value.store(2, std::sync::atomic::Ordering::SeqCst);
    w.poll_after(&op, &so, 10).await;
    let seen = Instant::now();
    w.polls_reach(&op, &so, 5).await;
    let took = seen.elapsed();
    // Two fast polls: at least two minimum intervals (1 s), far less than one pollingInterval.
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_secs(5),
        "two fast polls took {took:?}"
    );
    assert_eq!(w.replicas("adaptive").await, 0, "still below activation");
    op.stop().await;
}
