//! The validation of ScaledObjects, ScaledJobs and (Cluster)TriggerAuthentications
//! (`keda_api::validation`), from arbitrary YAML or JSON as the API server would hand them
//! over; then what the operator reads from an admitted object (its accessors) and each
//! trigger's metadata through the registry's parse-only check.
#![no_main]

use keda_api::validation::{
    validate_cluster_trigger_authentication, validate_scaled_job, validate_scaled_object_admission,
    validate_scaled_object_reconcile, validate_trigger_authentication,
};
use keda_api::{ClusterTriggerAuthentication, ScaledJob, ScaledObject, TriggerAuthentication};
use keda_scalers::ScalerContext;
use libfuzzer_sys::fuzz_target;

fn check_errors<E: std::fmt::Display>(result: Result<(), E>) {
    if let Err(errors) = result {
        assert!(!errors.to_string().is_empty());
    }
}

fn scaled_object(value: serde_yaml::Value) {
    let Ok(so) = serde_yaml::from_value::<ScaledObject>(value) else {
        return;
    };
    let admission = validate_scaled_object_admission(&so);
    let valid = validate_scaled_object_reconcile(&so);
    // The reconcile set is a subset of the admission set: what the webhook admits, the
    // operator runs; and the operator runs objects the webhook would refuse (issue 29, row 3).
    assert!(admission.is_err() || valid.is_ok());
    check_errors(admission);
    let admitted = valid.is_ok();
    check_errors(valid);
    let _ = (so.identifier(), so.hpa_name(), so.scale_target_gvkr());
    let _ = (so.paused_replicas(), so.is_paused());
    let _ = (
        so.is_paused_scale_in(),
        so.is_paused_scale_out(),
        so.is_force_activated(),
    );
    let spec = &so.spec;
    let _ = (spec.polling_interval(), spec.cooldown_period());
    let _ = (spec.initial_cooldown_period(), spec.min_replica_count());
    let _ = (
        spec.max_replica_count(),
        spec.hpa_min_replicas(),
        spec.hpa_max_replicas(),
    );
    let _ = (
        spec.fallback_behavior(),
        spec.restore_to_original_replica_count(),
    );
    let _ = (spec.hpa_behavior(), spec.is_using_modifiers());
    if admitted {
        triggers(&spec.triggers);
    }
}

fn scaled_job(value: serde_yaml::Value) {
    let Ok(sj) = serde_yaml::from_value::<ScaledJob>(value) else {
        return;
    };
    let valid = validate_scaled_job(&sj);
    let admitted = valid.is_ok();
    check_errors(valid);
    let _ = (sj.identifier(), sj.is_paused());
    let spec = &sj.spec;
    let _ = (
        spec.polling_interval(),
        spec.successful_jobs_history_limit(),
    );
    let _ = (
        spec.failed_jobs_history_limit(),
        spec.effective_min_replica_count(),
    );
    let _ = (
        spec.effective_max_replica_count(),
        spec.scaling_strategy_kind(),
    );
    let _ = (spec.multiple_scalers_calculation(), spec.rollout_strategy());
    if admitted {
        triggers(&spec.triggers);
    }
}

fn triggers(triggers: &[keda_api::ScaleTrigger]) {
    for (index, trigger) in triggers.iter().enumerate() {
        keda_rs_fuzz::check_trigger(&ScalerContext::from_trigger(trigger, index));
    }
}

fuzz_target!(|data: &[u8]| {
    // JSON is YAML too.
    let Ok(value) = serde_yaml::from_slice::<serde_yaml::Value>(data) else {
        return;
    };
    match value.get("kind").and_then(serde_yaml::Value::as_str) {
        Some("ScaledJob") => scaled_job(value),
        Some("TriggerAuthentication") => {
            if let Ok(ta) = serde_yaml::from_value::<TriggerAuthentication>(value) {
                check_errors(validate_trigger_authentication(&ta));
            }
        }
        Some("ClusterTriggerAuthentication") => {
            if let Ok(cta) = serde_yaml::from_value::<ClusterTriggerAuthentication>(value) {
                check_errors(validate_cluster_trigger_authentication(&cta));
            }
        }
        _ => scaled_object(value),
    }
});
