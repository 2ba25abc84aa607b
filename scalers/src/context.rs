//! What a scaler factory gets: everything KEDA's `ScalerConfig` carries, plus the shared client
//! pools and a clock.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::cluster::ClusterHandle;
use crate::error::{MetadataError, MetadataErrorKind, TriggerId};
use crate::metadata::MetadataParser;
use crate::metric::{MetricTargetType, metric_name_with_index, normalize_metric_name};
use crate::pool::ClientPools;
use crate::secret::Secret;

/// KEDA's default `KEDA_HTTP_DEFAULT_TIMEOUT` (3000 ms).
pub const DEFAULT_HTTP_TIMEOUT: Duration = Duration::from_millis(3000);

/// The kind of object a trigger belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ScalableKind {
    /// A `ScaledObject`.
    #[default]
    ScaledObject,
    /// A `ScaledJob`.
    ScaledJob,
}

impl ScalableKind {
    /// The Kubernetes kind name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ScaledObject => "ScaledObject",
            Self::ScaledJob => "ScaledJob",
        }
    }
}

/// The current time, injected so tests can use fixed instants.
#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> jiff::Timestamp + Send + Sync>);

impl Clock {
    /// The system clock.
    pub fn system() -> Self {
        Self(Arc::new(jiff::Timestamp::now))
    }

    /// Always `at`.
    pub fn fixed(at: jiff::Timestamp) -> Self {
        Self(Arc::new(move || at))
    }

    /// Whatever `now` returns, e.g. a value a test moves forward.
    pub fn from_fn(now: impl Fn() -> jiff::Timestamp + Send + Sync + 'static) -> Self {
        Self(Arc::new(now))
    }

    /// The current instant.
    pub fn now(&self) -> jiff::Timestamp {
        (self.0)()
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::system()
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Clock")
    }
}

/// The operator's own environment variables, injected so tests can set them without touching
/// the process: what KEDA's AWS SDK reads as its default credentials (`AWS_ACCESS_KEY_ID`, ...)
/// when a trigger uses the operator's identity or assumes a role with it.
#[derive(Clone)]
pub struct ProcessEnv(Arc<EnvLookup>);

/// Looks a variable up.
type EnvLookup = dyn Fn(&str) -> Option<String> + Send + Sync;

impl ProcessEnv {
    /// The process environment.
    pub fn system() -> Self {
        Self(Arc::new(|name| std::env::var(name).ok()))
    }

    /// Exactly these variables.
    pub fn from_pairs(pairs: &[(&str, &str)]) -> Self {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Self(Arc::new(move |name| map.get(name).cloned()))
    }

    /// The value of `name`, `None` when unset or empty.
    pub fn get(&self, name: &str) -> Option<String> {
        (self.0)(name).filter(|v| !v.trim().is_empty())
    }
}

impl Default for ProcessEnv {
    fn default() -> Self {
        Self::system()
    }
}

/// Whether a trigger may make the process act with its own cloud identity (today: the
/// operator's AWS credentials, directly with `identityOwner: operator` or to assume an
/// `awsRoleArn`). The people who write ScaledObjects and TriggerAuthentications are not the
/// people who installed keda-rs, so the default grants nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct OperatorIdentityGrant {
    /// The trigger's authentication parameters came from a ClusterTriggerAuthentication: the
    /// administrator's object, so a role it names may be assumed with the operator's
    /// credentials.
    pub cluster_auth: bool,
    /// The administrator let every namespace use the operator's own identity
    /// (`--allow-namespace-aws-operator-identity`): KEDA's behaviour.
    pub namespaces: bool,
}

impl fmt::Debug for ProcessEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ProcessEnv")
    }
}

/// Everything needed to build the scaler of one trigger (KEDA's `ScalerConfig`).
///
/// The operator fills it from the parsed object: `resolved_env` from the scale target's
/// container (for `<name>FromEnv`), `auth_params` from the trigger's TriggerAuthentication.
/// Factories read parameters through [`ScalerContext::params`].
///
/// Its `Debug` output shows the names of the resolved environment variables but not their
/// values: they can come from Secrets (`valueFrom.secretKeyRef`), and auth params are
/// [`Secret`]s already.
#[derive(Clone, Default)]
pub struct ScalerContext {
    /// Name of the ScaledObject or ScaledJob.
    pub scalable_name: String,
    /// Its namespace.
    pub scalable_namespace: String,
    /// Its kind.
    pub scalable_kind: ScalableKind,
    /// Position of the trigger in `spec.triggers`.
    pub trigger_index: usize,
    /// The trigger's `type`.
    pub trigger_type: String,
    /// The trigger's optional `name`.
    pub trigger_name: String,
    /// The trigger's `useCachedMetrics`.
    pub use_cached_metrics: bool,
    /// The trigger's `metadata`, as written.
    pub metadata: BTreeMap<String, String>,
    /// Environment of the scale target's container, resolved (values of `<name>FromEnv`).
    pub resolved_env: BTreeMap<String, String>,
    /// Parameters resolved from the trigger's (Cluster)TriggerAuthentication.
    pub auth_params: BTreeMap<String, Secret>,
    /// The trigger's `metricType`, as written; parse with
    /// [`ScalerContext::external_metric_type`].
    pub metric_type: Option<String>,
    /// The object uses `scalingModifiers`: the trigger feeds a formula, so its own target
    /// parameters are optional.
    pub as_metric_source: bool,
    /// Default timeout for HTTP-based scalers (`KEDA_HTTP_DEFAULT_TIMEOUT`).
    pub global_http_timeout: Duration,
    /// Shared client pools: one client per event source, however many objects use it.
    pub clients: ClientPools,
    /// The clock scalers must use instead of reading the system time.
    pub clock: Clock,
    /// The operator's shared view of pods and EndpointSlices (none by default: scalers that
    /// need it fail with a message saying so).
    pub cluster: ClusterHandle,
    /// The operator's own environment (the process environment by default).
    pub process_env: ProcessEnv,
    /// What the trigger may do with the operator's own identity (nothing by default).
    pub operator_identity: OperatorIdentityGrant,
    /// Where files named by trigger metadata may be read (`--trigger-file-root`).
    pub trigger_files: crate::files::TriggerFiles,
    /// Where the fixed hosts of vendor APIs (`api.datadoghq.com`, ...) are reached instead: set
    /// by whoever runs the process (a test's fake server), never by a namespace. Empty by
    /// default: the vendor's own hosts.
    pub vendor_endpoints: crate::http_client::VendorEndpoints,
}

impl std::fmt::Debug for ScalerContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScalerContext")
            .field("scalable_name", &self.scalable_name)
            .field("scalable_namespace", &self.scalable_namespace)
            .field("scalable_kind", &self.scalable_kind)
            .field("trigger_index", &self.trigger_index)
            .field("trigger_type", &self.trigger_type)
            .field("trigger_name", &self.trigger_name)
            .field("use_cached_metrics", &self.use_cached_metrics)
            .field("metadata", &self.metadata)
            .field(
                "resolved_env",
                &self.resolved_env.keys().collect::<Vec<_>>(),
            )
            .field("auth_params", &self.auth_params)
            .field("metric_type", &self.metric_type)
            .field("as_metric_source", &self.as_metric_source)
            .field("global_http_timeout", &self.global_http_timeout)
            .field("cluster", &self.cluster)
            .field("operator_identity", &self.operator_identity)
            .finish_non_exhaustive()
    }
}

impl ScalerContext {
    /// A context for trigger `index` of type `trigger_type` with empty metadata, fresh pools, the
    /// system clock and KEDA's default HTTP timeout. Fill the rest with struct update syntax.
    pub fn new(trigger_type: impl Into<String>, trigger_index: usize) -> Self {
        Self {
            trigger_type: trigger_type.into(),
            trigger_index,
            global_http_timeout: DEFAULT_HTTP_TIMEOUT,
            ..Self::default()
        }
    }

    /// A context from a trigger as written in a ScaledObject. Env and auth params are empty; the
    /// caller resolves them.
    pub fn from_trigger(trigger: &keda_api::ScaleTrigger, trigger_index: usize) -> Self {
        Self {
            trigger_name: trigger.name.clone(),
            use_cached_metrics: trigger.use_cached_metrics,
            metadata: trigger
                .metadata
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            metric_type: trigger.metric_type.clone(),
            ..Self::new(trigger.type_.clone(), trigger_index)
        }
    }

    /// `trigger <index> (<type>)`, for errors.
    pub fn trigger_id(&self) -> TriggerId {
        TriggerId {
            index: self.trigger_index,
            trigger_type: self.trigger_type.clone(),
        }
    }

    /// KEDA's `TriggerUniqueKey`: `<Kind>-<namespace>-<name>-<index>`.
    pub fn unique_key(&self) -> String {
        format!(
            "{}-{}-{}-{}",
            self.scalable_kind.as_str(),
            self.scalable_namespace,
            self.scalable_name,
            self.trigger_index
        )
    }

    /// Runs `f` with a typed parser over this trigger's metadata, env and auth params. The
    /// [`crate::error::TriggerId`] it needs lives only for the call.
    pub fn parse<T>(
        &self,
        f: impl FnOnce(&MetadataParser<'_>) -> Result<T, MetadataError>,
    ) -> Result<T, MetadataError> {
        let id = self.trigger_id();
        let parser =
            MetadataParser::new(&id, &self.metadata, &self.resolved_env, &self.auth_params);
        f(&parser)
    }

    /// `s<index>-<normalized name>`: the external metric name of this trigger.
    pub fn metric_name(&self, name: &str) -> String {
        metric_name_with_index(self.trigger_index, &normalize_metric_name(name))
    }

    /// The trigger's `metricType` for an external metric (absent = AverageValue).
    ///
    /// # Errors
    /// `Utilization` or an unknown type.
    pub fn external_metric_type(&self) -> Result<MetricTargetType, MetadataError> {
        MetricTargetType::parse_external(self.metric_type.as_deref()).map_err(|message| {
            MetadataError {
                trigger: self.trigger_id(),
                kind: MetadataErrorKind::Rule(message),
            }
        })
    }
}

/// A context for unit tests: trigger `index` of `trigger_type` with these metadata, resolved
/// environment and TriggerAuthentication parameters.
#[cfg(test)]
pub(crate) fn test_context(
    trigger_type: &str,
    index: usize,
    metadata: &[(&str, &str)],
    env: &[(&str, &str)],
    auth: &[(&str, &str)],
) -> ScalerContext {
    let map = |kv: &[(&str, &str)]| {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    ScalerContext {
        metadata: map(metadata),
        resolved_env: map(env),
        auth_params: auth
            .iter()
            .map(|(k, v)| (k.to_string(), Secret::new(*v)))
            .collect(),
        ..ScalerContext::new(trigger_type, index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_names_env_variables_but_hides_env_and_auth_values() {
        let ctx = ScalerContext {
            resolved_env: [("REDIS_PASSWORD".to_string(), "env-s3cret".to_string())].into(),
            auth_params: [("password".to_string(), Secret::new("auth-s3cret"))].into(),
            ..ScalerContext::new("redis", 0)
        };
        let debug = format!("{ctx:?}");
        assert!(debug.contains("REDIS_PASSWORD"), "{debug}");
        assert!(!debug.contains("env-s3cret"), "{debug}");
        assert!(!debug.contains("auth-s3cret"), "{debug}");
    }

    #[test]
    fn context_from_a_keda_trigger_keeps_its_fields() {
        let trigger = keda_api::ScaleTrigger {
            type_: "redis".into(),
            name: "queue".into(),
            metadata: [("listName".to_string(), "a/b".to_string())].into(),
            metric_type: Some("Value".into()),
            ..Default::default()
        };
        let ctx = ScalerContext {
            scalable_name: "worker".into(),
            scalable_namespace: "ns".into(),
            ..ScalerContext::from_trigger(&trigger, 2)
        };
        assert_eq!(ctx.metric_name("redis-a/b"), "s2-redis-a-b");
        assert_eq!(ctx.unique_key(), "ScaledObject-ns-worker-2");
        assert_eq!(ctx.external_metric_type().unwrap(), MetricTargetType::Value);
        assert_eq!(ctx.global_http_timeout, DEFAULT_HTTP_TIMEOUT);
        let list: String = ctx
            .parse(|p| p.get(&crate::metadata::Param::required("listName")))
            .unwrap();
        assert_eq!(list, "a/b");
    }

    #[test]
    fn fixed_clock_is_fixed() {
        let at: jiff::Timestamp = "2024-03-10T12:00:00Z".parse().unwrap();
        assert_eq!(Clock::fixed(at).now(), at);
    }
}
