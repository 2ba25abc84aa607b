//! The Jobs a ScaledJob creates and deletes: strategies, history limits, rollouts, pause,
//! deletion, shutdown, a panicking scaler.

use super::*;

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
