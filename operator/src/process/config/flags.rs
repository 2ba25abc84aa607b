//! The command line: every flag with KEDA's name and default, and the checks of their values.

use super::*;

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
    /// `auto`: every replica works, each on the objects a consistent-hash ring of the live
    /// replicas gives it (one Lease per replica, `keda-rs-operator-shard-<POD_NAME>`, renewed with
    /// the leader election durations); replaces leader election. `off` (default): one leader.
    #[arg(long, value_name = "MODE", default_value = "off", value_parser = ["off", "auto"])]
    pub shards: String,
    /// `host:port` the metrics-apiserver reaches this replica's metric service at, written on
    /// its shard Lease (default: `$POD_IP` and the metric service port, else the metric
    /// service's bind address when it is not a wildcard).
    #[arg(long, value_name = "HOST:PORT")]
    pub shard_address: Option<String>,
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
        default_value_t = crate::serve::explain::auth::DEFAULT_REVIEW_QPS,
        value_parser = positive_qps,
        allow_negative_numbers = true
    )]
    pub explain_kube_api_qps: f32,
    /// Reviews the explain endpoint may send at once above its QPS (at least 1).
    #[arg(
        long,
        value_name = "N",
        default_value_t = crate::serve::explain::auth::DEFAULT_REVIEW_BURST,
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
    /// The bytes of answers the reads of one namespace's triggers may hold at once (default
    /// 67108864, 64 MiB); a read that would hold more fails, for that namespace only.
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = 67_108_864,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub answer_bytes_per_namespace: u64,
    /// Directory under which a ClusterTriggerAuthentication's `filePath` is read (KEDA's flag);
    /// unset, `filePath` is refused with a message naming this flag.
    #[arg(long, value_name = "DIR")]
    pub filepath_auth_root_path: Option<PathBuf>,
    /// Cluster name in the `source` and `subject` of the CloudEvents that CloudEventSources
    /// receive, when a source names none (KEDA's flag).
    #[arg(long, value_name = "NAME", default_value = crate::serve::cloud_events::DEFAULT_CLUSTER_NAME)]
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
    /// How often a ScaledObject's or ScaledJob's `status.lastActiveTime` is written again while
    /// it stays active (a Go duration up to 1h). `0` (default): only when it becomes active and
    /// when it stops being active, so a steady cluster makes no status writes; KEDA writes it on
    /// every active poll.
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = refresh_interval)]
    pub last_active_time_refresh: Duration,
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

/// The longest duration a flag or variable accepts: one hour.
pub const MAX_DURATION: Duration = Duration::from_secs(3600);

/// The bounds of a positive `--kube-api-qps`.
pub const QPS_BOUNDS: (f32, f32) = (0.01, 1_000_000.0);

/// `--kube-api-qps`: 0 or less (no limit), or within [`QPS_BOUNDS`].
pub(super) fn qps(value: &str) -> Result<f32, String> {
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
pub(super) fn positive_qps(value: &str) -> Result<f32, String> {
    let (min, max) = QPS_BOUNDS;
    match value.trim().parse::<f32>() {
        Ok(q) if (min..=max).contains(&q) => Ok(q),
        _ => Err(format!("{value:?} is not a number between {min} and {max}")),
    }
}

/// A non-negative duration in Go's format (`15s`, `500ms`, `1m30s`).
pub(super) fn go_duration(value: &str) -> Option<Duration> {
    let parsed: jiff::SignedDuration = value.trim().parse().ok()?;
    Duration::try_from(parsed).ok()
}

/// `--last-active-time-refresh`: a Go duration from 0 (off) to [`MAX_DURATION`].
pub(super) fn refresh_interval(value: &str) -> Result<Duration, String> {
    // Go's `time.ParseDuration` takes a bare `0`; jiff wants a unit.
    let zero = value.trim() == "0";
    zero.then_some(Duration::ZERO)
        .or_else(|| go_duration(value))
        .filter(|d| *d <= MAX_DURATION)
        .ok_or_else(|| {
            format!(
                "{value:?} is not a duration between 0 (off) and 1h: use Go's format, for example 5m"
            )
        })
}

/// `--cert-reload-interval`: a positive Go duration, at most [`MAX_DURATION`].
pub(super) fn reload_interval(value: &str) -> Result<Duration, String> {
    go_duration(value)
        .filter(|d| !d.is_zero() && *d <= MAX_DURATION)
        .ok_or_else(|| {
            format!(
                "{value:?} is not a duration between 1ns and 1h: use Go's format, for example 10s or 500ms"
            )
        })
}
