//! Reading a graphite-web render API answer (`GET /render?target=..&from=..&format=json`) the
//! way KEDA's `graphite` scaler does (`executeGrapQuery` in `pkg/scalers/graphite_scaler.go`):
//! no series is 0; more than one series is an error; a series without datapoints is 0;
//! otherwise the value is the most recent non-null datapoint, and a series whose datapoints are
//! all null is an error (KEDA: "try increasing your queryTime"). Errors name the query, never
//! the answer's text.
//!
//! The answer's shape is graphite-web's JSON render format: a list of
//! `{"target": "<name>", "tags": {...}, "datapoints": [[<value or null>, <timestamp>], ...]}`,
//! oldest datapoint first:
//! <https://graphite.readthedocs.io/en/latest/render_api.html#json>.
//!
//! Where KEDA's Go code would panic (a datapoint that is an empty list) or hand the HPA an
//! infinite value, this is an error.

use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct Series {
    /// `[[value, timestamp], ...]`: Go reads each value as a `*float64` (null is nil).
    #[serde(default)]
    datapoints: Option<Vec<Option<Vec<Option<f64>>>>>,
}

/// The value of `query`'s render answer `body`.
///
/// # Errors
/// The body is not a render API JSON answer, holds several series, or no usable datapoint
/// (see the module docs); the message names the query and never quotes the answer.
pub fn render_value(body: &[u8], query: &str) -> Result<f64, String> {
    let series: Vec<Series> = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the answer to graphite query `{query}` is not a render API JSON answer: {}",
            crate::remote::json_error(&e)
        )
    })?;
    let series = match series.as_slice() {
        [] => return Ok(0.0),
        [one] => one,
        many => {
            return Err(format!(
                "graphite query `{query}` returned multiple series ({}); it must return one, e.g. aggregate it with sumSeries(...)",
                many.len()
            ));
        }
    };
    let datapoints = series.datapoints.as_deref().unwrap_or_default();
    if datapoints.is_empty() {
        return Ok(0.0);
    }
    for point in datapoints.iter().rev() {
        let Some(value) = point.as_deref().and_then(<[Option<f64>]>::first) else {
            return Err(format!(
                "graphite query `{query}` returned a datapoint that is not a [value, timestamp] pair"
            ));
        };
        if let Some(value) = value {
            if !value.is_finite() {
                return Err(format!(
                    "graphite query `{query}` returned a value that is not finite"
                ));
            }
            return Ok(*value);
        }
    }
    Err(format!(
        "no valid non-null response in graphite query `{query}`, try increasing your queryTime or check your query"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_non_null_datapoint_is_the_value_as_in_keda() {
        // Rows from KEDA's graphite_scaler_test.go and graphite's JSON render format.
        let rows: &[(&str, Result<f64, &str>)] = &[
            ("[]", Ok(0.0)),
            (r#"[{"target":"a","tags":{},"datapoints":[]}]"#, Ok(0.0)),
            (r#"[{"target":"a","tags":{}}]"#, Ok(0.0)),
            (r#"[{"target":"a","datapoints":null}]"#, Ok(0.0)),
            (
                r#"[{"target":"a","datapoints":[[1.5,1700000000],[3,1700000001],[null,1700000002]]}]"#,
                Ok(3.0),
            ),
            (
                r#"[{"target":"a","tags":{"name":"a"},"datapoints":[[2,1700000000]]}]"#,
                Ok(2.0),
            ),
            (
                r#"[{"target":"a","datapoints":[[null,1700000000],[null,1700000001]]}]"#,
                Err(
                    "no valid non-null response in graphite query `q`, try increasing your queryTime or check your query",
                ),
            ),
            (
                r#"[{"target":"a","datapoints":[[1,1]]},{"target":"b","datapoints":[[2,1]]}]"#,
                Err(
                    "graphite query `q` returned multiple series (2); it must return one, e.g. aggregate it with sumSeries(...)",
                ),
            ),
            (
                r#"[{"target":"a","datapoints":[[1,1],[]]}]"#,
                Err(
                    "graphite query `q` returned a datapoint that is not a [value, timestamp] pair",
                ),
            ),
            (
                r#"[{"target":"a","datapoints":[[1,1],null]}]"#,
                Err(
                    "graphite query `q` returned a datapoint that is not a [value, timestamp] pair",
                ),
            ),
            (
                r#"[{"target":"a","datapoints":[["7",1]]}]"#,
                Err(
                    "the answer to graphite query `q` is not a render API JSON answer: not of the expected shape (line 1, column 33)",
                ),
            ),
            (
                r#"{"error":"secret detail"}"#,
                Err(
                    "the answer to graphite query `q` is not a render API JSON answer: not of the expected shape (line 1, column 0)",
                ),
            ),
            (
                "<html>secret detail</html>",
                Err(
                    "the answer to graphite query `q` is not a render API JSON answer: not valid JSON (line 1, column 1)",
                ),
            ),
        ];
        for (body, expected) in rows {
            let got = render_value(body.as_bytes(), "q");
            match expected {
                Ok(value) => assert_eq!(got, Ok(*value), "{body}"),
                Err(message) => {
                    let err = got.expect_err(body);
                    assert_eq!(err, *message, "{body}");
                    assert!(!err.contains("secret"), "{err}");
                }
            }
        }
    }

    #[test]
    fn hostile_answers_are_errors_not_panics() {
        for body in [
            &b""[..],
            b"[",
            b"[{\"datapoints\":[[1e999,1]]}]",
            b"[{\"datapoints\":[[-1e999,1]]}]",
            b"[{\"datapoints\":[[\"NaN\",1]]}]",
            b"[{\"datapoints\":{}}]",
            b"[null]",
            b"\xff\xfe",
        ] {
            assert!(render_value(body, "q").is_err(), "{body:?}");
        }
    }
}
