//! What the operator refuses (issue 29, row 3), against memkube with no admission webhook.
//!
//! KEDA's reconcile runs only its reconcile-time checks (`CheckReplicaCountBoundsAreValid`,
//! `ValidateTriggers`, the scalingModifiers compile); what only its webhook refuses runs under
//! KEDA when the webhook is off, and so it does here. And a trigger parameter KEDA only trips
//! over when it fetches (a `metrics-api` `url` that is not a URL) does not refuse the object:
//! the other triggers keep scaling it, the bad one fails at its reads.

mod common;
mod scenarios;

#[allow(dead_code)]
#[path = "../../scalers/tests/common/mod.rs"]
mod redis_common;

use common::metrics_api::MetricsApi;
use common::world::{NS, becomes_ready};
use kube::Api;
use kube::api::ListParams;
use memkube::MemKube;
use scenarios::{World, condition, eventually, hpa_exists};

async fn world(test: &str) -> Option<(MemKube, World)> {
    common::world::world(test, keda_scalers::Registry::builtin()).await
}

/// The notes of the Events on `name` with `reason`.
async fn event_notes(w: &World, name: &str, reason: &str) -> Vec<String> {
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
        .filter_map(|e| e.note)
        .collect()
}

/// Objects KEDA's reconcile accepts and only its webhook refuses: a cpu-only object with
/// `minReplicaCount: 0` on a Deployment (`verifyCPUMemoryScalers`), a fallback without a
/// trigger other than cpu/memory (`verifyFallback`), a name whose derived HPA name is over 63
/// characters (`verifyName`). With the webhook off each gets its HPA and `Ready=True`, as under
/// KEDA (whose HPA's `app.kubernetes.io/name` label is cut to 63 characters).
#[tokio::test]
async fn objects_only_keda_s_webhook_refuses_run_with_the_webhook_off() {
    let Some((_server, w)) = world("admission-only rules").await else {
        return;
    };
    let long = format!("long-{}", "n".repeat(55));
    assert_eq!(long.len(), 60);
    let cases = [
        (
            "cpu-zero".to_string(),
            "  minReplicaCount: 0\n  triggers:\n    - type: cpu\n      metricType: Utilization\n      metadata:\n        value: \"50\"\n",
        ),
        (
            "memory-fallback".to_string(),
            "  minReplicaCount: 1\n  fallback:\n    failureThreshold: 3\n    replicas: 2\n  triggers:\n    - type: memory\n      metricType: Utilization\n      metadata:\n        value: \"60\"\n",
        ),
        (
            long.clone(),
            "  minReplicaCount: 1\n  triggers:\n    - type: cpu\n      metricType: Utilization\n      metadata:\n        value: \"50\"\n",
        ),
    ];
    for (name, _) in &cases {
        w.deployment(name, 1).await;
    }
    let op = w.start_operator();
    for (name, spec) in &cases {
        let yaml = format!(
            "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata:\n  name: {name}\nspec:\n  scaleTargetRef:\n    name: {name}\n{spec}"
        );
        let so: keda_api::ScaledObject = serde_yaml::from_str(&yaml).expect("yaml");
        assert!(
            keda_api::validation::validate_scaled_object_admission(&so).is_err(),
            "{name}: KEDA's webhook refuses it"
        );
        w.create(&yaml).await;
    }
    for (name, _) in &cases {
        becomes_ready(&w, name).await;
        let so = w.get(name).await;
        assert_eq!(
            condition(&so, "Ready"),
            Some(("True".into(), "ScaledObjectReady".into())),
            "{name}"
        );
        let hpa_name = format!("keda-hpa-{name}");
        let hpa = hpa_exists(&w, &hpa_name).await;
        let spec = hpa.spec.expect("HPA spec");
        assert_eq!(spec.min_replicas, Some(1), "{name}: KEDA's HPA minimum");
        assert!(
            spec.metrics
                .unwrap_or_default()
                .iter()
                .all(|m| m.type_ == "Resource"),
            "{name}"
        );
        let label = hpa
            .metadata
            .labels
            .unwrap_or_default()
            .remove("app.kubernetes.io/name")
            .unwrap_or_default();
        assert_eq!(
            label,
            hpa_name.chars().take(63).collect::<String>(),
            "{name}"
        );
        assert_eq!(
            so.status.and_then(|s| s.hpa_name).as_deref(),
            Some(hpa_name.as_str())
        );
    }
    op.stop().await;
}

/// A ScaledObject with a good `metrics-api` trigger and one whose `url` is not a URL: KEDA
/// takes the url as written and fails only when it fetches, so the object gets its HPA, is
/// scaled by the good trigger, shows `Ready=Unknown` / `PartialTriggerError`, and the bad
/// trigger's reads fail with a `KEDAScalerFailed` Event naming `url`.
#[tokio::test]
async fn a_bad_metrics_api_url_fails_at_its_reads_and_the_good_trigger_keeps_scaling() {
    let Some((_server, w)) = world("bad url partial").await else {
        return;
    };
    let api = MetricsApi::start(10.0).await;
    w.deployment("partial", 0).await;
    let op = w.start_operator();
    let so = w
        .create(&format!(
            r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: partial
spec:
  scaleTargetRef:
    name: partial
  pollingInterval: 10
  cooldownPeriod: 60
  minReplicaCount: 0
  maxReplicaCount: 5
  triggers:
    - type: metrics-api
      name: good
      metadata:
        url: {}
        valueLocation: queue.depth
        targetValue: "5"
        activationTargetValue: "2"
    - type: metrics-api
      name: bad
      metadata:
        url: "not a url"
        valueLocation: queue.depth
        targetValue: "5"
"#,
            api.url()
        ))
        .await;
    let hpa = hpa_exists(&w, "keda-hpa-partial").await;
    let metrics: Vec<String> = hpa
        .spec
        .and_then(|s| s.metrics)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.external.map(|e| e.metric.name))
        .collect();
    assert_eq!(
        metrics,
        ["s0-metric-api-queue-depth", "s1-metric-api-queue-depth"],
        "both triggers are in the HPA"
    );
    w.polls_reach(&op, &so, 1).await;
    eventually("the good trigger scales partial from 0", || async {
        (w.replicas("partial").await >= 1).then_some(())
    })
    .await;
    // As in KEDA's executor, the poll that scales from zero reports nothing else; the next one
    // (active, one trigger failing) sets PartialTriggerError.
    w.poll_after(&op, &so, 10).await;
    let (status, _) = eventually("Ready=Unknown / PartialTriggerError", || async {
        condition(&w.get("partial").await, "Ready").filter(|(_, r)| r == "PartialTriggerError")
    })
    .await;
    assert_eq!(status, "Unknown");
    assert_eq!(
        condition(&w.get("partial").await, "Active").map(|(s, _)| s),
        Some("True".into())
    );
    assert!(api.requests() >= 1, "the good trigger's server was asked");
    let notes = eventually("a KEDAScalerFailed Event naming url", || async {
        let notes = event_notes(&w, "partial", "KEDAScalerFailed").await;
        (!notes.is_empty()).then_some(notes)
    })
    .await;
    assert!(
        notes
            .iter()
            .all(|n| n.contains("parameter \"url\"") && n.contains("trigger 1 (metrics-api)")),
        "{notes:?}"
    );
    // The good trigger's value is served to the HPA; the bad one's read is an error.
    let good = op
        .loops
        .metric_values(&w.namespace, "partial", "s0-metric-api-queue-depth")
        .await
        .expect("the good metric");
    assert_eq!(good[0].value, 10.0);
    let bad = op
        .loops
        .metric_values(&w.namespace, "partial", "s1-metric-api-queue-depth")
        .await
        .expect_err("the bad metric fails");
    assert!(bad.to_string().contains("parameter \"url\""), "{bad}");
    op.stop().await;
}
