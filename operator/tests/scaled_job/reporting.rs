//! What a ScaledJob reports: Ready and its errors, status, metrics and events in KEDA's words.

use super::*;

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
