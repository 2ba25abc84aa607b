//! The explain-port attacker of issue 30, finding 3: many concurrent clients sending explain
//! requests with bearer tokens the API server does not know, as fast as they are answered.
//! Shared by `operator/tests/api_budget.rs` (memkube) and `tests/e2e` (a real cluster).
//!
//! Only std and tokio are used here, so any test crate includes this file by path.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What the attackers got back, by HTTP status (0: no answer, the connection failed).
#[derive(Default)]
pub struct Answers(Mutex<BTreeMap<u16, u64>>);

impl Answers {
    pub fn add(&self, status: u16) {
        *self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(status)
            .or_default() += 1;
    }

    pub fn get(&self) -> BTreeMap<u16, u64> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Answers that were a quick refusal (401 or 429), and all answers.
    pub fn refused_of_total(&self) -> (u64, u64) {
        let answers = self.get();
        let refused = answers
            .iter()
            .filter(|(status, _)| matches!(status, 401 | 429))
            .map(|(_, n)| n)
            .sum();
        (refused, answers.values().sum())
    }
}

/// One `GET path` to the explain endpoint at `addr` with `token`: the status of the answer, 0
/// when there is none within 30 s or the connection fails.
pub async fn explain(addr: SocketAddr, path: &str, token: &str) -> u16 {
    let exchange = async {
        let mut stream = TcpStream::connect(addr).await.ok()?;
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
             Connection: close\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut head = [0u8; 12];
        stream.read_exact(&mut head).await.ok()?;
        std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
    };
    tokio::time::timeout(Duration::from_secs(30), exchange)
        .await
        .ok()
        .flatten()
        .unwrap_or(0)
}

/// Starts `clients` attackers on `path` until `stop`: half reuse one made-up token (what a
/// review cache answers), half send a new one with every request (what only a budget bounds).
pub fn flood(
    addr: SocketAddr,
    path: &str,
    clients: usize,
    stop: Arc<AtomicBool>,
    answers: Arc<Answers>,
) -> Vec<tokio::task::JoinHandle<()>> {
    static SEQUENCE: AtomicU64 = AtomicU64::new(0);
    (0..clients)
        .map(|client| {
            let stop = stop.clone();
            let answers = answers.clone();
            let path = path.to_string();
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let token = if client % 2 == 0 {
                        "made-up-token".to_string()
                    } else {
                        format!("made-up-{}", SEQUENCE.fetch_add(1, Ordering::Relaxed))
                    };
                    let status = explain(addr, &path, &token).await;
                    answers.add(status);
                    if status == 0 {
                        // Refused or reset: do not spin on a port that is not there.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            })
        })
        .collect()
}
