//! `keda-rs dev --record FILE.csv`: the session's metric values as the history `keda-rs
//! simulate --values` replays (`time,trigger,value`, the trigger by index, a failed read as
//! `error`), and the replica timeline the operator and the HPA produced (`time,replicas`, the
//! form `simulate` writes), to compare a replay with what happened.
//!
//! A value is recorded when it changes (a replay takes a trigger's last sample at or before
//! each instant, so nothing is lost), sampled at every refresh of the view, and once more at
//! the last sample, so a replay lasts as long as the session. The files are
//! written when `dev` stops: `FILE.csv` and `FILE.replicas.csv` for a session with one
//! ScaledObject; with several, `FILE-<namespace>-<name>.csv` and `.replicas.csv` per object.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use jiff::Timestamp;

use super::state::ObjectView;

/// The most rows kept per object and file (about a week of one change per second for eight
/// triggers): later changes are not recorded.
pub const MAX_ROWS: usize = 5_000_000;

#[derive(Debug, Default)]
struct ObjectRecord {
    /// `time,trigger,value` lines.
    values: String,
    value_rows: usize,
    /// The last recorded value of each trigger (`Some(None)`: a failed read).
    last: Vec<Option<Option<f64>>>,
    /// `(time, replicas)` at the first sample and at every change.
    replicas: Vec<(Timestamp, i32)>,
    /// The last sample's time: the values are repeated then, so a replay covers the whole
    /// session, not only up to the last change.
    last_sample: Option<Timestamp>,
}

/// The session's record, in memory until [`Recorder::write`].
#[derive(Debug)]
pub struct Recorder {
    path: PathBuf,
    objects: BTreeMap<(String, String), ObjectRecord>,
}

impl Recorder {
    /// A record to be written to `path`.
    pub fn new(path: PathBuf) -> Recorder {
        Recorder {
            path,
            objects: BTreeMap::new(),
        }
    }

    /// Records the views sampled at `now`.
    pub fn sample(&mut self, now: Timestamp, views: &[ObjectView]) {
        for v in views {
            let record = self
                .objects
                .entry((v.namespace.clone(), v.name.clone()))
                .or_default();
            record.last_sample = Some(now);
            if record.last.len() < v.triggers.len() {
                record.last.resize(v.triggers.len(), None);
            }
            for (i, t) in v.triggers.iter().enumerate() {
                if record.last[i] == Some(t.value) || record.value_rows >= MAX_ROWS {
                    continue;
                }
                record.last[i] = Some(t.value);
                record.value_rows += 1;
                let _ = match t.value {
                    Some(value) => writeln!(record.values, "{now},{i},{value}"),
                    None => writeln!(record.values, "{now},{i},error"),
                };
            }
            if let Some(replicas) = v.desired
                && record.replicas.last().is_none_or(|(_, r)| *r != replicas)
                && record.replicas.len() < MAX_ROWS
            {
                record.replicas.push((now, replicas));
            }
        }
    }

    /// Writes the files; returns their paths (values, replicas) per object.
    ///
    /// # Errors
    /// A file that cannot be written.
    pub fn write(&self) -> Result<Vec<(PathBuf, PathBuf)>, (PathBuf, std::io::Error)> {
        let mut written = Vec::new();
        let one = self.objects.len() == 1;
        for ((namespace, name), record) in &self.objects {
            let values = if one {
                self.path.clone()
            } else {
                sibling(&self.path, &format!("-{namespace}-{name}"), "csv")
            };
            let replicas = sibling(&values, "", "replicas.csv");
            let mut text = String::from("time,trigger,value\n");
            text.push_str(&record.values);
            if let Some(end) = record.last_sample {
                for (i, last) in record.last.iter().enumerate() {
                    let _ = match last {
                        Some(Some(value)) => writeln!(text, "{end},{i},{value}"),
                        Some(None) => writeln!(text, "{end},{i},error"),
                        None => Ok(()),
                    };
                }
            }
            std::fs::write(&values, text).map_err(|e| (values.clone(), e))?;
            let mut text = String::from("time,replicas\n");
            for (at, count) in &record.replicas {
                let _ = writeln!(text, "{at},{count}");
            }
            std::fs::write(&replicas, text).map_err(|e| (replicas.clone(), e))?;
            written.push((values, replicas));
        }
        Ok(written)
    }
}

/// `path` with `suffix` added to its stem and the extension `extension`:
/// (`rec.csv`, `-shop-api`, `csv`) is `rec-shop-api.csv`, (`rec.csv`, ``, `replicas.csv`) is
/// `rec.replicas.csv`.
fn sibling(path: &Path, suffix: &str, extension: &str) -> PathBuf {
    let stem = path
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    path.with_file_name(format!("{stem}{suffix}.{extension}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dev::state::TriggerView;

    fn view(name: &str, value: Option<f64>, desired: i32) -> ObjectView {
        ObjectView {
            namespace: "default".to_string(),
            name: name.to_string(),
            target: "Deployment/w".to_string(),
            triggers: vec![TriggerView {
                trigger_type: "redis".to_string(),
                metric: Some("s0-redis-jobs".to_string()),
                value,
                error: None,
                target: Some(5.0),
                per_replica: true,
                activation: 0.0,
                active: None,
            }],
            ready: None,
            active: false,
            desired: Some(desired),
            current: Some(desired),
            min: 0,
            max: 10,
            hpa: None,
            cooldown_left: None,
            paused: false,
        }
    }

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_767_225_600 + s).expect("a time")
    }

    #[test]
    fn changes_only_are_recorded_in_the_simulate_formats() {
        let dir = std::env::temp_dir().join(format!("keda-rs-record-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let mut r = Recorder::new(dir.join("rec.csv"));
        r.sample(at(0), &[view("w", Some(0.0), 0)]);
        r.sample(at(1), &[view("w", Some(0.0), 0)]);
        r.sample(at(2), &[view("w", Some(20.0), 1)]);
        r.sample(at(3), &[view("w", None, 4)]);
        let written = r.write().expect("written");
        assert_eq!(
            written,
            vec![(dir.join("rec.csv"), dir.join("rec.replicas.csv"))]
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("rec.csv")).expect("values"),
            "time,trigger,value\n2026-01-01T00:00:00Z,0,0\n2026-01-01T00:00:02Z,0,20\n2026-01-01T00:00:03Z,0,error\n2026-01-01T00:00:03Z,0,error\n"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("rec.replicas.csv")).expect("replicas"),
            "time,replicas\n2026-01-01T00:00:00Z,0\n2026-01-01T00:00:02Z,1\n2026-01-01T00:00:03Z,4\n"
        );
        let mut r = Recorder::new(dir.join("rec.csv"));
        r.sample(at(0), &[view("a", Some(1.0), 0), view("b", Some(2.0), 0)]);
        let written = r.write().expect("written");
        assert_eq!(written[1].0, dir.join("rec-default-b.csv"));
        assert_eq!(written[1].1, dir.join("rec-default-b.replicas.csv"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
