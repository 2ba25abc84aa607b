//! The webhook over TLS, asked by a `kube` client as the API server asks it, its caches fed by
//! memkube's watches: KEDA's examples allowed, each KEDA rejection refused with KEDA's words.
#![allow(clippy::unwrap_used)]

#[path = "../common/mod.rs"]
mod common;

use std::sync::Arc;

use common::{Webhook, cluster, deployment, redis, review, root, scaled_object};
use keda_webhook::app::{
    CLOUD_EVENT_SOURCE_PATH, CLUSTER_CLOUD_EVENT_SOURCE_PATH, CLUSTER_TRIGGER_AUTHENTICATION_PATH,
    SCALED_JOB_PATH, SCALED_OBJECT_PATH, TRIGGER_AUTHENTICATION_PATH,
};
use keda_webhook::cache::Caches;
use kube::core::admission::AdmissionResponse;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

fn fixtures(dir: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut paths: Vec<_> = std::fs::read_dir(root().join("tests/fixtures").join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    for path in paths {
        let text = std::fs::read_to_string(&path).unwrap();
        let value: Value = serde_yaml::from_str(&text).unwrap();
        out.push((
            path.file_name().unwrap().to_string_lossy().into_owned(),
            value,
        ));
    }
    out
}

fn refused(response: &AdmissionResponse) -> (u16, &str) {
    assert!(!response.allowed, "expected a refusal: {response:?}");
    (response.result.code, response.result.message.as_str())
}

fn allowed(response: &AdmissionResponse, what: &str) {
    assert!(
        response.allowed,
        "{what}: refused with {:?}",
        response.result.message
    );
}

async fn create(webhook: &Webhook, object: &Value) -> AdmissionResponse {
    webhook
        .answer(SCALED_OBJECT_PATH, &review("CREATE", object, None, false))
        .await
}

/// Seeds a ScaledObject and waits until the webhook's cache holds it.
async fn seed_scaled_object(kube: &memkube::MemKube, webhook: &Webhook, object: &Value) {
    let before = webhook.state.caches.scaled_objects.len();
    kube.seed(object).unwrap();
    for _ in 0..1000 {
        if webhook.state.caches.scaled_objects.len() > before {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the ScaledObject never reached the cache");
}

async fn seed_and_wait<F: Fn(&Caches) -> bool>(
    kube: &memkube::MemKube,
    webhook: &Webhook,
    object: &Value,
    arrived: F,
) {
    kube.seed(object).unwrap();
    for _ in 0..1000 {
        if arrived(&webhook.state.caches) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the object never reached the cache");
}

fn hpa(name: &str, target: &str, owner: Option<&str>, annotations: Value) -> Value {
    let mut hpa = json!({
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": "team", "annotations": annotations},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
            "minReplicas": 1,
            "maxReplicas": 5,
        },
    });
    if let Some(owner) = owner {
        hpa["metadata"]["ownerReferences"] = json!([{
            "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "name": owner,
            "uid": "6b1a3c52-0000-4000-8000-000000000001", "controller": true,
        }]);
    }
    hpa
}

fn cpu(container: Option<&str>) -> Value {
    let mut metadata = json!({"value": "60"});
    if let Some(c) = container {
        metadata["containerName"] = json!(c);
    }
    json!({"type": "cpu", "metricType": "Utilization", "metadata": metadata})
}

mod cluster_rules;
mod examples;
mod protocol;
