//! The Sumo Logic answers a read uses, in KEDA's reading (`pkg/scalers/sumologic/`): a metrics
//! query's series, a search job's id, state and records, and the aggregation over the values.
//! Errors never quote the answer.

use std::collections::HashMap;

/// `queryAggregator`: how the values of the time range become one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aggregator {
    /// The last value.
    Latest,
    /// The mean.
    Avg,
    /// The sum.
    Sum,
    /// How many values.
    Count,
    /// The least.
    Min,
    /// The greatest.
    Max,
}

impl Aggregator {
    /// The aggregator named `name` (KEDA's spelling).
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "Latest" => Self::Latest,
            "Avg" => Self::Avg,
            "Sum" => Self::Sum,
            "Count" => Self::Count,
            "Min" => Self::Min,
            "Max" => Self::Max,
            _ => return None,
        })
    }
}

/// KEDA's `metricsStats`.
///
/// # Errors
/// No values.
pub fn aggregate(values: &[f64], aggregator: Aggregator) -> Result<f64, String> {
    let Some(last) = values.last() else {
        return Err("the Sumo Logic query returned no values to aggregate".into());
    };
    #[allow(clippy::cast_precision_loss)]
    let count = values.len() as f64;
    Ok(match aggregator {
        Aggregator::Latest => *last,
        Aggregator::Sum => values.iter().sum(),
        Aggregator::Count => count,
        Aggregator::Avg => values.iter().sum::<f64>() / count,
        Aggregator::Min => values.iter().copied().fold(f64::INFINITY, f64::min),
        Aggregator::Max => values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    })
}

fn not(what: &str, e: &crate::remote::JsonError) -> String {
    format!(
        "the Sumo Logic answer is not {what}: {}",
        crate::remote::json_error(e)
    )
}

/// The values of row `row`'s only time series in a metrics query answer (`{"queryResult":
/// [{"rowId": "A", "timeSeriesList": {"timeSeries": [{"points": {"timestamps": [...],
/// "values": [...]}}]}}], "errors": ...}`). A `null` value reads as 0, as Go reads it.
///
/// # Errors
/// Not that shape, query errors reported, no such row, no series or more than one, no points.
pub fn metrics_values(body: &[u8], row: &str) -> Result<Vec<f64>, String> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Answer {
        #[serde(default)]
        query_result: Option<Vec<QueryResult>>,
        #[serde(default)]
        errors: Option<Errors>,
    }
    #[derive(serde::Deserialize)]
    struct Errors {
        #[serde(default)]
        errors: Option<Vec<serde_json::Value>>,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct QueryResult {
        #[serde(default)]
        row_id: String,
        #[serde(default)]
        time_series_list: Option<SeriesList>,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct SeriesList {
        #[serde(default)]
        time_series: Option<Vec<Series>>,
    }
    #[derive(serde::Deserialize)]
    struct Series {
        #[serde(default)]
        points: Option<Points>,
    }
    #[derive(serde::Deserialize)]
    struct Points {
        #[serde(default)]
        timestamps: Option<Vec<Option<i64>>>,
        #[serde(default)]
        values: Option<Vec<Option<f64>>>,
    }
    let answer: Answer =
        crate::remote::from_json(body).map_err(|e| not("a metrics query result", &e))?;
    if let Some(errors) = answer.errors.and_then(|e| e.errors)
        && !errors.is_empty()
    {
        return Err(format!(
            "Sumo Logic reported {} error(s) running the query (check parameter \"query\")",
            errors.len()
        ));
    }
    let results = answer.query_result.unwrap_or_default();
    if results.is_empty() {
        return Err("the Sumo Logic metrics query result is empty".into());
    }
    let result = results
        .into_iter()
        .find(|r| r.row_id == row)
        .ok_or_else(|| {
            format!("the metrics query result has no row {row:?} (parameter \"resultQueryRowID\")")
        })?;
    let mut series = result
        .time_series_list
        .and_then(|l| l.time_series)
        .unwrap_or_default();
    match series.len() {
        0 => return Err("the metrics query result has no time series".into()),
        1 => {}
        _ => {
            return Err(
                "the metrics query result has several time series; only single time series queries are supported"
                    .into(),
            );
        }
    }
    let points = series.remove(0).points;
    let (timestamps, values) = points
        .map(|p| {
            (
                p.timestamps.unwrap_or_default(),
                p.values.unwrap_or_default(),
            )
        })
        .unwrap_or_default();
    if timestamps.is_empty() || values.is_empty() {
        return Err("the metrics query returned no timestamps or no values".into());
    }
    Ok(values.into_iter().map(Option::unwrap_or_default).collect())
}

/// The `id` of a created search job (`{"id": "...", "link": {...}}`).
///
/// # Errors
/// Not that shape, or no id.
pub fn job_id(body: &[u8]) -> Result<String, String> {
    #[derive(serde::Deserialize)]
    struct Created {
        #[serde(default)]
        id: String,
    }
    let created: Created = crate::remote::from_json(body).map_err(|e| not("a search job", &e))?;
    if created.id.is_empty()
        || !created
            .id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err("the Sumo Logic search job has no usable id".into());
    }
    Ok(created.id)
}

/// Where a search job is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobState {
    /// `DONE GATHERING RESULTS`, with its counts.
    Done {
        /// `recordCount`.
        records: u64,
        /// `messageCount`.
        messages: u64,
    },
    /// `CANCELLED` or `FORCE PAUSED`.
    Failed(&'static str),
    /// Any other state: look again.
    Running,
}

/// A search job's state (`{"state": "DONE GATHERING RESULTS", "messageCount": 90,
/// "recordCount": 1, ...}`).
///
/// # Errors
/// Not that shape.
pub fn job_state(body: &[u8]) -> Result<JobState, String> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Status {
        #[serde(default)]
        state: String,
        #[serde(default)]
        record_count: i64,
        #[serde(default)]
        message_count: i64,
    }
    let status: Status =
        crate::remote::from_json(body).map_err(|e| not("a search job status", &e))?;
    Ok(match status.state.as_str() {
        "DONE GATHERING RESULTS" => JobState::Done {
            records: u64::try_from(status.record_count).unwrap_or(0),
            messages: u64::try_from(status.message_count).unwrap_or(0),
        },
        "CANCELLED" => JobState::Failed("CANCELLED"),
        "FORCE PAUSED" => JobState::Failed("FORCE PAUSED"),
        _ => JobState::Running,
    })
}

/// The numbers in field `field` of a records page (`{"fields": [...], "records": [{"map":
/// {"_count": "90"}}]}`); `None` when the page has no records (the last page).
///
/// # Errors
/// Not that shape, or a record's `field` is not a number.
pub fn record_values(body: &[u8], field: &str) -> Result<Option<Vec<f64>>, String> {
    #[derive(serde::Deserialize)]
    struct Page {
        #[serde(default)]
        records: Option<Vec<Record>>,
    }
    #[derive(serde::Deserialize)]
    struct Record {
        #[serde(default)]
        map: HashMap<String, String>,
    }
    let page: Page = crate::remote::from_json(body).map_err(|e| not("a page of records", &e))?;
    let records = page.records.unwrap_or_default();
    if records.is_empty() {
        return Ok(None);
    }
    let mut values = Vec::with_capacity(records.len());
    for record in records {
        if let Some(text) = record.map.get(field) {
            let value: f64 = text.trim().parse().map_err(|_| {
                format!("a record's field {field:?} (parameter \"resultField\") is not a number")
            })?;
            values.push(value);
        }
    }
    Ok(Some(values))
}
