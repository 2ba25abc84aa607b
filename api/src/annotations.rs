//! Annotation and label keys KEDA reads or writes (KEDA-CONTRACT 1.4), and the finalizer.

/// SO: pause scaling and pin the target to this many replicas (`"<N>"`).
pub const PAUSED_REPLICAS: &str = "autoscaling.keda.sh/paused-replicas";
/// SO, SJ: pause scaling, leaving replicas as they are. Parsed like Go's `strconv.ParseBool`;
/// an unparsable value counts as `true`.
pub const PAUSED: &str = "autoscaling.keda.sh/paused";
/// SO: block scale-in (HPA scale-down disabled, no scale to zero/idle).
pub const PAUSED_SCALE_IN: &str = "autoscaling.keda.sh/paused-scale-in";
/// SO: block scale-out (HPA scale-up disabled, no scale from zero).
pub const PAUSED_SCALE_OUT: &str = "autoscaling.keda.sh/paused-scale-out";
/// SO: treat the object as active regardless of its triggers.
pub const FORCE_ACTIVATION: &str = "autoscaling.keda.sh/force-activation";
/// SO: allow adopting an existing HPA named in `advanced.horizontalPodAutoscalerConfig.name`.
pub const TRANSFER_HPA_OWNERSHIP: &str = "scaledobject.keda.sh/transfer-hpa-ownership";
/// SO: comma-separated SO labels that are not copied to the HPA.
pub const HPA_EXCLUDED_LABELS: &str = "scaledobject.keda.sh/hpa-excluded-labels";
/// HPA: `"false"` makes the webhook ignore this HPA in its ownership check.
pub const VALIDATIONS_HPA_OWNERSHIP: &str = "validations.keda.sh/hpa-ownership";
/// SJ: comma-separated SJ labels that are not copied to Jobs.
pub const JOB_EXCLUDED_LABELS: &str = "scaledjob.keda.sh/job-excluded-labels";
/// Jobs and their pod template: the ScaledJob generation they were created from.
pub const SCALED_JOB_GENERATION: &str = "scaledjob.keda.sh/generation";

/// Label on the SO (added by the operator) and in the HPA's external metric selector.
pub const SCALED_OBJECT_NAME_LABEL: &str = "scaledobject.keda.sh/name";
/// Label on Jobs created for a ScaledJob.
pub const SCALED_JOB_NAME_LABEL: &str = "scaledjob.keda.sh/name";

/// Finalizer KEDA puts on ScaledObjects and ScaledJobs.
pub const FINALIZER: &str = "finalizer.keda.sh";

/// Go's `strconv.ParseBool`: `1 t T TRUE true True` and `0 f F FALSE false False`; anything else
/// is `None`.
pub fn parse_go_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// KEDA's reading of a boolean annotation: absent is `false`, unparsable is `true`.
pub fn bool_annotation(
    annotations: Option<&std::collections::BTreeMap<String, String>>,
    key: &str,
) -> bool {
    match annotations.and_then(|a| a.get(key)) {
        None => false,
        Some(v) => parse_go_bool(v).unwrap_or(true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn go_parse_bool_accepts_exactly_go_spellings() {
        for t in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse_go_bool(t), Some(true), "{t}");
        }
        for f in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse_go_bool(f), Some(false), "{f}");
        }
        for other in ["", "yes", "tRUE", " true", "2"] {
            assert_eq!(parse_go_bool(other), None, "{other:?}");
        }
    }

    #[test]
    fn unparsable_bool_annotation_counts_as_true() {
        let mut a = BTreeMap::new();
        assert!(!bool_annotation(Some(&a), PAUSED));
        assert!(!bool_annotation(None, PAUSED));
        a.insert(PAUSED.to_string(), "yes please".to_string());
        assert!(bool_annotation(Some(&a), PAUSED));
        a.insert(PAUSED.to_string(), "false".to_string());
        assert!(!bool_annotation(Some(&a), PAUSED));
    }
}
