//! The proxy against real HTTP backends on loopback, with the routing table fed directly.

mod common;

use std::sync::atomic::Ordering;

use common::{activator, backend, client, config, eventually, get, within};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[tokio::test]
async fn requests_are_routed_by_host_and_path_and_unknown_hosts_get_404() {
    let a = activator().await;
    let (shop, _) = backend("shop").await;
    let (api, _) = backend("api").await;
    a.targets.apply(vec![
        config(
            "shop",
            &[("service", "shop"), ("hosts", "shop.example.com")],
        ),
        config(
            "api",
            &[
                ("service", "api"),
                ("hosts", "*.example.com"),
                ("pathPrefixes", "/api"),
            ],
        ),
    ]);
    a.targets
        .set_ready(&config("shop", &[("service", "s")]).key, vec![shop]);
    a.targets
        .set_ready(&config("api", &[("service", "s")]).key, vec![api]);
    let c = client();
    assert_eq!(
        get(&c, a.addr, "shop.example.com", "/").await,
        (200, "hello from shop".into())
    );
    assert_eq!(
        get(&c, a.addr, "x.example.com", "/api/v1").await,
        (200, "hello from api".into())
    );
    let (status, body) = get(&c, a.addr, "nothing.org", "/").await;
    assert_eq!(status, 404);
    assert!(
        body.contains("no route matched host \\\"nothing.org\\\""),
        "{body}"
    );
    assert_eq!(a.metrics.no_route.get(), 1);
}

#[tokio::test]
async fn forwarded_headers_reach_the_backend() {
    let a = activator().await;
    let (pod, seen) = backend("shop").await;
    let cfg = config("shop", &[("service", "shop")]);
    let key = cfg.key.clone();
    a.targets.apply(vec![cfg]);
    a.targets.set_ready(&key, vec![pod]);
    get(&client(), a.addr, "shop.example.com:8080", "/").await;
    let headers = seen.last_headers.lock().unwrap().clone().unwrap();
    assert_eq!(headers["x-forwarded-for"], "127.0.0.1");
    assert_eq!(headers["x-forwarded-host"], "shop.example.com:8080");
    assert_eq!(headers["x-forwarded-proto"], "http");
    assert_eq!(headers["host"], "shop.example.com:8080");
}

#[tokio::test]
async fn a_full_queue_answers_503_and_held_requests_complete_when_a_pod_is_ready() {
    let a = activator().await;
    let (pod, _) = backend("shop").await;
    let cfg = config("shop", &[("service", "shop"), ("queueDepth", "2")]);
    let key = cfg.key.clone();
    a.targets.apply(vec![cfg]);
    let target = a.targets.get(&key).unwrap();
    let c = client();
    let held: Vec<_> = (0..2)
        .map(|_| {
            let c = c.clone();
            let addr = a.addr;
            tokio::spawn(async move { get(&c, addr, "shop.example.com", "/").await })
        })
        .collect();
    eventually("two held requests", || target.held() == 2).await;
    let (status, body) = get(&c, a.addr, "shop.example.com", "/").await;
    assert_eq!(status, 503);
    assert!(
        body.contains("\"target\":\"shop/shop\"") && body.contains("queue"),
        "{body}"
    );
    assert_eq!(target.metrics().queue_overflows.get(), 1);
    a.targets.set_ready(&key, vec![pod]);
    for h in held {
        assert_eq!(
            within(10, "held request", h).await.unwrap(),
            (200, "hello from shop".into())
        );
    }
}

#[tokio::test]
async fn a_request_held_past_the_hold_timeout_gets_504() {
    let a = activator().await;
    let cfg = config("shop", &[("service", "shop"), ("holdTimeout", "200ms")]);
    let key = cfg.key.clone();
    a.targets.apply(vec![cfg]);
    let (status, body) = get(&client(), a.addr, "shop.example.com", "/").await;
    assert_eq!(status, 504);
    assert!(
        body.contains("\"error\":\"hold_timeout\"") && body.contains("shop/shop"),
        "{body}"
    );
    let target = a.targets.get(&key).unwrap();
    assert_eq!(target.metrics().hold_timeouts.get(), 1);
    assert_eq!(target.held(), 0);
}

#[tokio::test]
async fn a_backend_that_dies_mid_request_gives_502_without_hanging_the_client() {
    let a = activator().await;
    // A backend that reads the request and closes the connection without answering.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let pod = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut buf = [0u8; 1024];
            let _ = stream.read(&mut buf).await;
            drop(stream);
        }
    });
    let cfg = config("shop", &[("service", "shop")]);
    let key = cfg.key.clone();
    a.targets.apply(vec![cfg]);
    a.targets.set_ready(&key, vec![pod]);
    let (status, body) = within(10, "502", get(&client(), a.addr, "shop.example.com", "/")).await;
    assert_eq!(status, 502);
    assert!(body.contains("\"error\":\"upstream_error\""), "{body}");
    assert_eq!(
        a.targets.get(&key).unwrap().metrics().upstream_errors.get(),
        1
    );
}

#[tokio::test]
async fn a_client_that_disconnects_frees_its_slot_and_cancels_the_upstream_request() {
    let a = activator().await;
    let (pod, seen) = backend("shop").await;
    let cfg = config(
        "shop",
        &[("service", "shop"), ("containerConcurrency", "1")],
    );
    let key = cfg.key.clone();
    a.targets.apply(vec![cfg]);
    a.targets.set_ready(&key, vec![pod]);
    let target = a.targets.get(&key).unwrap();
    // The first request takes the only slot and hangs at the backend.
    let mut hanging = TcpStream::connect(a.addr).await.unwrap();
    hanging
        .write_all(b"GET /hang HTTP/1.1\r\nHost: shop.example.com\r\n\r\n")
        .await
        .unwrap();
    eventually("the backend to see the request", || {
        seen.requests.load(Ordering::SeqCst) == 1
    })
    .await;
    // The second waits for the slot.
    let c = client();
    let addr = a.addr;
    let second = tokio::spawn(async move { get(&c, addr, "shop.example.com", "/").await });
    eventually("the second request to be held", || target.held() == 1).await;
    drop(hanging);
    assert_eq!(
        within(10, "second request", second).await.unwrap(),
        (200, "hello from shop".into())
    );
    eventually("the upstream request to be cancelled", || {
        seen.cancelled.load(Ordering::SeqCst) == 1
    })
    .await;
}

#[tokio::test]
async fn a_websocket_echo_works_through_the_proxy() {
    let a = activator().await;
    // A WebSocket-style backend: answers the upgrade with 101, then echoes every byte.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let pod = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if stream.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
                assert!(head.contains("upgrade: websocket"), "{head}");
                stream
                    .write_all(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n")
                    .await
                    .unwrap();
                let (mut r, mut w) = stream.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    let cfg = config("ws", &[("service", "ws")]);
    let key = cfg.key.clone();
    a.targets.apply(vec![cfg]);
    a.targets.set_ready(&key, vec![pod]);
    let mut ws = TcpStream::connect(a.addr).await.unwrap();
    ws.write_all(b"GET /chat HTTP/1.1\r\nHost: ws.example.com\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
        .await
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    within(10, "101", async {
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(ws.read(&mut byte).await.unwrap(), 1);
            head.push(byte[0]);
        }
    })
    .await;
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    // A masked text frame "hello" (RFC 6455 5.7), echoed byte for byte.
    let frame = [
        0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
    ];
    ws.write_all(&frame).await.unwrap();
    let mut echoed = [0u8; 11];
    within(10, "echo", ws.read_exact(&mut echoed))
        .await
        .unwrap();
    assert_eq!(echoed, frame);
}

#[tokio::test]
async fn request_and_response_bodies_stream_through() {
    let a = activator().await;
    let (pod, _) = backend("shop").await;
    let cfg = config("shop", &[("service", "shop")]);
    let key = cfg.key.clone();
    a.targets.apply(vec![cfg]);
    a.targets.set_ready(&key, vec![pod]);
    let payload = vec![b'x'; 3 * 1024 * 1024];
    let request = http::Request::post(format!("http://{}/echo", a.addr))
        .header("host", "shop.example.com")
        .body(http_body_util::Full::new(bytes::Bytes::from(
            payload.clone(),
        )))
        .unwrap();
    let response = client().request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let body = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap()
        .to_bytes();
    assert_eq!(body.len(), payload.len());
}
