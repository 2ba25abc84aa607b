//! One loop machinery for both scalable kinds: the scale loops of ScaledObjects
//! ([`crate::scaled_object::scale_loop`]) and the job loops of ScaledJobs ([`crate::scaled_job`]) are
//! [`Loops`] over a [`LoopKind`] that says only what differs: how a poll acts (write `/scale`
//! or create Jobs), what the kind remembers across restarts, what it waits for before its first
//! poll.
//!
//! Everything else is written once here, so the two kinds cannot drift apart: the registry of
//! running loops ([`LoopRegistry`]), start and stop with their logs, push scalers
//! (an activity of `true` polls at once), the first-poll gate that lets the reconcile that
//! started a loop write its status first, the schedule with `keda_internal_scale_loop_latency_seconds`,
//! the isolation of a poll that panics (`keda_internal_panics_total`), the poll counter tests
//! wait on, and the retirement of a loop whose object vanished in a gap of the watch.

pub mod adaptive;
mod ticks;

pub use ticks::{IntervalTicks, ManualTicks, Spread, Ticker, Ticks, start_offset};

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use keda_scalers::Clock;
use keda_scalers::wake::Wake;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource, ResourceExt};
use tokio::sync::{Notify, mpsc, watch};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use crate::process::telemetry::{Metrics, ResourceKind};
use crate::shared::error::Error;
use crate::shared::events::Events;
use crate::shared::isolation::{Component, InternalError, TriggerRef, catch_panic};
use crate::shared::loop_registry::{LoopRegistry, OnStop, lock};
use crate::shared::recording;
use crate::shared::resolve::WatchScope;
use crate::shared::scalers::{ObjectScalers, ScalerEnv};

/// How the loops of either kind run: time, ticks, and the status write policy.
#[derive(Clone)]
pub struct LoopConfig {
    /// Builds scalers.
    pub env: ScalerEnv,
    /// When loops poll.
    pub ticks: Arc<dyn Ticks>,
    /// "now" for decisions and `lastActiveTime`.
    pub clock: Clock,
    /// When this operator started (the cooldown never counts from earlier after a restart).
    pub operator_started_at: Timestamp,
    /// How often a refreshed `lastActiveTime` is persisted while the object stays active;
    /// `None`: only on Active transitions.
    pub persist_interval: Option<SignedDuration>,
    /// Namespaces watched by the loops' caches (targets, Jobs, pods).
    pub watch_scope: WatchScope,
    /// Event reporter name.
    pub reporter: String,
    /// The client Events are published with; `None`: the loops' client.
    pub events_client: Option<Client>,
    /// Where the Prometheus metrics are recorded.
    pub metrics: Metrics,
    /// Which objects this replica writes for: a loop polls (and so writes) only while its
    /// object is owned here ([`crate::shared::ownership`]).
    pub shards: crate::shared::ownership::Shards,
}

/// The completed polls of one object, and a channel of them made on the first
/// [`subscribe`](Self::subscribe): a watch channel costs about 300 bytes per object, and only
/// tests and tools wait on it.
#[derive(Debug, Default)]
pub struct PollCounter {
    count: u64,
    tx: Option<watch::Sender<u64>>,
}

impl PollCounter {
    /// One more poll completed.
    pub fn completed(&mut self) {
        self.count += 1;
        if let Some(tx) = &self.tx {
            tx.send_replace(self.count);
        }
    }

    /// The number of completed polls, now and as it changes.
    pub fn subscribe(&mut self) -> watch::Receiver<u64> {
        let count = self.count;
        self.tx
            .get_or_insert_with(|| watch::channel(count).0)
            .subscribe()
    }
}

/// How long a new loop waits for the reconcile that started it before it polls anyway.
const FIRST_POLL_GATE: Duration = Duration::from_secs(10);

/// The parts of a loop that differ between ScaledObjects and ScaledJobs. Implemented by the
/// kind's own state (caches the polls read), held by [`Loops`].
pub trait LoopKind: Send + Sync + Sized + 'static {
    /// `ScaledObject` or `ScaledJob`.
    type Object: kube::Resource<DynamicType = ()> + Clone + Send + Sync + 'static;
    /// What a loop was started for: a change restarts it.
    type Key: PartialEq + Clone + Send + Sync + 'static;
    /// What the operator remembers about an object across loop restarts.
    type Memory: Default + Send + 'static;
    /// The `type` label of the kind's metrics.
    const KIND: ResourceKind;

    /// The counter of completed polls in `memory`.
    fn polls(memory: &mut Self::Memory) -> &mut PollCounter;

    /// The object's `pollingInterval`.
    fn polling_interval(object: &Self::Object) -> Duration;

    /// Builds the object's scalers.
    ///
    /// # Errors
    /// A trigger that does not build (names the trigger and parameter).
    fn build(
        object: &Self::Object,
        env: &ScalerEnv,
    ) -> impl Future<Output = Result<ObjectScalers, Error>> + Send;

    /// Awaited once before a loop's first poll (the caches a poll reads have listed).
    fn before_first_poll(loops: &Loops<Self>) -> impl Future<Output = ()> + Send;

    /// One poll. A panic in it is caught by the caller, which then calls
    /// [`poll_panicked`](Self::poll_panicked).
    fn poll(task: &LoopTask<Self>) -> impl Future<Output = ()> + Send;

    /// A poll panicked with `error` (already logged and counted in
    /// `keda_internal_panics_total`): say so on the object.
    fn poll_panicked(
        task: &LoopTask<Self>,
        error: InternalError,
    ) -> impl Future<Output = ()> + Send;

    /// The object of `uid` was forgotten (deleted): drop what the kind keeps about it.
    fn forgotten(&self, _uid: &str) {}

    /// Whether a wake-up of one of the loop's scalers ([`keda_scalers::wake`]) polls now.
    /// Default: never (polled at `pollingInterval` only). A kind that answers `true` only while
    /// an early read can change what it does keeps a busy source from being read on every
    /// notification.
    fn wake_wanted(_task: &LoopTask<Self>) -> bool {
        false
    }

    /// What the last poll saw, for adaptive polling ([`adaptive`]), asked after each poll of a
    /// loop with a trigger that allows it ([`keda_scalers::Scaler::adaptive_polling`]).
    /// Default: `None`, polled at `pollingInterval` only.
    fn observe(_task: &LoopTask<Self>) -> Option<adaptive::Observation> {
        None
    }
}

struct Inner<K: LoopKind> {
    client: Client,
    config: LoopConfig,
    /// The controller's reflector.
    store: Store<K::Object>,
    events: Events,
    registry: LoopRegistry<K::Key, K::Memory>,
    /// Loops started by a reconcile that has not finished, by UID ([`Loops::reconciled`]).
    first_poll_gates: Mutex<HashMap<String, Arc<Notify>>>,
    /// UIDs whose loop has started in this process: only an object's first loop here is
    /// spread ([`LoopTask::start_offset`]); a loop restarted by a change polls at once. The
    /// registry's copies of the UIDs.
    started: Mutex<std::collections::HashSet<Arc<str>>>,
    /// The places of first loops, a sequence per interval and trigger types ([`Spread`]).
    spread: Spread,
    /// Objects this replica no longer owns whose loops still run, by UID: since when.
    lost: Mutex<HashMap<String, tokio::time::Instant>>,
    kind: K,
}

/// The running loops of one kind, with the kind's state. Cheap to clone.
pub struct Loops<K: LoopKind> {
    inner: Arc<Inner<K>>,
}

impl<K: LoopKind> Clone for Loops<K> {
    fn clone(&self) -> Self {
        Loops {
            inner: self.inner.clone(),
        }
    }
}

impl<K: LoopKind> Loops<K> {
    /// Loops over `client`, reading objects from `store` (the controller's reflector).
    /// `shutdown` is cancelled by [`stop_all`](Self::stop_all): the kind's caches stop with it.
    pub(crate) fn with_kind(
        client: Client,
        store: Store<K::Object>,
        config: LoopConfig,
        shutdown: CancellationToken,
        kind: K,
    ) -> Self {
        let events = Events::with_client(config.events_client.as_ref(), &client, &config.reporter);
        let on_stop: OnStop = Box::new(move |namespace, name, _scalers| {
            info!(namespace, name, kind = K::KIND.kind(), "loop stopped");
        });
        Loops {
            inner: Arc::new(Inner {
                client,
                config,
                store,
                events,
                registry: LoopRegistry::new(shutdown, on_stop),
                first_poll_gates: Mutex::default(),
                started: Mutex::default(),
                spread: Spread::default(),
                lost: Mutex::default(),
                kind,
            }),
        }
    }

    /// The kind's own state.
    pub(crate) fn kind(&self) -> &K {
        &self.inner.kind
    }

    /// The loops' client.
    pub(crate) fn client(&self) -> &Client {
        &self.inner.client
    }

    /// How the loops run.
    pub(crate) fn config(&self) -> &LoopConfig {
        &self.inner.config
    }

    /// Where the loops record metrics.
    pub(crate) fn metrics(&self) -> &Metrics {
        &self.inner.config.metrics
    }

    /// The loops' Events.
    pub(crate) fn events(&self) -> &Events {
        &self.inner.events
    }

    /// The controller's reflector.
    pub(crate) fn store(&self) -> &Store<K::Object> {
        &self.inner.store
    }

    /// The memory of `uid`, created empty on first use.
    pub(crate) fn memory(&self, uid: &str) -> Arc<Mutex<K::Memory>> {
        self.inner.registry.memory(uid)
    }

    /// The UID, scalers and key of the loop of `namespace/name`.
    pub(crate) async fn find(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<(String, Arc<ObjectScalers>, K::Key)> {
        self.inner.registry.find(namespace, name).await
    }

    /// Makes sure a loop runs for `object` started for `key`, and returns its scalers and
    /// whether it was (re)started: with the same key (and no pending
    /// [`rebuild`](Self::rebuild)) nothing happens; otherwise the old loop stops (its scalers
    /// closed) and a new one starts with freshly built scalers.
    ///
    /// # Errors
    /// The scalers cannot be built (the old loop is stopped all the same).
    pub(crate) async fn ensure_for(
        &self,
        object: &K::Object,
        key: K::Key,
    ) -> Result<(Arc<ObjectScalers>, bool), Error> {
        let namespace = object.namespace().unwrap_or_default();
        let name = object.name_any();
        let uid = object.uid().unwrap_or_default();
        let interval = K::polling_interval(object);
        let env = &self.inner.config.env;
        let was_running = self.inner.registry.is_running(&namespace, &name).await;
        let ensured = self
            .inner
            .registry
            .ensure(
                &uid,
                (&namespace, &name),
                key.clone(),
                async || K::build(object, env).await,
                |start| {
                    let gate = Arc::new(Notify::new());
                    lock(&self.inner.first_poll_gates).insert(uid.clone(), gate.clone());
                    let task = LoopTask {
                        loops: self.clone(),
                        interval,
                        object_ref: ObjectRef::new(&name).within(&namespace),
                        uid: start.uid,
                        key,
                        push: start
                            .scalers
                            .triggers
                            .iter()
                            .any(|t| t.scaler.push().is_some())
                            .then(Arc::default),
                        scalers: start.scalers,
                        memory: start.memory,
                        token: start.token,
                        first_poll: gate,
                    };
                    tokio::spawn(task.run(self.inner.config.ticks.ticker(interval)))
                },
            )
            .await;
        // What this build's resolution found missing (resolved as KEDA does), also when the
        // build then failed: the missing Secret is often why.
        self.publish_missing(object, &namespace, &name).await;
        // KEDA's KEDA_CHECK_UNEXPECTED_SCALERS_PARAMS Warnings of this build, also when it then
        // failed (KEDA checks when the trigger's metadata parsed, before connecting).
        self.publish_unexpected_params(object, &namespace, &name)
            .await;
        let (scalers, started) = ensured?;
        if started && !was_running {
            // KEDA's HandleScalableObject, for a loop that did not run (not on a restart).
            self.inner
                .events
                .publish_action(
                    object,
                    false,
                    crate::shared::events::KEDA_SCALERS_STARTED,
                    crate::shared::events::SCALERS_WATCH_STARTED,
                    crate::shared::events::SCALERS_STARTED_NOTE.to_string(),
                )
                .await;
        }
        if started {
            info!(
                namespace,
                name,
                kind = K::KIND.kind(),
                ?interval,
                "loop started"
            );
            self.publish_owned().await;
        }
        Ok((scalers, started))
    }

    /// The Warning Events for what the last resolution of `object`'s triggers found missing
    /// ([`crate::shared::resolve::Missing`]); nothing when no build ran since the last call.
    async fn publish_missing(&self, object: &K::Object, namespace: &str, name: &str) {
        let Some(resolver) = &self.inner.config.env.resolver else {
            return;
        };
        let scalable =
            crate::shared::resolve::ScalableRef::new(Self::scalable_kind(), namespace, name);
        let missing = resolver.take_missing(&scalable);
        if !missing.is_empty() {
            self.inner.events.publish_missing(object, &missing).await;
        }
    }

    /// The Warning `KEDAScalerInfo` Events for the trigger metadata keys the last build of
    /// `object`'s scalers found unread ([`crate::shared::unexpected_params`]); nothing when the
    /// check is off or no build ran since the last call.
    async fn publish_unexpected_params(&self, object: &K::Object, namespace: &str, name: &str) {
        let scalable =
            crate::shared::resolve::ScalableRef::new(Self::scalable_kind(), namespace, name);
        for unmatched in self.inner.config.env.unexpected_params.take(&scalable) {
            tracing::warn!(
                namespace,
                name,
                kind = K::KIND.kind(),
                note = unmatched.note,
                "unexpected trigger parameter"
            );
            self.inner
                .events
                .publish_action(
                    object,
                    true,
                    crate::shared::unexpected_params::KEDA_SCALER_INFO,
                    &unmatched.action,
                    unmatched.note,
                )
                .await;
        }
    }

    /// The scalers' name for this kind.
    fn scalable_kind() -> keda_scalers::ScalableKind {
        match K::KIND {
            ResourceKind::ScaledObject => keda_scalers::ScalableKind::ScaledObject,
            ResourceKind::ScaledJob => keda_scalers::ScalableKind::ScaledJob,
        }
    }

    /// Marks the loop of `namespace/name` for a rebuild: the next ensure restarts it with
    /// freshly built scalers even though the object did not change (a Secret or
    /// TriggerAuthentication its triggers read changed). The running loop keeps polling until
    /// then.
    pub async fn rebuild(&self, namespace: &str, name: &str) {
        self.inner.registry.rebuild(namespace, name).await;
    }

    /// The reconcile of `uid` finished: a loop it started may poll for the first time.
    ///
    /// A new loop waits for this (at most [`FIRST_POLL_GATE`]), so that its first status write
    /// comes after the reconciler's and builds on it: started together, both wrote the whole
    /// `conditions` list from the same empty status, and each undid the other's part.
    pub fn reconciled(&self, uid: &str) {
        if let Some(gate) = lock(&self.inner.first_poll_gates).remove(uid) {
            gate.notify_one();
        }
    }

    /// Stops the loop of `uid` (pause), keeping what is remembered about the object.
    /// When a loop ran, KEDA's `KEDAScalersStopped` "Stopped scalers watch" goes on the object
    /// (KEDA's `DeleteScalableObject`).
    pub async fn stop(&self, object: &K::Object) {
        let uid = object.uid().unwrap_or_default();
        if self.inner.registry.stop(&uid).await {
            self.scalers_stopped(object).await;
        }
    }

    /// Stops the loop of `object` and forgets it (deletion), with KEDA's `KEDAScalersStopped`
    /// when a loop ran.
    pub async fn forget(&self, object: &K::Object) {
        let uid = object.uid().unwrap_or_default();
        self.inner.kind.forgotten(&uid);
        lock(&self.inner.started).remove(uid.as_str());
        if self.inner.registry.forget(&uid).await {
            self.scalers_stopped(object).await;
        }
    }

    /// [`forget`](Self::forget) of an object no longer there (no Event).
    async fn forget_uid(&self, uid: &str) {
        self.inner.kind.forgotten(uid);
        lock(&self.inner.started).remove(uid);
        self.inner.registry.forget(uid).await;
    }

    async fn scalers_stopped(&self, object: &K::Object) {
        self.inner
            .events
            .publish_on(
                object,
                false,
                crate::shared::events::KEDA_SCALERS_STOPPED,
                crate::shared::events::SCALERS_STOPPED_NOTE.to_string(),
            )
            .await;
    }

    /// Lets go of `object`, which this replica does not own (shards): its loop, if one runs,
    /// keeps serving metric reads without polling (so without writing) for `linger`, so the new
    /// owner has started before it stops; then it stops (no Event: the object is not this
    /// replica's to write to). Returns when to look again, `None` when no loop runs any more.
    pub(crate) async fn let_go(&self, object: &K::Object, linger: Duration) -> Option<Duration> {
        let uid = object.uid().unwrap_or_default();
        let namespace = object.namespace().unwrap_or_default();
        let name = object.name_any();
        if !self.inner.registry.is_running(&namespace, &name).await {
            lock(&self.inner.lost).remove(&uid);
            return None;
        }
        let now = tokio::time::Instant::now();
        let since = *lock(&self.inner.lost).entry(uid.clone()).or_insert(now);
        let left = linger.saturating_sub(now.saturating_duration_since(since));
        if !left.is_zero() {
            return Some(left);
        }
        lock(&self.inner.lost).remove(&uid);
        if self.inner.registry.stop(&uid).await {
            info!(
                namespace,
                name,
                kind = K::KIND.kind(),
                "shards: loop stopped, the object belongs to another replica"
            );
        }
        self.publish_owned().await;
        None
    }

    /// `uid` is owned here (again): it is not being let go.
    pub(crate) fn owned(&self, uid: &str) {
        lock(&self.inner.lost).remove(uid);
    }

    /// `keda_rs_shard_owned_objects` of this kind's loops (shards only).
    pub(crate) async fn publish_owned(&self) {
        if let crate::shared::ownership::Shards::Leased(view) = &self.inner.config.shards {
            let me = view.borrow().me.clone();
            let running = self.inner.registry.len().await;
            let lingering = lock(&self.inner.lost).len();
            self.metrics()
                .set_shard_owned(&me, running.saturating_sub(lingering));
        }
    }

    /// Stops every loop and the kind's caches (shutdown). Targets keep their replicas, Jobs
    /// keep running.
    pub async fn stop_all(&self) {
        self.inner.registry.stop_all().await;
    }

    /// Whether a loop runs for `namespace/name`.
    pub async fn is_running(&self, namespace: &str, name: &str) -> bool {
        self.inner.registry.is_running(namespace, name).await
    }

    /// How many loops run.
    pub async fn len(&self) -> usize {
        self.inner.registry.len().await
    }

    /// Whether no loop runs.
    pub async fn is_empty(&self) -> bool {
        self.len().await == 0
    }

    /// A receiver of the number of completed polls of the object with this UID.
    pub fn polls(&self, uid: &str) -> watch::Receiver<u64> {
        K::polls(&mut lock(&self.memory(uid))).subscribe()
    }
}

/// One running loop: what its kind's [`LoopKind::poll`] gets.
pub struct LoopTask<K: LoopKind> {
    /// The loops it belongs to.
    pub(crate) loops: Loops<K>,
    /// Its `pollingInterval`.
    interval: Duration,
    /// The object, in the controller's reflector.
    pub(crate) object_ref: ObjectRef<K::Object>,
    /// The UID of the object this loop was started for (the registry's copy).
    pub(crate) uid: Arc<str>,
    /// What it was started for.
    pub(crate) key: K::Key,
    /// Its scalers.
    pub(crate) scalers: Arc<ObjectScalers>,
    /// The object's memory.
    pub(crate) memory: Arc<Mutex<K::Memory>>,
    /// Cancelled when the loop must stop.
    pub(crate) token: CancellationToken,
    /// Opened by [`Loops::reconciled`].
    first_poll: Arc<Notify>,
    /// The panics of its push tasks; `None` when it has no push scaler (most loops: two
    /// allocations fewer each).
    push: Option<Arc<PushPanics>>,
}

/// The push tasks of one loop that panicked.
#[derive(Default)]
struct PushPanics {
    /// By trigger index: their messages. The kind's poll reports them as an internal error
    /// until the loop restarts ([`LoopTask::push_panics`]).
    messages: Mutex<BTreeMap<usize, String>>,
    /// Wakes the loop for a poll when a push task panicked.
    panicked: Notify,
}

impl<K: LoopKind> LoopTask<K> {
    /// The object's namespace and name.
    pub(crate) fn names(&self) -> (&str, &str) {
        (
            self.object_ref.namespace.as_deref().unwrap_or_default(),
            &self.object_ref.name,
        )
    }

    /// The messages of the push tasks of this loop that panicked (they stay down until the
    /// loop restarts).
    pub(crate) fn push_panics(&self) -> Vec<String> {
        self.push
            .as_ref()
            .map(|push| lock(&push.messages).values().cloned().collect())
            .unwrap_or_default()
    }

    /// The object as the controller's reflector has it now.
    pub(crate) fn object(&self) -> Option<Arc<K::Object>> {
        self.loops.store().get(&self.object_ref)
    }

    async fn run(self, mut ticker: Box<dyn Ticker>) {
        // A channel only for loops that have push scalers: most have none, and a channel
        // costs about a kilobyte per loop.
        let mut push_rx = self.start_push_scalers();
        let mut push_open = push_rx.is_some();
        let mut wake = self.wakes();
        let mut wake_open = wake.is_some();
        let adaptive_on = self
            .scalers
            .triggers
            .iter()
            .any(|t| t.scaler.scaler().adaptive_polling());
        let mut adaptive = adaptive::Adaptive::default();
        tokio::select! {
            () = self.token.cancelled() => return,
            _ = tokio::time::timeout(FIRST_POLL_GATE, self.first_poll.notified()) => {}
        }
        tokio::select! {
            () = self.token.cancelled() => return,
            () = K::before_first_poll(&self.loops) => {}
        }
        // An object that existed before this operator started is one of many loops starting
        // together (a restart, a leader change): its first poll waits for its place in its
        // interval, unless a push scaler says it is active or its source says something
        // arrived (a wake-up). A new object polls at once.
        if let Some(offset) = self.start_offset() {
            let delay = ticker.delay_first(offset);
            tokio::pin!(delay);
            loop {
                tokio::select! {
                    () = self.token.cancelled() => return,
                    () = &mut delay => break,
                    woken = woken(&mut wake), if wake_open => match woken {
                        true => break,
                        false => wake_open = false,
                    },
                    active = recv(&mut push_rx), if push_open => match active {
                        Some(true) => break,
                        Some(false) => {}
                        None => push_open = false,
                    },
                }
            }
        }
        loop {
            if self.superseded() {
                self.retire();
                return;
            }
            // Boxed: the poll's future (a source read, status write, events) is several KB and
            // needed only while polling; inline, every idle loop would keep room for it.
            tokio::select! {
                () = self.token.cancelled() => return,
                () = Box::pin(self.poll_isolated()) => {}
            }
            K::polls(&mut lock(&self.memory)).completed();
            // Adaptive polling: after a sign of activity, the next poll comes sooner.
            let sooner = if adaptive_on {
                K::observe(&self).and_then(|seen| {
                    adaptive.after_poll(&adaptive::AdaptivePolicy::DEFAULT, self.interval, seen)
                })
            } else {
                None
            };
            let sooner_at = sooner.map(|d| tokio::time::Instant::now() + d);
            // Wait for the next tick, or a push scaler's activation.
            loop {
                tokio::select! {
                    () = self.token.cancelled() => return,
                    () = tokio::time::sleep_until(sooner_at.unwrap_or_else(tokio::time::Instant::now)), if sooner_at.is_some() => {
                        let (namespace, name) = self.names();
                        debug!(namespace, name, kind = K::KIND.kind(), ?sooner, "adaptive poll");
                        break;
                    }
                    lag = ticker.tick() => {
                        let (namespace, name) = self.names();
                        recording::scale_loop_latency(
                            self.loops.metrics(),
                            K::KIND,
                            namespace,
                            name,
                            lag,
                        );
                        break;
                    }
                    () = push_panicked(self.push.as_deref()) => break,
                    woken = woken(&mut wake), if wake_open => match woken {
                        true if K::wake_wanted(&self) => {
                            let (namespace, name) = self.names();
                            debug!(namespace, name, kind = K::KIND.kind(), "woken by the source");
                            break;
                        }
                        true => {}
                        false => wake_open = false,
                    },
                    active = recv(&mut push_rx), if push_open => match active {
                        Some(true) => break,
                        Some(false) => {}
                        None => push_open = false,
                    },
                }
            }
        }
    }

    /// The wait before the first poll of an object created before this operator started
    /// ([`ticks::start_offset`], in the sequence of the loops with its interval and trigger
    /// types: [`Spread`]), for its first loop in this process; `None` for a newer object, or
    /// a loop restarted by a change of the object.
    fn start_offset(&self) -> Option<Duration> {
        if !lock(&self.loops.inner.started).insert(self.uid.clone()) {
            return None;
        }
        let object = self.object()?;
        let created = object.meta().creation_timestamp.as_ref()?.0;
        if created >= self.loops.inner.config.operator_started_at {
            return None;
        }
        let types = self
            .scalers
            .triggers
            .iter()
            .map(|t| t.trigger_type.as_str());
        Some(
            self.loops
                .inner
                .spread
                .offset(K::polling_interval(&object), types),
        )
    }

    /// The wake-ups of every scaler that has them ([`keda_scalers::Scaler::wake`]), merged
    /// into one the loop waits on itself; `None` when no scaler has them. A wake-up that comes
    /// while the loop polls is kept (one, however many came) and ends the next wait at once,
    /// as the poll it asks for is due. No task and no channel: tens of thousands of loops
    /// with a `redis` trigger each kept a forwarding task and a channel of about a kilobyte.
    fn wakes(&self) -> Option<Wake> {
        self.scalers
            .triggers
            .iter()
            .filter_map(|t| t.scaler.scaler().wake())
            .reduce(Wake::merge)
    }

    /// Runs every push scaler in a task of its own, sending activity to the returned channel;
    /// `None` when the loop has no push scaler.
    fn start_push_scalers(&self) -> Option<mpsc::Receiver<bool>> {
        if !self
            .scalers
            .triggers
            .iter()
            .any(|t| t.scaler.push().is_some())
        {
            return None;
        }
        let (push_tx, push_rx) = mpsc::channel::<bool>(16);
        for (i, t) in self.scalers.triggers.iter().enumerate() {
            if t.scaler.push().is_none() {
                continue;
            }
            let scalers = self.scalers.clone();
            let token = self.token.child_token();
            let tx = push_tx.clone();
            let metrics = self.loops.metrics().clone();
            let object_ref = self.object_ref.clone();
            let push_panics = self.push.clone();
            tokio::spawn(async move {
                let trigger = &scalers.triggers[i];
                let Some(push) = trigger.scaler.push() else {
                    return;
                };
                // A push task that panics ends, and is not restarted: a panic is a bug, and
                // running it again could panic on every activity. The loop keeps polling the
                // scaler, and every poll keeps the object `Ready=False InternalError` until the
                // loop restarts (a change of the object, a rotated Secret).
                if let Err(panic) = catch_panic(push.run(token, tx)).await {
                    let namespace = object_ref.namespace.as_deref().unwrap_or_default();
                    let error = panic.in_scaler(
                        format!(
                            "running the push scaler of {} {namespace}/{}",
                            K::KIND.kind(),
                            object_ref.name
                        ),
                        TriggerRef {
                            index: trigger.index,
                            trigger_type: &trigger.trigger_type,
                        },
                    );
                    recording::internal_panic(
                        &metrics,
                        K::KIND,
                        (namespace, &object_ref.name),
                        &error,
                    );
                    if let Some(panics) = push_panics {
                        lock(&panics.messages).insert(i, error.to_string());
                        panics.panicked.notify_one();
                    }
                }
            });
        }
        Some(push_rx)
    }

    /// Whether the object this loop was started for is gone from the watch cache: deleted, or
    /// deleted and created again under the same name (another UID), without this operator
    /// reconciling the deletion. That happens when the deletion falls in a gap of the watch (a
    /// `410 Gone` relist, an operator that was down) and nothing held the object back (its
    /// finalizer was removed by hand): the controller never sees a deleted object, only its
    /// absence from the relisted cache. Such a loop would poll on forever, or worse, poll for
    /// the new object with the old object's scalers next to the new object's own loop.
    fn superseded(&self) -> bool {
        self.object()
            .is_none_or(|o| o.meta().uid.as_deref() != Some(&*self.uid))
    }

    /// Stops this loop for good and forgets its object, as a reconciled deletion does. The
    /// stop awaits this task, so it runs in a task of its own while this one returns.
    fn retire(&self) {
        let (namespace, name) = self.names();
        info!(
            namespace,
            name,
            uid = &*self.uid,
            kind = K::KIND.kind(),
            "object gone from the watch cache without a reconciled deletion; its loop stops"
        );
        // Nothing reconciled the deletion, so nothing stopped counting the object either.
        recording::resource_unregistered(
            self.loops.metrics(),
            K::KIND.custom_resource(),
            (namespace, name),
            Some(&*self.uid),
        );
        let loops = self.loops.clone();
        let uid = self.uid.clone();
        tokio::spawn(async move { loops.forget_uid(&uid).await });
    }

    /// One poll, isolated: a panic in it is counted, said on the object (the kind's
    /// [`LoopKind::poll_panicked`]), and ends only this poll; the loop keeps its schedule, and
    /// the next good poll makes the object Ready again.
    async fn poll_isolated(&self) {
        let (namespace, name) = self.names();
        if !self.loops.config().shards.owns(namespace, name) {
            // Another replica owns the object now (or this one is fenced): no poll, so no
            // write; the loop still serves metric reads until it is let go.
            debug!(namespace, name, "shards: not owned here; poll skipped");
            return;
        }
        let Err(panic) = catch_panic(K::poll(self)).await else {
            return;
        };
        let (namespace, name) = self.names();
        let error = panic.during(
            Component::ScaleLoop,
            format!("polling {} {namespace}/{name}", K::KIND.kind()),
        );
        recording::internal_panic(self.loops.metrics(), K::KIND, (namespace, name), &error);
        K::poll_panicked(self, error).await;
    }
}

/// A push task of the loop panicked; never, for a loop without push scalers.
async fn push_panicked(push: Option<&PushPanics>) {
    match push {
        Some(push) => push.panicked.notified().await,
        None => std::future::pending().await,
    }
}

/// Whether `wake` woke the loop; `false` when every source is gone or there is none (see
/// [`Wake::woken`]).
async fn woken(wake: &mut Option<Wake>) -> bool {
    match wake {
        Some(wake) => wake.woken().await,
        None => false,
    }
}

/// The next message of `rx`, `None` when it is closed or there is none: a loop without push
/// scalers has no channel.
async fn recv<T>(rx: &mut Option<mpsc::Receiver<T>>) -> Option<T> {
    match rx {
        Some(rx) => rx.recv().await,
        None => None,
    }
}
