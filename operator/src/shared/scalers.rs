//! Building the scalers of a ScaledObject: the one place that turns triggers into
//! [`ScalerContext`]s, with `xxxFromEnv` values and TriggerAuthentication parameters filled in
//! by the [`Resolver`].

use std::sync::Arc;
use std::time::Duration;

use std::borrow::Cow;

use k8s_openapi::api::autoscaling::v2::{ExternalMetricSource, MetricSpec};
use keda_api::{ScaleTrigger, ScaledObject};
use keda_scalers::cluster::ClusterHandle;
use keda_scalers::context::DEFAULT_HTTP_TIMEOUT;
use keda_scalers::pool::ClientPools;
use keda_scalers::{BuiltScaler, Clock, Registry, ScalerContext};

use crate::shared::error::Error;
use crate::shared::isolation::{Panic, TriggerRef, catch_panic, catch_panic_sync};
use crate::shared::resolve::{ResolveSession, Resolver, ScaleTargetPodSource};
use crate::shared::unexpected_params::{UnexpectedParams, Unmatched};
use keda_decide::formula::{CompiledModifiers, ScalingModifiersSpec, compile_scaling_modifiers};

/// What building a scaler needs besides the trigger: the registry, the shared client pools,
/// the clock, KEDA's HTTP timeout and the resolver of `xxxFromEnv` values and
/// TriggerAuthentication parameters.
#[derive(Clone, Debug)]
pub struct ScalerEnv {
    /// Trigger type -> factory.
    pub registry: Arc<Registry>,
    /// Shared clients: one per event source, however many objects use it.
    pub pools: ClientPools,
    /// The clock scalers read.
    pub clock: Clock,
    /// `KEDA_HTTP_DEFAULT_TIMEOUT`.
    pub http_timeout: Duration,
    /// Resolves `authenticationRef` and `xxxFromEnv`. The ScaledObject controller sets its
    /// own; without one, triggers using either are refused with [`Error::Unresolvable`].
    pub resolver: Option<Resolver>,
    /// The shared pod and EndpointSlice view ([`crate::shared::cluster_view::KubeClusterView`]). The
    /// controllers create one over their client when none is given; the binary gives one to
    /// both, so the whole process has one pod watch.
    pub cluster: ClusterHandle,
    /// Where files named by trigger metadata may be read (`--trigger-file-root`).
    pub trigger_files: keda_scalers::files::TriggerFiles,
    /// KEDA's `KEDA_CHECK_UNEXPECTED_SCALERS_PARAMS` (off by default): what each build finds,
    /// for the loops to publish ([`crate::shared::unexpected_params`]).
    pub unexpected_params: UnexpectedParams,
}

impl Default for ScalerEnv {
    fn default() -> Self {
        ScalerEnv {
            registry: Arc::new(Registry::builtin()),
            pools: ClientPools::new(),
            clock: Clock::system(),
            http_timeout: DEFAULT_HTTP_TIMEOUT,
            resolver: None,
            cluster: ClusterHandle::default(),
            trigger_files: keda_scalers::files::TriggerFiles::default(),
            unexpected_params: UnexpectedParams::default(),
        }
    }
}

/// The scaler of one trigger, with what the loop and the HPA need to know about it.
#[derive(Debug)]
pub struct TriggerScaler {
    /// Position in `spec.triggers`.
    pub index: usize,
    /// `triggers[].name` (may be empty).
    pub name: String,
    /// `triggers[].type`.
    pub trigger_type: String,
    /// `triggers[].useCachedMetrics`.
    pub use_cached_metrics: bool,
    /// The scaler's HPA metric specs, read once at build.
    pub metric_specs: TriggerMetrics,
    /// The scaler.
    pub scaler: BuiltScaler,
}

impl TriggerScaler {
    /// The names of this trigger's External metrics (`s<i>-...`).
    pub fn external_metric_names(&self) -> impl Iterator<Item = &str> {
        self.metric_specs
            .externals()
            .map(|e| e.metric.name.as_str())
    }

    /// Whether this is a cpu/memory trigger (Resource metrics only, no value to poll).
    pub fn is_resource(&self) -> bool {
        keda_api::validation::RESOURCE_TRIGGER_TYPES.contains(&self.trigger_type.as_str())
    }
}

/// The HPA metric specs of one trigger, kept compact: a `MetricSpec` holds every kind of
/// metric source inline (about 800 bytes, one allocation per trigger), where an External one,
/// which almost every scaler declares, needs a sixth of it. At 100,000 objects that was
/// about 70 MB for the same facts. The specs come back whole, in their order, through
/// [`specs`](Self::specs).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TriggerMetrics(Box<[KeptSpec]>);

#[derive(Clone, Debug, PartialEq)]
enum KeptSpec {
    /// `type: External` with only `external` set: the spec is this source.
    External(ExternalMetricSource),
    /// Anything else (Resource, ContainerResource, ...), as the scaler declared it.
    Other(Box<MetricSpec>),
}

const EXTERNAL: &str = "External";

impl From<Vec<MetricSpec>> for TriggerMetrics {
    fn from(specs: Vec<MetricSpec>) -> Self {
        TriggerMetrics(
            specs
                .into_iter()
                .map(|spec| match spec {
                    MetricSpec {
                        type_,
                        external: Some(external),
                        container_resource: None,
                        object: None,
                        pods: None,
                        resource: None,
                    } if type_ == EXTERNAL => KeptSpec::External(external),
                    other => KeptSpec::Other(Box::new(other)),
                })
                .collect(),
        )
    }
}

impl TriggerMetrics {
    /// The External metric sources, in order.
    pub fn externals(&self) -> impl Iterator<Item = &ExternalMetricSource> {
        self.0.iter().filter_map(|spec| match spec {
            KeptSpec::External(external) => Some(external),
            KeptSpec::Other(spec) => spec.external.as_ref(),
        })
    }

    /// The specs that are not only an External source (Resource, ContainerResource, ...), in
    /// order.
    pub fn others(&self) -> impl Iterator<Item = &MetricSpec> {
        self.0.iter().filter_map(|spec| match spec {
            KeptSpec::External(_) => None,
            KeptSpec::Other(spec) => Some(&**spec),
        })
    }

    /// Every spec as the scaler declared it, in order.
    pub fn specs(&self) -> impl Iterator<Item = Cow<'_, MetricSpec>> {
        self.0.iter().map(|spec| match spec {
            KeptSpec::External(external) => Cow::Owned(MetricSpec {
                type_: EXTERNAL.to_string(),
                external: Some(external.clone()),
                ..MetricSpec::default()
            }),
            KeptSpec::Other(spec) => Cow::Borrowed(&**spec),
        })
    }
}

/// Every scaler of an object, and its compiled `scalingModifiers`.
#[derive(Debug)]
pub struct ObjectScalers {
    /// One per trigger, in trigger order.
    pub triggers: Vec<TriggerScaler>,
    /// The compiled formula, when the object uses `scalingModifiers`.
    pub modifiers: Option<CompiledModifiers>,
    /// The budget of answer bytes of the object's namespace, which every read of these scalers
    /// counts against ([`keda_scalers::answers`]); held here, so it is looked up once per build.
    pub answers: keda_scalers::answers::Budget,
}

impl ObjectScalers {
    /// Closes every scaler, releasing shared clients. A scaler whose `close` panics is logged
    /// and the others are closed all the same ([`crate::shared::isolation`]).
    pub async fn close(&self) {
        for t in &self.triggers {
            close_scaler(t.index, &t.trigger_type, &t.scaler).await;
        }
    }
}

/// Closes one scaler; a panic in its `close` is logged, not passed on: the scaler is being
/// dropped either way, and the caller (a loop stopping, a build failing) must finish.
async fn close_scaler(index: usize, trigger_type: &str, scaler: &BuiltScaler) {
    if let Err(panic) = catch_panic(scaler.scaler().close()).await {
        tracing::error!(
            trigger = index,
            trigger_type,
            %panic,
            "caught a panic while closing a scaler"
        );
    }
}

/// The context of trigger `index` of the scalable `source` names: its metadata, plus what
/// `session` resolves (the `xxxFromEnv` variables of the pod template's container and the
/// TriggerAuthentication's parameters).
///
/// # Errors
/// [`Error::Resolve`] when the resolver cannot resolve the trigger (the message names what to
/// fix); [`Error::Unresolvable`] when the trigger needs resolution and there is no `session`.
async fn context_for(
    source: &ScaleTargetPodSource,
    as_metric_source: bool,
    (trigger, index): (&ScaleTrigger, usize),
    env: &ScalerEnv,
    session: Option<&mut ResolveSession>,
) -> Result<ScalerContext, Error> {
    let mut ctx = ScalerContext {
        scalable_name: source.scalable.name.clone(),
        scalable_namespace: source.scalable.namespace.clone(),
        scalable_kind: source.scalable.kind,
        as_metric_source,
        global_http_timeout: env.http_timeout,
        clients: env.pools.clone(),
        clock: env.clock.clone(),
        cluster: env.cluster.clone(),
        trigger_files: env.trigger_files.clone(),
        ..ScalerContext::from_trigger(trigger, index)
    };
    match session {
        Some(session) => session.resolve(trigger, index).await?.apply(&mut ctx),
        None => check_resolvable(trigger, index)?,
    }
    Ok(ctx)
}

/// Whether trigger `index` can be built from its metadata alone, i.e. without a resolver.
///
/// # Errors
/// [`Error::Unresolvable`] when the trigger needs an `authenticationRef` or `xxxFromEnv`
/// value: building it without them would silently run without credentials.
pub fn check_resolvable(trigger: &ScaleTrigger, index: usize) -> Result<(), Error> {
    let unresolvable = |what: String| Error::Unresolvable {
        index,
        trigger_type: trigger.type_.clone(),
        what,
    };
    if let Some(auth) = &trigger.authentication_ref {
        return Err(unresolvable(format!("authenticationRef {:?}", auth.name)));
    }
    if let Some((key, _)) = trigger
        .metadata
        .iter()
        .find(|(k, v)| k.ends_with("FromEnv") && !v.trim().is_empty())
    {
        return Err(unresolvable(format!("metadata.{key}")));
    }
    Ok(())
}

/// Builds every scaler of `so` and compiles its `scalingModifiers`. On any error the scalers
/// built so far are closed (as KEDA does) and the error names the trigger and parameter.
///
/// # Errors
/// See [`context_for`]; a scaler that does not build; invalid `scalingModifiers`.
pub async fn scalers_for(so: &ScaledObject, env: &ScalerEnv) -> Result<ObjectScalers, Error> {
    let modifiers = match so.spec.scaling_modifiers() {
        None => None,
        Some(m) => Some(compile_scaling_modifiers(
            ScalingModifiersSpec {
                formula: m.formula.as_deref().unwrap_or_default(),
                target: m.target.as_deref().unwrap_or_default(),
                activation_target: m.activation_target.as_deref().unwrap_or_default(),
                metric_type: m.metric_type.as_deref().unwrap_or_default(),
            },
            &so.spec.triggers,
        )?),
    };
    let source = ScaleTargetPodSource::for_scaled_object(so);
    let triggers = build_triggers(
        &so.spec.triggers,
        &source,
        so.spec.is_using_modifiers(),
        env,
    );
    Ok(ObjectScalers {
        triggers: triggers.await?,
        modifiers,
        answers: env
            .pools
            .answer_budgets()
            .budget(so.metadata.namespace.as_deref().unwrap_or_default()),
    })
}

/// Builds the scalers of `triggers`, which belong to the ScaledObject or ScaledJob `source`
/// names, resolving them through one resolver session (the pod template is read once, and
/// dropping the session records what the triggers read, so a change to any of it signals a
/// rebuild). On any error the scalers built so far are closed (as KEDA does) and the error
/// names the trigger and parameter.
///
/// # Errors
/// See [`context_for`]; a scaler that does not build.
pub(crate) async fn build_triggers(
    triggers: &[ScaleTrigger],
    source: &ScaleTargetPodSource,
    as_metric_source: bool,
    env: &ScalerEnv,
) -> Result<Vec<TriggerScaler>, Error> {
    let mut session = env.resolver.as_ref().map(|r| r.session(source.clone()));
    let mut unmatched: Vec<Unmatched> = Vec::new();
    let result = build_each(
        triggers,
        source,
        as_metric_source,
        env,
        &mut session,
        &mut unmatched,
    )
    .await;
    env.unexpected_params.record(&source.scalable, unmatched);
    result
}

/// [`build_triggers`], adding to `unmatched` what each trigger whose metadata parsed sets that
/// its type does not read, when [`ScalerEnv::unexpected_params`] checks.
async fn build_each(
    triggers: &[ScaleTrigger],
    source: &ScaleTargetPodSource,
    as_metric_source: bool,
    env: &ScalerEnv,
    session: &mut Option<ResolveSession>,
    unmatched: &mut Vec<Unmatched>,
) -> Result<Vec<TriggerScaler>, Error> {
    let checking = env.unexpected_params.is_checking();
    let mut built: Vec<TriggerScaler> = Vec::with_capacity(triggers.len());
    for (index, trigger) in triggers.iter().enumerate() {
        let context = context_for(
            source,
            as_metric_source,
            (trigger, index),
            env,
            session.as_mut(),
        );
        // The factory and `metric_specs` are the scaler's code: a panic in either fails this
        // object's reconcile with an error naming the trigger, nothing else.
        let internal = |panic: Panic| {
            let s = &source.scalable;
            Error::Internal(panic.in_scaler(
                format!(
                    "building the scaler of {} {}/{}",
                    s.kind.as_str(),
                    s.namespace,
                    s.name
                ),
                TriggerRef {
                    index,
                    trigger_type: &trigger.type_,
                },
            ))
        };
        let result = match context.await {
            Ok(ctx) => {
                // As KEDA, the check runs once the metadata parsed: kept for a failed build
                // only if parsing alone succeeds (the build failed further on, connecting).
                let parsed = checking.then(|| ctx.clone());
                match catch_panic(env.registry.build(ctx)).await {
                    Ok(Ok(built)) => {
                        if checking {
                            unmatched.extend(UnexpectedParams::check(
                                &env.registry,
                                trigger,
                                index,
                            ));
                        }
                        Ok(built)
                    }
                    Ok(Err(source)) => {
                        if let Some(ctx) = parsed
                            && matches!(
                                catch_panic_sync(|| env.registry.check(&ctx)),
                                Ok(Some(Ok(())))
                            )
                        {
                            unmatched.extend(UnexpectedParams::check(
                                &env.registry,
                                trigger,
                                index,
                            ));
                        }
                        // What the event source said, for the operator's debug log only: the
                        // error's message (Ready, Events) shows the kind of failure.
                        source.log_raw();
                        Err(Error::BuildScaler { index, source })
                    }
                    Err(panic) => Err(internal(panic)),
                }
            }
            Err(e) => Err(e),
        };
        let result = match result {
            Ok(scaler) => match catch_panic_sync(|| scaler.scaler().metric_specs()) {
                Ok(metric_specs) => Ok((scaler, metric_specs)),
                Err(panic) => {
                    close_scaler(index, &trigger.type_, &scaler).await;
                    Err(internal(panic))
                }
            },
            Err(e) => Err(e),
        };
        match result {
            Ok((scaler, metric_specs)) => built.push(TriggerScaler {
                index,
                name: trigger.name.clone(),
                trigger_type: trigger.type_.clone(),
                use_cached_metrics: trigger.use_cached_metrics,
                metric_specs: metric_specs.into(),
                scaler,
            }),
            Err(e) => {
                for b in &built {
                    close_scaler(b.index, &b.trigger_type, &b.scaler).await;
                }
                return Err(e);
            }
        }
    }
    Ok(built)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(trigger: &str) -> ScaledObject {
        let yaml = format!(
            "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {{ name: w, namespace: ns }}\nspec:\n  scaleTargetRef: {{ name: app }}\n  triggers: [{trigger}]\n"
        );
        serde_yaml::from_str(&yaml).expect("yaml")
    }

    #[test]
    fn trigger_metrics_give_every_spec_back_as_declared_and_in_order() {
        let spec = |json: serde_json::Value| -> MetricSpec {
            serde_json::from_value(json).expect("metric spec")
        };
        let declared = vec![
            spec(serde_json::json!({"type": "External", "external": {
                "metric": {"name": "s0-redis-list"},
                "target": {"type": "AverageValue", "averageValue": "5"}}})),
            spec(serde_json::json!({"type": "Resource", "resource": {
                "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}})),
            // An External source with a selector and a Value target.
            spec(serde_json::json!({"type": "External", "external": {
                "metric": {"name": "s0-other", "selector": {"matchLabels": {"a": "b"}}},
                "target": {"type": "Value", "value": "1500m"}}})),
            // External with another source set too: kept whole, as declared.
            spec(serde_json::json!({"type": "External", "external": {
                "metric": {"name": "s0-odd"}, "target": {"type": "Value", "value": "1"}},
                "resource": {"name": "memory", "target": {"type": "Utilization"}}})),
        ];
        let kept = TriggerMetrics::from(declared.clone());
        let back: Vec<MetricSpec> = kept.specs().map(Cow::into_owned).collect();
        assert_eq!(back, declared);
        let names: Vec<&str> = kept.externals().map(|e| e.metric.name.as_str()).collect();
        assert_eq!(names, ["s0-redis-list", "s0-other", "s0-odd"]);
        let others: Vec<&MetricSpec> = kept.others().collect();
        assert_eq!(others, [&declared[1], &declared[3]]);
        assert!(matches!(kept.0[0], KeptSpec::External(_)));
        assert!(matches!(kept.0[3], KeptSpec::Other(_)));
    }

    #[tokio::test]
    async fn without_a_resolver_a_trigger_with_authentication_ref_is_not_built() {
        let so =
            object("{ type: redis, metadata: { listName: a }, authenticationRef: { name: auth } }");
        let err = scalers_for(&so, &ScalerEnv::default()).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "spec.triggers[0] (redis): authenticationRef \"auth\" needs the trigger resolver, \
             which this scaler environment does not have"
        );
    }

    #[tokio::test]
    async fn without_a_resolver_a_trigger_reading_the_environment_is_not_built() {
        let so = object("{ type: redis, metadata: { listName: a, addressFromEnv: REDIS } }");
        let err = scalers_for(&so, &ScalerEnv::default()).await.unwrap_err();
        assert!(err.to_string().contains("metadata.addressFromEnv"), "{err}");
    }

    #[tokio::test]
    async fn a_bad_parameter_is_named_with_its_trigger() {
        let so = object("{ type: redis, metadata: { address: \"127.0.0.1:6379\" } }");
        let err = scalers_for(&so, &ScalerEnv::default()).await.unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("spec.triggers[0]: "), "{text}");
        assert!(text.contains("listName"), "{text}");
    }
}
