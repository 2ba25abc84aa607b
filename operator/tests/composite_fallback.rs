//! Issue 29, row 6: KEDA's composite fallback. With `scalingModifiers` the HPA reads one
//! `composite-metric`; once a trigger has failed more than `fallback.failureThreshold` times,
//! the value served for it must make the HPA ask for exactly the replica count the fallback
//! stands for, whatever the formula does with its inputs.
//!
//! KEDA (`pkg/fallback/fallback.go` `doFallback`, `pkg/scaling/modifiers/formula.go`
//! `HandleScalingModifiers`): while a fallback stands in, the formula is not applied; the
//! composite metric is `scalingModifiers.target x replicas` for `metricType: AverageValue` and
//! `target x replicas / readyPods` for `Value`, with `replicas` from `fallback.behavior`
//! (`static`: `fallback.replicas`; `currentReplicas`; `currentReplicasIfHigher`: the larger;
//! `currentReplicasIfLower`: the smaller). Behavior `scalingModifiers` feeds the failing
//! trigger to the formula as `nil`, and a `nil` result is `fallback.replicas x target`.
//!
//! Each served value is fed into the HPA controller's own arithmetic ([`hpa_desired`]) for
//! several current replica counts, against memkube with the `dial` scaler
//! (`tests/common/dial.rs`).

mod common;
mod scenarios;

#[allow(dead_code)]
#[path = "../../scalers/tests/common/mod.rs"]
mod redis_common;

use std::time::Duration;

use common::world::dial_world;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Patch, PatchParams};
use scenarios::{Operator, World};

/// `fallback.replicas` of every object here.
const FALLBACK_REPLICAS: i32 = 5;
/// `scalingModifiers.target` of every object here (KEDA's `HasValidFallback` wants an integer).
const TARGET: f64 = 5.0;
/// The current replica counts each object is checked at.
const CURRENT: [i32; 5] = [1, 3, 5, 8, 12];

/// What the HPA controller computes for one External metric of value `value` and target
/// `target` (Kubernetes `pkg/controller/podautoscaler/replica_calculator.go`, default tolerance
/// 0.1), before `minReplicas`/`maxReplicas` and `behavior`:
/// * `AverageValue` (`GetExternalPerPodMetricReplicas`): the usage ratio is
///   `value / (target x current)`; within the tolerance the count stays, else
///   `ceil(value / target)`.
/// * `Value` (`GetExternalMetricReplicas`): the usage ratio is `value / target`; within the
///   tolerance the count stays, else `ceil(ratio x readyPods)` (`ceil(ratio)` from 0).
fn hpa_desired(metric_type: &str, value: f64, target: f64, current: i32, ready: i32) -> i32 {
    const TOLERANCE: f64 = 0.1;
    let desired = match metric_type {
        "AverageValue" => {
            let ratio = value / (target * f64::from(current));
            if current != 0 && (1.0 - ratio).abs() <= TOLERANCE {
                return current;
            }
            (value / target).ceil()
        }
        "Value" => {
            let ratio = value / target;
            if current == 0 {
                ratio.ceil()
            } else if (1.0 - ratio).abs() <= TOLERANCE {
                return current;
            } else {
                (ratio * f64::from(ready)).ceil()
            }
        }
        other => panic!("no HPA arithmetic for metric type {other}"),
    };
    // Replica counts are small integers here.
    #[allow(clippy::cast_possible_truncation)]
    let desired = desired as i32;
    desired
}

/// A ScaledObject `name` on Deployment `name`: two `dial` triggers, `down` (failing) and `up`
/// (reading 3), combined by `formula`; fallback after one failure to 5 replicas with
/// `behavior`; composite `metricType` `metric_type`.
fn composite_object(name: &str, formula: &str, behavior: &str, metric_type: &str) -> String {
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
  maxReplicaCount: 20
  fallback:
    failureThreshold: 1
    replicas: {FALLBACK_REPLICAS}
    behavior: {behavior}
  advanced:
    scalingModifiers:
      formula: "{formula}"
      target: "{TARGET}"
      activationTarget: "1"
      metricType: {metric_type}
  triggers:
    - type: dial
      name: down
      metadata:
        dial: down
    - type: dial
      name: up
      metadata:
        dial: up
"#
    )
}

/// Sets Deployment `name` to `replicas`, all of them ready.
async fn set_replicas(w: &World, name: &str, replicas: i32) {
    let spec = serde_json::json!({ "spec": { "replicas": replicas } });
    w.deployments()
        .patch(name, &PatchParams::default(), &Patch::Merge(&spec))
        .await
        .expect("patch Deployment");
    let status =
        serde_json::json!({ "status": { "replicas": replicas, "readyReplicas": replicas } });
    let _: Deployment = w
        .deployments()
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("patch Deployment status");
}

/// Asks for `composite-metric` of `name` as the HPA does until `accept` takes the value (the
/// operator's view of the Deployment follows a watch) and returns the last value served; fails
/// naming what was served when nothing is accepted in time.
async fn served_until(
    w: &World,
    op: &Operator,
    name: &str,
    what: &str,
    accept: impl Fn(f64) -> bool,
) -> f64 {
    let mut last = None;
    for _ in 0..250 {
        match op
            .loops
            .metric_values(&w.namespace, name, "composite-metric")
            .await
        {
            Ok(values) => {
                assert_eq!(values.len(), 1, "{name}: one composite value");
                assert_eq!(values[0].name, "composite-metric");
                let value = values[0].value;
                if accept(value) {
                    return value;
                }
                last = Some(Ok(value));
            }
            Err(e) => last = Some(Err(e.to_string())),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{name}: {what}; last served: {last:?}")
}

/// The replica count a fallback behavior stands for, given the current count.
type ExpectedReplicas = fn(i32) -> i32;

/// `keda_scaler_metrics_value` of object `name`, scaler (trigger name) `scaler`, `metric`.
fn metrics_value(w: &World, name: &str, scaler: &str, metric: &str, index: usize) -> Option<f64> {
    let series = format!(
        r#"keda_scaler_metrics_value{{namespace="{}",metric="{metric}",scaledObject="{name}",scaler="{scaler}",triggerIndex="{index}",type="scaledobject"}} "#,
        w.namespace
    );
    w.metrics
        .encode()
        .lines()
        .find_map(|l| l.strip_prefix(&series))
        .and_then(|v| v.parse().ok())
}

/// For every fallback behavior KEDA computes a replica count for, and both composite metric
/// types, the composite metric served while the fallback stands in makes the HPA ask for that
/// count at every current replica count: the formula (`down + 2 * up`, which would add the
/// healthy trigger on top) is not applied, as in KEDA.
#[tokio::test]
async fn the_composite_metric_in_fallback_makes_the_hpa_ask_for_the_fallback_replicas() {
    let Some((_server, w, dials)) = dial_world("composite-fallback").await else {
        return;
    };
    dials.fail_on_read("down", true);
    dials.set("up", 3.0);
    let behaviors: [(&str, ExpectedReplicas); 4] = [
        ("static", |_| FALLBACK_REPLICAS),
        ("currentReplicas", |current| current),
        ("currentReplicasIfHigher", |current| {
            current.max(FALLBACK_REPLICAS)
        }),
        ("currentReplicasIfLower", |current| {
            current.min(FALLBACK_REPLICAS)
        }),
    ];
    let metric_types = ["AverageValue", "Value"];
    let op = w.start_operator();
    let mut objects = Vec::new();
    for (behavior, expected) in behaviors {
        for metric_type in metric_types {
            let name = format!("{behavior}-{metric_type}").to_lowercase();
            w.deployment(&name, CURRENT[0]).await;
            set_replicas(&w, &name, CURRENT[0]).await;
            let so = w
                .create(&composite_object(
                    &name,
                    "down + 2 * up",
                    behavior,
                    metric_type,
                ))
                .await;
            objects.push((name, behavior, metric_type, expected, so));
        }
    }
    for (_, _, _, _, so) in &objects {
        // The first poll is the first failure, not above the threshold of 1; the HPA's next
        // read is the second.
        w.polls_reach(&op, so, 1).await;
    }
    for (name, behavior, metric_type, expected, _) in &objects {
        for current in CURRENT {
            set_replicas(&w, name, current).await;
            let want = expected(current);
            let what = format!(
                "{behavior}/{metric_type} at {current} replicas: the HPA should ask for {want}"
            );
            let value = served_until(&w, &op, name, &what, |v| {
                hpa_desired(metric_type, v, TARGET, current, current) == want
            })
            .await;
            // The value is KEDA's doFallback value exactly (milli-units, truncated).
            let replicas = f64::from(want);
            let keda = match *metric_type {
                "AverageValue" => TARGET * replicas,
                _ => (TARGET * 1000.0 * replicas / f64::from(current)).trunc() / 1000.0,
            };
            assert_eq!(value, keda, "{what}");
        }
    }
    // The scale loop computes the same composite (KEDA's getScaledObjectState): the series
    // `scaler="composite-metric"` carries the fallback value, not the formula's.
    let (name, _, _, _, so) = &objects[0];
    set_replicas(&w, name, 2).await;
    common::world::poll_all(&w, &op, &[so], 10).await;
    assert_eq!(
        metrics_value(&w, name, "composite-metric", "composite-metric", 0),
        Some(TARGET * f64::from(FALLBACK_REPLICAS)),
        "the loop's composite is the fallback value"
    );
    // KEDA's processMetricsWithFallback records the failing trigger's fallback value under the
    // name doFallback gives it with scalingModifiers, `composite-metric`.
    assert_eq!(
        metrics_value(&w, name, "down", "composite-metric", 0),
        Some(TARGET * f64::from(FALLBACK_REPLICAS)),
    );
    assert_eq!(metrics_value(&w, name, "up", "s1-dial-up", 1), Some(3.0));
    op.stop().await;
}

/// Behavior `scalingModifiers`: the failing trigger is `nil` in the formula; `down ?? 2 * up`
/// takes the healthy trigger instead, and a formula that comes out `nil` (`down`) is served
/// `fallback.replicas x target`, which the HPA turns into `fallback.replicas` with
/// `AverageValue`. KEDA does not divide that value by the ready pods for `Value`
/// (`scalingModifiersFallbackTarget`), and neither does keda-rs.
#[tokio::test]
async fn behavior_scaling_modifiers_feeds_nil_to_the_formula_and_a_nil_result_is_the_fallback() {
    let Some((_server, w, dials)) = dial_world("composite-fallback-nil").await else {
        return;
    };
    dials.fail_on_read("down", true);
    dials.set("up", 3.0);
    let op = w.start_operator();
    let cases = [
        // (name, formula, metricType, served)
        ("nil-default", "down ?? 2 * up", "AverageValue", 2.0 * 3.0),
        (
            "nil-result",
            "down",
            "AverageValue",
            TARGET * f64::from(FALLBACK_REPLICAS),
        ),
        (
            "nil-result-value",
            "down",
            "Value",
            TARGET * f64::from(FALLBACK_REPLICAS),
        ),
    ];
    for (name, formula, metric_type, _) in cases {
        w.deployment(name, 3).await;
        set_replicas(&w, name, 3).await;
        let so = w
            .create(&composite_object(
                name,
                formula,
                "scalingModifiers",
                metric_type,
            ))
            .await;
        w.polls_reach(&op, &so, 1).await;
    }
    for (name, _, metric_type, served) in cases {
        let value = served_until(&w, &op, name, &format!("serves {served}"), |v| v == served).await;
        if name == "nil-result" {
            assert_eq!(
                hpa_desired(metric_type, value, TARGET, 3, 3),
                FALLBACK_REPLICAS
            );
        }
        // KEDA records the placeholder it feeds the formula for the failing trigger: -1.
        assert_eq!(
            metrics_value(&w, name, "down", "s0-dial-down", 0),
            Some(-1.0),
            "{name}"
        );
    }
    op.stop().await;
}
