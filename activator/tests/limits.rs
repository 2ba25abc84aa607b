//! The client-side timeouts, the connection limit, the response-head timeout and the
//! held-request memory limit, against real sockets on loopback, on both request paths (the
//! front path serves GETs; a request with a body hands its connection to hyper's server).
//! Timeouts are configured short (hundreds of milliseconds), so nothing waits long.

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{activator_with, backend, client, eventually, get, raw_pod, read_head, within};
use keda_activator::limits::{DEFAULT_HELD_MEMORY, Limits};
use keda_activator::metrics::Metrics;
use keda_activator::server;
use keda_activator::supervise::Health;
use keda_activator::targets::TargetLimits;
use keda_activator::trust::TrustedProxies;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

const HEADER_READ_TIMEOUT: Duration = Duration::from_millis(300);
const IDLE_TIMEOUT: Duration = Duration::from_millis(500);
const WRITE_TIMEOUT: Duration = Duration::from_millis(300);

fn short_limits() -> Limits {
    Limits {
        header_read_timeout: HEADER_READ_TIMEOUT,
        idle_timeout: IDLE_TIMEOUT,
        write_timeout: WRITE_TIMEOUT,
        max_connections: 1000,
        ..Limits::default()
    }
}

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: shop.example.com\r\n\r\n";
const POST: &[u8] = b"POST /echo HTTP/1.1\r\nHost: shop.example.com\r\nContent-Length: 2\r\n\r\nhi";

/// Sends `request` on `stream` and reads until the answer ends with `last`.
async fn ask(stream: &mut TcpStream, request: &[u8], last: &str) {
    stream.write_all(request).await.expect("test harness");
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    within(10, "the answer", async {
        while !answer.ends_with(last.as_bytes()) {
            let n = stream.read(&mut buf).await.expect("test harness");
            assert!(n > 0, "closed: {}", String::from_utf8_lossy(&answer));
            answer.extend_from_slice(&buf[..n]);
        }
    })
    .await;
}

/// Waits for the activator to close `stream` (the end of the stream or a reset) and returns
/// how long after `since` it happened. Whatever else the activator sent is returned too.
async fn closed(stream: &mut TcpStream, since: Instant) -> (Duration, String) {
    let mut sent = Vec::new();
    let mut buf = [0u8; 4096];
    within(10, "the activator to close the connection", async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => sent.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    (since.elapsed(), String::from_utf8_lossy(&sent).into_owned())
}

/// Sends `head` one byte every 50 ms on `stream`'s write half until the activator closes the
/// connection; returns when it did and the time of the first byte.
async fn trickle(stream: TcpStream, head: &'static [u8]) -> (Duration, Instant) {
    let (mut reader, mut writer) = stream.into_split();
    let started = Instant::now();
    let trickler = tokio::spawn(async move {
        for byte in head.iter().cycle() {
            if writer.write_all(&[*byte]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let mut buf = [0u8; 1024];
    within(10, "the activator to cut the trickle", async {
        while matches!(reader.read(&mut buf).await, Ok(n) if n > 0) {}
    })
    .await;
    trickler.abort();
    (started.elapsed(), started)
}

/// `elapsed` is `timeout`, give or take: the activator's clock may start a little before the
/// test's (an idle timeout runs from the answer's write, the test's from its read).
/// Opens an h2c connection (prior knowledge) that sends its preface and settings, then a
/// ping every 100 ms and never a request; returns when the activator closed it, counted
/// from the preface.
async fn idle_http2(addr: std::net::SocketAddr) -> Duration {
    let stream = TcpStream::connect(addr).await.expect("test harness");
    let (mut reader, mut writer) = stream.into_split();
    let started = Instant::now();
    // The preface, an empty SETTINGS frame (RFC 9113 3.4, 6.5).
    let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    hello.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    writer.write_all(&hello).await.expect("test harness");
    let pinger = tokio::spawn(async move {
        // PING frames: length 8, type 6, stream 0 (RFC 9113 6.7).
        let ping = [0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if writer.write_all(&ping).await.is_err() {
                return;
            }
        }
    });
    let mut buf = [0u8; 1024];
    within(10, "the activator to close the HTTP/2 connection", async {
        while matches!(reader.read(&mut buf).await, Ok(n) if n > 0) {}
    })
    .await;
    pinger.abort();
    started.elapsed()
}

fn assert_cut_after(elapsed: Duration, timeout: Duration, what: &str) {
    assert!(
        elapsed + Duration::from_millis(50) >= timeout && elapsed < timeout * 10,
        "{what} was cut after {elapsed:?}, expected from {timeout:?}"
    );
}

#[tokio::test]
async fn slowloris_and_idle_clients_are_cut_at_their_timeouts_while_others_are_served() {
    let a = activator_with(short_limits(), DEFAULT_HELD_MEMORY).await;
    let (pod, _) = backend("shop").await;
    a.route("shop", &[("service", "shop")], vec![pod]);

    // A well-behaved client, served throughout on one kept-alive connection.
    let normal = {
        let (c, addr) = (client(), a.addr);
        tokio::spawn(async move {
            for _ in 0..15 {
                assert_eq!(
                    get(&c, addr, "shop.example.com", "/").await,
                    (200, "hello from shop".into())
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    // A head trickled from the connection's start (front path), and one trickled after a
    // request hyper served: both cut at the header read timeout.
    let front_slowloris = TcpStream::connect(a.addr).await.unwrap();
    let trickled: &'static [u8] = b"GET / HTTP/1.1\r\nHost: shop.example.com\r\nX-Slow: aaaa";
    let front = tokio::spawn(trickle(front_slowloris, trickled));
    let mut hyper_slowloris = TcpStream::connect(a.addr).await.unwrap();
    ask(&mut hyper_slowloris, POST, "hi").await;
    let hyper = tokio::spawn(trickle(hyper_slowloris, trickled));

    // Connections that go quiet after an answer, on either path: cut at the idle timeout.
    let mut front_idle = TcpStream::connect(a.addr).await.unwrap();
    ask(&mut front_idle, GET, "hello from shop").await;
    let front_idle = tokio::spawn(async move { closed(&mut front_idle, Instant::now()).await });
    let mut hyper_idle = TcpStream::connect(a.addr).await.unwrap();
    ask(&mut hyper_idle, POST, "hi").await;
    let hyper_idle = tokio::spawn(async move { closed(&mut hyper_idle, Instant::now()).await });
    // An HTTP/2 connection that opens no stream, only pings: cut at the idle timeout.
    let h2 = tokio::spawn(idle_http2(a.addr));
    // A connection that never sends a byte: its first head is late.
    let mut silent = TcpStream::connect(a.addr).await.unwrap();
    let silent = tokio::spawn(async move { closed(&mut silent, Instant::now()).await });

    let (elapsed, _) = front.await.unwrap();
    assert_cut_after(
        elapsed,
        HEADER_READ_TIMEOUT,
        "a head trickled to the front path",
    );
    let (elapsed, _) = hyper.await.unwrap();
    assert_cut_after(
        elapsed,
        HEADER_READ_TIMEOUT,
        "a head trickled to hyper's server",
    );
    for (idle, path) in [(front_idle, "front path"), (hyper_idle, "hyper's server")] {
        let (elapsed, sent) = idle.await.unwrap();
        assert_cut_after(elapsed, IDLE_TIMEOUT, path);
        assert!(sent.is_empty(), "{sent}");
    }
    let elapsed = h2.await.unwrap();
    assert_cut_after(
        elapsed,
        IDLE_TIMEOUT,
        "an HTTP/2 connection without a stream",
    );
    let (elapsed, _) = silent.await.unwrap();
    assert_cut_after(elapsed, HEADER_READ_TIMEOUT, "a silent connection");
    within(10, "the well-behaved client", normal).await.unwrap();
    assert_eq!(a.metrics.header_read_timeouts.get(), 3);
    assert_eq!(a.metrics.idle_timeouts.get(), 3);
}

#[tokio::test]
async fn a_pod_that_never_answers_frees_its_slot_after_the_response_head_timeout() {
    let a = activator_with(short_limits(), DEFAULT_HELD_MEMORY).await;
    let (pod, seen) = backend("shop").await;
    let key = a.route(
        "shop",
        &[
            ("service", "shop"),
            ("containerConcurrency", "1"),
            ("responseHeaderTimeout", "200ms"),
        ],
        vec![pod],
    );
    let target = a.targets.get(&key).unwrap();
    let requests: [&[u8]; 2] = [
        b"GET /hang HTTP/1.1\r\nHost: shop.example.com\r\nConnection: close\r\n\r\n",
        b"POST /hang HTTP/1.1\r\nHost: shop.example.com\r\nContent-Length: 2\r\n\
          Connection: close\r\n\r\nhi",
    ];
    for (i, request) in requests.into_iter().enumerate() {
        let started = Instant::now();
        let answer = common::exchange(a.addr, request).await;
        assert!(answer.starts_with("HTTP/1.1 504"), "{answer}");
        assert!(
            answer.contains("\"error\":\"response_timeout\""),
            "{answer}"
        );
        assert!(started.elapsed() >= Duration::from_millis(200));
        // The pod's connection was closed (the request cancelled) and its one slot freed:
        // the next request gets it.
        eventually("the pod to see the request cancelled", || {
            seen.cancelled.load(Ordering::SeqCst) == i + 1
        })
        .await;
        assert_eq!(
            get(&client(), a.addr, "shop.example.com", "/").await,
            (200, "hello from shop".into())
        );
    }
    assert_eq!(target.metrics().response_timeouts.get(), 2);
    assert_eq!(target.held(), 0);
}

#[tokio::test]
async fn a_client_that_stops_reading_is_cut_after_the_write_timeout_and_frees_its_slot() {
    let a = activator_with(short_limits(), DEFAULT_HELD_MEMORY).await;
    // A pod answering every request with an endless chunked body, until its connection
    // closes; `/small` gets a short answer.
    let (pod, _) = raw_pod(|mut stream| async move {
        while let Some(head) = read_head(&mut stream).await {
            if head.starts_with(b"POST") {
                let _ = stream.read_exact(&mut [0u8; 2]).await;
            }
            if head.windows(6).any(|w| w == b"/small") {
                let small = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nsmall";
                if stream.write_all(small).await.is_err() {
                    return;
                }
                continue;
            }
            let chunk = [b'x'; 64 * 1024];
            let mut answer = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
            loop {
                answer.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
                answer.extend_from_slice(&chunk);
                answer.extend_from_slice(b"\r\n");
                if stream.write_all(&answer).await.is_err() {
                    return;
                }
                answer.clear();
            }
        }
    })
    .await;
    let key = a.route(
        "shop",
        &[("service", "shop"), ("containerConcurrency", "1")],
        vec![pod],
    );
    let target = a.targets.get(&key).unwrap();
    let requests: [&[u8]; 2] = [
        b"GET /endless HTTP/1.1\r\nHost: shop.example.com\r\n\r\n",
        b"POST /endless HTTP/1.1\r\nHost: shop.example.com\r\nContent-Length: 2\r\n\r\nhi",
    ];
    for (i, request) in requests.into_iter().enumerate() {
        let mut stuck = TcpStream::connect(a.addr).await.unwrap();
        stuck.write_all(request).await.unwrap();
        // The client never reads: the activator's writes stall once the socket buffers are
        // full, and the connection is cut a write timeout later.
        let started = Instant::now();
        eventually("the write timeout", || {
            a.metrics.write_timeouts.get() == i as u64 + 1
        })
        .await;
        assert!(started.elapsed() >= WRITE_TIMEOUT);
        // The pod's one slot is free again.
        let answer = common::exchange(
            a.addr,
            b"GET /small HTTP/1.1\r\nHost: shop.example.com\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(answer.ends_with("small"), "{answer}");
        let mut rest = Vec::new();
        let cut = within(10, "the stuck client's connection to end", async {
            loop {
                match stuck.read_buf(&mut rest).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => rest.clear(),
                }
            }
        });
        cut.await;
    }
    assert_eq!(target.held(), 0);
}

#[tokio::test]
async fn past_the_connection_limit_connections_wait_until_one_closes() {
    let limits = Limits {
        max_connections: 2,
        ..Limits::default()
    };
    let a = activator_with(limits, DEFAULT_HELD_MEMORY).await;
    let (pod, _) = backend("shop").await;
    a.route("shop", &[("service", "shop")], vec![pod]);
    let mut first = TcpStream::connect(a.addr).await.unwrap();
    ask(&mut first, GET, "hello from shop").await;
    let mut second = TcpStream::connect(a.addr).await.unwrap();
    ask(&mut second, GET, "hello from shop").await;
    eventually("two open connections", || a.metrics.connections.get() == 2).await;
    // The third is in the listen backlog: its request is not read.
    let mut third = TcpStream::connect(a.addr).await.unwrap();
    third.write_all(GET).await.unwrap();
    let mut buf = [0u8; 1024];
    let early = tokio::time::timeout(Duration::from_millis(300), third.read(&mut buf)).await;
    assert!(early.is_err(), "a third connection was served: {early:?}");
    assert!(a.metrics.connection_limit_waits.get() >= 1);
    // One closes: the third is accepted and answered.
    drop(first);
    let mut answer = Vec::new();
    within(10, "the third connection's answer", async {
        while !answer.ends_with(b"hello from shop") {
            let n = third.read(&mut buf).await.unwrap();
            assert!(n > 0);
            answer.extend_from_slice(&buf[..n]);
        }
    })
    .await;
    assert_eq!(a.metrics.connections.get(), 2);
}

#[tokio::test]
async fn held_requests_past_the_targets_memory_limit_get_503() {
    let a = activator_with(short_limits(), 8 * 1024).await;
    let (pod, _) = backend("shop").await;
    let key = a.route("shop", &[("service", "shop")], vec![]);
    let target = a.targets.get(&key).unwrap();
    let pad = "p".repeat(2000);
    let padded = format!("GET / HTTP/1.1\r\nHost: shop.example.com\r\nX-Pad: {pad}\r\n\r\n");
    // A held request whose client goes on sending (a pipelined head, 5,000 bytes so far):
    // what it sends is kept, and counted.
    let mut pipelining = TcpStream::connect(a.addr).await.unwrap();
    pipelining.write_all(GET).await.unwrap();
    eventually("the first request to be held", || target.held() == 1).await;
    let pipelined = format!("GET /next HTTP/1.1\r\nX-Pad: {}", "q".repeat(5000));
    pipelining.write_all(pipelined.as_bytes()).await.unwrap();
    eventually("the pipelined bytes to be counted", || {
        target.metrics().held_bytes.get() > 5000
    })
    .await;
    // One 2 KB head still fits in 8 KiB; the next does not.
    let c = client();
    let mut second = TcpStream::connect(a.addr).await.unwrap();
    second.write_all(padded.as_bytes()).await.unwrap();
    eventually("the second request to be held", || target.held() == 2).await;
    let answer = common::exchange(
        a.addr,
        format!(
            "GET / HTTP/1.1\r\nHost: shop.example.com\r\nX-Pad: {pad}\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(
        answer.contains("\"error\":\"held_memory_full\""),
        "{answer}"
    );
    assert!(answer.to_lowercase().contains("retry-after: 1"), "{answer}");
    assert_eq!(target.metrics().held_memory_overflows.get(), 1);
    // The same on hyper's path (its heads are counted as parsed).
    let post = http::Request::post(format!("http://{}/echo", a.addr))
        .header("host", "shop.example.com")
        .header("x-pad", pad.as_str())
        .body(http_body_util::Full::new(bytes::Bytes::from_static(b"hi")))
        .unwrap();
    let refused = within(10, "the POST's answer", c.request(post))
        .await
        .unwrap();
    assert_eq!(refused.status(), 503);
    assert_eq!(target.metrics().held_memory_overflows.get(), 2);
    // A pod turns ready: the held requests are served and their bytes given back.
    a.targets.set_ready(&key, vec![pod]);
    ask(&mut second, b"", "hello from shop").await;
    let mut buf = [0u8; 1024];
    within(10, "the first answer", pipelining.read(&mut buf))
        .await
        .unwrap();
    eventually("the held bytes to be given back", || {
        target.metrics().held_bytes.get() == 0
    })
    .await;
}

#[tokio::test]
async fn an_upgraded_connection_is_not_cut_for_being_quiet() {
    let a = activator_with(short_limits(), DEFAULT_HELD_MEMORY).await;
    let pod = common::websocket_pod().await;
    a.route("ws", &[("service", "ws")], vec![pod]);
    let mut ws = common::websocket(a.addr).await;
    common::websocket_echo(&mut ws).await;
    // Quiet for more than the idle and header read timeouts together.
    tokio::time::sleep(IDLE_TIMEOUT + HEADER_READ_TIMEOUT + Duration::from_millis(200)).await;
    common::websocket_echo(&mut ws).await;
    assert_eq!(a.metrics.idle_timeouts.get(), 0);
}

#[tokio::test]
async fn an_idle_flood_at_the_connection_limit_is_cut_at_its_timeouts_and_others_are_then_served() {
    const FLOOD: usize = 20;
    let limits = Limits {
        max_connections: FLOOD,
        ..short_limits()
    };
    let a = activator_with(limits, DEFAULT_HELD_MEMORY).await;
    let (pod, _) = backend("shop").await;
    a.route("shop", &[("service", "shop")], vec![pod]);

    // Every place taken by connections that never send a byte.
    let mut silent = Vec::new();
    for _ in 0..FLOOD {
        silent.push(TcpStream::connect(a.addr).await.unwrap());
    }
    eventually("the flood to take every place", || {
        a.metrics.connections.get() == i64::try_from(FLOOD).unwrap()
    })
    .await;
    // A well-behaved client waits in the backlog until the flood is cut at the header read
    // timeout, then is served.
    let started = Instant::now();
    let mut normal = TcpStream::connect(a.addr).await.unwrap();
    ask(&mut normal, GET, "hello from shop").await;
    assert_cut_after(
        started.elapsed(),
        HEADER_READ_TIMEOUT,
        "the wait behind a silent flood",
    );
    for mut stream in silent {
        let (_, sent) = closed(&mut stream, started).await;
        assert!(sent.is_empty(), "{sent}");
    }
    assert_eq!(a.metrics.header_read_timeouts.get(), FLOOD as u64);
    drop(normal);

    // Again with connections that asked once and then sit idle, kept alive: cut at the idle
    // timeout.
    eventually("the places to be free", || a.metrics.connections.get() == 0).await;
    let mut idle = Vec::new();
    for _ in 0..FLOOD {
        let mut stream = TcpStream::connect(a.addr).await.unwrap();
        ask(&mut stream, GET, "hello from shop").await;
        idle.push(stream);
    }
    let started = Instant::now();
    let mut normal = TcpStream::connect(a.addr).await.unwrap();
    ask(&mut normal, GET, "hello from shop").await;
    assert_cut_after(
        started.elapsed(),
        IDLE_TIMEOUT,
        "the wait behind an idle flood",
    );
    for mut stream in idle {
        let (_, sent) = closed(&mut stream, started).await;
        assert!(sent.is_empty(), "{sent}");
    }
    assert_eq!(a.metrics.idle_timeouts.get(), FLOOD as u64);
    assert!(a.metrics.connection_limit_waits.get() >= 2);
    // The served client's connection is kept alive and goes on being served.
    ask(&mut normal, GET, "hello from shop").await;
}

/// The admin listener (`/healthz`, `/readyz`, `/metrics`) on loopback, with `limits`.
async fn admin(limits: server::AdminLimits) -> (std::net::SocketAddr, CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let stop = CancellationToken::new();
    tokio::spawn(server::serve_admin(
        listener,
        server::Readiness::default(),
        Health::new(Duration::from_secs(30)),
        Arc::new(Metrics::new()),
        limits,
        stop.clone(),
    ));
    (addr, stop)
}

#[tokio::test]
async fn the_admin_listener_caps_connections_and_cuts_slow_and_huge_heads() {
    let limits = server::AdminLimits {
        max_connections: 4,
        header_read_timeout: HEADER_READ_TIMEOUT,
        ..server::AdminLimits::default()
    };
    let (addr, _stop) = admin(limits).await;
    let healthz = b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n";
    let mut served = TcpStream::connect(addr).await.unwrap();
    ask(&mut served, healthz, "ok").await;
    drop(served);
    // A head never finished is cut at the header read timeout.
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"GET /metrics HTTP/1.1\r\nHost: a\r\n")
        .await
        .unwrap();
    let (elapsed, _) = closed(&mut slow, Instant::now()).await;
    assert_cut_after(elapsed, HEADER_READ_TIMEOUT, "an unfinished admin head");
    // A huge head is refused (431) instead of buffered (hyper's default: ~400 KiB).
    let mut huge = TcpStream::connect(addr).await.unwrap();
    let mut head = b"GET /healthz HTTP/1.1\r\nHost: a\r\nX-Pad: ".to_vec();
    head.resize(head.len() + 40 * 1024, b'a');
    head.extend_from_slice(b"\r\n\r\n");
    let _ = huge.write_all(&head).await;
    let (_, answer) = closed(&mut huge, Instant::now()).await;
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer:?}");
    // With as many connections open as allowed, one more waits until they are cut.
    let mut open = Vec::new();
    for _ in 0..4 {
        open.push(TcpStream::connect(addr).await.unwrap());
    }
    let started = Instant::now();
    let mut extra = TcpStream::connect(addr).await.unwrap();
    extra.write_all(healthz).await.unwrap();
    let mut buf = [0u8; 1024];
    let early = tokio::time::timeout(Duration::from_millis(150), extra.read(&mut buf)).await;
    assert!(
        early.is_err(),
        "a connection past the cap was served: {early:?}"
    );
    open.pop();
    ask(&mut extra, b"", "ok").await;
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_pod_that_stalls_after_its_head_is_cut_at_the_upstream_idle_timeout_on_every_path() {
    const UPSTREAM_IDLE: Duration = Duration::from_millis(300);
    let limits = Limits {
        upstream_idle_timeout: UPSTREAM_IDLE,
        ..short_limits()
    };
    let a = activator_with(limits, DEFAULT_HELD_MEMORY).await;
    // A pod that sends a response head and part of its body (or switches protocols), then
    // nothing, never closing.
    let (pod, _) = raw_pod(|mut stream| async move {
        if let Some(head) = read_head(&mut stream).await {
            let answer: &[u8] = if head.windows(8).any(|w| w.eq_ignore_ascii_case(b"upgrade:")) {
                b"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n"
            } else {
                b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhalf"
            };
            let _ = stream.write_all(answer).await;
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
    })
    .await;
    // One slot: each request below gets it only if the one before freed it.
    let key = a.route(
        "shop",
        &[("service", "shop"), ("containerConcurrency", "1")],
        vec![pod],
    );
    let requests: [(&[u8], &str); 3] = [
        // The front path, hyper's path, an upgraded tunnel.
        (GET, "half"),
        (POST, "half"),
        (
            b"GET /ws HTTP/1.1\r\nHost: shop.example.com\r\nConnection: Upgrade\r\n\
              Upgrade: websocket\r\n\r\n",
            "\r\n\r\n",
        ),
    ];
    for (request, last) in requests {
        let mut stream = TcpStream::connect(a.addr).await.unwrap();
        stream.write_all(request).await.unwrap();
        let started = Instant::now();
        let (elapsed, answer) = closed(&mut stream, started).await;
        assert!(
            answer.starts_with("HTTP/1.1 200") || answer.starts_with("HTTP/1.1 101"),
            "{answer:?}"
        );
        assert!(answer.ends_with(last), "{answer:?}");
        assert_cut_after(elapsed, UPSTREAM_IDLE, "a stalled pod");
    }
    let target = a.targets.get(&key).unwrap();
    eventually("the slot to be free", || {
        target
            .sample(Instant::now(), Duration::from_secs(60))
            .is_none_or(|s| s.in_flight == 0)
    })
    .await;
}

#[tokio::test]
async fn without_container_concurrency_a_pod_gets_at_most_max_pod_connections() {
    const CAP: u32 = 4;
    const REQUESTS: usize = 24;
    let a = common::activator_configured(
        Limits::default(),
        TargetLimits {
            max_pod_connections: CAP,
            ..TargetLimits::default()
        },
        TrustedProxies::default(),
    )
    .await;
    // A pod that answers each request after 100 ms, counting its open connections.
    let open = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let most = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (pod, accepted) = raw_pod({
        let (open, most) = (Arc::clone(&open), Arc::clone(&most));
        move |mut stream| {
            let (open, most) = (Arc::clone(&open), Arc::clone(&most));
            async move {
                let now = open.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                while read_head(&mut stream).await.is_some() {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
                    if stream.write_all(answer).await.is_err() {
                        break;
                    }
                }
                open.fetch_sub(1, Ordering::SeqCst);
            }
        }
    })
    .await;
    // containerConcurrency 0: no per-pod limit from the trigger.
    a.route("shop", &[("service", "shop")], vec![pod]);
    // Many requests at once, on one HTTP/2 connection (one client socket) and on HTTP/1.1
    // connections of their own.
    let c = client();
    let h2 = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http::<http_body_util::Empty<bytes::Bytes>>();
    let mut answers = tokio::task::JoinSet::new();
    for i in 0..REQUESTS {
        let (c, h2, addr) = (c.clone(), h2.clone(), a.addr);
        answers.spawn(async move {
            if i % 2 == 0 {
                get(&c, addr, "shop.example.com", "/").await.0
            } else {
                let request = http::Request::get(format!("http://{addr}/"))
                    .header("host", "shop.example.com")
                    .body(http_body_util::Empty::new())
                    .unwrap();
                h2.request(request).await.map_or(0, |r| r.status().as_u16())
            }
        });
    }
    within(20, "every answer", async {
        while let Some(status) = answers.join_next().await {
            assert_eq!(status.unwrap(), 200);
        }
    })
    .await;
    let most = most.load(Ordering::SeqCst);
    assert!(
        most <= CAP as usize,
        "{most} connections open to the pod at once ({} in all)",
        accepted.load(Ordering::SeqCst)
    );
}

#[tokio::test]
async fn past_the_memory_budget_connections_wait_and_huge_heads_are_refused() {
    use keda_activator::limits::CONNECTION_BYTES;
    let limits = Limits {
        // Room for three connections on the front path.
        memory_budget: 3 * CONNECTION_BYTES + 1024,
        ..Limits::default()
    };
    let a = activator_with(limits, DEFAULT_HELD_MEMORY).await;
    let (pod, _) = backend("shop").await;
    a.route("shop", &[("service", "shop")], vec![pod]);
    // A head of 100 KB is refused, not buffered (hyper's default buffer takes ~400 KiB).
    let mut huge = TcpStream::connect(a.addr).await.unwrap();
    let mut head = b"GET / HTTP/1.1\r\nHost: shop.example.com\r\nX-Pad: ".to_vec();
    head.resize(head.len() + 100_000, b'a');
    head.extend_from_slice(b"\r\n\r\n");
    let _ = huge.write_all(&head).await;
    let (_, answer) = closed(&mut huge, Instant::now()).await;
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer:?}");
    // Three clients each sending an unfinished head take the budget.
    let mut unfinished = Vec::new();
    for _ in 0..3 {
        let mut stream = TcpStream::connect(a.addr).await.unwrap();
        stream
            .write_all(b"GET / HTTP/1.1\r\nHost: shop.example.com\r\nX-Pad: aaaa")
            .await
            .unwrap();
        unfinished.push(stream);
    }
    eventually("three open connections", || {
        a.metrics.connections.get() == 3
    })
    .await;
    // A fourth is not served while they hold it...
    let mut fourth = TcpStream::connect(a.addr).await.unwrap();
    fourth.write_all(GET).await.unwrap();
    let mut buf = [0u8; 1024];
    let early = tokio::time::timeout(Duration::from_millis(300), fourth.read(&mut buf)).await;
    assert!(
        early.is_err(),
        "a connection past the budget was served: {early:?}"
    );
    // ...and is once one of them goes.
    unfinished.pop();
    ask(&mut fourth, b"", "hello from shop").await;
}
