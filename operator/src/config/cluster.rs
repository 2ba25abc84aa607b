//! Finding the cluster: the kubeconfig from the standard places (`KUBECONFIG`,
//! `~/.kube/config`, in-cluster), a rate-limited client, and a first request that proves the
//! API server answers. Failures are one line naming what is missing.

use std::path::PathBuf;
use std::time::Duration;

use kube::client::ClientBuilder;

use super::Environment;
use super::rate_limit::{RateLimitLayer, TokenBucket};
use crate::telemetry::Metrics;

/// How long the first request to the API server may take.
const REACH_TIMEOUT: Duration = Duration::from_secs(10);

/// Why no usable cluster was found.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// None of the standard places names a cluster.
    #[error(
        "no Kubernetes cluster found: KUBECONFIG is not set, {home_config} does not exist, and this is not a pod (KUBERNETES_SERVICE_HOST unset)"
    )]
    NotFound { home_config: String },
    /// The kubeconfig that was found cannot be used.
    #[error("cannot use the kubeconfig {origin}: {reason}")]
    Kubeconfig { origin: String, reason: String },
    /// Running in a pod, but the in-cluster configuration is incomplete.
    #[error(
        "cannot use the in-cluster configuration (service account token and CA under /var/run/secrets/kubernetes.io/serviceaccount): {reason}"
    )]
    InCluster { reason: String },
    /// kube could not build an HTTP client for the configuration.
    #[error("cannot build a Kubernetes client for {url}: {reason}")]
    Client { url: String, reason: String },
    /// The API server did not answer.
    #[error("cannot reach the Kubernetes API server at {url}: {reason}")]
    Unreachable { url: String, reason: String },
}

/// The error's text and its causes on one line.
fn one_line(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The kubeconfig from `KUBECONFIG`, else `~/.kube/config`, else the in-cluster service
/// account, as `kubectl` and client-go look for it.
///
/// # Errors
/// [`ClusterError::NotFound`] when no place has one, else the error of the place that was used.
pub async fn infer_config(env: &dyn Environment) -> Result<kube::Config, ClusterError> {
    match kube::Config::infer().await {
        Ok(config) => Ok(config),
        Err(error) => Err(explain_infer_failure(env, &error)),
    }
}

fn explain_infer_failure(env: &dyn Environment, error: &dyn std::error::Error) -> ClusterError {
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

/// A client for `config` whose requests are limited to `qps` per second with bursts of
/// `burst` (no limit when `qps` is not positive). How long requests wait for the limiter is
/// recorded into `metrics` (`rest_client_rate_limiter_*`).
///
/// # Errors
/// [`ClusterError::Client`] when kube cannot build its HTTP stack (for example a bad CA).
pub fn build_client(
    config: kube::Config,
    qps: f32,
    burst: u32,
    metrics: &Metrics,
) -> Result<kube::Client, ClusterError> {
    let url = config.cluster_url.to_string();
    let builder = ClientBuilder::try_from(config).map_err(|error| ClusterError::Client {
        url,
        reason: one_line(&error),
    })?;
    Ok(match TokenBucket::new(qps, burst) {
        Some(bucket) => builder
            .with_layer(&RateLimitLayer::new(bucket).recording(metrics.clone()))
            .build(),
        None => builder.build(),
    })
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
    use crate::config::MapEnv;

    #[derive(Debug, thiserror::Error)]
    #[error("outer\nline")]
    struct Outer(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("inner cause")]
    struct Inner;

    #[test]
    fn nothing_configured_names_every_place_that_was_looked_at() {
        let env = MapEnv::new(&[("HOME", "/home/op")]);
        let error = explain_infer_failure(&env, &Outer(Inner));
        assert_eq!(
            error.to_string(),
            "no Kubernetes cluster found: KUBECONFIG is not set, /home/op/.kube/config does not exist, and this is not a pod (KUBERNETES_SERVICE_HOST unset)"
        );
    }

    #[test]
    fn a_broken_kubeconfig_named_by_the_variable_is_blamed_on_one_line() {
        let env = MapEnv::new(&[("KUBECONFIG", "/tmp/kc"), ("HOME", "/home/op")]);
        let error = explain_infer_failure(&env, &Outer(Inner));
        assert_eq!(
            error.to_string(),
            "cannot use the kubeconfig named by KUBECONFIG (/tmp/kc): inner cause"
        );
    }

    #[test]
    fn a_broken_home_kubeconfig_is_blamed_by_path() {
        let env = MapEnv::new(&[("HOME", "/home/op")]).with_file("/home/op/.kube/config");
        let error = explain_infer_failure(&env, &Outer(Inner));
        assert_eq!(
            error.to_string(),
            "cannot use the kubeconfig /home/op/.kube/config: inner cause"
        );
    }

    #[test]
    fn in_a_pod_the_in_cluster_configuration_is_blamed() {
        let env = MapEnv::new(&[("KUBERNETES_SERVICE_HOST", "10.0.0.1")]);
        let error = explain_infer_failure(&env, &Outer(Inner));
        assert!(
            error
                .to_string()
                .starts_with("cannot use the in-cluster configuration"),
            "{error}"
        );
        assert!(!error.to_string().contains('\n'));
    }

    #[tokio::test]
    async fn an_unreachable_server_is_reported_with_its_address() {
        // A port that was free a moment ago: nothing listens there.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let url = format!("http://127.0.0.1:{port}");
        let config = kube::Config::new(url.parse().expect("url"));
        let client = build_client(config, 20.0, 30, &Metrics::new()).expect("client");
        let error = check_reachable(&client, &url)
            .await
            .expect_err("nothing listens");
        let text = error.to_string();
        assert!(
            text.starts_with(&format!(
                "cannot reach the Kubernetes API server at {url}: "
            )),
            "{text}"
        );
        assert!(!text.contains('\n'), "{text}");
    }
}
