//! Connections and framing: WebSocket, streamed bodies, keep-alive and reuse, retries, pipelining,
//! the proxy threads and draining.

use super::*;

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

/// A client that opens its connections at once (a pool, wrk) has them spread over the proxy
/// threads: the thread that accepts them hands some to the other (`spread.rs`).
#[tokio::test]
async fn connections_opened_at_once_are_spread_over_the_proxy_threads() {
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
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("address");
    let stop = tokio_util::sync::CancellationToken::new();
    let threads = spawn_proxy_threads(
        listener,
        2,
        Arc::new(Proxy::new(targets.routes(), metrics)),
        stop.clone(),
        std::time::Duration::from_secs(1),
    )
    .expect("proxy threads");
    let mut streams = Vec::new();
    for _ in 0..8 {
        streams.push(TcpStream::connect(addr).await.expect("connect"));
    }
    // One request at a time over the eight: a thread forwards them all on one pod connection,
    // so the pod sees one connection per thread that serves some.
    for stream in &mut streams {
        stream
            .write_all(b"GET / HTTP/1.1\r\nHost: shop.example.com\r\n\r\n")
            .await
            .expect("request");
        let mut answer = Vec::new();
        let mut chunk = [0u8; 1024];
        while !answer.ends_with(b"hello from shop") {
            let n = within(10, "answer", stream.read(&mut chunk))
                .await
                .expect("read");
            assert!(n > 0, "closed after {:?}", String::from_utf8_lossy(&answer));
            answer.extend_from_slice(&chunk[..n]);
        }
        assert!(answer.starts_with(b"HTTP/1.1 200"));
    }
    assert_eq!(seen.requests.load(Ordering::SeqCst), 8);
    assert_eq!(
        seen.connections.load(Ordering::SeqCst),
        2,
        "both proxy threads serve some of the connections"
    );
    stop.cancel();
    drop(streams);
    let joined = tokio::task::spawn_blocking(move || {
        for thread in threads {
            thread.join().expect("proxy thread");
        }
    });
    within(10, "the proxy threads to stop", joined)
        .await
        .expect("joined");
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
