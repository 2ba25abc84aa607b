use std::collections::BTreeMap;

use super::*;
use crate::fallback::FallbackBehavior;

/// Virtual time: seconds after a fixed epoch.
fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).expect("valid test time")
}

fn settings() -> ScalingSettings {
    ScalingSettings::with_defaults(TargetRef {
        kind: "apps/v1.Deployment".into(),
        namespace: "ns".into(),
        name: "app".into(),
    })
}

fn observed(current: i32, last_active: Option<i64>, now: i64) -> Observed {
    Observed {
        current_replicas: current,
        last_active_time: last_active.map(t),
        created_at: t(0),
        operator_started_at: t(0),
        now: t(now),
    }
}

fn active(names: &[&str]) -> TriggerSummary {
    TriggerSummary {
        active: true,
        active_triggers: names.iter().map(|n| n.to_string()).collect(),
        errors: vec![],
    }
}

fn inactive() -> TriggerSummary {
    TriggerSummary::default()
}

fn failed(active_too: bool) -> TriggerSummary {
    TriggerSummary {
        active: active_too,
        active_triggers: vec![],
        errors: vec!["trigger \"queue\" (redis): connection refused".into()],
    }
}

fn with(f: impl FnOnce(&mut ScalingSettings)) -> ScalingSettings {
    let mut s = settings();
    f(&mut s);
    s
}

fn write(from: i32, to: i32, kind: ScaleWriteKind) -> Option<(i32, i32, ScaleWriteKind)> {
    Some((from, to, kind))
}

struct Case {
    why: &'static str,
    settings: ScalingSettings,
    observed: Observed,
    triggers: TriggerSummary,
    /// (from, to, kind) of the expected write.
    scale: Option<(i32, i32, ScaleWriteKind)>,
    /// Expected lastActiveTime, in virtual seconds.
    last_active: Option<i64>,
    /// Expected (status, reason) of Active, Ready and Paused.
    active: Option<(ConditionStatus, &'static str)>,
    ready: (ConditionStatus, &'static str),
    paused: bool,
    /// Expected event reason.
    event: Option<&'static str>,
}

use ConditionStatus::{False, True, Unknown};
use ScaleWriteKind::{Activate, Deactivate, PausedReplicas, RaiseToMin};

const READY: (ConditionStatus, &str) = (True, REASON_READY);
const ACTIVE: Option<(ConditionStatus, &str)> = Some((True, REASON_SCALER_ACTIVE));
const NOT_ACTIVE: Option<(ConditionStatus, &str)> = Some((False, REASON_SCALER_NOT_ACTIVE));
const COOLDOWN: Option<(ConditionStatus, &str)> = Some((False, REASON_SCALER_COOLDOWN));

#[test]
fn decision_follows_keda_request_scale_branch_by_branch() {
    let fallback = |replicas| {
        Some(FallbackSpec {
            failure_threshold: 3,
            replicas,
            behavior: FallbackBehavior::Static,
        })
    };
    let cases = vec![
        // 1. Paused: only the Paused condition, nothing written even though active at 0.
        Case {
            why: "a paused object only reports that it is paused",
            settings: with(|s| s.annotations.pause = Pause::Paused),
            observed: observed(0, None, 10),
            triggers: active(&["queue"]),
            scale: None,
            last_active: None,
            active: None,
            ready: READY,
            paused: true,
            event: None,
        },
        // 1. paused-replicas: the target is held at N (KEDA's reconciler does this write).
        Case {
            why: "paused-replicas holds the target at its count",
            settings: with(|s| s.annotations.pause = Pause::AtReplicas(5)),
            observed: observed(2, Some(0), 10),
            triggers: inactive(),
            scale: write(2, 5, PausedReplicas),
            last_active: Some(0),
            active: None,
            ready: READY,
            paused: true,
            event: None,
        },
        // 1. paused-replicas already reached: nothing to write.
        Case {
            why: "paused-replicas at its count writes nothing",
            settings: with(|s| s.annotations.pause = Pause::AtReplicas(5)),
            observed: observed(5, None, 10),
            triggers: active(&["queue"]),
            scale: None,
            last_active: None,
            active: None,
            ready: READY,
            paused: true,
            event: None,
        },
        // 2. Active at 0 with min 0: scale to 1, remember now.
        Case {
            why: "an active object at zero is scaled to one",
            settings: settings(),
            observed: observed(0, None, 10),
            triggers: active(&["queue", "lag"]),
            scale: write(0, 1, Activate),
            last_active: Some(10),
            active: ACTIVE,
            ready: READY,
            paused: false,
            event: Some(REASON_ACTIVATED),
        },
        // 2. Active at 0 with min 3: scale straight to min.
        Case {
            why: "an active object at zero is scaled to min when min is above one",
            settings: with(|s| s.min_replica_count = 3),
            observed: observed(0, Some(0), 10),
            triggers: active(&["queue"]),
            scale: write(0, 3, Activate),
            last_active: Some(10),
            active: ACTIVE,
            ready: READY,
            paused: false,
            event: Some(REASON_ACTIVATED),
        },
        // 2. Idle replicas: active at idle (1) below min (3) scales to min.
        Case {
            why: "an active object at idle is scaled to min",
            settings: with(|s| {
                s.min_replica_count = 3;
                s.idle_replica_count = Some(1);
            }),
            observed: observed(1, Some(0), 10),
            triggers: active(&["queue"]),
            scale: write(1, 3, Activate),
            last_active: Some(10),
            active: ACTIVE,
            ready: READY,
            paused: false,
            event: Some(REASON_ACTIVATED),
        },
        // 2. Force activation wins over inactive triggers.
        Case {
            why: "force-activation scales an inactive object from zero",
            settings: with(|s| s.annotations.force_activation = true),
            observed: observed(0, None, 10),
            triggers: inactive(),
            scale: write(0, 1, Activate),
            last_active: Some(10),
            active: ACTIVE,
            ready: READY,
            paused: false,
            event: Some(REASON_ACTIVATED),
        },
        // 2. paused-scale-out: active at zero, but no write and lastActiveTime kept.
        Case {
            why: "paused-scale-out keeps an active object at zero",
            settings: with(|s| s.annotations.paused_scale_out = true),
            observed: observed(0, Some(3), 10),
            triggers: active(&["queue"]),
            scale: None,
            last_active: Some(3),
            active: ACTIVE,
            ready: READY,
            paused: true,
            event: None,
        },
        // 2. Active above zero with a failing trigger: Ready=Unknown, lastActiveTime kept.
        Case {
            why: "an active object with a failing trigger is partially ready",
            settings: settings(),
            observed: observed(2, Some(3), 10),
            triggers: failed(true),
            scale: None,
            last_active: Some(3),
            active: ACTIVE,
            ready: (Unknown, REASON_PARTIAL_TRIGGER_ERROR),
            paused: false,
            event: None,
        },
        // 2. Active above zero: the HPA scales; only lastActiveTime moves.
        Case {
            why: "an active object above zero only refreshes lastActiveTime",
            settings: settings(),
            observed: observed(4, Some(3), 10),
            triggers: active(&["queue"]),
            scale: None,
            last_active: Some(10),
            active: ACTIVE,
            ready: READY,
            paused: false,
            event: None,
        },
        // 2. Idle set but replicas at min: no activation write.
        Case {
            why: "an active object at min with idle replicas is left to the HPA",
            settings: with(|s| {
                s.min_replica_count = 2;
                s.idle_replica_count = Some(0);
            }),
            observed: observed(2, Some(3), 10),
            triggers: active(&["queue"]),
            scale: None,
            last_active: Some(10),
            active: ACTIVE,
            ready: READY,
            paused: false,
            event: None,
        },
        // 2. cpu/memory only: forced active, so never scaled to zero.
        Case {
            why: "a cpu-only object is active even when its triggers are not",
            settings: with(|s| {
                s.only_resource_triggers = true;
                s.min_replica_count = 1;
            }),
            observed: observed(1, Some(0), 1000),
            triggers: inactive(),
            scale: None,
            last_active: Some(1000),
            active: ACTIVE,
            ready: READY,
            paused: false,
            event: None,
        },
        // 3. cpu/memory only with an error: not forced, error without fallback.
        Case {
            why: "a cpu-only object with a failing trigger is not forced active",
            settings: with(|s| s.only_resource_triggers = true),
            observed: observed(1, Some(0), 1000),
            triggers: failed(false),
            scale: None,
            last_active: Some(0),
            active: NOT_ACTIVE,
            ready: (False, REASON_TRIGGER_ERROR),
            paused: false,
            event: None,
        },
        // 3. Error with fallback replicas: do nothing, even after the cooldown.
        Case {
            why: "an inactive failing object with fallback is left to the HPA",
            settings: with(|s| s.fallback = fallback(4)),
            observed: observed(3, Some(0), 1000),
            triggers: failed(false),
            scale: None,
            last_active: Some(0),
            active: NOT_ACTIVE,
            ready: READY,
            paused: false,
            event: None,
        },
        // 3. Error without fallback: Ready=False TriggerError, no write.
        Case {
            why: "an inactive failing object without fallback is not ready",
            settings: settings(),
            observed: observed(3, Some(0), 1000),
            triggers: failed(false),
            scale: None,
            last_active: Some(0),
            active: NOT_ACTIVE,
            ready: (False, REASON_TRIGGER_ERROR),
            paused: false,
            event: None,
        },
        // 3. Error with fallback replicas 0: falls through to scale to zero (KEDA).
        Case {
            why: "an inactive failing object with zero fallback replicas scales to zero",
            settings: with(|s| s.fallback = fallback(0)),
            observed: observed(3, Some(0), 1000),
            triggers: failed(false),
            scale: write(3, 0, Deactivate),
            last_active: Some(0),
            active: NOT_ACTIVE,
            ready: READY,
            paused: false,
            event: Some(REASON_DEACTIVATED),
        },
        // 3. Inactive after the cooldown (0 + 300 < 301): scale to zero.
        Case {
            why: "an inactive object past the cooldown scales to zero",
            settings: settings(),
            observed: observed(2, Some(0), 301),
            triggers: inactive(),
            scale: write(2, 0, Deactivate),
            last_active: Some(0),
            active: NOT_ACTIVE,
            ready: READY,
            paused: false,
            event: Some(REASON_DEACTIVATED),
        },
        // 3. Exactly at the cooldown (0 + 300 == 300): strict <, so still cooling down.
        Case {
            why: "an inactive object exactly at the cooldown keeps cooling down",
            settings: settings(),
            observed: observed(2, Some(0), 300),
            triggers: inactive(),
            scale: None,
            last_active: Some(0),
            active: COOLDOWN,
            ready: READY,
            paused: false,
            event: None,
        },
        // 3. Inactive within the cooldown: Active=False ScalerCooldown.
        Case {
            why: "an inactive object within the cooldown reports ScalerCooldown",
            settings: settings(),
            observed: observed(2, Some(100), 200),
            triggers: inactive(),
            scale: None,
            last_active: Some(100),
            active: COOLDOWN,
            ready: READY,
            paused: false,
            event: None,
        },
        // 3. Never active, initialCooldownPeriod 0: scale to zero once past creation.
        Case {
            why: "a never-active object scales to zero right after creation",
            settings: settings(),
            observed: observed(1, None, 1),
            triggers: inactive(),
            scale: write(1, 0, Deactivate),
            last_active: None,
            active: NOT_ACTIVE,
            ready: READY,
            paused: false,
            event: Some(REASON_DEACTIVATED),
        },
        // 3. Never active, at creation time: 0 + 0 < 0 is false.
        Case {
            why: "a never-active object at its creation instant is still cooling down",
            settings: settings(),
            observed: observed(1, None, 0),
            triggers: inactive(),
            scale: None,
            last_active: None,
            active: COOLDOWN,
            ready: READY,
            paused: false,
            event: None,
        },
        // 3. Never active, initialCooldownPeriod 120 not over (0 + 120 < 120 false).
        Case {
            why: "a never-active object waits out initialCooldownPeriod",
            settings: with(|s| s.initial_cooldown_period = SignedDuration::from_secs(120)),
            observed: observed(1, None, 120),
            triggers: inactive(),
            scale: None,
            last_active: None,
            active: COOLDOWN,
            ready: READY,
            paused: false,
            event: None,
        },
        // 3. Never active, initialCooldownPeriod 120 over.
        Case {
            why: "a never-active object scales to zero after initialCooldownPeriod",
            settings: with(|s| s.initial_cooldown_period = SignedDuration::from_secs(120)),
            observed: observed(1, None, 121),
            triggers: inactive(),
            scale: write(1, 0, Deactivate),
            last_active: None,
            active: NOT_ACTIVE,
            ready: READY,
            paused: false,
            event: Some(REASON_DEACTIVATED),
        },
        // 3. initialCooldownPeriod does not apply once the object has been active.
        Case {
            why: "once active the cooldown, not the initial cooldown, applies",
            settings: with(|s| {
                s.initial_cooldown_period = SignedDuration::from_secs(1000);
                s.cooldown_period = SignedDuration::from_secs(10);
            }),
            observed: observed(1, Some(50), 61),
            triggers: inactive(),
            scale: write(1, 0, Deactivate),
            last_active: Some(50),
            active: NOT_ACTIVE,
            ready: READY,
            paused: false,
            event: Some(REASON_DEACTIVATED),
        },
        // 3. Idle replicas: inactive above idle after cooldown goes to idle, even from 5.
        Case {
            why: "an inactive object above idle goes to idle after the cooldown",
            settings: with(|s| {
                s.min_replica_count = 2;
                s.idle_replica_count = Some(0);
            }),
            observed: observed(5, Some(0), 301),
            triggers: inactive(),
            scale: write(5, 0, Deactivate),
            last_active: Some(0),
            active: NOT_ACTIVE,
            ready: READY,
            paused: false,
            event: Some(REASON_DEACTIVATED),
        },
        // 3. paused-scale-in: no write, and no cooldown condition either (KEDA returns early).
        Case {
            why: "paused-scale-in keeps an inactive object's replicas",
            settings: with(|s| s.annotations.paused_scale_in = true),
            observed: observed(2, Some(0), 1000),
            triggers: inactive(),
            scale: None,
            last_active: Some(0),
            active: NOT_ACTIVE,
            ready: READY,
            paused: true,
            event: None,
        },
        // 3. Below min without idle: raise to min, no event.
        Case {
            why: "an inactive object below min is raised to min",
            settings: with(|s| s.min_replica_count = 2),
            observed: observed(0, Some(0), 1000),
            triggers: inactive(),
            scale: write(0, 2, RaiseToMin),
            last_active: Some(0),
            active: NOT_ACTIVE,
            ready: READY,
            paused: false,
            event: None,
        },
        // 3. Below min with idle replicas at idle: nothing (idle is where it belongs).
        Case {
            why: "an inactive object at idle stays there",
            settings: with(|s| {
                s.min_replica_count = 2;
                s.idle_replica_count = Some(0);
            }),
            observed: observed(0, Some(0), 1000),
            triggers: inactive(),
            scale: None,
            last_active: Some(0),
            active: NOT_ACTIVE,
            ready: READY,
            paused: false,
            event: None,
        },
        // 3. Inactive at min 2 with no idle: the HPA's business, nothing to do.
        Case {
            why: "an inactive object at min is left alone",
            settings: with(|s| s.min_replica_count = 2),
            observed: observed(3, Some(0), 1000),
            triggers: inactive(),
            scale: None,
            last_active: Some(0),
            active: NOT_ACTIVE,
            ready: READY,
            paused: false,
            event: None,
        },
        // 3. Inactive at zero: nothing to do.
        Case {
            why: "an inactive object at zero is left alone",
            settings: settings(),
            observed: observed(0, Some(0), 1000),
            triggers: inactive(),
            scale: None,
            last_active: Some(0),
            active: NOT_ACTIVE,
            ready: READY,
            paused: false,
            event: None,
        },
    ];
    for c in cases {
        let d = decide(&c.settings, &c.observed, &c.triggers);
        let scale = d.scale.as_ref().map(|w| (w.from, w.to, w.kind));
        assert_eq!(scale, c.scale, "scale: {}", c.why);
        assert_eq!(
            d.last_active_time,
            c.last_active.map(t),
            "lastActiveTime: {}",
            c.why
        );
        let cond = |ty| d.condition(ty).map(|c| (c.status, c.reason));
        assert_eq!(cond(ConditionType::Active), c.active, "Active: {}", c.why);
        assert_eq!(
            cond(ConditionType::Ready),
            Some(c.ready),
            "Ready: {}",
            c.why
        );
        assert_eq!(
            cond(ConditionType::Paused).is_some(),
            c.paused,
            "Paused: {}",
            c.why
        );
        assert_eq!(
            d.event.as_ref().map(|e| e.reason),
            c.event,
            "event: {}",
            c.why
        );
    }
}

#[test]
fn a_restart_does_not_scale_a_busy_workload_to_zero_early() {
    // lastActiveTime was persisted at t=0; the operator restarted at t=290 and polls at
    // t=301. KEDA would scale to zero (0 + 300 < 301); keda-rs counts from the restart.
    let s = settings();
    let mut o = observed(3, Some(0), 301);
    o.operator_started_at = t(290);
    let d = decide(&s, &o, &inactive());
    assert_eq!(d.scale, None);
    assert_eq!(
        d.condition(ConditionType::Active).map(|c| c.reason),
        Some(REASON_SCALER_COOLDOWN)
    );
    // 290 + 300 < 591: the full cooldown after the restart has passed.
    o.now = t(591);
    let d = decide(&s, &o, &inactive());
    assert_eq!(
        d.scale,
        Some(ScaleWrite {
            from: 3,
            to: 0,
            kind: Deactivate
        })
    );
    // A lastActiveTime newer than the restart counts from itself.
    o.last_active_time = Some(t(400));
    o.now = t(650);
    assert_eq!(decide(&s, &o, &inactive()).scale, None);
}

#[test]
fn events_carry_keda_messages() {
    let d = decide(
        &settings(),
        &observed(0, None, 5),
        &active(&["queue", "lag"]),
    );
    assert_eq!(
        d.event.map(|e| e.message),
        Some("Scaled apps/v1.Deployment ns/app from 0 to 1, triggered by queue;lag".into())
    );
    let forced = with(|s| s.annotations.force_activation = true);
    let d = decide(&forced, &observed(0, None, 5), &inactive());
    assert_eq!(
        d.event.map(|e| e.message),
        Some(
            "Scaled apps/v1.Deployment ns/app from 0 to 1, caused by forced activation annotation"
                .into()
        )
    );
    let d = decide(&settings(), &observed(4, Some(0), 400), &inactive());
    assert_eq!(
        d.event.map(|e| e.message),
        Some("Deactivated apps/v1.Deployment ns/app from 4 to 0".into())
    );
    let failure = d.scale.and_then(|w| w.failure_event(&settings().target));
    assert_eq!(
        failure.map(|e| (e.type_, e.reason, e.message)),
        Some((
            EventType::Warning,
            REASON_DEACTIVATION_FAILED,
            "Failed to deactivate apps/v1.Deployment ns/app from 4 to 0".into()
        ))
    );
}

#[test]
fn trigger_errors_are_named_in_the_ready_condition() {
    let d = decide(&settings(), &observed(1, Some(0), 10), &failed(false));
    assert_eq!(
        d.condition(ConditionType::Ready)
            .map(|c| c.message.as_str()),
        Some(
            "Triggers defined in ScaledObject are not working correctly: \
             trigger \"queue\" (redis): connection refused"
        )
    );
}

#[test]
fn annotations_are_read_as_keda_reads_them() {
    let map = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>()
    };
    let read = |pairs: &[(&str, &str)]| ScaleAnnotations::from_annotations(&map(pairs));
    // No annotations: nothing paused or forced.
    assert_eq!(read(&[]), Ok(ScaleAnnotations::default()));
    // "false" unpauses; an unreadable value pauses (KEDA's ParseBool error branch).
    assert_eq!(
        read(&[(ANNOTATION_PAUSED, "false")]).map(|a| a.pause),
        Ok(Pause::No)
    );
    assert_eq!(
        read(&[(ANNOTATION_PAUSED, "yes")]).map(|a| a.pause),
        Ok(Pause::Paused)
    );
    assert_eq!(
        read(&[(ANNOTATION_PAUSED, "TRUE")]).map(|a| a.pause),
        Ok(Pause::Paused)
    );
    // paused-replicas wins over paused.
    assert_eq!(
        read(&[
            (ANNOTATION_PAUSED, "false"),
            (ANNOTATION_PAUSED_REPLICAS, "5")
        ])
        .map(|a| a.pause),
        Ok(Pause::AtReplicas(5))
    );
    // A non-integer count is an error naming the annotation.
    let err = read(&[(ANNOTATION_PAUSED_REPLICAS, "five")]).unwrap_err();
    assert!(
        err.to_string()
            .contains("autoscaling.keda.sh/paused-replicas")
    );
    // The switches are on when true, off when false.
    let a = read(&[
        (ANNOTATION_PAUSED_SCALE_IN, "true"),
        (ANNOTATION_PAUSED_SCALE_OUT, "0"),
        (ANNOTATION_FORCE_ACTIVATION, "False"),
    ])
    .unwrap();
    assert!(a.paused_scale_in && !a.paused_scale_out && !a.force_activation);
}

#[test]
fn an_unparsable_switch_annotation_counts_as_true_as_in_the_hpa() {
    // KEDA reads paused-scale-in, paused-scale-out and force-activation like paused: a
    // value Go's ParseBool rejects is true, in the scale loop as in the HPA behavior.
    let map: BTreeMap<String, String> = [
        (ANNOTATION_PAUSED_SCALE_IN, "yes"),
        (ANNOTATION_PAUSED_SCALE_OUT, "enabled"),
        (ANNOTATION_FORCE_ACTIVATION, " true"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let a = ScaleAnnotations::from_annotations(&map).unwrap();
    assert!(a.paused_scale_in && a.paused_scale_out && a.force_activation);
    for key in [
        ANNOTATION_PAUSED_SCALE_IN,
        ANNOTATION_PAUSED_SCALE_OUT,
        ANNOTATION_FORCE_ACTIVATION,
    ] {
        assert!(
            keda_api::annotations::bool_annotation(Some(&map), key),
            "{key}: the HPA builder reads it the same way"
        );
    }
}
