//! Fault: a pod killed in the middle of a response (issue 14, "Faults").
//!
//! When a process is killed, the kernel closes its sockets: the peer sees the connection end
//! (FIN), or a reset (RST) when data was still unread. The pods here are real sockets on
//! loopback that send a response head and part of the body, then end the connection one of
//! those two ways, exactly what the activator sees of a `kill -9`. Checked: what the client
//! gets on each request path, that the break is counted, that the pod's slot is freed, and
//! that the activator goes on serving (the next request gets a whole answer from the pod's
//! replacement).

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{activator, raw_pod, read_head, within};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How the killed pod's connection ends.
#[derive(Clone, Copy, Debug)]
enum Death {
    /// The connection is closed (FIN): a killed process with nothing unread.
    Close,
    /// The connection is reset (RST): a killed process with unread data, or a pod that
    /// vanished.
    Reset,
}

/// How the killed pod frames its response.
#[derive(Clone, Copy, Debug)]
enum Body {
    /// `Content-Length: 100000`, 10,000 bytes sent.
    Length,
    /// Chunked, two chunks of 5,000 bytes sent.
    Chunked,
}

const SENT: usize = 10_000;

/// A pod that answers every request with a head and `SENT` body bytes, then dies as `death`
/// says; `/whole` gets a whole answer (the pod's replacement, in effect).
async fn dying_pod(body: Body, death: Death) -> SocketAddr {
    let (addr, _) = raw_pod(move |mut stream| async move {
        let Some(head) = read_head(&mut stream).await else {
            return;
        };
        if head.starts_with(b"POST") {
            let _ = stream.read_exact(&mut [0u8; 2]).await;
        }
        if head.windows(6).any(|w| w == b"/whole") {
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nwhole")
                .await;
            return;
        }
        let part = match body {
            Body::Length => {
                let mut part = b"HTTP/1.1 200 OK\r\ncontent-length: 100000\r\n\r\n".to_vec();
                part.extend_from_slice(&[b'x'; SENT]);
                part
            }
            Body::Chunked => {
                let mut part = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
                for _ in 0..2 {
                    part.extend_from_slice(format!("{:x}\r\n", SENT / 2).as_bytes());
                    part.extend_from_slice(&[b'x'; SENT / 2]);
                    part.extend_from_slice(b"\r\n");
                }
                part
            }
        };
        if stream.write_all(&part).await.is_err() {
            return;
        }
        // Let the activator read what was sent before the end comes.
        tokio::time::sleep(Duration::from_millis(100)).await;
        if let Death::Reset = death {
            // SO_LINGER 0: closing sends a reset (and does not block, the reason for the
            // deprecation).
            #[allow(deprecated)]
            let _ = stream.set_linger(Some(Duration::ZERO));
        }
        drop(stream);
    })
    .await;
    addr
}

/// Sends `request` on a new connection and reads until the activator ends the connection:
/// what it sent, and whether the connection ended in a reset.
async fn until_cut(addr: SocketAddr, request: &[u8]) -> (String, bool) {
    let mut stream = TcpStream::connect(addr).await.expect("test harness");
    stream.write_all(request).await.expect("test harness");
    let mut answer = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let reset = within(10, "the activator to end the connection", async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) => return false,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
                Err(_) => return true,
            }
        }
    })
    .await;
    (String::from_utf8_lossy(&answer).into_owned(), reset)
}

/// The body bytes after the head in `answer`.
fn body_of(answer: &str) -> &str {
    answer.split_once("\r\n\r\n").map_or("", |(_, body)| body)
}

#[tokio::test]
async fn a_pod_killed_mid_response_cuts_that_response_only_and_the_activator_goes_on() {
    let get: &[u8] = b"GET /big HTTP/1.1\r\nHost: shop.example.com\r\n\r\n";
    // A request with a body is served by hyper's server.
    let post: &[u8] =
        b"POST /big HTTP/1.1\r\nHost: shop.example.com\r\nContent-Length: 2\r\n\r\nhi";
    let a = activator().await;
    let mut broken = 0;
    for body in [Body::Length, Body::Chunked] {
        for death in [Death::Close, Death::Reset] {
            let pod = dying_pod(body, death).await;
            // One slot: the next request is served only if the broken one gave it back.
            let key = a.route(
                "shop",
                &[("service", "shop"), ("containerConcurrency", "1")],
                vec![pod],
            );
            let target = a.targets.get(&key).expect("the route");
            for (path, request) in [("front path", get), ("hyper's server", post)] {
                let case = format!("{body:?} body, pod {death:?}, {path}");
                let (answer, _) = until_cut(a.addr, request).await;
                // The client got the head and what the pod sent, then the connection ended:
                // the response cannot be mistaken for a whole one.
                assert!(
                    answer.starts_with("HTTP/1.1 200 OK\r\n"),
                    "{case}: {answer}"
                );
                let got = body_of(&answer);
                match body {
                    Body::Length => {
                        assert!(
                            answer.contains("content-length: 100000\r\n"),
                            "{case}: {answer:.300}"
                        );
                        assert_eq!(got.len(), SENT, "{case}: fewer bytes than announced");
                    }
                    Body::Chunked => {
                        assert!(
                            answer.contains("transfer-encoding: chunked\r\n"),
                            "{case}: {answer:.300}"
                        );
                        assert_eq!(got.matches('x').count(), SENT, "{case}");
                        assert!(!got.ends_with("0\r\n\r\n"), "{case}: no last chunk");
                    }
                }
                broken += 1;
                assert_eq!(
                    target.metrics().upstream_aborts.get(),
                    broken,
                    "{case}: counted"
                );
                // The slot is free and the activator serves the next request, kept alive.
                let answer = common::exchange(
                    a.addr,
                    b"GET /whole HTTP/1.1\r\nHost: shop.example.com\r\nConnection: close\r\n\r\n",
                )
                .await;
                assert!(answer.ends_with("\r\n\r\nwhole"), "{case}: {answer}");
            }
        }
    }
}

#[tokio::test]
async fn a_pod_killed_mid_response_resets_only_that_http2_stream() {
    use http_body_util::BodyExt;

    let a = activator().await;
    let pod = dying_pod(Body::Length, Death::Close).await;
    let key = a.route("shop", &[("service", "shop")], vec![pod]);
    let request = |path: &str| {
        http::Request::get(format!("http://shop.example.com{path}"))
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .expect("test harness")
    };
    // HTTP/2 with prior knowledge, to the activator's address.
    let stream = TcpStream::connect(a.addr).await.expect("test harness");
    let (mut sender, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .expect("h2 handshake");
    tokio::spawn(connection);
    let response = within(10, "the head", sender.send_request(request("/big")))
        .await
        .expect("a head");
    assert_eq!(response.status(), 200);
    let body = within(10, "the body", response.into_body().collect()).await;
    assert!(body.is_err(), "the stream is reset, not ended: {body:?}");
    let target = a.targets.get(&key).expect("the route");
    assert_eq!(target.metrics().upstream_aborts.get(), 1);
    // The same connection serves the next request.
    let response = within(10, "the next head", sender.send_request(request("/whole")))
        .await
        .expect("the connection still serves");
    let body = response.into_body().collect().await.expect("a whole body");
    assert_eq!(&body.to_bytes()[..], b"whole");
}
