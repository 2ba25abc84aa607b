//! KEDA's Events on ScaledObjects that alerting relies on (issue 16), against memkube with the
//! `dial` scaler (`tests/common/dial.rs`).

mod common;
mod scenarios;

#[allow(dead_code)]
#[path = "../../scalers/tests/common/mod.rs"]
mod redis_common;

use common::world::{NS, dial_object, dial_world};
use kube::Api;
use kube::api::ListParams;
use scenarios::{World, eventually};

/// The Events on `name` with `reason`: (type, note).
async fn events(w: &World, name: &str, reason: &str) -> Vec<(String, String)> {
    let api: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(w.client.clone(), NS);
    api.list(&ListParams::default())
        .await
        .expect("list Events")
        .items
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                && e.reason.as_deref() == Some(reason)
        })
        .map(|e| (e.type_.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect()
}

/// A scaler whose read fails gives its ScaledObject KEDA's `KEDAScalerFailed` Warning with the
/// scaler's error as the note, so event-based alerts fire.
#[tokio::test]
async fn a_failing_scaler_read_emits_a_keda_scaler_failed_warning() {
    let Some((_server, w, dials)) = dial_world("keda-scaler-failed").await else {
        return;
    };
    w.deployment("flaky", 0).await;
    dials.fail_on_read("flaky", true);
    let op = w.start_operator();
    let so = w.create(&dial_object("flaky", 3)).await;
    w.polls_reach(&op, &so, 1).await;
    let (kind, note) = eventually("a KEDAScalerFailed Event", || async {
        events(&w, "flaky", "KEDAScalerFailed")
            .await
            .into_iter()
            .next()
    })
    .await;
    assert_eq!(kind, "Warning");
    assert!(note.contains("dial flaky is down"), "{note}");
    op.stop().await;
}
