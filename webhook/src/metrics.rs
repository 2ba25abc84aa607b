//! The webhook's Prometheus metrics, under KEDA's names (KEDA-CONTRACT 1.11,
//! `pkg/metricscollector/webhook/webhook_prommetrics.go`):
//! `keda_webhook_scaled_object_validations_total{namespace,action}` and
//! `keda_webhook_scaled_object_validation_errors_total{namespace,action,reason}`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// Labels of a validation.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ValidationLabels {
    /// The object's namespace.
    pub namespace: String,
    /// `create` or `update`.
    pub action: &'static str,
}

/// Labels of a refused validation.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    /// The object's namespace.
    pub namespace: String,
    /// `create` or `update`.
    pub action: &'static str,
    /// KEDA's reason, e.g. `other-scaled-object`, `incorrect-replicas`.
    pub reason: &'static str,
}

/// The metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    validations: Family<ValidationLabels, Counter>,
    errors: Family<ErrorLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers the metrics under `keda_webhook_` (prometheus-client adds `_total`).
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("keda_webhook");
        let validations = Family::<ValidationLabels, Counter>::default();
        let errors = Family::<ErrorLabels, Counter>::default();
        registry.register(
            "scaled_object_validations",
            "Total number of scaled object validations",
            validations.clone(),
        );
        registry.register(
            "scaled_object_validation_errors",
            "Total number of scaled object validating errors",
            errors.clone(),
        );
        Self {
            registry,
            validations,
            errors,
        }
    }

    /// Counts one ScaledObject validation.
    pub fn validation(&self, namespace: &str, action: &'static str) {
        self.validations
            .get_or_create(&ValidationLabels {
                namespace: namespace.to_string(),
                action,
            })
            .inc();
    }

    /// Counts one refusal for `reason`.
    pub fn error(&self, namespace: &str, action: &'static str, reason: &'static str) {
        self.errors
            .get_or_create(&ErrorLabels {
                namespace: namespace.to_string(),
                action,
                reason,
            })
            .inc();
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
    fn counters_carry_kedas_names_and_labels() {
        let metrics = Metrics::new();
        metrics.validation("team", "create");
        metrics.error("team", "create", "other-scaled-object");
        let text = metrics.encode();
        assert!(
            text.contains(
                r#"keda_webhook_scaled_object_validations_total{namespace="team",action="create"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"keda_webhook_scaled_object_validation_errors_total{namespace="team",action="create",reason="other-scaled-object"} 1"#
            ),
            "{text}"
        );
    }
}
