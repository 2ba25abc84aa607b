//! Patch content types and how each is applied to a stored object.

use serde_json::Value;

use crate::error::ApiError;

/// The patch flavours `kube::api::Patch` sends, by `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchKind {
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/strategic-merge-patch+json`, approximated as a merge patch.
    Strategic,
    /// `application/apply-patch+yaml`, approximated as a merge patch that records the field manager.
    Apply,
}

impl PatchKind {
    pub(crate) fn from_content_type(content_type: &str) -> Result<Self, ApiError> {
        let media = content_type.split(';').next().unwrap_or_default().trim();
        match media {
            "application/merge-patch+json" => Ok(Self::Merge),
            "application/json-patch+json" => Ok(Self::Json),
            "application/strategic-merge-patch+json" => Ok(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(Self::Apply),
            other => Err(ApiError::unsupported_media_type(other)),
        }
    }
}

/// Parses a patch body: JSON for every kind, YAML (a superset of JSON) for apply.
pub(crate) fn parse_body(kind: PatchKind, body: &[u8]) -> Result<Value, ApiError> {
    match kind {
        PatchKind::Apply => serde_yaml::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}"))),
        _ => serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}"))),
    }
}

/// Applies a parsed patch to `doc`, returning the patched document.
///
/// # Errors
/// `BadRequest` for a malformed JSON patch, `Invalid` (422) when a JSON patch operation fails,
/// including a failed `test` operation.
pub(crate) fn apply(kind: PatchKind, doc: &Value, patch: &Value) -> Result<Value, ApiError> {
    let mut out = doc.clone();
    match kind {
        PatchKind::Merge | PatchKind::Strategic | PatchKind::Apply => {
            if !patch.is_object() {
                return Err(ApiError::bad_request("a merge patch must be a JSON object"));
            }
            json_patch::merge(&mut out, patch);
        }
        PatchKind::Json => {
            let ops: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
            for op in &ops.0 {
                // The API server's JSON-patch library treats a missing path as null, so a
                // `test` for null passes on an absent field (kube's finalizer helper relies on
                // it when an object has no finalizers yet). The json-patch crate fails it.
                if let json_patch::PatchOperation::Test(test) = op
                    && test.value.is_null()
                    && out.pointer(test.path.as_str()).is_none()
                {
                    continue;
                }
                json_patch::patch(&mut out, std::slice::from_ref(op)).map_err(|e| {
                    ApiError::from_code(
                        422,
                        format!(
                            "the server rejected our request due to an error in our request: {e}"
                        ),
                    )
                })?;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn merge_patch_removes_nulls_and_replaces_lists() {
        let doc = json!({ "a": 1, "b": [1, 2], "c": { "d": 1 } });
        let patched = apply(
            PatchKind::Merge,
            &doc,
            &json!({ "a": null, "b": [3], "c": { "e": 2 } }),
        )
        .expect("patch applies");
        assert_eq!(patched, json!({ "b": [3], "c": { "d": 1, "e": 2 } }));
    }

    #[test]
    fn failed_json_patch_test_is_invalid() {
        let doc = json!({ "a": 1 });
        let err = apply(
            PatchKind::Json,
            &doc,
            &json!([{ "op": "test", "path": "/a", "value": 2 }]),
        )
        .expect_err("test op fails");
        assert_eq!(err.code, 422);
    }

    #[test]
    fn a_json_patch_test_for_null_passes_on_a_missing_path_as_on_a_real_server() {
        let doc = json!({ "metadata": { "name": "a" } });
        let patched = apply(
            PatchKind::Json,
            &doc,
            &json!([
                { "op": "test", "path": "/metadata/finalizers", "value": null },
                { "op": "add", "path": "/metadata/finalizers", "value": ["f"] }
            ]),
        )
        .expect("test for null on a missing path passes");
        assert_eq!(patched["metadata"]["finalizers"], json!(["f"]));
        // A test for null on a present, non-null value still fails.
        let err = apply(
            PatchKind::Json,
            &patched,
            &json!([{ "op": "test", "path": "/metadata/finalizers", "value": null }]),
        )
        .expect_err("finalizers are present");
        assert_eq!(err.code, 422);
    }

    #[test]
    fn content_types_map_to_patch_kinds() {
        assert_eq!(
            PatchKind::from_content_type("application/apply-patch+yaml").expect("known"),
            PatchKind::Apply
        );
        assert_eq!(
            PatchKind::from_content_type("application/json")
                .expect_err("unknown")
                .code,
            415
        );
    }
}
