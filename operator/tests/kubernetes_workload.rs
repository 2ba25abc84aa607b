//! The `kubernetes-workload` trigger through the operator against the in-memory API server:
//! pods created, finished and deleted through the API move the metric and the target
//! (0 -> 1 by the loop, 1 -> N is the HPA's, back to 0 after the cooldown); `groupByNode`; the
//! selector syntax; a bad selector; and the API traffic: one pod watch for the whole operator,
//! no LIST per poll however many objects poll.

mod scenarios;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use keda_api::ScaledObject;
use keda_operator::resolve::WatchScope;
use keda_operator::scalers::ScalerEnv;
use keda_operator::{ControllerConfig, ManualTicks, ScaleLoops, ScaledObjectController};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use memkube::{MemKube, Verb};
use scenarios::{ManualClock, WAIT, eventually, ready};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const NS: &str = "team";

struct World {
    server: MemKube,
    client: Client,
    clock: ManualClock,
    ticks: ManualTicks,
    loops: ScaleLoops,
    shutdown: CancellationToken,
}

impl Drop for World {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// memkube with the CRDs and namespace `team`, and the operator running on it with a manual
/// clock and manual ticks.
fn world() -> World {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .try_init();
    let server = MemKube::new();
    server
        .load_crds_from_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../config/crd"))
        .expect("CRDs load");
    server.create_namespace(NS).expect("namespace");
    let client = server.client();
    let clock = ManualClock::new();
    let ticks = ManualTicks::new();
    let config = ControllerConfig {
        env: ScalerEnv {
            clock: clock.clock(),
            ..ScalerEnv::default()
        },
        ticks: Arc::new(ticks.clone()),
        clock: clock.clock(),
        operator_started_at: Some(clock.now()),
        persist_interval: None,
        watch_scope: WatchScope::Namespaces(vec![NS.to_string()]),
        retry_after_error: Duration::from_millis(200),
        ..ControllerConfig::default()
    };
    let controller = ScaledObjectController::new(client.clone(), config);
    let loops = controller.loops();
    let shutdown = CancellationToken::new();
    let token = shutdown.clone();
    tokio::spawn(async move {
        let _ = controller.run(token).await;
    });
    World {
        server,
        client,
        clock,
        ticks,
        loops,
        shutdown,
    }
}

impl World {
    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), NS)
    }

    fn scaled_objects(&self) -> Api<ScaledObject> {
        Api::namespaced(self.client.clone(), NS)
    }

    async fn deployment(&self, name: &str) {
        let d: Deployment = serde_json::from_value(json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": { "name": name, "namespace": NS },
            "spec": {
                "replicas": 0,
                "selector": { "matchLabels": { "app": name } },
                "template": {
                    "metadata": { "labels": { "app": name } },
                    "spec": { "containers": [{ "name": "app", "image": "registry.k8s.io/pause:3.9" }] }
                }
            }
        }))
        .expect("a Deployment");
        Api::<Deployment>::namespaced(self.client.clone(), NS)
            .create(&PostParams::default(), &d)
            .await
            .expect("create Deployment");
    }

    async fn replicas(&self, name: &str) -> i32 {
        Api::<Deployment>::namespaced(self.client.clone(), NS)
            .get(name)
            .await
            .expect("get Deployment")
            .spec
            .and_then(|s| s.replicas)
            .unwrap_or(1)
    }

    /// A ScaledObject `name` on Deployment `name` with one kubernetes-workload trigger.
    async fn scaled_object(&self, name: &str, metadata: serde_json::Value) -> ScaledObject {
        let so: ScaledObject = serde_json::from_value(json!({
            "apiVersion": "keda.sh/v1alpha1",
            "kind": "ScaledObject",
            "metadata": { "name": name, "namespace": NS },
            "spec": {
                "scaleTargetRef": { "name": name },
                "pollingInterval": 10,
                "cooldownPeriod": 60,
                "maxReplicaCount": 10,
                "triggers": [{ "type": "kubernetes-workload", "metadata": metadata }]
            }
        }))
        .expect("a ScaledObject");
        self.scaled_objects()
            .create(&PostParams::default(), &so)
            .await
            .expect("create ScaledObject")
    }

    /// Creates pod `name` with `labels` on `node` (none: unscheduled), phase Running.
    async fn pod(&self, name: &str, labels: serde_json::Value, node: Option<&str>) {
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": { "name": name, "namespace": NS, "labels": labels },
            "spec": {
                "nodeName": node,
                "containers": [{ "name": "app", "image": "registry.k8s.io/pause:3.9" }]
            }
        }))
        .expect("a Pod");
        self.pods()
            .create(&PostParams::default(), &pod)
            .await
            .expect("create Pod");
        self.phase(name, "Running").await;
    }

    async fn phase(&self, name: &str, phase: &str) {
        self.pods()
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": { "phase": phase } })),
            )
            .await
            .expect("patch Pod status");
    }

    /// Waits until the metric the HPA would be served for `name` is `value`.
    async fn metric_is(&self, name: &str, value: f64) {
        let metric = format!("s0-workload-{NS}");
        eventually(&format!("{metric} of {name} = {value}"), || async {
            match self.loops.metric_values(NS, name, &metric).await {
                Ok(values) if values.len() == 1 && values[0].value == value => Some(()),
                _ => None,
            }
        })
        .await;
    }

    async fn polls_reach(&self, so: &ScaledObject, n: u64) {
        let mut rx = self.loops.polls(&so.uid().expect("uid"));
        tokio::time::timeout(WAIT, rx.wait_for(|p| *p >= n))
            .await
            .unwrap_or_else(|_| panic!("{n} polls of {} did not happen", so.name_any()))
            .expect("poll counter");
    }

    async fn poll_after(&self, so: &ScaledObject, secs: i64) {
        let before = *self.loops.polls(&so.uid().expect("uid")).borrow();
        self.clock.advance(secs);
        self.ticks.tick();
        self.polls_reach(so, before + 1).await;
    }
}

#[tokio::test]
async fn pods_that_appear_scale_the_target_from_zero_and_finished_pods_let_it_return_to_zero() {
    let w = world();
    w.deployment("workers").await;
    let so = w
        .scaled_object(
            "workers",
            json!({ "podSelector": "app=job-runner", "value": "2" }),
        )
        .await;
    w.polls_reach(&so, 1).await;
    w.metric_is("workers", 0.0).await;
    assert_eq!(w.replicas("workers").await, 0);

    for i in 0..5 {
        w.pod(
            &format!("runner-{i}"),
            json!({ "app": "job-runner" }),
            Some("node-1"),
        )
        .await;
    }
    w.pod("web-0", json!({ "app": "web" }), Some("node-1"))
        .await;
    w.metric_is("workers", 5.0).await;
    w.poll_after(&so, 10).await;
    assert_eq!(
        w.replicas("workers").await,
        1,
        "active: 0 -> 1 within one poll"
    );
    // The HPA takes it from 1 to ceil(5 / 2) = 3 on this metric and target.
    let hpa = eventually("the HPA", || async {
        Api::<k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler>::namespaced(
            w.client.clone(),
            NS,
        )
        .get_opt("keda-hpa-workers")
        .await
        .ok()
        .flatten()
    })
    .await;
    let metrics = hpa.spec.and_then(|s| s.metrics).expect("HPA metrics");
    let external = metrics[0].external.as_ref().expect("an External metric");
    assert_eq!(external.metric.name, "s0-workload-team");
    assert_eq!(
        external.target.average_value.as_ref().map(|q| q.0.as_str()),
        Some("2")
    );

    // Three finish, two are deleted: nothing left to count.
    for i in 0..3 {
        w.phase(
            &format!("runner-{i}"),
            if i == 0 { "Failed" } else { "Succeeded" },
        )
        .await;
    }
    w.metric_is("workers", 2.0).await;
    for i in 3..5 {
        w.pods()
            .delete(&format!("runner-{i}"), &DeleteParams::default())
            .await
            .expect("delete Pod");
    }
    w.metric_is("workers", 0.0).await;
    w.poll_after(&so, 10).await;
    assert_eq!(
        w.replicas("workers").await,
        1,
        "the cooldown (60 s) holds it"
    );
    w.poll_after(&so, 61).await;
    assert_eq!(
        w.replicas("workers").await,
        0,
        "after the cooldown: back to 0"
    );
}

#[tokio::test]
async fn group_by_node_counts_the_distinct_nodes_of_the_matching_pods() {
    let w = world();
    w.deployment("cache").await;
    w.scaled_object(
        "cache",
        json!({ "podSelector": "app=web", "value": "1", "groupByNode": "true" }),
    )
    .await;
    w.pod("web-0", json!({ "app": "web" }), Some("node-1"))
        .await;
    w.pod("web-1", json!({ "app": "web" }), Some("node-1"))
        .await;
    w.pod("web-2", json!({ "app": "web" }), Some("node-2"))
        .await;
    w.pod("web-3", json!({ "app": "web" }), None).await; // unscheduled: on no node
    w.pod("db-0", json!({ "app": "db" }), Some("node-3")).await;
    w.metric_is("cache", 2.0).await;
    w.phase("web-2", "Succeeded").await;
    w.metric_is("cache", 1.0).await;
}

#[tokio::test]
async fn the_full_label_selector_syntax_is_understood() {
    let w = world();
    w.pod(
        "a",
        json!({ "app": "api", "tier": "front", "rank": "5" }),
        Some("n1"),
    )
    .await;
    w.pod("b", json!({ "app": "batch", "canary": "" }), Some("n1"))
        .await;
    w.pod(
        "c",
        json!({ "app": "api", "tier": "debug", "rank": "2" }),
        Some("n1"),
    )
    .await;
    w.pod("d", json!({ "other": "x" }), Some("n1")).await;
    // (selector, expected count)
    let rows = [
        ("app=api", 2.0),
        ("app==api,tier!=debug", 1.0),
        ("app in (api, batch)", 3.0),
        ("app notin (api)", 2.0), // b, and d that has no app label
        ("canary", 1.0),
        ("app,!canary", 2.0),
        ("rank>3", 1.0),
        ("rank<3", 1.0),
        ("app=api,tier in (front),rank>4", 1.0),
    ];
    for (i, (selector, _)) in rows.iter().enumerate() {
        let name = format!("sel-{i}");
        w.deployment(&name).await;
        w.scaled_object(&name, json!({ "podSelector": selector, "value": "1" }))
            .await;
    }
    for (i, (selector, expected)) in rows.iter().enumerate() {
        eprintln!("selector {selector:?}");
        w.metric_is(&format!("sel-{i}"), *expected).await;
    }
}

#[tokio::test]
async fn a_bad_selector_is_not_ready_with_a_message_naming_the_parameter() {
    let w = world();
    w.deployment("broken").await;
    w.scaled_object(
        "broken",
        json!({ "podSelector": "app in (web", "value": "1" }),
    )
    .await;
    let (_, _, message) = eventually("Ready=False on broken", || async {
        let so = w.scaled_objects().get("broken").await.ok()?;
        ready(&so).filter(|(status, _, _)| status == "False")
    })
    .await;
    assert!(
        message.contains(
            "trigger 0 (kubernetes-workload): parameter \"podSelector\": \"app in (web\" is not a \
             valid label selector: the set of values of key \"app\" is not closed with \")\""
        ),
        "{message}"
    );
}

#[tokio::test]
async fn twenty_objects_polling_share_one_pod_watch_and_make_no_list_per_poll() {
    let w = world();
    for i in 0..20 {
        w.pod(
            &format!("p-{i}"),
            json!({ "app": format!("app-{}", i % 4) }),
            Some("n1"),
        )
        .await;
    }
    let mut objects = Vec::new();
    for i in 0..20 {
        let name = format!("obj-{i}");
        w.deployment(&name).await;
        let selector = format!("app=app-{}", i % 4);
        objects.push(
            w.scaled_object(&name, json!({ "podSelector": selector, "value": "1" }))
                .await,
        );
    }
    for so in &objects {
        w.metric_is(&so.name_any(), 5.0).await;
    }
    let counts = w.server.request_counts();
    // One watch for the whole operator: its initial LIST and its WATCH, not one per object.
    assert!(
        counts.get(Verb::List, "pods") <= 2,
        "{} pod LISTs for 20 objects",
        counts.get(Verb::List, "pods")
    );
    w.server.reset_request_counts();
    // Steady state: 5 polling intervals of 20 objects, 100 polls, and the HPA's reads.
    for _ in 0..5 {
        let before: Vec<u64> = objects
            .iter()
            .map(|so| *w.loops.polls(&so.uid().expect("uid")).borrow())
            .collect();
        w.clock.advance(10);
        w.ticks.tick();
        for (so, n) in objects.iter().zip(before) {
            w.polls_reach(so, n + 1).await;
        }
    }
    for so in &objects {
        w.metric_is(&so.name_any(), 5.0).await;
    }
    let counts = w.server.request_counts();
    for verb in [Verb::List, Verb::Get, Verb::Watch] {
        assert_eq!(
            counts.get(verb, "pods"),
            0,
            "{verb:?} pods in steady state: the polls must read the shared watch"
        );
    }
}

#[test]
fn the_installed_cluster_role_lets_the_shared_watches_list_and_watch() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/rbac/operator.yaml");
    let text = std::fs::read_to_string(path).expect("config/rbac/operator.yaml");
    let role = text
        .split("\n---")
        .map(|doc| serde_yaml::from_str::<serde_json::Value>(doc).expect("YAML"))
        .find(|doc| doc["kind"] == "ClusterRole" && doc["metadata"]["name"] == "keda-operator")
        .expect("the keda-operator ClusterRole");
    let grants = |group: &str, resource: &str, verb: &str| {
        role["rules"].as_array().expect("rules").iter().any(|rule| {
            let has = |key: &str, want: &str| {
                rule[key]
                    .as_array()
                    .is_some_and(|v| v.iter().any(|x| x == want || x == "*"))
            };
            has("apiGroups", group) && has("resources", resource) && has("verbs", verb)
        })
    };
    for (group, resource) in [("", "pods"), ("discovery.k8s.io", "endpointslices")] {
        for verb in ["list", "watch"] {
            assert!(
                grants(group, resource, verb),
                "config/rbac/operator.yaml does not grant {verb} on {resource}"
            );
        }
    }
}
