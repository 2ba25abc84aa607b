//! KEDA's ScaledObject scenarios in our own words, over a small harness that runs the
//! controller in process against any API server (memkube here, a real cluster in
//! `tests/e2e`) with the local Redis, a manual clock and manual ticks: a full minute of polls
//! takes no minute.

#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use keda_api::ScaledObject;
use keda_operator::resolve::{Resolver, ResolverConfig, WatchScope};
use keda_operator::scalers::ScalerEnv;
use keda_operator::telemetry::Metrics;
use keda_operator::{ControllerConfig, ManualTicks, ScaleLoops, ScaledObjectController};
use keda_scalers::Clock;
use keda_scalers::pool::ClientPools;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How long any awaited condition may take.
pub const WAIT: Duration = Duration::from_secs(20);

/// A clock tests move by hand.
#[derive(Clone)]
pub struct ManualClock {
    nanos: Arc<AtomicI64>,
}

impl ManualClock {
    /// Starts at the real now (creation timestamps come from the API server's clock).
    pub fn new() -> Self {
        let now = Timestamp::now().as_nanosecond();
        ManualClock {
            nanos: Arc::new(AtomicI64::new(i64::try_from(now).expect("fits"))),
        }
    }

    pub fn now(&self) -> Timestamp {
        Timestamp::from_nanosecond(i128::from(self.nanos.load(Ordering::SeqCst))).expect("valid")
    }

    pub fn advance(&self, secs: i64) {
        self.nanos.fetch_add(secs * 1_000_000_000, Ordering::SeqCst);
    }

    pub fn clock(&self) -> Clock {
        let c = self.clone();
        Clock::from_fn(move || c.now())
    }
}

/// A running in-process operator.
pub struct Operator {
    pub loops: ScaleLoops,
    shutdown: CancellationToken,
    task: JoinHandle<()>,
}

impl Operator {
    /// Stops it as a restart would: loops end, replicas stay.
    pub async fn stop(self) {
        self.shutdown.cancel();
        let _ = tokio::time::timeout(WAIT, self.task).await;
    }
}

/// One scenario's world: a client, a namespace, the clock, the ticks, the Redis connection.
pub struct World {
    pub client: Client,
    pub namespace: String,
    pub clock: ManualClock,
    pub ticks: ManualTicks,
    pub pools: ClientPools,
    pub registry: Arc<keda_scalers::Registry>,
    pub redis: redis::aio::MultiplexedConnection,
    /// Where the operator records its Prometheus metrics.
    pub metrics: Metrics,
    /// Where the operator's events also go as CloudEvents (none by default).
    pub cloud_events: keda_operator::cloud_events::CloudEvents,
    /// Where files named by trigger metadata may be read (`--trigger-file-root`).
    pub trigger_files: keda_scalers::files::TriggerFiles,
}

impl World {
    pub fn new(client: Client, namespace: &str, redis: redis::aio::MultiplexedConnection) -> Self {
        World {
            client,
            namespace: namespace.to_string(),
            clock: ManualClock::new(),
            ticks: ManualTicks::new(),
            pools: ClientPools::new(),
            registry: Arc::new(keda_scalers::Registry::builtin()),
            redis,
            metrics: Metrics::new(),
            cloud_events: Default::default(),
            trigger_files: Default::default(),
        }
    }

    /// Starts the operator; its start time is the clock's now.
    pub fn start_operator(&self) -> Operator {
        self.start_operator_with(None, None)
    }

    /// Starts the operator with `--last-active-time-refresh` set to `every`.
    pub fn start_operator_refreshing(&self, every: SignedDuration) -> Operator {
        self.start_operator_with(None, Some(every))
    }

    /// Starts the operator with a trigger resolver (`authenticationRef`, `...FromEnv`) whose
    /// cluster-object namespace is `keda`.
    pub fn start_operator_resolving(&self) -> Operator {
        let mut config = ResolverConfig::new("keda");
        config.cache_sync_timeout = WAIT;
        self.start_operator_with(Some(Resolver::new(self.client.clone(), config)), None)
    }

    fn start_operator_with(
        &self,
        resolver: Option<Resolver>,
        persist_interval: Option<SignedDuration>,
    ) -> Operator {
        let config = ControllerConfig {
            env: ScalerEnv {
                pools: self.pools.clone(),
                clock: self.clock.clock(),
                registry: self.registry.clone(),
                resolver,
                trigger_files: self.trigger_files.clone(),
                ..ScalerEnv::default()
            },
            ticks: Arc::new(self.ticks.clone()),
            clock: self.clock.clock(),
            operator_started_at: Some(self.clock.now()),
            persist_interval,
            watch_scope: WatchScope::Namespaces(vec![self.namespace.clone()]),
            retry_after_error: Duration::from_millis(200),
            metrics: self.metrics.clone(),
            cloud_events: self.cloud_events.clone(),
            ..ControllerConfig::default()
        };
        let controller = ScaledObjectController::new(self.client.clone(), config);
        let loops = controller.loops();
        let shutdown = CancellationToken::new();
        let token = shutdown.clone();
        let task = tokio::spawn(async move {
            let _ = controller.run(token).await;
        });
        Operator {
            loops,
            shutdown,
            task,
        }
    }

    pub fn deployments(&self) -> Api<Deployment> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    pub fn scaled_objects(&self) -> Api<ScaledObject> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    pub fn hpas(&self) -> Api<HorizontalPodAutoscaler> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Creates a Deployment with `replicas`.
    pub async fn deployment(&self, name: &str, replicas: i32) {
        let d: Deployment = serde_json::from_value(serde_json::json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": { "name": name, "namespace": self.namespace },
            "spec": {
                "replicas": replicas,
                "selector": { "matchLabels": { "app": name } },
                "template": {
                    "metadata": { "labels": { "app": name } },
                    "spec": { "containers": [{ "name": "app", "image": "registry.k8s.io/pause:3.9" }] }
                }
            }
        }))
        .expect("a Deployment");
        self.deployments()
            .create(&PostParams::default(), &d)
            .await
            .expect("create Deployment");
    }

    pub async fn replicas(&self, name: &str) -> i32 {
        self.deployments()
            .get(name)
            .await
            .expect("get Deployment")
            .spec
            .and_then(|s| s.replicas)
            .unwrap_or(1)
    }

    /// Creates a ScaledObject from YAML (its namespace is set here) and returns its UID.
    pub async fn create(&self, yaml: &str) -> ScaledObject {
        let mut so: ScaledObject = serde_yaml::from_str(yaml).expect("ScaledObject YAML");
        so.metadata.namespace = Some(self.namespace.clone());
        self.scaled_objects()
            .create(&PostParams::default(), &so)
            .await
            .expect("create ScaledObject")
    }

    pub async fn get(&self, name: &str) -> ScaledObject {
        self.scaled_objects()
            .get(name)
            .await
            .expect("get ScaledObject")
    }

    pub async fn annotate(&self, name: &str, key: &str, value: Option<&str>) {
        let patch = serde_json::json!({ "metadata": { "annotations": { key: value } } });
        self.scaled_objects()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("annotate");
    }

    pub async fn delete(&self, name: &str) {
        self.scaled_objects()
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete ScaledObject");
    }

    /// Pushes `n` items on `list`.
    pub async fn push(&self, list: &str, n: usize) {
        let mut c = self.redis.clone();
        for i in 0..n {
            let _: i64 = redis::cmd("RPUSH")
                .arg(list)
                .arg(i)
                .query_async(&mut c)
                .await
                .expect("RPUSH");
        }
    }

    /// Deletes `key`.
    pub async fn drain(&self, key: &str) {
        let mut c = self.redis.clone();
        let _: i64 = redis::cmd("DEL")
            .arg(key)
            .query_async(&mut c)
            .await
            .expect("DEL");
    }

    /// Makes `key` a string, so that reading it as a list fails.
    pub async fn break_key(&self, key: &str) {
        let mut c = self.redis.clone();
        let _: () = redis::cmd("SET")
            .arg(key)
            .arg("not a list")
            .query_async(&mut c)
            .await
            .expect("SET");
    }

    /// Waits until the object's loop has completed `n` polls.
    pub async fn polls_reach(&self, op: &Operator, so: &ScaledObject, n: u64) {
        let mut rx = op.loops.polls(&so.uid().expect("uid"));
        tokio::time::timeout(WAIT, rx.wait_for(|p| *p >= n))
            .await
            .unwrap_or_else(|_| panic!("{} polls of {} did not happen", n, so.name_any()))
            .expect("poll counter");
    }

    /// Completed polls so far.
    pub fn polls(&self, op: &Operator, so: &ScaledObject) -> u64 {
        *op.loops.polls(&so.uid().expect("uid")).borrow()
    }

    /// Moves the clock by `secs` and lets the loop poll once more.
    pub async fn poll_after(&self, op: &Operator, so: &ScaledObject, secs: i64) {
        let before = self.polls(op, so);
        self.clock.advance(secs);
        self.ticks.tick();
        self.polls_reach(op, so, before + 1).await;
    }
}

/// Awaits `check` returning `Some`, polling the API; fails after [`WAIT`] with `what`.
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let attempt = async {
        loop {
            if let Some(v) = check().await {
                return v;
            }
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(WAIT, attempt)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// A ScaledObject on Deployment `target` with one redis trigger on `list`.
pub fn redis_object(
    name: &str,
    target: &str,
    list: &str,
    extra_spec: &str,
    annotations: &str,
) -> String {
    format!(
        r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: {name}
  annotations: {{{annotations}}}
spec:
  scaleTargetRef:
    name: {target}
  pollingInterval: 10
  maxReplicaCount: 1
{extra_spec}
  triggers:
    - type: redis
      metadata:
        address: 127.0.0.1:6379
        listName: {list}
        listLength: "5"
        activationListLength: "5"
"#
    )
}

pub fn ready(so: &ScaledObject) -> Option<(String, String, String)> {
    let c = so
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?;
    Some((
        c.status.clone(),
        c.reason.clone().unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    ))
}

pub fn condition(so: &ScaledObject, type_: &str) -> Option<(String, String)> {
    let c = so
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone().unwrap_or_default()))
}

/// Waits for the HPA and returns it.
pub async fn hpa_exists(w: &World, name: &str) -> HorizontalPodAutoscaler {
    eventually(&format!("HPA {name}"), || async {
        w.hpas().get_opt(name).await.ok().flatten()
    })
    .await
}

/// Waits until the HPA is gone.
pub async fn hpa_gone(w: &World, name: &str) {
    eventually(&format!("HPA {name} deleted"), || async {
        matches!(w.hpas().get_opt(name).await, Ok(None)).then_some(())
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// The scenarios.

/// Below the activation threshold a Deployment stays at 0 for a full minute of polls; above it
/// it goes 0 -> 1 within one poll, and the HPA carries `s0-redis-<list>` with the right target
/// and selector; drained, it returns to 0 only after the cooldown.
pub async fn activation_and_cooldown(w: &World, list: &str) {
    w.deployment("worker", 0).await;
    let op = w.start_operator();
    let so = w
        .create(&redis_object(
            "worker",
            "worker",
            list,
            "  cooldownPeriod: 60",
            "",
        ))
        .await;
    w.push(list, 3).await;
    w.polls_reach(&op, &so, 1).await;
    // A full minute of polls (every 10 s) below activationListLength 5.
    for _ in 0..6 {
        w.poll_after(&op, &so, 10).await;
        assert_eq!(w.replicas("worker").await, 0, "below activation stays at 0");
    }
    let hpa = hpa_exists(w, "keda-hpa-worker").await;
    let spec = hpa.spec.expect("HPA spec");
    assert_eq!(spec.min_replicas, Some(1));
    assert_eq!(spec.max_replicas, 1);
    let metrics = spec.metrics.expect("metrics");
    let ext = metrics[0].external.as_ref().expect("an External metric");
    assert_eq!(ext.metric.name, format!("s0-redis-{list}"));
    assert_eq!(ext.target.type_, "AverageValue");
    assert_eq!(
        ext.target.average_value.as_ref().map(|q| q.0.as_str()),
        Some("5")
    );
    let selector = ext
        .metric
        .selector
        .as_ref()
        .and_then(|s| s.match_labels.clone());
    assert_eq!(
        selector.and_then(|m| m.get("scaledobject.keda.sh/name").cloned()),
        Some("worker".to_string())
    );

    // Above the threshold: one poll takes it to 1.
    w.push(list, 5).await;
    w.poll_after(&op, &so, 10).await;
    assert_eq!(
        w.replicas("worker").await,
        1,
        "active goes 0 -> 1 within one poll"
    );
    let status = w.get("worker").await;
    assert_eq!(
        condition(&status, "Active"),
        Some(("True".into(), "ScalerActive".into()))
    );

    // Drained: the cooldown (60 s) must pass first.
    w.drain(list).await;
    w.poll_after(&op, &so, 30).await;
    assert_eq!(
        w.replicas("worker").await,
        1,
        "within the cooldown stays at 1"
    );
    eventually("Active=False ScalerCooldown", || async {
        (condition(&w.get("worker").await, "Active")
            == Some(("False".into(), "ScalerCooldown".into())))
        .then_some(())
    })
    .await;
    w.poll_after(&op, &so, 31).await;
    assert_eq!(
        w.replicas("worker").await,
        0,
        "after the cooldown back to 0"
    );
    op.stop().await;
}

/// `paused-replicas: 5` holds 5 even above max (1), deletes the HPA and stops the loop;
/// removing it brings both back.
pub async fn paused_replicas(w: &World, list: &str) {
    w.deployment("paused", 0).await;
    let op = w.start_operator();
    let so = w
        .create(&redis_object("paused", "paused", list, "", ""))
        .await;
    hpa_exists(w, "keda-hpa-paused").await;
    w.polls_reach(&op, &so, 1).await;

    w.annotate("paused", "autoscaling.keda.sh/paused-replicas", Some("5"))
        .await;
    eventually("5 paused replicas", || async {
        (w.replicas("paused").await == 5).then_some(())
    })
    .await;
    hpa_gone(w, "keda-hpa-paused").await;
    let status = w.get("paused").await;
    assert_eq!(
        status.status.as_ref().and_then(|s| s.paused_replica_count),
        Some(5)
    );
    assert_eq!(
        condition(&status, "Paused"),
        Some(("True".into(), "ScaledObjectPaused".into()))
    );
    assert!(
        !op.loops.is_running(&w.namespace, "paused").await,
        "no loop while paused"
    );
    // Polls change nothing while paused.
    w.clock.advance(600);
    w.ticks.tick();
    assert_eq!(w.replicas("paused").await, 5);

    w.annotate("paused", "autoscaling.keda.sh/paused-replicas", None)
        .await;
    hpa_exists(w, "keda-hpa-paused").await;
    eventually("the loop back", || async {
        op.loops
            .is_running(&w.namespace, "paused")
            .await
            .then_some(())
    })
    .await;
    let status = w.get("paused").await;
    assert_eq!(
        status.status.as_ref().and_then(|s| s.paused_replica_count),
        None
    );
    op.stop().await;
}

/// A failing metric is replaced by the fallback: `replicas x target` served to the HPA, the
/// Fallback condition True, the health Failing.
pub async fn fallback(w: &World, list: &str) {
    w.deployment("fallback", 1).await;
    let op = w.start_operator();
    w.push(list, 1).await;
    let so = w
        .create(&redis_object(
            "fallback",
            "fallback",
            list,
            "  fallback:\n    failureThreshold: 1\n    replicas: 3",
            "",
        ))
        .await;
    w.polls_reach(&op, &so, 1).await;
    let metric = format!("s0-redis-{list}");
    let values = op
        .loops
        .metric_values(&w.namespace, "fallback", &metric)
        .await
        .expect("a value");
    assert_eq!(values[0].value, 1.0);

    w.break_key(list).await;
    // Failure 1 is within the threshold; failure 2 exceeds it.
    w.poll_after(&op, &so, 10).await;
    w.poll_after(&op, &so, 10).await;
    let values = op
        .loops
        .metric_values(&w.namespace, "fallback", &metric)
        .await
        .expect("the fallback value");
    assert_eq!(
        values[0].value, 15.0,
        "fallback.replicas (3) x listLength (5)"
    );
    let status = eventually("Fallback=True", || async {
        let so = w.get("fallback").await;
        (condition(&so, "Fallback") == Some(("True".into(), "FallbackExists".into()))).then_some(so)
    })
    .await;
    let health = status
        .status
        .and_then(|s| s.health)
        .and_then(|h| h.get(&metric).cloned())
        .expect("health of the metric");
    assert_eq!(health.status.as_deref(), Some("Failing"));
    assert_eq!(
        w.replicas("fallback").await,
        1,
        "the HPA, not the loop, scales on fallback"
    );
    w.drain(list).await;
    op.stop().await;
}

/// An operator restart in the middle of a cooldown does not scale to zero early: the
/// cooldown counts from max(persisted lastActiveTime, operator start).
pub async fn restart_mid_cooldown(w: &World, list: &str) {
    w.deployment("restart", 0).await;
    let op = w.start_operator();
    w.push(list, 10).await;
    let so = w
        .create(&redis_object(
            "restart",
            "restart",
            list,
            "  cooldownPeriod: 300",
            "",
        ))
        .await;
    w.polls_reach(&op, &so, 1).await;
    assert_eq!(w.replicas("restart").await, 1);
    eventually("lastActiveTime persisted", || async {
        w.get("restart")
            .await
            .status
            .and_then(|s| s.last_active_time)
            .map(|_| ())
    })
    .await;
    // Stays active for 4 minutes (the in-memory lastActiveTime moves; the persisted one
    // need not), then drains.
    for _ in 0..4 {
        w.poll_after(&op, &so, 60).await;
    }
    w.drain(list).await;
    w.poll_after(&op, &so, 10).await;
    assert_eq!(w.replicas("restart").await, 1);
    op.stop().await;

    // Restart 100 s later; the persisted lastActiveTime is the end of the activity, 110 s old.
    w.clock.advance(100);
    let op = w.start_operator();
    let so = w.get("restart").await;
    w.polls_reach(&op, &so, 1).await;
    assert_eq!(
        w.replicas("restart").await,
        1,
        "no early scale to zero after a restart"
    );
    w.poll_after(&op, &so, 290).await;
    assert_eq!(
        w.replicas("restart").await,
        1,
        "still within a cooldown from the restart"
    );
    w.poll_after(&op, &so, 20).await;
    assert_eq!(
        w.replicas("restart").await,
        0,
        "a full cooldown after the restart"
    );
    op.stop().await;
}

/// A deleted ScaledObject leaves no loop, no HPA, and with restoreToOriginalReplicaCount the
/// original replicas.
pub async fn deletion_restores(w: &World, list: &str) {
    w.deployment("restore", 2).await;
    let op = w.start_operator();
    let so = w
        .create(&redis_object(
            "restore",
            "restore",
            list,
            "  advanced:\n    restoreToOriginalReplicaCount: true",
            "",
        ))
        .await;
    hpa_exists(w, "keda-hpa-restore").await;
    w.polls_reach(&op, &so, 1).await;
    // Inactive and never active (initialCooldownPeriod 0): scaled to zero.
    eventually("scaled to zero", || async {
        (w.replicas("restore").await == 0).then_some(())
    })
    .await;
    assert_eq!(
        w.get("restore")
            .await
            .status
            .and_then(|s| s.original_replica_count),
        Some(2)
    );
    w.delete("restore").await;
    eventually("the ScaledObject gone", || async {
        matches!(w.scaled_objects().get_opt("restore").await, Ok(None)).then_some(())
    })
    .await;
    hpa_gone(w, "keda-hpa-restore").await;
    assert!(!op.loops.is_running(&w.namespace, "restore").await);
    assert_eq!(w.replicas("restore").await, 2, "original replicas restored");
    op.stop().await;
}

/// Broken objects get Ready=False with a message naming what to fix.
pub async fn broken_objects(w: &World) {
    w.deployment("broken", 0).await;
    let op = w.start_operator();
    let cases = [
        (
            "unknown-type",
            "type: reddis\n      metadata:\n        listName: a",
            "",
            "unknown trigger type \"reddis\"",
        ),
        (
            "missing-list",
            "type: redis\n      metadata:\n        address: 127.0.0.1:6379",
            "",
            "listName",
        ),
        (
            "bad-paused",
            "type: redis\n      metadata:\n        address: 127.0.0.1:6379\n        listName: a",
            "autoscaling.keda.sh/paused-replicas: five",
            "autoscaling.keda.sh/paused-replicas",
        ),
        (
            "no-target",
            "type: redis\n      metadata:\n        address: 127.0.0.1:6379\n        listName: a",
            "",
            "doesn't exist",
        ),
    ];
    for (name, trigger, annotations, expected) in cases {
        let target = if name == "no-target" {
            "missing"
        } else {
            "broken"
        };
        let yaml = format!(
            "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata:\n  name: {name}\n  annotations: {{{annotations}}}\nspec:\n  scaleTargetRef:\n    name: {target}\n  triggers:\n    - {trigger}\n"
        );
        w.create(&yaml).await;
        let (status, reason, message) = eventually(&format!("Ready=False on {name}"), || async {
            ready(&w.get(name).await).filter(|(s, _, _)| s == "False")
        })
        .await;
        assert_eq!(status, "False");
        assert_eq!(reason, "ScaledObjectCheckFailed", "{name}");
        assert!(
            message.contains(expected),
            "{name}: {message:?} should name {expected:?}"
        );
    }
    op.stop().await;
}
