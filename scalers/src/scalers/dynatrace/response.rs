//! Reading Dynatrace's answers the way KEDA's `dynatrace` scaler does
//! (`pkg/scalers/dynatrace_scaler.go`).
//!
//! - Metrics API v2, `GET /api/v2/metrics/query`
//!   (<https://docs.dynatrace.com/docs/dynatrace-api/environment-api/metric-v2/get-data-points>):
//!   `{"totalCount":1,"nextPageKey":null,"resolution":"1h","result":[{"metricId":"...",
//!   "data":[{"dimensions":[],"dimensionMap":{},"timestamps":[...],"values":[...]}]}]}`; the
//!   value is the first value of the first series of the first result (a `null` value is 0, as
//!   Go reads it into a float).
//! - Grail query API, `POST /platform/storage/query/v1/query:execute` then
//!   `GET .../query:poll?request-token=...`
//!   (<https://docs.dynatrace.com/docs/discover-dynatrace/platform/grail/querying-grail/query-api>):
//!   `{"state":"RUNNING","requestToken":"..."}`, then
//!   `{"state":"SUCCEEDED","result":{"records":[{"r":12}],...}}`; the value is the first
//!   record's `r`.
//!
//! Errors never quote the answer; a state is shown only when it is one of the documented ones.

use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct MetricsResponse {
    #[serde(default)]
    result: Option<Vec<MetricResult>>,
}

#[derive(Debug, Deserialize)]
struct MetricResult {
    #[serde(default)]
    data: Option<Vec<MetricSeries>>,
}

#[derive(Debug, Deserialize)]
struct MetricSeries {
    #[serde(default)]
    values: Option<Vec<Option<f64>>>,
}

/// The value of a Metrics API v2 answer.
///
/// # Errors
/// Not the documented shape, or no result, series or value.
pub fn metrics_value(body: &[u8]) -> Result<f64, String> {
    let response: MetricsResponse = crate::remote::from_json(body).map_err(|e| {
        format!(
            "unable to parse the Dynatrace Metric Data Points API response: {}",
            crate::remote::json_error(&e)
        )
    })?;
    let result = response.result.unwrap_or_default();
    let first = result
        .first()
        .ok_or("the Dynatrace response does not contain any results")?;
    let series = first.data.as_deref().unwrap_or_default();
    let series = series
        .first()
        .ok_or("the Dynatrace response does not contain any metric series")?;
    let value = series
        .values
        .as_deref()
        .unwrap_or_default()
        .first()
        .ok_or("the Dynatrace response does not contain any values for the metric series")?;
    Ok(value.unwrap_or(0.0))
}

#[derive(Debug, Deserialize)]
struct QueryResponse {
    #[serde(default)]
    state: Option<String>,
    #[serde(default, rename = "requestToken")]
    request_token: Option<String>,
    #[serde(default)]
    result: Option<QueryResult>,
}

#[derive(Debug, Deserialize)]
struct QueryResult {
    #[serde(default)]
    records: Option<Vec<Record>>,
}

#[derive(Debug, Deserialize)]
struct Record {
    #[serde(default)]
    r: Option<f64>,
}

fn query_response(body: &[u8], what: &str) -> Result<QueryResponse, String> {
    crate::remote::from_json(body).map_err(|e| {
        format!(
            "unable to parse the Dynatrace DQL {what} response: {}",
            crate::remote::json_error(&e)
        )
    })
}

/// The request token of an `:execute` answer (state `NOT_STARTED`, `RUNNING` or `SUCCEEDED`).
///
/// # Errors
/// Not the documented shape, another state, or no token.
pub fn execute_token(body: &[u8]) -> Result<String, String> {
    let response = query_response(body, "execute")?;
    match response.state.as_deref().unwrap_or_default() {
        "NOT_STARTED" | "RUNNING" | "SUCCEEDED" => response
            .request_token
            .filter(|t| !t.is_empty())
            .ok_or_else(|| "error starting the DQL query: the answer has no requestToken".into()),
        _ => Err(
            "error starting the DQL query: the answer's state is not a running or finished one"
                .into(),
        ),
    }
}

/// A `:poll` answer: `None` while the query runs, else the first record's `r` (missing or
/// `null` is 0, as Go reads it).
///
/// # Errors
/// Not the documented shape; a failed, cancelled or expired query; success without records;
/// an unknown state.
pub fn poll_value(body: &[u8]) -> Result<Option<f64>, String> {
    let response = query_response(body, "poll")?;
    match response.state.as_deref().unwrap_or_default() {
        "NOT_STARTED" | "RUNNING" => Ok(None),
        "SUCCEEDED" => {
            let records = response.result.and_then(|r| r.records).unwrap_or_default();
            match records.first() {
                Some(record) => Ok(Some(record.r.unwrap_or(0.0))),
                None => Err("error executing the DQL query: empty result".into()),
            }
        }
        "FAILED" => Err("error executing the DQL query: query failed".into()),
        "CANCELLED" => Err("error executing the DQL query: query was cancelled".into()),
        "RESULT_GONE" => Err("error executing the DQL query: result expired (RESULT_GONE)".into()),
        _ => {
            Err("error executing the DQL query: the answer's state is not a documented one".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_values_follow_keda() {
        let body = |data: &str| {
            format!(
                r#"{{"totalCount":1,"nextPageKey":null,"resolution":"1h","result":[{{"metricId":"m","dataPointCountRatio":0.1,"dimensionCountRatio":0.1,"data":{data}}}]}}"#
            )
        };
        let series = |values: &str| {
            body(&format!(
                r#"[{{"dimensions":[],"dimensionMap":{{}},"timestamps":[1,2],"values":{values}}}]"#
            ))
        };
        assert_eq!(metrics_value(series("[4.5,9]").as_bytes()), Ok(4.5));
        assert_eq!(metrics_value(series("[null,9]").as_bytes()), Ok(0.0));
        assert_eq!(
            metrics_value(series("[]").as_bytes()),
            Err("the Dynatrace response does not contain any values for the metric series".into())
        );
        assert_eq!(
            metrics_value(body("[]").as_bytes()),
            Err("the Dynatrace response does not contain any metric series".into())
        );
        assert_eq!(
            metrics_value(br#"{"totalCount":0,"result":[]}"#),
            Err("the Dynatrace response does not contain any results".into())
        );
        for garbage in ["", "SECRETSECRET", r#"{"result":"SECRETSECRET"}"#] {
            let err = metrics_value(garbage.as_bytes()).expect_err(garbage);
            assert!(!err.contains("SECRETSECRET"), "{err}");
        }
    }

    #[test]
    fn query_states_follow_keda() {
        assert_eq!(
            execute_token(br#"{"state":"RUNNING","requestToken":"t1","ttlSeconds":100}"#),
            Ok("t1".into())
        );
        assert!(execute_token(br#"{"state":"FAILED","requestToken":"t1"}"#).is_err());
        assert!(execute_token(br#"{"state":"RUNNING"}"#).is_err());
        assert_eq!(
            poll_value(br#"{"state":"RUNNING","progress":10}"#),
            Ok(None)
        );
        assert_eq!(
            poll_value(
                br#"{"state":"SUCCEEDED","result":{"records":[{"r":7},{"r":9}],"types":[]}}"#
            ),
            Ok(Some(7.0))
        );
        assert_eq!(
            poll_value(br#"{"state":"SUCCEEDED","result":{"records":[{"x":1}]}}"#),
            Ok(Some(0.0))
        );
        assert_eq!(
            poll_value(br#"{"state":"SUCCEEDED","result":{"records":[]}}"#),
            Err("error executing the DQL query: empty result".into())
        );
        assert!(
            poll_value(br#"{"state":"FAILED"}"#)
                .unwrap_err()
                .contains("failed")
        );
        assert!(
            poll_value(br#"{"state":"RESULT_GONE"}"#)
                .unwrap_err()
                .contains("RESULT_GONE")
        );
        let err = poll_value(br#"{"state":"SECRETSECRET"}"#).unwrap_err();
        assert!(!err.contains("SECRETSECRET"), "{err}");
        let err =
            poll_value(br#"{"state":"SUCCEEDED","result":{"records":[{"r":"SECRETSECRET"}]}}"#)
                .unwrap_err();
        assert!(!err.contains("SECRETSECRET"), "{err}");
    }
}
