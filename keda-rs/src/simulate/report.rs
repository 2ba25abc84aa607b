//! What a replay prints and writes: the figures (one column, or two side by side with
//! `--compare`), the `time,replicas` CSVs and the chart.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::{SimObject, SimulateError, Timeline};
use crate::dev::chart::{self, Run};

/// One replay to report: the version's name (its file's name with `--compare`), the object
/// and its timeline.
#[derive(Clone, Copy, Debug)]
pub struct Version<'a> {
    pub name: &'a str,
    pub object: &'a SimObject,
    pub timeline: &'a Timeline,
}

/// The figures of one replay, as `(label, value)` lines.
fn figures(object: &SimObject, timeline: &Timeline) -> Vec<(&'static str, String)> {
    let s = &timeline.summary;
    let delays: Vec<String> = s
        .activation_delays
        .iter()
        .map(|d| format!("{d} s"))
        .collect();
    vec![
        ("replica-hours", format!("{:.2}", s.replica_hours)),
        (
            "scale events",
            format!("{} up, {} down", s.scale_ups, s.scale_downs),
        ),
        (
            "time at max",
            format!("{} s (max {})", s.seconds_at_max, object.max_replicas),
        ),
        ("time at zero", format!("{} s", s.seconds_at_zero)),
        (
            "longest above target",
            format!("{} s", s.longest_above_target_seconds),
        ),
        (
            "activation delays",
            if delays.is_empty() {
                "none".to_string()
            } else {
                delays.join(", ")
            },
        ),
    ]
}

/// Width of the label column.
const LABEL_WIDTH: usize = 24;

/// The summary as printed.
pub fn render_summary(object: &SimObject, timeline: &Timeline) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "ScaledObject {}/{}", object.namespace, object.name);
    for (label, value) in figures(object, timeline) {
        let _ = writeln!(out, "  {:<LABEL_WIDTH$}{value}", format!("{label}:"));
    }
    out
}

/// Two versions' figures side by side, a column each, headed by the versions' names.
pub fn render_compare(a: Version<'_>, b: Version<'_>) -> String {
    let left = figures(a.object, a.timeline);
    let right = figures(b.object, b.timeline);
    let width = left
        .iter()
        .map(|(_, v)| v.chars().count())
        .chain([a.name.chars().count()])
        .max()
        .unwrap_or(0)
        + 4;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "ScaledObject {}/{}: {} and {} over the same history",
        a.object.namespace, a.object.name, a.name, b.name
    );
    let _ = writeln!(out, "  {:<LABEL_WIDTH$}{:<width$}{}", "", a.name, b.name);
    for ((label, l), (_, r)) in left.iter().zip(&right) {
        let _ = writeln!(out, "  {:<LABEL_WIDTH$}{l:<width$}{r}", format!("{label}:"));
    }
    out
}

fn write_changes(path: &Path, timeline: &Timeline) -> Result<(), SimulateError> {
    let mut csv = String::from("time,replicas\n");
    for (at, count) in &timeline.changes {
        let _ = writeln!(csv, "{at},{count}");
    }
    std::fs::write(path, csv).map_err(|source| SimulateError::Write {
        path: path.to_path_buf(),
        source,
    })
}

fn create_dir(dir: &Path) -> Result<(), SimulateError> {
    std::fs::create_dir_all(dir).map_err(|source| SimulateError::Write {
        path: dir.to_path_buf(),
        source,
    })
}

/// Writes `<namespace>-<name>.csv` (`time,replicas`, one row per change), `.svg` and `.png`.
///
/// # Errors
/// A file that cannot be written.
pub fn write_outputs(
    dir: &Path,
    object: &SimObject,
    timeline: &Timeline,
) -> Result<Vec<PathBuf>, SimulateError> {
    create_dir(dir)?;
    let csv_path = dir.join(format!("{}-{}.csv", object.namespace, object.name));
    write_changes(&csv_path, timeline)?;
    let (svg, png) = chart::write_charts(dir, &object.namespace, &object.name, &timeline.samples)?;
    Ok(vec![csv_path, svg, png])
}

/// Writes `<namespace>-<name>.history.csv` (`time,trigger,value`, the trigger by name, a
/// failed read as `error`): a history read from Prometheus, to replay later with `--values`.
///
/// # Errors
/// A file that cannot be written.
pub fn write_history(
    dir: &Path,
    object: &SimObject,
    points: &[super::Point],
) -> Result<PathBuf, SimulateError> {
    create_dir(dir)?;
    let path = dir.join(format!("{}-{}.history.csv", object.namespace, object.name));
    let mut csv = String::from("time,trigger,value\n");
    for p in points {
        let trigger = object
            .triggers
            .get(p.trigger)
            .map_or("", |t| t.name.as_str());
        let _ = match p.value {
            Some(v) => writeln!(csv, "{},{trigger},{v}", p.time),
            None => writeln!(csv, "{},{trigger},error", p.time),
        };
    }
    std::fs::write(&path, csv).map_err(|source| SimulateError::Write {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

/// The suffix of the compared version's `time,replicas` CSV.
pub const COMPARE_SUFFIX: &str = "compare";

/// Writes, for two versions of an object over the same history, `<namespace>-<name>.csv` (the
/// first version), `<namespace>-<name>.compare.csv` (the second) and one chart
/// `<namespace>-<name>.svg` and `.png` holding both timelines.
///
/// # Errors
/// A file that cannot be written.
pub fn write_compare_outputs(
    dir: &Path,
    a: Version<'_>,
    b: Version<'_>,
) -> Result<Vec<PathBuf>, SimulateError> {
    create_dir(dir)?;
    let stem = format!("{}-{}", a.object.namespace, a.object.name);
    let first = dir.join(format!("{stem}.csv"));
    write_changes(&first, a.timeline)?;
    let second = dir.join(format!("{stem}.{COMPARE_SUFFIX}.csv"));
    write_changes(&second, b.timeline)?;
    let title = format!(
        "ScaledObject {}/{}: {} and {}",
        a.object.namespace, a.object.name, a.name, b.name
    );
    let runs = [
        Run {
            name: a.name,
            samples: &a.timeline.samples,
        },
        Run {
            name: b.name,
            samples: &b.timeline.samples,
        },
    ];
    let (svg, png) = chart::write_chart_files(dir, &stem, &title, &runs)?;
    Ok(vec![first, second, svg, png])
}
