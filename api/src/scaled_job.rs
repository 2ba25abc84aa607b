//! The `ScaledJob` custom resource (`keda.sh/v1alpha1`, short name `sj`): creates Kubernetes Jobs
//! from a template as events arrive.
//!
//! Field names, optionality and JSON spelling follow KEDA's `scaledjob_types.go`. Defaults are the
//! `DEFAULT_*` constants, applied by accessor methods.

use k8s_openapi::api::batch::v1::JobSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{CustomResource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::annotations;
use crate::condition::Condition;
use crate::map::CompactMap;
use crate::scaled_object::{TriggerActivityStatus, generate_identifier};
use crate::trigger::ScaleTrigger;

/// Default `pollingInterval`, seconds.
pub const DEFAULT_POLLING_INTERVAL: i32 = 30;
/// Default `successfulJobsHistoryLimit`.
pub const DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT: i32 = 100;
/// Default `failedJobsHistoryLimit`.
pub const DEFAULT_FAILED_JOBS_HISTORY_LIMIT: i32 = 100;
/// Default `minReplicaCount`.
pub const DEFAULT_MIN_REPLICA_COUNT: i32 = 0;
/// Default `maxReplicaCount`.
pub const DEFAULT_MAX_REPLICA_COUNT: i32 = 100;
/// Inclusive bounds of a numeric `scalingStrategy.customScalingRunningJobPercentage` (a
/// fraction: `0.5` subtracts half the running Jobs).
pub const RUNNING_JOB_PERCENTAGE_BOUNDS: (f64, f64) = (0.0, 100.0);

/// Spec of a [`ScaledJob`].
#[derive(CustomResource, JsonSchema, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[kube(
    group = "keda.sh",
    version = "v1alpha1",
    kind = "ScaledJob",
    plural = "scaledjobs",
    namespaced,
    shortname = "sj",
    status = "ScaledJobStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "ScaledJob runs Kubernetes Jobs on events",
    printcolumn = r#"{"name":"Min","type":"integer","jsonPath":".spec.minReplicaCount"}"#,
    printcolumn = r#"{"name":"Max","type":"integer","jsonPath":".spec.maxReplicaCount"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Active","type":"string","jsonPath":".status.conditions[?(@.type==\"Active\")].status"}"#,
    printcolumn = r#"{"name":"Paused","type":"string","jsonPath":".status.conditions[?(@.type==\"Paused\")].status"}"#,
    printcolumn = r#"{"name":"Triggers","type":"string","jsonPath":".status.triggersTypes"}"#,
    printcolumn = r#"{"name":"Authentications","type":"string","jsonPath":".status.authenticationsTypes"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ScaledJobSpec {
    /// Template of every Job created.
    pub job_target_ref: JobSpec,
    /// Seconds between two checks of the triggers (default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub polling_interval: Option<i32>,
    /// Finished successful Jobs kept (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub successful_jobs_history_limit: Option<i32>,
    /// Finished failed Jobs kept (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub failed_jobs_history_limit: Option<i32>,
    /// Deprecated: use `rollout.strategy`. Wins over `rollout` when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["gradual", "immediate"]))]
    pub rollout_strategy: Option<String>,
    /// What happens to running Jobs when the ScaledJob changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<Rollout>,
    /// Container whose environment resolves `...FromEnv` parameters (default: the first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_source_container_name: Option<String>,
    /// Jobs kept running at all times (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub min_replica_count: Option<i32>,
    /// Upper bound of running Jobs (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_replica_count: Option<i32>,
    /// How many Jobs to create per poll.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaling_strategy: Option<ScalingStrategy>,
    /// What to scale on.
    #[schemars(length(min = 1))]
    pub triggers: Vec<ScaleTrigger>,
}

/// `spec.rollout`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Rollout {
    /// `immediate` (delete old Jobs; the default) or `gradual` (keep them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["gradual", "immediate"]))]
    pub strategy: Option<String>,
    /// `background` (default) or `foreground` deletion of old Jobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["foreground", "background"]))]
    pub propagation_policy: Option<String>,
}

/// `spec.scalingStrategy`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ScalingStrategy {
    /// `default`, `custom`, `accurate` or `eager`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["default", "custom", "accurate", "eager"]))]
    pub strategy: Option<String>,
    /// `custom`: subtracted from the wanted Job count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_scaling_queue_length_deduction: Option<i32>,
    /// `custom`: fraction of running Jobs subtracted, a float written as a string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_scaling_running_job_percentage: Option<String>,
    /// Pod conditions that must all be True for a Job not to count as pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_pod_conditions: Option<Vec<String>>,
    /// `max` (default), `min`, `avg` or `sum` over active scalers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["min", "avg", "sum", "max"]))]
    pub multiple_scalers_calculation: Option<String>,
}

/// The parsed `scalingStrategy.strategy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ScalingStrategyKind {
    /// Create `maxScale - running` Jobs.
    #[default]
    Default,
    /// Deduct a fixed count and a fraction of running Jobs.
    Custom,
    /// Take pending Jobs into account.
    Accurate,
    /// Fill up to `maxReplicaCount` at once.
    Eager,
}

/// The parsed `scalingStrategy.multipleScalersCalculation`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MultipleScalersCalculation {
    /// Largest value among active scalers.
    #[default]
    Max,
    /// Smallest value.
    Min,
    /// Average.
    Avg,
    /// Sum.
    Sum,
}

/// The parsed rollout strategy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RolloutStrategy {
    /// Delete Jobs of older generations on change (`default` / `immediate`).
    #[default]
    Immediate,
    /// Let Jobs of older generations finish.
    Gradual,
}

/// Observed state of a [`ScaledJob`].
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ScaledJobStatus {
    /// Last time a trigger was active.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_active_time: Option<Time>,
    /// Ready, Active, Paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    /// Pause state as KEDA writes it (JSON key `Paused`, capitalised).
    #[serde(default, rename = "Paused", skip_serializing_if = "Option::is_none")]
    pub paused: Option<String>,
    /// Comma-separated trigger types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triggers_types: Option<String>,
    /// Comma-separated authentication references.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentications_types: Option<String>,
    /// Metric names in trigger order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_metric_names: Option<Vec<String>>,
    /// Activity per metric name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triggers_activity: Option<CompactMap<String, TriggerActivityStatus>>,
}

impl ScaledJob {
    /// `scaledjob.<namespace>.<name>`, lowercase.
    pub fn identifier(&self) -> String {
        generate_identifier(
            "ScaledJob",
            self.metadata.namespace.as_deref().unwrap_or_default(),
            &self.name_any(),
        )
    }

    /// Whether the `paused` annotation reads true (unparsable counts as true, as in KEDA).
    /// ScaledJobs have no `paused-replicas`.
    pub fn is_paused(&self) -> bool {
        annotations::bool_annotation(self.metadata.annotations.as_ref(), annotations::PAUSED)
    }
}

impl ScaledJobSpec {
    /// `pollingInterval` or 30.
    pub fn polling_interval(&self) -> i32 {
        self.polling_interval.unwrap_or(DEFAULT_POLLING_INTERVAL)
    }

    /// `successfulJobsHistoryLimit` or 100.
    pub fn successful_jobs_history_limit(&self) -> i32 {
        self.successful_jobs_history_limit
            .unwrap_or(DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT)
    }

    /// `failedJobsHistoryLimit` or 100.
    pub fn failed_jobs_history_limit(&self) -> i32 {
        self.failed_jobs_history_limit
            .unwrap_or(DEFAULT_FAILED_JOBS_HISTORY_LIMIT)
    }

    /// KEDA's `MinReplicaCount()`: `minReplicaCount` (default 0), capped at `maxReplicaCount`
    /// when both are set.
    pub fn effective_min_replica_count(&self) -> i64 {
        match (self.min_replica_count, self.max_replica_count) {
            (Some(min), Some(max)) if min > max => i64::from(max),
            (Some(min), _) => i64::from(min),
            (None, _) => i64::from(DEFAULT_MIN_REPLICA_COUNT),
        }
    }

    /// KEDA's `MaxReplicaCount()`: the Jobs that may run beyond the minimum, i.e.
    /// `max - min`, or `max` when min > max, or 100 when max is unset.
    pub fn effective_max_replica_count(&self) -> i64 {
        match (self.min_replica_count, self.max_replica_count) {
            (Some(min), Some(max)) if min > max => i64::from(max),
            (_, Some(max)) => i64::from(max) - self.effective_min_replica_count(),
            (_, None) => i64::from(DEFAULT_MAX_REPLICA_COUNT),
        }
    }

    /// The scaling strategy; an unknown or absent value is `Default`, as in KEDA.
    pub fn scaling_strategy_kind(&self) -> ScalingStrategyKind {
        match self
            .scaling_strategy
            .as_ref()
            .and_then(|s| s.strategy.as_deref())
        {
            Some("custom") => ScalingStrategyKind::Custom,
            Some("accurate") => ScalingStrategyKind::Accurate,
            Some("eager") => ScalingStrategyKind::Eager,
            _ => ScalingStrategyKind::Default,
        }
    }

    /// How several scalers combine; unknown or absent is `Max`, as in KEDA.
    pub fn multiple_scalers_calculation(&self) -> MultipleScalersCalculation {
        match self
            .scaling_strategy
            .as_ref()
            .and_then(|s| s.multiple_scalers_calculation.as_deref())
        {
            Some("min") => MultipleScalersCalculation::Min,
            Some("avg") => MultipleScalersCalculation::Avg,
            Some("sum") => MultipleScalersCalculation::Sum,
            _ => MultipleScalersCalculation::Max,
        }
    }

    /// The rollout strategy: the deprecated `rolloutStrategy` wins when set, then
    /// `rollout.strategy`; only `gradual` keeps old Jobs.
    pub fn rollout_strategy(&self) -> RolloutStrategy {
        let s = self
            .rollout_strategy
            .as_deref()
            .filter(|s| !s.is_empty())
            .or_else(|| self.rollout.as_ref().and_then(|r| r.strategy.as_deref()));
        match s {
            Some("gradual") => RolloutStrategy::Gradual,
            _ => RolloutStrategy::Immediate,
        }
    }

    /// Whether old Jobs are deleted with `foreground` propagation (else `background`).
    pub fn rollout_propagation_foreground(&self) -> bool {
        self.rollout
            .as_ref()
            .and_then(|r| r.propagation_policy.as_deref())
            == Some("foreground")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_and_max_follow_keda_arithmetic() {
        let cases = [
            // (min, max) -> (effective min, effective max)
            // nothing set: 0 and 100
            ((None, None), (0, 100)),
            // only max: max itself
            ((None, Some(10)), (0, 10)),
            // both: max counts the Jobs beyond min
            ((Some(2), Some(10)), (2, 8)),
            // min above max: both capped at max
            ((Some(20), Some(10)), (10, 10)),
            // only min: max stays 100
            ((Some(5), None), (5, 100)),
        ];
        for ((min, max), (emin, emax)) in cases {
            let spec = ScaledJobSpec {
                min_replica_count: min,
                max_replica_count: max,
                ..ScaledJobSpec::default()
            };
            assert_eq!(spec.effective_min_replica_count(), emin, "{min:?} {max:?}");
            assert_eq!(spec.effective_max_replica_count(), emax, "{min:?} {max:?}");
        }
    }

    #[test]
    fn deprecated_rollout_strategy_wins() {
        let mut spec = ScaledJobSpec::default();
        assert_eq!(spec.rollout_strategy(), RolloutStrategy::Immediate);
        spec.rollout = Some(Rollout {
            strategy: Some("gradual".into()),
            propagation_policy: Some("foreground".into()),
        });
        assert_eq!(spec.rollout_strategy(), RolloutStrategy::Gradual);
        assert!(spec.rollout_propagation_foreground());
        spec.rollout_strategy = Some("default".into());
        assert_eq!(spec.rollout_strategy(), RolloutStrategy::Immediate);
    }

    #[test]
    fn unknown_strategies_fall_back_to_defaults() {
        let mut spec = ScaledJobSpec {
            scaling_strategy: Some(ScalingStrategy {
                strategy: Some("bogus".into()),
                multiple_scalers_calculation: Some("sum".into()),
                ..ScalingStrategy::default()
            }),
            ..ScaledJobSpec::default()
        };
        assert_eq!(spec.scaling_strategy_kind(), ScalingStrategyKind::Default);
        assert_eq!(
            spec.multiple_scalers_calculation(),
            MultipleScalersCalculation::Sum
        );
        if let Some(s) = spec.scaling_strategy.as_mut() {
            s.strategy = Some("eager".into());
        }
        assert_eq!(spec.scaling_strategy_kind(), ScalingStrategyKind::Eager);
        assert_eq!(spec.polling_interval(), 30);
        assert_eq!(spec.successful_jobs_history_limit(), 100);
        assert_eq!(spec.failed_jobs_history_limit(), 100);
    }
}
