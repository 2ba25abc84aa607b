//! `keda-rs simulate`: replays a recorded metric history through the operator's scale decision
//! (`keda_decide::scale::decide`: activation, cooldown, idle replicas, pause annotations;
//! `keda_decide::fallback::evaluate`; `keda_decide::formula` for `scalingModifiers`) and the
//! HPA algorithm
//! `keda-rs dev` runs ([`crate::hpa::algorithm`]: tolerance, behavior, stabilization windows,
//! policies), and reports the replica timeline it produces.
//!
//! Time is simulated: the operator polls every `pollingInterval` and the HPA syncs every sync
//! period from the first sample on; a trigger's value at a time is its last sample at or
//! before that time (no sample yet: the trigger failed, as an unreadable metric). A sample whose
//! value is `error` is a failed read: it counts towards `fallback.failureThreshold` at every
//! read, as in the operator, where both the poll and the HPA's metric read count (each
//! poll and each HPA sync here).
//!
//! A paused object (`autoscaling.keda.sh/paused-replicas: N`) is held at N for the whole
//! replay, `paused: "true"` at the initial count: KEDA removes the HPA of a paused object.
//!
//! A trigger's target and activation threshold are read from its metadata, by the names the
//! built-in scalers use (see [`TARGET_KEYS`], [`ACTIVATION_KEYS`]); `metricType` `Value` or
//! `AverageValue` (the default).

//!
//! The parts: [`parse`] (the ScaledObjects and the CSV history), [`replay`] (the replay),
//! [`report`] (the figures, side by side with `--compare`, and the files), [`prometheus`] (the
//! history of `prometheus` triggers as range queries).

use std::path::{Path, PathBuf};

use jiff::Timestamp;
use keda_decide::fallback::FallbackSpec;
use keda_decide::formula::CompiledModifiers;
use keda_decide::scale::ScalingSettings;

use crate::dev::chart::{self, Sample};
use crate::hpa::algorithm::MetricTarget;

pub mod parse;
pub mod prometheus;
pub mod replay;
pub mod report;

pub use parse::{ACTIVATION_KEYS, MAX_HISTORY, TARGET_KEYS, parse_csv, parse_objects};
pub use replay::simulate;
pub use report::{
    Version, render_compare, render_summary, write_compare_outputs, write_history, write_outputs,
};

/// Largest input file read (CSV or YAML).
pub const MAX_INPUT_BYTES: u64 = 512 * 1024 * 1024;

/// Why a simulation could not run.
#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is larger than {MAX_INPUT_BYTES} bytes")]
    TooLarge { path: PathBuf },
    #[error("{path}: {message}")]
    Yaml { path: PathBuf, message: String },
    #[error("{path}: no ScaledObject in the file")]
    NoObject { path: PathBuf },
    #[error("{path}:{line}: {message}")]
    Csv {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{path}: no sample in the file")]
    NoSamples { path: PathBuf },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: no ScaledObject {namespace}/{name} to compare with")]
    NoCounterpart {
        path: PathBuf,
        namespace: String,
        name: String,
    },
    #[error("trigger {trigger}: {message}")]
    Prometheus { trigger: String, message: String },
    #[error(
        "{namespace}/{name}: trigger {trigger} (type {kind}) has no history: give --values with its samples (only prometheus triggers are read from --prometheus)"
    )]
    NoHistory {
        namespace: String,
        name: String,
        trigger: String,
        kind: String,
    },
    #[error(transparent)]
    Chart(#[from] chart::ChartError),
}

/// One trigger as the simulation sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct SimTrigger {
    /// `name`, or `trigger<index>` when unnamed.
    pub name: String,
    /// The trigger's `type`.
    pub kind: String,
    pub target: MetricTarget,
    pub activation: f64,
    /// For a `prometheus` trigger: its history is its own query as a range query.
    pub prometheus: Option<prometheus::PromQuery>,
}

/// One ScaledObject, ready to simulate.
#[derive(Clone, Debug)]
pub struct SimObject {
    pub namespace: String,
    pub name: String,
    pub settings: ScalingSettings,
    pub polling_interval: jiff::SignedDuration,
    pub min_replicas: i32,
    pub max_replicas: i32,
    /// `advanced.horizontalPodAutoscalerConfig.behavior` as given (defaults filled later).
    pub behavior: Option<k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerBehavior>,
    pub triggers: Vec<SimTrigger>,
    /// `spec.fallback`.
    pub fallback: Option<FallbackSpec>,
    /// `spec.advanced.scalingModifiers`, compiled, with the trigger index of each formula
    /// input (in the formula's order).
    pub modifiers: Option<(CompiledModifiers, Vec<usize>)>,
}

/// One metric sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    pub time: Timestamp,
    pub trigger: usize,
    /// `None`: the read failed (the CSV value `error`).
    pub value: Option<f64>,
}

/// The replica timeline and its figures.
#[derive(Clone, Debug, PartialEq)]
pub struct Timeline {
    /// `(time, replicas)` at the start and at every change.
    pub changes: Vec<(Timestamp, i32)>,
    /// Chart samples (one per HPA sync).
    pub samples: Vec<Sample>,
    pub summary: Summary,
}

/// The figures the command prints.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    pub replica_hours: f64,
    pub scale_ups: usize,
    pub scale_downs: usize,
    pub seconds_at_max: i64,
    pub seconds_at_zero: i64,
    /// Longest run of HPA syncs where the first trigger's usage ratio was above 1.
    pub longest_above_target_seconds: i64,
    /// Seconds from the first poll seeing the object active to replicas > 0, per activation.
    pub activation_delays: Vec<i64>,
}

/// Pairs every object of the first file with its version in the `--compare` file
/// (`other_path`): the object of the same namespace and name or, when each file holds one
/// object, that one whatever its name.
///
/// # Errors
/// An object of the first file without a version in the other.
pub fn pair_versions(
    first: Vec<SimObject>,
    mut other: Vec<SimObject>,
    other_path: &Path,
) -> Result<Vec<(SimObject, SimObject)>, SimulateError> {
    if first.len() == 1 && other.len() == 1 {
        return Ok(first.into_iter().zip(other).collect());
    }
    let mut pairs = Vec::new();
    for object in first {
        let Some(at) = other
            .iter()
            .position(|o| o.namespace == object.namespace && o.name == object.name)
        else {
            return Err(SimulateError::NoCounterpart {
                path: other_path.to_path_buf(),
                namespace: object.namespace,
                name: object.name,
            });
        };
        let version = other.swap_remove(at);
        pairs.push((object, version));
    }
    Ok(pairs)
}

/// Reads a file of at most [`MAX_INPUT_BYTES`].
///
/// # Errors
/// Unreadable or too large.
pub fn read_bounded(path: &Path) -> Result<String, SimulateError> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|source| SimulateError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let mut text = String::new();
    file.take(MAX_INPUT_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|source| SimulateError::Read {
            path: path.to_path_buf(),
            source,
        })?;
    if text.len() as u64 > MAX_INPUT_BYTES {
        return Err(SimulateError::TooLarge {
            path: path.to_path_buf(),
        });
    }
    Ok(text)
}

#[cfg(test)]
mod tests;
