//! `sumologic`: scales on the result of a Sumo Logic metrics query (`POST
//! /api/v1/metricsQueries`) or of a log search job (`POST /api/v1/search/jobs`, then its state,
//! records and deletion), aggregated over the time range. Compatible with KEDA's `sumologic`
//! trigger (`pkg/scalers/sumologic_scaler.go`, `pkg/scalers/sumologic/`).
//!
//! Every trigger on the same API endpoint with the same access id and key, TLS setting and
//! timeout shares one HTTP client.

pub mod response;

use std::collections::BTreeMap;
use std::time::Duration;

use http::Method;
use http::header::{ACCEPT, CONTENT_TYPE, COOKIE, HeaderMap, HeaderValue, SET_COOKIE};
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::authentication::{AuthMode, HttpAuth};
use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError};
use crate::http_client::{self, HttpAnswer, HttpClientKey, describe_url, parse_http_url};
use crate::metadata::{AUTH, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pooled::{ApiRequest, HttpApi, HttpCall, Pooled};
use crate::remote::Classify;
use crate::scaler::MetricsAndActivity;
use crate::scalers::rabbitmq::config::KedaDuration;
use crate::secret::Secret;

pub use response::{Aggregator, aggregate, job_id, job_state, metrics_values, record_values};

const ACCESS_ID: Param = Param::required("accessID").order(AUTH);
const ACCESS_KEY: Param = Param::required("accessKey").order(AUTH).secret();
const HOST: Param = Param::required("host");
const UNSAFE_SSL: Param = Param::optional("unsafeSsl").default("false");
const QUERY_TYPE: Param = Param::required("queryType").allowed(&["logs", "metrics"]);
const QUERY: Param = Param::optional("query");
const RESULT_QUERY_ROW_ID: Param = Param::optional("resultQueryRowID");
const QUANTIZATION: Param = Param::optional("quantization").range(0.0, f64::MAX);
const ROLLUP: Param = Param::optional("rollup")
    .default("Avg")
    .allowed(&["Avg", "Sum", "Count", "Min", "Max"]);
const RESULT_FIELD: Param = Param::optional("resultField");
const LOGS_POLLING_INTERVAL: Param = Param::optional("logsPollingInterval").range(0.0, f64::MAX);
const MAX_RETRIES: Param = Param::optional("maxRetries");
const TIMERANGE: Param = Param::required("timerange").range(0.0, f64::MAX);
const TIMEZONE: Param = Param::optional("timezone").default("UTC");
const ACTIVATION_THRESHOLD: Param = Param::optional("activationThreshold").default("0");
const QUERY_AGGREGATOR: Param = Param::optional("queryAggregator")
    .default("Avg")
    .allowed(&["Latest", "Avg", "Sum", "Count", "Min", "Max"]);
const THRESHOLD: Param = Param::required("threshold");

/// The parameters of `sumologic` (besides `query.<rowId>`, read by prefix).
pub const PARAMS: &[Param] = &[
    ACCESS_ID,
    ACCESS_KEY,
    HOST,
    UNSAFE_SSL,
    QUERY_TYPE,
    QUERY,
    RESULT_QUERY_ROW_ID,
    QUANTIZATION,
    ROLLUP,
    RESULT_FIELD,
    LOGS_POLLING_INTERVAL,
    MAX_RETRIES,
    TIMERANGE,
    TIMEZONE,
    ACTIVATION_THRESHOLD,
    QUERY_AGGREGATOR,
    THRESHOLD,
];

/// The prefix of a multi-metrics query's parameters: `query.<rowId>`.
pub const MULTI_QUERY_PREFIX: &str = "query.";
/// KEDA's default attempts per request.
pub const DEFAULT_MAX_RETRIES: u32 = 3;
/// The most attempts per request keda-rs makes, whatever `maxRetries` says (KEDA has no bound;
/// its waits double from 1 s after every failed attempt).
pub const MAX_ATTEMPTS: u32 = 5;
/// KEDA's default wait between two looks at a log search job.
pub const DEFAULT_LOGS_POLLING_INTERVAL: Duration = Duration::from_secs(1);
/// The most looks at a log search job's state in one read (KEDA looks until it is done).
pub const MAX_JOB_POLLS: u32 = 60;
/// Records asked per page (KEDA's limit).
pub const RECORDS_PAGE: u64 = 10_000;
/// The most records one read takes (100 pages).
pub const MAX_RECORDS: u64 = 1_000_000;

/// What is queried.
#[derive(Clone, Debug, PartialEq)]
pub enum Search {
    /// `queryType: logs`: a log search job, `resultField` of each record.
    Logs {
        /// `query`.
        query: String,
        /// `resultField`.
        result_field: String,
        /// `logsPollingInterval`.
        polling_interval: Duration,
    },
    /// `queryType: metrics`: one query (row `A`) or several (`query.<rowId>`), the row read.
    Metrics {
        /// Queries by row id.
        queries: BTreeMap<String, String>,
        /// The row whose series is read.
        row: String,
        /// `quantization` in milliseconds.
        quantization_ms: i64,
        /// `rollup`.
        rollup: String,
    },
}

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct SumologicConfig {
    /// The API endpoint and the client key, or why `host` cannot be used.
    pub endpoint: Result<(url::Url, HttpClientKey), MetadataError>,
    /// What is searched.
    pub search: Search,
    /// `timerange`.
    pub timerange: Duration,
    /// `timezone`, or why it is no time zone (every read fails naming it, as in KEDA).
    pub timezone: Result<(String, jiff::tz::TimeZone), MetadataError>,
    /// `queryAggregator`.
    pub aggregator: Aggregator,
    /// Attempts per request.
    pub attempts: u32,
    /// `threshold`.
    pub threshold: f64,
    /// `activationThreshold`.
    pub activation: f64,
    /// `s<index>-sumologic-<queryType>`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
    headers: HeaderMap,
}

impl SumologicConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// What KEDA refuses: `accessID`, `accessKey`, `host`, `queryType`, `timerange` or
    /// `threshold` missing; an enum value not allowed; for logs, no `query` or `resultField`,
    /// or a `query.<rowId>`; for metrics, neither or both of `query` and `query.<rowId>`, a
    /// `resultQueryRowID` missing or naming no query, no `quantization`.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let mut queries = BTreeMap::new();
            for (key, value) in &ctx.metadata {
                if let Some(row) = key.strip_prefix(MULTI_QUERY_PREFIX) {
                    if row.is_empty() {
                        return Err(p.rule(format!(
                            "malformed parameter \"{key}\": no row id after \"query.\""
                        )));
                    }
                    if value.trim().is_empty() {
                        return Err(p.rule(format!("parameter \"{key}\" is empty")));
                    }
                    queries.insert(row.to_string(), value.clone());
                }
            }
            let access_id: String = p.get(&ACCESS_ID)?;
            let access_key: Secret = p.get(&ACCESS_KEY)?;
            let host: String = p.get(&HOST)?;
            let unsafe_ssl: bool = p.get(&UNSAFE_SSL)?;
            let query_type: String = p.get(&QUERY_TYPE)?;
            let query: Option<String> = p.get_opt(&QUERY)?;
            let row: Option<String> = p.get_opt(&RESULT_QUERY_ROW_ID)?;
            let quantization: Option<KedaDuration> = p.get_opt(&QUANTIZATION)?;
            let rollup: String = p.get(&ROLLUP)?;
            let result_field: Option<String> = p.get_opt(&RESULT_FIELD)?;
            let polling: Option<KedaDuration> = p.get_opt(&LOGS_POLLING_INTERVAL)?;
            let max_retries: Option<i64> = p.get_opt(&MAX_RETRIES)?;
            let timerange: KedaDuration = p.get(&TIMERANGE)?;
            let timezone: String = p.get(&TIMEZONE)?;
            let activation: f64 = p.get(&ACTIVATION_THRESHOLD)?;
            let aggregator = Aggregator::from_name(&p.get::<String>(&QUERY_AGGREGATOR)?)
                .unwrap_or(Aggregator::Avg);
            let threshold: f64 = p.get(&THRESHOLD)?;
            // KEDA's `Validate`.
            let search = if query_type == "logs" {
                let Some(query) = query else {
                    return Err(p.rule("missing required parameter \"query\""));
                };
                if !queries.is_empty() {
                    return Err(p.rule(
                        "parameters \"query.<rowId>\" are not supported for queryType logs",
                    ));
                }
                let Some(result_field) = result_field else {
                    return Err(p.rule(
                        "missing required parameter \"resultField\" (required for queryType logs)",
                    ));
                };
                Search::Logs {
                    query,
                    result_field,
                    polling_interval: polling
                        .map(|d| d.0)
                        .filter(|d| !d.is_zero())
                        .unwrap_or(DEFAULT_LOGS_POLLING_INTERVAL),
                }
            } else {
                let row = match (query, queries.is_empty()) {
                    (None, true) => {
                        return Err(p.rule(
                            "either \"query\" or \"query.<rowId>\" must be given for queryType metrics",
                        ));
                    }
                    (Some(_), false) => {
                        return Err(p.rule(
                            "only one of \"query\" or \"query.<rowId>\" may be given for queryType metrics",
                        ));
                    }
                    (Some(query), true) => {
                        queries.insert("A".to_string(), query);
                        "A".to_string()
                    }
                    (None, false) => {
                        let Some(row) = row else {
                            return Err(p.rule(
                                "missing required parameter \"resultQueryRowID\" for a multi-metrics query",
                            ));
                        };
                        if !queries.contains_key(&row) {
                            return Err(p.rule(format!(
                                "parameter \"resultQueryRowID\": no parameter \"query.{row}\""
                            )));
                        }
                        row
                    }
                };
                let quantization = quantization.map(|d| d.0).unwrap_or_default();
                if quantization.is_zero() {
                    return Err(p.rule(
                        "missing required parameter \"quantization\" for queryType metrics",
                    ));
                }
                Search::Metrics {
                    queries,
                    row,
                    quantization_ms: i64::try_from(quantization.as_millis()).unwrap_or(i64::MAX),
                    rollup,
                }
            };
            let timezone = jiff::tz::TimeZone::get(&timezone)
                .map(|tz| (timezone.clone(), tz))
                .map_err(|_| {
                    p.rule(format!(
                        "parameter \"{}\": {timezone:?} is not a time zone of the IANA database",
                        TIMEZONE.name
                    ))
                });
            let auth = HttpAuth {
                modes: vec![AuthMode::Basic],
                basic: Some((access_id, access_key)),
                tls: crate::tls::TlsSettings {
                    insecure: unsafe_ssl,
                    ..Default::default()
                },
                ..HttpAuth::default()
            };
            let endpoint = parse_http_url(p, &HOST, host.trim_end_matches('/')).map(|url| {
                let key = HttpClientKey {
                    origin: http_client::origin(&url),
                    auth,
                    timeout: ctx.global_http_timeout,
                };
                (url, key)
            });
            let attempts = match max_retries {
                None | Some(0) => DEFAULT_MAX_RETRIES,
                Some(n) => u32::try_from(n.clamp(0, i64::from(MAX_ATTEMPTS))).unwrap_or(MAX_ATTEMPTS),
            }
            .min(MAX_ATTEMPTS);
            let mut headers = HeaderMap::new();
            headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
            Ok(Self {
                endpoint,
                metric_name: ctx.metric_name(&format!("sumologic-{query_type}")),
                search,
                timerange: timerange.0,
                timezone,
                aggregator,
                attempts,
                threshold,
                activation,
                metric_type,
                headers,
            })
        })?)
    }

    fn base(&self) -> Result<&url::Url, ScalerError> {
        self.endpoint
            .as_ref()
            .map(|(url, _)| url)
            .map_err(|e| ScalerError::Metadata(e.clone()))
    }

    /// `base` with `segments` appended and `query`.
    pub fn url(base: &url::Url, segments: &[&str], query: &[(&str, String)]) -> url::Url {
        let mut url = base.clone();
        url.set_query(None);
        url.set_fragment(None);
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        if !query.is_empty() {
            let mut pairs = url.query_pairs_mut();
            for (k, v) in query {
                pairs.append_pair(k, v);
            }
        }
        url
    }

    /// `from` and `to` of a read at `now`: RFC 3339 in the trigger's time zone, whole seconds
    /// (Go's `time.RFC3339`: `Z` for a zero offset).
    ///
    /// # Errors
    /// `timezone` is no time zone.
    pub fn time_range(
        &self,
        now: jiff::Timestamp,
    ) -> Result<(String, String, String), MetadataError> {
        let (name, tz) = self.timezone.as_ref().map_err(Clone::clone)?;
        let span =
            jiff::SignedDuration::try_from(self.timerange).unwrap_or(jiff::SignedDuration::MAX);
        let from = now.checked_sub(span).unwrap_or(jiff::Timestamp::MIN);
        let format = |t: jiff::Timestamp| {
            let zoned = t.to_zoned(tz.clone());
            if zoned.offset().seconds() == 0 {
                zoned.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
            } else {
                zoned.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string()
            }
        };
        Ok((format(from), format(now), name.clone()))
    }

    /// The body of the metrics query at `now` (KEDA's `MetricsQueryRequest`).
    ///
    /// # Errors
    /// `timezone` is no time zone.
    pub fn metrics_body(&self, now: jiff::Timestamp) -> Result<String, MetadataError> {
        let Search::Metrics {
            queries,
            quantization_ms,
            rollup,
            ..
        } = &self.search
        else {
            return Ok(String::new());
        };
        let (from, to, _) = self.time_range(now)?;
        let queries: Vec<serde_json::Value> = queries
            .iter()
            .map(|(row, query)| {
                serde_json::json!({"rowId": row, "query": query, "quantization": quantization_ms, "rollup": rollup})
            })
            .collect();
        Ok(serde_json::json!({
            "queries": queries,
            "timeRange": {
                "type": "BeginBoundedTimeRange",
                "from": {"type": "Iso8601TimeRangeBoundary", "iso8601Time": from},
                "to": {"type": "Iso8601TimeRangeBoundary", "iso8601Time": to},
            },
        })
        .to_string())
    }

    /// One request with KEDA's retries: a status of 400 or more is tried again after 1 s, 2 s,
    /// 4 s, ... up to the attempts; a request that cannot be sent is not.
    async fn send(
        &self,
        call: &HttpCall<'_>,
        method: Method,
        url: url::Url,
        cookies: Option<&HeaderValue>,
        body: Option<String>,
    ) -> Result<HttpAnswer, ScalerError> {
        let operation = format!("Sumo Logic {method} {}", describe_url(&url));
        let mut headers = self.headers.clone();
        if body.is_some() {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        if let Some(cookies) = cookies {
            headers.insert(COOKIE, cookies.clone());
        }
        let mut wait = Duration::from_secs(1);
        let mut last = None;
        for attempt in 1..=self.attempts.max(1) {
            let answer = call
                .client
                .exchange(
                    method.clone(),
                    url.clone(),
                    &headers,
                    body.clone().map(bytes::Bytes::from),
                )
                .await
                .map_err(|e| ScalerError::Query {
                    trigger: call.read.trigger.clone(),
                    operation: operation.clone(),
                    source: e.classify(),
                })?;
            if answer.status.as_u16() < 400 {
                return Ok(answer);
            }
            last = Some(answer);
            if attempt < self.attempts {
                tokio::time::sleep(wait).await;
                wait = wait.saturating_mul(2);
            }
        }
        let failure = last
            .map(|a| a.into_status_error().classify())
            .unwrap_or_else(|| crate::remote::Failure::local("no attempt was made".to_string()));
        Err(ScalerError::Query {
            trigger: call.read.trigger.clone(),
            operation: format!("{operation} ({} attempts)", self.attempts.max(1)),
            source: failure,
        })
    }

    async fn metrics(&self, call: &HttpCall<'_>) -> Result<f64, ScalerError> {
        let Search::Metrics { row, .. } = &self.search else {
            return Err(call.read.unexpected("not a metrics query"));
        };
        let body = self
            .metrics_body(call.read.now())
            .map_err(ScalerError::Metadata)?;
        let url = Self::url(self.base()?, &["api", "v1", "metricsQueries"], &[]);
        let answer = self.send(call, Method::POST, url, None, Some(body)).await?;
        let values = metrics_values(&answer.body, row).map_err(|m| call.read.unexpected(m))?;
        aggregate(&values, self.aggregator).map_err(|m| call.read.unexpected(m))
    }

    async fn logs(&self, call: &HttpCall<'_>) -> Result<f64, ScalerError> {
        let Search::Logs {
            query,
            result_field,
            polling_interval,
        } = &self.search
        else {
            return Err(call.read.unexpected("not a log search"));
        };
        let (from, to, tz) = self
            .time_range(call.read.now())
            .map_err(ScalerError::Metadata)?;
        let base = self.base()?;
        let jobs = Self::url(base, &["api", "v1", "search", "jobs"], &[]);
        let body = serde_json::json!({"query": query, "from": from, "to": to, "timeZone": tz});
        let created = self
            .send(call, Method::POST, jobs, None, Some(body.to_string()))
            .await?;
        // The Search Job API keeps a job on the node that made it: its cookies go along.
        let cookies = cookie_header(&created.headers);
        let id = job_id(&created.body).map_err(|m| call.read.unexpected(m))?;
        let job = Self::url(base, &["api", "v1", "search", "jobs", &id], &[]);
        let mut polls = 0;
        let (records, messages) = loop {
            let answer = self
                .send(call, Method::GET, job.clone(), cookies.as_ref(), None)
                .await?;
            match job_state(&answer.body).map_err(|m| call.read.unexpected(m))? {
                response::JobState::Done { records, messages } => break (records, messages),
                response::JobState::Failed(state) => {
                    return Err(call
                        .read
                        .unexpected(format!("the Sumo Logic search job ended {state}")));
                }
                response::JobState::Running => {}
            }
            polls += 1;
            if polls >= MAX_JOB_POLLS {
                return Err(call.read.unexpected(format!(
                    "the Sumo Logic search job was not done after {MAX_JOB_POLLS} looks"
                )));
            }
            tokio::time::sleep(*polling_interval).await;
        };
        if messages > 0 && records == 0 {
            return Err(call.read.unexpected(
                "only aggregate queries are supported (the search found messages, no records): check parameter \"query\"",
            ));
        }
        if records == 0 {
            return Ok(0.0);
        }
        let total = records.min(MAX_RECORDS);
        let mut values = Vec::new();
        let mut offset = 0;
        let mut limit = RECORDS_PAGE;
        while offset < total {
            limit = limit.min(total - offset);
            let url = Self::url(
                base,
                &["api", "v1", "search", "jobs", &id, "records"],
                &[("offset", offset.to_string()), ("limit", limit.to_string())],
            );
            let answer = self
                .send(call, Method::GET, url, cookies.as_ref(), None)
                .await?;
            let page =
                record_values(&answer.body, result_field).map_err(|m| call.read.unexpected(m))?;
            let Some(page) = page else {
                break;
            };
            values.extend(page);
            offset += limit;
        }
        self.send(call, Method::DELETE, job, cookies.as_ref(), None)
            .await?;
        aggregate(&values, self.aggregator).map_err(|m| call.read.unexpected(m))
    }
}

/// The `Cookie` header that sends back every cookie an answer set.
fn cookie_header(headers: &HeaderMap) -> Option<HeaderValue> {
    let pairs: Vec<&str> = headers
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| v.split(';').next())
        .map(str::trim)
        .filter(|pair| pair.contains('='))
        .collect();
    (!pairs.is_empty())
        .then(|| HeaderValue::from_str(&pairs.join("; ")).ok())
        .flatten()
}

/// A `sumologic` scaler.
pub type SumologicScaler = Pooled<SumologicConfig>;

#[async_trait::async_trait]
impl HttpApi for SumologicConfig {
    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        SumologicConfig::parse(ctx)
    }

    fn client_key(&self) -> Result<HttpClientKey, MetadataError> {
        self.endpoint
            .as_ref()
            .map(|(_, key)| key.clone())
            .map_err(Clone::clone)
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target_milli(self.metric_type, self.threshold),
        )]
    }

    /// The first request of a read: the metrics query, or the creation of the search job.
    fn request(&self, now: jiff::Timestamp) -> Result<ApiRequest<'_>, MetadataError> {
        let (base, _) = self.endpoint.as_ref().map_err(Clone::clone)?;
        let (segments, body): (&[&str], String) = match &self.search {
            Search::Metrics { .. } => (&["api", "v1", "metricsQueries"], self.metrics_body(now)?),
            Search::Logs { query, .. } => {
                let (from, to, tz) = self.time_range(now)?;
                (
                    &["api", "v1", "search", "jobs"],
                    serde_json::json!({"query": query, "from": from, "to": to, "timeZone": tz})
                        .to_string(),
                )
            }
        };
        Ok(ApiRequest::post(
            Self::url(base, segments, &[]),
            std::borrow::Cow::Borrowed(&self.headers),
            body,
        ))
    }

    fn operation(&self, request: &ApiRequest<'_>) -> String {
        format!("Sumo Logic query on {}", describe_url(&request.url))
    }

    /// A metrics answer read alone.
    fn read(&self, body: &[u8], metric_name: &str) -> Result<MetricsAndActivity, String> {
        let row = match &self.search {
            Search::Metrics { row, .. } => row.as_str(),
            Search::Logs { .. } => "A",
        };
        let value = aggregate(&metrics_values(body, row)?, self.aggregator)?;
        Ok(MetricsAndActivity::single(
            metric_name,
            value,
            self.activation,
        ))
    }

    async fn fetch(
        &self,
        call: &HttpCall<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let value = match &self.search {
            Search::Metrics { .. } => self.metrics(call).await?,
            Search::Logs { .. } => self.logs(call).await?,
        };
        if !value.is_finite() {
            return Err(call
                .read
                .unexpected("the Sumo Logic result is not a finite number"));
        }
        Ok(MetricsAndActivity::single(
            metric_name,
            value,
            self.activation,
        ))
    }
}

#[cfg(test)]
mod tests;
