//! A container's environment as the kubelet would build it: `envFrom` sources in order (with
//! their `prefix`), then `env` entries in order, each overriding earlier definitions;
//! `env[].value` expands `$(VAR)` against what is defined before it; `valueFrom` reads Secret
//! and ConfigMap keys, honouring `optional`.
//!
//! Unlike KEDA, a variable that cannot be read does not fail the whole container: it is kept
//! as unresolvable with the reason, and only a trigger that asks for it fails, with that reason.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{EnvFromSource, EnvVar};

use super::error::restricted_secret;
use super::expand::expand;
use super::projection::{ConfigMapData, ContainerEnv, SecretData};

/// The result of looking up a Secret or ConfigMap in a cache.
pub(crate) enum Lookup<T> {
    Found(T),
    NotFound,
    /// The namespace is outside the watch scope.
    NotWatched,
    /// `KEDA_RESTRICT_SECRET_ACCESS`: Secrets are read only in this namespace.
    Restricted {
        allowed: String,
    },
}

/// Access to cached Secrets and ConfigMaps; implementations record what was read.
pub(crate) trait Refs {
    fn secret(&mut self, namespace: &str, name: &str) -> Lookup<Arc<SecretData>>;
    fn config_map(&mut self, namespace: &str, name: &str) -> Lookup<Arc<ConfigMapData>>;
}

/// The environment of one container. Deliberately not `Debug`: values may be secret.
pub(crate) struct ResolvedContainer {
    pub(crate) name: String,
    /// Value, or why it could not be read.
    vars: BTreeMap<String, Result<String, String>>,
    /// `envFrom` sources that could not be read, e.g. `envFrom Secret team/x not found`.
    failed_sources: Vec<String>,
}

/// Why a variable could not be returned.
pub(crate) enum VarError {
    /// Not defined; the hint names unreadable `envFrom` sources that may have defined it.
    Missing { hint: String },
    /// Defined, but its value could not be read.
    Unresolvable { reason: String },
}

impl ResolvedContainer {
    /// The value of `variable`.
    pub(crate) fn get(&self, variable: &str) -> Result<&str, VarError> {
        match self.vars.get(variable) {
            Some(Ok(value)) => Ok(value),
            Some(Err(reason)) => Err(VarError::Unresolvable {
                reason: reason.clone(),
            }),
            None if self.failed_sources.is_empty() => Err(VarError::Missing {
                hint: String::new(),
            }),
            None => Err(VarError::Missing {
                hint: format!(" (it may come from: {})", self.failed_sources.join("; ")),
            }),
        }
    }
}

/// Resolves the environment of `container` in `namespace`.
pub(crate) fn resolve_container(
    container: &ContainerEnv,
    namespace: &str,
    refs: &mut impl Refs,
) -> ResolvedContainer {
    let mut vars: BTreeMap<String, Result<String, String>> = BTreeMap::new();
    let mut failed_sources = Vec::new();
    for source in &container.env_from {
        env_from(source, namespace, refs, &mut vars, &mut failed_sources);
    }
    for var in &container.env {
        if let Some(value) = env_var(var, namespace, refs, &vars) {
            vars.insert(var.name.clone(), value);
        }
    }
    ResolvedContainer {
        name: container.name.clone(),
        vars,
        failed_sources,
    }
}

fn env_from(
    source: &EnvFromSource,
    namespace: &str,
    refs: &mut impl Refs,
    vars: &mut BTreeMap<String, Result<String, String>>,
    failed: &mut Vec<String>,
) {
    let prefix = source.prefix.as_deref().unwrap_or("");
    if let Some(cm) = &source.config_map_ref {
        let optional = cm.optional.unwrap_or(false);
        match refs.config_map(namespace, &cm.name) {
            Lookup::Found(data) => {
                for (k, v) in &data.0 {
                    vars.insert(format!("{prefix}{k}"), Ok(v.clone()));
                }
            }
            Lookup::NotFound if optional => {}
            Lookup::NotFound => failed.push(format!(
                "envFrom ConfigMap {namespace}/{} not found",
                cm.name
            )),
            // Only Secrets are ever restricted.
            Lookup::NotWatched | Lookup::Restricted { .. } => failed.push(format!(
                "envFrom ConfigMap {namespace}/{}: namespace not watched",
                cm.name
            )),
        }
    } else if let Some(s) = &source.secret_ref {
        let optional = s.optional.unwrap_or(false);
        match refs.secret(namespace, &s.name) {
            Lookup::Found(data) => {
                for (k, v) in &data.0 {
                    let value = String::from_utf8(v.clone()).map_err(|_| {
                        format!(
                            "key \"{k}\" of Secret {namespace}/{} is not UTF-8 text",
                            s.name
                        )
                    });
                    vars.insert(format!("{prefix}{k}"), value);
                }
            }
            Lookup::NotFound if optional => {}
            Lookup::NotFound => {
                failed.push(format!("envFrom Secret {namespace}/{} not found", s.name))
            }
            Lookup::NotWatched => failed.push(format!(
                "envFrom Secret {namespace}/{}: namespace not watched",
                s.name
            )),
            Lookup::Restricted { allowed } => failed.push(format!(
                "envFrom {}",
                restricted_secret(namespace, &s.name, &allowed)
            )),
        }
    }
}

/// The value of one `env` entry; `None` when an optional reference is absent (the variable
/// is then not defined, as in Kubernetes).
fn env_var(
    var: &EnvVar,
    namespace: &str,
    refs: &mut impl Refs,
    defined: &BTreeMap<String, Result<String, String>>,
) -> Option<Result<String, String>> {
    let value_from = match &var.value_from {
        Some(from) if var.value.as_deref().unwrap_or("").is_empty() => from,
        _ => {
            let value = var.value.as_deref().unwrap_or("");
            let lookup = |name: &str| defined.get(name).and_then(|v| v.as_deref().ok());
            return Some(Ok(expand(value, lookup)));
        }
    };
    if let Some(sel) = &value_from.secret_key_ref {
        let optional = sel.optional.unwrap_or(false);
        return match refs.secret(namespace, &sel.name) {
            Lookup::Found(data) => match data.0.get(&sel.key) {
                Some(bytes) => Some(String::from_utf8(bytes.clone()).map_err(|_| {
                    format!(
                        "key \"{}\" of Secret {namespace}/{} is not UTF-8 text",
                        sel.key, sel.name
                    )
                })),
                None if optional => None,
                None => Some(Err(format!(
                    "key \"{}\" not found in Secret {namespace}/{}",
                    sel.key, sel.name
                ))),
            },
            Lookup::NotFound if optional => None,
            Lookup::NotFound => Some(Err(format!("Secret {namespace}/{} not found", sel.name))),
            Lookup::NotWatched => Some(Err(format!(
                "Secret {namespace}/{}: namespace not watched",
                sel.name
            ))),
            Lookup::Restricted { allowed } => {
                Some(Err(restricted_secret(namespace, &sel.name, &allowed)))
            }
        };
    }
    if let Some(sel) = &value_from.config_map_key_ref {
        let optional = sel.optional.unwrap_or(false);
        return match refs.config_map(namespace, &sel.name) {
            Lookup::Found(data) => match data.0.get(&sel.key) {
                Some(value) => Some(Ok(value.clone())),
                None if optional => None,
                None => Some(Err(format!(
                    "key \"{}\" not found in ConfigMap {namespace}/{}",
                    sel.key, sel.name
                ))),
            },
            Lookup::NotFound if optional => None,
            Lookup::NotFound => Some(Err(format!("ConfigMap {namespace}/{} not found", sel.name))),
            // Only Secrets are ever restricted.
            Lookup::NotWatched | Lookup::Restricted { .. } => Some(Err(format!(
                "ConfigMap {namespace}/{}: namespace not watched",
                sel.name
            ))),
        };
    }
    let source = if value_from.field_ref.is_some() {
        "fieldRef"
    } else if value_from.resource_field_ref.is_some() {
        "resourceFieldRef"
    } else {
        "a valueFrom source"
    };
    Some(Err(format!(
        "it is set from {source}, which keda-rs cannot resolve outside a pod"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ConfigMapEnvSource, ConfigMapKeySelector, EnvVarSource, ObjectFieldSelector,
        SecretEnvSource, SecretKeySelector,
    };

    struct Fake {
        secrets: BTreeMap<String, SecretData>,
        config_maps: BTreeMap<String, ConfigMapData>,
    }

    impl Refs for Fake {
        fn secret(&mut self, _: &str, name: &str) -> Lookup<Arc<SecretData>> {
            self.secrets
                .get(name)
                .map_or(Lookup::NotFound, |d| Lookup::Found(Arc::new(d.clone())))
        }
        fn config_map(&mut self, _: &str, name: &str) -> Lookup<Arc<ConfigMapData>> {
            self.config_maps
                .get(name)
                .map_or(Lookup::NotFound, |d| Lookup::Found(Arc::new(d.clone())))
        }
    }

    fn fake() -> Fake {
        Fake {
            secrets: BTreeMap::from([(
                "creds".to_string(),
                SecretData(BTreeMap::from([
                    ("password".to_string(), b"s3cret".to_vec()),
                    ("binary".to_string(), vec![0xff, 0xfe]),
                ])),
            )]),
            config_maps: BTreeMap::from([(
                "settings".to_string(),
                ConfigMapData(BTreeMap::from([
                    ("host".to_string(), "redis".to_string()),
                    ("port".to_string(), "6379".to_string()),
                ])),
            )]),
        }
    }

    fn value(name: &str, value: &str) -> EnvVar {
        EnvVar {
            name: name.into(),
            value: Some(value.into()),
            value_from: None,
        }
    }

    fn from(name: &str, source: EnvVarSource) -> EnvVar {
        EnvVar {
            name: name.into(),
            value: None,
            value_from: Some(source),
        }
    }

    fn secret_key(name: &str, key: &str, optional: bool) -> EnvVarSource {
        EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: name.into(),
                key: key.into(),
                optional: Some(optional),
            }),
            ..Default::default()
        }
    }

    fn ok<'a>(c: &'a ResolvedContainer, var: &str) -> &'a str {
        match c.get(var) {
            Ok(v) => v,
            Err(_) => panic!("{var} should resolve"),
        }
    }

    fn err(c: &ResolvedContainer, var: &str) -> String {
        match c.get(var) {
            Ok(_) => panic!("{var} should not resolve"),
            Err(VarError::Missing { hint }) => format!("missing{hint}"),
            Err(VarError::Unresolvable { reason }) => reason,
        }
    }

    #[test]
    fn env_overrides_env_from_and_expands_earlier_variables() {
        let container = ContainerEnv {
            name: "app".into(),
            env_from: vec![
                EnvFromSource {
                    config_map_ref: Some(ConfigMapEnvSource {
                        name: "settings".into(),
                        optional: None,
                    }),
                    prefix: Some("REDIS_".into()),
                    secret_ref: None,
                },
                EnvFromSource {
                    secret_ref: Some(SecretEnvSource {
                        name: "creds".into(),
                        optional: None,
                    }),
                    ..Default::default()
                },
            ],
            env: vec![
                value("ADDRESS", "$(REDIS_host):$(REDIS_port)"),
                value("REDIS_port", "6380"),
                from(
                    "HOST_ONLY",
                    EnvVarSource {
                        config_map_key_ref: Some(ConfigMapKeySelector {
                            name: "settings".into(),
                            key: "host".into(),
                            optional: None,
                        }),
                        ..Default::default()
                    },
                ),
                from("PASSWORD", secret_key("creds", "password", false)),
                value("LATER", "$(DEFINED_AFTER)"),
                value("DEFINED_AFTER", "x"),
            ],
        };
        let c = resolve_container(&container, "ns", &mut fake());
        assert_eq!(ok(&c, "ADDRESS"), "redis:6379");
        assert_eq!(ok(&c, "REDIS_port"), "6380");
        assert_eq!(ok(&c, "HOST_ONLY"), "redis");
        assert_eq!(ok(&c, "PASSWORD"), "s3cret");
        assert_eq!(ok(&c, "password"), "s3cret");
        // only variables defined before are expanded, as in Kubernetes
        assert_eq!(ok(&c, "LATER"), "$(DEFINED_AFTER)");
        assert_eq!(
            err(&c, "binary"),
            "key \"binary\" of Secret ns/creds is not UTF-8 text"
        );
    }

    #[test]
    fn optional_references_leave_the_variable_undefined_and_others_explain_themselves() {
        let container = ContainerEnv {
            name: "app".into(),
            env_from: vec![EnvFromSource {
                secret_ref: Some(SecretEnvSource {
                    name: "absent".into(),
                    optional: None,
                }),
                ..Default::default()
            }],
            env: vec![
                from("OPT_SECRET", secret_key("absent", "k", true)),
                from("OPT_KEY", secret_key("creds", "absent", true)),
                from("NO_SECRET", secret_key("absent", "k", false)),
                from("NO_KEY", secret_key("creds", "absent", false)),
                from(
                    "POD_NAME",
                    EnvVarSource {
                        field_ref: Some(ObjectFieldSelector {
                            field_path: "metadata.name".into(),
                            api_version: None,
                        }),
                        ..Default::default()
                    },
                ),
            ],
        };
        let c = resolve_container(&container, "ns", &mut fake());
        let hint = "missing (it may come from: envFrom Secret ns/absent not found)";
        assert_eq!(err(&c, "OPT_SECRET"), hint);
        assert_eq!(err(&c, "OPT_KEY"), hint);
        assert_eq!(err(&c, "NO_SECRET"), "Secret ns/absent not found");
        assert_eq!(
            err(&c, "NO_KEY"),
            "key \"absent\" not found in Secret ns/creds"
        );
        assert!(err(&c, "POD_NAME").contains("fieldRef"));
    }
}
