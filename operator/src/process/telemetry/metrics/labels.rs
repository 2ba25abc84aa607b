//! The label sets of the operator's metric families: what each series describes (a scaler's
//! reading, an object, a loop, a panic, a registered resource or trigger, a client request,
//! a metric service call) and the static labels of `keda_build_info`, encoded with KEDA's
//! label names and in KEDA's order.

use std::sync::Arc;

use keda_scalers::request_metrics::RequestLabels;
use prometheus_client::encoding::{EncodeLabelSet, LabelSetEncoder};

/// The service and method of KEDA's metric service (`pkg/metricsservice/api/metrics.proto`):
/// the one call the metrics-apiserver makes, which keda-rs' metric service answers over
/// HTTP/2 and JSON instead of gRPC.
pub(super) const METRIC_SERVICE_GRPC_SERVICE: &str = "api.MetricsService";
pub(super) const METRIC_SERVICE_GRPC_METHOD: &str = "GetMetrics";

/// `{grpc_type, grpc_service, grpc_method}` of KEDA's gRPC server metrics (go-grpc-middleware's
/// Prometheus provider).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct GrpcLabels {
    pub(super) grpc_method: &'static str,
}

impl EncodeLabelSet for GrpcLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        [
            ("grpc_type", "unary"),
            ("grpc_service", METRIC_SERVICE_GRPC_SERVICE),
            ("grpc_method", self.grpc_method),
        ]
        .encode(encoder)
    }
}

/// [`GrpcLabels`] and `grpc_code`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct GrpcCodeLabels {
    pub(super) grpc_method: &'static str,
    pub(super) grpc_code: &'static str,
}

impl EncodeLabelSet for GrpcCodeLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        [
            ("grpc_type", "unary"),
            ("grpc_service", METRIC_SERVICE_GRPC_SERVICE),
            ("grpc_method", self.grpc_method),
            ("grpc_code", self.grpc_code),
        ]
        .encode(encoder)
    }
}

/// Which kind of scalable resource a scaler or loop belongs to: the `type` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResourceKind {
    ScaledObject,
    ScaledJob,
}

impl ResourceKind {
    /// The label value KEDA uses: `scaledobject` or `scaledjob`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ScaledObject => "scaledobject",
            Self::ScaledJob => "scaledjob",
        }
    }

    /// The kind's name: `ScaledObject` or `ScaledJob`.
    pub fn kind(self) -> &'static str {
        match self {
            Self::ScaledObject => "ScaledObject",
            Self::ScaledJob => "ScaledJob",
        }
    }

    /// The kind as a custom resource of `keda_resource_registered_total`.
    pub fn custom_resource(self) -> CustomResourceKind {
        match self {
            Self::ScaledObject => CustomResourceKind::ScaledObject,
            Self::ScaledJob => CustomResourceKind::ScaledJob,
        }
    }
}

/// A KEDA custom resource kind, the `type` label of `keda_resource_registered_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CustomResourceKind {
    ScaledObject,
    ScaledJob,
    TriggerAuthentication,
    ClusterTriggerAuthentication,
    /// CloudEventSource and ClusterCloudEventSource (KEDA counts both as one type).
    CloudEventSource,
}

impl CustomResourceKind {
    /// The label value KEDA uses (`scaled_object`, `scaled_job`, `trigger_authentication`,
    /// `cluster_trigger_authentication`, `cloudevent_source`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ScaledObject => "scaled_object",
            Self::ScaledJob => "scaled_job",
            Self::TriggerAuthentication => "trigger_authentication",
            Self::ClusterTriggerAuthentication => "cluster_trigger_authentication",
            Self::CloudEventSource => "cloudevent_source",
        }
    }
}

/// The labels of the per-scaler metrics: `namespace`, `metric`, `scaledObject`, `scaler`,
/// `triggerIndex`, `type`.
///
/// For a ScaledJob, `scaledObject` holds the ScaledJob's name and `type` is `scaledjob`, as in
/// KEDA.
///
/// The operator keeps a trigger's `scaler` and `metric` texts once, in its object's record of
/// series (`per_object.rs`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ScalerLabels {
    /// The namespace of the ScaledObject or ScaledJob.
    pub namespace: Arc<str>,
    /// The name of the ScaledObject or ScaledJob.
    pub scaled_resource: Arc<str>,
    /// The scaler's name. KEDA reports its Go type name here (`redisScaler`, `kafkaScaler`, ...).
    pub scaler: Arc<str>,
    /// The trigger's position in `spec.triggers`.
    pub trigger_index: usize,
    /// The external metric name (`s0-redis-mylist`).
    pub metric: Arc<str>,
    /// ScaledObject or ScaledJob.
    pub kind: ResourceKind,
}

/// Which trigger's series a recording is for, borrowed from the caller: recording into a series
/// that exists allocates nothing; its texts are copied only when it is first made.
#[derive(Debug, Clone, Copy)]
pub struct TriggerKey<'a> {
    /// ScaledObject or ScaledJob.
    pub kind: ResourceKind,
    /// The namespace of the ScaledObject or ScaledJob.
    pub namespace: &'a str,
    /// The name of the ScaledObject or ScaledJob.
    pub scaled_resource: &'a str,
    /// The `scaler` label.
    pub scaler: ScalerName<'a>,
    /// The trigger's position in `spec.triggers`.
    pub trigger_index: usize,
    /// The external metric name (`s0-redis-mylist`).
    pub metric: &'a str,
}

impl<'a> From<&'a ScalerLabels> for TriggerKey<'a> {
    fn from(labels: &'a ScalerLabels) -> Self {
        Self {
            kind: labels.kind,
            namespace: &labels.namespace,
            scaled_resource: &labels.scaled_resource,
            scaler: ScalerName::Label(&labels.scaler),
            trigger_index: labels.trigger_index,
            metric: &labels.metric,
        }
    }
}

/// The `scaler` label of a [`TriggerKey`]: given, or made from the trigger ([`scaler_label`]).
#[derive(Debug, Clone, Copy)]
pub enum ScalerName<'a> {
    /// The label itself.
    Label(&'a str),
    /// A trigger's `type` and `name`.
    Trigger {
        /// `triggers[].type`.
        trigger_type: &'a str,
        /// `triggers[].name` (may be empty).
        name: &'a str,
    },
}

impl ScalerName<'_> {
    /// Whether the label is `label`, without making it.
    pub(super) fn is(&self, label: &str) -> bool {
        match *self {
            Self::Label(own) => own == label,
            Self::Trigger { trigger_type, name } => {
                let mut rest = Rest(label);
                write_scaler_label(trigger_type, name, &mut rest).is_ok() && rest.0.is_empty()
            }
        }
    }

    /// The label, as a record keeps it.
    pub(super) fn to_arc(self) -> Arc<str> {
        match self {
            Self::Label(own) => Arc::from(own),
            Self::Trigger { trigger_type, name } => scaler_label(trigger_type, name).into(),
        }
    }
}

/// A writer that checks what is written against a text, consuming it: `Err` at the first
/// difference, and what is left of the text is what was not written.
struct Rest<'a>(&'a str);

impl std::fmt::Write for Rest<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0 = self.0.strip_prefix(s).ok_or(std::fmt::Error)?;
        Ok(())
    }
}

/// The `scaler` label KEDA reports: the trigger's name when it has one, else the Go type name
/// of the scaler (`redisScaler`; one type serves several trigger types, e.g. `redis-cluster`).
pub fn scaler_label(trigger_type: &str, trigger_name: &str) -> String {
    let mut label = String::with_capacity(trigger_type.len().max(trigger_name.len()) + 6);
    // Writing to a String does not fail.
    let _ = write_scaler_label(trigger_type, trigger_name, &mut label);
    label
}

/// Writes [`scaler_label`] to `out`.
fn write_scaler_label(
    trigger_type: &str,
    trigger_name: &str,
    out: &mut impl std::fmt::Write,
) -> std::fmt::Result {
    if !trigger_name.is_empty() {
        return out.write_str(trigger_name);
    }
    let known = match trigger_type {
        "redis" | "redis-cluster" | "redis-sentinel" => Some("redisScaler"),
        "redis-streams" | "redis-cluster-streams" | "redis-sentinel-streams" => {
            Some("redisStreamsScaler")
        }
        "cpu" | "memory" => Some("cpuMemoryScaler"),
        "rabbitmq" => Some("rabbitMQScaler"),
        "metrics-api" => Some("metricsAPIScaler"),
        "external-push" => Some("externalPushScaler"),
        "activemq" => Some("activeMQScaler"),
        // Exported in KEDA (`pkg/scalers/beanstalkd_scaler.go`).
        "beanstalkd" => Some("BeanstalkdScaler"),
        // Exported too (`pkg/scalers/predictkube_scaler.go`).
        "predictkube" => Some("PredictKubeScaler"),
        _ => None,
    };
    if let Some(name) = known {
        return out.write_str(name);
    }
    // Go's names are the trigger type in lower camel case: `kafka` -> `kafkaScaler`.
    let mut upper = false;
    for c in trigger_type.chars() {
        if c == '-' || c == '_' {
            upper = true;
        } else if upper {
            for u in c.to_uppercase() {
                out.write_char(u)?;
            }
            upper = false;
        } else {
            out.write_char(c)?;
        }
    }
    out.write_str("Scaler")
}

/// A series' [`ScalerLabels`] as they are encoded, borrowed from the record that keeps them.
#[derive(Debug, Clone, Copy)]
pub(super) struct ScalerSet<'a> {
    pub(super) namespace: &'a str,
    pub(super) scaled_resource: &'a str,
    pub(super) scaler: &'a str,
    pub(super) trigger_index: usize,
    pub(super) metric: &'a str,
    pub(super) kind: ResourceKind,
}

impl EncodeLabelSet for ScalerSet<'_> {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        let index = self.trigger_index.to_string();
        [
            ("namespace", self.namespace),
            ("metric", self.metric),
            ("scaledObject", self.scaled_resource),
            ("scaler", self.scaler),
            ("triggerIndex", index.as_str()),
            ("type", self.kind.as_str()),
        ]
        .encode(encoder)
    }
}

/// The labels of KEDA's `keda_scaler_http_*` families (`pkg/metricscollector/prommetrics.go`):
/// `namespace`, `scaled_resource`, `scaler`, `trigger_name`, `metric_name`, `status_code`;
/// when `full` is false only `scaler` and `status_code` (the duration histogram without
/// `--enable-high-cardinality-metrics-labels`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct HttpRequestLabels {
    pub(super) read: RequestLabels,
    pub(super) status_code: String,
    pub(super) full: bool,
}

impl EncodeLabelSet for HttpRequestLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        if self.full {
            [
                ("namespace", self.read.namespace.as_str()),
                ("scaled_resource", self.read.scaled_resource.as_str()),
                ("scaler", self.read.scaler.as_str()),
                ("trigger_name", self.read.trigger_name.as_str()),
                ("metric_name", self.read.metric_name.as_str()),
                ("status_code", self.status_code.as_str()),
            ]
            .encode(encoder)
        } else {
            [
                ("scaler", self.read.scaler.as_str()),
                ("status_code", self.status_code.as_str()),
            ]
            .encode(encoder)
        }
    }
}

/// The labels of KEDA's `keda_scaler_empty_upstream_responses_total`, in its order:
/// `namespace`, `scaledResource`, `triggerName`, `metricName`, `resourceType` (`ScaledObject`
/// or `ScaledJob`), `ignoreNullValues`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct EmptyUpstreamLabels {
    pub(super) read: RequestLabels,
    pub(super) ignore_null_values: bool,
}

impl EncodeLabelSet for EmptyUpstreamLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        [
            ("namespace", self.read.namespace.as_str()),
            ("scaledResource", self.read.scaled_resource.as_str()),
            ("triggerName", self.read.trigger_name.as_str()),
            ("metricName", self.read.metric_name.as_str()),
            ("resourceType", self.read.resource_type.as_str()),
            (
                "ignoreNullValues",
                if self.ignore_null_values {
                    "true"
                } else {
                    "false"
                },
            ),
        ]
        .encode(encoder)
    }
}

/// `{verb}` of the Kubernetes client's metrics: the HTTP method, as client-go labels them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct VerbLabels {
    pub(super) verb: String,
}

impl EncodeLabelSet for VerbLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        [("verb", self.verb.as_str())].encode(encoder)
    }
}

/// `{namespace, scaledObject}` or `{namespace, scaledJob}`.
#[derive(Debug, Clone, Copy)]
pub(super) struct ObjectLabels<'a> {
    pub(super) namespace: &'a str,
    pub(super) name: &'a str,
    pub(super) key: &'static str,
}

impl<'a> ObjectLabels<'a> {
    pub(super) fn new(kind: ResourceKind, namespace: &'a str, name: &'a str) -> Self {
        Self {
            namespace,
            name,
            key: match kind {
                ResourceKind::ScaledObject => "scaledObject",
                ResourceKind::ScaledJob => "scaledJob",
            },
        }
    }
}

impl EncodeLabelSet for ObjectLabels<'_> {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        [("namespace", self.namespace), (self.key, self.name)].encode(encoder)
    }
}

/// `{namespace, type, resource}` of the scale loop latency.
#[derive(Debug, Clone, Copy)]
pub(super) struct LoopLabels<'a> {
    pub(super) namespace: &'a str,
    pub(super) kind: ResourceKind,
    pub(super) resource: &'a str,
}

impl EncodeLabelSet for LoopLabels<'_> {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        [
            ("namespace", self.namespace),
            ("type", self.kind.as_str()),
            ("resource", self.resource),
        ]
        .encode(encoder)
    }
}

/// `{component, namespace, type, resource}` of `keda_internal_panics_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct PanicLabels {
    pub(super) component: &'static str,
    pub(super) namespace: String,
    pub(super) kind: ResourceKind,
    pub(super) resource: String,
}

impl EncodeLabelSet for PanicLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        [
            ("component", self.component),
            ("namespace", self.namespace.as_str()),
            ("type", self.kind.as_str()),
            ("resource", self.resource.as_str()),
        ]
        .encode(encoder)
    }
}

/// `{type, namespace}` of `keda_resource_registered_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct ResourceLabels {
    pub(super) kind: CustomResourceKind,
    pub(super) namespace: String,
}

impl EncodeLabelSet for ResourceLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        [
            ("type", self.kind.as_str()),
            ("namespace", self.namespace.as_str()),
        ]
        .encode(encoder)
    }
}

/// `{type}` of `keda_trigger_registered_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct TriggerLabels {
    pub(super) trigger_type: String,
}

impl EncodeLabelSet for TriggerLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        [("type", self.trigger_type.as_str())].encode(encoder)
    }
}

/// The static labels of `keda_build_info`. KEDA's label names are kept (`goversion`, `goos`,
/// `goarch`) so existing queries match; the values describe the Rust build.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BuildInfo {
    pub version: String,
    pub git_commit: String,
    /// The compiler (`rustc 1.95.0 ...`).
    pub goversion: String,
    /// The operating system, Go's names (`linux`).
    pub goos: String,
    /// The architecture, Go's names (`amd64`, `arm64`).
    pub goarch: String,
}

impl BuildInfo {
    /// This binary: the crate version, the commit from `KEDA_RS_GIT_COMMIT` at build time
    /// (`unknown` without it), the compiler that built it, and the platform.
    pub fn current() -> Self {
        let goarch = match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            "x86" => "386",
            "powerpc64" => "ppc64",
            other => other,
        };
        Self {
            version: env!("CARGO_PKG_VERSION").to_string(),
            git_commit: option_env!("KEDA_RS_GIT_COMMIT")
                .unwrap_or("unknown")
                .to_string(),
            goversion: option_env!("KEDA_RS_RUSTC_VERSION")
                .unwrap_or("rustc")
                .to_string(),
            goos: std::env::consts::OS.to_string(),
            goarch: goarch.to_string(),
        }
    }
}

impl EncodeLabelSet for BuildInfo {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        [
            ("version", self.version.as_str()),
            ("git_commit", self.git_commit.as_str()),
            ("goversion", self.goversion.as_str()),
            ("goos", self.goos.as_str()),
            ("goarch", self.goarch.as_str()),
        ]
        .encode(encoder)
    }
}
