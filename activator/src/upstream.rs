//! Kept-alive HTTP/1.1 connections to one pod (plaintext or over TLS), and the one HTTP/2
//! connection of an HTTP/2 pod.
//!
//! Each ready pod of a target has one [`Upstream`]: stacks of idle connections (the most
//! recently used on top, so a small working set stays warm) and the code to open new ones.
//! A request takes an idle connection or opens one; the connection goes back on the stack when
//! its response has been read to the end ([`Upstream::put_back`], [`Upstream::put_back_wire`]).
//! A connection whose exchange did not complete (client gone, error) is dropped, which closes
//! it: HTTP/1.1 cannot abandon one request and keep the connection.
//!
//! To a plaintext HTTP/1.1 pod, requests without a body go out on [`wire`](crate::wire)
//! connections, driven by the request's own task ([`Upstream::send_bodiless`]); requests with
//! a body, and upgrades, on hyper client connections, each driven by its own task
//! ([`Upstream::send`]). To an HTTP/1.1 pod over TLS (`https`, `kubernetes.io/wss`) every
//! request, with a body or not, goes out on a hyper client connection over TLS
//! ([`Upstream::send`], [`Upstream::send_head_tls`]): the wire fast path stays plaintext only.
//! The kinds are kept apart. None is a general-purpose pooled client: the pod is already
//! chosen when a request gets here, so there is no pool key to hash, no URI to rebuild, and the
//! request goes out in origin form as the client sent it.
//!
//! Idle connections are kept per proxy thread ([`set_proxy_thread`]): a connection's task runs
//! on the thread that opened it, so a request reuses only connections of its own thread and
//! never waits for another thread to be scheduled.

use std::cell::Cell;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use http::request::Parts;
use http::{Method, Request, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::time::Instant;

use crate::edge;
use crate::wire::{self, WireBody, WireError};

/// How long connecting to a pod may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// An idle connection older than this is closed instead of reused.
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// Most idle connections kept per pod; more are closed when they come back.
const MAX_IDLE: usize = 1024;
/// Longest wait for a connection whose response is done to take requests again.
pub const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a request could not be forwarded to the pod.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// The TCP connection could not be made.
    #[error("connecting failed: {0}")]
    Connect(#[source] std::io::Error),
    /// The TCP connection was not made within the connect timeout.
    #[error("connecting timed out after {0:?}")]
    ConnectTimeout(Duration),
    /// The HTTP exchange failed (refused, reset, cut short, malformed).
    #[error(transparent)]
    Http(#[from] hyper::Error),
    /// The HTTP exchange of a request without a body failed.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// A fast-path request head that cannot be made into a request again.
    #[error("the request head cannot be sent again as a request")]
    Head,
    /// The pod speaks TLS and its certificate cannot be checked: no CA, or no name to check.
    #[error(transparent)]
    NoPodTls(#[from] NoPodTls),
    /// The TLS handshake failed (the pod's certificate is not trusted, or not for the name).
    #[error("TLS with the pod failed: {0}")]
    Tls(#[source] std::io::Error),
    /// The pod's TLS did not agree on HTTP/2.
    #[error("the pod's TLS did not agree on HTTP/2 (ALPN h2)")]
    NoH2,
    /// An HTTP/2 exchange was asked of a pod whose port is not marked for HTTP/2.
    #[error("the pod's port is not marked for HTTP/2")]
    NotHttp2,
}

/// Why a target's pods get no TLS connection at all (so no request): nothing is sent to a pod
/// whose certificate cannot be checked, not even a TCP connection opened.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NoPodTls {
    /// The pod's port is not marked for TLS (a plaintext protocol never asks for TLS).
    #[error("the pod's port is not marked for TLS")]
    NotTls,
    /// The activators have no CA to check the pod with.
    #[error(
        "the pod speaks TLS (appProtocol kubernetes.io/h2, https or kubernetes.io/wss) and no --pod-ca-file is given"
    )]
    NoCaFile,
    /// The name the pod's certificate must carry, `<service>.<namespace>.svc`, is not one a
    /// TLS certificate can be checked for.
    #[error(
        "the pod speaks TLS and its certificate cannot be checked: \"{name}\" \
         (<service>.<namespace>.svc) cannot be a TLS server name ({reason})"
    )]
    InvalidServerName {
        /// The name.
        name: String,
        /// Why it cannot be one.
        reason: String,
    },
}

/// HTTP/2 carries what HTTP/1.1 says in its request line and Host header as pseudo-headers,
/// and refuses connection-specific headers (RFC 9113 8.2.2): the URI is made absolute, and
/// those headers removed (`TE` kept only as `trailers`, which gRPC needs).
fn h2_parts(parts: &mut Parts, pod: SocketAddr) {
    let authority = parts
        .headers
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.parse::<http::uri::Authority>().ok())
        .or_else(|| parts.uri.authority().cloned())
        .or_else(|| pod.to_string().parse().ok());
    let path = parts
        .uri
        .path_and_query()
        .cloned()
        .unwrap_or_else(|| http::uri::PathAndQuery::from_static("/"));
    let mut uri = http::uri::Parts::default();
    uri.scheme = Some(http::uri::Scheme::HTTP);
    uri.authority = authority;
    uri.path_and_query = Some(path);
    if let Ok(uri) = http::Uri::from_parts(uri) {
        parts.uri = uri;
    }
    parts.version = http::Version::HTTP_2;
    let trailers = parts.headers.get_all(http::header::TE).iter().any(|v| {
        v.to_str()
            .is_ok_and(|v| v.to_ascii_lowercase().contains("trailers"))
    });
    for name in [
        http::header::HOST,
        http::header::CONNECTION,
        http::header::TE,
        http::header::TRANSFER_ENCODING,
        http::header::UPGRADE,
    ] {
        parts.headers.remove(name);
    }
    parts.headers.remove("keep-alive");
    parts.headers.remove("proxy-connection");
    if trailers {
        parts
            .headers
            .insert(http::header::TE, http::HeaderValue::from_static("trailers"));
    }
}

thread_local! {
    static PROXY_THREAD: Cell<usize> = const { Cell::new(0) };
}

/// Marks the current thread as proxy thread `index` (0, 1, ...): connections it opens are
/// reused by it only. Threads never marked share index 0.
pub fn set_proxy_thread(index: usize) {
    PROXY_THREAD.with(|t| t.set(index));
}

fn proxy_thread() -> usize {
    PROXY_THREAD.with(Cell::get)
}

/// An idle connection and when it became idle.
struct Kept<C> {
    conn: C,
    since: Instant,
}

/// One proxy thread's idle connections to a pod.
#[derive(Default)]
struct Idle {
    hyper: Vec<Kept<SendRequest<Incoming>>>,
    wire: Vec<Kept<wire::Conn>>,
    tls: Vec<Kept<SendRequest<BoxedBody>>>,
}

impl Idle {
    fn len(&self) -> usize {
        self.hyper.len() + self.wire.len() + self.tls.len()
    }
}

/// A hyper HTTP/1.1 client connection to a pod whose exchange is under way; give it back with
/// [`Upstream::put_back`] once its response has been read to the end, or drop it (which closes
/// it).
pub enum Connection {
    /// Plaintext (requests with a body, and upgrades).
    Plain(SendRequest<Incoming>),
    /// Over TLS (`https`, `kubernetes.io/wss`): every request. Its requests' bodies are boxed,
    /// since the fast path's have no hyper body to send.
    Tls(SendRequest<BoxedBody>),
}

impl Connection {
    fn is_ready(&self) -> bool {
        match self {
            Self::Plain(sender) => sender.is_ready(),
            Self::Tls(sender) => sender.is_ready(),
        }
    }

    fn is_closed(&self) -> bool {
        match self {
            Self::Plain(sender) => sender.is_closed(),
            Self::Tls(sender) => sender.is_closed(),
        }
    }

    async fn ready(&mut self) -> Result<(), hyper::Error> {
        match self {
            Self::Plain(sender) => sender.ready().await,
            Self::Tls(sender) => sender.ready().await,
        }
    }
}

/// Pushes `conn` on `stack` unless it holds [`MAX_IDLE`] already.
fn push<C>(stack: &mut Vec<Kept<C>>, conn: C) {
    if stack.len() < MAX_IDLE {
        stack.push(Kept {
            conn,
            since: Instant::now(),
        });
    }
}

/// Pops the most recently kept connection that is not too old and passes `usable`.
fn pop<C>(stack: &mut Vec<Kept<C>>, usable: impl Fn(&C) -> bool) -> Option<C> {
    let now = Instant::now();
    while let Some(candidate) = stack.pop() {
        if now.saturating_duration_since(candidate.since) < IDLE_TIMEOUT && usable(&candidate.conn)
        {
            return Some(candidate.conn);
        }
    }
    None
}

/// How the activators speak to a target's pods, from the `appProtocol` of the Service port
/// (as the EndpointSlices carry it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AppProtocol {
    /// HTTP/1.1 (no `appProtocol`, `http`, `kubernetes.io/ws`, anything else).
    #[default]
    Http1,
    /// HTTP/2 without TLS, prior knowledge (`kubernetes.io/h2c`, `h2c`, `grpc`): one
    /// multiplexed connection per pod; gRPC needs it end to end.
    H2c,
    /// HTTP/2 over TLS (`kubernetes.io/h2`, `h2`): as [`AppProtocol::H2c`], the pod's
    /// certificate verified against `--pod-ca-file` for the name `<service>.<namespace>.svc`.
    H2,
    /// HTTP/1.1 over TLS (`https`, `kubernetes.io/wss`): kept-alive connections per pod as
    /// [`AppProtocol::Http1`], upgrades included, the pod's certificate verified as for
    /// [`AppProtocol::H2`]; ALPN `http/1.1`.
    Https,
}

impl AppProtocol {
    /// The protocol an `appProtocol` value asks for (case-insensitive).
    pub fn of(app_protocol: Option<&str>) -> Self {
        match app_protocol.map(str::to_ascii_lowercase).as_deref() {
            Some("kubernetes.io/h2c" | "h2c" | "grpc") => Self::H2c,
            Some("kubernetes.io/h2" | "h2") => Self::H2,
            Some("https" | "kubernetes.io/wss") => Self::Https,
            _ => Self::Http1,
        }
    }
}

impl AppProtocol {
    /// Whether requests go out in HTTP/2 ([`Upstream::send_h2`]): such pods never take the
    /// HTTP/1.1 paths.
    pub fn is_http2(self) -> bool {
        matches!(self, Self::H2c | Self::H2)
    }
}

/// What a TLS connection to a target's pods verifies: the CA bundle of `--pod-ca-file`, and
/// the name the pods' certificate must carry (`<service>.<namespace>.svc`).
#[derive(Clone, Debug)]
pub struct PodTls {
    /// Trusts the CA bundle, with the ALPN of the pod's protocol ([`PodTrust`]).
    pub config: Arc<rustls::ClientConfig>,
    /// The name checked.
    pub server_name: rustls_pki_types::ServerName<'static>,
}

impl PodTls {
    /// Whether `a` and `b` verify alike: the same configuration (trust and ALPN) and name, or
    /// the same reason for no TLS.
    pub fn same(a: Result<&PodTls, &NoPodTls>, b: Result<&PodTls, &NoPodTls>) -> bool {
        match (a, b) {
            (Err(a), Err(b)) => a == b,
            (Ok(a), Ok(b)) => Arc::ptr_eq(&a.config, &b.config) && a.server_name == b.server_name,
            _ => false,
        }
    }
}

/// The client configurations for TLS pods, from the CA bundle of `--pod-ca-file`: one per
/// protocol, each trusting that bundle and nothing else. Each keeps its own TLS session cache
/// (rustls' default, in memory), shared by every pod of every target it is used for, so a
/// new connection resumes a session where the pod allows it.
#[derive(Clone, Debug)]
pub struct PodTrust {
    /// HTTP/2 over TLS (`kubernetes.io/h2`): offers ALPN `h2`.
    pub h2: Arc<rustls::ClientConfig>,
    /// HTTP/1.1 over TLS (`https`, `kubernetes.io/wss`): offers ALPN `http/1.1`.
    pub http1: Arc<rustls::ClientConfig>,
}

impl PodTrust {
    /// The configurations trusting the CA bundle `ca_pem` (`--pod-ca-file`).
    ///
    /// # Errors
    /// The bundle holds no usable certificate (named as `--pod-ca-file`).
    pub fn from_pem(ca_pem: &[u8]) -> Result<Self, keda_tls::TlsError> {
        let roots = keda_tls::roots(ca_pem, "--pod-ca-file")?;
        let config = |alpn: &[u8]| -> Result<rustls::ClientConfig, keda_tls::TlsError> {
            let mut config = rustls::ClientConfig::builder_with_provider(keda_tls::provider())
                .with_safe_default_protocol_versions()
                .map_err(|e| keda_tls::TlsError::TrustAnchors {
                    what: "--pod-ca-file".to_string(),
                    reason: e.to_string(),
                })?
                .with_root_certificates(roots.clone())
                .with_no_client_auth();
            config.alpn_protocols = vec![alpn.to_vec()];
            Ok(config)
        };
        Ok(Self {
            h2: Arc::new(config(b"h2")?),
            http1: Arc::new(config(b"http/1.1")?),
        })
    }

    /// The configuration for pods spoken to in `protocol`; `None` for a plaintext one.
    pub fn for_protocol(&self, protocol: AppProtocol) -> Option<&Arc<rustls::ClientConfig>> {
        match protocol {
            AppProtocol::H2 => Some(&self.h2),
            AppProtocol::Https => Some(&self.http1),
            AppProtocol::Http1 | AppProtocol::H2c => None,
        }
    }
}

/// The body of a request sent to an HTTP/2 pod, or to an HTTP/1.1 pod over TLS.
pub type BoxedBody = http_body_util::combinators::UnsyncBoxBody<bytes::Bytes, hyper::Error>;

/// The connections to one pod.
pub struct Upstream {
    addr: SocketAddr,
    /// Most idle connections kept, all threads together.
    max_idle: usize,
    /// Idle connections, one set per proxy thread.
    idle: Mutex<Vec<Idle>>,
    /// How the pod is spoken to.
    protocol: AppProtocol,
    /// The one HTTP/2 connection to the pod ([`AppProtocol::H2c`], [`AppProtocol::H2`]),
    /// opened on first use and again when it closes.
    h2: tokio::sync::Mutex<Option<http2::SendRequest<BoxedBody>>>,
    /// For [`AppProtocol::H2`] and [`AppProtocol::Https`]: how the pod's certificate is
    /// checked; else why it cannot be, and nothing is sent.
    tls: Result<PodTls, NoPodTls>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Upstream {
    /// No connection yet to `addr`.
    pub fn new(addr: SocketAddr) -> Self {
        Self::with_max_idle(addr, 0)
    }

    /// No connection yet to `addr`; at most `max_idle` idle connections kept (0: the
    /// default, [`MAX_IDLE`] per thread), so that with `--max-pod-connections` the idle ones
    /// too stay within it.
    pub fn with_max_idle(addr: SocketAddr, max_idle: u32) -> Self {
        Self {
            addr,
            max_idle: usize::try_from(max_idle).unwrap_or(usize::MAX),
            idle: Mutex::new(Vec::new()),
            protocol: AppProtocol::Http1,
            h2: tokio::sync::Mutex::new(None),
            tls: Err(NoPodTls::NotTls),
        }
    }

    /// The same, verifying a TLS pod with `tls` (or refusing to speak TLS to it, for that
    /// reason).
    pub fn with_tls(mut self, tls: Result<PodTls, NoPodTls>) -> Self {
        self.tls = tls;
        self
    }

    /// The same, speaking `protocol` to the pod.
    pub fn with_protocol(mut self, protocol: AppProtocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// How the pod is spoken to.
    pub fn protocol(&self) -> AppProtocol {
        self.protocol
    }

    /// What its TLS connections verify, if it speaks TLS.
    pub fn tls(&self) -> Option<&PodTls> {
        self.tls.as_ref().ok()
    }

    /// What its TLS connections verify, or why there are none.
    pub fn tls_or_why(&self) -> Result<&PodTls, &NoPodTls> {
        self.tls.as_ref()
    }

    /// The HTTP/2 connection to the pod, opened if there is none or it closed.
    async fn h2_sender(&self) -> Result<http2::SendRequest<BoxedBody>, UpstreamError> {
        let mut slot = self.h2.lock().await;
        if let Some(sender) = slot.as_ref()
            && !sender.is_closed()
        {
            return Ok(sender.clone());
        }
        let tls = match self.protocol {
            AppProtocol::H2c => false,
            AppProtocol::H2 => true,
            AppProtocol::Http1 | AppProtocol::Https => return Err(UpstreamError::NotHttp2),
        };
        let mut builder = http2::Builder::new(TokioExecutor::new());
        builder
            .timer(hyper_util::rt::TokioTimer::new())
            .keep_alive_interval(Duration::from_secs(30));
        let sender = if tls {
            let stream = self.connect_tls().await?;
            if stream.get_ref().1.alpn_protocol() != Some(b"h2") {
                return Err(UpstreamError::NoH2);
            }
            let (sender, connection) = builder.handshake(TokioIo::new(stream)).await?;
            tokio::spawn(async move {
                let _ = connection.await;
            });
            sender
        } else {
            let stream = self.connect_tcp().await?;
            let (sender, connection) = builder.handshake(TokioIo::new(stream)).await?;
            tokio::spawn(async move {
                // Ends when the pod closes the connection or the last sender is dropped;
                // errors reach the requests that were on it.
                let _ = connection.await;
            });
            sender
        };
        *slot = Some(sender.clone());
        Ok(sender)
    }

    /// A TCP connection to the pod, within [`CONNECT_TIMEOUT`].
    async fn connect_tcp(&self) -> Result<edge::Stream, UpstreamError> {
        tokio::time::timeout(CONNECT_TIMEOUT, edge::Stream::connect(self.addr))
            .await
            .map_err(|_| UpstreamError::ConnectTimeout(CONNECT_TIMEOUT))?
            .map_err(UpstreamError::Connect)
    }

    /// A TLS connection to the pod, its certificate checked ([`PodTls`]): the TCP connection
    /// and the handshake within [`CONNECT_TIMEOUT`] each. The session is resumed when the
    /// configuration's cache holds one the pod accepts.
    async fn connect_tls(
        &self,
    ) -> Result<tokio_rustls::client::TlsStream<edge::Stream>, UpstreamError> {
        // Checked before connecting: a pod that cannot be verified is not even connected to.
        let tls = self.tls.clone()?;
        let stream = self.connect_tcp().await?;
        tokio::time::timeout(
            CONNECT_TIMEOUT,
            tokio_rustls::TlsConnector::from(tls.config).connect(tls.server_name, stream),
        )
        .await
        .map_err(|_| UpstreamError::ConnectTimeout(CONNECT_TIMEOUT))?
        .map_err(UpstreamError::Tls)
    }

    /// Sends `request` to an HTTP/2 pod ([`AppProtocol::H2c`]): its URI is made absolute
    /// (`http://` and the request's `Host`, else the pod's address) as HTTP/2 carries the
    /// authority in the request, and connection-specific headers are left out.
    ///
    /// # Errors
    /// [`UpstreamError`]: the pod cannot be reached or the exchange failed.
    pub async fn send_h2(
        &self,
        request: Request<BoxedBody>,
    ) -> Result<Response<Incoming>, UpstreamError> {
        let (mut parts, body) = request.into_parts();
        h2_parts(&mut parts, self.addr);
        let request = Request::from_parts(parts, body);
        let mut sender = self.h2_sender().await?;
        sender.ready().await?;
        Ok(sender.send_request(request).await?)
    }

    /// [`Upstream::send_h2`] for a bodiless request head already written out in HTTP/1.1
    /// (the fast path's).
    ///
    /// # Errors
    /// [`UpstreamError`]: the head does not parse, the pod cannot be reached or the exchange
    /// failed.
    pub async fn send_head_h2(&self, head: &[u8]) -> Result<Response<Incoming>, UpstreamError> {
        self.send_h2(bodiless_request(head)?).await
    }

    /// [`Upstream::send_tls`] for a bodiless request head already written out (the fast
    /// path's).
    ///
    /// # Errors
    /// [`UpstreamError`]: the head does not parse, the pod cannot be reached or the exchange
    /// failed.
    pub async fn send_head_tls(
        &self,
        head: &[u8],
    ) -> Result<(Response<Incoming>, Connection), UpstreamError> {
        self.send_tls(bodiless_request(head)?).await
    }

    /// The pod's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Idle>> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// This thread's idle connections, under the lock.
    fn with_idle<T>(&self, f: impl FnOnce(&mut Idle) -> T) -> T {
        let thread = proxy_thread();
        let mut idle = self.lock();
        if idle.len() <= thread {
            idle.resize_with(thread + 1, Idle::default);
        }
        f(&mut idle[thread])
    }

    /// Whether one more idle connection may be kept (all threads together).
    fn has_idle_room(&self) -> bool {
        self.max_idle == 0 || self.lock().iter().map(Idle::len).sum::<usize>() < self.max_idle
    }

    /// Idle connections kept now, all threads together.
    pub fn idle(&self) -> usize {
        self.lock().iter().map(Idle::len).sum()
    }

    /// This thread's most recently used idle hyper connection that is still open.
    fn take_idle(&self) -> Option<SendRequest<Incoming>> {
        self.with_idle(|idle| pop(&mut idle.hyper, |sender| !sender.is_closed()))
    }

    /// This thread's most recently used idle TLS connection that is still open.
    fn take_idle_tls(&self) -> Option<SendRequest<BoxedBody>> {
        self.with_idle(|idle| pop(&mut idle.tls, |sender| !sender.is_closed()))
    }

    /// This thread's most recently used idle wire connection that is still open
    /// ([`wire::Conn::is_usable`]).
    fn take_idle_wire(&self) -> Option<wire::Conn> {
        self.with_idle(|idle| pop(&mut idle.wire, wire::Conn::is_usable))
    }

    /// Gives back the connection of a bodiless exchange whose response was read to the end
    /// and can take the next request ([`WireBody::into_idle`]).
    pub fn put_back_wire(&self, conn: wire::Conn) {
        if self.has_idle_room() {
            self.with_idle(|idle| push(&mut idle.wire, conn));
        }
    }

    /// Gives back the connection of an exchange whose response was read to the end: at once
    /// when it can take the next request (the usual case: hyper readies it as it reads the
    /// end of the response), else once it can (a pod that answered before it had read the
    /// whole request body), for at most [`READY_TIMEOUT`].
    pub fn put_back(self: &Arc<Self>, mut connection: Connection) {
        if connection.is_ready() {
            self.keep(connection);
        } else if !connection.is_closed() {
            let this = Arc::clone(self);
            tokio::spawn(async move {
                if let Ok(Ok(())) = tokio::time::timeout(READY_TIMEOUT, connection.ready()).await {
                    this.keep(connection);
                }
            });
        }
    }

    fn keep(&self, connection: Connection) {
        if self.has_idle_room() {
            self.with_idle(|idle| match connection {
                Connection::Plain(sender) => push(&mut idle.hyper, sender),
                Connection::Tls(sender) => push(&mut idle.tls, sender),
            });
        }
    }

    async fn connect_wire(&self) -> Result<wire::Conn, UpstreamError> {
        tokio::time::timeout(CONNECT_TIMEOUT, wire::Conn::connect(self.addr))
            .await
            .map_err(|_| UpstreamError::ConnectTimeout(CONNECT_TIMEOUT))?
            .map_err(UpstreamError::Connect)
    }

    /// Sends a request without a body (`parts` in origin form, with its `Host` header) on an
    /// idle wire connection, or on a new one. The response body owns the connection; give it
    /// back with [`put_back_wire`](Self::put_back_wire) once the body has ended.
    ///
    /// An idle connection can be closed by the pod just as the request goes out (its idle
    /// timeout): if no answer came back at all, an idempotent request (RFC 9110 9.2.2) is sent
    /// again on a new connection; any other gets the error, as it may have been processed.
    ///
    /// # Errors
    /// [`UpstreamError`]: the pod cannot be reached or the exchange failed.
    pub async fn send_bodiless(&self, parts: &Parts) -> Result<Response<WireBody>, UpstreamError> {
        let mut head = Vec::new();
        wire::encode_head(parts, &mut head);
        self.send_head(&head, &parts.method).await
    }

    /// As [`Upstream::send_bodiless`], for a request head already written out (`head`, of a
    /// `method` request without a body).
    ///
    /// # Errors
    /// [`UpstreamError`]: the pod cannot be reached or the exchange failed.
    pub async fn send_head(
        &self,
        head: &[u8],
        method: &Method,
    ) -> Result<Response<WireBody>, UpstreamError> {
        if let Some(conn) = self.take_idle_wire() {
            match conn.exchange(head, method).await {
                Ok(response) => return Ok(response),
                Err(error) if error.is_stale() && method.is_idempotent() => {
                    tracing::debug!(pod = %self.addr, %error, "idle connection was closed, sending again");
                }
                Err(error) => return Err(error.into()),
            }
        }
        let conn = self.connect_wire().await?;
        Ok(conn.exchange(head, method).await?)
    }

    /// A hyper HTTP/1.1 client connection over `stream`, driven by its own task, upgrades
    /// allowed.
    async fn handshake<S, B>(stream: S) -> Result<SendRequest<B>, UpstreamError>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
        B: hyper::body::Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let (sender, connection) = http1::Builder::new()
            .handshake(TokioIo::new(stream))
            .await?;
        tokio::spawn(async move {
            // Ends when the pod or the last sender closes the connection; an error here has
            // already been returned to the request that saw it.
            let _ = connection.with_upgrades().await;
        });
        Ok(sender)
    }

    /// Sends `request` (origin form, with its `Host` header) on an idle connection, or on a
    /// new one; a request an idle connection could not take because it was closing is sent
    /// again on a new connection. Returns the response head and the connection, to
    /// [`put_back`](Self::put_back) once the response body has been read to the end (or to
    /// drop otherwise, which closes it). A pod spoken to over TLS ([`AppProtocol::Https`])
    /// gets it on a TLS connection ([`Upstream::send_tls`]).
    ///
    /// # Errors
    /// [`UpstreamError`]: the pod cannot be reached or the exchange failed.
    pub async fn send(
        &self,
        request: Request<Incoming>,
    ) -> Result<(Response<Incoming>, Connection), UpstreamError> {
        if self.protocol == AppProtocol::Https {
            return self.send_tls(request.map(BodyExt::boxed_unsync)).await;
        }
        let (response, sender) =
            Self::send_on(self.take_idle(), request, self.connect_tcp()).await?;
        Ok((response, Connection::Plain(sender)))
    }

    /// [`Upstream::send`] to a pod spoken to in HTTP/1.1 over TLS ([`AppProtocol::Https`]):
    /// on an idle TLS connection of this thread, or on a new one whose certificate is checked
    /// ([`PodTls`]) and which offers ALPN `http/1.1` (a pod that picks no protocol speaks
    /// HTTP/1.1 too; rustls refuses any other pick). Upgrades are carried over it.
    ///
    /// # Errors
    /// [`UpstreamError::NoPodTls`] without `--pod-ca-file` (or a name to check); else the pod
    /// cannot be reached, its certificate is refused, or the exchange failed.
    pub async fn send_tls(
        &self,
        request: Request<BoxedBody>,
    ) -> Result<(Response<Incoming>, Connection), UpstreamError> {
        let (response, sender) =
            Self::send_on(self.take_idle_tls(), request, self.connect_tls()).await?;
        Ok((response, Connection::Tls(sender)))
    }

    /// Sends `request` on `idle` when it is ready, or on a new connection from `connect` (only
    /// awaited then); a request the idle connection could not take because it was closing goes
    /// on the new one. What [`send`](Self::send) and [`send_tls`](Self::send_tls) share.
    async fn send_on<S, B>(
        idle: Option<SendRequest<B>>,
        mut request: Request<B>,
        connect: impl std::future::Future<Output = Result<S, UpstreamError>>,
    ) -> Result<(Response<Incoming>, SendRequest<B>), UpstreamError>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
        B: hyper::body::Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        if let Some(mut sender) = idle
            && sender.ready().await.is_ok()
        {
            match sender.try_send_request(request).await {
                Ok(response) => return Ok((response, sender)),
                Err(mut failed) => match failed.take_message() {
                    // Never written: the pod closed the idle connection meanwhile.
                    Some(unsent) => request = unsent,
                    None => return Err(failed.into_error().into()),
                },
            }
        }
        let mut sender = Self::handshake(connect.await?).await?;
        let response = sender.send_request(request).await?;
        Ok((response, sender))
    }
}

/// The request a bodiless request head already written out in HTTP/1.1 (the fast path's)
/// stands for, in origin form with its header fields as they are.
fn bodiless_request(head: &[u8]) -> Result<Request<BoxedBody>, UpstreamError> {
    let mut headers = [httparse::EMPTY_HEADER; 128];
    let mut parsed = httparse::Request::new(&mut headers);
    let complete = parsed.parse(head).map_err(|_| UpstreamError::Head)?;
    if complete.is_partial() {
        return Err(UpstreamError::Head);
    }
    let mut builder = Request::builder()
        .method(parsed.method.unwrap_or("GET"))
        .uri(parsed.path.unwrap_or("/"));
    for h in parsed.headers.iter() {
        builder = builder.header(h.name, h.value);
    }
    let empty = http_body_util::Empty::<bytes::Bytes>::new()
        .map_err(|never| match never {})
        .boxed_unsync();
    builder.body(empty).map_err(|_| UpstreamError::Head)
}
