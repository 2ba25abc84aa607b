//! `http`: request concurrency (or rate) measured by the activator, for HTTP workloads that
//! scale from zero.
//!
//! The activator proxies the workload's traffic (see `docs/http.md`). It reads the same
//! trigger metadata to route, hold and limit requests, and streams per-second statistics and
//! immediate wake-ups to the operator ([`protocol`]). The operator's [`hub`] sums them over
//! activator replicas and keeps Knative's stable and panic windows ([`window`]); the
//! [`HttpScaler`] is the push scaler that serves them to the HPA and wakes the scale loop.
//! Which ScaledObject may route which host and path prefix is decided once, in [`claims`], for
//! the activator and the operator alike.

pub mod claims;
pub mod hub;
pub mod protocol;
pub mod window;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::autoscaling::v2::MetricSpec;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use self::hub::{ActivatorHub, HubKey, ScalingMetric, TargetSettings};
use self::protocol::TargetKey;
use self::window::WindowSettings;
use crate::context::ScalerContext;
use crate::error::{ScalerError, TriggerId};
use crate::metadata::{Found, MetadataParser, Param, ParamValue};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pool::Lease;
use crate::scaler::{BuiltScaler, MetricsAndActivity, PushScaler, Scaler};

const HOSTS: Param = Param::optional("hosts");
const PATH_PREFIXES: Param = Param::optional("pathPrefixes").default("/");
const SERVICE: Param = Param::required("service");
const PORT: Param = Param::optional("port");
const TARGET_CONCURRENCY: Param =
    Param::optional("targetConcurrency").range(f64::MIN_POSITIVE, f64::MAX);
const TARGET_REQUEST_RATE: Param =
    Param::optional("targetRequestRate").range(f64::MIN_POSITIVE, f64::MAX);
const CONTAINER_CONCURRENCY: Param = Param::optional("containerConcurrency")
    .default("0")
    .range(0.0, MAX_CONTAINER_CONCURRENCY as f64);
const HOLD_TIMEOUT: Param = Param::optional("holdTimeout")
    .default("20s")
    .range(0.0, 3600.0);
const RESPONSE_HEADER_TIMEOUT: Param = Param::optional("responseHeaderTimeout")
    .default("60s")
    .range(0.001, 3600.0);
const QUEUE_DEPTH: Param = Param::optional("queueDepth")
    .default("10000")
    .range(1.0, MAX_QUEUE_DEPTH as f64);
const STABLE_WINDOW: Param = Param::optional("stableWindow")
    .default("60s")
    .range(6.0, 3600.0);
const PANIC_WINDOW_PERCENTAGE: Param = Param::optional("panicWindowPercentage")
    .default("10")
    .range(1.0, 100.0);
const PANIC_THRESHOLD_PERCENTAGE: Param = Param::optional("panicThresholdPercentage")
    .default("200")
    .range(110.0, 1000.0);

const POD_CONCURRENCY_METRIC: Param = Param::optional("podConcurrencyMetric");
const POD_METRICS_PORT: Param = Param::optional("podMetricsPort").range(1.0, 65535.0);
const POD_METRICS_PATH: Param = Param::optional("podMetricsPath").default("/metrics");

/// The parameters of `http`.
pub const PARAMS: &[Param] = &[
    HOSTS,
    PATH_PREFIXES,
    SERVICE,
    PORT,
    TARGET_CONCURRENCY,
    TARGET_REQUEST_RATE,
    CONTAINER_CONCURRENCY,
    HOLD_TIMEOUT,
    RESPONSE_HEADER_TIMEOUT,
    QUEUE_DEPTH,
    STABLE_WINDOW,
    PANIC_WINDOW_PERCENTAGE,
    PANIC_THRESHOLD_PERCENTAGE,
    POD_CONCURRENCY_METRIC,
    POD_METRICS_PORT,
    POD_METRICS_PATH,
];

/// The largest `containerConcurrency`.
pub const MAX_CONTAINER_CONCURRENCY: u32 = 100_000;

/// The largest `queueDepth`.
pub const MAX_QUEUE_DEPTH: u32 = 1_000_000;

/// Default `targetConcurrency`.
pub const DEFAULT_TARGET_CONCURRENCY: f64 = 100.0;

/// A duration written as Go does (`500ms`, `20s`, `1m30s`, `1h`) or as plain seconds (`20`).
///
/// Parsing never fails on size: a value too long for a [`Duration`] (`1e20`, `9999999999h`)
/// becomes [`Duration::MAX`], so the parameter's range (every duration parameter has one)
/// reports it as out of range, naming the bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GoDuration(pub Duration);

impl GoDuration {
    /// Parses `500ms`, `1.5s`, `1m30s`, `2h`, or a plain number of seconds; `None` when `raw`
    /// is none of these (negative, `NaN`, an unknown unit). Too long saturates at
    /// [`Duration::MAX`].
    pub fn parse(raw: &str) -> Option<Self> {
        if let Ok(secs) = raw.parse::<f64>() {
            return (secs >= 0.0 && !secs.is_nan()).then(|| Self::saturating(secs));
        }
        if raw.is_empty() {
            return None;
        }
        let mut total = 0.0f64;
        let mut rest = raw;
        while !rest.is_empty() {
            let number_end = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(rest.len());
            let number: f64 = rest[..number_end].parse().ok()?;
            rest = &rest[number_end..];
            let unit_end = rest
                .find(|c: char| c.is_ascii_digit() || c == '.')
                .unwrap_or(rest.len());
            let scale = match &rest[..unit_end] {
                "ns" => 1e-9,
                "us" | "µs" => 1e-6,
                "ms" => 1e-3,
                "s" => 1.0,
                "m" => 60.0,
                "h" => 3600.0,
                _ => return None,
            };
            rest = &rest[unit_end..];
            // Non-negative terms: the sum can reach infinity but never NaN.
            total += number * scale;
        }
        Some(Self::saturating(total))
    }

    /// `secs` (not negative, not NaN) as a duration, [`Duration::MAX`] when longer.
    fn saturating(secs: f64) -> Self {
        Self(Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX))
    }
}

impl ParamValue for GoDuration {
    const EXPECTED: &'static str = "a duration such as 500ms, 20s or 1m30s";
    fn parse_param(raw: &str, _: &Param) -> Option<Self> {
        Self::parse(raw)
    }
    /// Seconds, for the parameter's range.
    fn as_number(&self) -> Option<f64> {
        Some(self.0.as_secs_f64())
    }
    fn describe_bound(bound: f64) -> String {
        format_seconds(bound)
    }
}

/// `bound` seconds as a Go duration: `1ms`, `6s`, `1h`, `1m30s`.
pub fn format_seconds(bound: f64) -> String {
    match Duration::try_from_secs_f64(bound) {
        Ok(d) if d.is_zero() => "0s".to_string(),
        Ok(d) if d.subsec_nanos() != 0 && d.as_secs() == 0 => format!("{}ms", d.as_millis()),
        Ok(d) => {
            let secs = d.as_secs();
            let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
            let mut out = String::new();
            if h > 0 {
                out.push_str(&format!("{h}h"));
            }
            if m > 0 {
                out.push_str(&format!("{m}m"));
            }
            if s > 0 || out.is_empty() {
                out.push_str(&format!("{s}s"));
            }
            out
        }
        Err(_) => format!("{bound}s"),
    }
}

/// Which port of the target Service to forward to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortRef {
    /// The Service's only port.
    Only,
    /// The port with this name.
    Name(String),
    /// The port with this number.
    Number(u16),
}

/// A parsed `http` trigger: what the activator routes and how the target scales.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpTrigger {
    /// Host names routed to the target, lowercase: exact (`api.example.com`), wildcard
    /// (`*.example.com`, any subdomain) or `*` (any host). Empty means any host.
    pub hosts: Vec<String>,
    /// Path prefixes routed to the target (default `/`).
    pub path_prefixes: Vec<String>,
    /// The target Service, in the ScaledObject's namespace: a DNS label, so it can never
    /// name a Service of another namespace (`web.other`, `other/web`).
    pub service: String,
    /// The Service port.
    pub port: PortRef,
    /// What the HPA scales on, and the per-pod target.
    pub metric: ScalingMetric,
    /// Requests one pod may have in flight through one activator; 0 = no limit.
    pub container_concurrency: u32,
    /// How long a request may wait for a ready endpoint before it gets 504.
    pub hold_timeout: Duration,
    /// How long the pod may take to send its response head once a request is forwarded,
    /// before the client gets 504.
    pub response_header_timeout: Duration,
    /// How many requests may wait per target per activator before new ones get 503.
    pub queue_depth: usize,
    /// Stable and panic windows.
    pub windows: WindowSettings,
    /// The in-flight gauge every pod exposes, which lets the activators leave the request
    /// path (serve mode, `docs/http.md`); `None`: the target stays in proxy mode.
    pub pod_metric: Option<PodMetric>,
}

/// Where a pod of the target says how many requests it is serving: a Prometheus text gauge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodMetric {
    /// The gauge's name; every series of that name is summed.
    pub name: String,
    /// The port on the pod; `None`: the port the activators forward to.
    pub port: Option<u16>,
    /// The path (default `/metrics`).
    pub path: String,
}

/// Whether `name` is a Prometheus metric name (`[a-zA-Z_:][a-zA-Z0-9_:]*`, at most 200
/// characters here).
fn metric_name_ok(name: &str) -> bool {
    name.len() <= 200
        && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// Whether `path` can be sent as a request target as it is: starts with `/`, at most 256
/// visible ASCII characters, no fragment.
fn metrics_path_ok(path: &str) -> bool {
    path.starts_with('/')
        && path.len() <= 256
        && path.bytes().all(|b| b.is_ascii_graphic() && b != b'#')
}

/// Whether `name` is a Service name (RFC 1035 label: lowercase letters, digits and `-`,
/// starting with a letter, ending with a letter or digit, at most 63 characters).
fn service_name_ok(name: &str) -> bool {
    name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

fn host_ok(host: &str) -> bool {
    let name = host.strip_prefix("*.").unwrap_or(host);
    host == "*"
        || (!name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
            && !name.starts_with('.')
            && !name.ends_with('.'))
}

impl HttpTrigger {
    /// Parses the trigger's metadata.
    ///
    /// # Errors
    /// `service` missing or not a Service name of the ScaledObject's namespace (a DNS label:
    /// `web.other` and `other/web` are refused); both `targetConcurrency` and
    /// `targetRequestRate`; a host that is not
    /// a DNS name, `*.`+name or `*`; a path prefix not starting with `/`; a port that is
    /// neither a number nor a name; a duration, count or percentage out of range.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        Ok(ctx.parse(|p| {
            let hosts: Vec<String> = p
                .get_opt::<Vec<String>>(&HOSTS)?
                .unwrap_or_default()
                .into_iter()
                .map(|h| h.to_ascii_lowercase())
                .collect();
            if let Some(bad) = hosts.iter().find(|h| !host_ok(h)) {
                return Err(p.rule(format!(
                    "parameter \"hosts\": \"{bad}\" is not a host name, \"*.\" followed by a host name, or \"*\""
                )));
            }
            let path_prefixes: Vec<String> = p.get(&PATH_PREFIXES)?;
            if let Some(bad) = path_prefixes.iter().find(|prefix| !prefix.starts_with('/')) {
                return Err(p.rule(format!(
                    "parameter \"pathPrefixes\": \"{bad}\" must start with \"/\""
                )));
            }
            let service: String = p.get(&SERVICE)?;
            if !service_name_ok(&service) {
                // A dotted or slashed name could be read as `<service>.<namespace>`: a route
                // never leads out of the ScaledObject's namespace.
                return Err(p.rule(format!(
                    "parameter \"service\": \"{service}\" is not a Service name (a DNS label \
                     such as \"shop\"); the Service must be in the ScaledObject's namespace"
                )));
            }
            let port = match p.find(&PORT)? {
                None => PortRef::Only,
                Some(found) => parse_port(p, found)?,
            };
            p.exclusive(&[&TARGET_CONCURRENCY, &TARGET_REQUEST_RATE])?;
            let metric = match p.get_opt::<f64>(&TARGET_REQUEST_RATE)? {
                Some(rate) => ScalingMetric::RequestRate(rate),
                None => ScalingMetric::Concurrency(
                    p.get_opt(&TARGET_CONCURRENCY)?
                        .unwrap_or(DEFAULT_TARGET_CONCURRENCY),
                ),
            };
            let hold_timeout: GoDuration = p.get(&HOLD_TIMEOUT)?;
            let response_header_timeout: GoDuration = p.get(&RESPONSE_HEADER_TIMEOUT)?;
            let stable_window: GoDuration = p.get(&STABLE_WINDOW)?;
            let queue_depth: u32 = p.get(&QUEUE_DEPTH)?;
            let pod_metric = parse_pod_metric(p, metric)?;
            Ok(Self {
                hosts,
                path_prefixes,
                service,
                port,
                metric,
                container_concurrency: p.get(&CONTAINER_CONCURRENCY)?,
                hold_timeout: hold_timeout.0,
                response_header_timeout: response_header_timeout.0,
                queue_depth: usize::try_from(queue_depth).unwrap_or(usize::MAX),
                windows: WindowSettings {
                    stable_window: stable_window.0,
                    panic_window_percentage: p.get(&PANIC_WINDOW_PERCENTAGE)?,
                    panic_threshold_percentage: p.get(&PANIC_THRESHOLD_PERCENTAGE)?,
                },
                pod_metric,
            })
        })?)
    }

    /// The settings the operator's hub scales this target with.
    pub fn settings(&self) -> TargetSettings {
        TargetSettings {
            metric: self.metric,
            windows: self.windows,
        }
    }
}

/// `podConcurrencyMetric` and its port and path: only with `targetConcurrency` (a gauge of
/// requests in flight says nothing of a request rate), and the port and path only with it.
fn parse_pod_metric(
    p: &MetadataParser<'_>,
    metric: ScalingMetric,
) -> Result<Option<PodMetric>, crate::MetadataError> {
    let port: Option<u16> = p.get_opt(&POD_METRICS_PORT)?;
    let Some(name) = p.get_opt::<String>(&POD_CONCURRENCY_METRIC)? else {
        if port.is_some() || p.is_present(&POD_METRICS_PATH) {
            return Err(p.rule(
                "parameters \"podMetricsPort\" and \"podMetricsPath\" need \"podConcurrencyMetric\"",
            ));
        }
        return Ok(None);
    };
    if !metric_name_ok(&name) {
        return Err(p.rule(format!(
            "parameter \"podConcurrencyMetric\": \"{name}\" is not a Prometheus metric name"
        )));
    }
    if matches!(metric, ScalingMetric::RequestRate(_)) {
        return Err(p.rule(
            "parameter \"podConcurrencyMetric\" needs \"targetConcurrency\": a gauge of requests in flight cannot stand in for \"targetRequestRate\"",
        ));
    }
    let path: String = p.get(&POD_METRICS_PATH)?;
    if !metrics_path_ok(&path) {
        return Err(p.rule(format!(
            "parameter \"podMetricsPath\": \"{path}\" must start with \"/\" and be at most 256 visible characters without \"#\""
        )));
    }
    Ok(Some(PodMetric { name, port, path }))
}

fn parse_port(p: &MetadataParser<'_>, found: Found<'_>) -> Result<PortRef, crate::MetadataError> {
    if found.value.chars().all(|c| c.is_ascii_digit()) {
        return match found.value.parse::<u16>() {
            Ok(n) if n > 0 => Ok(PortRef::Number(n)),
            _ => Err(p.invalid(&PORT, found, "a port number between 1 and 65535")),
        };
    }
    let name_ok = found.value.len() <= 15
        && found
            .value
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if name_ok {
        Ok(PortRef::Name(found.value.to_string()))
    } else {
        Err(p.invalid(&PORT, found, "a port number or a Service port name"))
    }
}

/// The `http` push scaler: serves the hub's windows for one trigger and wakes the scale loop
/// the moment an activator holds a request.
pub struct HttpScaler {
    config: HttpTrigger,
    key: TargetKey,
    metric_name: String,
    metric_type: MetricTargetType,
    hub: Lease<HubKey, ActivatorHub>,
    trigger: TriggerId,
    closed: AtomicBool,
}

impl HttpScaler {
    /// Parses the trigger and registers it with the operator's hub.
    ///
    /// # Errors
    /// See [`HttpTrigger::parse`]; `metricType: Utilization`.
    pub async fn new(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let config = HttpTrigger::parse(ctx)?;
        let metric_type = ctx.external_metric_type()?;
        let key = TargetKey::new(
            ctx.scalable_namespace.clone(),
            ctx.scalable_name.clone(),
            ctx.trigger_index,
        );
        let hub = ActivatorHub::shared(&ctx.clients, &ctx.clock).await;
        hub.configure(&key, config.settings());
        Ok(Self {
            metric_name: ctx.metric_name(&format!("http-{}", config.service)),
            config,
            key,
            metric_type,
            hub,
            trigger: ctx.trigger_id(),
            closed: AtomicBool::new(false),
        })
    }

    /// The parsed trigger.
    pub fn config(&self) -> &HttpTrigger {
        &self.config
    }
}

#[async_trait]
impl Scaler for HttpScaler {
    /// One external metric, `s<i>-http-<service>`, with `targetConcurrency` (or
    /// `targetRequestRate`) as the per-pod target.
    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target_milli(self.metric_type, self.config.metric.target()),
        )]
    }

    /// The stable-window value, or while panicking the panic value (never decreasing during
    /// the panic). Active iff any activator replica holds or forwards a request, or a managed
    /// Service led clients straight to the pods within the last
    /// [`hub::SERVE_DRAIN_SECONDS`] (serve mode).
    async fn metrics_and_activity(
        &self,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(ScalerError::Closed {
                trigger: self.trigger.clone(),
            });
        }
        if metric_name != self.metric_name {
            return Err(ScalerError::UnknownMetric {
                trigger: self.trigger.clone(),
                metric_name: metric_name.to_string(),
            });
        }
        let (value, active) = self
            .hub
            .observe(&self.key)
            .map_or((0.0, false), |(o, active)| (o.value, active));
        Ok(MetricsAndActivity {
            values: vec![crate::MetricValue::new(metric_name, value)],
            active,
        })
    }

    async fn close(&self) {
        if !self.closed.swap(true, Ordering::AcqRel) {
            self.hub.release(&self.key);
        }
    }
}

#[async_trait]
impl PushScaler for HttpScaler {
    /// Sends `true` on every wake-up and whenever the target becomes active, `false` when it
    /// becomes inactive. Never touches the network: reports arrive through the hub.
    async fn run(&self, cancel: CancellationToken, activity: mpsc::Sender<bool>) {
        let mut rx = self.hub.subscribe(&self.key);
        let mut last = *rx.borrow_and_update();
        // A request may already be waiting when the loop (re)starts.
        if last.active && activity.send(true).await.is_err() {
            return;
        }
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                changed = rx.changed() => {
                    if changed.is_err() {
                        // The target was released by every scaler: nothing more will come.
                        cancel.cancelled().await;
                        return;
                    }
                    let now = *rx.borrow_and_update();
                    let send = if now.wakes != last.wakes || (now.active && !last.active) {
                        Some(true)
                    } else if !now.active && last.active {
                        Some(false)
                    } else {
                        None
                    };
                    last = now;
                    if let Some(value) = send
                        && activity.send(value).await.is_err()
                    {
                        return;
                    }
                }
            }
        }
    }
}

/// Factory of `http`.
///
/// # Errors
/// See [`HttpScaler::new`].
pub async fn build(ctx: ScalerContext) -> Result<BuiltScaler, ScalerError> {
    Ok(BuiltScaler::Push(Box::new(HttpScaler::new(&ctx).await?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(metadata: &[(&str, &str)]) -> ScalerContext {
        ScalerContext {
            scalable_name: "web".into(),
            scalable_namespace: "shop".into(),
            metadata: metadata
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..ScalerContext::new("http", 0)
        }
    }

    #[test]
    fn defaults_match_the_documentation() {
        let t = HttpTrigger::parse(&ctx(&[("service", "web")])).unwrap();
        assert_eq!(t.hosts, Vec::<String>::new());
        assert_eq!(t.path_prefixes, vec!["/".to_string()]);
        assert_eq!(t.port, PortRef::Only);
        assert_eq!(t.metric, ScalingMetric::Concurrency(100.0));
        assert_eq!(t.container_concurrency, 0);
        assert_eq!(t.hold_timeout, Duration::from_secs(20));
        assert_eq!(t.response_header_timeout, Duration::from_secs(60));
        assert_eq!(t.queue_depth, 10_000);
        assert_eq!(t.windows, WindowSettings::default());
    }

    #[test]
    fn the_pod_gauge_of_serve_mode_is_read_and_checked() {
        let t = HttpTrigger::parse(&ctx(&[
            ("service", "web"),
            ("podConcurrencyMetric", "http_requests_in_flight"),
            ("podMetricsPort", "9090"),
            ("podMetricsPath", "/stats?format=prometheus"),
        ]))
        .unwrap();
        assert_eq!(
            t.pod_metric,
            Some(PodMetric {
                name: "http_requests_in_flight".into(),
                port: Some(9090),
                path: "/stats?format=prometheus".into(),
            })
        );
        let t =
            HttpTrigger::parse(&ctx(&[("service", "web"), ("podConcurrencyMetric", "g")])).unwrap();
        assert_eq!(
            t.pod_metric.map(|m| (m.port, m.path)),
            Some((None, "/metrics".into()))
        );
        assert_eq!(
            HttpTrigger::parse(&ctx(&[("service", "web")]))
                .unwrap()
                .pod_metric,
            None
        );
        for (metadata, names) in [
            (
                &[("podConcurrencyMetric", "in flight")][..],
                "podConcurrencyMetric",
            ),
            (
                &[("podConcurrencyMetric", "g"), ("targetRequestRate", "5")][..],
                "targetRequestRate",
            ),
            (&[("podMetricsPort", "9090")][..], "podMetricsPort"),
            (&[("podMetricsPath", "/m")][..], "podMetricsPath"),
            (
                &[("podConcurrencyMetric", "g"), ("podMetricsPort", "70000")][..],
                "podMetricsPort",
            ),
            (
                &[("podConcurrencyMetric", "g"), ("podMetricsPath", "metrics")][..],
                "podMetricsPath",
            ),
            (
                &[("podConcurrencyMetric", "g"), ("podMetricsPath", "/a b")][..],
                "podMetricsPath",
            ),
        ] {
            let mut all = vec![("service", "web")];
            all.extend_from_slice(metadata);
            let error = HttpTrigger::parse(&ctx(&all)).unwrap_err().to_string();
            assert!(error.contains(names), "{metadata:?}: {error}");
        }
    }

    #[test]
    fn every_parameter_is_read() {
        let t = HttpTrigger::parse(&ctx(&[
            ("hosts", "API.example.com, *.example.org"),
            ("pathPrefixes", "/api,/v2"),
            ("service", "web"),
            ("port", "http"),
            ("targetRequestRate", "50"),
            ("containerConcurrency", "4"),
            ("holdTimeout", "1m30s"),
            ("responseHeaderTimeout", "2500ms"),
            ("queueDepth", "5"),
            ("stableWindow", "30s"),
            ("panicWindowPercentage", "20"),
            ("panicThresholdPercentage", "300"),
        ]))
        .unwrap();
        assert_eq!(t.hosts, vec!["api.example.com", "*.example.org"]);
        assert_eq!(t.path_prefixes, vec!["/api", "/v2"]);
        assert_eq!(t.port, PortRef::Name("http".into()));
        assert_eq!(t.metric, ScalingMetric::RequestRate(50.0));
        assert_eq!(t.container_concurrency, 4);
        assert_eq!(t.hold_timeout, Duration::from_secs(90));
        assert_eq!(t.response_header_timeout, Duration::from_millis(2500));
        assert_eq!(t.queue_depth, 5);
        assert_eq!(t.windows.stable_window, Duration::from_secs(30));
        assert_eq!(t.windows.panic_window(), Duration::from_secs(6));
        assert_eq!(t.windows.panic_threshold_percentage, 300.0);
    }

    #[test]
    fn invalid_metadata_names_the_parameter() {
        // (metadata, text the error must contain)
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[], "missing required parameter \"service\""),
            (
                &[
                    ("service", "w"),
                    ("targetConcurrency", "1"),
                    ("targetRequestRate", "1"),
                ],
                "cannot be used together",
            ),
            (
                &[("service", "w"), ("targetConcurrency", "0")],
                "targetConcurrency",
            ),
            (&[("service", "w"), ("hosts", "a b")], "\"hosts\""),
            // A Service of another namespace, however written.
            (
                &[("service", "web.other")],
                "\"service\": \"web.other\" is not a Service name",
            ),
            (
                &[("service", "other/web")],
                "the Service must be in the ScaledObject's namespace",
            ),
            (
                &[("service", "web.other.svc.cluster.local")],
                "is not a Service name",
            ),
            (&[("service", "Web")], "is not a Service name"),
            (
                &[("service", "w"), ("pathPrefixes", "api")],
                "\"pathPrefixes\"",
            ),
            (&[("service", "w"), ("port", "70000")], "\"port\""),
            (&[("service", "w"), ("port", "Http_Port")], "\"port\""),
            (
                &[("service", "w"), ("holdTimeout", "soon")],
                "\"holdTimeout\"",
            ),
            (
                &[("service", "w"), ("stableWindow", "1s")],
                "\"stableWindow\": \"1s\" is not between 6s and 1h",
            ),
            (
                &[("service", "w"), ("responseHeaderTimeout", "0s")],
                "\"responseHeaderTimeout\": \"0s\" is not between 1ms and 1h",
            ),
            (
                &[("service", "w"), ("responseHeaderTimeout", "61m")],
                "\"responseHeaderTimeout\": \"61m\" is not between 1ms and 1h",
            ),
            // Before, `1e20` panicked in `Duration::from_secs_f64`.
            (
                &[("service", "w"), ("holdTimeout", "1e20")],
                "\"holdTimeout\": \"1e20\" is not between 0s and 1h",
            ),
            (
                &[("service", "w"), ("holdTimeout", "99999999999999999999h")],
                "\"holdTimeout\": \"99999999999999999999h\" is not between 0s and 1h",
            ),
            (
                &[("service", "w"), ("stableWindow", "1e20")],
                "\"stableWindow\": \"1e20\" is not between 6s and 1h",
            ),
            (
                &[("service", "w"), ("queueDepth", "1000001")],
                "\"queueDepth\": \"1000001\" is not between 1 and 1000000",
            ),
            (
                &[("service", "w"), ("queueDepth", "18446744073709551616")],
                "\"queueDepth\": \"18446744073709551616\" is not between 1 and 1000000",
            ),
            (
                &[("service", "w"), ("containerConcurrency", "100001")],
                "\"containerConcurrency\": \"100001\" is not between 0 and 100000",
            ),
            (
                &[("service", "w"), ("responseHeaderTimeout", "later")],
                "\"responseHeaderTimeout\"",
            ),
            (&[("service", "w"), ("queueDepth", "0")], "\"queueDepth\""),
            (
                &[("service", "w"), ("panicThresholdPercentage", "100")],
                "panicThresholdPercentage",
            ),
        ];
        for (metadata, expected) in cases {
            let err = HttpTrigger::parse(&ctx(metadata)).unwrap_err().to_string();
            assert!(
                err.contains(expected) && err.contains("trigger 0 (http)"),
                "{metadata:?}: {err}"
            );
        }
    }

    #[test]
    fn go_durations_parse() {
        for (raw, millis) in [
            ("20", 20_000),
            ("500ms", 500),
            ("1.5s", 1_500),
            ("1m30s", 90_000),
            ("2h", 7_200_000),
        ] {
            assert_eq!(
                GoDuration::parse(raw),
                Some(GoDuration(Duration::from_millis(millis))),
                "{raw}"
            );
        }
        // Too long for a Duration: saturated, for the parameter's range to refuse.
        for raw in [
            "1e20",
            "1e400",
            "99999999999999999999h",
            "1000000000000000000000s",
        ] {
            assert_eq!(
                GoDuration::parse(raw),
                Some(GoDuration(Duration::MAX)),
                "{raw}"
            );
        }
        for raw in ["", "s", "10x", "-1", "1m-", "NaN", "-1e20"] {
            assert_eq!(GoDuration::parse(raw), None, "{raw}");
        }
    }

    #[tokio::test]
    async fn the_scaler_serves_the_hubs_value_against_the_target() {
        let ctx = ctx(&[("service", "web"), ("targetConcurrency", "10")]);
        let scaler = HttpScaler::new(&ctx).await.unwrap();
        let specs = scaler.metric_specs();
        let external = specs[0].external.as_ref().unwrap();
        assert_eq!(external.metric.name, "s0-http-web");
        assert_eq!(
            external.target.average_value.as_ref().unwrap().0,
            "10".to_string()
        );
        let hub = ActivatorHub::shared(&ctx.clients, &ctx.clock).await;
        let second = u64::try_from(ctx.clock.now().as_second()).unwrap();
        hub.apply(&protocol::Report::Sample {
            replica: "a".into(),
            second,
            targets: vec![protocol::TargetSample {
                target: TargetKey::new("shop", "web", 0),
                concurrency: 7.5,
                requests: 1.0,
                held: 0,
                in_flight: 3,
                ready: 1,
                serving: false,
            }],
        });
        let m = scaler.metrics_and_activity("s0-http-web").await.unwrap();
        assert_eq!(m.values[0].value, 7.5);
        assert!(m.active);
        assert!(scaler.metrics_and_activity("other").await.is_err());
    }

    #[tokio::test]
    async fn run_sends_true_at_once_on_a_wake_line() {
        let ctx = ctx(&[("service", "web")]);
        let scaler = std::sync::Arc::new(HttpScaler::new(&ctx).await.unwrap());
        let (tx, mut rx) = mpsc::channel(4);
        let cancel = CancellationToken::new();
        let run = tokio::spawn({
            let scaler = std::sync::Arc::clone(&scaler);
            let cancel = cancel.clone();
            async move { scaler.run(cancel, tx).await }
        });
        let hub = ActivatorHub::shared(&ctx.clients, &ctx.clock).await;
        // The subscription is made when `run` starts: wake until it is observed.
        let woke = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                hub.apply(&protocol::Report::Wake {
                    replica: "a".into(),
                    target: TargetKey::new("shop", "web", 0),
                });
                if let Ok(Some(v)) =
                    tokio::time::timeout(Duration::from_millis(50), rx.recv()).await
                {
                    return v;
                }
            }
        })
        .await
        .unwrap();
        assert!(woke);
        cancel.cancel();
        tokio::time::timeout(Duration::from_secs(5), run)
            .await
            .unwrap()
            .unwrap();
        // The channel closes when run returns.
        while rx.recv().await.is_some() {}
    }

    #[tokio::test]
    async fn after_a_wake_line_the_scaler_reports_the_target_active() {
        // The scale loop polls on the wake-up and must find the target active then, not at
        // the activator's next per-second sample.
        let ctx = ctx(&[("service", "web")]);
        let scaler = HttpScaler::new(&ctx).await.unwrap();
        let hub = ActivatorHub::shared(&ctx.clients, &ctx.clock).await;
        assert!(
            !scaler
                .metrics_and_activity("s0-http-web")
                .await
                .unwrap()
                .active
        );
        hub.apply(&protocol::Report::Wake {
            replica: "a".into(),
            target: TargetKey::new("shop", "web", 0),
        });
        assert!(
            scaler
                .metrics_and_activity("s0-http-web")
                .await
                .unwrap()
                .active
        );
    }

    #[tokio::test]
    async fn closing_the_last_scaler_forgets_the_target() {
        let ctx = ctx(&[("service", "web")]);
        let scaler = HttpScaler::new(&ctx).await.unwrap();
        let hub = ActivatorHub::shared(&ctx.clients, &ctx.clock).await;
        assert!(hub.observe(&TargetKey::new("shop", "web", 0)).is_some());
        scaler.close().await;
        assert!(hub.observe(&TargetKey::new("shop", "web", 0)).is_none());
        assert!(matches!(
            scaler.metrics_and_activity("s0-http-web").await,
            Err(ScalerError::Closed { .. })
        ));
    }
}
