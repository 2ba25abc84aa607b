//! Faults the operator must ride out (issue 14, docs/reliability.md "Faults"), on the in-memory
//! API server's error injection and on a real event source on loopback:
//!
//! - a watch that expires (`410 Gone`) mid-run while objects changed: the operator relists and
//!   goes on, with one loop per live object, none lost, none twice;
//! - an event source that goes down (refuses connections, hangs, or answers 503): the fallback
//!   applies after `failureThreshold` failed polls and ends with the first poll after it returns.
//!
//! The API server unavailable for 60 s and the operator restarted while workloads are busy run
//! the real binary: `tests/faults_binary.rs`.

mod common;
mod scenarios;

#[allow(dead_code)]
#[path = "../../scalers/tests/common/mod.rs"]
mod redis_common;

use common::dial::Dials;
use common::source::{Outage, Source};
use common::world::{NS, dial_object, poll_all, world};
use k8s_openapi::api::apps::v1::Deployment;
use keda_api::ScaledObject;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use memkube::{FailureRule, Verb};
use scenarios::{Operator, World, condition, eventually, hpa_exists, hpa_gone};

/// Deletes `name` the way a user forces it while the operator is not looking: its finalizer
/// removed, then deleted, so it is gone at once and no reconcile ever sees it terminating.
async fn force_delete(w: &World, name: &str) {
    let patch = serde_json::json!({ "metadata": { "finalizers": null } });
    w.scaled_objects()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("remove the finalizer");
    w.scaled_objects()
        .delete(name, &DeleteParams::default())
        .await
        .expect("delete");
    assert!(
        w.scaled_objects()
            .get_opt(name)
            .await
            .expect("get")
            .is_none(),
        "{name} is gone"
    );
}

/// The API server's watch history is compacted while the operator's watches are down: every
/// watch resumes from a resourceVersion the server no longer has, gets `410 Gone` and relists.
/// Meanwhile objects were created, changed, deleted behind the operator's back and recreated
/// under the same name. After the relist there is exactly one loop per live object, each
/// polling once per tick: the vanished object's loop is gone, the recreated one polls for the
/// new object only, the changed and the new one are reconciled.
#[tokio::test]
async fn a_watch_expired_mid_run_relists_with_one_loop_per_live_object() {
    let dials = Dials::new();
    let Some((server, w)) = world("watch-expired", dials.registry()).await else {
        return;
    };
    for name in ["keep", "change", "recreate", "vanish", "new"] {
        w.deployment(name, 0).await;
        dials.set(name, 0.0);
    }
    let op = w.start_operator();
    let keep = w.create(&dial_object("keep", 1)).await;
    let change = w.create(&dial_object("change", 1)).await;
    let recreate = w.create(&dial_object("recreate", 1)).await;
    let vanish = w.create(&dial_object("vanish", 1)).await;
    for so in [&keep, &change, &recreate, &vanish] {
        w.polls_reach(&op, so, 1).await;
        hpa_exists(&w, &format!("keda-hpa-{}", so.name_any())).await;
    }
    assert_eq!(op.loops.len().await, 4);

    // The watches end and cannot come back.
    server.inject_failure(FailureRule::new(503).verb(Verb::Watch));
    server.close_watches();
    // Behind the operator's back.
    let patch = serde_json::json!({ "spec": { "maxReplicaCount": 3 } });
    w.scaled_objects()
        .patch("change", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("change");
    force_delete(&w, "recreate").await;
    let recreated = w.create(&dial_object("recreate", 1)).await;
    assert_ne!(recreated.uid(), recreate.uid());
    force_delete(&w, "vanish").await;
    let new = w.create(&dial_object("new", 1)).await;
    // History compacted: every watch must relist.
    server.compact_history();
    server.clear_failures();

    let hpa = eventually("keda-hpa-change with maxReplicas 3", || async {
        w.hpas()
            .get_opt("keda-hpa-change")
            .await
            .ok()
            .flatten()
            .filter(|h| h.spec.as_ref().is_some_and(|s| s.max_replicas == 3))
    })
    .await;
    assert_eq!(hpa.spec.map(|s| s.max_replicas), Some(3));
    hpa_exists(&w, "keda-hpa-new").await;
    hpa_exists(&w, "keda-hpa-recreate").await;
    hpa_gone(&w, "keda-hpa-vanish").await;
    w.polls_reach(&op, &new, 1).await;
    w.polls_reach(&op, &recreated, 1).await;

    // At their next tick, loops whose object is gone stop: one loop per live object.
    let live = [&keep, &change, &recreated, &new];
    poll_all(&w, &op, &live, 10).await;
    eventually("one loop per live object", || async {
        (op.loops.len().await == 4 && !op.loops.is_running(NS, "vanish").await).then_some(())
    })
    .await;

    // One read per object per tick: no object polled by two loops.
    let before: Vec<u64> = live.iter().map(|so| dials.reads(&so.name_any())).collect();
    poll_all(&w, &op, &live, 10).await;
    for (so, n) in live.iter().zip(before) {
        assert_eq!(
            dials.reads(&so.name_any()),
            n + 1,
            "{} is read once per poll",
            so.name_any()
        );
    }
    // And they still scale: the recreated object goes 0 -> 1 on its own dial.
    dials.set("recreate", 10.0);
    poll_all(&w, &op, &live, 10).await;
    assert_eq!(w.replicas("recreate").await, 1);
    assert_eq!(
        condition(&w.get("recreate").await, "Active"),
        Some(("True".into(), "ScalerActive".into()))
    );
    op.stop().await;
}

/// A ScaledObject on Deployment `name` with one `metrics-api` trigger reading `url` (target
/// 5), between 1 and 10 replicas, falling back to 6 replicas after 3 failures.
fn source_object(name: &str, url: &str) -> String {
    format!(
        r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: {name}
spec:
  scaleTargetRef:
    name: {name}
  pollingInterval: 10
  minReplicaCount: 1
  maxReplicaCount: 10
  fallback:
    failureThreshold: 3
    replicas: 6
  triggers:
    - type: metrics-api
      metadata:
        url: "{url}"
        valueLocation: value
        targetValue: "5"
        timeout: "300"
"#
    )
}

/// What the HPA does with the metric the operator serves, once: `ceil(value / averageValue)`
/// clamped to the HPA's bounds, written through `/scale` (memkube runs no HPA controller; one
/// External `AverageValue` metric is all these objects have). Returns the replicas it set.
async fn act_as_hpa(w: &World, op: &Operator, name: &str, metric: &str) -> i32 {
    let hpa = hpa_exists(w, &format!("keda-hpa-{name}")).await;
    let spec = hpa.spec.expect("HPA spec");
    let target = spec.metrics.as_ref().expect("metrics")[0]
        .external
        .as_ref()
        .and_then(|e| e.target.average_value.as_ref())
        .and_then(|q| keda_operator::scale_loop::quantity_value(&q.0))
        .expect("an AverageValue target");
    let values = op
        .loops
        .metric_values(NS, name, metric)
        .await
        .expect("the HPA gets a value");
    let total: f64 = values.iter().map(|v| v.value).sum();
    // ceil(total / target) within [min, max], without a float-to-int cast.
    let min = spec.min_replicas.unwrap_or(1);
    let desired = (min..=spec.max_replicas)
        .find(|r| f64::from(*r) * target >= total)
        .unwrap_or(spec.max_replicas);
    let patch = serde_json::json!({ "spec": { "replicas": desired } });
    let deployments: Api<Deployment> = w.deployments();
    deployments
        .patch_scale(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("scale");
    desired
}

/// `status.health` of `metric`: (status, numberOfFailures).
fn health(so: &ScaledObject, metric: &str) -> Option<(String, i32)> {
    let h = so.status.as_ref()?.health.as_ref()?.get(metric)?;
    Some((h.status.clone()?, h.number_of_failures?))
}

/// The event source goes down the way `outage` says while a workload runs at 2 replicas:
/// polls 1 to `failureThreshold` (3) count failures and change nothing; from poll 4 on the
/// metric is served from fallback (`replicas x target`), so the HPA sets `fallback.replicas`
/// (6); the first poll after the source returns reads it again, clears the fallback and the
/// HPA goes back to what the source says.
async fn event_source_down(outage: Outage) {
    let Some((_server, w)) = world("event-source-down", keda_scalers::Registry::builtin()).await
    else {
        return;
    };
    let source = Source::start().await;
    let name = "orders";
    let metric = "s0-metric-api-value";
    source.set(name, 10.0);
    w.deployment(name, 2).await;
    let op = w.start_operator();
    let so = w.create(&source_object(name, &source.url(name))).await;
    w.polls_reach(&op, &so, 1).await;
    assert_eq!(act_as_hpa(&w, &op, name, metric).await, 2, "10 / 5");
    let status = w.get(name).await;
    assert_eq!(health(&status, metric), Some(("Happy".into(), 0)));
    assert_eq!(
        condition(&status, "Fallback"),
        Some(("False".into(), "NoFallbackFound".into()))
    );

    source.down(outage);
    for failures in 1..=3 {
        w.poll_after(&op, &so, 10).await;
        let status = w.get(name).await;
        assert_eq!(
            health(&status, metric),
            Some(("Failing".into(), failures)),
            "{outage:?}: poll {failures} counts a failure"
        );
        assert_eq!(
            condition(&status, "Fallback"),
            Some(("False".into(), "NoFallbackFound".into())),
            "{outage:?}: no fallback within failureThreshold"
        );
        assert_eq!(w.replicas(name).await, 2, "nothing scales meanwhile");
    }
    w.poll_after(&op, &so, 10).await;
    let status = w.get(name).await;
    assert_eq!(
        condition(&status, "Fallback"),
        Some(("True".into(), "FallbackExists".into())),
        "{outage:?}: fallback after failureThreshold failed polls"
    );
    assert_eq!(
        w.replicas(name).await,
        2,
        "the loop leaves 1 <-> N to the HPA"
    );
    assert_eq!(
        act_as_hpa(&w, &op, name, metric).await,
        6,
        "{outage:?}: the HPA is served 6 x 5 and sets fallback.replicas"
    );
    assert_eq!(w.replicas(name).await, 6);

    source.up().await;
    source.set(name, 15.0);
    w.poll_after(&op, &so, 10).await;
    let status = w.get(name).await;
    assert_eq!(
        health(&status, metric),
        Some(("Happy".into(), 0)),
        "{outage:?}: the first poll after the source returns reads it"
    );
    assert_eq!(
        condition(&status, "Fallback"),
        Some(("False".into(), "NoFallbackFound".into()))
    );
    assert_eq!(act_as_hpa(&w, &op, name, metric).await, 3, "15 / 5");
    op.stop().await;
}

/// Every answer a poll reads counts against its namespace's budget
/// (`--answer-bytes-per-namespace`, `keda_scalers::answers`): with a budget smaller than the
/// source's answer, each poll fails, and the `KEDAScalerFailed` Event says why, naming the flag;
/// the source's text is never shown.
#[tokio::test]
async fn a_poll_s_answers_count_against_its_namespace_s_budget() {
    let Some((_server, mut w)) = world("answer-budget", keda_scalers::Registry::builtin()).await
    else {
        return;
    };
    w.pools = keda_scalers::pool::ClientPools::new().with_answer_bytes_per_namespace(8);
    let source = Source::start().await;
    let name = "orders";
    let metric = "s0-metric-api-value";
    source.set_body(name, r#"{"value": 10, "said": "SOURCE-TEXT"}"#);
    w.deployment(name, 2).await;
    let op = w.start_operator();
    let so = w.create(&source_object(name, &source.url(name))).await;
    w.polls_reach(&op, &so, 1).await;
    let status = w.get(name).await;
    assert_eq!(health(&status, metric), Some(("Failing".into(), 1)));
    // The HPA's read of the metric reads the source again, within the same budget.
    let read = op.loops.metric_values(NS, name, metric).await;
    let error = format!("{:?}", read.expect_err("the HPA's read fails too"));
    assert!(
        error
            .contains("would hold more than 8 bytes (the operator's --answer-bytes-per-namespace)"),
        "{error}"
    );
    assert!(!error.contains("SOURCE-TEXT"), "{error}");
    let notes = eventually("a KEDAScalerFailed Event", || async {
        let events: Api<k8s_openapi::api::events::v1::Event> =
            Api::namespaced(w.client.clone(), NS);
        let notes: Vec<String> = events
            .list(&Default::default())
            .await
            .expect("list Events")
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("KEDAScalerFailed"))
            .filter_map(|e| e.note)
            .collect();
        (!notes.is_empty()).then_some(notes)
    })
    .await;
    for note in &notes {
        assert!(
            note.contains(
                "would hold more than 8 bytes (the operator's --answer-bytes-per-namespace)"
            ),
            "{note}"
        );
        assert!(!note.contains("SOURCE-TEXT"), "{note}");
    }
    assert_eq!(w.replicas(name).await, 2, "nothing scales on a failed poll");
    op.stop().await;
}

#[tokio::test]
async fn an_event_source_refusing_connections_falls_back_after_failure_threshold_and_recovers_in_one_poll()
 {
    event_source_down(Outage::Refused).await;
}

#[tokio::test]
async fn an_event_source_that_hangs_falls_back_after_failure_threshold_and_recovers_in_one_poll() {
    event_source_down(Outage::Hung).await;
}

#[tokio::test]
async fn an_event_source_answering_503_falls_back_after_failure_threshold_and_recovers_in_one_poll()
{
    event_source_down(Outage::Unavailable).await;
}

// ---------------------------------------------------------------------------------------------
// The real binary against memkube over loopback: the API server gone for 60 s, and restarts
// while workloads are busy.

mod binary {
    use std::net::SocketAddr;
    use std::ops::Deref;

    use k8s_openapi::api::apps::v1::Deployment;
    use keda_api::ScaledObject;
    use kube::api::{Api, PostParams};
    use memkube::MemKube;

    pub use crate::common::binary::{Operator, create_deployment, eventually, get};

    /// Where the operator's Lease lives.
    pub const OPERATOR_NS: &str = "keda";
    /// Where the workloads live.
    pub const APPS: &str = "apps";

    /// One running operator process, as deployed (`config/operator/deployment.yaml`): leader
    /// election on with client-go's durations (15 s lease, 10 s renew deadline, 2 s retry).
    pub async fn start_operator(cluster: &Cluster, pod: &str) -> Operator {
        let args = ["--leader-elect", "--metrics-service-bind-address", "0"];
        Operator::start(
            cluster,
            pod,
            &args,
            &[("POD_NAME", pod), ("POD_NAMESPACE", OPERATOR_NS)],
        )
        .await
    }

    /// A plain HTTP/1.1 GET's status code; 0 when nothing answers.
    pub async fn get_status(addr: SocketAddr, path: &str) -> u16 {
        get(addr, path).await.0
    }

    /// memkube on loopback with the CRDs, the namespaces and a kubeconfig for the binary.
    pub struct Cluster(crate::common::binary::Cluster);

    impl Deref for Cluster {
        type Target = crate::common::binary::Cluster;
        fn deref(&self) -> &Self::Target {
            &self.0
        }
    }

    impl Cluster {
        pub async fn start(name: &str) -> Cluster {
            crate::common::world::init_logging();
            let server = MemKube::new();
            server
                .load_crds_from_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../config/crd"))
                .expect("CRDs load");
            server.create_namespace(OPERATOR_NS).expect("namespace");
            server.create_namespace(APPS).expect("namespace");
            Cluster(crate::common::binary::Cluster::serve(server, name).await)
        }

        pub fn deployments(&self) -> Api<Deployment> {
            Api::namespaced(self.server.client(), APPS)
        }

        pub fn scaled_objects(&self) -> Api<ScaledObject> {
            Api::namespaced(self.server.client(), APPS)
        }

        /// A Deployment `name` at `replicas`.
        pub async fn deployment(&self, name: &str, replicas: i32) {
            create_deployment(&self.server.client(), APPS, name, replicas).await;
        }

        /// A ScaledObject from YAML, in [`APPS`].
        pub async fn create(&self, yaml: &str) -> ScaledObject {
            let mut so: ScaledObject = serde_yaml::from_str(yaml).expect("ScaledObject YAML");
            so.metadata.namespace = Some(APPS.to_string());
            self.scaled_objects()
                .create(&PostParams::default(), &so)
                .await
                .expect("create ScaledObject")
        }

        pub async fn replicas(&self, name: &str) -> i32 {
            self.deployments()
                .get(name)
                .await
                .expect("get Deployment")
                .spec
                .and_then(|s| s.replicas)
                .unwrap_or(1)
        }

        /// `metadata.resourceVersion` of Deployment `name`: unchanged means not written.
        pub async fn deployment_version(&self, name: &str) -> String {
            self.deployments()
                .get(name)
                .await
                .expect("get Deployment")
                .metadata
                .resource_version
                .unwrap_or_default()
        }

        pub async fn active(&self, name: &str) -> Option<String> {
            let so = self.scaled_objects().get(name).await.ok()?;
            super::condition(&so, "Active").map(|(status, _)| status)
        }
    }

    /// A ScaledObject `name` on Deployment `name` with one `metrics-api` trigger on `url`
    /// (target 5), polled every `poll` seconds, plus `extra` spec lines.
    pub fn object(name: &str, url: &str, poll: u32, extra: &str) -> String {
        format!(
            r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: {name}
spec:
  scaleTargetRef:
    name: {name}
  pollingInterval: {poll}
  maxReplicaCount: 10
{extra}
  triggers:
    - type: metrics-api
      metadata:
        url: "{url}"
        valueLocation: value
        targetValue: "5"
"#
        )
    }
}

/// How long the API server is gone.
const OUTAGE: std::time::Duration = std::time::Duration::from_secs(60);

/// Every request to the API server fails with 503 for 60 real seconds, and every open watch is
/// cut, while one workload is busy at 2 replicas, one idle at 0, and one (`waking`) sees work
/// arrive halfway through. The leader cannot renew its Lease, stops its controllers and loops
/// within the renew deadline (10 s) and keeps retrying; the process stays up and healthy. No
/// `/scale` write is even attempted while the server is gone. When it returns, the operator
/// leads again, relists, and `waking` goes 0 -> 1 within one polling interval (10 s); the busy
/// and idle workloads are not written.
///
/// Real time, not virtual: the leader's renew deadline and retry period, kube's watch backoff
/// (up to 30 s) and the loops' intervals all run on the clock, and which of them has fired by
/// the time the server returns is what this test is about.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_gone_for_60_seconds_writes_nothing_and_resyncs_within_one_poll() {
    use binary::{Cluster, eventually, get_status, object, start_operator};
    use std::time::{Duration, Instant};

    let cluster = Cluster::start("api-down").await;
    let source = Source::start().await;
    let poll = 10;
    for (name, replicas, value) in [("busy", 2, 10.0), ("idle", 0, 0.0), ("waking", 0, 0.0)] {
        cluster.deployment(name, replicas).await;
        source.set(name, value);
        cluster
            .create(&object(
                name,
                &source.url(name),
                poll,
                "  cooldownPeriod: 300",
            ))
            .await;
    }
    let mut operator = start_operator(&cluster, "operator-a").await;
    eventually("every object polled", Duration::from_secs(30), || async {
        cluster.active("busy").await.as_deref() == Some("True")
            && cluster.active("idle").await.as_deref() == Some("False")
            && cluster.active("waking").await.as_deref() == Some("False")
    })
    .await;
    let busy_version = cluster.deployment_version("busy").await;
    let idle_version = cluster.deployment_version("idle").await;

    // Gone.
    cluster.server.reset_request_counts();
    cluster.server.inject_failure(FailureRule::new(503));
    cluster.server.close_watches();
    let gone = Instant::now();
    let mut work_arrived = false;
    while gone.elapsed() < OUTAGE {
        assert!(
            operator.is_running(),
            "the operator exited while the API server was gone"
        );
        assert_eq!(
            get_status(operator.probes, "/healthz").await,
            200,
            "/healthz answers while the API server is gone"
        );
        if !work_arrived && gone.elapsed() >= OUTAGE / 2 {
            source.set("waking", 10.0);
            work_arrived = true;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let during = cluster.server.request_counts();
    // Back.
    cluster.server.clear_failures();
    let back = Instant::now();
    for (verb, resource, n) in during.iter() {
        println!("while gone: {verb:?} {resource}: {n}");
    }
    assert_eq!(
        during.get(Verb::Patch, "deployments/scale")
            + during.get(Verb::Update, "deployments/scale"),
        0,
        "no /scale write while the API server is gone"
    );

    eventually(
        "waking goes 0 -> 1 within one polling interval of the server's return",
        Duration::from_secs(poll.into()),
        || async { cluster.replicas("waking").await == 1 },
    )
    .await;
    println!("resynced and scaled {:?} after the return", back.elapsed());
    // Two more polling intervals: nothing else is written.
    tokio::time::sleep(Duration::from_secs((2 * poll).into())).await;
    assert_eq!(cluster.deployment_version("busy").await, busy_version);
    assert_eq!(cluster.deployment_version("idle").await, idle_version);
    assert_eq!(cluster.replicas("busy").await, 2);
    assert_eq!(cluster.replicas("idle").await, 0);
    assert_eq!(cluster.replicas("waking").await, 1);
    assert!(operator.is_running());
    let status = operator.terminate().await;
    assert!(status.success(), "{status:?}");
}

/// The operator is restarted twice while workloads are busy, once gracefully (SIGTERM) and once
/// killed (SIGKILL, as a crash: the Lease is not released), each time by the same pod identity
/// as a container restart: `one` at 1 replica, `four` at 4 (the HPA's doing), `floor` at 3 with
/// `minReplicaCount: 2`, and `cooling`, whose work ended just before the restarts and which is
/// within its 300 s cooldown, but whose persisted `lastActiveTime` is older than that (the
/// operator died before persisting the end of the work). Across both restarts and several polls of each new process, no
/// Deployment is written at all (same resourceVersion, no `/scale` request): 0 scale-to-zero,
/// 0 replica flaps. No HPA changes either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarting_the_operator_while_workloads_are_busy_writes_no_replicas() {
    use binary::{Cluster, eventually, object, start_operator};
    use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
    use std::time::Duration;

    let cluster = Cluster::start("restart-busy").await;
    let source = Source::start().await;
    let objects = [
        ("one", 1, 3.0, ""),
        ("four", 4, 20.0, ""),
        ("floor", 3, 12.0, "  minReplicaCount: 2"),
        ("cooling", 1, 10.0, "  cooldownPeriod: 300"),
    ];
    for (name, replicas, value, extra) in objects {
        cluster.deployment(name, replicas).await;
        source.set(name, value);
        cluster
            .create(&object(name, &source.url(name), 1, extra))
            .await;
    }
    let mut operator = start_operator(&cluster, "operator-a").await;
    eventually("every object active", Duration::from_secs(30), || async {
        for (name, ..) in objects {
            if cluster.active(name).await.as_deref() != Some("True") {
                return false;
            }
        }
        true
    })
    .await;
    // `cooling`'s work ends: it enters its cooldown.
    source.set("cooling", 0.0);
    eventually(
        "cooling in its cooldown",
        Duration::from_secs(30),
        || async { cluster.active("cooling").await.as_deref() == Some("False") },
    )
    .await;

    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(cluster.server.client(), binary::APPS);
    let mut versions = Vec::new();
    for (name, ..) in objects {
        let hpa = hpas.get(&format!("keda-hpa-{name}")).await.expect("HPA");
        versions.push((
            name,
            cluster.deployment_version(name).await,
            hpa.metadata.resource_version.unwrap_or_default(),
        ));
    }
    cluster.server.reset_request_counts();

    for crash in [false, true] {
        if crash {
            operator.kill().await;
        } else {
            let status = operator.terminate().await;
            assert!(status.success(), "{status:?}");
        }
        // The persisted lastActiveTime of `cooling` is older than its cooldown, as when the
        // operator died before persisting the end of its work: keda-rs persists it on
        // transitions and every 5 minutes only. The cooldown must count from the restart.
        let stale = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(310);
        cluster
            .scaled_objects()
            .patch_status(
                "cooling",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(
                    serde_json::json!({ "status": { "lastActiveTime": stale.to_string() } }),
                ),
            )
            .await
            .expect("an old lastActiveTime");
        let polled: Vec<u64> = objects
            .iter()
            .map(|(name, ..)| source.requests(name))
            .collect();
        operator = start_operator(&cluster, "operator-a").await;
        // Five polls of each object by the new process.
        eventually(
            "the restarted operator polls every object 5 times",
            Duration::from_secs(30),
            || async {
                objects
                    .iter()
                    .zip(&polled)
                    .all(|((name, ..), before)| source.requests(name) >= before + 5)
            },
        )
        .await;
    }

    let counts = cluster.server.request_counts();
    for (verb, resource, n) in counts.iter() {
        println!("across the restarts: {verb:?} {resource}: {n}");
    }
    for verb in [Verb::Patch, Verb::Update] {
        assert_eq!(counts.get(verb, "deployments/scale"), 0, "{verb:?} /scale");
        assert_eq!(counts.get(verb, "deployments"), 0, "{verb:?} Deployment");
    }
    for (name, deployment, hpa) in versions {
        assert_eq!(
            cluster.deployment_version(name).await,
            deployment,
            "{name} not written"
        );
        let now = hpas.get(&format!("keda-hpa-{name}")).await.expect("HPA");
        assert_eq!(
            now.metadata.resource_version.unwrap_or_default(),
            hpa,
            "keda-hpa-{name} not written"
        );
    }
    for (name, replicas, ..) in objects {
        assert_eq!(cluster.replicas(name).await, replicas, "{name}");
    }
    assert_eq!(cluster.active("cooling").await.as_deref(), Some("False"));
    let status = operator.terminate().await;
    assert!(status.success(), "{status:?}");
}
