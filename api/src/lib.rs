//! keda-rs custom resource types (`keda.sh/v1alpha1`), their defaults, pure validation and
//! KEDA's metric naming. No IO lives here.
//!
//! - [`ScaledObject`], [`ScaledJob`], [`TriggerAuthentication`] and
//!   [`ClusterTriggerAuthentication`]: the four CRDs, wire-compatible with KEDA.
//! - [`cloud_event_source`]: `CloudEventSource` and `ClusterCloudEventSource`
//!   (`eventing.keda.sh/v1alpha1`), KEDA's CloudEvent types and their admission rule.
//! - [`condition`]: condition types and reasons; [`annotations`]: annotation and label keys.
//! - [`gvkr`]: scale target type parsing.
//! - [`map`]: [`CompactMap`], the exact-size sorted map of trigger metadata and the statuses'
//!   per-metric maps.
//! - [`num`]: number conversions that saturate instead of wrapping or panicking.
//! - [`formula`]: the `scalingModifiers` formula language, its limits and budgets, and its
//!   admission check.
//! - [`external_metrics`]: the wire types of `external.metrics.k8s.io` and of the operator's
//!   metric service.

pub mod annotations;
pub mod cloud_event_source;
pub mod condition;
pub mod crd;
pub mod external_metrics;
pub mod formula;
pub mod gvkr;
pub mod identity;
pub mod map;
pub mod metric_name;
pub mod num;
pub mod scaled_job;
pub mod scaled_object;
pub mod shards;
pub mod trigger;
pub mod trigger_authentication;
pub mod validation;

pub use condition::Condition;
pub use gvkr::GroupVersionKindResource;
pub use map::CompactMap;
pub use scaled_job::{Rollout, ScaledJob, ScaledJobSpec, ScaledJobStatus, ScalingStrategy};
pub use scaled_object::{
    AdvancedConfig, Fallback, FallbackBehavior, HealthStatus, HorizontalPodAutoscalerConfig,
    ScaleTarget, ScaledObject, ScaledObjectSpec, ScaledObjectStatus, ScalingModifiers,
    TriggerActivityStatus,
};
pub use trigger::{AuthenticationKind, AuthenticationRef, ScaleTrigger};
pub use trigger_authentication::{
    ClusterTriggerAuthentication, ClusterTriggerAuthenticationSpec, TriggerAuthentication,
    TriggerAuthenticationSpec, TriggerAuthenticationStatus,
};
