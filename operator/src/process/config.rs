//! The operator's settings: KEDA's flags (clap) and environment variables, with KEDA's
//! defaults, so nothing is required to start.
//!
//! Environment variables are read through [`Environment`], so tests inject them instead of
//! changing the process environment.

mod cluster;
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
pub use rate_limit::{RateLimit, RateLimitLayer, TokenBucket};

use crate::leader::{
    DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD, LeaseConfig,
};
use crate::telemetry::LogFormat;

/// Where the in-cluster service account's namespace is written.
const SERVICE_ACCOUNT_NAMESPACE_FILE: &str =
    "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// KEDA's default namespace when `POD_NAMESPACE` is unset.
pub const DEFAULT_POD_NAMESPACE: &str = "keda";

/// KEDA's leader election id, the Lease's name.
pub const DEFAULT_LEADER_ELECTION_ID: &str = "operator.keda.sh";

pub const ENV_WATCH_NAMESPACE: &str = "WATCH_NAMESPACE";
pub const ENV_POD_NAMESPACE: &str = "POD_NAMESPACE";
pub const ENV_POD_NAME: &str = "POD_NAME";
pub const ENV_CLUSTER_OBJECT_NAMESPACE: &str = "KEDA_CLUSTER_OBJECT_NAMESPACE";
pub const ENV_LEASE_DURATION: &str = "KEDA_OPERATOR_LEADER_ELECTION_LEASE_DURATION";
pub const ENV_RENEW_DEADLINE: &str = "KEDA_OPERATOR_LEADER_ELECTION_RENEW_DEADLINE";
pub const ENV_RETRY_PERIOD: &str = "KEDA_OPERATOR_LEADER_ELECTION_RETRY_PERIOD";
pub const ENV_RUST_LOG: &str = "RUST_LOG";
pub const ENV_HTTP_HOST_POLICY: &str = "KEDA_HTTP_HOST_POLICY";
pub const ENV_HTTP_ANY_HOST: &str = "KEDA_HTTP_ANY_HOST";
pub const ENV_ALLOW_NAMESPACE_VAULT_OPERATOR_IDENTITY: &str =
    keda_api::identity::ALLOW_NAMESPACE_VAULT_OPERATOR_IDENTITY_ENV;
pub const ENV_ALLOW_NAMESPACE_AWS_OPERATOR_IDENTITY: &str =
    keda_api::identity::ALLOW_NAMESPACE_AWS_OPERATOR_IDENTITY_ENV;
pub const ENV_BOUND_TOKEN_SERVICE_ACCOUNTS: &str =
    keda_api::identity::BOUND_TOKEN_SERVICE_ACCOUNTS_ENV;
pub const ENV_TRIGGER_FILE_ROOT: &str = "KEDA_RS_TRIGGER_FILE_ROOT";
pub const ENV_HTTP_DEFAULT_TIMEOUT: &str = "KEDA_HTTP_DEFAULT_TIMEOUT";
pub const ENV_SCALEDOBJECT_MAX_RECONCILES: &str = "KEDA_SCALEDOBJECT_CTRL_MAX_RECONCILES";
pub const ENV_SCALEDJOB_MAX_RECONCILES: &str = "KEDA_SCALEDJOB_CTRL_MAX_RECONCILES";
pub const ENV_WATCH_LABEL_SELECTOR: &str = "WATCH_LABEL_SELECTOR";
pub const ENV_WATCH_LABEL_SELECTOR_FOR_TRIGGERAUTH: &str = "WATCH_LABEL_SELECTOR_FOR_TRIGGERAUTH";
pub const ENV_RESTRICT_SECRET_ACCESS: &str = crate::resolve::RESTRICT_SECRET_ACCESS_ENV;
pub use crate::resolve::BOUND_SERVICE_ACCOUNT_TOKEN_EXPIRY_ENV as ENV_BOUND_SERVICE_ACCOUNT_TOKEN_EXPIRY;

/// KEDA's default of `KEDA_SCALEDOBJECT_CTRL_MAX_RECONCILES`.
pub const DEFAULT_SCALEDOBJECT_MAX_RECONCILES: u16 = 5;
/// KEDA's default of `KEDA_SCALEDJOB_CTRL_MAX_RECONCILES`.
pub const DEFAULT_SCALEDJOB_MAX_RECONCILES: u16 = 1;
/// The bounds of `KEDA_SCALEDOBJECT_CTRL_MAX_RECONCILES` and `KEDA_SCALEDJOB_CTRL_MAX_RECONCILES`.
pub const MAX_RECONCILES_BOUNDS: (u16, u16) = (1, 1000);
/// The bounds of `KEDA_HTTP_DEFAULT_TIMEOUT`, in milliseconds (1 ms to 1 h).
pub const HTTP_DEFAULT_TIMEOUT_BOUNDS_MS: (u64, u64) = (1, 3_600_000);
/// The longest `WATCH_LABEL_SELECTOR` (or `WATCH_LABEL_SELECTOR_FOR_TRIGGERAUTH`), in characters.
pub const MAX_LABEL_SELECTOR_LEN: usize = 4096;

const ENV_HELP: &str = "\
Environment:
  WATCH_NAMESPACE                                Namespaces to watch, comma separated; empty or unset: all namespaces
  POD_NAMESPACE                                  Namespace of the leader election Lease and the certificate Secrets [default: keda]
  POD_NAME                                       Leader election identity [default: <hostname>_<pid>]
  KEDA_CLUSTER_OBJECT_NAMESPACE                  Namespace of Secrets referenced by ClusterTriggerAuthentications
                                                 [default: the service account's namespace, else POD_NAMESPACE]
  KEDA_OPERATOR_LEADER_ELECTION_LEASE_DURATION   How long a standby waits for a silent leader (Go duration) [default: 15s]
  KEDA_OPERATOR_LEADER_ELECTION_RENEW_DEADLINE   How long the leader retries renewing before it steps down [default: 10s]
  KEDA_OPERATOR_LEADER_ELECTION_RETRY_PERIOD     How often candidates retry and the leader renews [default: 2s]
  RUST_LOG                                       Log filter; overrides --log-level
  KEDA_HTTP_HOST_POLICY                          The --http-host-policy file, when the flag is not given
  KEDA_HTTP_ANY_HOST                             true: --http-any-host, when the flag is not given [default: false]
  KEDA_RS_ALLOW_NAMESPACE_VAULT_OPERATOR_IDENTITY true: --allow-namespace-vault-operator-identity [default: false]
  KEDA_RS_ALLOW_NAMESPACE_AWS_OPERATOR_IDENTITY true: --allow-namespace-aws-operator-identity [default: false]
  KEDA_RS_BOUND_TOKEN_SERVICE_ACCOUNTS           The --bound-token-service-accounts list, when the flag is not given
  KEDA_RS_TRIGGER_FILE_ROOT                      The --trigger-file-root directory, when the flag is not given
  KEDA_HTTP_DEFAULT_TIMEOUT                      Timeout of HTTP-based scalers without their own, in ms (1 to 3600000) [default: 3000]
  KEDA_SCALEDOBJECT_CTRL_MAX_RECONCILES          ScaledObject reconciles at once (1 to 1000) [default: 5]
  KEDA_SCALEDJOB_CTRL_MAX_RECONCILES             ScaledJob reconciles at once (1 to 1000) [default: 1]
  WATCH_LABEL_SELECTOR                           Only ScaledObjects and ScaledJobs matching this label selector; empty or unset: all
  WATCH_LABEL_SELECTOR_FOR_TRIGGERAUTH           Only (Cluster)TriggerAuthentications matching this label selector; empty or unset: all
  KEDA_RESTRICT_SECRET_ACCESS                    true: read Secrets only in KEDA_CLUSTER_OBJECT_NAMESPACE [default: false]
  KEDA_BOUND_SERVICE_ACCOUNT_TOKEN_EXPIRY        Lifetime of boundServiceAccountToken tokens (Go duration, 1h to 6h) [default: 1h]
  KEDA_HTTP_MIN_TLS_VERSION                      Lowest TLS version of scalers' connections: TLS12 or TLS13 [default: TLS12]
  KEDA_HTTP_TLS_CIPHER_LIST                      TLS 1.2 cipher suites of scalers' connections, Go's names, comma or colon separated
  KEDA_HTTP_DISABLE_KEEP_ALIVE                   true: scalers' HTTP clients keep no idle connection [default: false]
  KUBECONFIG                                     Kubeconfig path; else ~/.kube/config, else the in-cluster service account

Ports: metrics :8080 (/metrics), probes :8081 (/healthz, /readyz), metric service :9666,
explain :8082 (keda-rs explain).
See docs/operations.md.";

/// Reads environment variables and the few files the settings depend on.
pub trait Environment {
    /// A variable's value; `None` when unset or not UTF-8.
    fn var(&self, name: &str) -> Option<String>;
    /// Whether a file exists.
    fn file_exists(&self, path: &Path) -> bool;
    /// A small text file's contents.
    fn read_file(&self, path: &Path) -> Option<String>;
    /// This process's id.
    fn pid(&self) -> u32;
}

/// The real process environment and file system.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessEnv;

impl Environment for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }

    fn file_exists(&self, path: &Path) -> bool {
        path.is_file()
    }

    fn read_file(&self, path: &Path) -> Option<String> {
        std::fs::read_to_string(path).ok()
    }

    fn pid(&self) -> u32 {
        std::process::id()
    }
}

/// An environment from a map, for tests: variables and files are only what was given.
#[derive(Debug, Clone, Default)]
pub struct MapEnv {
    vars: HashMap<String, String>,
    files: HashMap<PathBuf, String>,
}

impl MapEnv {
    pub fn new(vars: &[(&str, &str)]) -> Self {
        Self {
            vars: vars
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
            files: HashMap::new(),
        }
    }

    /// Adds an empty file.
    pub fn with_file(self, path: impl Into<PathBuf>) -> Self {
        self.with_file_contents(path, "")
    }

    /// Adds a file with contents.
    pub fn with_file_contents(mut self, path: impl Into<PathBuf>, contents: &str) -> Self {
        self.files.insert(path.into(), contents.to_string());
        self
    }
}

impl Environment for MapEnv {
    fn var(&self, name: &str) -> Option<String> {
        self.vars.get(name).cloned()
    }

    fn file_exists(&self, path: &Path) -> bool {
        self.files.contains_key(path)
    }

    fn read_file(&self, path: &Path) -> Option<String> {
        self.files.get(path).cloned()
    }

    fn pid(&self) -> u32 {
        4242
    }
}

/// A listen address as KEDA writes it: `:8080` (all interfaces), `127.0.0.1:8080`, or `0` to
/// turn the listener off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BindAddress(pub Option<SocketAddr>);

impl FromStr for BindAddress {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.is_empty() || s == "0" {
            return Ok(Self(None));
        }
        let invalid =
            || format!("{s:?} is not a listen address: use :PORT, IP:PORT, or 0 to disable");
        if let Some(port) = s.strip_prefix(':') {
            let port = port.parse::<u16>().map_err(|_| invalid())?;
            return Ok(Self(Some(SocketAddr::new(
                IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                port,
            ))));
        }
        if let Some(port) = s.strip_prefix("localhost:") {
            let port = port.parse::<u16>().map_err(|_| invalid())?;
            return Ok(Self(Some(SocketAddr::new(
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                port,
            ))));
        }
        s.parse::<SocketAddr>()
            .map(|addr| Self(Some(addr)))
            .map_err(|_| invalid())
    }
}

/// The command line. Every flag has KEDA's name and default.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "keda-operator",
    version,
    about = "keda-rs operator: scales workloads from ScaledObjects and ScaledJobs written for KEDA",
    after_long_help = ENV_HELP,
    args_override_self = true
)]
pub struct Flags {
    /// Address of the Prometheus /metrics endpoint (`0` disables it).
    #[arg(long, value_name = "ADDR", default_value = ":8080")]
    pub metrics_bind_address: BindAddress,
    /// Address of the /healthz and /readyz probes (`0` disables them).
    #[arg(long, value_name = "ADDR", default_value = ":8081")]
    pub health_probe_bind_address: BindAddress,
    /// Address of the metric service the metrics API server asks (served by the leader).
    #[arg(long, value_name = "ADDR", default_value = ":9666")]
    pub metrics_service_bind_address: BindAddress,
    /// Address of the explain endpoint `keda-rs explain` asks (served by the leader; callers
    /// authenticate with a bearer token; `0` disables it). See docs/explain.md.
    #[arg(long, value_name = "ADDR", default_value = ":8082")]
    pub explain_bind_address: BindAddress,
    /// PEM serving certificate of the metric service (`tls.crt` of the `keda-rs-certs` Secret).
    /// [default: <--cert-dir>/tls.crt]
    #[arg(long, value_name = "FILE")]
    pub metrics_service_cert_file: Option<PathBuf>,
    /// PEM private key of the metric service's certificate.
    /// [default: <--cert-dir>/tls.key]
    #[arg(long, value_name = "FILE")]
    pub metrics_service_key_file: Option<PathBuf>,
    /// PEM CA bundle the metric service verifies client certificates (the metrics-apiserver's,
    /// the activators') against.
    /// [default: <--cert-dir>/ca.crt]
    #[arg(long, value_name = "FILE")]
    pub metrics_service_client_ca_file: Option<PathBuf>,
    /// How often the metric service's certificate, key and client CA files are checked for
    /// changes (Go duration); a changed file is used by the next connections.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = keda_tls::DEFAULT_RELOAD_INTERVAL,
        value_parser = reload_interval
    )]
    pub cert_reload_interval: Duration,
    /// Take part in leader election so only one replica runs the controllers and scale loops.
    /// Off by default, as in KEDA; the install manifest turns it on (`--leader-elect`).
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        default_value_t = false,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub leader_elect: bool,
    /// Name of the leader election Lease.
    #[arg(long, value_name = "NAME", default_value = DEFAULT_LEADER_ELECTION_ID)]
    pub leader_election_id: String,
    /// Kubernetes API requests per second, client side (0 or less: unlimited; otherwise 0.01
    /// to 1000000).
    #[arg(long, value_name = "QPS", default_value_t = 20.0, value_parser = qps, allow_negative_numbers = true)]
    pub kube_api_qps: f32,
    /// Kubernetes API requests allowed in a burst above the QPS.
    #[arg(long, value_name = "N", default_value_t = 30)]
    pub kube_api_burst: u32,
    /// TokenReviews and SubjectAccessReviews per second the explain endpoint may send, on a
    /// client of its own (0.01 to 1000000): past it, callers it does not remember get 429 with
    /// Retry-After. The controllers' and the Lease's budgets are not touched by it.
    #[arg(
        long,
        value_name = "QPS",
        default_value_t = crate::explain::auth::DEFAULT_REVIEW_QPS,
        value_parser = positive_qps,
        allow_negative_numbers = true
    )]
    pub explain_kube_api_qps: f32,
    /// Reviews the explain endpoint may send at once above its QPS (at least 1).
    #[arg(
        long,
        value_name = "N",
        default_value_t = crate::explain::auth::DEFAULT_REVIEW_BURST,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub explain_kube_api_burst: u32,
    /// Log format: `text` or `json` (`console` is accepted for KEDA's `--zap-encoder`).
    #[arg(long, value_name = "FORMAT", default_value = "text")]
    pub log_format: LogFormat,
    /// Log filter, a tracing directive such as `info` or `keda_operator=debug,kube=warn`.
    #[arg(long, value_name = "FILTER", default_value = "info")]
    pub log_level: String,
    /// YAML file mapping namespace -> host patterns its `http` triggers may claim (see
    /// docs/http.md#host-policy); give the activator the same file. Without it (and without
    /// --http-any-host) no namespace may claim any host.
    #[arg(long, value_name = "FILE")]
    pub http_host_policy: Option<PathBuf>,
    /// No host policy: any namespace's `http` triggers may claim any host, the oldest claim
    /// winning (KEDA's HTTP add-on behaviour, which has no host ownership); give the activator
    /// the same flag. Excludes --http-host-policy.
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        default_value_t = false,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub http_any_host: bool,
    /// Let a namespaced TriggerAuthentication's `hashiCorpVault` `kubernetes` login send the
    /// operator's own service-account token (no credential) or a file of the operator's
    /// (`credential.serviceAccount`) to the Vault it names, as KEDA does. Off: only
    /// ClusterTriggerAuthentications may (`KEDA_RS_ALLOW_NAMESPACE_VAULT_OPERATOR_IDENTITY`).
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        default_value_t = false,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub allow_namespace_vault_operator_identity: bool,
    /// Let triggers of any namespace use the operator's own AWS credentials, as KEDA does:
    /// `identityOwner: operator`, an `awsRoleArn` of a namespaced TriggerAuthentication
    /// assumed with them, and requests signed with either sent to the trigger's `awsEndpoint`.
    /// Off: only a ClusterTriggerAuthentication's `awsRoleArn` is assumed, towards AWS's own
    /// endpoints (`KEDA_RS_ALLOW_NAMESPACE_AWS_OPERATOR_IDENTITY`).
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        default_value_t = false,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub allow_namespace_aws_operator_identity: bool,
    /// ServiceAccounts a namespaced TriggerAuthentication may have tokens minted for
    /// (`boundServiceAccountToken`, `hashiCorpVault.credential.serviceAccountName`): a comma
    /// list of `<namespace>/<name>`, either part `*`. Empty (the default): none; `*/*`: any, as
    /// KEDA (`KEDA_RS_BOUND_TOKEN_SERVICE_ACCOUNTS`). The operator also needs RBAC to create
    /// their tokens.
    #[arg(long, value_name = "LIST")]
    pub bound_token_service_accounts: Option<String>,
    /// The only directory under which files named by trigger metadata (`external`'s
    /// `tlsCertFile`, postgresql's `sslrootcert`/`sslcert`/`sslkey`) are read; `/` allows any
    /// path, as KEDA (`KEDA_RS_TRIGGER_FILE_ROOT`).
    #[arg(long, value_name = "DIR")]
    pub trigger_file_root: Option<PathBuf>,
    /// Directory under which a ClusterTriggerAuthentication's `filePath` is read (KEDA's flag);
    /// unset, `filePath` is refused with a message naming this flag.
    #[arg(long, value_name = "DIR")]
    pub filepath_auth_root_path: Option<PathBuf>,
    /// Cluster name in the `source` and `subject` of the CloudEvents that CloudEventSources
    /// receive, when a source names none (KEDA's flag).
    #[arg(long, value_name = "NAME", default_value = crate::cloud_events::DEFAULT_CLUSTER_NAME)]
    pub k8s_cluster_name: String,
    /// Let a ScaledObject with `scaledobject.keda.sh/transfer-hpa-ownership: "true"` take over
    /// the HPA it names in `spec.advanced.horizontalPodAutoscalerConfig.name` although it does
    /// not own it, as KEDA does. Off: keda-rs changes and deletes only HPAs it owns.
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        default_value_t = false,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub allow_hpa_ownership_transfer: bool,
    /// Give `keda_scaler_http_request_duration_seconds` the object, trigger and metric labels
    /// of `keda_scaler_http_requests_total` (KEDA's flag; off: `scaler` and `status_code` only).
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        default_value_t = false,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub enable_high_cardinality_metrics_labels: bool,
    /// The flags for KEDA's flags with a meaning here (`keda_flags`).
    #[command(flatten)]
    pub keda: keda_flags::KedaArgs,
}

/// Which namespaces the controllers and the resolver watch (`WATCH_NAMESPACE`).
pub use crate::resolve::WatchScope;

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
    pub metrics_service_tls: crate::metrics_service::TlsFiles,
    /// How often those files are checked for changes.
    pub cert_reload_interval: Duration,
    /// The Lease to compete for; `None` when leader election is off (this process leads).
    pub leader_election: Option<LeaseConfig>,
    pub kube_api_qps: f32,
    pub kube_api_burst: u32,
    /// The explain endpoint's review budget (`--explain-kube-api-qps`,
    /// `--explain-kube-api-burst`), on a client of its own.
    pub explain_review_budget: crate::explain::auth::ReviewBudget,
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
    /// `--allow-namespace-vault-operator-identity`, `--allow-namespace-aws-operator-identity`,
    /// `--bound-token-service-accounts`.
    pub identity: keda_api::identity::IdentityPolicy,
    /// `--trigger-file-root` (default [`keda_scalers::files::DEFAULT_TRIGGER_FILE_ROOT`]).
    pub trigger_file_root: PathBuf,
    /// Lifetime of `boundServiceAccountToken` tokens (`KEDA_BOUND_SERVICE_ACCOUNT_TOKEN_EXPIRY`,
    /// default 1h, 1h to 6h).
    pub bound_service_account_token_expiry: Duration,
    /// KEDA's flags ([`keda_flags`]): what they set, and one warning per flag without effect.
    pub keda: KedaFlagSettings,
}

/// What KEDA's flags set beyond the fields above (see [`keda_flags::table`]).
#[derive(Debug, Clone)]
pub struct KedaFlagSettings {
    /// One line per KEDA flag given that has no effect here, logged at start.
    pub warnings: Vec<String>,
    /// `--zap-time-encoding`.
    pub log_time_encoding: crate::telemetry::TimeEncoding,
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
    pub opentelemetry: Option<crate::telemetry::otel::OtlpSettings>,
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
    LeaderElection(#[from] crate::leader::LeaderError),
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
        let leader_election = if flags.leader_elect {
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
                crate::metrics_service::TlsFiles {
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
            kube_api_qps: flags.kube_api_qps,
            kube_api_burst: flags.kube_api_burst,
            explain_review_budget: crate::explain::auth::ReviewBudget {
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
            restrict_secret_access: crate::resolve::restrict_secret_access(
                env.var(ENV_RESTRICT_SECRET_ACCESS),
            ),
            file_path_auth_root: flags
                .filepath_auth_root_path
                .filter(|p| !p.as_os_str().is_empty()),
            k8s_cluster_name: flags.k8s_cluster_name,
            high_cardinality_metrics_labels: flags.enable_high_cardinality_metrics_labels,
            allow_hpa_ownership_transfer: flags.allow_hpa_ownership_transfer,
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
            bound_service_account_token_expiry: bound_token_expiry(env)?,
            keda: KedaFlagSettings {
                client_policy: keda_flags::client_policy(env, &flags.keda)?,
                service_tls: keda_flags::service_tls(env)?,
                opentelemetry: flags.keda.enable_opentelemetry_metrics.then(|| {
                    crate::telemetry::otel::OtlpSettings::from_env(
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

/// `<hostname>_<pid>`: unique per process, so two local replicas never share an identity.
fn default_identity(env: &dyn Environment) -> String {
    let host = env
        .var("HOSTNAME")
        .filter(|h| !h.trim().is_empty())
        .or_else(|| {
            env.read_file(Path::new("/etc/hostname"))
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| "keda-operator".to_string());
    format!("{}_{}", host.trim(), env.pid())
}

/// An optional whole-number variable within `(min, max)`.
fn number(
    env: &dyn Environment,
    name: &'static str,
    (min, max): (u64, u64),
) -> Result<Option<u64>, ConfigError> {
    let Some(value) = env.var(name).filter(|v| !v.trim().is_empty()) else {
        return Ok(None);
    };
    match value.trim().parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(Some(n)),
        _ => Err(ConfigError::Number {
            name,
            value,
            min,
            max,
        }),
    }
}

/// An optional `KEDA_*_CTRL_MAX_RECONCILES` within [`MAX_RECONCILES_BOUNDS`].
fn max_reconciles(env: &dyn Environment, name: &'static str) -> Result<Option<u16>, ConfigError> {
    let (min, max) = MAX_RECONCILES_BOUNDS;
    let n = number(env, name, (u64::from(min), u64::from(max)))?;
    // Within the bounds, so within u16.
    Ok(n.and_then(|n| u16::try_from(n).ok()))
}

/// A label selector variable (`WATCH_LABEL_SELECTOR`, `WATCH_LABEL_SELECTOR_FOR_TRIGGERAUTH`),
/// checked as the API server would parse it; empty, unset or `""` (two quotes, as KEDA's
/// `getLabelSelectorFromEnv` reads them): `None`.
fn label_selector(
    env: &dyn Environment,
    name: &'static str,
) -> Result<Option<String>, ConfigError> {
    let Some(value) = env
        .var(name)
        .filter(|v| !v.trim().is_empty() && v.trim() != "\"\"")
    else {
        return Ok(None);
    };
    if value.chars().count() > MAX_LABEL_SELECTOR_LEN {
        return Err(ConfigError::LabelSelector {
            name,
            value: value.chars().take(40).collect::<String>() + "...",
            reason: format!("longer than {MAX_LABEL_SELECTOR_LEN} characters"),
        });
    }
    keda_scalers::cluster::LabelSelector::parse(&value).map_err(|e| {
        ConfigError::LabelSelector {
            name,
            value: value.clone(),
            reason: e.to_string(),
        }
    })?;
    Ok(Some(value.trim().to_string()))
}

/// An optional duration variable in Go's format (`15s`, `500ms`, `1m30s`).
fn duration(env: &dyn Environment, name: &'static str) -> Result<Option<Duration>, ConfigError> {
    let Some(value) = env.var(name).filter(|v| !v.trim().is_empty()) else {
        return Ok(None);
    };
    match go_duration(&value) {
        None => Err(ConfigError::Duration { name, value }),
        Some(d) if d > MAX_DURATION => Err(ConfigError::DurationTooLong { name, value }),
        Some(d) => Ok(Some(d)),
    }
}

/// `KEDA_BOUND_SERVICE_ACCOUNT_TOKEN_EXPIRY`: a Go duration between 1h and 6h, default 1h, as in
/// KEDA (`pkg/util/env_resolver.go`).
/// A `true`/`false` variable (any case); unset or empty is false.
fn env_bool(env: &dyn Environment, name: &'static str) -> Result<bool, ConfigError> {
    match env.var(name).filter(|v| !v.trim().is_empty()) {
        None => Ok(false),
        Some(value) => match value.trim().to_ascii_lowercase().as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(ConfigError::Bool { name, value }),
        },
    }
}

fn bound_token_expiry(env: &dyn Environment) -> Result<Duration, ConfigError> {
    let name = ENV_BOUND_SERVICE_ACCOUNT_TOKEN_EXPIRY;
    let Some(value) = env.var(name).filter(|v| !v.trim().is_empty()) else {
        return Ok(crate::resolve::DEFAULT_BOUND_SERVICE_ACCOUNT_TOKEN_EXPIRY);
    };
    let (min, max) = crate::resolve::BOUND_SERVICE_ACCOUNT_TOKEN_EXPIRY_BOUNDS;
    match go_duration(&value) {
        Some(d) if (min..=max).contains(&d) => Ok(d),
        _ => Err(ConfigError::DurationOutOfBounds {
            name,
            value,
            min: "1h",
            max: "6h",
        }),
    }
}

/// The longest duration a flag or variable accepts: one hour.
pub const MAX_DURATION: Duration = Duration::from_secs(3600);

/// The bounds of a positive `--kube-api-qps`.
pub const QPS_BOUNDS: (f32, f32) = (0.01, 1_000_000.0);

/// `--kube-api-qps`: 0 or less (no limit), or within [`QPS_BOUNDS`].
fn qps(value: &str) -> Result<f32, String> {
    let (min, max) = QPS_BOUNDS;
    match value.trim().parse::<f32>() {
        Ok(q) if q <= 0.0 || (min..=max).contains(&q) => Ok(q),
        _ => Err(format!(
            "{value:?} is not 0 or less (no limit) or a number between {min} and {max}"
        )),
    }
}

/// `--explain-kube-api-qps`: a number within [`QPS_BOUNDS`] (no "unlimited": the endpoint is
/// reachable by anyone who reaches the pod).
fn positive_qps(value: &str) -> Result<f32, String> {
    let (min, max) = QPS_BOUNDS;
    match value.trim().parse::<f32>() {
        Ok(q) if (min..=max).contains(&q) => Ok(q),
        _ => Err(format!("{value:?} is not a number between {min} and {max}")),
    }
}

/// A non-negative duration in Go's format (`15s`, `500ms`, `1m30s`).
fn go_duration(value: &str) -> Option<Duration> {
    let parsed: jiff::SignedDuration = value.trim().parse().ok()?;
    Duration::try_from(parsed).ok()
}

/// `--cert-reload-interval`: a positive Go duration, at most [`MAX_DURATION`].
fn reload_interval(value: &str) -> Result<Duration, String> {
    go_duration(value)
        .filter(|d| !d.is_zero() && *d <= MAX_DURATION)
        .ok_or_else(|| {
            format!(
                "{value:?} is not a duration between 1ns and 1h: use Go's format, for example 10s or 500ms"
            )
        })
}

#[cfg(test)]
mod tests;
