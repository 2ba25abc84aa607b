//! Finding the ScaledObject name in the HPA's `labelSelector`.

use keda_api::annotations::SCALED_OBJECT_NAME_LABEL;

use crate::error::ApiError;

/// The ScaledObject the `labelSelector` names through `scaledobject.keda.sh/name`, as KEDA reads
/// it: the first requirement on that key, with `=`, `==` or `in (<name>)`.
///
/// # Errors
/// [`ApiError::MissingScaledObjectName`] when no requirement names the key (or the selector is
/// absent); [`ApiError::InvalidSelector`] when the requirement on that key has no single value.
pub fn scaled_object_name(selector: Option<&str>) -> Result<String, ApiError> {
    let selector = selector.unwrap_or("");
    let invalid = |reason: &str| ApiError::InvalidSelector {
        selector: selector.to_string(),
        reason: reason.to_string(),
    };
    for requirement in split_requirements(selector) {
        let requirement = requirement.trim();
        let (key, rest) = match requirement.find(['=', '!', ' ']) {
            Some(at) => requirement.split_at(at),
            None => continue,
        };
        if key.trim() != SCALED_OBJECT_NAME_LABEL {
            continue;
        }
        let rest = rest.trim_start();
        let value = if let Some(v) = rest.strip_prefix("==") {
            v
        } else if let Some(v) = rest.strip_prefix('=') {
            v
        } else if let Some(v) = rest.strip_prefix("in") {
            let v = v.trim();
            let inner = v
                .strip_prefix('(')
                .and_then(|v| v.strip_suffix(')'))
                .ok_or_else(|| invalid("`in` needs a parenthesized value list"))?;
            let mut values = inner.split(',').map(str::trim).filter(|v| !v.is_empty());
            let first = values
                .next()
                .ok_or_else(|| invalid("`in ()` names no ScaledObject"))?;
            if values.next().is_some() {
                return Err(invalid(&format!(
                    "{SCALED_OBJECT_NAME_LABEL} must name exactly one ScaledObject"
                )));
            }
            first
        } else {
            return Err(invalid(&format!(
                "{SCALED_OBJECT_NAME_LABEL} must be matched with `=`"
            )));
        };
        let value = value.trim();
        if value.is_empty() {
            return Err(ApiError::MissingScaledObjectName);
        }
        return Ok(value.to_string());
    }
    Err(ApiError::MissingScaledObjectName)
}

/// Splits on commas that are not inside `( )`.
fn split_requirements(selector: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0_u32;
    let mut start = 0;
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&selector[start..]);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scaled_object_name_is_read_from_each_selector_form() {
        for (selector, expected) in [
            ("scaledobject.keda.sh/name=app", "app"),
            ("scaledobject.keda.sh/name==app", "app"),
            ("scaledobject.keda.sh/name in (app)", "app"),
            ("team=a,scaledobject.keda.sh/name=app", "app"),
            ("env in (a,b), scaledobject.keda.sh/name = app", "app"),
        ] {
            assert_eq!(
                scaled_object_name(Some(selector)).expect(selector),
                expected,
                "{selector}"
            );
        }
    }

    #[test]
    fn a_selector_without_the_scaled_object_label_is_a_missing_name() {
        for selector in [
            None,
            Some(""),
            Some("app=x"),
            Some("scaledobject.keda.sh/name="),
        ] {
            assert!(
                matches!(
                    scaled_object_name(selector),
                    Err(ApiError::MissingScaledObjectName)
                ),
                "{selector:?}"
            );
        }
    }

    #[test]
    fn a_requirement_that_names_no_single_object_is_invalid() {
        for selector in [
            "scaledobject.keda.sh/name!=app",
            "scaledobject.keda.sh/name in (a,b)",
            "scaledobject.keda.sh/name in a",
        ] {
            assert!(
                matches!(
                    scaled_object_name(Some(selector)),
                    Err(ApiError::InvalidSelector { .. })
                ),
                "{selector}"
            );
        }
    }
}
