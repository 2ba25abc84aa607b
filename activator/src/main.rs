//! The keda-rs activator binary: wires the library together.

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use keda_activator::limits::{self, Limits};
use keda_activator::metrics::Metrics;
use keda_activator::proxy::Proxy;
use keda_activator::report::{self, ReporterConfig};
use keda_activator::serve::ServePolicy;
use keda_activator::server::{self, Readiness};
use keda_activator::serving::{self, ServeConfig};
use keda_activator::supervise::{self, Health};
use keda_activator::targets::{TargetLimits, Targets};
use keda_activator::trust::TrustedProxies;
use keda_activator::watch::{self, EndpointSources, WatchConfig};
use keda_scalers::scalers::http::GoDuration;
use keda_scalers::scalers::http::claims::HostPolicy;
use tokio_util::sync::CancellationToken;

/// The variables `--help` lists besides those of the flags.
const ENV_HELP: &str = "\
Environment (besides each flag's variable above):
  KUBECONFIG   Kubeconfig path; else ~/.kube/config, else the pod's service account
  RUST_LOG     Log filter [default: info]

See docs/http.md.";

const BINARY: &str = "keda-activator";

#[derive(Debug, clap::Parser)]
#[command(
    name = "keda-activator",
    about = "keda-rs activator: HTTP scale-from-zero proxy",
    after_help = ENV_HELP
)]
struct Args {
    /// Where the proxy listens.
    #[arg(long, env = "KEDA_ACTIVATOR_LISTEN", default_value = "0.0.0.0:8080")]
    listen: SocketAddr,
    /// Where /healthz, /readyz and /metrics are served.
    #[arg(
        long,
        env = "KEDA_ACTIVATOR_ADMIN_LISTEN",
        default_value = "0.0.0.0:9090"
    )]
    admin_listen: SocketAddr,
    /// The operator's report endpoint.
    #[arg(
        long,
        env = "KEDA_ACTIVATOR_OPERATOR_URL",
        default_value = "https://keda-operator.keda.svc:9666/activator/v1/reports"
    )]
    operator_url: http::Uri,
    /// PEM CA bundle that signs the operator's serving certificate (`ca.crt` of the
    /// `keda-rs-activator-certs` Secret). Used for an `https` operator URL.
    #[arg(
        long,
        env = "KEDA_ACTIVATOR_OPERATOR_CA_FILE",
        default_value = "/certs/ca.crt"
    )]
    operator_ca_file: std::path::PathBuf,
    /// PEM client certificate presented to the operator (`tls.crt`), of the activators'
    /// identity (common name `keda-activator`).
    #[arg(
        long,
        env = "KEDA_ACTIVATOR_OPERATOR_CLIENT_CERT_FILE",
        default_value = "/certs/tls.crt"
    )]
    operator_client_cert_file: std::path::PathBuf,
    /// PEM private key of the client certificate (`tls.key`).
    #[arg(
        long,
        env = "KEDA_ACTIVATOR_OPERATOR_CLIENT_KEY_FILE",
        default_value = "/certs/tls.key"
    )]
    operator_client_key_file: std::path::PathBuf,
    /// How often the three files above are checked for changes; a changed file is used by the
    /// next connection to the operator.
    #[arg(
        long,
        env = "KEDA_ACTIVATOR_CERT_RELOAD_INTERVAL",
        default_value = keda_tls::DEFAULT_RELOAD_INTERVAL,
        value_parser = positive_duration
    )]
    cert_reload_interval: Duration,
    /// This replica's name in reports (the pod name).
    #[arg(long, env = "POD_NAME", default_value = "keda-activator")]
    replica: String,
    /// This replica's pod IP, for the capacity split across replicas.
    #[arg(long, env = "POD_IP")]
    pod_ip: Option<IpAddr>,
    /// The namespace of the activator's own Service.
    #[arg(long, env = "POD_NAMESPACE", default_value = "keda")]
    pod_namespace: String,
    /// The activator's own Service, whose endpoints are the activator replicas.
    #[arg(long, env = "KEDA_ACTIVATOR_SERVICE", default_value = "keda-activator")]
    service: String,
    /// Watch only this namespace (default: all namespaces).
    #[arg(long, env = "KEDA_ACTIVATOR_WATCH_NAMESPACE")]
    watch_namespace: Option<String>,
    /// After SIGTERM, how long to keep serving while /readyz fails so load balancers stop
    /// sending new connections (0 to 1h).
    #[arg(long, env = "KEDA_ACTIVATOR_DRAIN_DELAY", default_value = "5s", value_parser = duration)]
    drain_delay: Duration,
    /// Then, how long open requests may take to finish (0 to 1h).
    #[arg(long, env = "KEDA_ACTIVATOR_DRAIN_TIMEOUT", default_value = "20s", value_parser = duration)]
    drain_timeout: Duration,
    /// Threads serving the proxy, each with its own connections (0: one per CPU; at most 1024).
    #[arg(long, env = "KEDA_ACTIVATOR_PROXY_THREADS", default_value = "0", value_parser = proxy_threads)]
    proxy_threads: usize,
    /// How long a client may take to send a request head (1ms to 1h).
    #[arg(long, env = "KEDA_ACTIVATOR_HEADER_READ_TIMEOUT", default_value = "10s", value_parser = limit_duration)]
    header_read_timeout: Duration,
    /// How long a kept-alive client connection may stay without a request (1ms to 1h).
    #[arg(long, env = "KEDA_ACTIVATOR_IDLE_TIMEOUT", default_value = "75s", value_parser = limit_duration)]
    idle_timeout: Duration,
    /// How long a write to a client may make no progress (1ms to 1h).
    #[arg(long, env = "KEDA_ACTIVATOR_WRITE_TIMEOUT", default_value = "60s", value_parser = limit_duration)]
    write_timeout: Duration,
    /// How long a pod may send nothing once its response has begun, and an upgraded
    /// connection carry nothing either way; then both connections are closed (1ms to 1h).
    #[arg(long, env = "KEDA_ACTIVATOR_UPSTREAM_IDLE_TIMEOUT", default_value = "60s", value_parser = limit_duration)]
    upstream_idle_timeout: Duration,
    /// Client connections served at once; more wait until one closes (1 to 1000000).
    #[arg(long, env = "KEDA_ACTIVATOR_MAX_CONNECTIONS", default_value = "10000", value_parser = limits::parse_max_connections)]
    max_connections: usize,
    /// Memory the process's client connections may hold together (each counted at its
    /// worst: heads, buffers, HTTP/2 windows, held requests), in bytes or with a Ki, Mi or Gi
    /// suffix (4Ki to 16Gi); past it new connections wait, and one that needs more is
    /// answered 503. The default fits the shipped 500Mi limit.
    #[arg(long, env = "KEDA_ACTIVATOR_MEMORY_BUDGET", default_value = "384Mi", value_parser = limits::parse_byte_size)]
    memory_budget: usize,
    /// Memory the held requests of one target may keep, in bytes or with a Ki, Mi or Gi
    /// suffix (4Ki to 16Gi).
    #[arg(long, env = "KEDA_ACTIVATOR_HELD_REQUEST_MEMORY", default_value = "32Mi", value_parser = limits::parse_byte_size)]
    held_request_memory: usize,
    /// Peers whose X-Forwarded-For, -Host, -Proto and Forwarded headers are kept: a
    /// comma-separated list of networks (10.0.0.0/8) or addresses. From any other peer they
    /// are replaced (Forwarded dropped). Default: none. `0.0.0.0/0,::/0` trusts every peer
    /// (KEDA's HTTP add-on passes them through).
    #[arg(long, env = "KEDA_ACTIVATOR_TRUSTED_PROXIES", default_value = "", value_parser = TrustedProxies::parse)]
    trusted_proxies: TrustedProxies,
    /// Connections (requests in flight) this replica opens to one pod at most, also when a
    /// trigger's containerConcurrency is 0 or higher; more requests wait in the hold queue
    /// (0: no limit, KEDA's behaviour; at most 1000000).
    #[arg(long, env = "KEDA_ACTIVATOR_MAX_POD_CONNECTIONS", default_value = "100", value_parser = limits::parse_max_pod_connections)]
    max_pod_connections: u32,
    /// Take a target's endpoints from any EndpointSlice labelled with its Service's name
    /// (KEDA's HTTP add-on behaviour). Without it, only endpoints of slices the EndpointSlice
    /// controller manages whose targetRef is a Pod of the Service's namespace are used.
    #[arg(
        long,
        env = "KEDA_ACTIVATOR_ANY_ENDPOINT_SLICES",
        num_args = 0..=1,
        default_value_t = false,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    any_endpoint_slices: bool,
    /// YAML file mapping namespace -> host patterns its `http` triggers may claim (see
    /// docs/http.md, "Host policy"); give the operator the same file. Without it (and without
    /// --http-any-host) no host is routed.
    #[arg(long, env = "KEDA_HTTP_HOST_POLICY")]
    http_host_policy: Option<std::path::PathBuf>,
    /// No host policy: any namespace's `http` triggers may claim any host, the oldest claim
    /// winning (KEDA's HTTP add-on behaviour); give the operator the same flag.
    #[arg(
        long,
        env = "KEDA_HTTP_ANY_HOST",
        num_args = 0..=1,
        default_value_t = false,
        default_missing_value = "true",
        action = clap::ArgAction::Set,
        conflicts_with = "http_host_policy"
    )]
    http_any_host: bool,
    /// Manage the endpoints of Services that opt in (`activator.keda-rs.sh/serves`): proxy
    /// mode while a target lacks ready capacity, serve mode (clients straight to the pods)
    /// once it has enough. Needs write access to EndpointSlices (docs/http.md, "Proxy and
    /// serve modes").
    #[arg(
        long,
        env = "KEDA_ACTIVATOR_MANAGE_ENDPOINTS",
        num_args = 0..=1,
        default_value_t = false,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    manage_endpoints: bool,
    /// PEM CA bundle the certificates of pods spoken to over TLS (Service port `appProtocol`
    /// `kubernetes.io/h2` for HTTP/2, `https` or `kubernetes.io/wss` for HTTP/1.1) must chain
    /// to, for the name `<service>.<namespace>.svc`. Without it such pods get no request (502).
    #[arg(long, env = "KEDA_ACTIVATOR_POD_CA_FILE")]
    pod_ca_file: Option<std::path::PathBuf>,
    /// Ready pods a target needs, for --serve-settle, to enter serve mode (1 to 10000).
    #[arg(long, env = "KEDA_ACTIVATOR_SERVE_ENTER_READY", default_value = "2", value_parser = clap::value_parser!(u16).range(1..=10000))]
    serve_enter_ready: u16,
    /// Below this many ready pods a serving target goes back to proxy mode at once (1 to
    /// --serve-enter-ready).
    #[arg(long, env = "KEDA_ACTIVATOR_SERVE_LEAVE_READY", default_value = "1", value_parser = clap::value_parser!(u16).range(1..=10000))]
    serve_leave_ready: u16,
    /// How long the capacity must hold before serve mode (0 to 1h).
    #[arg(long, env = "KEDA_ACTIVATOR_SERVE_SETTLE", default_value = "10s", value_parser = duration)]
    serve_settle: Duration,
    /// How long a serving target may see no request before it goes back to proxy mode, which
    /// must come before a scale to zero (1s to 1h).
    #[arg(long, env = "KEDA_ACTIVATOR_SERVE_IDLE", default_value = "30s", value_parser = positive_duration)]
    serve_idle: Duration,
}

/// The client configurations for TLS pods from the CA bundle at `path`.
fn pod_tls(path: &std::path::Path) -> anyhow::Result<keda_activator::upstream::PodTrust> {
    let pem = std::fs::read(path)
        .with_context(|| format!("--pod-ca-file {}: cannot read the file", path.display()))?;
    Ok(keda_activator::upstream::PodTrust::from_pem(&pem)?)
}

/// The serve-mode policy of the flags, or which flag to fix.
fn serve_policy(args: &Args) -> anyhow::Result<ServePolicy> {
    ServePolicy {
        enter_ready: usize::from(args.serve_enter_ready),
        leave_ready: usize::from(args.serve_leave_ready),
        settle: args.serve_settle,
    }
    .validated()
    .map_err(|_| {
        anyhow::anyhow!(
            "--serve-leave-ready ({}) must not be more than --serve-enter-ready ({})",
            args.serve_leave_ready,
            args.serve_enter_ready
        )
    })
}

/// The `--http-host-policy` file; with none, every host (`--http-any-host`) or none.
fn host_policy(path: Option<&std::path::Path>, any_host: bool) -> anyhow::Result<HostPolicy> {
    let Some(path) = path else {
        return Ok(if any_host {
            HostPolicy::allow_all()
        } else {
            HostPolicy::deny_all()
        });
    };
    let text = std::fs::read_to_string(path).with_context(|| {
        format!(
            "--http-host-policy {}: cannot read the file",
            path.display()
        )
    })?;
    HostPolicy::from_yaml(&text).with_context(|| format!("--http-host-policy {}", path.display()))
}

/// The longest duration a flag accepts.
const MAX_DURATION: Duration = Duration::from_secs(3600);

/// A duration flag: 0 to [`MAX_DURATION`].
fn duration(raw: &str) -> Result<Duration, String> {
    let d = GoDuration::parse(raw)
        .map(|d| d.0)
        .ok_or_else(|| format!("\"{raw}\" is not a duration such as 500ms, 5s or 1m"))?;
    if d > MAX_DURATION {
        return Err(format!("\"{raw}\" is longer than 1h"));
    }
    Ok(d)
}

fn positive_duration(raw: &str) -> Result<Duration, String> {
    match duration(raw)? {
        Duration::ZERO => Err(format!("\"{raw}\" is not more than zero")),
        positive => Ok(positive),
    }
}

/// `--proxy-threads`: 0 (one per CPU) to 1024.
fn proxy_threads(raw: &str) -> Result<usize, String> {
    match raw.trim().parse::<usize>() {
        Ok(n) if n <= 1024 => Ok(n),
        _ => Err(format!("\"{raw}\" is not a whole number from 0 to 1024")),
    }
}

/// A client-side timeout ([`limits::parse_timeout`]).
fn limit_duration(raw: &str) -> Result<Duration, String> {
    limits::parse_timeout(duration(raw)?, raw)
}

// The watches, the report stream and the admin endpoints run here; the proxy has threads of
// its own (`server::spawn_proxy_threads`). A start-up failure (a bad flag, no cluster, an
// unusable file or address) is one line on standard error naming what to fix.
#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Args = keda_cli::parse_flags(BINARY);
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .json()
        .init();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => keda_cli::fail(BINARY, &*error),
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let host_policy = host_policy(args.http_host_policy.as_deref(), args.http_any_host)?;
    let serve_policy = serve_policy(&args)?;
    tracing::info!(http_hosts = %host_policy.summary(), "host policy");
    let client = keda_cli::infer_client(&keda_cli::ProcessLookup).await?;

    let metrics = Arc::new(Metrics::new());
    let (wake_tx, wake_rx) = tokio::sync::mpsc::channel(4096);
    let targets = Targets::with_limits(
        wake_tx,
        Arc::clone(&metrics),
        TargetLimits {
            held_memory: args.held_request_memory,
            max_pod_connections: args.max_pod_connections,
        },
    );
    let limits = Limits {
        header_read_timeout: args.header_read_timeout,
        idle_timeout: args.idle_timeout,
        write_timeout: args.write_timeout,
        max_connections: args.max_connections,
        upstream_idle_timeout: args.upstream_idle_timeout,
        memory_budget: args.memory_budget,
    };
    if let Some(path) = &args.pod_ca_file {
        targets.set_pod_tls(pod_tls(path)?);
    }
    let proxy = Arc::new(
        Proxy::with_limits(targets.routes(), Arc::clone(&metrics), limits)
            .trusting(args.trusted_proxies.clone()),
    );
    let ready = Readiness::default();
    let health = Health::new(supervise::UNHEALTHY_AFTER);
    let stop_watching = CancellationToken::new();
    let stop_proxy = CancellationToken::new();
    let stop_reporting = CancellationToken::new();

    let proxy_listener = server::bind(args.listen)
        .await
        .and_then(tokio::net::TcpListener::into_std)
        .context("--listen")?;
    let admin_listener = server::bind(args.admin_listen)
        .await
        .context("--admin-listen")?;
    // A watch task that panics or ends is started again with fresh caches (`supervise`).
    let watch_config = WatchConfig {
        namespace: args.watch_namespace.clone(),
        self_service: Some((args.pod_namespace.clone(), args.service.clone())),
        pod_ip: args.pod_ip,
        host_policy,
    };
    let endpoint_sources = if args.any_endpoint_slices {
        EndpointSources::Any
    } else {
        EndpointSources::ControllerManaged
    };
    let watch_task = tokio::spawn(supervise::supervise(
        "watch",
        Arc::clone(&health),
        Arc::clone(&metrics),
        stop_watching.clone(),
        {
            let (targets, ready, stop, client) = (
                Arc::clone(&targets),
                ready.clone(),
                stop_watching.clone(),
                client.clone(),
            );
            move || {
                watch::run_with_endpoints(
                    client.clone(),
                    watch_config.clone(),
                    endpoint_sources,
                    Arc::clone(&targets),
                    ready.clone(),
                    stop.clone(),
                )
            }
        },
    ));
    let serve_task = args.manage_endpoints.then(|| {
        let config = ServeConfig {
            namespace: args.watch_namespace.clone(),
            self_service: (args.pod_namespace.clone(), args.service.clone()),
            pod_ip: args.pod_ip,
            proxy_port: args.listen.port(),
            policy: serve_policy,
            idle: args.serve_idle,
            scrape_timeout: Duration::from_millis(500),
        };
        tokio::spawn(supervise::supervise(
            "serve",
            Arc::clone(&health),
            Arc::clone(&metrics),
            stop_watching.clone(),
            {
                let (targets, stop, client, ready) = (
                    Arc::clone(&targets),
                    stop_watching.clone(),
                    client.clone(),
                    ready.clone(),
                );
                move || {
                    serving::run(
                        client.clone(),
                        config.clone(),
                        Arc::clone(&targets),
                        ready.clone(),
                        stop.clone(),
                    )
                }
            },
        ))
    });
    let report_tls = if args.operator_url.scheme_str() == Some("https") {
        let files = report::TlsFiles {
            operator_ca: args.operator_ca_file.clone(),
            cert: args.operator_client_cert_file.clone(),
            key: args.operator_client_key_file.clone(),
        };
        let config = if files.none_exist() {
            // No files: the activators' identity from its Secret (the operator creates it),
            // followed as it changes.
            let material = keda_tls::ClientMaterial::from_secret(
                client.clone(),
                &args.pod_namespace,
                keda_tls::Identity::Activator,
                args.cert_reload_interval,
                stop_reporting.clone(),
            )
            .await
            .context("the operator client's certificate (or give the files: --operator-ca-file, --operator-client-cert-file, --operator-client-key-file)")?;
            report::client_tls(material.ca, material.cert)?
        } else {
            report::client_tls_from_files(&files, args.cert_reload_interval, &stop_reporting)?
        };
        Some(Arc::new(config))
    } else {
        None
    };
    let report_config = ReporterConfig {
        url: args.operator_url.clone(),
        tls: report_tls,
        replica: args.replica.clone(),
        idle_after: Duration::from_secs(3600),
    };
    let wake_rx = report::wake_receiver(wake_rx);
    // The report stream too is started again if it panics (its connection errors are retried
    // inside it); the restarted task takes over the wake-up channel.
    let report_task = tokio::spawn(supervise::supervise(
        "report",
        Arc::clone(&health),
        Arc::clone(&metrics),
        stop_reporting.clone(),
        {
            let (targets, stop) = (Arc::clone(&targets), stop_reporting.clone());
            move || {
                let reporting = report::run(
                    report_config.clone(),
                    Arc::clone(&targets),
                    Arc::clone(&wake_rx),
                    stop.clone(),
                );
                async move {
                    reporting.await;
                    Ok::<(), std::convert::Infallible>(())
                }
            }
        },
    ));
    let admin_task = tokio::spawn(server::serve_admin(
        admin_listener,
        ready.clone(),
        Arc::clone(&health),
        Arc::clone(&metrics),
        server::AdminLimits {
            header_read_timeout: args.header_read_timeout,
            ..server::AdminLimits::default()
        },
        stop_reporting.clone(),
    ));
    let threads = match args.proxy_threads {
        0 => std::thread::available_parallelism().map_or(1, usize::from),
        n => n,
    };
    let proxy_threads = server::spawn_proxy_threads(
        proxy_listener,
        threads,
        proxy,
        stop_proxy.clone(),
        args.drain_timeout,
    )
    .context("starting the proxy threads")?;
    tracing::info!(listen = %args.listen, admin = %args.admin_listen, threads, "activator started");

    keda_cli::shutdown_signal().await;
    // Drain: fail readiness so no new traffic is sent here, keep serving for the delay, then
    // stop accepting and let open requests finish; keep reporting until the end so the
    // operator sees the requests still running, then say bye.
    tracing::info!(delay = ?args.drain_delay, "draining");
    ready.set(false);
    stop_watching.cancel();
    tokio::time::sleep(args.drain_delay).await;
    stop_proxy.cancel();
    let _ = tokio::task::spawn_blocking(move || {
        for thread in proxy_threads {
            let _ = thread.join();
        }
    })
    .await;
    stop_reporting.cancel();
    let _ = tokio::join!(watch_task, report_task, admin_task);
    if let Some(serve_task) = serve_task {
        let _ = serve_task.await;
    }
    tracing::info!("stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duration_flags_are_bounded_and_never_panic() {
        assert_eq!(duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(duration("1h"), Ok(MAX_DURATION));
        // `1e20` seconds overflowed `Duration::from_secs_f64` (a panic) before.
        for raw in ["1e20", "61m", "99999999999999999999h"] {
            assert_eq!(duration(raw), Err(format!("\"{raw}\" is longer than 1h")));
        }
        assert!(positive_duration("0s").is_err());
        assert_eq!(proxy_threads("1024"), Ok(1024));
        assert!(proxy_threads("1025").is_err());
    }

    #[test]
    fn without_a_host_policy_no_host_is_routed_unless_any_host_is_asked_for() {
        use clap::Parser;
        let policy = |args: &[&str]| -> anyhow::Result<HostPolicy> {
            let args = Args::try_parse_from(
                std::iter::once("keda-activator").chain(args.iter().copied()),
            )?;
            host_policy(args.http_host_policy.as_deref(), args.http_any_host)
        };
        assert_eq!(policy(&[]).expect("no flag"), HostPolicy::deny_all());
        assert_eq!(
            policy(&["--http-any-host"]).expect("any host"),
            HostPolicy::allow_all()
        );
        assert_eq!(
            policy(&["--http-any-host=false"]).expect("no"),
            HostPolicy::deny_all()
        );
        let both = policy(&["--http-any-host", "--http-host-policy=/p.yaml"])
            .expect_err("both")
            .to_string();
        assert!(
            both.contains("--http-any-host") && both.contains("--http-host-policy"),
            "{both}"
        );
    }
}
