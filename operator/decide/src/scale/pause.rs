//! The pause and switch annotations of a ScaledObject, read as KEDA reads them: `paused`,
//! `paused-replicas`, `paused-scale-in`, `paused-scale-out`, `force-activation`.

use std::collections::BTreeMap;

/// Annotation: pause the object, leaving replicas as they are.
pub const ANNOTATION_PAUSED: &str = "autoscaling.keda.sh/paused";
/// Annotation: pause the object at this replica count.
pub const ANNOTATION_PAUSED_REPLICAS: &str = "autoscaling.keda.sh/paused-replicas";
/// Annotation: never scale in (to idle or zero) while set.
pub const ANNOTATION_PAUSED_SCALE_IN: &str = "autoscaling.keda.sh/paused-scale-in";
/// Annotation: never scale out (from idle or zero) while set.
pub const ANNOTATION_PAUSED_SCALE_OUT: &str = "autoscaling.keda.sh/paused-scale-out";
/// Annotation: treat the object as active whatever its triggers say.
pub const ANNOTATION_FORCE_ACTIVATION: &str = "autoscaling.keda.sh/force-activation";

/// How the object is paused, read from its annotations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Pause {
    /// Not paused.
    #[default]
    No,
    /// `paused: "true"` (or any value Go's `ParseBool` rejects): replicas stay as they are.
    Paused,
    /// `paused-replicas: "N"`: the target is held at N replicas.
    AtReplicas(i32),
}

/// The annotations that steer the decision.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScaleAnnotations {
    /// `paused` / `paused-replicas`.
    pub pause: Pause,
    /// `paused-scale-in`.
    pub paused_scale_in: bool,
    /// `paused-scale-out`.
    pub paused_scale_out: bool,
    /// `force-activation`.
    pub force_activation: bool,
}

/// An annotation held a value that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "annotation {ANNOTATION_PAUSED_REPLICAS}: {value:?} is not a replica count (a whole number >= 0)"
)]
pub struct InvalidPausedReplicas {
    /// The value as written.
    pub value: String,
}

impl ScaleAnnotations {
    /// Reads the annotations as KEDA does: `paused-replicas` wins over `paused`; `paused` and the
    /// three switches are on when present and not false: a value Go's `strconv.ParseBool`
    /// cannot read counts as true, exactly as the HPA builder reads them
    /// ([`keda_api::annotations::bool_annotation`]).
    ///
    /// # Errors
    /// When `paused-replicas` is not a non-negative integer.
    pub fn from_annotations(
        annotations: &BTreeMap<String, String>,
    ) -> Result<ScaleAnnotations, InvalidPausedReplicas> {
        let switch = |key: &str| keda_api::annotations::bool_annotation(Some(annotations), key);
        let pause = if let Some(value) = annotations.get(ANNOTATION_PAUSED_REPLICAS) {
            match value.trim().parse::<i32>() {
                Ok(n) if n >= 0 => Pause::AtReplicas(n),
                _ => {
                    return Err(InvalidPausedReplicas {
                        value: value.clone(),
                    });
                }
            }
        } else {
            match annotations.get(ANNOTATION_PAUSED).map(|v| parse_go_bool(v)) {
                None | Some(Some(false)) => Pause::No,
                Some(Some(true) | None) => Pause::Paused,
            }
        };
        Ok(ScaleAnnotations {
            pause,
            paused_scale_in: switch(ANNOTATION_PAUSED_SCALE_IN),
            paused_scale_out: switch(ANNOTATION_PAUSED_SCALE_OUT),
            force_activation: switch(ANNOTATION_FORCE_ACTIVATION),
        })
    }
}

/// Go's `strconv.ParseBool`.
fn parse_go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}
