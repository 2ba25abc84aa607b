//! What the caches keep of each object: only the content a resolution reads, compared to
//! detect changes.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::{ConfigMap, EnvFromSource, EnvVar, Secret};
use keda_api::TriggerAuthenticationSpec;
use kube::api::DynamicObject;

/// A Secret's `data` (with `stringData` merged over it, as the API server does on write).
/// `Debug` shows the keys only.
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct SecretData(pub(crate) BTreeMap<String, Vec<u8>>);

impl fmt::Debug for SecretData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

pub(crate) fn secret(secret: &Secret) -> SecretData {
    let mut data: BTreeMap<String, Vec<u8>> = secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    for (k, v) in secret.string_data.iter().flatten() {
        data.insert(k.clone(), v.clone().into_bytes());
    }
    SecretData(data)
}

/// A ConfigMap's `data`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ConfigMapData(pub(crate) BTreeMap<String, String>);

pub(crate) fn config_map(config_map: &ConfigMap) -> ConfigMapData {
    ConfigMapData(config_map.data.clone().unwrap_or_default())
}

/// A (Cluster)TriggerAuthentication's spec, or why it does not deserialize. Watched as
/// untyped objects so that one malformed object cannot break the list of all the others.
pub(crate) type AuthSpec = Result<TriggerAuthenticationSpec, String>;

/// What the caches keep of a (Cluster)TriggerAuthentication: its spec, which resolutions read,
/// and its users as its status lists them, which the ScaledObject and ScaledJob reconcilers
/// keep up to date ([`crate::shared::auth_status`]).
#[derive(Clone, Debug)]
pub(crate) struct AuthEntry {
    pub(crate) spec: AuthSpec,
    pub(crate) users: AuthUsers,
}

/// Two entries are the same when their specs are: a status write (ours, at every change of
/// users) is no change of what a trigger resolves to, and must not rebuild any scaler.
impl PartialEq for AuthEntry {
    fn eq(&self, other: &Self) -> bool {
        self.spec == other.spec
    }
}

/// `status.scaledobjects` / `status.scaledjobs` of a (Cluster)TriggerAuthentication, and the
/// `resourceVersion` they were read at.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthUsers {
    /// `status.scaledobjects`: comma-separated names of the ScaledObjects that use it.
    pub scaled_objects: Option<String>,
    /// `status.scaledjobs`: comma-separated names of the ScaledJobs that use it.
    pub scaled_jobs: Option<String>,
    /// The object's `metadata.resourceVersion`.
    pub resource_version: Option<String>,
}

pub(crate) fn auth_spec(object: &DynamicObject) -> AuthEntry {
    let spec = object
        .data
        .get("spec")
        .cloned()
        .unwrap_or(serde_json::Value::Object(Default::default()));
    let status = object.data.get("status");
    let field = |name: &str| {
        status
            .and_then(|s| s.get(name))
            .and_then(serde_json::Value::as_str)
            .map(str::to_string)
    };
    AuthEntry {
        spec: serde_json::from_value(spec).map_err(|e| e.to_string()),
        users: AuthUsers {
            scaled_objects: field("scaledobjects"),
            scaled_jobs: field("scaledjobs"),
            resource_version: object.metadata.resource_version.clone(),
        },
    }
}

/// The environment part of one container of a pod template.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ContainerEnv {
    pub(crate) name: String,
    pub(crate) env: Vec<EnvVar>,
    pub(crate) env_from: Vec<EnvFromSource>,
}

/// The containers of a workload's `spec.template.spec`, or why they cannot be read.
pub(crate) type TargetTemplate = Result<Vec<ContainerEnv>, String>;

/// Only the fields of a container this module reads, so that unknown or future fields of the
/// workload never make it unreadable.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ContainerFields {
    #[serde(default)]
    name: String,
    #[serde(default)]
    env: Option<Vec<EnvVar>>,
    #[serde(default)]
    env_from: Option<Vec<EnvFromSource>>,
}

pub(crate) fn target_template(object: &DynamicObject) -> TargetTemplate {
    let containers = object
        .data
        .pointer("/spec/template/spec/containers")
        .cloned()
        .unwrap_or(serde_json::Value::Array(Vec::new()));
    let containers: Vec<ContainerFields> = serde_json::from_value(containers)
        .map_err(|e| format!("spec.template.spec.containers cannot be read: {e}"))?;
    Ok(containers.into_iter().map(container_env).collect())
}

fn container_env(c: ContainerFields) -> ContainerEnv {
    ContainerEnv {
        name: c.name,
        env: c.env.unwrap_or_default(),
        env_from: c.env_from.unwrap_or_default(),
    }
}

/// The containers of an inline pod template (a ScaledJob's `jobTargetRef.template`).
pub(crate) fn pod_template(
    template: &k8s_openapi::api::core::v1::PodTemplateSpec,
) -> Vec<ContainerEnv> {
    template
        .spec
        .iter()
        .flat_map(|spec| spec.containers.iter())
        .map(|c| ContainerEnv {
            name: c.name.clone(),
            env: c.env.clone().unwrap_or_default(),
            env_from: c.env_from.clone().unwrap_or_default(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    #[test]
    fn secret_projection_merges_string_data_and_debug_shows_keys_only() {
        let s = Secret {
            data: Some(BTreeMap::from([
                ("a".to_string(), ByteString(b"hunter2".to_vec())),
                ("b".to_string(), ByteString(b"old".to_vec())),
            ])),
            string_data: Some(BTreeMap::from([("b".to_string(), "new".to_string())])),
            ..Default::default()
        };
        let p = secret(&s);
        assert_eq!(p.0["b"], b"new");
        let debug = format!("{p:?}");
        assert!(!debug.contains("hunter2"), "{debug}");
        assert_eq!(debug, r#"{"a", "b"}"#);
    }

    #[test]
    fn any_kind_with_a_pod_template_yields_its_containers() {
        let rollout: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Rollout",
            "metadata": {"name": "r", "namespace": "n"},
            "spec": {"replicas": 3, "template": {"spec": {"containers": [
                {"name": "app", "image": "x", "env": [{"name": "A", "value": "1"}],
                 "somethingNew": true},
                {"name": "sidecar"}
            ]}}}
        }))
        .unwrap();
        let containers = target_template(&rollout).unwrap();
        assert_eq!(containers.len(), 2);
        assert_eq!(containers[0].name, "app");
        assert_eq!(containers[0].env[0].value.as_deref(), Some("1"));
        assert!(containers[1].env.is_empty());

        let no_template: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Thing", "metadata": {"name": "t"}
        }))
        .unwrap();
        assert_eq!(target_template(&no_template), Ok(vec![]));
    }
}
