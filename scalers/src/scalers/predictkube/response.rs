//! Reading the answer of a Prometheus range query (`/api/v1/query_range`) into the history the
//! PredictKube engine is sent, the way KEDA's `parsePrometheusResult` reads it: every sample of
//! every series of a matrix in order, the one sample of each element of an instant vector, a
//! scalar's sample, or a string's sample read as a number. Timestamps keep Prometheus'
//! millisecond precision (client_golang's `model.Time`).
//!
//! Unlike KEDA, a NaN or infinite sample is an error: it would reach the engine as a forecast
//! input, and the HPA as the value. Errors name the query, never the server's text.

use serde::Deserialize;
use serde_json::Value;

use crate::scalers::prometheus::response::error_type_shown;

/// The earliest second a protobuf `Timestamp` may hold (0001-01-01T00:00:00Z).
pub const MIN_TIMESTAMP_SECONDS: i64 = -62_135_596_800;
/// The latest second a protobuf `Timestamp` may hold (9999-12-31T23:59:59Z).
pub const MAX_TIMESTAMP_SECONDS: i64 = 253_402_300_799;

/// One sample of the history.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// Milliseconds since the Unix epoch.
    pub millis: i64,
    /// The value, finite.
    pub value: f64,
}

impl Sample {
    /// The timestamp as protobuf's (seconds, nanoseconds) pair.
    pub fn seconds_nanos(&self) -> (i64, i32) {
        let seconds = self.millis.div_euclid(1000);
        // 0..=999 ms, so at most 999_000_000 ns: fits an i32.
        let nanos = i32::try_from(self.millis.rem_euclid(1000) * 1_000_000).unwrap_or(0);
        (seconds, nanos)
    }
}

/// The body of `/api/v1/query_range` (and of `/api/v1/query`, whose shapes it also reads).
#[derive(Debug, Deserialize)]
struct RangeResponse {
    #[serde(default)]
    status: String,
    #[serde(default)]
    data: Option<RangeData>,
    #[serde(default, rename = "errorType")]
    error_type: String,
    // `error` and `warnings`, the server's text, are not read.
}

#[derive(Debug, Deserialize)]
struct RangeData {
    #[serde(default, rename = "resultType")]
    result_type: String,
    #[serde(default)]
    result: Value,
}

/// One series of a matrix. Native histogram samples (`histograms`) have no single value and
/// are left out, as KEDA leaves them out.
#[derive(Debug, Deserialize)]
struct MatrixSeries {
    #[serde(default)]
    values: Vec<Value>,
}

/// One element of an instant vector.
#[derive(Debug, Deserialize)]
struct VectorElement {
    #[serde(default)]
    value: Option<Value>,
}

/// The samples of `query`'s answer `body`, in the order Prometheus gave them.
///
/// # Errors
/// The body is not a successful Prometheus answer; a sample is not `[<time>, "<number>"]`, is
/// not finite, or its time is outside what a protobuf timestamp holds; the result is of
/// another type. The message names the query and says why in our words.
pub fn samples(body: &[u8], query: &str) -> Result<Vec<Sample>, String> {
    let response: RangeResponse = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the answer to prometheus range query `{query}` is not a Prometheus API response: {}",
            crate::remote::json_error(&e)
        )
    })?;
    if response.status == "error" {
        let error_type = error_type_shown(&response.error_type);
        return Err(format!(
            "prometheus range query `{query}` failed: {error_type}"
        ));
    }
    let data = response
        .data
        .ok_or_else(|| format!("the answer to prometheus range query `{query}` has no \"data\""))?;
    let shape = |what: &str, e: &serde_json::Error| {
        format!(
            "the answer to prometheus range query `{query}` is not {what}: {}",
            crate::remote::json_error(e)
        )
    };
    let mut out = Vec::new();
    match data.result_type.as_str() {
        "matrix" => {
            let series: Vec<MatrixSeries> =
                serde_json::from_value(data.result).map_err(|e| shape("a range vector", &e))?;
            for s in &series {
                for pair in &s.values {
                    out.push(sample(pair, query, false)?);
                }
            }
        }
        "vector" => {
            let elements: Vec<VectorElement> =
                serde_json::from_value(data.result).map_err(|e| shape("an instant vector", &e))?;
            for element in &elements {
                if let Some(pair) = &element.value {
                    out.push(sample(pair, query, false)?);
                }
            }
        }
        "scalar" => out.push(sample(&data.result, query, false)?),
        "string" => out.push(sample(&data.result, query, true)?),
        _ => {
            return Err(format!(
                "prometheus range query `{query}` returned a result of another type than matrix, vector, scalar or string"
            ));
        }
    }
    Ok(out)
}

/// `[<time in seconds>, "<value>"]`; `string` for a string result (its text read as a number).
fn sample(pair: &Value, query: &str, string: bool) -> Result<Sample, String> {
    let not_pair = || {
        format!(
            "prometheus range query `{query}` returned a sample that is not [<time>, \"<value>\"]"
        )
    };
    let Value::Array(pair) = pair else {
        return Err(not_pair());
    };
    let [Value::Number(time), Value::String(text)] = pair.as_slice() else {
        return Err(not_pair());
    };
    let seconds = time.as_f64().ok_or_else(not_pair)?;
    let millis = (seconds * 1000.0).round();
    #[allow(clippy::cast_precision_loss)]
    let (min, max) = (
        MIN_TIMESTAMP_SECONDS as f64 * 1000.0,
        (MAX_TIMESTAMP_SECONDS as f64 + 1.0) * 1000.0,
    );
    if !(min..max).contains(&millis) {
        return Err(format!(
            "prometheus range query `{query}` returned a sample time outside years 1 to 9999"
        ));
    }
    // Within ±2^48: exact, and the range was checked above.
    #[allow(clippy::cast_possible_truncation)]
    let millis = millis as i64;
    let value: f64 = text.trim().parse().map_err(|_| {
        let what = if string { "a string" } else { "a sample value" };
        format!(
            "prometheus range query `{query}` returned {what} ({} bytes) that is not a number",
            text.len()
        )
    })?;
    if !value.is_finite() {
        return Err(format!(
            "prometheus range query `{query}` returned {} in its history; the engine takes finite numbers only",
            if value.is_nan() {
                "NaN"
            } else if value > 0.0 {
                "+Inf"
            } else {
                "-Inf"
            }
        ));
    }
    Ok(Sample { millis, value })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(body: &str) -> Vec<Sample> {
        samples(body.as_bytes(), "q").unwrap_or_else(|e| panic!("{body}: {e}"))
    }

    fn s(millis: i64, value: f64) -> Sample {
        Sample { millis, value }
    }

    #[test]
    fn every_sample_of_every_shape_is_read_in_order_with_millisecond_times() {
        // (body, samples)
        let rows: Vec<(&str, Vec<Sample>)> = vec![
            (
                r#"{"status":"success","data":{"resultType":"matrix","result":[
                    {"metric":{"a":"1"},"values":[[1700000000,"1"],[1700000060.5,"2.5"]]},
                    {"metric":{"a":"2"},"values":[[1700000000.001,"-3"]]}]}}"#,
                vec![
                    s(1_700_000_000_000, 1.0),
                    s(1_700_000_060_500, 2.5),
                    s(1_700_000_000_001, -3.0),
                ],
            ),
            (
                r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#,
                vec![],
            ),
            (
                r#"{"status":"success","data":{"resultType":"vector","result":[
                    {"metric":{},"value":[1700000000.25,"7"]},{"metric":{},"value":[1700000000,"1e3"]}]}}"#,
                vec![s(1_700_000_000_250, 7.0), s(1_700_000_000_000, 1000.0)],
            ),
            (
                r#"{"status":"success","data":{"resultType":"scalar","result":[1700000000,"4"]}}"#,
                vec![s(1_700_000_000_000, 4.0)],
            ),
            (
                r#"{"status":"success","data":{"resultType":"string","result":[1700000000," 12.5"]}}"#,
                vec![s(1_700_000_000_000, 12.5)],
            ),
            // Native histograms have no single value: left out.
            (
                r#"{"status":"success","data":{"resultType":"matrix","result":[
                    {"metric":{},"histograms":[[1700000000,{"count":"1","sum":"1","buckets":[]}]]}]},
                    "warnings":["ignored"]}"#,
                vec![],
            ),
        ];
        for (body, expected) in rows {
            assert_eq!(ok(body), expected, "{body}");
        }
    }

    #[test]
    fn timestamps_become_protobuf_seconds_and_nanos() {
        assert_eq!(
            s(1_700_000_060_500, 0.0).seconds_nanos(),
            (1_700_000_060, 500_000_000)
        );
        assert_eq!(s(-1, 0.0).seconds_nanos(), (-1, 999_000_000));
        assert_eq!(s(0, 0.0).seconds_nanos(), (0, 0));
    }

    #[test]
    fn bad_answers_are_errors_naming_the_query_never_quoting_the_server() {
        // (body, error)
        let rows = [
            (
                r#"{"status":"error","errorType":"bad_data","error":"s3cret parse error"}"#,
                "prometheus range query `q` failed: bad_data",
            ),
            (
                r#"{"status":"error","errorType":"s3cret","error":"s3cret"}"#,
                "prometheus range query `q` failed: an error",
            ),
            (
                "<html>s3cret</html>",
                "the answer to prometheus range query `q` is not a Prometheus API response: not valid JSON (line 1, column 1)",
            ),
            (
                r#"{"status":"success"}"#,
                "the answer to prometheus range query `q` has no \"data\"",
            ),
            (
                r#"{"status":"success","data":{"resultType":"matrix","result":[[1,"2"]]}}"#,
                "the answer to prometheus range query `q` is not a range vector: not of the expected shape (line 0, column 0)",
            ),
            (
                r#"{"status":"success","data":{"resultType":"matrix","result":[{"values":[[1,2]]}]}}"#,
                "prometheus range query `q` returned a sample that is not [<time>, \"<value>\"]",
            ),
            (
                r#"{"status":"success","data":{"resultType":"matrix","result":[{"values":[["1","2"]]}]}}"#,
                "prometheus range query `q` returned a sample that is not [<time>, \"<value>\"]",
            ),
            (
                r#"{"status":"success","data":{"resultType":"matrix","result":[{"values":[[1,"s3cret"]]}]}}"#,
                "prometheus range query `q` returned a sample value (6 bytes) that is not a number",
            ),
            (
                r#"{"status":"success","data":{"resultType":"string","result":[1,"s3cret"]}}"#,
                "prometheus range query `q` returned a string (6 bytes) that is not a number",
            ),
            (
                r#"{"status":"success","data":{"resultType":"matrix","result":[{"values":[[1,"1"],[2,"NaN"]]}]}}"#,
                "prometheus range query `q` returned NaN in its history; the engine takes finite numbers only",
            ),
            (
                r#"{"status":"success","data":{"resultType":"vector","result":[{"value":[2,"+Inf"]}]}}"#,
                "prometheus range query `q` returned +Inf in its history; the engine takes finite numbers only",
            ),
            (
                r#"{"status":"success","data":{"resultType":"scalar","result":[2,"-Inf"]}}"#,
                "prometheus range query `q` returned -Inf in its history; the engine takes finite numbers only",
            ),
            (
                r#"{"status":"success","data":{"resultType":"scalar","result":[1e300,"1"]}}"#,
                "prometheus range query `q` returned a sample time outside years 1 to 9999",
            ),
            (
                r#"{"status":"success","data":{"resultType":"streams","result":[]}}"#,
                "prometheus range query `q` returned a result of another type than matrix, vector, scalar or string",
            ),
        ];
        for (body, expected) in rows {
            let err = samples(body.as_bytes(), "q").expect_err(body);
            assert_eq!(err, expected, "{body}");
            assert!(!err.contains("s3cret"), "{err}");
        }
    }
}
