//! The ScaledObject scenarios of `operator/tests` against a real cluster: the controller runs
//! in process (manual clock and ticks) against the cluster named by KEDA_RS_E2E_KUBECONFIG,
//! with the local Redis. The keda.sh CRDs must be installed (the `crds` test installs them).
//! Each scenario runs in its own namespace, deleted at the end.

#[path = "../../../operator/tests/scenarios/mod.rs"]
mod scenarios;

use k8s_openapi::api::core::v1::Namespace;
use keda_e2e::cluster_client;
use kube::api::{Api, DeleteParams, GroupVersionKind, PostParams};
use scenarios::World;

const REDIS: &str = "redis://127.0.0.1:6379/";

struct Cluster {
    world: World,
    namespaces: Api<Namespace>,
}

impl Cluster {
    async fn new(scenario: &str) -> Cluster {
        let client = cluster_client().await.expect("a cluster to test against");
        let gvk = GroupVersionKind::gvk("keda.sh", "v1alpha1", "ScaledObject");
        kube::discovery::pinned_kind(&client, &gvk)
            .await
            .expect("the keda.sh CRDs are installed (run the crds test or apply config/crd)");
        let name = format!("keda-rs-e2e-{scenario}-{}", std::process::id());
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": name }
        }))
        .expect("a namespace");
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .expect("namespace created");
        let redis = redis::Client::open(REDIS)
            .expect("a Redis URL")
            .get_multiplexed_async_connection()
            .await
            .expect("the local Redis at 127.0.0.1:6379");
        Cluster {
            world: World::new(client, &name, redis),
            namespaces,
        }
    }

    async fn cleanup(self) {
        let _ = self
            .namespaces
            .delete(&self.world.namespace, &DeleteParams::default())
            .await;
    }
}

fn list(scenario: &str) -> String {
    format!("keda-rs-e2e-{scenario}-{}", std::process::id())
}

#[tokio::test]
#[ignore = "end-to-end: needs a real cluster named by KEDA_RS_E2E_KUBECONFIG"]
async fn a_list_below_activation_stays_at_zero_then_activates_and_cools_down_on_a_real_cluster() {
    let c = Cluster::new("activation").await;
    scenarios::activation_and_cooldown(&c.world, &list("activation")).await;
    c.cleanup().await;
}

#[tokio::test]
#[ignore = "end-to-end: needs a real cluster named by KEDA_RS_E2E_KUBECONFIG"]
async fn paused_replicas_hold_the_count_above_max_and_resume_on_a_real_cluster() {
    let c = Cluster::new("paused").await;
    scenarios::paused_replicas(&c.world, &list("paused")).await;
    c.cleanup().await;
}

#[tokio::test]
#[ignore = "end-to-end: needs a real cluster named by KEDA_RS_E2E_KUBECONFIG"]
async fn fallback_replaces_a_failing_metric_on_a_real_cluster() {
    let c = Cluster::new("fallback").await;
    scenarios::fallback(&c.world, &list("fallback")).await;
    c.cleanup().await;
}

#[tokio::test]
#[ignore = "end-to-end: needs a real cluster named by KEDA_RS_E2E_KUBECONFIG"]
async fn a_restart_mid_cooldown_does_not_scale_to_zero_early_on_a_real_cluster() {
    let c = Cluster::new("restart").await;
    scenarios::restart_mid_cooldown(&c.world, &list("restart")).await;
    c.cleanup().await;
}

#[tokio::test]
#[ignore = "end-to-end: needs a real cluster named by KEDA_RS_E2E_KUBECONFIG"]
async fn a_deleted_object_restores_replicas_on_a_real_cluster() {
    let c = Cluster::new("restore").await;
    scenarios::deletion_restores(&c.world, &list("restore")).await;
    c.cleanup().await;
}

#[tokio::test]
#[ignore = "end-to-end: needs a real cluster named by KEDA_RS_E2E_KUBECONFIG"]
async fn broken_objects_are_not_ready_on_a_real_cluster() {
    let c = Cluster::new("broken").await;
    scenarios::broken_objects(&c.world).await;
    c.cleanup().await;
}

/// The cluster's HPA controller writes `ScalingActive` (it syncs every 15 s); with the target at
/// 0 replicas it says `False/ScalingDisabled`, which the scale loop mirrors as
/// `HPAActive=True/ScalingDisabled` (keda-rs owns 0 <-> 1, so that is healthy).
#[tokio::test]
#[ignore = "end-to-end: needs a real cluster named by KEDA_RS_E2E_KUBECONFIG"]
async fn hpa_active_mirrors_the_clusters_hpa_controller_on_a_real_cluster() {
    let c = Cluster::new("hpa-active").await;
    let w = &c.world;
    w.deployment("mirror", 0).await;
    let op = w.start_operator();
    let so = w
        .create(&scenarios::redis_object(
            "mirror",
            "mirror",
            &list("hpa-active"),
            "",
            "",
        ))
        .await;
    scenarios::hpa_exists(w, "keda-hpa-mirror").await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    let mirrored = loop {
        w.poll_after(&op, &so, 10).await;
        if let Some(found) = scenarios::condition(&w.get("mirror").await, "HPAActive") {
            break found;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the HPA controller reported no ScalingActive within 90 s"
        );
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    };
    assert_eq!(
        mirrored,
        ("True".to_string(), "ScalingDisabled".to_string())
    );
    op.stop().await;
    c.cleanup().await;
}

/// The HPA controller cannot read the object's metric (the trigger's key is not a list, so every
/// read fails and no fallback stands in): it writes `ScalingActive=False/FailedGetExternalMetric`,
/// which keda-rs passes through as KEDA's `getHPAHealth` does: `HPAActive=False` with the HPA's
/// own reason and `HPA is not actively scaling: <HPA message>` (issue 29, row 5). The target has
/// one replica, so the HPA controller does read metrics (at 0 it would say `ScalingDisabled`).
/// Whether or not an external metrics APIService is registered on the cluster, the read fails.
#[tokio::test]
#[ignore = "end-to-end: needs a real cluster named by KEDA_RS_E2E_KUBECONFIG"]
async fn hpa_active_passes_failed_get_external_metric_through_on_a_real_cluster() {
    let c = Cluster::new("hpa-unread").await;
    let w = &c.world;
    let key = list("hpa-unread");
    w.break_key(&key).await;
    w.deployment("unread", 1).await;
    let op = w.start_operator();
    let so = w
        .create(&scenarios::redis_object(
            "unread",
            "unread",
            &key,
            "  minReplicaCount: 1",
            "",
        ))
        .await;
    scenarios::hpa_exists(w, "keda-hpa-unread").await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let (status, reason, message) = loop {
        w.poll_after(&op, &so, 10).await;
        let found = w.get("unread").await;
        let condition = found
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "HPAActive").cloned());
        if let Some(c) = condition.filter(|c| c.status == "False") {
            break (
                c.status,
                c.reason.unwrap_or_default(),
                c.message.unwrap_or_default(),
            );
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the HPA controller reported no failing ScalingActive within 120 s"
        );
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    };
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "FailedGetExternalMetric")
    );
    assert!(
        message.starts_with("HPA is not actively scaling: "),
        "KEDA's message: {message}"
    );
    assert_eq!(w.replicas("unread").await, 1, "nothing scaled it");
    w.drain(&key).await;
    op.stop().await;
    c.cleanup().await;
}
