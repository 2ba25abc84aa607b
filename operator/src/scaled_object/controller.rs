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

use crate::process::telemetry::{Metrics, ResourceKind};
use crate::scaled_object::hpa::{
    HpaCache, MANAGED_BY, Transfer, delete_hpa_of, desired_hpa, ensure_hpa, metric_specs,
};
use crate::scaled_object::routes::RouteClaims;
use crate::scaled_object::scale_loop::{LoopConfig, ScaleLoops};
use crate::scaled_object::settings::scaling_settings;
use crate::scaled_object::target::resolve_target;
use crate::serve::cloud_events::CloudEvents;
use crate::shared::error::Error;
use crate::shared::events::{self, Events};
use crate::shared::isolation::InternalError;
use crate::shared::loops::{IntervalTicks, Ticks};
use crate::shared::reconciler::{Reconciler, RunConfig, rebuilds, run, watch_objects};
use crate::shared::recording;
use crate::shared::resolve::{
    DEFAULT_CLUSTER_OBJECT_NAMESPACE, Resolver, ResolverConfig, ScalableRef, WatchScope,
};
use crate::shared::scalers::ScalerEnv;
use crate::shared::status::{
    apply_updates, conditions_or_initial, join_unique, patch_status, set_condition,
};
use crate::shared::watch::scoped_watcher;
use keda_decide::scale::{Observed, Pause, ScaleAnnotations, TriggerSummary, decide};

mod apply;
mod cleanup;
use apply::{apply_inner, claim_patch, report_failure};
use cleanup::cleanup;

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
    /// How often a refreshed `lastActiveTime` is persisted while an object stays active;
    /// `None` (default): only on Active transitions (`--last-active-time-refresh`).
    pub persist_interval: Option<SignedDuration>,
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
    /// [`crate::serve::cloud_events`]); the default sends none.
    pub cloud_events: CloudEvents,
    /// Whether `scaledobject.keda.sh/transfer-hpa-ownership` takes over the HPA an object
    /// names (`--allow-hpa-ownership-transfer`; KEDA always honours it). Off: keda-rs writes
    /// only the HPAs it owns ([`crate::scaled_object::hpa::ownership`]).
    pub allow_hpa_ownership_transfer: bool,
    /// Which objects this replica writes for ([`crate::shared::ownership`]): all without
    /// shards (the default), the ring's share with `--shards=auto`.
    pub shards: crate::shared::ownership::Shards,
}

impl ControllerConfig {
    /// The configuration the `keda-operator` binary runs with: watched namespaces (for the
    /// controller and its resolver) and cluster object namespace from `settings`, metrics
    /// recorded into `metrics`, scalers sharing `pools` (where the metric service finds the
    /// activator hub).
    pub fn from_settings(
        settings: &crate::process::config::Settings,
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
                unexpected_params: if settings.check_unexpected_scalers_params {
                    crate::shared::unexpected_params::UnexpectedParams::checking()
                } else {
                    crate::shared::unexpected_params::UnexpectedParams::default()
                },
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
            persist_interval: settings
                .last_active_time_refresh
                .and_then(|d| SignedDuration::try_from(d).ok()),
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
            persist_interval: None,
            watch_scope: WatchScope::All,
            reporter: MANAGED_BY.to_string(),
            events_client: None,
            max_concurrent_reconciles: crate::process::config::DEFAULT_SCALEDOBJECT_MAX_RECONCILES,
            scaled_job_max_concurrent_reconciles:
                crate::process::config::DEFAULT_SCALEDJOB_MAX_RECONCILES,
            label_selector: None,
            retry_after_error: Duration::from_secs(10),
            resolver: ResolverConfig::new(DEFAULT_CLUSTER_OBJECT_NAMESPACE),
            metrics: Metrics::new(),
            http_host_policy: HostPolicy::allow_all(),
            cloud_events: CloudEvents::default(),
            allow_hpa_ownership_transfer: false,
            shards: crate::shared::ownership::Shards::All,
        }
    }
}

struct Context {
    client: Client,
    loops: ScaleLoops,
    events: Events,
    /// The owned HPAs as the watch last saw them.
    hpas: HpaCache,
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
    hpas: HpaCache,
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
        let hpas = HpaCache::default();
        let resolver = Resolver::recording(
            client.clone(),
            config.resolver.clone(),
            config.metrics.clone(),
        );
        let env = ScalerEnv {
            resolver: Some(resolver.clone()),
            cluster: crate::shared::cluster_view::handle_or_new(
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
            hpas.clone(),
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
                shards: config.shards.clone(),
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
            hpas,
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
        let hpa_cache = self.hpas.clone();
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
            crate::scaled_object::name_label::compact,
            observe,
        );
        let hpas = scoped_watcher(
            &self.client,
            &scope,
            &watcher::Config::default()
                .any_semantic()
                .labels(&format!("app.kubernetes.io/managed-by={MANAGED_BY}")),
            hpa_cache.clone(),
        )
        .map_ok({
            let cache = hpa_cache.clone();
            move |event| {
                // The cache keeps what the reconciler compares and HPAActive reads; the
                // controller below still sees the whole HPA (its spec decides whether to
                // reconcile).
                cache.apply(&event);
                event
            }
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
            .reconcile_on(self.routes.changes())
            // Shards: objects gained are taken, objects lost let go.
            .reconcile_all_on(self.config.shards.changes());
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

    fn shards(&self) -> &crate::shared::ownership::Shards {
        &self.loops.config().shards
    }

    async fn let_go(&self, so: &ScaledObject, linger: Duration) -> Option<Duration> {
        self.loops.let_go(so, linger).await
    }

    fn owned(&self, uid: &str) {
        self.loops.owned(uid);
    }

    fn retry_after_error(&self) -> Duration {
        self.retry_after_error
    }
}
