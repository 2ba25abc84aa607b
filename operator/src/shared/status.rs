//! Writing `ScaledObject.status` without a write storm: a merge patch on `/status` carrying
//! only the top-level fields that differ from what is there, and no request at all when
//! nothing differs.

use keda_api::condition::{Condition, initial_conditions};
use keda_api::{ScaledObject, ScaledObjectStatus};
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Map, Value};

use crate::shared::error::Error;
use keda_decide::scale::{ConditionStatus, ConditionType, ConditionUpdate};

/// The condition type's name in the status.
pub fn condition_type_name(t: ConditionType) -> &'static str {
    match t {
        ConditionType::Ready => keda_api::condition::CONDITION_READY,
        ConditionType::Active => keda_api::condition::CONDITION_ACTIVE,
        ConditionType::Paused => keda_api::condition::CONDITION_PAUSED,
    }
}

/// The status spelling of a condition status.
pub fn condition_status_name(s: ConditionStatus) -> &'static str {
    match s {
        ConditionStatus::True => keda_api::condition::STATUS_TRUE,
        ConditionStatus::False => keda_api::condition::STATUS_FALSE,
        ConditionStatus::Unknown => keda_api::condition::STATUS_UNKNOWN,
    }
}

/// Sets a condition in place (keeping the list's order), adding it if missing.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
) {
    let new = Condition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: Some(reason.to_string()),
        message: Some(message.to_string()),
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => *c = new,
        None => conditions.push(new),
    }
}

/// Applies a decision's condition updates.
pub fn apply_updates(conditions: &mut Vec<Condition>, updates: &[ConditionUpdate]) {
    for u in updates {
        set_condition(
            conditions,
            condition_type_name(u.type_),
            condition_status_name(u.status),
            u.reason,
            &u.message,
        );
    }
}

/// The object's conditions, or KEDA's initial ones when it has none.
pub fn conditions_or_initial(status: Option<&ScaledObjectStatus>) -> Vec<Condition> {
    status
        .and_then(|s| s.conditions.clone())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(initial_conditions)
}

/// The merge patch that turns `current` into `desired`: the top-level fields that differ
/// (`null` for a field to remove). `None` when they are equal.
/// Works for any status type (ScaledObject, ScaledJob).
///
/// Every poll of every loop asks, and in steady state the answer is nearly always "equal":
/// that is settled by comparing the two values first, and only statuses that differ are
/// serialized (both to JSON, about a seventh of the operator's CPU in steady state when every
/// poll did it). Values that differ but serialize alike still give `None`.
pub fn status_patch<S: serde::Serialize + PartialEq>(current: &S, desired: &S) -> Option<Value> {
    if current == desired {
        return None;
    }
    let as_map = |s: &S| match serde_json::to_value(s) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    };
    let (cur, des) = (as_map(current), as_map(desired));
    let mut patch = Map::new();
    for (k, v) in &des {
        if cur.get(k) != Some(v) {
            patch.insert(k.clone(), v.clone());
        }
    }
    for k in cur.keys() {
        if !des.contains_key(k) {
            patch.insert(k.clone(), Value::Null);
        }
    }
    (!patch.is_empty()).then(|| serde_json::json!({ "status": Value::Object(patch) }))
}

/// Patches the object's status to `desired` when it differs from `current`. Returns the
/// object as the API server answered, when a request was made.
///
/// # Errors
/// The API error.
pub async fn patch_status(
    api: &Api<ScaledObject>,
    name: &str,
    current: &ScaledObjectStatus,
    desired: &ScaledObjectStatus,
) -> Result<Option<ScaledObject>, Error> {
    let Some(patch) = status_patch(current, desired) else {
        return Ok(None);
    };
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(Some)
        .map_err(|e| Error::kube(format!("updating the status of ScaledObject {name}"), e))
}

/// `items` without repeats, in first-seen order, joined with `,` (`status.triggersTypes`,
/// `status.authenticationsTypes`); `None` when there are none.
pub(crate) fn join_unique<'a>(items: impl Iterator<Item = &'a str>) -> Option<String> {
    let mut seen: Vec<&str> = Vec::new();
    for i in items {
        if !seen.contains(&i) {
            seen.push(i);
        }
    }
    (!seen.is_empty()).then(|| seen.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_statuses_need_no_patch() {
        let s = ScaledObjectStatus {
            hpa_name: Some("keda-hpa-a".into()),
            ..Default::default()
        };
        assert_eq!(status_patch(&s, &s.clone()), None);
    }

    #[test]
    fn a_patch_carries_only_changed_fields_and_removals() {
        let current = ScaledObjectStatus {
            hpa_name: Some("keda-hpa-a".into()),
            paused_replica_count: Some(5),
            ..Default::default()
        };
        let desired = ScaledObjectStatus {
            hpa_name: Some("keda-hpa-a".into()),
            triggers_types: Some("redis".into()),
            ..Default::default()
        };
        assert_eq!(
            status_patch(&current, &desired),
            Some(
                serde_json::json!({"status": {"pausedReplicaCount": null, "triggersTypes": "redis"}})
            )
        );
    }

    #[test]
    fn setting_a_condition_keeps_the_order() {
        let mut c = initial_conditions();
        set_condition(&mut c, "Active", "True", "ScalerActive", "m");
        assert_eq!(c[1].type_, "Active");
        assert_eq!(c[1].status, "True");
        set_condition(&mut c, "HPAActive", "True", "HPAActive", "m");
        assert_eq!(c.len(), 5);
    }
}
