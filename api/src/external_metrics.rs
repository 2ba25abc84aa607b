//! The wire types of the external metrics API (`external.metrics.k8s.io/v1beta1`) and of the
//! operator's metric service that the metrics-apiserver asks. Types only, no IO.
//!
//! The metrics-apiserver serves [`ExternalMetricValueList`] to the HPA exactly as Kubernetes
//! defines it (`k8s.io/metrics/pkg/apis/external_metrics/v1beta1`); the operator's metric service
//! answers [`MetricValuesResponse`] (the items of that list) or a [`ServiceError`].

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Serialize};

/// The API group the metrics-apiserver serves.
pub const GROUP: &str = "external.metrics.k8s.io";
/// The version the metrics-apiserver serves.
pub const VERSION: &str = "v1beta1";
/// `group/version`.
pub const GROUP_VERSION: &str = "external.metrics.k8s.io/v1beta1";
/// The kind of the list the HPA reads.
pub const LIST_KIND: &str = "ExternalMetricValueList";

/// One value of an external metric (Kubernetes' `ExternalMetricValue`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExternalMetricValue {
    /// The metric name the HPA asked for (`s0-redis-mylist`).
    pub metric_name: String,
    /// Labels identifying one time series; KEDA sets none. Always serialized (Kubernetes has
    /// no `omitempty` on it).
    #[serde(default)]
    pub metric_labels: BTreeMap<String, String>,
    /// When the value was read.
    pub timestamp: Time,
    /// The window the value was aggregated over, if any (`window` on the wire).
    #[serde(rename = "window", default, skip_serializing_if = "Option::is_none")]
    pub window_seconds: Option<i64>,
    /// The value, a quantity with KEDA's milli precision (`1500m`, `3`).
    pub value: Quantity,
}

/// The list the HPA reads (Kubernetes' `ExternalMetricValueList`): `kind`, `apiVersion`,
/// `metadata` (always `{}`) and `items`.
#[derive(Clone, Debug, PartialEq)]
pub struct ExternalMetricValueList {
    /// The values.
    pub items: Vec<ExternalMetricValue>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListWire {
    kind: String,
    api_version: String,
    #[serde(default)]
    metadata: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    items: Vec<ExternalMetricValue>,
}

impl Serialize for ExternalMetricValueList {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut s = serializer.serialize_struct("ExternalMetricValueList", 4)?;
        s.serialize_field("kind", LIST_KIND)?;
        s.serialize_field("apiVersion", GROUP_VERSION)?;
        s.serialize_field("metadata", &serde_json::Map::new())?;
        s.serialize_field("items", &self.items)?;
        s.end()
    }
}

impl<'de> Deserialize<'de> for ExternalMetricValueList {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = ListWire::deserialize(deserializer)?;
        if wire.kind != LIST_KIND || wire.api_version != GROUP_VERSION {
            return Err(serde::de::Error::custom(format!(
                "expected kind {LIST_KIND} of {GROUP_VERSION}, got kind {} of {}",
                wire.kind, wire.api_version
            )));
        }
        Ok(Self { items: wire.items })
    }
}

/// Whether a requested metric name designates `actual`. The metrics API lower-cases metric
/// names in URLs, so KEDA matches them case-insensitively (Go's `strings.EqualFold`).
pub fn metric_names_match(requested: &str, actual: &str) -> bool {
    requested.eq_ignore_ascii_case(actual)
        || requested
            .chars()
            .flat_map(char::to_lowercase)
            .eq(actual.chars().flat_map(char::to_lowercase))
}

/// The path of the operator's metric service that answers the values of one metric of one
/// ScaledObject: `/v1/namespaces/{namespace}/scaledobjects/{name}/metrics/{metric}`. The parts
/// are Kubernetes names (DNS labels/subdomains and KEDA metric names), which need no escaping;
/// anything else is percent-encoded so a path can never be confused with another.
pub fn metric_values_path(namespace: &str, scaled_object: &str, metric_name: &str) -> String {
    format!(
        "/v1/namespaces/{}/scaledobjects/{}/metrics/{}",
        escape_segment(namespace),
        escape_segment(scaled_object),
        escape_segment(metric_name)
    )
}

fn escape_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// What the operator's metric service answers on success.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricValuesResponse {
    /// The values of the asked metric (one per metric; all of them for a `composite-metric`).
    pub items: Vec<ExternalMetricValue>,
}

/// Why the operator's metric service could not answer; the metrics-apiserver maps it to the
/// HTTP status the HPA sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ServiceErrorReason {
    /// The operator has no such ScaledObject (404).
    ScaledObjectNotFound,
    /// The ScaledObject has no metric of that name (404).
    MetricNotFound,
    /// The operator cannot answer now: not the leader, still starting (503).
    Unavailable,
    /// The scaler failed to read the metric and no fallback applies (500).
    ScalerFailed,
    /// The request did not finish within the operator's own bound (504).
    Timeout,
    /// The request is malformed (400).
    BadRequest,
    /// The client's certificate is not the identity this endpoint serves (403): metric reads
    /// are for the metrics-apiserver, report streams for the activators.
    Forbidden,
}

/// The body of a failed answer of the operator's metric service.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServiceError {
    /// The classification.
    pub reason: ServiceErrorReason,
    /// A message for the user, naming the object, the metric and what failed.
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_serializes_exactly_as_kubernetes_defines_it() {
        let list = ExternalMetricValueList {
            items: vec![ExternalMetricValue {
                metric_name: "s0-redis-mylist".into(),
                metric_labels: BTreeMap::new(),
                timestamp: Time("2026-01-02T03:04:05Z".parse().expect("a timestamp")),
                window_seconds: None,
                value: Quantity("1500m".into()),
            }],
        };
        let json = serde_json::to_string(&list).expect("serializes");
        assert_eq!(
            json,
            r#"{"kind":"ExternalMetricValueList","apiVersion":"external.metrics.k8s.io/v1beta1","metadata":{},"items":[{"metricName":"s0-redis-mylist","metricLabels":{},"timestamp":"2026-01-02T03:04:05Z","value":"1500m"}]}"#
        );
        let back: ExternalMetricValueList = serde_json::from_str(&json).expect("parses");
        assert_eq!(back, list);
    }

    #[test]
    fn a_list_of_another_kind_is_rejected() {
        let json = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"items":[]}"#;
        assert!(serde_json::from_str::<ExternalMetricValueList>(json).is_err());
    }

    #[test]
    fn metric_names_match_ignoring_case_only() {
        assert!(metric_names_match("s0-redis-mylist", "s0-redis-MyList"));
        assert!(metric_names_match("s0-rabbitmq-ÄÖ", "s0-rabbitmq-äö"));
        assert!(!metric_names_match("s0-redis-mylist", "s0-redis-mylist2"));
        assert!(!metric_names_match("s1-redis-mylist", "s0-redis-mylist"));
    }

    #[test]
    fn metric_values_path_escapes_what_is_not_a_plain_name() {
        assert_eq!(
            metric_values_path("default", "app", "s0-redis-mylist"),
            "/v1/namespaces/default/scaledobjects/app/metrics/s0-redis-mylist"
        );
        assert_eq!(
            metric_values_path("a/b", "c d", "e%f"),
            "/v1/namespaces/a%2Fb/scaledobjects/c%20d/metrics/e%25f"
        );
    }

    #[test]
    fn service_errors_round_trip() {
        let e = ServiceError {
            reason: ServiceErrorReason::MetricNotFound,
            message: "no metric".into(),
        };
        let json = serde_json::to_string(&e).expect("serializes");
        assert_eq!(json, r#"{"reason":"MetricNotFound","message":"no metric"}"#);
        assert_eq!(
            serde_json::from_str::<ServiceError>(&json).expect("parses"),
            e
        );
    }
}
