//! Serving: the proxy listener (HTTP/1.1 with keep-alive and upgrades, and h2c) and the admin
//! listener (`/healthz`, `/readyz`, `/metrics`), with a graceful drain.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::metrics::SharedMetrics;
use crate::proxy::Proxy;

/// Serves `proxy` on `listener` until `shutdown`, then stops accepting, lets open connections
/// finish their current requests (keep-alive connections are closed after them) for at most
/// `drain_timeout`, and returns.
pub async fn serve_proxy(
    listener: TcpListener,
    proxy: Arc<Proxy>,
    shutdown: CancellationToken,
    drain_timeout: Duration,
) {
    let graceful = GracefulShutdown::new();
    let builder = auto::Builder::new(TokioExecutor::new());
    loop {
        let (stream, remote) = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let proxy = Arc::clone(&proxy);
        let service = service_fn(move |request: Request<Incoming>| {
            let proxy = Arc::clone(&proxy);
            async move { Ok::<_, Infallible>(proxy.handle(request, remote).await) }
        });
        let connection = builder
            .serve_connection_with_upgrades(TokioIo::new(stream), service)
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            let _ = connection.await;
        });
    }
    drop(listener);
    if tokio::time::timeout(drain_timeout, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            ?drain_timeout,
            "connections still open after the drain timeout"
        );
    }
}

/// Whether the process is ready for traffic: set once the watches have synced, cleared when
/// draining.
#[derive(Clone, Debug, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    /// Sets readiness.
    pub fn set(&self, ready: bool) {
        self.0.store(ready, Ordering::Release);
    }

    /// Reads it.
    pub fn get(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response
}

/// The admin endpoints.
pub fn admin_response(
    path: &str,
    ready: &Readiness,
    metrics: &SharedMetrics,
) -> Response<Full<Bytes>> {
    match path {
        "/healthz" => text(StatusCode::OK, "ok"),
        "/readyz" if ready.get() => text(StatusCode::OK, "ready"),
        "/readyz" => text(StatusCode::SERVICE_UNAVAILABLE, "not ready"),
        "/metrics" => {
            let mut response = text(StatusCode::OK, metrics.encode());
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                http::HeaderValue::from_static(
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                ),
            );
            response
        }
        _ => text(StatusCode::NOT_FOUND, "not found"),
    }
}

/// Serves the admin endpoints on `listener` until `shutdown`.
pub async fn serve_admin(
    listener: TcpListener,
    ready: Readiness,
    metrics: SharedMetrics,
    shutdown: CancellationToken,
) {
    loop {
        let (stream, _) = tokio::select! {
            () = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let ready = ready.clone();
        let metrics = Arc::clone(&metrics);
        let service = service_fn(move |request: Request<Incoming>| {
            let response = admin_response(request.uri().path(), &ready, &metrics);
            async move { Ok::<_, Infallible>(response) }
        });
        tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Binds a loopback or configured address, naming it in the error.
///
/// # Errors
/// The address is in use or not permitted.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("binding {addr} failed: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;

    #[test]
    fn readyz_follows_readiness_and_healthz_is_always_ok() {
        let ready = Readiness::default();
        let metrics = Arc::new(Metrics::new());
        assert_eq!(admin_response("/healthz", &ready, &metrics).status(), 200);
        assert_eq!(admin_response("/readyz", &ready, &metrics).status(), 503);
        ready.set(true);
        assert_eq!(admin_response("/readyz", &ready, &metrics).status(), 200);
        assert_eq!(admin_response("/metrics", &ready, &metrics).status(), 200);
        assert_eq!(admin_response("/nope", &ready, &metrics).status(), 404);
    }
}
