//! Wiring: builds the metrics-apiserver from its flags and runs it.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use actix_web::{App, HttpServer, web};
use keda_tls::{CertStore, ClientMaterial, Identity, SecretApiError, ServerCaVerifier, TlsError};
use kube::config::{KubeConfigOptions, Kubeconfig};
use rustls_pki_types::ServerName;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::app::{AppState, capture_peer_certificates, configure, configure_metrics_port, record};
use crate::authn::{Authenticator, RequestHeaderConfig, RequestHeaderConfigError};
use crate::authz::{CacheTtl, CachedAuthorizer, SubjectAccessReviewer};
use crate::config::Args;
use crate::metrics::Metrics;
use crate::operator_client::{OperatorClient, OperatorClientConfig, client_tls_config};
use crate::tls::{self, SelfSignedError};

/// Why the metrics-apiserver cannot start. Each message names the flag to fix.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// TLS material is unusable.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// `--tls-min-version` or `--tls-cipher-suites` names what rustls cannot do.
    #[error(transparent)]
    TlsPolicy(#[from] keda_tls::PolicyError),
    /// A certificate, key or CA file named by `flag` is unusable.
    #[error("{flag}: {source}")]
    File {
        /// The flag(s) naming the file.
        flag: &'static str,
        /// What is wrong with it.
        #[source]
        source: TlsError,
    },
    /// No cluster was found where one is needed (authorization, and authentication without
    /// `--requestheader-client-ca-file`).
    #[error("{0} (or pass --kubeconfig)")]
    Cluster(#[from] keda_cli::ClusterError),
    /// The certificate Secret cannot be read.
    #[error(
        "{0} (or give the files: --metrics-service-ca-file, --metrics-service-client-cert-file, --metrics-service-client-key-file)"
    )]
    Secret(#[source] Box<SecretApiError>),
    /// No serving certificate was given and none could be generated.
    #[error(transparent)]
    SelfSigned(#[from] SelfSignedError),
    /// The request-header settings are unusable.
    #[error("--requestheader-client-ca-file: {0}")]
    RequestHeader(#[from] RequestHeaderConfigError),
    /// A kubeconfig is unusable.
    #[error("{flag}: cannot build a Kubernetes client: {source}")]
    Kubeconfig {
        /// The flag (or `in-cluster/$KUBECONFIG`).
        flag: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The operator's address or server name is not usable.
    #[error(
        "--metrics-service-server-name / --metrics-service-address: {0:?} is not a valid TLS server name"
    )]
    ServerName(String),
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
    /// The rustls configuration of the secure port cannot be built.
    #[error("the secure port's TLS configuration is invalid: {0}")]
    Rustls(#[from] rustls::Error),
    /// The rustls configuration of the operator client cannot be built.
    #[error("the TLS configuration of the operator client is invalid: {0}")]
    OperatorTls(#[source] rustls::Error),
    /// A server stopped with an error.
    #[error("serving failed: {0}")]
    Serve(#[source] std::io::Error),
}

/// Builds the secure-port server on `listener` (not started until awaited or spawned).
///
/// # Errors
/// actix cannot use the listener.
pub fn secure_server(
    state: AppState,
    listener: TcpListener,
    tls: rustls::ServerConfig,
    workers: usize,
) -> std::io::Result<actix_web::dev::Server> {
    let data = web::Data::new(state);
    Ok(HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .wrap_fn(record)
            .configure(configure)
    })
    .on_connect(capture_peer_certificates)
    // Answers are small and written in a few frames: without this, Nagle's algorithm and
    // delayed ACKs hold the last frame of an answer for tens of milliseconds.
    .tcp_nodelay(true)
    .workers(workers.max(1))
    .disable_signals()
    .listen_rustls_0_23(listener, tls)?
    .run())
}

/// Builds the plain metrics-port server on `listener`.
///
/// # Errors
/// actix cannot use the listener.
pub fn metrics_server(
    metrics: Arc<Metrics>,
    listener: TcpListener,
) -> std::io::Result<actix_web::dev::Server> {
    let data = web::Data::from(metrics);
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

async fn kube_client(
    specific: Option<&Path>,
    flag: &str,
    fallback: Option<&Path>,
) -> Result<kube::Client, StartError> {
    let (path, flag) = match (specific, fallback) {
        (Some(p), _) => (Some(p), flag.to_string()),
        (None, Some(p)) => (Some(p), "--kubeconfig".to_string()),
        (None, None) => (None, "in-cluster configuration or $KUBECONFIG".to_string()),
    };
    let wrap = |source: Box<dyn std::error::Error + Send + Sync>| StartError::Kubeconfig {
        flag: flag.clone(),
        source,
    };
    let config = match path {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path).map_err(|e| wrap(Box::new(e)))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|e| wrap(Box::new(e)))?
        }
        None => return Ok(keda_cli::infer_client(&keda_cli::ProcessLookup).await?),
    };
    keda_cli::build_client(config).map_err(|e| wrap(Box::new(e)))
}

fn bind(flag: &'static str, address: SocketAddr) -> Result<TcpListener, StartError> {
    TcpListener::bind(address).map_err(|source| StartError::Bind {
        flag,
        address,
        source,
    })
}

fn request_header_from_flags(args: &Args, ca: &Path) -> Result<RequestHeaderConfig, StartError> {
    let pem = keda_tls::read(ca).map_err(|source| StartError::File {
        flag: "--requestheader-client-ca-file",
        source,
    })?;
    Ok(RequestHeaderConfig::new(
        &pem,
        &ca.display().to_string(),
        args.requestheader_allowed_names.clone(),
        args.requestheader_username_headers.clone(),
        args.requestheader_group_headers.clone(),
        args.requestheader_extra_headers_prefix.clone(),
    )?)
}

/// Runs the metrics-apiserver described by `args` until `cancel` or until a server fails.
///
/// # Errors
/// [`StartError`] naming the flag whose value is unusable, or a server failure.
pub async fn run(args: Args, cancel: CancellationToken) -> Result<(), StartError> {
    let policy = keda_tls::TlsPolicy::parse(
        "--tls-min-version",
        args.tls_min_version.as_deref(),
        "--tls-cipher-suites",
        args.tls_cipher_suites.as_deref(),
    )?;
    // Serving certificate: files (reloaded), those Kubernetes' --cert-dir names, or
    // self-signed.
    let in_cert_dir = args.cert_dir.as_ref().and_then(|dir| {
        let (cert, key) = (dir.join("apiserver.crt"), dir.join("apiserver.key"));
        (cert.is_file() && key.is_file()).then_some((cert, key))
    });
    let files = match (&args.tls_cert_file, &args.tls_private_key_file) {
        (Some(cert), Some(key)) => Some((cert.clone(), key.clone())),
        _ => in_cert_dir,
    };
    let serving = match &files {
        Some((cert, key)) => {
            let store =
                Arc::new(
                    CertStore::from_files(cert, key).map_err(|source| StartError::File {
                        flag: "--tls-cert-file / --tls-private-key-file",
                        source,
                    })?,
                );
            store.reload_on_change(
                cert.clone(),
                key.clone(),
                args.cert_reload_interval,
                cancel.clone(),
            );
            store
        }
        _ => {
            let (cert, key) = tls::self_signed(&args.self_signed_cert_hosts)?;
            info!(hosts = ?args.self_signed_cert_hosts, "serving with a generated self-signed certificate");
            Arc::new(CertStore::new(keda_tls::certified_key(
                cert.as_bytes(),
                key.as_bytes(),
                "self-signed certificate",
            )?))
        }
    };

    // Authentication: request-header settings from flags (CA file reloaded) or the ConfigMap.
    let authenticator = Arc::new(Authenticator::new());
    match &args.requestheader_client_ca_file {
        Some(ca) => {
            authenticator.set(request_header_from_flags(&args, ca)?);
            let (authn, flags, path) = (Arc::clone(&authenticator), args.clone(), ca.clone());
            keda_tls::watch_files(
                vec![ca.clone()],
                args.cert_reload_interval,
                cancel.clone(),
                move || match request_header_from_flags(&flags, &path) {
                    Ok(config) => {
                        authn.set(config);
                        info!(ca = %path.display(), "request-header CA reloaded");
                    }
                    Err(error) => {
                        warn!(%error, "request-header CA changed but cannot be loaded; keeping the previous one")
                    }
                },
            );
        }
        None => {
            let client = kube_client(
                args.authentication_kubeconfig.as_deref(),
                "--authentication-kubeconfig",
                args.kubeconfig.as_deref(),
            )
            .await?;
            tokio::spawn(crate::authn::follow_authentication_configmap(
                client,
                Arc::clone(&authenticator),
                cancel.clone(),
            ));
        }
    }

    // Authorization.
    let authz_client = kube_client(
        args.authorization_kubeconfig.as_deref(),
        "--authorization-kubeconfig",
        args.kubeconfig.as_deref(),
    )
    .await?;
    let authorizer = Arc::new(
        CachedAuthorizer::new(
            Arc::new(SubjectAccessReviewer::new(authz_client)),
            CacheTtl {
                allowed: args.authorization_webhook_cache_authorized_ttl,
                denied: args.authorization_webhook_cache_unauthorized_ttl,
            },
        )
        .namespace_wide(args.authorization_namespace_wide),
    );

    // The operator: our identity from the files, or, when none of them exists, from our
    // Secret (which the operator creates), followed as it changes.
    let files = [
        &args.metrics_service_ca_file,
        &args.metrics_service_client_cert_file,
        &args.metrics_service_client_key_file,
    ];
    let (operator_ca, client_cert) = if files.iter().all(|path| !path.exists()) {
        let client = kube_client(args.kubeconfig.as_deref(), "--kubeconfig", None).await?;
        let material = ClientMaterial::from_secret(
            client,
            &args.certs_namespace,
            Identity::MetricsApiserver,
            args.cert_reload_interval,
            cancel.clone(),
        )
        .await
        .map_err(|e| StartError::Secret(Box::new(e)))?;
        (material.ca, material.cert)
    } else {
        let client_cert = Arc::new(
            CertStore::from_files(
                &args.metrics_service_client_cert_file,
                &args.metrics_service_client_key_file,
            )
            .map_err(|source| StartError::File {
                flag: "--metrics-service-client-cert-file / --metrics-service-client-key-file",
                source,
            })?,
        );
        client_cert.reload_on_change(
            args.metrics_service_client_cert_file.clone(),
            args.metrics_service_client_key_file.clone(),
            args.cert_reload_interval,
            cancel.clone(),
        );
        let ca_path: PathBuf = args.metrics_service_ca_file.clone();
        let operator_ca =
            Arc::new(
                ServerCaVerifier::from_file(&ca_path).map_err(|source| StartError::File {
                    flag: "--metrics-service-ca-file",
                    source,
                })?,
            );
        operator_ca.reload_on_change(ca_path, args.cert_reload_interval, cancel.clone());
        (operator_ca, client_cert)
    };
    let client_tls =
        client_tls_config(operator_ca, client_cert).map_err(StartError::OperatorTls)?;
    let server_name = args.metrics_service_server_name.clone().unwrap_or_else(|| {
        args.metrics_service_address
            .rsplit_once(':')
            .map_or(args.metrics_service_address.as_str(), |(host, _)| host)
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string()
    });
    let server_name = ServerName::try_from(server_name.clone())
        .map_err(|_| StartError::ServerName(server_name))?;
    let operator_config = OperatorClientConfig {
        address: args.metrics_service_address.clone(),
        server_name,
        tls: Arc::new(client_tls),
        connect_timeout: args.metrics_service_connect_timeout,
        request_timeout: args.metrics_service_timeout,
    };
    let operator = Arc::new(OperatorClient::new(operator_config.clone()));
    operator.keep_warm(cancel.clone());
    let source: Arc<dyn crate::operator_client::MetricSource> = if args.operator_shards {
        let client = kube_client(args.kubeconfig.as_deref(), "--kubeconfig", None).await?;
        let router = Arc::new(crate::shard_router::ShardRouter::new(
            client,
            crate::shard_router::ShardRouterConfig {
                namespace: args.certs_namespace.clone(),
                ..crate::shard_router::ShardRouterConfig::default()
            },
            operator_config,
            operator,
        ));
        router.follow(cancel.clone());
        info!(namespace = %args.certs_namespace, "routing metric reads to the operator replica that owns each object (--operator-shards)");
        router
    } else {
        operator
    };

    let metrics = Arc::new(Metrics::new());
    let state = AppState {
        authenticator,
        authorizer,
        source,
        metrics: Arc::clone(&metrics),
    };
    let secure_address = SocketAddr::new(args.bind_address, args.secure_port);
    let metrics_address = SocketAddr::new(args.bind_address, args.metrics_port);
    let workers = args
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, usize::from));
    let secure = secure_server(
        state,
        bind("--secure-port", secure_address)?,
        tls::secure_port_config(serving, &policy)?,
        workers,
    )
    .map_err(StartError::Serve)?;
    let plain = metrics_server(metrics, bind("--metrics-port", metrics_address)?)
        .map_err(StartError::Serve)?;
    info!(%secure_address, %metrics_address, "metrics-apiserver serving");
    let (secure_handle, plain_handle) = (secure.handle(), plain.handle());
    let secure = tokio::spawn(secure);
    let plain = tokio::spawn(plain);
    tokio::select! {
        () = cancel.cancelled() => {}
        result = secure => {
            plain_handle.stop(true).await;
            return result.map_err(|e| StartError::Serve(std::io::Error::other(e)))?.map_err(StartError::Serve);
        }
        result = plain => {
            secure_handle.stop(true).await;
            return result.map_err(|e| StartError::Serve(std::io::Error::other(e)))?.map_err(StartError::Serve);
        }
    }
    secure_handle.stop(true).await;
    plain_handle.stop(true).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Namespace;
    use memkube::{FailureRule, MemKube, Verb};

    /// The metrics-apiserver's clients (`--kubeconfig` and its kin) retry a 503 as the
    /// operator's do: a few times within seconds ([`keda_cli::build_client`]).
    #[tokio::test]
    async fn a_client_from_the_kubeconfig_flag_retries_a_503_a_bounded_number_of_times() {
        let server = MemKube::new();
        let loopback = server.serve_loopback().await.expect("loopback");
        let path = std::env::temp_dir().join(format!(
            "keda-rs-mas-retry-{}.kubeconfig",
            std::process::id()
        ));
        loopback.write_kubeconfig(&path).expect("kubeconfig");
        let client = kube_client(Some(&path), "--kubeconfig", None)
            .await
            .expect("client");
        let _ = std::fs::remove_file(&path);
        let namespaces: kube::Api<Namespace> = kube::Api::all(client);

        server.inject_failure(FailureRule::new(503).verb(Verb::Get).times(1));
        namespaces.get("default").await.expect("retried past a 503");
        assert_eq!(server.request_counts().get(Verb::Get, "namespaces"), 2);

        server.inject_failure(FailureRule::new(503).verb(Verb::Get).resource("namespaces"));
        let started = std::time::Instant::now();
        namespaces.get("default").await.expect_err("503 throughout");
        assert!(started.elapsed() < std::time::Duration::from_secs(8));
        assert_eq!(
            server.request_counts().get(Verb::Get, "namespaces"),
            2 + 1 + u64::from(keda_cli::cluster::API_RETRIES)
        );
    }
}
