//! Defence in depth (issue 14): a panic while reconciling or polling one ScaledObject makes that
//! object `Ready=False InternalError` (naming the object and trigger) and counts in
//! `keda_internal_panics_total`; the operator, and every other object's scaling, go on.
//!
//! The panics come from `dial`, a custom scaler registered next to the built-in ones
//! (`tests/common/dial.rs`), told to panic in its factory or its metric read.

mod common;
mod scenarios;

#[allow(dead_code)]
#[path = "../../scalers/tests/common/mod.rs"]
mod redis_common;

use std::sync::Arc;

use common::dial::Dials;
use common::world::{NS, becomes_ready, dial_object, dial_world, poll_all};
use http::{Method, StatusCode};
use http_body_util::BodyExt;
use keda_api::ScaledObject;
use keda_api::external_metrics::metric_values_path;
use keda_operator::metrics_service::{MetricsService, MetricsServiceOptions};
use scenarios::{Operator, World, eventually, ready};

/// `keda_internal_panics_total` of one component and ScaledObject.
fn panics(w: &World, component: &str, name: &str) -> u64 {
    let series = format!(
        r#"keda_internal_panics_total{{component="{component}",namespace="{NS}",type="scaledobject",resource="{name}"}} "#
    );
    w.metrics
        .encode()
        .lines()
        .find_map(|l| l.strip_prefix(&series).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// Waits for `Ready=False InternalError` on `name` and returns the message.
async fn internal_error(w: &World, name: &str) -> String {
    eventually(&format!("Ready=False InternalError on {name}"), || async {
        ready(&w.get(name).await)
            .filter(|(status, reason, _)| status == "False" && reason == "InternalError")
            .map(|(_, _, message)| message)
    })
    .await
}

/// The other object goes 0 -> 1 -> 0 with its dial.
async fn scales_up_and_down(w: &World, op: &Operator, steady: &ScaledObject, dials: &Dials) {
    let name = steady.metadata.name.as_deref().expect("name");
    dials.set(name, 10.0);
    poll_all(w, op, &[steady], 10).await;
    assert_eq!(w.replicas(name).await, 1, "{name} goes 0 -> 1");
    dials.set(name, 0.0);
    poll_all(w, op, &[steady], 11).await;
    assert_eq!(w.replicas(name).await, 0, "{name} goes 1 -> 0");
}

#[tokio::test]
async fn a_scaler_panicking_on_read_fails_only_its_object_which_recovers_when_it_stops() {
    let Some((_server, w, dials)) = dial_world("isolation-read").await else {
        return;
    };
    w.deployment("steady", 0).await;
    w.deployment("broken", 0).await;
    dials.panic_on_read("broken", true);
    let op = w.start_operator();
    let steady = w.create(&dial_object("steady", 1)).await;
    let broken = w.create(&dial_object("broken", 1)).await;
    w.polls_reach(&op, &broken, 1).await;

    let message = internal_error(&w, "broken").await;
    for part in [
        "internal error",
        "ScaledObject team/broken",
        "trigger 0 (dial)",
        "dial broken: the read was told to panic",
    ] {
        assert!(message.contains(part), "{message:?} should say {part:?}");
    }
    assert!(panics(&w, "scaler", "broken") >= 1);

    // The other object scales, the panicking one keeps its schedule: one poll per tick.
    scales_up_and_down(&w, &op, &steady, &dials).await;
    let reads = dials.reads("broken");
    poll_all(&w, &op, &[&steady, &broken], 10).await;
    assert_eq!(
        dials.reads("broken"),
        reads + 1,
        "the panicking loop polls on"
    );
    assert!(op.loops.is_running(NS, "broken").await);
    assert_eq!(w.replicas("broken").await, 0);

    // A read of the metric service gets an error naming the trigger; nothing else happens.
    let before = panics(&w, "scaler", "broken");
    let service = MetricsService::new(Arc::new(op.loops.clone()), MetricsServiceOptions::default());
    let answer = service
        .respond(
            &Method::GET,
            &metric_values_path(NS, "broken", "s0-dial-broken"),
        )
        .await;
    assert_eq!(answer.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let body = answer.into_body().collect().await.expect("body").to_bytes();
    let body = String::from_utf8_lossy(&body);
    assert!(
        body.contains("internal error") && body.contains("trigger 0 (dial)"),
        "{body}"
    );
    assert_eq!(panics(&w, "scaler", "broken"), before + 1);
    let steady_read = service
        .respond(
            &Method::GET,
            &metric_values_path(NS, "steady", "s0-dial-steady"),
        )
        .await;
    assert_eq!(steady_read.status(), StatusCode::OK);

    // Fixed: the next poll makes it Ready and it scales like any other.
    dials.panic_on_read("broken", false);
    dials.set("broken", 10.0);
    poll_all(&w, &op, &[&broken], 10).await;
    becomes_ready(&w, "broken").await;
    assert_eq!(w.replicas("broken").await, 1);
    op.stop().await;
}

#[tokio::test]
async fn a_scaler_factory_panicking_in_reconcile_fails_only_its_object() {
    let Some((_server, w, dials)) = dial_world("isolation-build").await else {
        return;
    };
    w.deployment("steady", 0).await;
    w.deployment("broken", 0).await;
    dials.panic_on_build("broken", true);
    let op = w.start_operator();
    let steady = w.create(&dial_object("steady", 1)).await;
    w.create(&dial_object("broken", 1)).await;

    let message = internal_error(&w, "broken").await;
    for part in [
        "internal error while building the scaler of ScaledObject team/broken",
        "trigger 0 (dial)",
        "dial broken: the factory was told to panic",
    ] {
        assert!(message.contains(part), "{message:?} should say {part:?}");
    }
    assert!(panics(&w, "scaler", "broken") >= 1);
    assert!(!op.loops.is_running(NS, "broken").await);
    w.polls_reach(&op, &steady, 1).await;
    scales_up_and_down(&w, &op, &steady, &dials).await;

    // The reconcile is retried; once the factory works the loop starts and Ready comes back.
    dials.panic_on_build("broken", false);
    becomes_ready(&w, "broken").await;
    assert!(op.loops.is_running(NS, "broken").await);
    op.stop().await;
}

#[tokio::test]
async fn a_push_task_panicking_fails_only_its_object_and_its_loop_polls_on() {
    let Some((_server, w, dials)) = dial_world("isolation-push").await else {
        return;
    };
    w.deployment("steady", 0).await;
    w.deployment("broken", 0).await;
    dials.panic_in_push("broken", true);
    let op = w.start_operator();
    let steady = w.create(&dial_object("steady", 1)).await;
    let broken = w.create(&dial_object("broken", 1)).await;

    let message = internal_error(&w, "broken").await;
    for part in [
        "internal error while running the push scaler of ScaledObject team/broken",
        "trigger 0 (dial)",
        "dial broken: the push task was told to panic",
    ] {
        assert!(message.contains(part), "{message:?} should say {part:?}");
    }
    assert_eq!(panics(&w, "scaler", "broken"), 1);

    // The other object scales; the broken one's loop polls on and stays not Ready: its push
    // side is gone until the loop restarts.
    w.polls_reach(&op, &steady, 1).await;
    scales_up_and_down(&w, &op, &steady, &dials).await;
    dials.set("broken", 10.0);
    poll_all(&w, &op, &[&steady, &broken], 10).await;
    assert!(op.loops.is_running(NS, "broken").await);
    assert_eq!(w.replicas("broken").await, 1, "its pull side still scales");
    assert_eq!(internal_error(&w, "broken").await, message);
    assert_eq!(
        panics(&w, "scaler", "broken"),
        1,
        "the push task is not rerun"
    );
    op.stop().await;
}
