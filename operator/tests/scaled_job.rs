//! The ScaledJob controller against the in-memory API server, a real RabbitMQ queue
//! (127.0.0.1:5672, guest/guest) and a real Redis list, with manual ticks.
//!
//! memkube has no Job controller or kubelet: a test plays both, taking a message for each Job
//! and creating a `Running` pod labelled `job-name=<job>`, or finishing a Job by writing its
//! `Complete`/`Failed` condition through the status subresource.

mod scenarios;

#[allow(dead_code)]
#[path = "common/dial.rs"]
mod dial;

#[allow(dead_code)]
#[path = "../../scalers/tests/common/amqp.rs"]
mod amqp;
#[allow(dead_code)]
#[path = "../../scalers/tests/common/mod.rs"]
mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use amqp::AmqpBroker;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use keda_api::ScaledJob;
use keda_decide::job::JobCounts;
use keda_operator::ControllerConfig;
use keda_operator::ManualTicks;
use keda_operator::resolve::WatchScope;
use keda_operator::scaled_job::{JobLoops, ScaledJobController};
use keda_operator::scalers::ScalerEnv;
use keda_operator::telemetry::Metrics;
use keda_scalers::Registry;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use memkube::{MemKube, Verb};
use scenarios::{ManualClock, WAIT, eventually};
use tokio_util::sync::CancellationToken;

const NS: &str = "team";

/// One test's world: memkube, the running controller, manual ticks.
struct World {
    server: MemKube,
    client: Client,
    ticks: ManualTicks,
    loops: JobLoops,
    shutdown: CancellationToken,
    metrics: Metrics,
}

impl World {
    fn start() -> World {
        World::start_with(Registry::builtin())
    }

    /// A world whose scalers come from `registry`.
    fn start_with(registry: Registry) -> World {
        let _ = tracing_subscriber::fmt()
            .with_test_writer()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .try_init();
        let server = MemKube::new();
        server
            .load_crds_from_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../config/crd"))
            .expect("CRDs load");
        server.create_namespace(NS).expect("namespace");
        let client = server.client();
        let ticks = ManualTicks::new();
        let clock = ManualClock::new();
        let metrics = Metrics::new();
        let config = ControllerConfig {
            env: ScalerEnv {
                clock: clock.clock(),
                registry: Arc::new(registry),
                ..ScalerEnv::default()
            },
            metrics: metrics.clone(),
            ticks: Arc::new(ticks.clone()),
            clock: clock.clock(),
            watch_scope: WatchScope::Namespaces(vec![NS.to_string()]),
            retry_after_error: Duration::from_millis(200),
            ..ControllerConfig::default()
        };
        let controller = ScaledJobController::new(client.clone(), config);
        let loops = controller.loops();
        let shutdown = CancellationToken::new();
        let token = shutdown.clone();
        tokio::spawn(async move {
            let _ = controller.run(token).await;
        });
        World {
            server,
            client,
            ticks,
            loops,
            shutdown,
            metrics,
        }
    }

    fn scaled_jobs(&self) -> Api<ScaledJob> {
        Api::namespaced(self.client.clone(), NS)
    }

    fn job_api(&self) -> Api<Job> {
        Api::namespaced(self.client.clone(), NS)
    }

    async fn create(&self, yaml: &str) -> ScaledJob {
        let mut sj: ScaledJob = serde_yaml::from_str(yaml).expect("ScaledJob YAML");
        sj.metadata.namespace = Some(NS.to_string());
        self.scaled_jobs()
            .create(&PostParams::default(), &sj)
            .await
            .expect("create ScaledJob")
    }

    async fn get(&self, name: &str) -> ScaledJob {
        self.scaled_jobs().get(name).await.expect("get ScaledJob")
    }

    /// The ScaledJob's Jobs, by name.
    async fn jobs(&self, name: &str) -> Vec<Job> {
        self.job_api()
            .list(&ListParams::default().labels(&format!("scaledjob.keda.sh/name={name}")))
            .await
            .expect("list Jobs")
            .items
    }

    async fn job_names(&self, name: &str) -> BTreeSet<String> {
        self.jobs(name).await.iter().map(|j| j.name_any()).collect()
    }

    async fn patch(&self, name: &str, patch: serde_json::Value) {
        self.scaled_jobs()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("patch ScaledJob");
    }

    fn polls(&self, sj: &ScaledJob) -> u64 {
        *self.loops.polls(&sj.uid().expect("uid")).borrow()
    }

    /// Waits until the loop of `sj` has completed `n` polls.
    async fn polls_reach(&self, sj: &ScaledJob, n: u64) {
        let mut rx = self.loops.polls(&sj.uid().expect("uid"));
        tokio::time::timeout(WAIT, rx.wait_for(|p| *p >= n))
            .await
            .unwrap_or_else(|_| panic!("{n} polls of {} did not happen", sj.name_any()))
            .expect("poll counter");
    }

    /// Lets every loop poll once more and waits for the poll of `sj`.
    async fn tick(&self, sj: &ScaledJob) {
        let before = *self.loops.polls(&sj.uid().expect("uid")).borrow();
        self.ticks.tick();
        self.polls_reach(sj, before + 1).await;
    }

    /// Plays the kubelet: a `Running` pod for each Job that has none yet.
    async fn run_pods(&self, jobs: &[Job]) {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), NS);
        for job in jobs {
            let name = job.name_any();
            let pod: Pod = serde_json::from_value(serde_json::json!({
                "metadata": { "name": format!("{name}-pod"), "labels": { "job-name": name } },
                "spec": { "containers": [{ "name": "w", "image": "busybox" }] }
            }))
            .expect("a Pod");
            match pods.create(&PostParams::default(), &pod).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 409 => continue,
                Err(e) => panic!("create pod: {e}"),
            }
            let status = serde_json::json!({ "status": { "phase": "Running" } });
            pods.patch_status(
                &format!("{name}-pod"),
                &PatchParams::default(),
                &Patch::Merge(&status),
            )
            .await
            .expect("pod status");
        }
    }

    /// Plays the Job controller: finishes `job` as `Complete` or `Failed` at `at`.
    async fn finish(&self, job: &str, condition: &str, at: &str) {
        let status = serde_json::json!({ "status": {
            "conditions": [{ "type": condition, "status": "True" }],
            "completionTime": at,
        }});
        self.job_api()
            .patch_status(job, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .expect("Job status");
    }

    /// Waits until the loop counts these running and pending Jobs (its caches caught up).
    async fn counts_reach(&self, name: &str, running: i64, pending: i64) {
        let want = JobCounts { running, pending };
        eventually(
            &format!("{running} running, {pending} pending Jobs"),
            || async {
                let sj = self.get(name).await;
                (self.loops.counts(&sj) == want).then_some(())
            },
        )
        .await;
    }
}

impl Drop for World {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

fn rabbitmq_job(name: &str, queue: &str) -> String {
    format!(
        r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledJob
metadata: {{ name: {name} }}
spec:
  maxReplicaCount: 10
  scalingStrategy: {{ strategy: eager }}
  jobTargetRef:
    template:
      spec:
        containers: [{{ name: consumer, image: busybox }}]
  triggers:
    - type: rabbitmq
      metadata:
        host: amqp://guest:guest@127.0.0.1:5672/
        queueName: {queue}
        mode: QueueLength
        value: "1"
"#
    )
}

fn redis_job(name: &str, list: &str, extra_spec: &str, annotations: &str) -> String {
    format!(
        r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledJob
metadata:
  name: {name}
  annotations: {{{annotations}}}
spec:
  maxReplicaCount: 10
{extra_spec}
  jobTargetRef:
    template:
      spec:
        containers: [{{ name: worker, image: busybox }}]
  triggers:
    - type: redis
      metadata:
        address: 127.0.0.1:6379
        listName: {list}
        listLength: "1"
"#
    )
}

async fn push(redis: &mut redis::aio::MultiplexedConnection, list: &str, n: usize) {
    for i in 0..n {
        let _: i64 = redis::cmd("RPUSH")
            .arg(list)
            .arg(i)
            .query_async(redis)
            .await
            .expect("RPUSH");
    }
}

async fn drop_key(redis: &mut redis::aio::MultiplexedConnection, key: &str) {
    let _: i64 = redis::cmd("DEL")
        .arg(key)
        .query_async(redis)
        .await
        .expect("DEL");
}

#[tokio::test]
async fn eager_with_max_ten_reaches_four_then_eight_then_ten_jobs_as_messages_arrive() {
    let test = "eager rabbitmq";
    let Some(broker) = AmqpBroker::connect_or_skip(test, "/").await else {
        return;
    };
    let queue = common::unique("sj-eager");
    broker.declare(&queue).await;
    let w = World::start();
    broker.publish(&queue, 4).await;
    let sj = w.create(&rabbitmq_job("consumer", &queue)).await;
    w.polls_reach(&sj, 1).await;
    // Per poll: the Jobs expected, then the messages arriving before the next poll.
    let mut seen = BTreeSet::new();
    for (expected, arriving) in [(4_usize, 4), (8, 4), (10, 0)] {
        let jobs = w.jobs("consumer").await;
        assert_eq!(jobs.len(), expected, "Jobs after a poll");
        // Each new Job starts and takes one message.
        let new = jobs.iter().filter(|j| seen.insert(j.name_any())).count();
        broker.take(&queue, new).await;
        w.run_pods(&jobs).await;
        w.counts_reach("consumer", i64::try_from(expected).expect("fits"), 0)
            .await;
        broker.publish(&queue, arriving).await;
        w.tick(&sj).await;
    }
    assert_eq!(
        w.jobs("consumer").await.len(),
        10,
        "never beyond maxReplicaCount"
    );

    // Nothing changes any more: further polls write no status (no storm of lastActiveTime).
    let written = w
        .server
        .request_counts()
        .get(Verb::Patch, "scaledjobs/status");
    assert!(written > 0, "the status was written while things changed");
    w.server.reset_request_counts();
    w.tick(&sj).await;
    w.tick(&sj).await;
    let counts = w.server.request_counts();
    assert_eq!(
        counts.get(Verb::Patch, "scaledjobs/status"),
        0,
        "no status write"
    );
    assert_eq!(
        counts.get(Verb::Create, "jobs"),
        0,
        "no Job beyond maxReplicaCount"
    );

    let sj = w.get("consumer").await;
    let status = sj.status.clone().expect("status");
    assert_eq!(status.triggers_types.as_deref(), Some("rabbitmq"));
    let condition = |t: &str| {
        status
            .conditions
            .as_ref()
            .and_then(|cs| cs.iter().find(|c| c.type_ == t).cloned())
            .map(|c| (c.status, c.reason.unwrap_or_default()))
    };
    assert_eq!(
        condition("Ready"),
        Some(("True".into(), "ScaledJobReady".into()))
    );
    assert_eq!(
        condition("Active"),
        Some(("True".into(), "ScalerActive".into()))
    );
    assert!(status.last_active_time.is_some(), "lastActiveTime written");
    assert!(sj.finalizers().iter().any(|f| f == "finalizer.keda.sh"));
    let job = &w.jobs("consumer").await[0];
    assert_eq!(job.metadata.generate_name.as_deref(), Some("consumer-"));
    assert_eq!(
        job.annotations()
            .get("scaledjob.keda.sh/generation")
            .map(String::as_str),
        Some("1")
    );
    broker.delete(&queue).await;
}

async fn redis_world(test: &str) -> Option<(World, redis::aio::MultiplexedConnection, String)> {
    let redis = common::redis_or_skip(test).await?;
    Some((World::start(), redis, common::unique("sj")))
}

#[tokio::test]
async fn history_limits_delete_the_oldest_finished_jobs_beyond_each_limit() {
    let Some((w, mut redis, list)) = redis_world("history limits").await else {
        return;
    };
    push(&mut redis, &list, 4).await;
    let sj = w
        .create(&redis_job(
            "batch",
            &list,
            "  successfulJobsHistoryLimit: 1\n  failedJobsHistoryLimit: 1",
            "",
        ))
        .await;
    w.polls_reach(&sj, 1).await;
    drop_key(&mut redis, &list).await;
    let names: Vec<String> = w.job_names("batch").await.into_iter().collect();
    assert_eq!(names.len(), 4, "one Job per item");
    w.finish(&names[0], "Complete", "2026-01-01T00:00:01Z")
        .await;
    w.finish(&names[1], "Complete", "2026-01-01T00:00:02Z")
        .await;
    w.finish(&names[2], "Failed", "2026-01-01T00:00:04Z").await;
    w.finish(&names[3], "Failed", "2026-01-01T00:00:03Z").await;
    w.counts_reach("batch", 0, 0).await;
    w.tick(&sj).await;
    assert_eq!(
        w.job_names("batch").await,
        BTreeSet::from([names[1].clone(), names[2].clone()]),
        "the newest succeeded and the newest failed Job remain"
    );
    let sj = w.get("batch").await;
    let active = sj
        .status
        .and_then(|s| s.conditions)
        .and_then(|cs| cs.into_iter().find(|c| c.type_ == "Active"))
        .map(|c| (c.status, c.reason.unwrap_or_default()));
    assert_eq!(active, Some(("False".into(), "ScalerNotActive".into())));
}

/// Creates two Jobs at generation 1, drains the list, then changes the template.
async fn rollout(
    w: &World,
    redis: &mut redis::aio::MultiplexedConnection,
    list: &str,
    spec: &str,
) -> (ScaledJob, BTreeSet<String>) {
    push(redis, list, 2).await;
    let sj = w.create(&redis_job("roll", list, spec, "")).await;
    w.polls_reach(&sj, 1).await;
    drop_key(redis, list).await;
    let old = w.job_names("roll").await;
    assert_eq!(old.len(), 2);
    w.counts_reach("roll", 2, 2).await;
    let before = w.polls(&sj);
    w.patch(
        "roll",
        serde_json::json!({ "spec": { "jobTargetRef": { "template": { "spec": {
            "containers": [{ "name": "worker", "image": "busybox:2" }]
        }}}}}),
    )
    .await;
    // The loop restarts for generation 2 and polls at once.
    w.polls_reach(&sj, before + 1).await;
    (sj, old)
}

#[tokio::test]
async fn a_new_generation_deletes_old_jobs_with_the_immediate_rollout() {
    let Some((w, mut redis, list)) = redis_world("immediate rollout").await else {
        return;
    };
    rollout(&w, &mut redis, &list, "").await;
    eventually("the old Jobs deleted", || async {
        w.jobs("roll").await.is_empty().then_some(())
    })
    .await;
    assert_eq!(w.get("roll").await.metadata.generation, Some(2));
    // KEDA's Events of the cleanup (issue 16).
    let (kind, note) = job_event(&w, "roll", "ScaledJobRolloutCleanupStarted").await;
    assert_eq!(kind, "Normal");
    assert_eq!(
        note,
        "Deleting 2 jobs owned by the previous version of the scaledJob"
    );
    let (kind, note) = job_event(&w, "roll", "ScaledJobRolloutCleanupCompleted").await;
    assert_eq!(kind, "Normal");
    assert_eq!(
        note,
        "Deleted 2 jobs owned by the previous version of the scaledJob"
    );
}

#[tokio::test]
async fn a_new_generation_keeps_old_jobs_with_the_gradual_rollout() {
    let Some((w, mut redis, list)) = redis_world("gradual rollout").await else {
        return;
    };
    let (_sj, old) = rollout(&w, &mut redis, &list, "  rollout: { strategy: gradual }").await;
    assert_eq!(w.job_names("roll").await, old, "old Jobs run to completion");
}

#[tokio::test]
async fn a_paused_scaled_job_creates_no_jobs_until_unpaused() {
    let Some((w, mut redis, list)) = redis_world("pause").await else {
        return;
    };
    let sj = w.create(&redis_job("paused", &list, "", "")).await;
    w.polls_reach(&sj, 1).await;
    assert!(
        w.jobs("paused").await.is_empty(),
        "an empty list asks for no Job"
    );
    w.patch(
        "paused",
        serde_json::json!({ "metadata": { "annotations": { "autoscaling.keda.sh/paused": "true" } } }),
    )
    .await;
    eventually("Paused=True and the loop stopped", || async {
        let sj = w.get("paused").await;
        let paused = sj
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Paused"))
            .is_some_and(|c| c.status == "True" && c.reason.as_deref() == Some("ScaledJobPaused"));
        (paused && !w.loops.is_running(NS, "paused").await).then_some(())
    })
    .await;
    push(&mut redis, &list, 3).await;
    let before = w.polls(&sj);
    w.ticks.tick();
    w.ticks.tick();
    tokio::task::yield_now().await;
    assert_eq!(w.polls(&sj), before, "no poll while paused");
    assert!(w.jobs("paused").await.is_empty(), "no Job while paused");

    w.patch(
        "paused",
        serde_json::json!({ "metadata": { "annotations": { "autoscaling.keda.sh/paused": null } } }),
    )
    .await;
    w.polls_reach(&sj, before + 1).await;
    assert_eq!(
        w.jobs("paused").await.len(),
        3,
        "unpaused, one Job per item"
    );
    drop_key(&mut redis, &list).await;
}

#[tokio::test]
async fn a_trigger_that_does_not_build_sets_ready_false_naming_the_parameter() {
    let w = World::start();
    let yaml = redis_job("broken", "unused", "", "").replace("        listName: unused\n", "");
    w.create(&yaml).await;
    let (status, reason, message) = eventually("Ready=False", || async {
        let sj = w.get("broken").await;
        let c = sj
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "Ready" && c.status == "False")?;
        Some((
            c.status,
            c.reason.unwrap_or_default(),
            c.message.unwrap_or_default(),
        ))
    })
    .await;
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "ScaledJobCheckFailed")
    );
    assert!(message.contains("listName"), "{message}");
    assert!(!w.loops.is_running(NS, "broken").await);
}

#[tokio::test]
async fn deleting_a_scaled_job_stops_its_loop_and_releases_the_finalizer() {
    let Some((w, _redis, list)) = redis_world("deletion").await else {
        return;
    };
    let sj = w.create(&redis_job("gone", &list, "", "")).await;
    w.polls_reach(&sj, 1).await;
    assert!(
        w.get("gone")
            .await
            .finalizers()
            .iter()
            .any(|f| f == "finalizer.keda.sh")
    );
    w.scaled_jobs()
        .delete("gone", &kube::api::DeleteParams::default())
        .await
        .expect("delete ScaledJob");
    eventually("the ScaledJob gone", || async {
        matches!(w.scaled_jobs().get_opt("gone").await, Ok(None)).then_some(())
    })
    .await;
    assert!(!w.loops.is_running(NS, "gone").await, "loop stopped");
}

#[tokio::test]
async fn the_controller_stops_on_shutdown_even_without_the_crd() {
    let server = MemKube::new();
    let controller = ScaledJobController::new(server.client(), ControllerConfig::default());
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(controller.run(shutdown.clone()));
    tokio::task::yield_now().await;
    shutdown.cancel();
    tokio::time::timeout(WAIT, run)
        .await
        .expect("the controller stops")
        .expect("no panic")
        .expect("no error");
}

#[tokio::test]
async fn a_trigger_authentication_supplies_a_scaled_job_trigger_parameter() {
    let Some((w, mut redis, list)) = redis_world("scaled job trigger authentication").await else {
        return;
    };
    // The Redis address is not in the trigger: it comes from a Secret through a
    // TriggerAuthentication, as KEDA users commonly write it.
    let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "redis-conn", "namespace": NS},
        "stringData": {"address": "127.0.0.1:6379"}
    }))
    .expect("a Secret");
    Api::<k8s_openapi::api::core::v1::Secret>::namespaced(w.client.clone(), NS)
        .create(&PostParams::default(), &secret)
        .await
        .expect("create Secret");
    let auth: keda_api::TriggerAuthentication = serde_yaml::from_str(&format!(
        r#"
apiVersion: keda.sh/v1alpha1
kind: TriggerAuthentication
metadata: {{ name: redis-auth, namespace: {NS} }}
spec:
  secretTargetRef:
    - {{ parameter: address, name: redis-conn, key: address }}
"#
    ))
    .expect("a TriggerAuthentication");
    Api::<keda_api::TriggerAuthentication>::namespaced(w.client.clone(), NS)
        .create(&PostParams::default(), &auth)
        .await
        .expect("create TriggerAuthentication");
    push(&mut redis, &list, 3).await;
    let yaml = redis_job("authed", &list, "", "")
        .replace("        address: 127.0.0.1:6379\n", "")
        .replace(
            "        listLength: \"1\"\n",
            "        listLength: \"1\"\n      authenticationRef:\n        name: redis-auth\n",
        );
    assert!(
        !yaml.contains("address:"),
        "the trigger names no address itself"
    );
    let sj = w.create(&yaml).await;
    w.polls_reach(&sj, 1).await;
    assert_eq!(w.job_names("authed").await.len(), 3, "one Job per item");

    // Rotating the Secret rebuilds the loop's scalers with the new address, where nothing
    // listens: the rebuild fails and the ScaledJob says so (without the rotation signal the
    // running loop would keep its old, working client and stay Ready).
    let rotated: k8s_openapi::api::core::v1::Secret = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "redis-conn", "namespace": NS},
        "stringData": {"address": "127.0.0.1:1"}
    }))
    .expect("a Secret");
    Api::<k8s_openapi::api::core::v1::Secret>::namespaced(w.client.clone(), NS)
        .patch(
            "redis-conn",
            &kube::api::PatchParams::apply("keda-rs-test").force(),
            &kube::api::Patch::Apply(&rotated),
        )
        .await
        .expect("rotate the Secret");
    let message = eventually("Ready=False after the rotation", || async {
        let c = w
            .get("authed")
            .await
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "Ready" && c.status == "False")?;
        c.message
    })
    .await;
    assert!(
        message.contains("trigger 0 (redis)") && message.contains("127.0.0.1:1"),
        "{message}"
    );
    drop_key(&mut redis, &list).await;
}

fn dial_job(name: &str) -> String {
    format!(
        r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledJob
metadata: {{ name: {name} }}
spec:
  maxReplicaCount: 3
  jobTargetRef:
    template:
      spec:
        containers: [{{ name: worker, image: busybox }}]
  triggers:
    - type: dial
      metadata:
        dial: {name}
"#
    )
}

/// `Ready` of a ScaledJob: (status, reason, message).
fn job_ready(sj: &ScaledJob) -> Option<(String, String, String)> {
    let c = sj
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

/// Defence in depth (issue 14): a scaler that panics in its read or its factory makes only its
/// ScaledJob `Ready=False InternalError` (named, counted); the other ScaledJob keeps creating
/// Jobs, and the panicking one recovers with its first good poll.
#[tokio::test]
async fn a_panicking_scaler_fails_only_its_scaled_job_which_recovers_when_it_stops() {
    let dials = dial::Dials::new();
    let w = World::start_with(dials.registry());
    dials.panic_on_read("broken", true);
    dials.panic_on_build("unbuilt", true);
    let steady = w.create(&dial_job("steady")).await;
    let broken = w.create(&dial_job("broken")).await;
    w.create(&dial_job("unbuilt")).await;
    w.polls_reach(&broken, 1).await;
    // The first poll's status may race the first reconcile's; the second poll's does not.
    w.tick(&broken).await;
    let not_ready = |name: &'static str| {
        let w = &w;
        async move {
            eventually(&format!("Ready=False InternalError on {name}"), || async {
                job_ready(&w.get(name).await)
                    .filter(|(status, reason, _)| status == "False" && reason == "InternalError")
                    .map(|(_, _, message)| message)
            })
            .await
        }
    };
    let message = not_ready("broken").await;
    assert!(
        message.contains("ScaledJob team/broken")
            && message.contains("trigger 0 (dial)")
            && message.contains("dial broken: the read was told to panic"),
        "{message}"
    );
    let message = not_ready("unbuilt").await;
    assert!(
        message.contains("building the scaler of ScaledJob team/unbuilt")
            && message.contains("trigger 0 (dial)"),
        "{message}"
    );
    let text = w.metrics.encode();
    for name in ["broken", "unbuilt"] {
        assert!(
            text.contains(&format!(
                r#"keda_internal_panics_total{{component="scaler",namespace="team",type="scaledjob",resource="{name}"}}"#
            )),
            "{text}"
        );
    }

    // The other ScaledJob creates its Jobs; the broken one polls on, creating none.
    dials.set("steady", 10.0);
    w.tick(&steady).await;
    assert_eq!(w.jobs("steady").await.len(), 2);
    let reads = dials.reads("broken");
    w.tick(&broken).await;
    assert_eq!(
        dials.reads("broken"),
        reads + 1,
        "the panicking loop polls on"
    );
    assert!(w.jobs("broken").await.is_empty());

    dials.panic_on_read("broken", false);
    dials.set("broken", 1.0);
    w.tick(&broken).await;
    eventually("Ready=True on broken", || async {
        job_ready(&w.get("broken").await)
            .filter(|(status, _, _)| status == "True")
            .map(|_| ())
    })
    .await;
    assert_eq!(w.jobs("broken").await.len(), 1);
}

/// A ScaledJob whose triggers are the dials `names`, in that order.
fn dials_job(name: &str, names: &[&str]) -> String {
    let triggers: String = names
        .iter()
        .map(|d| format!("    - type: dial\n      metadata: {{ dial: {d} }}\n"))
        .collect();
    format!(
        r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledJob
metadata: {{ name: {name} }}
spec:
  maxReplicaCount: 3
  jobTargetRef:
    template:
      spec:
        containers: [{{ name: worker, image: busybox }}]
  triggers:
{triggers}"#
    )
}

/// The value of the one series of `family` whose labels contain every one of `labels`.
/// Issue 16, as KEDA's ScaledJob controller: a TriggerAuthentication's `status.scaledjobs`
/// lists the ScaledJobs that use it (not `status.scaledobjects`), and a deleted ScaledJob
/// leaves it; an empty list is no field.
#[tokio::test]
async fn a_trigger_authentication_lists_the_scaled_jobs_that_use_it() {
    let dials = dial::Dials::new();
    let w = World::start_with(dials.registry());
    let auths: Api<keda_api::TriggerAuthentication> = Api::namespaced(w.client.clone(), NS);
    let auth: keda_api::TriggerAuthentication = serde_yaml::from_str(
        "apiVersion: keda.sh/v1alpha1\nkind: TriggerAuthentication\nmetadata: { name: job-auth }\nspec: {}\n",
    )
    .expect("YAML");
    auths
        .create(&PostParams::default(), &auth)
        .await
        .expect("create TriggerAuthentication");
    let users = || async {
        let status = auths.get("job-auth").await.expect("get").status;
        (
            status.as_ref().and_then(|s| s.scaledjobs.clone()),
            status.and_then(|s| s.scaledobjects),
        )
    };
    let yaml = dial_job("authed-job").replace(
        "        dial: authed-job\n",
        "        dial: authed-job\n      authenticationRef: { name: job-auth }\n",
    );
    assert!(yaml.contains("authenticationRef"), "{yaml}");
    w.create(&yaml).await;
    eventually("authed-job listed", || async {
        (users().await == (Some("authed-job".to_string()), None)).then_some(())
    })
    .await;
    w.scaled_jobs()
        .delete("authed-job", &kube::api::DeleteParams::default())
        .await
        .expect("delete ScaledJob");
    eventually("authed-job unlisted", || async {
        (users().await == (None, None)).then_some(())
    })
    .await;
}

fn series(text: &str, family: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{family}{{")))
        .find(|l| labels.iter().all(|want| l.contains(want)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// The Events on ScaledJob `name` with `reason`: (type, note).
async fn job_events(client: &Client, name: &str, reason: &str) -> Vec<(String, String)> {
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), NS);
    events
        .list(&ListParams::default())
        .await
        .expect("list Events")
        .items
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                && e.reason.as_deref() == Some(reason)
        })
        .map(|e| (e.type_.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect()
}

/// Waits for an Event with `reason` on ScaledJob `name`, and returns the first: (type, note).
async fn job_event(w: &World, name: &str, reason: &str) -> (String, String) {
    eventually(&format!("a {reason} Event on {name}"), || async {
        job_events(&w.client, name, reason).await.into_iter().next()
    })
    .await
}

/// Issue 16: a ScaledJob reports KEDA's per-scaler metrics with `type="scaledjob"`, its loop
/// latency, its registered trigger and resource, and counts its scaler errors in
/// `keda_scaled_job_errors_total`, as KEDA does.
#[tokio::test]
async fn a_scaled_job_reports_keda_s_scaler_loop_and_error_metrics() {
    let dials = dial::Dials::new();
    let w = World::start_with(dials.registry());
    dials.set("metered", 4.0);
    let sj = w.create(&dial_job("metered")).await;
    w.polls_reach(&sj, 1).await;
    w.tick(&sj).await;
    let text = w.metrics.encode();
    let scaler = [
        r#"namespace="team""#,
        r#"metric="s0-dial-metered""#,
        r#"scaledObject="metered""#,
        r#"triggerIndex="0""#,
        r#"type="scaledjob""#,
    ];
    assert_eq!(
        series(&text, "keda_scaler_metrics_value", &scaler),
        Some(4.0),
        "{text}"
    );
    assert_eq!(
        series(&text, "keda_scaler_active", &scaler),
        Some(1.0),
        "{text}"
    );
    assert!(
        series(&text, "keda_scaler_metrics_latency_seconds", &scaler).is_some(),
        "{text}"
    );
    assert!(
        series(
            &text,
            "keda_internal_scale_loop_latency_seconds",
            &[r#"namespace="team",type="scaledjob",resource="metered""#]
        )
        .is_some(),
        "{text}"
    );
    assert_eq!(
        series(&text, "keda_trigger_registered_total", &[r#"type="dial""#]),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        series(
            &text,
            "keda_resource_registered_total",
            &[r#"type="scaled_job",namespace="team""#]
        ),
        Some(1.0),
        "{text}"
    );

    dials.fail_on_read("metered", true);
    w.tick(&sj).await;
    let text = w.metrics.encode();
    assert_eq!(
        series(
            &text,
            "keda_scaled_job_errors_total",
            &[r#"namespace="team",scaledJob="metered""#]
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        series(&text, "keda_scaler_detail_errors_total", &scaler),
        Some(1.0),
        "{text}"
    );

    // Deleted: the trigger and the resource are no longer registered.
    w.scaled_jobs()
        .delete("metered", &kube::api::DeleteParams::default())
        .await
        .expect("delete ScaledJob");
    eventually("the ScaledJob gone", || async {
        matches!(w.scaled_jobs().get_opt("metered").await, Ok(None)).then_some(())
    })
    .await;
    let text = w.metrics.encode();
    assert_eq!(
        series(&text, "keda_trigger_registered_total", &[r#"type="dial""#]),
        Some(0.0),
        "{text}"
    );
}

/// Issue 16, as KEDA's `RequestJobScale`: failing triggers with nothing active make a ScaledJob
/// `Ready=False TriggerError`; with another trigger active, `Ready=Unknown
/// PartialTriggerError`; with no error, `Ready=True` again.
#[tokio::test]
async fn a_trigger_error_is_ready_false_when_nothing_is_active_and_unknown_when_something_is() {
    let dials = dial::Dials::new();
    let w = World::start_with(dials.registry());
    dials.fail_on_read("down", true);
    let sj = w.create(&dials_job("mixed", &["down", "idle"])).await;
    w.polls_reach(&sj, 1).await;
    w.tick(&sj).await;
    let ready = |status: &'static str| {
        let w = &w;
        async move {
            eventually(&format!("Ready={status}"), || async {
                job_ready(&w.get("mixed").await).filter(|(s, _, _)| s == status)
            })
            .await
        }
    };
    let (_, reason, message) = ready("False").await;
    assert_eq!(reason, "TriggerError");
    assert_eq!(
        message,
        "Triggers defined in ScaledJob are not working correctly"
    );

    dials.set("idle", 2.0);
    w.tick(&sj).await;
    let (_, reason, message) = ready("Unknown").await;
    assert_eq!(reason, "PartialTriggerError");
    assert_eq!(
        message,
        "Some triggers defined in ScaledJob are not working correctly"
    );

    dials.fail_on_read("down", false);
    w.tick(&sj).await;
    let (_, reason, _) = ready("True").await;
    assert_eq!(reason, "ScaledJobReady");
}

/// Issue 16: `status.externalMetricNames` (trigger order) and `status.triggersActivity` are
/// written for ScaledJobs as for ScaledObjects.
#[tokio::test]
async fn a_scaled_job_status_names_its_metrics_and_their_activity() {
    let dials = dial::Dials::new();
    let w = World::start_with(dials.registry());
    dials.set("busy", 3.0);
    let sj = w.create(&dials_job("named", &["busy", "quiet"])).await;
    w.polls_reach(&sj, 1).await;
    w.tick(&sj).await;
    let status = eventually("triggersActivity", || async {
        let status = w.get("named").await.status?;
        status.triggers_activity.is_some().then_some(status)
    })
    .await;
    assert_eq!(
        status.external_metric_names,
        Some(vec![
            "s0-dial-busy".to_string(),
            "s1-dial-quiet".to_string()
        ])
    );
    let activity: Vec<(String, bool)> = status
        .triggers_activity
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.is_active))
        .collect();
    assert_eq!(
        activity,
        vec![
            ("s0-dial-busy".to_string(), true),
            ("s1-dial-quiet".to_string(), false)
        ]
    );
}

/// Issue 16: KEDA's Events of the job loop: `ScaledJobActive` / `ScaledJobInactive` when
/// Active changes, `KEDAJobCreateFailed` (Warning) for a Job the API server refuses, and the
/// `KEDAScalerFailed` Warning naming the failed scaler.
#[tokio::test]
async fn the_job_loop_emits_keda_s_activity_job_creation_and_scaler_failure_events() {
    let dials = dial::Dials::new();
    let w = World::start_with(dials.registry());
    let sj = w.create(&dial_job("evented")).await;
    w.polls_reach(&sj, 1).await;
    // KEDA's ScaledJobInactive comes only after Active=True: not from the first poll.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        job_events(&w.client, "evented", "ScaledJobInactive")
            .await
            .is_empty()
    );

    // The API server refuses the Job the next poll creates: a Warning for it.
    w.server.inject_failure(
        memkube::FailureRule::new(403)
            .verb(Verb::Create)
            .resource("jobs")
            .message("jobs are forbidden here")
            .times(1),
    );
    dials.set("evented", 2.0);
    w.tick(&sj).await;
    let (kind, note) = job_event(&w, "evented", "ScaledJobActive").await;
    assert_eq!(
        (kind.as_str(), note.as_str()),
        ("Normal", "Scaling is performed because triggers are active")
    );
    let (kind, note) = job_event(&w, "evented", "KEDAJobCreateFailed").await;
    assert_eq!(kind, "Warning");
    assert!(
        note.starts_with("Failed to create job evented-: ") && note.contains("forbidden here"),
        "{note}"
    );

    dials.set("evented", 0.0);
    w.tick(&sj).await;
    let (kind, note) = job_event(&w, "evented", "ScaledJobInactive").await;
    assert_eq!(
        (kind.as_str(), note.as_str()),
        (
            "Normal",
            "Scaling is not performed because triggers are not active"
        )
    );

    dials.fail_on_read("evented", true);
    w.tick(&sj).await;
    let (kind, note) = job_event(&w, "evented", "KEDAScalerFailed").await;
    assert_eq!(kind, "Warning");
    assert!(note.contains("dial evented is down"), "{note}");
}

/// Issue 29, row 11: a ScaledJob whose scaler cannot be built (redis at a closed port) gets
/// KEDA's `KEDAScalerFailed` from the builder and `ScaledJobCheckFailed` in KEDA's words first
/// ("Failed to ensure ScaledJob is correctly created: " then keda-rs's message naming the
/// trigger); a good one gets `ScaledJobReady` "ScaledJob is ready for scaling".
#[tokio::test]
async fn scaled_job_ready_and_check_failed_events_are_in_keda_s_words() {
    let dials = dial::Dials::new();
    let w = World::start_with(dials.registry());
    w.create(&dial_job("fine")).await;
    let (kind, note) = job_event(&w, "fine", "ScaledJobReady").await;
    assert_eq!(
        (kind.as_str(), note.as_str()),
        ("Normal", "ScaledJob is ready for scaling")
    );
    w.create(&redis_job("unbuilt", "unbuilt", "", "").replace("127.0.0.1:6379", "127.0.0.1:1"))
        .await;
    let (kind, note) = job_event(&w, "unbuilt", "KEDAScalerFailed").await;
    assert_eq!(kind, "Warning");
    assert!(note.contains("redis"), "{note}");
    let (kind, note) = job_event(&w, "unbuilt", "ScaledJobCheckFailed").await;
    assert_eq!(kind, "Warning");
    let prefixed = "Failed to ensure ScaledJob is correctly created: spec.triggers[0]: ";
    assert!(note.starts_with(prefixed), "{note}");
    let (_, _, message) = eventually("Ready=False on unbuilt", || async {
        job_ready(&w.get("unbuilt").await).filter(|(status, _, _)| status == "False")
    })
    .await;
    assert!(message.starts_with(prefixed), "{message}");
}

/// Issue 29, row 11: KEDA's scale handler events on a ScaledJob: `KEDAScalersStarted`
/// "Started scalers watch" when its loop starts; on deletion `KEDAScalersStopped` "Stopped
/// scalers watch" and `ScaledJobDeleted` as a Warning.
#[tokio::test]
async fn a_scaled_job_s_scalers_watch_and_deletion_events_are_keda_s() {
    let dials = dial::Dials::new();
    let w = World::start_with(dials.registry());
    let sj = w.create(&dial_job("watched")).await;
    w.polls_reach(&sj, 1).await;
    let started = job_events(&w.client, "watched", "KEDAScalersStarted").await;
    assert!(
        started
            .iter()
            .any(|(kind, note)| kind == "Normal" && note == "Started scalers watch"),
        "{started:?}"
    );
    w.scaled_jobs()
        .delete("watched", &Default::default())
        .await
        .expect("delete");
    let (kind, note) = job_event(&w, "watched", "KEDAScalersStopped").await;
    assert_eq!(
        (kind.as_str(), note.as_str()),
        ("Normal", "Stopped scalers watch")
    );
    let (kind, note) = job_event(&w, "watched", "ScaledJobDeleted").await;
    assert_eq!(
        (kind.as_str(), note.as_str()),
        ("Warning", "ScaledJob was deleted")
    );
}
