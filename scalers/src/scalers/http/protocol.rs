//! The report protocol between activator replicas and the operator.
//!
//! Each activator replica keeps one long-lived HTTP request open to the operator
//! (`POST` [`REPORT_PATH`], HTTP/1.1 chunked or HTTP/2) and streams newline-delimited JSON
//! [`Report`]s in its body:
//!
//! - `wake`, sent the moment the first request for a target is held (no ready endpoint), so the
//!   operator scales the target from zero without waiting for a poll;
//! - `sample`, once per second: per target, the time-weighted average concurrency and the
//!   number of requests of that second, plus the current held, in-flight and ready counts;
//! - `bye`, sent when the replica drains, so its counts stop at once instead of expiring.
//!
//! The operator answers when the body ends. A replica that stops reporting without `bye`
//! expires after [`REPLICA_TTL_SECONDS`].

use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// Where the operator mounts [`super::hub::serve_reports`].
pub const REPORT_PATH: &str = "/activator/v1/reports";

/// Seconds after its last line that a replica's held/in-flight/ready counts are dropped.
pub const REPLICA_TTL_SECONDS: u64 = 5;

/// One `http` trigger: the ScaledObject and the trigger's position in it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TargetKey {
    /// The ScaledObject's namespace.
    pub namespace: String,
    /// The ScaledObject's name.
    pub name: String,
    /// The index of the `http` trigger in `spec.triggers`.
    pub trigger: usize,
}

impl TargetKey {
    /// The key of trigger `trigger` of ScaledObject `namespace/name`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>, trigger: usize) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
            trigger,
        }
    }
}

impl std::fmt::Display for TargetKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/{} trigger {}",
            self.namespace, self.name, self.trigger
        )
    }
}

/// One second of one target on one activator replica.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetSample {
    /// The target.
    pub target: TargetKey,
    /// Time-weighted average of held + in-flight requests over the second.
    pub concurrency: f64,
    /// Requests that arrived during the second.
    pub requests: f64,
    /// Requests held (waiting for a ready endpoint) at the end of the second.
    pub held: u32,
    /// Requests being forwarded at the end of the second.
    pub in_flight: u32,
    /// Ready endpoints of the target's Service as this replica sees them.
    pub ready: u32,
    /// A Service the activators manage for this target leads to its pods (serve mode) as this
    /// replica sees it: clients may be reaching the pods directly, so the target stays
    /// active (`docs/http.md`, "Proxy and serve modes"). Absent means `false`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub serving: bool,
}

/// One line of the report stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Report {
    /// A request for `target` is held: scale it from zero now.
    Wake {
        /// The activator replica (its pod name).
        replica: String,
        /// The target.
        target: TargetKey,
    },
    /// The statistics of one second.
    #[serde(rename_all = "camelCase")]
    Sample {
        /// The activator replica.
        replica: String,
        /// The second (Unix time) the values belong to.
        second: u64,
        /// One entry per target with recent activity.
        targets: Vec<TargetSample>,
    },
    /// The replica is shutting down.
    Bye {
        /// The activator replica.
        replica: String,
    },
}

impl Report {
    /// The replica that sent the line.
    pub fn replica(&self) -> &str {
        match self {
            Self::Wake { replica, .. } | Self::Sample { replica, .. } | Self::Bye { replica } => {
                replica
            }
        }
    }

    /// The line as sent: JSON followed by `\n`.
    pub fn to_line(&self) -> Bytes {
        // Serializing these plain structs cannot fail; an empty line is skipped by readers.
        let mut line = serde_json::to_vec(self).unwrap_or_default();
        line.push(b'\n');
        Bytes::from(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_round_trip_as_single_json_lines() {
        let reports = [
            Report::Wake {
                replica: "a".into(),
                target: TargetKey::new("ns", "web", 0),
            },
            Report::Sample {
                replica: "a".into(),
                second: 7,
                targets: vec![TargetSample {
                    target: TargetKey::new("ns", "web", 1),
                    concurrency: 1.5,
                    requests: 3.0,
                    held: 1,
                    in_flight: 2,
                    ready: 0,
                    serving: false,
                }],
            },
            Report::Bye {
                replica: "a".into(),
            },
        ];
        for report in reports {
            let line = report.to_line();
            assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1);
            let back: Report = serde_json::from_slice(&line).unwrap();
            assert_eq!(back, report);
        }
    }

    #[test]
    fn wake_lines_are_readable_json() {
        let line = Report::Wake {
            replica: "act-0".into(),
            target: TargetKey::new("ns", "web", 0),
        }
        .to_line();
        assert_eq!(
            std::str::from_utf8(&line).unwrap(),
            "{\"type\":\"wake\",\"replica\":\"act-0\",\"target\":{\"namespace\":\"ns\",\"name\":\"web\",\"trigger\":0}}\n"
        );
    }
}
