//! Finding the cluster as `kubectl` and client-go do: the kubeconfig named by `KUBECONFIG`,
//! else `~/.kube/config`, else the pod's service account. Failures are one line naming every
//! place that was looked at, or the one that was used and what is wrong with it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::client::retry::RetryPolicy;
use kube::client::{Body, ClientBuilder, DynBody};
use tower::BoxError;
use tower::buffer::{Buffer, BufferLayer};
use tower::retry::{Retry, RetryLayer};
use tower::util::BoxService;

use crate::one_line;

/// How long the first request to the API server may take.
const REACH_TIMEOUT: Duration = Duration::from_secs(10);

/// Retries of a request answered `429`, `503` or `504`: at most this many...
pub const API_RETRIES: u32 = 3;
/// ...after waits doubling from this one (with jitter)...
pub const API_RETRY_MIN_DELAY: Duration = Duration::from_millis(200);
/// ...up to this one, or the server's `Retry-After` when it asks for longer.
pub const API_RETRY_MAX_DELAY: Duration = Duration::from_secs(2);

/// Requests queued for the retrying layer (kube queues as many in front of its client).
const API_REQUEST_QUEUE: usize = 1024;

/// kube's own HTTP stack, as `ClientBuilder::try_from(config)` builds it.
type KubeService = BoxService<http::Request<Body>, http::Response<Box<DynBody>>, BoxError>;

/// kube's HTTP stack behind a queue and the bounded retries of [`retrying_client_builder`].
pub type RetryingService = Retry<
    RetryPolicy,
    Buffer<http::Request<Body>, <KubeService as tower::Service<http::Request<Body>>>::Future>,
>;

/// Why no usable cluster was found.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// None of the standard places names a cluster.
    #[error(
        "no Kubernetes cluster found: KUBECONFIG is not set, {home_config} does not exist, and this is not a pod (KUBERNETES_SERVICE_HOST unset)"
    )]
    NotFound {
        /// Where `~/.kube/config` was looked for.
        home_config: String,
    },
    /// The kubeconfig that was found cannot be used.
    #[error("cannot use the kubeconfig {origin}: {reason}")]
    Kubeconfig {
        /// Which kubeconfig.
        origin: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Running in a pod, but the in-cluster configuration is incomplete.
    #[error(
        "cannot use the in-cluster configuration (service account token and CA under /var/run/secrets/kubernetes.io/serviceaccount): {reason}"
    )]
    InCluster {
        /// What is wrong with it.
        reason: String,
    },
    /// kube could not build an HTTP client for the configuration.
    #[error("cannot build a Kubernetes client for {url}: {reason}")]
    Client {
        /// The API server's URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// The API server did not answer.
    #[error("cannot reach the Kubernetes API server at {url}: {reason}")]
    Unreachable {
        /// The API server's URL.
        url: String,
        /// Why.
        reason: String,
    },
}

/// The environment variables and files the search depends on, so tests can inject them.
pub trait Lookup {
    /// A variable's value; `None` when unset or not UTF-8.
    fn var(&self, name: &str) -> Option<String>;
    /// Whether a file exists.
    fn file_exists(&self, path: &Path) -> bool;
}

/// The process environment and file system.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessLookup;

impl Lookup for ProcessLookup {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }

    fn file_exists(&self, path: &Path) -> bool {
        path.is_file()
    }
}

/// The kubeconfig from `KUBECONFIG`, else `~/.kube/config`, else the in-cluster service
/// account, as `kubectl` and client-go look for it.
///
/// # Errors
/// [`ClusterError::NotFound`] when no place has one, else the error of the place that was used.
pub async fn infer_config<L: Lookup + ?Sized>(env: &L) -> Result<kube::Config, ClusterError> {
    match kube::Config::infer().await {
        Ok(config) => Ok(config),
        Err(error) => Err(explain_infer_failure(env, &error)),
    }
}

/// The configuration of the kubeconfig at `path` (its current context), as a `--kubeconfig`
/// flag names it; `origin` says where the path came from in the error.
///
/// # Errors
/// [`ClusterError::Kubeconfig`] when the file cannot be read or used.
pub async fn config_from_kubeconfig(
    path: &Path,
    origin: &str,
) -> Result<kube::Config, ClusterError> {
    let fail = |reason: String| ClusterError::Kubeconfig {
        origin: format!("{} ({origin})", path.display()),
        reason,
    };
    let kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(|e| fail(e.to_string()))?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(|e| fail(e.to_string()))
}

/// A client of the cluster [`infer_config`] finds, built by [`build_client`].
///
/// # Errors
/// As [`infer_config`], and [`ClusterError::Client`] when kube cannot build its HTTP stack.
pub async fn infer_client<L: Lookup + ?Sized>(env: &L) -> Result<kube::Client, ClusterError> {
    build_client(infer_config(env).await?)
}

/// The client every keda-rs binary talks to the API server with: kube's stack for `config`,
/// whose requests answered `429`, `503` or `504` are retried [`API_RETRIES`] times within a few
/// seconds ([`retrying_client_builder`]).
///
/// # Errors
/// [`ClusterError::Client`] when kube cannot build its HTTP stack (for example a bad CA).
///
/// # Panics
/// Outside a tokio runtime (the retrying layer's queue runs as a task).
pub fn build_client(config: kube::Config) -> Result<kube::Client, ClusterError> {
    Ok(retrying_client_builder(config)?.build())
}

/// The builder of [`build_client`], for a binary that adds layers of its own on top (the
/// operator's rate limiter, so that a request and its retries take one token).
///
/// A request answered `429`, `503` or `504` is retried [`API_RETRIES`] times, waiting from
/// [`API_RETRY_MIN_DELAY`] doubling up to [`API_RETRY_MAX_DELAY`] (or the server's
/// `Retry-After`), as client-go bounds its retries, and then fails to its caller, which has its
/// own schedule (the next poll, a requeued reconcile, the watch's backoff, the next Lease
/// renewal, a start-up that goes on without). kube's own default retries such a request 15
/// times, doubling the wait from 5 ms to over 80 s: through an API server outage every request
/// would sleep on, and for up to a minute and a half after the server returned nothing would
/// be watched, scaled or renewed (docs/reliability.md, "Faults").
///
/// # Errors
/// [`ClusterError::Client`] when kube cannot build its HTTP stack.
///
/// # Panics
/// Building the client outside a tokio runtime (the retrying layer's queue runs as a task).
pub fn retrying_client_builder(
    mut config: kube::Config,
) -> Result<ClientBuilder<RetryingService>, ClusterError> {
    let url = config.cluster_url.to_string();
    let client_error = |reason: String| ClusterError::Client {
        url: url.clone(),
        reason,
    };
    let retries = RetryPolicy::new(API_RETRY_MIN_DELAY, API_RETRY_MAX_DELAY, API_RETRIES, true)
        .map_err(|error| client_error(one_line(&error)))?;
    config.default_retry = false;
    Ok(ClientBuilder::try_from(config)
        .map_err(|error| client_error(one_line(&error)))?
        // Retrying needs a service it can call again: kube's stack behind a queue.
        .with_layer(&BufferLayer::new(API_REQUEST_QUEUE))
        .with_layer(&RetryLayer::new(retries)))
}

/// The one-line explanation of kube's failure to infer a configuration.
pub fn explain_infer_failure<L: Lookup + ?Sized>(
    env: &L,
    error: &dyn std::error::Error,
) -> ClusterError {
    let home_config = env
        .var("HOME")
        .filter(|home| !home.is_empty())
        .map(|home| PathBuf::from(home).join(".kube").join("config"));
    let reason = error.source().map_or_else(|| one_line(error), one_line);
    if let Some(path) = env.var("KUBECONFIG").filter(|v| !v.is_empty()) {
        return ClusterError::Kubeconfig {
            origin: format!("named by KUBECONFIG ({path})"),
            reason,
        };
    }
    if let Some(path) = home_config.as_ref().filter(|p| env.file_exists(p)) {
        return ClusterError::Kubeconfig {
            origin: path.display().to_string(),
            reason,
        };
    }
    if env.var("KUBERNETES_SERVICE_HOST").is_some() {
        return ClusterError::InCluster {
            reason: one_line(error),
        };
    }
    ClusterError::NotFound {
        home_config: home_config
            .map_or_else(|| "~/.kube/config".to_string(), |p| p.display().to_string()),
    }
}

/// Asks the API server for its version, so a wrong address fails at start-up with one line.
///
/// # Errors
/// [`ClusterError::Unreachable`] when it does not answer within 10 seconds or answers an error.
pub async fn check_reachable(client: &kube::Client, url: &str) -> Result<(), ClusterError> {
    let unreachable = |reason: String| ClusterError::Unreachable {
        url: url.to_string(),
        reason,
    };
    match tokio::time::timeout(REACH_TIMEOUT, client.apiserver_version()).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => Err(unreachable(one_line(&error))),
        Err(_) => Err(unreachable(format!("no answer within {REACH_TIMEOUT:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Namespace;
    use memkube::{FailureRule, MemKube, Verb};

    /// A request answered 503 once is retried and succeeds; through an outage it fails after
    /// [`API_RETRIES`] retries within seconds (kube's default would retry for minutes).
    #[tokio::test]
    async fn a_503_is_retried_a_bounded_number_of_times_within_seconds() {
        let server = MemKube::new();
        let loopback = server.serve_loopback().await.expect("loopback");
        let namespaces: kube::Api<Namespace> =
            kube::Api::all(build_client(loopback.config()).expect("client"));

        server.inject_failure(FailureRule::new(503).verb(Verb::Get).times(1));
        namespaces.get("default").await.expect("retried past a 503");
        assert_eq!(server.request_counts().get(Verb::Get, "namespaces"), 2);

        server.inject_failure(FailureRule::new(503).verb(Verb::Get).resource("namespaces"));
        let started = std::time::Instant::now();
        let error = namespaces.get("default").await.expect_err("503");
        assert!(
            matches!(&error, kube::Error::Api(status) if status.code == 503),
            "{error}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "gave up after {:?}",
            started.elapsed()
        );
        assert_eq!(
            server.request_counts().get(Verb::Get, "namespaces"),
            2 + 1 + u64::from(API_RETRIES)
        );
    }
}
