//! The job loops: one task per ScaledJob, polling its scalers and creating Jobs.
//!
//! [`JobLoops`] is the shared loop machinery ([`crate::shared::loops`]) over [`ScaledJobs`]: one loop
//! per ScaledJob UID started for its generation. [`JobLoops::ensure`] restarts the loop
//! (closing its scalers) when the generation changed, [`Loops::stop`] ends it on pause,
//! [`Loops::forget`] on deletion.
//!
//! Jobs and their pods are read from two watch caches shared by all loops (Jobs labelled
//! `scaledjob.keda.sh/name`, pods labelled `job-name`), never listed per poll. A cache lags
//! the writes of the loop itself, so the loop remembers the Jobs it created until the cache
//! shows them, and the Jobs it deleted until the cache drops them: a poll right after a
//! creation never creates the same Jobs twice.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use keda_api::annotations::SCALED_JOB_NAME_LABEL;
use keda_api::condition::{
    CONDITION_ACTIVE, CONDITION_READY, STATUS_FALSE, STATUS_TRUE, STATUS_UNKNOWN, find_condition,
    reason as keda_reason,
};
use keda_api::{CompactMap, ScaledJob, TriggerActivityStatus};
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::ScaledJobError;
use super::jobs::{JOB_NAME_LABEL, finished, finished_job, job_for, pod_view};
use crate::process::telemetry::ResourceKind;
use crate::scaled_object::scale_loop::{ReadContext, read_metric};
use crate::scaled_object::snapshot::external_target;
use crate::shared::error::Error;
use crate::shared::events;
use crate::shared::isolation::{INTERNAL_ERROR, InternalError};
use crate::shared::loop_registry::lock;
use crate::shared::loops::{LoopConfig, LoopKind, LoopTask, Loops, PollCounter};
use crate::shared::scalers::{ObjectScalers, ScalerEnv};
use crate::shared::status::set_condition;
use crate::shared::watch::{Listed, scoped_watcher};
use keda_decide::job::{
    JobCounts, ScalerJobMetrics, Strategy, combine, history_to_delete, is_pending, jobs_to_create,
};

/// `KEDAJobsCreated`: the event of every poll that creates Jobs.
pub const KEDA_JOBS_CREATED: &str = "KEDAJobsCreated";
/// `KEDAJobCreateFailed`: the Warning of a Job the API server refused.
pub const KEDA_JOB_CREATE_FAILED: &str = "KEDAJobCreateFailed";
/// `ScaledJobActive`: the ScaledJob became active.
pub const SCALED_JOB_ACTIVE: &str = "ScaledJobActive";
/// `ScaledJobInactive`: the ScaledJob became inactive (or was first seen inactive).
pub const SCALED_JOB_INACTIVE: &str = "ScaledJobInactive";
/// KEDA's message of `Active=True` and of `ScaledJobActive`.
const ACTIVE_MESSAGE: &str = "Scaling is performed because triggers are active";
/// KEDA's message of `Active=False` and of `ScaledJobInactive`.
const INACTIVE_MESSAGE: &str = "Scaling is not performed because triggers are not active";
/// KEDA's message of `Ready=Unknown PartialTriggerError`: some trigger failed, another is active.
const PARTIAL_TRIGGER_ERROR_MESSAGE: &str =
    "Some triggers defined in ScaledJob are not working correctly";
/// KEDA's message of `Ready=False TriggerError`: a trigger failed and none is active.
const TRIGGER_ERROR_MESSAGE: &str = "Triggers defined in ScaledJob are not working correctly";

/// What the operator remembers about a ScaledJob across loop restarts.
#[derive(Default)]
pub struct Memory {
    last_active: Option<Timestamp>,
    persisted_at: Option<Timestamp>,
    /// Jobs created by the loop that the cache does not show yet.
    created: BTreeSet<String>,
    /// Jobs deleted by the operator that the cache still shows.
    deleted: BTreeSet<String>,
    polls: PollCounter,
}

type SharedMemory = Arc<Mutex<Memory>>;

/// The ScaledJob side of [`Loops`]: the Job and pod caches its polls read.
pub struct ScaledJobs {
    jobs: Store<Job>,
    pods: Store<Pod>,
    /// Readiness of the two caches, awaited by every loop ([`Listed`]).
    jobs_listed: Listed,
    pods_listed: Listed,
}

/// The registry of job loops, with the Job and pod caches. Cheap to clone.
pub type JobLoops = Loops<ScaledJobs>;

/// The loop of one ScaledJob.
type Task = LoopTask<ScaledJobs>;

impl LoopKind for ScaledJobs {
    type Object = ScaledJob;
    /// Started for the ScaledJob's generation.
    type Key = Option<i64>;
    type Memory = Memory;
    const KIND: ResourceKind = ResourceKind::ScaledJob;

    fn polls(memory: &mut Memory) -> &mut PollCounter {
        &mut memory.polls
    }

    fn polling_interval(sj: &ScaledJob) -> Duration {
        Duration::from_secs(u64::try_from(sj.spec.polling_interval().max(1)).unwrap_or(30))
    }

    async fn build(sj: &ScaledJob, env: &ScalerEnv) -> Result<ObjectScalers, Error> {
        super::scalers_for_job(sj, env).await
    }

    async fn before_first_poll(loops: &JobLoops) {
        loops.caches_ready().await;
    }

    async fn poll(task: &Task) {
        let Some(sj) = task.object() else {
            return;
        };
        let Err(error) = task.poll_once(&sj).await else {
            return;
        };
        match error.internal() {
            Some(internal) => task.set_internal_error(&sj, internal).await,
            None => {
                warn!(namespace = sj.namespace(), name = sj.name_any(), error = %error, "job poll failed");
            }
        }
    }

    async fn poll_panicked(task: &Task, error: InternalError) {
        if let Some(sj) = task.object() {
            task.set_internal_error(&sj, &error).await;
        }
    }
}

impl JobLoops {
    /// Loops over `client`, reading ScaledJobs from `scaled_jobs` (the controller's reflector).
    /// Starts the Job and pod watch caches; they run until [`JobLoops::stop_all`].
    pub fn new(client: Client, scaled_jobs: Store<ScaledJob>, config: LoopConfig) -> JobLoops {
        let shutdown = CancellationToken::new();
        let jobs = cache::<Job>(&client, &config, SCALED_JOB_NAME_LABEL, &shutdown);
        let pods = cache::<Pod>(&client, &config, JOB_NAME_LABEL, &shutdown);
        let kind = ScaledJobs {
            jobs_listed: Listed::of(jobs.clone(), shutdown.clone()),
            pods_listed: Listed::of(pods.clone(), shutdown.clone()),
            jobs,
            pods,
        };
        Loops::with_kind(client, scaled_jobs, config, shutdown, kind)
    }

    /// Makes sure a loop runs for `sj` at its current generation (rebuilt after
    /// [`rebuild`](Self::rebuild)) and returns its scalers and whether it was (re)started.
    ///
    /// # Errors
    /// The scalers cannot be built (the old loop is stopped all the same).
    pub async fn ensure(
        &self,
        sj: &ScaledJob,
    ) -> Result<(Arc<ObjectScalers>, bool), ScaledJobError> {
        Ok(self.ensure_for(sj, sj.metadata.generation).await?)
    }

    /// The running and pending Jobs of `sj` as the next poll will count them (caches plus the
    /// Jobs created or deleted but not yet seen there).
    pub fn counts(&self, sj: &ScaledJob) -> JobCounts {
        let memory = self.memory(&sj.uid().unwrap_or_default());
        self.count(sj, &memory)
    }

    fn owned_jobs(&self, sj: &ScaledJob) -> Vec<Arc<Job>> {
        let ns = sj.namespace();
        let name = sj.name_any();
        self.kind()
            .jobs
            .state()
            .into_iter()
            .filter(|j| j.namespace() == ns && j.labels().get(SCALED_JOB_NAME_LABEL) == Some(&name))
            .collect()
    }

    fn count(&self, sj: &ScaledJob, memory: &SharedMemory) -> JobCounts {
        let jobs = self.owned_jobs(sj);
        let mut m = lock(memory);
        let cached: BTreeSet<String> = jobs.iter().map(|j| j.name_any()).collect();
        m.created.retain(|n| !cached.contains(n));
        m.deleted.retain(|n| cached.contains(n));
        let conditions: Vec<String> = sj
            .spec
            .scaling_strategy
            .as_ref()
            .and_then(|s| s.pending_pod_conditions.clone())
            .unwrap_or_default();
        let pods = self.kind().pods.state();
        let mut counts = JobCounts::default();
        for job in jobs.iter().filter(|j| !m.deleted.contains(&j.name_any())) {
            if finished(job).is_some() {
                continue;
            }
            counts.running += 1;
            let views: Vec<_> = pods
                .iter()
                .filter(|p| {
                    p.namespace() == job.namespace()
                        && p.labels().get(JOB_NAME_LABEL) == Some(&job.name_any())
                })
                .map(|p| pod_view(p))
                .collect();
            if is_pending(&views, &conditions) {
                counts.pending += 1;
            }
        }
        // Created Jobs the cache has not shown yet have no pod: running and pending.
        let unseen = i64::try_from(m.created.len()).unwrap_or(i64::MAX);
        counts.running += unseen;
        counts.pending += unseen;
        counts
    }

    /// Deletes `names` (Jobs of `sj`), remembering them until the cache drops them. A Job
    /// already gone is not an error.
    pub(crate) async fn delete_jobs(
        &self,
        sj: &ScaledJob,
        names: &[String],
        foreground: bool,
    ) -> Result<(), ScaledJobError> {
        if names.is_empty() {
            return Ok(());
        }
        let ns = sj.namespace().unwrap_or_default();
        let api: Api<Job> = Api::namespaced(self.client().clone(), &ns);
        let params = if foreground {
            DeleteParams::foreground()
        } else {
            DeleteParams::background()
        };
        let memory = self.memory(&sj.uid().unwrap_or_default());
        for name in names {
            match api.delete(name, &params).await {
                Ok(_) => {}
                Err(e) if crate::shared::error::is_not_found(&e) => {}
                Err(source) => {
                    return Err(ScaledJobError::DeleteJob {
                        name: name.clone(),
                        source,
                    });
                }
            }
            lock(&memory).deleted.insert(name.clone());
        }
        Ok(())
    }

    /// Every Job of `sj` in the cache, with its generation annotation (for the rollout).
    pub(crate) fn jobs_with_generation(&self, sj: &ScaledJob) -> Vec<(String, Option<String>)> {
        self.owned_jobs(sj)
            .iter()
            .map(|j| (j.name_any(), super::jobs::generation(j).map(str::to_string)))
            .collect()
    }

    /// Waits until the Job and pod caches have listed once.
    pub async fn caches_ready(&self) {
        self.kind().jobs_listed.wait().await;
        self.kind().pods_listed.wait().await;
    }
}

fn cache<K>(
    client: &Client,
    config: &LoopConfig,
    label: &str,
    shutdown: &CancellationToken,
) -> Store<K>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    let stream = scoped_watcher(
        client,
        &config.watch_scope,
        &watcher::Config::default().labels(label).any_semantic(),
        store.clone(),
    )
    .reflect(writer)
    .applied_objects();
    let token = shutdown.clone();
    tokio::spawn(async move {
        let drain = stream.for_each(|_| async {});
        tokio::select! {
            () = drain => {}
            () = token.cancelled() => {}
        }
    });
    store
}

/// Whether a Ready reason belongs to the job loop (`TriggerError`, `PartialTriggerError`,
/// `InternalError`): the loop clears it with its next good poll, and the reconciler leaves it
/// alone.
pub(super) fn loop_owned_ready(reason: Option<&str>) -> bool {
    reason.is_some_and(|r| {
        r == keda_reason::TRIGGER_ERROR
            || r == keda_reason::PARTIAL_TRIGGER_ERROR
            || r == INTERNAL_ERROR
    })
}

impl Task {
    /// Says on the ScaledJob that a poll failed with `error` (`Ready=False InternalError`).
    async fn set_internal_error(&self, sj: &ScaledJob, error: &InternalError) {
        let message = error.to_string();
        let written = super::update_status(self.loops.client(), sj, |status| {
            let mut conditions = super::conditions_of(status);
            set_condition(
                &mut conditions,
                CONDITION_READY,
                STATUS_FALSE,
                INTERNAL_ERROR,
                &message,
            );
            status.conditions = Some(conditions);
        })
        .await;
        if let Err(e) = written {
            warn!(namespace = sj.namespace(), name = sj.name_any(), error = %e, "writing the internal error to the status failed");
        }
    }

    async fn poll_once(&self, sj: &ScaledJob) -> Result<(), ScaledJobError> {
        let ns = sj.namespace().unwrap_or_default();
        let name = sj.name_any();
        let spec = &sj.spec;
        let min = spec.effective_min_replica_count();
        let max = spec.effective_max_replica_count();

        // 1. Per trigger: the sum of its metric values and the average of its targets. Every
        // metric is read as a ScaledObject's is (timeout, panic isolation, KEDA's per-scaler
        // metrics with type="scaledjob"); a ScaledJob has no fallback.
        let ctx = ReadContext {
            kind: ResourceKind::ScaledJob,
            namespace: &ns,
            name: &name,
            fallback: None,
            current_replicas: None,
            ready_replicas: None,
            metrics: self.loops.metrics(),
        };
        let mut per_scaler = Vec::with_capacity(self.scalers.triggers.len());
        let mut activity = CompactMap::new();
        let mut errors = Vec::new();
        let mut internal = Vec::new();
        for t in &self.scalers.triggers {
            let (mut values, mut targets, mut active) = (Vec::new(), Vec::new(), false);
            for ext in t.metric_specs.externals() {
                targets.push(external_target(ext).1);
                let (reading, _) = read_metric(&self.scalers, t, ext, &ctx, None).await;
                values.extend(reading.value);
                active |= reading.active;
                activity.insert(
                    ext.metric.name.clone(),
                    TriggerActivityStatus {
                        is_active: reading.active,
                    },
                );
                if let Some(failure) = reading.failure {
                    debug!(namespace = ns, name, trigger = t.index, error = %failure, "trigger failed");
                    self.loops
                        .events()
                        .publish_on(sj, true, events::KEDA_SCALER_FAILED, failure.clone())
                        .await;
                    errors.push(failure);
                }
                if let Some(i) = reading.internal {
                    internal.push(i.to_string());
                }
            }
            per_scaler.push(ScalerJobMetrics::new(&values, &targets, active, max));
        }
        // A push task that panicked stays down until the loop restarts: Ready says so.
        internal.extend(self.push_panics());
        let combined = combine(&per_scaler, spec.multiple_scalers_calculation(), min, max);

        // 2. How many Jobs, from the running and pending ones.
        let counts = self.loops.count(sj, &self.memory);
        let n = jobs_to_create(combined, Strategy::from_spec(spec), counts, min, max);
        debug!(
            namespace = ns,
            name,
            ?counts,
            ?combined,
            create = n,
            "job poll"
        );
        // Shards: ownership is checked again right before the Jobs are created.
        if n > 0 && self.loops.config().shards.owns(&ns, &name) {
            let api: Api<Job> = Api::namespaced(self.loops.client().clone(), &ns);
            let job = job_for(sj);
            let mut created = 0;
            for _ in 0..n {
                match api.create(&PostParams::default(), &job).await {
                    Ok(j) => {
                        lock(&self.memory).created.insert(j.name_any());
                        created += 1;
                    }
                    Err(e) => {
                        warn!(namespace = ns, name, error = %e, "creating a Job failed");
                        // KEDA's text: the Job's generateName, then the API server's error.
                        let message = format!(
                            "Failed to create job {}: {e}",
                            job.metadata.generate_name.as_deref().unwrap_or_default()
                        );
                        self.loops
                            .events()
                            .publish_on(sj, true, KEDA_JOB_CREATE_FAILED, message)
                            .await;
                    }
                }
            }
            if created > 0 {
                info!(namespace = ns, name, jobs = created, "created jobs");
                self.loops
                    .events()
                    .publish_on(
                        sj,
                        false,
                        KEDA_JOBS_CREATED,
                        format!("Created {created} jobs"),
                    )
                    .await;
            }
        }

        // 3. Status: Active on changes (with KEDA's Events), lastActiveTime sparingly, Ready on
        // trigger errors, the activity of every metric.
        self.write_status(sj, combined.active, activity, &errors, &internal)
            .await?;

        // 4. History limits.
        let finished_jobs: Vec<_> = self
            .loops
            .owned_jobs(sj)
            .iter()
            .filter_map(|j| finished(j).map(|f| finished_job(j, f)))
            .filter(|f| !lock(&self.memory).deleted.contains(&f.name))
            .collect();
        let excess = history_to_delete(
            &finished_jobs,
            spec.successful_jobs_history_limit(),
            spec.failed_jobs_history_limit(),
        );
        if !excess.is_empty() {
            info!(namespace = ns, name, jobs = ?excess, "removing jobs beyond the history limits");
        }
        self.loops.delete_jobs(sj, &excess, false).await
    }

    /// `internal`: the errors of scalers that panicked (also in `errors`).
    async fn write_status(
        &self,
        sj: &ScaledJob,
        active: bool,
        activity: CompactMap<String, TriggerActivityStatus>,
        errors: &[String],
        internal: &[String],
    ) -> Result<(), ScaledJobError> {
        let now = self.loops.config().clock.now();
        let due = {
            let mut m = lock(&self.memory);
            if active {
                m.last_active = Some(now);
            }
            self.loops.config().persist_interval.is_some_and(|every| {
                m.persisted_at
                    .is_none_or(|t| now.duration_since(t) >= every)
            })
        };
        let mut persisted = false;
        // Whether Active changes, as the last (freshest) application of the change saw it.
        let mut transition = false;
        let activity = (!activity.is_empty()).then_some(activity);
        super::update_status(self.loops.client(), sj, |status| {
            let mut conditions = super::conditions_of(status);
            let before = find_condition(&conditions, CONDITION_ACTIVE).map(|c| c.status.clone());
            let was_active = before.as_deref() == Some(STATUS_TRUE);
            // KEDA's RequestJobScale: Active from anything else, Inactive only after Active.
            transition = active != was_active;
            if active {
                set_condition(
                    &mut conditions,
                    CONDITION_ACTIVE,
                    STATUS_TRUE,
                    keda_reason::SCALER_ACTIVE,
                    ACTIVE_MESSAGE,
                );
            } else {
                set_condition(
                    &mut conditions,
                    CONDITION_ACTIVE,
                    STATUS_FALSE,
                    keda_reason::SCALER_NOT_ACTIVE,
                    INACTIVE_MESSAGE,
                );
            }
            let loop_owned = find_condition(&conditions, CONDITION_READY)
                .is_some_and(|c| loop_owned_ready(c.reason.as_deref()));
            if !internal.is_empty() {
                set_condition(
                    &mut conditions,
                    CONDITION_READY,
                    STATUS_FALSE,
                    INTERNAL_ERROR,
                    &internal.join("; "),
                );
            } else if !errors.is_empty() && active {
                set_condition(
                    &mut conditions,
                    CONDITION_READY,
                    STATUS_UNKNOWN,
                    keda_reason::PARTIAL_TRIGGER_ERROR,
                    PARTIAL_TRIGGER_ERROR_MESSAGE,
                );
            } else if !errors.is_empty() {
                set_condition(
                    &mut conditions,
                    CONDITION_READY,
                    STATUS_FALSE,
                    keda_reason::TRIGGER_ERROR,
                    TRIGGER_ERROR_MESSAGE,
                );
            } else if loop_owned {
                set_condition(
                    &mut conditions,
                    CONDITION_READY,
                    STATUS_TRUE,
                    keda_reason::SCALED_JOB_READY,
                    super::READY_MESSAGE,
                );
            }
            status.conditions = Some(conditions);
            status.triggers_activity.clone_from(&activity);
            // lastActiveTime: on becoming active, then at most every persist interval if one is set.
            persisted = active && (!was_active || due || status.last_active_time.is_none());
            if persisted {
                status.last_active_time = Some(Time(now));
            }
        })
        .await?;
        if persisted {
            lock(&self.memory).persisted_at = Some(now);
        }
        if transition {
            let (reason, message) = if active {
                (SCALED_JOB_ACTIVE, ACTIVE_MESSAGE)
            } else {
                (SCALED_JOB_INACTIVE, INACTIVE_MESSAGE)
            };
            self.loops
                .events()
                .publish_on(sj, false, reason, message.to_string())
                .await;
        }
        Ok(())
    }
}
