//! KEDA's operator flags (`cmd/operator/main.go`, its manifests and Helm chart, at KEDA commit
//! 8b4f083ca8c8c2baf8477e322bd4d16ac4dfa09a and kedacore/charts
//! 1444d00d90d7668cf7f53f270777d039371d90d0): the one table saying what each does here, and
//! the flags keda-rs adds for those with a meaning ([`KedaArgs`]). See
//! [`keda_cli::keda_flags`] for how the table is applied.

use std::path::PathBuf;
use std::time::Duration;

use keda_cli::keda_flags::{KedaFlag, OFF_ADDRESS, Takes, common_flags};

/// KEDA's default `--ca-dir`.
pub const DEFAULT_CA_DIR: &str = "/custom/ca";

const CERTS: &str = "keda-rs issues and renews its own certificates (Secrets keda-rs-*-certs in \
                     POD_NAMESPACE) whenever the --cert-dir files do not exist, and patches the \
                     webhook's and the APIService's caBundle itself";

/// Every flag of KEDA's operator, with its meaning in keda-rs.
pub fn table() -> Vec<KedaFlag> {
    let own = [
        KedaFlag::same("leader-elect", Takes::Bool),
        KedaFlag::same("leader-election-id", Takes::Value),
        KedaFlag::same("metrics-bind-address", Takes::Value),
        KedaFlag::same("health-probe-bind-address", Takes::Value),
        KedaFlag::same("metrics-service-bind-address", Takes::Value),
        KedaFlag::same("kube-api-qps", Takes::Value),
        KedaFlag::same("kube-api-burst", Takes::Value),
        KedaFlag::same("k8s-cluster-name", Takes::Value),
        KedaFlag::same("filepath-auth-root-path", Takes::Value),
        KedaFlag::same("enable-high-cardinality-metrics-labels", Takes::Bool),
        KedaFlag::same("enable-prometheus-metrics", Takes::Bool),
        KedaFlag::same("enable-opentelemetry-metrics", Takes::Bool),
        KedaFlag::same("cert-dir", Takes::Value),
        KedaFlag::same("ca-dir", Takes::Value),
        KedaFlag::same("kubeconfig", Takes::Value),
        KedaFlag::same("http-max-idle-conns-per-host", Takes::Value),
        KedaFlag::same("http-idle-conn-timeout", Takes::Value),
        KedaFlag::no_effect(
            "http-max-idle-conns",
            Takes::Value,
            "each scaler's pooled HTTP client talks to one server and keeps at most \
             --http-max-idle-conns-per-host idle connections; there is no process-wide pool to cap",
            &["0"],
        ),
        KedaFlag::no_effect(
            "disable-compression",
            Takes::Bool,
            "keda-rs' Kubernetes client never asks for compressed responses",
            &["true"],
        ),
        KedaFlag::no_effect(
            "profiling-bind-address",
            Takes::Value,
            "Go's pprof profiles do not exist in a Rust process",
            OFF_ADDRESS,
        ),
        KedaFlag::no_effect("enable-cert-rotation", Takes::Bool, CERTS, &["true"]),
        KedaFlag::no_effect("cert-secret-name", Takes::Value, CERTS, &[]),
        KedaFlag::no_effect("operator-service-name", Takes::Value, CERTS, &[]),
        KedaFlag::no_effect("metrics-server-service-name", Takes::Value, CERTS, &[]),
        KedaFlag::no_effect("webhooks-service-name", Takes::Value, CERTS, &[]),
        KedaFlag::no_effect("k8s-cluster-domain", Takes::Value, CERTS, &[]),
        KedaFlag::no_effect("validating-webhook-name", Takes::Value, CERTS, &[]),
        KedaFlag::no_effect("enable-webhook-patching", Takes::Bool, CERTS, &["true"]),
        KedaFlag::no_effect("enable-apiservice-patching", Takes::Bool, CERTS, &["true"]),
    ];
    own.into_iter().chain(common_flags()).collect()
}

/// The flags keda-rs has for KEDA's operator flags with a meaning here (flattened into
/// [`super::Flags`]).
#[derive(Debug, Clone, clap::Args)]
pub struct KedaArgs {
    /// Serve the Prometheus /metrics endpoint (KEDA's flag; `false` turns it off, as
    /// `--metrics-bind-address=0` does).
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        default_value_t = true,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub enable_prometheus_metrics: bool,
    /// Export the metrics over OTLP with KEDA's OpenTelemetry names, configured by the
    /// `OTEL_*` variables (KEDA's flag; docs/operations.md).
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        default_value_t = false,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub enable_opentelemetry_metrics: bool,
    /// Directory of the metric service's certificate files `tls.crt`, `tls.key`, `ca.crt`
    /// (KEDA's flag); a `--metrics-service-*-file` flag names one file instead [default: /certs].
    #[arg(long, value_name = "DIR")]
    pub cert_dir: Option<PathBuf>,
    /// Directory of PEM CA certificates every scaler trusts besides the system's (KEDA's flag;
    /// may be given several times; a missing directory is skipped).
    #[arg(long, value_name = "DIR", action = clap::ArgAction::Append, default_value = DEFAULT_CA_DIR)]
    pub ca_dir: Vec<PathBuf>,
    /// Kubeconfig of the cluster (controller-runtime's flag); else KUBECONFIG, ~/.kube/config,
    /// the pod's service account.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Idle connections each scaler's HTTP client keeps to its server (KEDA's flag; at most 16,
    /// the requests one client has in flight).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub http_max_idle_conns_per_host: usize,
    /// How long an idle HTTP connection of a scaler stays open (KEDA's flag, a Go duration
    /// above 0, at most 1h).
    #[arg(long, value_name = "DURATION", default_value = "90s", value_parser = idle_timeout)]
    pub http_idle_conn_timeout: Duration,
    /// Timestamp encoding of log lines: rfc3339, rfc3339nano, iso8601, epoch, millis, nano
    /// (KEDA's --zap-time-encoding).
    #[arg(long, value_name = "ENCODING", default_value = "default")]
    pub log_time_encoding: crate::process::telemetry::TimeEncoding,
}

/// `KEDA_HTTP_MIN_TLS_VERSION`, `KEDA_HTTP_TLS_CIPHER_LIST` and `KEDA_HTTP_DISABLE_KEEP_ALIVE`
/// with the idle-pool flags: everything of the scalers' client policy but the `--ca-dir`
/// certificates, which `main` reads.
///
/// # Errors
/// A version or suite rustls cannot do, or a keep-alive value that is not a boolean.
pub fn client_policy(
    env: &dyn super::Environment,
    args: &KedaArgs,
) -> Result<keda_scalers::client_policy::ClientPolicy, super::ConfigError> {
    let present = |name: &str| env.var(name).filter(|v| !v.trim().is_empty());
    let tls = keda_tls::TlsPolicy::parse(
        "KEDA_HTTP_MIN_TLS_VERSION",
        present("KEDA_HTTP_MIN_TLS_VERSION").as_deref(),
        "KEDA_HTTP_TLS_CIPHER_LIST",
        present("KEDA_HTTP_TLS_CIPHER_LIST").as_deref(),
    )?;
    let disable_keep_alive = match present("KEDA_HTTP_DISABLE_KEEP_ALIVE") {
        None => false,
        Some(value) => keda_cli::keda_flags::go_bool(value.trim()).ok_or_else(|| {
            super::ConfigError::KedaFlag(format!(
                "KEDA_HTTP_DISABLE_KEEP_ALIVE={value:?} is neither true nor false"
            ))
        })?,
    };
    Ok(keda_scalers::client_policy::ClientPolicy {
        extra_roots: Vec::new(),
        tls,
        disable_keep_alive,
        max_idle_per_host: args.http_max_idle_conns_per_host,
        idle_timeout: args.http_idle_conn_timeout,
    })
}

/// `KEDA_SERVICE_MIN_TLS_VERSION` and `KEDA_SERVICE_TLS_CIPHER_LIST` (else the `KEDA_HTTP_*`
/// ones) for the metric service.
///
/// # Errors
/// A version or suite rustls cannot do.
pub fn service_tls(
    env: &dyn super::Environment,
) -> Result<keda_tls::TlsPolicy, super::ConfigError> {
    // Unfiltered: a service variable set to "" is set (KEDA's `os.LookupEnv`).
    let var = |name: &str| env.var(name);
    Ok(keda_tls::policy::service_policy_from(&var)?)
}

fn idle_timeout(value: &str) -> Result<Duration, String> {
    let parsed: jiff::SignedDuration = value
        .trim()
        .parse()
        .map_err(|_| format!("{value:?} is not a duration: use Go's format, for example 90s"))?;
    Duration::try_from(parsed)
        .ok()
        .filter(|d| !d.is_zero() && *d <= super::MAX_DURATION)
        .ok_or_else(|| format!("{value:?} must be a duration above 0 and at most 1h"))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use crate::process::config::{MapEnv, Settings};
    use crate::process::telemetry::{LogFormat, TimeEncoding};

    fn parse(args: &[&str]) -> Settings {
        let argv = std::iter::once("keda-operator").chain(args.iter().copied());
        Settings::from_sources(argv, &MapEnv::default()).expect("settings")
    }

    #[test]
    fn zap_flags_set_the_log_level_format_and_time_encoding() {
        let settings = parse(&[
            "--zap-log-level=error",
            "--zap-encoder",
            "json",
            "--zap-time-encoding=epoch",
        ]);
        assert_eq!(settings.log_filter, "error");
        assert_eq!(settings.log_format, LogFormat::Json);
        assert_eq!(settings.keda.log_time_encoding, TimeEncoding::Epoch);
        assert_eq!(parse(&["--zap-log-level=2"]).log_filter, "trace");
        assert_eq!(parse(&[]).keda.log_time_encoding, TimeEncoding::Default);
    }

    #[test]
    fn cert_dir_moves_the_metric_service_files_unless_a_file_flag_names_one() {
        let settings = parse(&["--cert-dir=/etc/keda", "--metrics-service-key-file=/k.pem"]);
        let tls = settings.metrics_service_tls;
        assert_eq!(tls.cert, PathBuf::from("/etc/keda/tls.crt"));
        assert_eq!(tls.key, PathBuf::from("/k.pem"));
        assert_eq!(tls.client_ca, PathBuf::from("/etc/keda/ca.crt"));
        assert_eq!(
            parse(&[]).metrics_service_tls.cert,
            PathBuf::from("/certs/tls.crt")
        );
    }

    #[test]
    fn enable_prometheus_metrics_false_turns_metrics_off_as_keda_does() {
        assert_eq!(
            parse(&["--enable-prometheus-metrics=false"]).metrics_addr,
            None
        );
        assert!(
            parse(&["--enable-prometheus-metrics"])
                .metrics_addr
                .is_some()
        );
    }

    #[test]
    fn enable_opentelemetry_metrics_reads_the_otel_variables_and_warns_about_bad_ones() {
        assert!(parse(&[]).keda.opentelemetry.is_none());
        assert!(
            parse(&["--enable-opentelemetry-metrics=false"])
                .keda
                .opentelemetry
                .is_none()
        );
        let env = MapEnv::new(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            ("OTEL_METRIC_EXPORT_INTERVAL", "soon"),
        ]);
        let argv = ["keda-operator", "--enable-opentelemetry-metrics"];
        let settings = Settings::from_sources(argv, &env).expect("settings");
        let otlp = settings.keda.opentelemetry.expect("exporter settings");
        assert_eq!(otlp.endpoint.as_str(), "http://collector:4318/v1/metrics");
        assert_eq!(otlp.interval, Duration::from_secs(60));
        assert_eq!(
            settings.keda.warnings.len(),
            1,
            "{:?}",
            settings.keda.warnings
        );
        assert!(settings.keda.warnings[0].starts_with("OTEL_METRIC_EXPORT_INTERVAL="));
    }

    #[test]
    fn ca_dirs_default_to_custom_ca_and_repeat() {
        assert_eq!(parse(&[]).keda.ca_dirs, vec![PathBuf::from("/custom/ca")]);
        assert_eq!(
            parse(&["--ca-dir=/a", "-ca-dir", "/b"]).keda.ca_dirs,
            vec![PathBuf::from("/a"), PathBuf::from("/b")]
        );
    }

    #[test]
    fn http_pool_flags_parse_and_refuse_zero_timeouts() {
        let settings = parse(&[
            "--http-max-idle-conns-per-host=4",
            "--http-idle-conn-timeout=2m",
        ]);
        assert_eq!(settings.keda.http_max_idle_conns_per_host, 4);
        assert_eq!(
            settings.keda.http_idle_conn_timeout,
            Duration::from_secs(120)
        );
        let argv = ["keda-operator", "--http-idle-conn-timeout=0s"];
        assert!(Settings::from_sources(argv, &MapEnv::default()).is_err());
    }

    #[test]
    fn flags_without_effect_give_one_warning_each() {
        let settings = parse(&[
            "--profiling-bind-address=:8082",
            "--disable-compression=true",
            "--v=3",
            "--cert-secret-name=kedaorg-certs",
        ]);
        assert_eq!(
            settings.keda.warnings.len(),
            3,
            "{:?}",
            settings.keda.warnings
        );
        assert!(
            settings.keda.warnings[0].starts_with("--profiling-bind-address=:8082 has no effect")
        );
    }
}

#[cfg(test)]
mod env_tests {
    use crate::process::config::{MapEnv, Settings};

    fn parse(env: &[(&str, &str)]) -> Result<Settings, crate::process::config::ConfigError> {
        Settings::from_sources(
            ["keda-operator", "--http-max-idle-conns-per-host=3"],
            &MapEnv::new(env),
        )
    }

    #[test]
    fn keda_http_variables_set_the_scalers_client_policy() {
        let settings = parse(&[
            ("KEDA_HTTP_MIN_TLS_VERSION", "TLS13"),
            (
                "KEDA_HTTP_TLS_CIPHER_LIST",
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            ),
            ("KEDA_HTTP_DISABLE_KEEP_ALIVE", "true"),
        ])
        .expect("settings");
        let policy = settings.keda.client_policy;
        assert!(policy.tls.tls13_only);
        assert_eq!(
            policy.tls.tls12_suites,
            Some(vec!["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".to_string()])
        );
        assert!(policy.disable_keep_alive);
        assert_eq!(policy.max_idle_per_host, 3);
        let defaults = parse(&[]).expect("settings").keda.client_policy;
        assert!(!defaults.tls.tls13_only && !defaults.disable_keep_alive);
    }

    #[test]
    fn a_cbc_suite_or_a_bad_keep_alive_is_refused_naming_the_variable() {
        let error = parse(&[("KEDA_HTTP_TLS_CIPHER_LIST", "TLS_RSA_WITH_AES_128_CBC_SHA")])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.starts_with("KEDA_HTTP_TLS_CIPHER_LIST: cipher suite TLS_RSA_WITH_AES_128_CBC_SHA is not supported"), "{error}");
        let error = parse(&[("KEDA_HTTP_DISABLE_KEEP_ALIVE", "maybe")])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.contains("KEDA_HTTP_DISABLE_KEEP_ALIVE"), "{error}");
    }
}
