//! Serving: the proxy listener (HTTP/1.1 with keep-alive and upgrades, and h2c) and the admin
//! listener (`/healthz`, `/readyz`, `/metrics`), with a graceful drain.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use prometheus_client::metrics::gauge::Gauge;
use tokio::net::TcpListener;
use tokio::sync::OwnedSemaphorePermit;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::edge::Stream;
use crate::front::{self, ClientStream, Rewound};
use crate::limits;
use crate::metrics::SharedMetrics;
use crate::proxy::{Peer, Proxy};
use crate::spread::{Accepted, Seat, Spread};
use crate::supervise::Health;
use crate::timed::{Activity, Timed, Tracked};

/// Serves `proxy` on `listener` until `shutdown`, then stops accepting, lets open connections
/// finish their current requests (keep-alive connections are closed after them) for at most
/// `drain_timeout`, and returns.
///
/// Each connection starts in [`crate::front`], which serves the common HTTP/1.1 request; the
/// first request it does not serve hands the connection, with what was read, to hyper's
/// server (HTTP/1.1 with upgrades, or h2c) for the rest of its life. Both hold the client to
/// the proxy's [`crate::limits::Limits`]; a connection is accepted only while fewer than
/// `max_connections` are open (the others wait in the listen backlog).
pub async fn serve_proxy(
    listener: TcpListener,
    proxy: Arc<Proxy>,
    shutdown: CancellationToken,
    drain_timeout: Duration,
) {
    serve_on(listener, proxy, shutdown, drain_timeout, None).await;
}

/// A proxy thread's place among the others: its index, and the connections handed to it.
struct Lane {
    spread: Arc<Spread>,
    thread: usize,
    inbox: UnboundedReceiver<Accepted>,
}

/// [`serve_proxy`] on one of the proxy threads when `lane` is set: a connection accepted here
/// is served by the thread with the fewest open connections ([`crate::spread`]), and the
/// connections other threads hand here are served too.
async fn serve_on(
    listener: TcpListener,
    proxy: Arc<Proxy>,
    shutdown: CancellationToken,
    drain_timeout: Duration,
    lane: Option<Lane>,
) {
    let builder = Arc::new(hyper_builder());
    let connections = TaskTracker::new();
    let (spread, here) = match lane {
        Some(Lane {
            spread,
            thread,
            inbox,
        }) => {
            tokio::spawn(serve_handed(
                inbox,
                connections.clone(),
                Arc::clone(&proxy),
                Arc::clone(&builder),
                shutdown.clone(),
            ));
            (Some(spread), thread)
        }
        None => (None, 0),
    };
    loop {
        let permit = tokio::select! {
            () = shutdown.cancelled() => break,
            permit = proxy.connection_permit() => match permit {
                Some(permit) => permit,
                None => break,
            },
        };
        // What the connection may make the process hold, at its worst: past the budget, wait
        // (the client waits in the listen backlog) instead of growing.
        let memory = tokio::select! {
            () = shutdown.cancelled() => break,
            memory = proxy.memory(limits::CONNECTION_BYTES) => match memory {
                Some(memory) => memory,
                None => break,
            },
        };
        let (stream, remote) = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let seat = spread.as_ref().map(|spread| spread.seat(here));
        let (stream, reserved) = match (seat, &spread) {
            (Some(seat), Some(spread)) if seat.thread() != here => {
                // Another thread has fewer connections: it serves this one.
                let stream = match stream.into_std() {
                    Ok(stream) => stream,
                    Err(error) => {
                        tracing::debug!(%error, %remote, "accepted connection is unusable");
                        continue;
                    }
                };
                let accepted = Accepted {
                    stream,
                    remote,
                    permit,
                    memory,
                    seat,
                };
                let Err(back) = spread.hand(accepted) else {
                    continue;
                };
                // That thread has stopped: served here.
                let Accepted {
                    stream,
                    permit,
                    memory,
                    seat,
                    ..
                } = *back;
                match tokio::net::TcpStream::from_std(stream) {
                    Ok(stream) => (
                        stream,
                        Reserved {
                            permit,
                            memory,
                            seat: Some(seat),
                        },
                    ),
                    Err(error) => {
                        tracing::debug!(%error, %remote, "accepted connection is unusable");
                        continue;
                    }
                }
            }
            (seat, _) => (
                stream,
                Reserved {
                    permit,
                    memory,
                    seat,
                },
            ),
        };
        spawn_connection(
            &connections,
            stream,
            remote,
            reserved,
            &proxy,
            &builder,
            &shutdown,
        );
    }
    drop(listener);
    connections.close();
    if tokio::time::timeout(drain_timeout, connections.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            ?drain_timeout,
            "connections still open after the drain timeout"
        );
    }
}

/// Serves the connections other proxy threads hand to this one, among `connections`, until
/// `shutdown`.
async fn serve_handed(
    mut inbox: UnboundedReceiver<Accepted>,
    connections: TaskTracker,
    proxy: Arc<Proxy>,
    builder: Arc<auto::Builder<TokioExecutor>>,
    shutdown: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = inbox.recv() => match accepted {
                Some(accepted) => accepted,
                None => break,
            },
        };
        let Accepted {
            stream,
            remote,
            permit,
            memory,
            seat,
        } = accepted;
        // Registered with this thread's runtime from here on.
        let stream = match tokio::net::TcpStream::from_std(stream) {
            Ok(stream) => stream,
            Err(error) => {
                tracing::debug!(%error, %remote, "handed connection is unusable");
                continue;
            }
        };
        let reserved = Reserved {
            permit,
            memory,
            seat: Some(seat),
        };
        spawn_connection(
            &connections,
            stream,
            remote,
            reserved,
            &proxy,
            &builder,
            &shutdown,
        );
    }
}

/// What a connection holds while it is open: its place under the connection limit, its share
/// of the memory budget, and its count on its proxy thread.
struct Reserved {
    permit: OwnedSemaphorePermit,
    memory: OwnedSemaphorePermit,
    seat: Option<Seat>,
}

/// Serves an accepted connection on this thread, among `connections`.
fn spawn_connection(
    connections: &TaskTracker,
    stream: tokio::net::TcpStream,
    remote: SocketAddr,
    reserved: Reserved,
    proxy: &Arc<Proxy>,
    builder: &Arc<auto::Builder<TokioExecutor>>,
    shutdown: &CancellationToken,
) {
    let stream = match Stream::new(stream) {
        Ok(stream) => stream,
        Err(error) => {
            tracing::debug!(%error, %remote, "accepted connection is unusable");
            return;
        }
    };
    let (proxy, shutdown, builder) = (Arc::clone(proxy), shutdown.clone(), Arc::clone(builder));
    connections.spawn(async move {
        let Reserved {
            permit,
            memory,
            seat,
        } = reserved;
        let _open = Open::new(permit, &proxy.metrics().connections);
        let _held = (memory, seat);
        let peer = proxy.peer(remote);
        serve_connection(stream, proxy, peer, &builder, &shutdown).await;
    });
}

/// The server [`serve_connection`] hands connections to when [`crate::front`] does not serve
/// them.
pub fn hyper_builder() -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // The header read and idle timeouts are `crate::timed`'s: hyper's would also cut a quiet
    // kept-alive connection at the header read timeout. The buffers and windows are bounded
    // as the memory budget counts them (`crate::limits::HTTP1_CONNECTION_BYTES`,
    // `HTTP2_CONNECTION_BYTES`).
    builder
        .http1()
        .header_read_timeout(None)
        .max_buf_size(limits::HYPER_MAX_BUF);
    builder
        .http2()
        .initial_connection_window_size(limits::HTTP2_CONNECTION_WINDOW)
        .initial_stream_window_size(limits::HTTP2_STREAM_WINDOW)
        .max_concurrent_streams(limits::HTTP2_MAX_STREAMS)
        .max_header_list_size(limits::HTTP2_MAX_HEADER_LIST)
        .max_send_buf_size(limits::HYPER_MAX_BUF);
    builder
}

/// Serves one client connection as [`serve_proxy`] serves each one it accepts: in
/// [`crate::front`], then with hyper's server (`builder`, from [`hyper_builder`]) from the
/// first request the front path hands over. Generic over the stream so the fuzzer (`fuzz/`)
/// drives it in memory.
pub async fn serve_connection<S: ClientStream + Send + 'static>(
    stream: S,
    proxy: Arc<Proxy>,
    peer: Peer,
    builder: &auto::Builder<TokioExecutor>,
    shutdown: &CancellationToken,
) {
    if let Some(rewound) = front::serve(stream, &proxy, &peer, shutdown).await {
        serve_with_hyper(rewound, proxy, peer, builder, shutdown).await;
    }
}

/// An open client connection: its place under the connection limit and its count in the
/// `connections` gauge, both given back when dropped.
struct Open {
    _permit: OwnedSemaphorePermit,
    gauge: Gauge,
}

impl Open {
    fn new(permit: OwnedSemaphorePermit, gauge: &Gauge) -> Self {
        gauge.inc();
        Self {
            _permit: permit,
            gauge: gauge.clone(),
        }
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

/// The answer to an HTTP/1 connection that hyper would serve when the memory budget has no
/// room for its buffers.
const OVER_BUDGET: &[u8] =
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
retry-after: 1\r\nconnection: close\r\ncontent-length: 71\r\n\r\n\
{\"error\":\"memory_budget\",\"message\":\"the proxy is at its memory budget\"}";

/// Serves the rest of a connection with hyper's server, its deadlines kept by
/// [`crate::timed`]; on `shutdown`, the request in progress is finished and the connection
/// closed.
async fn serve_with_hyper<S: ClientStream + Send + 'static>(
    io: Rewound<S>,
    proxy: Arc<Proxy>,
    peer: Peer,
    builder: &auto::Builder<TokioExecutor>,
    shutdown: &CancellationToken,
) {
    let http2 = io.is_http2();
    // hyper's buffers (and HTTP/2's windows and streams) come on top of the front path's.
    let Some(_memory) = proxy.try_memory(if http2 {
        limits::HTTP2_CONNECTION_BYTES
    } else {
        limits::HTTP1_CONNECTION_BYTES
    }) else {
        proxy.metrics().memory_budget_refusals.inc();
        let mut io = io;
        if !http2 {
            let _ = tokio::io::AsyncWriteExt::write_all(&mut io, OVER_BUDGET).await;
        }
        let _ = tokio::io::AsyncWriteExt::shutdown(&mut io).await;
        return;
    };
    let activity = Arc::new(Activity::default());
    let io = Timed::new(
        io,
        Arc::clone(&activity),
        *proxy.limits(),
        Arc::clone(proxy.metrics()),
        http2,
    );
    let connection = Arc::new((proxy, peer, activity));
    let service = service_fn(move |request: Request<Incoming>| {
        let connection = Arc::clone(&connection);
        async move {
            let (proxy, peer, activity) = &*connection;
            let busy = activity.begin();
            let response = proxy.handle(request, peer).await;
            if response.status() == StatusCode::SWITCHING_PROTOCOLS {
                activity.upgraded();
            }
            Ok::<_, Infallible>(response.map(|body| Tracked::new(body, busy)))
        }
    });
    let mut connection = pin!(builder.serve_connection_with_upgrades(TokioIo::new(io), service));
    tokio::select! {
        _ = connection.as_mut() => return,
        () = shutdown.cancelled() => {}
    }
    connection.as_mut().graceful_shutdown();
    let _ = connection.await;
}

/// Serves `proxy` on `threads` threads, each with its own single-threaded runtime accepting on
/// `listener` (the kernel hands each new connection to one of them) and keeping its
/// connections, their requests and the pod connections they open to itself, as nginx's worker
/// processes do. A multi-threaded runtime would move tasks between threads, and a task that
/// tokio keeps in a worker's LIFO slot cannot be stolen: when that worker is preempted (the
/// proxy shares its cores), the request waits for the whole time slice. Returns the threads;
/// each ends as [`serve_proxy`] does after `shutdown`.
///
/// # Errors
/// The listener cannot be shared or a thread or runtime cannot be started.
pub fn spawn_proxy_threads(
    listener: std::net::TcpListener,
    threads: usize,
    proxy: Arc<Proxy>,
    shutdown: CancellationToken,
    drain_timeout: Duration,
) -> std::io::Result<Vec<std::thread::JoinHandle<()>>> {
    listener.set_nonblocking(true)?;
    let mut handles = Vec::with_capacity(threads.max(1));
    let (spread, inboxes) = Spread::new(threads);
    for (index, inbox) in inboxes.into_iter().enumerate() {
        let listener = listener.try_clone()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let proxy = Arc::clone(&proxy);
        let shutdown = shutdown.clone();
        // One thread has no other to spread to.
        let lane = (threads > 1).then(|| Lane {
            spread: Arc::clone(&spread),
            thread: index,
            inbox,
        });
        let handle = std::thread::Builder::new()
            .name(format!("proxy-{index}"))
            .spawn(move || {
                crate::upstream::set_proxy_thread(index);
                runtime.block_on(async move {
                    // Keeps each request's response timeout from waking this runtime.
                    tokio::spawn(crate::anchor::run());
                    match TcpListener::from_std(listener) {
                        Ok(listener) => {
                            serve_on(listener, proxy, shutdown, drain_timeout, lane).await;
                        }
                        Err(error) => tracing::error!(%error, "proxy thread cannot listen"),
                    }
                });
            })?;
        handles.push(handle);
    }
    Ok(handles)
}

/// Whether the process is ready for traffic: set once the watches have synced, cleared when
/// draining.
#[derive(Clone, Debug, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    /// Sets readiness.
    pub fn set(&self, ready: bool) {
        self.0.store(ready, Ordering::Release);
    }

    /// Reads it.
    pub fn get(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response
}

/// The admin endpoints. `/healthz` fails (503, naming the task) while a background task has
/// been failing for longer than its grace period ([`Health::check`]).
pub fn admin_response(
    path: &str,
    ready: &Readiness,
    health: &Health,
    metrics: &SharedMetrics,
) -> Response<Full<Bytes>> {
    match path {
        "/healthz" => match health.check() {
            Ok(()) => text(StatusCode::OK, "ok"),
            Err(report) => text(StatusCode::SERVICE_UNAVAILABLE, report),
        },
        "/readyz" if ready.get() => text(StatusCode::OK, "ready"),
        "/readyz" => text(StatusCode::SERVICE_UNAVAILABLE, "not ready"),
        "/metrics" => {
            let mut response = text(StatusCode::OK, metrics.encode());
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                http::HeaderValue::from_static(
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                ),
            );
            response
        }
        _ => text(StatusCode::NOT_FOUND, "not found"),
    }
}

/// The limits of the admin listener's clients: anyone who reaches the pod can connect to it,
/// and the kubelet's probes must still get through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdminLimits {
    /// Connections served at once; more wait in the listen backlog until one closes.
    pub max_connections: usize,
    /// From a connection's start (or the end of its previous answer) until a request head is
    /// complete; then the connection is closed.
    pub header_read_timeout: Duration,
    /// Largest request head; a larger one is answered 431 and the connection closed.
    pub max_head: usize,
    /// Longest life of a connection, whatever it does (a client that stops reading an answer
    /// is cut then).
    pub max_lifetime: Duration,
}

impl Default for AdminLimits {
    fn default() -> Self {
        Self {
            max_connections: 64,
            header_read_timeout: crate::limits::DEFAULT_HEADER_READ_TIMEOUT,
            max_head: 16 * 1024,
            max_lifetime: Duration::from_secs(60),
        }
    }
}

/// Serves the admin endpoints on `listener` until `shutdown`, its clients held to `limits`.
pub async fn serve_admin(
    listener: TcpListener,
    ready: Readiness,
    health: Arc<Health>,
    metrics: SharedMetrics,
    limits: AdminLimits,
    shutdown: CancellationToken,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections.max(1)));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        // hyper's smallest read buffer is 8 KiB.
        .max_buf_size(limits.max_head.max(8 * 1024));
    loop {
        // Past the cap, connections wait in the listen backlog.
        let slot = tokio::select! {
            () = shutdown.cancelled() => return,
            slot = Arc::clone(&slots).acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => return,
            },
        };
        let (stream, _) = tokio::select! {
            () = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let ready = ready.clone();
        let health = Arc::clone(&health);
        let metrics = Arc::clone(&metrics);
        let service = service_fn(move |request: Request<Incoming>| {
            let response = admin_response(request.uri().path(), &ready, &health, &metrics);
            async move { Ok::<_, Infallible>(response) }
        });
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        tokio::spawn(async move {
            let _slot = slot;
            let _ = tokio::time::timeout(limits.max_lifetime, connection).await;
        });
    }
}

/// Binds a loopback or configured address, naming it in the error.
///
/// # Errors
/// The address is in use or not permitted.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("binding {addr} failed: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;

    #[test]
    fn readyz_follows_readiness_and_healthz_the_background_tasks() {
        let ready = Readiness::default();
        let health = Health::new(Duration::from_secs(30));
        let metrics = Arc::new(Metrics::new());
        let status = |path| admin_response(path, &ready, &health, &metrics).status();
        assert_eq!(status("/healthz"), 200);
        assert_eq!(status("/readyz"), 503);
        ready.set(true);
        assert_eq!(status("/readyz"), 200);
        assert_eq!(status("/metrics"), 200);
        assert_eq!(status("/nope"), 404);
        // A failing task: see `supervise`'s tests and `tests/supervise.rs`.
    }
}
