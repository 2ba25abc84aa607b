//! The ScaledJob controller (KEDA-CONTRACT 1.9): finalizer, status, the rollout of a new
//! generation, and one job loop per ScaledJob ([`loops`]) that creates Jobs as
//! [`keda_decide::job`] decides.
//!
//! Reconcile is idempotent and runs when the generation, labels, annotations, finalizers or
//! deletion state change, never on status writes, so the loops' status updates cause no
//! reconciles. Ready is shared with the loops as for ScaledObjects: the reconciler owns
//! `ScaledJobReady` / `ScaledJobCheckFailed`, the loop `PartialTriggerError`.

pub mod jobs;
pub mod loops;

use std::sync::Arc;
use std::time::Duration;

use keda_api::condition::{
    CONDITION_PAUSED, CONDITION_READY, STATUS_FALSE, STATUS_TRUE, find_condition,
    initial_conditions, message, reason as keda_reason,
};
use keda_api::validation::{ValidationErrors, validate_scaled_job};
use keda_api::{ScaledJob, ScaledJobStatus};
use keda_scalers::ScalableKind;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

pub use loops::{JobLoops, KEDA_JOBS_CREATED, ScaledJobs};

use crate::process::telemetry::{Metrics, ResourceKind};
use crate::scaled_object::controller::ControllerConfig;
use crate::shared::error::Error;
use crate::shared::events::{self, Events};
use crate::shared::isolation::{INTERNAL_ERROR, InternalError};
use crate::shared::reconciler::{Reconciler, RunConfig, rebuilds, run, watch_objects};
use crate::shared::recording;
use crate::shared::resolve::{Resolver, ScalableRef, ScaleTargetPodSource};
use crate::shared::scalers::{ObjectScalers, ScalerEnv, build_triggers};
use crate::shared::status::{join_unique, set_condition, status_patch};
use keda_decide::job::rollout_to_delete;

/// `ScaledJobReady`.
pub const SCALED_JOB_READY: &str = "ScaledJobReady";
/// `ScaledJobCheckFailed`.
pub const SCALED_JOB_CHECK_FAILED: &str = "ScaledJobCheckFailed";
/// `ScaledJobDeleted`.
pub const SCALED_JOB_DELETED: &str = "ScaledJobDeleted";
/// `ScaledJobPaused`.
pub const SCALED_JOB_PAUSED: &str = "ScaledJobPaused";
/// `ScaledJobUnpaused`.
pub const SCALED_JOB_UNPAUSED: &str = "ScaledJobUnpaused";
/// `ScaledJobRolloutCleanupStarted`: a new generation with the immediate rollout deletes the
/// Jobs of the previous ones.
pub const SCALED_JOB_ROLLOUT_CLEANUP_STARTED: &str = "ScaledJobRolloutCleanupStarted";
/// `ScaledJobRolloutCleanupCompleted`: those Jobs are deleted.
pub const SCALED_JOB_ROLLOUT_CLEANUP_COMPLETED: &str = "ScaledJobRolloutCleanupCompleted";
/// `ScaledJobRolloutCleanupFailed` (Warning): one of them could not be deleted.
pub const SCALED_JOB_ROLLOUT_CLEANUP_FAILED: &str = "ScaledJobRolloutCleanupFailed";
/// How long running reconciles may take to finish at shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// KEDA's message of `Ready=True` on a ScaledJob.
pub const READY_MESSAGE: &str = "ScaledJob is defined correctly and is ready to scaling";

/// Why a ScaledJob could not be reconciled or polled. Lands in `Ready=False
/// ScaledJobCheckFailed` and a `ScaledJobCheckFailed` event.
#[derive(Debug, thiserror::Error)]
pub enum ScaledJobError {
    /// The ScaledJob breaks one of KEDA's admission rules.
    #[error("ScaledJob is invalid: {0}")]
    Invalid(#[from] ValidationErrors),
    /// A trigger's scaler could not be built (names the trigger and parameter).
    #[error(transparent)]
    Scalers(#[from] Error),
    /// A Kubernetes API call failed.
    #[error("{action} failed: {source}")]
    Kube {
        /// What was being done, e.g. `creating a Job for ScaledJob ns/worker`.
        action: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// Deleting a Job of a previous generation failed (immediate rollout); the message is
    /// KEDA's `ScaledJobRolloutCleanupFailed` note.
    #[error("Failed to delete job {name}: {source}")]
    DeleteJob {
        /// The Job's name.
        name: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// The finalizer machinery failed.
    #[error(transparent)]
    Finalizer(#[from] Box<kube::runtime::finalizer::Error<ScaledJobError>>),
    /// A panic was caught while reconciling or polling the ScaledJob ([`crate::shared::isolation`]).
    #[error(transparent)]
    Internal(#[from] InternalError),
}

impl ScaledJobError {
    /// The `Ready=False` message and `ScaledJobCheckFailed` note: a scaler that cannot be built
    /// gets KEDA's "Failed to ensure ScaledJob is correctly created: " first, then keda-rs's
    /// message naming the trigger; any other failure keda-rs's message alone.
    pub fn keda_message(&self) -> String {
        if self.scaler_build_failure().is_some() {
            format!("{}: {self}", events::SCALED_JOB_ENSURE_FAILED)
        } else {
            self.to_string()
        }
    }

    /// The note of KEDA's `KEDAScalerFailed` Warning when a trigger's scaler could not be built
    /// ([`Error::scaler_build_failure`]); `None` for any other failure.
    pub fn scaler_build_failure(&self) -> Option<String> {
        match self {
            ScaledJobError::Scalers(e) => e.scaler_build_failure(),
            ScaledJobError::Finalizer(f) => match f.as_ref() {
                kube::runtime::finalizer::Error::ApplyFailed(e)
                | kube::runtime::finalizer::Error::CleanupFailed(e) => e.scaler_build_failure(),
                _ => None,
            },
            _ => None,
        }
    }

    /// A Kubernetes API error while doing `action`.
    pub fn kube(action: impl Into<String>, source: kube::Error) -> ScaledJobError {
        ScaledJobError::Kube {
            action: action.into(),
            source,
        }
    }

    /// The caught panic behind this error, if it is one.
    pub fn internal(&self) -> Option<&InternalError> {
        match self {
            ScaledJobError::Internal(e) => Some(e),
            ScaledJobError::Scalers(e) => e.internal(),
            ScaledJobError::Finalizer(f) => match f.as_ref() {
                kube::runtime::finalizer::Error::ApplyFailed(e)
                | kube::runtime::finalizer::Error::CleanupFailed(e) => e.internal(),
                _ => None,
            },
            _ => None,
        }
    }
}

/// Builds every scaler of `sj`, as [`crate::shared::scalers::scalers_for`] does for ScaledObjects but
/// with the ScaledJob as the scalable (`ScalableKind::ScaledJob`). On any error the scalers
/// built so far are closed.
///
/// # Errors
/// A trigger needing an `authenticationRef` or `xxxFromEnv` value; a scaler that does not
/// build.
pub async fn scalers_for_job(sj: &ScaledJob, env: &ScalerEnv) -> Result<ObjectScalers, Error> {
    // The inline Job template is the pod source of `*FromEnv` values.
    let source = ScaleTargetPodSource::for_scaled_job(sj);
    Ok(ObjectScalers {
        triggers: build_triggers(&sj.spec.triggers, &source, false, env).await?,
        modifiers: None,
        answers: env
            .pools
            .answer_budgets()
            .budget(sj.metadata.namespace.as_deref().unwrap_or_default()),
    })
}

/// Applies `change` to the ScaledJob's status and patches what differs. The copy in hand
/// (from a watch cache) may lag the writes of the other writer (the reconciler or the loop),
/// and `conditions` is replaced as a whole by a merge patch: so when `change` alters the copy
/// in hand, it is applied again to a fresh read, and only that result is written. Nothing is
/// read or written when `change` alters nothing. Returns whether a patch was sent.
async fn update_status(
    client: &Client,
    sj: &ScaledJob,
    mut change: impl FnMut(&mut ScaledJobStatus),
) -> Result<bool, ScaledJobError> {
    let cached = sj.status.clone().unwrap_or_default();
    let mut desired = cached.clone();
    change(&mut desired);
    if status_patch(&cached, &desired).is_none() {
        return Ok(false);
    }
    let name = sj.name_any();
    let api: Api<ScaledJob> = Api::namespaced(client.clone(), &sj.namespace().unwrap_or_default());
    let fresh = api
        .get_status(&name)
        .await
        .map_err(|e| ScaledJobError::kube(format!("reading the status of ScaledJob {name}"), e))?;
    let current = fresh.status.unwrap_or_default();
    let mut desired = current.clone();
    change(&mut desired);
    let Some(patch) = status_patch(&current, &desired) else {
        return Ok(false);
    };
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| ScaledJobError::kube(format!("updating the status of ScaledJob {name}"), e))?;
    Ok(true)
}

/// The status's conditions, or KEDA's initial ones when it has none.
fn conditions_of(status: &ScaledJobStatus) -> Vec<keda_api::condition::Condition> {
    status
        .conditions
        .clone()
        .filter(|c| !c.is_empty())
        .unwrap_or_else(initial_conditions)
}

struct Context {
    client: Client,
    loops: JobLoops,
    events: Events,
    retry_after_error: Duration,
    resolver: Resolver,
    metrics: Metrics,
}

/// The ScaledJob controller, built before it runs so callers (tests) can hold its
/// [`JobLoops`]. It takes the same [`ControllerConfig`] as the ScaledObject controller.
pub struct ScaledJobController {
    client: Client,
    config: ControllerConfig,
    loops: JobLoops,
    store: Store<ScaledJob>,
    writer: reflector::store::Writer<ScaledJob>,
    resolver: Resolver,
}

impl ScaledJobController {
    /// A controller over `client`.
    pub fn new(client: Client, config: ControllerConfig) -> ScaledJobController {
        let (store, writer) = reflector::store();
        // Like the ScaledObject controller, the ScaledJob controller resolves its triggers'
        // TriggerAuthentications and `*FromEnv` values through a resolver of its own.
        let resolver = Resolver::recording(
            client.clone(),
            config.resolver.clone(),
            config.metrics.clone(),
        );
        let loops = JobLoops::new(
            client.clone(),
            store.clone(),
            crate::shared::loops::LoopConfig {
                env: ScalerEnv {
                    resolver: Some(resolver.clone()),
                    cluster: crate::shared::cluster_view::handle_or_new(
                        &config.env.cluster,
                        &client,
                        &config.watch_scope,
                    ),
                    ..config.env.clone()
                },
                ticks: config.ticks.clone(),
                clock: config.clock.clone(),
                operator_started_at: config
                    .operator_started_at
                    .unwrap_or_else(|| config.clock.now()),
                persist_interval: config.persist_interval,
                watch_scope: config.watch_scope.clone(),
                reporter: config.reporter.clone(),
                events_client: config.events_client.clone(),
                metrics: config.metrics.clone(),
                shards: config.shards.clone(),
            },
        );
        ScaledJobController {
            client,
            config,
            loops,
            store,
            writer,
            resolver,
        }
    }

    /// The job loops (inspection in tests).
    pub fn loops(&self) -> JobLoops {
        self.loops.clone()
    }

    /// Runs until `shutdown` is cancelled, then stops every loop (Jobs keep running).
    ///
    /// # Errors
    /// None today; the signature leaves room for start-up failures.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), ScaledJobError> {
        let scope = self.config.watch_scope.clone();
        let objects = watch_objects(
            &self.client,
            &scope,
            self.config.label_selector.as_deref(),
            self.store.clone(),
            self.writer,
            |_: &mut ScaledJob| {},
            |_: &watcher::Event<ScaledJob>| {},
        );
        let ctx = Arc::new(Context {
            client: self.client.clone(),
            loops: self.loops.clone(),
            events: Events::with_client(
                self.config.events_client.as_ref(),
                &self.client,
                &self.config.reporter,
            )
            .with_cloud_events(self.config.cloud_events.clone()),
            retry_after_error: self.config.retry_after_error,
            resolver: self.resolver.clone(),
            metrics: self.config.metrics.clone(),
        });
        info!(namespaces = ?scope, "ScaledJob controller started");
        let controller = Controller::for_stream(objects, self.store.clone())
            .reconcile_on(rebuilds(&self.resolver, self.loops.clone()))
            // Shards: objects gained are taken, objects lost let go.
            .reconcile_all_on(self.config.shards.changes());
        // A reconcile waits for the Job and pod caches, which never list without RBAC for
        // them: running reconciles get a grace period at shutdown, no more.
        let config = RunConfig {
            concurrency: self.config.max_concurrent_reconciles,
            shutdown_grace: Some(SHUTDOWN_GRACE),
        };
        run(controller, ctx, self.store, &self.loops, config, shutdown).await;
        Ok(())
    }
}

/// Runs the ScaledJob controller until `shutdown` is cancelled: the entry point of the
/// operator binary.
///
/// # Errors
/// See [`ScaledJobController::run`].
pub async fn run_scaled_job_controller(
    client: Client,
    config: ControllerConfig,
    shutdown: CancellationToken,
) -> Result<(), ScaledJobError> {
    ScaledJobController::new(client, config).run(shutdown).await
}

impl Reconciler for Context {
    type Object = ScaledJob;
    type Error = ScaledJobError;
    const KIND: ResourceKind = ResourceKind::ScaledJob;

    fn client(&self) -> &Client {
        &self.client
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    fn resolver(&self) -> &Resolver {
        &self.resolver
    }

    fn triggers(object: &ScaledJob) -> &[keda_api::ScaleTrigger] {
        &object.spec.triggers
    }

    fn internal(error: InternalError) -> ScaledJobError {
        ScaledJobError::Internal(error)
    }

    fn finalizer_failed(error: kube::runtime::finalizer::Error<ScaledJobError>) -> ScaledJobError {
        ScaledJobError::Finalizer(Box::new(error))
    }

    async fn apply(&self, sj: &ScaledJob) -> Result<Action, ScaledJobError> {
        apply_inner(sj, self).await
    }

    async fn cleanup(&self, sj: &ScaledJob) -> Result<Action, ScaledJobError> {
        cleanup(sj, self).await
    }

    async fn report_failure(&self, sj: &ScaledJob, error: &ScaledJobError) {
        report_failure(sj, error, self).await;
    }

    fn reconciled(&self, uid: &str) {
        self.loops.reconciled(uid);
    }

    fn shards(&self) -> &crate::shared::ownership::Shards {
        &self.loops.config().shards
    }

    async fn let_go(&self, sj: &ScaledJob, linger: Duration) -> Option<Duration> {
        self.loops.let_go(sj, linger).await
    }

    fn owned(&self, uid: &str) {
        self.loops.owned(uid);
    }

    fn retry_after_error(&self) -> Duration {
        self.retry_after_error
    }
}

async fn apply_inner(sj: &ScaledJob, ctx: &Context) -> Result<Action, ScaledJobError> {
    validate_scaled_job(sj)?;
    let cached = conditions_of(&sj.status.clone().unwrap_or_default());
    let was_paused = find_condition(&cached, CONDITION_PAUSED).is_some_and(|c| c.is_true());
    let triggers_types = join_unique(sj.spec.triggers.iter().map(|t| t.type_.as_str()));
    let authentications_types = join_unique(
        sj.spec
            .triggers
            .iter()
            .filter_map(|t| t.authentication_ref.as_ref().map(|a| a.name.as_str())),
    );
    let types = |status: &mut ScaledJobStatus| {
        status.triggers_types.clone_from(&triggers_types);
        status
            .authentications_types
            .clone_from(&authentications_types);
    };

    if sj.is_paused() {
        ctx.loops.stop(sj).await;
        update_status(&ctx.client, sj, |status| {
            types(status);
            let mut conditions = conditions_of(status);
            set_condition(
                &mut conditions,
                CONDITION_PAUSED,
                STATUS_TRUE,
                keda_reason::SCALED_JOB_PAUSED,
                message::SCALED_JOB_PAUSED,
            );
            status.conditions = Some(conditions);
            status.paused = Some("true".to_string());
        })
        .await?;
        if !was_paused {
            info!(
                namespace = sj.namespace(),
                name = sj.name_any(),
                "ScaledJob paused"
            );
            ctx.events
                .publish_on(
                    sj,
                    false,
                    SCALED_JOB_PAUSED,
                    message::SCALED_JOB_PAUSED.to_string(),
                )
                .await;
        }
        return Ok(Action::await_change());
    }

    // A new generation with the immediate rollout replaces the Jobs of older generations.
    ctx.loops.caches_ready().await;
    let generation = sj.metadata.generation.unwrap_or_default();
    let jobs = ctx.loops.jobs_with_generation(sj);
    let outdated = rollout_to_delete(
        jobs.iter().map(|(n, g)| (n.as_str(), g.as_deref())),
        generation,
        sj.spec.rollout_strategy(),
    );
    if !outdated.is_empty() {
        info!(namespace = sj.namespace(), name = sj.name_any(), jobs = ?outdated, "deleting the Jobs of previous generations");
        let n = outdated.len();
        ctx.events
            .publish_on(
                sj,
                false,
                SCALED_JOB_ROLLOUT_CLEANUP_STARTED,
                format!("Deleting {n} jobs owned by the previous version of the scaledJob"),
            )
            .await;
        let deleted = ctx
            .loops
            .delete_jobs(sj, &outdated, sj.spec.rollout_propagation_foreground())
            .await;
        match &deleted {
            Ok(()) => {
                ctx.events
                    .publish_on(
                        sj,
                        false,
                        SCALED_JOB_ROLLOUT_CLEANUP_COMPLETED,
                        format!("Deleted {n} jobs owned by the previous version of the scaledJob"),
                    )
                    .await;
            }
            Err(e) => {
                ctx.events
                    .publish_on(sj, true, SCALED_JOB_ROLLOUT_CLEANUP_FAILED, e.to_string())
                    .await;
            }
        }
        deleted?;
    }

    let (scalers, started) = ctx.loops.ensure(sj).await?;
    if started {
        for t in &scalers.triggers {
            ctx.events
                .publish_on(
                    sj,
                    false,
                    events::KEDA_SCALERS_STARTED,
                    format!("Scaler {} is built", t.trigger_type),
                )
                .await;
        }
    }
    // KEDA's status.externalMetricNames: every External metric, in trigger order.
    let metric_names: Vec<String> = scalers
        .triggers
        .iter()
        .flat_map(|t| t.external_metric_names().map(str::to_string))
        .collect();
    let metric_names = (!metric_names.is_empty()).then_some(metric_names);
    let mut became_ready = false;
    update_status(&ctx.client, sj, |status| {
        types(status);
        status.external_metric_names.clone_from(&metric_names);
        let mut conditions = conditions_of(status);
        set_condition(
            &mut conditions,
            CONDITION_PAUSED,
            STATUS_FALSE,
            keda_reason::SCALED_JOB_UNPAUSED,
            message::SCALED_JOB_UNPAUSED,
        );
        status.paused = None;
        let ready = find_condition(&conditions, CONDITION_READY);
        // PartialTriggerError and InternalError belong to the loop, which clears them when a
        // poll succeeds.
        let loop_owned = ready.is_some_and(|c| loops::loop_owned_ready(c.reason.as_deref()));
        became_ready = !ready.is_some_and(|c| c.is_true()) && !loop_owned;
        if became_ready {
            set_condition(
                &mut conditions,
                CONDITION_READY,
                STATUS_TRUE,
                keda_reason::SCALED_JOB_READY,
                READY_MESSAGE,
            );
        }
        status.conditions = Some(conditions);
    })
    .await?;
    if was_paused {
        ctx.events
            .publish_on(
                sj,
                false,
                SCALED_JOB_UNPAUSED,
                message::SCALED_JOB_UNPAUSED.to_string(),
            )
            .await;
    }
    if became_ready {
        ctx.events
            .publish_on(
                sj,
                false,
                SCALED_JOB_READY,
                events::SCALED_JOB_READY_NOTE.to_string(),
            )
            .await;
    }
    Ok(Action::await_change())
}

async fn report_failure(sj: &ScaledJob, e: &ScaledJobError, ctx: &Context) {
    let ns = sj.namespace().unwrap_or_default();
    let name = sj.name_any();
    let reason = match e.internal() {
        Some(internal) => {
            recording::internal_panic(
                &ctx.metrics,
                ResourceKind::ScaledJob,
                (&ns, &name),
                internal,
            );
            INTERNAL_ERROR
        }
        None => {
            warn!(namespace = ns, name, error = %e, "ScaledJob check failed");
            keda_reason::SCALED_JOB_CHECK_FAILED
        }
    };
    let message = e.keda_message();
    let written = update_status(&ctx.client, sj, |status| {
        let mut conditions = conditions_of(status);
        set_condition(
            &mut conditions,
            CONDITION_READY,
            STATUS_FALSE,
            reason,
            &message,
        );
        status.conditions = Some(conditions);
    })
    .await;
    if let Err(e) = written {
        warn!(namespace = ns, name, error = %e, "writing the failure to the status failed");
    }
    if let Some(note) = e.scaler_build_failure() {
        ctx.events
            .publish_on(sj, true, events::KEDA_SCALER_FAILED, note)
            .await;
    }
    ctx.events
        .publish_on(sj, true, SCALED_JOB_CHECK_FAILED, message)
        .await;
}

/// Deletion: the loop stops; the Jobs go with the ScaledJob through their owner reference.
async fn cleanup(sj: &ScaledJob, ctx: &Context) -> Result<Action, ScaledJobError> {
    ctx.loops.forget(sj).await;
    ctx.resolver.forget(&ScalableRef::new(
        ScalableKind::ScaledJob,
        sj.namespace().unwrap_or_default(),
        sj.name_any(),
    ));
    ctx.events
        .publish_on(
            sj,
            true,
            SCALED_JOB_DELETED,
            "ScaledJob was deleted".to_string(),
        )
        .await;
    Ok(Action::await_change())
}

/// The ScaledJob controller as a leader-only component of the operator binary, over the
/// namespaces of `base` (`WATCH_NAMESPACE`) and its label selector (`WATCH_LABEL_SELECTOR`),
/// with `base.scaled_job_max_concurrent_reconciles` reconciles at once
/// (`KEDA_SCALEDJOB_CTRL_MAX_RECONCILES`, KEDA's default 1).
pub fn leader_task(
    client: Client,
    base: ControllerConfig,
) -> Arc<dyn crate::process::run::LeaderTask> {
    let config = ControllerConfig {
        max_concurrent_reconciles: base.scaled_job_max_concurrent_reconciles,
        ..base
    };
    Arc::new(crate::process::run::FnTask::new(
        "scaledjob-controller",
        move |cancel: CancellationToken| {
            let run = run_scaled_job_controller(client.clone(), config.clone(), cancel);
            async move {
                run.await
                    .map_err(|e| Box::new(e) as crate::process::run::TaskError)
            }
        },
    ))
}
