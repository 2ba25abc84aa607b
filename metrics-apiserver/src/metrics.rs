//! The metrics-apiserver's own Prometheus metrics, served on the plain `--metrics-port`.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::operator_client::OperatorError;

/// Labels of a served request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// `metric`, `discovery`, `openapi`, `health` or `other`.
    pub kind: &'static str,
    /// The HTTP status code.
    pub code: u16,
}

/// Labels of a call to the operator.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperatorLabels {
    /// `ok` or `error`.
    pub outcome: &'static str,
}

/// `{grpc_type, grpc_service, grpc_method}` of KEDA's gRPC client metrics
/// (go-grpc-middleware's Prometheus provider): the one call KEDA's adapter makes to the
/// operator, `api.MetricsService/GetMetrics`, which keda-rs makes over HTTP/2 and JSON.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct GrpcLabels;

impl EncodeLabelSet for GrpcLabels {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelSetEncoder,
    ) -> Result<(), std::fmt::Error> {
        GRPC_CALL.encode(encoder)
    }
}

const GRPC_CALL: [(&str, &str); 3] = [
    ("grpc_type", "unary"),
    ("grpc_service", "api.MetricsService"),
    ("grpc_method", "GetMetrics"),
];

/// [`GrpcLabels`] and `grpc_code`.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct GrpcCodeLabels {
    grpc_code: &'static str,
}

impl EncodeLabelSet for GrpcCodeLabels {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelSetEncoder,
    ) -> Result<(), std::fmt::Error> {
        let [a, b, c] = GRPC_CALL;
        [a, b, c, ("grpc_code", self.grpc_code)].encode(encoder)
    }
}

/// KEDA's buckets of `keda_internal_metricsservice_grpc_client_handling_seconds` (seconds).
const GRPC_BUCKETS: [f64; 14] = [
    0.001, 0.01, 0.1, 0.3, 0.6, 1.0, 3.0, 6.0, 9.0, 20.0, 30.0, 60.0, 90.0, 120.0,
];

/// The gRPC code KEDA's adapter would see for the outcome of a call to the operator.
fn grpc_code(error: Option<&OperatorError>) -> &'static str {
    match error {
        None => "OK",
        Some(OperatorError::Connect { .. } | OperatorError::Connection { .. }) => "Unavailable",
        Some(OperatorError::Timeout { .. }) => "DeadlineExceeded",
        // KEDA's operator answers its handler's errors as plain errors: `Unknown`.
        Some(OperatorError::Service { .. }) => "Unknown",
        Some(OperatorError::Protocol { .. }) => "Internal",
    }
}

/// The metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    request_duration: Family<RequestLabels, Histogram>,
    operator_duration: Family<OperatorLabels, Histogram>,
    grpc_started: Family<GrpcLabels, Counter>,
    grpc_msg_sent: Family<GrpcLabels, Counter>,
    grpc_msg_received: Family<GrpcLabels, Counter>,
    grpc_handled: Family<GrpcCodeLabels, Counter>,
    grpc_handling: Family<GrpcLabels, Histogram, fn() -> Histogram>,
}

fn grpc_histogram() -> Histogram {
    Histogram::new(GRPC_BUCKETS)
}

fn latency_buckets() -> impl Iterator<Item = f64> {
    [
        0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
    ]
    .into_iter()
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers our own metrics under `keda_metrics_apiserver_`, and KEDA's adapter's gRPC
    /// client metrics of its calls to the operator under `keda_internal_metricsservice_`.
    pub fn new() -> Self {
        let mut root = Registry::default();
        let grpc_started = Family::<GrpcLabels, Counter>::default();
        let grpc_msg_sent = Family::<GrpcLabels, Counter>::default();
        let grpc_msg_received = Family::<GrpcLabels, Counter>::default();
        let grpc_handled = Family::<GrpcCodeLabels, Counter>::default();
        let grpc_handling: Family<GrpcLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(grpc_histogram);
        {
            let grpc = root.sub_registry_with_prefix("keda_internal_metricsservice");
            grpc.register(
                "grpc_client_started",
                "Total number of RPCs started on the client",
                grpc_started.clone(),
            );
            grpc.register(
                "grpc_client_handled",
                "Total number of RPCs completed by the client, regardless of success or failure",
                grpc_handled.clone(),
            );
            grpc.register(
                "grpc_client_msg_received",
                "Total number of RPC stream messages received by the client",
                grpc_msg_received.clone(),
            );
            grpc.register(
                "grpc_client_msg_sent",
                "Total number of gRPC stream messages sent by the client",
                grpc_msg_sent.clone(),
            );
            grpc.register(
                "grpc_client_handling_seconds",
                "Histogram of response latency (seconds) of the gRPC until it is finished by the application",
                grpc_handling.clone(),
            );
        }
        let registry = root.sub_registry_with_prefix("keda_metrics_apiserver");
        let requests = Family::<RequestLabels, Counter>::default();
        let request_duration = Family::<RequestLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(latency_buckets())
        });
        let operator_duration = Family::<OperatorLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(latency_buckets())
        });
        registry.register(
            "requests",
            "Requests served on the secure port",
            requests.clone(),
        );
        registry.register(
            "request_duration_seconds",
            "Time to answer a request on the secure port",
            request_duration.clone(),
        );
        registry.register(
            "operator_request_duration_seconds",
            "Time the operator's metric service took to answer",
            operator_duration.clone(),
        );
        Self {
            registry: root,
            requests,
            request_duration,
            operator_duration,
            grpc_started,
            grpc_msg_sent,
            grpc_msg_received,
            grpc_handled,
            grpc_handling,
        }
    }

    /// Records a served request.
    pub fn request(&self, kind: &'static str, code: u16, took: Duration) {
        let labels = RequestLabels { kind, code };
        self.requests.get_or_create(&labels).inc();
        self.request_duration
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }

    /// A call to the operator starts: KEDA's adapter's `GetMetrics` call started and its
    /// request sent.
    pub fn operator_call_started(&self) {
        self.grpc_started.get_or_create(&GrpcLabels).inc();
        self.grpc_msg_sent.get_or_create(&GrpcLabels).inc();
    }

    /// Records a call to the operator that ended after `took`, with `error` or values.
    pub fn operator_call(&self, error: Option<&OperatorError>, took: Duration) {
        let outcome = if error.is_none() { "ok" } else { "error" };
        self.operator_duration
            .get_or_create(&OperatorLabels { outcome })
            .observe(took.as_secs_f64());
        self.grpc_msg_received.get_or_create(&GrpcLabels).inc();
        self.grpc_handled
            .get_or_create(&GrpcCodeLabels {
                grpc_code: grpc_code(error),
            })
            .inc();
        self.grpc_handling
            .get_or_create(&GrpcLabels)
            .observe(took.as_secs_f64());
    }

    /// The text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 16: KEDA's adapter records its calls to the operator as gRPC client metrics under
    /// `keda_internal_metricsservice_` (KEDA-CONTRACT 1.12); the metrics-apiserver records its
    /// calls to keda-rs' operator under the same names, labels, help texts and buckets.
    #[test]
    fn operator_calls_are_keda_s_grpc_client_metrics() {
        let metrics = Metrics::new();
        for error in [
            None,
            None,
            Some(OperatorError::Timeout {
                address: "keda-operator:9666".into(),
                after: Duration::from_secs(3),
            }),
            Some(OperatorError::Connect {
                address: "keda-operator:9666".into(),
                reason: "refused".into(),
            }),
        ] {
            metrics.operator_call_started();
            metrics.operator_call(error.as_ref(), Duration::from_millis(40));
        }
        let text = metrics.encode();
        let call =
            r#"grpc_type="unary",grpc_service="api.MetricsService",grpc_method="GetMetrics""#;
        for (series, value) in [
            (
                format!("keda_internal_metricsservice_grpc_client_started_total{{{call}}}"),
                4,
            ),
            (
                format!("keda_internal_metricsservice_grpc_client_msg_sent_total{{{call}}}"),
                4,
            ),
            (
                format!("keda_internal_metricsservice_grpc_client_msg_received_total{{{call}}}"),
                4,
            ),
            (
                format!(
                    "keda_internal_metricsservice_grpc_client_handling_seconds_count{{{call}}}"
                ),
                4,
            ),
            (
                format!(
                    r#"keda_internal_metricsservice_grpc_client_handled_total{{{call},grpc_code="OK"}}"#
                ),
                2,
            ),
            (
                format!(
                    r#"keda_internal_metricsservice_grpc_client_handled_total{{{call},grpc_code="DeadlineExceeded"}}"#
                ),
                1,
            ),
            (
                format!(
                    r#"keda_internal_metricsservice_grpc_client_handled_total{{{call},grpc_code="Unavailable"}}"#
                ),
                1,
            ),
        ] {
            assert!(
                text.contains(&format!("{series} {value}\n")),
                "{series} {value}: {text}"
            );
        }
        assert!(
            text.contains(&format!(
                r#"keda_internal_metricsservice_grpc_client_handling_seconds_bucket{{le="0.1",{call}}} 4"#
            )) || text.contains(&format!(
                r#"keda_internal_metricsservice_grpc_client_handling_seconds_bucket{{{call},le="0.1"}} 4"#
            )),
            "{text}"
        );
        assert!(
            text.contains("# HELP keda_internal_metricsservice_grpc_client_handled Total number of RPCs completed by the client, regardless of success or failure.\n"),
            "{text}"
        );
        assert!(
            text.contains(r#"keda_metrics_apiserver_operator_request_duration_seconds_count{outcome="error"} 2"#),
            "our own metric keeps its name: {text}"
        );
    }

    #[test]
    fn recorded_requests_appear_in_the_exposition() {
        let metrics = Metrics::new();
        metrics.request("metric", 200, Duration::from_millis(1));
        metrics.operator_call(None, Duration::from_millis(1));
        let text = metrics.encode();
        assert!(
            text.contains(r#"keda_metrics_apiserver_requests_total{kind="metric",code="200"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(
                r#"keda_metrics_apiserver_operator_request_duration_seconds_count{outcome="ok"} 1"#
            ),
            "{text}"
        );
    }
}
