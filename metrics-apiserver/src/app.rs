//! The routes of the secure port and the plain metrics port.

use std::any::Any;
use std::sync::Arc;
use std::time::Instant;

use actix_web::dev::{Extensions, ServiceRequest};
use actix_web::http::header::ContentType;
use actix_web::{HttpRequest, HttpResponse, web};
use keda_api::external_metrics::{ExternalMetricValueList, ServiceErrorReason};
use rustls_pki_types::CertificateDer;
use tracing::{debug, warn};

use crate::authn::{Authenticator, UserInfo};
use crate::authz::{AccessRequest, CachedAuthorizer};
use crate::discovery;
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::operator_client::{MetricSource, OperatorError};
use crate::selector::scaled_object_name;

/// Everything the handlers share.
#[derive(Clone)]
pub struct AppState {
    /// Who is calling.
    pub authenticator: Arc<Authenticator>,
    /// Whether they may.
    pub authorizer: Arc<CachedAuthorizer>,
    /// Where values come from (the operator).
    pub source: Arc<dyn MetricSource>,
    /// Our own metrics.
    pub metrics: Arc<Metrics>,
}

/// The client certificate chain of a connection (end entity first), captured when the
/// connection is accepted.
#[derive(Clone, Debug)]
pub struct PeerCertificates(pub Vec<CertificateDer<'static>>);

/// actix `on_connect` hook of the secure port: keeps the client's certificate chain for the
/// request-header authenticator.
pub fn capture_peer_certificates(connection: &dyn Any, extensions: &mut Extensions) {
    use actix_tls::accept::rustls_0_23::TlsStream;
    if let Some(stream) = connection.downcast_ref::<TlsStream<actix_web::rt::net::TcpStream>>() {
        let (_, session) = stream.get_ref();
        if let Some(chain) = session.peer_certificates() {
            extensions.insert(PeerCertificates(
                chain.iter().map(|c| c.clone().into_owned()).collect(),
            ));
        }
    }
}

/// Registers the routes of the secure port.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/healthz", web::get().to(healthy))
        .route("/livez", web::get().to(healthy))
        .route("/readyz", web::get().to(ready))
        .route("/apis", web::get().to(apis))
        .route("/apis/external.metrics.k8s.io", web::get().to(api_group))
        .route(
            "/apis/external.metrics.k8s.io/v1beta1",
            web::get().to(api_resources),
        )
        .route(
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{metric}",
            web::get().to(metric_values),
        )
        .route("/openapi/v2", web::get().to(openapi_v2))
        .route("/openapi/v3", web::get().to(openapi_v3))
        .route(
            discovery::OPENAPI_V3_GROUP_PATH,
            web::get().to(openapi_v3_group),
        )
        .default_service(web::to(not_found));
}

/// The kind of a path, for the request metrics.
fn path_kind(path: &str) -> &'static str {
    match path {
        "/healthz" | "/livez" | "/readyz" => "health",
        "/apis" | "/apis/external.metrics.k8s.io" | "/apis/external.metrics.k8s.io/v1beta1" => {
            "discovery"
        }
        p if p.starts_with("/apis/external.metrics.k8s.io/v1beta1/namespaces/") => "metric",
        p if p.starts_with("/openapi/") => "openapi",
        _ => "other",
    }
}

/// Wraps the secure port's service (`App::wrap_fn`): records every request's status and
/// latency.
pub fn record<S, B>(
    request: ServiceRequest,
    service: &S,
) -> impl std::future::Future<Output = Result<actix_web::dev::ServiceResponse<B>, actix_web::Error>>
+ use<S, B>
where
    S: actix_web::dev::Service<
            ServiceRequest,
            Response = actix_web::dev::ServiceResponse<B>,
            Error = actix_web::Error,
        >,
    S::Future: 'static,
{
    let started = Instant::now();
    let kind = path_kind(request.path());
    let metrics = request
        .app_data::<web::Data<AppState>>()
        .map(|state| Arc::clone(&state.metrics));
    let response = service.call(request);
    async move {
        let response = response.await?;
        if let Some(metrics) = metrics {
            metrics.request(kind, response.status().as_u16(), started.elapsed());
        }
        Ok(response)
    }
}

fn authenticate(request: &HttpRequest, state: &AppState) -> Result<UserInfo, ApiError> {
    let peer = request.conn_data::<PeerCertificates>();
    state
        .authenticator
        .authenticate(peer.map(|p| p.0.as_slice()), request.headers())
        .map_err(|e| {
            debug!(error = %e, path = request.path(), "request not authenticated");
            ApiError::Unauthenticated(e.to_string())
        })
}

async fn healthy() -> HttpResponse {
    HttpResponse::Ok()
        .content_type(ContentType::plaintext())
        .body("ok")
}

/// Ready once the request-header settings are loaded: before that every request would be
/// answered 401.
async fn ready(state: web::Data<AppState>) -> HttpResponse {
    if state.authenticator.is_configured() {
        HttpResponse::Ok()
            .content_type(ContentType::plaintext())
            .body("ok")
    } else {
        HttpResponse::ServiceUnavailable()
            .content_type(ContentType::plaintext())
            .body("request-header CA not loaded yet")
    }
}

async fn apis(request: HttpRequest, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    authenticate(&request, &state)?;
    Ok(HttpResponse::Ok().json(discovery::api_group_list()))
}

async fn api_group(
    request: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    authenticate(&request, &state)?;
    Ok(HttpResponse::Ok().json(discovery::api_group()))
}

async fn api_resources(
    request: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    authenticate(&request, &state)?;
    Ok(HttpResponse::Ok().json(discovery::api_resource_list()))
}

async fn openapi_v2(
    request: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    authenticate(&request, &state)?;
    Ok(HttpResponse::Ok().json(discovery::openapi_v2()))
}

async fn openapi_v3(
    request: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    authenticate(&request, &state)?;
    Ok(HttpResponse::Ok().json(discovery::openapi_v3_index()))
}

async fn openapi_v3_group(
    request: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    authenticate(&request, &state)?;
    Ok(HttpResponse::Ok().json(discovery::openapi_v3_group()))
}

async fn not_found(
    request: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    authenticate(&request, &state)?;
    Err(ApiError::NoSuchPath(request.path().to_string()))
}

/// `GET /apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{metric}?labelSelector=`:
/// authenticate, authorize, find the ScaledObject in the selector, ask the operator.
async fn metric_values(
    request: HttpRequest,
    path: web::Path<(String, String)>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let user = authenticate(&request, &state)?;
    let (namespace, metric) = path.into_inner();
    let access = AccessRequest {
        user,
        namespace,
        metric,
    };
    let decision = state.authorizer.authorize(&access).await.map_err(|e| {
        warn!(error = %e, "SubjectAccessReview failed");
        ApiError::AuthorizationFailed(e.to_string())
    })?;
    if !decision.allowed {
        return Err(ApiError::Forbidden {
            user: access.user.name,
            metric: access.metric,
            namespace: access.namespace,
            reason: decision.reason,
        });
    }
    let query =
        web::Query::<Vec<(String, String)>>::from_query(request.query_string()).map_err(|e| {
            ApiError::InvalidSelector {
                selector: request.query_string().to_string(),
                reason: e.to_string(),
            }
        })?;
    let selector = query
        .iter()
        .find(|(k, _)| k == "labelSelector")
        .map(|(_, v)| v.as_str());
    let scaled_object = scaled_object_name(selector)?;
    state.metrics.operator_call_started();
    let started = Instant::now();
    let result = state
        .source
        .metric_values(&access.namespace, &scaled_object, &access.metric)
        .await;
    state
        .metrics
        .operator_call(result.as_ref().err(), started.elapsed());
    let items = result.map_err(|e| {
        let error = api_error(e);
        if matches!(error, ApiError::NotFound(_)) {
            debug!(%error, "no such metric");
        } else {
            warn!(%error, namespace = %access.namespace, scaled_object, metric = %access.metric, "no metric value");
        }
        error
    })?;
    Ok(HttpResponse::Ok().json(ExternalMetricValueList { items }))
}

/// The one place operator failures become HTTP statuses.
pub fn api_error(error: OperatorError) -> ApiError {
    match error {
        OperatorError::Connect { .. } | OperatorError::Connection { .. } => {
            ApiError::OperatorUnavailable(error.to_string())
        }
        OperatorError::Timeout { .. } => ApiError::OperatorTimeout(error.to_string()),
        OperatorError::Service { error, .. } => match error.reason {
            ServiceErrorReason::ScaledObjectNotFound | ServiceErrorReason::MetricNotFound => {
                ApiError::NotFound(error.message)
            }
            // The operator refused this process' client certificate: a deployment problem the
            // HPA cannot fix by asking again, but no value either way.
            ServiceErrorReason::Unavailable | ServiceErrorReason::Forbidden => {
                ApiError::OperatorUnavailable(error.message)
            }
            ServiceErrorReason::Timeout => ApiError::OperatorTimeout(error.message),
            ServiceErrorReason::ScalerFailed | ServiceErrorReason::BadRequest => {
                ApiError::Internal(error.message)
            }
        },
        OperatorError::Protocol { .. } => ApiError::Internal(error.to_string()),
    }
}

/// Registers the routes of the plain metrics port.
pub fn configure_metrics_port(cfg: &mut web::ServiceConfig) {
    cfg.route("/metrics", web::get().to(prometheus));
}

async fn prometheus(metrics: web::Data<Metrics>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/openmetrics-text; version=1.0.0; charset=utf-8")
        .body(metrics.encode())
}
