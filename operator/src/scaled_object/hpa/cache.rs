//! What the operator keeps of each HPA from its watch: a fingerprint of what
//! [`super::ensure_hpa`] compares, hashes of labels and annotations, and the `ScalingActive`
//! condition, so that an unchanged HPA costs no API call and little memory.

use std::collections::BTreeMap;

use k8s_openapi::api::autoscaling::v2::{HorizontalPodAutoscaler, HorizontalPodAutoscalerStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::spec::SCALING_ACTIVE;

/// Where [`trim_hpa`] keeps the fingerprint of the spec and owner references. Only ever in the
/// operator's memory, never written to the API server.
const FINGERPRINT: &str = "keda-rs.internal/fingerprint";
/// The prefixes under which [`trim_hpa`] keeps a hash of each label's and annotation's value.
const LABEL_HASH: &str = "keda-rs.internal/label.";
const ANNOTATION_HASH: &str = "keda-rs.internal/annotation.";

fn hash_of(text: &str) -> String {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut h = DefaultHasher::new();
    text.hash(&mut h);
    format!("{:016x}", h.finish())
}

/// A fingerprint of the spec and owner references that [`ensure_hpa`](super::ensure_hpa) compares. Equal for two
/// HPAs exactly when those are equal, as far as a 64-bit hash tells; compared only within one
/// process.
pub fn hpa_fingerprint(hpa: &HorizontalPodAutoscaler) -> String {
    let compared = serde_json::json!([hpa.spec, hpa.metadata.owner_references]);
    hash_of(&compared.to_string())
}

/// Whether `cached` (trimmed by [`trim_hpa`]) already is what `desired` asks for: the same
/// spec and owner references, and every label and annotation `desired` sets with the same value
/// (others, added by other tools, are not compared: [`hpa_differs`](super::hpa_differs)). A spec the API server
/// defaulted does not match; [`ensure_hpa`](super::ensure_hpa) then reads the HPA and compares as KEDA does.
pub fn cached_matches(cached: &HorizontalPodAutoscaler, desired: &HorizontalPodAutoscaler) -> bool {
    let Some(kept) = cached.metadata.annotations.as_ref() else {
        return false;
    };
    let has = |key: String, value: &str| kept.get(&key).is_some_and(|h| *h == hash_of(value));
    kept.get(FINGERPRINT)
        .is_some_and(|f| *f == hpa_fingerprint(desired))
        && desired
            .metadata
            .labels
            .iter()
            .flatten()
            .all(|(k, v)| has(format!("{LABEL_HASH}{k}"), v))
        && desired
            .metadata
            .annotations
            .iter()
            .flatten()
            .all(|(k, v)| has(format!("{ANNOTATION_HASH}{k}"), v))
}

/// Trims an HPA to what the operator reads from its watch cache: its identity, the
/// [`hpa_fingerprint`] of its spec and owner references, a hash of each label and annotation
/// value (for [`cached_matches`]), and, for [`hpa_health`](super::hpa_health), the `ScalingActive` condition:
/// a few hundred bytes instead of a few KB per HPA.
pub fn trim_hpa(hpa: &mut HorizontalPodAutoscaler) {
    let mut kept = BTreeMap::from([(FINGERPRINT.to_string(), hpa_fingerprint(hpa))]);
    for (k, v) in hpa.metadata.labels.iter().flatten() {
        kept.insert(format!("{LABEL_HASH}{k}"), hash_of(v));
    }
    for (k, v) in hpa.metadata.annotations.iter().flatten() {
        kept.insert(format!("{ANNOTATION_HASH}{k}"), hash_of(v));
    }
    let meta = &mut hpa.metadata;
    *meta = ObjectMeta {
        name: meta.name.take(),
        namespace: meta.namespace.take(),
        uid: meta.uid.take(),
        resource_version: meta.resource_version.take(),
        annotations: Some(kept),
        ..ObjectMeta::default()
    };
    hpa.spec = None;
    if let Some(status) = &mut hpa.status {
        let conditions = status.conditions.take().map(|c| {
            c.into_iter()
                .filter(|c| c.type_ == SCALING_ACTIVE)
                .collect()
        });
        *status = HorizontalPodAutoscalerStatus {
            conditions,
            ..HorizontalPodAutoscalerStatus::default()
        };
    }
}
