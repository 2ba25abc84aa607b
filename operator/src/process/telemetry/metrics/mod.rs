//! The operator's Prometheus metrics, with KEDA's names, types, labels and help texts
//! (KEDA's `pkg/metricscollector/prommetrics.go`), so dashboards and alerts written for KEDA
//! keep working.
//!
//! The scale loops and controllers record through the typed methods of [`Metrics`]; nothing
//! else touches the registry. Label values are object names, namespaces, trigger types and
//! metric names only: never trigger metadata or resolved authentication, so no secret can reach
//! a label.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Metric, Registry};

use keda_scalers::request_metrics::{RequestLabels, RequestObserver, RequestOutcome};

mod labels;

pub use labels::{BuildInfo, CustomResourceKind, ResourceKind, ScalerLabels};
use labels::{
    EmptyUpstreamLabels, GrpcCodeLabels, GrpcLabels, HttpRequestLabels, LoopLabels,
    METRIC_SERVICE_GRPC_METHOD, ObjectLabels, Owner, PanicLabels, ResourceLabels, TriggerLabels,
    VerbLabels,
};

/// The `Content-Type` of [`Metrics::encode`]'s output (OpenMetrics text, which Prometheus
/// scrapes natively).
pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Every metric name starts with this, as in KEDA.
const NAMESPACE: &str = "keda";

/// KEDA reports cluster-scoped resources under this namespace label.
const CLUSTER_SCOPE_NAMESPACE: &str = "default";

type FloatGauge = Gauge<f64, AtomicU64>;

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
    scaler_value: Family<ScalerLabels, FloatGauge>,
    scaler_latency: Family<ScalerLabels, FloatGauge>,
    scaler_active: Family<ScalerLabels, FloatGauge>,
    scaler_errors: Family<ScalerLabels, Counter>,
    scaled_object_errors: Family<ObjectLabels, Counter>,
    scaled_job_errors: Family<ObjectLabels, Counter>,
    scaled_object_paused: Family<ObjectLabels, FloatGauge>,
    trigger_registered: Family<TriggerLabels, Gauge>,
    resource_registered: Family<ResourceLabels, Gauge>,
    loop_latency: Family<LoopLabels, FloatGauge>,
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
    /// Per-scaler label sets recorded so far, by owner, so [`Metrics::forget_scalers`] can
    /// delete them (KEDA's `DeletePartialMatch`).
    recorded: Mutex<HashMap<Owner, HashSet<ScalerLabels>>>,
    /// The custom resources counted in `keda_resource_registered_total` (and their triggers in
    /// `keda_trigger_registered_total`), so that counting one again replaces what it counted
    /// before: KEDA's `*PromMetricsMap` of its controllers.
    registered: Mutex<HashMap<RegisteredKey, Registration>>,
    /// `--enable-high-cardinality-metrics-labels`: the HTTP duration histogram gets every
    /// label of the request counter.
    high_cardinality: AtomicBool,
}

/// A custom resource counted in `keda_resource_registered_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct RegisteredKey {
    kind: CustomResourceKind,
    namespace: String,
    name: String,
}

/// What one counted custom resource contributes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Registration {
    uid: Option<String>,
    trigger_types: Vec<String>,
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
            scaler_value: Family::default(),
            scaler_latency: Family::default(),
            scaler_active: Family::default(),
            scaler_errors: Family::default(),
            scaled_object_errors: Family::default(),
            scaled_job_errors: Family::default(),
            scaled_object_paused: Family::default(),
            trigger_registered: Family::default(),
            resource_registered: Family::default(),
            loop_latency: Family::default(),
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
            "scaler_metrics_value",
            "The current value for each scaler's metric that would be used by the HPA in computing the target average.",
            f.scaler_value.clone(),
        );
        register(
            r,
            "scaler_metrics_latency_seconds",
            "The latency of retrieving current metric from each scaler, in seconds.",
            f.scaler_latency.clone(),
        );
        register(
            r,
            "scaler_active",
            "Indicates whether a scaler is active (1), or not (0).",
            f.scaler_active.clone(),
        );
        register(
            r,
            "scaled_object_paused",
            "Indicates whether a ScaledObject is paused (1), or not (0).",
            f.scaled_object_paused.clone(),
        );
        // Counters get their `_total` suffix from the encoder.
        register(
            r,
            "scaler_detail_errors",
            "The total number of errors encountered for each scaler.",
            f.scaler_errors.clone(),
        );
        register(
            r,
            "scaled_object_errors",
            "The number of errors that have occurred for each ScaledObject.",
            f.scaled_object_errors.clone(),
        );
        register(
            r,
            "scaled_job_errors",
            "Number of scaled job errors",
            f.scaled_job_errors.clone(),
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
        register(
            r,
            "internal_scale_loop_latency_seconds",
            "Total deviation (in seconds) between the expected execution time and the actual execution time for the scaling loop.",
            f.loop_latency.clone(),
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
        // Not in KEDA, whose operator exits on a panic (crate::isolation).
        register(
            r,
            "internal_panics",
            "Panics caught while reconciling or polling one ScaledObject or ScaledJob, by the component that caught them.",
            f.internal_panics.clone(),
        );
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
                recorded: Mutex::new(HashMap::new()),
                registered: Mutex::new(HashMap::new()),
                high_cardinality: AtomicBool::new(false),
            }),
        }
    }

    fn families(&self) -> &Families {
        &self.inner.families
    }

    fn remember(&self, labels: &ScalerLabels) {
        let mut recorded = self
            .inner
            .recorded
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let set = recorded.entry(labels.owner()).or_default();
        if !set.contains(labels) {
            set.insert(labels.clone());
        }
    }

    /// `--enable-high-cardinality-metrics-labels`: from now on the HTTP request duration
    /// histogram carries the object, trigger and metric labels too (set it before recording).
    pub fn enable_high_cardinality_labels(&self) {
        self.inner.high_cardinality.store(true, Ordering::Relaxed);
    }

    /// `keda_scaler_http_requests_total` and `keda_scaler_http_request_duration_seconds`: one
    /// outbound HTTP request of a scaler, made while reading the metric `read` names.
    pub fn scaler_http_request(
        &self,
        read: &RequestLabels,
        outcome: RequestOutcome,
        elapsed: Duration,
    ) {
        let mut labels = HttpRequestLabels {
            read: RequestLabels {
                // Not a label of these families: one series per request target.
                resource_type: String::new(),
                ..read.clone()
            },
            status_code: outcome.label(),
            full: true,
        };
        self.families().http_requests.get_or_create(&labels).inc();
        if !self.inner.high_cardinality.load(Ordering::Relaxed) {
            labels = HttpRequestLabels {
                read: RequestLabels {
                    scaler: labels.read.scaler,
                    ..RequestLabels::default()
                },
                status_code: labels.status_code,
                full: false,
            };
        }
        self.families()
            .http_duration
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
    }

    /// `keda_scaler_empty_upstream_responses_total`: the event source answered the read `read`
    /// names with nothing (KEDA's `RecordEmptyUpstreamResponse`). As in KEDA, these series stay
    /// when their object is deleted.
    pub fn scaler_empty_upstream_response(&self, read: &RequestLabels, ignore_null_values: bool) {
        let labels = EmptyUpstreamLabels {
            read: read.clone(),
            ignore_null_values,
        };
        self.families().empty_upstream.get_or_create(&labels).inc();
    }

    /// `keda_scaler_metrics_value`: the metric value the HPA would use.
    pub fn scaler_value(&self, labels: &ScalerLabels, value: f64) {
        self.remember(labels);
        self.families()
            .scaler_value
            .get_or_create(labels)
            .set(value);
    }

    /// `keda_scaler_active`: 1 when the scaler is active, else 0.
    pub fn scaler_active(&self, labels: &ScalerLabels, active: bool) {
        self.remember(labels);
        self.families()
            .scaler_active
            .get_or_create(labels)
            .set(if active { 1.0 } else { 0.0 });
    }

    /// `keda_scaler_metrics_latency_seconds`: how long reading the scaler's metric took.
    pub fn scaler_latency(&self, labels: &ScalerLabels, latency: Duration) {
        self.remember(labels);
        self.families()
            .scaler_latency
            .get_or_create(labels)
            .set(latency.as_secs_f64());
    }

    /// A failed scaler read: increments `keda_scaler_detail_errors_total` for the scaler and
    /// the owner's `keda_scaled_object_errors_total` (or `keda_scaled_job_errors_total`), as
    /// KEDA does.
    pub fn scaler_error(&self, labels: &ScalerLabels) {
        self.remember(labels);
        self.families().scaler_errors.get_or_create(labels).inc();
        match labels.kind {
            ResourceKind::ScaledObject => {
                self.scaled_object_error(&labels.namespace, &labels.scaled_resource)
            }
            ResourceKind::ScaledJob => {
                self.scaled_job_error(&labels.namespace, &labels.scaled_resource)
            }
        }
    }

    /// A successful scaler read: makes sure the error counters exist at 0 so `rate()` works
    /// from the first error on, as KEDA does.
    pub fn scaler_ok(&self, labels: &ScalerLabels) {
        self.remember(labels);
        // Creating the series is the point; the returned read guard is released at once.
        let _ = self.families().scaler_errors.get_or_create(labels);
        let object = object_labels(labels.kind, &labels.namespace, &labels.scaled_resource);
        match labels.kind {
            ResourceKind::ScaledObject => {
                let _ = self.families().scaled_object_errors.get_or_create(&object);
            }
            ResourceKind::ScaledJob => {
                let _ = self.families().scaled_job_errors.get_or_create(&object);
            }
        }
    }

    /// `keda_scaled_object_errors_total`: an error of the ScaledObject (reconcile or loop).
    pub fn scaled_object_error(&self, namespace: &str, name: &str) {
        let labels = object_labels(ResourceKind::ScaledObject, namespace, name);
        self.families()
            .scaled_object_errors
            .get_or_create(&labels)
            .inc();
    }

    /// `keda_scaled_job_errors_total`: an error of the ScaledJob.
    pub fn scaled_job_error(&self, namespace: &str, name: &str) {
        let labels = object_labels(ResourceKind::ScaledJob, namespace, name);
        self.families()
            .scaled_job_errors
            .get_or_create(&labels)
            .inc();
    }

    /// `keda_scaled_object_paused`: 1 while the ScaledObject is paused, else 0.
    pub fn paused(&self, namespace: &str, name: &str, paused: bool) {
        let labels = object_labels(ResourceKind::ScaledObject, namespace, name);
        self.families()
            .scaled_object_paused
            .get_or_create(&labels)
            .set(if paused { 1.0 } else { 0.0 });
    }

    /// `keda_internal_scale_loop_latency_seconds`: how late the loop's tick ran compared with
    /// when it was due.
    pub fn loop_latency(&self, namespace: &str, name: &str, kind: ResourceKind, lag: Duration) {
        let labels = LoopLabels {
            namespace: namespace.to_string(),
            kind,
            resource: name.to_string(),
        };
        self.families()
            .loop_latency
            .get_or_create(&labels)
            .set(lag.as_secs_f64());
    }

    /// `keda_internal_panics_total`: `component` caught a panic in the work of the
    /// ScaledObject or ScaledJob `namespace/name` ([`crate::isolation`]).
    pub fn internal_panic(
        &self,
        component: &'static str,
        kind: ResourceKind,
        namespace: &str,
        name: &str,
    ) {
        let labels = PanicLabels {
            component,
            namespace: namespace.to_string(),
            kind,
            resource: name.to_string(),
        };
        self.families().internal_panics.get_or_create(&labels).inc();
    }

    /// `keda_resource_registered_total` + 1: a custom resource appeared. An empty namespace
    /// (cluster-scoped) is reported as `default`, as in KEDA.
    pub fn resource_registered(&self, kind: CustomResourceKind, namespace: &str) {
        self.families()
            .resource_registered
            .get_or_create(&resource_labels(kind, namespace))
            .inc();
    }

    /// `keda_resource_registered_total` - 1: a custom resource went away.
    pub fn resource_unregistered(&self, kind: CustomResourceKind, namespace: &str) {
        self.families()
            .resource_registered
            .get_or_create(&resource_labels(kind, namespace))
            .dec();
    }

    /// `keda_trigger_registered_total` + 1 for a trigger type. Empty types are ignored, as in
    /// KEDA.
    pub fn trigger_registered(&self, trigger_type: &str) {
        if let Some(labels) = trigger_labels(trigger_type) {
            self.families()
                .trigger_registered
                .get_or_create(&labels)
                .inc();
        }
    }

    /// `keda_trigger_registered_total` - 1 for a trigger type.
    pub fn trigger_unregistered(&self, trigger_type: &str) {
        if let Some(labels) = trigger_labels(trigger_type) {
            self.families()
                .trigger_registered
                .get_or_create(&labels)
                .dec();
        }
    }

    /// Counts the custom resource `namespace/name` of `kind` in `keda_resource_registered_total`
    /// and its `trigger_types` in `keda_trigger_registered_total`, replacing what it counted
    /// before (KEDA's controllers' `updatePromMetrics`, run at every reconcile). Idempotent:
    /// counting the same resource with the same triggers again changes nothing, so several
    /// observers of one resource count it once. `uid` identifies this incarnation of the
    /// resource for [`unregister_resource`](Self::unregister_resource).
    pub fn register_resource(
        &self,
        kind: CustomResourceKind,
        (namespace, name): (&str, &str),
        uid: Option<&str>,
        trigger_types: &[&str],
    ) {
        let key = RegisteredKey {
            kind,
            namespace: namespace.to_string(),
            name: name.to_string(),
        };
        let registration = Registration {
            uid: uid.map(str::to_string),
            trigger_types: trigger_types.iter().map(|t| (*t).to_string()).collect(),
        };
        let mut registered = self
            .inner
            .registered
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match registered.get(&key) {
            Some(old) if old.trigger_types == registration.trigger_types => {}
            Some(old) => {
                for t in &old.trigger_types {
                    self.trigger_unregistered(t);
                }
                for t in &registration.trigger_types {
                    self.trigger_registered(t);
                }
            }
            None => {
                self.resource_registered(kind, namespace);
                for t in &registration.trigger_types {
                    self.trigger_registered(t);
                }
            }
        }
        registered.insert(key, registration);
    }

    /// Stops counting the custom resource `namespace/name` of `kind` (KEDA's
    /// `updatePromMetricsOnDelete`). With `uid`, only the incarnation of that UID: one deleted
    /// and created again under the same name is left counted. Idempotent.
    pub fn unregister_resource(
        &self,
        kind: CustomResourceKind,
        (namespace, name): (&str, &str),
        uid: Option<&str>,
    ) {
        let key = RegisteredKey {
            kind,
            namespace: namespace.to_string(),
            name: name.to_string(),
        };
        let mut registered = self
            .inner
            .registered
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(old) = registered.get(&key) else {
            return;
        };
        if uid.is_some_and(|uid| old.uid.as_deref().is_some_and(|old| old != uid)) {
            return;
        }
        for t in &old.trigger_types {
            self.trigger_unregistered(t);
        }
        self.resource_unregistered(kind, namespace);
        registered.remove(&key);
    }

    /// Deletes every per-scaler series (value, active, latency, errors) of one ScaledObject or
    /// ScaledJob, and its paused and loop-latency series, so a deleted object or a removed
    /// trigger does not keep reporting stale values. The object's error counter is kept, as in
    /// KEDA.
    pub fn forget_scalers(&self, namespace: &str, name: &str, kind: ResourceKind) {
        let owner = Owner {
            namespace: namespace.to_string(),
            name: name.to_string(),
            kind,
        };
        let labels = self
            .inner
            .recorded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&owner)
            .unwrap_or_default();
        let f = self.families();
        for labels in &labels {
            f.scaler_value.remove(labels);
            f.scaler_active.remove(labels);
            f.scaler_latency.remove(labels);
            f.scaler_errors.remove(labels);
        }
        if kind == ResourceKind::ScaledObject {
            f.scaled_object_paused
                .remove(&object_labels(kind, namespace, name));
        }
        f.loop_latency.remove(&LoopLabels {
            namespace: namespace.to_string(),
            kind,
            resource: name.to_string(),
        });
    }

    /// `rest_client_rate_limiter_duration_seconds`: a Kubernetes API request with HTTP method
    /// `verb` waited `waited` for the client side rate limiter (zero when a token was free);
    /// a positive wait also counts in `rest_client_rate_limiter_throttled_requests_total`.
    pub fn rate_limiter_wait(&self, verb: &str, waited: Duration) {
        let labels = VerbLabels {
            verb: verb.to_string(),
        };
        let f = self.families();
        f.rate_limiter_wait
            .get_or_create(&labels)
            .observe(waited.as_secs_f64());
        if !waited.is_zero() {
            f.rate_limiter_throttled.get_or_create(&labels).inc();
        }
    }

    /// A metric read of the metric service began: KEDA's `GetMetrics` call started and its
    /// request received (`keda_internal_metricsservice_grpc_server_started_total`,
    /// `..._msg_received_total`).
    pub fn metric_service_call_started(&self) {
        let labels = GrpcLabels {
            grpc_method: METRIC_SERVICE_GRPC_METHOD,
        };
        let f = self.families();
        f.grpc_started.get_or_create(&labels).inc();
        f.grpc_msg_received.get_or_create(&labels).inc();
    }

    /// A metric read of the metric service was answered after `elapsed`, with values (`ok`) or
    /// an error: `..._msg_sent_total`, `..._handled_total` with `grpc_code` `OK`, or `Unknown`
    /// as KEDA's server reports the plain errors of its handler, and
    /// `..._handling_seconds`.
    pub fn metric_service_call_handled(&self, ok: bool, elapsed: Duration) {
        let labels = GrpcLabels {
            grpc_method: METRIC_SERVICE_GRPC_METHOD,
        };
        let f = self.families();
        f.grpc_msg_sent.get_or_create(&labels).inc();
        f.grpc_handled
            .get_or_create(&GrpcCodeLabels {
                grpc_method: METRIC_SERVICE_GRPC_METHOD,
                grpc_code: if ok { "OK" } else { "Unknown" },
            })
            .inc();
        f.grpc_handling
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
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
        let mut text = String::new();
        // Writing to a String cannot fail; an encoder error would mean a broken label set, and
        // a scrape still gets everything written before it.
        let encoded = encode_registry(&mut text, &registry)
            .and_then(|()| encode_registry(&mut text, &self.inner.client_registry))
            .and_then(|()| encode_eof(&mut text));
        if encoded.is_err() {
            let _ = writeln!(text, "# EOF");
        }
        text
    }
}

fn object_labels(kind: ResourceKind, namespace: &str, name: &str) -> ObjectLabels {
    ObjectLabels {
        namespace: namespace.to_string(),
        name: name.to_string(),
        key: match kind {
            ResourceKind::ScaledObject => "scaledObject",
            ResourceKind::ScaledJob => "scaledJob",
        },
    }
}

fn resource_labels(kind: CustomResourceKind, namespace: &str) -> ResourceLabels {
    let namespace = if namespace.is_empty() {
        CLUSTER_SCOPE_NAMESPACE
    } else {
        namespace
    };
    ResourceLabels {
        kind,
        namespace: namespace.to_string(),
    }
}

fn trigger_labels(trigger_type: &str) -> Option<TriggerLabels> {
    (!trigger_type.is_empty()).then(|| TriggerLabels {
        trigger_type: trigger_type.to_string(),
    })
}

impl RequestObserver for Metrics {
    fn request(&self, labels: &RequestLabels, outcome: RequestOutcome, elapsed: Duration) {
        self.scaler_http_request(labels, outcome, elapsed);
    }

    fn empty_upstream_response(&self, labels: &RequestLabels, ignore_null_values: bool) {
        self.scaler_empty_upstream_response(labels, ignore_null_values);
    }
}

#[cfg(test)]
mod tests;
