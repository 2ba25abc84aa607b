//! `aws-cloudwatch`: a value of an Amazon CloudWatch metric or metric math expression (KEDA's
//! `aws_cloudwatch_scaler.go`).
//!
//! One `GetMetricData` call (CloudWatch's query protocol) per poll, over the window that ends
//! at now minus `metricEndTimeOffset` truncated to `metricStatPeriod` and lasts
//! `metricCollectionTime`, newest first; the value is the newest value of the first result.
//! With no value: `minMetricValue`, or an error when `ignoreNullValues` is false. Active iff the
//! value is above `activationTargetMetricValue`. Metric `s<i>-aws-cloudwatch`, milli target
//! `targetMetricValue`.

use async_trait::async_trait;
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::aws::client::{CLOUDWATCH, Input, Service};
use crate::aws::source::{AwsApi, AwsCall};
use crate::aws::{AwsSettings, COMMON_PARAMS};
use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError};
use crate::metadata::{MetadataParser, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::scaler::MetricsAndActivity;

const NAMESPACE: Param = Param::optional("namespace");
const METRIC_NAME: Param = Param::optional("metricName");
const DIMENSION_NAME: Param = Param::optional("dimensionName").separator(";");
const DIMENSION_VALUE: Param = Param::optional("dimensionValue").separator(";");
const EXPRESSION: Param = Param::optional("expression");
const TARGET_METRIC_VALUE: Param = Param::required("targetMetricValue");
const ACTIVATION_TARGET_METRIC_VALUE: Param =
    Param::optional("activationTargetMetricValue").default("0");
const MIN_METRIC_VALUE: Param = Param::required("minMetricValue");
const IGNORE_NULL_VALUES: Param = Param::optional("ignoreNullValues").default("true");
/// Seconds; at most a year.
const METRIC_COLLECTION_TIME: Param = Param::optional("metricCollectionTime")
    .default("300")
    .range(0.0, 31_536_000.0);
const METRIC_STAT: Param = Param::optional("metricStat").default("Average");
const METRIC_UNIT: Param = Param::optional("metricUnit");
/// Seconds; at most a day.
const METRIC_STAT_PERIOD: Param = Param::optional("metricStatPeriod")
    .default("300")
    .range(1.0, 86_400.0);
/// Seconds; at most a year.
const METRIC_END_TIME_OFFSET: Param = Param::optional("metricEndTimeOffset")
    .default("0")
    .range(0.0, 31_536_000.0);
const AWS_ACCOUNT_ID: Param = Param::optional("awsAccountId");

/// The parameters of `aws-cloudwatch`.
pub const PARAMS: &[Param] = &[
    NAMESPACE,
    METRIC_NAME,
    DIMENSION_NAME,
    DIMENSION_VALUE,
    EXPRESSION,
    TARGET_METRIC_VALUE,
    ACTIVATION_TARGET_METRIC_VALUE,
    MIN_METRIC_VALUE,
    IGNORE_NULL_VALUES,
    METRIC_COLLECTION_TIME,
    METRIC_STAT,
    METRIC_UNIT,
    METRIC_STAT_PERIOD,
    METRIC_END_TIME_OFFSET,
    AWS_ACCOUNT_ID,
    COMMON_PARAMS[0],
    COMMON_PARAMS[1],
    COMMON_PARAMS[2],
    COMMON_PARAMS[3],
    COMMON_PARAMS[4],
    COMMON_PARAMS[5],
    COMMON_PARAMS[6],
    COMMON_PARAMS[7],
    COMMON_PARAMS[8],
    COMMON_PARAMS[9],
];

/// CloudWatch's `StandardUnit` values.
pub const STANDARD_UNITS: &[&str] = &[
    "Seconds",
    "Microseconds",
    "Milliseconds",
    "Bytes",
    "Kilobytes",
    "Megabytes",
    "Gigabytes",
    "Terabytes",
    "Bits",
    "Kilobits",
    "Megabits",
    "Gigabits",
    "Terabits",
    "Percent",
    "Count",
    "Bytes/Second",
    "Kilobytes/Second",
    "Megabytes/Second",
    "Gigabytes/Second",
    "Terabytes/Second",
    "Bits/Second",
    "Kilobits/Second",
    "Megabits/Second",
    "Gigabits/Second",
    "Terabits/Second",
    "Count/Second",
    "None",
];

/// Seconds from Go's zero time (0001-01-01T00:00:00Z) to the Unix epoch: Go's `Truncate`
/// rounds down to a multiple of the period since the zero time.
const GO_ZERO_TO_UNIX: i64 = 62_135_596_800;

/// What is asked for.
#[derive(Clone, Debug, PartialEq)]
pub enum Query {
    /// A metric math or search expression (query id `q1`).
    Expression(String),
    /// One metric's statistic (query id `c1`).
    Metric {
        /// `namespace`.
        namespace: String,
        /// `metricName`.
        metric_name: String,
        /// `dimensionName` and `dimensionValue`, paired.
        dimensions: Vec<(String, String)>,
        /// `metricStat`.
        stat: String,
        /// `metricUnit`.
        unit: Option<String>,
    },
}

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct CloudWatchConfig {
    /// The query.
    pub query: Query,
    /// `metricStatPeriod`, seconds.
    pub period: i64,
    /// `metricCollectionTime`, seconds.
    pub collection_time: i64,
    /// `metricEndTimeOffset`, seconds.
    pub end_time_offset: i64,
    /// `awsAccountId` (cross-account observability).
    pub account_id: Option<String>,
    /// `targetMetricValue`.
    pub target: f64,
    /// `activationTargetMetricValue`.
    pub activation: f64,
    /// `minMetricValue`: the value when CloudWatch has none.
    pub min_value: f64,
    /// `ignoreNullValues`.
    pub ignore_null_values: bool,
    /// Region, endpoint, credentials.
    pub aws: AwsSettings,
    /// `s<index>-aws-cloudwatch`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
}

impl CloudWatchConfig {
    /// Parses the trigger with KEDA's rules.
    ///
    /// # Errors
    /// A parameter is missing or malformed; without `expression`: `namespace`, `metricName`,
    /// `dimensionName` or `dimensionValue` missing, dimension lists of different lengths, an
    /// unknown `metricUnit`; `metricStatPeriod` not 1, 5, 10, 30 or a multiple of 60;
    /// `metricCollectionTime` not a multiple of `metricStatPeriod`.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let period: i64 = p.get(&METRIC_STAT_PERIOD)?;
            check_period(p, period)?;
            let collection_time: i64 = p.get(&METRIC_COLLECTION_TIME)?;
            if collection_time % period != 0 {
                return Err(p.rule(format!(
                    "parameter \"metricCollectionTime\" must be a multiple of metricStatPeriod \
                     ({period}), {collection_time} is given"
                )));
            }
            let query = match p.get_opt::<String>(&EXPRESSION)? {
                Some(expression) => Query::Expression(expression),
                None => metric_query(p)?,
            };
            Ok(Self {
                query,
                period,
                collection_time,
                end_time_offset: p.get(&METRIC_END_TIME_OFFSET)?,
                account_id: p.get_opt(&AWS_ACCOUNT_ID)?,
                target: p.get(&TARGET_METRIC_VALUE)?,
                activation: p.get(&ACTIVATION_TARGET_METRIC_VALUE)?,
                min_value: p.get(&MIN_METRIC_VALUE)?,
                ignore_null_values: p.get(&IGNORE_NULL_VALUES)?,
                aws: AwsSettings::parse(p)?,
                metric_name: ctx.metric_name("aws-cloudwatch"),
                metric_type,
            })
        })?)
    }

    /// The query window at `now`: (start, end).
    pub fn window(&self, now: jiff::Timestamp) -> (jiff::Timestamp, jiff::Timestamp) {
        // Every value is bounded by its parameter's range, so none of this overflows; the
        // saturating forms only keep it panic-free.
        let since_zero = now
            .as_second()
            .saturating_sub(self.end_time_offset)
            .saturating_add(GO_ZERO_TO_UNIX);
        let end = since_zero
            .saturating_sub(since_zero.rem_euclid(self.period))
            .saturating_sub(GO_ZERO_TO_UNIX);
        let start = end.saturating_sub(self.collection_time);
        let at = |s: i64| jiff::Timestamp::from_second(s).unwrap_or(now);
        (at(start), at(end))
    }

    /// The `GetMetricData` parameters at `now` (after `Action` and `Version`).
    pub fn request(&self, now: jiff::Timestamp) -> Vec<(String, String)> {
        let (start, end) = self.window(now);
        let time = |t: jiff::Timestamp| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        let q = "MetricDataQueries.member.1";
        let mut params = vec![
            ("StartTime".to_string(), time(start)),
            ("EndTime".to_string(), time(end)),
            ("ScanBy".to_string(), "TimestampDescending".to_string()),
        ];
        match &self.query {
            Query::Expression(expression) => {
                params.push((format!("{q}.Id"), "q1".into()));
                params.push((format!("{q}.Expression"), expression.clone()));
                params.push((format!("{q}.Period"), self.period.to_string()));
            }
            Query::Metric {
                namespace,
                metric_name,
                dimensions,
                stat,
                unit,
            } => {
                let m = format!("{q}.MetricStat");
                params.push((format!("{q}.Id"), "c1".into()));
                params.push((format!("{m}.Metric.Namespace"), namespace.clone()));
                params.push((format!("{m}.Metric.MetricName"), metric_name.clone()));
                for (i, (name, value)) in dimensions.iter().enumerate() {
                    let d = format!("{m}.Metric.Dimensions.member.{}", i + 1);
                    params.push((format!("{d}.Name"), name.clone()));
                    params.push((format!("{d}.Value"), value.clone()));
                }
                params.push((format!("{m}.Period"), self.period.to_string()));
                params.push((format!("{m}.Stat"), stat.clone()));
                if let Some(unit) = unit {
                    params.push((format!("{m}.Unit"), unit.clone()));
                }
                params.push((format!("{q}.ReturnData"), "true".into()));
            }
        }
        if let Some(account) = &self.account_id {
            params.push((format!("{q}.AccountId"), account.clone()));
        }
        params
    }
}

/// KEDA's `checkMetricStatPeriod`.
fn check_period(p: &MetadataParser<'_>, period: i64) -> Result<(), MetadataError> {
    let ok = if period <= 60 {
        matches!(period, 1 | 5 | 10 | 30 | 60)
    } else {
        period % 60 == 0
    };
    if ok {
        Ok(())
    } else {
        Err(p.rule(format!(
            "parameter \"metricStatPeriod\" must be 1, 5, 10, 30 or a multiple of 60, {period} is given"
        )))
    }
}

/// The metric of a trigger without `expression`.
fn metric_query(p: &MetadataParser<'_>) -> Result<Query, MetadataError> {
    let need = |param: &Param| -> Result<String, MetadataError> {
        p.get_opt::<String>(param)?.ok_or_else(|| {
            p.rule(format!(
                "missing required parameter \"{}\" (required without \"expression\")",
                param.name
            ))
        })
    };
    let namespace = need(&NAMESPACE)?;
    let metric_name = need(&METRIC_NAME)?;
    need(&DIMENSION_NAME)?;
    need(&DIMENSION_VALUE)?;
    let names: Vec<String> = p.get(&DIMENSION_NAME)?;
    let values: Vec<String> = p.get(&DIMENSION_VALUE)?;
    if names.len() != values.len() {
        return Err(p.rule(format!(
            "parameters \"dimensionName\" ({} names) and \"dimensionValue\" ({} values) must \
             have as many ;-separated items",
            names.len(),
            values.len()
        )));
    }
    let unit: Option<String> = p.get_opt(&METRIC_UNIT)?;
    if let Some(unit) = &unit
        && !STANDARD_UNITS.contains(&unit.as_str())
    {
        return Err(p.rule(format!(
            "parameter \"metricUnit\": \"{unit}\" is not one of {}",
            STANDARD_UNITS.join(", ")
        )));
    }
    Ok(Query::Metric {
        namespace,
        metric_name,
        dimensions: names.into_iter().zip(values).collect(),
        stat: p.get(&METRIC_STAT)?,
        unit,
    })
}

/// What a `GetMetricData` answer holds: for each result, its values (newest first).
pub(crate) fn result_values(body: &[u8]) -> Result<Vec<Vec<f64>>, String> {
    let text = std::str::from_utf8(body)
        .map_err(|e| format!("no text (not UTF-8 at byte {})", e.valid_up_to()))?;
    let doc = crate::remote::xml(text).map_err(|e| crate::remote::xml_error(&e))?;
    let Some(results) = doc
        .descendants()
        .find(|n| n.has_tag_name("MetricDataResults"))
    else {
        return Err("no MetricDataResults".into());
    };
    let mut all = Vec::new();
    for result in results.children().filter(|n| n.has_tag_name("member")) {
        let mut values = Vec::new();
        if let Some(list) = result.children().find(|n| n.has_tag_name("Values")) {
            for value in list.children().filter(|n| n.has_tag_name("member")) {
                let raw = value.text().unwrap_or_default().trim();
                values.push(
                    raw.parse::<f64>()
                        .map_err(|_| format!("a value ({} bytes) is not a number", raw.len()))?,
                );
            }
        }
        all.push(values);
    }
    Ok(all)
}

/// KEDA's rule for the value of an answer.
fn value_of(results: &[Vec<f64>], min_value: f64, ignore_null_values: bool) -> Result<f64, String> {
    match results.first() {
        Some(values) if values.is_empty() && !ignore_null_values => {
            Err("CloudWatch returned no metric data and ignoreNullValues is false".to_string())
        }
        Some(values) if !values.is_empty() => Ok(values[0]),
        _ => Ok(min_value),
    }
}

#[async_trait]
impl AwsApi for CloudWatchConfig {
    const SERVICE: Service = CLOUDWATCH;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        CloudWatchConfig::parse(ctx)
    }

    fn settings(&self) -> &AwsSettings {
        &self.aws
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target_milli(self.metric_type, self.target),
        )]
    }

    /// One `GetMetricData`.
    ///
    /// # Errors
    /// CloudWatch cannot be reached or answers an error, the answer has no value and
    /// `ignoreNullValues` is false.
    async fn read(
        &self,
        call: &AwsCall<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let params = self.request(call.read.now());
        let params: Vec<(&str, &str)> = params
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let what = match &self.query {
            Query::Expression(e) => format!("expression `{e}`"),
            Query::Metric {
                namespace,
                metric_name,
                ..
            } => format!("metric {namespace}/{metric_name}"),
        };
        let body = call
            .call("GetMetricData", &Input::Query(&params), &what)
            .await?;
        let unexpected = |message: String| {
            call.read
                .unexpected(format!("GetMetricData of {what}: {message}"))
        };
        let results = result_values(&body).map_err(unexpected)?;
        let value =
            value_of(&results, self.min_value, self.ignore_null_values).map_err(unexpected)?;
        Ok(MetricsAndActivity::single(
            metric_name,
            value,
            self.activation,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::test_context;

    const AUTH: &[(&str, &str)] = &[
        ("awsAccessKeyID", "AKIAEXAMPLE"),
        ("awsSecretAccessKey", "s3cret-access-key"),
    ];

    const BASE: &[(&str, &str)] = &[
        ("namespace", "AWS/SQS"),
        ("metricName", "ApproximateNumberOfMessagesVisible"),
        ("dimensionName", "QueueName"),
        ("dimensionValue", "orders"),
        ("targetMetricValue", "2.5"),
        ("minMetricValue", "0"),
        ("awsRegion", "eu-west-1"),
    ];

    fn parse(changes: &[(&str, &str)]) -> Result<CloudWatchConfig, ScalerError> {
        let mut metadata: std::collections::BTreeMap<&str, &str> = BASE.iter().copied().collect();
        metadata.extend(changes.iter().copied());
        let pairs: Vec<(&str, &str)> = metadata
            .into_iter()
            .filter(|(_, v)| !v.is_empty())
            .collect();
        CloudWatchConfig::parse(&test_context("aws-cloudwatch", 1, &pairs, &[], AUTH))
    }

    fn at(s: &str) -> jiff::Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn defaults_and_the_metric_request() {
        let config = parse(&[
            ("dimensionName", "QueueName;Env"),
            ("dimensionValue", "orders;prod"),
            ("metricUnit", "Count"),
            ("awsAccountId", "210987654321"),
        ])
        .unwrap();
        assert_eq!(config.metric_name, "s1-aws-cloudwatch");
        assert_eq!((config.period, config.collection_time), (300, 300));
        assert_eq!((config.activation, config.min_value), (0.0, 0.0));
        assert!(config.ignore_null_values);
        let target = metric_target_milli(config.metric_type, config.target);
        assert_eq!(target.average_value.map(|q| q.0), Some("2500m".into()));
        let request = config.request(at("2024-03-10T12:07:31Z"));
        let get = |k: &str| {
            request
                .iter()
                .find(|(name, _)| name == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("StartTime"), Some("2024-03-10T12:00:00Z"));
        assert_eq!(get("EndTime"), Some("2024-03-10T12:05:00Z"));
        assert_eq!(get("ScanBy"), Some("TimestampDescending"));
        assert_eq!(get("MetricDataQueries.member.1.Id"), Some("c1"));
        assert_eq!(
            get("MetricDataQueries.member.1.MetricStat.Metric.Dimensions.member.2.Value"),
            Some("prod")
        );
        assert_eq!(
            get("MetricDataQueries.member.1.MetricStat.Stat"),
            Some("Average")
        );
        assert_eq!(
            get("MetricDataQueries.member.1.MetricStat.Unit"),
            Some("Count")
        );
        assert_eq!(
            get("MetricDataQueries.member.1.AccountId"),
            Some("210987654321")
        );
    }

    #[test]
    fn the_window_truncates_like_go_and_honours_the_offset() {
        // (period, collection time, offset, now, start, end)
        let rows = [
            (
                60,
                300,
                0,
                "2024-03-10T12:07:31Z",
                "2024-03-10T12:02:00Z",
                "2024-03-10T12:07:00Z",
            ),
            (
                300,
                600,
                120,
                "2024-03-10T12:07:31Z",
                "2024-03-10T11:55:00Z",
                "2024-03-10T12:05:00Z",
            ),
            (
                1,
                5,
                0,
                "2024-03-10T12:07:31Z",
                "2024-03-10T12:07:26Z",
                "2024-03-10T12:07:31Z",
            ),
            // 420 s does not divide a day: Go truncates since year 1, not since 1970.
            (
                420,
                420,
                0,
                "1970-01-01T00:00:00Z",
                "1969-12-31T23:52:00Z",
                "1969-12-31T23:59:00Z",
            ),
        ];
        for (i, (period, collection, offset, now, start, end)) in rows.into_iter().enumerate() {
            let config = CloudWatchConfig {
                period,
                collection_time: collection,
                end_time_offset: offset,
                ..parse(&[]).unwrap()
            };
            let (s, e) = config.window(at(now));
            assert_eq!(
                (s.to_string(), e.to_string()),
                (start.to_string(), end.to_string()),
                "row {i}"
            );
        }
    }

    #[test]
    fn an_expression_replaces_the_metric() {
        let config = parse(&[
            (
                "expression",
                "SELECT MAX(ApproximateNumberOfMessagesVisible) FROM \"AWS/SQS\"",
            ),
            ("namespace", ""),
            ("metricName", ""),
            ("dimensionName", ""),
            ("dimensionValue", ""),
            ("metricStatPeriod", "60"),
        ])
        .unwrap();
        let request = config.request(at("2024-03-10T12:07:31Z"));
        assert!(request.contains(&("MetricDataQueries.member.1.Id".into(), "q1".into())));
        assert!(request.contains(&("MetricDataQueries.member.1.Period".into(), "60".into())));
        assert!(!request.iter().any(|(k, _)| k.contains("MetricStat")));
    }

    #[test]
    fn errors_name_the_parameter() {
        let rows: &[(&[(&str, &str)], &str)] = &[
            (
                &[("namespace", "")],
                r#"trigger 1 (aws-cloudwatch): missing required parameter "namespace" (required without "expression")"#,
            ),
            (
                &[("dimensionValue", "")],
                r#"trigger 1 (aws-cloudwatch): missing required parameter "dimensionValue" (required without "expression")"#,
            ),
            (
                &[("dimensionName", "a;b")],
                r#"trigger 1 (aws-cloudwatch): parameters "dimensionName" (2 names) and "dimensionValue" (1 values) must have as many ;-separated items"#,
            ),
            (
                &[("targetMetricValue", "")],
                r#"trigger 1 (aws-cloudwatch): missing required parameter "targetMetricValue""#,
            ),
            (
                &[("minMetricValue", "")],
                r#"trigger 1 (aws-cloudwatch): missing required parameter "minMetricValue""#,
            ),
            (
                &[("metricStatPeriod", "45")],
                r#"trigger 1 (aws-cloudwatch): parameter "metricStatPeriod" must be 1, 5, 10, 30 or a multiple of 60, 45 is given"#,
            ),
            (
                &[("metricStatPeriod", "90")],
                r#"trigger 1 (aws-cloudwatch): parameter "metricStatPeriod" must be 1, 5, 10, 30 or a multiple of 60, 90 is given"#,
            ),
            (
                &[("metricStatPeriod", "0")],
                r#"trigger 1 (aws-cloudwatch): parameter "metricStatPeriod": "0" is not between 1 and 86400"#,
            ),
            (
                &[("metricCollectionTime", "450")],
                r#"trigger 1 (aws-cloudwatch): parameter "metricCollectionTime" must be a multiple of metricStatPeriod (300), 450 is given"#,
            ),
            (
                &[("metricCollectionTime", "-300")],
                r#"trigger 1 (aws-cloudwatch): parameter "metricCollectionTime": "-300" is not between 0 and 31536000"#,
            ),
            (
                &[("metricUnit", "Apples")],
                "trigger 1 (aws-cloudwatch): parameter \"metricUnit\": \"Apples\" is not one of Seconds, Microseconds, Milliseconds, Bytes, Kilobytes, Megabytes, Gigabytes, Terabytes, Bits, Kilobits, Megabits, Gigabits, Terabits, Percent, Count, Bytes/Second, Kilobytes/Second, Megabytes/Second, Gigabytes/Second, Terabytes/Second, Bits/Second, Kilobits/Second, Megabits/Second, Gigabits/Second, Terabits/Second, Count/Second, None",
            ),
        ];
        for (i, (changes, expected)) in rows.iter().enumerate() {
            let err = parse(changes).expect_err("invalid");
            assert_eq!(err.to_string(), *expected, "row {i}");
        }
    }

    #[test]
    fn the_value_follows_keda_rules_for_missing_data() {
        let body = b"<GetMetricDataResponse><GetMetricDataResult><MetricDataResults>\
            <member><Id>c1</Id><Values><member>12.5</member><member>3</member></Values></member>\
            </MetricDataResults></GetMetricDataResult></GetMetricDataResponse>";
        let results = result_values(body).unwrap();
        assert_eq!(results, vec![vec![12.5, 3.0]]);
        assert_eq!(value_of(&results, 1.0, true), Ok(12.5));
        // (results, ignoreNullValues, expected)
        let empty = vec![Vec::new()];
        assert_eq!(value_of(&empty, 1.5, true), Ok(1.5));
        assert_eq!(
            value_of(&empty, 1.5, false),
            Err("CloudWatch returned no metric data and ignoreNullValues is false".into())
        );
        // No result at all is minMetricValue even without ignoreNullValues, as in KEDA.
        assert_eq!(value_of(&[], 1.5, false), Ok(1.5));
        let none = b"<GetMetricDataResponse><GetMetricDataResult><MetricDataResults/></GetMetricDataResult></GetMetricDataResponse>";
        assert_eq!(result_values(none).unwrap(), Vec::<Vec<f64>>::new());
    }
}
