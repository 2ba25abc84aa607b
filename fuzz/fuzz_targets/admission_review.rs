//! The admission webhook's HTTP side (`keda_webhook::app::configure`): arbitrary bytes POSTed
//! as the body of an AdmissionReview to each of the six validation paths, against caches that
//! have listed (a Deployment with resource requests, another ScaledObject and an HPA, so the
//! cross-object rules run).
//!
//! Input: one byte choosing the path, then the body.
//!
//! Checks beyond "no panic": every answer is 200 with an AdmissionReview (whose `response.uid`
//! is the request's) or 400; a CREATE the webhook allows passes `keda_api::validation` (for a
//! ScaledObject, but for the resource-trigger rule, which the webhook checks against the
//! workload instead).
#![no_main]

use std::cell::RefCell;
use std::sync::{Arc, OnceLock};

use actix_web::{App, test, web};
use keda_api::validation::{
    ValidationError, validate_cluster_trigger_authentication, validate_scaled_job,
    validate_scaled_object_admission, validate_trigger_authentication,
};
use keda_webhook::app::{self, AppState};
use keda_webhook::cache::Caches;
use keda_webhook::metrics::Metrics;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionReview, Operation};
use libfuzzer_sys::fuzz_target;
use serde::de::DeserializeOwned;

const PATHS: [&str; 6] = [
    app::SCALED_OBJECT_PATH,
    app::SCALED_JOB_PATH,
    app::TRIGGER_AUTHENTICATION_PATH,
    app::CLUSTER_TRIGGER_AUTHENTICATION_PATH,
    app::CLOUD_EVENT_SOURCE_PATH,
    app::CLUSTER_CLOUD_EVENT_SOURCE_PATH,
];

fn caches() -> Arc<Caches> {
    static CACHES: OnceLock<Arc<Caches>> = OnceLock::new();
    Arc::clone(CACHES.get_or_init(|| {
        let caches = Caches::new();
        caches.deployments.apply(
            &serde_json::from_value(serde_json::json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"selector": {}, "template": {"spec": {"containers": [
                    {"name": "app", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}
                ]}}}
            }))
            .expect("a Deployment"),
        );
        caches.scaled_objects.apply(
            &serde_json::from_value(serde_json::json!({
                "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
                "metadata": {"name": "taken", "namespace": "default"},
                "spec": {"scaleTargetRef": {"name": "busy"},
                         "triggers": [{"type": "cpu", "metricType": "Utilization", "metadata": {"value": "50"}}]}
            }))
            .expect("a ScaledObject"),
        );
        caches.hpas.apply(
            &serde_json::from_value(serde_json::json!({
                "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "hand-made", "namespace": "default"},
                "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "other"},
                         "maxReplicas": 3}
            }))
            .expect("an HPA"),
        );
        caches.mark_listed();
        Arc::new(caches)
    }))
}

thread_local! {
    static SYSTEM: RefCell<actix_web::rt::SystemRunner> = RefCell::new(actix_web::rt::System::new());
}

/// The object of a CREATE review, decoded as the webhook decodes it.
fn created<K: DeserializeOwned>(body: &[u8]) -> Option<K> {
    let review: AdmissionReview<DynamicObject> = serde_json::from_slice(body).ok()?;
    let request = review.request?;
    if request.operation != Operation::Create {
        return None;
    }
    serde_json::to_value(request.object?)
        .and_then(serde_json::from_value)
        .ok()
}

fuzz_target!(|data: &[u8]| {
    let Some((&choice, body)) = data.split_first() else {
        return;
    };
    let path_index = usize::from(choice) % PATHS.len();
    let path = PATHS[path_index];
    let (status, answer) = SYSTEM.with(|system| {
        system.borrow().block_on(async {
            let service = test::init_service(
                App::new()
                    .app_data(web::Data::new(AppState {
                        caches: caches(),
                        metrics: Arc::new(Metrics::new()),
                        // The shipped identity rules (no namespace borrows the operator's).
                        identity: Default::default(),
                        // No API server to publish KEDAScalerInfo Events to.
                        events: None,
                    }))
                    .configure(app::configure),
            )
            .await;
            let request = test::TestRequest::post()
                .uri(path)
                .insert_header(("content-type", "application/json"))
                .set_payload(body.to_vec())
                .to_request();
            let response = test::call_service(&service, request).await;
            let status = response.status();
            (status, test::read_body(response).await)
        })
    });
    match status.as_u16() {
        400 => return,
        200 => {}
        other => panic!(
            "{path}: status {other}: {}",
            String::from_utf8_lossy(&answer)
        ),
    }
    let review: serde_json::Value = serde_json::from_slice(&answer)
        .unwrap_or_else(|e| panic!("{path}: a 200 that is not JSON ({e})"));
    // (serde_json's `Value` refuses some escapes in fields the typed review skips.)
    if let Ok(request) = serde_json::from_slice::<serde_json::Value>(body) {
        assert_eq!(
            review["response"]["uid"], request["request"]["uid"],
            "{path}: the answer is not for the request's uid"
        );
    }
    if review["response"]["allowed"] != serde_json::Value::Bool(true) {
        return;
    }
    let refused = match path_index {
        0 => created::<keda_api::ScaledObject>(body).and_then(|so| {
            validate_scaled_object_admission(&so)
                .err()
                .filter(|e| {
                    e.0.iter()
                        .any(|e| !matches!(e, ValidationError::ResourceTriggersNeedMinReplicas))
                })
                .map(|e| e.to_string())
        }),
        1 => created::<keda_api::ScaledJob>(body)
            .and_then(|sj| validate_scaled_job(&sj).err().map(|e| e.to_string())),
        2 => created::<keda_api::TriggerAuthentication>(body).and_then(|ta| {
            validate_trigger_authentication(&ta)
                .err()
                .map(|e| e.to_string())
        }),
        3 => created::<keda_api::ClusterTriggerAuthentication>(body).and_then(|cta| {
            validate_cluster_trigger_authentication(&cta)
                .err()
                .map(|e| e.to_string())
        }),
        _ => None,
    };
    if let Some(errors) = refused {
        panic!("{path}: a CREATE was allowed that validation refuses: {errors}");
    }
});
