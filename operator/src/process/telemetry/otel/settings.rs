//! The exporter's settings: KEDA's `--enable-opentelemetry-metrics` with the `OTEL_*`
//! variables as the OpenTelemetry Go exporter reads them (endpoint, protocol, headers, timeout,
//! interval, TLS files, resource attributes).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// KEDA's meter name: the instrumentation scope of every metric.
pub const SCOPE_NAME: &str = "keda-open-telemetry-metrics";

/// How the metrics are sent (`OTEL_EXPORTER_OTLP_PROTOCOL`, which KEDA reads: `grpc`, else
/// OTLP/HTTP with protobuf bodies).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpProtocol {
    /// OTLP/HTTP, `application/x-protobuf` (KEDA's default).
    HttpProtobuf,
    /// OTLP/gRPC.
    Grpc,
}

/// The aggregation temporality of counters and histograms
/// (`OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE`). KEDA's counters and histograms are
/// all synchronous, so Go's `delta` and `lowmemory` mean the same for them: delta for counters
/// and histograms, cumulative for up-down counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Temporality {
    Cumulative,
    Delta,
}

/// Where and how the operator exports, from the `OTEL_*` variables as the OpenTelemetry Go
/// exporters read them (values they would ignore are ignored with a warning, the default kept).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpSettings {
    pub protocol: OtlpProtocol,
    /// OTLP/HTTP: the full URL the requests are POSTed to. OTLP/gRPC: `scheme://host:port` of
    /// the server (`https` unless insecure).
    pub endpoint: url::Url,
    /// Extra request headers (gRPC metadata).
    pub headers: Vec<(String, String)>,
    /// `OTEL_EXPORTER_OTLP_COMPRESSION=gzip` (OTLP/HTTP only).
    pub gzip: bool,
    /// One export request's timeout (`OTEL_EXPORTER_OTLP_TIMEOUT`, default 10 s).
    pub timeout: Duration,
    /// Between exports (`OTEL_METRIC_EXPORT_INTERVAL`, default 60 s).
    pub interval: Duration,
    /// A whole export's bound (`OTEL_METRIC_EXPORT_TIMEOUT`, default 30 s).
    pub export_timeout: Duration,
    /// `OTEL_EXPORTER_OTLP_CERTIFICATE`: CA bundle trusted besides the system's.
    pub ca_file: Option<PathBuf>,
    /// `OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE` and `..._CLIENT_KEY` (mutual TLS).
    pub client_files: Option<(PathBuf, PathBuf)>,
    pub temporality: Temporality,
    /// The resource's attributes: `service.name` (`OTEL_SERVICE_NAME`, else from
    /// `OTEL_RESOURCE_ATTRIBUTES`, else `unknown_service:<executable>`), the SDK's, and
    /// `OTEL_RESOURCE_ATTRIBUTES`.
    pub resource: Vec<(String, String)>,
}

/// Default OTLP/HTTP endpoint of the Go exporter (TLS unless told otherwise).
pub(super) const DEFAULT_HTTP_ENDPOINT: &str = "https://localhost:4318/v1/metrics";
/// Default OTLP/gRPC endpoint of the Go exporter.
pub(super) const DEFAULT_GRPC_ENDPOINT: &str = "https://localhost:4317";
pub(super) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
pub(super) const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);
pub(super) const DEFAULT_EXPORT_TIMEOUT: Duration = Duration::from_secs(30);

impl OtlpSettings {
    /// Reads the `OTEL_*` variables through `var`. A value the Go exporter would ignore is
    /// ignored here too, with one line in `warnings`; `executable` names the process for the
    /// default `service.name`.
    pub fn from_env(
        var: &dyn Fn(&str) -> Option<String>,
        executable: &str,
        warnings: &mut Vec<String>,
    ) -> Self {
        let get = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        // The metrics-specific variable wins over the generic one.
        let pick = |suffix: &str| {
            get(&format!("OTEL_EXPORTER_OTLP_METRICS_{suffix}"))
                .map(|v| (format!("OTEL_EXPORTER_OTLP_METRICS_{suffix}"), v))
                .or_else(|| {
                    get(&format!("OTEL_EXPORTER_OTLP_{suffix}"))
                        .map(|v| (format!("OTEL_EXPORTER_OTLP_{suffix}"), v))
                })
        };
        let protocol = match get("OTEL_EXPORTER_OTLP_PROTOCOL").as_deref().map(str::trim) {
            Some("grpc") => OtlpProtocol::Grpc,
            _ => OtlpProtocol::HttpProtobuf,
        };
        let default = match protocol {
            OtlpProtocol::HttpProtobuf => DEFAULT_HTTP_ENDPOINT,
            OtlpProtocol::Grpc => DEFAULT_GRPC_ENDPOINT,
        };
        let mut endpoint = url::Url::parse(default).expect("default endpoint parses");
        let signal = get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
            .map(|v| ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", v, true));
        let generic =
            get("OTEL_EXPORTER_OTLP_ENDPOINT").map(|v| ("OTEL_EXPORTER_OTLP_ENDPOINT", v, false));
        if let Some((name, value, per_signal)) = signal.or(generic) {
            match endpoint_url(value.trim(), protocol, per_signal) {
                Some(url) => endpoint = url,
                None => warnings.push(format!(
                    "{name}={value:?} is not an absolute http(s) URL with a host; it is ignored \
                     as the OpenTelemetry exporter ignores it, and metrics go to {endpoint}"
                )),
            }
        }
        if let Some((name, value)) = pick("INSECURE") {
            match keda_cli::keda_flags::go_bool(value.trim()) {
                Some(insecure) => {
                    let scheme = if insecure { "http" } else { "https" };
                    // Only `http`/`https` reach here, between which the url crate switches.
                    let _ = endpoint.set_scheme(scheme);
                }
                None => warnings.push(format!("{name}={value:?} is not a boolean; ignored")),
            }
        }
        let headers = pick("HEADERS")
            .map(|(name, value)| parse_pairs(&name, &value, warnings))
            .unwrap_or_default();
        let gzip = pick("COMPRESSION").is_some_and(|(_, v)| v.trim() == "gzip");
        if gzip && protocol == OtlpProtocol::Grpc {
            warnings.push(
                "OTEL_EXPORTER_OTLP_COMPRESSION=gzip applies to OTLP/HTTP only here; OTLP/gRPC \
                 requests are sent uncompressed"
                    .to_string(),
            );
        }
        let timeout = pick("TIMEOUT")
            .and_then(|(name, v)| millis(&name, &v, warnings))
            .unwrap_or(DEFAULT_TIMEOUT);
        let interval = get("OTEL_METRIC_EXPORT_INTERVAL")
            .and_then(|v| millis("OTEL_METRIC_EXPORT_INTERVAL", &v, warnings))
            .filter(|d| !d.is_zero())
            .unwrap_or(DEFAULT_INTERVAL);
        let export_timeout = get("OTEL_METRIC_EXPORT_TIMEOUT")
            .and_then(|v| millis("OTEL_METRIC_EXPORT_TIMEOUT", &v, warnings))
            .filter(|d| !d.is_zero())
            .unwrap_or(DEFAULT_EXPORT_TIMEOUT);
        let ca_file = pick("CERTIFICATE").map(|(_, v)| PathBuf::from(v.trim()));
        let client_files = match (pick("CLIENT_CERTIFICATE"), pick("CLIENT_KEY")) {
            (Some((_, cert)), Some((_, key))) => {
                Some((PathBuf::from(cert.trim()), PathBuf::from(key.trim())))
            }
            (None, None) => None,
            _ => {
                warnings.push(
                    "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY \
                     must be set together; no client certificate is sent"
                        .to_string(),
                );
                None
            }
        };
        let temporality = match get("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE") {
            None => Temporality::Cumulative,
            Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                "cumulative" => Temporality::Cumulative,
                "delta" | "lowmemory" => Temporality::Delta,
                _ => {
                    warnings.push(format!(
                        "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE={v:?} is not \
                         cumulative, delta or lowmemory; ignored"
                    ));
                    Temporality::Cumulative
                }
            },
        };
        Self {
            protocol,
            endpoint,
            headers,
            gzip,
            timeout,
            interval,
            export_timeout,
            ca_file,
            client_files,
            temporality,
            resource: resource_attributes(&get, executable, warnings),
        }
    }
}

/// The endpoint URL of `OTEL_EXPORTER_OTLP_ENDPOINT` (`per_signal` false: `/v1/metrics` is
/// appended to its path for OTLP/HTTP) or `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` (used as it
/// is, `/` when it has no path). gRPC keeps only the scheme, host and port.
pub(super) fn endpoint_url(
    value: &str,
    protocol: OtlpProtocol,
    per_signal: bool,
) -> Option<url::Url> {
    let mut url = url::Url::parse(value).ok()?;
    let scheme = url.scheme().to_ascii_lowercase();
    if !url.has_host() || !matches!(scheme.as_str(), "http" | "https") {
        return None;
    }
    url.set_query(None);
    url.set_fragment(None);
    match protocol {
        OtlpProtocol::Grpc => url.set_path(""),
        OtlpProtocol::HttpProtobuf if per_signal => {}
        OtlpProtocol::HttpProtobuf => {
            let base = url.path().trim_end_matches('/').to_string();
            url.set_path(&format!("{base}/v1/metrics"));
        }
    }
    Some(url)
}

/// `key=value,key2=value2` (W3C Baggage without properties), values percent-decoded, as the
/// Go exporters read `OTEL_EXPORTER_OTLP_HEADERS` and `OTEL_RESOURCE_ATTRIBUTES`. A malformed
/// entry is skipped with a warning naming the variable and the key, never the value (a header
/// may hold a credential).
pub(super) fn parse_pairs(
    name: &str,
    value: &str,
    warnings: &mut Vec<String>,
) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    for entry in value.split(',') {
        if entry.trim().is_empty() {
            continue;
        }
        let Some((key, raw)) = entry.split_once('=') else {
            warnings.push(format!("{name}: an entry without '=' is skipped"));
            continue;
        };
        let key = key.trim();
        let valid_key = !key.is_empty()
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        let decoded = percent_encoding::percent_decode_str(raw).decode_utf8();
        match (valid_key, decoded) {
            (true, Ok(v)) => pairs.push((key.to_string(), v.trim().to_string())),
            _ => warnings.push(format!("{name}: the entry for key {key:?} is skipped")),
        }
    }
    pairs
}

/// A non-negative number of milliseconds, as the Go SDK reads its duration variables.
pub(super) fn millis(name: &str, value: &str, warnings: &mut Vec<String>) -> Option<Duration> {
    match value.trim().parse::<u64>() {
        Ok(ms) => Some(Duration::from_millis(ms)),
        Err(_) => {
            warnings.push(format!(
                "{name}={value:?} is not a number of milliseconds; the default is used"
            ));
            None
        }
    }
}

/// The resource's attributes, in the order: the SDK's, `OTEL_RESOURCE_ATTRIBUTES`,
/// `service.name`.
pub(super) fn resource_attributes(
    get: &dyn Fn(&str) -> Option<String>,
    executable: &str,
    warnings: &mut Vec<String>,
) -> Vec<(String, String)> {
    let mut attributes: BTreeMap<String, String> = BTreeMap::new();
    attributes.insert("telemetry.sdk.name".into(), "keda-rs".into());
    attributes.insert("telemetry.sdk.language".into(), "rust".into());
    attributes.insert(
        "telemetry.sdk.version".into(),
        env!("CARGO_PKG_VERSION").into(),
    );
    attributes.insert(
        "service.name".into(),
        format!("unknown_service:{executable}"),
    );
    if let Some(value) = get("OTEL_RESOURCE_ATTRIBUTES") {
        attributes.extend(parse_pairs("OTEL_RESOURCE_ATTRIBUTES", &value, warnings));
    }
    if let Some(name) = get("OTEL_SERVICE_NAME") {
        attributes.insert("service.name".into(), name.trim().to_string());
    }
    attributes.into_iter().collect()
}
