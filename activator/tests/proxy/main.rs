//! The proxy against real HTTP backends on loopback, with the routing table fed directly.

#[path = "../common/mod.rs"]
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

mod connections;
mod holding;
mod routing;
