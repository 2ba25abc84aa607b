//! The HTTP side: KEDA's validation paths, AdmissionReview v1 in and out, and the probes.
//!
//! Every answer to a review that could be read is an `AdmissionReview` with status 200 (the API
//! server reads `allowed` from it): a refusal is `allowed: false` with
//! `status: {code: 403, reason: Forbidden, message}`, as controller-runtime writes KEDA's, and an
//! object that does not decode is `allowed: false` with code 400. A body that is no
//! AdmissionReview gets HTTP 400; a ScaledObject review before the caches have listed gets HTTP
//! 503. Both make the API server apply the webhook's `failurePolicy`.

use std::sync::Arc;

use actix_web::{HttpResponse, web};
use keda_api::cloud_event_source::{CloudEventSource, ClusterCloudEventSource};
use keda_api::scaled_job::ScaledJob;
use keda_api::scaled_object::ScaledObject;
use keda_api::trigger_authentication::{ClusterTriggerAuthentication, TriggerAuthentication};
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube::core::{DynamicObject, Status};
use serde::de::DeserializeOwned;

use crate::cache::Caches;
use crate::metrics::Metrics;
use crate::rules::{self, Denial};

/// KEDA's path of the ScaledObject webhook.
pub const SCALED_OBJECT_PATH: &str = "/validate-keda-sh-v1alpha1-scaledobject";
/// KEDA's path of the ScaledJob webhook.
pub const SCALED_JOB_PATH: &str = "/validate-keda-sh-v1alpha1-scaledjob";
/// KEDA's path of the TriggerAuthentication webhook.
pub const TRIGGER_AUTHENTICATION_PATH: &str = "/validate-keda-sh-v1alpha1-triggerauthentication";
/// KEDA's path of the ClusterTriggerAuthentication webhook.
pub const CLUSTER_TRIGGER_AUTHENTICATION_PATH: &str =
    "/validate-keda-sh-v1alpha1-clustertriggerauthentication";

/// KEDA's path of the CloudEventSource webhook.
pub const CLOUD_EVENT_SOURCE_PATH: &str = "/validate-eventing-keda-sh-v1alpha1-cloudeventsource";
/// KEDA's path of the ClusterCloudEventSource webhook.
pub const CLUSTER_CLOUD_EVENT_SOURCE_PATH: &str =
    "/validate-eventing-keda-sh-v1alpha1-clustercloudeventsource";

/// The largest review body read: an object may be 1.5 MiB and an update carries two.
pub const MAX_REVIEW_BYTES: usize = 4 * 1024 * 1024;

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    /// The watch caches.
    pub caches: Arc<Caches>,
    /// The metrics.
    pub metrics: Arc<Metrics>,
    /// What namespaced TriggerAuthentications may make the operator do with its identity
    /// (`--allow-namespace-vault-operator-identity`, `--bound-token-service-accounts`: give the
    /// webhook the operator's values).
    pub identity: keda_api::identity::IdentityPolicy,
    /// Where KEDA's `KEDAScalerInfo` Events go (reporter `keda-admission`, as KEDA's webhook);
    /// `None`: none are published.
    pub events: Option<kube::runtime::events::Recorder>,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("caches", &self.caches)
            .field("metrics", &self.metrics)
            .field("identity", &self.identity)
            .field("events", &self.events.is_some())
            .finish()
    }
}

/// KEDA's reason of the Event that repeats an admission warning (`eventreason.KEDAScalersInfo`).
pub const KEDA_SCALER_INFO: &str = "KEDAScalerInfo";

/// The most `KEDAScalerInfo` publishes in flight at once.
const MAX_WARNING_PUBLISHES: usize = 64;

/// Publishes each admission warning of `so` as a Normal `KEDAScalerInfo` Event, as KEDA's
/// webhook does, in the background (the answer never waits for it). The cooldown warning gets
/// its own action: kube's recorder would fold a second note under the same type, reason and
/// action into a repeat of the first.
fn publish_warnings(state: &AppState, so: &ScaledObject, warnings: &[&'static str]) {
    use kube::Resource;
    let Some(recorder) = state.events.clone() else {
        return;
    };
    let reference = so.object_ref(&());
    let events: Vec<kube::runtime::events::Event> = warnings
        .iter()
        .map(|w| kube::runtime::events::Event {
            type_: kube::runtime::events::EventType::Normal,
            reason: KEDA_SCALER_INFO.to_string(),
            note: Some((*w).to_string()),
            action: if *w == rules::COOLDOWN_PERIOD_NOT_RELEVANT {
                "CooldownPeriodNotRelevant".to_string()
            } else {
                KEDA_SCALER_INFO.to_string()
            },
            secondary: None,
        })
        .collect();
    // At most this many publishes in flight: a burst of admissions with warnings drops the
    // Events beyond it (they only repeat what the answer already warned) instead of piling up
    // tasks and API calls.
    static IN_FLIGHT: tokio::sync::Semaphore =
        tokio::sync::Semaphore::const_new(MAX_WARNING_PUBLISHES);
    let Ok(permit) = IN_FLIGHT.try_acquire() else {
        tracing::debug!(
            "KEDAScalerInfo Events dropped: {MAX_WARNING_PUBLISHES} publishes in flight"
        );
        return;
    };
    actix_web::rt::spawn(async move {
        let _permit = permit;
        for event in events {
            if let Err(error) = recorder.publish(&event, &reference).await {
                tracing::debug!(%error, "publishing a KEDAScalerInfo Event failed");
            }
        }
    });
}

/// Routes of the TLS port: the six validation paths and the probes.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.app_data(web::PayloadConfig::new(MAX_REVIEW_BYTES))
        .route(SCALED_OBJECT_PATH, web::post().to(scaled_object))
        .route(SCALED_JOB_PATH, web::post().to(scaled_job))
        .route(
            TRIGGER_AUTHENTICATION_PATH,
            web::post().to(trigger_authentication),
        )
        .route(
            CLUSTER_TRIGGER_AUTHENTICATION_PATH,
            web::post().to(cluster_trigger_authentication),
        )
        .route(CLOUD_EVENT_SOURCE_PATH, web::post().to(cloud_event_source))
        .route(
            CLUSTER_CLOUD_EVENT_SOURCE_PATH,
            web::post().to(cluster_cloud_event_source),
        )
        .route("/healthz", web::get().to(healthz))
        .route("/readyz", web::get().to(readyz));
}

/// Routes of the probe port: `/healthz` and `/readyz`.
pub fn configure_probes(cfg: &mut web::ServiceConfig) {
    cfg.route("/healthz", web::get().to(healthz))
        .route("/readyz", web::get().to(readyz));
}

/// Routes of the plain metrics port: `/metrics` and the probes.
pub fn configure_metrics_port(cfg: &mut web::ServiceConfig) {
    cfg.route("/metrics", web::get().to(prometheus))
        .route("/healthz", web::get().to(healthz))
        .route("/readyz", web::get().to(readyz));
}

async fn prometheus(state: web::Data<AppState>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/openmetrics-text; version=1.0.0; charset=utf-8")
        .body(state.metrics.encode())
}

async fn healthz() -> HttpResponse {
    HttpResponse::Ok().body("ok")
}

async fn readyz(state: web::Data<AppState>) -> HttpResponse {
    if state.caches.synced() {
        HttpResponse::Ok().body("ok")
    } else {
        HttpResponse::ServiceUnavailable().body("caches not listed yet")
    }
}

/// A review's request and its typed object (and old object), or the answer to give instead.
struct Review<K> {
    request: AdmissionRequest<DynamicObject>,
    object: K,
    old_object: Option<K>,
}

fn bad_request(message: String) -> HttpResponse {
    HttpResponse::BadRequest().body(message)
}

fn review_answer(response: AdmissionResponse) -> HttpResponse {
    HttpResponse::Ok().json(response.into_review())
}

fn refused(
    request: &AdmissionRequest<DynamicObject>,
    code: u16,
    reason: &str,
    message: String,
) -> AdmissionResponse {
    let mut response = AdmissionResponse::from(request).deny(message.clone());
    response.result = Status::failure(&message, reason).with_code(code);
    response
}

fn decode<K: DeserializeOwned>(object: &DynamicObject) -> Result<K, serde_json::Error> {
    serde_json::to_value(object).and_then(serde_json::from_value)
}

/// Reads a review; `Err` is the HTTP answer (400 for no review, an AdmissionReview with code
/// 400 for an object that does not decode, `allowed` for operations other than CREATE and
/// UPDATE).
fn read<K: DeserializeOwned>(body: &[u8], kind: &str) -> Result<Review<K>, Box<HttpResponse>> {
    let review: AdmissionReview<DynamicObject> = serde_json::from_slice(body).map_err(|e| {
        Box::new(bad_request(format!(
            "the body is not an AdmissionReview: {e}"
        )))
    })?;
    let request: AdmissionRequest<DynamicObject> = review.try_into().map_err(|e| {
        Box::new(bad_request(format!(
            "the AdmissionReview has no request: {e}"
        )))
    })?;
    if !matches!(request.operation, Operation::Create | Operation::Update) {
        return Err(Box::new(review_answer(AdmissionResponse::from(&request))));
    }
    let undecodable = |request: &AdmissionRequest<DynamicObject>, e: serde_json::Error| {
        review_answer(refused(
            request,
            400,
            "BadRequest",
            format!("the {kind} cannot be decoded: {e}"),
        ))
    };
    let object = match request.object.as_ref().map(decode::<K>) {
        Some(Ok(object)) => object,
        Some(Err(e)) => return Err(Box::new(undecodable(&request, e))),
        None => {
            return Err(Box::new(review_answer(refused(
                &request,
                400,
                "BadRequest",
                format!("the review carries no {kind}"),
            ))));
        }
    };
    let old_object = match request.old_object.as_ref().map(decode::<K>) {
        Some(Ok(old)) => Some(old),
        Some(Err(e)) => return Err(Box::new(undecodable(&request, e))),
        None => None,
    };
    Ok(Review {
        request,
        object,
        old_object,
    })
}

/// KEDA skips validation of an update that only removes finalizers (the spec unchanged, fewer
/// finalizers): an object being deleted must be able to drop its finalizer whatever else is
/// wrong with it or the cluster.
fn removes_finalizer_only<K: kube::Resource + serde::Serialize>(
    object: &K,
    old: Option<&K>,
) -> bool {
    let Some(old) = old else { return false };
    let spec = |k: &K| {
        serde_json::to_value(k)
            .ok()
            .and_then(|v| v.get("spec").cloned())
    };
    object.meta().finalizers.as_ref().map_or(0, Vec::len)
        < old.meta().finalizers.as_ref().map_or(0, Vec::len)
        && spec(object) == spec(old)
}

fn answer(request: &AdmissionRequest<DynamicObject>, verdict: Result<(), Denial>) -> HttpResponse {
    match verdict {
        Ok(()) => review_answer(AdmissionResponse::from(request)),
        Err(denial) => review_answer(refused(request, 403, "Forbidden", denial.message)),
    }
}

fn action(request: &AdmissionRequest<DynamicObject>) -> &'static str {
    match request.operation {
        Operation::Update => "update",
        _ => "create",
    }
}

async fn scaled_object(state: web::Data<AppState>, body: web::Bytes) -> HttpResponse {
    let review = match read::<ScaledObject>(&body, "ScaledObject") {
        Ok(review) => review,
        Err(answer) => return *answer,
    };
    if removes_finalizer_only(&review.object, review.old_object.as_ref()) {
        return review_answer(AdmissionResponse::from(&review.request));
    }
    if !state.caches.synced() {
        return HttpResponse::ServiceUnavailable().body("the webhook's caches have not listed yet");
    }
    let namespace = review.request.namespace.clone().unwrap_or_default();
    let action = action(&review.request);
    state.metrics.validation(&namespace, action);
    let verdict = rules::check_scaled_object(&review.object, review.request.dry_run, &state.caches);
    match verdict {
        Err(denial) => {
            for reason in &denial.reasons {
                state.metrics.error(&namespace, action, reason);
            }
            tracing::info!(namespace, name = %review.request.name, %action, reason = %denial.message, "ScaledObject refused");
            answer(&review.request, Err(denial))
        }
        Ok(()) => {
            // KEDA's warnings go with an admission only (its validator drops them on an error).
            let warnings = rules::scaled_object_warnings(&review.object);
            let mut response = AdmissionResponse::from(&review.request);
            if !warnings.is_empty() {
                response.warnings = Some(warnings.iter().map(|w| (*w).to_string()).collect());
                // A dry run has no side effects (the webhook is declared `sideEffects: None`).
                if !review.request.dry_run {
                    publish_warnings(&state, &review.object, &warnings);
                }
            }
            review_answer(response)
        }
    }
}

async fn scaled_job(state: web::Data<AppState>, body: web::Bytes) -> HttpResponse {
    let review = match read::<ScaledJob>(&body, "ScaledJob") {
        Ok(review) => review,
        Err(answer) => return *answer,
    };
    if removes_finalizer_only(&review.object, review.old_object.as_ref()) {
        return review_answer(AdmissionResponse::from(&review.request));
    }
    let verdict = rules::check_scaled_job(&review.object);
    if let Err(denial) = &verdict {
        // KEDA counts a ScaledJob's trigger errors in the ScaledObject error counter.
        let namespace = review.request.namespace.clone().unwrap_or_default();
        for reason in &denial.reasons {
            state
                .metrics
                .error(&namespace, action(&review.request), reason);
        }
    }
    answer(&review.request, verdict)
}

async fn trigger_authentication(state: web::Data<AppState>, body: web::Bytes) -> HttpResponse {
    match read::<TriggerAuthentication>(&body, "TriggerAuthentication") {
        Ok(review) => answer(
            &review.request,
            rules::check_trigger_authentication(&review.object, &state.identity),
        ),
        Err(answer) => *answer,
    }
}

async fn cluster_trigger_authentication(body: web::Bytes) -> HttpResponse {
    match read::<ClusterTriggerAuthentication>(&body, "ClusterTriggerAuthentication") {
        Ok(review) => answer(
            &review.request,
            rules::check_cluster_trigger_authentication(&review.object),
        ),
        Err(answer) => *answer,
    }
}

async fn cloud_event_source(body: web::Bytes) -> HttpResponse {
    match read::<CloudEventSource>(&body, "CloudEventSource") {
        Ok(review) if removes_finalizer_only(&review.object, review.old_object.as_ref()) => {
            review_answer(AdmissionResponse::from(&review.request))
        }
        Ok(review) => answer(
            &review.request,
            rules::check_cloud_event_source(&review.object.spec),
        ),
        Err(answer) => *answer,
    }
}

async fn cluster_cloud_event_source(body: web::Bytes) -> HttpResponse {
    match read::<ClusterCloudEventSource>(&body, "ClusterCloudEventSource") {
        Ok(review) if removes_finalizer_only(&review.object, review.old_object.as_ref()) => {
            review_answer(AdmissionResponse::from(&review.request))
        }
        Ok(review) => answer(
            &review.request,
            rules::check_cloud_event_source(&review.object.spec.spec),
        ),
        Err(answer) => *answer,
    }
}
