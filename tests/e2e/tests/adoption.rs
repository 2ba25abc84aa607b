//! Issue 29's migration on a real API server: an HPA as KEDA leaves it is adopted with its UID
//! and the labels other tools added. The objects are those of `operator/tests/adoption.rs`
//! (`operator/tests/common/keda_left.rs`: KEDA's finalizer, status, HPA labels, owner
//! reference and spec at KEDA 8b4f083); the controller runs in process against the cluster
//! named by KEDA_RS_E2E_KUBECONFIG with the local Redis, in a namespace of its own. The
//! cluster's HPA controller runs too: it writes the HPA's status (so its resourceVersion moves
//! and is not compared) and may fail to read the metric when no metrics APIService reaches this
//! machine; either way the target stays at 3 replicas (12 items, target 5).

#[path = "../../../operator/tests/scenarios/mod.rs"]
mod scenarios;

#[path = "../../../operator/tests/common/keda_left.rs"]
mod keda_left;

use jiff::SignedDuration;
use keda_e2e::cluster_client;
use keda_left::{
    Fixture, KEDA_FINALIZER, keda_conditions, keda_time, keeps_keda_metadata_and_status, same_hpa,
};
use kube::ResourceExt;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

/// A label a policy controller put on KEDA's HPA.
const FOREIGN_LABEL: &str = "policy.example.com/owner";

#[tokio::test]
#[ignore = "end-to-end: needs a real cluster named by KEDA_RS_E2E_KUBECONFIG"]
async fn an_hpa_keda_left_is_adopted_with_its_uid_and_foreign_labels_on_a_real_cluster() {
    let client = cluster_client().await.expect("a cluster to test against");
    let name = format!("keda-rs-e2e-adoption-{}", std::process::id());
    let namespaces = keda_e2e::scenario_namespace(&client, &name).await;
    let redis = keda_e2e::local_redis().await;
    let w = scenarios::World::new(client, &name, redis);
    let list = format!("keda-rs-e2e-adoption-{}", std::process::id());
    let f = Fixture {
        name: "orders",
        list: &list,
        cooldown: 300,
        annotations: json!({}),
    };
    w.deployment("orders", 3).await;
    w.drain(&list).await;
    w.push(&list, 12).await;
    let active_at = w.clock.now() - SignedDuration::from_secs(5);
    let so = f
        .keda_scaled_object(
            &w,
            json!({
                "lastActiveTime": keda_time(active_at),
                "conditions": keda_conditions(true, false),
            }),
        )
        .await;
    let hpa = f.keda_hpa(&w, &so, 3).await;
    let uid = hpa.uid().expect("HPA uid");
    w.hpas()
        .patch(
            &f.hpa_name(),
            &PatchParams::default(),
            &Patch::Merge(&json!({ "metadata": { "labels": { FOREIGN_LABEL: "platform" } } })),
        )
        .await
        .expect("a foreign label on KEDA's HPA");

    let op = w.start_operator();
    w.polls_reach(&op, &so, 1).await;
    scenarios::eventually("the version label is keda-rs's", || async {
        let hpa = same_hpa(&w, &f.hpa_name(), &uid).await;
        (hpa.labels()
            .get("app.kubernetes.io/version")
            .map(String::as_str)
            == Some(env!("CARGO_PKG_VERSION")))
        .then_some(())
    })
    .await;
    for _ in 0..4 {
        w.poll_after(&op, &so, 10).await;
        assert_eq!(w.replicas("orders").await, 3, "the replicas changed");
        let hpa = same_hpa(&w, &f.hpa_name(), &uid).await;
        assert_eq!(
            hpa.labels().get(FOREIGN_LABEL).map(String::as_str),
            Some("platform"),
            "the foreign label was dropped"
        );
        assert_eq!(
            serde_json::to_value(&hpa.spec).expect("json"),
            f.hpa_spec(),
            "the HPA spec"
        );
    }
    let adopted = w.get("orders").await;
    keeps_keda_metadata_and_status(&adopted);
    assert_eq!(adopted.finalizers(), [KEDA_FINALIZER]);
    assert_eq!(
        scenarios::condition(&adopted, "Ready"),
        Some(("True".into(), "ScaledObjectReady".into()))
    );
    // Deleted while the operator runs, so its finalizer does not hold the namespace.
    w.delete("orders").await;
    scenarios::eventually("the ScaledObject is gone", || async {
        w.scaled_objects()
            .get_opt("orders")
            .await
            .ok()
            .flatten()
            .is_none()
            .then_some(())
    })
    .await;
    op.stop().await;
    w.drain(&list).await;
    let _ = namespaces.delete(&name, &DeleteParams::default()).await;
}
