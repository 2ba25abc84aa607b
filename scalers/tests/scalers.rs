//! Every built-in scaler, built from its documented example through the registry and driven
//! against the real source where there is one (Redis on 127.0.0.1:6379, the Kafka-protocol
//! broker on 127.0.0.1:9092).

mod activemq;
mod beanstalkd;
mod common;
mod etcd;
mod kafka;
mod mysql;
mod nats_jetstream;
mod postgresql;

use common::{Setup, conformance, redis_or_skip, unique};
use keda_scalers::{Clock, Registry, ScalerError};
use redis::AsyncCommands;

/// Every built-in trigger type, sorted.
const BUILTIN_TYPES: &[&str] = &[
    "activemq",
    "apache-kafka",
    "arangodb",
    "artemis-queue",
    "aws-cloudwatch",
    "aws-dynamodb",
    "aws-dynamodb-streams",
    "aws-kinesis-stream",
    "aws-sqs-queue",
    "azure-app-insights",
    "azure-blob",
    "azure-data-explorer",
    "azure-eventhub",
    "azure-log-analytics",
    "azure-monitor",
    "azure-pipelines",
    "azure-queue",
    "azure-servicebus",
    "beanstalkd",
    "clickhouse",
    "couchdb",
    "cpu",
    "cron",
    "datadog",
    "dynatrace",
    "elastic-forecast",
    "elasticsearch",
    "etcd",
    "external",
    "external-push",
    "forgejo-runner",
    "gcp-cloudtasks",
    "gcp-pubsub",
    "gcp-stackdriver",
    "gcp-storage",
    "github-runner",
    "graphite",
    "http",
    "huawei-cloudeye",
    "ibmmq",
    "influxdb",
    "kafka",
    "kubernetes-resource",
    "kubernetes-workload",
    "loki",
    "memory",
    "metrics-api",
    "mysql",
    "nats-jetstream",
    "new-relic",
    "nsq",
    "opensearch",
    "openstack-metric",
    "openstack-swift",
    "postgresql",
    "predictkube",
    "prometheus",
    "pulsar",
    "rabbitmq",
    "redis",
    "redis-cluster",
    "redis-cluster-streams",
    "redis-sentinel",
    "redis-sentinel-streams",
    "redis-streams",
    "selenium-grid",
    "solace-direct-messaging",
    "solace-event-queue",
    "solarwinds",
    "solr",
    "splunk",
    "splunk-observability",
    "sumologic",
];

#[test]
fn every_builtin_type_is_documented_with_an_example_that_parses() {
    let registry = Registry::builtin();
    let types: Vec<&str> = registry.types().collect();
    let mut sorted = types.clone();
    sorted.sort_unstable();
    assert_eq!(types, sorted);
    assert_eq!(types, BUILTIN_TYPES);
    for t in types {
        common::assert_parameters_documented(&registry, t);
        let (trigger, _) = common::documented_trigger(t);
        assert_eq!(trigger.type_, t);
    }
}

/// docs/scalers/README.md lists exactly the registered types, each linked to its page.
#[test]
fn the_scalers_readme_lists_every_registered_type() {
    let readme = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/scalers/README.md"),
    )
    .expect("docs/scalers/README.md");
    let listed: Vec<&str> = readme
        .lines()
        .filter_map(|line| line.strip_prefix("| [`"))
        .filter_map(|rest| rest.split_once('`'))
        .map(|(name, rest)| {
            assert!(rest.starts_with(&format!("]({name}.md)")), "{name}: {rest}");
            name
        })
        .collect();
    let registry = Registry::builtin();
    assert_eq!(listed, registry.types().collect::<Vec<_>>());
}

#[test]
fn every_documented_example_of_the_issue_18_triggers_parses() {
    let registry = Registry::builtin();
    // Values a Secret would hold for the parameters the examples' TriggerAuthentications name.
    let sample = |param: &str| match param {
        "connection" => "postgres://keda:pw@postgres.db.svc:5432/billing?sslmode=require",
        "connectionString" => "keda:pw@tcp(mysql.db.svc:3306)/mail",
        "account" => "$G",
        _ => "s3cret",
    };
    for trigger_type in [
        "metrics-api",
        "mysql",
        "nats-jetstream",
        "postgresql",
        "prometheus",
    ] {
        common::assert_defaults_documented(&registry, trigger_type);
        let examples = common::documented_examples(trigger_type);
        assert!(!examples.is_empty(), "{trigger_type}");
        for (trigger, index, auth) in examples {
            let mut ctx = keda_scalers::ScalerContext::from_trigger(&trigger, index);
            for param in auth {
                let value = keda_scalers::Secret::new(sample(&param));
                ctx.auth_params.insert(param, value);
            }
            let checked = registry.check(&ctx).expect("a parse-only check");
            assert!(
                checked.is_ok(),
                "docs/scalers/{trigger_type}.md: {checked:?}"
            );
        }
    }
}

#[test]
fn every_documented_example_of_the_issue_17_triggers_parses_with_its_defaults_documented() {
    let registry = Registry::builtin();
    for trigger_type in [
        "activemq",
        "aws-cloudwatch",
        "aws-dynamodb",
        "aws-sqs-queue",
        "beanstalkd",
        "etcd",
    ] {
        common::assert_defaults_documented(&registry, trigger_type);
        let examples = common::documented_examples(trigger_type);
        assert!(!examples.is_empty(), "{trigger_type}");
        for (trigger, index, auth) in examples {
            let mut ctx = keda_scalers::ScalerContext::from_trigger(&trigger, index);
            for param in auth {
                ctx.auth_params
                    .insert(param, keda_scalers::Secret::new("s3cret"));
            }
            let checked = registry.check(&ctx).expect("a parse-only check");
            assert!(
                checked.is_ok(),
                "docs/scalers/{trigger_type}.md: {checked:?}"
            );
        }
    }
}

#[test]
fn every_documented_example_of_kubernetes_workload_and_metrics_api_parses() {
    let registry = Registry::builtin();
    for trigger_type in ["kubernetes-workload", "metrics-api"] {
        let examples = common::documented_examples(trigger_type);
        assert!(examples.len() >= 2, "{trigger_type}");
        for (trigger, index, auth) in examples {
            let mut ctx = keda_scalers::ScalerContext::from_trigger(&trigger, index);
            for param in auth {
                ctx.auth_params
                    .insert(param, keda_scalers::Secret::new("s3cret"));
            }
            let checked = registry.check(&ctx).expect("a parse-only check");
            assert!(
                checked.is_ok(),
                "docs/scalers/{trigger_type}.md: {checked:?}"
            );
        }
    }
}

#[tokio::test]
async fn unknown_trigger_type_lists_the_known_ones() {
    let err = Registry::builtin()
        .build(keda_scalers::ScalerContext::new("foo", 0))
        .await
        .expect_err("unknown type");
    assert_eq!(
        err.to_string(),
        format!(
            "unknown trigger type \"foo\"; known types: {}",
            BUILTIN_TYPES.join(", ")
        )
    );
}

mod resource {
    use super::*;

    #[tokio::test]
    async fn cpu_and_memory_are_always_active_resource_metrics() {
        for t in ["cpu", "memory"] {
            let h = conformance(t, Setup::default()).await;
            let specs = h.built.scaler().metric_specs();
            let cr = specs[0]
                .container_resource
                .as_ref()
                .expect("containerName given");
            assert_eq!((cr.name.as_str(), cr.container.as_str()), (t, "app"));
            assert_eq!(cr.target.average_utilization, Some(60));
            let r = h.built.scaler().metrics_and_activity("").await.expect("ok");
            assert!(r.active && r.values.is_empty());
            h.close().await;
        }
    }
}

mod cron {
    use super::*;

    fn at(instant: &str) -> Setup<'static> {
        Setup {
            clock: Some(Clock::fixed(instant.parse().expect("instant"))),
            ..Setup::default()
        }
    }

    #[tokio::test]
    async fn documented_office_hours_window() {
        // The example: Europe/Berlin, 08:00-17:30 Monday to Friday, 10 replicas.
        // (instant, value, active); 2024-01-15 is a Monday, Berlin is UTC+1 in winter.
        for (instant, value, active) in [
            ("2024-01-15T06:59:00Z", 0.0, false),
            ("2024-01-15T07:00:00Z", 10.0, true),
            ("2024-01-15T16:29:00Z", 10.0, true),
            ("2024-01-15T16:30:00Z", 0.0, false),
            ("2024-01-13T12:00:00Z", 0.0, false), // Saturday
            ("2024-03-29T06:30:00Z", 0.0, false), // Friday, 07:30 local (still UTC+1)
        ] {
            let h = conformance("cron", at(instant)).await;
            assert_eq!(h.metric_name, "s0-cron-Europe-Berlin-08xx1-5-3017xx1-5");
            h.expect(value, active).await;
            h.close().await;
        }
        // After the spring-forward change (2024-03-31) Berlin is UTC+2: 08:00 local = 06:00Z.
        let h = conformance("cron", at("2024-04-01T06:00:00Z")).await;
        h.expect(10.0, true).await;
        h.close().await;
    }
}

mod redis_list {
    use super::*;

    /// Runs `body` against a conformance-built `redis` scaler on `key`, then deletes the key.
    async fn with_key(key: &str) -> common::Harness {
        conformance(
            "redis",
            Setup {
                metadata: &[("address", common::REDIS_ADDRESS), ("listName", key)],
                ..Setup::default()
            },
        )
        .await
    }

    #[tokio::test]
    async fn list_length_and_activation_boundary() {
        let Some(mut r) = redis_or_skip("redis list").await else {
            return;
        };
        let key = unique("list");
        let h = with_key(&key).await;
        let target = h.built.scaler().metric_specs()[0]
            .external
            .as_ref()
            .and_then(|e| e.target.average_value.clone())
            .expect("AverageValue target");
        assert_eq!(target.0, "10"); // the example's listLength
        // The example's activationListLength is 2.
        h.expect(0.0, false).await; // missing key counts as an empty list
        let _: () = r.rpush(&key, &["a", "b"]).await.expect("rpush");
        h.expect(2.0, false).await; // equal to the threshold: inactive
        let _: () = r.rpush(&key, "c").await.expect("rpush");
        h.expect(3.0, true).await;
        let _: () = r.del(&key).await.expect("del");
        h.close().await;
    }

    #[tokio::test]
    async fn sets_sorted_sets_and_hashes_are_measured_by_their_size() {
        let Some(mut r) = redis_or_skip("redis key types").await else {
            return;
        };
        let (zset, set, hash, string) =
            (unique("zset"), unique("set"), unique("hash"), unique("str"));
        let _: () = r.zadd(&zset, "a", 1).await.expect("zadd");
        let _: () = r.zadd(&zset, "b", 2).await.expect("zadd");
        let _: () = r.zadd(&zset, "c", 3).await.expect("zadd");
        let _: () = r.sadd(&set, &["a", "b"]).await.expect("sadd");
        let _: () = r
            .hset_multiple(&hash, &[("a", 1), ("b", 2), ("c", 3), ("d", 4)])
            .await
            .expect("hset");
        let _: () = r.set(&string, "x").await.expect("set");
        for (key, value, active) in [(&zset, 3.0, true), (&set, 2.0, false), (&hash, 4.0, true)] {
            let h = with_key(key).await;
            h.expect(value, active).await;
            h.close().await;
        }
        let h = with_key(&string).await;
        let err = h.expect_error().await;
        assert!(matches!(err, ScalerError::Unexpected { .. }), "{err}");
        assert!(err.to_string().contains("is a string"), "{err}");
        h.close().await;
        let _: () = r.del(&[&zset, &set, &hash, &string]).await.expect("del");
    }

    #[tokio::test]
    async fn two_scalers_on_one_redis_share_one_connection_closed_after_both() {
        let Some(mut r) = redis_or_skip("redis pool").await else {
            return;
        };
        // Database 13 is used only by this test, so the server's count of clients on it is
        // ours alone.
        const DB: &str = "13";
        async fn clients_on_db(r: &mut redis::aio::MultiplexedConnection) -> usize {
            let list: String = redis::cmd("CLIENT")
                .arg("LIST")
                .query_async(r)
                .await
                .expect("client list");
            list.lines()
                .filter(|l| l.split(' ').any(|f| f == format!("db={DB}")))
                .count()
        }
        async fn wait_for(r: &mut redis::aio::MultiplexedConnection, expected: usize) -> usize {
            // The server notices a closed socket asynchronously: poll briefly.
            let mut n = clients_on_db(r).await;
            for _ in 0..50 {
                if n == expected {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                n = clients_on_db(r).await;
            }
            n
        }
        let before = clients_on_db(&mut r).await;
        let registry = Registry::builtin();
        let pools = keda_scalers::pool::ClientPools::new();
        let build = |list: String| {
            let mut ctx = keda_scalers::ScalerContext::new("redis", 0);
            ctx.metadata = [
                ("address", common::REDIS_ADDRESS),
                ("listName", list.as_str()),
                ("databaseIndex", DB),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
            ctx.clients = pools.clone();
            registry.build(ctx)
        };
        let a = build(unique("a")).await.expect("a builds");
        let b = build(unique("b")).await.expect("b builds");
        let pool = pools.pool::<
            keda_scalers::scalers::redis::connection::RedisSettings,
            keda_scalers::scalers::redis::connection::RedisClient,
        >();
        assert_eq!(pool.len(), 1);
        assert_eq!(wait_for(&mut r, before + 1).await, before + 1);
        a.scaler()
            .metrics_and_activity("s0-redis-a")
            .await
            .expect("a reads");
        b.scaler()
            .metrics_and_activity("s0-redis-b")
            .await
            .expect("b reads");
        a.scaler().close().await;
        assert_eq!(pool.len(), 1);
        assert_eq!(wait_for(&mut r, before + 1).await, before + 1);
        b.scaler().close().await;
        assert!(pool.is_empty());
        assert_eq!(wait_for(&mut r, before).await, before);
    }

    #[tokio::test]
    async fn unreachable_redis_fails_to_build_naming_the_address_not_the_password() {
        let err = Registry::builtin()
            .build(keda_scalers::ScalerContext {
                metadata: [
                    ("address", "127.0.0.1:1"),
                    ("listName", "x"),
                    ("password", "hunter2"),
                ]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
                ..keda_scalers::ScalerContext::new("redis", 0)
            })
            .await
            .expect_err("cannot connect");
        let message = err.to_string();
        assert!(
            message.starts_with("trigger 0 (redis): connecting to redis at 127.0.0.1:1 failed"),
            "{message}"
        );
        assert!(!message.contains("hunter2"), "{message}");
    }
}

mod redis_streams {
    use super::*;

    async fn harness(stream: &str, metadata: &[(&str, &str)]) -> common::Harness {
        let mut all = vec![("stream", stream)];
        all.extend_from_slice(metadata);
        conformance(
            "redis-streams",
            Setup {
                metadata: &all,
                // The example reads the address from the container's REDIS_ADDRESS.
                env: &[("REDIS_ADDRESS", common::REDIS_ADDRESS)],
                ..Setup::default()
            },
        )
        .await
    }

    #[tokio::test]
    async fn lag_pending_and_length_modes() {
        let Some(mut r) = redis_or_skip("redis streams").await else {
            return;
        };
        let stream = unique("stream");
        let xadd = |r: &mut redis::aio::MultiplexedConnection| {
            let mut cmd = redis::cmd("XADD");
            cmd.arg(&stream).arg("*").arg("k").arg("v");
            let mut r = r.clone();
            async move {
                let _: String = cmd.query_async(&mut r).await.expect("xadd");
            }
        };

        // The example: consumerGroup workers, lagCount 10, activationLagCount 1 (lag mode).
        let lag = harness(&stream, &[]).await;
        assert_eq!(lag.metric_name, format!("s0-redis-streams-{stream}"));
        xadd(&mut r).await;
        // No group yet: the whole stream is lag. 1 equals the threshold: inactive.
        lag.expect(1.0, false).await;
        let _: () = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(&stream)
            .arg("workers")
            .arg("0")
            .query_async(&mut r)
            .await
            .expect("xgroup create");
        lag.expect(1.0, false).await;
        xadd(&mut r).await;
        lag.expect(2.0, true).await;

        let _: redis::Value = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg("workers")
            .arg("c1")
            .arg("COUNT")
            .arg(2)
            .arg("STREAMS")
            .arg(&stream)
            .arg(">")
            .query_async(&mut r)
            .await
            .expect("xreadgroup");
        lag.expect(0.0, false).await;

        // Without lagCount: pending entries of the group.
        let pending = harness(&stream, &[("lagCount", "")]).await;
        pending.expect(2.0, true).await;
        let ids: redis::streams::StreamRangeReply =
            r.xrange_count(&stream, "-", "+", 1).await.expect("xrange");
        let _: i64 = r
            .xack(&stream, "workers", &[&ids.ids[0].id])
            .await
            .expect("xack");
        pending.expect(1.0, false).await;

        // Without consumerGroup: the stream length.
        let length = harness(&stream, &[("consumerGroup", "")]).await;
        length.expect(2.0, true).await;
        let target = length.built.scaler().metric_specs()[0]
            .external
            .as_ref()
            .and_then(|e| e.target.average_value.clone())
            .expect("target");
        assert_eq!(target.0, "5"); // streamLength default

        let _: () = r.del(&stream).await.expect("del");
        for h in [lag, pending, length] {
            h.close().await;
        }
    }

    /// KEDA reads the lag of a stream that does not exist, and a lag Redis cannot tell (nil
    /// after deletions past the group's last delivered entry), as 0.
    #[tokio::test]
    async fn a_missing_stream_and_a_nil_lag_count_as_zero() {
        let Some(mut r) = redis_or_skip("redis streams nil lag").await else {
            return;
        };
        let stream = unique("stream-nil");
        let lag = harness(&stream, &[]).await;
        // The example's lag mode, on a stream nobody created yet.
        lag.expect(0.0, false).await;

        for id in ["1-1", "2-1", "3-1"] {
            let _: String = redis::cmd("XADD")
                .arg(&stream)
                .arg(id)
                .arg("k")
                .arg("v")
                .query_async(&mut r)
                .await
                .expect("xadd");
        }
        let _: () = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(&stream)
            .arg("workers")
            .arg("0")
            .query_async(&mut r)
            .await
            .expect("xgroup create");
        lag.expect(3.0, true).await;
        // A deletion after the group's last delivered entry: Redis answers `lag` nil.
        let _: i64 = r.xdel(&stream, &["2-1"]).await.expect("xdel");
        let groups: Vec<std::collections::HashMap<String, redis::Value>> = redis::cmd("XINFO")
            .arg("GROUPS")
            .arg(&stream)
            .query_async(&mut r)
            .await
            .expect("xinfo");
        assert_eq!(
            groups[0].get("lag"),
            Some(&redis::Value::Nil),
            "Redis reports a nil lag"
        );
        lag.expect(0.0, false).await;

        let _: () = r.del(&stream).await.expect("del");
        lag.close().await;
    }
}

mod kubernetes_workload {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use keda_scalers::cluster::{ClusterHandle, InMemoryCluster};

    use super::*;

    fn pod(name: &str, labels: &[(&str, &str)], phase: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                namespace: Some("default".into()),
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some("node-1".into()),
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
        }
    }

    #[tokio::test]
    async fn the_documented_example_counts_unfinished_matching_pods() {
        let cluster = Arc::new(InMemoryCluster::new());
        let h = conformance(
            "kubernetes-workload",
            Setup {
                cluster: ClusterHandle::new(cluster.clone()),
                ..Setup::default()
            },
        )
        .await;
        assert_eq!(h.metric_name, "s0-workload-default");
        let target = h.built.scaler().metric_specs()[0]
            .external
            .as_ref()
            .and_then(|e| e.target.average_value.clone());
        assert_eq!(target.map(|q| q.0), Some("5".to_string()));
        // The example: app=job-runner, tier notin (debug), activationValue 0.
        h.expect(0.0, false).await;
        cluster.apply_pod(&pod("r1", &[("app", "job-runner")], "Running"));
        h.expect(1.0, true).await;
        cluster.apply_pod(&pod(
            "r2",
            &[("app", "job-runner"), ("tier", "batch")],
            "Pending",
        ));
        cluster.apply_pod(&pod(
            "r3",
            &[("app", "job-runner"), ("tier", "debug")],
            "Running",
        ));
        cluster.apply_pod(&pod("r4", &[("app", "job-runner")], "Succeeded"));
        cluster.apply_pod(&pod("w1", &[("app", "web")], "Running"));
        h.expect(2.0, true).await;
        cluster.apply_pod(&pod("r1", &[("app", "job-runner")], "Failed"));
        cluster.delete_pod("default", "r2");
        h.expect(0.0, false).await;
        h.close().await;
    }
}

/// Issue 26: which trigger types the operator may poll sooner (adaptive polling): the
/// self-hosted sources that cannot notify, not the billed or rate-limited cloud APIs.
#[tokio::test]
async fn adaptive_polling_is_for_self_hosted_sources_only() {
    let registry = Registry::builtin();
    let rows = [
        // (type, adaptive)
        ("prometheus", true),
        ("metrics-api", true),
        ("nsq", true),
        ("selenium-grid", true),
        ("couchdb", true),
        ("arangodb", true),
        ("pulsar", true),
        ("loki", true),
        ("artemis-queue", true),
        ("solr", true),
        ("new-relic", false),
        ("dynatrace", false),
        ("sumologic", false),
        ("github-runner", false),
        ("solarwinds", false),
    ];
    for (trigger_type, adaptive) in rows {
        let (trigger, index, auth) = common::documented_examples(trigger_type)
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("{trigger_type}: no documented example"));
        let mut ctx = keda_scalers::ScalerContext::from_trigger(&trigger, index);
        // Secret values for the parameters the example's TriggerAuthentication names; TLS
        // material left out (a PEM is checked when the client is built).
        for param in auth {
            if !matches!(
                param.as_str(),
                "ca" | "cert" | "key" | "keyPassword" | "tls"
            ) {
                ctx.auth_params
                    .insert(param, keda_scalers::Secret::new("s3cret"));
            }
        }
        let built = registry
            .build(ctx)
            .await
            .unwrap_or_else(|e| panic!("{trigger_type}: {e}"));
        assert_eq!(
            built.scaler().adaptive_polling(),
            adaptive,
            "{trigger_type}"
        );
        built.scaler().close().await;
    }
}
