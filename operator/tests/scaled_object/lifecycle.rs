//! A ScaledObject's life: refusals naming the field, its status and HPA writes, pause, deletion.

use super::*;

#[tokio::test]
async fn a_deleted_object_leaves_no_loop_no_hpa_and_restores_replicas() {
    let Some((_server, w)) = world("restore").await else {
        return;
    };
    scenarios::deletion_restores(&w, &list("restore")).await;
}

#[tokio::test]
async fn broken_objects_are_not_ready_with_a_message_naming_the_field() {
    let Some((_server, w)) = world("broken").await else {
        return;
    };
    scenarios::broken_objects(&w).await;
}

#[tokio::test]
async fn a_formula_bomb_is_not_ready_naming_the_formula_and_its_budget_and_gets_no_hpa() {
    let Some((_server, w)) = world("formula-bomb").await else {
        return;
    };
    w.deployment("bomb", 0).await;
    let op = w.start_operator();
    // Nested map over array literals of 200 elements: 8 million array elements if it ran.
    let ones = format!("[{}]", vec!["1"; 200].join(","));
    let formula = format!("queue + count(map({ones}, map({ones}, map({ones}, #))), true)");
    let yaml = format!(
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata:\n  name: bomb\nspec:\n  \
         scaleTargetRef:\n    name: bomb\n  advanced:\n    scalingModifiers:\n      \
         formula: \"{formula}\"\n      target: \"5\"\n  triggers:\n    - type: redis\n      \
         name: queue\n      metadata:\n        address: 127.0.0.1:6379\n        listName: {}\n",
        list("bomb")
    );
    w.create(&yaml).await;
    let (_, reason, message) = scenarios::eventually("Ready=False on the bomb", || async {
        scenarios::ready(&w.get("bomb").await).filter(|(s, _, _)| s == "False")
    })
    .await;
    assert_eq!(reason, "ScaledObjectCheckFailed");
    assert!(
        message.contains("spec.advanced.scalingModifiers.formula: evaluating the formula may take")
            && message.contains("over the step budget of 100000 steps"),
        "{message}"
    );
    assert!(
        w.hpas()
            .get_opt("keda-hpa-bomb")
            .await
            .expect("HPA lookup")
            .is_none(),
        "a refused object gets no HPA"
    );
    op.stop().await;
}

/// KEDA's reconcile first puts `Paused` right (`Paused=False` / `ScaledObjectUnpaused` once the
/// pause annotation is gone), then runs its checks; a failed check sets `Ready=False` and
/// `Active=Unknown` / `UnknownState`. Unpausing and breaking the object in one update must not
/// leave `Paused=True` beside `Ready=False`.
#[tokio::test]
async fn unpausing_an_object_whose_check_fails_sets_paused_false_and_active_unknown() {
    let Some((_server, w)) = world("unpause-broken").await else {
        return;
    };
    let list = list("unpause-broken");
    w.deployment("unpause", 0).await;
    let op = w.start_operator();
    w.create(&scenarios::redis_object(
        "unpause",
        "unpause",
        &list,
        "",
        "autoscaling.keda.sh/paused-replicas: \"1\"",
    ))
    .await;
    scenarios::eventually("Paused=True", || async {
        (scenarios::condition(&w.get("unpause").await, "Paused")
            == Some(("True".into(), "ScaledObjectPaused".into())))
        .then_some(())
    })
    .await;

    // One update: the pause annotation removed and the target renamed to one that is missing.
    let patch = json!({
        "metadata": { "annotations": { "autoscaling.keda.sh/paused-replicas": null } },
        "spec": { "scaleTargetRef": { "name": "missing" } },
    });
    w.scaled_objects()
        .patch("unpause", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch");
    let so = scenarios::eventually("Ready=False", || async {
        let so = w.get("unpause").await;
        scenarios::ready(&so)
            .is_some_and(|(s, _, _)| s == "False")
            .then_some(so)
    })
    .await;
    let conditions = so
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let find = |t: &str| {
        let c = conditions
            .iter()
            .find(|c| c.type_ == t)
            .unwrap_or_else(|| panic!("condition {t}"));
        (
            c.status.as_str(),
            c.reason.as_deref().unwrap_or_default(),
            c.message.as_deref().unwrap_or_default(),
        )
    };
    assert_eq!(find("Ready").1, "ScaledObjectCheckFailed");
    assert_eq!(
        find("Paused"),
        (
            "False",
            "ScaledObjectUnpaused",
            "pause annotation removed for ScaledObject"
        )
    );
    assert_eq!(
        find("Active"),
        ("Unknown", "UnknownState", "ScaledObject check failed")
    );
    op.stop().await;
}

/// As in KEDA, the finalizer leaves the HPA to the garbage collector (the HPA's controller owner
/// reference): an orphaning delete keeps the HPA, without the owner reference.
#[tokio::test]
async fn an_orphaning_delete_keeps_the_hpa_as_in_keda() {
    let Some((_server, w)) = world("orphan").await else {
        return;
    };
    let list = list("orphan");
    w.deployment("orphan", 0).await;
    let op = w.start_operator();
    w.create(&scenarios::redis_object("orphan", "orphan", &list, "", ""))
        .await;
    scenarios::hpa_exists(&w, "keda-hpa-orphan").await;
    w.scaled_objects()
        .delete(
            "orphan",
            &kube::api::DeleteParams {
                propagation_policy: Some(kube::api::PropagationPolicy::Orphan),
                ..kube::api::DeleteParams::default()
            },
        )
        .await
        .expect("delete");
    scenarios::eventually("the ScaledObject gone", || async {
        matches!(w.scaled_objects().get_opt("orphan").await, Ok(None)).then_some(())
    })
    .await;
    let hpa = w
        .hpas()
        .get_opt("keda-hpa-orphan")
        .await
        .expect("HPA lookup")
        .expect("the orphaned HPA is kept");
    assert!(
        hpa.metadata.owner_references.unwrap_or_default().is_empty(),
        "the orphaned HPA has no owner left"
    );
    op.stop().await;
}

#[tokio::test]
async fn status_is_not_patched_again_when_nothing_changed() {
    let Some((server, w)) = world("quiet").await else {
        return;
    };
    let list = list("quiet");
    w.deployment("quiet", 0).await;
    let op = w.start_operator();
    let so = w
        .create(&scenarios::redis_object("quiet", "quiet", &list, "", ""))
        .await;
    scenarios::hpa_exists(&w, "keda-hpa-quiet").await;
    w.poll_after(&op, &so, 10).await;
    w.poll_after(&op, &so, 10).await;
    server.reset_request_counts();
    for _ in 0..5 {
        w.poll_after(&op, &so, 10).await;
    }
    let counts = server.request_counts();
    assert_eq!(
        counts.get(Verb::Patch, "scaledobjects/status"),
        0,
        "{counts:?}"
    );
    assert_eq!(counts.get(Verb::Patch, "deployments/scale"), 0);
    assert_eq!(
        counts.get(Verb::Get, "deployments"),
        0,
        "replicas come from the cache"
    );
    op.stop().await;
}

/// An object that stays active makes no status write by default: `lastActiveTime` is written
/// when it becomes active and when it stops; with `--last-active-time-refresh` it is written
/// again once per interval while active (KEDA writes it on every active poll).
#[tokio::test]
async fn an_object_that_stays_active_writes_its_status_only_on_transitions() {
    let Some((server, w)) = world("steady").await else {
        return;
    };
    let list = list("steady");
    w.deployment("steady", 0).await;
    // Above the object's activation length of 5.
    w.push(&list, 10).await;
    let op = w.start_operator();
    let so = w
        .create(&scenarios::redis_object("steady", "steady", &list, "", ""))
        .await;
    scenarios::hpa_exists(&w, "keda-hpa-steady").await;
    w.polls_reach(&op, &so, 1).await;
    scenarios::eventually("active and persisted", || async {
        w.get("steady")
            .await
            .status
            .and_then(|s| s.last_active_time)
            .map(|_| ())
    })
    .await;
    let became_active = w
        .get("steady")
        .await
        .status
        .and_then(|s| s.last_active_time)
        .expect("lastActiveTime");
    // A poll for the write of the first one's status to settle.
    w.poll_after(&op, &so, 30).await;
    server.reset_request_counts();
    // 20 polls, 30 s apart: ten minutes active.
    for _ in 0..20 {
        w.poll_after(&op, &so, 30).await;
    }
    let counts = server.request_counts();
    assert_eq!(
        counts.get(Verb::Patch, "scaledobjects/status"),
        0,
        "no status write while the object stays active: {counts:?}"
    );
    assert_eq!(
        w.get("steady")
            .await
            .status
            .and_then(|s| s.last_active_time),
        Some(became_active.clone()),
        "lastActiveTime stays the time the object became active"
    );
    // The end of the activity is written, with the last active poll's time.
    w.drain(&list).await;
    let last_active_poll = w.clock.now();
    w.poll_after(&op, &so, 30).await;
    let written = scenarios::eventually("the end of the activity written", || async {
        w.get("steady")
            .await
            .status
            .and_then(|s| s.last_active_time)
            .filter(|t| *t != became_active)
    })
    .await;
    // The API keeps whole seconds.
    assert_eq!(written.0.as_second(), last_active_poll.as_second());
    op.stop().await;

    // With a refresh interval of 5 minutes: two writes in ten minutes of activity.
    w.push(&list, 10).await;
    let op = w.start_operator_refreshing(jiff::SignedDuration::from_mins(5));
    let so = w.get("steady").await;
    w.poll_after(&op, &so, 30).await;
    w.poll_after(&op, &so, 30).await;
    server.reset_request_counts();
    for _ in 0..20 {
        w.poll_after(&op, &so, 30).await;
    }
    let patches = server
        .request_counts()
        .get(Verb::Patch, "scaledobjects/status");
    assert!(
        (1..=2).contains(&patches),
        "a refresh every 5 minutes over 10 minutes: {patches} writes"
    );
    w.drain(&list).await;
    op.stop().await;
}

/// A new ScaledObject gets KEDA's finalizer and its name label in one write, its HPA is created
/// without a read first (the HPA watch tells it does not exist), and its status is written once
/// by the reconciler and once by the loop's first poll.
#[tokio::test]
async fn a_new_object_is_claimed_in_one_write() {
    let Some((server, w)) = world("claim").await else {
        return;
    };
    let list = list("claim");
    w.deployment("claim", 0).await;
    let op = w.start_operator();
    server.reset_request_counts();
    w.create(&scenarios::redis_object("claim", "claim", &list, "", ""))
        .await;
    // Waits without requests of its own: only the operator's are counted.
    let ready = || {
        server
            .objects("keda.sh/v1alpha1", "ScaledObject")
            .expect("ScaledObjects")
            .iter()
            .any(|so| so["status"]["hpaName"] == "keda-hpa-claim")
    };
    let started = std::time::Instant::now();
    while !ready() {
        assert!(
            started.elapsed() < scenarios::WAIT,
            "no hpaName in the status"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // A moment for any further reconcile the claim or the HPA's creation would cause.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let counts = server.request_counts();
    let so = w.get("claim").await;
    assert_eq!(
        so.metadata.finalizers,
        Some(vec!["finalizer.keda.sh".to_string()])
    );
    assert_eq!(
        so.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("scaledobject.keda.sh/name"))
            .map(String::as_str),
        Some("claim")
    );
    assert_eq!(counts.get(Verb::Patch, "scaledobjects"), 1, "{counts:?}");
    assert_eq!(
        counts.get(Verb::Create, "horizontalpodautoscalers"),
        1,
        "{counts:?}"
    );
    assert_eq!(
        counts.get(Verb::Get, "horizontalpodautoscalers"),
        0,
        "{counts:?}"
    );
    // The reconciler's status and the loop's first poll, one write each: the loop polls after
    // the reconcile that started it, and neither writes back a stale view of the other's.
    assert_eq!(
        counts.get(Verb::Patch, "scaledobjects/status"),
        2,
        "{counts:?}"
    );
    // The Deployment comes from the target cache once it has listed; only a reconcile that runs
    // before that checks /scale.
    assert!(
        counts.get(Verb::Get, "deployments/scale") <= 1,
        "{counts:?}"
    );
    op.stop().await;
}

/// `HPAActive` follows the HPA's `ScalingActive` condition, which the HPA controller writes
/// (memkube has none, so the test writes it): absent until the HPA reports, then mirrored on the
/// next poll with KEDA's reasons and messages (`getHPAHealth`: `False` passes the HPA's own
/// reason through, issue 29 row 5), while `Ready` keeps describing the ScaledObject itself.
#[tokio::test]
async fn hpa_active_mirrors_the_hpas_scaling_active_condition() {
    let Some((_server, w)) = world("hpa-active").await else {
        return;
    };
    let list = list("hpa-active");
    w.deployment("mirror", 0).await;
    let op = w.start_operator();
    let so = w
        .create(&scenarios::redis_object("mirror", "mirror", &list, "", ""))
        .await;
    scenarios::hpa_exists(&w, "keda-hpa-mirror").await;
    w.poll_after(&op, &so, 10).await;
    assert_eq!(
        scenarios::condition(&w.get("mirror").await, "HPAActive"),
        None,
        "the HPA has not reported ScalingActive yet"
    );

    let cases = [
        (
            json!({"type": "ScalingActive", "status": "False", "reason": "FailedGetExternalMetric",
                   "message": "unable to get external metric team/s0-redis/&LabelSelector{}: no metrics"}),
            (
                "False",
                "FailedGetExternalMetric",
                "HPA is not actively scaling: unable to get external metric team/s0-redis/&LabelSelector{}: no metrics",
            ),
        ),
        (
            json!({"type": "ScalingActive", "status": "False", "reason": "ScalingDisabled",
                   "message": "scaling is disabled since the replica count of the target is zero"}),
            (
                "True",
                "ScalingDisabled",
                "scaling is disabled since the replica count of the target is zero",
            ),
        ),
        (
            json!({"type": "ScalingActive", "status": "True", "reason": "ValidMetricFound",
                   "message": "the HPA was able to successfully calculate a replica count"}),
            ("True", "HPAActive", "HPA is actively scaling"),
        ),
    ];
    for (hpa_condition, (status, reason, message)) in cases {
        w.hpas()
            .patch_status(
                "keda-hpa-mirror",
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"status": {"currentReplicas": 0, "desiredReplicas": 0,
                                                "conditions": [hpa_condition]}}),
                ),
            )
            .await
            .expect("HPA status");
        let found = scenarios::eventually(&format!("HPAActive {reason}"), || async {
            w.poll_after(&op, &so, 10).await;
            let now = w.get("mirror").await;
            let c = now
                .status
                .as_ref()?
                .conditions
                .as_ref()?
                .iter()
                .find(|c| c.type_ == "HPAActive" && c.reason.as_deref() == Some(reason))?
                .clone();
            Some((c, now))
        })
        .await;
        let (c, now) = found;
        assert_eq!(c.status, status);
        assert_eq!(c.message.as_deref(), Some(message));
        assert_eq!(
            scenarios::ready(&now).map(|r| r.0),
            Some("True".to_string()),
            "an unhealthy HPA does not make the ScaledObject unready"
        );
    }
    op.stop().await;
}

/// Issue 29, row 10: a restore to `originalReplicaCount` that the API server refuses (the
/// target's `/scale` write fails) is logged and reported as a Warning Event, and the finalizer
/// is still removed, as in KEDA's `finalizeScaledObject`: the delete completes instead of
/// retrying forever.
#[tokio::test]
async fn a_failed_restore_is_evented_and_the_delete_still_completes() {
    let Some((server, w)) = world("restore-fails").await else {
        return;
    };
    let list = list("restore-fails");
    w.deployment("stuck", 2).await;
    let op = w.start_operator();
    let so = w
        .create(&scenarios::redis_object(
            "stuck",
            "stuck",
            &list,
            "  advanced:\n    restoreToOriginalReplicaCount: true",
            "",
        ))
        .await;
    scenarios::hpa_exists(&w, "keda-hpa-stuck").await;
    w.polls_reach(&op, &so, 1).await;
    scenarios::eventually("scaled to zero", || async {
        (w.replicas("stuck").await == 0).then_some(())
    })
    .await;
    server.inject_failure(
        memkube::FailureRule::new(500)
            .resource("deployments/scale")
            .name("stuck"),
    );
    w.delete("stuck").await;
    scenarios::eventually("the ScaledObject gone", || async {
        matches!(w.scaled_objects().get_opt("stuck").await, Ok(None)).then_some(())
    })
    .await;
    server.clear_failures();
    assert_eq!(w.replicas("stuck").await, 0, "the restore could not happen");
    let events: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(w.client.clone(), "team");
    let failed: Vec<_> = events
        .list(&Default::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some("KEDAScaleTargetRestoreFailed")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("stuck")
        })
        .collect();
    assert_eq!(failed.len(), 1, "one Warning about the failed restore");
    assert_eq!(failed[0].type_.as_deref(), Some("Warning"));
    let note = failed[0].note.clone().unwrap_or_default();
    assert!(
        note.contains("apps/v1.Deployment team/stuck") && note.contains("2 replicas"),
        "{note}"
    );
    op.stop().await;
}
