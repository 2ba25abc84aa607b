//! The `/scale` subresource: an `autoscaling/v1` `Scale` view of a workload's replicas.

use serde_json::{Value, json};

use crate::error::ApiError;
use crate::registry::{ResourceDef, json_path_to_pointer};
use crate::selector::label_selector_string;

/// The `Scale` object for `obj`.
pub(crate) fn scale_of(def: &ResourceDef, obj: &Value) -> Value {
    let Some(paths) = &def.scale else {
        return Value::Null;
    };
    let spec = obj
        .pointer(&json_path_to_pointer(&paths.spec_replicas))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let status = obj
        .pointer(&json_path_to_pointer(&paths.status_replicas))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let selector = match &paths.label_selector {
        Some(path) => obj
            .pointer(&json_path_to_pointer(path))
            .and_then(Value::as_str)
            .map(str::to_string),
        None => obj.pointer("/spec/selector").map(label_selector_string),
    };
    let meta = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let mut metadata = json!({});
    for field in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let (Some(value), Some(map)) = (meta.get(field), metadata.as_object_mut()) {
            map.insert(field.to_string(), value.clone());
        }
    }
    let mut status_obj = json!({ "replicas": status });
    if let (Some(selector), Some(map)) = (selector, status_obj.as_object_mut()) {
        map.insert("selector".to_string(), Value::String(selector));
    }
    json!({
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": metadata,
        "spec": { "replicas": spec },
        "status": status_obj,
    })
}

/// `obj` with its spec replicas set from a `Scale` body.
///
/// # Errors
/// `Invalid` when `spec.replicas` is negative or not an integer.
pub(crate) fn with_replicas(
    def: &ResourceDef,
    obj: &Value,
    scale: &Value,
) -> Result<Value, ApiError> {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let replicas = match scale.pointer("/spec/replicas") {
        None | Some(Value::Null) => 0,
        Some(value) => value.as_i64().filter(|r| *r >= 0).ok_or_else(|| {
            ApiError::invalid(&def.group, &def.plural, name, format!("Scale.autoscaling \"{name}\" is invalid: spec.replicas: Invalid value: {value}: must be a non-negative integer"))
        })?,
    };
    let Some(paths) = &def.scale else {
        return Ok(obj.clone());
    };
    let mut out = obj.clone();
    let pointer = json_path_to_pointer(&paths.spec_replicas);
    // Build the nested objects the path needs, then set the leaf.
    let mut patch = json!(replicas);
    for segment in pointer.trim_start_matches('/').split('/').rev() {
        patch = json!({ segment: patch });
    }
    json_patch::merge(&mut out, &patch);
    Ok(out)
}
