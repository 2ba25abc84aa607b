//! Kubernetes Events on ScaledObjects and ScaledJobs, with KEDA's reasons (`pkg/eventreason`).

use std::sync::{Arc, Mutex, PoisonError};

use keda_api::ScaledObject;
use kube::Resource;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tracing::debug;

use crate::serve::cloud_events::CloudEvents;
use keda_decide::scale::{self, ScaleEvent};

/// `ScaledObjectReady`.
pub const SCALED_OBJECT_READY: &str = "ScaledObjectReady";
/// `ScaledObjectCheckFailed`.
pub const SCALED_OBJECT_CHECK_FAILED: &str = "ScaledObjectCheckFailed";
/// `KEDAScalersStarted`.
pub const KEDA_SCALERS_STARTED: &str = "KEDAScalersStarted";
/// `KEDAScalersStopped`.
pub const KEDA_SCALERS_STOPPED: &str = "KEDAScalersStopped";
/// KEDA's action of the `KEDAScalersStarted` Event when a loop starts.
pub const SCALERS_WATCH_STARTED: &str = "ScalersWatchStarted";
/// KEDA's note when a loop starts (`message.ScalerStartMsg`).
pub const SCALERS_STARTED_NOTE: &str = "Started scalers watch";
/// KEDA's note when a loop stops (`DeleteScalableObject`).
pub const SCALERS_STOPPED_NOTE: &str = "Stopped scalers watch";
/// `KEDAScalerFailed`.
pub const KEDA_SCALER_FAILED: &str = "KEDAScalerFailed";
/// `KEDAMetricSourceFailed`: a failed read of a trigger of a ScaledObject with
/// `scalingModifiers`.
pub const KEDA_METRIC_SOURCE_FAILED: &str = "KEDAMetricSourceFailed";
/// `ScaledObjectPaused`.
pub const SCALED_OBJECT_PAUSED: &str = "ScaledObjectPaused";
/// `ScaledObjectUnpaused`.
pub const SCALED_OBJECT_UNPAUSED: &str = "ScaledObjectUnpaused";
/// `ScaledObjectDeleted`.
pub const SCALED_OBJECT_DELETED: &str = "ScaledObjectDeleted";
/// keda-rs's own: restoring a deleted ScaledObject's target to `originalReplicaCount` failed
/// (KEDA only logs it).
pub const SCALE_TARGET_RESTORE_FAILED: &str = "KEDAScaleTargetRestoreFailed";
/// keda-rs's own: a trigger's authentication names a (Cluster)TriggerAuthentication, Secret,
/// ConfigMap, key, container variable or ServiceAccount that does not exist, and the trigger
/// was resolved without it, as KEDA resolves it (KEDA only logs it). The note names what is missing, never a value; the Event's
/// `related` is the missing object ([`crate::shared::resolve::Missing`]).
pub const AUTH_REF_MISSING: &str = "KEDAAuthRefMissing";
/// `ScaledObjectFallbackActivated`.
pub const FALLBACK_ACTIVATED: &str = "ScaledObjectFallbackActivated";
/// `ScaledObjectFallbackDeactivated`.
pub const FALLBACK_DEACTIVATED: &str = "ScaledObjectFallbackDeactivated";

/// KEDA's note of `ScaledObjectReady` (`message.ScalerReadyMsg`; the Ready condition's
/// message is longer).
pub const SCALED_OBJECT_READY_NOTE: &str = "ScaledObject is ready for scaling";
/// KEDA's note of `ScaledJobReady` (`message.ScaledJobReadyMsg`).
pub const SCALED_JOB_READY_NOTE: &str = "ScaledJob is ready for scaling";
/// KEDA's words before a scale target error (`message.ScaleTargetErrMsg`).
pub const SCALE_TARGET_ERROR: &str =
    "ScaledObject doesn't have correct scaleTargetRef specification";
/// KEDA's `ScaledObjectCheckFailed` note for a missing target (`message.ScaleTargetNotFoundMsg`).
pub const SCALE_TARGET_NOT_FOUND: &str = "Target resource doesn't exist";
/// KEDA's `ScaledObjectCheckFailed` note for a target without `/scale`
/// (`message.ScaleTargetNoSubresourceMsg`).
pub const SCALE_TARGET_NO_SUBRESOURCE: &str = "Target resource doesn't expose /scale subresource";
/// The action of the `ScaledObjectCheckFailed` Event with KEDA's note for a missing target
/// or one without `/scale`, which KEDA emits besides the check-failed one (see
/// [`Events::publish_action`]).
pub const CHECK_SCALE_TARGET: &str = "CheckScaleTarget";
/// KEDA's words before a ScaledJob's scaler error (`reconcileScaledJob`).
pub const SCALED_JOB_ENSURE_FAILED: &str = "Failed to ensure ScaledJob is correctly created";

/// How many events one [`Recorder`] publishes before it is replaced by a fresh one.
///
/// kube's `Recorder` keeps every event it published for a few minutes, to turn a repeat into a
/// series (count + 1) instead of a new Event, and only forgets old ones when it publishes
/// again: with 10,000 ScaledObjects that is 20,000 cached events of ~3 KB each. client-go's
/// event correlator (so KEDA's) bounds its cache with a 4,096-entry LRU of smaller entries; a
/// fresh recorder after 1,024 publishes bounds ours to ~3 MB. A repeat that crosses the swap
/// becomes a new Event instead of a count.
const EVENTS_PER_RECORDER: usize = 1024;

/// Publishes events; failures to publish are logged, never fatal. Clones share one recorder.
#[derive(Clone)]
pub struct Events {
    client: kube::Client,
    reporter: Reporter,
    current: Arc<Mutex<(Recorder, usize)>>,
    cloud_events: CloudEvents,
}

impl Events {
    /// Events reported as `reporter` (e.g. `keda-operator`).
    pub fn new(client: kube::Client, reporter: &str) -> Events {
        let reporter = Reporter::from(reporter);
        let recorder = Recorder::new(client.clone(), reporter.clone());
        Events {
            client,
            reporter,
            current: Arc::new(Mutex::new((recorder, 0))),
            cloud_events: CloudEvents::default(),
        }
    }

    /// These events also go to `cloud_events` (the CloudEventSources), for the reasons KEDA
    /// sends as CloudEvents.
    pub fn with_cloud_events(self, cloud_events: CloudEvents) -> Events {
        Events {
            cloud_events,
            ..self
        }
    }

    /// Events through `events_client` when one is given (a client with its own token bucket),
    /// else through `client`.
    pub fn with_client(
        events_client: Option<&kube::Client>,
        client: &kube::Client,
        reporter: &str,
    ) -> Events {
        Events::new(events_client.unwrap_or(client).clone(), reporter)
    }

    /// The recorder for the next event, fresh every [`EVENTS_PER_RECORDER`] events.
    fn recorder(&self) -> Recorder {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if current.1 >= EVENTS_PER_RECORDER {
            *current = (Recorder::new(self.client.clone(), self.reporter.clone()), 0);
        }
        current.1 += 1;
        current.0.clone()
    }

    /// Publishes an event on `so`.
    pub async fn publish(&self, so: &ScaledObject, warning: bool, reason: &str, message: String) {
        self.publish_on(so, warning, reason, message).await;
    }

    /// Publishes an event on any object of a static kind (a ScaledJob), and hands it to the
    /// CloudEventSources when KEDA sends its reason as a CloudEvent.
    pub async fn publish_on<K: Resource<DynamicType = ()>>(
        &self,
        object: &K,
        warning: bool,
        reason: &str,
        message: String,
    ) {
        self.publish_action(object, warning, reason, reason, message)
            .await;
    }

    /// [`publish_on`](Self::publish_on) with an `action` other than the reason (KEDA's is
    /// always the reason). kube's recorder turns a second event with the same type, reason
    /// and action on the same object into a repeat of the first, whatever its note (as
    /// client-go's events API, KEDA's, does): a second note under one reason needs its own
    /// action to be seen.
    pub async fn publish_action<K: Resource<DynamicType = ()>>(
        &self,
        object: &K,
        warning: bool,
        reason: &str,
        action: &str,
        message: String,
    ) {
        self.cloud_events.emit(object, reason, &message);
        let event = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_string(),
            note: Some(message),
            action: action.to_string(),
            secondary: None,
        };
        let recorder = self.recorder();
        if let Err(e) = recorder.publish(&event, &object.object_ref(&())).await {
            debug!(error = %e, reason, "publishing an event failed");
        }
    }

    /// A Warning [`AUTH_REF_MISSING`] on `object` for each of `missing`, its `related`
    /// reference the missing object: one Event (a series when repeated) per missing object or
    /// key, however many are missing at once.
    pub async fn publish_missing<K: Resource<DynamicType = ()>>(
        &self,
        object: &K,
        missing: &[crate::shared::resolve::Missing],
    ) {
        for m in missing {
            let event = Event {
                type_: EventType::Warning,
                reason: AUTH_REF_MISSING.to_string(),
                note: Some(m.message.clone()),
                action: AUTH_REF_MISSING.to_string(),
                secondary: Some(m.related.object_reference()),
            };
            let recorder = self.recorder();
            if let Err(e) = recorder.publish(&event, &object.object_ref(&())).await {
                debug!(error = %e, reason = AUTH_REF_MISSING, "publishing an event failed");
            }
        }
    }

    /// Publishes a decision's event.
    pub async fn publish_decision(&self, so: &ScaledObject, e: &ScaleEvent) {
        let warning = e.type_ == scale::EventType::Warning;
        self.publish(so, warning, e.reason, e.message.clone()).await;
    }
}
