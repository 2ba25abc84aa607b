//! `CloudEventSource` (namespaced) and `ClusterCloudEventSource` (cluster-scoped), group
//! `eventing.keda.sh/v1alpha1`: where KEDA's events are sent as CloudEvents, typed after KEDA's
//! `apis/eventing/v1alpha1/cloudeventsource_types.go`.
//!
//! Both kinds share one spec, [`CloudEventSourceSpec`]; `ClusterCloudEventSource` wraps it in
//! [`ClusterCloudEventSourceSpec`], identical on the wire. [`CloudEventType`] lists KEDA's event
//! types and [`validate`] is KEDA's admission rule for the spec.

use std::fmt;
use std::ops::Deref;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::condition::Condition;
use crate::trigger::AuthenticationRef;

/// The API group of both kinds.
pub const GROUP: &str = "eventing.keda.sh";

/// Condition type of a source: `Active`.
pub const CONDITION_ACTIVE: &str = "Active";
/// Reason of `Active=True`.
pub const REASON_ACTIVE: &str = "CloudEventSourceActive";
/// Message of `Active=True` (KEDA's text).
pub const MESSAGE_ACTIVE: &str = "Is configured to send events to the configured destination";
/// Reason of `Active=False` after a delivery failed every retry (KEDA's reason).
pub const REASON_FAILED: &str = "CloudEventSourceFailed";
/// Message of `Active=False` after a delivery failed every retry (KEDA's text).
pub const MESSAGE_FAILED: &str = "Failed to send events to the configured destination";
/// Reason of `Active=False` for a spec keda-rs cannot act on (invalid, or a destination it
/// does not support).
pub const REASON_INVALID: &str = "CloudEventSourceInvalid";

/// Spec of a [`CloudEventSource`]; also the content of a [`ClusterCloudEventSource`].
#[derive(CustomResource, JsonSchema, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[kube(
    group = "eventing.keda.sh",
    version = "v1alpha1",
    kind = "CloudEventSource",
    plural = "cloudeventsources",
    namespaced,
    status = "CloudEventSourceStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "CloudEventSource sends the events of KEDA's objects in its namespace to a CloudEvents sink",
    printcolumn = r#"{"name":"Active","type":"string","jsonPath":".status.conditions[?(@.type==\"Active\")].status"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct CloudEventSourceSpec {
    /// The cluster name used in the events' `source` and `subject`; default: the operator's
    /// `--k8s-cluster-name` (`kubernetes-default`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster_name: String,
    /// Where the events go.
    pub destination: Destination,
    /// Credentials for the destination (Azure Event Grid only, in KEDA).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication_ref: Option<AuthenticationRef>,
    /// Which event types are sent.
    #[serde(default)]
    pub event_subscription: EventSubscription,
}

/// Status of both kinds: the `Active` condition.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct CloudEventSourceStatus {
    /// `Active`: whether events are being sent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// `spec.destination`: one of the ways to send events.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Destination {
    /// An HTTP endpoint that accepts CloudEvents (binary content mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<CloudEventHttp>,
    /// An Azure Event Grid topic (not supported by keda-rs: the source becomes
    /// `Active=False`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub azure_event_grid_topic: Option<AzureEventGridTopic>,
}

/// `spec.destination.http`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub struct CloudEventHttp {
    /// The sink's URI.
    pub uri: String,
}

/// `spec.destination.azureEventGridTopic`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub struct AzureEventGridTopic {
    /// The topic's endpoint.
    pub endpoint: String,
}

/// `spec.eventSubscription`: at most one of the two lists.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct EventSubscription {
    /// Only these types are sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("items" = {"type": "string", "enum": CloudEventType::ALL_NAMES}))]
    pub included_event_types: Option<Vec<String>>,
    /// Every type but these is sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("items" = {"type": "string", "enum": CloudEventType::ALL_NAMES}))]
    pub excluded_event_types: Option<Vec<String>>,
}

impl EventSubscription {
    /// Whether an event of type `event_type` passes the subscription: in `includedEventTypes`
    /// when that is set, else not in `excludedEventTypes`.
    pub fn accepts(&self, event_type: CloudEventType) -> bool {
        let name = event_type.as_str();
        match (&self.included_event_types, &self.excluded_event_types) {
            (Some(included), _) => included.iter().any(|t| t == name),
            (None, Some(excluded)) => !excluded.iter().any(|t| t == name),
            (None, None) => true,
        }
    }
}

/// Spec of a [`ClusterCloudEventSource`]: the shared spec, identical on the wire.
#[derive(CustomResource, JsonSchema, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[kube(
    group = "eventing.keda.sh",
    version = "v1alpha1",
    kind = "ClusterCloudEventSource",
    plural = "clustercloudeventsources",
    status = "CloudEventSourceStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "ClusterCloudEventSource sends the events of KEDA's objects in every namespace to a CloudEvents sink",
    printcolumn = r#"{"name":"Active","type":"string","jsonPath":".status.conditions[?(@.type==\"Active\")].status"}"#
)]
pub struct ClusterCloudEventSourceSpec {
    /// The shared spec.
    #[serde(flatten)]
    pub spec: CloudEventSourceSpec,
}

impl Deref for ClusterCloudEventSourceSpec {
    type Target = CloudEventSourceSpec;

    fn deref(&self) -> &CloudEventSourceSpec {
        &self.spec
    }
}

impl From<CloudEventSourceSpec> for ClusterCloudEventSourceSpec {
    fn from(spec: CloudEventSourceSpec) -> Self {
        Self { spec }
    }
}

/// KEDA's CloudEvent types (`apis/eventing/v1alpha1/cloudevent_types.go`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CloudEventType {
    /// `keda.scaledobject.ready.v1`
    ScaledObjectReady,
    /// `keda.scaledobject.failed.v1`
    ScaledObjectFailed,
    /// `keda.scaledobject.removed.v1`
    ScaledObjectRemoved,
    /// `keda.scaledobject.paused.v1`
    ScaledObjectPaused,
    /// `keda.scaledobject.unpaused.v1`
    ScaledObjectUnpaused,
    /// `keda.scaledjob.ready.v1`
    ScaledJobReady,
    /// `keda.scaledjob.failed.v1`
    ScaledJobFailed,
    /// `keda.scaledjob.removed.v1`
    ScaledJobRemoved,
    /// `keda.scaledjob.paused.v1`
    ScaledJobPaused,
    /// `keda.scaledjob.unpaused.v1`
    ScaledJobUnpaused,
    /// `keda.scaledjob.rolloutcleanup.started.v1`
    ScaledJobRolloutCleanupStarted,
    /// `keda.scaledjob.rolloutcleanup.completed.v1`
    ScaledJobRolloutCleanupCompleted,
    /// `keda.scaledjob.rolloutcleanup.failed.v1`
    ScaledJobRolloutCleanupFailed,
    /// `keda.authentication.triggerauthentication.created.v1`
    TriggerAuthenticationCreated,
    /// `keda.authentication.triggerauthentication.updated.v1`
    TriggerAuthenticationUpdated,
    /// `keda.authentication.triggerauthentication.removed.v1`
    TriggerAuthenticationRemoved,
    /// `keda.authentication.clustertriggerauthentication.created.v1`
    ClusterTriggerAuthenticationCreated,
    /// `keda.authentication.clustertriggerauthentication.updated.v1`
    ClusterTriggerAuthenticationUpdated,
    /// `keda.authentication.clustertriggerauthentication.removed.v1`
    ClusterTriggerAuthenticationRemoved,
}

impl CloudEventType {
    /// Every type, in KEDA's order.
    pub const ALL: [CloudEventType; 19] = [
        Self::ScaledObjectReady,
        Self::ScaledObjectFailed,
        Self::ScaledObjectRemoved,
        Self::ScaledObjectPaused,
        Self::ScaledObjectUnpaused,
        Self::ScaledJobReady,
        Self::ScaledJobFailed,
        Self::ScaledJobRemoved,
        Self::ScaledJobPaused,
        Self::ScaledJobUnpaused,
        Self::ScaledJobRolloutCleanupStarted,
        Self::ScaledJobRolloutCleanupCompleted,
        Self::ScaledJobRolloutCleanupFailed,
        Self::TriggerAuthenticationCreated,
        Self::TriggerAuthenticationUpdated,
        Self::TriggerAuthenticationRemoved,
        Self::ClusterTriggerAuthenticationCreated,
        Self::ClusterTriggerAuthenticationUpdated,
        Self::ClusterTriggerAuthenticationRemoved,
    ];

    /// The names of [`Self::ALL`], the schema's enum.
    pub const ALL_NAMES: [&'static str; 19] = [
        "keda.scaledobject.ready.v1",
        "keda.scaledobject.failed.v1",
        "keda.scaledobject.removed.v1",
        "keda.scaledobject.paused.v1",
        "keda.scaledobject.unpaused.v1",
        "keda.scaledjob.ready.v1",
        "keda.scaledjob.failed.v1",
        "keda.scaledjob.removed.v1",
        "keda.scaledjob.paused.v1",
        "keda.scaledjob.unpaused.v1",
        "keda.scaledjob.rolloutcleanup.started.v1",
        "keda.scaledjob.rolloutcleanup.completed.v1",
        "keda.scaledjob.rolloutcleanup.failed.v1",
        "keda.authentication.triggerauthentication.created.v1",
        "keda.authentication.triggerauthentication.updated.v1",
        "keda.authentication.triggerauthentication.removed.v1",
        "keda.authentication.clustertriggerauthentication.created.v1",
        "keda.authentication.clustertriggerauthentication.updated.v1",
        "keda.authentication.clustertriggerauthentication.removed.v1",
    ];

    /// The type's name, e.g. `keda.scaledobject.ready.v1`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ScaledObjectReady => "keda.scaledobject.ready.v1",
            Self::ScaledObjectFailed => "keda.scaledobject.failed.v1",
            Self::ScaledObjectRemoved => "keda.scaledobject.removed.v1",
            Self::ScaledObjectPaused => "keda.scaledobject.paused.v1",
            Self::ScaledObjectUnpaused => "keda.scaledobject.unpaused.v1",
            Self::ScaledJobReady => "keda.scaledjob.ready.v1",
            Self::ScaledJobFailed => "keda.scaledjob.failed.v1",
            Self::ScaledJobRemoved => "keda.scaledjob.removed.v1",
            Self::ScaledJobPaused => "keda.scaledjob.paused.v1",
            Self::ScaledJobUnpaused => "keda.scaledjob.unpaused.v1",
            Self::ScaledJobRolloutCleanupStarted => "keda.scaledjob.rolloutcleanup.started.v1",
            Self::ScaledJobRolloutCleanupCompleted => "keda.scaledjob.rolloutcleanup.completed.v1",
            Self::ScaledJobRolloutCleanupFailed => "keda.scaledjob.rolloutcleanup.failed.v1",
            Self::TriggerAuthenticationCreated => {
                "keda.authentication.triggerauthentication.created.v1"
            }
            Self::TriggerAuthenticationUpdated => {
                "keda.authentication.triggerauthentication.updated.v1"
            }
            Self::TriggerAuthenticationRemoved => {
                "keda.authentication.triggerauthentication.removed.v1"
            }
            Self::ClusterTriggerAuthenticationCreated => {
                "keda.authentication.clustertriggerauthentication.created.v1"
            }
            Self::ClusterTriggerAuthenticationUpdated => {
                "keda.authentication.clustertriggerauthentication.updated.v1"
            }
            Self::ClusterTriggerAuthenticationRemoved => {
                "keda.authentication.clustertriggerauthentication.removed.v1"
            }
        }
    }

    /// The type named `name`.
    pub fn parse(name: &str) -> Option<CloudEventType> {
        Self::ALL.into_iter().find(|t| t.as_str() == name)
    }

    /// The type KEDA sends with the Kubernetes Event `reason` on an object of `kind`
    /// (`ScaledObject`, `ScaledJob`, `TriggerAuthentication`, `ClusterTriggerAuthentication`):
    /// KEDA's `EventEmitter.Emit` calls pair each of these reasons with one type. Other
    /// events are not sent as CloudEvents.
    pub fn for_event(kind: &str, reason: &str) -> Option<CloudEventType> {
        Some(match (kind, reason) {
            ("ScaledObject", "ScaledObjectReady") => Self::ScaledObjectReady,
            ("ScaledObject", "ScaledObjectCheckFailed") => Self::ScaledObjectFailed,
            ("ScaledObject", "ScaledObjectDeleted") => Self::ScaledObjectRemoved,
            ("ScaledObject", "ScaledObjectPaused") => Self::ScaledObjectPaused,
            ("ScaledObject", "ScaledObjectUnpaused") => Self::ScaledObjectUnpaused,
            ("ScaledJob", "ScaledJobReady") => Self::ScaledJobReady,
            ("ScaledJob", "ScaledJobCheckFailed") => Self::ScaledJobFailed,
            ("ScaledJob", "ScaledJobDeleted") => Self::ScaledJobRemoved,
            ("ScaledJob", "ScaledJobPaused") => Self::ScaledJobPaused,
            ("ScaledJob", "ScaledJobUnpaused") => Self::ScaledJobUnpaused,
            ("ScaledJob", "ScaledJobRolloutCleanupStarted") => Self::ScaledJobRolloutCleanupStarted,
            ("ScaledJob", "ScaledJobRolloutCleanupCompleted") => {
                Self::ScaledJobRolloutCleanupCompleted
            }
            ("ScaledJob", "ScaledJobRolloutCleanupFailed") => Self::ScaledJobRolloutCleanupFailed,
            ("TriggerAuthentication", "TriggerAuthenticationAdded") => {
                Self::TriggerAuthenticationCreated
            }
            // KEDA's `eventreason.TriggerAuthenticationUpdated` is this string; the type is
            // the namespaced kind's all the same.
            ("TriggerAuthentication", "ClusterTriggerAuthenticationUpdated") => {
                Self::TriggerAuthenticationUpdated
            }
            ("TriggerAuthentication", "TriggerAuthenticationDeleted") => {
                Self::TriggerAuthenticationRemoved
            }
            ("ClusterTriggerAuthentication", "ClusterTriggerAuthenticationAdded") => {
                Self::ClusterTriggerAuthenticationCreated
            }
            ("ClusterTriggerAuthentication", "ClusterTriggerAuthenticationUpdated") => {
                Self::ClusterTriggerAuthenticationUpdated
            }
            ("ClusterTriggerAuthentication", "ClusterTriggerAuthenticationDeleted") => {
                Self::ClusterTriggerAuthenticationRemoved
            }
            _ => return None,
        })
    }
}

impl fmt::Display for CloudEventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a spec is refused (KEDA's admission messages, `cloudeventsource_webhook.go`
/// `validateSpec`, plus what keda-rs needs to send anything).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// Both lists of `spec.eventSubscription` are set.
    #[error("setting included types and excluded types at the same time is not supported")]
    IncludedAndExcluded,
    /// An unknown type in `spec.eventSubscription.excludedEventTypes`.
    #[error(
        "excludedEventType: {0} in cloudeventsource/clustercloudeventsource spec is not supported"
    )]
    UnknownExcluded(String),
    /// An unknown type in `spec.eventSubscription.includedEventTypes`.
    #[error(
        "includedEventType: {0} in cloudeventsource/clustercloudeventsource spec is not supported"
    )]
    UnknownIncluded(String),
    /// Neither `spec.destination.http` nor `spec.destination.azureEventGridTopic`.
    #[error("spec.destination: no destination is set (http.uri or azureEventGridTopic.endpoint)")]
    NoDestination,
    /// `spec.destination.http.uri` is not an absolute http(s) URI.
    #[error("spec.destination.http.uri: {uri:?} is not an absolute http or https URI")]
    BadUri {
        /// The refused value.
        uri: String,
    },
    /// `spec.destination.azureEventGridTopic` without `http`.
    #[error(
        "spec.destination.azureEventGridTopic: Azure Event Grid is not supported by keda-rs yet; use spec.destination.http"
    )]
    AzureEventGridUnsupported,
}

/// KEDA's admission rule for a source (`cloudeventsource_webhook.go` `validateSpec`): at most
/// one subscription list, every type in them known. What `keda-webhook` refuses.
///
/// # Errors
/// The first [`SpecError`] found, in KEDA's order.
pub fn validate_subscription(subscription: &EventSubscription) -> Result<(), SpecError> {
    if subscription.included_event_types.is_some() && subscription.excluded_event_types.is_some() {
        return Err(SpecError::IncludedAndExcluded);
    }
    // KEDA's webhook checks against its AllEventTypes, which leaves out the authentication
    // types its CRD enum has; keda-rs accepts every type it can send.
    for name in subscription.excluded_event_types.iter().flatten() {
        if CloudEventType::parse(name).is_none() {
            return Err(SpecError::UnknownExcluded(name.clone()));
        }
    }
    for name in subscription.included_event_types.iter().flatten() {
        if CloudEventType::parse(name).is_none() {
            return Err(SpecError::UnknownIncluded(name.clone()));
        }
    }
    Ok(())
}

/// [`validate_subscription`], then what keda-rs needs to send events: a destination it
/// supports, with an absolute `http`/`https` URI. A source failing it is `Active=False`.
///
/// # Errors
/// The first [`SpecError`] found, subscription lists first.
pub fn validate(spec: &CloudEventSourceSpec) -> Result<(), SpecError> {
    validate_subscription(&spec.event_subscription)?;
    match (
        &spec.destination.http,
        &spec.destination.azure_event_grid_topic,
    ) {
        (Some(http), _) => {
            let uri = http.uri.trim();
            let absolute = ["http://", "https://"].iter().any(|scheme| {
                uri.len() > scheme.len() && uri[..scheme.len()].eq_ignore_ascii_case(scheme)
            });
            if absolute {
                Ok(())
            } else {
                Err(SpecError::BadUri {
                    uri: http.uri.clone(),
                })
            }
        }
        (None, Some(_)) => Err(SpecError::AzureEventGridUnsupported),
        (None, None) => Err(SpecError::NoDestination),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> CloudEventSourceSpec {
        serde_yaml::from_str(yaml).expect("spec parses")
    }

    #[test]
    fn every_type_has_its_name_and_parses_back() {
        for (t, name) in CloudEventType::ALL.iter().zip(CloudEventType::ALL_NAMES) {
            assert_eq!(t.as_str(), name);
            assert_eq!(CloudEventType::parse(name), Some(*t));
        }
        assert_eq!(CloudEventType::parse("keda.scaledobject.ready.v2"), None);
    }

    #[test]
    fn keda_s_event_reasons_map_to_their_types_and_others_to_none() {
        let cases = [
            (
                "ScaledObject",
                "ScaledObjectReady",
                Some("keda.scaledobject.ready.v1"),
            ),
            (
                "ScaledObject",
                "ScaledObjectCheckFailed",
                Some("keda.scaledobject.failed.v1"),
            ),
            (
                "ScaledObject",
                "ScaledObjectDeleted",
                Some("keda.scaledobject.removed.v1"),
            ),
            (
                "ScaledJob",
                "ScaledJobPaused",
                Some("keda.scaledjob.paused.v1"),
            ),
            (
                "ScaledJob",
                "ScaledJobRolloutCleanupFailed",
                Some("keda.scaledjob.rolloutcleanup.failed.v1"),
            ),
            (
                "TriggerAuthentication",
                "ClusterTriggerAuthenticationUpdated",
                Some("keda.authentication.triggerauthentication.updated.v1"),
            ),
            (
                "ClusterTriggerAuthentication",
                "ClusterTriggerAuthenticationUpdated",
                Some("keda.authentication.clustertriggerauthentication.updated.v1"),
            ),
            (
                "TriggerAuthentication",
                "TriggerAuthenticationAdded",
                Some("keda.authentication.triggerauthentication.created.v1"),
            ),
            // Not sent as CloudEvents by KEDA.
            ("ScaledObject", "KEDAScalerFailed", None),
            ("ScaledObject", "KEDAScalersStarted", None),
            // A reason of another kind.
            ("ScaledJob", "ScaledObjectReady", None),
        ];
        for (kind, reason, expected) in cases {
            assert_eq!(
                CloudEventType::for_event(kind, reason).map(CloudEventType::as_str),
                expected,
                "{kind} {reason}"
            );
        }
    }

    #[test]
    fn a_subscription_includes_only_its_list_or_excludes_its_list() {
        let all = EventSubscription::default();
        let included = EventSubscription {
            included_event_types: Some(vec!["keda.scaledobject.failed.v1".into()]),
            excluded_event_types: None,
        };
        let excluded = EventSubscription {
            included_event_types: None,
            excluded_event_types: Some(vec!["keda.scaledobject.ready.v1".into()]),
        };
        let ready = CloudEventType::ScaledObjectReady;
        let failed = CloudEventType::ScaledObjectFailed;
        assert!(all.accepts(ready) && all.accepts(failed));
        assert!(!included.accepts(ready) && included.accepts(failed));
        assert!(!excluded.accepts(ready) && excluded.accepts(failed));
    }

    #[test]
    fn keda_s_admission_messages_and_the_destinations_keda_rs_can_use() {
        let cases = [
            (
                "destination: {http: {uri: 'http://sink.example:8080/events'}}",
                Ok(()),
            ),
            ("destination: {http: {uri: 'HTTPS://sink'}}", Ok(())),
            (
                "destination: {http: {uri: 'http://s'}}\neventSubscription: {includedEventTypes: [keda.scaledobject.ready.v1], excludedEventTypes: [keda.scaledobject.failed.v1]}",
                Err("setting included types and excluded types at the same time is not supported"),
            ),
            (
                "destination: {http: {uri: 'http://s'}}\neventSubscription: {excludedEventTypes: [keda.scaledobject.readyy.v1]}",
                Err(
                    "excludedEventType: keda.scaledobject.readyy.v1 in cloudeventsource/clustercloudeventsource spec is not supported",
                ),
            ),
            (
                "destination: {http: {uri: 'http://s'}}\neventSubscription: {includedEventTypes: [nope]}",
                Err(
                    "includedEventType: nope in cloudeventsource/clustercloudeventsource spec is not supported",
                ),
            ),
            (
                "destination: {}",
                Err(
                    "spec.destination: no destination is set (http.uri or azureEventGridTopic.endpoint)",
                ),
            ),
            (
                "destination: {http: {uri: 'sink:8080'}}",
                Err(
                    "spec.destination.http.uri: \"sink:8080\" is not an absolute http or https URI",
                ),
            ),
            (
                "destination: {azureEventGridTopic: {endpoint: 'https://t.eventgrid.azure.net/api/events'}}",
                Err(
                    "spec.destination.azureEventGridTopic: Azure Event Grid is not supported by keda-rs yet; use spec.destination.http",
                ),
            ),
        ];
        for (yaml, expected) in cases {
            let got = validate(&spec(yaml)).map_err(|e| e.to_string());
            assert_eq!(got, expected.map_err(str::to_string), "{yaml}");
        }
    }

    #[test]
    fn keda_s_example_parses_in_both_kinds() {
        let yaml = "apiVersion: eventing.keda.sh/v1alpha1
kind: CloudEventSource
metadata: {name: events, namespace: shop}
spec:
  clusterName: prod
  destination:
    http:
      uri: http://sink.shop.svc:8080/
  eventSubscription:
    includedEventTypes:
    - keda.scaledobject.failed.v1
";
        let ces: CloudEventSource = serde_yaml::from_str(yaml).expect("parses");
        assert_eq!(ces.spec.cluster_name, "prod");
        assert_eq!(validate(&ces.spec), Ok(()));
        let cluster: ClusterCloudEventSource = serde_yaml::from_str(
            &yaml.replace("kind: CloudEventSource", "kind: ClusterCloudEventSource"),
        )
        .expect("parses");
        assert_eq!(cluster.spec.spec, ces.spec);
    }
}
