//! What the controllers record of ScaledObjects, ScaledJobs, their triggers and the custom
//! resources (`keda_scaled_object_*`, `keda_resource_*`, `keda_trigger_*`, loop lag, panics).

use super::*;

impl Metrics {
    /// `keda_scaled_object_errors_total`: an error of the ScaledObject (reconcile or loop).
    pub fn scaled_object_error(&self, namespace: &str, name: &str) {
        self.families()
            .per_object
            .object_errors(ResourceKind::ScaledObject, namespace, name, 1);
    }

    /// `keda_scaled_job_errors_total`: an error of the ScaledJob.
    pub fn scaled_job_error(&self, namespace: &str, name: &str) {
        self.families()
            .per_object
            .object_errors(ResourceKind::ScaledJob, namespace, name, 1);
    }

    /// `keda_scaled_object_paused`: 1 while the ScaledObject is paused, else 0.
    pub fn paused(&self, namespace: &str, name: &str, paused: bool) {
        self.families().per_object.paused(namespace, name, paused);
    }

    /// `keda_internal_scale_loop_latency_seconds`: how late the loop's tick ran compared with
    /// when it was due.
    pub fn loop_latency(&self, namespace: &str, name: &str, kind: ResourceKind, lag: Duration) {
        self.families()
            .per_object
            .loop_lag(kind, namespace, name, lag.as_secs_f64());
    }

    /// `keda_internal_panics_total`: `component` caught a panic in the work of the
    /// ScaledObject or ScaledJob `namespace/name` ([`crate::shared::isolation`]).
    pub fn internal_panic(
        &self,
        component: &'static str,
        kind: ResourceKind,
        namespace: &str,
        name: &str,
    ) {
        let labels = PanicLabels {
            component,
            namespace: namespace.to_string(),
            kind,
            resource: name.to_string(),
        };
        self.families().internal_panics.get_or_create(&labels).inc();
    }

    /// `keda_resource_registered_total` + 1: a custom resource appeared. An empty namespace
    /// (cluster-scoped) is reported as `default`, as in KEDA.
    pub fn resource_registered(&self, kind: CustomResourceKind, namespace: &str) {
        self.families()
            .resource_registered
            .get_or_create(&resource_labels(kind, namespace))
            .inc();
    }

    /// `keda_resource_registered_total` - 1: a custom resource went away.
    pub fn resource_unregistered(&self, kind: CustomResourceKind, namespace: &str) {
        self.families()
            .resource_registered
            .get_or_create(&resource_labels(kind, namespace))
            .dec();
    }

    /// `keda_trigger_registered_total` + 1 for a trigger type. Empty types are ignored, as in
    /// KEDA.
    pub fn trigger_registered(&self, trigger_type: &str) {
        if let Some(labels) = trigger_labels(trigger_type) {
            self.families()
                .trigger_registered
                .get_or_create(&labels)
                .inc();
        }
    }

    /// `keda_trigger_registered_total` - 1 for a trigger type.
    pub fn trigger_unregistered(&self, trigger_type: &str) {
        if let Some(labels) = trigger_labels(trigger_type) {
            self.families()
                .trigger_registered
                .get_or_create(&labels)
                .dec();
        }
    }

    /// Counts the custom resource `namespace/name` of `kind` in `keda_resource_registered_total`
    /// and its `trigger_types` in `keda_trigger_registered_total`, replacing what it counted
    /// before (KEDA's controllers' `updatePromMetrics`, run at every reconcile). Idempotent:
    /// counting the same resource with the same triggers again changes nothing, so several
    /// observers of one resource count it once. `uid` identifies this incarnation of the
    /// resource for [`unregister_resource`](Self::unregister_resource).
    pub fn register_resource(
        &self,
        kind: CustomResourceKind,
        (namespace, name): (&str, &str),
        uid: Option<&str>,
        trigger_types: &[&str],
    ) {
        let key = RegisteredKey::new(kind, namespace, name);
        let registration = Registration {
            uid: uid.map(Box::from),
            trigger_types: trigger_types.iter().map(|t| Box::from(*t)).collect(),
        };
        let mut registered = self
            .inner
            .registered
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match registered.get(&key) {
            Some(old) if old.trigger_types == registration.trigger_types => {}
            Some(old) => {
                for t in &old.trigger_types {
                    self.trigger_unregistered(t);
                }
                for t in &registration.trigger_types {
                    self.trigger_registered(t);
                }
            }
            None => {
                self.resource_registered(kind, namespace);
                for t in &registration.trigger_types {
                    self.trigger_registered(t);
                }
            }
        }
        registered.insert(key, registration);
    }

    /// Stops counting the custom resource `namespace/name` of `kind` (KEDA's
    /// `updatePromMetricsOnDelete`). With `uid`, only the incarnation of that UID: one deleted
    /// and created again under the same name is left counted. Idempotent.
    pub fn unregister_resource(
        &self,
        kind: CustomResourceKind,
        (namespace, name): (&str, &str),
        uid: Option<&str>,
    ) {
        let key = RegisteredKey::new(kind, namespace, name);
        let mut registered = self
            .inner
            .registered
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(old) = registered.get(&key) else {
            return;
        };
        if uid.is_some_and(|uid| old.uid.as_deref().is_some_and(|old| old != uid)) {
            return;
        }
        for t in &old.trigger_types {
            self.trigger_unregistered(t);
        }
        self.resource_unregistered(kind, namespace);
        registered.remove(&key);
    }

    /// Deletes every per-scaler series (value, active, latency, errors) of one ScaledObject or
    /// ScaledJob, and its paused and loop-latency series, so a deleted object or a removed
    /// trigger does not keep reporting stale values. The object's error counter is kept, as in
    /// KEDA.
    pub fn forget_scalers(&self, namespace: &str, name: &str, kind: ResourceKind) {
        self.families().per_object.forget(kind, namespace, name);
    }
}

pub(super) fn resource_labels(kind: CustomResourceKind, namespace: &str) -> ResourceLabels {
    let namespace = if namespace.is_empty() {
        CLUSTER_SCOPE_NAMESPACE
    } else {
        namespace
    };
    ResourceLabels {
        kind,
        namespace: namespace.to_string(),
    }
}

pub(super) fn trigger_labels(trigger_type: &str) -> Option<TriggerLabels> {
    (!trigger_type.is_empty()).then(|| TriggerLabels {
        trigger_type: trigger_type.to_string(),
    })
}
