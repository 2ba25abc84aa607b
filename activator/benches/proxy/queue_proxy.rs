//! Knative Serving's queue-proxy (`cmd/queue` of `knative-v1.17.2`, built from its source with
//! its vendored modules by `scripts/build-queue-proxy.sh`), started as a Knative pod starts it.
//!
//! In a pod, queue-proxy and the user container share one network namespace: queue-proxy
//! listens on `QUEUE_SERVING_PORT` (8012) on every interface, on its fixed admin (8022),
//! autoscaler metrics (9090) and request metrics (9091) ports, and proxies to
//! `127.0.0.1:USER_PORT`. Those fixed ports cannot be moved by configuration (they are
//! constants in `pkg/networking`), and 9090 is Prometheus's on these machines, so the bench
//! gives it the pod's setting: a network namespace of its own with only loopback up, shared
//! with a backend of its own (the same backend program as the other targets). Nothing it opens
//! is reachable from outside that namespace; wrk runs inside it (through `nsenter`), on its
//! loopback, as it runs on the host's loopback for the other targets.
//!
//! The environment is what the revision reconciler gives the container
//! (`pkg/reconciler/revision/resources/queue.go`) with Knative's default configuration:
//! `containerConcurrency` 100 (the activator's, so the breaker is on, queue depth 1,000),
//! revision timeout 300 s, request metrics to Prometheus every 5 s (the default
//! `metrics.request-metrics-backend-destination`, so the per-request metrics handlers run),
//! request log off, tracing off, logging at `info` with the default zap JSON config, the
//! user container's default TCP readiness probe. `GOMAXPROCS` is `--workers`: the same core
//! budget as nginx's worker processes and the activator's proxy threads (queue-proxy's
//! automaxprocs keeps a `GOMAXPROCS` that is set).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::procs::{self, Proc};

/// queue-proxy's serving port in the pod (Knative's `requestQueueHTTPPort`).
const SERVING_PORT: u16 = 8012;
/// Its TLS port (unused: no certificate is mounted).
const SERVING_TLS_PORT: u16 = 8112;
/// Knative's default `zap-logger-config` (`config/core/configmaps/logging.yaml`).
const LOGGING_CONFIG: &str = r#"{"level":"info","development":false,"outputPaths":["stdout"],"errorOutputPaths":["stderr"],"encoding":"json","encoderConfig":{"timeKey":"timestamp","levelKey":"severity","nameKey":"logger","callerKey":"caller","messageKey":"message","stacktraceKey":"stacktrace","lineEnding":"","levelEncoder":"","timeEncoder":"iso8601","durationEncoder":"","callerEncoder":""}}"#;

/// Where `scripts/build-queue-proxy.sh` puts the binary: `<target dir>/queue-proxy/queue`, the
/// target directory being the one this bench binary was built in
/// (`<target dir>/<profile>/deps/proxy-<hash>`).
pub fn default_path() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.parent()?.parent()?.join("queue-proxy/queue"))
}

/// A running queue-proxy in its pod.
pub struct QueueProxy {
    /// Stopped first (dropped before the backend that holds the namespace).
    pub proc: Proc,
    pub backend: Proc,
    /// Its serving address, inside `netns`.
    pub addr: SocketAddr,
    /// The pod's network namespace.
    pub netns: PathBuf,
}

/// Starts the pod's backend, then queue-proxy in front of it, and waits until a request
/// through it is answered by the backend.
pub fn spawn(
    binary: &Path,
    workers: usize,
    container_concurrency: u32,
    host: &str,
    log: &Path,
) -> anyhow::Result<QueueProxy> {
    let (backend, backend_addr, netns) = procs::spawn_pod_backend()?;
    let user_port = backend_addr.port().to_string();
    let probe = format!(
        r#"{{"tcpSocket":{{"port":{user_port},"host":"127.0.0.1"}},"successThreshold":1}}"#
    );
    let out = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let child = procs::command_in(Some(&netns), binary)
        .env_clear()
        .env("GOMAXPROCS", workers.to_string())
        .envs([
            ("SERVING_NAMESPACE", "bench"),
            ("SERVING_SERVICE", "web"),
            ("SERVING_CONFIGURATION", "web"),
            ("SERVING_REVISION", "web-00001"),
            ("SERVING_POD", "web-00001-deployment-0"),
            ("SERVING_POD_IP", "127.0.0.1"),
            ("HOST_IP", "127.0.0.1"),
            ("SYSTEM_NAMESPACE", "knative-serving"),
            ("METRICS_DOMAIN", "knative.dev/internal/serving"),
            ("REVISION_TIMEOUT_SECONDS", "300"),
            ("REVISION_RESPONSE_START_TIMEOUT_SECONDS", "0"),
            ("REVISION_IDLE_TIMEOUT_SECONDS", "0"),
            ("SERVING_LOGGING_CONFIG", LOGGING_CONFIG),
            ("SERVING_LOGGING_LEVEL", "info"),
            ("SERVING_REQUEST_LOG_TEMPLATE", ""),
            ("SERVING_ENABLE_REQUEST_LOG", "false"),
            ("SERVING_ENABLE_PROBE_REQUEST_LOG", "false"),
            ("SERVING_REQUEST_METRICS_BACKEND", "prometheus"),
            ("SERVING_REQUEST_METRICS_REPORTING_PERIOD_SECONDS", "5"),
            ("METRICS_COLLECTOR_ADDRESS", ""),
            ("TRACING_CONFIG_BACKEND", "none"),
            ("TRACING_CONFIG_ZIPKIN_ENDPOINT", ""),
            ("TRACING_CONFIG_DEBUG", "false"),
            ("TRACING_CONFIG_SAMPLE_RATE", "0.1"),
            ("ENABLE_PROFILING", "false"),
            ("ENABLE_HTTP2_AUTO_DETECTION", "false"),
            ("ENABLE_HTTP_FULL_DUPLEX", "false"),
            ("ENABLE_MULTI_CONTAINER_PROBES", "false"),
            ("ROOT_CA", ""),
        ])
        .env("QUEUE_SERVING_PORT", SERVING_PORT.to_string())
        .env("QUEUE_SERVING_TLS_PORT", SERVING_TLS_PORT.to_string())
        .env("USER_PORT", &user_port)
        .env("CONTAINER_CONCURRENCY", container_concurrency.to_string())
        .env("SERVING_READINESS_PROBE", probe)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    // On SIGTERM queue-proxy drains for 30 s (as in a pod); the bench does not wait for that.
    let mut proc = Proc::new("queue-proxy", child, Duration::from_millis(200));
    let addr = SocketAddr::from(([127, 0, 0, 1], SERVING_PORT));
    let started = Instant::now();
    loop {
        proc.check_running()
            .with_context(|| format!("see {}", log.display()))?;
        match procs::http_get_in(Some(&netns), addr, host, "/") {
            Ok((200, body)) if body == procs::BODY => break,
            other if started.elapsed() > Duration::from_secs(15) => bail!(
                "queue-proxy does not forward to its backend after 15 s ({other:?}); see {}",
                log.display()
            ),
            _ => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    Ok(QueueProxy {
        proc,
        backend,
        addr,
        netns,
    })
}
