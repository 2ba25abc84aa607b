//! What a replay prints and writes.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::{SimObject, SimulateError, Timeline};
use crate::dev::chart;

/// The summary as printed.
pub fn render_summary(object: &SimObject, timeline: &Timeline) -> String {
    let s = &timeline.summary;
    let mut out = String::new();
    let _ = writeln!(out, "ScaledObject {}/{}", object.namespace, object.name);
    let _ = writeln!(out, "  replica-hours:            {:.2}", s.replica_hours);
    let _ = writeln!(
        out,
        "  scale events:             {} up, {} down",
        s.scale_ups, s.scale_downs
    );
    let _ = writeln!(
        out,
        "  time at max ({}):  {} s",
        object.max_replicas, s.seconds_at_max
    );
    let _ = writeln!(out, "  time at zero:             {} s", s.seconds_at_zero);
    let _ = writeln!(
        out,
        "  longest above target:     {} s",
        s.longest_above_target_seconds
    );
    let delays: Vec<String> = s
        .activation_delays
        .iter()
        .map(|d| format!("{d} s"))
        .collect();
    let _ = writeln!(
        out,
        "  activation delays:        {}",
        if delays.is_empty() {
            "none".to_string()
        } else {
            delays.join(", ")
        }
    );
    out
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
    std::fs::create_dir_all(dir).map_err(|source| SimulateError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    let csv_path = dir.join(format!("{}-{}.csv", object.namespace, object.name));
    let mut csv = String::from("time,replicas\n");
    for (at, count) in &timeline.changes {
        let _ = writeln!(csv, "{at},{count}");
    }
    std::fs::write(&csv_path, csv).map_err(|source| SimulateError::Write {
        path: csv_path.clone(),
        source,
    })?;
    let (svg, png) = chart::write_charts(dir, &object.namespace, &object.name, &timeline.samples)?;
    Ok(vec![csv_path, svg, png])
}
