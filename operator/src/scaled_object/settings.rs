//! From a ScaledObject to the inputs of the pure modules: [`ScalingSettings`] for
//! [`keda_decide::scale::decide`] and [`FallbackSpec`] for [`keda_decide::fallback`].

use std::collections::BTreeMap;

use jiff::SignedDuration;
use keda_api::ScaledObject;
use keda_api::validation::RESOURCE_TRIGGER_TYPES;
use kube::ResourceExt;

use crate::scaled_object::target::Target;
use keda_decide::fallback::FallbackSpec;
use keda_decide::scale::{InvalidPausedReplicas, ScaleAnnotations, ScalingSettings, TargetRef};

/// The annotations whose change restarts a scale loop (KEDA's reconcile predicate).
pub const LOOP_ANNOTATIONS: [&str; 5] = [
    keda_api::annotations::PAUSED,
    keda_api::annotations::PAUSED_REPLICAS,
    keda_api::annotations::PAUSED_SCALE_IN,
    keda_api::annotations::PAUSED_SCALE_OUT,
    keda_api::annotations::FORCE_ACTIVATION,
];

/// The values of [`LOOP_ANNOTATIONS`] on `so`.
pub fn loop_annotations(so: &ScaledObject) -> BTreeMap<String, String> {
    so.annotations()
        .iter()
        .filter(|(k, _)| LOOP_ANNOTATIONS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// `spec.fallback` as the fallback module reads it.
pub fn fallback_spec(so: &ScaledObject) -> Option<FallbackSpec> {
    so.spec.fallback.as_ref().map(|f| FallbackSpec {
        failure_threshold: f.failure_threshold,
        replicas: f.replicas,
        behavior: f.behavior.unwrap_or_default(),
    })
}

/// The decision's settings for `so` scaling `target`.
///
/// # Errors
/// When `paused-replicas` is not a replica count.
pub fn scaling_settings(
    so: &ScaledObject,
    target: &Target,
) -> Result<ScalingSettings, InvalidPausedReplicas> {
    let spec = &so.spec;
    Ok(ScalingSettings {
        target: TargetRef {
            kind: target.kind_string(),
            namespace: target.namespace.clone(),
            name: target.name.clone(),
        },
        min_replica_count: spec.min_replica_count(),
        idle_replica_count: spec.idle_replica_count,
        cooldown_period: SignedDuration::from_secs(i64::from(spec.cooldown_period())),
        initial_cooldown_period: SignedDuration::from_secs(i64::from(
            spec.initial_cooldown_period(),
        )),
        fallback: fallback_spec(so),
        annotations: ScaleAnnotations::from_annotations(so.annotations())?,
        only_resource_triggers: !spec.triggers.is_empty()
            && spec
                .triggers
                .iter()
                .all(|t| RESOURCE_TRIGGER_TYPES.contains(&t.type_.as_str())),
    })
}
