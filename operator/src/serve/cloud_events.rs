//! CloudEventSources: KEDA's events on ScaledObjects and ScaledJobs, also sent as CloudEvents
//! to the HTTP sinks that `CloudEventSource` and `ClusterCloudEventSource` objects name (KEDA's
//! `pkg/eventemitter`).
//!
//! The reconcilers publish their Kubernetes Events through [`crate::shared::events::Events`], which also
//! hands every event whose reason KEDA pairs with a CloudEvent type
//! ([`CloudEventType::for_event`]) to a [`CloudEvents`] handle: a bounded queue, never a wait.
//! The [`run`] task (the leader's) watches the sources, keeps their `Active` condition, and
//! gives each event to one worker per matching source, which sends it (binary content mode:
//! `ce-*` headers, the JSON `{"reason", "message"}` as the body) with up to [`ATTEMPTS`] tries.
//! One worker per source keeps a sink's events in order and a slow sink from holding up the
//! others.
//!
//! A `CloudEventSource` receives the events of objects in its namespace; a
//! `ClusterCloudEventSource` those of every namespace.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use keda_api::Condition;
use keda_api::cloud_event_source::{
    self as ces, CloudEventSource, CloudEventSourceSpec, CloudEventSourceStatus, CloudEventType,
    ClusterCloudEventSource,
};
use keda_api::condition::{STATUS_FALSE, STATUS_TRUE, find_condition};
use keda_scalers::remote::{Classify, Failure};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{Mutex, mpsc};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::process::telemetry::{CustomResourceKind, Metrics};
use crate::shared::resolve::WatchScope;
use crate::shared::watch::scoped_watcher;

/// The cluster name in `source` and `subject` when neither the source nor the operator's
/// `--k8s-cluster-name` names one (KEDA's default).
pub const DEFAULT_CLUSTER_NAME: &str = "kubernetes-default";
/// Events waiting for the emitter, and per source for its worker (KEDA's channel buffer).
pub const QUEUE: usize = 1024;
/// Tries per event and sink before the source is marked `Active=False` (KEDA's
/// `maxRetryTimes`).
pub const ATTEMPTS: u32 = 5;

/// One event to send: what the reconciler published, and when.
#[derive(Clone, Debug, PartialEq)]
pub struct Emitted {
    /// The CloudEvent type.
    pub event_type: CloudEventType,
    /// The object's kind, lower case (`scaledobject`), as in KEDA's subject.
    pub object_type: String,
    /// The object's namespace (empty for cluster-scoped objects).
    pub namespace: String,
    /// The object's name, lower case.
    pub name: String,
    /// The Kubernetes Event's reason.
    pub reason: String,
    /// The Kubernetes Event's message.
    pub message: String,
    /// When it was published.
    pub time: jiff::Timestamp,
}

/// Where reconcilers hand events to the emitter; cheap to clone. [`Default`] sends nothing.
#[derive(Clone, Default)]
pub struct CloudEvents {
    tx: Option<mpsc::Sender<Emitted>>,
}

impl std::fmt::Debug for CloudEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CloudEvents")
            .field("enabled", &self.tx.is_some())
            .finish()
    }
}

/// The emitter's end of [`CloudEvents`]; clones share it, so the leader task that reads it can
/// be started again after a lost election.
#[derive(Clone)]
pub struct CloudEventInput(Arc<Mutex<mpsc::Receiver<Emitted>>>);

impl CloudEvents {
    /// A handle and the input [`run`] reads.
    pub fn channel() -> (CloudEvents, CloudEventInput) {
        let (tx, rx) = mpsc::channel(QUEUE);
        (
            CloudEvents { tx: Some(tx) },
            CloudEventInput(Arc::new(Mutex::new(rx))),
        )
    }

    /// Hands the Kubernetes Event `reason`/`message` published on `object` to the emitter when
    /// KEDA sends that reason as a CloudEvent. Never waits: with the queue full the event is
    /// dropped with a warning (the Kubernetes Event was published regardless).
    pub fn emit<K: Resource<DynamicType = ()>>(&self, object: &K, reason: &str, message: &str) {
        let Some(tx) = &self.tx else {
            return;
        };
        let kind = K::kind(&());
        let Some(event_type) = CloudEventType::for_event(&kind, reason) else {
            return;
        };
        let event = Emitted {
            event_type,
            object_type: kind.to_lowercase(),
            namespace: object.meta().namespace.clone().unwrap_or_default(),
            name: object
                .meta()
                .name
                .clone()
                .unwrap_or_default()
                .to_lowercase(),
            reason: reason.to_string(),
            message: message.to_string(),
            time: jiff::Timestamp::now(),
        };
        if let Err(e) = tx.try_send(event) {
            warn!(%event_type, reason, error = %e, "CloudEvent not queued");
        }
    }
}

/// How the emitter runs.
#[derive(Clone, Debug)]
pub struct EmitterConfig {
    /// Cluster name for sources that name none (`--k8s-cluster-name`).
    pub cluster_name: String,
    /// The operator's namespace, in every event's `source` (`/<cluster>/<namespace>/keda`).
    pub keda_namespace: String,
    /// Which namespaces' CloudEventSources are watched (`WATCH_NAMESPACE`).
    pub scope: WatchScope,
    /// Bound of one try.
    pub send_timeout: Duration,
    /// Wait before the second try, doubled before each further one.
    pub first_retry: Duration,
}

impl EmitterConfig {
    /// KEDA's defaults for the operator in `keda_namespace`.
    pub fn new(keda_namespace: &str) -> Self {
        EmitterConfig {
            cluster_name: DEFAULT_CLUSTER_NAME.to_string(),
            keda_namespace: keda_namespace.to_string(),
            scope: WatchScope::All,
            send_timeout: Duration::from_secs(10),
            first_retry: Duration::from_millis(200),
        }
    }
}

/// Why the emitter stopped.
#[derive(Debug, thiserror::Error)]
pub enum EmitterError {
    /// The HTTP client could not be built.
    #[error("building the CloudEvents HTTP client: {0}")]
    HttpClient(#[source] reqwest::Error),
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EmittedLabels {
    namespace: String,
    cloudeventsource: String,
    eventsink: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueuedLabels {
    namespace: String,
}

/// KEDA's `keda_cloudeventsource_*` families, registered once per process with
/// [`EmitterMetrics::registered`].
#[derive(Clone, Default)]
pub struct EmitterMetrics {
    emitted: Family<EmittedLabels, Counter>,
    queued: Family<QueuedLabels, Gauge>,
    /// Where `keda_resource_registered_total{type="cloudevent_source"}` is counted.
    registry: Option<Metrics>,
}

impl EmitterMetrics {
    /// The families, registered in `metrics`.
    pub fn registered(metrics: &Metrics) -> Self {
        let m = EmitterMetrics {
            registry: Some(metrics.clone()),
            ..EmitterMetrics::default()
        };
        metrics.register(
            "cloudeventsource_events_emitted",
            "Measured emitted cloudevents with destination of this emitted event (eventsink) and emitted state",
            m.emitted.clone(),
        );
        metrics.register(
            "cloudeventsource_events_queued",
            "Indicates how many events are still queue",
            m.queued.clone(),
        );
        m
    }

    fn count(&self, namespace: &str, source: &str, state: &str) {
        self.emitted
            .get_or_create(&EmittedLabels {
                namespace: namespace.to_string(),
                cloudeventsource: source.to_string(),
                eventsink: "http".to_string(),
                state: state.to_string(),
            })
            .inc();
    }

    fn queued(&self, namespace: &str) -> Gauge {
        self.queued
            .get_or_create(&QueuedLabels {
                namespace: namespace.to_string(),
            })
            .clone()
    }
}

/// A source of either kind, as the watch last saw it.
#[derive(Clone)]
enum Source {
    Namespaced(Arc<CloudEventSource>),
    Cluster(Arc<ClusterCloudEventSource>),
}

impl Source {
    fn spec(&self) -> &CloudEventSourceSpec {
        match self {
            Source::Namespaced(s) => &s.spec,
            Source::Cluster(s) => &s.spec.spec,
        }
    }

    fn status(&self) -> Option<&CloudEventSourceStatus> {
        match self {
            Source::Namespaced(s) => s.status.as_ref(),
            Source::Cluster(s) => s.status.as_ref(),
        }
    }

    fn name(&self) -> String {
        match self {
            Source::Namespaced(s) => s.name_any(),
            Source::Cluster(s) => s.name_any(),
        }
    }

    /// `None` for a ClusterCloudEventSource.
    fn namespace(&self) -> Option<String> {
        match self {
            Source::Namespaced(s) => s.namespace(),
            Source::Cluster(_) => None,
        }
    }

    /// Identifies one generation of one object: a new spec gets a new worker.
    fn key(&self) -> WorkerKey {
        let meta = match self {
            Source::Namespaced(s) => s.meta(),
            Source::Cluster(s) => s.meta(),
        };
        WorkerKey {
            uid: meta.uid.clone().unwrap_or_default(),
            generation: meta.generation.unwrap_or_default(),
        }
    }

    fn uid(&self) -> String {
        self.key().uid
    }

    /// Whether events of objects in `namespace` go to this source.
    fn covers(&self, namespace: &str) -> bool {
        self.namespace().is_none_or(|ns| ns == namespace)
    }

    fn describe(&self) -> String {
        match self.namespace() {
            Some(ns) => format!("CloudEventSource {ns}/{}", self.name()),
            None => format!("ClusterCloudEventSource {}", self.name()),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct WorkerKey {
    uid: String,
    generation: i64,
}

/// What a worker reports after each event.
struct Outcome {
    /// The source and the generation the worker sends for.
    key: WorkerKey,
    delivered: bool,
}

/// The `Active` condition `source` should have, given whether its last event failed every try.
fn desired_active(spec: &CloudEventSourceSpec, failing: bool) -> Condition {
    let (status, reason, message) = match ces::validate(spec) {
        Err(e) => (STATUS_FALSE, ces::REASON_INVALID, e.to_string()),
        Ok(()) if failing => (
            STATUS_FALSE,
            ces::REASON_FAILED,
            ces::MESSAGE_FAILED.to_string(),
        ),
        Ok(()) => (
            STATUS_TRUE,
            ces::REASON_ACTIVE,
            ces::MESSAGE_ACTIVE.to_string(),
        ),
    };
    Condition {
        reason: Some(reason.to_string()),
        message: Some(message),
        ..Condition::new(ces::CONDITION_ACTIVE, status)
    }
}

/// The emitter: watches the sources of `config.scope` and every ClusterCloudEventSource,
/// keeps their `Active` condition, and sends what `input` brings until `cancel`.
///
/// # Errors
/// See [`EmitterError`]; watch and status-write failures are logged and retried.
pub async fn run(
    client: Client,
    config: EmitterConfig,
    input: CloudEventInput,
    metrics: EmitterMetrics,
    cancel: CancellationToken,
) -> Result<(), EmitterError> {
    // reqwest is built without a crypto provider of its own (the workspace's choice): the
    // operator installs ring at start; installing it again is a harmless no-op.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .timeout(config.send_timeout)
        .build()
        .map_err(EmitterError::HttpClient)?;
    let mut input = input.0.lock().await;

    let (ns_reader, ns_writer) = reflector::store::<CloudEventSource>();
    let namespaced = reflector::reflector(
        ns_writer,
        scoped_watcher(
            &client,
            &config.scope,
            &watcher::Config::default(),
            ns_reader.clone(),
        ),
    )
    .boxed();
    let (cluster_reader, cluster_writer) = reflector::store::<ClusterCloudEventSource>();
    let cluster = reflector::reflector(
        cluster_writer,
        watcher::watcher(
            Api::<ClusterCloudEventSource>::all(client.clone()),
            watcher::Config::default(),
        )
        .default_backoff(),
    )
    .boxed();
    let (namespaced, cluster) = (namespaced, cluster);
    tokio::pin!(namespaced, cluster);

    let (outcome_tx, mut outcomes) = mpsc::channel::<Outcome>(QUEUE);
    let mut emitter = Emitter {
        client,
        http,
        config,
        metrics,
        workers: HashMap::new(),
        failing: HashMap::new(),
        counted: HashSet::new(),
        outcome_tx,
        namespaced: ns_reader,
        cluster: cluster_reader,
    };
    info!("CloudEvent emitter started");
    loop {
        tokio::select! {
            () = cancel.cancelled() => break,
            Some(event) = namespaced.next() => match event {
                Ok(watcher::Event::Apply(source) | watcher::Event::InitApply(source)) => {
                    emitter.sync_status(&Source::Namespaced(Arc::new(source))).await;
                    emitter.count_sources();
                }
                Ok(_) => emitter.count_sources(),
                Err(e) => debug!(error = %e, "CloudEventSource watch"),
            },
            Some(event) = cluster.next() => match event {
                Ok(watcher::Event::Apply(source) | watcher::Event::InitApply(source)) => {
                    emitter.sync_status(&Source::Cluster(Arc::new(source))).await;
                    emitter.count_sources();
                }
                Ok(_) => emitter.count_sources(),
                Err(e) => debug!(error = %e, "ClusterCloudEventSource watch"),
            },
            Some(event) = input.recv() => emitter.dispatch(event),
            Some(outcome) = outcomes.recv() => emitter.record(outcome).await,
        }
    }
    Ok(())
}

struct Emitter {
    client: Client,
    http: reqwest::Client,
    config: EmitterConfig,
    metrics: EmitterMetrics,
    workers: HashMap<WorkerKey, mpsc::Sender<Emitted>>,
    /// Sources whose last event failed every try: uid -> the generation it was sent for. An
    /// edited source (a new generation) starts `Active` again, as KEDA's re-created handler does.
    failing: HashMap<String, i64>,
    /// The sources counted in `keda_resource_registered_total`: (namespace, name).
    counted: HashSet<(String, String)>,
    outcome_tx: mpsc::Sender<Outcome>,
    namespaced: Store<CloudEventSource>,
    cluster: Store<ClusterCloudEventSource>,
}

impl Emitter {
    /// Counts the watched sources in `keda_resource_registered_total{type="cloudevent_source"}`
    /// as KEDA's two controllers do (a cluster source in the empty namespace, shown as
    /// `default`), from the watches' stores, so a source deleted while a watch was down stops
    /// being counted at the relist.
    fn count_sources(&mut self) {
        let Some(metrics) = self.metrics.registry.as_ref() else {
            return;
        };
        let now: HashSet<(String, String)> = self
            .sources()
            .iter()
            .map(|s| (s.namespace().unwrap_or_default(), s.name()))
            .collect();
        for (ns, name) in self.counted.difference(&now) {
            metrics.unregister_resource(CustomResourceKind::CloudEventSource, (ns, name), None);
        }
        for (ns, name) in now.difference(&self.counted) {
            metrics.register_resource(CustomResourceKind::CloudEventSource, (ns, name), None, &[]);
        }
        self.counted = now;
    }

    fn sources(&self) -> Vec<Source> {
        let namespaced = self.namespaced.state().into_iter().map(Source::Namespaced);
        let cluster = self.cluster.state().into_iter().map(Source::Cluster);
        namespaced.chain(cluster).collect()
    }

    /// Queues `event` for every source that covers its namespace and accepts its type.
    fn dispatch(&mut self, event: Emitted) {
        let sources = self.sources();
        // Workers of deleted sources and of older generations end when their queue closes.
        let live: HashSet<WorkerKey> = sources.iter().map(Source::key).collect();
        self.workers.retain(|key, _| live.contains(key));
        for source in sources {
            let spec = source.spec();
            if !source.covers(&event.namespace)
                || !spec.event_subscription.accepts(event.event_type)
                || ces::validate(spec).is_err()
            {
                continue;
            }
            let key = source.key();
            if !self.workers.contains_key(&key) {
                let worker = self.spawn_worker(&source);
                self.workers.insert(key.clone(), worker);
            }
            let Some(queue) = self.workers.get(&key) else {
                continue;
            };
            let gauge = self.metrics.queued(&event.namespace);
            match queue.try_send(event.clone()) {
                Ok(()) => {
                    gauge.inc();
                }
                Err(e) => warn!(
                    source = %source.describe(),
                    event_type = %event.event_type,
                    error = %e,
                    "CloudEvent dropped: the sink's queue is full"
                ),
            }
        }
    }

    fn spawn_worker(&self, source: &Source) -> mpsc::Sender<Emitted> {
        let (tx, rx) = mpsc::channel(QUEUE);
        let spec = source.spec();
        let cluster_name = if spec.cluster_name.is_empty() {
            self.config.cluster_name.clone()
        } else {
            spec.cluster_name.clone()
        };
        let worker = Worker {
            http: self.http.clone(),
            uri: spec
                .destination
                .http
                .as_ref()
                .map(|h| h.uri.trim().to_string())
                .unwrap_or_default(),
            source: format!("/{cluster_name}/{}/keda", self.config.keda_namespace),
            cluster_name,
            name: source.name(),
            key: source.key(),
            first_retry: self.config.first_retry,
            metrics: self.metrics.clone(),
            outcomes: self.outcome_tx.clone(),
        };
        tokio::spawn(worker.run(rx));
        tx
    }

    async fn record(&mut self, outcome: Outcome) {
        let WorkerKey { uid, generation } = outcome.key;
        let changed = if outcome.delivered {
            self.failing.remove(&uid).is_some()
        } else {
            self.failing.insert(uid.clone(), generation) != Some(generation)
        };
        if !changed {
            return;
        }
        if let Some(source) = self.sources().into_iter().find(|s| s.uid() == uid) {
            self.sync_status(&source).await;
        }
    }

    /// Whether `source`, as it is now, failed its last event.
    fn is_failing(&self, source: &Source) -> bool {
        let key = source.key();
        self.failing.get(&key.uid) == Some(&key.generation)
    }

    /// Writes the `Active` condition `source` should have, when it differs.
    async fn sync_status(&self, source: &Source) {
        let desired = desired_active(source.spec(), self.is_failing(source));
        let conditions = source
            .status()
            .map(|s| s.conditions.as_slice())
            .unwrap_or(&[]);
        if find_condition(conditions, ces::CONDITION_ACTIVE) == Some(&desired) {
            return;
        }
        let mut written: Vec<Condition> = conditions
            .iter()
            .filter(|c| c.type_ != ces::CONDITION_ACTIVE)
            .cloned()
            .collect();
        written.push(desired.clone());
        let patch = serde_json::json!({ "status": { "conditions": written } });
        let params = PatchParams::default();
        let name = source.name();
        let result = match source.namespace() {
            Some(ns) => Api::<CloudEventSource>::namespaced(self.client.clone(), &ns)
                .patch_status(&name, &params, &Patch::Merge(&patch))
                .await
                .map(drop),
            None => Api::<ClusterCloudEventSource>::all(self.client.clone())
                .patch_status(&name, &params, &Patch::Merge(&patch))
                .await
                .map(drop),
        };
        match result {
            Ok(()) => info!(
                source = %source.describe(),
                active = %desired.status,
                reason = desired.reason.as_deref().unwrap_or_default(),
                "CloudEventSource condition written"
            ),
            // The next change of the source, or the next outcome, writes it again.
            Err(e) => warn!(source = %source.describe(), error = %e, "writing the status failed"),
        }
    }
}

/// Sends one source's events, in order.
struct Worker {
    http: reqwest::Client,
    uri: String,
    cluster_name: String,
    source: String,
    name: String,
    key: WorkerKey,
    first_retry: Duration,
    metrics: EmitterMetrics,
    outcomes: mpsc::Sender<Outcome>,
}

impl Worker {
    async fn run(self, mut events: mpsc::Receiver<Emitted>) {
        while let Some(event) = events.recv().await {
            let delivered = self.deliver(&event).await;
            self.metrics.queued(&event.namespace).dec();
            let outcome = Outcome {
                key: self.key.clone(),
                delivered,
            };
            if self.outcomes.send(outcome).await.is_err() {
                return;
            }
        }
    }

    /// Up to [`ATTEMPTS`] tries, waiting `first_retry`, then twice as long, between them.
    async fn deliver(&self, event: &Emitted) -> bool {
        let id = uuid::Uuid::new_v4().to_string();
        let subject = format!(
            "/{}/{}/{}/{}",
            self.cluster_name, event.namespace, event.object_type, event.name
        );
        let body = serde_json::json!({ "reason": event.reason, "message": event.message });
        let mut wait = self.first_retry;
        for attempt in 1..=ATTEMPTS {
            let sent = self
                .http
                .post(&self.uri)
                .header("ce-specversion", "1.0")
                .header("ce-id", &id)
                .header("ce-source", &self.source)
                .header("ce-subject", &subject)
                .header("ce-type", event.event_type.as_str())
                .header("ce-time", event.time.to_string())
                .json(&body)
                .send()
                .await;
            let failure = match sent {
                Ok(response) if response.status().is_success() => {
                    self.metrics.count(&event.namespace, &self.name, "emitted");
                    return true;
                }
                Ok(response) => sink_status(response).await,
                // Without the URL: its query and credentials are the source author's.
                Err(e) => e.without_url().classify(),
            };
            self.metrics.count(&event.namespace, &self.name, "failed");
            // The kind of failure only (status code, body size, connection refused, ...): the
            // sink is a URL the source's author chose, and what it answered is theirs
            // (`keda_scalers::remote`). The answer itself only at debug level.
            warn!(
                source = %self.name,
                event_type = %event.event_type,
                attempt,
                error = %failure,
                "sending a CloudEvent failed"
            );
            failure.log_raw(&format_args!(
                "sending a CloudEvent of {} failed: {failure}",
                self.name
            ));
            if attempt < ATTEMPTS {
                tokio::time::sleep(wait).await;
                wait = wait.saturating_mul(2);
            }
        }
        false
    }
}

/// The most bytes of a sink's error answer that are read: its size and start are for the logs
/// only, and a sink must not make the operator read without a bound.
const SINK_ERROR_BODY_BYTES: usize = 64 * 1024;

/// The [`Failure`] of a non-2xx answer of a sink: its status code, the size of its body (read
/// up to [`SINK_ERROR_BODY_BYTES`], within the client's timeout) and a known media type; the
/// start of the body is for debug-level logs only.
async fn sink_status(mut response: reqwest::Response) -> Failure {
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut body = Vec::new();
    while body.len() < SINK_ERROR_BODY_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                let room = SINK_ERROR_BODY_BYTES - body.len();
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            // The status is what matters; a broken error body is not worth reporting.
            Ok(None) | Err(_) => break,
        }
    }
    Failure::status(status, content_type.as_deref(), &body)
}

#[cfg(test)]
mod tests;
