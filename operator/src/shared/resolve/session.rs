//! One resolution of a scalable object's triggers.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Component, Path};
use std::sync::Arc;

use keda_api::trigger_authentication::{
    AuthTargetRef, OAuth2, POD_IDENTITY_NONE, TriggerAuthenticationSpec,
};
use keda_api::{AuthenticationKind, ScaleTrigger};
use keda_scalers::{Secret, TriggerId};

use super::env::{self, Lookup, Refs, ResolvedContainer, VarError};
use super::error::{AuthName, EnvProblem, EnvUse, RefProblem, ResolveError, VaultProblem};
use super::keys::{DepKey, ObjKey, PodSource, ScaleTargetPodSource};
use super::missing::{self, Missing};
use super::projection::{self, ConfigMapData, ContainerEnv, SecretData};
use super::target;
use super::{Inner, ResolvedTrigger};

/// The suffix of metadata keys that name a container variable.
const FROM_ENV_SUFFIX: &str = "FromEnv";

/// Resolves the triggers of one ScaledObject or ScaledJob; see
/// [`super::Resolver::session`]. Reads the target's pod template at most once.
///
/// Dropping it records everything it read as the object's dependencies.
pub struct ResolveSession {
    inner: Arc<Inner>,
    source: ScaleTargetPodSource,
    start: u64,
    deps: HashSet<DepKey>,
    /// When the object must be rebuilt because a bound service account token expires.
    refresh_at: Option<tokio::time::Instant>,
    ready: bool,
    containers: Option<Result<Arc<Vec<ContainerEnv>>, EnvProblem>>,
    resolved: HashMap<String, Arc<ResolvedContainer>>,
    /// What the session's triggers named but found missing, recorded on drop.
    missing: Vec<Missing>,
}

impl ResolveSession {
    pub(super) fn new(inner: Arc<Inner>, source: ScaleTargetPodSource) -> Self {
        let start = inner.notifier.begin();
        Self {
            inner,
            source,
            start,
            deps: HashSet::new(),
            refresh_at: None,
            ready: false,
            containers: None,
            resolved: HashMap::new(),
            missing: Vec::new(),
        }
    }

    /// Resolves trigger `index`: the variables named by its `<name>FromEnv` metadata and the
    /// parameters of its `authenticationRef`. Waits (bounded) for the caches' first list on
    /// the first call.
    ///
    /// A (Cluster)TriggerAuthentication, Secret, ConfigMap or key that does not exist is not an
    /// error: it is resolved as KEDA resolves it and listed in [`ResolvedTrigger::missing`]
    /// (see [`Missing`]).
    ///
    /// # Errors
    /// Any other [`ResolveError`]; the message names the trigger and what to fix, never a
    /// value.
    pub async fn resolve(
        &mut self,
        trigger: &ScaleTrigger,
        index: usize,
    ) -> Result<ResolvedTrigger, ResolveError> {
        if !self.ready {
            self.inner.wait_ready().await?;
            self.ready = true;
        }
        let id = TriggerId {
            index,
            trigger_type: trigger.type_.clone(),
        };
        let first_missing = self.missing.len();
        let mut resolved = ResolvedTrigger {
            resolved_env: self.env_params(&id, &trigger.metadata).await?,
            ..ResolvedTrigger::default()
        };
        resolved.operator_identity.namespaces = self
            .inner
            .config
            .identity
            .allow_namespace_aws_operator_identity;
        if let Some(auth_ref) = &trigger.authentication_ref
            && !auth_ref.name.is_empty()
        {
            let kind = auth_ref
                .auth_kind()
                .map_err(|kind| ResolveError::UnknownAuthKind {
                    trigger: id.clone(),
                    kind,
                })?;
            // KEDA's resolveAuthRef: a TriggerAuthentication it cannot get is logged and the
            // trigger goes on with its own metadata.
            let found = self.auth_spec(&id, kind, &auth_ref.name);
            if let Some((auth, spec, refs_namespace)) = self.tolerate(found)? {
                if let Some(identity) = &spec.pod_identity {
                    resolved.pod_identity = identity.clone();
                }
                resolved.auth_params = self
                    .auth_params(&id, &auth, kind, &spec, &refs_namespace)
                    .await?;
                resolved.operator_identity.cluster_auth =
                    kind == AuthenticationKind::ClusterTriggerAuthentication;
            }
        }
        resolved.missing = self.missing[first_missing..].to_vec();
        Ok(resolved)
    }

    /// `result`, or `None` after recording the missing object when its error is one KEDA
    /// resolves as absent ([`missing::tolerated`]).
    #[allow(clippy::result_large_err)] // see `auth_spec`
    fn tolerate<T>(&mut self, result: Result<T, ResolveError>) -> Result<Option<T>, ResolveError> {
        tolerate_into(&mut self.missing, result)
    }
}

impl Drop for ResolveSession {
    fn drop(&mut self) {
        let deps = std::mem::take(&mut self.deps);
        self.inner
            .notifier
            .end(&self.source.scalable, self.start, deps, self.refresh_at);
        self.inner
            .record_missing(&self.source.scalable, std::mem::take(&mut self.missing));
    }
}

/// `result`, or `None` after pushing the missing object onto `missing` when its error is one
/// KEDA resolves as absent ([`missing::tolerated`]). Logged as KEDA logs it.
#[allow(clippy::result_large_err)] // see `auth_spec`
fn tolerate_into<T>(
    missing: &mut Vec<Missing>,
    result: Result<T, ResolveError>,
) -> Result<Option<T>, ResolveError> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(error) => match missing::tolerated(&error) {
            Some(found) => {
                tracing::warn!(missing = %found.related, "{}", found.message);
                missing.push(found);
                Ok(None)
            }
            None => Err(error),
        },
    }
}

mod auth;
mod container;
