//! OpenTelemetry metrics over OTLP: KEDA's `--enable-opentelemetry-metrics` with the `OTEL_*`
//! variables of the OpenTelemetry Go exporter KEDA uses (`otlpmetrichttp`, or `otlpmetricgrpc`
//! when `OTEL_EXPORTER_OTLP_PROTOCOL=grpc`), sending KEDA's OTel instruments
//! (`pkg/metricscollector/opentelemetry.go`: names, descriptions, units, attribute names and
//! value types).
//!
//! The exported state is the Prometheus registry's ([`Metrics`]): every export reads its
//! OpenMetrics text and translates each KEDA family to KEDA's OTel instrument(s), so the two
//! exports always agree and nothing records twice. Series that KEDA's OTel collector has no
//! instrument for (the Kubernetes client's and the metric service's) are not sent, as in KEDA.
//!
//! The OTLP messages come from the vendored OpenTelemetry protos (`operator/proto`), generated
//! at build time.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prost::Message as _;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::Metrics;

/// The OTLP protos (`opentelemetry.proto.*`), generated at build time (`operator/build.rs`).
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod proto {
    pub mod common {
        pub mod v1 {
            tonic::include_proto!("opentelemetry.proto.common.v1");
        }
    }
    pub mod resource {
        pub mod v1 {
            tonic::include_proto!("opentelemetry.proto.resource.v1");
        }
    }
    pub mod metrics {
        pub mod v1 {
            tonic::include_proto!("opentelemetry.proto.metrics.v1");
        }
    }
    pub mod collector {
        pub mod metrics {
            pub mod v1 {
                tonic::include_proto!("opentelemetry.proto.collector.metrics.v1");
            }
        }
    }
}

use proto::collector::metrics::v1::ExportMetricsServiceRequest;
use proto::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use proto::metrics::v1::{
    AggregationTemporality, Gauge, Histogram, HistogramDataPoint, Metric, NumberDataPoint,
    ResourceMetrics, ScopeMetrics, Sum, metric, number_data_point,
};
use proto::resource::v1::Resource;

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
const DEFAULT_HTTP_ENDPOINT: &str = "https://localhost:4318/v1/metrics";
/// Default OTLP/gRPC endpoint of the Go exporter.
const DEFAULT_GRPC_ENDPOINT: &str = "https://localhost:4317";
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);
const DEFAULT_EXPORT_TIMEOUT: Duration = Duration::from_secs(30);

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
fn endpoint_url(value: &str, protocol: OtlpProtocol, per_signal: bool) -> Option<url::Url> {
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
fn parse_pairs(name: &str, value: &str, warnings: &mut Vec<String>) -> Vec<(String, String)> {
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
fn millis(name: &str, value: &str, warnings: &mut Vec<String>) -> Option<Duration> {
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
fn resource_attributes(
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

// ---------------------------------------------------------------------------------------------
// The Prometheus registry's text, read back.

/// One sample line: the series name, its labels, its value.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    labels: Vec<(String, String)>,
    value: f64,
    /// The value as written, for integer-valued instruments.
    raw: String,
}

/// One family: `# TYPE` name and type, and its samples.
#[derive(Debug, Clone, PartialEq, Default)]
struct Family {
    name: String,
    kind: String,
    samples: Vec<Sample>,
}

/// Parses the OpenMetrics text [`Metrics::encode`] writes. Lines it cannot read are skipped.
fn parse_exposition(text: &str) -> Vec<Family> {
    let mut families: Vec<Family> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "unknown"));
            families.push(Family {
                name: name.to_string(),
                kind: kind.trim().to_string(),
                samples: Vec::new(),
            });
            continue;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let Some(sample) = parse_sample(line) else {
            continue;
        };
        if let Some(family) = families.last_mut()
            && sample.name.starts_with(family.name.as_str())
        {
            family.samples.push(sample);
        }
    }
    families
}

/// `name{a="x",b="y"} value` or `name value`, label values unescaped (`\\`, `\"`, `\n`).
fn parse_sample(line: &str) -> Option<Sample> {
    let name_end = line.find(['{', ' '])?;
    let name = &line[..name_end];
    let mut labels = Vec::new();
    let mut rest = &line[name_end..];
    if let Some(inner) = rest.strip_prefix('{') {
        let mut chars = inner.char_indices().peekable();
        let end = loop {
            // Skip separators.
            while let Some((_, c)) = chars.peek() {
                if *c == ',' || *c == ' ' {
                    chars.next();
                } else {
                    break;
                }
            }
            let (start, c) = chars.next()?;
            if c == '}' {
                break start + 1;
            }
            let mut key = String::from(c);
            loop {
                let (_, c) = chars.next()?;
                if c == '=' {
                    break;
                }
                key.push(c);
            }
            if chars.next()?.1 != '"' {
                return None;
            }
            let mut value = String::new();
            loop {
                let (_, c) = chars.next()?;
                match c {
                    '"' => break,
                    '\\' => match chars.next()?.1 {
                        'n' => value.push('\n'),
                        other => value.push(other),
                    },
                    other => value.push(other),
                }
            }
            labels.push((key, value));
        };
        rest = &inner[end..];
    }
    let raw = rest.split_whitespace().next()?.to_string();
    let value = match raw.as_str() {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        other => other.parse().ok()?,
    };
    Some(Sample {
        name: name.to_string(),
        labels,
        value,
        raw,
    })
}

// ---------------------------------------------------------------------------------------------
// KEDA's OTel instruments.

/// What kind of OTel instrument, and so which OTLP data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// `Float64ObservableGauge`: Gauge of doubles.
    GaugeF64,
    /// `Int64ObservableGauge`: Gauge of integers.
    GaugeI64,
    /// `Int64Counter`: monotonic Sum of integers.
    Counter,
    /// `Int64UpDownCounter`: non-monotonic cumulative Sum of integers.
    UpDownCounter,
    /// `Float64Histogram`: explicit-bucket Histogram.
    Histogram,
}

/// How a Prometheus value becomes the OTel one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scale {
    Same,
    /// Seconds to whole milliseconds (KEDA's deprecated `...latency` gauges:
    /// `float64(d.Milliseconds())`).
    WholeMillis,
}

/// How the Prometheus labels become KEDA's OTel attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attrs {
    /// The same names and values.
    Same,
    /// Per-scaler series: `namespace`, `scaledObject`, `scaler`, `scalerIndex`, `metric` for a
    /// ScaledObject; `namespace`, `scaledJob`, `scaler`, `triggerIndex`, `metric` for a
    /// ScaledJob (KEDA's `getScalerMeasurementOption`).
    Scaler,
    /// The scale loop: `namespace`, `type`, `name` (Prometheus says `resource`).
    Loop,
    /// `keda.scaler.empty.upstream.responses`: `isScaledObject` and `ignoreNullValues` are
    /// booleans, `resourceType` is not an attribute.
    EmptyUpstream,
    /// CloudEvents: `cloudeventsource` is `cloudEventSource`.
    CloudEvents,
}

/// One OTel instrument fed by one Prometheus family.
struct Instrument {
    /// The Prometheus family (`# TYPE` name).
    prom: &'static str,
    name: &'static str,
    description: &'static str,
    unit: &'static str,
    shape: Shape,
    scale: Scale,
    attrs: Attrs,
}

const fn instrument(
    prom: &'static str,
    name: &'static str,
    description: &'static str,
    shape: Shape,
    attrs: Attrs,
) -> Instrument {
    Instrument {
        prom,
        name,
        description,
        unit: "",
        shape,
        scale: Scale::Same,
        attrs,
    }
}

/// KEDA's instruments (`initMeters`), each with the Prometheus family it reads.
const INSTRUMENTS: &[Instrument] = &[
    instrument(
        "keda_scaler_detail_errors",
        "keda.scaler.errors",
        "Number of scaler errors",
        Shape::Counter,
        Attrs::Scaler,
    ),
    instrument(
        "keda_scaled_object_errors",
        "keda.scaledobject.errors",
        "Number of scaled object errors",
        Shape::Counter,
        Attrs::Same,
    ),
    instrument(
        "keda_scaled_job_errors",
        "keda.scaledjob.errors",
        "Number of scaled job errors",
        Shape::Counter,
        Attrs::Same,
    ),
    instrument(
        "keda_trigger_registered_total",
        "keda.trigger.totals",
        "DEPRECATED - will be removed in 2.16 - use 'keda.trigger.registered.count' instead",
        Shape::UpDownCounter,
        Attrs::Same,
    ),
    instrument(
        "keda_trigger_registered_total",
        "keda.trigger.registered.count",
        "Total number of triggers per trigger type registered",
        Shape::UpDownCounter,
        Attrs::Same,
    ),
    instrument(
        "keda_resource_registered_total",
        "keda.resource.totals",
        "DEPRECATED - will be removed in 2.16 - use 'keda.resource.registered.count' instead",
        Shape::UpDownCounter,
        Attrs::Same,
    ),
    instrument(
        "keda_resource_registered_total",
        "keda.resource.registered.count",
        "Total number of KEDA custom resources per namespace for each custom resource type (CRD) registered",
        Shape::UpDownCounter,
        Attrs::Same,
    ),
    instrument(
        "keda_scaler_empty_upstream_responses",
        "keda.scaler.empty.upstream.responses",
        "Number of times a query returns an empty result",
        Shape::Counter,
        Attrs::EmptyUpstream,
    ),
    instrument(
        "keda_scaler_metrics_value",
        "keda.scaler.metrics.value",
        "The current value for each scaler's metric that would be used by the HPA in computing the target average",
        Shape::GaugeF64,
        Attrs::Scaler,
    ),
    Instrument {
        scale: Scale::WholeMillis,
        ..instrument(
            "keda_scaler_metrics_latency_seconds",
            "keda.scaler.metrics.latency",
            "DEPRECATED - use `keda.scaler.metrics.latency.seconds` instead",
            Shape::GaugeF64,
            Attrs::Scaler,
        )
    },
    Instrument {
        unit: "s",
        ..instrument(
            "keda_scaler_metrics_latency_seconds",
            "keda.scaler.metrics.latency.seconds",
            "The latency of retrieving current metric from each scaler",
            Shape::GaugeF64,
            Attrs::Scaler,
        )
    },
    Instrument {
        scale: Scale::WholeMillis,
        ..instrument(
            "keda_internal_scale_loop_latency_seconds",
            "keda.internal.scale.loop.latency",
            "DEPRECATED - use `keda.internal.scale.loop.latency.seconds` instead",
            Shape::GaugeF64,
            Attrs::Loop,
        )
    },
    Instrument {
        unit: "s",
        ..instrument(
            "keda_internal_scale_loop_latency_seconds",
            "keda.internal.scale.loop.latency.seconds",
            "Internal latency of ScaledObject/ScaledJob loop execution",
            Shape::GaugeF64,
            Attrs::Loop,
        )
    },
    instrument(
        "keda_scaler_active",
        "keda.scaler.active",
        "Indicates whether a scaler is active (1), or not (0)",
        Shape::GaugeF64,
        Attrs::Scaler,
    ),
    instrument(
        "keda_build_info",
        "keda.build.info",
        "A metric with a constant '1' value labeled by version, git_commit and goversion from which KEDA was built.",
        Shape::GaugeI64,
        Attrs::Same,
    ),
    instrument(
        "keda_cloudeventsource_events_emitted",
        "keda.cloudeventsource.events.emitted.count",
        "Measured the total number of emitted cloudevents. 'namespace': namespace of CloudEventSource 'cloudeventsource': name of CloudEventSource object. 'eventsink': destination of this emitted event 'state':indicated events emitted successfully or not",
        Shape::Counter,
        Attrs::CloudEvents,
    ),
    instrument(
        "keda_cloudeventsource_events_queued",
        "keda.cloudeventsource.events.queued",
        "Indicates how many events are still queue",
        Shape::GaugeF64,
        Attrs::Same,
    ),
    instrument(
        "keda_scaled_object_paused",
        "keda.scaled.object.paused",
        "Indicates whether a ScaledObject is paused",
        Shape::GaugeF64,
        Attrs::Same,
    ),
    instrument(
        "keda_scaler_http_requests",
        "keda.scaler.http.requests.count",
        "Total number of outbound HTTP requests issued during scaler metric collection, labeled by HTTP status code.",
        Shape::Counter,
        Attrs::Same,
    ),
    Instrument {
        unit: "s",
        ..instrument(
            "keda_scaler_http_request_duration_seconds",
            "keda.scaler.http.request.duration.seconds",
            "Duration in seconds of outbound HTTP requests issued during scaler metric collection.",
            Shape::Histogram,
            Attrs::Same,
        )
    },
];

/// The OTel attributes of one series, sorted by key as the Go SDK's attribute sets are.
fn attributes(kind: Attrs, labels: &[(String, String)]) -> Vec<KeyValue> {
    let label = |name: &str| {
        labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_default()
    };
    let mut out: Vec<KeyValue> = match kind {
        Attrs::Same => labels.iter().map(|(k, v)| string_attribute(k, v)).collect(),
        Attrs::Scaler => {
            let (owner, index) = if label("type") == "scaledjob" {
                ("scaledJob", "triggerIndex")
            } else {
                ("scaledObject", "scalerIndex")
            };
            vec![
                string_attribute("namespace", label("namespace")),
                string_attribute(owner, label("scaledObject")),
                string_attribute("scaler", label("scaler")),
                string_attribute(index, label("triggerIndex")),
                string_attribute("metric", label("metric")),
            ]
        }
        Attrs::Loop => vec![
            string_attribute("namespace", label("namespace")),
            string_attribute("type", label("type")),
            string_attribute("name", label("resource")),
        ],
        Attrs::EmptyUpstream => vec![
            string_attribute("namespace", label("namespace")),
            string_attribute("scaledResource", label("scaledResource")),
            string_attribute("triggerName", label("triggerName")),
            string_attribute("metricName", label("metricName")),
            bool_attribute("isScaledObject", label("resourceType") == "ScaledObject"),
            bool_attribute("ignoreNullValues", label("ignoreNullValues") == "true"),
        ],
        Attrs::CloudEvents => labels
            .iter()
            .map(|(k, v)| {
                let key = if k == "cloudeventsource" {
                    "cloudEventSource"
                } else {
                    k.as_str()
                };
                string_attribute(key, v)
            })
            .collect(),
    };
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out
}

fn string_attribute(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.to_string())),
        }),
        ..KeyValue::default()
    }
}

fn bool_attribute(key: &str, value: bool) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value: Some(AnyValue {
            value: Some(any_value::Value::BoolValue(value)),
        }),
        ..KeyValue::default()
    }
}

/// An integer value as written (counters and integer gauges print integers); a float is
/// rounded toward zero.
fn integer(sample: &Sample) -> i64 {
    sample.raw.parse::<i64>().unwrap_or_else(|_| {
        // Saturating conversion of a finite float; NaN becomes 0.
        #[allow(clippy::cast_possible_truncation)]
        let value = sample.value as i64;
        value
    })
}

/// Nanoseconds since the Unix epoch.
fn unix_nanos(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .ok()
        .and_then(|d| u64::try_from(d.as_nanos()).ok())
        .unwrap_or_default()
}

/// Series identity for delta temporality: instrument name and attributes.
type SeriesKey = (&'static str, Vec<(String, String)>);

/// What a series sent last, for delta temporality.
#[derive(Debug, Clone, PartialEq)]
enum Previous {
    Counter(i64),
    Histogram {
        count: u64,
        sum: f64,
        buckets: Vec<u64>,
    },
}

/// Turns the registry's text into KEDA's OTel metrics.
#[derive(Debug)]
pub struct Translator {
    temporality: Temporality,
    /// When the exporter started: the start of every cumulative series.
    start: SystemTime,
    /// When the last export was taken (the start of delta points).
    last: SystemTime,
    previous: std::collections::HashMap<SeriesKey, Previous>,
}

impl Translator {
    /// A translator whose cumulative series start at `start`.
    pub fn new(temporality: Temporality, start: SystemTime) -> Self {
        Self {
            temporality,
            start,
            last: start,
            previous: std::collections::HashMap::new(),
        }
    }

    /// KEDA's OTel metrics for the OpenMetrics `text`, taken at `now`. Instruments without a
    /// series are left out (an OTel SDK sends nothing for them either).
    pub fn translate(&mut self, text: &str, now: SystemTime) -> Vec<Metric> {
        let families = parse_exposition(text);
        let now_nanos = unix_nanos(now);
        let delta = self.temporality == Temporality::Delta;
        let start_nanos = unix_nanos(if delta { self.last } else { self.start });
        let cumulative_start = unix_nanos(self.start);
        let mut metrics = Vec::new();
        for instrument in INSTRUMENTS {
            let Some(family) = families.iter().find(|f| f.name == instrument.prom) else {
                continue;
            };
            let data = match instrument.shape {
                Shape::GaugeF64 | Shape::GaugeI64 => {
                    let points = family
                        .samples
                        .iter()
                        .map(|s| {
                            let value = match (instrument.shape, instrument.scale) {
                                (Shape::GaugeI64, _) => number_data_point::Value::AsInt(integer(s)),
                                (_, Scale::WholeMillis) => {
                                    number_data_point::Value::AsDouble((s.value * 1000.0).trunc())
                                }
                                (_, Scale::Same) => number_data_point::Value::AsDouble(s.value),
                            };
                            NumberDataPoint {
                                attributes: attributes(instrument.attrs, &s.labels),
                                time_unix_nano: now_nanos,
                                value: Some(value),
                                ..NumberDataPoint::default()
                            }
                        })
                        .collect::<Vec<_>>();
                    if points.is_empty() {
                        continue;
                    }
                    metric::Data::Gauge(Gauge {
                        data_points: points,
                    })
                }
                Shape::Counter | Shape::UpDownCounter => {
                    let monotonic = instrument.shape == Shape::Counter;
                    let delta_here = delta && monotonic;
                    let points = family
                        .samples
                        .iter()
                        .filter(|s| !monotonic || s.name == format!("{}_total", instrument.prom))
                        .map(|s| {
                            let mut value = integer(s);
                            let attrs = attributes(instrument.attrs, &s.labels);
                            if delta_here {
                                let key = (instrument.name, s.labels.clone());
                                let before =
                                    match self.previous.insert(key, Previous::Counter(value)) {
                                        Some(Previous::Counter(v)) if v <= value => v,
                                        _ => 0,
                                    };
                                value -= before;
                            }
                            NumberDataPoint {
                                attributes: attrs,
                                start_time_unix_nano: if delta_here {
                                    start_nanos
                                } else {
                                    cumulative_start
                                },
                                time_unix_nano: now_nanos,
                                value: Some(number_data_point::Value::AsInt(value)),
                                ..NumberDataPoint::default()
                            }
                        })
                        .collect::<Vec<_>>();
                    if points.is_empty() {
                        continue;
                    }
                    let temporality = if delta_here {
                        AggregationTemporality::Delta
                    } else {
                        AggregationTemporality::Cumulative
                    };
                    metric::Data::Sum(Sum {
                        data_points: points,
                        aggregation_temporality: temporality as i32,
                        is_monotonic: monotonic,
                    })
                }
                Shape::Histogram => {
                    let points = self.histogram_points(
                        instrument,
                        family,
                        (
                            if delta { start_nanos } else { cumulative_start },
                            now_nanos,
                        ),
                    );
                    if points.is_empty() {
                        continue;
                    }
                    let temporality = if delta {
                        AggregationTemporality::Delta
                    } else {
                        AggregationTemporality::Cumulative
                    };
                    metric::Data::Histogram(Histogram {
                        data_points: points,
                        aggregation_temporality: temporality as i32,
                    })
                }
            };
            metrics.push(Metric {
                name: instrument.name.to_string(),
                description: instrument.description.to_string(),
                unit: instrument.unit.to_string(),
                data: Some(data),
                ..Metric::default()
            });
        }
        self.last = now;
        metrics
    }

    /// The histogram's points: Prometheus' cumulative `_bucket{le}` counts become OTel's
    /// per-bucket counts over the finite bounds (the `+Inf` bucket last).
    fn histogram_points(
        &mut self,
        instrument: &Instrument,
        family: &Family,
        (start, now): (u64, u64),
    ) -> Vec<HistogramDataPoint> {
        struct Series {
            labels: Vec<(String, String)>,
            buckets: Vec<(f64, u64)>,
            sum: f64,
            count: u64,
        }
        let mut series: Vec<Series> = Vec::new();
        let bucket = format!("{}_bucket", family.name);
        let sum = format!("{}_sum", family.name);
        let count = format!("{}_count", family.name);
        for s in &family.samples {
            let mut labels = s.labels.clone();
            let le = labels
                .iter()
                .position(|(k, _)| k == "le")
                .map(|i| labels.remove(i).1);
            let index = match series.iter().position(|x| x.labels == labels) {
                Some(i) => i,
                None => {
                    series.push(Series {
                        labels,
                        buckets: Vec::new(),
                        sum: 0.0,
                        count: 0,
                    });
                    series.len() - 1
                }
            };
            let entry = &mut series[index];
            let whole = u64::try_from(integer(s)).unwrap_or_default();
            if s.name == bucket {
                let bound = match le.as_deref() {
                    Some("+Inf") | None => f64::INFINITY,
                    Some(v) => v.parse().unwrap_or(f64::INFINITY),
                };
                entry.buckets.push((bound, whole));
            } else if s.name == sum {
                entry.sum = s.value;
            } else if s.name == count {
                entry.count = whole;
            }
        }
        let delta = self.temporality == Temporality::Delta;
        series
            .into_iter()
            .map(|mut s| {
                s.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
                let bounds: Vec<f64> = s
                    .buckets
                    .iter()
                    .map(|(b, _)| *b)
                    .filter(|b| b.is_finite())
                    .collect();
                let mut counts = Vec::with_capacity(s.buckets.len());
                let mut below = 0;
                for (_, cumulative) in &s.buckets {
                    counts.push(cumulative.saturating_sub(below));
                    below = *cumulative;
                }
                let (mut count, mut sum) = (s.count, s.sum);
                if delta {
                    let key = (instrument.name, s.labels.clone());
                    let now_state = Previous::Histogram {
                        count,
                        sum,
                        buckets: counts.clone(),
                    };
                    if let Some(Previous::Histogram {
                        count: c,
                        sum: su,
                        buckets,
                    }) = self.previous.insert(key, now_state)
                        && c <= count
                        && buckets.len() == counts.len()
                    {
                        count -= c;
                        sum -= su;
                        for (now, before) in counts.iter_mut().zip(buckets) {
                            *now = now.saturating_sub(before);
                        }
                    }
                }
                HistogramDataPoint {
                    attributes: attributes(instrument.attrs, &s.labels),
                    start_time_unix_nano: start,
                    time_unix_nano: now,
                    count,
                    sum: Some(sum),
                    bucket_counts: counts,
                    explicit_bounds: bounds,
                    ..HistogramDataPoint::default()
                }
            })
            .collect()
    }
}

/// The export request for `metrics` under `resource`.
pub fn export_request(
    resource: &[(String, String)],
    metrics: Vec<Metric>,
) -> ExportMetricsServiceRequest {
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource {
                attributes: resource
                    .iter()
                    .map(|(k, v)| string_attribute(k, v))
                    .collect(),
                ..Resource::default()
            }),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(InstrumentationScope {
                    name: SCOPE_NAME.to_string(),
                    ..InstrumentationScope::default()
                }),
                metrics,
                ..ScopeMetrics::default()
            }],
            ..ResourceMetrics::default()
        }],
    }
}

// ---------------------------------------------------------------------------------------------
// Sending.

/// Why the exporter could not be set up or one export failed. Never holds a header value or
/// anything the receiver answered beyond its status.
#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    /// A certificate file named by an `OTEL_EXPORTER_OTLP_*CERTIFICATE`/`KEY` variable.
    #[error("reading {0}: {1}")]
    File(String, std::io::Error),
    /// The TLS material is unusable.
    #[error("OTLP exporter TLS: {0}")]
    Tls(String),
    /// A header name or value HTTP cannot carry.
    #[error("OTEL_EXPORTER_OTLP_HEADERS: header {0:?} cannot be sent")]
    Header(String),
    /// The HTTP client or gRPC channel could not be built.
    #[error("building the OTLP client: {0}")]
    Client(String),
    /// The request failed or timed out.
    #[error("sending to {endpoint}: {reason}")]
    Send { endpoint: String, reason: String },
    /// The receiver refused the export.
    #[error("{endpoint} answered {status}")]
    Status { endpoint: String, status: String },
}

enum Transport {
    Http {
        client: reqwest::Client,
        headers: reqwest::header::HeaderMap,
    },
    Grpc {
        client: proto::collector::metrics::v1::metrics_service_client::MetricsServiceClient<
            tonic::transport::Channel,
        >,
        headers: tonic::metadata::MetadataMap,
    },
}

/// Sends export requests as the settings say.
pub struct Exporter {
    settings: OtlpSettings,
    transport: Transport,
}

impl std::fmt::Debug for Exporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exporter")
            .field("endpoint", &self.settings.endpoint.as_str())
            .field("protocol", &self.settings.protocol)
            .finish_non_exhaustive()
    }
}

fn read_file(path: &PathBuf) -> Result<String, OtlpError> {
    std::fs::read_to_string(path).map_err(|e| OtlpError::File(path.display().to_string(), e))
}

impl Exporter {
    /// An exporter for `settings`: reads the certificate files and builds the client; nothing
    /// is sent yet.
    ///
    /// # Errors
    /// A certificate file cannot be read or used, a header cannot be sent, the client cannot be
    /// built.
    pub fn new(settings: OtlpSettings) -> Result<Self, OtlpError> {
        use keda_scalers::secret::Secret;
        let tls = keda_scalers::tls::TlsSettings {
            insecure: false,
            ca: settings
                .ca_file
                .as_ref()
                .map(read_file)
                .transpose()?
                .map(Secret::new),
            client: match &settings.client_files {
                Some((cert, key)) => {
                    Some((Secret::new(read_file(cert)?), Secret::new(read_file(key)?)))
                }
                None => None,
            },
        };
        let transport = match settings.protocol {
            OtlpProtocol::HttpProtobuf => {
                // reqwest is built without a crypto provider of its own: ring, as everywhere.
                let _ = rustls::crypto::ring::default_provider().install_default();
                let config = tls
                    .client_config()
                    .map_err(|e| OtlpError::Tls(e.to_string()))?;
                let client = reqwest::Client::builder()
                    .timeout(settings.timeout)
                    .tls_backend_preconfigured(config)
                    .build()
                    .map_err(|e| OtlpError::Client(e.to_string()))?;
                let mut headers = reqwest::header::HeaderMap::new();
                for (name, value) in &settings.headers {
                    let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                        .map_err(|_| OtlpError::Header(name.clone()))?;
                    let value = reqwest::header::HeaderValue::from_str(value)
                        .map_err(|_| OtlpError::Header(name.to_string()))?;
                    headers.append(name, value);
                }
                Transport::Http { client, headers }
            }
            OtlpProtocol::Grpc => {
                use keda_scalers::scalers::external::channel::{
                    ChannelKey, ExternalChannel, ScalerAddress,
                };
                let url = &settings.endpoint;
                let address = ScalerAddress {
                    host: url
                        .host_str()
                        .unwrap_or("localhost")
                        .trim_matches(['[', ']'])
                        .to_string(),
                    port: url.port_or_known_default().unwrap_or(4317),
                };
                let key = ChannelKey {
                    address,
                    tls: (url.scheme() == "https").then_some(tls),
                };
                let channel = ExternalChannel::new(&key, settings.timeout)
                    .map_err(|e| OtlpError::Client(e.to_string()))?;
                let client =
                    proto::collector::metrics::v1::metrics_service_client::MetricsServiceClient::new(
                        channel.channel(),
                    );
                let mut headers = tonic::metadata::MetadataMap::new();
                for (name, value) in &settings.headers {
                    let key = tonic::metadata::MetadataKey::from_bytes(
                        name.to_ascii_lowercase().as_bytes(),
                    )
                    .map_err(|_| OtlpError::Header(name.clone()))?;
                    let value = value.parse().map_err(|_| OtlpError::Header(name.clone()))?;
                    headers.append(key, value);
                }
                Transport::Grpc { client, headers }
            }
        };
        Ok(Self {
            settings,
            transport,
        })
    }

    /// The settings it was built with.
    pub fn settings(&self) -> &OtlpSettings {
        &self.settings
    }

    /// Sends one export request.
    ///
    /// # Errors
    /// The request failed, timed out, or the receiver refused it.
    pub async fn send(&self, request: &ExportMetricsServiceRequest) -> Result<(), OtlpError> {
        let endpoint = self.settings.endpoint.to_string();
        match &self.transport {
            Transport::Http { client, headers } => {
                let mut body = request.encode_to_vec();
                let mut builder = client
                    .post(self.settings.endpoint.clone())
                    .headers(headers.clone())
                    .header(reqwest::header::CONTENT_TYPE, "application/x-protobuf");
                if self.settings.gzip {
                    let mut encoder =
                        flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                    body = encoder
                        .write_all(&body)
                        .and_then(|()| encoder.finish())
                        .map_err(|e| OtlpError::Client(e.to_string()))?;
                    builder = builder.header(reqwest::header::CONTENT_ENCODING, "gzip");
                }
                let response = builder
                    .body(body)
                    .send()
                    .await
                    .map_err(|e| OtlpError::Send {
                        endpoint: endpoint.clone(),
                        reason: e.without_url().to_string(),
                    })?;
                let status = response.status();
                if !status.is_success() {
                    return Err(OtlpError::Status {
                        endpoint,
                        status: status.to_string(),
                    });
                }
                Ok(())
            }
            Transport::Grpc { client, headers } => {
                let mut call = tonic::Request::new(request.clone());
                *call.metadata_mut() = headers.clone();
                call.set_timeout(self.settings.timeout);
                let mut client = client.clone();
                client
                    .export(call)
                    .await
                    .map(|_| ())
                    .map_err(|status| OtlpError::Status {
                        endpoint,
                        status: format!("gRPC status {:?}", status.code()),
                    })
            }
        }
    }
}

/// The bound of the export made at shutdown.
const FINAL_EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// Exports `metrics` every `settings.interval` until `cancel`, then once more (bounded by the
/// export timeout and at most 5 s), as the Go SDK's periodic reader does when shut down. A
/// failed export is logged; the next one sends the state of then (cumulative series lose
/// nothing; there are no retries).
pub async fn run(metrics: Metrics, exporter: Exporter, cancel: CancellationToken) {
    let settings = exporter.settings().clone();
    info!(
        endpoint = %settings.endpoint,
        protocol = ?settings.protocol,
        interval_ms = settings.interval.as_millis(),
        "exporting OpenTelemetry metrics over OTLP"
    );
    let exporter = Arc::new(exporter);
    let mut translator = Translator::new(settings.temporality, SystemTime::now());
    let mut ticks = tokio::time::interval_at(
        tokio::time::Instant::now() + settings.interval,
        settings.interval,
    );
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let last = tokio::select! {
            _ = ticks.tick() => false,
            () = cancel.cancelled() => true,
        };
        let request = export_request(
            &settings.resource,
            translator.translate(&metrics.encode(), SystemTime::now()),
        );
        // The last export must not hold the shutdown up for long.
        let bound = if last {
            settings.export_timeout.min(FINAL_EXPORT_TIMEOUT)
        } else {
            settings.export_timeout
        };
        match tokio::time::timeout(bound, exporter.send(&request)).await {
            Ok(Ok(())) => debug!(endpoint = %settings.endpoint, "OTLP export sent"),
            Ok(Err(e)) => warn!(error = %e, "OTLP metrics export failed"),
            Err(_) => warn!(
                endpoint = %settings.endpoint,
                timeout_ms = bound.as_millis(),
                "OTLP metrics export timed out"
            ),
        }
        if last {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::{BuildInfo, ResourceKind, ScalerLabels};

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: std::collections::HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect();
        move |name: &str| map.get(name).cloned()
    }

    fn settings(pairs: &[(&str, &str)]) -> (OtlpSettings, Vec<String>) {
        let mut warnings = Vec::new();
        let s = OtlpSettings::from_env(&env(pairs), "keda-operator", &mut warnings);
        (s, warnings)
    }

    #[test]
    fn defaults_are_the_go_exporters() {
        let (s, warnings) = settings(&[]);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(s.protocol, OtlpProtocol::HttpProtobuf);
        assert_eq!(s.endpoint.as_str(), "https://localhost:4318/v1/metrics");
        assert_eq!(s.interval, Duration::from_secs(60));
        assert_eq!(s.timeout, Duration::from_secs(10));
        assert_eq!(s.export_timeout, Duration::from_secs(30));
        assert!(!s.gzip);
        assert_eq!(s.temporality, Temporality::Cumulative);
        assert!(s.resource.contains(&(
            "service.name".into(),
            "unknown_service:keda-operator".into()
        )));
        let (grpc, _) = settings(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]);
        assert_eq!(grpc.protocol, OtlpProtocol::Grpc);
        assert_eq!(grpc.endpoint.as_str(), "https://localhost:4317/");
    }

    #[test]
    fn endpoints_follow_the_otlp_rules() {
        let (s, _) = settings(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")]);
        assert_eq!(s.endpoint.as_str(), "http://collector:4318/v1/metrics");
        let (s, _) = settings(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/base/")]);
        assert_eq!(s.endpoint.as_str(), "http://collector:4318/base/v1/metrics");
        // The per-signal variable wins and is used as it is.
        let (s, _) = settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            (
                "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
                "https://other:9999/custom",
            ),
        ]);
        assert_eq!(s.endpoint.as_str(), "https://other:9999/custom");
        let (s, _) = settings(&[("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://other:9999")]);
        assert_eq!(s.endpoint.as_str(), "http://other:9999/");
        // INSECURE switches the scheme.
        let (s, _) = settings(&[("OTEL_EXPORTER_OTLP_INSECURE", "true")]);
        assert_eq!(s.endpoint.as_str(), "http://localhost:4318/v1/metrics");
        // gRPC: no path.
        let (s, _) = settings(&[
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317/x"),
        ]);
        assert_eq!(s.endpoint.as_str(), "http://collector:4317/");
        // Not a URL: ignored with a warning, the default kept.
        let (s, warnings) = settings(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "collector")]);
        assert_eq!(s.endpoint.as_str(), "https://localhost:4318/v1/metrics");
        assert_eq!(warnings.len(), 1, "{warnings:?}");
    }

    #[test]
    fn headers_timeouts_compression_and_resource() {
        let (s, warnings) = settings(&[
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "api-key=se%20cret, x-team = a ,broken",
            ),
            ("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "2500"),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
            ("OTEL_METRIC_EXPORT_INTERVAL", "3000"),
            ("OTEL_METRIC_EXPORT_TIMEOUT", "nope"),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "k8s.cluster.name=prod,service.name=ignored",
            ),
            ("OTEL_SERVICE_NAME", "keda"),
            (
                "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE",
                "LowMemory",
            ),
        ]);
        assert_eq!(
            s.headers,
            vec![
                ("api-key".to_string(), "se cret".to_string()),
                ("x-team".to_string(), "a".to_string())
            ]
        );
        assert_eq!(s.timeout, Duration::from_millis(2500));
        assert!(s.gzip);
        assert_eq!(s.interval, Duration::from_secs(3));
        assert_eq!(s.export_timeout, Duration::from_secs(30));
        assert_eq!(s.temporality, Temporality::Delta);
        assert!(s.resource.contains(&("service.name".into(), "keda".into())));
        assert!(
            s.resource
                .contains(&("k8s.cluster.name".into(), "prod".into()))
        );
        // The broken header entry and the bad timeout, never a header value.
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings.iter().all(|w| !w.contains("cret")));
    }

    #[test]
    fn label_values_are_unescaped() {
        let sample = parse_sample(r#"x_total{a="q\"uo\\te",b="n\nl"} 3"#).expect("sample");
        assert_eq!(sample.name, "x_total");
        assert_eq!(
            sample.labels,
            vec![
                ("a".to_string(), "q\"uo\\te".to_string()),
                ("b".to_string(), "n\nl".to_string())
            ]
        );
        assert_eq!(sample.value, 3.0);
        assert_eq!(parse_sample("y 1.5").expect("plain").value, 1.5);
    }

    fn labels(kind: ResourceKind) -> ScalerLabels {
        ScalerLabels {
            namespace: "shop".into(),
            scaled_resource: "orders".into(),
            scaler: "redisScaler".into(),
            trigger_index: 2,
            metric: "s2-redis-orders".into(),
            kind,
        }
    }

    fn find<'a>(metrics: &'a [Metric], name: &str) -> &'a Metric {
        metrics
            .iter()
            .find(|m| m.name == name)
            .unwrap_or_else(|| panic!("{name} missing"))
    }

    fn attrs(kv: &[KeyValue]) -> Vec<(String, String)> {
        kv.iter()
            .map(|kv| {
                let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                    Some(any_value::Value::StringValue(s)) => s.clone(),
                    Some(any_value::Value::BoolValue(b)) => b.to_string(),
                    other => format!("{other:?}"),
                };
                (kv.key.clone(), value)
            })
            .collect()
    }

    fn gauge_points(m: &Metric) -> &[NumberDataPoint] {
        match &m.data {
            Some(metric::Data::Gauge(g)) => &g.data_points,
            other => panic!("{}: not a gauge: {other:?}", m.name),
        }
    }

    fn sum(m: &Metric) -> &Sum {
        match &m.data {
            Some(metric::Data::Sum(s)) => s,
            other => panic!("{}: not a sum: {other:?}", m.name),
        }
    }

    #[test]
    fn keda_series_become_kedas_instruments() {
        let metrics = Metrics::with_build_info(BuildInfo {
            version: "1.2.3".into(),
            git_commit: "abc".into(),
            goversion: "rustc".into(),
            goos: "linux".into(),
            goarch: "amd64".into(),
        });
        let so = labels(ResourceKind::ScaledObject);
        let sj = labels(ResourceKind::ScaledJob);
        metrics.scaler_value(&so, 42.5);
        metrics.scaler_active(&so, true);
        metrics.scaler_latency(&so, Duration::from_micros(12_700));
        metrics.scaler_value(&sj, 7.0);
        metrics.scaler_error(&so);
        metrics.scaler_error(&so);
        metrics.loop_latency(
            "shop",
            "orders",
            ResourceKind::ScaledObject,
            Duration::from_millis(1500),
        );
        metrics.paused("shop", "orders", false);
        metrics.trigger_registered("redis");
        metrics.resource_registered(crate::telemetry::CustomResourceKind::ScaledObject, "shop");

        let mut translator = Translator::new(Temporality::Cumulative, UNIX_EPOCH);
        let now = UNIX_EPOCH + Duration::from_secs(100);
        let out = translator.translate(&metrics.encode(), now);

        let value = find(&out, "keda.scaler.metrics.value");
        let points = gauge_points(value);
        assert_eq!(points.len(), 2);
        let so_point = points
            .iter()
            .find(|p| {
                attrs(&p.attributes)
                    .iter()
                    .any(|(k, _)| k == "scaledObject")
            })
            .expect("scaledObject point");
        assert_eq!(
            attrs(&so_point.attributes),
            vec![
                ("metric".to_string(), "s2-redis-orders".to_string()),
                ("namespace".to_string(), "shop".to_string()),
                ("scaledObject".to_string(), "orders".to_string()),
                ("scaler".to_string(), "redisScaler".to_string()),
                ("scalerIndex".to_string(), "2".to_string()),
            ]
        );
        assert_eq!(
            so_point.value,
            Some(number_data_point::Value::AsDouble(42.5))
        );
        assert_eq!(so_point.time_unix_nano, 100_000_000_000);
        let sj_point = points
            .iter()
            .find(|p| attrs(&p.attributes).iter().any(|(k, _)| k == "scaledJob"))
            .expect("scaledJob point");
        assert!(attrs(&sj_point.attributes).contains(&("triggerIndex".into(), "2".into())));

        let active = gauge_points(find(&out, "keda.scaler.active"));
        assert_eq!(
            active[0].value,
            Some(number_data_point::Value::AsDouble(1.0))
        );
        let latency = find(&out, "keda.scaler.metrics.latency.seconds");
        assert_eq!(latency.unit, "s");
        assert_eq!(
            gauge_points(latency)[0].value,
            Some(number_data_point::Value::AsDouble(0.0127))
        );
        assert_eq!(
            gauge_points(find(&out, "keda.scaler.metrics.latency"))[0].value,
            Some(number_data_point::Value::AsDouble(12.0))
        );
        let errors = sum(find(&out, "keda.scaler.errors"));
        assert!(errors.is_monotonic);
        assert_eq!(
            errors.aggregation_temporality,
            AggregationTemporality::Cumulative as i32
        );
        assert_eq!(
            errors.data_points[0].value,
            Some(number_data_point::Value::AsInt(2))
        );
        let object_errors = sum(find(&out, "keda.scaledobject.errors"));
        assert_eq!(
            attrs(&object_errors.data_points[0].attributes),
            vec![
                ("namespace".to_string(), "shop".to_string()),
                ("scaledObject".to_string(), "orders".to_string())
            ]
        );
        let loop_latency = gauge_points(find(&out, "keda.internal.scale.loop.latency.seconds"));
        assert!(attrs(&loop_latency[0].attributes).contains(&("name".into(), "orders".into())));
        assert_eq!(
            gauge_points(find(&out, "keda.internal.scale.loop.latency"))[0].value,
            Some(number_data_point::Value::AsDouble(1500.0))
        );
        for name in ["keda.trigger.registered.count", "keda.trigger.totals"] {
            let s = sum(find(&out, name));
            assert!(!s.is_monotonic);
            assert_eq!(
                s.data_points[0].value,
                Some(number_data_point::Value::AsInt(1))
            );
        }
        assert!(
            attrs(&sum(find(&out, "keda.resource.registered.count")).data_points[0].attributes)
                .contains(&("type".into(), "scaled_object".into()))
        );
        let build = gauge_points(find(&out, "keda.build.info"));
        assert_eq!(build[0].value, Some(number_data_point::Value::AsInt(1)));
        assert!(attrs(&build[0].attributes).contains(&("version".into(), "1.2.3".into())));
        assert_eq!(
            gauge_points(find(&out, "keda.scaled.object.paused"))[0].value,
            Some(number_data_point::Value::AsDouble(0.0))
        );
        // No instrument of KEDA's OTel collector for the client's series.
        assert!(out.iter().all(|m| m.name.starts_with("keda.")));
    }

    #[test]
    fn histograms_and_delta_temporality() {
        let metrics = Metrics::new();
        let read = keda_scalers::request_metrics::RequestLabels {
            namespace: "shop".into(),
            scaled_resource: "orders".into(),
            scaler: "prometheusScaler".into(),
            trigger_name: "t".into(),
            metric_name: "s0-prometheus".into(),
            resource_type: "ScaledObject".into(),
        };
        metrics.scaler_http_request(
            &read,
            keda_scalers::request_metrics::RequestOutcome::Status(200),
            Duration::from_millis(30),
        );
        metrics.scaler_http_request(
            &read,
            keda_scalers::request_metrics::RequestOutcome::Status(200),
            Duration::from_secs(20),
        );
        let so = labels(ResourceKind::ScaledObject);
        metrics.scaler_error(&so);

        let start = UNIX_EPOCH + Duration::from_secs(10);
        let mut translator = Translator::new(Temporality::Delta, start);
        let out = translator.translate(&metrics.encode(), start + Duration::from_secs(5));
        let histogram = match &find(&out, "keda.scaler.http.request.duration.seconds").data {
            Some(metric::Data::Histogram(h)) => h.clone(),
            other => panic!("not a histogram: {other:?}"),
        };
        let point = &histogram.data_points[0];
        assert_eq!(point.count, 2);
        assert_eq!(point.explicit_bounds.len(), 11);
        assert_eq!(point.bucket_counts.len(), 12);
        // 30 ms lands in (0.025, 0.05], 20 s above the last bound.
        assert_eq!(point.bucket_counts[3], 1);
        assert_eq!(point.bucket_counts[11], 1);
        assert_eq!(point.bucket_counts.iter().sum::<u64>(), 2);
        assert_eq!(
            attrs(&point.attributes),
            vec![
                ("scaler".to_string(), "prometheusScaler".to_string()),
                ("status_code".to_string(), "200".to_string())
            ]
        );
        let requests = sum(find(&out, "keda.scaler.http.requests.count"));
        assert_eq!(
            requests.data_points[0].value,
            Some(number_data_point::Value::AsInt(2))
        );
        assert_eq!(
            requests.aggregation_temporality,
            AggregationTemporality::Delta as i32
        );

        // The next export carries only what happened since.
        metrics.scaler_error(&so);
        let out = translator.translate(&metrics.encode(), start + Duration::from_secs(9));
        let errors = sum(find(&out, "keda.scaler.errors"));
        assert_eq!(
            errors.data_points[0].value,
            Some(number_data_point::Value::AsInt(1))
        );
        assert_eq!(errors.data_points[0].start_time_unix_nano, 15_000_000_000);
        let requests = sum(find(&out, "keda.scaler.http.requests.count"));
        assert_eq!(
            requests.data_points[0].value,
            Some(number_data_point::Value::AsInt(0))
        );
        let histogram = match &find(&out, "keda.scaler.http.request.duration.seconds").data {
            Some(metric::Data::Histogram(h)) => h.clone(),
            other => panic!("not a histogram: {other:?}"),
        };
        assert_eq!(histogram.data_points[0].count, 0);
    }
}
