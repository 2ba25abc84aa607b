//! How the API server writes cells: ages, numbers, JSON, label selectors.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde_json::Value;

/// An age as the API server writes it (apimachinery's `duration.HumanDuration`): `45s`,
/// `4m12s`, `15m`, `3h20m`, `10h`, `3d4h`, `40d`, `2y30d`, `9y`.
pub(crate) fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".to_string();
    }
    if seconds < 0 {
        return "0s".to_string();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let days = (hours / 24) % 365;
        return if days == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{days}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// The age of an RFC 3339 timestamp at `now`; `<unknown>` without one, `<invalid>` when it does
/// not parse.
pub(crate) fn age(timestamp: Option<&str>, now: Timestamp) -> String {
    match timestamp.filter(|t| !t.is_empty()) {
        None => "<unknown>".to_string(),
        Some(t) => match t.parse::<Timestamp>() {
            Ok(then) => human_duration(now.as_second().saturating_sub(then.as_second())),
            Err(_) => "<invalid>".to_string(),
        },
    }
}

/// A float as Go's `%v` writes it: the shortest digits, in exponent form (`1e+21`, `1.5e-05`)
/// below 1e-4 or from 1e21.
pub(crate) fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    let exp_form = format!("{f:e}");
    let (mantissa, exponent) = exp_form.split_once('e').unwrap_or((&exp_form, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if (-4..21).contains(&exponent) {
        format!("{f}")
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.unsigned_abs())
    }
}

/// A JSON value as Go's `json.Marshal` writes an unstructured one: keys sorted, `<`, `>`, `&`
/// escaped.
pub(crate) fn go_json(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let ordered: BTreeMap<&String, Value> =
                    map.iter().map(|(k, v)| (k, sorted(v))).collect();
                serde_json::to_value(ordered).unwrap_or(Value::Null)
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    serde_json::to_string(&sorted(value))
        .unwrap_or_default()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// A scalar as the column's text: strings as they are, numbers as Go prints them.
pub(crate) fn text(value: &Value) -> Option<String> {
    match value {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (_, Some(u), _) => u.to_string(),
            (_, _, Some(f)) => go_float(f),
            _ => n.to_string(),
        }),
        Value::Array(_) | Value::Object(_) => Some(go_json(value)),
    }
}

/// `k=v,k2=v2`, keys sorted; `<none>` when empty (labels' `FormatLabels`).
pub(crate) fn labels(map: Option<&Value>) -> String {
    let mut pairs: Vec<String> = map
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    pairs.sort();
    if pairs.is_empty() {
        "<none>".to_string()
    } else {
        pairs.join(",")
    }
}

/// A `LabelSelector` as a selector string (`app=web,tier in (a,b),!canary`), requirements
/// sorted by key; empty for none.
pub(crate) fn selector(sel: Option<&Value>) -> String {
    let Some(sel) = sel else {
        return String::new();
    };
    let mut requirements: Vec<(String, String)> = Vec::new();
    if let Some(labels) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in labels {
            requirements.push((k.clone(), format!("{k}={}", v.as_str().unwrap_or_default())));
        }
    }
    if let Some(exprs) = sel.get("matchExpressions").and_then(Value::as_array) {
        for e in exprs {
            let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
            let mut values: Vec<&str> = e
                .get("values")
                .and_then(Value::as_array)
                .map(|v| v.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            values.sort_unstable();
            let text = match e
                .get("operator")
                .and_then(Value::as_str)
                .unwrap_or_default()
            {
                "In" => format!("{key} in ({})", values.join(",")),
                "NotIn" => format!("{key} notin ({})", values.join(",")),
                "Exists" => key.to_string(),
                "DoesNotExist" => format!("!{key}"),
                _ => continue,
            };
            requirements.push((key.to_string(), text));
        }
    }
    requirements.sort();
    requirements
        .into_iter()
        .map(|(_, t)| t)
        .collect::<Vec<_>>()
        .join(",")
}

/// [`selector`], `<none>` when empty (`metav1.FormatLabelSelector`).
pub(crate) fn selector_or_none(sel: Option<&Value>) -> String {
    let s = selector(sel);
    if s.is_empty() {
        "<none>".to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ages_read_as_the_api_server_writes_them() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (252, "4m12s"),
            (600, "10m"),
            (7200, "120m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 20 * 60, "3h20m"),
            (10 * 3600, "10h"),
            (76 * 3600, "3d4h"),
            (40 * 86400, "40d"),
            (395 * 86400, "395d"),
            (760 * 86400, "2y30d"),
            (9 * 365 * 86400, "9y"),
        ];
        for (seconds, want) in cases {
            assert_eq!(human_duration(seconds), want, "{seconds}s");
        }
    }

    #[test]
    fn numbers_and_json_print_as_go_prints_them() {
        assert_eq!(go_float(1.5), "1.5");
        assert_eq!(go_float(1e21), "1e+21");
        assert_eq!(go_float(123456.0), "123456");
        assert_eq!(go_float(0.00001), "1e-05");
        assert_eq!(go_float(0.0001), "0.0001");
        assert_eq!(text(&json!(3)).as_deref(), Some("3"));
        assert_eq!(
            text(&json!({"b": 1, "a": "<&>"})).as_deref(),
            Some(r#"{"a":"\u003c\u0026\u003e","b":1}"#)
        );
    }

    #[test]
    fn selectors_are_sorted_requirements() {
        let sel = json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["b", "a"]},
                {"key": "canary", "operator": "DoesNotExist"},
            ],
        });
        assert_eq!(selector(Some(&sel)), "app=web,!canary,tier in (a,b)");
        assert_eq!(selector_or_none(Some(&json!({}))), "<none>");
        assert_eq!(labels(Some(&json!({"b": "2", "a": "1"}))), "a=1,b=2");
    }
}
