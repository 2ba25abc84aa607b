//! Issue 28: each protocol held through a scale from zero and delivered. A target starts with
//! no ready pod; the request is held (it is counted as such), then the pod turns ready with
//! the protocol its Service port's `appProtocol` names, and the request is answered:
//!
//! - HTTP/1.1 client to an h2c pod (`kubernetes.io/h2c`): the pod sees HTTP/2;
//! - gRPC unary and bidirectional streaming, HTTP/2 from the client to an h2c pod, trailers
//!   (`grpc-status`) delivered, each streamed message echoed before the next is sent;
//! - WebSocket to an HTTP/1.1 pod.
//!
//! (HTTP/1.1 through a scale from zero: `scale_from_zero.rs`.)

mod common;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use common::{activator, config, within};
use futures::StreamExt;
use http::{HeaderMap, HeaderValue, Request, Response};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use keda_activator::upstream::AppProtocol;
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

/// A pod serving HTTP/2 over TLS with a certificate for `hosts`, issued by `ca`.
async fn tls_pod(ca: &keda_tls::pki::CertificateAuthority, hosts: &[&str]) -> SocketAddr {
    let pair = ca.issue_server("pod", hosts).expect("pod certificate");
    let key =
        keda_tls::certified_key(pair.cert.as_bytes(), pair.key.as_bytes(), "pod").expect("pod key");
    let mut config = rustls::ServerConfig::builder_with_provider(keda_tls::provider())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(key)));
    config.alpn_protocols = vec![b"h2".to_vec()];
    h2_pod(Some(Arc::new(config))).await
}

#[tokio::test]
async fn grpc_held_at_zero_reaches_a_tls_pod_checked_for_its_service_name() {
    let ca = keda_tls::pki::CertificateAuthority::new("pods").expect("CA");
    let other_ca = keda_tls::pki::CertificateAuthority::new("elsewhere").expect("CA");
    let act = activator().await;
    act.targets.set_pod_tls(Arc::new(
        keda_activator::upstream::pod_tls_config(ca.cert_pem().as_bytes()).expect("CA bundle"),
    ));
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
    let act = activator().await;
    let cfg = config(
        "secure",
        &[("hosts", "secure.example.com"), ("service", "secure")],
    );
    let key = cfg.key.clone();
    act.targets.apply(vec![cfg]);
    act.targets.set_protocol(&key, AppProtocol::H2);
    act.targets
        .set_ready(&key, vec![tls_pod(&ca, &["secure.shop.svc"]).await]);
    let client = common::client();
    let (status, _) = within(
        10,
        "the answer",
        common::get(&client, act.addr, "secure.example.com", "/hello"),
    )
    .await;
    assert_eq!(status, 502);
}
