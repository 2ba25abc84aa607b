//! A metrics API for `metrics-api` triggers: a real HTTP server on a loopback port whose JSON
//! answer the test sets, which counts the requests it answers, and which can go down (its
//! listener and every open connection closed, so clients get "connection refused") and come
//! back on the same port.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

#[derive(Default)]
struct State {
    body: Mutex<String>,
    requests: AtomicU64,
}

/// The server. Dropping it stops it.
pub struct MetricsApi {
    addr: SocketAddr,
    state: Arc<State>,
    tasks: Mutex<Option<JoinSet<()>>>,
}

impl MetricsApi {
    /// Starts on a free loopback port, answering `{"queue":{"depth":<value>}}`.
    pub async fn start(value: f64) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let server = MetricsApi {
            addr: listener.local_addr().expect("addr"),
            state: Arc::new(State::default()),
            tasks: Mutex::new(None),
        };
        server.set(value);
        server.serve(listener);
        server
    }

    /// `http://127.0.0.1:<port>/stats`; the value is at `queue.depth`.
    pub fn url(&self) -> String {
        format!("http://{}/stats", self.addr)
    }

    /// Sets the value the next answers carry.
    pub fn set(&self, value: f64) {
        self.set_body(&format!(
            r#"{{"queue":{{"depth":{value}}},"workers":["a","b"]}}"#
        ));
    }

    /// Sets the whole body the next answers carry.
    pub fn set_body(&self, body: &str) {
        *self
            .state
            .body
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = body.to_string();
    }

    /// Requests answered so far.
    pub fn requests(&self) -> u64 {
        self.state.requests.load(Ordering::SeqCst)
    }

    /// Goes down: the listener and every open connection are closed.
    pub fn stop(&self) {
        if let Some(mut tasks) = self
            .tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            tasks.abort_all();
        }
    }

    /// Comes back on the same port.
    pub async fn restart(&self) {
        self.stop();
        // The aborted listener task drops its socket when the runtime next polls it.
        let listener = loop {
            match TcpListener::bind(self.addr).await {
                Ok(l) => break l,
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
            }
        };
        self.serve(listener);
    }

    fn serve(&self, listener: TcpListener) {
        let mut tasks = JoinSet::new();
        let state = Arc::clone(&self.state);
        // Connections are spawned on the same JoinSet through a channel, so `stop` closes them
        // with the listener.
        let (conn_tx, mut conn_rx) = tokio::sync::mpsc::unbounded_channel();
        tasks.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                if conn_tx.send(stream).is_err() {
                    return;
                }
            }
        });
        let connections = async move {
            let mut open = JoinSet::new();
            while let Some(stream) = conn_rx.recv().await {
                let state = Arc::clone(&state);
                open.spawn(async move {
                    let service = service_fn(move |_request: hyper::Request<Incoming>| {
                        let body = state
                            .body
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .clone();
                        state.requests.fetch_add(1, Ordering::SeqCst);
                        async move {
                            let response = hyper::Response::builder()
                                .header("content-type", "application/json")
                                .body(Full::new(Bytes::from(body)))
                                .expect("response");
                            Ok::<_, Infallible>(response)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        };
        tasks.spawn(connections);
        *self.tasks.lock().unwrap_or_else(PoisonError::into_inner) = Some(tasks);
    }
}

impl Drop for MetricsApi {
    fn drop(&mut self) {
        self.stop();
    }
}
