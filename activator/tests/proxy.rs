//! The proxy against real HTTP backends on loopback, with the routing table fed directly.

mod common;

use std::sync::atomic::Ordering;

use common::{
    activator, activator_trusting, backend, backend_with, client, config, eventually, exchange,
    get, raw_pod, read_head, within,
};
use keda_activator::limits::{DEFAULT_HELD_MEMORY, Limits};
use keda_activator::trust::TrustedProxies;
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
    a.route("shop", &[("service", "shop")], vec![pod]);
    get(&client(), a.addr, "shop.example.com:8080", "/").await;
    let headers = seen.last_headers.lock().unwrap().clone().unwrap();
    assert_eq!(headers["x-forwarded-for"], "127.0.0.1");
    assert_eq!(headers["x-forwarded-host"], "shop.example.com:8080");
    assert_eq!(headers["x-forwarded-proto"], "http");
    assert_eq!(headers["host"], "shop.example.com:8080");
}

/// The forwarding headers of a request as the pod saw them, each line as it came.
fn forwarding(seen: &common::Seen) -> Vec<(String, Vec<String>)> {
    let headers = seen
        .last_headers
        .lock()
        .expect("test harness")
        .clone()
        .expect("a request reached the pod");
    [
        "x-forwarded-for",
        "x-forwarded-host",
        "x-forwarded-proto",
        "forwarded",
    ]
    .iter()
    .map(|name| {
        let values = headers
            .get_all(*name)
            .iter()
            .map(|v| v.to_str().expect("ASCII").to_owned())
            .collect();
        ((*name).to_owned(), values)
    })
    .collect()
}

/// A GET (served by the front path) and a POST with a body (hyper's server) that claim to come
/// through a proxy: another client address, another host, `https`.
const FORGED: [&[u8]; 2] = [
    b"GET / HTTP/1.1\r\nHost: shop.example.com\r\nX-Forwarded-For: 203.0.113.7\r\n\
      X-Forwarded-Host: admin.internal\r\nX-Forwarded-Proto: https\r\n\
      Forwarded: for=203.0.113.7;host=admin.internal;proto=https\r\nConnection: close\r\n\r\n",
    b"POST /echo HTTP/1.1\r\nHost: shop.example.com\r\nX-Forwarded-For: 203.0.113.7\r\n\
      X-Forwarded-Host: admin.internal\r\nX-Forwarded-Proto: https\r\n\
      Forwarded: for=203.0.113.7;host=admin.internal;proto=https\r\nContent-Length: 2\r\n\
      Connection: close\r\n\r\nhi",
];

#[tokio::test]
async fn forged_forwarding_headers_of_a_client_are_overwritten_on_both_paths() {
    // No --trusted-proxies (the default): nobody may tell the pod who the client is.
    let a = activator().await;
    let (pod, seen) = backend("shop").await;
    a.route("shop", &[("service", "shop")], vec![pod]);
    for request in FORGED {
        let answer = exchange(a.addr, request).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        let expected = [
            ("x-forwarded-for", vec!["127.0.0.1"]),
            ("x-forwarded-host", vec!["shop.example.com"]),
            ("x-forwarded-proto", vec!["http"]),
            ("forwarded", vec![]),
        ]
        .map(|(n, v)| (n.to_owned(), v.into_iter().map(str::to_owned).collect()));
        assert_eq!(
            forwarding(&seen),
            expected,
            "{}",
            String::from_utf8_lossy(request)
        );
    }
}

#[tokio::test]
async fn a_trusted_proxys_forwarding_headers_are_kept_and_its_chain_extended_on_both_paths() {
    let a = activator_trusting(
        Limits::default(),
        DEFAULT_HELD_MEMORY,
        TrustedProxies::parse("127.0.0.0/8").unwrap(),
    )
    .await;
    let (pod, seen) = backend("shop").await;
    a.route("shop", &[("service", "shop")], vec![pod]);
    for request in FORGED {
        let answer = exchange(a.addr, request).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        let expected = [
            ("x-forwarded-for", vec!["203.0.113.7, 127.0.0.1"]),
            ("x-forwarded-host", vec!["admin.internal"]),
            ("x-forwarded-proto", vec!["https"]),
            (
                "forwarded",
                vec!["for=203.0.113.7;host=admin.internal;proto=https"],
            ),
        ]
        .map(|(n, v)| (n.to_owned(), v.into_iter().map(str::to_owned).collect()));
        assert_eq!(
            forwarding(&seen),
            expected,
            "{}",
            String::from_utf8_lossy(request)
        );
    }
}

#[tokio::test]
async fn every_x_forwarded_for_line_of_a_trusted_proxy_reaches_the_pod_with_this_hop_appended() {
    let a = activator_trusting(
        Limits::default(),
        DEFAULT_HELD_MEMORY,
        TrustedProxies::parse("127.0.0.1").unwrap(),
    )
    .await;
    let (pod, seen) = backend("shop").await;
    a.route("shop", &[("service", "shop")], vec![pod]);
    // A GET (served by the front path) and a POST with a body (hyper's server), each behind
    // a proxy that appended its own line instead of extending the first.
    let requests: [&[u8]; 2] = [
        b"GET / HTTP/1.1\r\nHost: shop.example.com\r\nX-Forwarded-For: 203.0.113.7\r\n\
          X-Forwarded-For: 198.51.100.1, 192.0.2.5\r\nConnection: close\r\n\r\n",
        b"POST /echo HTTP/1.1\r\nHost: shop.example.com\r\nX-Forwarded-For: 203.0.113.7\r\n\
          X-Forwarded-For: 198.51.100.1, 192.0.2.5\r\nContent-Length: 2\r\n\
          Connection: close\r\n\r\nhi",
    ];
    for request in requests {
        let answer = exchange(a.addr, request).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        let headers = seen.last_headers.lock().unwrap().clone().unwrap();
        let lines: Vec<_> = headers.get_all("x-forwarded-for").iter().collect();
        assert_eq!(
            lines,
            ["203.0.113.7, 198.51.100.1, 192.0.2.5, 127.0.0.1"],
            "{}",
            String::from_utf8_lossy(request)
        );
    }
}

#[tokio::test]
async fn an_absolute_form_request_reaches_the_pod_with_the_host_it_was_routed_by() {
    let a = activator().await;
    let (pod, seen) = backend("shop").await;
    a.route(
        "shop",
        &[("service", "shop"), ("hosts", "shop.example.com")],
        vec![pod],
    );
    // Routed by the target's authority (RFC 9112 3.2.2), whatever Host says.
    let answer = exchange(
        a.addr,
        b"GET http://shop.example.com/cart HTTP/1.1\r\nHost: other.example.org\r\n\
          Connection: close\r\n\r\n",
    )
    .await;
    assert!(answer.ends_with("hello from shop"), "{answer}");
    let headers = seen.last_headers.lock().unwrap().clone().unwrap();
    assert_eq!(headers["host"], "shop.example.com");
    assert_eq!(headers["x-forwarded-host"], "shop.example.com");
    let uri = seen.last_uri.lock().unwrap().clone().unwrap();
    assert_eq!(uri.to_string(), "/cart");
}

#[tokio::test]
async fn a_502_names_the_target_but_not_the_pod_on_both_paths() {
    let a = activator().await;
    // A pod that reads a request head and closes the connection without answering.
    let (pod, _) = raw_pod(|mut stream| async move {
        let _ = read_head(&mut stream).await;
    })
    .await;
    a.route("shop", &[("service", "shop")], vec![pod]);
    let requests: [&[u8]; 2] = [
        b"GET / HTTP/1.1\r\nHost: shop.example.com\r\nConnection: close\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: shop.example.com\r\nContent-Length: 2\r\n\
          Connection: close\r\n\r\nhi",
    ];
    for request in requests {
        let answer = exchange(a.addr, request).await;
        assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
        assert!(answer.contains("\"target\":\"shop/shop\""), "{answer}");
        assert!(
            !answer.contains(&pod.to_string()) && !answer.contains("127.0.0.1"),
            "the pod's address reached the client: {answer}"
        );
    }
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
async fn a_held_client_that_disconnects_gives_up_its_place_in_the_queue() {
    let a = activator().await;
    let (pod, seen) = backend("shop").await;
    let key = a.route("shop", &[("service", "shop"), ("queueDepth", "1")], vec![]);
    let target = a.targets.get(&key).unwrap();
    let mut gone = TcpStream::connect(a.addr).await.unwrap();
    gone.write_all(b"GET / HTTP/1.1\r\nHost: shop.example.com\r\n\r\n")
        .await
        .unwrap();
    eventually("the request to be held", || target.held() == 1).await;
    drop(gone);
    eventually("the place to be given up", || target.held() == 0).await;
    // The one place is free again, and a pod that turns ready never sees the request.
    let c = client();
    let addr = a.addr;
    let next = tokio::spawn(async move { get(&c, addr, "shop.example.com", "/").await });
    eventually("the next request to be held", || target.held() == 1).await;
    a.targets.set_ready(&key, vec![pod]);
    assert_eq!(
        within(10, "the next answer", next).await.unwrap(),
        (200, "hello from shop".into())
    );
    assert_eq!(seen.requests.load(Ordering::SeqCst), 1);
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
    let key = a.route("shop", &[("service", "shop")], vec![pod]);
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
    let key = a.route(
        "shop",
        &[("service", "shop"), ("containerConcurrency", "1")],
        vec![pod],
    );
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
    let pod = common::websocket_pod().await;
    a.route("ws", &[("service", "ws")], vec![pod]);
    let mut ws = common::websocket(a.addr).await;
    common::websocket_echo(&mut ws).await;
}

#[tokio::test]
async fn request_and_response_bodies_stream_through() {
    let a = activator().await;
    let (pod, _) = backend("shop").await;
    a.route("shop", &[("service", "shop")], vec![pod]);
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

#[tokio::test]
async fn connections_to_a_pod_are_kept_alive_and_reused() {
    let a = activator().await;
    let (pod, seen) = backend("shop").await;
    a.route("shop", &[("service", "shop")], vec![pod]);
    let c = client();
    for _ in 0..20 {
        assert_eq!(
            get(&c, a.addr, "shop.example.com", "/").await,
            (200, "hello from shop".into())
        );
    }
    assert_eq!(seen.requests.load(Ordering::SeqCst), 20);
    // One request at a time: one connection carries them all.
    assert_eq!(seen.connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_pod_that_closes_its_connections_still_gets_every_request() {
    let a = activator().await;
    // Answers with `connection: close` and closes: no connection can be reused.
    let (pod, seen) = backend_with("shop", false).await;
    a.route("shop", &[("service", "shop")], vec![pod]);
    let c = client();
    for _ in 0..10 {
        assert_eq!(
            get(&c, a.addr, "shop.example.com", "/").await,
            (200, "hello from shop".into())
        );
    }
    assert_eq!(seen.connections.load(Ordering::SeqCst), 10);
}

#[tokio::test]
async fn http2_requests_reach_the_pod_in_origin_form_with_a_host_header() {
    let a = activator().await;
    let (pod, seen) = backend("shop").await;
    a.route("shop", &[("service", "shop")], vec![pod]);
    let h2 = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http::<http_body_util::Full<bytes::Bytes>>();
    let request = http::Request::get(format!("http://{}/cart?item=7", a.addr))
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    let response = within(10, "h2 answer", h2.request(request)).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.version(), http::Version::HTTP_2);
    let uri = seen.last_uri.lock().unwrap().clone().unwrap();
    assert_eq!(uri.to_string(), "/cart?item=7");
    let headers = seen.last_headers.lock().unwrap().clone().unwrap();
    assert_eq!(headers["host"], a.addr.to_string().as_str());
    assert_eq!(headers["x-forwarded-host"], a.addr.to_string().as_str());
}

#[tokio::test]
async fn proxy_threads_serve_every_connection_and_stop_on_shutdown() {
    use std::sync::Arc;

    use keda_activator::metrics::Metrics;
    use keda_activator::proxy::Proxy;
    use keda_activator::server::spawn_proxy_threads;
    use keda_activator::targets::Targets;

    let metrics = Arc::new(Metrics::new());
    let (wake, _wake_rx) = tokio::sync::mpsc::channel(8);
    let targets = Targets::new(wake, Arc::clone(&metrics));
    let (pod, seen) = backend("shop").await;
    let cfg = config("shop", &[("service", "shop")]);
    let key = cfg.key.clone();
    targets.apply(vec![cfg]);
    targets.set_ready(&key, vec![pod]);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let threads = spawn_proxy_threads(
        listener,
        2,
        Arc::new(Proxy::new(targets.routes(), metrics)),
        stop.clone(),
        std::time::Duration::from_secs(1),
    )
    .unwrap();
    assert_eq!(threads.len(), 2);
    // A new client connection per request: the kernel hands them to either thread.
    for _ in 0..20 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"GET / HTTP/1.1\r\nHost: shop.example.com\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        within(10, "answer", stream.read_to_string(&mut answer))
            .await
            .unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with("hello from shop"), "{answer}");
    }
    assert_eq!(seen.requests.load(Ordering::SeqCst), 20);
    // Each thread reuses its own pod connections: at most one per thread here.
    assert!(seen.connections.load(Ordering::SeqCst) <= 2);
    stop.cancel();
    let joined = tokio::task::spawn_blocking(move || {
        for thread in threads {
            thread.join().unwrap();
        }
    });
    within(10, "the proxy threads to stop", joined)
        .await
        .unwrap();
}

/// A pod that answers the first request on each connection and drops the connection when
/// the second arrives, unanswered: the race of a pod closing an idle connection just as the
/// proxy reuses it. Returns its address and the number of connections it accepted.
async fn pod_that_drops_reused_connections() -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    raw_pod(|mut stream| async move {
        if read_head(&mut stream).await.is_none() {
            return;
        }
        let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nfirst";
        if stream.write_all(answer).await.is_err() {
            return;
        }
        // The next request is read, then the connection dropped without an answer.
        let _ = stream.read(&mut [0u8; 1024]).await;
    })
    .await
}

#[tokio::test]
async fn a_reused_connection_closed_under_a_request_is_retried_only_when_idempotent() {
    let a = activator().await;
    let (pod, connections) = pod_that_drops_reused_connections().await;
    let key = a.route("shop", &[("service", "shop")], vec![pod]);
    let c = client();
    let send = |method: http::Method| {
        let request = http::Request::builder()
            .method(method)
            .uri(format!("http://{}/", a.addr))
            .header("host", "shop.example.com")
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .unwrap();
        let c = c.clone();
        async move {
            let response = within(10, "answer", c.request(request)).await.unwrap();
            response.status().as_u16()
        }
    };
    // The first GET opens a connection; the second reuses it, the pod drops it, and the GET
    // is sent again on a new connection.
    assert_eq!(send(http::Method::GET).await, 200);
    assert_eq!(send(http::Method::GET).await, 200);
    assert_eq!(connections.load(Ordering::SeqCst), 2);
    // A POST (no body) may have been processed: it is not sent twice, the client gets 502.
    assert_eq!(send(http::Method::POST).await, 502);
    assert_eq!(connections.load(Ordering::SeqCst), 2);
    assert_eq!(
        a.targets.get(&key).unwrap().metrics().upstream_errors.get(),
        1
    );
}

#[tokio::test]
async fn a_large_chunked_answer_to_a_get_streams_through_and_the_connection_is_reused() {
    let a = activator().await;
    // A pod answering every GET with 4 MiB in 64 chunks of 64 KiB, each chunk's bytes its
    // own index, on kept-alive connections.
    const CHUNK: usize = 64 * 1024;
    const CHUNKS: usize = 64;
    let (pod, connections) = raw_pod(|mut stream| async move {
        while read_head(&mut stream).await.is_some() {
            let mut answer = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
            for i in 0..CHUNKS {
                answer.extend_from_slice(format!("{CHUNK:x}\r\n").as_bytes());
                answer.extend(std::iter::repeat_n(u8::try_from(i).unwrap(), CHUNK));
                answer.extend_from_slice(b"\r\n");
            }
            answer.extend_from_slice(b"0\r\n\r\n");
            if stream.write_all(&answer).await.is_err() {
                return;
            }
        }
    })
    .await;
    a.route("big", &[("service", "big")], vec![pod]);
    let c = client();
    for _ in 0..2 {
        let request = http::Request::get(format!("http://{}/big", a.addr))
            .header("host", "big.example.com")
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .unwrap();
        let response = within(10, "answer", c.request(request)).await.unwrap();
        assert_eq!(response.status(), 200);
        let body = within(
            30,
            "the whole body",
            http_body_util::BodyExt::collect(response.into_body()),
        )
        .await
        .unwrap()
        .to_bytes();
        assert_eq!(body.len(), CHUNK * CHUNKS);
        for (i, chunk) in body.chunks(CHUNK).enumerate() {
            assert!(
                chunk.iter().all(|&b| usize::from(b) == i),
                "chunk {i} is corrupt"
            );
        }
    }
    // Both answers were read to their last chunk, so one connection carried both.
    assert_eq!(connections.load(Ordering::SeqCst), 1);
}

/// Splits the responses read from one connection: (status, head in lower case, body) each,
/// bodies delimited by Content-Length or chunked.
fn responses(mut bytes: &[u8]) -> Vec<(u16, String, String)> {
    let text = |b: &[u8]| std::str::from_utf8(b).expect("an ASCII answer").to_owned();
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let mut fields = [httparse::EMPTY_HEADER; 32];
        let mut response = httparse::Response::new(&mut fields);
        let Ok(httparse::Status::Complete(len)) = response.parse(bytes) else {
            panic!("not a complete answer: {}", String::from_utf8_lossy(bytes));
        };
        let status = response.code.expect("a status");
        let head = text(&bytes[..len]).to_lowercase();
        let length = response
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("content-length"))
            .map(|h| text(h.value).parse::<usize>().expect("a length"));
        bytes = &bytes[len..];
        let mut body = Vec::new();
        if head.contains("transfer-encoding: chunked") {
            loop {
                let end = bytes
                    .windows(2)
                    .position(|w| w == b"\r\n")
                    .expect("a chunk size line");
                let size = usize::from_str_radix(&text(&bytes[..end]), 16).expect("a chunk size");
                bytes = &bytes[end + 2..];
                if size == 0 {
                    // No trailers in these answers: the blank line ends the body.
                    bytes = &bytes[2..];
                    break;
                }
                body.extend_from_slice(&bytes[..size]);
                bytes = &bytes[size + 2..];
            }
        } else {
            let n = length.unwrap_or(0);
            body.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
        }
        out.push((status, head, text(&body)));
    }
    out
}

#[tokio::test]
async fn pipelined_requests_are_answered_in_order_also_after_one_hyper_serves() {
    // The GETs are the front path's; the POST hands the connection to hyper's server with
    // the bytes read after it, which serves the last GET.
    let a = activator().await;
    let (pod, seen) = backend("shop").await;
    let key = a.route(
        "shop",
        &[("service", "shop"), ("hosts", "shop.example.com")],
        vec![pod],
    );
    let mut stream = TcpStream::connect(a.addr).await.unwrap();
    stream
        .write_all(
            b"GET / HTTP/1.1\r\nHost: shop.example.com\r\n\r\n\
              GET /nowhere HTTP/1.1\r\nHost: unknown.example.com\r\n\r\n\
              GET / HTTP/1.1\r\nHost: shop.example.com\r\n\r\n\
              POST /echo HTTP/1.1\r\nHost: shop.example.com\r\nContent-Length: 4\r\n\r\nping\
              GET / HTTP/1.1\r\nHost: shop.example.com\r\nConnection: close\r\n\r\n",
        )
        .await
        .unwrap();
    let mut answer = Vec::new();
    within(10, "every answer", stream.read_to_end(&mut answer))
        .await
        .unwrap();
    let answers = responses(&answer);
    let got: Vec<(u16, &str)> = answers.iter().map(|(s, _, b)| (*s, b.as_str())).collect();
    assert_eq!(got.len(), 5, "{}", String::from_utf8_lossy(&answer));
    assert_eq!(got[0], (200, "hello from shop"));
    assert_eq!(got[1].0, 404);
    assert!(got[1].1.contains("no route"), "{}", got[1].1);
    assert_eq!(got[2], (200, "hello from shop"));
    assert_eq!(got[3], (200, "ping"));
    assert_eq!(got[4], (200, "hello from shop"));
    assert!(
        answers[4].1.contains("connection: close"),
        "{}",
        answers[4].1
    );
    assert_eq!(seen.requests.load(Ordering::SeqCst), 4);
    let target = a.targets.get(&key).unwrap();
    assert_eq!(target.metrics().requests.get(), 4);
    assert_eq!(a.metrics.no_route.get(), 1);
}

#[tokio::test]
async fn answers_are_framed_for_the_client_whatever_the_pod_sent() {
    // (request method and path, the pod's answer, then it closes; status, body, and whether
    // the answer is chunked to the client)
    let cases: [(&str, &'static [u8], u16, &str, bool); 4] = [
        ("GET", b"HTTP/1.1 200 OK\r\n\r\nuntil the pod closes", 200, "until the pod closes", true),
        (
            "GET",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
            200,
            "abcde",
            true,
        ),
        ("HEAD", b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n", 200, "", false),
        ("GET", b"HTTP/1.1 204 No Content\r\n\r\n", 204, "", false),
    ];
    for (method, answer, status, body, chunked) in cases {
        let a = activator().await;
        let (pod, _) = raw_pod(move |mut stream| async move {
            if read_head(&mut stream).await.is_some() {
                let _ = stream.write_all(answer).await;
            }
        })
        .await;
        a.route("shop", &[("service", "shop")], vec![pod]);
        let mut stream = TcpStream::connect(a.addr).await.unwrap();
        // A second request on the same connection shows the first answer ended where it
        // should: the pod is asked again, on a new connection.
        let request = format!("{method} / HTTP/1.1\r\nHost: shop.example.com\r\n\r\n");
        let last =
            format!("{method} / HTTP/1.1\r\nHost: shop.example.com\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        stream.write_all(last.as_bytes()).await.unwrap();
        let mut bytes = Vec::new();
        within(10, "both answers", stream.read_to_end(&mut bytes))
            .await
            .unwrap();
        let answers = if method == "HEAD" {
            // No body follows a HEAD answer whatever its Content-Length says.
            let text = String::from_utf8(bytes.clone()).unwrap();
            let heads: Vec<&str> = text.split_terminator("\r\n\r\n").collect();
            assert_eq!(heads.len(), 2, "{text}");
            for head in heads {
                assert!(
                    head.to_lowercase().contains("content-length: 1234"),
                    "{head}"
                );
            }
            continue;
        } else {
            responses(&bytes)
        };
        assert_eq!(
            answers.len(),
            2,
            "{method} {}",
            String::from_utf8_lossy(&bytes)
        );
        for (got_status, head, got_body) in &answers {
            assert_eq!(*got_status, status, "{head}");
            assert_eq!(got_body, body, "{head}");
            assert_eq!(
                head.contains("transfer-encoding: chunked"),
                chunked,
                "{head}"
            );
            assert!(head.contains("date: "), "{head}");
        }
    }
}

#[tokio::test]
async fn a_drain_closes_idle_kept_alive_connections() {
    let a = activator().await;
    let (pod, _) = backend("shop").await;
    a.route("shop", &[("service", "shop")], vec![pod]);
    let mut stream = TcpStream::connect(a.addr).await.unwrap();
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: shop.example.com\r\n\r\n")
        .await
        .unwrap();
    let mut answer = [0u8; 4096];
    let n = within(10, "the answer", stream.read(&mut answer))
        .await
        .unwrap();
    assert!(answer[..n].ends_with(b"hello from shop"));
    a.stop.cancel();
    let mut rest = Vec::new();
    within(
        10,
        "the idle connection to close",
        stream.read_to_end(&mut rest),
    )
    .await
    .unwrap();
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
}

#[tokio::test]
async fn an_error_answer_to_head_has_no_body_and_the_connection_goes_on() {
    let a = activator().await;
    // A pod that reads a request and closes the connection without answering.
    let (pod, _) = raw_pod(|mut stream| async move {
        let _ = read_head(&mut stream).await;
    })
    .await;
    a.route("shop", &[("service", "shop")], vec![pod]);
    let mut stream = TcpStream::connect(a.addr).await.unwrap();
    stream
        .write_all(
            b"HEAD / HTTP/1.1\r\nHost: shop.example.com\r\n\r\n\
              GET / HTTP/1.1\r\nHost: shop.example.com\r\nConnection: close\r\n\r\n",
        )
        .await
        .unwrap();
    let mut answer = String::new();
    within(10, "both answers", stream.read_to_string(&mut answer))
        .await
        .unwrap();
    assert_eq!(
        answer.matches("HTTP/1.1 502 Bad Gateway\r\n").count(),
        2,
        "{answer}"
    );
    // The JSON body comes once, after the second head.
    assert_eq!(
        answer.matches("\"error\":\"upstream_error\"").count(),
        1,
        "{answer}"
    );
    let (first, second) = answer.split_once("\r\n\r\n").unwrap();
    assert!(first.to_lowercase().contains("content-length: "), "{first}");
    assert!(second.starts_with("HTTP/1.1 502"), "{second}");
}
