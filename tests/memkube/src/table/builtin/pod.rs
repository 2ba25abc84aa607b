//! `kubectl get pods`: readiness, the aggregate status and restarts as the kubelet reports them.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::{
    age_col, col, condition, condition_true, created, int, items, len, name, name_col, or_none,
    text,
};
use crate::table::Column;
use crate::table::format::human_duration;

pub(super) fn pod_columns() -> Vec<Column> {
    vec![
        name_col(),
        col("Ready", "string", 0, "Ready containers out of all."),
        col(
            "Status",
            "string",
            0,
            "The aggregate status of the pod's containers.",
        ),
        col(
            "Restarts",
            "string",
            0,
            "Container restarts, and when the last was.",
        ),
        age_col(),
        col("IP", "string", 1, "The pod's IP."),
        col("Node", "string", 1, "The node it runs on."),
        col(
            "Nominated Node",
            "string",
            1,
            "The node the scheduler nominated.",
        ),
        col(
            "Readiness Gates",
            "string",
            1,
            "Readiness gates that are true, out of all.",
        ),
    ]
}

fn is_restartable_init(container: Option<&Value>) -> bool {
    container.is_some_and(|c| text(c, "/restartPolicy") == "Always")
}

pub(super) fn pod(obj: &Value, now: Timestamp) -> Vec<Value> {
    let phase = text(obj, "/status/phase");
    let mut reason = phase.to_string();
    if !text(obj, "/status/reason").is_empty() {
        reason = text(obj, "/status/reason").to_string();
    }
    if items(obj, "/status/conditions")
        .iter()
        .any(|c| text(c, "/type") == "PodScheduled" && text(c, "/reason") == "SchedulingGated")
    {
        reason = "SchedulingGated".to_string();
    }
    let init_specs = items(obj, "/spec/initContainers");
    let init_spec = |name: &str| init_specs.iter().find(|c| text(c, "/name") == name);
    let mut total = len(obj, "/spec/containers")
        + i64::try_from(
            init_specs
                .iter()
                .filter(|c| is_restartable_init(Some(c)))
                .count(),
        )
        .unwrap_or(0);
    let mut ready = 0;
    let mut restarts = 0;
    let mut restartable_restarts = 0;
    let mut last_restart: Option<Timestamp> = None;
    let mut last_restartable_restart: Option<Timestamp> = None;
    let finished = |c: &Value| {
        c.pointer("/lastState/terminated/finishedAt")
            .and_then(Value::as_str)
            .and_then(|t| t.parse::<Timestamp>().ok())
    };
    let later = |a: Option<Timestamp>, b: Option<Timestamp>| a.max(b);

    let mut initializing = false;
    let init_statuses = items(obj, "/status/initContainerStatuses");
    for (i, status) in init_statuses.iter().enumerate() {
        restarts += int(status, "/restartCount");
        last_restart = later(last_restart, finished(status));
        let restartable = is_restartable_init(init_spec(text(status, "/name")));
        if restartable {
            restartable_restarts += int(status, "/restartCount");
            last_restartable_restart = later(last_restartable_restart, finished(status));
        }
        let terminated = status.pointer("/state/terminated");
        let waiting_reason = text(status, "/state/waiting/reason");
        if terminated.is_some_and(|t| int(t, "/exitCode") == 0) {
            continue;
        }
        if restartable && status.get("started").and_then(Value::as_bool) == Some(true) {
            if status.get("ready").and_then(Value::as_bool) == Some(true) {
                ready += 1;
            }
            continue;
        }
        reason = if let Some(t) = terminated {
            if !text(t, "/reason").is_empty() {
                format!("Init:{}", text(t, "/reason"))
            } else if int(t, "/signal") != 0 {
                format!("Init:Signal:{}", int(t, "/signal"))
            } else {
                format!("Init:ExitCode:{}", int(t, "/exitCode"))
            }
        } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
            format!("Init:{waiting_reason}")
        } else {
            format!("Init:{i}/{}", init_specs.len())
        };
        initializing = true;
        break;
    }

    if !initializing || condition_true(obj, "/status/conditions", "Initialized") {
        restarts = restartable_restarts;
        last_restart = last_restartable_restart;
        let mut has_running = false;
        for status in items(obj, "/status/containerStatuses").iter().rev() {
            restarts += int(status, "/restartCount");
            last_restart = later(last_restart, finished(status));
            let waiting = text(status, "/state/waiting/reason");
            let terminated = status.pointer("/state/terminated");
            if !waiting.is_empty() {
                reason = waiting.to_string();
            } else if let Some(t) = terminated {
                reason = if !text(t, "/reason").is_empty() {
                    text(t, "/reason").to_string()
                } else if int(t, "/signal") != 0 {
                    format!("Signal:{}", int(t, "/signal"))
                } else {
                    format!("ExitCode:{}", int(t, "/exitCode"))
                };
            } else if status.get("ready").and_then(Value::as_bool) == Some(true)
                && status.pointer("/state/running").is_some()
            {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            reason = if condition_true(obj, "/status/conditions", "Ready") {
                "Running".to_string()
            } else {
                "NotReady".to_string()
            };
        }
    }

    let deleting = obj.pointer("/metadata/deletionTimestamp").is_some();
    if deleting && text(obj, "/status/reason") == "NodeLost" {
        reason = "Unknown".to_string();
    } else if deleting && phase != "Succeeded" && phase != "Failed" {
        reason = "Terminating".to_string();
    }
    total = total.max(0);
    let restarts_text = match last_restart {
        Some(at) if restarts != 0 => format!(
            "{restarts} ({} ago)",
            human_duration(now.as_second().saturating_sub(at.as_second()))
        ),
        _ => restarts.to_string(),
    };
    let ip = items(obj, "/status/podIPs")
        .first()
        .map(|p| text(p, "/ip"))
        .unwrap_or_default();
    let gates = items(obj, "/spec/readinessGates");
    let gates_text = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let true_gates = gates
            .iter()
            .filter(|g| {
                condition(obj, "/status/conditions", text(g, "/conditionType"))
                    .is_some_and(|c| text(c, "/status") == "True")
            })
            .count();
        format!("{true_gates}/{}", gates.len())
    };
    vec![
        name(obj),
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts_text),
        created(obj, now),
        json!(or_none(ip)),
        json!(or_none(text(obj, "/spec/nodeName"))),
        json!(or_none(text(obj, "/status/nominatedNodeName"))),
        json!(gates_text),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> Timestamp {
        "2024-01-01T02:00:00Z".parse().expect("timestamp")
    }

    #[test]
    fn a_running_pod_and_a_crash_looping_one() {
        let running = json!({
            "metadata": {"name": "web-1", "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n1"},
            "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.1"}], "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 0, "state": {"running": {}}},
                {"name": "b", "ready": true, "restartCount": 0, "state": {"running": {}}},
            ]},
        });
        assert_eq!(
            pod(&running, now()),
            vec![
                json!("web-1"),
                json!("2/2"),
                json!("Running"),
                json!("0"),
                json!("120m"),
                json!("10.0.0.1"),
                json!("n1"),
                json!("<none>"),
                json!("<none>")
            ]
        );
        let crashing = json!({
            "metadata": {"name": "web-2", "creationTimestamp": "2024-01-01T01:00:00Z"},
            "spec": {"containers": [{"name": "a"}]},
            "status": {"phase": "Running", "containerStatuses": [{
                "name": "a", "ready": false, "restartCount": 3,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2024-01-01T01:59:00Z"}},
            }]},
        });
        let cells = pod(&crashing, now());
        assert_eq!(
            cells[1..4],
            [
                json!("0/1"),
                json!("CrashLoopBackOff"),
                json!("3 (60s ago)")
            ]
        );
    }
}
