//! The trigger list shared by ScaledObject and ScaledJob (`spec.triggers[]`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::map::CompactMap;

/// One entry of `spec.triggers`: which scaler to build and with what parameters.
///
/// Field names, optionality and serialization match KEDA's `ScaleTriggers`, so YAML written for
/// KEDA deserializes unchanged.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ScaleTrigger {
    /// The scaler type, e.g. `redis`, `kafka`, `cpu`.
    #[serde(rename = "type")]
    #[schemars(length(min = 1))]
    pub type_: String,

    /// Optional trigger name; unique within the object, required when referenced by a
    /// `scalingModifiers` formula.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,

    /// Serve the HPA from the value read at the last poll instead of asking the source again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub use_cached_metrics: bool,

    /// Scaler parameters, exactly as written by the user. Parsed per scaler type. Required, as in
    /// KEDA's CRD (it may be empty: `metadata: {}`).
    // A `CompactMap`: the operator caches every trigger of every object, and a `BTreeMap` of
    // three parameters took 540 bytes.
    pub metadata: CompactMap<String, String>,

    /// The (Cluster)TriggerAuthentication that supplies secret parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication_ref: Option<AuthenticationRef>,

    /// The HPA metric target type: `AverageValue` (default), `Value`, or `Utilization`
    /// (cpu/memory only). Kept as the user wrote it; scalers parse it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric_type: Option<String>,
}

/// Points at the TriggerAuthentication or ClusterTriggerAuthentication used by a trigger.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AuthenticationRef {
    /// Name of the referenced object.
    pub name: String,
    /// `TriggerAuthentication` (the default when empty) or `ClusterTriggerAuthentication`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(extend("enum" = ["TriggerAuthentication", "ClusterTriggerAuthentication"]))]
    pub kind: String,
}

/// Kind of the object an [`AuthenticationRef`] points to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AuthenticationKind {
    /// A namespaced `TriggerAuthentication`, in the namespace of the scaled object.
    TriggerAuthentication,
    /// A cluster-scoped `ClusterTriggerAuthentication`.
    ClusterTriggerAuthentication,
}

impl AuthenticationRef {
    /// The kind this reference names; an empty kind means `TriggerAuthentication`, as in KEDA.
    ///
    /// # Errors
    /// Returns the unrecognised kind when it is neither of the two.
    pub fn auth_kind(&self) -> Result<AuthenticationKind, String> {
        match self.kind.as_str() {
            "" | "TriggerAuthentication" => Ok(AuthenticationKind::TriggerAuthentication),
            "ClusterTriggerAuthentication" => Ok(AuthenticationKind::ClusterTriggerAuthentication),
            other => Err(other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keda_trigger_yaml_round_trips_without_losing_fields() {
        let yaml = r#"
type: redis
name: queue
useCachedMetrics: true
metadata:
  listName: mylist
  listLength: "5"
authenticationRef:
  name: redis-auth
  kind: ClusterTriggerAuthentication
metricType: Value
"#;
        let trigger: ScaleTrigger = serde_yaml::from_str(yaml).unwrap();
        assert_eq!(trigger.type_, "redis");
        assert_eq!(trigger.metadata["listName"], "mylist");
        assert_eq!(
            trigger.authentication_ref.as_ref().unwrap().auth_kind(),
            Ok(AuthenticationKind::ClusterTriggerAuthentication)
        );
        let back: ScaleTrigger =
            serde_yaml::from_str(&serde_yaml::to_string(&trigger).unwrap()).unwrap();
        assert_eq!(back, trigger);
    }

    #[test]
    fn empty_authentication_kind_means_trigger_authentication() {
        let r = AuthenticationRef {
            name: "a".into(),
            kind: String::new(),
        };
        assert_eq!(r.auth_kind(), Ok(AuthenticationKind::TriggerAuthentication));
        let r = AuthenticationRef {
            name: "a".into(),
            kind: "Secret".into(),
        };
        assert_eq!(r.auth_kind(), Err("Secret".to_string()));
    }
}
