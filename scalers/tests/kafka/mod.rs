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
