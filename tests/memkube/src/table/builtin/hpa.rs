//! `kubectl get hpa`: the reference, the metrics' current and target values, the bounds.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::{age_col, col, created, int, items, name, name_col, text};
use crate::table::Column;

pub(super) fn hpa_columns() -> Vec<Column> {
    vec![
        name_col(),
        col("Reference", "string", 0, "The scaled object."),
        col(
            "Targets",
            "string",
            0,
            "Current and target values of the metrics.",
        ),
        col("MinPods", "string", 0, "The fewest replicas."),
        col("MaxPods", "string", 0, "The most replicas."),
        col("Replicas", "string", 0, "The current replica count."),
        age_col(),
    ]
}

/// A quantity as the printer writes it; `<nil>` for none (Go's nil `*Quantity`).
fn quantity(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "<nil>".to_string(),
    }
}

/// The `TARGETS` cell: up to two metrics, then `+ N more...`.
fn hpa_targets(obj: &Value) -> String {
    let specs = items(obj, "/spec/metrics");
    if specs.is_empty() {
        return "<none>".to_string();
    }
    let statuses = items(obj, "/status/currentMetrics");
    let unknown = || "<unknown>".to_string();
    let mut list = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let status = statuses.get(i);
        let current = |source: &str, field: &str| {
            status
                .and_then(|s| s.get(source))
                .and_then(|s| s.pointer(&format!("/current/{field}")))
        };
        let entry = match text(spec, "/type") {
            "External" | "Object" => {
                let source = if text(spec, "/type") == "External" {
                    "external"
                } else {
                    "object"
                };
                match spec.pointer(&format!("/{source}/target/averageValue")) {
                    Some(target) => format!(
                        "{}/{} (avg)",
                        current(source, "averageValue").map_or_else(unknown, |v| quantity(Some(v))),
                        quantity(Some(target))
                    ),
                    None => format!(
                        "{}/{}",
                        if status.and_then(|s| s.get(source)).is_some() {
                            quantity(current(source, "value"))
                        } else {
                            unknown()
                        },
                        quantity(spec.pointer(&format!("/{source}/target/value")))
                    ),
                }
            }
            "Pods" => format!(
                "{}/{}",
                if status.and_then(|s| s.get("pods")).is_some() {
                    quantity(current("pods", "averageValue"))
                } else {
                    unknown()
                },
                quantity(spec.pointer("/pods/target/averageValue"))
            ),
            kind @ ("Resource" | "ContainerResource") => {
                let source = if kind == "Resource" {
                    "resource"
                } else {
                    "containerResource"
                };
                let resource = text(spec, &format!("/{source}/name"));
                match spec.pointer(&format!("/{source}/target/averageValue")) {
                    Some(target) => format!(
                        "{resource}: {}/{}",
                        if status.and_then(|s| s.get(source)).is_some() {
                            quantity(current(source, "averageValue"))
                        } else {
                            unknown()
                        },
                        quantity(Some(target))
                    ),
                    None => format!(
                        "{resource}: {}/{}",
                        current(source, "averageUtilization")
                            .and_then(Value::as_i64)
                            .map_or_else(unknown, |u| format!("{u}%")),
                        spec.pointer(&format!("/{source}/target/averageUtilization"))
                            .and_then(Value::as_i64)
                            .map_or_else(|| "<auto>".to_string(), |u| format!("{u}%"))
                    ),
                }
            }
            _ => "<unknown type>".to_string(),
        };
        list.push(entry);
    }
    if list.len() > 2 {
        let more = list.len() - 2;
        list.truncate(2);
        format!("{} + {more} more...", list.join(", "))
    } else {
        list.join(", ")
    }
}

pub(super) fn hpa(obj: &Value, now: Timestamp) -> Vec<Value> {
    let min = obj
        .pointer("/spec/minReplicas")
        .and_then(Value::as_i64)
        .map_or_else(|| "<unset>".to_string(), |m| m.to_string());
    vec![
        name(obj),
        json!(format!(
            "{}/{}",
            text(obj, "/spec/scaleTargetRef/kind"),
            text(obj, "/spec/scaleTargetRef/name")
        )),
        json!(hpa_targets(obj)),
        json!(min),
        json!(int(obj, "/spec/maxReplicas")),
        json!(int(obj, "/status/currentReplicas")),
        created(obj, now),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hpa_targets_read_as_kubectl_shows_them() {
        let hpa = json!({
            "spec": {"metrics": [
                {"type": "External", "external": {"metric": {"name": "s0-redis"}, "target": {"type": "AverageValue", "averageValue": "5"}}},
                {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}},
                {"type": "External", "external": {"metric": {"name": "s2"}, "target": {"type": "Value", "value": "10"}}},
            ]},
            "status": {"currentMetrics": [
                {"type": "External", "external": {"current": {"averageValue": "20"}}},
            ]},
        });
        assert_eq!(
            hpa_targets(&hpa),
            "20/5 (avg), cpu: <unknown>/50% + 1 more..."
        );
        assert_eq!(hpa_targets(&json!({"spec": {}})), "<none>");
    }
}
