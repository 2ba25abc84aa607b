//! The Jobs of a ScaledJob as KEDA makes and reads them: the Job built from
//! `spec.jobTargetRef`, and the views [`keda_decide::job`] takes (running, pending, finished,
//! generation) read from Jobs and their pods.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use keda_api::ScaledJob;
use keda_api::annotations::{JOB_EXCLUDED_LABELS, SCALED_JOB_GENERATION, SCALED_JOB_NAME_LABEL};
use kube::{Resource, ResourceExt};

use crate::scaled_object::hpa::MANAGED_BY;
use keda_decide::job::{Finished, FinishedJob, PodView};

/// The label the Job controller puts on a Job's pods.
pub const JOB_NAME_LABEL: &str = "job-name";

/// The Job KEDA creates for `sj`: `generateName: <name>-`, KEDA's labels plus the ScaledJob's
/// own (minus those listed in `scaledjob.keda.sh/job-excluded-labels`), the ScaledJob's
/// annotations plus `scaledjob.keda.sh/generation`, the ScaledJob as controller owner, and
/// `restartPolicy: OnFailure` when the template leaves it empty (Jobs reject `Always`, the
/// client-side default).
pub fn job_for(sj: &ScaledJob) -> Job {
    let name = sj.name_any();
    let excluded: Vec<&str> = sj
        .annotations()
        .get(JOB_EXCLUDED_LABELS)
        .map(|v| v.split(',').map(str::trim).collect())
        .unwrap_or_default();
    let mut labels = BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), name.clone()),
        (
            "app.kubernetes.io/version".to_string(),
            env!("CARGO_PKG_VERSION").to_string(),
        ),
        ("app.kubernetes.io/part-of".to_string(), name.clone()),
        (
            "app.kubernetes.io/managed-by".to_string(),
            MANAGED_BY.to_string(),
        ),
        (SCALED_JOB_NAME_LABEL.to_string(), name.clone()),
    ]);
    for (k, v) in sj.labels() {
        if !excluded.contains(&k.as_str()) {
            labels.insert(k.clone(), v.clone());
        }
    }
    let mut annotations = BTreeMap::from([(
        SCALED_JOB_GENERATION.to_string(),
        sj.metadata.generation.unwrap_or_default().to_string(),
    )]);
    for (k, v) in sj.annotations() {
        annotations.insert(k.clone(), v.clone());
    }
    let mut spec = sj.spec.job_target_ref.clone();
    let template_meta = spec
        .template
        .metadata
        .get_or_insert_with(ObjectMeta::default);
    template_meta
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(SCALED_JOB_NAME_LABEL.to_string(), name.clone());
    let pod_spec = spec.template.spec.get_or_insert_with(Default::default);
    if pod_spec
        .restart_policy
        .as_deref()
        .unwrap_or_default()
        .is_empty()
    {
        pod_spec.restart_policy = Some("OnFailure".to_string());
    }
    Job {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}-")),
            namespace: sj.namespace(),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: controller_reference(sj).map(|r| vec![r]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    }
}

fn controller_reference(sj: &ScaledJob) -> Option<OwnerReference> {
    let mut r = sj.controller_owner_ref(&())?;
    r.block_owner_deletion = Some(true);
    Some(r)
}

/// How a Job ended, if it did: a `Complete` or `Failed` condition that is `True`.
pub fn finished(job: &Job) -> Option<Finished> {
    let conditions = job.status.as_ref()?.conditions.as_ref()?;
    conditions
        .iter()
        .filter(|c| c.status == "True")
        .find_map(|c| match c.type_.as_str() {
            "Complete" => Some(Finished::Succeeded),
            "Failed" => Some(Finished::Failed),
            _ => None,
        })
}

/// A finished Job for the history limits.
pub fn finished_job(job: &Job, outcome: Finished) -> FinishedJob {
    FinishedJob {
        name: job.name_any(),
        outcome,
        completion_time: job
            .status
            .as_ref()
            .and_then(|s| s.completion_time.as_ref())
            .map(|t| t.0.as_second()),
    }
}

/// The generation a Job was created for (`scaledjob.keda.sh/generation`).
pub fn generation(job: &Job) -> Option<&str> {
    job.annotations()
        .get(SCALED_JOB_GENERATION)
        .map(String::as_str)
}

/// A pod as [`keda_decide::job::is_pending`] sees it.
pub fn pod_view(pod: &Pod) -> PodView {
    let status = pod.status.as_ref();
    PodView {
        phase: status.and_then(|s| s.phase.clone()).unwrap_or_default(),
        true_conditions: status
            .and_then(|s| s.conditions.as_ref())
            .map(|cs| {
                cs.iter()
                    .filter(|c| c.status == "True")
                    .map(|c| c.type_.clone())
                    .collect()
            })
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scaled_job(extra_meta: &str, template_spec: &str) -> ScaledJob {
        let yaml = format!(
            r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledJob
metadata:
  name: worker
  namespace: ns
  uid: u-1
  generation: 3
{extra_meta}
spec:
  jobTargetRef:
    template:
      spec:
{template_spec}
        containers: [{{ name: w, image: busybox }}]
  triggers: [{{ type: redis, metadata: {{ listName: a }} }}]
"#
        );
        serde_yaml::from_str(&yaml).expect("ScaledJob YAML")
    }

    #[test]
    fn a_job_carries_kedas_name_labels_generation_and_controller_owner() {
        let job = job_for(&scaled_job(
            "  labels: { team: a, secret: x }\n  annotations: { scaledjob.keda.sh/job-excluded-labels: \"secret\", note: n }",
            "",
        ));
        let meta = &job.metadata;
        assert_eq!(meta.generate_name.as_deref(), Some("worker-"));
        assert_eq!(meta.namespace.as_deref(), Some("ns"));
        let labels = meta.labels.clone().expect("labels");
        assert_eq!(
            labels.get("scaledjob.keda.sh/name").map(String::as_str),
            Some("worker")
        );
        assert_eq!(
            labels
                .get("app.kubernetes.io/managed-by")
                .map(String::as_str),
            Some("keda-operator")
        );
        assert_eq!(labels.get("team").map(String::as_str), Some("a"));
        assert!(
            !labels.contains_key("secret"),
            "excluded label copied: {labels:?}"
        );
        let annotations = meta.annotations.clone().expect("annotations");
        assert_eq!(
            annotations
                .get("scaledjob.keda.sh/generation")
                .map(String::as_str),
            Some("3")
        );
        assert_eq!(annotations.get("note").map(String::as_str), Some("n"));
        let owner = &meta.owner_references.as_ref().expect("owner")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
            ("ScaledJob", "worker", "u-1")
        );
        assert_eq!(owner.controller, Some(true));
        let spec = job.spec.expect("spec");
        assert_eq!(
            spec.template.spec.and_then(|s| s.restart_policy).as_deref(),
            Some("OnFailure")
        );
        let template_labels = spec
            .template
            .metadata
            .and_then(|m| m.labels)
            .expect("template labels");
        assert_eq!(
            template_labels
                .get("scaledjob.keda.sh/name")
                .map(String::as_str),
            Some("worker")
        );
    }

    #[test]
    fn an_explicit_restart_policy_is_kept() {
        let job = job_for(&scaled_job("", "        restartPolicy: Never"));
        let policy = job
            .spec
            .and_then(|s| s.template.spec)
            .and_then(|s| s.restart_policy);
        assert_eq!(policy.as_deref(), Some("Never"));
    }

    #[test]
    fn a_job_is_finished_only_by_a_true_complete_or_failed_condition() {
        let job = |conditions: serde_json::Value| -> Job {
            serde_json::from_value(serde_json::json!({
                "metadata": { "name": "j" },
                "status": { "conditions": conditions }
            }))
            .expect("Job")
        };
        assert_eq!(finished(&job(serde_json::json!([]))), None);
        assert_eq!(
            finished(&job(
                serde_json::json!([{ "type": "Complete", "status": "False" }])
            )),
            None
        );
        assert_eq!(
            finished(&job(
                serde_json::json!([{ "type": "Complete", "status": "True" }])
            )),
            Some(Finished::Succeeded)
        );
        assert_eq!(
            finished(&job(serde_json::json!([
                { "type": "Suspended", "status": "True" },
                { "type": "Failed", "status": "True" }
            ]))),
            Some(Finished::Failed)
        );
    }
}
