//! Finding the cluster: the kubeconfig from the standard places (`KUBECONFIG`,
//! `~/.kube/config`, in-cluster), a rate-limited client, and a first request that proves the
//! API server answers. Failures are one line naming what is missing.

use std::path::Path;

pub use keda_cli::{ClusterError, check_reachable};
use keda_cli::{Lookup, retrying_client_builder};

use super::Environment;
use super::rate_limit::{RateLimitLayer, TokenBucket};
use crate::process::telemetry::Metrics;

/// The operator's [`Environment`] as the search for the cluster reads it.
struct EnvLookup<'a>(&'a dyn Environment);

impl Lookup for EnvLookup<'_> {
    fn var(&self, name: &str) -> Option<String> {
        self.0.var(name)
    }

    fn file_exists(&self, path: &Path) -> bool {
        self.0.file_exists(path)
    }
}

/// The kubeconfig from `KUBECONFIG`, else `~/.kube/config`, else the in-cluster service
/// account, as `kubectl` and client-go look for it ([`keda_cli::infer_config`]).
///
/// # Errors
/// [`ClusterError::NotFound`] when no place has one, else the error of the place that was used.
pub async fn infer_config(env: &dyn Environment) -> Result<kube::Config, ClusterError> {
    keda_cli::infer_config(&EnvLookup(env)).await
}

#[cfg(test)]
fn explain_infer_failure(env: &dyn Environment, error: &dyn std::error::Error) -> ClusterError {
    keda_cli::cluster::explain_infer_failure(&EnvLookup(env), error)
}

/// A client for `config` whose requests are limited to `qps` per second with bursts of
/// `burst` (no limit when `qps` is not positive). How long requests wait for the limiter is
/// recorded into `metrics` (`rest_client_rate_limiter_*`).
///
/// Below the limiter is the client every keda-rs binary uses ([`keda_cli::build_client`]): a
/// request answered `429`, `503` or `504` is retried [`keda_cli::cluster::API_RETRIES`] times
/// within a few seconds and then fails to its caller, which has its own schedule (the next
/// poll, a requeued reconcile, the watch's backoff, the next Lease renewal). A request and its
/// retries take one token of the limiter.
///
/// # Errors
/// [`ClusterError::Client`] when kube cannot build its HTTP stack (for example a bad CA).
///
/// # Panics
/// Outside a tokio runtime (the retrying layer's queue runs as a task).
pub fn build_client(
    config: kube::Config,
    qps: f32,
    burst: u32,
    metrics: &Metrics,
) -> Result<kube::Client, ClusterError> {
    let builder = retrying_client_builder(config)?;
    Ok(match TokenBucket::new(qps, burst) {
        Some(bucket) => builder
            .with_layer(&RateLimitLayer::new(bucket).recording(metrics.clone()))
            .build(),
        None => builder.build(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::config::MapEnv;
    use keda_cli::cluster::API_RETRIES;
    use std::time::Duration;

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

    /// Through an API server outage a request must fail within seconds, so that its caller's
    /// own schedule (a Lease renewal, a poll) goes on; kube's default would retry for minutes.
    #[tokio::test]
    async fn a_request_answered_503_is_retried_three_times_within_seconds_then_fails() {
        use memkube::{FailureRule, MemKube, Verb};

        let server = MemKube::new();
        let loopback = server.serve_loopback().await.expect("loopback");
        server.inject_failure(FailureRule::new(503).verb(Verb::Get).resource("namespaces"));
        let client = build_client(loopback.config(), 0.0, 0, &Metrics::new()).expect("client");
        let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client);
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
            1 + u64::from(API_RETRIES)
        );
        // And a 503 that passes is not an error at all.
        server.clear_failures();
        server.inject_failure(FailureRule::new(503).verb(Verb::Get).times(2));
        namespaces
            .get("default")
            .await
            .expect("retried past two 503s");
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
