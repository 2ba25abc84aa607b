use crate::scaled_object::target::TargetKind;
use k8s_openapi::api::autoscaling::v2::ResourceMetricSource;
use keda_api::gvkr::parse_gvkr;
use keda_scalers::metric::metric_target;

use super::*;
use crate::scaled_object::hpa::{CachedHpa, HpaCache, cached_matches};
use crate::shared::scalers::TriggerScaler;

fn object(yaml: &str) -> ScaledObject {
    let mut so: ScaledObject = serde_yaml::from_str(yaml).expect("yaml");
    so.metadata.namespace = Some("ns".into());
    so.metadata.uid = Some("u1".into());
    so
}

fn target() -> Target {
    let gvkr = parse_gvkr("", "").expect("Deployment");
    Target {
        kind: TargetKind::of(gvkr),
        namespace: "ns".into(),
        name: "app".into(),
    }
}

struct NoScaler;

#[async_trait::async_trait]
impl keda_scalers::Scaler for NoScaler {
    fn metric_specs(&self) -> Vec<MetricSpec> {
        Vec::new()
    }
    async fn metrics_and_activity(
        &self,
        _: &str,
    ) -> Result<keda_scalers::MetricsAndActivity, keda_scalers::ScalerError> {
        Ok(keda_scalers::MetricsAndActivity::single("m", 0.0, 0.0))
    }
    async fn close(&self) {}
}

fn trigger(index: usize, trigger_type: &str, specs: Vec<MetricSpec>) -> TriggerScaler {
    TriggerScaler {
        index,
        name: String::new(),
        trigger_type: trigger_type.into(),
        use_cached_metrics: false,
        metric_specs: specs.into(),
        scaler: keda_scalers::BuiltScaler::Pull(Box::new(NoScaler)),
    }
}

fn external(name: &str) -> MetricSpec {
    external_metric_spec(name, metric_target(TargetType::AverageValue, 5))
}

fn cpu() -> MetricSpec {
    MetricSpec {
        type_: "Resource".into(),
        resource: Some(ResourceMetricSource {
            name: "cpu".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

const SO: &str = r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: worker
  labels: { team: a, secret: b }
  annotations:
    scaledobject.keda.sh/hpa-excluded-labels: secret
    autoscaling.keda.sh/paused-scale-in: "true"
spec:
  scaleTargetRef: { name: app }
  maxReplicaCount: 7
  triggers: [{ type: redis, metadata: { listName: a } }]
"#;

#[test]
fn metrics_are_sorted_by_type_and_select_the_object() {
    let scalers = ObjectScalers {
        triggers: vec![
            trigger(0, "redis", vec![external("s0-redis-a")]),
            trigger(1, "cpu", vec![cpu()]),
        ],
        modifiers: None,
        answers: keda_scalers::answers::AnswerBudgets::default().budget("ns"),
    };
    let m = metric_specs("worker", &scalers).expect("specs");
    let types: Vec<&str> = m.specs.iter().map(|s| s.type_.as_str()).collect();
    assert_eq!(types, ["External", "Resource"]);
    assert_eq!(m.external_names, ["s0-redis-a"]);
    assert_eq!(m.resource_names, ["cpu"]);
    let selector = m.specs[0]
        .external
        .as_ref()
        .and_then(|e| e.metric.selector.as_ref())
        .and_then(|s| s.match_labels.as_ref())
        .and_then(|l| l.get(SCALED_OBJECT_NAME_LABEL).cloned());
    assert_eq!(selector.as_deref(), Some("worker"));
}

#[test]
fn duplicate_external_metric_names_are_an_error_in_keda_words() {
    let scalers = ObjectScalers {
        triggers: vec![
            trigger(0, "redis", vec![external("s0-redis-a")]),
            trigger(0, "redis", vec![external("s0-redis-a")]),
        ],
        modifiers: None,
        answers: keda_scalers::answers::AnswerBudgets::default().budget("ns"),
    };
    let err = metric_specs("worker", &scalers).unwrap_err();
    assert_eq!(
        err.to_string(),
        "metricName s0-redis-a defined multiple times"
    );
}

#[test]
fn the_hpa_is_built_as_keda_builds_it() {
    let so = object(SO);
    let m = MetricSpecs {
        specs: vec![external("s0-redis-a")],
        ..Default::default()
    };
    let hpa = desired_hpa(&so, &target(), &m);
    assert_eq!(hpa.metadata.name.as_deref(), Some("keda-hpa-worker"));
    let labels = hpa.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels["app.kubernetes.io/name"], "keda-hpa-worker");
    assert_eq!(labels["app.kubernetes.io/part-of"], "worker");
    assert_eq!(labels["app.kubernetes.io/managed-by"], "keda-operator");
    assert_eq!(labels["team"], "a");
    assert!(!labels.contains_key("secret"), "excluded label copied");
    let owner = &hpa.metadata.owner_references.clone().unwrap_or_default()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("ScaledObject", Some(true))
    );
    let spec = hpa.spec.expect("spec");
    assert_eq!(spec.min_replicas, Some(1), "max(min, 1)");
    assert_eq!(spec.max_replicas, 7);
    assert_eq!(
        spec.scale_target_ref.api_version.as_deref(),
        Some("apps/v1")
    );
    let behavior = spec.behavior.expect("paused-scale-in sets a behavior");
    assert_eq!(
        behavior.scale_down.and_then(|r| r.select_policy).as_deref(),
        Some("Disabled")
    );
    assert!(behavior.scale_up.is_none());
}

#[test]
fn the_name_label_is_cut_to_a_valid_label_value() {
    let long = format!("{}-x", "a".repeat(62));
    assert_eq!(name_label(&long), "a".repeat(62));
}

#[test]
fn an_identical_hpa_needs_no_update_and_a_changed_one_does() {
    let so = object(SO);
    let m = MetricSpecs {
        specs: vec![external("s0-redis-a")],
        ..Default::default()
    };
    let hpa = desired_hpa(&so, &target(), &m);
    assert!(!hpa_differs(&hpa, &hpa.clone()));
    let mut changed = hpa.clone();
    if let Some(s) = changed.spec.as_mut() {
        s.max_replicas = 3;
    }
    assert!(hpa_differs(&changed, &hpa));
}

#[test]
fn only_what_keda_rs_sets_is_compared_as_in_keda() {
    let so = object(SO);
    let m = MetricSpecs {
        specs: vec![external("s0-redis-a")],
        ..Default::default()
    };
    let desired = desired_hpa(&so, &target(), &m);
    // Another tool's label and annotation, and a field the API server defaults.
    let mut found = desired.clone();
    found
        .metadata
        .labels
        .get_or_insert_default()
        .insert("policy/owner".into(), "platform".into());
    found
        .metadata
        .annotations
        .get_or_insert_default()
        .insert("cost/center".into(), "42".into());
    let trimmed = CachedHpa::of(&found);
    assert!(
        cached_matches(&trimmed, &desired),
        "the cache sees no change"
    );
    if let Some(t) = found
        .spec
        .as_mut()
        .and_then(|s| s.metrics.as_mut())
        .and_then(|m| m[0].external.as_mut())
    {
        t.metric.selector.get_or_insert_default().match_expressions = Some(Vec::new());
    }
    assert!(
        !hpa_differs(&found, &desired),
        "foreign metadata and defaults are not a difference"
    );
    // A label keda-rs sets, changed by someone else, is a difference.
    let mut overwritten = found.clone();
    overwritten
        .metadata
        .labels
        .get_or_insert_default()
        .insert("team".into(), "b".into());
    assert!(hpa_differs(&overwritten, &desired));
    let trimmed = CachedHpa::of(&overwritten);
    assert!(!cached_matches(&trimmed, &desired));
    // A metric removed from the object is a difference although the rest derives.
    let mut fewer = desired.clone();
    if let Some(s) = fewer.spec.as_mut() {
        s.metrics = Some(Vec::new());
    }
    assert!(hpa_differs(&found, &fewer));
    let merged = merged(
        found.metadata.labels.as_ref(),
        desired.metadata.labels.as_ref(),
    )
    .unwrap_or_default();
    assert_eq!(merged["policy/owner"], "platform");
    assert_eq!(merged["team"], "a");
}

#[test]
fn derives_is_apimachinery_s_deep_derivative() {
    use serde_json::json;
    let cases = [
        (json!({"a": 1}), json!({"a": 1, "b": 2}), true),
        (json!({"a": null, "s": ""}), json!({"a": 5, "s": "x"}), true),
        (json!({"a": 1}), json!({"a": 2}), false),
        (json!({"a": 1}), json!({}), false),
        (json!([1]), json!([1, 2]), true),
        (json!([1, 2]), json!([1]), false),
        (json!([]), json!([1]), true),
        (json!({"m": {}}), json!({"m": {"x": 1}}), true),
    ];
    for (d, e, want) in cases {
        assert_eq!(derives(&d, &e), want, "{d} vs {e}");
    }
}

fn hpa_with(conditions: serde_json::Value) -> HorizontalPodAutoscaler {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "keda-hpa-a", "namespace": "ns", "resourceVersion": "7",
                     "labels": {"x": "y"}, "managedFields": [{"manager": "kcm"}]},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "app"}, "maxReplicas": 5},
        "status": {"currentReplicas": 2, "desiredReplicas": 2, "conditions": conditions}
    }))
    .expect("hpa")
}

fn health(status: &'static str, reason: &str, message: &str) -> Option<HpaHealth> {
    Some(HpaHealth {
        status,
        reason: reason.to_string(),
        message: message.to_string(),
    })
}

#[test]
fn hpa_active_mirrors_scaling_active_as_keda_does() {
    // KEDA's getHPAHealth and its TestGetHPAHealth_* cases.
    let cases = [
        (
            serde_json::json!([{"type": "AbleToScale", "status": "True"},
                                   {"type": "ScalingActive", "status": "True", "reason": "ValidMetricFound",
                                    "message": "the HPA was able to compute a replica count"}]),
            health("True", "HPAActive", "HPA is actively scaling"),
        ),
        (
            serde_json::json!([{"type": "ScalingActive", "status": "False", "reason": "ScalingDisabled",
                                    "message": "scaling is disabled since the replica count of the target is zero"}]),
            health(
                "True",
                "ScalingDisabled",
                "scaling is disabled since the replica count of the target is zero",
            ),
        ),
        // The HPA's own reason passes through.
        (
            serde_json::json!([{"type": "ScalingActive", "status": "False", "reason": "FailedGetExternalMetric",
                                    "message": "unable to get external metric ns/s0-redis-a"}]),
            health(
                "False",
                "FailedGetExternalMetric",
                "HPA is not actively scaling: unable to get external metric ns/s0-redis-a",
            ),
        ),
        (
            serde_json::json!([{"type": "ScalingActive", "status": "False", "reason": "FailedGetExternalMetric"}]),
            health(
                "False",
                "FailedGetExternalMetric",
                "HPA is not actively scaling: ",
            ),
        ),
        // A reason that cannot be a condition's: HPAMetricsUnavailable.
        (
            serde_json::json!([{"type": "ScalingActive", "status": "False", "reason": "no such: reason!",
                                    "message": "m"}]),
            health(
                "False",
                "HPAMetricsUnavailable",
                "HPA is not actively scaling: m",
            ),
        ),
        // No reason: KEDA's HPAMetricsUnavailable.
        (
            serde_json::json!([{"type": "ScalingActive", "status": "False", "message": "m"}]),
            health(
                "False",
                "HPAMetricsUnavailable",
                "HPA is not actively scaling: m",
            ),
        ),
        // Not reported yet: unknown, the condition is left alone.
        (
            serde_json::json!([{"type": "AbleToScale", "status": "True"}]),
            None,
        ),
    ];
    for (conditions, expected) in cases {
        assert_eq!(
            hpa_health(&hpa_with(conditions.clone())),
            expected,
            "{conditions}"
        );
    }
    let mut no_status = hpa_with(serde_json::json!([]));
    no_status.status = None;
    assert_eq!(hpa_health(&no_status), None);
}

#[test]
fn the_cached_hpa_keeps_a_fingerprint_of_what_ensure_hpa_compares_and_its_health() {
    let mut full = hpa_with(serde_json::json!([
        {"type": "AbleToScale", "status": "True"},
        {"type": "ScalingActive", "status": "False", "reason": "FailedGetExternalMetric", "message": "m"}
    ]));
    full.metadata.managed_fields = Some(vec![Default::default()]);
    let trimmed = CachedHpa::of(&full);
    assert_eq!(
        trimmed.scaling_active().map(scaling_active_health),
        hpa_health(&full)
    );
    assert!(cached_matches(&trimmed, &full), "ensure_hpa sees no change");
    let mut changed = full.clone();
    changed.spec.as_mut().expect("spec").max_replicas += 1;
    assert!(
        !cached_matches(&trimmed, &changed),
        "a changed spec is seen"
    );
    let mut relabelled = full.clone();
    relabelled
        .metadata
        .labels
        .get_or_insert_default()
        .insert("team".into(), "a".into());
    assert!(
        !cached_matches(&trimmed, &relabelled),
        "a new label is seen"
    );
    let mut reannotated = full.clone();
    reannotated
        .metadata
        .annotations
        .get_or_insert_default()
        .insert("team".into(), "a".into());
    assert!(
        !cached_matches(&trimmed, &reannotated),
        "a new annotation is seen"
    );
    let mut without = full.clone();
    without.status = None;
    assert_eq!(CachedHpa::of(&without).scaling_active(), None);
}

#[test]
fn the_hpa_cache_follows_the_watch_and_a_relist_drops_what_it_did_not_show() {
    use kube::runtime::watcher::Event;

    use crate::shared::watch::Known;

    let named = |name: &str| {
        let mut h = hpa_with(serde_json::json!([
            {"type": "ScalingActive", "status": "True"}
        ]));
        h.metadata.name = Some(name.into());
        h
    };
    let cache = HpaCache::default();
    cache.apply(&Event::Init);
    cache.apply(&Event::InitApply(named("a")));
    cache.apply(&Event::InitApply(named("b")));
    cache.apply(&Event::InitDone);
    assert!(cache.get("ns", "a").is_some());
    assert!(cache.get("other", "a").is_none());
    let mut names: Vec<_> = cache
        .known(&mut |_| true)
        .into_iter()
        .map(|h| (h.metadata.namespace, h.metadata.name))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            (Some("ns".to_string()), Some("a".to_string())),
            (Some("ns".to_string()), Some("b".to_string()))
        ]
    );

    let mut inactive = named("a");
    inactive.status = None;
    cache.apply(&Event::Apply(inactive));
    assert_eq!(
        cache.get("ns", "a").expect("a").scaling_active(),
        None,
        "an update replaces the entry"
    );
    cache.apply(&Event::Init);
    cache.apply(&Event::InitApply(named("b")));
    assert!(cache.get("ns", "a").is_some(), "kept until the list ends");
    cache.apply(&Event::InitDone);
    assert!(cache.get("ns", "a").is_none());
    assert!(cache.get("ns", "b").is_some());
    cache.apply(&Event::Delete(named("b")));
    assert!(cache.known(&mut |_| true).is_empty());
}
