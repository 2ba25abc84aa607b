//! `Source`: an event source for the `metrics-api` scaler, on a loopback port, that a test can
//! take down and bring back. Each path `/<name>` answers `{"value": N}` with the value the test
//! set for `<name>` (or any JSON body set with [`Source::set_body`]); requests are counted per
//! name.
//!
//! Down, it fails in one of three ways ([`Outage`]): the port refuses connections (the listener
//! and every open connection are gone, as when the source's process died), connections are
//! accepted and never answered (a hung source), or every request gets a `503`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

/// How a source that is down fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outage {
    /// Connections are refused: nothing listens on the port.
    Refused,
    /// Connections are accepted and requests read, but never answered.
    Hung,
    /// Every request is answered `503 Service Unavailable`.
    Unavailable,
}

#[derive(Default)]
struct State {
    bodies: HashMap<String, String>,
    requests: HashMap<String, u64>,
    outage: Option<Outage>,
}

/// The source. Stops when dropped.
pub struct Source {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    /// The accept loop and its connections, while listening.
    server: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Drop for Source {
    fn drop(&mut self) {
        if let Some(task) = lock(&self.server).take() {
            task.abort();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Source {
    /// A source on a free loopback port, answering.
    pub async fn start() -> Source {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let source = Source {
            addr,
            state: Arc::default(),
            server: Mutex::new(None),
        };
        source.listen(listener);
        source
    }

    fn listen(&self, listener: TcpListener) {
        let state = self.state.clone();
        let task = tokio::spawn(async move {
            // Owned by this task: aborting it drops every connection with it.
            let mut connections = JoinSet::new();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let state = state.clone();
                connections.spawn(async move {
                    let service = service_fn(move |request: hyper::Request<Incoming>| {
                        let state = state.clone();
                        async move { Ok::<_, Infallible>(answer(&state, request.uri().path()).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
                while connections.try_join_next().is_some() {}
            }
        });
        *lock(&self.server) = Some(task);
    }

    /// The URL that answers the value of `name`.
    pub fn url(&self, name: &str) -> String {
        format!("http://{}/{name}", self.addr)
    }

    /// Sets the value `name` answers: `{"value": <value>}`.
    pub fn set(&self, name: &str, value: f64) {
        self.set_body(name, &format!(r#"{{"value": {value}}}"#));
    }

    /// Sets the whole JSON body `name` answers.
    pub fn set_body(&self, name: &str, body: &str) {
        lock(&self.state)
            .bodies
            .insert(name.to_string(), body.to_string());
    }

    /// Requests for `name` so far (answered or not).
    pub fn requests(&self, name: &str) -> u64 {
        lock(&self.state)
            .requests
            .get(name)
            .copied()
            .unwrap_or_default()
    }

    /// Takes the source down.
    pub fn down(&self, outage: Outage) {
        lock(&self.state).outage = Some(outage);
        if outage == Outage::Refused
            && let Some(task) = lock(&self.server).take()
        {
            task.abort();
        }
    }

    /// Brings the source back on the same port.
    pub async fn up(&self) {
        let outage = lock(&self.state).outage.take();
        if outage == Some(Outage::Refused) {
            // The aborted listener task drops its socket when the runtime next polls it.
            let listener = loop {
                match TcpListener::bind(self.addr).await {
                    Ok(l) => break l,
                    Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
                }
            };
            self.listen(listener);
        }
    }
}

async fn answer(state: &Mutex<State>, path: &str) -> hyper::Response<Full<Bytes>> {
    let name = path.trim_start_matches('/').to_string();
    let (body, outage) = {
        let mut state = lock(state);
        *state.requests.entry(name.clone()).or_default() += 1;
        (state.bodies.get(&name).cloned(), state.outage)
    };
    let (status, body) = match (outage, body) {
        (Some(Outage::Hung), _) => std::future::pending().await,
        (Some(Outage::Unavailable | Outage::Refused), _) => (503, "source unavailable".to_string()),
        (None, Some(body)) => (200, body),
        (None, None) => (404, format!("no value for {name}")),
    };
    hyper::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .expect("a response")
}
