//! Label and field selectors, parsed from the `labelSelector` and `fieldSelector` query parameters.

use serde_json::Value;

use crate::error::ApiError;

#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelRequirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A parsed label selector: every requirement must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LabelSelector(Vec<LabelRequirement>);

/// Splits at commas that are not inside parentheses.
fn split_top_level(input: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in input.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&input[start..]);
    parts
        .into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect()
}

fn parse_set(key: &str, rest: &str, raw: &str) -> Result<(String, Vec<String>), ApiError> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "unable to parse requirement: {raw:?}: expected a parenthesised set"
            ))
        })?;
    let values = inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect();
    Ok((key.trim().to_string(), values))
}

impl LabelSelector {
    pub(crate) fn parse(input: &str) -> Result<Self, ApiError> {
        let mut requirements = Vec::new();
        for raw in split_top_level(input) {
            let requirement = if let Some(key) = raw.strip_prefix('!') {
                LabelRequirement::DoesNotExist(key.trim().to_string())
            } else if let Some((key, value)) = raw.split_once("!=") {
                LabelRequirement::NotEquals(key.trim().to_string(), value.trim().to_string())
            } else if let Some((key, value)) = raw.split_once("==") {
                LabelRequirement::Equals(key.trim().to_string(), value.trim().to_string())
            } else if let Some((key, value)) = raw.split_once('=') {
                LabelRequirement::Equals(key.trim().to_string(), value.trim().to_string())
            } else if let Some((key, rest)) = raw.split_once(" notin ") {
                let (key, values) = parse_set(key, rest, raw)?;
                LabelRequirement::NotIn(key, values)
            } else if let Some((key, rest)) = raw.split_once(" in ") {
                let (key, values) = parse_set(key, rest, raw)?;
                LabelRequirement::In(key, values)
            } else if raw.contains(char::is_whitespace) || raw.contains('(') {
                return Err(ApiError::bad_request(format!(
                    "unable to parse requirement: {raw:?}"
                )));
            } else {
                LabelRequirement::Exists(raw.to_string())
            };
            requirements.push(requirement);
        }
        Ok(Self(requirements))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether an object's `metadata.labels` satisfy the selector.
    pub(crate) fn matches(&self, object: &Value) -> bool {
        let labels = object
            .pointer("/metadata/labels")
            .and_then(Value::as_object);
        let get = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        self.0.iter().all(|req| match req {
            LabelRequirement::Equals(k, v) => get(k) == Some(v.as_str()),
            LabelRequirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
            LabelRequirement::In(k, vs) => get(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            LabelRequirement::NotIn(k, vs) => get(k).is_none_or(|l| vs.iter().all(|v| v != l)),
            LabelRequirement::Exists(k) => get(k).is_some(),
            LabelRequirement::DoesNotExist(k) => get(k).is_none(),
        })
    }
}

/// A parsed field selector: equality or inequality on dotted paths such as `metadata.name` or
/// `status.phase`. A missing field compares as the empty string.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldSelector(Vec<(Vec<String>, bool, String)>);

impl FieldSelector {
    pub(crate) fn parse(input: &str) -> Result<Self, ApiError> {
        let mut terms = Vec::new();
        for raw in split_top_level(input) {
            let (path, equal, value) = if let Some((p, v)) = raw.split_once("!=") {
                (p, false, v)
            } else if let Some((p, v)) = raw.split_once("==") {
                (p, true, v)
            } else if let Some((p, v)) = raw.split_once('=') {
                (p, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: {raw:?}; can't understand {raw:?}"
                )));
            };
            let path = path.trim().split('.').map(str::to_string).collect();
            terms.push((path, equal, value.trim().to_string()));
        }
        Ok(Self(terms))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value of `metadata.name=...` when the selector pins one name (used to skip scans).
    pub(crate) fn pinned_name(&self) -> Option<&str> {
        self.0
            .iter()
            .find(|(path, equal, _)| {
                *equal && path.len() == 2 && path[0] == "metadata" && path[1] == "name"
            })
            .map(|(_, _, value)| value.as_str())
    }

    pub(crate) fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(path, equal, expected)| {
            let mut cursor = Some(object);
            for segment in path {
                cursor = cursor.and_then(|c| c.get(segment));
            }
            let actual = match cursor {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
            };
            (actual == *expected) == *equal
        })
    }
}

/// Renders a `LabelSelector` object (`matchLabels`, `matchExpressions`) as a selector string, the
/// form the `/scale` subresource reports in `status.selector`.
pub(crate) fn label_selector_string(selector: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in labels {
            parts.push(format!("{k}={}", v.as_str().unwrap_or_default()));
        }
    }
    if let Some(exprs) = selector.get("matchExpressions").and_then(Value::as_array) {
        for expr in exprs {
            let key = expr.get("key").and_then(Value::as_str).unwrap_or_default();
            let values: Vec<&str> = expr
                .get("values")
                .and_then(Value::as_array)
                .map(|vs| vs.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            match expr
                .get("operator")
                .and_then(Value::as_str)
                .unwrap_or_default()
            {
                "In" => parts.push(format!("{key} in ({})", values.join(","))),
                "NotIn" => parts.push(format!("{key} notin ({})", values.join(","))),
                "Exists" => parts.push(key.to_string()),
                "DoesNotExist" => parts.push(format!("!{key}")),
                _ => {}
            }
        }
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(labels: Value) -> Value {
        json!({ "metadata": { "name": "p", "namespace": "ns", "labels": labels }, "status": { "phase": "Running" } })
    }

    #[test]
    fn label_selector_supports_every_operator() {
        let obj = pod(json!({ "app": "web", "tier": "front" }));
        // Each row: selector, expected match.
        let cases = [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app!=db", true),
            ("app in (db, web)", true),
            ("app notin (db,web)", false),
            ("missing notin (x)", true),
            ("tier", true),
            ("!tier", false),
            ("!missing", true),
            ("app=web,tier in (front)", true),
            ("app=web,tier=back", false),
            ("", true),
        ];
        for (selector, expected) in cases {
            let parsed = LabelSelector::parse(selector).expect("selector parses");
            assert_eq!(parsed.matches(&obj), expected, "selector {selector:?}");
        }
    }

    #[test]
    fn field_selector_compares_dotted_paths() {
        let obj = pod(json!({}));
        let cases = [
            ("metadata.name=p", true),
            ("metadata.name!=p", false),
            ("metadata.namespace==ns,status.phase=Running", true),
            ("status.phase=Pending", false),
            ("spec.nodeName=", true),
        ];
        for (selector, expected) in cases {
            let parsed = FieldSelector::parse(selector).expect("selector parses");
            assert_eq!(parsed.matches(&obj), expected, "selector {selector:?}");
        }
    }

    #[test]
    fn label_selector_objects_render_as_strings() {
        let selector = json!({
            "matchLabels": { "app": "web" },
            "matchExpressions": [{ "key": "tier", "operator": "In", "values": ["a", "b"] }]
        });
        assert_eq!(label_selector_string(&selector), "app=web,tier in (a,b)");
    }
}
