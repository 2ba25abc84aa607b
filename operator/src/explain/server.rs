//! The operator's explain endpoint: `GET /explain/v1/namespaces/{ns}/scaledobjects/{name}`
//! answers the object's [`Explanation`] as JSON, to callers the [`Authorizer`] lets through.
//!
//! The token is read from `Authorization: Bearer ...`, or, when the request came through the
//! API server's service proxy (which authenticates the caller with their kubeconfig and then
//! drops their `Authorization` header), from [`PROXIED_TOKEN_HEADER`]. Every request is checked
//! before the object is looked up, so a refused caller learns nothing, not even whether the
//! object exists. Errors are JSON `{"error": "..."}` with 400, 401, 403, 404, 405 or 503.
//!
//! Plain HTTP on its own port, like `/metrics`: in a cluster it is reached through the API
//! server's service proxy (docs/explain.md), and the token it carries is only ever sent on to
//! the API server's `TokenReview`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use super::Explanation;
use super::auth::{Access, Authorizer, Refusal};
use crate::scale_loop::ScaleLoops;

/// The path prefix of the endpoint.
pub const PATH_PREFIX: &str = "/explain/v1/namespaces/";

/// The header that carries the caller's bearer token through the API server's service proxy.
pub const PROXIED_TOKEN_HEADER: &str = "x-keda-rs-authorization";

/// The resource a request names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectKind {
    /// `scaledobjects`.
    ScaledObject,
    /// `scaledjobs`.
    ScaledJob,
}

impl ObjectKind {
    /// The plural resource name.
    pub fn resource(self) -> &'static str {
        match self {
            ObjectKind::ScaledObject => "scaledobjects",
            ObjectKind::ScaledJob => "scaledjobs",
        }
    }
}

/// Why there is no explanation.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExplainError {
    /// The operator does not know the object: 404.
    #[error("{0}")]
    NotFound(String),
    /// This replica cannot answer now (not the leader, starting): 503.
    #[error("{0}")]
    Unavailable(String),
}

/// Where explanations come from: the scale loops of the running controllers.
pub trait Explainer: Send + Sync {
    /// The explanation of one object.
    ///
    /// # Errors
    /// See [`ExplainError`].
    fn explain(
        &self,
        kind: ObjectKind,
        namespace: &str,
        name: &str,
    ) -> Result<Explanation, ExplainError>;
}

impl Explainer for ScaleLoops {
    fn explain(
        &self,
        kind: ObjectKind,
        namespace: &str,
        name: &str,
    ) -> Result<Explanation, ExplainError> {
        match kind {
            ObjectKind::ScaledObject => ScaleLoops::explain(self, namespace, name).ok_or_else(|| {
                ExplainError::NotFound(format!(
                    "ScaledObject {namespace}/{name} is not known to the operator (not found, or in a namespace it does not watch)"
                ))
            }),
            ObjectKind::ScaledJob => Err(ExplainError::NotFound(
                "explain answers for ScaledObjects only".to_string(),
            )),
        }
    }
}

impl Explainer for crate::metrics_service::CurrentLoops {
    fn explain(
        &self,
        kind: ObjectKind,
        namespace: &str,
        name: &str,
    ) -> Result<Explanation, ExplainError> {
        let Some(loops) = self.get() else {
            return Err(ExplainError::Unavailable(
                "the ScaledObject controller is not running (starting, or not the leader)"
                    .to_string(),
            ));
        };
        Explainer::explain(&loops, kind, namespace, name)
    }
}

/// The endpoint: an explainer behind an authorizer.
#[derive(Clone)]
pub struct ExplainService {
    explainer: Arc<dyn Explainer>,
    authorizer: Arc<dyn Authorizer>,
}

fn json(status: StatusCode, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

fn error(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    let body = serde_json::to_vec(&serde_json::json!({ "error": message })).unwrap_or_default();
    let mut response = json(status, body);
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer"),
        );
    }
    response
}

/// `namespace`, kind and name from a request path.
fn parse_path(path: &str) -> Option<(String, ObjectKind, String)> {
    let rest = path.strip_prefix(PATH_PREFIX)?;
    let mut parts = rest.split('/');
    let namespace = parts.next().filter(|s| !s.is_empty())?;
    let kind = match parts.next()? {
        "scaledobjects" => ObjectKind::ScaledObject,
        "scaledjobs" => ObjectKind::ScaledJob,
        _ => return None,
    };
    let name = parts.next().filter(|s| !s.is_empty())?;
    if parts.next().is_some() {
        return None;
    }
    Some((namespace.to_string(), kind, name.to_string()))
}

/// The bearer token of a request: `Authorization`, else [`PROXIED_TOKEN_HEADER`].
fn bearer<B>(request: &Request<B>) -> Option<&str> {
    [header::AUTHORIZATION.as_str(), PROXIED_TOKEN_HEADER]
        .iter()
        .filter_map(|h| request.headers().get(*h))
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| {
            let (scheme, token) = v.trim().split_once(' ')?;
            scheme
                .eq_ignore_ascii_case("bearer")
                .then(|| token.trim())
                .filter(|t| !t.is_empty())
        })
        .next()
}

impl ExplainService {
    /// Answers from `explainer` to callers `authorizer` lets through.
    pub fn new(explainer: Arc<dyn Explainer>, authorizer: Arc<dyn Authorizer>) -> Self {
        ExplainService {
            explainer,
            authorizer,
        }
    }

    /// Answers one request.
    pub async fn respond<B>(&self, request: &Request<B>) -> Response<Full<Bytes>> {
        if request.method() != Method::GET {
            let mut response = error(StatusCode::METHOD_NOT_ALLOWED, "only GET is served");
            response
                .headers_mut()
                .insert(header::ALLOW, header::HeaderValue::from_static("GET"));
            return response;
        }
        let Some((namespace, kind, name)) = parse_path(request.uri().path()) else {
            return error(
                StatusCode::NOT_FOUND,
                "not found: GET /explain/v1/namespaces/{namespace}/scaledobjects/{name}",
            );
        };
        let Some(token) = bearer(request) else {
            return error(
                StatusCode::UNAUTHORIZED,
                "unauthenticated: send the caller's bearer token (Authorization or X-Keda-Rs-Authorization)",
            );
        };
        let access = Access {
            resource: kind.resource(),
            namespace: &namespace,
            name: &name,
        };
        if let Err(refusal) = self.authorizer.authorize(token, access).await {
            let status = match &refusal {
                Refusal::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
                Refusal::Forbidden(_) => StatusCode::FORBIDDEN,
                Refusal::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            };
            debug!(namespace, name, %refusal, "explain request refused");
            return error(status, &refusal.to_string());
        }
        match self.explainer.explain(kind, &namespace, &name) {
            Ok(explanation) => match serde_json::to_vec(&explanation) {
                Ok(body) => json(StatusCode::OK, body),
                Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
            },
            Err(ExplainError::NotFound(m)) => error(StatusCode::NOT_FOUND, &m),
            Err(ExplainError::Unavailable(m)) => error(StatusCode::SERVICE_UNAVAILABLE, &m),
        }
    }

    /// Serves on `listener` until `shutdown`.
    pub async fn serve(self, listener: TcpListener, shutdown: CancellationToken) {
        if let Ok(addr) = listener.local_addr() {
            info!(%addr, "explain endpoint listening");
        }
        let service = Arc::new(self);
        let mut connections = JoinSet::new();
        loop {
            let accepted = tokio::select! {
                () = shutdown.cancelled() => break,
                accepted = listener.accept() => accepted,
            };
            let stream = match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    debug!(error = %e, "explain endpoint: accept failed");
                    continue;
                }
            };
            let service = service.clone();
            let handler =
                hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
                    let service = service.clone();
                    async move { Ok::<_, Infallible>(service.respond(&request).await) }
                });
            connections.spawn(async move {
                let builder = hyper_util::server::conn::auto::Builder::new(
                    hyper_util::rt::TokioExecutor::new(),
                );
                if let Err(e) = builder
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), handler)
                    .await
                {
                    debug!(error = %e, "explain endpoint: connection ended with an error");
                }
            });
            while connections.try_join_next().is_some() {}
        }
        connections.shutdown().await;
    }
}

/// Binds `addr` for the explain endpoint.
///
/// # Errors
/// The address cannot be bound; the message names `--explain-bind-address`.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, crate::admin::AdminError> {
    crate::admin::bind(addr, "--explain-bind-address").await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_namespace_kind_and_name() {
        assert_eq!(
            parse_path("/explain/v1/namespaces/team/scaledobjects/orders"),
            Some(("team".into(), ObjectKind::ScaledObject, "orders".into()))
        );
        assert_eq!(
            parse_path("/explain/v1/namespaces/team/scaledjobs/batch"),
            Some(("team".into(), ObjectKind::ScaledJob, "batch".into()))
        );
        assert_eq!(parse_path("/explain/v1/namespaces/team/pods/x"), None);
        assert_eq!(parse_path("/explain/v1/namespaces//scaledobjects/x"), None);
        assert_eq!(
            parse_path("/explain/v1/namespaces/t/scaledobjects/x/y"),
            None
        );
        assert_eq!(parse_path("/metrics"), None);
    }

    #[test]
    fn the_token_comes_from_authorization_or_the_proxied_header() {
        let direct = Request::get("/")
            .header("Authorization", "Bearer abc")
            .body(())
            .expect("request");
        assert_eq!(bearer(&direct), Some("abc"));
        let proxied = Request::get("/")
            .header(PROXIED_TOKEN_HEADER, "bearer xyz")
            .body(())
            .expect("request");
        assert_eq!(bearer(&proxied), Some("xyz"));
        let basic = Request::get("/")
            .header("Authorization", "Basic dXNlcg==")
            .body(())
            .expect("request");
        assert_eq!(bearer(&basic), None);
        let empty = Request::get("/")
            .header("Authorization", "Bearer  ")
            .body(())
            .expect("request");
        assert_eq!(bearer(&empty), None);
    }
}
