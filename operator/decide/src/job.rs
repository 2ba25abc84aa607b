//! How many Jobs a ScaledJob creates, and which finished or outdated Jobs it deletes: KEDA's
//! ScaledJob algorithm (KEDA-CONTRACT 1.9) as pure functions.
//!
//! Per poll KEDA does, in order:
//! 1. per scaler: `queueLength` = the sum of its metric values, `maxValue` =
//!    `min(queueLength / averageTarget, maxReplicaCount)` ([`ScalerJobMetrics::new`]);
//! 2. combine the scalers with `multipleScalersCalculation` over the **active** ones, then
//!    `scaleTo = ceil(queueLength)` and `maxScale = ceil(min(maxValue, maxReplicaCount))`
//!    ([`combine`]);
//! 3. ask the scaling strategy how many Jobs may still be created given the running and pending
//!    ones ([`effective_max_scale`]), with the `minReplicaCount` floor first ([`jobs_to_create`]);
//! 4. delete the oldest finished Jobs beyond the history limits ([`history_to_delete`]) and, on a
//!    new generation with the immediate rollout, the Jobs of older generations
//!    ([`rollout_to_delete`]).
//!
//! `maxReplicaCount` here is KEDA's `MaxReplicaCount()`, the Jobs allowed beyond the minimum
//! (`ScaledJobSpec::effective_max_replica_count`).

use keda_api::num::f64_to_i64_saturating;
use keda_api::scaled_job::{MultipleScalersCalculation, RolloutStrategy, ScalingStrategyKind};

/// What one trigger contributes to the job count.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScalerJobMetrics {
    /// The sum of the trigger's metric values (e.g. the messages in a queue).
    pub queue_length: f64,
    /// Jobs this trigger asks for: `queue_length / target`, capped at `maxReplicaCount`.
    pub max_value: f64,
    /// Whether the trigger is active (value above its activation threshold).
    pub active: bool,
}

impl ScalerJobMetrics {
    /// KEDA's per-scaler computation. `targets` are the `AverageValue` targets of the trigger's
    /// metric specs (a spec without one counts as 0 in the average); with an average target of 0
    /// the trigger asks for no Job.
    pub fn new(values: &[f64], targets: &[f64], active: bool, max_replica_count: i64) -> Self {
        let queue_length: f64 = values.iter().sum();
        let target = if targets.is_empty() {
            0.0
        } else {
            targets.iter().sum::<f64>() / targets.len() as f64
        };
        let max_value = if target == 0.0 {
            0.0
        } else {
            (queue_length / target).min(max_replica_count as f64)
        };
        Self {
            queue_length,
            max_value,
            active,
        }
    }
}

/// The triggers combined: whether the ScaledJob is active and the two counts KEDA derives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Combined {
    /// Active: some trigger is active (as the calculation selects it), or `minReplicaCount > 0`.
    pub active: bool,
    /// `ceil(queueLength)`: how many Jobs the queue asks for.
    pub scale_to: i64,
    /// `ceil(min(maxValue, maxReplicaCount))`: the cap derived from the targets.
    pub max_scale: i64,
}

/// Combines the triggers with `multipleScalersCalculation`, exactly as KEDA does, including its
/// edge: with `max` (and `min`) only a trigger that is active *and* selected by the comparison
/// makes the ScaledJob active, so an active trigger with an empty queue does not.
pub fn combine(
    scalers: &[ScalerJobMetrics],
    calculation: MultipleScalersCalculation,
    min_replica_count: i64,
    max_replica_count: i64,
) -> Combined {
    let mut queue_length = 0.0_f64;
    let mut max_value = 0.0_f64;
    let mut active = false;
    let active_scalers = scalers.iter().filter(|s| s.active);
    match calculation {
        MultipleScalersCalculation::Max => {
            for s in active_scalers {
                if s.queue_length > queue_length {
                    queue_length = s.queue_length;
                    max_value = s.max_value;
                    active = true;
                }
            }
        }
        MultipleScalersCalculation::Min => {
            for s in active_scalers {
                if queue_length == 0.0 || s.queue_length < queue_length {
                    queue_length = s.queue_length;
                    max_value = s.max_value;
                    active = true;
                }
            }
        }
        MultipleScalersCalculation::Avg => {
            let (mut count, mut q, mut m) = (0_u32, 0.0, 0.0);
            for s in active_scalers {
                count += 1;
                q += s.queue_length;
                m += s.max_value;
            }
            if count > 0 {
                queue_length = q / f64::from(count);
                max_value = m / f64::from(count);
                active = true;
            }
        }
        MultipleScalersCalculation::Sum => {
            for s in active_scalers {
                queue_length += s.queue_length;
                max_value += s.max_value;
                active = true;
            }
        }
    }
    if min_replica_count > 0 {
        active = true;
    }
    let max_value = max_value.min(max_replica_count as f64);
    Combined {
        active,
        scale_to: ceil(queue_length),
        max_scale: ceil(max_value),
    }
}

fn ceil(x: f64) -> i64 {
    // Saturating float-to-int conversion: queue lengths beyond i64 are not meaningful.
    f64_to_i64_saturating(x.ceil())
}

/// The scaling strategy with its parameters, parsed once from `spec.scalingStrategy`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Strategy {
    /// `maxScale - running`.
    Default,
    /// `min(maxScale - deduction - int(running x percentage), maxReplicaCount)`.
    Custom {
        /// `customScalingQueueLengthDeduction` (absent: 0).
        deduction: i64,
        /// `customScalingRunningJobPercentage` as a fraction (e.g. `0.5`).
        running_percentage: f64,
    },
    /// Counts pending Jobs: they will take messages too.
    Accurate,
    /// Fills up to `maxReplicaCount` as soon as there is work.
    Eager,
}

impl Strategy {
    /// The strategy `spec.scalingStrategy` selects. As in KEDA, `custom` with a
    /// `customScalingRunningJobPercentage` that is not a number falls back to the default
    /// strategy.
    pub fn from_spec(spec: &keda_api::ScaledJobSpec) -> Self {
        let strategy = spec.scaling_strategy.as_ref();
        match spec.scaling_strategy_kind() {
            ScalingStrategyKind::Default => Self::Default,
            ScalingStrategyKind::Accurate => Self::Accurate,
            ScalingStrategyKind::Eager => Self::Eager,
            ScalingStrategyKind::Custom => {
                let percentage = strategy
                    .and_then(|s| s.custom_scaling_running_job_percentage.as_deref())
                    .and_then(|p| p.trim().parse::<f64>().ok());
                match percentage {
                    Some(running_percentage) => Self::Custom {
                        deduction: strategy
                            .and_then(|s| s.custom_scaling_queue_length_deduction)
                            .map_or(0, i64::from),
                        running_percentage,
                    },
                    None => Self::Default,
                }
            }
        }
    }
}

/// The Jobs observed for a ScaledJob at this poll.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobCounts {
    /// Jobs not finished (no `Complete` or `Failed` condition that is `True`).
    pub running: i64,
    /// Running Jobs that count as pending (see [`is_pending`]).
    pub pending: i64,
}

/// KEDA's `GetEffectiveMaxScale`: `(effectiveMaxScale, scaleTo)` for a strategy, where `running`
/// already excludes the `minReplicaCount` Jobs.
///
/// The arithmetic saturates: a `customScalingRunningJobPercentage` of `1e300` (refused by
/// validation, but this function does not rely on it) asks for no Job instead of overflowing.
pub fn effective_max_scale(
    strategy: Strategy,
    max_scale: i64,
    running: i64,
    pending: i64,
    max_replica_count: i64,
    scale_to: i64,
) -> (i64, i64) {
    match strategy {
        Strategy::Default => (max_scale.saturating_sub(running), scale_to),
        Strategy::Custom {
            deduction,
            running_percentage,
        } => {
            // Go's int64(float64) truncates toward zero, as this does (saturating).
            let by_running = f64_to_i64_saturating(running as f64 * running_percentage);
            (
                max_scale
                    .saturating_sub(deduction)
                    .saturating_sub(by_running)
                    .min(max_replica_count),
                scale_to,
            )
        }
        Strategy::Accurate => {
            if max_scale.saturating_add(running).saturating_sub(pending) > max_replica_count {
                (max_replica_count.saturating_sub(running), scale_to)
            } else {
                (max_scale.saturating_sub(pending), scale_to)
            }
        }
        Strategy::Eager => (
            max_replica_count
                .saturating_sub(running)
                .saturating_sub(pending)
                .min(max_scale),
            max_replica_count,
        ),
    }
}

/// How many Jobs to create at this poll.
///
/// Below `minReplicaCount` running Jobs, exactly the missing ones are created (whatever the
/// triggers say; with `minReplicaCount > 0` the ScaledJob is always active). Otherwise the
/// strategy decides, never below 0, and only while active.
pub fn jobs_to_create(
    combined: Combined,
    strategy: Strategy,
    jobs: JobCounts,
    min_replica_count: i64,
    max_replica_count: i64,
) -> i64 {
    let (effective_max, scale_to) = if jobs.running < min_replica_count {
        let missing = min_replica_count.saturating_sub(jobs.running);
        (missing, missing)
    } else {
        effective_max_scale(
            strategy,
            combined.max_scale,
            jobs.running.saturating_sub(min_replica_count),
            jobs.pending,
            max_replica_count,
            combined.scale_to,
        )
    };
    if !combined.active || effective_max <= 0 {
        return 0;
    }
    scale_to.min(effective_max).max(0)
}

/// The state of one pod condition, as read from `status.conditions`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodView {
    /// `status.phase`.
    pub phase: String,
    /// Condition types whose status is `True`.
    pub true_conditions: Vec<String>,
}

/// Whether an unfinished Job counts as pending, from its pods (label `job-name=<job>`).
///
/// Without `pendingPodConditions` a Job is pending until one of its pods is `Running` or
/// `Succeeded`. With them, a Job stops being pending once some pod has every listed condition
/// `True`.
pub fn is_pending(pods: &[PodView], pending_pod_conditions: &[String]) -> bool {
    if pending_pod_conditions.is_empty() {
        !pods
            .iter()
            .any(|p| p.phase == "Running" || p.phase == "Succeeded")
    } else {
        !pods.iter().any(|p| {
            pending_pod_conditions
                .iter()
                .all(|c| p.true_conditions.iter().any(|t| t == c))
        })
    }
}

/// How a Job ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finished {
    /// Condition `Complete=True`.
    Succeeded,
    /// Condition `Failed=True`.
    Failed,
}

/// A finished Job, for the history limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FinishedJob {
    /// The Job's name.
    pub name: String,
    /// How it ended.
    pub outcome: Finished,
    /// `status.completionTime` as seconds since the epoch; a Job without one sorts first, as
    /// Go's `Time.Before` on a nil time does.
    pub completion_time: Option<i64>,
}

/// The finished Jobs to delete so that at most `successful_limit` succeeded and
/// `failed_limit` failed Jobs remain: the oldest by completion time go first.
pub fn history_to_delete(
    finished: &[FinishedJob],
    successful_limit: i32,
    failed_limit: i32,
) -> Vec<String> {
    let mut out = Vec::new();
    for (outcome, limit) in [
        (Finished::Succeeded, successful_limit),
        (Finished::Failed, failed_limit),
    ] {
        let mut jobs: Vec<&FinishedJob> =
            finished.iter().filter(|j| j.outcome == outcome).collect();
        let keep = usize::try_from(limit.max(0)).unwrap_or(0);
        if jobs.len() <= keep {
            continue;
        }
        jobs.sort_by_key(|j| j.completion_time.unwrap_or(i64::MIN));
        let excess = jobs.len() - keep;
        out.extend(jobs.into_iter().take(excess).map(|j| j.name.clone()));
    }
    out
}

/// The Jobs a rollout deletes: with the immediate strategy, every Job whose
/// `scaledjob.keda.sh/generation` annotation is missing or differs from the current generation;
/// with the gradual strategy, none.
pub fn rollout_to_delete<'a>(
    jobs: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    current_generation: i64,
    strategy: RolloutStrategy,
) -> Vec<String> {
    if strategy == RolloutStrategy::Gradual {
        return Vec::new();
    }
    let current = current_generation.to_string();
    jobs.into_iter()
        .filter(|(_, generation)| *generation != Some(current.as_str()))
        .map(|(name, _)| name.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(queue_length: f64, max_value: f64, active: bool) -> ScalerJobMetrics {
        ScalerJobMetrics {
            queue_length,
            max_value,
            active,
        }
    }

    #[test]
    fn per_scaler_metrics_divide_the_queue_by_the_average_target_and_cap_it() {
        let cases = [
            // (values, targets, max replicas) -> (queue length, max value)
            // 10 messages, target 2: 5 Jobs
            (vec![10.0], vec![2.0], 100, 10.0, 5.0),
            // two metric values add up; two targets average to 3
            (vec![4.0, 5.0], vec![2.0, 4.0], 100, 9.0, 3.0),
            // capped at maxReplicaCount
            (vec![1000.0], vec![1.0], 10, 1000.0, 10.0),
            // a zero target asks for nothing
            (vec![7.0], vec![0.0], 10, 7.0, 0.0),
            // no spec at all asks for nothing
            (vec![7.0], vec![], 10, 7.0, 0.0),
        ];
        for (values, targets, max, queue, max_value) in cases {
            let got = ScalerJobMetrics::new(&values, &targets, true, max);
            assert_eq!(
                (got.queue_length, got.max_value),
                (queue, max_value),
                "{values:?} / {targets:?}"
            );
        }
    }

    #[test]
    fn scalers_combine_over_the_active_ones_as_keda_does() {
        use MultipleScalersCalculation::*;
        let a = m(10.0, 5.0, true);
        let b = m(4.0, 2.0, true);
        let idle = m(100.0, 50.0, false);
        let cases = [
            // (scalers, calculation, min, max) -> (active, scaleTo, maxScale)
            // max picks the longest active queue; the inactive one is ignored
            (vec![a, b, idle], Max, 0, 100, (true, 10, 5)),
            // min picks the shortest active queue
            (vec![a, b, idle], Min, 0, 100, (true, 4, 2)),
            // avg over the two active ones
            (vec![a, b, idle], Avg, 0, 100, (true, 7, 4)),
            // sum over the two active ones
            (vec![a, b, idle], Sum, 0, 100, (true, 14, 7)),
            // nothing active: inactive, nothing to do
            (vec![idle], Max, 0, 100, (false, 0, 0)),
            // an active trigger with an empty queue is not selected by max: inactive (KEDA edge)
            (vec![m(0.0, 0.0, true)], Max, 0, 100, (false, 0, 0)),
            // minReplicaCount > 0 makes the ScaledJob active regardless
            (vec![idle], Max, 2, 100, (true, 0, 0)),
            // maxScale is capped by maxReplicaCount
            (vec![m(30.0, 30.0, true)], Sum, 0, 8, (true, 30, 8)),
            // fractions round up
            (vec![m(2.5, 1.2, true)], Max, 0, 100, (true, 3, 2)),
        ];
        for (scalers, calc, min, max, (active, scale_to, max_scale)) in cases {
            let got = combine(&scalers, calc, min, max);
            assert_eq!(
                got,
                Combined {
                    active,
                    scale_to,
                    max_scale
                },
                "{calc:?} {scalers:?}"
            );
        }
    }

    #[test]
    fn strategies_bound_new_jobs_as_keda_does() {
        let custom = Strategy::Custom {
            deduction: 1,
            running_percentage: 0.5,
        };
        let cases = [
            // (strategy, maxScale, running, pending, maxReplicaCount, scaleTo) -> (effective, scaleTo)
            // default: room is maxScale minus what already runs
            (Strategy::Default, 10, 3, 0, 100, 10, (7, 10)),
            // custom: 10 - 1 - int(4 * 0.5) = 7
            (custom, 10, 4, 0, 100, 10, (7, 10)),
            // custom is capped at maxReplicaCount
            (custom, 50, 0, 0, 20, 50, (20, 50)),
            // custom truncates toward zero: int(3 * 0.5) = 1
            (custom, 10, 3, 0, 100, 10, (8, 10)),
            // accurate, within max: pending Jobs will take messages too
            (Strategy::Accurate, 5, 2, 1, 10, 5, (4, 5)),
            // accurate, over max: fill up to max
            (Strategy::Accurate, 9, 4, 1, 10, 9, (6, 9)),
            // eager fills up to max, bounded by the queue
            (Strategy::Eager, 4, 0, 0, 10, 4, (4, 10)),
            // eager with running and pending Jobs
            (Strategy::Eager, 8, 4, 2, 10, 8, (4, 10)),
        ];
        for (strategy, max_scale, running, pending, max, scale_to, want) in cases {
            assert_eq!(
                effective_max_scale(strategy, max_scale, running, pending, max, scale_to),
                want,
                "{strategy:?} maxScale={max_scale} running={running} pending={pending}"
            );
        }
    }

    #[test]
    fn jobs_to_create_follows_the_strategy_the_floor_and_activity() {
        let active = |scale_to, max_scale| Combined {
            active: true,
            scale_to,
            max_scale,
        };
        let jobs = |running, pending| JobCounts { running, pending };
        let cases = [
            // (combined, strategy, jobs, min, max) -> jobs to create
            // 6 messages, target 1, nothing running: 6
            (active(6, 6), Strategy::Default, jobs(0, 0), 0, 100, 6),
            // 6 messages, 4 running: 2 more
            (active(6, 6), Strategy::Default, jobs(4, 0), 0, 100, 2),
            // more running than needed: none (never negative)
            (active(2, 2), Strategy::Default, jobs(5, 0), 0, 100, 0),
            // inactive: none, even with room
            (
                Combined {
                    active: false,
                    scale_to: 5,
                    max_scale: 5,
                },
                Strategy::Default,
                jobs(0, 0),
                0,
                100,
                0,
            ),
            // below minReplicaCount: exactly the missing ones, whatever the queue says
            (
                Combined {
                    active: true,
                    scale_to: 0,
                    max_scale: 0,
                },
                Strategy::Default,
                jobs(1, 0),
                3,
                97,
                2,
            ),
            // at minReplicaCount, running Jobs beyond the minimum count against the strategy
            (active(4, 4), Strategy::Default, jobs(5, 0), 3, 97, 2),
            // eager, max 10: 4 messages -> 4 Jobs
            (active(4, 4), Strategy::Eager, jobs(0, 0), 0, 10, 4),
            // eager: 4 running took their messages, 4 new ones -> 4 more (8)
            (active(4, 4), Strategy::Eager, jobs(4, 0), 0, 10, 4),
            // eager: 8 running, 4 new messages -> only 2 fit under max 10
            (active(4, 4), Strategy::Eager, jobs(8, 0), 0, 10, 2),
            // eager: at max, nothing
            (active(4, 4), Strategy::Eager, jobs(10, 0), 0, 10, 0),
        ];
        for (combined, strategy, jobs, min, max, want) in cases {
            assert_eq!(
                jobs_to_create(combined, strategy, jobs, min, max),
                want,
                "{combined:?} {strategy:?} {jobs:?} min={min} max={max}"
            );
        }
    }

    #[test]
    fn a_huge_running_job_percentage_asks_for_no_job_instead_of_overflowing() {
        // 1 running Job x 1e300 is beyond i64: before, `max_scale - deduction - i64::MAX`
        // overflowed (a panic in debug builds, a wrap to a huge Job count in release).
        let strategy = Strategy::Custom {
            deduction: 2,
            running_percentage: 1e300,
        };
        let combined = Combined {
            active: true,
            scale_to: 5,
            max_scale: 0,
        };
        let jobs = JobCounts {
            running: 1,
            pending: 0,
        };
        assert_eq!(jobs_to_create(combined, strategy, jobs, 0, 100), 0);
        let strategy = Strategy::Custom {
            deduction: 0,
            running_percentage: -1e300,
        };
        assert_eq!(effective_max_scale(strategy, 10, 1, 0, 100, 5), (100, 5));
    }

    #[test]
    fn custom_with_an_unparsable_percentage_falls_back_to_default() {
        let spec = |strategy: &str, percentage: Option<&str>, deduction: Option<i32>| {
            serde_json::from_value::<keda_api::ScaledJobSpec>(serde_json::json!({
                "jobTargetRef": {"template": {}},
                "triggers": [],
                "scalingStrategy": {
                    "strategy": strategy,
                    "customScalingRunningJobPercentage": percentage,
                    "customScalingQueueLengthDeduction": deduction,
                }
            }))
            .expect("a ScaledJob spec")
        };
        assert_eq!(
            Strategy::from_spec(&spec("custom", Some("0.5"), Some(1))),
            Strategy::Custom {
                deduction: 1,
                running_percentage: 0.5
            }
        );
        assert_eq!(
            Strategy::from_spec(&spec("custom", Some("0.5"), None)),
            Strategy::Custom {
                deduction: 0,
                running_percentage: 0.5
            }
        );
        assert_eq!(
            Strategy::from_spec(&spec("custom", Some("half"), Some(1))),
            Strategy::Default
        );
        assert_eq!(
            Strategy::from_spec(&spec("custom", None, Some(1))),
            Strategy::Default
        );
        assert_eq!(
            Strategy::from_spec(&spec("eager", None, None)),
            Strategy::Eager
        );
        assert_eq!(
            Strategy::from_spec(&spec("accurate", None, None)),
            Strategy::Accurate
        );
        assert_eq!(
            Strategy::from_spec(&spec("bogus", None, None)),
            Strategy::Default
        );
    }

    #[test]
    fn a_job_is_pending_until_a_pod_runs_or_meets_the_listed_conditions() {
        let pod = |phase: &str, conds: &[&str]| PodView {
            phase: phase.into(),
            true_conditions: conds.iter().map(|c| c.to_string()).collect(),
        };
        let none: Vec<String> = vec![];
        let listed = vec!["PodScheduled".to_string(), "Ready".to_string()];
        // no pod yet: pending
        assert!(is_pending(&[], &none));
        // a pod that is still Pending: pending
        assert!(is_pending(&[pod("Pending", &[])], &none));
        // a Running or Succeeded pod: not pending
        assert!(!is_pending(
            &[pod("Pending", &[]), pod("Running", &[])],
            &none
        ));
        assert!(!is_pending(&[pod("Succeeded", &[])], &none));
        // with conditions: a Running pod missing one of them keeps the Job pending
        assert!(is_pending(&[pod("Running", &["PodScheduled"])], &listed));
        // one pod with all of them: not pending
        assert!(!is_pending(
            &[pod("Pending", &["PodScheduled", "Ready"])],
            &listed
        ));
    }

    #[test]
    fn history_limits_delete_the_oldest_finished_jobs_of_each_outcome() {
        let job = |name: &str, outcome, t| FinishedJob {
            name: name.into(),
            outcome,
            completion_time: Some(t),
        };
        let finished = vec![
            job("ok-3", Finished::Succeeded, 300),
            job("ok-1", Finished::Succeeded, 100),
            job("ok-2", Finished::Succeeded, 200),
            job("bad-1", Finished::Failed, 150),
            job("bad-2", Finished::Failed, 250),
        ];
        // keep 1 succeeded and 1 failed: the two oldest succeeded and the oldest failed go
        assert_eq!(
            history_to_delete(&finished, 1, 1),
            vec!["ok-1", "ok-2", "bad-1"]
        );
        // within the limits: nothing
        assert!(history_to_delete(&finished, 100, 100).is_empty());
        // a limit of 0 deletes them all
        assert_eq!(history_to_delete(&finished, 0, 5).len(), 3);
    }

    #[test]
    fn immediate_rollout_deletes_jobs_of_other_generations_and_gradual_none() {
        let jobs = [("a", Some("1")), ("b", Some("2")), ("c", None)];
        assert_eq!(
            rollout_to_delete(jobs, 2, RolloutStrategy::Immediate),
            vec!["a", "c"]
        );
        assert!(rollout_to_delete(jobs, 2, RolloutStrategy::Gradual).is_empty());
    }
}
