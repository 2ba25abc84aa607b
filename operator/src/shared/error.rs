//! The errors of reconciling a ScaledObject. Each one lands in `Ready=False
//! ScaledObjectCheckFailed` and in a `ScaledObjectCheckFailed` event, so every message names
//! what the user must fix: the field, the trigger, the parameter.

use keda_api::gvkr::GvkrError;
use keda_api::validation::ValidationErrors;
use keda_scalers::ScalerError;
use keda_scalers::scalers::http::claims::Refusal;

use crate::shared::isolation::{INTERNAL_ERROR, InternalError};
use keda_decide::formula::ModifiersError;
use keda_decide::scale::InvalidPausedReplicas;

/// Why a ScaledObject could not be reconciled.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The object breaks one of KEDA's admission rules.
    #[error("ScaledObject is invalid: {0}")]
    Invalid(#[from] ValidationErrors),
    /// `autoscaling.keda.sh/paused-replicas` is not a replica count.
    #[error(transparent)]
    PausedReplicas(#[from] InvalidPausedReplicas),
    /// `scaleTargetRef.apiVersion` cannot be parsed.
    #[error(transparent)]
    TargetType(#[from] GvkrError),
    /// Discovery does not know the target's kind.
    #[error(
        "spec.scaleTargetRef: kind {kind:?} is not served in {api_version:?} by the API server"
    )]
    UnknownTargetKind {
        /// The target's apiVersion.
        api_version: String,
        /// The target's kind.
        kind: String,
    },
    /// The target does not exist (KEDA: "Target resource doesn't exist").
    #[error("spec.scaleTargetRef: target resource {kind} {namespace}/{name} doesn't exist")]
    TargetNotFound {
        /// `apiVersion.Kind` of the target.
        kind: String,
        /// Namespace.
        namespace: String,
        /// `scaleTargetRef.name`.
        name: String,
    },
    /// The target exists but has no `/scale` subresource (KEDA: "Target resource doesn't
    /// expose /scale subresource").
    #[error(
        "spec.scaleTargetRef: target resource {kind} {namespace}/{name} doesn't expose /scale subresource"
    )]
    TargetNotScalable {
        /// `apiVersion.Kind` of the target.
        kind: String,
        /// Namespace.
        namespace: String,
        /// `scaleTargetRef.name`.
        name: String,
    },
    /// A trigger needs values resolved from the cluster, but the scalers are built without a
    /// resolver (a library caller's [`crate::ScalerEnv`] without one; the controller always
    /// has one).
    #[error(
        "spec.triggers[{index}] ({trigger_type}): {what} needs the trigger resolver, which this \
         scaler environment does not have"
    )]
    Unresolvable {
        /// Trigger index.
        index: usize,
        /// Trigger type.
        trigger_type: String,
        /// What cannot be resolved, e.g. `authenticationRef "redis-auth"`.
        what: String,
    },
    /// A trigger's `xxxFromEnv` value or TriggerAuthentication parameter cannot be resolved;
    /// the resolver's message names the trigger and what to fix.
    #[error(transparent)]
    Resolve(Box<crate::shared::resolve::ResolveError>),
    /// A trigger's scaler could not be built (bad metadata, unknown type, source unreachable).
    #[error("spec.triggers[{index}]: {source}")]
    BuildScaler {
        /// Trigger index.
        index: usize,
        /// The scaler's error (names the parameter).
        #[source]
        source: ScalerError,
    },
    /// `advanced.scalingModifiers` is invalid.
    #[error(transparent)]
    Modifiers(#[from] ModifiersError),
    /// The activator refuses the object's `http` routes: one overlaps a route another
    /// namespace claimed first, or a host is outside the namespace's host policy
    /// ([`keda_scalers::scalers::http::claims`]); `Ready=False` with the refusal's reason.
    #[error("{0}")]
    Route(Box<Refusal>),
    /// An HPA under the object's HPA name exists and is not the object's own (no controller
    /// owner reference to it): keda-rs leaves it exactly as it is ([`crate::scaled_object::hpa::ownership`]).
    #[error(
        "spec.advanced.horizontalPodAutoscalerConfig.name: HorizontalPodAutoscaler {hpa} exists and is not owned by this ScaledObject ({why}); keda-rs never changes or deletes an HPA it does not own: name another HPA here, or delete {hpa} if nothing uses it"
    )]
    HpaNotOwned {
        /// The HPA's name.
        hpa: String,
        /// Whose it is instead ([`crate::scaled_object::hpa::Ownership::NotOwned`]).
        why: String,
    },
    /// Two triggers produce the same external metric name (KEDA's wording).
    #[error("metricName {0} defined multiple times")]
    DuplicateMetricName(String),
    /// A Kubernetes API call failed.
    #[error("{action} failed: {source}")]
    Kube {
        /// What was being done, e.g. `creating HPA keda-hpa-app`.
        action: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// The finalizer machinery failed.
    #[error(transparent)]
    Finalizer(#[from] Box<kube::runtime::finalizer::Error<Error>>),
    /// A panic was caught while reconciling the object or building one of its scalers
    /// ([`crate::shared::isolation`]); `Ready=False InternalError`.
    #[error(transparent)]
    Internal(#[from] InternalError),
}

impl From<crate::shared::resolve::ResolveError> for Error {
    fn from(e: crate::shared::resolve::ResolveError) -> Self {
        Error::Resolve(Box::new(e))
    }
}

impl Error {
    /// A Kubernetes API error while doing `action`.
    pub fn kube(action: impl Into<String>, source: kube::Error) -> Error {
        Error::Kube {
            action: action.into(),
            source,
        }
    }

    /// A short label for logs and metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Error::Invalid(_) => "invalid",
            Error::PausedReplicas(_) => "paused_replicas",
            Error::TargetType(_) | Error::UnknownTargetKind { .. } => "target_type",
            Error::TargetNotFound { .. } => "target_not_found",
            Error::TargetNotScalable { .. } => "target_not_scalable",
            Error::Unresolvable { .. } | Error::Resolve(_) => "unresolvable",
            Error::BuildScaler { .. } => "build_scaler",
            Error::Modifiers(_) => "scaling_modifiers",
            Error::DuplicateMetricName(_) => "duplicate_metric",
            Error::HpaNotOwned { .. } => "hpa_not_owned",
            Error::Route(_) => "route_refused",
            Error::Kube { .. } => "kube",
            Error::Finalizer(_) => "finalizer",
            Error::Internal(_) => "internal",
        }
    }

    /// The caught panic behind this error, if it is one (also inside the finalizer's error).
    pub fn internal(&self) -> Option<&InternalError> {
        match self {
            Error::Internal(e) => Some(e),
            Error::Finalizer(f) => match f.as_ref() {
                kube::runtime::finalizer::Error::ApplyFailed(e)
                | kube::runtime::finalizer::Error::CleanupFailed(e) => e.internal(),
                _ => None,
            },
            _ => None,
        }
    }

    /// The error behind the finalizer's wrapping, if any.
    fn unwrapped(&self) -> &Error {
        match self {
            Error::Finalizer(f) => match f.as_ref() {
                kube::runtime::finalizer::Error::ApplyFailed(e)
                | kube::runtime::finalizer::Error::CleanupFailed(e) => e.unwrapped(),
                _ => self,
            },
            _ => self,
        }
    }

    /// The `Ready=False` message and `ScaledObjectCheckFailed` note: KEDA's words for the
    /// failed step first where keda-rs has no better reason (a scale target error gets
    /// "ScaledObject doesn't have correct scaleTargetRef specification: "), then keda-rs's
    /// message naming the field. Validation failures keep keda-rs's message alone.
    pub fn keda_message(&self) -> String {
        match self.unwrapped() {
            Error::TargetType(_)
            | Error::UnknownTargetKind { .. }
            | Error::TargetNotFound { .. }
            | Error::TargetNotScalable { .. } => {
                format!("{}: {self}", crate::shared::events::SCALE_TARGET_ERROR)
            }
            _ => self.to_string(),
        }
    }

    /// KEDA's own `ScaledObjectCheckFailed` note for a target that is missing or has no
    /// `/scale` (KEDA emits it besides the check-failed one); `None` for any other failure.
    pub fn keda_target_note(&self) -> Option<&'static str> {
        match self.unwrapped() {
            Error::TargetNotFound { .. } => Some(crate::shared::events::SCALE_TARGET_NOT_FOUND),
            Error::TargetNotScalable { .. } => {
                Some(crate::shared::events::SCALE_TARGET_NO_SUBRESOURCE)
            }
            _ => None,
        }
    }

    /// The note of KEDA's `KEDAScalerFailed` Warning when a trigger's scaler could not be built
    /// (KEDA's scalers builder emits it for every failed factory, a failed resolution
    /// included): the scaler's or resolver's own message, which names the parameter and never
    /// carries what a server said. `None` for any other failure.
    pub fn scaler_build_failure(&self) -> Option<String> {
        match self.unwrapped() {
            Error::BuildScaler { source, .. } => Some(source.to_string()),
            Error::Resolve(e) => Some(e.to_string()),
            _ => None,
        }
    }

    /// The route refusal behind this error, if it is one (also inside the finalizer's error).
    pub fn route_refusal(&self) -> Option<&Refusal> {
        match self {
            Error::Route(r) => Some(r),
            Error::Finalizer(f) => match f.as_ref() {
                kube::runtime::finalizer::Error::ApplyFailed(e)
                | kube::runtime::finalizer::Error::CleanupFailed(e) => e.route_refusal(),
                _ => None,
            },
            _ => None,
        }
    }

    /// The reason of the `Ready=False` condition this error sets: [`INTERNAL_ERROR`] for a
    /// caught panic, the refusal's reason (`HTTPRouteConflict`, `HTTPHostNotAllowed`) for a
    /// refused route, else `failed` (`ScaledObjectCheckFailed`, `ScaledJobCheckFailed`).
    pub fn condition_reason(&self, failed: &'static str) -> &'static str {
        if self.internal().is_some() {
            INTERNAL_ERROR
        } else if let Some(refusal) = self.route_refusal() {
            refusal.reason()
        } else {
            failed
        }
    }
}

/// Whether a kube error is a 404.
pub(crate) fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}
