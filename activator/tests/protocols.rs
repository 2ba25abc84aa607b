//! Issue 28: each protocol held through a scale from zero and delivered. A target starts with
//! no ready pod; the request is held (it is counted as such), then the pod turns ready with
//! the protocol its Service port's `appProtocol` names, and the request is answered:
//!
//! - HTTP/1.1 client to an h2c pod (`kubernetes.io/h2c`): the pod sees HTTP/2;
//! - gRPC unary and bidirectional streaming, HTTP/2 from the client to an h2c pod, trailers
//!   (`grpc-status`) delivered, each streamed message echoed before the next is sent;
//! - WebSocket to an HTTP/1.1 pod;
//! - HTTP/2 over TLS (`kubernetes.io/h2`) and HTTP/1.1 over TLS (`https`, `kubernetes.io/wss`:
//!   requests with and without a body on kept-alive connections, a WebSocket), each pod's
//!   certificate checked against `--pod-ca-file` for its Service's name, and refused (502,
//!   the cause logged, not told to the client) when it is not for that name, when another CA
//!   issued it, or when there is no `--pod-ca-file` (then the pod is not even connected to).
//!
//! (HTTP/1.1 through a scale from zero: `scale_from_zero.rs`.)

mod common;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use common::{activator, config, within};
use futures::StreamExt;
use http::{HeaderMap, HeaderValue, Request, Response};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use keda_activator::upstream::{AppProtocol, PodTrust};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

type Frames = StreamBody<futures::stream::BoxStream<'static, Result<Frame<Bytes>, Infallible>>>;

/// A gRPC message: uncompressed, 4-byte big-endian length, the bytes.
fn grpc_message(payload: &[u8]) -> Bytes {
    let mut out = vec![0u8];
    out.extend_from_slice(&u32::try_from(payload.len()).expect("small").to_be_bytes());
    out.extend_from_slice(payload);
    Bytes::from(out)
}

fn grpc_ok() -> HeaderMap {
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    trailers
}

/// An HTTP/2 pod speaking h2c with prior knowledge only (as gRPC servers do): `/hello`
/// answers the version it was spoken to in; `/echo.Echo/Unary` answers the request's message
/// with `grpc-status: 0`; `/echo.Echo/Stream` echoes every data frame as it arrives, then
/// `grpc-status: 0` once the client ends its stream.
async fn h2c_pod() -> SocketAddr {
    h2_pod(None).await
}

/// [`h2c_pod`], over TLS with `tls` (ALPN `h2`) when given.
async fn h2_pod(tls: Option<Arc<rustls::ServerConfig>>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("pod");
    let addr = listener.local_addr().expect("pod");
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let tls = tls.clone();
            tokio::spawn(async move {
                let service = service_fn(|req: Request<Incoming>| async move {
                    let version = req.version();
                    let path = req.uri().path().to_string();
                    let te = req.headers().get("te").cloned();
                    let body: Frames = match path.as_str() {
                        "/hello" => {
                            let text = Bytes::from(format!("hello over {version:?}"));
                            StreamBody::new(futures::stream::iter([Ok(Frame::data(text))]).boxed())
                        }
                        "/echo.Echo/Unary" => {
                            assert_eq!(te.as_ref().map(|v| v.as_bytes()), Some(&b"trailers"[..]));
                            let message =
                                req.into_body().collect().await.expect("request").to_bytes();
                            StreamBody::new(
                                futures::stream::iter([
                                    Ok(Frame::data(message)),
                                    Ok(Frame::trailers(grpc_ok())),
                                ])
                                .boxed(),
                            )
                        }
                        _ => {
                            let (tx, rx) = mpsc::channel::<Frame<Bytes>>(8);
                            let mut body = req.into_body();
                            tokio::spawn(async move {
                                while let Some(Ok(frame)) = body.frame().await {
                                    if let Ok(data) = frame.into_data()
                                        && tx.send(Frame::data(data)).await.is_err()
                                    {
                                        return;
                                    }
                                }
                                let _ = tx.send(Frame::trailers(grpc_ok())).await;
                            });
                            StreamBody::new(
                                futures::stream::unfold(rx, |mut rx| async move {
                                    rx.recv().await.map(|f| (Ok(f), rx))
                                })
                                .boxed(),
                            )
                        }
                    };
                    let mut response = Response::new(body);
                    if path.starts_with("/echo.") {
                        response.headers_mut().insert(
                            http::header::CONTENT_TYPE,
                            HeaderValue::from_static("application/grpc"),
                        );
                    }
                    Ok::<_, Infallible>(response)
                });
                let builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
                match tls {
                    None => {
                        let _ = builder
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    }
                    Some(tls) => {
                        let Ok(stream) = tokio_rustls::TlsAcceptor::from(tls).accept(stream).await
                        else {
                            return;
                        };
                        let _ = builder
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    }
                }
            });
        }
    });
    addr
}

/// An HTTP/2 (prior knowledge) connection to the activator at `addr`.
async fn h2_client(addr: SocketAddr) -> hyper::client::conn::http2::SendRequest<Frames> {
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .expect("activator");
    let (sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
            .await
            .expect("HTTP/2 handshake with the activator");
    tokio::spawn(connection);
    sender
}

fn grpc_request(path: &str, body: Frames) -> Request<Frames> {
    Request::post(format!("http://grpc.example.com{path}"))
        .header(http::header::CONTENT_TYPE, "application/grpc")
        .header("te", "trailers")
        .body(body)
        .expect("request")
}

#[tokio::test]
async fn an_http1_request_held_at_zero_reaches_an_h2c_pod_over_http2() {
    let act = activator().await;
    let cfg = config("web", &[("hosts", "web.example.com"), ("service", "web")]);
    let key = cfg.key.clone();
    act.targets.apply(vec![cfg]);
    let target = act.targets.get(&key).expect("target");
    let client = common::client();
    let addr = act.addr;
    let request =
        tokio::spawn(async move { common::get(&client, addr, "web.example.com", "/hello").await });
    common::eventually("the request to be held", || target.held() == 1).await;
    act.targets.set_protocol(&key, AppProtocol::H2c);
    act.targets.set_ready(&key, vec![h2c_pod().await]);
    let (status, body) = within(10, "the answer", request)
        .await
        .expect("request task");
    assert_eq!((status, body.as_str()), (200, "hello over HTTP/2.0"));
}

#[tokio::test]
async fn grpc_unary_and_streaming_calls_held_at_zero_are_delivered_with_their_trailers() {
    let act = activator().await;
    let cfg = config(
        "grpc",
        &[("hosts", "grpc.example.com"), ("service", "grpc")],
    );
    let key = cfg.key.clone();
    act.targets.apply(vec![cfg]);
    let target = act.targets.get(&key).expect("target");

    // Unary, held.
    let mut client = h2_client(act.addr).await;
    let unary = {
        let message = grpc_message(b"ping");
        let body: Frames =
            StreamBody::new(futures::stream::iter([Ok(Frame::data(message))]).boxed());
        client.send_request(grpc_request("/echo.Echo/Unary", body))
    };
    let unary = tokio::spawn(unary);
    // Bidirectional streaming, held too: the first message is sent before any pod is ready.
    let (tx, rx) = mpsc::channel::<Frame<Bytes>>(4);
    let stream_body: Frames = StreamBody::new(
        futures::stream::unfold(
            rx,
            |mut rx| async move { rx.recv().await.map(|f| (Ok(f), rx)) },
        )
        .boxed(),
    );
    tx.send(Frame::data(grpc_message(b"one")))
        .await
        .expect("send");
    let mut client2 = client.clone();
    let streaming = tokio::spawn(async move {
        client2
            .send_request(grpc_request("/echo.Echo/Stream", stream_body))
            .await
    });
    common::eventually("both calls to be held", || target.held() == 2).await;

    act.targets.set_protocol(&key, AppProtocol::H2c);
    act.targets.set_ready(&key, vec![h2c_pod().await]);

    let response = within(10, "the unary answer", unary)
        .await
        .expect("task")
        .expect("unary response");
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/grpc");
    let collected = within(10, "the unary body", response.into_body().collect())
        .await
        .expect("unary body");
    assert_eq!(
        collected
            .trailers()
            .and_then(|t| t.get("grpc-status"))
            .map(HeaderValue::as_bytes),
        Some(&b"0"[..])
    );
    assert_eq!(collected.to_bytes(), grpc_message(b"ping"));

    // Streaming: each message comes back before the next is sent, then the trailers.
    let response = within(10, "the streaming answer", streaming)
        .await
        .expect("task")
        .expect("streaming response");
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    // The next message, or `None` once the trailers (`grpc-status: 0`) end the call.
    let mut next_data = async || {
        let frame = within(10, "a streamed frame", body.frame())
            .await
            .expect("a frame")
            .expect("no error");
        match frame.into_data() {
            Ok(data) => Some(data),
            Err(frame) => {
                let trailers = frame.into_trailers().expect("data or trailers");
                assert_eq!(trailers["grpc-status"], "0");
                None
            }
        }
    };
    assert_eq!(next_data().await, Some(grpc_message(b"one")));
    tx.send(Frame::data(grpc_message(b"two")))
        .await
        .expect("send");
    assert_eq!(next_data().await, Some(grpc_message(b"two")));
    tx.send(Frame::data(grpc_message(b"three")))
        .await
        .expect("send");
    assert_eq!(next_data().await, Some(grpc_message(b"three")));
    drop(tx);
    assert_eq!(next_data().await, None, "the trailers end the call");
}

#[tokio::test]
async fn a_websocket_held_at_zero_is_upgraded_and_echoes() {
    let act = activator().await;
    let cfg = config("ws", &[("hosts", "ws.example.com"), ("service", "ws")]);
    let key = cfg.key.clone();
    act.targets.apply(vec![cfg]);
    let target = act.targets.get(&key).expect("target");
    let addr = act.addr;
    let ws = tokio::spawn(async move { common::websocket(addr).await });
    common::eventually("the upgrade to be held", || target.held() == 1).await;
    act.targets
        .set_ready(&key, vec![common::websocket_pod().await]);
    let mut ws = within(10, "the 101", ws).await.expect("task");
    common::websocket_echo(&mut ws).await;
}

#[tokio::test]
async fn an_unanswerable_h2c_pod_is_a_502_not_a_hang() {
    let act = activator().await;
    let cfg = config(
        "gone",
        &[("hosts", "gone.example.com"), ("service", "gone")],
    );
    let key = cfg.key.clone();
    act.targets.apply(vec![cfg]);
    // A port nothing listens on.
    let closed = TcpListener::bind("127.0.0.1:0").await.expect("port");
    let dead = closed.local_addr().expect("port");
    drop(closed);
    act.targets.set_protocol(&key, AppProtocol::H2c);
    act.targets.set_ready(&key, vec![dead]);
    let client = common::client();
    let (status, _) = within(
        10,
        "the answer",
        common::get(&client, act.addr, "gone.example.com", "/"),
    )
    .await;
    assert_eq!(status, 502);
}

/// A pod's TLS configuration: a certificate for `hosts` issued by `ca`, the ALPN protocols
/// `alpn` in the pod's order of preference.
fn pod_tls_config(
    ca: &keda_tls::pki::CertificateAuthority,
    hosts: &[&str],
    alpn: &[&[u8]],
) -> Arc<rustls::ServerConfig> {
    let pair = ca.issue_server("pod", hosts).expect("pod certificate");
    let key =
        keda_tls::certified_key(pair.cert.as_bytes(), pair.key.as_bytes(), "pod").expect("pod key");
    let mut config = rustls::ServerConfig::builder_with_provider(keda_tls::provider())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(key)));
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

/// A pod serving HTTP/2 over TLS with a certificate for `hosts`, issued by `ca`.
async fn tls_pod(ca: &keda_tls::pki::CertificateAuthority, hosts: &[&str]) -> SocketAddr {
    h2_pod(Some(pod_tls_config(ca, hosts, &[b"h2"]))).await
}

#[tokio::test]
async fn grpc_held_at_zero_reaches_a_tls_pod_checked_for_its_service_name() {
    let ca = keda_tls::pki::CertificateAuthority::new("pods").expect("CA");
    let other_ca = keda_tls::pki::CertificateAuthority::new("elsewhere").expect("CA");
    let act = activator().await;
    act.targets
        .set_pod_tls(PodTrust::from_pem(ca.cert_pem().as_bytes()).expect("CA bundle"));
    let route = |name: &str, host: &str| {
        let cfg = config(name, &[("hosts", host), ("service", name)]);
        let key = cfg.key.clone();
        act.targets.apply(vec![cfg]);
        key
    };
    let unary = |host: &'static str| {
        let addr = act.addr;
        tokio::spawn(async move {
            let mut client = h2_client(addr).await;
            let body: Frames = StreamBody::new(
                futures::stream::iter([Ok(Frame::data(grpc_message(b"secure")))]).boxed(),
            );
            let request = Request::post(format!("http://{host}/echo.Echo/Unary"))
                .header(http::header::CONTENT_TYPE, "application/grpc")
                .header("te", "trailers")
                .body(body)
                .expect("request");
            let response = client.send_request(request).await.expect("response");
            let status = response.status();
            let collected = response.into_body().collect().await.expect("body");
            let grpc_status = collected
                .trailers()
                .and_then(|t| t.get("grpc-status"))
                .map(|v| v.to_str().expect("ascii").to_string());
            (status, grpc_status, collected.to_bytes())
        })
    };

    // Held at zero, then a pod whose certificate is for `secure.shop.svc`.
    let key = route("secure", "secure.example.com");
    let target = act.targets.get(&key).expect("target");
    let call = unary("secure.example.com");
    common::eventually("the call to be held", || target.held() == 1).await;
    act.targets.set_protocol(&key, AppProtocol::H2);
    act.targets
        .set_ready(&key, vec![tls_pod(&ca, &["secure.shop.svc"]).await]);
    let (status, grpc_status, body) = within(10, "the answer", call).await.expect("task");
    assert_eq!(status, 200);
    assert_eq!(grpc_status.as_deref(), Some("0"));
    assert_eq!(body, grpc_message(b"secure"));

    // A certificate for another name, or from another CA: 502, nothing sent.
    for (name, pod) in [
        ("wrongname", tls_pod(&ca, &["other.shop.svc"]).await),
        ("wrongca", tls_pod(&other_ca, &["wrongca.shop.svc"]).await),
    ] {
        let host: &'static str = if name == "wrongname" {
            "wrongname.example.com"
        } else {
            "wrongca.example.com"
        };
        let key = route(name, host);
        act.targets.set_protocol(&key, AppProtocol::H2);
        act.targets.set_ready(&key, vec![pod]);
        let (status, _, _) = within(10, "the answer", unary(host)).await.expect("task");
        assert_eq!(status, 502, "{name}");
    }
}

#[tokio::test]
async fn without_a_pod_ca_a_tls_pod_gets_no_request() {
    let ca = keda_tls::pki::CertificateAuthority::new("pods").expect("CA");
    let (logs, _logging) = Logs::capture();
    let act = activator().await;
    let cfg = config(
        "secure",
        &[("hosts", "secure.example.com"), ("service", "secure")],
    );
    let key = cfg.key.clone();
    act.targets.apply(vec![cfg]);
    act.targets.set_protocol(&key, AppProtocol::H2);
    // A TLS pod (ALPN h2 offered) that counts the connections it is offered: without
    // --pod-ca-file the activator cannot check its certificate, so it must not connect at all.
    let (pod, seen) = https_pod(&ca, &["secure.shop.svc"]).await;
    act.targets.set_ready(&key, vec![pod]);
    let logged = refused_unconnected(
        act.addr,
        "secure.example.com",
        "shop/secure",
        pod,
        &seen,
        &logs,
    )
    .await;
    assert!(logged.contains("no --pod-ca-file is given"), "{logged}");
}

/// What an HTTP/1.1-over-TLS pod saw.
#[derive(Default)]
struct TlsSeen {
    /// The peers of the TCP connections accepted, in order (before any TLS).
    accepted: Mutex<Vec<SocketAddr>>,
    /// TLS connections accepted (handshakes completed).
    connections: AtomicUsize,
    /// Of those, the ones that resumed an earlier session.
    resumed: AtomicUsize,
    /// HTTP requests served.
    requests: AtomicUsize,
}

/// A pod serving HTTP/1.1 over TLS with a certificate for `hosts` issued by `ca`, offering
/// ALPN `h2` before `http/1.1` (so a client that offered `h2` would get it, and fail).
/// `/hello` answers its method, version and the protocol ALPN agreed (`none` when none);
/// `/echo` answers the request's body; `/close` answers and closes the connection; an
/// upgrade to `websocket` is answered 101 and every byte after it echoed.
async fn https_pod(
    ca: &keda_tls::pki::CertificateAuthority,
    hosts: &[&str],
) -> (SocketAddr, Arc<TlsSeen>) {
    let config = pod_tls_config(ca, hosts, &[b"h2", b"http/1.1"]);
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("pod");
    let addr = listener.local_addr().expect("pod");
    let seen = Arc::new(TlsSeen::default());
    let counts = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((stream, peer)) = listener.accept().await {
            counts.accepted.lock().expect("peers").push(peer);
            let config = Arc::clone(&config);
            let seen = Arc::clone(&counts);
            tokio::spawn(async move {
                let Ok(stream) = tokio_rustls::TlsAcceptor::from(config).accept(stream).await
                else {
                    return;
                };
                seen.connections.fetch_add(1, Ordering::SeqCst);
                let connection = stream.get_ref().1;
                if connection.handshake_kind() == Some(rustls::HandshakeKind::Resumed) {
                    seen.resumed.fetch_add(1, Ordering::SeqCst);
                }
                let alpn = connection
                    .alpn_protocol()
                    .map_or_else(|| "none".to_string(), |p| String::from_utf8_lossy(p).into());
                let service = service_fn(move |mut req: Request<Incoming>| {
                    let alpn = alpn.clone();
                    let seen = Arc::clone(&seen);
                    async move {
                        seen.requests.fetch_add(1, Ordering::SeqCst);
                        if req
                            .headers()
                            .get(http::header::UPGRADE)
                            .is_some_and(|u| u.as_bytes().eq_ignore_ascii_case(b"websocket"))
                        {
                            let upgraded = hyper::upgrade::on(&mut req);
                            tokio::spawn(async move {
                                if let Ok(upgraded) = upgraded.await {
                                    let (mut r, mut w) = tokio::io::split(TokioIo::new(upgraded));
                                    let _ = tokio::io::copy(&mut r, &mut w).await;
                                }
                            });
                            let response = Response::builder()
                                .status(101)
                                .header(http::header::CONNECTION, "Upgrade")
                                .header(http::header::UPGRADE, "websocket")
                                .header("sec-websocket-accept", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
                                .body(http_body_util::Full::new(Bytes::new()))
                                .expect("response");
                            return Ok::<_, Infallible>(response);
                        }
                        let path = req.uri().path().to_string();
                        let text = format!(
                            "{} {path} over {:?}, ALPN {alpn}",
                            req.method(),
                            req.version()
                        );
                        let mut response = match path.as_str() {
                            "/echo" => Response::new(http_body_util::Full::new(
                                req.into_body().collect().await.expect("body").to_bytes(),
                            )),
                            _ => Response::new(http_body_util::Full::new(Bytes::from(text))),
                        };
                        if path == "/close" {
                            response.headers_mut().insert(
                                http::header::CONNECTION,
                                HeaderValue::from_static("close"),
                            );
                        }
                        Ok(response)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .with_upgrades()
                    .await;
            });
        }
    });
    (addr, seen)
}

/// How many TCP connections the pod at `pod` accepted before now: a probe connection is made
/// and its acceptance awaited, and the connections accepted before it counted. The kernel
/// hands connections to `accept` in order, so one the activator made (even one it gave up on
/// at once) is counted, however late the pod's task got to it.
async fn tcp_accepted_before_now(pod: SocketAddr, seen: &TlsSeen) -> usize {
    let probe = tokio::net::TcpStream::connect(pod).await.expect("probe");
    let me = probe.local_addr().expect("probe");
    common::eventually("the pod to accept the probe", || {
        seen.accepted.lock().expect("peers").contains(&me)
    })
    .await;
    seen.accepted
        .lock()
        .expect("peers")
        .iter()
        .position(|peer| *peer == me)
        .expect("the probe was accepted")
}

/// A GET of `/hello` for `host` through the activator at `addr` is answered with the public
/// 502 of `target` (`namespace/name`), the pod at `pod` is not even connected to, and one 502 is
/// logged for the target: its line, for the caller to check the cause.
async fn refused_unconnected(
    addr: SocketAddr,
    host: &str,
    target: &str,
    pod: SocketAddr,
    seen: &TlsSeen,
    logs: &Logs,
) -> String {
    let client = common::client();
    let (status, body) = within(10, "the answer", common::get(&client, addr, host, "/hello")).await;
    assert_eq!((status, body), (502, public_502_body(target)));
    assert_eq!(
        tcp_accepted_before_now(pod, seen).await,
        0,
        "not even connected"
    );
    let logs = logs.text();
    let logged = logged_502s(&logs, target);
    assert_eq!(logged.len(), 1, "{logs}");
    logged[0].to_string()
}

/// The body of every 502 for `target` (`namespace/name`): the target and the reason only,
/// never the pod's address or the cause (docs/http.md, "A 502's body names the target
/// only"; `ProxyError::to_response`).
fn public_502_body(target: &str) -> String {
    format!(
        r#"{{"error":"upstream_error","target":"{target}","message":"{target}: forwarding to a pod failed"}}"#
    )
}

/// The activator's warnings `answered 502` for `target` (`namespace/name`), each with its
/// cause.
fn logged_502s<'a>(logs: &'a str, target: &str) -> Vec<&'a str> {
    let prefix = format!("{target}: forwarding to pod");
    logs.lines()
        .filter(|line| line.contains("answered 502") && line.contains(&prefix))
        .collect()
}

/// A WebSocket upgrade request for `host`, closing the connection after the answer.
fn upgrade_request(host: &str) -> Vec<u8> {
    format!(
        "GET /chat HTTP/1.1\r\nHost: {host}\r\nConnection: Upgrade, close\r\n\
         Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    )
    .into_bytes()
}

/// The activator's log lines while the returned guard lives (this test's thread: the
/// activator runs on the test's single-threaded runtime).
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    fn capture() -> (Self, tracing::subscriber::DefaultGuard) {
        let logs = Self::default();
        let writer = logs.clone();
        let guard = tracing::subscriber::set_default(
            tracing_subscriber::fmt()
                .with_writer(move || writer.clone())
                .with_ansi(false)
                .finish(),
        );
        (logs, guard)
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("logs")).into_owned()
    }
}

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("logs").extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Sends `method` `path` with `body` to the activator at `addr` for `host`; the status and
/// body.
async fn send(
    client: &common::TestClient,
    addr: SocketAddr,
    host: &str,
    method: &str,
    path: &str,
    body: &'static str,
) -> (u16, String) {
    let request = Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"))
        .header(http::header::HOST, host)
        .body(http_body_util::Full::new(Bytes::from_static(
            body.as_bytes(),
        )))
        .expect("request");
    let response = client.request(request).await.expect("response");
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn https_requests_held_at_zero_reach_a_tls_pod_in_http1_on_kept_alive_connections() {
    let ca = keda_tls::pki::CertificateAuthority::new("pods").expect("CA");
    let act = activator().await;
    act.targets
        .set_pod_tls(PodTrust::from_pem(ca.cert_pem().as_bytes()).expect("CA bundle"));
    let cfg = config(
        "secure",
        &[("hosts", "secure.example.com"), ("service", "secure")],
    );
    let key = cfg.key.clone();
    act.targets.apply(vec![cfg]);
    let target = act.targets.get(&key).expect("target");
    let client = common::client();
    let addr = act.addr;
    let held = {
        let client = client.clone();
        tokio::spawn(
            async move { common::get(&client, addr, "secure.example.com", "/hello").await },
        )
    };
    common::eventually("the request to be held", || target.held() == 1).await;
    let (pod, seen) = https_pod(&ca, &["secure.shop.svc"]).await;
    act.targets
        .set_protocol(&key, AppProtocol::of(Some("https")));
    act.targets.set_ready(&key, vec![pod]);
    let (status, body) = within(10, "the answer", held).await.expect("task");
    // HTTP/1.1 although the pod prefers h2: the activator offered `http/1.1` only.
    assert_eq!(
        (status, body.as_str()),
        (200, "GET /hello over HTTP/1.1, ALPN http/1.1")
    );

    // Without a body (the fast path from the client) and with one (hyper's): both on the
    // one TLS connection, kept alive between them.
    let (status, body) = within(
        10,
        "a second request",
        common::get(&client, addr, "secure.example.com", "/hello"),
    )
    .await;
    assert_eq!(
        (status, body.as_str()),
        (200, "GET /hello over HTTP/1.1, ALPN http/1.1")
    );
    let (status, body) = within(
        10,
        "a request with a body",
        send(
            &client,
            addr,
            "secure.example.com",
            "POST",
            "/echo",
            "a body over TLS",
        ),
    )
    .await;
    assert_eq!((status, body.as_str()), (200, "a body over TLS"));
    assert_eq!(seen.requests.load(Ordering::SeqCst), 3);
    assert_eq!(
        seen.connections.load(Ordering::SeqCst),
        1,
        "every request on the one kept-alive connection"
    );
    common::eventually("the slots to be free again", || !target.busy()).await;

    // The pod closes that connection: the next request opens a new one, which resumes the
    // TLS session.
    let (status, _) = within(
        10,
        "a request the pod closes after",
        common::get(&client, addr, "secure.example.com", "/close"),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = within(
        10,
        "a request on a new connection",
        common::get(&client, addr, "secure.example.com", "/hello"),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(seen.connections.load(Ordering::SeqCst), 2);
    assert_eq!(
        seen.resumed.load(Ordering::SeqCst),
        1,
        "the session is resumed"
    );
}

#[tokio::test]
async fn a_wss_upgrade_held_at_zero_is_carried_over_tls_and_echoes() {
    let ca = keda_tls::pki::CertificateAuthority::new("pods").expect("CA");
    let act = activator().await;
    act.targets
        .set_pod_tls(PodTrust::from_pem(ca.cert_pem().as_bytes()).expect("CA bundle"));
    let cfg = config("ws", &[("hosts", "ws.example.com"), ("service", "ws")]);
    let key = cfg.key.clone();
    act.targets.apply(vec![cfg]);
    let target = act.targets.get(&key).expect("target");
    let addr = act.addr;
    let ws = tokio::spawn(async move { common::websocket(addr).await });
    common::eventually("the upgrade to be held", || target.held() == 1).await;
    let (pod, seen) = https_pod(&ca, &["ws.shop.svc"]).await;
    act.targets
        .set_protocol(&key, AppProtocol::of(Some("kubernetes.io/wss")));
    act.targets.set_ready(&key, vec![pod]);
    let mut ws = within(10, "the 101", ws).await.expect("task");
    common::websocket_echo(&mut ws).await;
    common::websocket_echo(&mut ws).await;
    assert_eq!(seen.connections.load(Ordering::SeqCst), 1);
    assert!(target.busy(), "the upgraded connection keeps its slot");
    drop(ws);
    common::eventually("the slot to be freed when the client leaves", || {
        !target.busy()
    })
    .await;
}

#[tokio::test]
async fn an_https_pod_with_a_certificate_for_another_name_gets_no_request_and_a_502_is_logged() {
    let ca = keda_tls::pki::CertificateAuthority::new("pods").expect("CA");
    let (logs, _logging) = Logs::capture();
    let act = activator().await;
    act.targets
        .set_pod_tls(PodTrust::from_pem(ca.cert_pem().as_bytes()).expect("CA bundle"));
    let (pod, seen) = https_pod(&ca, &["other.shop.svc"]).await;
    let key = act.route(
        "wrongname",
        &[("hosts", "wrongname.example.com"), ("service", "wrongname")],
        vec![],
    );
    act.targets.set_protocol(&key, AppProtocol::Https);
    act.targets.set_ready(&key, vec![pod]);
    let client = common::client();
    for (method, path, body) in [("GET", "/hello", ""), ("POST", "/echo", "secret")] {
        let (status, answer) = within(
            10,
            "the answer",
            send(
                &client,
                act.addr,
                "wrongname.example.com",
                method,
                path,
                body,
            ),
        )
        .await;
        // The cause is for the operators only: the client gets the public body, exactly.
        assert_eq!(
            (status, answer),
            (502, public_502_body("shop/wrongname")),
            "{method}"
        );
    }
    assert_eq!(seen.requests.load(Ordering::SeqCst), 0, "nothing was sent");
    assert_eq!(
        seen.connections.load(Ordering::SeqCst),
        0,
        "no TLS connection completed"
    );
    assert!(
        tcp_accepted_before_now(pod, &seen).await >= 1,
        "the activator connected and refused the certificate"
    );
    let logs = logs.text();
    assert!(
        logs.matches("answered 502").count() >= 2
            && logs.contains("shop/wrongname")
            && logs.contains("TLS with the pod failed"),
        "{logs}"
    );
    // Each 502 is logged with its cause: the certificate is not for the Service's name.
    let logged = logged_502s(&logs, "shop/wrongname");
    assert_eq!(logged.len(), 2, "{logs}");
    for line in logged {
        assert!(
            line.contains(r#"certificate not valid for name "wrongname.shop.svc""#),
            "{line}"
        );
    }
}

#[tokio::test]
async fn without_a_pod_ca_an_https_or_wss_pod_gets_no_request_and_a_502_is_logged() {
    let ca = keda_tls::pki::CertificateAuthority::new("pods").expect("CA");
    let (logs, _logging) = Logs::capture();
    let act = activator().await;
    let (pod, seen) = https_pod(&ca, &["ws.shop.svc"]).await;
    let key = act.route(
        "ws",
        &[("hosts", "ws.example.com"), ("service", "ws")],
        vec![],
    );
    act.targets
        .set_protocol(&key, AppProtocol::of(Some("kubernetes.io/wss")));
    act.targets.set_ready(&key, vec![pod]);
    let client = common::client();
    let (status, body) = within(
        10,
        "the answer",
        common::get(&client, act.addr, "ws.example.com", "/hello"),
    )
    .await;
    assert_eq!((status, body), (502, public_502_body("shop/ws")));
    // An upgrade too.
    let answer = common::exchange(act.addr, &upgrade_request("ws.example.com")).await;
    assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
    assert!(answer.ends_with(&public_502_body("shop/ws")), "{answer}");
    assert_eq!(
        seen.connections.load(Ordering::SeqCst),
        0,
        "no TLS connection"
    );
    // Not even a TCP connection: the activator knows it cannot check the pod before it
    // connects.
    assert_eq!(
        tcp_accepted_before_now(pod, &seen).await,
        0,
        "not even connected"
    );
    let logs = logs.text();
    assert!(
        logs.matches("answered 502").count() >= 2 && logs.contains("no --pod-ca-file"),
        "{logs}"
    );
    let logged = logged_502s(&logs, "shop/ws");
    assert_eq!(logged.len(), 2, "{logs}");
    for line in logged {
        assert!(line.contains("no --pod-ca-file is given"), "{line}");
    }
}

#[tokio::test]
async fn an_https_or_wss_pod_certified_by_another_ca_gets_no_request_and_a_502_is_logged() {
    let ca = keda_tls::pki::CertificateAuthority::new("pods").expect("CA");
    let other_ca = keda_tls::pki::CertificateAuthority::new("elsewhere").expect("CA");
    let (logs, _logging) = Logs::capture();
    let act = activator().await;
    act.targets
        .set_pod_tls(PodTrust::from_pem(ca.cert_pem().as_bytes()).expect("CA bundle"));
    let client = common::client();
    for (name, app_protocol) in [("wrongca", "https"), ("wrongcaws", "kubernetes.io/wss")] {
        // The Service's name, but issued by a CA that --pod-ca-file does not hold.
        let certified = format!("{name}.shop.svc");
        let (pod, seen) = https_pod(&other_ca, &[certified.as_str()]).await;
        let host = format!("{name}.example.com");
        let key = act.route(name, &[("hosts", host.as_str()), ("service", name)], vec![]);
        act.targets
            .set_protocol(&key, AppProtocol::of(Some(app_protocol)));
        act.targets.set_ready(&key, vec![pod]);
        let target = format!("shop/{name}");
        let (status, answer) = within(
            10,
            "the answer",
            send(&client, act.addr, &host, "POST", "/echo", "secret"),
        )
        .await;
        assert_eq!((status, answer), (502, public_502_body(&target)), "{name}");
        let mut expected = 1;
        if app_protocol == "kubernetes.io/wss" {
            let answer = common::exchange(act.addr, &upgrade_request(&host)).await;
            assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
            assert!(answer.ends_with(&public_502_body(&target)), "{answer}");
            expected += 1;
        }
        assert_eq!(
            seen.requests.load(Ordering::SeqCst),
            0,
            "{name}: nothing sent"
        );
        assert_eq!(
            seen.connections.load(Ordering::SeqCst),
            0,
            "{name}: no TLS connection completed"
        );
        assert!(
            tcp_accepted_before_now(pod, &seen).await >= 1,
            "{name}: the activator connected and refused the certificate"
        );
        let logs = logs.text();
        let logged = logged_502s(&logs, &target);
        assert_eq!(logged.len(), expected, "{logs}");
        for line in logged {
            assert!(
                line.contains("TLS with the pod failed") && line.contains("UnknownIssuer"),
                "{line}"
            );
        }
    }
}

#[tokio::test]
async fn an_https_pod_whose_service_name_is_no_tls_name_gets_no_request_and_the_name_is_logged() {
    let ca = keda_tls::pki::CertificateAuthority::new("pods").expect("CA");
    let (logs, _logging) = Logs::capture();
    let act = activator().await;
    act.targets
        .set_pod_tls(PodTrust::from_pem(ca.cert_pem().as_bytes()).expect("CA bundle"));
    let (pod, seen) = https_pod(&ca, &["badname.shop.svc"]).await;
    // The trigger's parser refuses such a Service name; a configuration built another way
    // must still not be reported as a missing --pod-ca-file.
    let mut cfg = config(
        "badname",
        &[("hosts", "badname.example.com"), ("service", "badname")],
    );
    cfg.trigger.service = "bad name".to_string();
    let key = cfg.key.clone();
    act.targets.apply(vec![cfg]);
    act.targets.set_protocol(&key, AppProtocol::Https);
    act.targets.set_ready(&key, vec![pod]);
    let logged = refused_unconnected(
        act.addr,
        "badname.example.com",
        "shop/badname",
        pod,
        &seen,
        &logs,
    )
    .await;
    assert!(
        logged.contains(
            r#""bad name.shop.svc" (<service>.<namespace>.svc) cannot be a TLS server name"#
        ) && !logged.contains("--pod-ca-file"),
        "{logged}"
    );
}
