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
#[command(name = "keda-webhook", version, about, long_about = None, after_help = ENV_HELP, args_override_self = true)]
pub struct Args {
    /// The HTTPS address serving the validation paths and `/healthz`, `/readyz`.
    #[arg(long, default_value = "0.0.0.0:9443")]
    pub webhook_bind_address: SocketAddr,

    /// The plain-HTTP address serving Prometheus metrics at `/metrics`, and `/healthz`,
    /// `/readyz`.
    #[arg(long, default_value = "0.0.0.0:8080", value_parser = metrics_address)]
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

    /// Port of `--webhook-bind-address` (KEDA's `--port`).
    #[arg(long, value_name = "PORT")]
    pub webhook_port: Option<u16>,

    /// Plain-HTTP address of `/healthz` and `/readyz` alone, as KEDA's manifests probe them
    /// (`:8081`; `0` turns it off).
    #[arg(long, value_name = "ADDR", default_value = ":8081")]
    pub health_probe_bind_address: crate::keda_flags::ListenAddress,

    /// Directory of `tls.crt` and `tls.key` served when no `--tls-cert-file` is given (KEDA's
    /// flag and default, where KEDA's manifests mount its certificates); when the files are not
    /// there, the certificate of Secret keda-rs-webhook-certs is served.
    #[arg(long, value_name = "DIR", default_value = "/certs")]
    pub cert_dir: Option<PathBuf>,

    /// Log filter, a tracing directive such as `info` (KEDA's --zap-log-level maps onto it);
    /// RUST_LOG overrides it.
    #[arg(long, value_name = "FILTER", default_value = "info")]
    pub log_level: String,

    /// Log format: `text` or `json` (KEDA's --zap-encoder: `console` is `text`).
    #[arg(long, value_name = "FORMAT", default_value = "text")]
    pub log_format: keda_cli::logging::LogFormat,

    /// Timestamp encoding of log lines (KEDA's --zap-time-encoding).
    #[arg(long, value_name = "ENCODING", default_value = "default")]
    pub log_time_encoding: keda_cli::logging::TimeEncoding,
}

/// `--metrics-bind-address`: as Go writes it (`:8080`), but not off: the port also answers the
/// probes.
fn metrics_address(value: &str) -> Result<SocketAddr, String> {
    crate::keda_flags::listen_address(value)?
        .ok_or_else(|| "the metrics port cannot be turned off here".to_string())
}

impl Args {
    /// The identity rules of namespaced TriggerAuthentications these flags choose.
    ///
    /// # Errors
    /// `--bound-token-service-accounts` is not a list of `<namespace>/<name>`.
    pub fn identity(&self) -> Result<keda_api::identity::IdentityPolicy, String> {
        Ok(keda_api::identity::IdentityPolicy {
            allow_namespace_vault_operator_identity: self.allow_namespace_vault_operator_identity,
            // The operator's AWS scalers check this one when they are built; the webhook has
            // no AWS rule to apply.
            allow_namespace_aws_operator_identity: false,
            bound_token_service_accounts: keda_api::identity::ServiceAccountAllowList::parse(
                &self.bound_token_service_accounts,
            )
            .map_err(|e| format!("--bound-token-service-accounts: {e}"))?,
        })
    }
}
