//! `kubectl get events`, for `v1` Events and `events.k8s.io/v1` Events alike.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::{col, int, name, name_col, text};
use crate::table::Column;
use crate::table::format::age;

pub(super) fn event_columns() -> Vec<Column> {
    vec![
        col("Last Seen", "string", 0, "When the event was last seen."),
        col("Type", "string", 0, "Normal or Warning."),
        col("Reason", "string", 0, "Why the event was emitted."),
        col("Object", "string", 0, "The object the event is about."),
        col(
            "Subobject",
            "string",
            1,
            "The part of the object it is about.",
        ),
        col("Source", "string", 1, "Who emitted it."),
        col("Message", "string", 0, "What happened."),
        col("First Seen", "string", 1, "When the event was first seen."),
        col("Count", "string", 1, "How often it happened."),
        Column {
            priority: 1,
            ..name_col()
        },
    ]
}

/// The fields of an Event the printer reads, from either API.
struct EventFields<'v> {
    first: Option<&'v str>,
    last: Option<&'v str>,
    event_time: Option<&'v str>,
    count: i64,
    series: Option<&'v Value>,
    object: &'v Value,
    source: &'v Value,
    message: &'v str,
}

fn event_cells(obj: &Value, e: &EventFields<'_>, now: Timestamp) -> Vec<Value> {
    let nonempty = |t: Option<&str>| t.filter(|t| !t.is_empty()).map(str::to_string);
    let first = nonempty(e.first)
        .map(|t| age(Some(&t), now))
        .unwrap_or_else(|| age(e.event_time, now));
    let mut last = nonempty(e.last)
        .map(|t| age(Some(&t), now))
        .unwrap_or_else(|| first.clone());
    let mut count = e.count;
    if let Some(series) = e.series {
        last = age(series.get("lastObservedTime").and_then(Value::as_str), now);
        count = int(series, "/count");
    } else if count == 0 {
        count = 1;
    }
    let kind = text(e.object, "/kind").to_lowercase();
    let target = match text(e.object, "/name") {
        "" => kind,
        n => format!("{kind}/{n}"),
    };
    let component = match text(e.source, "/component") {
        "" => text(obj, "/reportingController"),
        c => c,
    };
    let host = match text(e.source, "/host") {
        "" => text(obj, "/reportingInstance"),
        h => h,
    };
    let source = if host.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {host}")
    };
    vec![
        json!(last),
        json!(text(obj, "/type")),
        json!(text(obj, "/reason")),
        json!(target),
        json!(text(e.object, "/fieldPath")),
        json!(source),
        json!(e.message.trim()),
        json!(first),
        json!(count),
        name(obj),
    ]
}

pub(super) fn core_event(obj: &Value, now: Timestamp) -> Vec<Value> {
    let fields = EventFields {
        first: obj.get("firstTimestamp").and_then(Value::as_str),
        last: obj.get("lastTimestamp").and_then(Value::as_str),
        event_time: obj.get("eventTime").and_then(Value::as_str),
        count: int(obj, "/count"),
        series: obj.get("series"),
        object: obj.get("involvedObject").unwrap_or(&Value::Null),
        source: obj.get("source").unwrap_or(&Value::Null),
        message: text(obj, "/message"),
    };
    event_cells(obj, &fields, now)
}

/// An `events.k8s.io/v1` Event, read through the core Event's fields it maps to.
pub(super) fn events_event(obj: &Value, now: Timestamp) -> Vec<Value> {
    let fields = EventFields {
        first: obj.get("deprecatedFirstTimestamp").and_then(Value::as_str),
        last: obj.get("deprecatedLastTimestamp").and_then(Value::as_str),
        event_time: obj.get("eventTime").and_then(Value::as_str),
        count: int(obj, "/deprecatedCount"),
        series: obj.get("series"),
        object: obj.get("regarding").unwrap_or(&Value::Null),
        source: obj.get("deprecatedSource").unwrap_or(&Value::Null),
        message: text(obj, "/note"),
    };
    event_cells(obj, &fields, now)
}
