//! Reading the value of a Loki instant metric query (`GET /loki/api/v1/query`) the way KEDA's
//! `loki` scaler does (`parseQueryResult` in `pkg/scalers/loki_scaler.go`): zero or one series;
//! an empty result or an empty value list is 0 with `ignoreNullValues` and an error without it;
//! a `null` value is 0; more than one series is always an error. NaN and ±Inf (which Go parses
//! and KEDA hands to the HPA) are 0 with `ignoreNullValues` and errors without it, as in
//! `prometheus`. Errors name the query, never the answer's text.
//!
//! The answer's shape is Loki's (Prometheus') `{"status":"success","data":{"resultType":
//! "vector","result":[{"metric":{...},"value":[<time>,"<value>"]}]}}`:
//! <https://grafana.com/docs/loki/latest/reference/loki-http-api/#query-logs-at-a-single-point-in-time>.

use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Deserialize)]
struct QueryResponse {
    #[serde(default)]
    status: String,
    #[serde(default)]
    data: Option<QueryData>,
}

#[derive(Debug, Deserialize)]
struct QueryData {
    #[serde(default, rename = "resultType")]
    result_type: String,
    #[serde(default)]
    result: Value,
}

#[derive(Debug, Deserialize)]
struct Series {
    #[serde(default)]
    value: Vec<Value>,
}

/// The value of `query`'s answer `body`.
///
/// # Errors
/// The body is not a successful Loki answer, or not a single usable value (see the module
/// docs); the message names the query and never quotes the answer.
pub fn query_value(body: &[u8], query: &str, ignore_null_values: bool) -> Result<f64, String> {
    let response: QueryResponse = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the answer to loki query `{query}` is not a Loki API response: {}",
            crate::remote::json_error(&e)
        )
    })?;
    if response.status != "success" {
        return Err(format!(
            "loki query `{query}` failed: the answer's status is not \"success\""
        ));
    }
    let data = response
        .data
        .ok_or_else(|| format!("the answer to loki query `{query}` has no \"data\""))?;
    let lost = |what: &str| {
        format!(
            "loki query `{query}`: {what}, the metrics may be lost (with ignoreNullValues \"false\" this is an error)"
        )
    };
    let series: Vec<Series> = match data.result_type.as_str() {
        "vector" => serde_json::from_value(data.result).map_err(|e| {
            format!(
                "the answer to loki query `{query}` is not an instant vector: {}",
                crate::remote::json_error(&e)
            )
        })?,
        "streams" => {
            return Err(format!(
                "loki query `{query}` returned log streams; it must be a metric query returning one value, e.g. sum(count_over_time({{...}}[1m]))"
            ));
        }
        "matrix" | "scalar" | "string" => {
            return Err(format!(
                "loki query `{query}` returned a result of type \"{}\"; it must return an instant vector",
                data.result_type
            ));
        }
        _ => {
            return Err(format!(
                "loki query `{query}` returned a result of another type; it must return an instant vector"
            ));
        }
    };
    let values = match series.as_slice() {
        [] if ignore_null_values => return Ok(0.0),
        [] => return Err(lost("the result is empty")),
        [one] => &one.value,
        many => {
            return Err(format!(
                "loki query `{query}` returned multiple elements ({}); it must return at most one, e.g. aggregate it with sum(...)",
                many.len()
            ));
        }
    };
    let raw = match values.as_slice() {
        [] if ignore_null_values => return Ok(0.0),
        [] => return Err(lost("the value list is empty")),
        [_] => return Err(format!("loki query `{query}` didn't return enough values")),
        [_, raw, ..] => raw,
    };
    let value = match raw {
        // KEDA: a null value is 0, whatever ignoreNullValues says.
        Value::Null => return Ok(0.0),
        Value::String(text) => text.parse::<f64>().map_err(|_| {
            format!(
                "loki query `{query}` returned a string ({} bytes) that is not a number",
                text.len()
            )
        })?,
        other => {
            return Err(format!(
                "loki query `{query}` returned {}, not a number as a string",
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
            "loki query `{query}` returned a value that is not finite (with ignoreNullValues \"false\" this is an error)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vector(values: &[&str]) -> String {
        let series: Vec<String> = values
            .iter()
            .map(|v| format!(r#"{{"metric":{{}},"value":[1700000000.5,{v}]}}"#))
            .collect();
        format!(
            r#"{{"status":"success","data":{{"resultType":"vector","result":[{}],"stats":{{}}}}}}"#,
            series.join(",")
        )
    }

    #[test]
    fn values_empty_results_and_nulls_follow_keda() {
        let q = "sum(rate({app=\"a\"}[1m]))";
        // (body, ignoreNullValues, expected)
        let rows: Vec<(String, bool, Result<f64, &str>)> = vec![
            // One series: its value.
            (vector(&[r#""42.5""#]), false, Ok(42.5)),
            (vector(&[r#""-3""#]), true, Ok(-3.0)),
            // No series: 0, or an error without ignoreNullValues.
            (vector(&[]), true, Ok(0.0)),
            (
                vector(&[]),
                false,
                Err("loki query `sum(rate({app=\"a\"}[1m]))`: the result is empty, the metrics may be lost (with ignoreNullValues \"false\" this is an error)"),
            ),
            // Two series: always an error.
            (
                vector(&[r#""1""#, r#""2""#]),
                true,
                Err("loki query `sum(rate({app=\"a\"}[1m]))` returned multiple elements (2); it must return at most one, e.g. aggregate it with sum(...)"),
            ),
            // A null value is 0 in KEDA whatever ignoreNullValues says.
            (vector(&["null"]), false, Ok(0.0)),
            // A number that is not a string: KEDA's "failed to parse loki value as string".
            (
                vector(&["7"]),
                true,
                Err("loki query `sum(rate({app=\"a\"}[1m]))` returned a number, not a number as a string"),
            ),
            (vector(&[r#""NaN""#]), true, Ok(0.0)),
            (
                vector(&[r#""+Inf""#]),
                false,
                Err("loki query `sum(rate({app=\"a\"}[1m]))` returned a value that is not finite (with ignoreNullValues \"false\" this is an error)"),
            ),
            (
                vector(&[r#""many""#]),
                true,
                Err("loki query `sum(rate({app=\"a\"}[1m]))` returned a string (4 bytes) that is not a number"),
            ),
            (
                r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[]}]}}"#.into(),
                true,
                Ok(0.0),
            ),
            (
                r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1]}]}}"#.into(),
                true,
                Err("loki query `sum(rate({app=\"a\"}[1m]))` didn't return enough values"),
            ),
            (
                r#"{"status":"success","data":{"resultType":"streams","result":[{"stream":{},"values":[["1","line"]]}]}}"#.into(),
                true,
                Err("loki query `sum(rate({app=\"a\"}[1m]))` returned log streams; it must be a metric query returning one value, e.g. sum(count_over_time({...}[1m]))"),
            ),
            (
                r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#.into(),
                true,
                Err("loki query `sum(rate({app=\"a\"}[1m]))` returned a result of type \"matrix\"; it must return an instant vector"),
            ),
        ];
        for (i, (body, ignore, expected)) in rows.into_iter().enumerate() {
            let got = query_value(body.as_bytes(), q, ignore);
            assert_eq!(got, expected.map_err(str::to_string), "row {i}: {body}");
        }
    }

    #[test]
    fn garbage_is_an_error_naming_the_query_never_quoting_the_answer() {
        for body in [
            "",
            "parse error at line 1, col 5: syntax error SECRETSECRET",
            "[]",
            r#"{"status":"success"}"#,
            r#"{"status":"error","error":"SECRETSECRET"}"#,
            r#"{"status":"success","data":{"resultType":"SECRETSECRET","result":[]}}"#,
            r#"{"status":"success","data":{"resultType":"vector","result":[{"value":[1,"SECRETSECRET"]}]}}"#,
        ] {
            let err = query_value(body.as_bytes(), "up", true).expect_err(body);
            assert!(err.contains("`up`"), "{err}");
            assert!(!err.contains("SECRETSECRET"), "{err}");
        }
    }
}
