//! Command-line flags, named as Kubernetes' own aggregated API servers name them.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

/// The environment variables the metrics-apiserver reads, for `--help`.
const ENV_HELP: &str = "\
Environment:
  POD_NAMESPACE     Namespace of the Secret keda-rs-metrics-apiserver-certs (--certs-namespace) [default: keda]
  KUBECONFIG        Kubeconfig path when --kubeconfig is not given; else ~/.kube/config, else the pod's service account
  RUST_LOG          Log filter [default: info]

See docs/metrics-apiserver.md.";

/// keda-rs metrics-apiserver: serves `external.metrics.k8s.io/v1beta1` to the HPA through the
/// kube-apiserver aggregator, answering from the keda-rs operator's metric service.
#[derive(Clone, Debug, Parser)]
#[command(name = "keda-metrics-apiserver", version, about, long_about = None, after_help = ENV_HELP, args_override_self = true)]
pub struct Args {
    /// The address the secure port and the metrics port listen on.
    #[arg(long, default_value = "0.0.0.0")]
    pub bind_address: IpAddr,

    /// The HTTPS port serving the external metrics API, discovery, OpenAPI and the health
    /// endpoints (`/healthz`, `/livez`, `/readyz`).
    #[arg(long, default_value_t = 6443)]
    pub secure_port: u16,

    /// The plain-HTTP port serving Prometheus metrics at `/metrics`.
    #[arg(long, default_value_t = 8080)]
    pub metrics_port: u16,

    /// PEM serving certificate (chain) of the secure port. Reloaded when the file changes.
    /// Without it (and `--tls-private-key-file`), a self-signed certificate is generated at
    /// start for `--self-signed-cert-hosts`.
    #[arg(long, requires = "tls_private_key_file")]
    pub tls_cert_file: Option<PathBuf>,

    /// PEM private key of `--tls-cert-file`. Reloaded when the file changes.
    #[arg(long, requires = "tls_cert_file")]
    pub tls_private_key_file: Option<PathBuf>,

    /// Names and addresses of the self-signed certificate generated when no
    /// `--tls-cert-file` is given.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "localhost,127.0.0.1,keda-metrics-apiserver,keda-metrics-apiserver.keda,keda-metrics-apiserver.keda.svc"
    )]
    pub self_signed_cert_hosts: Vec<String>,

    /// PEM CA bundle that signs the front proxy's (kube-apiserver aggregator's) client
    /// certificate. Reloaded when the file changes. Without it, the CA, allowed names and
    /// header names are read from ConfigMap kube-system/extension-apiserver-authentication
    /// and followed as it changes.
    #[arg(long)]
    pub requestheader_client_ca_file: Option<PathBuf>,

    /// Common names allowed in the front proxy's client certificate (comma-separated). Empty:
    /// any certificate signed by the request-header CA.
    #[arg(long, value_delimiter = ',')]
    pub requestheader_allowed_names: Vec<String>,

    /// Headers naming the user, first non-empty wins (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "X-Remote-User")]
    pub requestheader_username_headers: Vec<String>,

    /// Headers naming the groups (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "X-Remote-Group")]
    pub requestheader_group_headers: Vec<String>,

    /// Prefixes of the headers carrying extra user attributes (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "X-Remote-Extra-")]
    pub requestheader_extra_headers_prefix: Vec<String>,

    /// Kubeconfig used to read ConfigMap kube-system/extension-apiserver-authentication.
    /// Default: `--kubeconfig`, then in-cluster configuration or `$KUBECONFIG`.
    #[arg(long)]
    pub authentication_kubeconfig: Option<PathBuf>,

    /// Kubeconfig used to create SubjectAccessReviews. Default: `--kubeconfig`, then
    /// in-cluster configuration or `$KUBECONFIG`.
    #[arg(long)]
    pub authorization_kubeconfig: Option<PathBuf>,

    /// Kubeconfig for both of the above when they are not given.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,

    /// How long an allowed SubjectAccessReview decision is reused (e.g. `10s`).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub authorization_webhook_cache_authorized_ttl: Duration,

    /// How long a denied SubjectAccessReview decision is reused (e.g. `10s`).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub authorization_webhook_cache_unauthorized_ttl: Duration,

    /// Authorize a metric read by first asking whether the user may `list` every resource of
    /// `external.metrics.k8s.io` in the namespace (one SubjectAccessReview per user, namespace
    /// and TTL instead of one per metric); `false` asks about each metric only, as KEDA does.
    /// The answers differ only under an authorization webhook that allows `*` yet denies a
    /// metric by name.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_value_t = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub authorization_namespace_wide: bool,

    /// `host:port` of the keda-rs operator's metric service.
    #[arg(long, default_value = "keda-operator.keda.svc.cluster.local:9666")]
    pub metrics_service_address: String,

    /// The name the operator's serving certificate must carry. Default: the host of
    /// `--metrics-service-address`.
    #[arg(long)]
    pub metrics_service_server_name: Option<String>,

    /// The operator runs with `--shards=auto`: send each metric read to the replica that owns
    /// the object, found from the operator's shard Leases in `--certs-namespace` (the
    /// operator's namespace); `--metrics-service-address` is asked when no replica can answer.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_value_t = false, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub operator_shards: bool,

    /// The namespace of Secret keda-rs-metrics-apiserver-certs (created by the operator),
    /// whose certificate is used when none of the three files below exists.
    #[arg(long, env = "POD_NAMESPACE", default_value = "keda")]
    pub certs_namespace: String,

    /// PEM CA bundle that signs the operator's serving certificate.
    #[arg(long, default_value = "/certs/ca.crt")]
    pub metrics_service_ca_file: PathBuf,

    /// PEM client certificate presented to the operator. Reloaded when the file changes.
    #[arg(long, default_value = "/certs/tls.crt")]
    pub metrics_service_client_cert_file: PathBuf,

    /// PEM private key of `--metrics-service-client-cert-file`.
    #[arg(long, default_value = "/certs/tls.key")]
    pub metrics_service_client_key_file: PathBuf,

    /// The longest a request to the operator may take, connecting included (e.g. `3s`).
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    pub metrics_service_timeout: Duration,

    /// The longest a connection attempt to the operator may take.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub metrics_service_connect_timeout: Duration,

    /// How often certificate, key and CA files are checked for changes.
    #[arg(long, default_value = keda_tls::DEFAULT_RELOAD_INTERVAL, value_parser = positive_duration)]
    pub cert_reload_interval: Duration,

    /// Worker threads of the secure port (1 to 1024). Default: the number of CPUs.
    #[arg(long, value_parser = workers)]
    pub workers: Option<usize>,

    /// Directory holding `apiserver.crt` and `apiserver.key`, served when no
    /// `--tls-cert-file` is given (Kubernetes' flag; ignored with `--tls-cert-file`, as there).
    /// Without them there, a self-signed certificate is generated in memory.
    #[arg(long, value_name = "DIR")]
    pub cert_dir: Option<PathBuf>,

    /// Lowest TLS version of the secure port: VersionTLS12 or VersionTLS13 (VersionTLS10 and
    /// VersionTLS11 mean TLS 1.2: nothing older is spoken).
    #[arg(long, value_name = "VERSION")]
    pub tls_min_version: Option<String>,

    /// TLS 1.2 cipher suites of the secure port, Go's names, comma-separated (TLS 1.3's are
    /// always on). CBC, RC4, 3DES and static-RSA suites are refused.
    #[arg(long, value_name = "SUITES")]
    pub tls_cipher_suites: Option<String>,

    /// Log filter, a tracing directive such as `info` or `keda_metrics_apiserver=debug`
    /// (KEDA's --zap-log-level maps onto it); RUST_LOG overrides it.
    #[arg(long, value_name = "FILTER", default_value = "info")]
    pub log_level: String,

    /// Log format: `text` or `json` (KEDA's --zap-encoder: `console` is `text`).
    #[arg(long, value_name = "FORMAT", default_value = "text")]
    pub log_format: keda_cli::logging::LogFormat,

    /// Timestamp encoding of log lines (KEDA's --zap-time-encoding): rfc3339, rfc3339nano,
    /// iso8601, epoch, millis, nano.
    #[arg(long, value_name = "ENCODING", default_value = "default")]
    pub log_time_encoding: keda_cli::logging::TimeEncoding,
}

/// The longest duration any flag accepts: one hour.
pub const MAX_FLAG_DURATION: Duration = Duration::from_secs(3600);

/// The most `--workers`.
pub const MAX_WORKERS: usize = 1024;

/// `--workers`: 1 to [`MAX_WORKERS`].
///
/// # Errors
/// Not a whole number in range.
pub fn workers(value: &str) -> Result<usize, String> {
    match value.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_WORKERS).contains(&n) => Ok(n),
        _ => Err(format!(
            "{value:?} is not a whole number between 1 and {MAX_WORKERS}"
        )),
    }
}

/// Parses a Go-style duration: a sequence of `<number><unit>` with units `ms`, `s`, `m`, `h`
/// (`1m30s`, `500ms`), at most [`MAX_FLAG_DURATION`].
///
/// # Errors
/// A message naming the value (and the bound, when it is too long).
pub fn parse_duration(value: &str) -> Result<Duration, String> {
    let total = parse_unbounded(value)?;
    if total > MAX_FLAG_DURATION {
        return Err(format!("invalid duration {value:?}: must be at most 1h"));
    }
    Ok(total)
}

fn parse_unbounded(value: &str) -> Result<Duration, String> {
    let too_long = || format!("invalid duration {value:?}: must be at most 1h");
    let bad = || format!("invalid duration {value:?}: use e.g. 500ms, 10s, 1m30s");
    let mut total = Duration::ZERO;
    let mut rest = value.trim();
    if rest.is_empty() {
        return Err(bad());
    }
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let (number, tail) = rest.split_at(digits);
        let number: f64 = number.parse().map_err(|_| bad())?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let seconds = match unit {
            "ms" => number / 1000.0,
            "s" => number,
            "m" => number * 60.0,
            "h" => number * 3600.0,
            _ => return Err(bad()),
        };
        let term = Duration::try_from_secs_f64(seconds).map_err(|_| too_long())?;
        total = total.checked_add(term).ok_or_else(too_long)?;
        rest = tail;
    }
    Ok(total)
}

/// [`parse_duration`], but not zero (an interval).
///
/// # Errors
/// A message naming the value.
pub fn positive_duration(value: &str) -> Result<Duration, String> {
    match parse_duration(value)? {
        Duration::ZERO => Err(format!("invalid duration {value:?}: must be more than 0")),
        duration => Ok(duration),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn durations_parse_as_go_writes_them() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("10").is_err());
        assert!(parse_duration("ten seconds").is_err());
    }

    #[test]
    fn durations_longer_than_an_hour_are_refused_naming_the_bound() {
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        // The second one overflowed `Duration` when added: a panic before.
        for value in [
            "61m",
            "1h1ms",
            "99999999999999999999h",
            "18446744073709551615s18446744073709551615s",
        ] {
            assert_eq!(
                parse_duration(value),
                Err(format!("invalid duration {value:?}: must be at most 1h")),
                "{value}"
            );
        }
    }

    #[test]
    fn workers_are_between_1_and_1024() {
        assert_eq!(workers("8"), Ok(8));
        for bad in ["0", "1025", "18446744073709551616", "-1"] {
            assert!(
                workers(bad).unwrap_err().contains("between 1 and 1024"),
                "{bad}"
            );
        }
    }

    #[test]
    fn intervals_are_positive() {
        assert_eq!(positive_duration("10s"), Ok(Duration::from_secs(10)));
        assert!(positive_duration("0").is_err());
        assert!(positive_duration("0s").is_err());
    }

    #[test]
    fn every_flag_is_documented_in_help() {
        let command = Args::command();
        for arg in command.get_arguments() {
            let id = arg.get_id().as_str();
            if id == "help" || id == "version" {
                continue;
            }
            assert!(
                arg.get_help().is_some_and(|h| !h.to_string().is_empty()),
                "--{id} has no help text"
            );
        }
        command.debug_assert();
    }

    #[test]
    fn kubernetes_flag_names_and_defaults_are_accepted() {
        let args = Args::try_parse_from([
            "keda-metrics-apiserver",
            "--secure-port=7443",
            "--tls-cert-file=/c/tls.crt",
            "--tls-private-key-file=/c/tls.key",
            "--requestheader-client-ca-file=/c/front-proxy-ca.crt",
            "--requestheader-allowed-names=front-proxy-client,aggregator",
            "--authorization-kubeconfig=/k/config",
        ])
        .expect("parses");
        assert_eq!(args.secure_port, 7443);
        assert_eq!(
            args.requestheader_allowed_names,
            vec!["front-proxy-client", "aggregator"]
        );
        assert_eq!(args.requestheader_username_headers, vec!["X-Remote-User"]);
        assert_eq!(args.metrics_service_timeout, Duration::from_secs(3));
    }

    #[test]
    fn reads_are_authorized_namespace_wide_unless_switched_off() {
        let parse = |extra: &[&str]| {
            let mut argv = vec!["keda-metrics-apiserver"];
            argv.extend_from_slice(extra);
            Args::try_parse_from(argv).expect("parses")
        };
        assert!(parse(&[]).authorization_namespace_wide);
        assert!(parse(&["--authorization-namespace-wide"]).authorization_namespace_wide);
        assert!(!parse(&["--authorization-namespace-wide=false"]).authorization_namespace_wide);
    }

    #[test]
    fn a_certificate_without_its_key_is_refused() {
        assert!(
            Args::try_parse_from(["keda-metrics-apiserver", "--tls-cert-file=/c/tls.crt"]).is_err()
        );
    }
}
