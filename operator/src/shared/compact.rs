//! Objects as the watch caches keep them: without the spare room deserialization leaves.
//!
//! serde builds a JSON array into a `Vec` by pushing (the JSON parser cannot say how long the
//! array is), so a one-element array gets room for four: a ScaledObject's single trigger takes
//! 608 bytes instead of 152, a ScaledJob's single container about 4 KB instead of 1 KB. The
//! controllers' stores keep every object for as long as it exists (100,000 of them in issue 25),
//! so the objects are shrunk once, as the watch delivers them, before the store takes them.

use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use keda_api::{Condition, ScaleTrigger, ScaledJob, ScaledObject};

/// An object whose spare capacity can be given back.
pub(crate) trait Compact {
    /// Shrinks every list to its length; the object is otherwise unchanged.
    fn compact(&mut self);
}

fn shrink<T>(list: &mut Option<Vec<T>>) {
    if let Some(list) = list {
        list.shrink_to_fit();
    }
}

fn meta(meta: &mut ObjectMeta) {
    shrink(&mut meta.finalizers);
    shrink(&mut meta.owner_references);
}

fn triggers(triggers: &mut Vec<ScaleTrigger>) {
    triggers.shrink_to_fit();
}

fn conditions(conditions: &mut Option<Vec<Condition>>) {
    shrink(conditions);
}

fn container(c: &mut Container) {
    shrink(&mut c.args);
    shrink(&mut c.command);
    shrink(&mut c.env);
    shrink(&mut c.env_from);
    shrink(&mut c.ports);
    shrink(&mut c.volume_mounts);
}

fn pod(spec: &mut PodSpec) {
    spec.containers.shrink_to_fit();
    spec.containers.iter_mut().for_each(container);
    if let Some(init) = &mut spec.init_containers {
        init.shrink_to_fit();
        init.iter_mut().for_each(container);
    }
    shrink(&mut spec.volumes);
    shrink(&mut spec.image_pull_secrets);
    shrink(&mut spec.tolerations);
}

impl Compact for ScaledObject {
    fn compact(&mut self) {
        meta(&mut self.metadata);
        triggers(&mut self.spec.triggers);
        if let Some(status) = &mut self.status {
            conditions(&mut status.conditions);
            shrink(&mut status.external_metric_names);
            shrink(&mut status.resource_metric_names);
        }
    }
}

impl Compact for ScaledJob {
    fn compact(&mut self) {
        meta(&mut self.metadata);
        triggers(&mut self.spec.triggers);
        if let Some(template) = &mut self.spec.job_target_ref.template.spec {
            pod(template);
        }
        if let Some(status) = &mut self.status {
            conditions(&mut status.conditions);
            shrink(&mut status.external_metric_names);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deserialized as the watch does (from JSON text).
    fn parse<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
        serde_json::from_str(&value.to_string()).expect("object")
    }

    #[test]
    fn a_scaled_object_keeps_no_spare_room_and_no_other_change() {
        let json = serde_json::json!({
            "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "metadata": {"name": "a", "namespace": "n", "finalizers": ["finalizer.keda.sh"]},
            "spec": {
                "scaleTargetRef": {"name": "w"},
                "triggers": [{"type": "redis", "metadata": {"listName": "l"}}]
            },
            "status": {
                "conditions": [
                    {"type": "Ready", "status": "True"},
                    {"type": "Active", "status": "False"},
                    {"type": "Fallback", "status": "False"},
                    {"type": "Paused", "status": "False"},
                    {"type": "HPAActive", "status": "True"}
                ],
                "externalMetricNames": ["s0-redis-l"]
            }
        });
        let mut so: ScaledObject = parse(json);
        let before = so.clone();
        assert!(
            so.spec.triggers.capacity() > 1,
            "deserialized with spare room (else this test shows nothing)"
        );
        so.compact();
        assert_eq!(so, before);
        assert_eq!(so.spec.triggers.capacity(), 1);
        let status = so.status.as_ref().expect("status");
        assert_eq!(status.conditions.as_ref().map(Vec::capacity), Some(5));
        assert_eq!(
            status.external_metric_names.as_ref().map(Vec::capacity),
            Some(1)
        );
        assert_eq!(so.metadata.finalizers.as_ref().map(Vec::capacity), Some(1));
    }

    #[test]
    fn a_scaled_job_s_template_keeps_no_spare_room() {
        let json = serde_json::json!({
            "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledJob",
            "metadata": {"name": "a", "namespace": "n"},
            "spec": {
                "jobTargetRef": {"template": {"spec": {
                    "containers": [{"name": "w", "image": "busybox", "args": ["x"],
                                    "env": [{"name": "A", "value": "1"}]}],
                    "restartPolicy": "Never"
                }}},
                "triggers": [{"type": "redis", "metadata": {"listName": "l"}}]
            },
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}
        });
        let mut sj: ScaledJob = parse(json);
        let before = sj.clone();
        sj.compact();
        assert_eq!(sj, before);
        assert_eq!(sj.spec.triggers.capacity(), 1);
        let pod = sj.spec.job_target_ref.template.spec.as_ref().expect("pod");
        assert_eq!(pod.containers.capacity(), 1);
        assert_eq!(pod.containers[0].args.as_ref().map(Vec::capacity), Some(1));
        assert_eq!(pod.containers[0].env.as_ref().map(Vec::capacity), Some(1));
        let status = sj.status.as_ref().expect("status");
        assert_eq!(status.conditions.as_ref().map(Vec::capacity), Some(1));
    }
}
