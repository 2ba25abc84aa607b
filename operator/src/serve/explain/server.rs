//! The operator's explain endpoint: `GET /explain/v1/namespaces/{ns}/scaledobjects/{name}`
//! answers the object's [`Explanation`] as JSON, to callers the [`Authorizer`] lets through.
//!
//! The token is read from `Authorization: Bearer ...`, or, when the request came through the
//! API server's service proxy (which authenticates the caller with their kubeconfig and then
//! drops their `Authorization` header), from [`PROXIED_TOKEN_HEADER`]. Every request is checked
//! before the object is looked up, so a refused caller learns nothing, not even whether the
//! object exists. Errors are JSON `{"error": "..."}` with 400, 401, 403, 404, 405, 429 (the
//! review budget is spent, with `Retry-After`) or 503.
//!
//! Plain HTTP/1.1 on its own port, like `/metrics`: in a cluster it is reached through the API
//! server's service proxy (docs/explain.md), and the token it carries is only ever sent on to
//! the API server's `TokenReview`. Anyone who reaches the pod reaches the port, so its work is
//! bounded ([`ServerLimits`]): a connection cap (accepting waits while it is reached), a
//! request head of at most [`ServerLimits::max_head_bytes`] read within
//! [`ServerLimits::header_read_timeout`], one request per connection, an answer within
//! [`ServerLimits::request_timeout`], and a pause after a failed accept (a process out of file
//! descriptors would otherwise retry in a busy loop).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::Explanation;
use super::auth::{Access, Authorizer, Refusal, retry_after_seconds};
use crate::scaled_object::scale_loop::ScaleLoops;

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
        let shards = &self.config().shards;
        let info = shards.owner_info(namespace, name);
        match kind {
            ObjectKind::ScaledObject => {
                match super::of_last_poll(self.last_poll(namespace, name)) {
                    Some(mut explanation) => {
                        if let Some(me) = info.me {
                            explanation.shard = Some(super::document::ShardState {
                                owner: info.owner,
                                answered_by: me,
                                members: info.members,
                                owned_here: info.owned_here,
                            });
                        }
                        Ok(explanation)
                    }
                    None => match (info.me, info.owner) {
                        (Some(me), Some(owner)) if owner != me => {
                            Err(ExplainError::NotFound(format!(
                                "ScaledObject {namespace}/{name} is owned by operator replica {owner}; this is replica {me} (shards: ask {owner}, for example with --operator-url)"
                            )))
                        }
                        _ => Err(ExplainError::NotFound(format!(
                            "ScaledObject {namespace}/{name} is not known to the operator (not found, or in a namespace it does not watch)"
                        ))),
                    },
                }
            }
            ObjectKind::ScaledJob => Err(ExplainError::NotFound(
                "explain answers for ScaledObjects only".to_string(),
            )),
        }
    }
}

impl Explainer for crate::serve::metrics_service::CurrentLoops {
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

/// What one explain listener allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerLimits {
    /// Connections served at once; further ones wait in the listen backlog until one ends.
    pub max_connections: usize,
    /// How long a client may take to send its request head.
    pub header_read_timeout: Duration,
    /// How long the answer may take once the head is read (the reviews included).
    pub request_timeout: Duration,
    /// The largest request head, in bytes (hyper's floor is 8 KiB); a larger one is answered
    /// `431` and the connection closed.
    pub max_head_bytes: usize,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_connections: 64,
            header_read_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            max_head_bytes: 16 * 1024,
        }
    }
}

impl ServerLimits {
    /// The longest a connection is kept: its head, its answer, and five seconds to write it.
    pub fn connection_lifetime(&self) -> Duration {
        self.header_read_timeout + self.request_timeout + Duration::from_secs(5)
    }
}

/// The pause after a failed accept: 5 ms, doubling to 1 s, back to 5 ms after a success
/// (Go's `net/http` server does the same).
#[derive(Debug)]
pub struct AcceptBackoff {
    next: Duration,
}

impl AcceptBackoff {
    /// The first pause.
    pub const FIRST: Duration = Duration::from_millis(5);
    /// The longest pause.
    pub const MAX: Duration = Duration::from_secs(1);

    /// Before any failure.
    pub fn new() -> Self {
        AcceptBackoff { next: Self::FIRST }
    }

    /// An accept failed: how long to pause before the next.
    pub fn failed(&mut self) -> Duration {
        let pause = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        pause
    }

    /// An accept succeeded.
    pub fn succeeded(&mut self) {
        self.next = Self::FIRST;
    }
}

impl Default for AcceptBackoff {
    fn default() -> Self {
        Self::new()
    }
}

/// The endpoint: an explainer behind an authorizer.
#[derive(Clone)]
pub struct ExplainService {
    explainer: Arc<dyn Explainer>,
    authorizer: Arc<dyn Authorizer>,
    limits: ServerLimits,
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

/// The answer to a refused request: 401, 403, 429 with `Retry-After`, or 503.
fn refused(refusal: &Refusal) -> Response<Full<Bytes>> {
    let status = match refusal {
        Refusal::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
        Refusal::Forbidden(_) => StatusCode::FORBIDDEN,
        Refusal::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        Refusal::Busy { .. } => StatusCode::TOO_MANY_REQUESTS,
    };
    let mut response = error(status, &refusal.to_string());
    if let Refusal::Busy { retry_after } = refusal {
        response.headers_mut().insert(
            header::RETRY_AFTER,
            header::HeaderValue::from(retry_after_seconds(*retry_after)),
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
    /// Answers from `explainer` to callers `authorizer` lets through, within the default
    /// [`ServerLimits`].
    pub fn new(explainer: Arc<dyn Explainer>, authorizer: Arc<dyn Authorizer>) -> Self {
        ExplainService {
            explainer,
            authorizer,
            limits: ServerLimits::default(),
        }
    }

    /// The same service within `limits`.
    #[must_use]
    pub fn with_limits(mut self, limits: ServerLimits) -> Self {
        self.limits = limits;
        self
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
            debug!(namespace, name, %refusal, "explain request refused");
            return refused(&refusal);
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

    /// Answers one request within [`ServerLimits::request_timeout`].
    async fn respond_in_time<B>(&self, request: &Request<B>) -> Response<Full<Bytes>> {
        match tokio::time::timeout(self.limits.request_timeout, self.respond(request)).await {
            Ok(response) => response,
            Err(_) => error(
                StatusCode::SERVICE_UNAVAILABLE,
                "the explain request did not finish in time: try again",
            ),
        }
    }

    /// Serves on `listener` until `shutdown`, within the service's [`ServerLimits`].
    pub async fn serve(self, listener: TcpListener, shutdown: CancellationToken) {
        if let Ok(addr) = listener.local_addr() {
            info!(%addr, "explain endpoint listening");
        }
        let limits = self.limits;
        let service = Arc::new(self);
        let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
        let mut backoff = AcceptBackoff::new();
        let mut connections = JoinSet::new();
        loop {
            // A free slot first: at the cap, new connections wait in the kernel's backlog
            // instead of costing memory and tasks here.
            let slot = tokio::select! {
                () = shutdown.cancelled() => break,
                slot = slots.clone().acquire_owned() => slot,
            };
            let Ok(slot) = slot else { break };
            let accepted = tokio::select! {
                () = shutdown.cancelled() => break,
                accepted = listener.accept() => accepted,
            };
            let stream = match accepted {
                Ok((stream, _)) => {
                    backoff.succeeded();
                    stream
                }
                Err(e) => {
                    // Out of file descriptors, or the like: retrying at once would spin.
                    let pause = backoff.failed();
                    warn!(error = %e, ?pause, "explain endpoint: accept failed; pausing");
                    tokio::select! {
                        () = shutdown.cancelled() => break,
                        () = tokio::time::sleep(pause) => continue,
                    }
                }
            };
            let service = service.clone();
            let handler =
                hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
                    let service = service.clone();
                    async move { Ok::<_, Infallible>(service.respond_in_time(&request).await) }
                });
            connections.spawn(async move {
                let _slot = slot;
                let mut builder = hyper::server::conn::http1::Builder::new();
                builder
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(limits.header_read_timeout)
                    .max_buf_size(limits.max_head_bytes.max(8 * 1024))
                    .keep_alive(false);
                let connection =
                    builder.serve_connection(hyper_util::rt::TokioIo::new(stream), handler);
                match tokio::time::timeout(limits.connection_lifetime(), connection).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        debug!(error = %e, "explain endpoint: connection ended with an error");
                    }
                    Err(_) => debug!("explain endpoint: connection closed at its lifetime"),
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
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, crate::serve::admin::AdminError> {
    crate::serve::admin::bind(addr, "--explain-bind-address").await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_failures_pause_longer_each_time_up_to_a_second_and_a_success_resets() {
        let mut backoff = AcceptBackoff::new();
        let pauses: Vec<u128> = (0..10).map(|_| backoff.failed().as_millis()).collect();
        assert_eq!(pauses, [5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        backoff.succeeded();
        assert_eq!(backoff.failed(), AcceptBackoff::FIRST);
    }

    #[test]
    fn a_spent_review_budget_is_429_with_retry_after_in_whole_seconds() {
        let response = refused(&Refusal::Busy {
            retry_after: Duration::from_millis(200),
        });
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(
            response
                .headers()
                .get(header::RETRY_AFTER)
                .map(|v| v.as_bytes()),
            Some(&b"1"[..])
        );
        let unauthenticated = refused(&Refusal::Unauthenticated("no".into()));
        assert_eq!(unauthenticated.status(), StatusCode::UNAUTHORIZED);
        assert!(unauthenticated.headers().get(header::RETRY_AFTER).is_none());
    }

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
