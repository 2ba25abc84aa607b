//! Deployments, ReplicaSets, StatefulSets, Jobs and CronJobs.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::{
    age_col, col, condition_true, containers, created, int, len, name, name_col, or_none, text,
};
use crate::table::Column;
use crate::table::format::{age, human_duration, selector, selector_or_none};

fn workload_wide_columns() -> [Column; 3] {
    [
        col("Containers", "string", 1, "The template's container names."),
        col("Images", "string", 1, "The template's container images."),
        col("Selector", "string", 1, "The label selector of its pods."),
    ]
}

pub(super) fn deployment_columns() -> Vec<Column> {
    let mut columns = vec![
        name_col(),
        col("Ready", "string", 0, "Ready pods out of the desired count."),
        col("Up-to-date", "string", 0, "Pods of the current template."),
        col("Available", "string", 0, "Pods available to serve."),
        age_col(),
    ];
    columns.extend(workload_wide_columns());
    columns
}

pub(super) fn deployment(obj: &Value, now: Timestamp) -> Vec<Value> {
    let (names, images) = containers(obj, "/spec/template/spec");
    vec![
        name(obj),
        json!(format!(
            "{}/{}",
            int(obj, "/status/readyReplicas"),
            int(obj, "/spec/replicas")
        )),
        json!(int(obj, "/status/updatedReplicas")),
        json!(int(obj, "/status/availableReplicas")),
        created(obj, now),
        names,
        images,
        json!(selector(obj.pointer("/spec/selector"))),
    ]
}

pub(super) fn replica_set_columns() -> Vec<Column> {
    let mut columns = vec![
        name_col(),
        col("Desired", "integer", 0, "The desired pod count."),
        col("Current", "integer", 0, "The pods that exist."),
        col("Ready", "integer", 0, "The pods that are ready."),
        age_col(),
    ];
    columns.extend(workload_wide_columns());
    columns
}

pub(super) fn replica_set(obj: &Value, now: Timestamp) -> Vec<Value> {
    let (names, images) = containers(obj, "/spec/template/spec");
    vec![
        name(obj),
        json!(int(obj, "/spec/replicas")),
        json!(int(obj, "/status/replicas")),
        json!(int(obj, "/status/readyReplicas")),
        created(obj, now),
        names,
        images,
        json!(selector_or_none(obj.pointer("/spec/selector"))),
    ]
}

pub(super) fn stateful_set_columns() -> Vec<Column> {
    let [containers, images, _] = workload_wide_columns();
    vec![
        name_col(),
        col("Ready", "string", 0, "Ready pods out of the desired count."),
        age_col(),
        containers,
        images,
    ]
}

pub(super) fn stateful_set(obj: &Value, now: Timestamp) -> Vec<Value> {
    let (names, images) = containers(obj, "/spec/template/spec");
    vec![
        name(obj),
        json!(format!(
            "{}/{}",
            int(obj, "/status/readyReplicas"),
            int(obj, "/spec/replicas")
        )),
        created(obj, now),
        names,
        images,
    ]
}

pub(super) fn job_columns() -> Vec<Column> {
    let mut columns = vec![
        name_col(),
        col("Status", "string", 0, "The Job's state."),
        col(
            "Completions",
            "string",
            0,
            "Succeeded pods out of those wanted.",
        ),
        col("Duration", "string", 0, "How long the Job ran."),
        age_col(),
    ];
    columns.extend(workload_wide_columns());
    columns
}

pub(super) fn job(obj: &Value, now: Timestamp) -> Vec<Value> {
    let succeeded = int(obj, "/status/succeeded");
    let completions = match obj.pointer("/spec/completions").and_then(Value::as_i64) {
        Some(c) => format!("{succeeded}/{c}"),
        None => match int(obj, "/spec/parallelism") {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let time = |p: &str| {
        obj.pointer(p)
            .and_then(Value::as_str)
            .and_then(|t| t.parse::<Timestamp>().ok())
    };
    let duration = match (time("/status/startTime"), time("/status/completionTime")) {
        (None, _) => String::new(),
        (Some(start), None) => human_duration(now.as_second().saturating_sub(start.as_second())),
        (Some(start), Some(end)) => {
            human_duration(end.as_second().saturating_sub(start.as_second()))
        }
    };
    let conditions = "/status/conditions";
    let status = if condition_true(obj, conditions, "Complete") {
        "Complete"
    } else if condition_true(obj, conditions, "Failed") {
        "Failed"
    } else if obj.pointer("/metadata/deletionTimestamp").is_some() {
        "Terminating"
    } else if condition_true(obj, conditions, "Suspended") {
        "Suspended"
    } else if condition_true(obj, conditions, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    };
    let (names, images) = containers(obj, "/spec/template/spec");
    vec![
        name(obj),
        json!(status),
        json!(completions),
        json!(duration),
        created(obj, now),
        names,
        images,
        json!(selector_or_none(obj.pointer("/spec/selector"))),
    ]
}

pub(super) fn cron_job_columns() -> Vec<Column> {
    let mut columns = vec![
        name_col(),
        col("Schedule", "string", 0, "The cron schedule."),
        col("Timezone", "string", 0, "The schedule's time zone."),
        col("Suspend", "boolean", 0, "Whether new Jobs are suspended."),
        col("Active", "integer", 0, "Jobs running now."),
        col(
            "Last Schedule",
            "string",
            0,
            "When a Job was last scheduled.",
        ),
        age_col(),
    ];
    columns.extend(workload_wide_columns());
    columns
}

pub(super) fn cron_job(obj: &Value, now: Timestamp) -> Vec<Value> {
    let last = match obj
        .pointer("/status/lastScheduleTime")
        .and_then(Value::as_str)
    {
        Some(t) => age(Some(t), now),
        None => "<none>".to_string(),
    };
    let suspend = match obj.pointer("/spec/suspend").and_then(Value::as_bool) {
        Some(true) => "True",
        Some(false) => "False",
        None => "<unset>",
    };
    let (names, images) = containers(obj, "/spec/jobTemplate/spec/template/spec");
    vec![
        name(obj),
        json!(text(obj, "/spec/schedule")),
        json!(or_none(text(obj, "/spec/timeZone"))),
        json!(suspend),
        json!(len(obj, "/status/active")),
        json!(last),
        created(obj, now),
        names,
        images,
        json!(selector_or_none(
            obj.pointer("/spec/jobTemplate/spec/selector")
        )),
    ]
}
