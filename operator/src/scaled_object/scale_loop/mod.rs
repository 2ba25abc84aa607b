//! The scale loops: one task per ScaledObject, holding its scalers.
//!
//! [`ScaleLoops`] keeps one [`CancellationToken`] per object UID with the (generation, pause
//! and force-activation annotations) it was started for. [`ScaleLoops::ensure`] is called by
//! every reconcile: with the same key it does nothing; with a new generation or changed
//! annotations it cancels the old loop, closes its scalers (releasing shared clients) and
//! starts a fresh one. Deletion and pause stop the loop.
//!
//! A loop polls at once, then on every tick of its [`Ticker`]; push scalers run in their own
//! tasks and an activity of `true` triggers an immediate poll. Each poll reads the target's
//! replicas from a watch cache, applies [`keda_decide::scale::decide`], writes `/scale` only when
//! the decision asks for it, and patches the status only when it changes. `lastActiveTime`
//! lives in memory (surviving loop restarts) and is persisted on Active transitions, and every
//! `persist_interval` when one is set (`--last-active-time-refresh`; none by default, so an
//! object that stays active or inactive costs no write).
//!
//! The same scalers answer the metric service ([`ScaleLoops::metric_values`]): never a second
//! connection.

mod poll;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use keda_api::condition::{
    CONDITION_ACTIVE, CONDITION_FALLBACK, CONDITION_HPA_ACTIVE, CONDITION_READY, STATUS_FALSE,
    STATUS_TRUE, find_condition, reason as keda_reason,
};
use keda_api::{HealthStatus, ScaledObject, ScaledObjectStatus, TriggerActivityStatus};
use keda_scalers::MetricValue;
use kube::api::Api;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

pub use poll::{ReadContext, read_metric};

pub use crate::scaled_object::snapshot::{
    MetricReading, PollResult, external_target, quantity_value,
};
pub use crate::shared::loops::{IntervalTicks, ManualTicks, Ticker, Ticks};

use crate::process::telemetry::ResourceKind;
use crate::scaled_object::hpa::{HpaCache, scaling_active_health};
use crate::scaled_object::metric_map::MetricMap;
use crate::scaled_object::settings::{fallback_spec, loop_annotations, scaling_settings};
use crate::scaled_object::snapshot::{LastPoll, PollSnapshot, TriggerTargets};
use crate::scaled_object::target::{Target, TargetCache};
use crate::shared::error::Error;
use crate::shared::events;
use crate::shared::isolation::{Component, InternalError, catch_panic};
use crate::shared::loop_registry::lock;
use crate::shared::loops::{LoopKind, LoopTask, Loops, PollCounter};
use crate::shared::recording;
use crate::shared::scalers::{ObjectScalers, ScalerEnv, scalers_for};
use crate::shared::status::{apply_updates, conditions_or_initial, patch_status, set_condition};
use keda_decide::fallback::{MetricHealth, any_exceeded};
use keda_decide::formula::COMPOSITE_METRIC_NAME;
use keda_decide::scale::{ConditionType, Observed, decide};

/// What a loop was started for: a change restarts it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoopKey {
    generation: Option<i64>,
    annotations: BTreeMap<String, String>,
    target: Target,
}

/// What the operator remembers about an object across loop restarts.
#[derive(Debug)]
pub struct Memory {
    /// `lastActiveTime` as the loop knows it (may be newer than the persisted one).
    last_active: Option<Timestamp>,
    /// Whether `last_active` was initialised from the status.
    loaded: bool,
    /// When `lastActiveTime` was last written.
    persisted_at: Option<Timestamp>,
    /// Per metric health (fallback).
    health: MetricMap<MetricHealth>,
    /// The last reading of every metric (for `useCachedMetrics`).
    readings: MetricMap<MetricReading>,
    /// Completed polls.
    polls: PollCounter,
    /// What the last complete poll saw and decided, for `keda-rs explain`.
    last_poll: Option<Arc<PollSnapshot>>,
}

impl Default for Memory {
    fn default() -> Self {
        Memory {
            last_active: None,
            loaded: false,
            persisted_at: None,
            health: MetricMap::new(),
            readings: MetricMap::new(),
            polls: PollCounter::default(),
            last_poll: None,
        }
    }
}

pub use crate::shared::loops::LoopConfig;

/// The ScaledObject side of [`Loops`]: the caches its polls read, and the writes of this
/// operator the watch cache has not shown yet.
pub struct ScaledObjects {
    /// The objects' HPAs as the controller's HPA watch last saw them: `HPAActive` is read
    /// from it, never with a GET per poll.
    hpas: HpaCache,
    targets: TargetCache,
    /// What this operator last wrote to each object, by UID, until the watch cache has caught
    /// up with it ([`ScaleLoops::freshest`]).
    written: Mutex<HashMap<String, Arc<ScaledObject>>>,
}

/// The registry of scale loops. Cheap to clone.
pub type ScaleLoops = Loops<ScaledObjects>;

impl LoopKind for ScaledObjects {
    type Object = ScaledObject;
    type Key = LoopKey;
    type Memory = Memory;
    const KIND: ResourceKind = ResourceKind::ScaledObject;

    fn polls(memory: &mut Memory) -> &mut PollCounter {
        &mut memory.polls
    }

    fn polling_interval(so: &ScaledObject) -> Duration {
        Duration::from_secs(u64::try_from(so.spec.polling_interval().max(1)).unwrap_or(30))
    }

    async fn build(so: &ScaledObject, env: &ScalerEnv) -> Result<ObjectScalers, Error> {
        scalers_for(so, env).await
    }

    async fn before_first_poll(_loops: &ScaleLoops) {}

    async fn poll(task: &Task) {
        task.poll_once().await;
    }

    async fn poll_panicked(task: &Task, error: InternalError) {
        let (namespace, name) = task.names();
        recording::scaled_object_error(task.loops.metrics(), namespace, name);
        if let Some(so) = task.object() {
            let so = task.loops.freshest(so);
            task.set_not_ready(&so, keda_reason::INTERNAL_ERROR, &error.to_string())
                .await;
        }
    }

    fn forgotten(&self, uid: &str) {
        lock(&self.written).remove(uid);
    }

    /// A wake-up polls at once while the last poll found every trigger inactive (or none ran
    /// yet): that is when an early read can scale from zero (or from idle). While the source is
    /// active the loop keeps its `pollingInterval`, however busy the source.
    fn wake_wanted(task: &Task) -> bool {
        lock(&task.memory)
            .last_poll
            .as_ref()
            .is_none_or(|p| !p.result.summary.active)
    }

    /// The activity and the metric values (by metric name) of the last poll.
    fn observe(task: &Task) -> Option<crate::shared::loops::adaptive::Observation> {
        let memory = lock(&task.memory);
        let poll = memory.last_poll.as_ref()?;
        Some(crate::shared::loops::adaptive::Observation {
            active: poll.result.summary.active,
            values: poll.result.readings.values().map(|r| r.value).collect(),
        })
    }
}

/// The loop of one ScaledObject.
type Task = LoopTask<ScaledObjects>;

/// Why the metric service got no value.
#[derive(Debug, thiserror::Error)]
pub enum MetricQueryError {
    /// No loop runs for that object (unknown, paused, or not reconciled yet).
    #[error("no scale loop for ScaledObject {namespace}/{name}")]
    NoLoop {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// The object has no metric of that name (KEDA's wording).
    #[error("no matching metrics found for {0}")]
    NoMatchingMetric(String),
    /// The source failed and no fallback applies (KEDA's wording).
    #[error("metric:{metric} encountered error: {error}")]
    Failed {
        /// The metric.
        metric: String,
        /// The error.
        error: String,
    },
}

impl ScaleLoops {
    /// Loops over `client`, reading objects from `store` (the controller's reflector) and
    /// their HPAs' health from `hpas`.
    pub fn new(
        client: Client,
        store: Store<ScaledObject>,
        hpas: HpaCache,
        config: LoopConfig,
    ) -> ScaleLoops {
        let shutdown = CancellationToken::new();
        let targets =
            TargetCache::new(client.clone(), config.watch_scope.clone(), shutdown.clone());
        let kind = ScaledObjects {
            hpas,
            targets,
            written: Mutex::default(),
        };
        Loops::with_kind(client, store, config, shutdown, kind)
    }

    /// The newer of `so` (from the watch cache) and the answer to this operator's last write to
    /// it ([`wrote`](Self::wrote)).
    ///
    /// The reconciler and the loop both patch the status, each from the object it read, and a
    /// status patch replaces whole fields (`conditions`). Read from a cache that has not yet
    /// seen the other's write, each would write its stale view back, and the other would write
    /// again: several writes per new object where one does. The remembered copy is dropped as
    /// soon as the cache holds it or something newer. Resource versions are compared as
    /// numbers, as the API server issues them; one that is not a number is never newer.
    pub fn freshest(&self, so: Arc<ScaledObject>) -> Arc<ScaledObject> {
        let Some(uid) = so.metadata.uid.as_deref() else {
            return so;
        };
        let mut written = lock(&self.kind().written);
        if let Some(w) = written.get(uid) {
            if let (Some(mine), Some(cached)) = (resource_version(w), resource_version(&so))
                && mine > cached
            {
                return w.clone();
            }
            written.remove(uid);
        }
        so
    }

    /// What `keda-rs explain` reads about ScaledObject `namespace/name`: the object as it is
    /// now and its last poll as the loop saw and decided it. `None` when the object is not in
    /// the watch cache (unknown, or not watched by this operator).
    pub fn last_poll(&self, namespace: &str, name: &str) -> Option<LastPoll> {
        let so = self.store().get(&ObjectRef::new(name).within(namespace))?;
        let so = self.freshest(so);
        let snapshot = so
            .metadata
            .uid
            .as_deref()
            .and_then(|uid| lock(&self.memory(uid)).last_poll.clone());
        let config = self.config();
        Some(LastPoll {
            so,
            snapshot,
            now: config.clock.now(),
            operator_started_at: config.operator_started_at,
        })
    }

    /// The watch delivered `so`: forgets a remembered write it has caught up with, so the
    /// copies live only until the watch brings them (see [`freshest`](Self::freshest)).
    pub fn seen(&self, so: &ScaledObject) {
        let Some(uid) = so.metadata.uid.as_deref() else {
            return;
        };
        let mut written = lock(&self.kind().written);
        if let Some(w) = written.get(uid)
            && resource_version(w) <= resource_version(so)
        {
            written.remove(uid);
        }
    }

    /// Remembers the API server's answer to a write of this operator (see
    /// [`freshest`](Self::freshest)).
    pub fn wrote(&self, so: ScaledObject) {
        let (Some(uid), Some(version)) = (so.metadata.uid.clone(), resource_version(&so)) else {
            return;
        };
        let mut written = lock(&self.kind().written);
        if written
            .get(&uid)
            .and_then(|w| resource_version(w))
            .is_none_or(|known| version > known)
        {
            written.insert(uid, Arc::new(so));
        }
    }

    /// The target caches, shared with the reconciler.
    pub fn targets(&self) -> &TargetCache {
        &self.kind().targets
    }

    /// Makes sure a loop runs for `so` as it is now, and returns its scalers. Restarts the loop
    /// when the generation, the pause/force-activation annotations or the target changed, or
    /// after [`rebuild`](Self::rebuild).
    ///
    /// # Errors
    /// The scalers cannot be built (the old loop is stopped all the same).
    pub async fn ensure(
        &self,
        so: &ScaledObject,
        target: &Target,
    ) -> Result<(Arc<ObjectScalers>, bool), Error> {
        let key = LoopKey {
            generation: so.metadata.generation,
            annotations: loop_annotations(so),
            target: target.clone(),
        };
        self.ensure_for(so, key).await
    }

    /// The current value of `metric_name` of ScaledObject `namespace/name`, as the HPA must
    /// be served it: from the loop's own scalers (or its cache with `useCachedMetrics`), with
    /// fallback and `scalingModifiers` applied. Metric names match case-insensitively, as the
    /// metrics API lower-cases them.
    ///
    /// # Errors
    /// See [`MetricQueryError`]. A panic while reading (caught, [`crate::shared::isolation`]) is a
    /// [`MetricQueryError::Failed`] naming the object.
    pub async fn metric_values(
        &self,
        namespace: &str,
        name: &str,
        metric_name: &str,
    ) -> Result<Vec<MetricValue>, MetricQueryError> {
        let read = self.read_metric_values(namespace, name, metric_name);
        match catch_panic(read).await {
            Ok(values) => values,
            Err(panic) => {
                let error = panic.during(
                    Component::MetricService,
                    format!("reading metric {metric_name} of ScaledObject {namespace}/{name}"),
                );
                recording::internal_panic(
                    self.metrics(),
                    ResourceKind::ScaledObject,
                    (namespace, name),
                    &error,
                );
                Err(MetricQueryError::Failed {
                    metric: metric_name.to_string(),
                    error: error.to_string(),
                })
            }
        }
    }

    async fn read_metric_values(
        &self,
        namespace: &str,
        name: &str,
        metric_name: &str,
    ) -> Result<Vec<MetricValue>, MetricQueryError> {
        let found = self.find(namespace, name).await;
        let Some((uid, scalers, LoopKey { target, .. })) = found else {
            return Err(MetricQueryError::NoLoop {
                namespace: namespace.to_string(),
                name: name.to_string(),
            });
        };
        let memory = self.memory(&uid);
        let so = self.store().get(&ObjectRef::new(name).within(namespace));
        let fallback = so.as_deref().and_then(fallback_spec);
        let current = self.kind().targets.current_replicas(&target).await.ok();
        let ctx = ReadContext {
            kind: ResourceKind::ScaledObject,
            namespace,
            name,
            fallback,
            current_replicas: current,
            ready_replicas: self.kind().targets.ready_replicas(&target).await,
            metrics: self.metrics(),
        };
        if scalers.modifiers.is_some() && metric_name.eq_ignore_ascii_case(COMPOSITE_METRIC_NAME) {
            let previous = lock(&memory).health.clone();
            let result = poll::poll(&scalers, &ctx, &previous).await;
            lock(&memory).health.extend(result.health.clone());
            // KEDA's GetScaledObjectMetrics: a failed read makes the HPA's read fail unless a
            // fallback value stands in somewhere (then the composite is that value).
            let fallback_active = result.readings.values().any(|r| r.fallback);
            if !result.summary.errors.is_empty() && (result.composite.is_none() || !fallback_active)
            {
                return Err(MetricQueryError::Failed {
                    metric: metric_name.to_string(),
                    error: result.summary.errors.join("; "),
                });
            }
            return Ok(vec![MetricValue::new(
                COMPOSITE_METRIC_NAME,
                result.composite.unwrap_or(0.0),
            )]);
        }
        for t in &scalers.triggers {
            for ext in t.metric_specs.externals() {
                if !ext.metric.name.eq_ignore_ascii_case(metric_name) {
                    continue;
                }
                let cached = t
                    .use_cached_metrics
                    .then(|| lock(&memory).readings.get(&ext.metric.name).cloned())
                    .flatten();
                let reading = match cached {
                    Some(r) => r,
                    None => {
                        let prev = lock(&memory).health.get(&ext.metric.name).copied();
                        let (r, health) = poll::read_metric(&scalers, t, ext, &ctx, prev).await;
                        if let Some(h) = health {
                            lock(&memory).health.insert(ext.metric.name.clone(), h);
                        }
                        r
                    }
                };
                return match (reading.value, reading.error) {
                    (Some(v), _) => Ok(vec![MetricValue::new(ext.metric.name.clone(), v)]),
                    (None, Some(error)) => Err(MetricQueryError::Failed {
                        metric: ext.metric.name.clone(),
                        error,
                    }),
                    (None, None) => Ok(vec![MetricValue::new(ext.metric.name.clone(), 0.0)]),
                };
            }
        }
        Err(MetricQueryError::NoMatchingMetric(metric_name.to_string()))
    }
}

impl Task {
    /// Writes `Ready=False` with `reason` and `message`, leaving the rest of the status as it is.
    async fn set_not_ready(&self, so: &ScaledObject, reason: &str, message: &str) {
        let current_status = so.status.clone().unwrap_or_default();
        let mut desired = current_status.clone();
        let mut conditions = conditions_or_initial(so.status.as_ref());
        set_condition(
            &mut conditions,
            CONDITION_READY,
            STATUS_FALSE,
            reason,
            message,
        );
        desired.conditions = Some(conditions);
        self.write_status(so, &current_status, &desired).await;
    }

    async fn poll_once(&self) {
        let loops = &self.loops;
        let (kind, config) = (loops.kind(), loops.config());
        let Some(so) = self.object() else {
            return;
        };
        let so = self.loops.freshest(so);
        let namespace = so.namespace().unwrap_or_default();
        let name = so.name_any();
        let now = config.clock.now();
        let current = match kind.targets.current_replicas(&self.key.target).await {
            Ok(n) => n,
            Err(e) => {
                let message = format!(
                    "Error getting current replicas of {}: {e}",
                    self.key.target.describe()
                );
                self.set_not_ready(&so, keda_reason::ERROR_GETTING_CURRENT_REPLICAS, &message)
                    .await;
                return;
            }
        };
        let current_status = so.status.clone().unwrap_or_default();
        let mut desired = current_status.clone();
        let mut conditions = conditions_or_initial(so.status.as_ref());
        let settings = match scaling_settings(&so, &self.key.target) {
            Ok(s) => s,
            // The reconciler reports this and stops the loop.
            Err(_) => return,
        };
        let previous_health = lock(&self.memory).health.clone();
        let ctx = ReadContext {
            kind: ResourceKind::ScaledObject,
            namespace: &namespace,
            name: &name,
            fallback: settings.fallback,
            current_replicas: Some(current),
            ready_replicas: kind.targets.ready_replicas(&self.key.target).await,
            metrics: &config.metrics,
        };
        let result = poll::poll(&self.scalers, &ctx, &previous_health).await;
        // KEDA's Warning for every failed scaler read that no fallback value stands in for; its
        // text is the scaler's error; with scalingModifiers it is `KEDAMetricSourceFailed`.
        let failed_reason = if self.scalers.modifiers.is_some() {
            events::KEDA_METRIC_SOURCE_FAILED
        } else {
            events::KEDA_SCALER_FAILED
        };
        let mut failed: Vec<(usize, &String)> = result
            .readings
            .values()
            .filter_map(|r| r.failure.as_ref().map(|f| (r.trigger_index, f)))
            .collect();
        failed.sort_by_key(|(index, _)| *index);
        for (_, failure) in failed {
            loops
                .events()
                .publish(&so, true, failed_reason, failure.clone())
                .await;
        }

        let last_active = {
            let mut m = lock(&self.memory);
            if !m.loaded {
                m.loaded = true;
                m.last_active = current_status.last_active_time.as_ref().map(|t| t.0);
            }
            m.last_active
        };
        let created_at = so
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(config.operator_started_at, |t| t.0);
        let observed = Observed {
            current_replicas: current,
            last_active_time: last_active,
            created_at,
            operator_started_at: config.operator_started_at,
            now,
        };
        let decision = decide(&settings, &observed, &result.summary);
        let mut new_last_active = decision.last_active_time;
        let mut scale_error = None;
        // Shards: ownership is checked again right before the write (the poll may have taken
        // long enough for a fence or a move to happen since it began).
        let owned = config.shards.owns(&namespace, &name);
        if let Some(write) = decision.scale.as_ref().filter(|_| owned) {
            match self.key.target.set_replicas(loops.client(), write.to).await {
                Ok(()) => {
                    info!(namespace, name, from = write.from, to = write.to, kind = ?write.kind, "scaled target");
                    if let Some(e) = &decision.event {
                        loops.events().publish_decision(&so, e).await;
                    }
                }
                Err(e) => {
                    warn!(namespace, name, error = %e, "scaling the target failed");
                    scale_error = Some(e.to_string());
                    recording::scaled_object_error(&config.metrics, &namespace, &name);
                    new_last_active = last_active;
                    if let Some(ev) = write.failure_event(&settings.target) {
                        loops.events().publish_decision(&so, &ev).await;
                    }
                }
            }
        }
        // A failed scaler read already counted in keda_scaled_object_errors_total
        // (recording::scaler_error), as in KEDA.

        // Status: conditions from the decision, fallback, health, activity, lastActiveTime.
        let was_active = find_condition(&conditions, CONDITION_ACTIVE).is_some_and(|c| c.is_true());
        apply_updates(&mut conditions, &decision.conditions);
        // A scaler that panicked counted as a failed read in the decision; Ready says what it
        // was, naming the trigger.
        // So did a push task that panicked (it stays down until the loop restarts).
        let mut internal: Vec<String> = result
            .readings
            .values()
            .filter_map(|r| r.internal.as_ref().map(ToString::to_string))
            .collect();
        internal.extend(self.push_panics());
        if !internal.is_empty() {
            set_condition(
                &mut conditions,
                CONDITION_READY,
                STATUS_FALSE,
                keda_reason::INTERNAL_ERROR,
                &internal.join("; "),
            );
        }
        let fallback_now = settings
            .fallback
            .filter(|f| f.is_valid(self.scalers.modifiers.as_ref().map(|m| m.target)))
            .is_some_and(|f| any_exceeded(&f, result.health.values()));
        let fallback_before =
            find_condition(&conditions, CONDITION_FALLBACK).is_some_and(|c| c.is_true());
        if fallback_now {
            set_condition(
                &mut conditions,
                CONDITION_FALLBACK,
                STATUS_TRUE,
                keda_reason::FALLBACK_EXISTS,
                "At least one trigger is falling back on this scaled object",
            );
        } else {
            set_condition(
                &mut conditions,
                CONDITION_FALLBACK,
                STATUS_FALSE,
                keda_reason::NO_FALLBACK_FOUND,
                "No fallbacks are active on this scaled object",
            );
        }
        if fallback_now != fallback_before {
            let (reason, message) = if fallback_now {
                (events::FALLBACK_ACTIVATED, "Fallback activated")
            } else {
                (events::FALLBACK_DEACTIVATED, "Fallback deactivated")
            };
            if fallback_now || so.spec.fallback.is_some() {
                loops
                    .events()
                    .publish(&so, fallback_now, reason, message.to_string())
                    .await;
            }
        }
        // HPAActive mirrors the HPA's ScalingActive; while the HPA has not said, it stays as it was.
        if let Some(h) = kind
            .hpas
            .get(&namespace, &so.hpa_name())
            .and_then(|hpa| hpa.scaling_active().map(scaling_active_health))
        {
            set_condition(
                &mut conditions,
                CONDITION_HPA_ACTIVE,
                h.status,
                &h.reason,
                &h.message,
            );
        }
        desired.conditions = Some(conditions);
        desired.health = (!result.health.is_empty()).then(|| {
            result
                .health
                .iter()
                .map(|(k, h)| {
                    (
                        k.clone(),
                        HealthStatus {
                            number_of_failures: Some(h.number_of_failures),
                            status: Some(h.status.as_str().to_string()),
                        },
                    )
                })
                .collect()
        });
        desired.triggers_activity = (!result.readings.is_empty()).then(|| {
            result
                .readings
                .iter()
                .map(|(k, r)| {
                    (
                        k.clone(),
                        TriggerActivityStatus {
                            is_active: r.active,
                        },
                    )
                })
                .collect()
        });
        let now_active = decision
            .condition(ConditionType::Active)
            .is_some_and(|c| c.status == keda_decide::scale::ConditionStatus::True);
        let persist = {
            let m = lock(&self.memory);
            let persisted = current_status.last_active_time.as_ref().map(|t| t.0);
            new_last_active.is_some()
                && new_last_active != persisted
                && (persisted.is_none()
                    || now_active != was_active
                    || config.persist_interval.is_some_and(|every| {
                        m.persisted_at
                            .is_none_or(|at| now.duration_since(at) >= every)
                    }))
        };
        if persist {
            desired.last_active_time = new_last_active.map(Time);
        }
        let polled_active = result.summary.active;
        {
            let mut m = lock(&self.memory);
            m.last_active = new_last_active;
            m.health = result.health.clone();
            m.readings = result.readings.clone();
            m.last_poll = Some(Arc::new(PollSnapshot {
                observed,
                triggers: TriggerTargets::of(&self.scalers),
                settings,
                result,
                decision,
                scale_error,
            }));
        }
        if self.write_status(&so, &current_status, &desired).await && persist {
            lock(&self.memory).persisted_at = Some(now);
        }
        debug!(namespace, name, active = polled_active, current, "polled");
    }

    async fn write_status(
        &self,
        so: &ScaledObject,
        current: &ScaledObjectStatus,
        desired: &ScaledObjectStatus,
    ) -> bool {
        let api: Api<ScaledObject> = Api::namespaced(
            self.loops.client().clone(),
            &so.namespace().unwrap_or_default(),
        );
        match patch_status(&api, &so.name_any(), current, desired).await {
            Ok(Some(written)) => {
                self.loops.wrote(written);
                true
            }
            Ok(None) => false,
            Err(e) => {
                warn!(error = %e, "status update failed");
                false
            }
        }
    }
}

/// `metadata.resourceVersion` as the number the API server issues.
fn resource_version(so: &ScaledObject) -> Option<u64> {
    so.metadata.resource_version.as_deref()?.parse().ok()
}
