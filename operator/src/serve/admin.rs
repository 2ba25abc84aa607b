//! The operator's plain-HTTP admin endpoints: `/healthz` and `/readyz` on the probe port
//! (KEDA's :8081) and Prometheus `/metrics` on the metrics port (KEDA's :8080).
//!
//! Built on hyper, which the kube client already brings in: three fixed routes need no web
//! framework.
//!
//! - `/healthz` answers `200 ok` while the process serves requests (KEDA's `healthz.Ping`).
//! - `/readyz` answers `200 ok` once every registered [`ReadyGate`] is open, else `503` naming
//!   the closed ones. The operator opens its `leader-election` gate when leadership is known
//!   (this replica read the Lease and is leader or standby): standbys are ready too, so a
//!   rolling update never waits on the old leader.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use crate::process::telemetry::{METRICS_CONTENT_TYPE, Metrics};

/// A named gate and whether it is open.
type Gate = (String, Arc<AtomicBool>);

/// The readiness state `/readyz` reports: a set of named gates, all of which must be open.
/// Cheap to clone; clones share the gates.
#[derive(Debug, Clone, Default)]
pub struct Readiness {
    gates: Arc<Mutex<Vec<Gate>>>,
}

/// One condition of readiness, closed until [`open`](Self::open) is called.
#[derive(Debug, Clone)]
pub struct ReadyGate {
    open: Arc<AtomicBool>,
}

impl ReadyGate {
    /// Marks the condition as met.
    pub fn open(&self) {
        self.open.store(true, Ordering::Release);
    }

    /// Marks the condition as not met (again).
    pub fn close(&self) {
        self.open.store(false, Ordering::Release);
    }
}

impl Readiness {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a closed gate named `name` (shown by `/readyz` while closed).
    pub fn gate(&self, name: &str) -> ReadyGate {
        let open = Arc::new(AtomicBool::new(false));
        self.gates
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((name.to_string(), open.clone()));
        ReadyGate { open }
    }

    /// The names of the gates still closed; empty when ready.
    pub fn pending(&self) -> Vec<String> {
        self.gates
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(_, open)| !open.load(Ordering::Acquire))
            .map(|(name, _)| name.clone())
            .collect()
    }
}

/// What an admin listener serves.
#[derive(Debug, Clone)]
pub enum Endpoints {
    /// `/healthz` and `/readyz`.
    Probes(Readiness),
    /// `/metrics`.
    Metrics(Metrics),
}

impl Endpoints {
    fn label(&self) -> &'static str {
        match self {
            Self::Probes(_) => "probes",
            Self::Metrics(_) => "metrics",
        }
    }
}

fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// Answers one request; no IO.
pub fn respond<B>(endpoints: &Endpoints, request: &Request<B>) -> Response<Full<Bytes>> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "only GET is served\n");
        response
            .headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    match (endpoints, request.uri().path()) {
        (Endpoints::Probes(_), "/healthz" | "/livez") => text(StatusCode::OK, "ok\n"),
        (Endpoints::Probes(readiness), "/readyz") => {
            let pending = readiness.pending();
            if pending.is_empty() {
                text(StatusCode::OK, "ok\n")
            } else {
                text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("not ready: waiting for {}\n", pending.join(", ")),
                )
            }
        }
        (Endpoints::Metrics(metrics), "/metrics") => metrics_response(metrics.encode()),
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    }
}

/// One `/metrics` encoding at a time in the process: each holds its whole text (about 150 MB at
/// 100,000 objects), and the blocking pool would otherwise run one per scraper at once.
static ENCODING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(1);

/// Answers one request as [`respond`] does, but encodes `/metrics` on the blocking pool: at
/// 100,000 objects the text is about 150 MB and takes the better part of a second to write,
/// which on a runtime worker would hold up every scale loop due on it meanwhile. Scrapes that
/// arrive together wait for each other ([`ENCODING`]).
async fn answer<B>(endpoints: &Endpoints, request: &Request<B>) -> Response<Full<Bytes>> {
    let method = request.method();
    let (Endpoints::Metrics(metrics), "/metrics", true) = (
        endpoints,
        request.uri().path(),
        method == Method::GET || method == Method::HEAD,
    ) else {
        return respond(endpoints, request);
    };
    // The semaphore is never closed: acquiring fails only on a closed one.
    let Ok(_one_at_a_time) = ENCODING.acquire().await else {
        return text(StatusCode::SERVICE_UNAVAILABLE, "shutting down\n");
    };
    let metrics = metrics.clone();
    match tokio::task::spawn_blocking(move || metrics.encode()).await {
        Ok(text) => metrics_response(text),
        // Only a panic in the encoder (or a runtime shutting down) gets here.
        Err(_) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "metrics could not be encoded\n",
        ),
    }
}

fn metrics_response(text_body: String) -> Response<Full<Bytes>> {
    let mut response = text(StatusCode::OK, text_body);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(METRICS_CONTENT_TYPE),
    );
    response
}

/// Binds an admin listener, with an error naming the flag that chose the address.
///
/// # Errors
/// [`AdminError::Bind`] when the address cannot be bound (in use, not local, no permission).
pub async fn bind(addr: SocketAddr, flag: &'static str) -> Result<TcpListener, AdminError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| AdminError::Bind { addr, flag, source })
}

/// Admin server errors.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("cannot listen on {addr} (set by {flag}): {source}")]
    Bind {
        addr: SocketAddr,
        flag: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// Serves `endpoints` on `listener` until `shutdown` is cancelled; open connections are closed
/// then (probe and scrape requests are short).
pub async fn serve(listener: TcpListener, endpoints: Endpoints, shutdown: CancellationToken) {
    let label = endpoints.label();
    if let Ok(addr) = listener.local_addr() {
        info!(%addr, endpoints = label, "admin server listening");
    }
    let endpoints = Arc::new(endpoints);
    let mut connections = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) => {
                // Per-connection failures (the peer went away, too many open files) must not
                // stop the listener.
                debug!(error = %error, endpoints = label, "admin server: accept failed");
                continue;
            }
        };
        let endpoints = endpoints.clone();
        let service = hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
            let endpoints = endpoints.clone();
            async move { Ok::<_, Infallible>(answer(&endpoints, &request).await) }
        });
        connections.spawn(async move {
            let builder =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
            if let Err(error) = builder
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await
            {
                debug!(error = %error, "admin server: connection ended with an error");
            }
        });
        while connections.try_join_next().is_some() {}
    }
    connections.shutdown().await;
    info!(endpoints = label, "admin server stopped");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(path: &str) -> Request<()> {
        Request::get(path).body(()).expect("request")
    }

    fn body(response: Response<Full<Bytes>>) -> (StatusCode, String) {
        use http_body_util::BodyExt as _;
        let status = response.status();
        let bytes = futures::executor::block_on(response.into_body().collect())
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        (status, String::from_utf8_lossy(&bytes).into_owned())
    }

    #[test]
    fn healthz_answers_ok_whatever_the_readiness() {
        let readiness = Readiness::new();
        let _closed = readiness.gate("leader-election");
        let endpoints = Endpoints::Probes(readiness);
        assert_eq!(
            body(respond(&endpoints, &get("/healthz"))),
            (StatusCode::OK, "ok\n".into())
        );
    }

    #[test]
    fn readyz_names_the_closed_gates_until_all_are_open() {
        let readiness = Readiness::new();
        let election = readiness.gate("leader-election");
        let caches = readiness.gate("caches");
        let endpoints = Endpoints::Probes(readiness);
        assert_eq!(
            body(respond(&endpoints, &get("/readyz"))),
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "not ready: waiting for leader-election, caches\n".into()
            )
        );
        election.open();
        caches.open();
        assert_eq!(
            body(respond(&endpoints, &get("/readyz"))),
            (StatusCode::OK, "ok\n".into())
        );
        caches.close();
        assert_eq!(
            respond(&endpoints, &get("/readyz")).status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
    }

    #[test]
    fn metrics_are_served_as_openmetrics_text_only_on_the_metrics_port() {
        let endpoints = Endpoints::Metrics(Metrics::new());
        let response = respond(&endpoints, &get("/metrics"));
        assert_eq!(
            response
                .headers()
                .get(header::CONTENT_TYPE)
                .map(|v| v.as_bytes()),
            Some(METRICS_CONTENT_TYPE.as_bytes())
        );
        let (status, text) = body(response);
        assert_eq!(status, StatusCode::OK);
        assert!(text.contains("keda_build_info{"), "{text}");
        assert_eq!(
            respond(&endpoints, &get("/healthz")).status(),
            StatusCode::NOT_FOUND
        );
        let probes = Endpoints::Probes(Readiness::new());
        assert_eq!(
            respond(&probes, &get("/metrics")).status(),
            StatusCode::NOT_FOUND
        );
    }

    /// The server's path: `/metrics` is encoded on the blocking pool (a worker of a
    /// current-thread runtime is the only thread, so an encoding that needed it would still
    /// work; what is checked is the answer), everything else as `respond` answers it.
    #[tokio::test]
    async fn the_server_encodes_metrics_off_the_worker_and_answers_the_rest_alike() {
        let endpoints = Endpoints::Metrics(Metrics::new());
        let response = answer(&endpoints, &get("/metrics")).await;
        assert_eq!(
            response
                .headers()
                .get(header::CONTENT_TYPE)
                .map(|v| v.as_bytes()),
            Some(METRICS_CONTENT_TYPE.as_bytes())
        );
        let (status, text) = body(response);
        assert_eq!(status, StatusCode::OK);
        assert!(text.contains("keda_build_info{"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
        let post = Request::post("/metrics").body(()).expect("request");
        assert_eq!(
            answer(&endpoints, &post).await.status(),
            StatusCode::METHOD_NOT_ALLOWED
        );
        assert_eq!(
            answer(&endpoints, &get("/healthz")).await.status(),
            StatusCode::NOT_FOUND
        );
        let probes = Endpoints::Probes(Readiness::new());
        assert_eq!(
            answer(&probes, &get("/metrics")).await.status(),
            StatusCode::NOT_FOUND
        );
    }

    /// A scrape waits while another encoding holds the process's one place.
    #[tokio::test]
    async fn scrapes_encode_one_at_a_time() {
        let endpoints = Arc::new(Endpoints::Metrics(Metrics::new()));
        let held = ENCODING.acquire().await.expect("the semaphore is open");
        let scrape = {
            let endpoints = endpoints.clone();
            tokio::spawn(async move { answer(&endpoints, &get("/metrics")).await.status() })
        };
        // An empty registry encodes in microseconds: a scrape not done after 300 ms waits.
        // (Showing that something does not happen needs a bound of real time.)
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert!(!scrape.is_finished(), "a scrape encoded beside another");
        drop(held);
        let status = tokio::time::timeout(std::time::Duration::from_secs(10), scrape)
            .await
            .expect("the scrape answers once the other encoding is done")
            .expect("the scrape task");
        assert_eq!(status, StatusCode::OK);
    }

    #[test]
    fn writes_are_refused_with_405() {
        let endpoints = Endpoints::Probes(Readiness::new());
        let post = Request::post("/healthz").body(()).expect("request");
        assert_eq!(
            respond(&endpoints, &post).status(),
            StatusCode::METHOD_NOT_ALLOWED
        );
    }
}
