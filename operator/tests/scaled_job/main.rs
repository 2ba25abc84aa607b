//! The ScaledJob controller against the in-memory API server, a real RabbitMQ queue
//! (127.0.0.1:5672, guest/guest) and a real Redis list, with manual ticks.
//!
//! memkube has no Job controller or kubelet: a test plays both, taking a message for each Job
//! and creating a `Running` pod labelled `job-name=<job>`, or finishing a Job by writing its
//! `Complete`/`Failed` condition through the status subresource.

#[path = "../scenarios/mod.rs"]
mod scenarios;

#[allow(dead_code)]
#[path = "../common/dial.rs"]
mod dial;

#[allow(dead_code)]
#[path = "../../../scalers/tests/common/amqp.rs"]
mod amqp;
#[allow(dead_code)]
#[path = "../../../scalers/tests/common/mod.rs"]
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

async fn redis_world(test: &str) -> Option<(World, redis::aio::MultiplexedConnection, String)> {
    let redis = common::redis_or_skip(test).await?;
    Some((World::start(), redis, common::unique("sj")))
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

mod authentication;
mod jobs;
mod reporting;
