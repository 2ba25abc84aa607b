//! The operator's Prometheus metrics, with KEDA's names, types, labels and help texts
//! (KEDA's `pkg/metricscollector/prommetrics.go`), so dashboards and alerts written for KEDA
//! keep working.
//!
//! The scale loops and controllers record through the typed methods of [`Metrics`]; nothing
//! else touches the registry. Label values are object names, namespaces, trigger types and
//! metric names only: never trigger metadata or resolved authentication, so no secret can reach
//! a label.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Metric, Registry};

use keda_scalers::request_metrics::{RequestLabels, RequestObserver, RequestOutcome};

mod labels;
mod objects;
mod per_object;
mod scalers;
mod service;
mod shards;

pub use labels::{
    BuildInfo, CustomResourceKind, ResourceKind, ScalerLabels, ScalerName, TriggerKey, scaler_label,
};
use labels::{
    EmptyUpstreamLabels, GrpcCodeLabels, GrpcLabels, HttpRequestLabels, METRIC_SERVICE_GRPC_METHOD,
    PanicLabels, ResourceLabels, TriggerLabels, VerbLabels,
};
use per_object::PerObject;

/// The `Content-Type` of [`Metrics::encode`]'s output (OpenMetrics text, which Prometheus
/// scrapes natively).
pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Every metric name starts with this, as in KEDA.
const NAMESPACE: &str = "keda";

/// KEDA reports cluster-scoped resources under this namespace label.
const CLUSTER_SCOPE_NAMESPACE: &str = "default";

/// Buckets of `rest_client_rate_limiter_duration_seconds`, client-go's (seconds).
const RATE_LIMITER_BUCKETS: [f64; 12] = [
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

type WaitHistograms = Family<VerbLabels, Histogram, fn() -> Histogram>;

fn rate_limiter_histogram() -> Histogram {
    Histogram::new(RATE_LIMITER_BUCKETS)
}

/// Buckets of `keda_internal_metricsservice_grpc_server_handling_seconds`, KEDA's (seconds).
const METRIC_SERVICE_BUCKETS: [f64; 14] = [
    0.001, 0.01, 0.1, 0.3, 0.6, 1.0, 3.0, 6.0, 9.0, 20.0, 30.0, 60.0, 90.0, 120.0,
];

type HandlingHistograms = Family<GrpcLabels, Histogram, fn() -> Histogram>;

/// Buckets of `keda_scaler_http_request_duration_seconds`: the Prometheus Go client's default
/// buckets, which `promhttp.InstrumentRoundTripperDuration` uses unless told otherwise
/// (seconds).
const HTTP_REQUEST_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

type HttpRequestHistograms = Family<HttpRequestLabels, Histogram, fn() -> Histogram>;

fn http_request_histogram() -> Histogram {
    Histogram::new(HTTP_REQUEST_BUCKETS)
}

fn metric_service_histogram() -> Histogram {
    Histogram::new(METRIC_SERVICE_BUCKETS)
}

struct Families {
    /// The per-scaler and per-object families (values, latency, activity, errors, paused, loop
    /// lag), kept per object and encoded at scrape time.
    per_object: Arc<PerObject>,
    trigger_registered: Family<TriggerLabels, Gauge>,
    resource_registered: Family<ResourceLabels, Gauge>,
    internal_panics: Family<PanicLabels, Counter>,
    build_info: Family<BuildInfo, Gauge>,
    rate_limiter_wait: WaitHistograms,
    rate_limiter_throttled: Family<VerbLabels, Counter>,
    grpc_started: Family<GrpcLabels, Counter>,
    grpc_handled: Family<GrpcCodeLabels, Counter>,
    grpc_msg_received: Family<GrpcLabels, Counter>,
    grpc_msg_sent: Family<GrpcLabels, Counter>,
    grpc_handling: HandlingHistograms,
    http_requests: Family<HttpRequestLabels, Counter>,
    http_duration: HttpRequestHistograms,
    empty_upstream: Family<EmptyUpstreamLabels, Counter>,
}

struct Inner {
    /// KEDA's families, all `keda_`.
    registry: RwLock<Registry>,
    /// The Kubernetes client's families, named as client-go names them (`rest_client_`).
    client_registry: Registry,
    families: Families,
    /// The custom resources counted in `keda_resource_registered_total` (and their triggers in
    /// `keda_trigger_registered_total`), so that counting one again replaces what it counted
    /// before: KEDA's `*PromMetricsMap` of its controllers.
    registered: Mutex<HashMap<RegisteredKey, Registration>>,
    /// `--enable-high-cardinality-metrics-labels`: the HTTP duration histogram gets every
    /// label of the request counter.
    high_cardinality: AtomicBool,
    /// The length of the last exposition [`Metrics::encode`] wrote: the next one starts with
    /// room for it. Grown by doubling, the text of 100,000 objects (about 150 MB) went through
    /// a series of ever larger buffers, the smaller of which glibc serves from its heaps and
    /// may keep after the scrape; allocated at its size at once, it is one mapping, returned
    /// when it is freed.
    last_len: AtomicUsize,
    /// The `keda_rs_shard_*` families, registered on first use (only with `--shards=auto`).
    shards: std::sync::OnceLock<shards::ShardFamilies>,
}

/// A custom resource counted in `keda_resource_registered_total`: its kind and
/// `namespace/name` in one text (neither part can hold a `/`), one allocation per resource.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct RegisteredKey {
    kind: CustomResourceKind,
    path: Box<str>,
}

impl RegisteredKey {
    fn new(kind: CustomResourceKind, namespace: &str, name: &str) -> Self {
        Self {
            kind,
            path: format!("{namespace}/{name}").into(),
        }
    }
}

/// What one counted custom resource contributes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Registration {
    uid: Option<Box<str>>,
    trigger_types: Box<[Box<str>]>,
}

/// The operator's metrics registry and its typed recording API. Cheap to clone; clones share
/// one registry.
///
/// ```
/// use std::time::Duration;
/// use keda_operator::telemetry::{Metrics, ResourceKind, ScalerLabels};
///
/// let metrics = Metrics::new();
/// let labels = ScalerLabels {
///     namespace: "shop".into(),
///     scaled_resource: "orders".into(),
///     scaler: "redisScaler".into(),
///     trigger_index: 0,
///     metric: "s0-redis-orders".into(),
///     kind: ResourceKind::ScaledObject,
/// };
/// metrics.scaler_value(&labels, 42.0);
/// metrics.scaler_latency(&labels, Duration::from_millis(3));
/// let text = metrics.encode();
/// assert!(text.contains(r#"keda_scaler_metrics_value{namespace="shop",metric="s0-redis-orders""#));
/// ```
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// Registers under KEDA's exact help text. prometheus-client appends a period to every help
/// text, so one already there is taken off first.
fn register(registry: &mut Registry, name: &str, help: &str, metric: impl Metric) {
    registry.register(name, help.strip_suffix('.').unwrap_or(help), metric);
}

impl Metrics {
    /// A registry with every KEDA operator metric, `keda_build_info` set for this binary.
    pub fn new() -> Self {
        Self::with_build_info(BuildInfo::current())
    }

    /// As [`new`](Self::new), with the given build information.
    pub fn with_build_info(build: BuildInfo) -> Self {
        let families = Families {
            per_object: Arc::default(),
            trigger_registered: Family::default(),
            resource_registered: Family::default(),
            internal_panics: Family::default(),
            build_info: Family::default(),
            rate_limiter_wait: Family::new_with_constructor(rate_limiter_histogram),
            rate_limiter_throttled: Family::default(),
            grpc_started: Family::default(),
            grpc_handled: Family::default(),
            grpc_msg_received: Family::default(),
            grpc_msg_sent: Family::default(),
            grpc_handling: Family::new_with_constructor(metric_service_histogram),
            http_requests: Family::default(),
            http_duration: Family::new_with_constructor(http_request_histogram),
            empty_upstream: Family::default(),
        };
        let mut registry = Registry::with_prefix(NAMESPACE);
        let r = &mut registry;
        let f = &families;
        register(
            r,
            "build_info",
            "Info metric, with static information about KEDA build like: version, git commit and Golang runtime info.",
            f.build_info.clone(),
        );
        register(
            r,
            "trigger_registered_total",
            "Total number of triggers per trigger type registered.",
            f.trigger_registered.clone(),
        );
        register(
            r,
            "resource_registered_total",
            "Total number of KEDA custom resources per namespace for each custom resource type (CRD) registered.",
            f.resource_registered.clone(),
        );
        // KEDA's gRPC server metrics of its metric service (`newPromServerMetrics`: namespace
        // `keda_internal_metricsservice`, go-grpc-middleware's names and help texts).
        register(
            r,
            "internal_metricsservice_grpc_server_started",
            "Total number of RPCs started on the server.",
            f.grpc_started.clone(),
        );
        register(
            r,
            "internal_metricsservice_grpc_server_handled",
            "Total number of RPCs completed on the server, regardless of success or failure.",
            f.grpc_handled.clone(),
        );
        register(
            r,
            "internal_metricsservice_grpc_server_msg_received",
            "Total number of RPC stream messages received on the server.",
            f.grpc_msg_received.clone(),
        );
        register(
            r,
            "internal_metricsservice_grpc_server_msg_sent",
            "Total number of gRPC stream messages sent by the server.",
            f.grpc_msg_sent.clone(),
        );
        register(
            r,
            "internal_metricsservice_grpc_server_handling_seconds",
            "Histogram of response latency (seconds) of gRPC that had been application-level handled by the server.",
            f.grpc_handling.clone(),
        );
        // KEDA's instrumented HTTP transport of the HTTP-based scalers
        // (`pkg/metricscollector/http_roundtripper.go`); KEDA's help texts are not known here.
        register(
            r,
            "scaler_http_requests",
            "Outbound HTTP requests made by scalers while reading a metric, by object, trigger, metric and status code (error: no answer).",
            f.http_requests.clone(),
        );
        register(
            r,
            "scaler_http_request_duration_seconds",
            "Duration of the outbound HTTP requests made by scalers while reading a metric, up to the answer's head, in seconds.",
            f.http_duration.clone(),
        );
        register(
            r,
            "scaler_empty_upstream_responses",
            "Number of times a query returns an empty result",
            f.empty_upstream.clone(),
        );
        // Not in KEDA, whose operator exits on a panic (crate::shared::isolation).
        register(
            r,
            "internal_panics",
            "Panics caught while reconciling or polling one ScaledObject or ScaledJob, by the component that caught them.",
            f.internal_panics.clone(),
        );
        // `keda_scaler_*`, `keda_scaled_object_*`, `keda_scaled_job_errors` and the loop lag.
        r.register_collector(Box::new(f.per_object.clone()));
        let mut client_registry = Registry::default();
        register(
            &mut client_registry,
            "rest_client_rate_limiter_duration_seconds",
            "Client side rate limiter latency in seconds. Broken down by verb.",
            families.rate_limiter_wait.clone(),
        );
        register(
            &mut client_registry,
            "rest_client_rate_limiter_throttled_requests",
            "Kubernetes API requests the client side rate limiter (--kube-api-qps, --kube-api-burst) delayed. Broken down by verb.",
            families.rate_limiter_throttled.clone(),
        );
        families.build_info.get_or_create(&build).set(1);
        Self {
            inner: Arc::new(Inner {
                registry: RwLock::new(registry),
                client_registry,
                families,
                registered: Mutex::new(HashMap::new()),
                high_cardinality: AtomicBool::new(false),
                last_len: AtomicUsize::new(0),
                shards: std::sync::OnceLock::new(),
            }),
        }
    }

    fn families(&self) -> &Families {
        &self.inner.families
    }

    /// Registers another metric in the same registry (for example the metric service's request
    /// metrics); `name` gets the `keda_` prefix.
    pub fn register(&self, name: &str, help: &str, metric: impl Metric) {
        let mut registry = self
            .inner
            .registry
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        register(&mut registry, name, help, metric);
    }

    /// The OpenMetrics text exposition of every metric (served as [`METRICS_CONTENT_TYPE`]).
    pub fn encode(&self) -> String {
        let registry = self
            .inner
            .registry
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        use prometheus_client::encoding::text::{encode_eof, encode_registry};
        let last = self.inner.last_len.load(Ordering::Relaxed);
        // A little more than last time, for the series added since.
        let mut text = String::with_capacity(last.saturating_add(last / 16));
        // Writing to a String cannot fail; an encoder error would mean a broken label set, and
        // a scrape still gets everything written before it.
        let encoded = encode_registry(&mut text, &registry)
            .and_then(|()| encode_registry(&mut text, &self.inner.client_registry))
            .and_then(|()| encode_eof(&mut text));
        if encoded.is_err() {
            let _ = writeln!(text, "# EOF");
        }
        self.inner.last_len.store(text.len(), Ordering::Relaxed);
        text
    }
}

#[cfg(test)]
mod tests;
