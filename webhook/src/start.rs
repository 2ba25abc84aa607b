//! Wiring: builds the webhook from its flags and runs it.

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::sync::Arc;

use actix_web::{App, HttpServer, web};
use keda_tls::{CertStore, TlsError};
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::app::{AppState, configure, configure_metrics_port};
use crate::cache::Caches;
use crate::certs::{CertError, SECRET_NAME, SecretCertificate};
use crate::config::Args;
use crate::metrics::Metrics;

/// Why the webhook cannot start. Each message names the flag or permission to fix.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A flag's value is unusable.
    #[error("{0}")]
    Flag(String),
    /// `KEDA_SERVICE_MIN_TLS_VERSION` or `KEDA_SERVICE_TLS_CIPHER_LIST` names what rustls cannot do.
    #[error(transparent)]
    TlsPolicy(#[from] keda_tls::PolicyError),
    /// The certificate files are unusable.
    #[error("--tls-cert-file / --tls-private-key-file: {0}")]
    Files(#[source] TlsError),
    /// The certificate Secret cannot be used.
    #[error(
        "{0} (grant the service account get, create and update on Secret {SECRET_NAME} and get, update on the ValidatingWebhookConfiguration, or give --tls-cert-file and --tls-private-key-file)"
    )]
    Secret(#[source] CertError),
    /// No cluster was found.
    #[error("{0} (or pass --kubeconfig)")]
    Cluster(#[from] keda_cli::ClusterError),
    /// The kubeconfig is unusable.
    #[error("--kubeconfig: cannot build a Kubernetes client: {0}")]
    Kubeconfig(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A port cannot be bound.
    #[error("{flag}: cannot listen on {address}: {source}")]
    Bind {
        /// The flag.
        flag: &'static str,
        /// The address.
        address: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A server stopped with an error.
    #[error("serving failed: {0}")]
    Serve(#[source] std::io::Error),
}

/// The rustls configuration of the HTTPS port, serving whatever `store` holds.
pub fn server_tls(store: Arc<CertStore>) -> rustls::ServerConfig {
    server_tls_with(store, &keda_tls::TlsPolicy::default())
}

/// KEDA's `KEDA_SERVICE_MIN_TLS_VERSION` and `KEDA_SERVICE_TLS_CIPHER_LIST`, falling back to
/// `KEDA_HTTP_MIN_TLS_VERSION` and `KEDA_HTTP_TLS_CIPHER_LIST` when unset, as KEDA's
/// `pkg/util/tls_config.go` does.
///
/// # Errors
/// A version or cipher suite rustls cannot do, naming the variable.
pub fn service_tls_policy(
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<keda_tls::TlsPolicy, keda_tls::PolicyError> {
    keda_tls::policy::service_policy_from(var)
}

/// [`server_tls`] with the versions and suites `policy` allows.
pub fn server_tls_with(
    store: Arc<CertStore>,
    policy: &keda_tls::TlsPolicy,
) -> rustls::ServerConfig {
    let mut config = rustls::ServerConfig::builder_with_provider(policy.provider())
        .with_protocol_versions(policy.versions())
        .unwrap_or_else(|_| {
            // The ring provider supports the default versions; this branch is unreachable.
            rustls::ServerConfig::builder_with_protocol_versions(rustls::DEFAULT_VERSIONS)
        })
        .with_no_client_auth()
        .with_cert_resolver(store);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    config
}

/// Builds the HTTPS server on `listener` (not started until awaited or spawned).
///
/// # Errors
/// actix cannot use the listener.
pub fn webhook_server(
    state: AppState,
    listener: TcpListener,
    tls: rustls::ServerConfig,
    workers: usize,
) -> std::io::Result<actix_web::dev::Server> {
    let data = web::Data::new(state);
    Ok(
        HttpServer::new(move || App::new().app_data(data.clone()).configure(configure))
            // Answers are small: without this, Nagle's algorithm and delayed ACKs hold the last
            // frame of an answer for tens of milliseconds.
            .tcp_nodelay(true)
            .workers(workers.max(1))
            .disable_signals()
            .listen_rustls_0_23(listener, tls)?
            .run(),
    )
}

/// Builds the plain metrics server on `listener`.
///
/// # Errors
/// actix cannot use the listener.
pub fn metrics_server(
    state: AppState,
    listener: TcpListener,
) -> std::io::Result<actix_web::dev::Server> {
    let data = web::Data::new(state);
    Ok(HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .configure(configure_metrics_port)
    })
    .workers(1)
    .disable_signals()
    .listen(listener)?
    .run())
}

/// Builds the plain-HTTP probe server (`/healthz`, `/readyz`) on `listener`.
///
/// # Errors
/// actix cannot use the listener.
pub fn probe_server(
    state: AppState,
    listener: TcpListener,
) -> std::io::Result<actix_web::dev::Server> {
    let data = web::Data::new(state);
    Ok(HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .configure(crate::app::configure_probes)
    })
    .workers(1)
    .disable_signals()
    .listen(listener)?
    .run())
}

async fn kube_client(path: Option<&Path>) -> Result<kube::Client, StartError> {
    let Some(path) = path else {
        return Ok(keda_cli::infer_client(&keda_cli::ProcessLookup).await?);
    };
    let wrap = |e: Box<dyn std::error::Error + Send + Sync>| StartError::Kubeconfig(e);
    let kubeconfig = Kubeconfig::read_from(path).map_err(|e| wrap(Box::new(e)))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| wrap(Box::new(e)))?;
    keda_cli::build_client(config).map_err(|e| wrap(Box::new(e)))
}

fn bind(flag: &'static str, address: SocketAddr) -> Result<TcpListener, StartError> {
    TcpListener::bind(address).map_err(|source| StartError::Bind {
        flag,
        address,
        source,
    })
}

/// Runs the webhook described by `args` until `cancel` or until a server fails.
///
/// # Errors
/// [`StartError`] naming the flag or permission to fix, or a server failure.
pub async fn run(args: Args, cancel: CancellationToken) -> Result<(), StartError> {
    let client = kube_client(args.kubeconfig.as_deref()).await?;
    let policy = service_tls_policy(&|name| std::env::var(name).ok())?;
    let in_cert_dir = args.cert_dir.as_ref().and_then(|dir| {
        let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
        (cert.is_file() && key.is_file()).then_some((cert, key))
    });
    let files = match (&args.tls_cert_file, &args.tls_private_key_file) {
        (Some(cert), Some(key)) => Some((cert.clone(), key.clone())),
        _ => in_cert_dir,
    };
    let mut webhook_address = args.webhook_bind_address;
    if let Some(port) = args.webhook_port {
        webhook_address.set_port(port);
    }
    let store = match &files {
        Some((cert, key)) => {
            let store = Arc::new(CertStore::from_files(cert, key).map_err(StartError::Files)?);
            store.reload_on_change(
                cert.clone(),
                key.clone(),
                args.cert_reload_interval,
                cancel.clone(),
            );
            store
        }
        _ => {
            let secret = SecretCertificate::start(
                client.clone(),
                &args.certs_namespace,
                &args.webhook_configuration_name,
            )
            .await
            .map_err(StartError::Secret)?;
            let store = Arc::clone(&secret.store);
            secret.follow(args.cert_reload_interval, cancel.clone());
            store
        }
    };

    let caches = Arc::new(Caches::new());
    caches.follow(&client, &cancel);
    let state = AppState {
        caches,
        metrics: Arc::new(Metrics::new()),
        identity: args.identity().map_err(StartError::Flag)?,
        events: Some(kube::runtime::events::Recorder::new(
            client.clone(),
            kube::runtime::events::Reporter::from("keda-admission"),
        )),
    };
    let workers = args
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    let webhook = webhook_server(
        state.clone(),
        bind("--webhook-bind-address", webhook_address)?,
        server_tls_with(store, &policy),
        workers,
    )
    .map_err(StartError::Serve)?;
    let probes = match args.health_probe_bind_address.0 {
        Some(address) => Some(
            probe_server(state.clone(), bind("--health-probe-bind-address", address)?)
                .map_err(StartError::Serve)?,
        ),
        None => None,
    };
    let metrics = metrics_server(
        state,
        bind("--metrics-bind-address", args.metrics_bind_address)?,
    )
    .map_err(StartError::Serve)?;
    info!(webhook = %webhook_address, metrics = %args.metrics_bind_address, probes = ?args.health_probe_bind_address.0, "serving");
    let (webhook_handle, metrics_handle) = (webhook.handle(), metrics.handle());
    let probe_handle = probes.as_ref().map(actix_web::dev::Server::handle);
    let stop = cancel.clone();
    tokio::spawn(async move {
        stop.cancelled().await;
        tokio::join!(webhook_handle.stop(true), metrics_handle.stop(true));
        if let Some(handle) = probe_handle {
            handle.stop(true).await;
        }
    });
    let probes = async move {
        match probes {
            Some(server) => server.await,
            None => Ok(()),
        }
    };
    let (a, b, c) = tokio::join!(webhook, metrics, probes);
    cancel.cancel();
    a.and(b).and(c).map_err(StartError::Serve)
}
