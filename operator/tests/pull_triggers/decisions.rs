//! The scale decision's features over pull triggers: paused and idle replicas, fallback,
//! scalingModifiers, and the series their polls record.

use super::*;

/// KEDA's `pause_scaledobject` e2e: `paused-replicas: N` holds the target at N while the
/// metric moves (and nobody asks the metrics API); a new N is applied; removing the annotation
/// gives scaling back to the metric.
#[tokio::test]
async fn paused_replicas_hold_the_target_while_the_metric_changes() {
    let Some((_server, w)) = world("metrics-api paused").await else {
        return;
    };
    let api = MetricsApi::start(0.0).await;
    w.deployment("paused", 1).await;
    let op = w.start_operator();
    w.create(&metrics_api_object(
        "paused",
        &api.url(),
        "  minReplicaCount: 0\n  maxReplicaCount: 10",
        "autoscaling.keda.sh/paused-replicas: \"3\"",
    ))
    .await;
    wait_replicas(&w, "paused", 3).await;
    let status = w.get("paused").await;
    assert_eq!(
        status.status.as_ref().and_then(|s| s.paused_replica_count),
        Some(3)
    );
    assert_eq!(
        condition(&status, "Paused"),
        Some(("True".into(), "ScaledObjectPaused".into()))
    );

    // The metric goes far above the activation threshold: a minute of ticks changes nothing.
    api.set(50.0);
    for _ in 0..6 {
        w.clock.advance(10);
        w.ticks.tick();
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(w.replicas("paused").await, 3, "held at paused-replicas");
    assert_eq!(api.requests(), 0, "a paused object is not polled");
    assert!(
        w.hpas()
            .get_opt("keda-hpa-paused")
            .await
            .expect("get")
            .is_none(),
        "no HPA while paused"
    );

    // A new count is applied at once.
    w.annotate("paused", "autoscaling.keda.sh/paused-replicas", Some("1"))
        .await;
    wait_replicas(&w, "paused", 1).await;

    // Unpaused: the loop and the HPA come back, and the metric counts again.
    w.annotate("paused", "autoscaling.keda.sh/paused-replicas", None)
        .await;
    hpa_exists(&w, "keda-hpa-paused").await;
    let so = w.get("paused").await;
    w.polls_reach(&op, &so, 1).await;
    assert!(api.requests() > 0, "polled again");
    assert_eq!(served(&w, &op, "paused", METRIC).await, Some(50.0));
    eventually("Active=True", || async {
        (condition(&w.get("paused").await, "Active")
            == Some(("True".into(), "ScalerActive".into())))
        .then_some(())
    })
    .await;
    // Below the activation threshold again: back to 0 after the cooldown.
    api.set(0.0);
    w.poll_after(&op, &so, 30).await;
    assert_eq!(w.replicas("paused").await, 1, "within the cooldown");
    w.poll_after(&op, &so, 31).await;
    assert_eq!(w.replicas("paused").await, 0, "after the cooldown");
    op.stop().await;
}

/// KEDA's `idle_replicas` e2e: inactive, the target sits at `idleReplicaCount` (0) although
/// `minReplicaCount` is 2; active, it goes straight to 2 in one poll; inactive again, back to
/// idle after the cooldown. The HPA's floor is `minReplicaCount`.
#[tokio::test]
async fn idle_replicas_below_min_replicas() {
    let Some((_server, w)) = world("metrics-api idle").await else {
        return;
    };
    let api = MetricsApi::start(0.0).await;
    w.deployment("idle", 3).await;
    let op = w.start_operator();
    let so = w
        .create(&metrics_api_object(
            "idle",
            &api.url(),
            "  idleReplicaCount: 0\n  minReplicaCount: 2\n  maxReplicaCount: 6",
            "",
        ))
        .await;
    w.polls_reach(&op, &so, 1).await;
    wait_replicas(&w, "idle", 0).await;
    let hpa = hpa_exists(&w, "keda-hpa-idle").await;
    let spec = hpa.spec.expect("HPA spec");
    assert_eq!((spec.min_replicas, spec.max_replicas), (Some(2), 6));

    // Not above the activation threshold (2): stays idle.
    api.set(2.0);
    w.poll_after(&op, &so, 10).await;
    assert_eq!(w.replicas("idle").await, 0, "2 is not above activation 2");

    api.set(3.0);
    w.poll_after(&op, &so, 10).await;
    assert_eq!(w.replicas("idle").await, 2, "idle -> minReplicaCount");

    api.set(1.0);
    w.poll_after(&op, &so, 30).await;
    assert_eq!(w.replicas("idle").await, 2, "within the cooldown");
    w.poll_after(&op, &so, 31).await;
    assert_eq!(
        w.replicas("idle").await,
        0,
        "back to idle after the cooldown"
    );
    op.stop().await;
}

/// KEDA's `fallback` e2e: the metrics API goes down; once the failures exceed
/// `failureThreshold` the HPA is served `fallback.replicas x targetValue`, the Fallback
/// condition is True and the metric's health Failing; the API comes back and its value is
/// served again.
#[tokio::test]
async fn fallback_when_the_metrics_api_goes_down() {
    let Some((_server, w)) = world("metrics-api fallback").await else {
        return;
    };
    let api = MetricsApi::start(7.0).await;
    w.deployment("fallback", 2).await;
    let op = w.start_operator();
    let so = w
        .create(&metrics_api_object(
            "fallback",
            &api.url(),
            "  minReplicaCount: 1\n  maxReplicaCount: 10\n  fallback:\n    failureThreshold: 3\n    replicas: 4",
            "",
        ))
        .await;
    w.polls_reach(&op, &so, 1).await;
    assert_eq!(served(&w, &op, "fallback", METRIC).await, Some(7.0));

    api.stop();
    // Every read counts, the HPA's as the loop's: polls 1 and 2 and this read are 3 failures,
    // which do not exceed the threshold.
    w.poll_after(&op, &so, 10).await;
    w.poll_after(&op, &so, 10).await;
    let err = op
        .loops
        .metric_values(&w.namespace, "fallback", METRIC)
        .await
        .expect_err("3 failures are within failureThreshold 3");
    assert!(
        err.to_string().contains("url http://127.0.0.1:"),
        "the error names the url: {err}"
    );
    // Failure 4 exceeds it.
    w.poll_after(&op, &so, 10).await;
    assert_eq!(
        served(&w, &op, "fallback", METRIC).await,
        Some(20.0),
        "fallback.replicas (4) x targetValue (5)"
    );
    let status = eventually("Fallback=True", || async {
        let so = w.get("fallback").await;
        (condition(&so, "Fallback") == Some(("True".into(), "FallbackExists".into()))).then_some(so)
    })
    .await;
    let health = status
        .status
        .and_then(|s| s.health)
        .and_then(|h| h.get(METRIC).cloned())
        .expect("health of the metric");
    assert_eq!(health.status.as_deref(), Some("Failing"));
    assert!(health.number_of_failures.unwrap_or(0) > 3, "{health:?}");
    assert_eq!(
        w.replicas("fallback").await,
        2,
        "the HPA, not the loop, scales on the fallback metric"
    );

    // Back up.
    api.restart().await;
    api.set(9.0);
    w.poll_after(&op, &so, 10).await;
    assert_eq!(served(&w, &op, "fallback", METRIC).await, Some(9.0));
    eventually("Fallback=False", || async {
        (condition(&w.get("fallback").await, "Fallback")
            == Some(("False".into(), "NoFallbackFound".into())))
        .then_some(())
    })
    .await;
    op.stop().await;
}

/// KEDA's `scaling_modifiers` e2e: a formula over two named `metrics-api` triggers (the
/// second without `targetValue`, which a metric source may omit) becomes the HPA's single
/// `composite-metric`, whose value is the formula's; activation follows `activationTarget`.
#[tokio::test]
async fn a_scaling_modifiers_formula_over_metrics_api_triggers() {
    let Some((_server, w)) = world("metrics-api formula").await else {
        return;
    };
    let queue = MetricsApi::start(0.0).await;
    let backlog = MetricsApi::start(0.0).await;
    w.deployment("formula", 0).await;
    let op = w.start_operator();
    let yaml = format!(
        r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: formula
spec:
  scaleTargetRef:
    name: formula
  pollingInterval: 10
  cooldownPeriod: 60
  maxReplicaCount: 10
  advanced:
    scalingModifiers:
      formula: "queue + 2 * backlog"
      target: "4"
      activationTarget: "3"
  triggers:
    - type: metrics-api
      name: queue
      metadata:
        url: {}
        valueLocation: queue.depth
    - type: metrics-api
      name: backlog
      metadata:
        url: {}
        valueLocation: queue.depth
        targetValue: "100"
"#,
        queue.url(),
        backlog.url()
    );
    let so = w.create(&yaml).await;
    w.polls_reach(&op, &so, 1).await;
    let hpa = hpa_exists(&w, "keda-hpa-formula").await;
    let metrics = hpa.spec.and_then(|s| s.metrics).expect("metrics");
    assert_eq!(
        metrics.len(),
        1,
        "one composite metric, not one per trigger"
    );
    let ext = metrics[0].external.as_ref().expect("External");
    assert_eq!(ext.metric.name, "composite-metric");
    assert_eq!(
        ext.target.average_value.as_ref().map(|q| q.0.as_str()),
        Some("4")
    );
    assert_eq!(
        w.get("formula")
            .await
            .status
            .and_then(|s| s.composite_scaler_name),
        Some("composite-metric".into())
    );

    // 1 + 2 x 1 = 3 is not above activationTarget 3.
    queue.set(1.0);
    backlog.set(1.0);
    w.poll_after(&op, &so, 10).await;
    assert_eq!(w.replicas("formula").await, 0);
    assert_eq!(
        served(&w, &op, "formula", "composite-metric").await,
        Some(3.0)
    );
    // 2 + 2 x 5 = 12.
    queue.set(2.0);
    backlog.set(5.0);
    w.poll_after(&op, &so, 10).await;
    assert_eq!(w.replicas("formula").await, 1, "activated by the formula");
    assert_eq!(
        served(&w, &op, "formula", "composite-metric").await,
        Some(12.0)
    );
    op.stop().await;
}

/// Issue 16, as KEDA's getScaledObjectState: with `scalingModifiers` each poll records the
/// formula's value and activity as `keda_scaler_metrics_value` / `keda_scaler_active` with
/// `scaler` and `metric` `composite-metric` and `triggerIndex` 0; the triggers keep their
/// values but record no activity of their own.
#[tokio::test]
async fn a_scaling_modifiers_poll_records_keda_s_composite_metric_series() {
    let Some((_server, w)) = world("metrics-api composite series").await else {
        return;
    };
    let queue = MetricsApi::start(1.0).await;
    let backlog = MetricsApi::start(1.0).await;
    w.deployment("composed", 0).await;
    let op = w.start_operator();
    let yaml = format!(
        r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: composed
spec:
  scaleTargetRef:
    name: composed
  pollingInterval: 10
  cooldownPeriod: 60
  maxReplicaCount: 10
  advanced:
    scalingModifiers:
      formula: "queue + 2 * backlog"
      target: "4"
      activationTarget: "3"
  triggers:
    - type: metrics-api
      name: queue
      metadata:
        url: {}
        valueLocation: queue.depth
    - type: metrics-api
      name: backlog
      metadata:
        url: {}
        valueLocation: queue.depth
        targetValue: "100"
"#,
        queue.url(),
        backlog.url()
    );
    let so = w.create(&yaml).await;
    w.polls_reach(&op, &so, 1).await;
    let composite = r#"namespace="team",metric="composite-metric",scaledObject="composed",scaler="composite-metric",triggerIndex="0",type="scaledobject""#;
    // 1 + 2 x 1 = 3: not above activationTarget 3.
    let text = w.metrics.encode();
    assert_eq!(
        sample(&text, "keda_scaler_metrics_value", composite),
        Some(3.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "keda_scaler_active", composite),
        Some(0.0),
        "{text}"
    );
    let backlog_labels = r#"namespace="team",metric="s1-metric-api-queue-depth",scaledObject="composed",scaler="backlog",triggerIndex="1",type="scaledobject""#;
    assert_eq!(
        sample(&text, "keda_scaler_metrics_value", backlog_labels),
        Some(1.0),
        "the triggers keep their values: {text}"
    );
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("keda_scaler_active{") && !l.contains(composite)),
        "no trigger records its own activity: {text}"
    );

    // 2 + 2 x 5 = 12: active.
    queue.set(2.0);
    backlog.set(5.0);
    w.poll_after(&op, &so, 10).await;
    let text = w.metrics.encode();
    assert_eq!(
        sample(&text, "keda_scaler_metrics_value", composite),
        Some(12.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "keda_scaler_active", composite),
        Some(1.0),
        "{text}"
    );
    op.stop().await;
}

/// Issue 16, KEDA's instrumented scaler HTTP client: every request a `metrics-api` trigger
/// sends while its metric is read counts in `keda_scaler_http_requests_total` under the
/// object, trigger type, trigger name, metric and status code (`error` when no answer came),
/// and in `keda_scaler_http_request_duration_seconds` under `scaler` and `status_code` only
/// (no `--enable-high-cardinality-metrics-labels`).
#[tokio::test]
async fn a_metrics_api_read_counts_its_http_requests_in_keda_s_scaler_http_series() {
    let Some((_server, w)) = world("metrics-api http series").await else {
        return;
    };
    let api = MetricsApi::start(1.0).await;
    w.deployment("counted", 1).await;
    let op = w.start_operator();
    let yaml = format!(
        r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: counted
spec:
  scaleTargetRef:
    name: counted
  pollingInterval: 10
  cooldownPeriod: 60
  fallback:
    failureThreshold: 5
    replicas: 1
  triggers:
    - type: metrics-api
      name: queue
      metadata:
        url: {}
        valueLocation: queue.depth
        targetValue: "5"
"#,
        api.url()
    );
    let so = w.create(&yaml).await;
    w.polls_reach(&op, &so, 1).await;
    let read = |code: &str| {
        format!(
            r#"namespace="team",scaled_resource="counted",scaler="metrics-api",trigger_name="queue",metric_name="{METRIC}",status_code="{code}""#
        )
    };
    let text = w.metrics.encode();
    let answered = sample(&text, "keda_scaler_http_requests_total", &read("200"));
    assert!(api.requests() >= 1, "the trigger asked the API");
    assert_eq!(
        answered,
        Some(api.requests() as f64),
        "every request the API got is counted: {text}"
    );
    assert_eq!(
        sample(
            &text,
            "keda_scaler_http_request_duration_seconds_count",
            r#"scaler="metrics-api",status_code="200""#
        ),
        answered,
        "{text}"
    );

    // No answer at all: `error`.
    api.stop();
    w.poll_after(&op, &so, 10).await;
    let text = w.metrics.encode();
    assert_eq!(
        sample(&text, "keda_scaler_http_requests_total", &read("error")),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "keda_scaler_http_requests_total", &read("200")),
        answered,
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "keda_scaler_http_request_duration_seconds_count",
            r#"scaler="metrics-api",status_code="error""#
        ),
        Some(1.0),
        "{text}"
    );
    op.stop().await;
}

/// KEDA's `scaling_modifiers` e2e proper: a formula over a `kubernetes-workload` trigger
/// (matching pods of the namespace, from the operator's one pod watch) and a `metrics-api`
/// trigger. Pods appearing and finishing move the composite value and activation as the API's
/// value does.
#[tokio::test]
async fn a_scaling_modifiers_formula_over_kubernetes_workload_and_metrics_api() {
    let Some((_server, w)) = world("workload formula").await else {
        return;
    };
    let api = MetricsApi::start(0.0).await;
    w.deployment("mixed", 0).await;
    let op = w.start_operator();
    let yaml = format!(
        r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: mixed
spec:
  scaleTargetRef:
    name: mixed
  pollingInterval: 10
  cooldownPeriod: 60
  maxReplicaCount: 10
  advanced:
    scalingModifiers:
      formula: "pods * 10 + queue"
      target: "5"
      activationTarget: "15"
  triggers:
    - type: kubernetes-workload
      name: pods
      metadata:
        podSelector: "app in (producer), tier!=test"
        value: "1"
    - type: metrics-api
      name: queue
      metadata:
        url: {}
        valueLocation: queue.depth
"#,
        api.url()
    );
    let so = w.create(&yaml).await;
    w.polls_reach(&op, &so, 1).await;
    let hpa = hpa_exists(&w, "keda-hpa-mixed").await;
    let metrics = hpa.spec.and_then(|s| s.metrics).expect("metrics");
    assert_eq!(metrics.len(), 1);
    assert_eq!(
        metrics[0].external.as_ref().map(|e| e.metric.name.as_str()),
        Some("composite-metric")
    );

    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(w.client.clone(), &w.namespace);
    let pod = |name: &str, labels: serde_json::Value| -> k8s_openapi::api::core::v1::Pod {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": { "name": name, "labels": labels },
            "spec": { "containers": [{ "name": "c", "image": "registry.k8s.io/pause:3.9" }] },
        }))
        .expect("a Pod")
    };
    let running = serde_json::json!({ "status": { "phase": "Running" } });
    for (name, labels) in [
        ("p1", serde_json::json!({ "app": "producer" })),
        (
            "p2",
            serde_json::json!({ "app": "producer", "tier": "test" }),
        ),
        ("c1", serde_json::json!({ "app": "consumer" })),
    ] {
        pods.create(&kube::api::PostParams::default(), &pod(name, labels))
            .await
            .expect("create pod");
        pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&running))
            .await
            .expect("pod phase");
    }
    // One matching pod (p2 is tier=test, c1 another app): 1 x 10 + 4 = 14, not above 15.
    api.set(4.0);
    let composite = eventually("1 x 10 + 4", || async {
        w.poll_after(&op, &so, 10).await;
        served(&w, &op, "mixed", "composite-metric")
            .await
            .filter(|v| *v == 14.0)
    })
    .await;
    assert_eq!(composite, 14.0);
    assert_eq!(
        w.replicas("mixed").await,
        0,
        "14 is not above activationTarget 15"
    );

    // A second matching pod: 2 x 10 + 4 = 24, active.
    pods.create(
        &kube::api::PostParams::default(),
        &pod("p3", serde_json::json!({ "app": "producer" })),
    )
    .await
    .expect("create pod");
    pods.patch_status("p3", &PatchParams::default(), &Patch::Merge(&running))
        .await
        .expect("pod phase");
    eventually("2 x 10 + 4, active", || async {
        w.poll_after(&op, &so, 10).await;
        (served(&w, &op, "mixed", "composite-metric").await == Some(24.0)
            && w.replicas("mixed").await == 1)
            .then_some(())
    })
    .await;

    // Both producers finish; the API's value alone (6) is not enough.
    for name in ["p1", "p3"] {
        let done = serde_json::json!({ "status": { "phase": "Succeeded" } });
        pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&done))
            .await
            .expect("pod phase");
    }
    api.set(6.0);
    eventually("0 x 10 + 6", || async {
        w.poll_after(&op, &so, 10).await;
        (served(&w, &op, "mixed", "composite-metric").await == Some(6.0)).then_some(())
    })
    .await;
    w.poll_after(&op, &so, 61).await;
    assert_eq!(w.replicas("mixed").await, 0, "inactive after the cooldown");
    op.stop().await;
}
