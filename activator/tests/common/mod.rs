//! Test harness: an activator on a loopback port fed directly with targets, and real HTTP
//! backends on loopback.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use keda_activator::limits::{DEFAULT_HELD_MEMORY, Limits};
use keda_activator::metrics::Metrics;
use keda_activator::proxy::Proxy;
use keda_activator::server;
use keda_activator::targets::{TargetConfig, TargetLimits, Targets};
use keda_activator::trust::TrustedProxies;
use keda_scalers::ScalerContext;
use keda_scalers::scalers::http::HttpTrigger;
use keda_scalers::scalers::http::protocol::TargetKey;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// An activator serving on loopback.
pub struct Activator {
    pub addr: SocketAddr,
    pub targets: Arc<Targets>,
    pub metrics: Arc<Metrics>,
    pub wake: Option<mpsc::Receiver<TargetKey>>,
    pub stop: CancellationToken,
}

impl Drop for Activator {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

pub async fn activator() -> Activator {
    activator_with(Limits::default(), DEFAULT_HELD_MEMORY).await
}

/// An activator whose clients are held to `limits` and whose targets' held requests may keep
/// `held_memory` bytes each.
pub async fn activator_with(limits: Limits, held_memory: usize) -> Activator {
    activator_trusting(limits, held_memory, TrustedProxies::default()).await
}

/// As [`activator_with`], keeping the forwarding headers of peers in `trusted`.
pub async fn activator_trusting(
    limits: Limits,
    held_memory: usize,
    trusted: TrustedProxies,
) -> Activator {
    let targets = TargetLimits {
        held_memory,
        ..TargetLimits::default()
    };
    activator_configured(limits, targets, trusted).await
}

/// An activator with every limit given.
pub async fn activator_configured(
    limits: Limits,
    target_limits: TargetLimits,
    trusted: TrustedProxies,
) -> Activator {
    let metrics = Arc::new(Metrics::new());
    let (wake_tx, wake_rx) = mpsc::channel(1024);
    let targets = Targets::with_limits(wake_tx, Arc::clone(&metrics), target_limits);
    let proxy = Arc::new(
        Proxy::with_limits(targets.routes(), Arc::clone(&metrics), limits).trusting(trusted),
    );
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("test harness");
    let addr = listener.local_addr().expect("test harness");
    let stop = CancellationToken::new();
    tokio::spawn(server::serve_proxy(
        listener,
        proxy,
        stop.clone(),
        Duration::from_secs(5),
    ));
    Activator {
        addr,
        targets,
        metrics,
        wake: Some(wake_rx),
        stop,
    }
}

impl Activator {
    /// Routes ScaledObject `shop/<name>`, an `http` trigger with `metadata` ([`config`]), to
    /// the ready `pods`; its key.
    pub fn route(&self, name: &str, metadata: &[(&str, &str)], pods: Vec<SocketAddr>) -> TargetKey {
        let cfg = config(name, metadata);
        let key = cfg.key.clone();
        self.targets.apply(vec![cfg]);
        self.targets.set_ready(&key, pods);
        key
    }
}

/// The parsed `http` trigger of ScaledObject `shop/<name>` with `metadata`.
pub fn config(name: &str, metadata: &[(&str, &str)]) -> TargetConfig {
    let metadata: BTreeMap<String, String> = metadata
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let ctx = ScalerContext {
        scalable_name: name.into(),
        scalable_namespace: "shop".into(),
        metadata,
        ..ScalerContext::new("http", 0)
    };
    TargetConfig {
        key: TargetKey::new("shop", name, 0),
        trigger: HttpTrigger::parse(&ctx).expect("test harness"),
    }
}

/// Counts what a backend saw.
#[derive(Default)]
pub struct Seen {
    pub connections: AtomicUsize,
    pub requests: AtomicUsize,
    pub cancelled: AtomicUsize,
    pub last_headers: std::sync::Mutex<Option<http::HeaderMap>>,
    pub last_uri: std::sync::Mutex<Option<http::Uri>>,
}

struct CancelGuard(Arc<Seen>, bool);
impl Drop for CancelGuard {
    fn drop(&mut self) {
        if !self.1 {
            self.0.cancelled.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// A hyper backend: `/` answers `hello from <name>`, `/hang` never answers, `/echo` streams
/// the request body back. Connections are kept alive.
pub async fn backend(name: &'static str) -> (SocketAddr, Arc<Seen>) {
    backend_with(name, true).await
}

/// [`backend`], closing each connection after one answer when `keep_alive` is false.
pub async fn backend_with(name: &'static str, keep_alive: bool) -> (SocketAddr, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("test harness");
    let addr = listener.local_addr().expect("test harness");
    let seen = Arc::new(Seen::default());
    let state = Arc::clone(&seen);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            state.connections.fetch_add(1, Ordering::SeqCst);
            let state = Arc::clone(&state);
            tokio::spawn(async move {
                let service = service_fn(move |request: Request<Incoming>| {
                    let state = Arc::clone(&state);
                    async move {
                        state.requests.fetch_add(1, Ordering::SeqCst);
                        *state.last_headers.lock().expect("test harness") =
                            Some(request.headers().clone());
                        *state.last_uri.lock().expect("test harness") = Some(request.uri().clone());
                        let mut guard = CancelGuard(Arc::clone(&state), false);
                        let body = match request.uri().path() {
                            "/hang" => {
                                std::future::pending::<()>().await;
                                Bytes::new()
                            }
                            "/echo" => request
                                .into_body()
                                .collect()
                                .await
                                .expect("test harness")
                                .to_bytes(),
                            _ => Bytes::from(format!("hello from {name}")),
                        };
                        guard.1 = true;
                        Ok::<_, Infallible>(Response::new(Full::new(body)))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .keep_alive(keep_alive)
                    .serve_connection(TokioIo::new(stream), service)
                    .with_upgrades()
                    .await;
            });
        }
    });
    (addr, seen)
}

pub type TestClient = Client<HttpConnector, Full<Bytes>>;

pub fn client() -> TestClient {
    Client::builder(TokioExecutor::new()).build_http()
}

/// GET `http://<addr><path>` with `Host: <host>`; the status and body.
pub async fn get(client: &TestClient, addr: SocketAddr, host: &str, path: &str) -> (u16, String) {
    let request = Request::get(format!("http://{addr}{path}"))
        .header(http::header::HOST, host)
        .body(Full::new(Bytes::new()))
        .expect("test harness");
    let response = client.request(request).await.expect("test harness");
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("test harness")
        .to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// Polls `condition` until it holds, failing after 10 s.
pub async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let waited = tokio::time::timeout(Duration::from_secs(10), async {
        while !condition() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "timed out waiting for {what}");
}

/// A pod speaking raw TCP: `serve` gets each accepted connection on its own task. Returns
/// the pod's address and the number of connections it has accepted.
pub async fn raw_pod<F, Fut>(serve: F) -> (SocketAddr, Arc<AtomicUsize>)
where
    F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("test harness");
    let addr = listener.local_addr().expect("test harness");
    let connections = Arc::new(AtomicUsize::new(0));
    let accepted = Arc::clone(&connections);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            accepted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(serve(stream));
        }
    });
    (addr, connections)
}

/// Reads one request head (through the blank line) byte by byte, so nothing after it is
/// consumed; `None` if the connection ends first.
pub async fn read_head(stream: &mut tokio::net::TcpStream) -> Option<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await.unwrap_or(0) == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    Some(head)
}

/// Awaits `future`, failing after `secs` seconds.
pub async fn within<T>(secs: u64, what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(secs), future)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// Sends `request` on a new connection to `addr` and reads the answer to the end (the request
/// asks to close), failing after 10 s.
pub async fn exchange(addr: SocketAddr, request: &[u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("test harness");
    stream.write_all(request).await.expect("test harness");
    let mut answer = Vec::new();
    within(10, "the answer", stream.read_to_end(&mut answer))
        .await
        .expect("test harness");
    String::from_utf8_lossy(&answer).into_owned()
}

/// A WebSocket-style pod: answers an upgrade with 101, then echoes every byte.
pub async fn websocket_pod() -> SocketAddr {
    use tokio::io::AsyncWriteExt;
    let (addr, _) = raw_pod(|mut stream| async move {
        let Some(head) = read_head(&mut stream).await else {
            return;
        };
        let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
        assert!(head.contains("upgrade: websocket"), "{head}");
        stream
            .write_all(
                b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
                  Connection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n",
            )
            .await
            .expect("test harness");
        let (mut r, mut w) = stream.split();
        let _ = tokio::io::copy(&mut r, &mut w).await;
    })
    .await;
    addr
}

/// A WebSocket through the activator at `addr` to host `ws.example.com`, upgraded (its 101
/// read).
pub async fn websocket(addr: SocketAddr) -> tokio::net::TcpStream {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut ws = tokio::net::TcpStream::connect(addr)
        .await
        .expect("test harness");
    ws.write_all(
        b"GET /chat HTTP/1.1\r\nHost: ws.example.com\r\nConnection: Upgrade\r\n\
          Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    )
    .await
    .expect("test harness");
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    within(10, "101", async {
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(ws.read(&mut byte).await.expect("test harness"), 1);
            head.push(byte[0]);
        }
    })
    .await;
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    ws
}

/// Sends a masked text frame "hello" (RFC 6455 5.7) on `ws` and checks it comes back byte
/// for byte.
pub async fn websocket_echo(ws: &mut tokio::net::TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let frame = [
        0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
    ];
    ws.write_all(&frame).await.expect("test harness");
    let mut echoed = [0u8; 11];
    within(10, "echo", ws.read_exact(&mut echoed))
        .await
        .expect("test harness");
    assert_eq!(echoed, frame);
}
