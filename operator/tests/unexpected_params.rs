//! Issue 29, row 11: KEDA's `KEDA_CHECK_UNEXPECTED_SCALERS_PARAMS` through both controllers on
//! memkube. With the check on (`ScalerEnv::unexpected_params`, what `=enabled` sets), each build
//! of an object's scalers gives it one Warning `KEDAScalerInfo` Event per trigger metadata key
//! the trigger's type does not read, in KEDA's words ("Unmatched input property <key> in
//! scaler <type>", with " (<trigger name>)" for a named trigger): on ScaledObjects and
//! ScaledJobs, also when the build then fails connecting, never for a trigger whose metadata
//! does not parse, and never again on a poll; a rebuild repeats it. Off (the default), none.

mod scenarios;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::events::v1::Event;
use keda_api::{ScaledJob, ScaledObject};
use keda_operator::resolve::WatchScope;
use keda_operator::scaled_job::{JobLoops, ScaledJobController};
use keda_operator::scalers::ScalerEnv;
use keda_operator::unexpected_params::UnexpectedParams;
use keda_operator::{ControllerConfig, ManualTicks, ScaleLoops, ScaledObjectController};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use memkube::MemKube;
use scenarios::{ManualClock, WAIT, eventually};
use tokio_util::sync::CancellationToken;

const NS: &str = "team";

/// memkube with both controllers running, polled by hand.
struct Cluster {
    _server: MemKube,
    client: Client,
    clock: ManualClock,
    ticks: ManualTicks,
    scale_loops: ScaleLoops,
    job_loops: JobLoops,
    shutdown: CancellationToken,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl Cluster {
    /// Both controllers, with the check on or off.
    fn start(unexpected_params: UnexpectedParams) -> Cluster {
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
        let clock = ManualClock::new();
        let ticks = ManualTicks::new();
        let config = ControllerConfig {
            env: ScalerEnv {
                clock: clock.clock(),
                unexpected_params,
                ..ScalerEnv::default()
            },
            ticks: Arc::new(ticks.clone()),
            clock: clock.clock(),
            operator_started_at: Some(clock.now()),
            watch_scope: WatchScope::Namespaces(vec![NS.to_string()]),
            retry_after_error: Duration::from_millis(200),
            ..ControllerConfig::default()
        };
        let objects = ScaledObjectController::new(client.clone(), config.clone());
        let jobs = ScaledJobController::new(client.clone(), config);
        let scale_loops = objects.loops();
        let job_loops = jobs.loops();
        let shutdown = CancellationToken::new();
        let token = shutdown.clone();
        tokio::spawn(async move {
            let _ = objects.run(token).await;
        });
        let token = shutdown.clone();
        tokio::spawn(async move {
            let _ = jobs.run(token).await;
        });
        Cluster {
            _server: server,
            client,
            clock,
            ticks,
            scale_loops,
            job_loops,
            shutdown,
        }
    }

    async fn deployment(&self, name: &str) {
        let d: Deployment = serde_json::from_value(serde_json::json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": { "name": name, "namespace": NS },
            "spec": {
                "replicas": 0,
                "selector": { "matchLabels": { "app": name } },
                "template": {
                    "metadata": { "labels": { "app": name } },
                    "spec": { "containers": [{ "name": "app", "image": "registry.k8s.io/pause:3.9" }] }
                }
            }
        }))
        .expect("a Deployment");
        Api::<Deployment>::namespaced(self.client.clone(), NS)
            .create(&PostParams::default(), &d)
            .await
            .expect("create Deployment");
    }

    async fn scaled_object(&self, yaml: &str) -> ScaledObject {
        let so: ScaledObject = serde_yaml::from_str(yaml).expect("ScaledObject YAML");
        Api::<ScaledObject>::namespaced(self.client.clone(), NS)
            .create(&PostParams::default(), &so)
            .await
            .expect("create ScaledObject")
    }

    async fn scaled_job(&self, yaml: &str) -> ScaledJob {
        let sj: ScaledJob = serde_yaml::from_str(yaml).expect("ScaledJob YAML");
        Api::<ScaledJob>::namespaced(self.client.clone(), NS)
            .create(&PostParams::default(), &sj)
            .await
            .expect("create ScaledJob")
    }

    /// The Events on the `kind` named `name` with `reason`: (type, note, series count).
    async fn events(&self, kind: &str, name: &str, reason: &str) -> Vec<(String, String, i32)> {
        let mut found: Vec<(String, String, i32)> =
            Api::<Event>::namespaced(self.client.clone(), NS)
                .list(&ListParams::default())
                .await
                .expect("list Events")
                .items
                .into_iter()
                .filter(|e| {
                    e.regarding.as_ref().is_some_and(|r| {
                        r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name)
                    }) && e.reason.as_deref() == Some(reason)
                })
                .map(|e| {
                    (
                        e.type_.unwrap_or_default(),
                        e.note.unwrap_or_default(),
                        e.series.map_or(1, |s| s.count),
                    )
                })
                .collect();
        found.sort();
        found
    }

    /// Waits for KEDA's "Scaler <type> is built" on the object: published after the build's
    /// unmatched-parameter Events, so those are all there by then.
    async fn built(&self, kind: &str, name: &str, trigger_type: &str) {
        let note = format!("Scaler {trigger_type} is built");
        eventually(&format!("{note} on {kind} {name}"), || async {
            self.events(kind, name, "KEDAScalersStarted")
                .await
                .into_iter()
                .any(|(_, n, _)| n == note)
                .then_some(())
        })
        .await;
    }

    /// Moves the clock by the polling interval and waits for one more poll of each object.
    async fn poll_both(&self, so: &ScaledObject, sj: &ScaledJob) {
        let mut so_polls = self.scale_loops.polls(&so.uid().expect("uid"));
        let mut sj_polls = self.job_loops.polls(&sj.uid().expect("uid"));
        let (so_before, sj_before) = (*so_polls.borrow(), *sj_polls.borrow());
        self.clock.advance(10);
        self.ticks.tick();
        tokio::time::timeout(WAIT, so_polls.wait_for(|n| *n > so_before))
            .await
            .expect("a ScaledObject poll")
            .expect("poll counter");
        tokio::time::timeout(WAIT, sj_polls.wait_for(|n| *n > sj_before))
            .await
            .expect("a ScaledJob poll")
            .expect("poll counter");
    }
}

/// A ScaledObject on Deployment `office` with two cron triggers, the first named `hours`,
/// each setting one key cron does not read.
const OFFICE: &str = r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: { name: office, namespace: team }
spec:
  scaleTargetRef: { name: office }
  pollingInterval: 10
  triggers:
    - type: cron
      name: hours
      metadata:
        timezone: UTC
        start: "0 8 * * *"
        end: "0 18 * * *"
        desiredReplicas: "2"
        desiredReplica: "3"
    - type: cron
      metadata:
        timezone: UTC
        start: "0 20 * * *"
        end: "0 22 * * *"
        desiredReplicas: "1"
        metricName: evening
"#;

/// A ScaledJob with a cron trigger setting one key cron does not read.
const NIGHTLY: &str = r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledJob
metadata: { name: nightly, namespace: team }
spec:
  pollingInterval: 10
  maxReplicaCount: 2
  jobTargetRef:
    template:
      spec:
        containers: [{ name: worker, image: busybox }]
  triggers:
    - type: cron
      metadata:
        timezone: UTC
        start: "0 1 * * *"
        end: "0 2 * * *"
        desiredReplicas: "1"
        parallelism: "2"
"#;

/// A redis trigger whose metadata parses, at a port where nothing listens: the build fails
/// connecting, after the check.
const UNREACHABLE: &str = r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: { name: unreachable, namespace: team }
spec:
  scaleTargetRef: { name: unreachable }
  triggers:
    - type: redis
      metadata:
        address: "127.0.0.1:1"
        listName: jobs
        listLenght: "5"
"#;

/// A redis trigger without its `listName`: the metadata does not parse, so no check.
const UNPARSED: &str = r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: { name: unparsed, namespace: team }
spec:
  scaleTargetRef: { name: unparsed }
  triggers:
    - type: redis
      metadata:
        address: "127.0.0.1:1"
        lstName: jobs
"#;

fn warning(note: &str, count: i32) -> (String, String, i32) {
    ("Warning".to_string(), note.to_string(), count)
}

#[tokio::test]
async fn with_the_check_on_each_build_warns_of_every_unmatched_trigger_parameter_once() {
    let c = Cluster::start(UnexpectedParams::checking());
    for name in ["office", "unreachable", "unparsed"] {
        c.deployment(name).await;
    }
    let so = c.scaled_object(OFFICE).await;
    let sj = c.scaled_job(NIGHTLY).await;
    c.built("ScaledObject", "office", "cron").await;
    c.built("ScaledJob", "nightly", "cron").await;
    let office = [
        "Unmatched input property desiredReplica in scaler cron (hours)",
        "Unmatched input property metricName in scaler cron",
    ];
    assert_eq!(
        c.events("ScaledObject", "office", "KEDAScalerInfo").await,
        [warning(office[0], 1), warning(office[1], 1)]
    );
    let nightly = "Unmatched input property parallelism in scaler cron";
    assert_eq!(
        c.events("ScaledJob", "nightly", "KEDAScalerInfo").await,
        [warning(nightly, 1)]
    );

    // Polls do not repeat them.
    for _ in 0..3 {
        c.poll_both(&so, &sj).await;
    }
    assert_eq!(
        c.events("ScaledObject", "office", "KEDAScalerInfo").await,
        [warning(office[0], 1), warning(office[1], 1)]
    );
    assert_eq!(
        c.events("ScaledJob", "nightly", "KEDAScalerInfo").await,
        [warning(nightly, 1)]
    );

    // A new generation builds the scalers again: each Warning once more (a series of 2).
    Api::<ScaledObject>::namespaced(c.client.clone(), NS)
        .patch(
            "office",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "spec": { "pollingInterval": 20 } })),
        )
        .await
        .expect("patch ScaledObject");
    let again = eventually("the Warnings of the rebuild", || async {
        let found = c.events("ScaledObject", "office", "KEDAScalerInfo").await;
        found.iter().all(|(_, _, n)| *n >= 2).then_some(found)
    })
    .await;
    assert_eq!(again, [warning(office[0], 2), warning(office[1], 2)]);

    // Parsed, then failed connecting: the Warning and KEDAScalerFailed. Not parsed: only the
    // failure.
    c.scaled_object(UNREACHABLE).await;
    c.scaled_object(UNPARSED).await;
    let (kind, note, _) = eventually("the unreachable trigger's Warning", || async {
        c.events("ScaledObject", "unreachable", "KEDAScalerInfo")
            .await
            .into_iter()
            .next()
    })
    .await;
    assert_eq!(
        (kind.as_str(), note.as_str()),
        (
            "Warning",
            "Unmatched input property listLenght in scaler redis"
        )
    );
    eventually("KEDAScalerFailed on both redis objects", || async {
        let unreachable = c
            .events("ScaledObject", "unreachable", "KEDAScalerFailed")
            .await;
        let unparsed = c
            .events("ScaledObject", "unparsed", "KEDAScalerFailed")
            .await;
        (!unreachable.is_empty() && !unparsed.is_empty()).then_some(())
    })
    .await;
    let unparsed = c.events("ScaledObject", "unparsed", "KEDAScalerInfo").await;
    assert!(unparsed.is_empty(), "{unparsed:?}");
}

#[tokio::test]
async fn with_the_check_off_no_unmatched_trigger_parameter_is_reported() {
    let c = Cluster::start(UnexpectedParams::default());
    for name in ["office", "unreachable"] {
        c.deployment(name).await;
    }
    let so = c.scaled_object(OFFICE).await;
    let sj = c.scaled_job(NIGHTLY).await;
    c.scaled_object(UNREACHABLE).await;
    c.built("ScaledObject", "office", "cron").await;
    c.built("ScaledJob", "nightly", "cron").await;
    c.poll_both(&so, &sj).await;
    eventually("KEDAScalerFailed on the unreachable object", || async {
        (!c.events("ScaledObject", "unreachable", "KEDAScalerFailed")
            .await
            .is_empty())
        .then_some(())
    })
    .await;
    for (kind, name) in [
        ("ScaledObject", "office"),
        ("ScaledJob", "nightly"),
        ("ScaledObject", "unreachable"),
    ] {
        let found = c.events(kind, name, "KEDAScalerInfo").await;
        assert!(found.is_empty(), "{kind} {name}: {found:?}");
    }
}
