//! The operator's settings: KEDA's flags (clap) and environment variables, with KEDA's
//! defaults, so nothing is required to start.
//!
//! Environment variables are read through [`Environment`], so tests inject them instead of
//! changing the process environment.

mod cluster;
mod env;
mod flags;
pub mod keda_flags;
mod rate_limit;

use std::collections::HashMap;
use std::ffi::OsString;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use clap::Parser;

pub use cluster::{ClusterError, build_client, check_reachable, infer_config};
pub use env::*;
pub use flags::*;
pub use rate_limit::{RateLimit, RateLimitLayer, TokenBucket};

use crate::process::leader::{
    DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD, LeaseConfig,
};
use crate::process::telemetry::LogFormat;

/// Which namespaces the controllers and the resolver watch (`WATCH_NAMESPACE`).
pub use crate::shared::resolve::WatchScope;

/// Everything the operator binary is configured with.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `/metrics` listener; `None` when disabled.
    pub metrics_addr: Option<SocketAddr>,
    /// `/healthz` and `/readyz` listener; `None` when disabled.
    pub probe_addr: Option<SocketAddr>,
    /// The metric service listener (served by the leader).
    pub metrics_service_addr: Option<SocketAddr>,
    /// The explain endpoint's listener (served by the leader); `None` when disabled.
    pub explain_addr: Option<SocketAddr>,
    /// The metric service's mutual TLS files.
    pub metrics_service_tls: crate::serve::metrics_service::TlsFiles,
    /// How often those files are checked for changes.
    pub cert_reload_interval: Duration,
    /// The Lease to compete for; `None` when leader election is off (this process leads) or
    /// shards are on.
    pub leader_election: Option<LeaseConfig>,
    /// `--shards=auto`: this replica's shard Lease (name, namespace, identity, the leader
    /// election durations) and the metric service address it advertises; `None`: off.
    pub shards: Option<crate::process::shards::ShardConfig>,
    pub kube_api_qps: f32,
    pub kube_api_burst: u32,
    /// The explain endpoint's review budget (`--explain-kube-api-qps`,
    /// `--explain-kube-api-burst`), on a client of its own.
    pub explain_review_budget: crate::serve::explain::auth::ReviewBudget,
    pub watch_namespaces: WatchScope,
    /// `POD_NAMESPACE`, default `keda`.
    pub pod_namespace: String,
    /// Where cluster-scoped authentication reads its Secrets.
    pub cluster_object_namespace: String,
    pub log_format: LogFormat,
    /// The effective log filter (`RUST_LOG` if set, else `--log-level`).
    pub log_filter: String,
    /// Which hosts each namespace's `http` triggers may claim (`--http-host-policy`; none
    /// without it, all with `--http-any-host`).
    pub http_host_policy: keda_scalers::scalers::http::claims::HostPolicy,
    /// Timeout of HTTP-based scalers that set none (`KEDA_HTTP_DEFAULT_TIMEOUT`, default 3 s).
    pub http_default_timeout: Duration,
    /// ScaledObject reconciles at once (`KEDA_SCALEDOBJECT_CTRL_MAX_RECONCILES`, default 5).
    pub scaled_object_max_reconciles: u16,
    /// ScaledJob reconciles at once (`KEDA_SCALEDJOB_CTRL_MAX_RECONCILES`, default 1).
    pub scaled_job_max_reconciles: u16,
    /// Only ScaledObjects and ScaledJobs matching this selector are watched
    /// (`WATCH_LABEL_SELECTOR`); `None`: all.
    pub watch_label_selector: Option<String>,
    /// Only TriggerAuthentications and ClusterTriggerAuthentications matching this selector are
    /// watched (`WATCH_LABEL_SELECTOR_FOR_TRIGGERAUTH`): the others are as if they did not
    /// exist; `None`: all.
    pub watch_label_selector_for_trigger_auth: Option<String>,
    /// Root of ClusterTriggerAuthentication `filePath` files (`--filepath-auth-root-path`).
    pub file_path_auth_root: Option<PathBuf>,
    /// Secrets are read only in `cluster_object_namespace` (`KEDA_RESTRICT_SECRET_ACCESS`).
    pub restrict_secret_access: bool,
    /// Cluster name of CloudEvents (`--k8s-cluster-name`).
    pub k8s_cluster_name: String,
    /// `--enable-high-cardinality-metrics-labels`.
    pub high_cardinality_metrics_labels: bool,
    /// `--allow-hpa-ownership-transfer`.
    pub allow_hpa_ownership_transfer: bool,
    /// `--last-active-time-refresh`; `None` (0): written on Active transitions only.
    pub last_active_time_refresh: Option<Duration>,
    /// `--allow-namespace-vault-operator-identity`, `--allow-namespace-aws-operator-identity`,
    /// `--bound-token-service-accounts`.
    pub identity: keda_api::identity::IdentityPolicy,
    /// `--trigger-file-root` (default [`keda_scalers::files::DEFAULT_TRIGGER_FILE_ROOT`]).
    pub trigger_file_root: PathBuf,
    /// `--answer-bytes-per-namespace` ([`keda_scalers::answers`]).
    pub answer_bytes_per_namespace: usize,
    /// Lifetime of `boundServiceAccountToken` tokens (`KEDA_BOUND_SERVICE_ACCOUNT_TOKEN_EXPIRY`,
    /// default 1h, 1h to 6h).
    pub bound_service_account_token_expiry: Duration,
    /// Trigger metadata keys a scaler does not read are reported as Warning `KEDAScalerInfo`
    /// Events at each build (`KEDA_CHECK_UNEXPECTED_SCALERS_PARAMS=enabled`; off otherwise).
    pub check_unexpected_scalers_params: bool,
    /// KEDA's flags ([`keda_flags`]): what they set, and one warning per flag without effect.
    pub keda: KedaFlagSettings,
}

/// What KEDA's flags set beyond the fields above (see [`keda_flags::table`]).
#[derive(Debug, Clone)]
pub struct KedaFlagSettings {
    /// One line per KEDA flag given that has no effect here, logged at start.
    pub warnings: Vec<String>,
    /// `--zap-time-encoding`.
    pub log_time_encoding: crate::process::telemetry::TimeEncoding,
    /// `--kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
    /// `--ca-dir`, in order.
    pub ca_dirs: Vec<PathBuf>,
    /// `--http-max-idle-conns-per-host`.
    pub http_max_idle_conns_per_host: usize,
    /// `--http-idle-conn-timeout`.
    pub http_idle_conn_timeout: Duration,
    /// The scalers' client policy from the variables and flags (`--ca-dir` certificates are
    /// added by `main`).
    pub client_policy: keda_scalers::client_policy::ClientPolicy,
    /// What the metric service allows (`KEDA_SERVICE_MIN_TLS_VERSION`,
    /// `KEDA_SERVICE_TLS_CIPHER_LIST`, else the `KEDA_HTTP_*` values).
    pub service_tls: keda_tls::TlsPolicy,
    /// `--enable-opentelemetry-metrics`: where and how to export over OTLP (the `OTEL_*`
    /// variables); `None` when off.
    pub opentelemetry: Option<crate::process::telemetry::otel::OtlpSettings>,
}

/// Why the settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A flag is wrong, or `--help`/`--version` was asked for (print it with `clap::Error::exit`).
    #[error(transparent)]
    Flags(#[from] clap::Error),
    /// A KEDA flag lacks its value or has one it cannot have (one line naming the flag).
    #[error("{0}")]
    KedaFlag(String),
    /// `KEDA_HTTP_MIN_TLS_VERSION` or `KEDA_HTTP_TLS_CIPHER_LIST` names what rustls cannot do.
    #[error(transparent)]
    ClientTls(#[from] keda_tls::PolicyError),
    /// A duration variable is not a Go duration.
    #[error("{name}={value:?} is not a duration: use Go's format, for example 15s, 500ms or 1m30s")]
    Duration { name: &'static str, value: String },
    /// A duration variable is outside its bounds.
    #[error("{name}={value:?} must be a duration between {min} and {max}")]
    DurationOutOfBounds {
        name: &'static str,
        value: String,
        min: &'static str,
        max: &'static str,
    },
    /// A duration variable is longer than [`MAX_DURATION`].
    #[error("{name}={value:?} is too long: at most 1h")]
    DurationTooLong { name: &'static str, value: String },
    /// The leader election settings contradict each other.
    #[error(transparent)]
    LeaderElection(#[from] crate::process::leader::LeaderError),
    /// A number variable is not a whole number within its bounds.
    #[error("{name}={value:?} is not a whole number between {min} and {max}")]
    Number {
        name: &'static str,
        value: String,
        min: u64,
        max: u64,
    },
    /// `WATCH_LABEL_SELECTOR` or `WATCH_LABEL_SELECTOR_FOR_TRIGGERAUTH` is not a label
    /// selector.
    #[error("{name}={value:?} is not a label selector: {reason}")]
    LabelSelector {
        name: &'static str,
        value: String,
        reason: String,
    },
    /// Both a host policy file and `--http-any-host` are given.
    #[error(
        "--http-host-policy {} and --http-any-host (or {ENV_HTTP_ANY_HOST}) exclude each other: \
         give the policy file, or allow any host, not both",
        path.display()
    )]
    HostPolicyAndAnyHost { path: PathBuf },
    /// A boolean variable is neither `true` nor `false`.
    #[error("{name}={value:?} is neither true nor false")]
    Bool { name: &'static str, value: String },
    /// `--bound-token-service-accounts` is not a list of ServiceAccounts.
    #[error("--bound-token-service-accounts ({ENV_BOUND_TOKEN_SERVICE_ACCOUNTS}): {reason}")]
    ServiceAccounts { reason: String },
    /// `KEDA_HTTP_ANY_HOST` is neither `true` nor `false`.
    #[error("{ENV_HTTP_ANY_HOST}={value:?} is neither true nor false")]
    AnyHost { value: String },
    /// The `--http-host-policy` file cannot be read.
    #[error("--http-host-policy {}: cannot read the file", path.display())]
    HostPolicyFile { path: PathBuf },
    /// The `--http-host-policy` file is not a host policy.
    #[error("--http-host-policy {}: {source}", path.display())]
    HostPolicy {
        path: PathBuf,
        #[source]
        source: keda_scalers::scalers::http::claims::HostPolicyError,
    },
}

impl Settings {
    /// Settings from this process's arguments and environment.
    ///
    /// # Errors
    /// As [`from_sources`](Self::from_sources).
    pub fn from_process() -> Result<Self, ConfigError> {
        Self::from_sources(std::env::args_os(), &ProcessEnv)
    }

    /// Settings from `args` (the program name first) and `env`.
    ///
    /// # Errors
    /// A bad flag (or `--help`), a variable in the wrong format, or inconsistent leader election
    /// durations.
    pub fn from_sources<I, T>(args: I, env: &dyn Environment) -> Result<Self, ConfigError>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let keda_args =
            keda_cli::keda_flags::translate(args.into_iter().map(Into::into), &keda_flags::table())
                .map_err(ConfigError::KedaFlag)?;
        let flags = Flags::try_parse_from(keda_args.args)?;
        let mut warnings = keda_args.warnings;
        let present = |name: &str| env.var(name).filter(|v| !v.trim().is_empty());
        let pod_namespace =
            present(ENV_POD_NAMESPACE).unwrap_or_else(|| DEFAULT_POD_NAMESPACE.to_string());
        let cluster_object_namespace = present(ENV_CLUSTER_OBJECT_NAMESPACE)
            .or_else(|| {
                env.read_file(Path::new(SERVICE_ACCOUNT_NAMESPACE_FILE))
                    .map(|ns| ns.trim().to_string())
                    .filter(|ns| !ns.is_empty())
            })
            .unwrap_or_else(|| pod_namespace.clone());
        let shards_on = flags.shards == "auto";
        let leader_election = if flags.leader_elect || shards_on {
            let identity = present(ENV_POD_NAME).unwrap_or_else(|| default_identity(env));
            let lease = LeaseConfig {
                lease_duration: duration(env, ENV_LEASE_DURATION)?
                    .unwrap_or(DEFAULT_LEASE_DURATION),
                renew_deadline: duration(env, ENV_RENEW_DEADLINE)?
                    .unwrap_or(DEFAULT_RENEW_DEADLINE),
                retry_period: duration(env, ENV_RETRY_PERIOD)?.unwrap_or(DEFAULT_RETRY_PERIOD),
                ..LeaseConfig::new(
                    flags.leader_election_id.clone(),
                    pod_namespace.clone(),
                    identity,
                )
            };
            lease.validate()?;
            Some(lease)
        } else {
            None
        };
        // Shards replace the election: every replica works, on its own objects.
        let (leader_election, shards) = match leader_election {
            Some(lease) if shards_on => {
                let address = flags.shard_address.clone().or_else(|| {
                    let addr = flags.metrics_service_bind_address.0?;
                    match present(ENV_POD_IP) {
                        Some(ip) => {
                            Some(SocketAddr::new(ip.parse().ok()?, addr.port()).to_string())
                        }
                        None => (!addr.ip().is_unspecified()).then(|| addr.to_string()),
                    }
                });
                let lease = LeaseConfig {
                    name: keda_api::shards::lease_name(&lease.identity),
                    ..lease
                };
                (
                    None,
                    Some(crate::process::shards::ShardConfig { lease, address }),
                )
            }
            other => (other, None),
        };
        let any_host = flags.http_any_host
            || match present(ENV_HTTP_ANY_HOST) {
                None => false,
                Some(value) => match value.trim().to_ascii_lowercase().as_str() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(ConfigError::AnyHost { value }),
                },
            };
        let http_host_policy = match flags
            .http_host_policy
            .clone()
            .or_else(|| present(ENV_HTTP_HOST_POLICY).map(PathBuf::from))
        {
            Some(path) if any_host => return Err(ConfigError::HostPolicyAndAnyHost { path }),
            // Safe by default: no namespace may claim a host the administrator did not grant.
            None if !any_host => keda_scalers::scalers::http::claims::HostPolicy::deny_all(),
            None => keda_scalers::scalers::http::claims::HostPolicy::allow_all(),
            Some(path) => {
                let text = env
                    .read_file(&path)
                    .ok_or_else(|| ConfigError::HostPolicyFile { path: path.clone() })?;
                keda_scalers::scalers::http::claims::HostPolicy::from_yaml(&text)
                    .map_err(|source| ConfigError::HostPolicy { path, source })?
            }
        };
        let check_unexpected_scalers_params = check_unexpected_params(env, &mut warnings);
        Ok(Self {
            metrics_addr: flags
                .metrics_bind_address
                .0
                .filter(|_| flags.keda.enable_prometheus_metrics),
            probe_addr: flags.health_probe_bind_address.0,
            metrics_service_addr: flags.metrics_service_bind_address.0,
            explain_addr: flags.explain_bind_address.0,
            metrics_service_tls: {
                let dir = flags
                    .keda
                    .cert_dir
                    .clone()
                    .unwrap_or_else(|| PathBuf::from("/certs"));
                crate::serve::metrics_service::TlsFiles {
                    cert: flags
                        .metrics_service_cert_file
                        .unwrap_or_else(|| dir.join("tls.crt")),
                    key: flags
                        .metrics_service_key_file
                        .unwrap_or_else(|| dir.join("tls.key")),
                    client_ca: flags
                        .metrics_service_client_ca_file
                        .unwrap_or_else(|| dir.join("ca.crt")),
                }
            },
            cert_reload_interval: flags.cert_reload_interval,
            leader_election,
            shards,
            kube_api_qps: flags.kube_api_qps,
            kube_api_burst: flags.kube_api_burst,
            explain_review_budget: crate::serve::explain::auth::ReviewBudget {
                qps: flags.explain_kube_api_qps,
                burst: flags.explain_kube_api_burst,
            },
            watch_namespaces: env
                .var(ENV_WATCH_NAMESPACE)
                .map_or(WatchScope::All, |v| WatchScope::parse(&v)),
            pod_namespace,
            cluster_object_namespace,
            log_format: flags.log_format,
            log_filter: present(ENV_RUST_LOG).unwrap_or(flags.log_level),
            http_host_policy,
            http_default_timeout: number(
                env,
                ENV_HTTP_DEFAULT_TIMEOUT,
                HTTP_DEFAULT_TIMEOUT_BOUNDS_MS,
            )?
            .map_or(
                keda_scalers::context::DEFAULT_HTTP_TIMEOUT,
                Duration::from_millis,
            ),
            scaled_object_max_reconciles: max_reconciles(env, ENV_SCALEDOBJECT_MAX_RECONCILES)?
                .unwrap_or(DEFAULT_SCALEDOBJECT_MAX_RECONCILES),
            scaled_job_max_reconciles: max_reconciles(env, ENV_SCALEDJOB_MAX_RECONCILES)?
                .unwrap_or(DEFAULT_SCALEDJOB_MAX_RECONCILES),
            watch_label_selector: label_selector(env, ENV_WATCH_LABEL_SELECTOR)?,
            watch_label_selector_for_trigger_auth: label_selector(
                env,
                ENV_WATCH_LABEL_SELECTOR_FOR_TRIGGERAUTH,
            )?,
            restrict_secret_access: crate::shared::resolve::restrict_secret_access(
                env.var(ENV_RESTRICT_SECRET_ACCESS),
            ),
            file_path_auth_root: flags
                .filepath_auth_root_path
                .filter(|p| !p.as_os_str().is_empty()),
            k8s_cluster_name: flags.k8s_cluster_name,
            high_cardinality_metrics_labels: flags.enable_high_cardinality_metrics_labels,
            allow_hpa_ownership_transfer: flags.allow_hpa_ownership_transfer,
            last_active_time_refresh: Some(flags.last_active_time_refresh).filter(|d| !d.is_zero()),
            identity: keda_api::identity::IdentityPolicy {
                allow_namespace_vault_operator_identity: flags
                    .allow_namespace_vault_operator_identity
                    || env_bool(env, ENV_ALLOW_NAMESPACE_VAULT_OPERATOR_IDENTITY)?,
                allow_namespace_aws_operator_identity: flags.allow_namespace_aws_operator_identity
                    || env_bool(env, ENV_ALLOW_NAMESPACE_AWS_OPERATOR_IDENTITY)?,
                bound_token_service_accounts: keda_api::identity::ServiceAccountAllowList::parse(
                    &flags
                        .bound_token_service_accounts
                        .clone()
                        .or_else(|| env.var(ENV_BOUND_TOKEN_SERVICE_ACCOUNTS))
                        .unwrap_or_default(),
                )
                .map_err(|reason| ConfigError::ServiceAccounts { reason })?,
            },
            trigger_file_root: flags
                .trigger_file_root
                .clone()
                .or_else(|| {
                    env.var(ENV_TRIGGER_FILE_ROOT)
                        .filter(|v| !v.trim().is_empty())
                        .map(PathBuf::from)
                })
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or_else(|| PathBuf::from(keda_scalers::files::DEFAULT_TRIGGER_FILE_ROOT)),
            answer_bytes_per_namespace: usize::try_from(flags.answer_bytes_per_namespace)
                .unwrap_or(usize::MAX),
            bound_service_account_token_expiry: bound_token_expiry(env)?,
            check_unexpected_scalers_params,
            keda: KedaFlagSettings {
                client_policy: keda_flags::client_policy(env, &flags.keda)?,
                service_tls: keda_flags::service_tls(env)?,
                opentelemetry: flags.keda.enable_opentelemetry_metrics.then(|| {
                    crate::process::telemetry::otel::OtlpSettings::from_env(
                        &|name| env.var(name),
                        "keda-operator",
                        &mut warnings,
                    )
                }),
                warnings,
                log_time_encoding: flags.keda.log_time_encoding,
                kubeconfig: flags.keda.kubeconfig,
                ca_dirs: flags.keda.ca_dir,
                http_max_idle_conns_per_host: flags.keda.http_max_idle_conns_per_host,
                http_idle_conn_timeout: flags.keda.http_idle_conn_timeout,
            },
        })
    }
}

#[cfg(test)]
mod tests;
