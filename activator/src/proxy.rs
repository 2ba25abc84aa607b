//! The request path: route, take a slot (or wait in the hold queue), forward, and map every
//! failure to a status in one place ([`ProxyError::to_response`]). [`Proxy::handle`] serves
//! the requests hyper's server parses; [`crate::front`] the common HTTP/1.1 request, with the
//! same routing and admission ([`Proxy::admit`]) and the same pod connections.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use arc_swap::ArcSwap;
use bytes::Bytes;
use http::header::{self, Entry, HeaderMap, HeaderName, HeaderValue};
use http::request::Parts;
use http::{Request, Response, StatusCode, Uri, Version};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper_util::rt::TokioIo;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

use crate::error::ProxyError;
use crate::limits::Limits;
use crate::metrics::SharedMetrics;
use crate::route::RouteTable;
use crate::target::{Admission, Lease, Target};
use crate::trust::TrustedProxies;
use crate::upstream::{AppProtocol, Connection};
use crate::wire::{self, WireBody, WireError};

/// The routing table the watcher swaps and the proxy reads.
pub type SharedRoutes = Arc<ArcSwap<RouteTable<Target>>>;

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
const FORWARDED: HeaderName = HeaderName::from_static("forwarded");
/// The headers a proxy in front says about the client: kept only from a trusted proxy
/// ([`crate::trust`]).
pub(crate) const FORWARDING: [HeaderName; 4] = [
    X_FORWARDED_FOR,
    X_FORWARDED_HOST,
    X_FORWARDED_PROTO,
    FORWARDED,
];
const KEEP_ALIVE: HeaderName = HeaderName::from_static("keep-alive");
const PROXY_CONNECTION: HeaderName = HeaderName::from_static("proxy-connection");

/// Headers that describe one hop, not the message (RFC 9110 7.6.1).
pub(crate) const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    KEEP_ALIVE,
    PROXY_CONNECTION,
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
];

/// The client end of one downstream connection, prepared once for all its requests.
#[derive(Clone, Debug)]
pub struct Peer {
    addr: SocketAddr,
    /// The client's IP as an `X-Forwarded-For` value.
    forwarded_for: HeaderValue,
    /// Whether the peer is a trusted proxy ([`crate::trust`]), whose forwarding headers are
    /// kept.
    trusted: bool,
}

impl Peer {
    /// The client at `addr`, not a trusted proxy: its forwarding headers are replaced.
    pub fn new(addr: SocketAddr) -> Self {
        Self::with_trust(addr, false)
    }

    /// The client at `addr`; `trusted`: a proxy whose forwarding headers are kept.
    pub fn with_trust(addr: SocketAddr, trusted: bool) -> Self {
        let ip = addr.ip().to_canonical().to_string();
        Self {
            addr,
            trusted,
            // An IP address is always a valid header value.
            forwarded_for: HeaderValue::from_str(&ip)
                .unwrap_or_else(|_| HeaderValue::from_static("unknown")),
        }
    }

    /// The client's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The client's IP as an `X-Forwarded-For` value.
    pub(crate) fn forwarded_for(&self) -> &HeaderValue {
        &self.forwarded_for
    }

    /// Whether the peer is a trusted proxy.
    pub fn is_trusted(&self) -> bool {
        self.trusted
    }
}

/// The response body: the pod's body (holding the pod slot until it ends or the client goes
/// away), or a body the activator wrote.
pub struct ProxyBody {
    kind: Kind,
    /// Longest the pod may send nothing ([`Limits::upstream_idle_timeout`]).
    idle: Duration,
    /// The idle deadline: set when the pod's body is found with nothing to read after a frame
    /// (not from the frame itself: while the client is slow to take it, the pod is not
    /// asked for more), until the next frame.
    stall: Option<Pin<Box<Sleep>>>,
    /// Whether `stall` runs (since the last frame).
    armed: bool,
}

enum Kind {
    /// From a hyper client connection (requests with a body; every request to a pod over
    /// TLS) or an HTTP/2 one (no connection to give back).
    Upstream {
        body: Incoming,
        lease: Option<Lease>,
        connection: Option<Connection>,
    },
    /// From a wire connection (requests without a body); the body owns the connection and is
    /// `None` once it is over.
    Wire {
        body: Option<WireBody>,
        lease: Option<Lease>,
    },
    Full(Option<Bytes>),
}

/// Why a response body from the pod broke off.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// On a hyper client connection.
    #[error(transparent)]
    Hyper(#[from] hyper::Error),
    /// On a wire connection.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// The pod sent nothing for the upstream idle timeout.
    #[error("the pod sent nothing for {0:?}")]
    Idle(Duration),
}

impl ProxyBody {
    /// A complete body.
    pub fn full(bytes: Bytes) -> Self {
        Self::of(Kind::Full(Some(bytes)), Duration::MAX)
    }

    fn of(kind: Kind, idle: Duration) -> Self {
        Self {
            kind,
            idle,
            stall: None,
            armed: false,
        }
    }

    /// The pod's body on a hyper HTTP/1.1 client connection, given back when the body has
    /// been read to the end.
    pub(crate) fn upstream(
        body: Incoming,
        lease: Lease,
        connection: Connection,
        idle: Duration,
    ) -> Self {
        Self::of(
            Kind::Upstream {
                body,
                lease: Some(lease),
                connection: Some(connection),
            },
            idle,
        )
    }

    /// The pod's body on its HTTP/2 connection, which stays open for the other requests:
    /// nothing to give back but the slot.
    pub(crate) fn upstream_h2(body: Incoming, lease: Lease, idle: Duration) -> Self {
        Self::of(
            Kind::Upstream {
                body,
                lease: Some(lease),
                connection: None,
            },
            idle,
        )
    }

    /// The pod's body on a wire connection, cut when the pod sends nothing for `idle`.
    pub(crate) fn wire(body: WireBody, lease: Lease, idle: Duration) -> Self {
        Self::of(
            Kind::Wire {
                body: Some(body),
                lease: Some(lease),
            },
            idle,
        )
    }

    /// Whether the pod has sent nothing for the idle timeout, polled while its body has
    /// nothing to read.
    fn stalled(&mut self, cx: &mut Context<'_>) -> bool {
        let idle = self.idle;
        let stall = self
            .stall
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(idle)));
        if !self.armed {
            stall.as_mut().reset(Instant::now() + idle);
            self.armed = true;
        }
        stall.as_mut().poll(cx).is_ready()
    }
}

/// The wire exchange is over: the connection goes back to the pod's idle ones if its
/// response was read to the end and it can be reused (else dropping it closes it), before the
/// slot is released, as in [`finish`].
fn finish_wire(body: &mut Option<WireBody>, lease: &mut Option<Lease>) {
    let Some(lease) = lease.take() else {
        return;
    };
    if let Some(conn) = body.take().and_then(WireBody::into_idle) {
        lease.upstream().put_back_wire(conn);
    }
    drop(lease);
}

/// The exchange is over: a connection whose response was read to the end goes back to the
/// pod's idle connections (before the slot is freed, so a request waiting for the slot finds
/// it); any other is dropped, which closes it. Then the slot is released.
fn finish(body: &Incoming, lease: &mut Option<Lease>, connection: &mut Option<Connection>) {
    let Some(lease) = lease.take() else {
        return;
    };
    if let Some(connection) = connection.take()
        && body.is_end_stream()
    {
        lease.upstream().put_back(connection);
    }
    drop(lease);
}

impl Drop for ProxyBody {
    fn drop(&mut self) {
        match &mut self.kind {
            Kind::Upstream {
                body,
                lease,
                connection,
            } => finish(body, lease, connection),
            Kind::Wire { body, lease } => finish_wire(body, lease),
            Kind::Full(_) => {}
        }
    }
}

/// A body that ended in an error: the pod broke off its response (killed, reset, or sent
/// what cannot be decoded). The client cannot be told with a status any more; it gets what
/// came and a closed connection (or a reset HTTP/2 stream). Counted and logged here, once.
fn count_abort<T, E: std::fmt::Display>(
    lease: Option<&Lease>,
    polled: &Poll<Option<Result<T, E>>>,
) {
    if let (Some(lease), Poll::Ready(Some(Err(error)))) = (lease, polled) {
        lease.target().metrics().upstream_aborts.inc();
        tracing::warn!(
            scaledobject = lease.target().label(),
            pod = %lease.addr(),
            %error,
            "the pod broke off a response"
        );
    }
}

/// Whether a polled frame ends the body.
fn ends<T, E>(polled: &Poll<Option<Result<T, E>>>, body: &impl Body) -> bool {
    match polled {
        Poll::Ready(None | Some(Err(_))) => true,
        Poll::Ready(Some(Ok(_))) => body.is_end_stream(),
        Poll::Pending => false,
    }
}

impl Body for ProxyBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        // In both pod cases the slot is freed as soon as the pod is done, not when hyper
        // drops the body.
        let this = self.get_mut();
        let polled = match &mut this.kind {
            Kind::Upstream { body, .. } => {
                Pin::new(&mut *body).poll_frame(cx).map_err(BodyError::from)
            }
            Kind::Wire { body, .. } => match body.as_mut() {
                None => return Poll::Ready(None),
                Some(wire) => Pin::new(&mut *wire).poll_frame(cx).map_err(BodyError::from),
            },
            Kind::Full(bytes) => return Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
        };
        let polled = match polled {
            Poll::Pending if this.stalled(cx) => {
                // The pod began its answer and stopped: the connection is dropped below
                // (closed, the request cancelled) and the slot freed.
                Poll::Ready(Some(Err(BodyError::Idle(this.idle))))
            }
            Poll::Pending => Poll::Pending,
            Poll::Ready(frame) => {
                this.armed = false;
                Poll::Ready(frame)
            }
        };
        match &mut this.kind {
            Kind::Upstream {
                body,
                lease,
                connection,
            } => {
                if ends(&polled, body) {
                    count_abort(lease.as_ref(), &polled);
                    finish(body, lease, connection);
                }
            }
            Kind::Wire { body, lease } => {
                let ended = body.as_ref().is_none_or(|wire| ends(&polled, wire));
                if ended {
                    count_abort(lease.as_ref(), &polled);
                    finish_wire(body, lease);
                }
            }
            Kind::Full(_) => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Upstream { body, .. } => body.is_end_stream(),
            Kind::Wire { body, .. } => body.as_ref().is_none_or(Body::is_end_stream),
            Kind::Full(bytes) => bytes.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Upstream { body, .. } => body.size_hint(),
            Kind::Wire { body, .. } => body
                .as_ref()
                .map_or_else(|| SizeHint::with_exact(0), Body::size_hint),
            Kind::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            Kind::Full(None) => SizeHint::with_exact(0),
        }
    }
}

/// The proxy: shared by every connection, on every proxy thread.
pub struct Proxy {
    routes: SharedRoutes,
    metrics: SharedMetrics,
    limits: Limits,
    /// One permit per client connection the process may serve ([`Limits::max_connections`]).
    connections: Arc<Semaphore>,
    /// The peers whose forwarding headers are kept.
    trusted_proxies: TrustedProxies,
    /// The memory budget ([`Limits::memory_budget`]), one permit per KiB.
    memory: Arc<Semaphore>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Proxy")
    }
}

impl Proxy {
    /// A proxy reading `routes`, with the default [`Limits`]. Upstream connections are kept
    /// alive per pod (see [`crate::upstream`]).
    pub fn new(routes: SharedRoutes, metrics: SharedMetrics) -> Self {
        Self::with_limits(routes, metrics, Limits::default())
    }

    /// A proxy reading `routes`, its clients held to `limits`.
    pub fn with_limits(routes: SharedRoutes, metrics: SharedMetrics, limits: Limits) -> Self {
        let permits = limits.max_connections.clamp(1, Semaphore::MAX_PERMITS);
        Self {
            routes,
            metrics,
            limits,
            connections: Arc::new(Semaphore::new(permits)),
            trusted_proxies: TrustedProxies::default(),
            memory: Arc::new(Semaphore::new(
                kib(limits.memory_budget).min(Semaphore::MAX_PERMITS),
            )),
        }
    }

    /// Keeps the forwarding headers of peers in `trusted` (`--trusted-proxies`).
    #[must_use]
    pub fn trusting(mut self, trusted: TrustedProxies) -> Self {
        self.trusted_proxies = trusted;
        self
    }

    /// The client connection from `addr`, trusted or not.
    pub fn peer(&self, addr: SocketAddr) -> Peer {
        Peer::with_trust(addr, self.trusted_proxies.contains(addr.ip()))
    }

    /// The client-side limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The metrics.
    pub fn metrics(&self) -> &SharedMetrics {
        &self.metrics
    }

    /// A place for one more client connection: at once when fewer than
    /// [`Limits::max_connections`] are open, else when one closes (counted in
    /// `keda_activator_connection_limit_waits_total`). Dropping it frees the place. `None`
    /// never happens (the places are never closed).
    pub async fn connection_permit(&self) -> Option<OwnedSemaphorePermit> {
        match Arc::clone(&self.connections).try_acquire_owned() {
            Ok(permit) => Some(permit),
            Err(_) => {
                self.metrics.connection_limit_waits.inc();
                Arc::clone(&self.connections).acquire_owned().await.ok()
            }
        }
    }

    /// `bytes` of the memory budget, when there is room (counted in
    /// `keda_activator_memory_budget_waits_total` when it must wait). Dropping it gives them
    /// back. `None` never happens.
    pub async fn memory(&self, bytes: usize) -> Option<OwnedSemaphorePermit> {
        let units = u32::try_from(kib(bytes)).unwrap_or(u32::MAX);
        match Arc::clone(&self.memory).try_acquire_many_owned(units) {
            Ok(permit) => Some(permit),
            Err(_) => {
                self.metrics.memory_budget_waits.inc();
                Arc::clone(&self.memory)
                    .acquire_many_owned(units)
                    .await
                    .ok()
            }
        }
    }

    /// `bytes` of the memory budget if there is room now.
    pub fn try_memory(&self, bytes: usize) -> Option<OwnedSemaphorePermit> {
        let units = u32::try_from(kib(bytes)).unwrap_or(u32::MAX);
        Arc::clone(&self.memory).try_acquire_many_owned(units).ok()
    }

    /// Routes a request for `host` and `path` and counts it: its target and a slot on a pod or
    /// a place in the hold queue, for a request that keeps `held_bytes()` bytes while it
    /// waits.
    pub(crate) fn admit(
        &self,
        host: &str,
        path: &str,
        held_bytes: impl FnOnce() -> usize,
    ) -> Result<(Arc<Target>, Admission), ProxyError> {
        let Some(target) = self.routes.load().lookup(host, path).map(Arc::clone) else {
            self.metrics.no_route.inc();
            return Err(ProxyError::NoRoute {
                host: host.to_owned(),
                path: path.to_owned(),
            });
        };
        target.metrics().requests.inc();
        let admission = target.admit(held_bytes)?;
        Ok((target, admission))
    }

    /// Handles one request of `peer` that hyper's server parsed; every error becomes its
    /// status here.
    pub async fn handle(&self, request: Request<Incoming>, peer: &Peer) -> Response<ProxyBody> {
        match self.forward(request, peer).await {
            Ok(response) => response,
            Err(error) => error.to_response().map(ProxyBody::full),
        }
    }

    async fn forward(
        &self,
        mut request: Request<Incoming>,
        peer: &Peer,
    ) -> Result<Response<ProxyBody>, ProxyError> {
        let started = Instant::now();
        let (target, admission) =
            self.admit(request_host(&request), request.uri().path(), || {
                head_size(&request)
            })?;
        let lease = match admission {
            Admission::Ready(lease) => lease,
            Admission::Held(held) => held.wait().await?,
        };
        let pod = lease.addr();
        let timeout = lease.response_timeout();
        let upgrade = is_upgrade(&request);
        let protocol = lease.upstream().protocol();
        if protocol.is_http2() {
            // HTTP/2 to the pod, whatever the client speaks; no upgrade over it (a WebSocket
            // needs an HTTP/1.1 port, plaintext or TLS). `TE: trailers` goes through: gRPC
            // needs it.
            let trailers = request.headers().get_all(header::TE).iter().any(|v| {
                v.to_str()
                    .is_ok_and(|v| v.to_ascii_lowercase().contains("trailers"))
            });
            let (mut parts, body) = request.into_parts();
            let client_version = parts.version;
            prepare_request(&mut parts, peer, false);
            if trailers {
                parts
                    .headers
                    .insert(header::TE, HeaderValue::from_static("trailers"));
            }
            let sent = lease
                .upstream()
                .send_h2(Request::from_parts(parts, body.boxed_unsync()));
            let response = tokio::time::timeout(timeout, sent)
                .await
                .map_err(|_| response_timeout(&target, timeout))?
                .map_err(|e| upstream(&target, pod, e))?;
            answered(&target, started);
            let (parts, body) = for_client(response, client_version);
            return Ok(Response::from_parts(
                parts,
                ProxyBody::upstream_h2(body, lease, self.limits.upstream_idle_timeout),
            ));
        }
        if protocol == AppProtocol::Http1 && !upgrade && request.body().is_end_stream() {
            // No body to stream: one write and reads, from this task (`crate::wire`), to a
            // plaintext pod. To a pod over TLS every request takes hyper's client below.
            let (mut parts, _) = request.into_parts();
            let client_version = parts.version;
            prepare_request(&mut parts, peer, false);
            let response = tokio::time::timeout(timeout, lease.upstream().send_bodiless(&parts))
                .await
                .map_err(|_| response_timeout(&target, timeout))?
                .map_err(|e| upstream(&target, pod, e))?;
            answered(&target, started);
            let (parts, body) = for_client(response, client_version);
            return Ok(Response::from_parts(
                parts,
                ProxyBody::wire(body, lease, self.limits.upstream_idle_timeout),
            ));
        }
        let client_upgrade = upgrade.then(|| hyper::upgrade::on(&mut request));
        let (mut parts, body) = request.into_parts();
        let client_version = parts.version;
        prepare_request(&mut parts, peer, upgrade);
        let sent = lease.upstream().send(Request::from_parts(parts, body));
        let (mut response, connection) = tokio::time::timeout(timeout, sent)
            .await
            .map_err(|_| response_timeout(&target, timeout))?
            .map_err(|e| upstream(&target, pod, e))?;
        answered(&target, started);
        if let Some(client_upgrade) = client_upgrade
            && response.status() == StatusCode::SWITCHING_PROTOCOLS
        {
            let server_upgrade = hyper::upgrade::on(&mut response);
            let idle = self.limits.upstream_idle_timeout;
            tokio::spawn(async move {
                // The slot stays taken for the life of the upgraded connection, which is no
                // longer an HTTP connection to pool.
                let _lease = lease;
                let _connection = connection;
                if let (Ok(client), Ok(server)) = tokio::join!(client_upgrade, server_upgrade) {
                    let mut client = TokioIo::new(client);
                    let mut server = crate::timed::Quiet::new(TokioIo::new(server));
                    let seen = server.seen();
                    // Closed (both ends) once nothing has moved either way for `idle`.
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        () = crate::timed::quiet_for(&seen, idle) => {}
                    }
                }
            });
            let (parts, _) = response.into_parts();
            return Ok(Response::from_parts(parts, ProxyBody::full(Bytes::new())));
        }
        let (parts, body) = for_client(response, client_version);
        Ok(Response::from_parts(
            parts,
            ProxyBody::upstream(body, lease, connection, self.limits.upstream_idle_timeout),
        ))
    }
}

/// Bytes in KiB, rounded up.
fn kib(bytes: usize) -> usize {
    bytes.div_ceil(1024)
}

/// Records the time to the pod's response head (held time included).
pub(crate) fn answered(target: &Target, started: Instant) {
    target
        .metrics()
        .latency
        .observe(started.elapsed().as_secs_f64());
}

/// The pod's response as the client gets it: hop-by-hop headers dropped, in the client's
/// HTTP version (a proxy answers in its own version, RFC 9110 6.2, whatever the pod spoke).
pub(crate) fn for_client<B>(
    response: Response<B>,
    client_version: Version,
) -> (http::response::Parts, B) {
    let (mut parts, body) = response.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    parts.version = client_version;
    (parts, body)
}

/// No response head from the pod within `timeout`: counted. The exchange was dropped, which
/// closes the pod's connection and lets the lease free the slot.
pub(crate) fn response_timeout(target: &Target, timeout: std::time::Duration) -> ProxyError {
    target.metrics().response_timeouts.inc();
    ProxyError::ResponseTimeout {
        target: target.label().to_owned(),
        timeout,
    }
}

/// The bytes a request parsed by hyper keeps while it is held: its target and header fields
/// (the parsed head; the body is not read while the request waits).
fn head_size<B>(request: &Request<B>) -> usize {
    request.headers().iter().fold(
        request.uri().to_string().len() + 64,
        |size, (name, value)| size.saturating_add(name.as_str().len() + value.len() + 32),
    )
}

/// A pod's failure to answer: counted, and logged here with the pod's address and the cause,
/// which the client's answer leaves out ([`ProxyError::to_response`]).
pub(crate) fn upstream(
    target: &Target,
    pod: SocketAddr,
    e: impl std::error::Error + Send + Sync + 'static,
) -> ProxyError {
    target.metrics().upstream_errors.inc();
    let error = ProxyError::Upstream {
        target: target.label().to_owned(),
        pod,
        source: Box::new(e),
    };
    tracing::warn!(%error, "answered 502");
    error
}

/// Writes the `X-Forwarded-For` value for the pod into `out`: every value of every line the
/// client sent, in order, joined with `", "` (a proxy in front may have appended its own line
/// rather than extended the first one), then this hop's `client_ip`.
pub(crate) fn forwarded_for_chain<'a>(
    values: impl Iterator<Item = &'a [u8]>,
    client_ip: &[u8],
    out: &mut Vec<u8>,
) {
    for value in values.map(<[u8]>::trim_ascii).filter(|v| !v.is_empty()) {
        out.extend_from_slice(value);
        out.extend_from_slice(b", ");
    }
    out.extend_from_slice(client_ip);
}

/// The host a request is for: the URI authority (HTTP/2, absolute-form) or the Host header.
fn request_host<B>(request: &Request<B>) -> &str {
    request
        .uri()
        .host()
        .or_else(|| {
            request
                .headers()
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
        })
        .unwrap_or("")
}

fn is_upgrade<B>(request: &Request<B>) -> bool {
    request.version() == Version::HTTP_11
        && request.headers().contains_key(header::UPGRADE)
        && wire::has_token(request.headers(), "upgrade")
}

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // Most messages carry none of them: one pass over the names present instead of a lookup
    // per hop-by-hop name.
    if !headers.keys().any(|name| HOP_BY_HOP.contains(name)) {
        return;
    }
    // Headers named in Connection are hop-by-hop too.
    let named: Vec<HeaderName> = wire::header_items(headers, header::CONNECTION)
        .filter_map(|t| HeaderName::from_bytes(t).ok())
        .collect();
    for name in named.iter().chain(HOP_BY_HOP.iter()) {
        headers.remove(name);
    }
}

/// Turns the client's request into the pod's: HTTP/1.1 in origin form with a Host header,
/// hop-by-hop headers removed (an upgrade's kept), `X-Forwarded-For`, `-Host` and `-Proto`
/// set: from a trusted proxy, its `X-Forwarded-For` chain extended and its other forwarding
/// headers kept; from anyone else, all of theirs replaced (and `Forwarded` dropped).
fn prepare_request(parts: &mut Parts, peer: &Peer, upgrade: bool) {
    // The host the request was routed by ([`request_host`]): for HTTP/2 and absolute-form
    // requests the URI authority, which replaces any Host header the client sent (RFC 9112
    // 3.2.2: a server ignores Host for an absolute-form target; RFC 9113 8.3.1: an
    // intermediary to HTTP/1.1 makes Host from :authority); else the Host header.
    let host = parts
        .uri
        .authority()
        .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
        .or_else(|| parts.headers.get(header::HOST).cloned());
    if parts.uri.scheme().is_some() || parts.uri.authority().is_some() {
        parts.uri = parts
            .uri
            .path_and_query()
            .cloned()
            .map_or_else(|| Uri::from_static("/"), Uri::from);
    }
    parts.version = Version::HTTP_11;
    prepare_request_headers(&mut parts.headers, host, peer, upgrade);
}

fn prepare_request_headers(
    headers: &mut HeaderMap,
    host: Option<HeaderValue>,
    peer: &Peer,
    upgrade: bool,
) {
    let upgrade_to = upgrade
        .then(|| headers.get(header::UPGRADE).cloned())
        .flatten();
    strip_hop_by_hop(headers);
    headers.remove(header::UPGRADE);
    if let Some(protocol) = upgrade_to {
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        headers.insert(header::UPGRADE, protocol);
    }
    if !peer.trusted {
        // Only a trusted proxy may say who the client is; anyone else's claims are dropped
        // and the activator says it.
        for name in &FORWARDING {
            headers.remove(name);
        }
    }
    if let Some(host) = host {
        // The pod speaks HTTP/1.1 and needs Host: the one the request was routed by.
        headers.insert(header::HOST, host.clone());
        if let Entry::Vacant(entry) = headers.entry(X_FORWARDED_HOST) {
            entry.insert(host);
        }
    }
    match headers.entry(X_FORWARDED_FOR) {
        Entry::Vacant(entry) => {
            entry.insert(peer.forwarded_for.clone());
        }
        Entry::Occupied(mut entry) => {
            let mut chained = Vec::new();
            forwarded_for_chain(
                entry.iter().map(HeaderValue::as_bytes),
                peer.forwarded_for.as_bytes(),
                &mut chained,
            );
            // Made of header values and an IP address: a valid value.
            let value =
                HeaderValue::from_bytes(&chained).unwrap_or_else(|_| peer.forwarded_for.clone());
            // Replaces every line the client sent with the one chain.
            entry.insert(value);
        }
    }
    if let Entry::Vacant(entry) = headers.entry(X_FORWARDED_PROTO) {
        entry.insert(HeaderValue::from_static("http"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwarded_headers_are_added_and_hop_by_hop_ones_removed() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, x-secret-hop"),
        );
        headers.insert("x-secret-hop", HeaderValue::from_static("1"));
        headers.insert(KEEP_ALIVE, HeaderValue::from_static("timeout=5"));
        headers.insert(X_FORWARDED_FOR, HeaderValue::from_static("203.0.113.7"));
        headers.insert("x-app", HeaderValue::from_static("kept"));
        prepare_request_headers(
            &mut headers,
            Some(HeaderValue::from_static("shop.example.com")),
            &Peer::with_trust("127.0.0.9:5555".parse().unwrap(), true),
            false,
        );
        assert!(!headers.contains_key(header::CONNECTION));
        assert!(!headers.contains_key("x-secret-hop"));
        assert!(!headers.contains_key(KEEP_ALIVE));
        assert_eq!(headers[X_FORWARDED_FOR], "203.0.113.7, 127.0.0.9");
        assert_eq!(headers[X_FORWARDED_HOST], "shop.example.com");
        assert_eq!(headers[X_FORWARDED_PROTO], "http");
        assert_eq!(headers[header::HOST], "shop.example.com");
        assert_eq!(headers["x-app"], "kept");
    }

    #[test]
    fn upgrade_requests_keep_their_upgrade_headers() {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        prepare_request_headers(
            &mut headers,
            Some(HeaderValue::from_static("h")),
            &Peer::new("127.0.0.1:1".parse().unwrap()),
            true,
        );
        assert_eq!(headers[header::CONNECTION], "upgrade");
        assert_eq!(headers[header::UPGRADE], "websocket");
    }
}
