//! Kubernetes Events on ScaledObjects and ScaledJobs, with KEDA's reasons (`pkg/eventreason`).

use keda_api::ScaledObject;
use kube::Resource;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tracing::debug;

use crate::decision::{self, ScaleEvent};

/// `ScaledObjectReady`.
pub const SCALED_OBJECT_READY: &str = "ScaledObjectReady";
/// `ScaledObjectCheckFailed`.
pub const SCALED_OBJECT_CHECK_FAILED: &str = "ScaledObjectCheckFailed";
/// `KEDAScalersStarted`.
pub const KEDA_SCALERS_STARTED: &str = "KEDAScalersStarted";
/// `KEDAScalerFailed`.
pub const KEDA_SCALER_FAILED: &str = "KEDAScalerFailed";
/// `ScaledObjectPaused`.
pub const SCALED_OBJECT_PAUSED: &str = "ScaledObjectPaused";
/// `ScaledObjectUnpaused`.
pub const SCALED_OBJECT_UNPAUSED: &str = "ScaledObjectUnpaused";
/// `ScaledObjectDeleted`.
pub const SCALED_OBJECT_DELETED: &str = "ScaledObjectDeleted";
/// `ScaledObjectFallbackActivated`.
pub const FALLBACK_ACTIVATED: &str = "ScaledObjectFallbackActivated";
/// `ScaledObjectFallbackDeactivated`.
pub const FALLBACK_DEACTIVATED: &str = "ScaledObjectFallbackDeactivated";

/// Publishes events; failures to publish are logged, never fatal.
#[derive(Clone)]
pub struct Events {
    recorder: Recorder,
}

impl Events {
    /// Events reported as `reporter` (e.g. `keda-operator`).
    pub fn new(client: kube::Client, reporter: &str) -> Events {
        Events {
            recorder: Recorder::new(client, Reporter::from(reporter)),
        }
    }

    /// Publishes an event on `so`.
    pub async fn publish(&self, so: &ScaledObject, warning: bool, reason: &str, message: String) {
        self.publish_on(so, warning, reason, message).await;
    }

    /// Publishes an event on any object of a static kind (a ScaledJob).
    pub async fn publish_on<K: Resource<DynamicType = ()>>(
        &self,
        object: &K,
        warning: bool,
        reason: &str,
        message: String,
    ) {
        let event = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_string(),
            note: Some(message),
            action: reason.to_string(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &object.object_ref(&())).await {
            debug!(error = %e, reason, "publishing an event failed");
        }
    }

    /// Publishes a decision's event.
    pub async fn publish_decision(&self, so: &ScaledObject, e: &ScaleEvent) {
        let warning = e.type_ == decision::EventType::Warning;
        self.publish(so, warning, e.reason, e.message.clone()).await;
    }
}
