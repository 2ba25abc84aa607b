//! The tests' own external scaler: a gRPC server on loopback implementing KEDA's
//! `externalscaler.proto` (the service trait generated into `keda_scalers`), served with hyper
//! over plain TCP (h2c) or TLS, optionally requiring a client certificate. The test sets the
//! metric specs, the value and the activity, pushes `StreamIsActive` answers, and reads what
//! the server saw: every request's `ScaledObjectRef`, the calls per method, the connections.
//! It can stop (dropping every connection) and start again on the same port.
//!
//! Included by the scalers' tests, the operator's tests and the operator's bench.

#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::Stream;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use keda_scalers::scalers::external::proto::external_scaler_server::{
    ExternalScaler, ExternalScalerServer,
};
use keda_scalers::scalers::external::proto::{
    GetMetricSpecResponse, GetMetricsRequest, GetMetricsResponse, IsActiveResponse, MetricSpec,
    MetricValue, ScaledObjectRef,
};
use tokio::net::TcpListener;
use tokio::sync::broadcast;
use tonic::{Request, Response, Status};

/// What the server answers and what it saw.
#[derive(Default)]
pub struct State {
    /// `GetMetricSpec`'s answer.
    pub specs: Mutex<Vec<MetricSpec>>,
    /// `GetMetrics`' answer per metric name: (metricValue, metricValueFloat).
    pub values: Mutex<HashMap<String, (i64, f64)>>,
    /// `IsActive`'s answer.
    pub active: AtomicBool,
    /// Every `ScaledObjectRef` received, in order (from any method).
    pub seen: Mutex<Vec<ScaledObjectRef>>,
    /// Metric names asked through `GetMetrics`.
    pub asked: Mutex<Vec<String>>,
    /// Calls per method.
    pub calls: Mutex<HashMap<&'static str, usize>>,
    /// When each `StreamIsActive` was opened (refused or not).
    pub stream_opens: Mutex<Vec<Instant>>,
    /// Refuse `StreamIsActive` with `Unavailable`.
    pub refuse_streams: AtomicBool,
    /// TCP connections accepted, ever.
    pub accepted: AtomicUsize,
    /// TCP connections open now.
    pub open: AtomicUsize,
    pushes: Mutex<Option<broadcast::Sender<bool>>>,
}

impl State {
    fn record(&self, method: &'static str, object: Option<&ScaledObjectRef>) {
        *self.calls.lock().expect("calls").entry(method).or_default() += 1;
        if let Some(o) = object {
            self.seen.lock().expect("seen").push(o.clone());
        }
    }

    fn pushes(&self) -> broadcast::Sender<bool> {
        self.pushes
            .lock()
            .expect("pushes")
            .get_or_insert_with(|| broadcast::channel(64).0)
            .clone()
    }
}

#[derive(Clone)]
struct Handler(Arc<State>);

type ActiveStream = Pin<Box<dyn Stream<Item = Result<IsActiveResponse, Status>> + Send>>;

#[tonic::async_trait]
impl ExternalScaler for Handler {
    async fn is_active(
        &self,
        request: Request<ScaledObjectRef>,
    ) -> Result<Response<IsActiveResponse>, Status> {
        self.0.record("IsActive", Some(request.get_ref()));
        Ok(Response::new(IsActiveResponse {
            result: self.0.active.load(Ordering::SeqCst),
        }))
    }

    async fn stream_is_active(
        &self,
        request: Request<ScaledObjectRef>,
    ) -> Result<Response<ActiveStream>, Status> {
        self.0.record("StreamIsActive", Some(request.get_ref()));
        self.0
            .stream_opens
            .lock()
            .expect("opens")
            .push(Instant::now());
        if self.0.refuse_streams.load(Ordering::SeqCst) {
            return Err(Status::unavailable("streams refused by the test"));
        }
        let rx = self.0.pushes().subscribe();
        let stream = futures::stream::unfold(rx, |mut rx| async move {
            loop {
                match rx.recv().await {
                    Ok(result) => return Some((Ok(IsActiveResponse { result }), rx)),
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        });
        Ok(Response::new(Box::pin(stream)))
    }

    async fn get_metric_spec(
        &self,
        request: Request<ScaledObjectRef>,
    ) -> Result<Response<GetMetricSpecResponse>, Status> {
        self.0.record("GetMetricSpec", Some(request.get_ref()));
        Ok(Response::new(GetMetricSpecResponse {
            metric_specs: self.0.specs.lock().expect("specs").clone(),
        }))
    }

    async fn get_metrics(
        &self,
        request: Request<GetMetricsRequest>,
    ) -> Result<Response<GetMetricsResponse>, Status> {
        let request = request.into_inner();
        self.0
            .record("GetMetrics", request.scaled_object_ref.as_ref());
        self.0
            .asked
            .lock()
            .expect("asked")
            .push(request.metric_name.clone());
        let Some((int, float)) = self
            .0
            .values
            .lock()
            .expect("values")
            .get(&request.metric_name)
            .copied()
        else {
            return Err(Status::not_found(format!(
                "no metric {}",
                request.metric_name
            )));
        };
        Ok(Response::new(GetMetricsResponse {
            metric_values: vec![MetricValue {
                metric_name: request.metric_name,
                metric_value: int,
                metric_value_float: float,
            }],
        }))
    }
}

/// A running external scaler on a loopback port. Stopped when dropped.
pub struct ExternalServer {
    /// Where it listens (kept across [`ExternalServer::stop`] and [`ExternalServer::start`]).
    pub addr: SocketAddr,
    /// What it answers and saw.
    pub state: Arc<State>,
    tls: Option<Arc<rustls::ServerConfig>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for ExternalServer {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// `metricName` with an integer target.
pub fn spec(name: &str, target: i64) -> MetricSpec {
    MetricSpec {
        metric_name: name.to_string(),
        target_size: target,
        target_size_float: 0.0,
    }
}

impl ExternalServer {
    /// A plaintext (h2c) server answering `specs`.
    pub async fn plain(specs: Vec<MetricSpec>) -> Self {
        Self::launch(specs, None).await
    }

    /// A TLS server with `config` (its ALPN is set to `h2` here).
    pub async fn tls(specs: Vec<MetricSpec>, config: Arc<rustls::ServerConfig>) -> Self {
        let mut config = (*config).clone();
        config.alpn_protocols = vec![b"h2".to_vec()];
        Self::launch(specs, Some(Arc::new(config))).await
    }

    async fn launch(specs: Vec<MetricSpec>, tls: Option<Arc<rustls::ServerConfig>>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state = Arc::new(State::default());
        *state.specs.lock().expect("specs") = specs;
        let mut server = Self {
            addr,
            state,
            tls,
            task: None,
        };
        server.serve(listener);
        server
    }

    /// `127.0.0.1:<port>`, for `scalerAddress`.
    pub fn address(&self) -> String {
        self.addr.to_string()
    }

    /// Sets `GetMetrics`' answer for `metric` (the name without `s<i>-`).
    pub fn set_value(&self, metric: &str, value: i64, value_float: f64) {
        self.state
            .values
            .lock()
            .expect("values")
            .insert(metric.to_string(), (value, value_float));
    }

    /// Sets `IsActive`'s answer.
    pub fn set_active(&self, active: bool) {
        self.state.active.store(active, Ordering::SeqCst);
    }

    /// Sends `active` on every open `StreamIsActive` stream; how many streams got it.
    pub fn push(&self, active: bool) -> usize {
        self.state.pushes().send(active).unwrap_or(0)
    }

    /// How many `StreamIsActive` streams are open now.
    pub fn open_streams(&self) -> usize {
        self.state.pushes().receiver_count()
    }

    /// Calls of `method` so far.
    pub fn calls(&self, method: &str) -> usize {
        self.state
            .calls
            .lock()
            .expect("calls")
            .get(method)
            .copied()
            .unwrap_or(0)
    }

    /// The last `ScaledObjectRef` received.
    pub fn last_seen(&self) -> ScaledObjectRef {
        self.state
            .seen
            .lock()
            .expect("seen")
            .last()
            .cloned()
            .expect("a request was made")
    }

    /// TCP connections accepted, ever.
    pub fn accepted(&self) -> usize {
        self.state.accepted.load(Ordering::SeqCst)
    }

    /// TCP connections open now.
    pub fn open_connections(&self) -> usize {
        self.state.open.load(Ordering::SeqCst)
    }

    /// Stops listening and drops every connection (and so every stream), as a crashed server.
    pub async fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
        // Streams end with the connections; new subscribers get a fresh channel.
        *self.state.pushes.lock().expect("pushes") = None;
    }

    /// Listens again on the same address.
    pub async fn start(&mut self) {
        let listener = TcpListener::bind(self.addr)
            .await
            .expect("rebind the same port");
        self.serve(listener);
    }

    fn serve(&mut self, listener: TcpListener) {
        let state = Arc::clone(&self.state);
        let tls = self.tls.clone().map(tokio_rustls::TlsAcceptor::from);
        let service = ExternalScalerServer::new(Handler(Arc::clone(&state)));
        self.task = Some(tokio::spawn(async move {
            // Aborting this task drops the set, which aborts every connection.
            let mut connections = tokio::task::JoinSet::new();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                state.accepted.fetch_add(1, Ordering::SeqCst);
                let state = Arc::clone(&state);
                let service = TowerToHyperService::new(service.clone());
                let tls = tls.clone();
                connections.spawn(async move {
                    state.open.fetch_add(1, Ordering::SeqCst);
                    let _open = OpenGuard(Arc::clone(&state));
                    let builder =
                        hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                    match tls {
                        Some(acceptor) => {
                            // A client without an acceptable certificate just fails here.
                            if let Ok(stream) = acceptor.accept(stream).await {
                                let _ = builder
                                    .serve_connection(TokioIo::new(stream), service)
                                    .await;
                            }
                        }
                        None => {
                            let _ = builder
                                .serve_connection(TokioIo::new(stream), service)
                                .await;
                        }
                    }
                });
                // Reap finished connections so the set does not grow.
                while connections.try_join_next().is_some() {}
            }
        }));
    }
}

struct OpenGuard(Arc<State>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Waits (up to 10 s) until `check` holds; fails naming `what`.
pub async fn eventually(what: &str, check: impl Fn() -> bool) {
    eventually_within(what, std::time::Duration::from_secs(10), check).await;
}

/// Waits up to `limit` until `check` holds; fails naming `what`.
pub async fn eventually_within(what: &str, limit: std::time::Duration, check: impl Fn() -> bool) {
    let wait = async {
        while !check() {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(limit, wait)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"));
}

/// Retries `attempt` (up to 10 s) until it succeeds; fails naming `what` and the last error.
pub async fn eventually_ok<T, E: std::fmt::Display, F, Fut>(what: &str, attempt: F) -> T
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match attempt().await {
            Ok(v) => return v,
            Err(e) if tokio::time::Instant::now() >= deadline => {
                panic!("timed out waiting for {what}: {e}")
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
        }
    }
}
