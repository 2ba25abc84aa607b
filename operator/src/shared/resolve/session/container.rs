//! The values of a trigger's `<name>FromEnv` metadata: the scale target's containers, read once
//! per session, and their variables.

use super::auth::SessionRefs;
use super::*;

impl ResolveSession {
    /// `metadata["<p>FromEnv"] = VAR` for every `<p>`: the values of those variables.
    pub(super) async fn env_params(
        &mut self,
        id: &TriggerId,
        metadata: &keda_api::CompactMap<String, String>,
    ) -> Result<BTreeMap<String, String>, ResolveError> {
        let mut env = BTreeMap::new();
        for (key, variable) in metadata {
            let variable = variable.trim();
            if key.len() <= FROM_ENV_SUFFIX.len()
                || !key.ends_with(FROM_ENV_SUFFIX)
                || variable.is_empty()
            {
                continue;
            }
            let used_by = EnvUse::Metadata { key: key.clone() };
            let value = self.variable(id, &used_by, None, variable).await?;
            env.insert(variable.to_string(), value);
        }
        Ok(env)
    }

    /// The value of `variable` in `container` (default: `envSourceContainerName` or the first).
    pub(super) async fn variable(
        &mut self,
        id: &TriggerId,
        used_by: &EnvUse,
        container: Option<&str>,
        variable: &str,
    ) -> Result<String, ResolveError> {
        let env_error = |problem| ResolveError::Env {
            trigger: id.clone(),
            used_by: used_by.clone(),
            problem,
        };
        let resolved = self.container(container).await.map_err(env_error)?;
        match resolved.get(variable) {
            Ok(value) => Ok(value.to_string()),
            Err(VarError::Missing { hint }) => Err(env_error(EnvProblem::Missing {
                variable: variable.to_string(),
                container: resolved.name.clone(),
                target: self.target_name(),
                hint,
            })),
            Err(VarError::Unresolvable { reason }) => Err(env_error(EnvProblem::Unresolvable {
                variable: variable.to_string(),
                container: resolved.name.clone(),
                target: self.target_name(),
                reason,
            })),
        }
    }

    pub(super) async fn container(
        &mut self,
        name: Option<&str>,
    ) -> Result<Arc<ResolvedContainer>, EnvProblem> {
        let containers = self.containers().await?;
        let name = name
            .filter(|n| !n.is_empty())
            .map(str::to_string)
            .or_else(|| self.source.env_source_container_name.clone());
        let container = match &name {
            Some(name) => containers.iter().find(|c| &c.name == name),
            None => containers.first(),
        };
        let Some(container) = container else {
            return Err(match name {
                Some(container) if !containers.is_empty() => EnvProblem::ContainerNotFound {
                    container,
                    target: self.target_name(),
                    available: containers
                        .iter()
                        .map(|c| c.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                },
                _ => EnvProblem::NoContainers {
                    target: self.target_name(),
                },
            });
        };
        if let Some(resolved) = self.resolved.get(&container.name) {
            return Ok(Arc::clone(resolved));
        }
        let namespace = self.source.scalable.namespace.clone();
        let mut refs = SessionRefs {
            inner: &self.inner,
            deps: &mut self.deps,
        };
        let resolved = Arc::new(env::resolve_container(container, &namespace, &mut refs));
        self.resolved
            .insert(container.name.clone(), Arc::clone(&resolved));
        Ok(resolved)
    }

    /// The containers of the pod template, read once per session.
    pub(super) async fn containers(&mut self) -> Result<Arc<Vec<ContainerEnv>>, EnvProblem> {
        if let Some(containers) = &self.containers {
            return containers.clone();
        }
        let containers = self.read_containers().await.map(Arc::new);
        self.containers = Some(containers.clone());
        containers
    }

    pub(super) async fn read_containers(&mut self) -> Result<Vec<ContainerEnv>, EnvProblem> {
        let (api_version, kind, name) = match &self.source.pod {
            PodSource::Template(template) => return Ok(projection::pod_template(template)),
            PodSource::Target {
                api_version,
                kind,
                name,
            } => (api_version.clone(), kind.clone(), name.clone()),
        };
        let target = self.target_name();
        let type_error = |reason: String| EnvProblem::TargetType {
            target: target.clone(),
            reason,
        };
        let namespace = self.source.scalable.namespace.clone();
        if !self.inner.config.watch_scope.covers(&namespace) {
            return Err(type_error(format!(
                "namespace \"{namespace}\" is not watched by keda-rs (WATCH_NAMESPACE)"
            )));
        }
        let gvk = keda_api::gvkr::parse_gvk(&api_version, &kind)
            .map_err(|e| type_error(e.to_string()))?;
        let gvk = kube::core::GroupVersionKind::gvk(&gvk.group, &gvk.version, &gvk.kind);
        let kind = self.inner.targets.kind(&gvk).await.map_err(type_error)?;
        let key = ObjKey::new(&namespace, &name);
        self.deps
            .insert(DepKey::Target(kind.id.clone(), key.clone()));
        let timeout = self.inner.config.cache_sync_timeout;
        if !kind.cache.wait_ready(timeout).await {
            return Err(type_error(format!(
                "the cache of {} was not ready after {timeout:?}",
                target::api_version(&gvk)
            )));
        }
        match kind.cache.get(&key) {
            None => Err(EnvProblem::TargetNotFound { target }),
            Some(template) => match template.as_ref() {
                Ok(containers) => Ok(containers.clone()),
                Err(reason) => Err(type_error(reason.clone())),
            },
        }
    }

    /// The object holding the pod template (the scale target, or the ScaledJob) and the path
    /// of the template in it, for a [`Missing`] variable.
    pub(super) fn template_holder(&self) -> (missing::MissingRef, &'static str) {
        let scalable = &self.source.scalable;
        let holder = |api_version: &str, kind: &str, name: &str| missing::MissingRef {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
            namespace: scalable.namespace.clone(),
            name: name.to_string(),
            field_path: None,
        };
        match &self.source.pod {
            PodSource::Target {
                api_version,
                kind,
                name,
            } => {
                let api_version = if api_version.is_empty() {
                    "apps/v1"
                } else {
                    api_version
                };
                let kind = if kind.is_empty() {
                    keda_api::gvkr::DEFAULT_KIND
                } else {
                    kind
                };
                (holder(api_version, kind, name), "spec.template")
            }
            PodSource::Template(_) => (
                holder("keda.sh/v1alpha1", scalable.kind.as_str(), &scalable.name),
                "spec.jobTargetRef.template",
            ),
        }
    }

    /// `Deployment team/worker`, or `ScaledJob team/x jobTargetRef.template`.
    pub(super) fn target_name(&self) -> String {
        let scalable = &self.source.scalable;
        match &self.source.pod {
            PodSource::Target { kind, name, .. } => {
                let kind = if kind.is_empty() {
                    keda_api::gvkr::DEFAULT_KIND
                } else {
                    kind
                };
                format!("{kind} {}/{name}", scalable.namespace)
            }
            PodSource::Template(_) => format!("{scalable} jobTargetRef.template"),
        }
    }
}
