//! API errors, rendered as `meta/v1` `Status` objects like the real API server does.

use serde_json::{Value, json};

/// An error answered to a client as a `Status` object with a matching HTTP status code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    /// HTTP status code, also `Status.code`.
    pub code: u16,
    /// `Status.reason`, e.g. `NotFound`, `Conflict`.
    pub reason: String,
    /// Human readable `Status.message`.
    pub message: String,
    /// `Status.details`, when the error is about one object.
    pub details: Option<Value>,
}

/// Names a resource in messages the way the API server does: `deployments.apps`, `pods`.
pub(crate) fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

fn details(group: &str, plural: &str, name: &str) -> Option<Value> {
    Some(json!({ "name": name, "group": group, "kind": plural }))
}

impl ApiError {
    /// An error with the reason the API server uses for `code`.
    pub fn from_code(code: u16, message: impl Into<String>) -> Self {
        Self {
            code,
            reason: reason_for(code).to_string(),
            message: message.into(),
            details: None,
        }
    }

    pub(crate) fn not_found(group: &str, plural: &str, name: &str) -> Self {
        Self {
            details: details(group, plural, name),
            ..Self::from_code(
                404,
                format!("{} \"{name}\" not found", qualified(group, plural)),
            )
        }
    }

    pub(crate) fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        Self {
            details: details(group, plural, name),
            ..Self::from_code(
                409,
                format!("{} \"{name}\" already exists", qualified(group, plural)),
            )
        }
        .with_reason("AlreadyExists")
    }

    pub(crate) fn conflict(group: &str, plural: &str, name: &str, why: &str) -> Self {
        Self {
            details: details(group, plural, name),
            ..Self::from_code(
                409,
                format!(
                    "Operation cannot be fulfilled on {} \"{name}\": {why}",
                    qualified(group, plural)
                ),
            )
        }
    }

    pub(crate) fn stale(group: &str, plural: &str, name: &str) -> Self {
        Self::conflict(
            group,
            plural,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    pub(crate) fn invalid(
        group: &str,
        plural: &str,
        name: &str,
        message: impl Into<String>,
    ) -> Self {
        Self {
            details: details(group, plural, name),
            ..Self::from_code(422, message)
        }
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::from_code(400, message)
    }

    pub(crate) fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::from_code(405, message)
    }

    pub(crate) fn path_not_found(path: &str) -> Self {
        Self::from_code(
            404,
            format!("the server could not find the requested resource ({path})"),
        )
    }

    pub(crate) fn expired(message: impl Into<String>) -> Self {
        Self::from_code(410, message).with_reason("Expired")
    }

    pub(crate) fn forbidden(message: impl Into<String>) -> Self {
        Self::from_code(403, message)
    }

    pub(crate) fn unsupported_media_type(content_type: &str) -> Self {
        Self::from_code(
            415,
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {content_type:?})"
            ),
        )
    }

    fn with_reason(mut self, reason: &str) -> Self {
        self.reason = reason.to_string();
        self
    }

    /// The `Status` object for this error.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let (Some(details), Some(map)) = (&self.details, status.as_object_mut()) {
            map.insert("details".to_string(), details.clone());
        }
        status
    }
}

/// The `Status.reason` the API server uses for an HTTP status code.
pub(crate) fn reason_for(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        406 => "NotAcceptable",
        409 => "Conflict",
        410 => "Gone",
        413 => "RequestEntityTooLarge",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "InternalError",
    }
}
