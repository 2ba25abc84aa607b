//! Reading the answer of Datadog's "Query timeseries points" API (`GET /api/v1/query`) the way
//! KEDA's `datadog` scaler does (`getQueryResult` in `pkg/scalers/datadog_scaler.go`).
//!
//! The answer is Datadog's `MetricsQueryResponse`
//! (<https://docs.datadoghq.com/api/latest/metrics/#query-timeseries-points>):
//! `{"status":"ok","res_type":"time_series","series":[{"metric":"...","scope":"...",
//! "pointlist":[[<ms>,<value or null>],...]}],"from_date":...,"to_date":...,"query":"..."}`.
//!
//! Each series gives its last point with a value (`lastAvailablePointOffset` points before
//! it); more than one series needs `queryAggregator` (`max`, the default once set, or
//! `average`). No series, or a chosen point without a value, is `metricUnavailableValue` when
//! set and an error without it. Errors never quote the answer (Datadog's `error` text
//! included).

use serde::Deserialize;

/// How several series are combined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aggregator {
    /// `queryAggregator` not set: a query must return one series.
    None,
    /// `queryAggregator: max`.
    Max,
    /// `queryAggregator: average`.
    Average,
}

/// What the reading of an answer needs from the trigger.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reading {
    /// `queryAggregator`.
    pub aggregator: Aggregator,
    /// `lastAvailablePointOffset`.
    pub last_available_point_offset: usize,
    /// `metricUnavailableValue`.
    pub fill_value: Option<f64>,
}

#[derive(Debug, Deserialize)]
struct QueryResponse {
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    series: Option<Vec<Series>>,
}

#[derive(Debug, Deserialize)]
struct Series {
    #[serde(default)]
    pointlist: Option<Vec<Vec<Option<f64>>>>,
}

/// The value of a query's answer `body`.
///
/// # Errors
/// The body is not a Datadog query answer, says `"status": "error"`, or holds no usable value
/// (see the module docs). Messages never quote the answer.
pub fn query_value(body: &[u8], reading: &Reading) -> Result<f64, String> {
    let response: QueryResponse = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the answer is not a Datadog query response: {}",
            crate::remote::json_error(&e)
        )
    })?;
    if response.status.as_deref() == Some("error") {
        return Err("Datadog answered the query with status \"error\"".into());
    }
    let unavailable = |why: &str| match reading.fill_value {
        Some(fill) => Ok(fill),
        None => Err(format!(
            "no Datadog metrics returned for the given time window ({why}; set metricUnavailableValue to use a value instead)"
        )),
    };
    let series = response.series.unwrap_or_default();
    if series.is_empty() {
        return unavailable("no series");
    }
    if series.len() > 1 && reading.aggregator == Aggregator::None {
        return Err(format!(
            "the query returned {} series; modify the query to return only 1 series or add a queryAggregator",
            series.len()
        ));
    }
    let mut values = Vec::with_capacity(series.len());
    for one in &series {
        let points = one.pointlist.as_deref().unwrap_or_default();
        let has_value = |p: &Vec<Option<f64>>| p.len() >= 2 && p[1].is_some();
        // KEDA: the last point with a value, else the last point.
        let last = points
            .iter()
            .rposition(has_value)
            .or_else(|| points.len().checked_sub(1));
        let Some(index) =
            last.and_then(|last| last.checked_sub(reading.last_available_point_offset))
        else {
            return Err(format!(
                "the series has fewer points with a value than lastAvailablePointOffset ({}) asks to skip",
                reading.last_available_point_offset
            ));
        };
        match points.get(index).and_then(|p| p.get(1)).copied().flatten() {
            Some(value) if value.is_finite() => values.push(value),
            Some(_) => return Err("the chosen point is not a finite number".into()),
            None => return unavailable("the chosen point has no value"),
        }
    }
    let value = match reading.aggregator {
        Aggregator::Average => {
            #[allow(clippy::cast_precision_loss)]
            let n = values.len() as f64;
            values.iter().sum::<f64>() / n
        }
        Aggregator::None | Aggregator::Max => values.iter().copied().fold(f64::MIN, f64::max),
    };
    if value.is_finite() {
        Ok(value)
    } else {
        Err("the aggregated value is not a finite number".into())
    }
}

/// The value of the Cluster Agent's answer (an `external.metrics.k8s.io/v1beta1`
/// `ExternalMetricValueList`): `items[0].value`, a Kubernetes quantity (`"12"`, `"1500m"`) or a
/// number, as KEDA reads it.
///
/// # Errors
/// Not that shape, no item, or a value that is no quantity. Messages never quote the answer.
pub fn cluster_agent_value(body: &[u8]) -> Result<f64, String> {
    #[derive(serde::Deserialize)]
    struct List {
        #[serde(default)]
        items: Vec<Item>,
    }
    #[derive(serde::Deserialize)]
    struct Item {
        value: Option<serde_json::Value>,
    }
    let list: List = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the Cluster Agent answer is not an ExternalMetricValueList: {}",
            crate::remote::json_error(&e)
        )
    })?;
    let value = list
        .items
        .into_iter()
        .next()
        .and_then(|item| item.value)
        .ok_or_else(|| "the Cluster Agent answer has no item with a value".to_string())?;
    let number = match &value {
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::String(q) => crate::metric::parse_quantity(q),
        _ => None,
    };
    number.filter(|v| v.is_finite()).ok_or_else(|| {
        "the Cluster Agent's metric value is neither a number nor a quantity".to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: Reading = Reading {
        aggregator: Aggregator::None,
        last_available_point_offset: 0,
        fill_value: None,
    };

    fn answer(series: &[&str]) -> String {
        let series: Vec<String> = series
            .iter()
            .map(|p| format!(r#"{{"metric":"m","scope":"s","pointlist":{p}}}"#))
            .collect();
        format!(
            r#"{{"status":"ok","res_type":"time_series","series":[{}],"from_date":1,"to_date":2,"query":"q"}}"#,
            series.join(",")
        )
    }

    #[test]
    fn values_follow_keda() {
        let max = Reading {
            aggregator: Aggregator::Max,
            ..ONE
        };
        let avg = Reading {
            aggregator: Aggregator::Average,
            ..ONE
        };
        let offset1 = Reading {
            last_available_point_offset: 1,
            ..ONE
        };
        let fill = Reading {
            fill_value: Some(-1.5),
            ..ONE
        };
        let rows: Vec<(String, Reading, Result<f64, &str>)> = vec![
            // The last point with a value, skipping trailing nulls.
            (answer(&["[[1,3.0],[2,7.5],[3,null]]"]), ONE, Ok(7.5)),
            // lastAvailablePointOffset points before it.
            (answer(&["[[1,3.0],[2,7.5],[3,null]]"]), offset1, Ok(3.0)),
            (
                answer(&["[[2,7.5]]"]),
                offset1,
                Err(
                    "the series has fewer points with a value than lastAvailablePointOffset (1) asks to skip",
                ),
            ),
            (
                answer(&["[]"]),
                fill,
                Err(
                    "the series has fewer points with a value than lastAvailablePointOffset (0) asks to skip",
                ),
            ),
            // No value at all: the filler, or an error.
            (answer(&["[[1,null]]"]), fill, Ok(-1.5)),
            (
                answer(&["[[1,null]]"]),
                ONE,
                Err(
                    "no Datadog metrics returned for the given time window (the chosen point has no value; set metricUnavailableValue to use a value instead)",
                ),
            ),
            (answer(&[]), fill, Ok(-1.5)),
            (
                answer(&[]),
                ONE,
                Err(
                    "no Datadog metrics returned for the given time window (no series; set metricUnavailableValue to use a value instead)",
                ),
            ),
            // Several series need an aggregator: max by default once set, or average.
            (
                answer(&["[[1,1.0]]", "[[1,4.0]]"]),
                ONE,
                Err(
                    "the query returned 2 series; modify the query to return only 1 series or add a queryAggregator",
                ),
            ),
            (answer(&["[[1,1.0]]", "[[1,4.0]]"]), max, Ok(4.0)),
            (answer(&["[[1,1.0]]", "[[1,4.0]]"]), avg, Ok(2.5)),
            (
                r#"{"status":"error","error":"SECRET","series":[]}"#.into(),
                fill,
                Err("Datadog answered the query with status \"error\""),
            ),
        ];
        for (i, (body, reading, expected)) in rows.into_iter().enumerate() {
            assert_eq!(
                query_value(body.as_bytes(), &reading),
                expected.map_err(str::to_string),
                "row {i}: {body}"
            );
        }
    }

    #[test]
    fn garbage_is_an_error_never_quoting_the_answer() {
        for body in [
            "",
            "SECRETSECRET",
            "[]",
            r#"{"series":[{"pointlist":[[1,"SECRETSECRET"]]}]}"#,
            r#"{"series":"SECRETSECRET"}"#,
        ] {
            let err = query_value(body.as_bytes(), &ONE).expect_err(body);
            assert!(!err.contains("SECRETSECRET"), "{err}");
        }
    }
}
