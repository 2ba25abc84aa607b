//! The broker triggers of issue 17 (`etcd`, `beanstalkd`, `activemq`, `azure-queue`) and issue
//! 24 (`apache-kafka`, on the Kafka-protocol broker on 127.0.0.1:9092) through the
//! operator on memkube, against the real servers of `scripts/services.sh` (etcd on
//! 127.0.0.1:2379, beanstalkd on 127.0.0.1:11300, ActiveMQ's Jolokia on 127.0.0.1:8161, Azurite
//! on 127.0.0.1:10001): a message in an Azure queue scales from zero; a change of an etcd
//! key scales a Deployment from zero with no poll due (the push side), and bad input (an
//! unreachable server, a missing key, wrong credentials) is `Ready=False` with a message naming
//! the trigger and the parameter, and recovers once fixed.

mod common;
mod scenarios;

#[allow(dead_code)]
#[path = "../../scalers/tests/common/mod.rs"]
mod redis_common;

use std::time::{Duration, Instant};

use common::world::{becomes_ready, not_ready};
use kube::api::{Patch, PatchParams};
use memkube::MemKube;
use scenarios::World;

async fn world(test: &str) -> Option<(MemKube, World)> {
    common::world::world(test, keda_scalers::Registry::builtin()).await
}

/// Whether something listens on `address`; under `CI=true` a missing service fails the test.
async fn service_or_skip(test: &str, service: &str, address: &str) -> bool {
    redis_common::service_or_skip(test, &format!("{service} at {address}"), async {
        tokio::net::TcpStream::connect(address).await.map(drop)
    })
    .await
    .is_some()
}

async fn etcdctl(args: &[&str]) {
    let output = tokio::process::Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .arg("--endpoints=127.0.0.1:2379")
        .args(args)
        .output()
        .await
        .expect("etcdctl runs (scripts/services.sh installs it)");
    assert!(output.status.success(), "etcdctl {args:?}");
}

/// A ScaledObject `name` on Deployment `name` with one trigger given as YAML lines at the
/// trigger's indentation, polled every 300 s (the manual ticks never fire unless a test ticks
/// them), scaling between 0 and 10.
fn object(name: &str, trigger: &str) -> String {
    format!(
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata:\n  name: {name}\nspec:\n  \
         scaleTargetRef:\n    name: {name}\n  pollingInterval: 300\n  minReplicaCount: 0\n  \
         maxReplicaCount: 10\n  triggers:\n    - {trigger}\n"
    )
}

/// Replaces trigger 0's metadata entry `key` with `value`.
async fn set_metadata(w: &World, name: &str, key: &str, value: &str) {
    let mut so = w.get(name).await;
    so.spec.triggers[0]
        .metadata
        .insert(key.to_string(), value.to_string());
    let patch = serde_json::json!({ "spec": { "triggers": so.spec.triggers } });
    w.scaled_objects()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch");
}

/// Sends one message to `queue` over ActiveMQ's STOMP port, waiting for its receipt.
async fn stomp_send(queue: &str) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect("127.0.0.1:61613")
        .await
        .expect("STOMP");
    let frames = format!(
        "CONNECT\naccept-version:1.2\nhost:localhost\n\n\0SEND\ndestination:/queue/{queue}\nreceipt:1\n\njob\0"
    );
    stream.write_all(frames.as_bytes()).await.expect("send");
    let mut seen = Vec::new();
    let mut buf = [0u8; 512];
    while !String::from_utf8_lossy(&seen).contains("RECEIPT") {
        let n = stream.read(&mut buf).await.expect("read");
        assert!(n > 0, "STOMP closed: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
}

fn assert_names(message: &str, expected: &[&str]) {
    for e in expected {
        assert!(message.contains(e), "{message:?} should name {e:?}");
    }
}

/// KEDA's etcd push in our words: at 0 replicas with the key at 0, no poll is due; the key is
/// set above `activationValue` and the watch wakes the loop, which scales 0 -> 1 at once.
#[tokio::test]
async fn an_etcd_key_change_scales_from_zero_without_waiting_for_a_poll() {
    let test = "etcd push from zero";
    if !service_or_skip(test, "etcd", "127.0.0.1:2379").await {
        return;
    }
    let Some((_server, w)) = world(test).await else {
        return;
    };
    let key = format!("/keda-rs/{}", redis_common::unique("operator"));
    etcdctl(&["put", &key, "0"]).await;
    w.deployment("watched", 0).await;
    let op = w.start_operator();
    let so = w
        .create(&object(
            "watched",
            &format!(
                "type: etcd\n      metadata:\n        endpoints: 127.0.0.1:2379\n        watchKey: {key}\n        value: \"2\"\n        activationValue: \"1\""
            ),
        ))
        .await;
    w.polls_reach(&op, &so, 1).await;
    becomes_ready(&w, "watched").await;
    assert_eq!(w.replicas("watched").await, 0);

    // The watch opens in the background: the key is written until the change is seen (a
    // write before the watch exists is not an event).
    let started = Instant::now();
    let mut value = 5;
    while w.replicas("watched").await == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the key change did not scale from zero"
        );
        etcdctl(&["put", &key, &value.to_string()]).await;
        value += 1;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(w.replicas("watched").await, 1);
    assert!(w.polls(&op, &so) >= 2, "the push made the loop poll");
    etcdctl(&["del", &key]).await;
    op.stop().await;
}

/// Bad input through the operator: a beanstalkd that cannot be reached, an etcd key that does
/// not exist and ActiveMQ credentials that are wrong each leave their object `Ready=False`
/// with a message naming the trigger type and the parameter (never the password); fixed, each
/// becomes Ready.
#[tokio::test]
async fn bad_broker_triggers_are_not_ready_naming_the_parameter_and_recover() {
    let test = "broker triggers bad input";
    for (service, address) in [
        ("beanstalkd", "127.0.0.1:11300"),
        ("etcd", "127.0.0.1:2379"),
        ("ActiveMQ", "127.0.0.1:8161"),
    ] {
        if !service_or_skip(test, service, address).await {
            return;
        }
    }
    let Some((_server, w)) = world(test).await else {
        return;
    };
    let op = w.start_operator();
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let key = format!("/keda-rs/{}", redis_common::unique("missing"));
    let cases = [
        (
            "tubes",
            format!(
                "type: beanstalkd\n      metadata:\n        server: 127.0.0.1:{closed}\n        tube: jobs\n        value: \"5\""
            ),
            vec!["(beanstalkd)", "parameter \"server\"", "127.0.0.1:"],
        ),
        (
            "keys",
            format!(
                "type: etcd\n      metadata:\n        endpoints: 127.0.0.1:2379\n        watchKey: {key}\n        value: \"5\""
            ),
            vec!["(etcd)", "watchKey", &key],
        ),
        (
            "queues",
            "type: activemq\n      metadata:\n        managementEndpoint: 127.0.0.1:8161\n        destinationName: orders\n        brokerName: localhost\n        username: admin\n        password: n0t-the-pw".to_string(),
            vec!["(activemq)", "managementEndpoint", "HTTP 401"],
        ),
    ];
    for (name, trigger, expected) in &cases {
        w.deployment(name, 0).await;
        w.create(&object(name, trigger)).await;
        let (_, message) = not_ready(&w, name).await;
        assert_names(&message, expected);
        assert!(!message.contains("n0t-the-pw"), "{message}");
    }

    // Fixed: the server is the real one, the key exists, the password is right.
    set_metadata(&w, "tubes", "server", "127.0.0.1:11300").await;
    etcdctl(&["put", &key, "0"]).await;
    let so = w.get("keys").await;
    w.poll_after(&op, &so, 300).await;
    // The right password, and a queue that exists (one message creates it).
    let queue = redis_common::unique("orders");
    stomp_send(&queue).await;
    set_metadata(&w, "queues", "destinationName", &queue).await;
    set_metadata(&w, "queues", "password", "admin").await;
    for name in ["tubes", "keys", "queues"] {
        becomes_ready(&w, name).await;
    }
    etcdctl(&["del", &key]).await;
    op.stop().await;
}

/// A request to Azurite's development account (`scripts/services.sh` runs it on 127.0.0.1:
/// blob 10000, queue 10001), signed by keda-rs' own storage client.
async fn azurite(service: keda_scalers::azure::Service, method: http::Method, segments: &[&str]) {
    use keda_scalers::azure::{StorageClient, StorageClientKey, parse_connection_string};
    let (endpoint, credential) =
        parse_connection_string("UseDevelopmentStorage=true", service).expect("dev account");
    let client = StorageClient::new(StorageClientKey {
        endpoint,
        credential,
        timeout: Duration::from_secs(10),
    })
    .expect("client");
    let body = if segments.last() == Some(&"messages") {
        bytes::Bytes::from_static(b"<QueueMessage><MessageText>am9i</MessageText></QueueMessage>")
    } else {
        bytes::Bytes::new()
    };
    client
        .send(
            method.clone(),
            segments,
            &[],
            &[("content-type", "application/xml")],
            body,
            &keda_scalers::Clock::system(),
        )
        .await
        .unwrap_or_else(|e| panic!("Azurite {method} {segments:?}: {e}"));
}

/// An `azure-queue` trigger through the operator against Azurite: a queue with a message scales
/// a Deployment from zero at the first poll; a missing queue and a wrong account key are
/// `Ready=False` naming the trigger and the parameter (never the key), and the object recovers
/// once the queue exists; `podIdentity` provider `azure-workload` is `Ready=False` saying it is
/// not supported yet.
#[tokio::test]
async fn an_azure_queue_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    use keda_scalers::azure::Service;
    let test = "azure-queue through the operator";
    if !service_or_skip(test, "Azurite", "127.0.0.1:10001").await {
        return;
    }
    let Some((_server, w)) = world(test).await else {
        return;
    };
    let op = w.start_operator();
    let queue = redis_common::unique("operator");
    azurite(Service::Queue, http::Method::PUT, &[&queue]).await;
    azurite(Service::Queue, http::Method::POST, &[&queue, "messages"]).await;
    let trigger = |queue: &str, connection: &str| {
        format!(
            "type: azure-queue\n      metadata:\n        queueName: {queue}\n        queueLength: \"5\"\n        connection: \"{connection}\""
        )
    };
    w.deployment("orders", 0).await;
    w.create(&object(
        "orders",
        &trigger(&queue, "UseDevelopmentStorage=true"),
    ))
    .await;
    becomes_ready(&w, "orders").await;
    let started = Instant::now();
    while w.replicas("orders").await == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "one message did not scale from zero"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(w.replicas("orders").await, 1);

    let missing = redis_common::unique("missing");
    let wrong_key = "AccountName=devstoreaccount1;AccountKey=d3Jvbmcta2V5LW9mLWtlZGEtcnM=;QueueEndpoint=http://127.0.0.1:10001/devstoreaccount1";
    let cases = [
        (
            "missing",
            trigger(&missing, "UseDevelopmentStorage=true"),
            vec![
                "(azure-queue)",
                "queueName",
                "QueueNotFound",
                missing.as_str(),
            ],
        ),
        (
            "wrongkey",
            trigger(&queue, wrong_key),
            vec!["(azure-queue)", "(connection)", "AuthenticationFailed"],
        ),
    ];
    for (name, trigger, expected) in &cases {
        w.deployment(name, 0).await;
        w.create(&object(name, trigger)).await;
        let (_, message) = not_ready(&w, name).await;
        assert_names(&message, expected);
        assert!(!message.contains("d3Jvbmcta2V5"), "{message}");
    }
    // KEDA's workload identity for Azure Storage is refused before the scaler is built.
    let auth: keda_api::TriggerAuthentication = serde_yaml::from_str(
        "apiVersion: keda.sh/v1alpha1\nkind: TriggerAuthentication\nmetadata:\n  name: azure-identity\nspec:\n  podIdentity:\n    provider: azure-workload\n",
    )
    .expect("YAML");
    kube::Api::<keda_api::TriggerAuthentication>::namespaced(w.client.clone(), &w.namespace)
        .create(&Default::default(), &auth)
        .await
        .expect("create");
    w.deployment("identity", 0).await;
    w.create(&object(
        "identity",
        &format!(
            "type: azure-queue\n      metadata:\n        queueName: {queue}\n        accountName: devstoreaccount1\n      authenticationRef:\n        name: azure-identity"
        ),
    ))
    .await;
    let (_, message) = not_ready(&w, "identity").await;
    assert_names(
        &message,
        &["podIdentity provider \"azure-workload\" is not supported by keda-rs yet"],
    );

    // Fixed: the queue exists.
    azurite(Service::Queue, http::Method::PUT, &[&missing]).await;
    let so = w.get("missing").await;
    w.poll_after(&op, &so, 300).await;
    becomes_ready(&w, "missing").await;
    op.stop().await;
}

/// Creates `topic` (one partition) on the Kafka-protocol broker of `scripts/services.sh`
/// (127.0.0.1:9092) and commits offset 0 of it for `group`.
async fn kafka_topic_with_group(topic: &str, group: &str) {
    use rdkafka::ClientConfig;
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
    use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", "127.0.0.1:9092")
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
    let mut offsets = TopicPartitionList::new();
    offsets
        .add_partition_offset(topic, 0, Offset::Offset(0))
        .expect("offset");
    let group = group.to_string();
    tokio::task::spawn_blocking(move || {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", "127.0.0.1:9092")
            .set("group.id", &group)
            .set("enable.auto.commit", "false")
            .create()
            .expect("committing consumer");
        consumer.commit(&offsets, CommitMode::Sync).expect("commit");
    })
    .await
    .expect("commit task");
}

/// Produces `count` messages to partition 0 of `topic`, one request each (tansu's high
/// watermark is exact only so; see scalers/tests/kafka/mod.rs).
async fn kafka_produce(topic: &str, count: usize) {
    use rdkafka::ClientConfig;
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", "127.0.0.1:9092")
        .set("linger.ms", "0")
        .set("batch.num.messages", "1")
        .set("max.in.flight.requests.per.connection", "1")
        .create()
        .expect("producer");
    for i in 0..count {
        let payload = format!("m{i}");
        producer
            .send(
                FutureRecord::<(), _>::to(topic)
                    .partition(0)
                    .payload(&payload),
                Duration::from_secs(5),
            )
            .await
            .map_err(|(e, _)| e)
            .expect("delivered");
    }
}

#[tokio::test]
async fn apache_kafka_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    let test = "apache-kafka through the operator";
    if !service_or_skip(test, "Kafka-protocol broker", "127.0.0.1:9092").await {
        return;
    }
    let Some((_server, w)) = world(test).await else {
        return;
    };
    let (topic, group) = (
        redis_common::unique("apache-op"),
        redis_common::unique("group"),
    );
    kafka_topic_with_group(&topic, &group).await;
    let op = w.start_operator();
    w.deployment("lag", 0).await;
    w.create(&object(
        "lag",
        &format!(
            "type: apache-kafka\n      metadata:\n        bootstrapServers: 127.0.0.1:9092\n        consumerGroup: {group}\n        topic: {topic}\n        lagThreshold: \"5\""
        ),
    ))
    .await;
    becomes_ready(&w, "lag").await;
    let so = w.get("lag").await;
    w.poll_after(&op, &so, 300).await;
    assert_eq!(w.replicas("lag").await, 0, "no lag: inactive");
    kafka_produce(&topic, 3).await;
    let started = Instant::now();
    while w.replicas("lag").await == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "a lag of 3 did not scale from zero"
        );
        w.poll_after(&op, &so, 300).await;
    }
    assert_eq!(w.replicas("lag").await, 1);

    let cases = [
        (
            "threshold",
            "type: apache-kafka\n      metadata:\n        bootstrapServers: 127.0.0.1:9092\n        consumerGroup: g\n        topic: t\n        lagThreshold: \"0\"",
            vec!["(apache-kafka)", "lagThreshold"],
        ),
        (
            "sasl",
            "type: apache-kafka\n      metadata:\n        bootstrapServers: 127.0.0.1:9092\n        consumerGroup: g\n        sasl: oauthbearer",
            vec!["(apache-kafka)", "sasl"],
        ),
    ];
    for (name, trigger, expected) in &cases {
        w.deployment(name, 0).await;
        w.create(&object(name, trigger)).await;
        let (_, message) = not_ready(&w, name).await;
        assert_names(&message, expected);
    }
    op.stop().await;
}
