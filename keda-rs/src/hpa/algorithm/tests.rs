//! The figures of the Kubernetes documentation's HorizontalPodAutoscaler page ("Algorithm
//! details", "Configurable scaling behavior" and its examples), run through [`sync`] with a
//! virtual clock.

use super::*;

fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).expect("valid")
}

fn spec(min: i32, max: i32, behavior: Option<Behavior>) -> Spec {
    Spec {
        min_replicas: min,
        max_replicas: max,
        behavior,
        tolerance: DEFAULT_TOLERANCE,
        downscale_stabilization_seconds: DEFAULT_DOWNSCALE_STABILIZATION_SECS,
    }
}

fn no_window_down(policies: Vec<Policy>, select: Select) -> Behavior {
    Behavior {
        up: Rules::default_up(),
        down: Rules {
            stabilization_window_seconds: 0,
            select,
            policies,
            tolerance: None,
        },
    }
}

/// Runs syncs like the controller: every proposal the same, `/scale` written when it changes.
struct Hpa {
    spec: Spec,
    state: HpaState,
    replicas: i32,
}

impl Hpa {
    fn new(spec: Spec, replicas: i32) -> Hpa {
        Hpa {
            spec,
            state: HpaState::default(),
            replicas,
        }
    }

    fn sync(&mut self, wanted: i32, at: i64) -> Outcome {
        self.sync_proposals(&[Some(wanted)], at)
    }

    fn sync_proposals(&mut self, proposals: &[Proposal], at: i64) -> Outcome {
        let outcome = sync(
            &self.spec,
            &mut self.state,
            self.replicas,
            self.replicas,
            proposals,
            t(at),
        );
        if outcome.rescale(self.replicas) {
            self.state.record_scale(
                self.spec.behavior.as_ref(),
                self.replicas,
                outcome.desired,
                t(at),
            );
            self.replicas = outcome.desired;
        }
        outcome
    }
}

#[test]
fn the_ratio_of_current_to_desired_metric_scales_the_replicas() {
    let tol = Tolerance::default();
    // "current metric value is 200m, desired value is 100m: the number of replicas will be
    // doubled".
    assert_eq!(
        replicas_for_metric(4, 4, 0.2, MetricTarget::Value(0.1), tol),
        8
    );
    // "If the current value is instead 50m, you'll halve the number of replicas".
    assert_eq!(
        replicas_for_metric(4, 4, 0.05, MetricTarget::Value(0.1), tol),
        2
    );
    // AverageValue (KEDA's default): total / per-pod target, rounded up.
    assert_eq!(
        replicas_for_metric(1, 1, 31.0, MetricTarget::AverageValue(5.0), tol),
        7
    );
}

#[test]
fn a_ratio_within_ten_percent_of_one_changes_nothing() {
    let tol = Tolerance::default();
    // 1.05 and 0.95 are within the default tolerance of 0.1.
    assert_eq!(
        replicas_for_metric(4, 4, 0.105, MetricTarget::Value(0.1), tol),
        4
    );
    assert_eq!(
        replicas_for_metric(10, 10, 47.5, MetricTarget::AverageValue(5.0), tol),
        10
    );
    // 1.2 is not: 4 x 1.2 = 4.8 -> 5.
    assert_eq!(
        replicas_for_metric(4, 4, 0.12, MetricTarget::Value(0.1), tol),
        5
    );
    // A per-direction tolerance (behavior.scaleUp.tolerance, Kubernetes 1.33): 5% up.
    let up_5 = Tolerance {
        up: 0.05,
        down: 0.1,
    };
    assert_eq!(
        replicas_for_metric(10, 10, 54.0, MetricTarget::AverageValue(5.0), up_5),
        11
    );
}

#[test]
fn default_scale_up_adds_four_pods_or_doubles_every_fifteen_seconds() {
    // "4 Pods or 100% of the currently running replicas may at most be added every 15
    // seconds till the HPA reaches its steady state."
    let mut hpa = Hpa::new(spec(1, 100, Some(Behavior::default())), 1);
    assert_eq!(hpa.sync(40, 0).desired, 5, "max(1 + 4, 1 x 2)");
    assert_eq!(hpa.sync(40, 0).reason, Reason::ScaleUpLimit);
    assert_eq!(
        hpa.sync(40, 10).desired,
        5,
        "same 15 s period: nothing more"
    );
    assert_eq!(hpa.sync(40, 15).desired, 10, "max(5 + 4, 5 x 2)");
    assert_eq!(hpa.sync(40, 30).desired, 20);
    assert_eq!(hpa.sync(40, 45).desired, 40);
    let steady = hpa.sync(40, 60);
    assert_eq!(
        (steady.desired, steady.reason),
        (40, Reason::DesiredWithinRange)
    );
}

#[test]
fn default_scale_down_waits_for_the_five_minute_window() {
    // "scaleDown: stabilizationWindowSeconds: 300": the highest recommendation of the last
    // 5 minutes is used.
    let mut hpa = Hpa::new(spec(1, 100, Some(Behavior::default())), 10);
    assert_eq!(hpa.sync(10, 0).desired, 10);
    assert_eq!(hpa.sync(2, 60).desired, 10, "10 was recommended 60 s ago");
    assert_eq!(hpa.sync(4, 240).desired, 10, "still within 300 s of the 10");
    assert_eq!(
        hpa.sync(2, 300).desired,
        4,
        "the 10 left the window; 4 is the highest"
    );
    assert_eq!(
        hpa.sync(2, 541).desired,
        2,
        "the 4 (t=240) left the window at 540"
    );
}

#[test]
fn a_shorter_window_scales_down_sooner() {
    // "Example: change downscale stabilization window" to 60 seconds.
    let behavior = Behavior {
        down: Rules {
            stabilization_window_seconds: 60,
            ..Rules::default_down()
        },
        ..Behavior::default()
    };
    let mut hpa = Hpa::new(spec(1, 100, Some(behavior)), 10);
    assert_eq!(hpa.sync(10, 0).desired, 10);
    assert_eq!(hpa.sync(3, 30).desired, 10);
    assert_eq!(hpa.sync(3, 60).desired, 3);
}

#[test]
fn a_scale_up_window_takes_the_lowest_recommendation() {
    let behavior = Behavior {
        up: Rules {
            stabilization_window_seconds: 60,
            ..Rules::default_up()
        },
        ..Behavior::default()
    };
    let mut hpa = Hpa::new(spec(1, 100, Some(behavior)), 2);
    assert_eq!(hpa.sync(2, 0).desired, 2);
    assert_eq!(hpa.sync(6, 30).desired, 2, "2 was recommended 30 s ago");
    assert_eq!(hpa.sync(6, 60).desired, 6);
}

#[test]
fn the_policy_allowing_the_biggest_change_wins_by_default() {
    // The documentation's scale-down example: Pods 4 and Percent 10 per 60 s. "If there are 80
    // replicas and the target has to be scaled down to 10 replicas then during the first step
    // 8 replicas will be reduced. In the next iteration when the number of replicas is 72, 10%
    // of the pods is 7.2 but the number is rounded up to 8." Below 40 replicas the Pods policy
    // (4) is the bigger change.
    let policies = vec![
        Policy {
            kind: PolicyKind::Pods,
            value: 4,
            period_seconds: 60,
        },
        Policy {
            kind: PolicyKind::Percent,
            value: 10,
            period_seconds: 60,
        },
    ];
    let mut hpa = Hpa::new(
        spec(1, 100, Some(no_window_down(policies, Select::Max))),
        80,
    );
    let first = hpa.sync(10, 0);
    assert_eq!((first.desired, first.reason), (72, Reason::ScaleDownLimit));
    assert_eq!(hpa.sync(10, 30).desired, 72, "one step per 60 s period");
    assert_eq!(hpa.sync(10, 60).desired, 64, "72 x 10% = 7.2 -> 8 removed");
    let mut at = 60;
    while hpa.replicas > 24 {
        at += 60;
        hpa.sync(10, at);
    }
    assert_eq!(hpa.replicas, 24);
    hpa.sync(10, at + 60);
    assert_eq!(hpa.replicas, 20, "below 40: the Pods policy's 4");
    for step in 2..10 {
        hpa.sync(10, at + 60 * step);
    }
    assert_eq!(hpa.replicas, 10, "stops at the desired 10");
}

#[test]
fn select_policy_min_takes_the_smallest_change() {
    // "Example: limit scale down rate": 10% per minute, and at most 5 pods per minute with
    // `selectPolicy: Min`.
    let policies = vec![
        Policy {
            kind: PolicyKind::Percent,
            value: 10,
            period_seconds: 60,
        },
        Policy {
            kind: PolicyKind::Pods,
            value: 5,
            period_seconds: 60,
        },
    ];
    let mut hpa = Hpa::new(
        spec(1, 100, Some(no_window_down(policies, Select::Min))),
        80,
    );
    assert_eq!(
        hpa.sync(1, 0).desired,
        75,
        "Pods 5 removes fewer than 10% (8)"
    );
    let mut small = Hpa::new(
        spec(
            1,
            100,
            Some(no_window_down(
                vec![
                    Policy {
                        kind: PolicyKind::Percent,
                        value: 10,
                        period_seconds: 60,
                    },
                    Policy {
                        kind: PolicyKind::Pods,
                        value: 5,
                        period_seconds: 60,
                    },
                ],
                Select::Min,
            )),
        ),
        40,
    );
    assert_eq!(small.sync(1, 0).desired, 36, "10% (4) removes fewer than 5");
}

#[test]
fn select_policy_disabled_never_scales_that_way() {
    // "Example: disable scale down".
    let mut hpa = Hpa::new(
        spec(
            1,
            100,
            Some(no_window_down(
                Rules::default_down().policies,
                Select::Disabled,
            )),
        ),
        10,
    );
    assert_eq!(hpa.sync(1, 0).desired, 10);
    assert_eq!(hpa.sync(1, 600).desired, 10);
    assert_eq!(hpa.sync(15, 601).desired, 15, "scaling up still works");
}

#[test]
fn a_percent_scale_up_policy_compounds_per_period() {
    // "scaleUp: policies: type Percent, value 900, periodSeconds 60": 1 -> 10 -> 100.
    let behavior = Behavior {
        up: Rules {
            stabilization_window_seconds: 0,
            select: Select::Max,
            policies: vec![Policy {
                kind: PolicyKind::Percent,
                value: 900,
                period_seconds: 60,
            }],
            tolerance: None,
        },
        ..Behavior::default()
    };
    let mut hpa = Hpa::new(spec(1, 1000, Some(behavior)), 1);
    assert_eq!(hpa.sync(500, 0).desired, 10);
    assert_eq!(hpa.sync(500, 59).desired, 10);
    assert_eq!(hpa.sync(500, 60).desired, 100);
    assert_eq!(hpa.sync(500, 120).desired, 500);
}

#[test]
fn without_behavior_the_legacy_limits_apply() {
    // No `behavior`: scale up to at most max(2 x current, 4), the 5-minute downscale window.
    let mut hpa = Hpa::new(spec(1, 100, None), 1);
    assert_eq!(hpa.sync(40, 0).desired, 4);
    assert_eq!(hpa.sync(40, 1).desired, 8);
    assert_eq!(hpa.sync(40, 2).desired, 16);
    // The window keeps the highest recommendation, so the scale-up goes on after the metric
    // fell: 40 was recommended within 300 s.
    assert_eq!(hpa.sync(1, 3).desired, 32);
    assert_eq!(hpa.sync(1, 4).desired, 40);
    assert_eq!(
        hpa.sync(1, 302).desired,
        40,
        "the 40 of t=2 is 300 s old only at 302"
    );
    assert_eq!(
        hpa.sync(1, 303).desired,
        1,
        "only the 1s of t=3 and t=4 remain"
    );
}

#[test]
fn min_and_max_bound_the_count() {
    let mut hpa = Hpa::new(spec(2, 10, Some(Behavior::default())), 12);
    let over = hpa.sync(12, 0);
    assert_eq!((over.desired, over.reason), (10, Reason::TooManyReplicas));
    let mut hpa = Hpa::new(spec(2, 10, Some(Behavior::default())), 8);
    let capped = hpa.sync(30, 0);
    assert_eq!(
        (capped.desired, capped.reason),
        (10, Reason::TooManyReplicas)
    );
    let mut hpa = Hpa::new(
        spec(
            3,
            10,
            Some(no_window_down(Rules::default_down().policies, Select::Max)),
        ),
        5,
    );
    let floor = hpa.sync(1, 0);
    assert_eq!((floor.desired, floor.reason), (3, Reason::TooFewReplicas));
}

#[test]
fn a_target_at_zero_is_left_alone_unless_min_is_zero() {
    // KEDA scales 0 <-> 1 itself; the HPA (minReplicas >= 1) is disabled at 0.
    let mut hpa = Hpa::new(spec(1, 10, Some(Behavior::default())), 0);
    let outcome = hpa.sync(5, 0);
    assert_eq!(outcome.reason, Reason::ScalingDisabled);
    assert!(!outcome.rescale(0));
    assert_eq!(hpa.replicas, 0);
}

#[test]
fn an_unreadable_metric_allows_scaling_up_but_not_down() {
    let mut hpa = Hpa::new(
        spec(
            1,
            10,
            Some(no_window_down(Rules::default_down().policies, Select::Max)),
        ),
        4,
    );
    let down = hpa.sync_proposals(&[None, Some(1)], 0);
    assert_eq!((down.desired, down.reason), (4, Reason::MetricsUnavailable));
    let up = hpa.sync_proposals(&[None, Some(6)], 1);
    assert_eq!(up.desired, 6);
    let none = hpa.sync_proposals(&[None], 2);
    assert_eq!((none.desired, none.reason), (6, Reason::MetricsUnavailable));
}
