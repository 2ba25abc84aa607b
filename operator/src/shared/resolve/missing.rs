//! What a trigger's authentication names but does not exist, resolved as KEDA resolves it.
//!
//! KEDA's `resolveAuthRef` (`pkg/scaling/resolver/scale_resolvers.go`) logs a missing
//! (Cluster)TriggerAuthentication and goes on with the trigger's own metadata (no auth params);
//! `resolveAuthSecret` and `resolveAuthConfigMap` log a missing Secret or ConfigMap and give the
//! parameter an empty value; a missing key is an empty value without a log line; so are an
//! `env` entry whose container environment cannot be resolved or lacks the variable, and a
//! `boundServiceAccountToken` whose ServiceAccount cannot be had. The scaler's own parse then
//! decides: a redis trigger without a password builds, a trigger whose required parameter is
//! now empty fails with its own error naming the parameter.
//!
//! keda-rs does the same, and says so: each [`Missing`] becomes a Warning Event
//! [`crate::shared::events::AUTH_REF_MISSING`] on the ScaledObject or ScaledJob, naming what is missing
//! (kind, namespace, name, key; never a value), each time the object's scalers are built.
//!
//! "Missing" means: the watch cache, after its first complete list, does not hold the object
//! (or the object has no such key). A cache that has not listed yet (the API server unreachable,
//! the operator's RBAC refused) is [`super::ResolveError::CachesNotReady`] and retried, never
//! read as empty; a later watch failure keeps the last listed state. For a ServiceAccount only
//! the API server's 404 counts; a refused or failed TokenRequest stays an error. References
//! keda-rs refuses (a `secretTargetRef` namespace outside `WATCH_NAMESPACE` or under
//! `KEDA_RESTRICT_SECRET_ACCESS`, the tenant identity rules, `filePath` outside its root) stay
//! errors; a container variable an `env` entry cannot read for those reasons is empty, as KEDA
//! skips it: nothing is read either way.

use std::fmt;

use k8s_openapi::api::core::v1::ObjectReference;

use super::error::{EnvProblem, EnvUse, RefProblem, ResolveError, TokenProblem};

/// The object a [`Missing`] is about, for the Event's `related` reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MissingRef {
    /// `keda.sh/v1alpha1`, `v1`, or the scale target's.
    pub api_version: String,
    /// `TriggerAuthentication`, `ClusterTriggerAuthentication`, `Secret`, `ConfigMap`, or the
    /// kind holding the pod template (a TriggerAuthentication `env` entry's variable).
    pub kind: String,
    /// Its namespace; empty for a ClusterTriggerAuthentication.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// What is missing inside it: a Secret's or ConfigMap's key (`data.<key>`), a container's
    /// variable (`spec.template.spec.containers{<container>}.env{<variable>}`).
    pub field_path: Option<String>,
}

impl MissingRef {
    /// The reference an Event's `related` field carries. What is missing inside the object is
    /// its `fieldPath`, so that two missing keys of one Secret are two Events, not one repeated.
    pub fn object_reference(&self) -> ObjectReference {
        ObjectReference {
            api_version: Some(self.api_version.clone()),
            kind: Some(self.kind.clone()),
            namespace: (!self.namespace.is_empty()).then(|| self.namespace.clone()),
            name: Some(self.name.clone()),
            field_path: self.field_path.clone(),
            ..ObjectReference::default()
        }
    }

    /// Whether it is a (Cluster)TriggerAuthentication.
    pub fn is_authentication(&self) -> bool {
        self.kind.ends_with("TriggerAuthentication")
    }
}

impl fmt::Display for MissingRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kind)?;
        if self.namespace.is_empty() {
            write!(f, " {}", self.name)?;
        } else {
            write!(f, " {}/{}", self.namespace, self.name)?;
        }
        if let Some(path) = &self.field_path {
            write!(f, " {path}")?;
        }
        Ok(())
    }
}

/// Something a trigger's authentication names that does not exist: the trigger was resolved
/// without it, as in KEDA.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Missing {
    /// What is missing.
    pub related: MissingRef,
    /// The Event's note: the trigger, the reference and what keda-rs did instead. Never a
    /// value.
    pub message: String,
}

/// The [`Missing`] that `error` describes, when it is one KEDA resolves as empty: a
/// (Cluster)TriggerAuthentication, Secret or ConfigMap that does not exist, a key an existing
/// Secret or ConfigMap does not have, or a `boundServiceAccountToken` ServiceAccount the API
/// server answered 404 for. `None` for every other error (a refused or failed token request
/// included), which stays an error.
pub(crate) fn tolerated(error: &ResolveError) -> Option<Missing> {
    let (related, consequence) = match error {
        ResolveError::AuthNotFound { auth, .. } => (
            MissingRef {
                api_version: "keda.sh/v1alpha1".to_string(),
                kind: auth.kind.to_string(),
                namespace: auth.namespace.clone(),
                name: auth.name.clone(),
                field_path: None,
            },
            "the trigger is built with its metadata only, as KEDA does".to_string(),
        ),
        ResolveError::AuthRef {
            parameter, problem, ..
        } => {
            let (kind, namespace, name, key) = match problem {
                RefProblem::NotFound {
                    kind,
                    namespace,
                    name,
                } => (*kind, namespace, name, None),
                RefProblem::KeyNotFound {
                    kind,
                    namespace,
                    name,
                    key,
                } => (*kind, namespace, name, Some(format!("data.{key}"))),
                _ => return None,
            };
            (
                MissingRef {
                    api_version: "v1".to_string(),
                    kind: kind.to_string(),
                    namespace: namespace.clone(),
                    name: name.clone(),
                    field_path: key,
                },
                format!("parameter \"{parameter}\" is empty, as in KEDA"),
            )
        }
        ResolveError::BoundToken {
            parameter,
            problem: TokenProblem::NotFound { account },
            ..
        } => {
            let (namespace, name) = account.split_once('/').unwrap_or(("", account));
            (
                MissingRef {
                    api_version: "v1".to_string(),
                    kind: "ServiceAccount".to_string(),
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                    field_path: None,
                },
                format!("parameter \"{parameter}\" is empty, as in KEDA"),
            )
        }
        _ => return None,
    };
    Some(Missing {
        related,
        message: format!("{error}; {consequence}"),
    })
}

/// The [`Missing`] that the failure of a TriggerAuthentication `env` entry describes, when KEDA
/// resolves it as empty: `resolveAuthRef` sets the parameter to `""` when the container's
/// environment cannot be resolved (`ResolveContainerEnv` fails: no such container, a reference
/// it cannot read) and when the variable is not defined. `target` is the object holding the
/// pod template (the scale target, or the ScaledJob), `template` the path of the pod template
/// in it. A missing or unwatchable scale target stays an error: KEDA fails the whole build
/// before resolving any trigger then.
pub(crate) fn tolerated_env(
    error: &ResolveError,
    mut target: MissingRef,
    template: &str,
    variable: &str,
) -> Option<Missing> {
    let ResolveError::Env {
        used_by: EnvUse::Auth { parameter, .. },
        problem,
        ..
    } = error
    else {
        return None;
    };
    let container = match problem {
        EnvProblem::Missing { container, .. }
        | EnvProblem::Unresolvable { container, .. }
        | EnvProblem::ContainerNotFound { container, .. } => container.as_str(),
        EnvProblem::NoContainers { .. } => "",
        EnvProblem::TargetNotFound { .. } | EnvProblem::TargetType { .. } => return None,
    };
    target.field_path = Some(format!(
        "{template}.spec.containers{{{container}}}.env{{{variable}}}"
    ));
    Some(Missing {
        related: target,
        message: format!("{error}; parameter \"{parameter}\" is empty, as in KEDA"),
    })
}

#[cfg(test)]
mod tests {
    use keda_scalers::TriggerId;

    use super::*;
    use crate::shared::resolve::AuthName;

    fn id() -> TriggerId {
        TriggerId {
            index: 1,
            trigger_type: "redis".into(),
        }
    }

    fn ta() -> AuthName {
        AuthName {
            kind: "TriggerAuthentication",
            namespace: "team".into(),
            name: "auth".into(),
        }
    }

    #[test]
    fn only_absent_objects_and_keys_are_tolerated() {
        let missing = tolerated(&ResolveError::AuthNotFound {
            trigger: id(),
            auth: AuthName {
                kind: "ClusterTriggerAuthentication",
                namespace: String::new(),
                name: "shared".into(),
            },
        })
        .expect("a missing ClusterTriggerAuthentication");
        assert_eq!(
            missing.message,
            "trigger 1 (redis): authenticationRef: ClusterTriggerAuthentication shared not found; \
             the trigger is built with its metadata only, as KEDA does"
        );
        let reference = missing.related.object_reference();
        assert_eq!(reference.namespace, None);
        assert_eq!(reference.api_version.as_deref(), Some("keda.sh/v1alpha1"));
        assert!(missing.related.is_authentication());

        let key = tolerated(&ResolveError::AuthRef {
            trigger: id(),
            auth: ta(),
            parameter: "password".into(),
            problem: RefProblem::KeyNotFound {
                kind: "Secret",
                namespace: "team".into(),
                name: "creds".into(),
                key: "pasword".into(),
            },
        })
        .expect("a missing key");
        assert_eq!(
            key.message,
            "trigger 1 (redis): TriggerAuthentication team/auth: parameter \"password\": key \
             \"pasword\" not found in Secret team/creds; parameter \"password\" is empty, as in KEDA"
        );
        assert_eq!(key.related.to_string(), "Secret team/creds data.pasword");
        assert_eq!(
            key.related.object_reference().field_path.as_deref(),
            Some("data.pasword")
        );

        // What keda-rs refuses stays refused.
        for problem in [
            RefProblem::NamespaceNotWatched {
                namespace: "elsewhere".into(),
            },
            RefProblem::SecretAccessRestricted {
                namespace: "team".into(),
                name: "creds".into(),
                allowed: "keda".into(),
            },
            RefProblem::Incomplete {
                kind: "secretTargetRef",
            },
        ] {
            let error = ResolveError::AuthRef {
                trigger: id(),
                auth: ta(),
                parameter: "password".into(),
                problem,
            };
            assert_eq!(tolerated(&error), None, "{error}");
        }
        let token = |problem| ResolveError::BoundToken {
            trigger: id(),
            auth: ta(),
            parameter: "bearerToken".into(),
            problem,
        };
        let account = tolerated(&token(TokenProblem::NotFound {
            account: "team/reader".into(),
        }))
        .expect("a ServiceAccount the API server does not have");
        assert_eq!(account.related.to_string(), "ServiceAccount team/reader");
        for problem in [
            TokenProblem::Forbidden {
                account: "team/reader".into(),
            },
            TokenProblem::Timeout {
                account: "team/reader".into(),
                waited: std::time::Duration::from_secs(1),
            },
        ] {
            let error = token(problem);
            assert_eq!(tolerated(&error), None, "{error}");
        }
        let caches = ResolveError::CachesNotReady {
            caches: "secrets".into(),
            waited: std::time::Duration::from_secs(1),
        };
        assert_eq!(tolerated(&caches), None);
    }
}
