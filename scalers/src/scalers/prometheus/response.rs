//! Reading the value of a Prometheus instant query (`GET /api/v1/query`) the way KEDA does:
//! zero or one series; an empty result, an empty value, NaN and ±Inf are 0 with
//! `ignoreNullValues` and errors without it; more than one series is always an error. Errors
//! name the query.

use serde::Deserialize;
use serde_json::Value;

/// The body of `/api/v1/query`.
#[derive(Debug, Deserialize)]
struct QueryResponse {
    #[serde(default)]
    status: String,
    #[serde(default)]
    data: Option<QueryData>,
    #[serde(default, rename = "errorType")]
    error_type: String,
    // `error`, the server's text, is not read: it would only be shown ([`crate::remote`]).
}

#[derive(Debug, Deserialize)]
struct QueryData {
    #[serde(default, rename = "resultType")]
    result_type: String,
    #[serde(default)]
    result: Value,
}

/// One series of an instant vector.
#[derive(Debug, Deserialize)]
struct Series {
    #[serde(default)]
    value: Vec<Value>,
}

/// Prometheus' `errorType`s: a fixed vocabulary, shown; its `error` text is the server's and is
/// not.
pub const ERROR_TYPES: &[&str] = &[
    "bad_data",
    "execution",
    "timeout",
    "canceled",
    "internal",
    "unavailable",
    "not_found",
    "not_acceptable",
];

/// An answer's `errorType` when it is one of [`ERROR_TYPES`], else "an error": the words shown
/// for a Prometheus error, never its `error` text.
pub fn error_type_shown(error_type: &str) -> &'static str {
    ERROR_TYPES
        .iter()
        .find(|t| **t == error_type)
        .copied()
        .unwrap_or("an error")
}

/// The Prometheus error message of a non-2xx answer's body (`errorType: error`), if the body is
/// a Prometheus API error.
pub fn api_error(body: &[u8]) -> Option<&'static str> {
    let response: QueryResponse = crate::remote::from_json(body).ok()?;
    (response.status == "error").then(|| error_type_shown(&response.error_type))
}

/// The value of `query`'s answer `body`.
///
/// # Errors
/// The body is not a successful Prometheus answer, or the result is not a single usable value
/// (see the module docs); the message names the query.
pub fn query_value(body: &[u8], query: &str, ignore_null_values: bool) -> Result<f64, String> {
    query_value_reporting_empty(body, query, ignore_null_values, || ())
}

/// [`query_value`], calling `on_empty` when the answer is empty: no series, or a series (or
/// scalar) without a value. That is where KEDA's prometheus scaler calls
/// `RecordEmptyUpstreamResponse`, before `ignoreNullValues` makes it 0 or an error; a null,
/// NaN or infinite value is not empty.
///
/// # Errors
/// As [`query_value`].
pub fn query_value_reporting_empty(
    body: &[u8],
    query: &str,
    ignore_null_values: bool,
    on_empty: impl FnOnce(),
) -> Result<f64, String> {
    let response: QueryResponse = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the answer to prometheus query `{query}` is not a Prometheus API response: {}",
            crate::remote::json_error(&e)
        )
    })?;
    if response.status == "error" {
        let error_type = error_type_shown(&response.error_type);
        return Err(format!("prometheus query `{query}` failed: {error_type}"));
    }
    let data = response
        .data
        .ok_or_else(|| format!("the answer to prometheus query `{query}` has no \"data\""))?;
    let lost = |what: &str| {
        format!(
            "prometheus query `{query}`: {what}, the target may be lost (with ignoreNullValues \"false\" this is an error)"
        )
    };
    let sample = match data.result_type.as_str() {
        "vector" => {
            let series: Vec<Series> = serde_json::from_value(data.result).map_err(|e| {
                format!(
                    "the answer to prometheus query `{query}` is not an instant vector: {}",
                    crate::remote::json_error(&e)
                )
            })?;
            match series.as_slice() {
                [] => {
                    on_empty();
                    return if ignore_null_values {
                        Ok(0.0)
                    } else {
                        Err(lost("the result is empty"))
                    };
                }
                [one] => one.value.clone(),
                many => {
                    return Err(format!(
                        "prometheus query `{query}` returned multiple elements ({}); it must return at most one, e.g. aggregate it with sum(...)",
                        many.len()
                    ));
                }
            }
        }
        // `[<time>, "<value>"]`. KEDA fails to decode this (although its docs allow a scalar);
        // keda-rs reads it like a one-element vector.
        "scalar" => match data.result {
            Value::Array(pair) => pair,
            _ => Vec::new(),
        },
        other => {
            let shown = ["matrix", "string"]
                .into_iter()
                .find(|t| *t == other)
                .map_or_else(|| "another type".to_string(), |t| format!("type \"{t}\""));
            return Err(format!(
                "prometheus query `{query}` returned a result of {shown}; it must return an instant vector or a scalar"
            ));
        }
    };
    let raw = match sample.as_slice() {
        [] => {
            on_empty();
            return if ignore_null_values {
                Ok(0.0)
            } else {
                Err(lost("the value list is empty"))
            };
        }
        [_] => {
            return Err(format!(
                "prometheus query `{query}` didn't return enough values"
            ));
        }
        [_, raw, ..] => raw,
    };
    let value = match raw {
        Value::String(text) => text.parse::<f64>().map_err(|_| {
            format!(
                "prometheus query `{query}` returned a string ({} bytes) that is not a number",
                text.len()
            )
        })?,
        Value::Number(n) => n.as_f64().unwrap_or(f64::NAN),
        Value::Null if ignore_null_values => return Ok(0.0),
        Value::Null => return Err(lost("the value is null")),
        other => {
            return Err(format!(
                "prometheus query `{query}` returned {}, which is not a number",
                crate::remote::json_type(other)
            ));
        }
    };
    if value.is_finite() {
        Ok(value)
    } else if ignore_null_values {
        Ok(0.0)
    } else {
        Err(format!(
            "prometheus query `{query}` returned {} (with ignoreNullValues \"false\" this is an error)",
            go_float(value)
        ))
    }
}

/// How Go's `%f` prints a non-finite value, as in KEDA's message.
fn go_float(value: f64) -> &'static str {
    if value.is_nan() {
        "NaN"
    } else if value > 0.0 {
        "+Inf"
    } else {
        "-Inf"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vector(values: &[&str]) -> String {
        let series: Vec<String> = values
            .iter()
            .enumerate()
            .map(|(i, v)| format!(r#"{{"metric":{{"i":"{i}"}},"value":[1700000000.5,"{v}"]}}"#))
            .collect();
        format!(
            r#"{{"status":"success","data":{{"resultType":"vector","result":[{}]}}}}"#,
            series.join(",")
        )
    }

    #[test]
    fn single_values_empty_results_and_non_finite_values_follow_keda() {
        let q = "sum(up)";
        // (body, ignoreNullValues, expected)
        let rows: Vec<(String, bool, Result<f64, &str>)> = vec![
            (vector(&["42.5"]), false, Ok(42.5)),
            (vector(&["0"]), false, Ok(0.0)),
            (vector(&["-3"]), true, Ok(-3.0)),
            (vector(&[]), true, Ok(0.0)),
            (
                vector(&[]),
                false,
                Err("prometheus query `sum(up)`: the result is empty, the target may be lost (with ignoreNullValues \"false\" this is an error)"),
            ),
            (
                vector(&["1", "2"]),
                true,
                Err("prometheus query `sum(up)` returned multiple elements (2); it must return at most one, e.g. aggregate it with sum(...)"),
            ),
            (vector(&["NaN"]), true, Ok(0.0)),
            (vector(&["+Inf"]), true, Ok(0.0)),
            (vector(&["-Inf"]), true, Ok(0.0)),
            (
                vector(&["NaN"]),
                false,
                Err("prometheus query `sum(up)` returned NaN (with ignoreNullValues \"false\" this is an error)"),
            ),
            (
                vector(&["+Inf"]),
                false,
                Err("prometheus query `sum(up)` returned +Inf (with ignoreNullValues \"false\" this is an error)"),
            ),
            (
                vector(&["-Inf"]),
                false,
                Err("prometheus query `sum(up)` returned -Inf (with ignoreNullValues \"false\" this is an error)"),
            ),
            (
                r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[]}]}}"#.into(),
                true,
                Ok(0.0),
            ),
            (
                r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[]}]}}"#.into(),
                false,
                Err("prometheus query `sum(up)`: the value list is empty, the target may be lost (with ignoreNullValues \"false\" this is an error)"),
            ),
            (
                r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1]}]}}"#.into(),
                true,
                Err("prometheus query `sum(up)` didn't return enough values"),
            ),
            (
                r#"{"status":"success","data":{"resultType":"scalar","result":[1700000000,"7"]}}"#.into(),
                false,
                Ok(7.0),
            ),
            (
                r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#.into(),
                true,
                Err("prometheus query `sum(up)` returned a result of type \"matrix\"; it must return an instant vector or a scalar"),
            ),
            (
                r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#.into(),
                true,
                Err("prometheus query `sum(up)` failed: bad_data"),
            ),
            (
                vector(&["many"]),
                true,
                Err("prometheus query `sum(up)` returned a string (4 bytes) that is not a number"),
            ),
        ];
        for (i, (body, ignore, expected)) in rows.into_iter().enumerate() {
            let got = query_value(body.as_bytes(), q, ignore);
            assert_eq!(got, expected.map_err(str::to_string), "row {i}: {body}");
        }
    }

    #[test]
    fn only_an_empty_result_or_value_list_is_an_empty_upstream_response() {
        let empty_value = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[]}]}}"#;
        let null_value = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,null]}]}}"#;
        // (body, empty) with both ignoreNullValues settings: KEDA records the empty ones
        // before it looks at ignoreNullValues.
        let rows: Vec<(String, bool)> = vec![
            (vector(&[]), true),
            (empty_value.into(), true),
            (vector(&["3"]), false),
            (vector(&["NaN"]), false),
            (null_value.into(), false),
            (vector(&["1", "2"]), false),
            (r#"{"status":"error","errorType":"bad_data"}"#.into(), false),
        ];
        for (body, empty) in rows {
            for ignore in [true, false] {
                let mut reported = 0;
                let _ = query_value_reporting_empty(body.as_bytes(), "q", ignore, || reported += 1);
                assert_eq!(
                    reported,
                    u8::from(empty),
                    "{body} (ignoreNullValues {ignore})"
                );
            }
        }
    }

    #[test]
    fn garbage_is_an_error_naming_the_query_not_a_panic() {
        for body in [
            "",
            "<html>",
            "[]",
            r#"{"status":"success"}"#,
            "{\"data\":5}",
        ] {
            let err = query_value(body.as_bytes(), "up", true).expect_err(body);
            assert!(err.contains("`up`"), "{err}");
        }
        assert_eq!(
            api_error(br#"{"status":"error","errorType":"bad_data","error":"1:5: parse error"}"#),
            Some("bad_data")
        );
        assert_eq!(
            api_error(br#"{"status":"error","errorType":"SECRET","error":"SECRET"}"#),
            Some("an error")
        );
        assert_eq!(api_error(b"Unauthorized"), None);
    }
}
