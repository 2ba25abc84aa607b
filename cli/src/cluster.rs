//! Finding the cluster as `kubectl` and client-go do: the kubeconfig named by `KUBECONFIG`,
//! else `~/.kube/config`, else the pod's service account. Failures are one line naming every
//! place that was looked at, or the one that was used and what is wrong with it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::one_line;

/// How long the first request to the API server may take.
const REACH_TIMEOUT: Duration = Duration::from_secs(10);

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

/// A client of the cluster [`infer_config`] finds.
///
/// # Errors
/// As [`infer_config`], and [`ClusterError::Client`] when kube cannot build its HTTP stack.
pub async fn infer_client<L: Lookup + ?Sized>(env: &L) -> Result<kube::Client, ClusterError> {
    let config = infer_config(env).await?;
    let url = config.cluster_url.to_string();
    kube::Client::try_from(config).map_err(|error| ClusterError::Client {
        url,
        reason: one_line(&error),
    })
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
