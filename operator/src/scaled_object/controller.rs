//! The ScaledObject controller: finalizer, label, target check, HPA, status, and the scale
//! loop registry (KEDA-CONTRACT 1.4-1.6, 1.15).
//!
//! Reconcile is idempotent and never branches on why it ran. It runs when the generation,
//! labels, annotations, finalizers or deletion state of an object change, or an owned HPA's
//! spec, labels or annotations change: not on status writes (the loops' or the HPA
//! controller's), so the loops' status updates never cause reconciles.
//!
//! Ready is shared with the scale loops: the reconciler sets `Ready=False
//! ScaledObjectCheckFailed` when the object cannot be reconciled, and `Ready=True` only when
//! Ready is not already owned by the loop (`TriggerError`, `PartialTriggerError`,
//! `ErrorGettingCurrentReplicas`), so the two never fight over it.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use keda_api::annotations::{FINALIZER, SCALED_OBJECT_NAME_LABEL};
use keda_api::condition::{
    CONDITION_ACTIVE, CONDITION_PAUSED, CONDITION_READY, Condition, STATUS_FALSE, STATUS_TRUE,
    STATUS_UNKNOWN, find_condition, message, reason as keda_reason,
};
use keda_api::validation::validate_scaled_object_reconcile;
use keda_api::{ScaledObject, ScaledObjectStatus};
use keda_scalers::Clock;
use keda_scalers::scalers::http::claims::{HostPolicy, Refusal};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::cloud_events::CloudEvents;
use crate::error::Error;
use crate::events::{self, Events};
use crate::hpa::{
    MANAGED_BY, Transfer, delete_hpa_of, desired_hpa, ensure_hpa, metric_specs, trim_hpa,
};
use crate::isolation::InternalError;
use crate::loops::{IntervalTicks, Ticks};
use crate::reconciler::{Reconciler, RunConfig, rebuilds, run, watch_objects};
use crate::recording;
use crate::resolve::{
    DEFAULT_CLUSTER_OBJECT_NAMESPACE, Resolver, ResolverConfig, ScalableRef, WatchScope,
};
use crate::routes::RouteClaims;
use crate::scale_loop::{DEFAULT_PERSIST_INTERVAL, LoopConfig, ScaleLoops};
use crate::scalers::ScalerEnv;
use crate::settings::scaling_settings;
use crate::status::{
    apply_updates, conditions_or_initial, join_unique, patch_status, set_condition,
};
use crate::target::resolve_target;
use crate::telemetry::{Metrics, ResourceKind};
use crate::watch::scoped_watcher;
use keda_decide::scale::{Observed, Pause, ScaleAnnotations, TriggerSummary, decide};

/// How the ScaledObject controller runs.
#[derive(Clone)]
pub struct ControllerConfig {
    /// Scaler registry, shared client pools, HTTP timeout.
    pub env: ScalerEnv,
    /// When the loops poll (real intervals by default).
    pub ticks: Arc<dyn Ticks>,
    /// "now" for decisions (the system clock by default).
    pub clock: Clock,
    /// When this operator started; `None`: the clock's now at start.
    pub operator_started_at: Option<Timestamp>,
    /// How often a refreshed `lastActiveTime` is persisted while an object stays active.
    pub persist_interval: SignedDuration,
    /// The namespaces watched (`WATCH_NAMESPACE`): all, or a list (one watch each).
    pub watch_scope: WatchScope,
    /// Reporter of events (`keda-operator`).
    pub reporter: String,
    /// The client Events are published with; `None`: the controller's. The binary gives Events
    /// a client of their own with the same QPS and burst, as client-go's event broadcaster has,
    /// so Events never wait behind the writes that scale.
    pub events_client: Option<kube::Client>,
    /// Reconciles at once (`KEDA_SCALEDOBJECT_CTRL_MAX_RECONCILES`, default 5).
    pub max_concurrent_reconciles: u16,
    /// ScaledJob reconciles at once when the ScaledJob controller is started from this
    /// configuration by [`crate::scaled_job::leader_task`] (`KEDA_SCALEDJOB_CTRL_MAX_RECONCILES`,
    /// default 1).
    pub scaled_job_max_concurrent_reconciles: u16,
    /// Only ScaledObjects and ScaledJobs matching this label selector are watched, and so
    /// reconciled and scaled (`WATCH_LABEL_SELECTOR`); `None`: all.
    pub label_selector: Option<String>,
    /// Delay before a failed reconcile is retried.
    pub retry_after_error: Duration,
    /// Where the Prometheus metrics are recorded (the process's [`Metrics`], served on
    /// `/metrics`).
    pub metrics: Metrics,
    /// How the controller's trigger resolver watches (namespaces, cluster object namespace).
    /// The resolver is started with the controller and replaces any in `env`.
    pub resolver: ResolverConfig,
    /// Which hosts each namespace may claim with `http` triggers (`--http-host-policy`; the
    /// activator must be given the same policy). The default here is no policy (any host),
    /// for tests and `keda-rs dev`; the binary's default is no host at all (`Settings`).
    pub http_host_policy: HostPolicy,
    /// Where the reconcilers' events also go as CloudEvents (the emitter of
    /// [`crate::cloud_events`]); the default sends none.
    pub cloud_events: CloudEvents,
    /// Whether `scaledobject.keda.sh/transfer-hpa-ownership` takes over the HPA an object
    /// names (`--allow-hpa-ownership-transfer`; KEDA always honours it). Off: keda-rs writes
    /// only the HPAs it owns ([`crate::hpa::ownership`]).
    pub allow_hpa_ownership_transfer: bool,
}

impl ControllerConfig {
    /// The configuration the `keda-operator` binary runs with: watched namespaces (for the
    /// controller and its resolver) and cluster object namespace from `settings`, metrics
    /// recorded into `metrics`, scalers sharing `pools` (where the metric service finds the
    /// activator hub).
    pub fn from_settings(
        settings: &crate::config::Settings,
        metrics: Metrics,
        pools: keda_scalers::pool::ClientPools,
    ) -> Self {
        ControllerConfig {
            env: ScalerEnv {
                pools,
                http_timeout: settings.http_default_timeout,
                trigger_files: keda_scalers::files::TriggerFiles::new(
                    settings.trigger_file_root.clone(),
                ),
                ..ScalerEnv::default()
            },
            max_concurrent_reconciles: settings.scaled_object_max_reconciles,
            scaled_job_max_concurrent_reconciles: settings.scaled_job_max_reconciles,
            label_selector: settings.watch_label_selector.clone(),
            watch_scope: settings.watch_namespaces.clone(),
            metrics,
            resolver: ResolverConfig {
                watch_scope: settings.watch_namespaces.clone(),
                file_path_auth_root: settings.file_path_auth_root.clone(),
                restrict_secret_access: settings.restrict_secret_access,
                auth_label_selector: settings.watch_label_selector_for_trigger_auth.clone(),
                bound_service_account_token_expiry: settings.bound_service_account_token_expiry,
                identity: settings.identity.clone(),
                ..ResolverConfig::new(settings.cluster_object_namespace.clone())
            },
            http_host_policy: settings.http_host_policy.clone(),
            allow_hpa_ownership_transfer: settings.allow_hpa_ownership_transfer,
            ..ControllerConfig::default()
        }
    }
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            env: ScalerEnv::default(),
            ticks: Arc::new(IntervalTicks),
            clock: Clock::system(),
            operator_started_at: None,
            persist_interval: DEFAULT_PERSIST_INTERVAL,
            watch_scope: WatchScope::All,
            reporter: MANAGED_BY.to_string(),
            events_client: None,
            max_concurrent_reconciles: crate::config::DEFAULT_SCALEDOBJECT_MAX_RECONCILES,
            scaled_job_max_concurrent_reconciles: crate::config::DEFAULT_SCALEDJOB_MAX_RECONCILES,
            label_selector: None,
            retry_after_error: Duration::from_secs(10),
            resolver: ResolverConfig::new(DEFAULT_CLUSTER_OBJECT_NAMESPACE),
            metrics: Metrics::new(),
            http_host_policy: HostPolicy::allow_all(),
            cloud_events: CloudEvents::default(),
            allow_hpa_ownership_transfer: false,
        }
    }
}

struct Context {
    client: Client,
    loops: ScaleLoops,
    events: Events,
    /// The owned HPAs as the watch last saw them ([`trim_hpa`]).
    hpas: Store<HorizontalPodAutoscaler>,
    clock: Clock,
    started_at: Timestamp,
    retry_after_error: Duration,
    resolver: Resolver,
    metrics: Metrics,
    routes: RouteClaims,
    /// `--allow-hpa-ownership-transfer`.
    allow_hpa_ownership_transfer: bool,
}

/// The controller, built before it runs so callers (tests, the metric service) can hold its
/// [`ScaleLoops`].
pub struct ScaledObjectController {
    client: Client,
    config: ControllerConfig,
    loops: ScaleLoops,
    store: Store<ScaledObject>,
    writer: reflector::store::Writer<ScaledObject>,
    hpa_writer: reflector::store::Writer<HorizontalPodAutoscaler>,
    started_at: Timestamp,
    resolver: Resolver,
    routes: RouteClaims,
}

impl ScaledObjectController {
    /// A controller over `client`. Starts the trigger resolver's watches.
    ///
    /// # Panics
    /// Outside a tokio runtime (the resolver spawns its watch tasks).
    pub fn new(client: Client, config: ControllerConfig) -> ScaledObjectController {
        let (store, writer) = reflector::store();
        let (hpa_store, hpa_writer) = reflector::store();
        let resolver = Resolver::recording(
            client.clone(),
            config.resolver.clone(),
            config.metrics.clone(),
        );
        let env = ScalerEnv {
            resolver: Some(resolver.clone()),
            cluster: crate::cluster_view::handle_or_new(
                &config.env.cluster,
                &client,
                &config.watch_scope,
            ),
            ..config.env.clone()
        };
        let started_at = config
            .operator_started_at
            .unwrap_or_else(|| config.clock.now());
        let loops = ScaleLoops::new(
            client.clone(),
            store.clone(),
            hpa_store,
            LoopConfig {
                env,
                ticks: config.ticks.clone(),
                clock: config.clock.clone(),
                operator_started_at: started_at,
                persist_interval: config.persist_interval,
                watch_scope: config.watch_scope.clone(),
                reporter: config.reporter.clone(),
                events_client: config.events_client.clone(),
                metrics: config.metrics.clone(),
            },
        );
        let routes = RouteClaims::new(store.clone(), config.http_host_policy.clone());
        ScaledObjectController {
            client,
            config,
            loops,
            routes,
            store,
            writer,
            hpa_writer,
            started_at,
            resolver,
        }
    }

    /// The scale loops (metric reads, loop inspection).
    pub fn loops(&self) -> ScaleLoops {
        self.loops.clone()
    }

    /// Runs until `shutdown` is cancelled, then stops every loop (leaving replicas as they
    /// are).
    ///
    /// # Errors
    /// None today; the signature leaves room for start-up failures.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), Error> {
        let scope = self.config.watch_scope.clone();
        let mut hpa_writer = self.hpa_writer;
        let hpa_store = hpa_writer.as_reader();
        let hpa_cache = hpa_store.clone();
        // After the store has the object: a write of ours it includes need not be remembered.
        let observe = {
            let loops = self.loops.clone();
            let routes = self.routes.clone();
            move |event: &watcher::Event<ScaledObject>| {
                if let watcher::Event::Apply(so) | watcher::Event::InitApply(so) = event {
                    loops.seen(so);
                }
                routes.observe(event);
            }
        };
        let objects = watch_objects(
            &self.client,
            &scope,
            self.config.label_selector.as_deref(),
            self.store.clone(),
            self.writer,
            observe,
        );
        let hpas = scoped_watcher(
            &self.client,
            &scope,
            &watcher::Config::default()
                .any_semantic()
                .labels(&format!("app.kubernetes.io/managed-by={MANAGED_BY}")),
            hpa_store,
        )
        .map_ok(move |event| {
            // The cached copy keeps what the reconciler compares and HPAActive reads; the
            // controller below still sees the whole HPA (its spec decides whether to reconcile).
            hpa_writer.apply_watcher_event(&event.clone().modify(trim_hpa));
            event
        })
        .applied_objects()
        .predicate_filter(hpa_trigger, Default::default());
        let ctx = Arc::new(Context {
            client: self.client.clone(),
            loops: self.loops.clone(),
            events: Events::with_client(
                self.config.events_client.as_ref(),
                &self.client,
                &self.config.reporter,
            )
            .with_cloud_events(self.config.cloud_events.clone()),
            hpas: hpa_cache,
            clock: self.config.clock.clone(),
            started_at: self.started_at,
            retry_after_error: self.config.retry_after_error,
            resolver: self.resolver.clone(),
            metrics: self.config.metrics.clone(),
            routes: self.routes.clone(),
            allow_hpa_ownership_transfer: self.config.allow_hpa_ownership_transfer,
        });
        info!(namespaces = ?scope, "ScaledObject controller started");
        let controller = Controller::for_stream(objects, self.store.clone())
            .owns_stream(hpas)
            .reconcile_on(rebuilds(&self.resolver, self.loops.clone()))
            // An object whose route was refused or freed says so at once.
            .reconcile_on(self.routes.changes());
        let config = RunConfig {
            concurrency: self.config.max_concurrent_reconciles,
            shutdown_grace: None,
        };
        run(controller, ctx, self.store, &self.loops, config, shutdown).await;
        Ok(())
    }
}

/// Runs the ScaledObject controller until `shutdown` is cancelled: the entry point of the
/// operator binary.
///
/// # Errors
/// See [`ScaledObjectController::run`].
pub async fn run_scaled_object_controller(
    client: Client,
    config: ControllerConfig,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    ScaledObjectController::new(client, config)
        .run(shutdown)
        .await
}

/// The changes of an owned HPA that need a reconcile: spec, labels, annotations.
fn hpa_trigger(hpa: &HorizontalPodAutoscaler) -> Option<u64> {
    let mut h = DefaultHasher::new();
    serde_json::to_string(&hpa.spec)
        .unwrap_or_default()
        .hash(&mut h);
    hpa.metadata.labels.hash(&mut h);
    hpa.metadata.annotations.hash(&mut h);
    hpa.metadata.deletion_timestamp.is_some().hash(&mut h);
    Some(h.finish())
}

impl Reconciler for Context {
    type Object = ScaledObject;
    type Error = Error;
    const KIND: ResourceKind = ResourceKind::ScaledObject;

    fn client(&self) -> &Client {
        &self.client
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    fn resolver(&self) -> &Resolver {
        &self.resolver
    }

    fn triggers(object: &ScaledObject) -> &[keda_api::ScaleTrigger] {
        &object.spec.triggers
    }

    fn internal(error: InternalError) -> Error {
        Error::Internal(error)
    }

    fn finalizer_failed(error: kube::runtime::finalizer::Error<Error>) -> Error {
        Error::Finalizer(Box::new(error))
    }

    /// The freshest copy of `so`, with KEDA's finalizer and name label ([`claim_patch`]).
    async fn prepare(&self, so: Arc<ScaledObject>) -> Result<Arc<ScaledObject>, Error> {
        let so = self.loops.freshest(so);
        let Some(patch) = claim_patch(&so) else {
            return Ok(so);
        };
        let api: Api<ScaledObject> =
            Api::namespaced(self.client.clone(), &so.namespace().unwrap_or_default());
        let name = so.name_any();
        let claimed = api
            .patch(&name, &PatchParams::default(), &Patch::Json::<()>(patch))
            .await
            .map_err(|e| {
                Error::kube(
                    format!("adding the finalizer and name label to ScaledObject {name}"),
                    e,
                )
            })?;
        self.loops.wrote(claimed.clone());
        Ok(Arc::new(claimed))
    }

    async fn apply(&self, so: &ScaledObject) -> Result<Action, Error> {
        apply_inner(so, self).await
    }

    async fn cleanup(&self, so: &ScaledObject) -> Result<Action, Error> {
        cleanup(so, self).await
    }

    async fn report_failure(&self, so: &ScaledObject, error: &Error) {
        report_failure(so, error, self).await;
    }

    fn reconciled(&self, uid: &str) {
        self.loops.reconciled(uid);
    }

    fn retry_after_error(&self) -> Duration {
        self.retry_after_error
    }
}

/// The one JSON patch that gives a live ScaledObject KEDA's finalizer and its
/// `scaledobject.keda.sh/name` label, when either is missing; `None` when both are there or the
/// object is being deleted.
///
/// kube's finalizer helper would add the finalizer alone and reconcile again for the label: two
/// writes per new object where one does (at the default 20 QPS, 10,000 new ScaledObjects wait
/// minutes for each write per object). The `test` of the finalizer list makes a concurrent
/// change fail the patch rather than be overwritten; the reconcile then runs again.
fn claim_patch(so: &ScaledObject) -> Option<json_patch::Patch> {
    if so.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let name = so.name_any();
    let has_finalizer = so.finalizers().iter().any(|f| f == FINALIZER);
    let has_label = so.labels().get(SCALED_OBJECT_NAME_LABEL) == Some(&name);
    if has_finalizer && has_label {
        return None;
    }
    let mut ops = Vec::new();
    if !has_finalizer {
        match &so.metadata.finalizers {
            None => ops.push(serde_json::json!(
                { "op": "add", "path": "/metadata/finalizers", "value": [FINALIZER] }
            )),
            Some(current) => {
                ops.push(serde_json::json!(
                    { "op": "test", "path": "/metadata/finalizers", "value": current }
                ));
                ops.push(serde_json::json!(
                    { "op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER }
                ));
            }
        }
    }
    if !has_label {
        ops.push(match &so.metadata.labels {
            None => serde_json::json!({
                "op": "add",
                "path": "/metadata/labels",
                "value": { SCALED_OBJECT_NAME_LABEL: name },
            }),
            // JSON Pointer writes the key's '/' as "~1".
            Some(_) => serde_json::json!({
                "op": "add",
                "path": format!("/metadata/labels/{}", SCALED_OBJECT_NAME_LABEL.replace('~', "~0").replace('/', "~1")),
                "value": name,
            }),
        });
    }
    serde_json::from_value(serde_json::Value::Array(ops)).ok()
}

/// Reasons of Ready that the scale loop sets and the reconciler must leave alone. A loop's
/// next good poll clears them; `InternalError` set by a reconcile that panicked is cleared the
/// same way once the reconcile succeeds and the loop polls.
const LOOP_OWNED_READY: [&str; 4] = [
    keda_reason::TRIGGER_ERROR,
    keda_reason::PARTIAL_TRIGGER_ERROR,
    keda_reason::ERROR_GETTING_CURRENT_REPLICAS,
    keda_reason::INTERNAL_ERROR,
];

async fn apply_inner(so: &ScaledObject, ctx: &Context) -> Result<Action, Error> {
    let ns = so.namespace().unwrap_or_default();
    let name = so.name_any();
    let api: Api<ScaledObject> = Api::namespaced(ctx.client.clone(), &ns);
    let hpa_api: Api<HorizontalPodAutoscaler> = Api::namespaced(ctx.client.clone(), &ns);

    // The Paused condition follows the annotations before any check that can fail (KEDA's
    // reconcileScaledObject does this first): report_failure applies the same step.
    validate_scaled_object_reconcile(so)?;
    if let Some(refusal) = ctx.routes.refusal(so) {
        // The activator does not route it: no loop may report it ready, or scale on traffic
        // that never comes. The HPA, if any, is left as it is (as for any failed check).
        ctx.loops.stop(so).await;
        return Err(Error::Route(Box::new(refusal)));
    }
    let annotations = ScaleAnnotations::from_annotations(so.annotations())?;
    let transfer = Transfer::of(so, ctx.allow_hpa_ownership_transfer);
    let target = resolve_target(&ctx.client, so).await?;
    // A Deployment or StatefulSet in the loops' target cache exists and has /scale: no GET.
    // Any other kind, or one the cache does not hold (yet), is checked through /scale, which
    // tells a missing target from one without /scale.
    let current = match ctx.loops.targets().cached_apps_replicas(&target).await {
        Some(replicas) => replicas,
        None => {
            let scale = target.get_scale(&ctx.client).await?;
            scale.spec.and_then(|s| s.replicas).unwrap_or(0)
        }
    };

    let current_status = so.status.clone().unwrap_or_default();
    let mut desired = current_status.clone();
    let mut conditions = conditions_or_initial(so.status.as_ref());
    let was_paused = find_condition(&conditions, CONDITION_PAUSED).is_some_and(|c| c.is_true());
    unpause_step(so, &mut conditions);
    paused_direction_event(so, was_paused, ctx).await;
    desired.scale_target_kind = Some(target.kind_string());
    desired.scale_target_gvkr = Some(target.gvkr.clone());
    desired.original_replica_count = current_status.original_replica_count.or(Some(current));
    desired.triggers_types = join_unique(so.spec.triggers.iter().map(|t| t.type_.as_str()));
    desired.authentications_types = join_unique(
        so.spec
            .triggers
            .iter()
            .filter_map(|t| t.authentication_ref.as_ref().map(|a| a.name.as_str())),
    );

    if annotations.pause != Pause::No {
        // Paused: no loop, no HPA (if it is this object's: another's is left as it is, and
        // the object is not ready); with paused-replicas the target is held at that count.
        ctx.loops.stop(so).await;
        delete_hpa_of(&hpa_api, so, transfer).await?;
        let settings = scaling_settings(so, &target)?;
        let now = ctx.clock.now();
        let decision = decide(
            &settings,
            &Observed {
                current_replicas: current,
                last_active_time: None,
                created_at: now,
                operator_started_at: ctx.started_at,
                now,
            },
            &TriggerSummary::default(),
        );
        if let Some(write) = &decision.scale {
            target.set_replicas(&ctx.client, write.to).await?;
            info!(
                namespace = ns,
                name,
                replicas = write.to,
                "target held at paused replicas"
            );
        }
        apply_updates(&mut conditions, &decision.conditions);
        desired.conditions = Some(conditions);
        desired.paused_replica_count = match annotations.pause {
            Pause::AtReplicas(n) => Some(n),
            _ => None,
        };
        if let Some(written) = patch_status(&api, &name, &current_status, &desired).await? {
            ctx.loops.wrote(written);
        }
        recording::scaled_object_paused(&ctx.metrics, &ns, &name, true);
        if !was_paused {
            ctx.events
                .publish(
                    so,
                    false,
                    events::SCALED_OBJECT_PAUSED,
                    message::SCALED_OBJECT_PAUSED.to_string(),
                )
                .await;
        }
        return Ok(Action::await_change());
    }

    let (scalers, started) = ctx.loops.ensure(so, &target).await?;
    if started {
        for t in &scalers.triggers {
            ctx.events
                .publish(
                    so,
                    false,
                    events::KEDA_SCALERS_STARTED,
                    format!("Scaler {} is built", t.trigger_type),
                )
                .await;
        }
    }
    let metrics = metric_specs(&name, &scalers)?;
    let hpa = desired_hpa(so, &target, &metrics);
    let cached = ctx
        .hpas
        .get(&reflector::ObjectRef::new(&so.hpa_name()).within(&ns));
    if let Err(e) = ensure_hpa(
        &hpa_api,
        &hpa,
        current_status.hpa_name.as_deref(),
        cached.as_deref(),
        transfer,
    )
    .await
    {
        if matches!(e, Error::HpaNotOwned { .. }) {
            // The name is someone else's HPA: no loop may scale beside it. The loop started
            // above has not polled yet (its first poll waits for the end of this reconcile).
            ctx.loops.stop(so).await;
        }
        return Err(e);
    }

    desired.hpa_name = Some(so.hpa_name());
    desired.external_metric_names =
        (!metrics.external_names.is_empty()).then(|| metrics.external_names.clone());
    desired.resource_metric_names =
        (!metrics.resource_names.is_empty()).then(|| metrics.resource_names.clone());
    desired.composite_scaler_name = metrics.composite.clone();
    desired.paused_replica_count = None;
    let paused_direction = annotations.paused_scale_in || annotations.paused_scale_out;
    let ready = find_condition(&conditions, CONDITION_READY).cloned();
    let loop_owned = ready.as_ref().is_some_and(|c| {
        c.reason
            .as_deref()
            .is_some_and(|r| LOOP_OWNED_READY.contains(&r))
    });
    let became_ready = !ready.as_ref().is_some_and(|c| c.is_true()) && !loop_owned;
    if became_ready {
        set_condition(
            &mut conditions,
            CONDITION_READY,
            STATUS_TRUE,
            keda_reason::SCALED_OBJECT_READY,
            message::SCALED_OBJECT_READY,
        );
    }
    desired.conditions = Some(conditions);
    if let Some(written) = patch_status(&api, &name, &current_status, &desired).await? {
        ctx.loops.wrote(written);
    }
    recording::scaled_object_paused(&ctx.metrics, &ns, &name, paused_direction);
    if was_paused && !paused_direction {
        ctx.events
            .publish(
                so,
                false,
                events::SCALED_OBJECT_UNPAUSED,
                message::SCALED_OBJECT_UNPAUSED.to_string(),
            )
            .await;
    }
    if became_ready {
        ctx.events
            .publish(
                so,
                false,
                events::SCALED_OBJECT_READY,
                events::SCALED_OBJECT_READY_NOTE.to_string(),
            )
            .await;
    }
    Ok(Action::await_change())
}

/// KEDA's first step of every reconcile, before any check that can fail: `paused-scale-in` or
/// `paused-scale-out` set `Paused=True`; an object that was paused and whose pause annotations
/// are all gone goes back to `Paused=False` / `ScaledObjectUnpaused`. A `paused` or
/// `paused-replicas` object is left to the pause branch (KEDA's `needsToPause` case).
fn unpause_step(so: &ScaledObject, conditions: &mut Vec<Condition>) {
    if so.is_paused() {
        return;
    }
    if so.is_paused_scale_in() || so.is_paused_scale_out() {
        set_condition(
            conditions,
            CONDITION_PAUSED,
            STATUS_TRUE,
            keda_reason::SCALED_OBJECT_PAUSED,
            message::SCALED_OBJECT_PAUSED,
        );
    } else if find_condition(conditions, CONDITION_PAUSED).is_some_and(|c| c.is_true()) {
        set_condition(
            conditions,
            CONDITION_PAUSED,
            STATUS_FALSE,
            keda_reason::SCALED_OBJECT_UNPAUSED,
            message::SCALED_OBJECT_UNPAUSED,
        );
    }
}

/// KEDA's `ScaledObjectPaused` Event when `paused-scale-in` or `paused-scale-out` pauses an
/// object that was not paused (the full pause publishes its own in the pause branch).
async fn paused_direction_event(so: &ScaledObject, was_paused: bool, ctx: &Context) {
    if !was_paused && !so.is_paused() && (so.is_paused_scale_in() || so.is_paused_scale_out()) {
        ctx.events
            .publish(
                so,
                false,
                events::SCALED_OBJECT_PAUSED,
                message::SCALED_OBJECT_PAUSED.to_string(),
            )
            .await;
    }
}

async fn report_failure(so: &ScaledObject, e: &Error, ctx: &Context) {
    let ns = so.namespace().unwrap_or_default();
    let name = so.name_any();
    match e.internal() {
        Some(internal) => recording::internal_panic(
            &ctx.metrics,
            ResourceKind::ScaledObject,
            (&ns, &name),
            internal,
        ),
        None => warn!(namespace = ns, name, error = %e, "ScaledObject check failed"),
    }
    recording::scaled_object_error(&ctx.metrics, &ns, &name);
    let api: Api<ScaledObject> = Api::namespaced(ctx.client.clone(), &ns);
    let current: ScaledObjectStatus = so.status.clone().unwrap_or_default();
    let mut desired = current.clone();
    let mut conditions = conditions_or_initial(so.status.as_ref());
    let was_paused = find_condition(&conditions, CONDITION_PAUSED).is_some_and(|c| c.is_true());
    unpause_step(so, &mut conditions);
    paused_direction_event(so, was_paused, ctx).await;
    let message = e.keda_message();
    set_condition(
        &mut conditions,
        CONDITION_READY,
        STATUS_FALSE,
        e.condition_reason(keda_reason::SCALED_OBJECT_CHECK_FAILED),
        &message,
    );
    // As KEDA: what the triggers say is unknown while the object cannot be checked.
    set_condition(
        &mut conditions,
        CONDITION_ACTIVE,
        STATUS_UNKNOWN,
        keda_reason::UNKNOWN_STATE,
        message::SCALED_OBJECT_CHECK_FAILED,
    );
    desired.conditions = Some(conditions);
    match patch_status(&api, &name, &current, &desired).await {
        Ok(Some(written)) => ctx.loops.wrote(written),
        Ok(None) => {}
        Err(e) => {
            warn!(namespace = ns, name, error = %e, "writing the failure to the status failed")
        }
    }
    if let Some(note) = e.scaler_build_failure() {
        ctx.events
            .publish(so, true, events::KEDA_SCALER_FAILED, note)
            .await;
    }
    if let Some(note) = e.keda_target_note() {
        ctx.events
            .publish_action(
                so,
                true,
                events::SCALED_OBJECT_CHECK_FAILED,
                events::CHECK_SCALE_TARGET,
                note.to_string(),
            )
            .await;
    }
    let event_reason = e
        .route_refusal()
        .map_or(events::SCALED_OBJECT_CHECK_FAILED, Refusal::reason);
    ctx.events.publish(so, true, event_reason, message).await;
}

async fn cleanup(so: &ScaledObject, ctx: &Context) -> Result<Action, Error> {
    let ns = so.namespace().unwrap_or_default();
    let name = so.name_any();
    ctx.loops.forget(so).await;
    ctx.resolver.forget(&ScalableRef::new(
        keda_scalers::ScalableKind::ScaledObject,
        &ns,
        &name,
    ));
    // The HPA is not deleted here: its controller owner reference to this object lets the
    // garbage collector remove it, so `kubectl delete --cascade=orphan` keeps it, as in KEDA.
    let original = so.status.as_ref().and_then(|s| s.original_replica_count);
    if so.spec.restore_to_original_replica_count()
        && let Some(n) = original
    {
        restore_original_replicas(so, ctx, n).await;
    }
    recording::scaled_object_paused(&ctx.metrics, &ns, &name, false);
    recording::scaled_object_deleted(&ctx.metrics, &ns, &name);
    ctx.events
        .publish(
            so,
            true,
            events::SCALED_OBJECT_DELETED,
            "ScaledObject was deleted".to_string(),
        )
        .await;
    Ok(Action::await_change())
}

/// How long the restore of a deleted object's target may take before the finalizer is removed
/// anyway.
const RESTORE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Scales a deleted object's target back to `replicas` (`restoreToOriginalReplicaCount`). As in
/// KEDA's `finalizeScaledObject`, a failure does not keep the finalizer (a delete that retries a
/// refused `/scale` write forever never completes): it is logged and reported as a Warning
/// Event naming the target and the count, with the API server's status code, not its words.
async fn restore_original_replicas(so: &ScaledObject, ctx: &Context, replicas: i32) {
    let ns = so.namespace().unwrap_or_default();
    let name = so.name_any();
    let target = match resolve_target(&ctx.client, so).await {
        Ok(target) => target,
        Err(e) => {
            warn!(namespace = ns, name, error = %e, "cannot restore replicas");
            let message = format!(
                "Failed to restore the scale target to its original {replicas} replicas: the target cannot be resolved"
            );
            ctx.events
                .publish(so, true, events::SCALE_TARGET_RESTORE_FAILED, message)
                .await;
            return;
        }
    };
    let outcome =
        tokio::time::timeout(RESTORE_TIMEOUT, target.set_replicas(&ctx.client, replicas)).await;
    let why = match outcome {
        Ok(Ok(())) => {
            info!(namespace = ns, name, replicas, "restored original replicas");
            return;
        }
        Ok(Err(Error::Kube { source, .. })) if crate::error::is_not_found(&source) => return,
        Ok(Err(e)) => {
            warn!(namespace = ns, name, replicas, error = %e,
                "restoring the original replicas failed; removing the finalizer anyway");
            match &e {
                Error::Kube {
                    source: kube::Error::Api(s),
                    ..
                } => format!("the API server answered {}", s.code),
                _ => "the API server could not be reached".to_string(),
            }
        }
        Err(_) => {
            warn!(
                namespace = ns,
                name,
                replicas,
                "restoring the original replicas timed out; removing the finalizer anyway"
            );
            format!("no answer within {} s", RESTORE_TIMEOUT.as_secs())
        }
    };
    let message = format!(
        "Failed to restore {} to its original {replicas} replicas: {why}",
        target.describe()
    );
    ctx.events
        .publish(so, true, events::SCALE_TARGET_RESTORE_FAILED, message)
        .await;
}
