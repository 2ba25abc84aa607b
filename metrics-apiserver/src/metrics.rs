//! The metrics-apiserver's own Prometheus metrics, served on the plain `--metrics-port`.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

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

/// The metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    request_duration: Family<RequestLabels, Histogram>,
    operator_duration: Family<OperatorLabels, Histogram>,
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
    /// Registers every metric under `keda_metrics_apiserver_`.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("keda_metrics_apiserver");
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
            registry,
            requests,
            request_duration,
            operator_duration,
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

    /// Records a call to the operator.
    pub fn operator_call(&self, ok: bool, took: Duration) {
        let outcome = if ok { "ok" } else { "error" };
        self.operator_duration
            .get_or_create(&OperatorLabels { outcome })
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

    #[test]
    fn recorded_requests_appear_in_the_exposition() {
        let metrics = Metrics::new();
        metrics.request("metric", 200, Duration::from_millis(1));
        metrics.operator_call(true, Duration::from_millis(1));
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
