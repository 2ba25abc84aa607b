//! Issue 30's memory attack on a running activator: `clients` connections each send an
//! unfinished request head of `head` bytes. Used by `activator/tests/cli.rs` (the binary on
//! memkube) and `tests/e2e/tests/tenant_safety.rs` (the binary against a real API server)
//! through `#[path]`.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The attack's size in issue 30: 1,100 clients, 460 KB heads.
pub const CLIENTS: usize = 1100;
/// The length of each unfinished head.
pub const HEAD: usize = 460_000;

/// The resident set size of `pid` in bytes (`VmRSS`).
pub fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmRSS")
        * 1024
}

/// The whole answer to a complete `GET /` for a host nobody routes, if one comes.
pub async fn answer(addr: SocketAddr) -> Option<String> {
    let mut stream = TcpStream::connect(addr).await.ok()?;
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: nothing.example\r\nConnection: close\r\n\r\n")
        .await
        .ok()?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.ok()?;
    Some(String::from_utf8_lossy(&answer).into_owned())
}

/// Whether the activator answers `404` to [`answer`]'s request within 10 s.
pub async fn answers_404(addr: SocketAddr) -> bool {
    for _ in 0..200 {
        if answer(addr)
            .await
            .is_some_and(|a| a.starts_with("HTTP/1.1 404"))
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// Sends the attack to `addr`, sampling the RSS of `pid` every 20 ms until every client has
/// written its head (or been cut short). Returns the peak RSS and the open connections (keep
/// them while checking that the activator still answers).
pub async fn unfinished_heads(
    addr: SocketAddr,
    pid: u32,
    clients: usize,
    head: usize,
) -> (u64, Vec<Option<TcpStream>>) {
    let mut bytes = b"GET / HTTP/1.1\r\nHost: nothing.example\r\nX-Pad: ".to_vec();
    bytes.resize(head, b'a');
    let bytes: std::sync::Arc<[u8]> = bytes.into();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..clients {
        let bytes = bytes.clone();
        tasks.spawn(async move {
            let Ok(mut stream) = TcpStream::connect(addr).await else {
                return None;
            };
            // Never finished: no blank line. The activator may cut it short.
            let _ = stream.write_all(&bytes).await;
            Some(stream)
        });
    }
    let mut peak = 0;
    let sampler = async {
        loop {
            peak = peak.max(rss(pid));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let mut open = Vec::new();
    tokio::select! {
        () = sampler => {}
        () = async {
            while let Some(stream) = tasks.join_next().await {
                open.push(stream.expect("client task"));
            }
        } => {}
    }
    peak = peak.max(rss(pid));
    (peak, open)
}
