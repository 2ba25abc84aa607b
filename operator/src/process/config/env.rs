//! The environment variables the operator reads (KEDA's names and defaults), read through
//! [`Environment`] so tests inject them, and the checks of their values.

use super::*;

/// Where the in-cluster service account's namespace is written.
pub(super) const SERVICE_ACCOUNT_NAMESPACE_FILE: &str =
    "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// KEDA's default namespace when `POD_NAMESPACE` is unset.
pub const DEFAULT_POD_NAMESPACE: &str = "keda";

/// KEDA's leader election id, the Lease's name.
pub const DEFAULT_LEADER_ELECTION_ID: &str = "operator.keda.sh";

pub const ENV_WATCH_NAMESPACE: &str = "WATCH_NAMESPACE";
pub const ENV_POD_NAMESPACE: &str = "POD_NAMESPACE";
pub const ENV_POD_NAME: &str = "POD_NAME";
/// The pod's IP (downward API): with `--shards=auto`, the host of the advertised metric
/// service address.
pub const ENV_POD_IP: &str = "POD_IP";
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
pub const ENV_RESTRICT_SECRET_ACCESS: &str = crate::shared::resolve::RESTRICT_SECRET_ACCESS_ENV;
pub use crate::shared::resolve::BOUND_SERVICE_ACCOUNT_TOKEN_EXPIRY_ENV as ENV_BOUND_SERVICE_ACCOUNT_TOKEN_EXPIRY;
pub const ENV_CHECK_UNEXPECTED_SCALERS_PARAMS: &str = crate::shared::unexpected_params::ENV;

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

pub(super) const ENV_HELP: &str = "\
Environment:
  WATCH_NAMESPACE                                Namespaces to watch, comma separated; empty or unset: all namespaces
  POD_NAMESPACE                                  Namespace of the leader election Lease and the certificate Secrets [default: keda]
  POD_NAME                                       Leader election (and shard) identity [default: <hostname>_<pid>]
  POD_IP                                         With --shards=auto: host of the metric service address on the shard Lease
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
  KEDA_CHECK_UNEXPECTED_SCALERS_PARAMS           enabled: a Warning KEDAScalerInfo Event per trigger metadata key the scaler does not read
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

/// `<hostname>_<pid>`: unique per process, so two local replicas never share an identity.
pub(super) fn default_identity(env: &dyn Environment) -> String {
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
pub(super) fn number(
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
pub(super) fn max_reconciles(
    env: &dyn Environment,
    name: &'static str,
) -> Result<Option<u16>, ConfigError> {
    let (min, max) = MAX_RECONCILES_BOUNDS;
    let n = number(env, name, (u64::from(min), u64::from(max)))?;
    // Within the bounds, so within u16.
    Ok(n.and_then(|n| u16::try_from(n).ok()))
}

/// A label selector variable (`WATCH_LABEL_SELECTOR`, `WATCH_LABEL_SELECTOR_FOR_TRIGGERAUTH`),
/// checked as the API server would parse it; empty, unset or `""` (two quotes, as KEDA's
/// `getLabelSelectorFromEnv` reads them): `None`.
pub(super) fn label_selector(
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
pub(super) fn duration(
    env: &dyn Environment,
    name: &'static str,
) -> Result<Option<Duration>, ConfigError> {
    let Some(value) = env.var(name).filter(|v| !v.trim().is_empty()) else {
        return Ok(None);
    };
    match go_duration(&value) {
        None => Err(ConfigError::Duration { name, value }),
        Some(d) if d > MAX_DURATION => Err(ConfigError::DurationTooLong { name, value }),
        Some(d) => Ok(Some(d)),
    }
}

/// A `true`/`false` variable (any case); unset or empty is false.
pub(super) fn env_bool(env: &dyn Environment, name: &'static str) -> Result<bool, ConfigError> {
    match env.var(name).filter(|v| !v.trim().is_empty()) {
        None => Ok(false),
        Some(value) => match value.trim().to_ascii_lowercase().as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(ConfigError::Bool { name, value }),
        },
    }
}

/// `KEDA_BOUND_SERVICE_ACCOUNT_TOKEN_EXPIRY`: a Go duration between 1h and 6h, default 1h, as in
/// KEDA (`pkg/util/env_resolver.go`).
pub(super) fn bound_token_expiry(env: &dyn Environment) -> Result<Duration, ConfigError> {
    let name = ENV_BOUND_SERVICE_ACCOUNT_TOKEN_EXPIRY;
    let Some(value) = env.var(name).filter(|v| !v.trim().is_empty()) else {
        return Ok(crate::shared::resolve::DEFAULT_BOUND_SERVICE_ACCOUNT_TOKEN_EXPIRY);
    };
    let (min, max) = crate::shared::resolve::BOUND_SERVICE_ACCOUNT_TOKEN_EXPIRY_BOUNDS;
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

/// `KEDA_CHECK_UNEXPECTED_SCALERS_PARAMS`: on only when exactly `enabled`, as KEDA compares it;
/// any other value set (`true`, `Enabled`) leaves it off, as in KEDA, with a warning line
/// saying so.
pub(super) fn check_unexpected_params(env: &dyn Environment, warnings: &mut Vec<String>) -> bool {
    let name = ENV_CHECK_UNEXPECTED_SCALERS_PARAMS;
    let value = env.var(name);
    let on = crate::shared::unexpected_params::UnexpectedParams::from_env_value(value.as_deref())
        .is_checking();
    if let Some(value) = value.filter(|v| !on && !v.is_empty()) {
        let shown: String = value.chars().take(40).collect();
        warnings.push(format!(
            "{name}={shown:?} has no effect: only the value \"{}\" turns the check on, as in KEDA",
            crate::shared::unexpected_params::ENABLED
        ));
    }
    on
}
