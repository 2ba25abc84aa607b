//! The HPA controller against the in-memory API server: it reads the target's `/scale`, asks
//! for the External metric, writes `/scale` and the HPA's status as Kubernetes' controller does.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use keda_operator::metrics_service::{MetricValues, MetricsError};
use keda_rs::hpa::{HpaController, HpaSettings};
use keda_scalers::MetricValue;
use kube::api::{Api, Patch, PatchParams, PostParams};
use memkube::MemKube;

/// A metric source the test sets by hand; it records what was asked.
#[derive(Default)]
struct Values {
    value: Mutex<f64>,
    asked: Mutex<Vec<(String, String, String)>>,
}

#[async_trait]
impl MetricValues for Values {
    async fn metric_values(
        &self,
        namespace: &str,
        scaled_object: &str,
        metric_name: &str,
    ) -> Result<Vec<MetricValue>, MetricsError> {
        self.asked.lock().expect("lock").push((
            namespace.into(),
            scaled_object.into(),
            metric_name.into(),
        ));
        Ok(vec![MetricValue::new(
            metric_name,
            *self.value.lock().expect("lock"),
        )])
    }
}

fn deployment(replicas: i32) -> Deployment {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": "worker", "namespace": "default" },
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": { "app": "worker" } },
            "template": { "metadata": { "labels": { "app": "worker" } },
                          "spec": { "containers": [{ "name": "w", "image": "busybox" }] } }
        }
    }))
    .expect("a Deployment")
}

/// KEDA's HPA for a ScaledObject `worker`: one External metric, AverageValue 5, min 1, max 10,
/// and a scale-up policy of 2 pods per minute.
fn hpa() -> HorizontalPodAutoscaler {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": { "name": "keda-hpa-worker", "namespace": "default" },
        "spec": {
            "scaleTargetRef": { "apiVersion": "apps/v1", "kind": "Deployment", "name": "worker" },
            "minReplicas": 1,
            "maxReplicas": 10,
            "metrics": [{
                "type": "External",
                "external": {
                    "metric": { "name": "s0-redis-jobs",
                                "selector": { "matchLabels": { "scaledobject.keda.sh/name": "worker" } } },
                    "target": { "type": "AverageValue", "averageValue": "5" }
                }
            }],
            "behavior": { "scaleUp": { "policies": [{ "type": "Pods", "value": 2, "periodSeconds": 60 }] } }
        }
    }))
    .expect("an HPA")
}

fn condition(hpa: &HorizontalPodAutoscaler, type_: &str) -> (String, String) {
    let c = hpa
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == type_))
        .unwrap_or_else(|| panic!("no {type_} condition: {hpa:?}"));
    (c.status.clone(), c.reason.clone().unwrap_or_default())
}

#[tokio::test]
async fn the_hpa_scales_by_its_policy_and_reports_status() {
    let server = MemKube::new();
    let client = server.client();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(client.clone(), "default");
    deployments
        .create(&PostParams::default(), &deployment(1))
        .await
        .expect("create Deployment");
    // Creation ignores `.status` (a subresource): the workload's controller would set it.
    deployments
        .patch_status(
            "worker",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "status": { "replicas": 1, "readyReplicas": 1 } })),
        )
        .await
        .expect("status");
    hpas.create(&PostParams::default(), &hpa())
        .await
        .expect("create HPA");
    let values = Arc::new(Values::default());
    *values.value.lock().expect("lock") = 40.0;
    let mut controller = HpaController::new(client.clone(), values.clone(), HpaSettings::default());

    // 40 / 5 = 8 replicas wanted; the Pods policy allows 1 + 2 within the minute.
    controller.sync_all().await;
    let scale = deployments.get_scale("worker").await.expect("scale");
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(3));
    let written = hpas.get("keda-hpa-worker").await.expect("HPA");
    let status = written.status.clone().expect("status written");
    assert_eq!(status.desired_replicas, 3);
    assert_eq!(status.current_replicas, Some(1));
    assert!(status.last_scale_time.is_some());
    assert_eq!(
        condition(&written, "ScalingActive"),
        ("True".into(), "ValidMetricFound".into())
    );
    assert_eq!(
        condition(&written, "ScalingLimited"),
        ("True".into(), "ScaleUpLimit".into())
    );
    let current = &status.current_metrics.expect("current metrics")[0];
    let external = current.external.as_ref().expect("external");
    assert_eq!(external.metric.name, "s0-redis-jobs");
    assert_eq!(
        external.current.value.as_ref().map(|q| q.0.as_str()),
        Some("40")
    );
    assert_eq!(
        values.asked.lock().expect("lock").first().cloned(),
        Some(("default".into(), "worker".into(), "s0-redis-jobs".into())),
        "the ScaledObject is named by the metric's selector"
    );

    // At 0 replicas (keda-rs' operator scaled to zero) the HPA is disabled and asks nothing.
    deployments
        .patch_scale(
            "worker",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "spec": { "replicas": 0 } })),
        )
        .await
        .expect("scale to 0");
    deployments
        .patch_status(
            "worker",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "status": { "replicas": 0 } })),
        )
        .await
        .expect("status 0");
    let asked_before = values.asked.lock().expect("lock").len();
    controller.sync_all().await;
    let scale = deployments.get_scale("worker").await.expect("scale");
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(0));
    assert_eq!(values.asked.lock().expect("lock").len(), asked_before);
    let written = hpas.get("keda-hpa-worker").await.expect("HPA");
    assert_eq!(
        condition(&written, "ScalingActive"),
        ("False".into(), "ScalingDisabled".into())
    );
    // The operator reads that as healthy (keda-rs owns 0 <-> 1).
    let health = keda_operator::hpa::hpa_health(&written).expect("health");
    assert_eq!(health.status, "True");
}
