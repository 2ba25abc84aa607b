//! Cloud Monitoring's v3 REST API as KEDA's `StackDriverClient`
//! (`pkg/scalers/gcp/gcp_stackdriver_client.go`) uses it through the Go client:
//! - [`projects.timeSeries.list`](https://cloud.google.com/monitoring/api/ref_v3/rest/v3/projects.timeSeries/list)
//!   (`GetMetrics`: a filter over an interval, optionally aligned and reduced), the first point
//!   of the first time series;
//! - [`projects.timeSeries.query`](https://cloud.google.com/monitoring/api/ref_v3/rest/v3/projects.timeSeries/query)
//!   (`QueryMetrics`: a Monitoring Query Language query, `pageSize` 1), the first value of the
//!   first point of the first time series.
//!
//! No time series at all is KEDA's "could not find stackdriver metric": `valueIfNull` when the
//! trigger gives one, else an error. A series without points is -1, as in KEDA.

use std::fmt::Write as _;
use std::time::Duration;

use super::GcpClient;
use crate::error::{MetadataError, ScalerError};
use crate::http_client::describe_url;
use crate::metadata::MetadataParser;
use crate::pooled::ReadCtx;

/// Cloud Monitoring's host.
pub const HOST: &str = "monitoring.googleapis.com";
/// The most pages of `timeSeries.list` followed to find a first series (pages may be empty
/// while the next one holds series).
pub const MAX_PAGES: usize = 10;

/// KEDA's default MQL time horizon (`defaultTimeHorizon`, 2 minutes).
pub const DEFAULT_TIME_HORIZON: Duration = Duration::from_secs(120);
/// The horizon with an aggregation (`aggregationTimeHorizon`, 5 minutes).
pub const AGGREGATION_TIME_HORIZON: Duration = Duration::from_secs(300);
/// The alignment period of an aggregation (`alignmentPeriod`, 3 minutes).
pub const ALIGNMENT_PERIOD: Duration = Duration::from_secs(180);

/// A `timeSeries.list` aggregation (KEDA's `NewStackdriverAggregator`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Aggregation {
    /// `alignmentPeriod`, seconds.
    pub period_seconds: i64,
    /// `perSeriesAligner`: `ALIGN_*`.
    pub aligner: &'static str,
    /// `crossSeriesReducer`: `REDUCE_*`.
    pub reducer: &'static str,
}

const ALIGNERS: &[(&str, &str)] = &[
    ("", "ALIGN_NONE"),
    ("none", "ALIGN_NONE"),
    ("delta", "ALIGN_DELTA"),
    ("rate", "ALIGN_RATE"),
    ("interpolate", "ALIGN_INTERPOLATE"),
    ("next_older", "ALIGN_NEXT_OLDER"),
    ("min", "ALIGN_MIN"),
    ("max", "ALIGN_MAX"),
    ("mean", "ALIGN_MEAN"),
    ("count", "ALIGN_COUNT"),
    ("sum", "ALIGN_SUM"),
    ("stddev", "ALIGN_STDDEV"),
    ("count_true", "ALIGN_COUNT_TRUE"),
    ("count_false", "ALIGN_COUNT_FALSE"),
    ("fraction_true", "ALIGN_FRACTION_TRUE"),
    ("percentile_99", "ALIGN_PERCENTILE_99"),
    ("percentile_95", "ALIGN_PERCENTILE_95"),
    ("percentile_50", "ALIGN_PERCENTILE_50"),
    ("percentile_05", "ALIGN_PERCENTILE_05"),
    ("percent_change", "ALIGN_PERCENT_CHANGE"),
];

const REDUCERS: &[(&str, &str)] = &[
    ("", "REDUCE_NONE"),
    ("none", "REDUCE_NONE"),
    ("mean", "REDUCE_MEAN"),
    ("min", "REDUCE_MIN"),
    ("max", "REDUCE_MAX"),
    ("sum", "REDUCE_SUM"),
    ("stddev", "REDUCE_STDDEV"),
    ("count", "REDUCE_COUNT"),
    ("count_true", "REDUCE_COUNT_TRUE"),
    ("count_false", "REDUCE_COUNT_FALSE"),
    ("fraction_true", "REDUCE_FRACTION_TRUE"),
    ("percentile_99", "REDUCE_PERCENTILE_99"),
    ("percentile_95", "REDUCE_PERCENTILE_95"),
    ("percentile_50", "REDUCE_PERCENTILE_50"),
    ("percentile_05", "REDUCE_PERCENTILE_05"),
];

impl Aggregation {
    /// KEDA's aggregator of `alignmentPeriodSeconds`, `alignmentAligner` and
    /// `alignmentReducer` (names case-insensitive).
    ///
    /// # Errors
    /// An unknown aligner or reducer (KEDA's "unknown aligner: x").
    pub fn parse(
        p: &MetadataParser<'_>,
        period_seconds: i64,
        aligner: &str,
        reducer: &str,
    ) -> Result<Self, MetadataError> {
        let lookup = |table: &[(&str, &'static str)], name: &str| {
            table
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| *v)
        };
        let aligner = lookup(ALIGNERS, aligner)
            .ok_or_else(|| p.rule(format!("unknown aligner: {aligner}")))?;
        let reducer = lookup(REDUCERS, reducer)
            .ok_or_else(|| p.rule(format!("unknown reducer: {reducer}")))?;
        Ok(Self {
            period_seconds,
            aligner,
            reducer,
        })
    }
}

/// KEDA's `GetMetrics`: `timeSeries.list` of `project` with `filter` and
/// ` AND resource.labels.project_id="<project>"`, over the last `filter_minutes` (2 when not
/// positive), the first point of the first series; no series is `value_if_null` or an error.
///
/// # Errors
/// The request fails, the answer is unusable, or no series and no `value_if_null`.
pub async fn get_metrics(
    client: &GcpClient,
    read: ReadCtx<'_>,
    base: &url::Url,
    request: &ListRequest<'_>,
) -> Result<f64, ScalerError> {
    let end = read.now().as_second();
    let minutes = if request.filter_minutes <= 0 {
        2
    } else {
        request.filter_minutes
    };
    let start = end.saturating_sub(minutes.saturating_mul(60));
    let filter = format!(
        "{} AND resource.labels.project_id=\"{}\"",
        request.filter, request.project
    );
    let operation = format!(
        "Cloud Monitoring timeSeries.list in project {} on {}",
        request.project,
        describe_url(base)
    );
    let mut page_token: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let url = list_url(
            base,
            request.project,
            &filter,
            (start, end),
            request.aggregation,
            page_token.as_deref(),
        )
        .ok_or_else(|| read.unexpected("the Cloud Monitoring URL cannot be formed"))?;
        let body = client.call(read, &operation, url, None).await?;
        let (value, next) = list_page(&body).map_err(|why| read.unexpected(why))?;
        if let Some(value) = value {
            return Ok(value);
        }
        match next {
            Some(next) => page_token = Some(next),
            None => break,
        }
    }
    request.value_if_null.ok_or_else(|| {
        read.unexpected(format!(
            "could not find stackdriver metric with filter {filter}"
        ))
    })
}

/// What [`get_metrics`] asks for.
pub struct ListRequest<'a> {
    /// The project.
    pub project: &'a str,
    /// The trigger's filter.
    pub filter: &'a str,
    /// The aggregation, if any.
    pub aggregation: Option<&'a Aggregation>,
    /// The value when there is no series.
    pub value_if_null: Option<f64>,
    /// `filterDuration`, minutes.
    pub filter_minutes: i64,
}

/// KEDA's `QueryMetrics`: `timeSeries.query` of `project` with `query` (`pageSize` 1), the first
/// value of the first point of the first series; no series is `value_if_null` or an error.
///
/// # Errors
/// The request fails, the answer is unusable, or no series and no `value_if_null`.
pub async fn query_metrics(
    client: &GcpClient,
    read: ReadCtx<'_>,
    base: &url::Url,
    project: &str,
    query: &str,
    value_if_null: Option<f64>,
) -> Result<f64, ScalerError> {
    let (url, body) = query_request(base, project, query)
        .ok_or_else(|| read.unexpected("the Cloud Monitoring URL cannot be formed"))?;
    let operation = format!(
        "Cloud Monitoring timeSeries.query in project {project} on {}",
        describe_url(base)
    );
    let answer = client
        .call(read, &operation, url, Some(body.into()))
        .await?;
    match query_answer(&answer).map_err(|why| read.unexpected(why))? {
        Some(value) => Ok(value),
        None => value_if_null.ok_or_else(|| {
            read.unexpected(format!(
                "could not find stackdriver metric with query {query}"
            ))
        }),
    }
}

/// `timeSeries.list` of `project` for `filter` over `[start, end]` (Unix seconds), with the
/// aggregation when there is one, at page `page_token`.
pub fn list_url(
    base: &url::Url,
    project: &str,
    filter: &str,
    (start, end): (i64, i64),
    aggregation: Option<&Aggregation>,
    page_token: Option<&str>,
) -> Option<url::Url> {
    let mut url = base.clone();
    url.path_segments_mut()
        .ok()?
        .pop_if_empty()
        .extend(["v3", "projects", project, "timeSeries"]);
    let rfc3339 = |s: i64| jiff::Timestamp::from_second(s).ok().map(|t| t.to_string());
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("filter", filter)
            .append_pair("interval.startTime", &rfc3339(start)?)
            .append_pair("interval.endTime", &rfc3339(end)?);
        if let Some(a) = aggregation {
            q.append_pair(
                "aggregation.alignmentPeriod",
                &format!("{}s", a.period_seconds),
            )
            .append_pair("aggregation.perSeriesAligner", a.aligner)
            .append_pair("aggregation.crossSeriesReducer", a.reducer);
        }
        if let Some(token) = page_token {
            q.append_pair("pageToken", token);
        }
    }
    Some(url)
}

/// `timeSeries.query` of `project`: the URL and the JSON body with `query` and `pageSize` 1.
pub fn query_request(base: &url::Url, project: &str, query: &str) -> Option<(url::Url, Vec<u8>)> {
    let mut url = base.clone();
    url.path_segments_mut()
        .ok()?
        .pop_if_empty()
        .extend(["v3", "projects", project]);
    let path = format!("{}/timeSeries:query", url.path());
    url.set_path(&path);
    let body = serde_json::json!({"query": query, "pageSize": 1}).to_string();
    Some((url, body.into_bytes()))
}

/// One page of a `timeSeries.list` answer (`ListTimeSeriesResponse`): the first point's value
/// of the first series (`Some(-1)` for a series without points, `None` for no series) and the
/// next page's token.
///
/// # Errors
/// Not the documented shape, or a first point whose value is not a number (KEDA's "could not
/// extract value"). Messages never quote the answer.
pub fn list_page(body: &[u8]) -> Result<(Option<f64>, Option<String>), String> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Answer {
        #[serde(default)]
        time_series: Option<Vec<Series>>,
        #[serde(default)]
        next_page_token: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct Series {
        #[serde(default)]
        points: Option<Vec<Point>>,
    }
    #[derive(serde::Deserialize)]
    struct Point {
        #[serde(default)]
        value: serde_json::Value,
    }
    let answer: Answer = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the Cloud Monitoring answer is not a ListTimeSeriesResponse: {}",
            crate::remote::json_error(&e)
        )
    })?;
    let next = answer.next_page_token.filter(|t| !t.is_empty());
    let Some(series) = answer.time_series.unwrap_or_default().into_iter().next() else {
        return Ok((None, next));
    };
    match series.points.unwrap_or_default().first() {
        None => Ok((Some(-1.0), next)),
        Some(point) => typed_value(&point.value).map(|v| (Some(v), next)),
    }
}

/// A `timeSeries.query` answer (`QueryTimeSeriesResponse`): the first value of the first point
/// of the first series (`Some(-1)` for a series without points, `None` for no series).
///
/// # Errors
/// As [`list_page`].
pub fn query_answer(body: &[u8]) -> Result<Option<f64>, String> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Answer {
        #[serde(default)]
        time_series_data: Option<Vec<Data>>,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Data {
        #[serde(default)]
        point_data: Option<Vec<PointData>>,
    }
    #[derive(serde::Deserialize)]
    struct PointData {
        #[serde(default)]
        values: Option<Vec<serde_json::Value>>,
    }
    let answer: Answer = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the Cloud Monitoring answer is not a QueryTimeSeriesResponse: {}",
            crate::remote::json_error(&e)
        )
    })?;
    let Some(data) = answer
        .time_series_data
        .unwrap_or_default()
        .into_iter()
        .next()
    else {
        return Ok(None);
    };
    let Some(point) = data.point_data.unwrap_or_default().into_iter().next() else {
        return Ok(Some(-1.0));
    };
    let values = point.values.unwrap_or_default();
    let first = values
        .first()
        .ok_or("the first point of the Cloud Monitoring answer has no values")?;
    typed_value(first).map(Some)
}

/// A `TypedValue`: `int64Value` (a JSON string or number) or `doubleValue` (a number, or
/// `"NaN"`, `"Infinity"`, `"-Infinity"`); any other kind is KEDA's "could not extract value".
fn typed_value(value: &serde_json::Value) -> Result<f64, String> {
    let number = |v: &serde_json::Value| -> Option<f64> {
        match v {
            serde_json::Value::Number(n) => n.as_f64(),
            serde_json::Value::String(s) => match s.as_str() {
                "NaN" => Some(f64::NAN),
                "Infinity" => Some(f64::INFINITY),
                "-Infinity" => Some(f64::NEG_INFINITY),
                s => s.parse::<f64>().ok(),
            },
            _ => None,
        }
    };
    if let Some(v) = value.get("int64Value") {
        // Unbounded integers are taken as Go's float64(int64) would: the JSON holds an int64.
        return match v {
            serde_json::Value::String(s) => s.parse::<i64>().ok(),
            serde_json::Value::Number(n) => n.as_i64(),
            _ => None,
        }
        .map(|i| {
            #[allow(clippy::cast_precision_loss)]
            let f = i as f64;
            f
        })
        .ok_or_else(|| "a point's int64Value is not an integer".to_string());
    }
    if let Some(v) = value.get("doubleValue") {
        return number(v).ok_or_else(|| "a point's doubleValue is not a number".to_string());
    }
    let kind = value
        .as_object()
        .and_then(|o| o.keys().next().cloned())
        .unwrap_or_else(|| "none".into());
    let kind = match kind.as_str() {
        "boolValue" | "stringValue" | "distributionValue" => kind,
        _ => "unknown".into(),
    };
    Err(format!(
        "could not extract value from metric of type {kind}: only int64 and double values scale"
    ))
}

/// Go's `time.Duration.String()` for a non-negative duration (`2m0s`, `1h30m0s`, `1.5s`,
/// `500ms`), as KEDA writes durations into MQL.
pub fn go_duration(d: Duration) -> String {
    if d.is_zero() {
        return "0s".into();
    }
    let nanos = d.as_nanos();
    if nanos < 1_000_000_000 {
        let (unit, scale) = if nanos < 1_000 {
            ("ns", 1)
        } else if nanos < 1_000_000 {
            ("µs", 1_000)
        } else {
            ("ms", 1_000_000)
        };
        return format!("{}{unit}", fraction(nanos, scale));
    }
    let total_seconds = d.as_secs();
    let (h, m, s) = (
        total_seconds / 3600,
        (total_seconds % 3600) / 60,
        total_seconds % 60,
    );
    let seconds = fraction(
        u128::from(s) * 1_000_000_000 + u128::from(d.subsec_nanos()),
        1_000_000_000,
    );
    let mut out = String::new();
    if h > 0 {
        let _ = write!(out, "{h}h");
    }
    if h > 0 || m > 0 {
        let _ = write!(out, "{m}m");
    }
    let _ = write!(out, "{seconds}s");
    out
}

/// `value / scale` with its fraction's trailing zeros removed.
fn fraction(value: u128, scale: u128) -> String {
    let whole = value / scale;
    let rest = value % scale;
    if rest == 0 {
        return whole.to_string();
    }
    let width = scale.to_string().len() - 1;
    let digits = format!("{rest:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// Go's `time.ParseDuration` for what a trigger writes (`90s`, `1m30s`, `1.5h`, `500ms`):
/// signed decimal numbers with units `ns`, `us`/`µs`, `ms`, `s`, `m`, `h`. Negative durations
/// come back as zero (KEDA uses the default for a horizon at or below zero).
pub fn parse_go_duration(text: &str) -> Option<Duration> {
    let mut rest = text.trim();
    let negative = rest.starts_with('-');
    rest = rest.trim_start_matches(['-', '+']);
    if rest == "0" {
        return Some(Duration::ZERO);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..number_end].parse().ok()?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[unit_end..];
        total += number * seconds;
    }
    if negative {
        return Some(Duration::ZERO);
    }
    Duration::try_from_secs_f64(total).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_written_as_go_writes_them() {
        // (duration, Go's String())
        let rows = [
            (Duration::from_secs(120), "2m0s"),
            (Duration::from_secs(300), "5m0s"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_secs(5400), "1h30m0s"),
            (Duration::from_secs(3600), "1h0m0s"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_millis(500), "500ms"),
            (Duration::from_secs(7), "7s"),
        ];
        for (d, text) in rows {
            assert_eq!(go_duration(d), text);
            assert_eq!(parse_go_duration(text), Some(d), "{text}");
        }
        assert_eq!(parse_go_duration("1.5h"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("-5m"), Some(Duration::ZERO));
        assert_eq!(parse_go_duration("5"), None);
        assert_eq!(parse_go_duration("5x"), None);
    }

    #[test]
    fn answers_give_the_first_value_minus_one_or_nothing() {
        let list = br#"{"timeSeries":[{"metric":{"type":"t"},"points":[{"interval":{},"value":{"int64Value":"42"}},{"value":{"int64Value":"1"}}]},{"points":[{"value":{"doubleValue":9}}]}],"nextPageToken":""}"#;
        assert_eq!(list_page(list).unwrap(), (Some(42.0), None));
        let double = br#"{"timeSeries":[{"points":[{"value":{"doubleValue":2.5}}]}]}"#;
        assert_eq!(list_page(double).unwrap(), (Some(2.5), None));
        assert_eq!(
            list_page(br#"{"timeSeries":[{"points":[]}]}"#).unwrap(),
            (Some(-1.0), None)
        );
        assert_eq!(
            list_page(br#"{"nextPageToken":"p2"}"#).unwrap(),
            (None, Some("p2".into()))
        );
        assert_eq!(list_page(b"{}").unwrap(), (None, None));
        let err = list_page(br#"{"timeSeries":[{"points":[{"value":{"stringValue":"s3cret"}}]}]}"#)
            .unwrap_err();
        assert!(
            err.contains("stringValue") && !err.contains("s3cret"),
            "{err}"
        );
        let query = br#"{"timeSeriesDescriptor":{},"timeSeriesData":[{"labelValues":[],"pointData":[{"values":[{"int64Value":"7"}],"timeInterval":{}}]}]}"#;
        assert_eq!(query_answer(query).unwrap(), Some(7.0));
        assert_eq!(query_answer(b"{}").unwrap(), None);
        assert_eq!(
            query_answer(br#"{"timeSeriesData":[{"pointData":[]}]}"#).unwrap(),
            Some(-1.0)
        );
        assert!(query_answer(b"not json").is_err());
    }

    #[test]
    fn requests_follow_the_rest_reference() {
        let base = url::Url::parse("https://monitoring.googleapis.com/").unwrap();
        let (url, body) = query_request(&base, "my-project", "fetch x").unwrap();
        assert_eq!(
            url.as_str(),
            "https://monitoring.googleapis.com/v3/projects/my-project/timeSeries:query"
        );
        assert_eq!(
            String::from_utf8(body).unwrap(),
            r#"{"pageSize":1,"query":"fetch x"}"#
        );
        let aggregation = Aggregation {
            period_seconds: 120,
            aligner: "ALIGN_MEAN",
            reducer: "REDUCE_SUM",
        };
        let url = list_url(
            &base,
            "p",
            "metric.type=\"a\"",
            (1_700_000_000 - 120, 1_700_000_000),
            Some(&aggregation),
            None,
        )
        .unwrap();
        assert_eq!(url.path(), "/v3/projects/p/timeSeries");
        let q: Vec<(String, String)> = url.query_pairs().into_owned().collect();
        assert_eq!(
            q,
            [
                ("filter", "metric.type=\"a\""),
                ("interval.startTime", "2023-11-14T22:11:20Z"),
                ("interval.endTime", "2023-11-14T22:13:20Z"),
                ("aggregation.alignmentPeriod", "120s"),
                ("aggregation.perSeriesAligner", "ALIGN_MEAN"),
                ("aggregation.crossSeriesReducer", "REDUCE_SUM"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
        );
    }
}
