//! Issue 29, migration: keda-rs adopts what a running KEDA leaves behind, and leaves what KEDA
//! adopts back.
//!
//! The fixtures are the objects exactly as KEDA's operator (pinned commit 8b4f083) leaves them:
//! - the ScaledObject with KEDA's finalizer `finalizer.keda.sh` (`ensureFinalizer`), its
//!   `scaledobject.keda.sh/name` label (`ensureScaledObjectLabel`), and the status KEDA writes
//!   (`checkTargetResourceIsScalable`: `scaleTargetKind`, `scaleTargetGVKR`,
//!   `originalReplicaCount`; `storeHpaNameInStatus`; `updateStatusWithTriggersAndAuthsTypes`;
//!   the scale executor's `lastActiveTime` and conditions; `handlePause`'s
//!   `pausedReplicaCount`), all in `controllers/keda/scaledobject_controller.go` and
//!   `pkg/scaling/executor/scale_scaledobjects.go`;
//! - its HPA `keda-hpa-<name>` as `newHPAForScaledObject` (`controllers/keda/hpa.go`) builds it:
//!   KEDA's four `app.kubernetes.io/*` labels with KEDA's version, the ScaledObject's labels,
//!   its annotations, and the controller owner reference of `controllerutil.SetControllerReference`.
//!
//! keda-rs started on them must keep the HPA (same UID: updated in place at most, never
//! deleted and recreated), the target's replicas, and the status fields; and what keda-rs
//! leaves must be what KEDA's reconcile takes as its own (the reverse switch).

mod scenarios;

#[path = "common/keda_left.rs"]
mod keda_left;

#[allow(dead_code)]
#[path = "../../scalers/tests/common/mod.rs"]
mod redis_common;

use jiff::SignedDuration;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use keda_api::ScaledObject;
use keda_left::{
    Fixture, KEDA_FINALIZER, KEDA_VERSION, NAME_LABEL, keda_conditions, keda_time,
    keeps_keda_metadata_and_status, last_active, same_hpa,
};
use kube::ResourceExt;
use kube::api::{Patch, PatchParams, PostParams};
use memkube::MemKube;
use scenarios::{World, condition, eventually};
use serde_json::json;

async fn world(test: &str) -> Option<(MemKube, World)> {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .try_init();
    let redis = redis_common::redis_or_skip(test).await?;
    let server = MemKube::new();
    let crds = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/crd");
    server.load_crds_from_dir(crds).expect("CRDs load");
    server.create_namespace("team").expect("namespace");
    let world = World::new(server.client(), "team", redis);
    Some((server, world))
}

/// An active object at 3 replicas (the HPA scaled it there): keda-rs takes the same HPA,
/// leaves the replicas where they are over many polls, and keeps KEDA's status.
#[tokio::test]
async fn an_active_object_keda_left_keeps_its_hpa_replicas_and_status() {
    let Some((_server, w)) = world("adopt-active").await else {
        return;
    };
    let list = redis_common::unique("adopt-active");
    let f = Fixture {
        name: "orders",
        list: &list,
        cooldown: 300,
        annotations: json!({}),
    };
    w.deployment("orders", 3).await;
    w.push(&list, 12).await;
    let active_at = w.clock.now() - SignedDuration::from_secs(5);
    let so = f
        .keda_scaled_object(
            &w,
            json!({
                "lastActiveTime": keda_time(active_at),
                "conditions": keda_conditions(true, false),
            }),
        )
        .await;
    let hpa = f.keda_hpa(&w, &so, 3).await;
    let uid = hpa.uid().expect("HPA uid");

    let op = w.start_operator();
    w.polls_reach(&op, &so, 1).await;
    // The one write keda-rs makes to KEDA's HPA: its own version label, in place.
    let relabelled = eventually("the version label is keda-rs's", || async {
        let hpa = same_hpa(&w, &f.hpa_name(), &uid).await;
        (hpa.labels()
            .get("app.kubernetes.io/version")
            .map(String::as_str)
            == Some(env!("CARGO_PKG_VERSION")))
        .then_some(hpa)
    })
    .await;
    for _ in 0..6 {
        w.poll_after(&op, &so, 10).await;
        assert_eq!(w.replicas("orders").await, 3, "the replicas changed");
        let hpa = same_hpa(&w, &f.hpa_name(), &uid).await;
        assert_eq!(
            hpa.resource_version(),
            relabelled.resource_version(),
            "keda-rs wrote the adopted HPA again"
        );
    }
    let adopted = w.get("orders").await;
    keeps_keda_metadata_and_status(&adopted);
    assert_eq!(
        condition(&adopted, "Ready"),
        Some(("True".into(), "ScaledObjectReady".into()))
    );
    assert_eq!(
        condition(&adopted, "Active"),
        Some(("True".into(), "ScalerActive".into()))
    );
    // The HPA controller's ScalingActive on KEDA's HPA is mirrored, as KEDA mirrors it.
    assert_eq!(
        condition(&adopted, "HPAActive"),
        Some(("True".into(), "HPAActive".into()))
    );
    assert!(
        last_active(&adopted)
            .is_some_and(|t| t >= active_at.round(jiff::Unit::Second).expect("rounds")),
        "lastActiveTime went back or was dropped: {:?}",
        last_active(&adopted)
    );
    // The HPA is KEDA's in every field KEDA set (keda-rs' version label aside), owned by the
    // same ScaledObject, with the HPA controller's status untouched.
    let hpa = same_hpa(&w, &f.hpa_name(), &uid).await;
    assert_eq!(
        serde_json::to_value(&hpa.spec).expect("json"),
        f.hpa_spec(),
        "the HPA spec"
    );
    assert_eq!(
        serde_json::to_value(&hpa.metadata.owner_references).expect("json"),
        Fixture::owner_references(&so)
    );
    assert_eq!(
        hpa.status.as_ref().and_then(|s| s.current_replicas),
        Some(3)
    );
    op.stop().await;
}

/// An inactive object KEDA left at 3 replicas 100 s into a 300 s cooldown: keda-rs reads the
/// cooldown from KEDA's `lastActiveTime`, so the workload is not scaled to zero at the first
/// poll (as it would be with the `lastActiveTime` dropped: a never-active object has no
/// cooldown), nor at any poll before KEDA itself would have scaled it; it goes to zero once the
/// cooldown has passed, counted from max(lastActiveTime, operator start) (keda-rs' restart
/// rule, `docs/migrating-from-keda.md`).
#[tokio::test]
async fn an_inactive_object_keda_left_counts_its_cooldown_from_keda_s_last_active_time() {
    let Some((_server, w)) = world("adopt-cooldown").await else {
        return;
    };
    let list = redis_common::unique("adopt-cooldown");
    let f = Fixture {
        name: "reports",
        list: &list,
        cooldown: 300,
        annotations: json!({}),
    };
    w.deployment("reports", 3).await;
    let active_at = w.clock.now() - SignedDuration::from_secs(100);
    let so = f
        .keda_scaled_object(
            &w,
            json!({
                "lastActiveTime": keda_time(active_at),
                "conditions": keda_conditions(false, false),
            }),
        )
        .await;
    let hpa = f.keda_hpa(&w, &so, 3).await;
    let uid = hpa.uid().expect("HPA uid");
    let started = w.clock.now();

    let op = w.start_operator();
    w.polls_reach(&op, &so, 1).await;
    assert_eq!(w.replicas("reports").await, 3, "scaled at the first poll");
    // KEDA would scale to zero at lastActiveTime + 300 s, 200 s from now: every poll until
    // then leaves the 3 replicas.
    for _ in 0..19 {
        w.poll_after(&op, &so, 10).await;
        assert_eq!(
            w.replicas("reports").await,
            3,
            "scaled within the cooldown, {} s after the switch",
            w.clock.now().duration_since(started).as_secs()
        );
    }
    let cooling = w.get("reports").await;
    keeps_keda_metadata_and_status(&cooling);
    assert_eq!(
        last_active(&cooling),
        Some(active_at.round(jiff::Unit::Second).expect("rounds")),
        "KEDA's lastActiveTime is kept as it was"
    );
    assert_eq!(
        condition(&cooling, "Active"),
        Some(("False".into(), "ScalerCooldown".into()))
    );
    // Exactly a cooldown after the switch: still cooling (KEDA's test is strict too).
    w.poll_after(&op, &so, 110).await;
    assert_eq!(w.replicas("reports").await, 3, "at the end of the cooldown");
    // Past the cooldown counted from the switch: to zero, by keda-rs' own scale loop.
    w.poll_after(&op, &so, 1).await;
    assert_eq!(w.replicas("reports").await, 0, "past the cooldown");
    same_hpa(&w, &f.hpa_name(), &uid).await;
    op.stop().await;
}

/// A paused object KEDA left (`paused-replicas: 4`, its HPA deleted by `handlePause`,
/// `status.pausedReplicaCount: 4`): keda-rs holds 4, creates no HPA and keeps the status;
/// unpaused, it creates the HPA and keeps the replicas.
#[tokio::test]
async fn a_paused_object_keda_left_stays_paused_at_its_replicas() {
    let Some((_server, w)) = world("adopt-paused").await else {
        return;
    };
    let list = redis_common::unique("adopt-paused");
    let f = Fixture {
        name: "billing",
        list: &list,
        cooldown: 300,
        annotations: json!({ "autoscaling.keda.sh/paused-replicas": "4" }),
    };
    w.deployment("billing", 4).await;
    w.push(&list, 12).await;
    let so = f
        .keda_scaled_object(
            &w,
            json!({
                "lastActiveTime": keda_time(w.clock.now() - SignedDuration::from_secs(600)),
                "pausedReplicaCount": 4,
                "conditions": keda_conditions(true, true),
            }),
        )
        .await;
    let written = so.resource_version();

    let op = w.start_operator();
    // The reconcile has run when the operator has seen the object: give it a few rounds.
    for _ in 0..5 {
        w.clock.advance(60);
        w.ticks.tick();
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert_eq!(w.replicas("billing").await, 4, "paused replicas changed");
        assert!(
            w.hpas()
                .get_opt(&f.hpa_name())
                .await
                .expect("lookup")
                .is_none(),
            "an HPA was created for a paused object"
        );
    }
    assert!(!op.loops.is_running("team", "billing").await, "a loop runs");
    let paused = w.get("billing").await;
    keeps_keda_metadata_and_status(&paused);
    let status = paused.status.as_ref().expect("status");
    assert_eq!(status.paused_replica_count, Some(4), "pausedReplicaCount");
    assert_eq!(
        condition(&paused, "Paused"),
        Some(("True".into(), "ScaledObjectPaused".into()))
    );
    assert_eq!(
        paused.resource_version(),
        written,
        "keda-rs rewrote an object it had nothing to change on"
    );

    w.annotate("billing", "autoscaling.keda.sh/paused-replicas", None)
        .await;
    scenarios::hpa_exists(&w, &f.hpa_name()).await;
    eventually("pausedReplicaCount cleared", || async {
        let so = w.get("billing").await;
        so.status
            .as_ref()
            .is_some_and(|s| s.paused_replica_count.is_none())
            .then_some(so)
    })
    .await;
    w.polls_reach(&op, &so, 1).await;
    w.poll_after(&op, &so, 10).await;
    assert_eq!(w.replicas("billing").await, 4, "unpaused replicas changed");
    op.stop().await;
}

/// The reverse switch: what keda-rs leaves is what KEDA's reconcile takes as its own, field by
/// field as KEDA reads it (`controllers/keda/scaledobject_controller.go`, `hpa.go`):
/// - `ensureFinalizer` finds `finalizer.keda.sh`, `ensureScaledObjectLabel` its label;
/// - `checkTargetResourceIsScalable` finds `scaleTargetKind` equal to `GVKString()` and
///   `originalReplicaCount` set, so whatever it writes there has the values it finds (it
///   never replaces `originalReplicaCount` with the current replicas);
/// - `Conditions.AreInitialized` finds Ready, Active, Fallback and Paused, so nothing is reset;
/// - `getHPANameOnEnsure` reads `status.hpaName`, and `isHpaRenamed` finds the default name;
/// - `updateHPAIfNeeded` finds the spec `DeepDerivative`-equal to its own (no spec update) and
///   the labels equal but for `app.kubernetes.io/version`, which it updates in place (same
///   UID: KEDA never deletes an HPA it finds, except on rename and pause);
/// - the scale executor reads `lastActiveTime` for its cooldown, written on every transition.
///
/// The same holds after keda-rs adopted KEDA's objects and then hands them back.
#[tokio::test]
async fn what_keda_rs_leaves_is_what_keda_adopts() {
    let Some((_server, w)) = world("adopt-reverse").await else {
        return;
    };
    let list = redis_common::unique("adopt-reverse");
    let f = Fixture {
        name: "fresh",
        list: &list,
        cooldown: 300,
        annotations: json!({}),
    };
    w.deployment("fresh", 2).await;
    w.push(&list, 12).await;
    let op = w.start_operator();
    // Created as a user applies it: no finalizer, no label, no status.
    let mut plain = f.scaled_object();
    plain["metadata"]
        .as_object_mut()
        .expect("metadata")
        .retain(|k, _| k == "name" || k == "namespace");
    let so: ScaledObject = serde_json::from_value(plain).expect("ScaledObject");
    let so = w
        .scaled_objects()
        .create(&PostParams::default(), &so)
        .await
        .expect("create");
    w.polls_reach(&op, &so, 1).await;
    w.poll_after(&op, &so, 10).await;
    let hpa = scenarios::hpa_exists(&w, &f.hpa_name()).await;
    let left = eventually("lastActiveTime written", || async {
        let so = w.get("fresh").await;
        last_active(&so).is_some().then_some(so)
    })
    .await;
    op.stop().await;
    keda_takes_it(&f, &left, &hpa);

    // Round trip: KEDA's objects adopted by keda-rs, then handed back.
    let list2 = redis_common::unique("adopt-round-trip");
    let g = Fixture {
        name: "round",
        list: &list2,
        cooldown: 300,
        annotations: json!({}),
    };
    w.deployment("round", 3).await;
    w.push(&list2, 12).await;
    let so = g
        .keda_scaled_object(
            &w,
            json!({
                "lastActiveTime": keda_time(w.clock.now()),
                "conditions": keda_conditions(true, false),
            }),
        )
        .await;
    let keda_hpa = g.keda_hpa(&w, &so, 3).await;
    let op = w.start_operator();
    w.polls_reach(&op, &so, 1).await;
    w.poll_after(&op, &so, 10).await;
    op.stop().await;
    let hpa = same_hpa(&w, &g.hpa_name(), &keda_hpa.uid().expect("uid")).await;
    keda_takes_it(&g, &w.get("round").await, &hpa);
    assert_eq!(w.replicas("round").await, 3);
}

/// The checks of [`what_keda_rs_leaves_is_what_keda_adopts`] on one object and its HPA.
fn keda_takes_it(f: &Fixture<'_>, so: &ScaledObject, hpa: &HorizontalPodAutoscaler) {
    assert_eq!(so.finalizers(), [KEDA_FINALIZER], "KEDA's finalizer, once");
    assert_eq!(
        so.labels().get(NAME_LABEL).map(String::as_str),
        Some(f.name)
    );
    let status = so.status.as_ref().expect("status");
    assert_eq!(
        status.scale_target_kind.as_deref(),
        Some("apps/v1.Deployment")
    );
    assert_eq!(
        serde_json::to_value(&status.scale_target_gvkr).expect("json"),
        json!({ "group": "apps", "version": "v1", "kind": "Deployment", "resource": "deployments" })
    );
    assert!(
        status.original_replica_count.is_some(),
        "originalReplicaCount"
    );
    assert_eq!(status.hpa_name.as_deref(), Some(f.hpa_name().as_str()));
    assert_eq!(status.triggers_types.as_deref(), Some("redis"));
    assert_eq!(status.external_metric_names, Some(vec![f.metric()]));
    assert!(status.last_active_time.is_some(), "lastActiveTime");
    for type_ in ["Ready", "Active", "Fallback", "Paused"] {
        assert!(
            condition(so, type_).is_some(),
            "condition {type_} missing: KEDA would reset them all"
        );
    }
    assert_eq!(
        serde_json::to_value(&hpa.spec).expect("json"),
        f.hpa_spec(),
        "KEDA would rewrite the HPA spec"
    );
    assert_eq!(
        serde_json::to_value(&hpa.metadata.owner_references).expect("json"),
        Fixture::owner_references(so),
        "KEDA's controller owner reference"
    );
    let mut labels = serde_json::to_value(hpa.labels()).expect("json");
    labels["app.kubernetes.io/version"] = json!(KEDA_VERSION);
    assert_eq!(
        labels,
        f.hpa_labels(KEDA_VERSION),
        "the HPA labels, but for the version"
    );
    assert!(
        hpa.annotations().is_empty(),
        "annotations KEDA would remove: {:?}",
        hpa.annotations()
    );
}

/// A ScaledJob KEDA left with three running Jobs it created (`pkg/scaling/executor/
/// scale_jobs.go` `generateJobs`: KEDA's labels, `scaledjob.keda.sh/generation`, the ScaledJob
/// as controller) for three queued items: keda-rs counts them as the ScaledJob's running Jobs,
/// so it creates no more (the default strategy asks for `queue - running` = 0), and it deletes
/// none of them (their generation is the ScaledJob's, so no rollout applies).
#[tokio::test]
async fn a_scaled_job_s_running_jobs_keda_created_are_counted_not_duplicated() {
    use k8s_openapi::api::batch::v1::Job;
    use k8s_openapi::api::core::v1::Pod;
    use keda_api::ScaledJob;
    use keda_operator::ControllerConfig;
    use keda_operator::resolve::WatchScope;
    use keda_operator::scaled_job::ScaledJobController;
    use keda_operator::scalers::ScalerEnv;
    use kube::api::{Api, ListParams};

    let Some((_server, w)) = world("adopt-scaled-job").await else {
        return;
    };
    let list = redis_common::unique("adopt-scaled-job");
    w.push(&list, 3).await;
    let sj: ScaledJob = serde_json::from_value(json!({
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledJob",
        "metadata": { "name": "batch", "namespace": "team", "finalizers": [KEDA_FINALIZER] },
        "spec": {
            "pollingInterval": 10,
            "maxReplicaCount": 10,
            "jobTargetRef": { "template": { "spec": {
                "containers": [{ "name": "worker", "image": "busybox" }],
                "restartPolicy": "Never"
            } } },
            "triggers": [{ "type": "redis", "metadata": {
                "address": "127.0.0.1:6379", "listName": list, "listLength": "1"
            } }]
        }
    }))
    .expect("ScaledJob");
    let scaled_jobs: Api<ScaledJob> = Api::namespaced(w.client.clone(), "team");
    let sj = scaled_jobs
        .create(&PostParams::default(), &sj)
        .await
        .expect("create the ScaledJob");
    let conditions = json!({ "status": { "conditions": keda_conditions(true, false) } });
    scaled_jobs
        .patch_status("batch", &PatchParams::default(), &Patch::Merge(&conditions))
        .await
        .expect("KEDA's status");
    let jobs: Api<Job> = Api::namespaced(w.client.clone(), "team");
    let pods: Api<Pod> = Api::namespaced(w.client.clone(), "team");
    let mut keda_jobs = Vec::new();
    for suffix in ["x7k2p", "m4q9z", "b8n3c"] {
        let name = format!("batch-{suffix}");
        let job: Job = serde_json::from_value(json!({
            "metadata": {
                "name": name,
                "namespace": "team",
                "labels": {
                    "app.kubernetes.io/name": "batch",
                    "app.kubernetes.io/version": KEDA_VERSION,
                    "app.kubernetes.io/part-of": "batch",
                    "app.kubernetes.io/managed-by": "keda-operator",
                    "scaledjob.keda.sh/name": "batch",
                },
                "annotations": { "scaledjob.keda.sh/generation": "1" },
                "ownerReferences": [{
                    "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledJob", "name": "batch",
                    "uid": sj.uid().expect("uid"), "controller": true, "blockOwnerDeletion": true
                }],
            },
            "spec": { "template": {
                "metadata": { "labels": { "scaledjob.keda.sh/name": "batch" } },
                "spec": {
                    "containers": [{ "name": "worker", "image": "busybox" }],
                    "restartPolicy": "Never"
                }
            } }
        }))
        .expect("KEDA's Job");
        let job = jobs
            .create(&PostParams::default(), &job)
            .await
            .expect("create KEDA's Job");
        keda_jobs.push(job.uid().expect("uid"));
        keda_jobs.sort();
        let pod: Pod = serde_json::from_value(json!({
            "metadata": { "name": format!("{name}-pod"), "labels": { "job-name": name } },
            "spec": { "containers": [{ "name": "worker", "image": "busybox" }] }
        }))
        .expect("a Pod");
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("create the Job's pod");
        pods.patch_status(
            &format!("{name}-pod"),
            &PatchParams::default(),
            &Patch::Merge(&json!({ "status": { "phase": "Running" } })),
        )
        .await
        .expect("the pod runs");
    }

    let config = ControllerConfig {
        env: ScalerEnv {
            clock: w.clock.clock(),
            registry: w.registry.clone(),
            ..ScalerEnv::default()
        },
        metrics: w.metrics.clone(),
        ticks: std::sync::Arc::new(w.ticks.clone()),
        clock: w.clock.clock(),
        watch_scope: WatchScope::Namespaces(vec!["team".to_string()]),
        retry_after_error: std::time::Duration::from_millis(200),
        ..ControllerConfig::default()
    };
    let controller = ScaledJobController::new(w.client.clone(), config);
    let loops = controller.loops();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let token = shutdown.clone();
    tokio::spawn(async move {
        let _ = controller.run(token).await;
    });
    let uid = sj.uid().expect("uid");
    let mut polls = loops.polls(&uid);
    for n in 1..=5 {
        w.ticks.tick();
        tokio::time::timeout(scenarios::WAIT, polls.wait_for(|p| *p >= n))
            .await
            .unwrap_or_else(|_| panic!("poll {n} of the ScaledJob did not happen"))
            .expect("poll counter");
        let mut now: Vec<String> = jobs
            .list(&ListParams::default().labels("scaledjob.keda.sh/name=batch"))
            .await
            .expect("list Jobs")
            .items
            .iter()
            .filter_map(|j| j.uid())
            .collect();
        now.sort();
        assert_eq!(
            now, keda_jobs,
            "poll {n}: the ScaledJob's Jobs changed (KEDA's three running Jobs cover the three items)"
        );
    }
    let adopted = scaled_jobs.get("batch").await.expect("get");
    assert_eq!(adopted.finalizers(), [KEDA_FINALIZER], "finalizers");
    shutdown.cancel();
}
