//! Command-line flags, named as KEDA's `keda-admission-webhooks` names them where it has them.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use keda_metrics_apiserver::config::{positive_duration, workers};

/// The environment variables the webhook reads, for `--help`.
const ENV_HELP: &str = "\
Environment:
  POD_NAMESPACE     Namespace of Secret keda-rs-webhook-certs (--certs-namespace) [default: keda]
  KUBECONFIG        Kubeconfig path when --kubeconfig is not given; else ~/.kube/config, else the pod's service account
  RUST_LOG          Log filter [default: info]

See docs/webhooks.md.";

/// keda-rs admission webhooks: KEDA's validation of ScaledObjects, ScaledJobs and
/// (Cluster)TriggerAuthentications, served over TLS to the API server.
#[derive(Clone, Debug, Parser)]
#[command(name = "keda-webhook", version, about, long_about = None, after_help = ENV_HELP)]
pub struct Args {
    /// The HTTPS address serving the validation paths and `/healthz`, `/readyz`.
    #[arg(long, default_value = "0.0.0.0:9443")]
    pub webhook_bind_address: SocketAddr,

    /// The plain-HTTP address serving Prometheus metrics at `/metrics`, and `/healthz`,
    /// `/readyz`.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub metrics_bind_address: SocketAddr,

    /// PEM serving certificate (chain). Reloaded when the file changes. Without it (and
    /// `--tls-private-key-file`), the certificate of Secret keda-rs-webhook-certs is used.
    #[arg(long, requires = "tls_private_key_file")]
    pub tls_cert_file: Option<PathBuf>,

    /// PEM private key of `--tls-cert-file`. Reloaded when the file changes.
    #[arg(long, requires = "tls_cert_file")]
    pub tls_private_key_file: Option<PathBuf>,

    /// The namespace of Secret keda-rs-webhook-certs (created by the operator), whose
    /// certificate is served when no `--tls-cert-file` is given.
    #[arg(long, env = "POD_NAMESPACE", default_value = "keda")]
    pub certs_namespace: String,

    /// The ValidatingWebhookConfiguration whose `caBundle` is set to the CA of Secret
    /// keda-rs-webhook-certs (when that Secret is used). Empty: leave `caBundle` alone.
    #[arg(long, default_value = "keda-admission")]
    pub webhook_configuration_name: String,

    /// Kubeconfig of the cluster whose objects are validated. Default: in-cluster
    /// configuration or `$KUBECONFIG`.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,

    /// How often the certificate files (or the Secret) are checked for changes.
    #[arg(long, default_value = keda_tls::DEFAULT_RELOAD_INTERVAL, value_parser = positive_duration)]
    pub cert_reload_interval: Duration,

    /// Admit namespaced TriggerAuthentications whose `hashiCorpVault` `kubernetes` login uses
    /// the operator's own token or files (give the operator the same flag).
    #[arg(
        long,
        env = "KEDA_RS_ALLOW_NAMESPACE_VAULT_OPERATOR_IDENTITY",
        value_name = "BOOL",
        num_args = 0..=1,
        default_value_t = false,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub allow_namespace_vault_operator_identity: bool,

    /// ServiceAccounts namespaced TriggerAuthentications may have tokens minted for,
    /// `<namespace>/<name>` comma list, `*` for any part (give the operator the same list).
    #[arg(
        long,
        env = "KEDA_RS_BOUND_TOKEN_SERVICE_ACCOUNTS",
        value_name = "LIST",
        default_value = ""
    )]
    pub bound_token_service_accounts: String,

    /// Worker threads of the HTTPS port (1 to 1024). Default: the number of CPUs.
    #[arg(long, value_parser = workers)]
    pub workers: Option<usize>,
}

impl Args {
    /// The identity rules of namespaced TriggerAuthentications these flags choose.
    ///
    /// # Errors
    /// `--bound-token-service-accounts` is not a list of `<namespace>/<name>`.
    pub fn identity(&self) -> Result<keda_api::identity::IdentityPolicy, String> {
        Ok(keda_api::identity::IdentityPolicy {
            allow_namespace_vault_operator_identity: self.allow_namespace_vault_operator_identity,
            bound_token_service_accounts: keda_api::identity::ServiceAccountAllowList::parse(
                &self.bound_token_service_accounts,
            )
            .map_err(|e| format!("--bound-token-service-accounts: {e}"))?,
        })
    }
}
