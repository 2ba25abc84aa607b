//! `external` and `external-push` through the operator on memkube, against the tests' own gRPC
//! external scaler (`scalers/tests/common/external.rs`): a pushed `true` scales a Deployment
//! from 0 to 1 with no poll due (the ticks are manual and never fire); the HPA's 1 -> N comes
//! from `GetMetrics` through the operator's metric service (what the metrics-apiserver asks);
//! a server that disappears and returns is reconnected with KEDA's backoff while fallback
//! serves the HPA; an unreachable or badly written address is `Ready=False` naming the trigger
//! and the parameter, and recovers.

mod common;
mod scenarios;

#[allow(dead_code)]
#[path = "../../scalers/tests/common/mod.rs"]
mod redis_common;

#[path = "../../scalers/tests/common/external.rs"]
mod external_server;

use std::sync::Arc;
use std::time::{Duration, Instant};

use external_server::{ExternalServer, spec};
use http::{Method, StatusCode};
use http_body_util::BodyExt;
use k8s_openapi::api::apps::v1::Deployment;
use keda_api::external_metrics::{MetricValuesResponse, metric_values_path};
use keda_operator::metrics_service::{MetricsService, MetricsServiceOptions};
use kube::Api;
use kube::api::{Patch, PatchParams};
use memkube::MemKube;
use scenarios::{Operator, World, condition, eventually, hpa_exists, ready};

async fn world(test: &str) -> Option<(MemKube, World)> {
    common::world::world(test, keda_scalers::Registry::builtin()).await
}

/// A ScaledObject `name` on Deployment `name` with one trigger of `trigger_type` on `address`,
/// polled every 300 s (the manual ticks never fire unless a test ticks them).
fn external_object(name: &str, trigger_type: &str, address: &str, spec: &str) -> String {
    format!(
        r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: {name}
spec:
  scaleTargetRef:
    name: {name}
  pollingInterval: 300
  cooldownPeriod: 60
{spec}
  triggers:
    - type: {trigger_type}
      metadata:
        scalerAddress: "{address}"
        queueName: {name}
"#
    )
}

async fn wait_replicas(w: &World, name: &str, expected: i32) {
    eventually(&format!("{name} at {expected} replicas"), || async {
        (w.replicas(name).await == expected).then_some(())
    })
    .await;
}

/// What the metrics-apiserver gets from the operator for `metric` of `name`, as the HPA asks
/// it (the metrics API lower-cases metric names): the summed value.
async fn served(op: &Operator, namespace: &str, name: &str, metric: &str) -> Option<f64> {
    let service = MetricsService::new(Arc::new(op.loops.clone()), MetricsServiceOptions::default());
    let response = service
        .respond(
            &Method::GET,
            &metric_values_path(namespace, name, &metric.to_ascii_lowercase()),
        )
        .await;
    if response.status() != StatusCode::OK {
        return None;
    }
    let body = response.into_body().collect().await.ok()?.to_bytes();
    let parsed: MetricValuesResponse = serde_json::from_slice(&body).expect("the protocol");
    Some(
        parsed
            .items
            .iter()
            .filter_map(|i| keda_operator::scale_loop::quantity_value(&i.value.0))
            .sum(),
    )
}

/// The HPA's step, once (memkube runs no HPA controller): `ceil(value / averageValue)` within
/// the HPA's bounds, from the value the metric service serves, written through `/scale`.
async fn act_as_hpa(w: &World, op: &Operator, name: &str) -> i32 {
    let hpa = hpa_exists(w, &format!("keda-hpa-{name}")).await;
    let spec = hpa.spec.expect("HPA spec");
    let external = spec.metrics.as_ref().expect("metrics")[0]
        .external
        .as_ref()
        .expect("an External metric");
    let target = external
        .target
        .average_value
        .as_ref()
        .and_then(|q| keda_operator::scale_loop::quantity_value(&q.0))
        .expect("an AverageValue target");
    let total = served(op, &w.namespace, name, &external.metric.name)
        .await
        .expect("the HPA gets a value");
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

/// KEDA's `external_push_scaler` e2e in our words: at 0 replicas and inactive, nothing
/// happens however active the server says it is, because no poll is due (pollingInterval
/// 300 s; the ticks are manual and this test never ticks). The server pushes `true` on
/// `StreamIsActive`: the loop wakes, polls once and scales 0 -> 1 at once.
#[tokio::test]
async fn a_pushed_true_scales_from_zero_without_waiting_for_a_poll() {
    let Some((_server, w)) = world("external-push from zero").await else {
        return;
    };
    let scaler = ExternalServer::plain(vec![spec("queue-depth", 5)]).await;
    scaler.set_value("queue-depth", 0, 0.0);
    scaler.set_active(false);
    w.deployment("pushed", 0).await;
    let op = w.start_operator();
    let so = w
        .create(&external_object(
            "pushed",
            "external-push",
            &scaler.address(),
            "  minReplicaCount: 0\n  maxReplicaCount: 10",
        ))
        .await;
    w.polls_reach(&op, &so, 1).await;
    external_server::eventually("the StreamIsActive stream", || scaler.open_streams() == 1).await;
    let seen = scaler.last_seen();
    assert_eq!(
        (seen.name.as_str(), seen.namespace.as_str()),
        ("pushed", "team")
    );
    assert_eq!(
        seen.scaler_metadata.get("queueName").map(String::as_str),
        Some("pushed")
    );
    assert_eq!(w.replicas("pushed").await, 0);

    // The source becomes active; with no poll due, nothing moves.
    scaler.set_value("queue-depth", 3, 0.0);
    scaler.set_active(true);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(w.polls(&op, &so), 1, "no poll without a tick or a push");
    assert_eq!(w.replicas("pushed").await, 0);

    // The push wakes the loop at once.
    let pushed = Instant::now();
    assert_eq!(scaler.push(true), 1);
    wait_replicas(&w, "pushed", 1).await;
    assert!(
        pushed.elapsed() < Duration::from_secs(5),
        "0 -> 1 took {:?}",
        pushed.elapsed()
    );
    assert_eq!(w.polls(&op, &so), 2, "exactly one poll, the pushed one");
    eventually("Active=True", || async {
        (condition(&w.get("pushed").await, "Active")
            == Some(("True".into(), "ScalerActive".into())))
        .then_some(())
    })
    .await;
    // A pushed `false` changes nothing: deactivation is by polling only.
    scaler.push(false);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(w.polls(&op, &so), 2);
    assert_eq!(w.replicas("pushed").await, 1);
    op.stop().await;
}

/// 1 -> N is the HPA's: the operator serves `GetMetrics`' value for `s0-<metricName>` (the
/// name exactly as the server returned it, asked lower-cased as the metrics API does) and the
/// HPA's target is `targetSize`; the HPA's step takes 1 replica to ceil(23 / 5) = 5.
#[tokio::test]
async fn the_hpa_scales_one_to_n_on_get_metrics_through_the_metric_service() {
    let Some((_server, w)) = world("external 1 -> N").await else {
        return;
    };
    let scaler = ExternalServer::plain(vec![spec("Queue.Depth", 5)]).await;
    scaler.set_value("Queue.Depth", 1, 0.0);
    scaler.set_active(true);
    w.deployment("orders", 0).await;
    let op = w.start_operator();
    let so = w
        .create(&external_object(
            "orders",
            "external",
            &scaler.address(),
            "  minReplicaCount: 0\n  maxReplicaCount: 10",
        ))
        .await;
    w.polls_reach(&op, &so, 1).await;
    wait_replicas(&w, "orders", 1).await;
    let hpa = hpa_exists(&w, "keda-hpa-orders").await;
    let metrics = hpa.spec.expect("spec").metrics.expect("metrics");
    let external = metrics[0].external.as_ref().expect("External");
    assert_eq!(external.metric.name, "s0-Queue.Depth", "not normalized");
    assert_eq!(
        external.target.average_value.as_ref().map(|q| q.0.as_str()),
        Some("5")
    );
    assert_eq!(
        w.get("orders")
            .await
            .status
            .and_then(|s| s.external_metric_names),
        Some(vec!["s0-Queue.Depth".to_string()])
    );

    scaler.set_value("Queue.Depth", 0, 23.0);
    assert_eq!(act_as_hpa(&w, &op, "orders").await, 5, "ceil(23 / 5)");
    assert_eq!(w.replicas("orders").await, 5);
    assert_eq!(
        scaler
            .state
            .asked
            .lock()
            .expect("asked")
            .last()
            .map(String::as_str),
        Some("Queue.Depth"),
        "the server is asked without the s0- prefix"
    );
    scaler.set_value("Queue.Depth", 41, 0.0);
    assert_eq!(act_as_hpa(&w, &op, "orders").await, 9, "ceil(41 / 5)");
    op.stop().await;
}

/// The server goes away while a workload runs: polls fail, and past `failureThreshold` the HPA
/// is served `fallback.replicas x target`; the push stream is retried with the backoff. The
/// server returns: the stream is reopened (after at least KEDA's first 2 s), a push wakes the
/// loop again, and the first poll reads the server again and ends the fallback.
#[tokio::test]
async fn a_lost_server_is_reconnected_with_the_backoff_while_fallback_serves_the_hpa() {
    let Some((_server, w)) = world("external-push lost server").await else {
        return;
    };
    let mut scaler = ExternalServer::plain(vec![spec("queue-depth", 5)]).await;
    scaler.set_value("queue-depth", 10, 0.0);
    scaler.set_active(true);
    w.deployment("lost", 2).await;
    let op = w.start_operator();
    let so = w
        .create(&external_object(
            "lost",
            "external-push",
            &scaler.address(),
            "  minReplicaCount: 1\n  maxReplicaCount: 10\n  fallback:\n    failureThreshold: 1\n    replicas: 6",
        ))
        .await;
    w.polls_reach(&op, &so, 1).await;
    external_server::eventually("the StreamIsActive stream", || scaler.open_streams() == 1).await;
    assert_eq!(
        served(&op, "team", "lost", "s0-queue-depth").await,
        Some(10.0)
    );
    assert_eq!(act_as_hpa(&w, &op, "lost").await, 2, "10 / 5");

    scaler.stop().await;
    let gone = Instant::now();
    // Failure 1 is within the threshold; failure 2 exceeds it.
    w.poll_after(&op, &so, 300).await;
    w.poll_after(&op, &so, 300).await;
    assert_eq!(
        served(&op, "team", "lost", "s0-queue-depth").await,
        Some(30.0),
        "fallback.replicas (6) x target (5)"
    );
    assert_eq!(act_as_hpa(&w, &op, "lost").await, 6);
    let status = eventually("Fallback=True", || async {
        let so = w.get("lost").await;
        (condition(&so, "Fallback") == Some(("True".into(), "FallbackExists".into()))).then_some(so)
    })
    .await;
    let health = status
        .status
        .and_then(|s| s.health)
        .and_then(|h| h.get("s0-queue-depth").cloned())
        .expect("health of the metric");
    assert_eq!(health.status.as_deref(), Some("Failing"));

    // Back on the same port: the stream is reopened by the backoff, not by a poll.
    scaler.start().await;
    let polls = w.polls(&op, &so);
    external_server::eventually_within("the stream to reopen", Duration::from_secs(20), || {
        scaler.open_streams() == 1
    })
    .await;
    assert!(
        gone.elapsed() >= Duration::from_millis(1900),
        "reopened after the backoff: {:?}",
        gone.elapsed()
    );
    assert_eq!(w.polls(&op, &so), polls, "no poll reopened it");
    scaler.set_value("queue-depth", 14, 0.0);
    scaler.push(true);
    w.polls_reach(&op, &so, polls + 1).await;
    eventually("Fallback=False", || async {
        (condition(&w.get("lost").await, "Fallback")
            == Some(("False".into(), "NoFallbackFound".into())))
        .then_some(())
    })
    .await;
    assert_eq!(
        served(&op, "team", "lost", "s0-queue-depth").await,
        Some(14.0)
    );
    assert_eq!(act_as_hpa(&w, &op, "lost").await, 3, "ceil(14 / 5)");
    op.stop().await;
}

/// Bad input through the operator: a `scalerAddress` without a port and a server that cannot
/// be reached are `Ready=False` with a message naming the trigger and the parameter or
/// address; never a panic. Once the server listens, the retried reconcile builds the scaler
/// and the object becomes Ready.
#[tokio::test]
async fn bad_or_unreachable_addresses_are_ready_false_and_recover() {
    let Some((_server, w)) = world("external bad input").await else {
        return;
    };
    w.deployment("no-port", 0).await;
    w.deployment("down", 0).await;
    let mut scaler = ExternalServer::plain(vec![spec("m", 1)]).await;
    scaler.set_value("m", 1, 0.0);
    scaler.set_active(true);
    scaler.stop().await;
    let op = w.start_operator();
    w.create(&external_object(
        "no-port",
        "external",
        "scaler.team.svc",
        "",
    ))
    .await;
    w.create(&external_object("down", "external", &scaler.address(), ""))
        .await;
    for (name, expected) in [
        (
            "no-port",
            "trigger 0 (external): parameter \"scalerAddress\": \"scaler.team.svc\" is not host:port"
                .to_string(),
        ),
        (
            "down",
            format!(
                "trigger 0 (external): connecting to external scaler at {} (GetMetricSpec) failed",
                scaler.address()
            ),
        ),
    ] {
        let (_, reason, message) = eventually(&format!("Ready=False on {name}"), || async {
            ready(&w.get(name).await).filter(|(s, _, _)| s == "False")
        })
        .await;
        assert_eq!(reason, "ScaledObjectCheckFailed", "{name}");
        assert!(message.contains(&expected), "{name}: {message:?} should contain {expected:?}");
    }

    scaler.start().await;
    eventually("Ready=True once the server listens", || async {
        ready(&w.get("down").await).filter(|(s, _, _)| s == "True")
    })
    .await;
    wait_replicas(&w, "down", 1).await;
    op.stop().await;
}
