//! `solarwinds`: scales on a SolarWinds Observability metric, aggregated over the last
//! `intervalS` seconds, read from the SWO REST API (`GET <host>/v1/metrics/<metricName>/measurements`,
//! the call KEDA makes through `swo-sdk-go`'s `ListMetricMeasurements`). Compatible with KEDA's
//! `solarwinds` trigger (`pkg/scalers/solarwinds_scaler.go`).
//!
//! Every trigger on the same API host with the same token and timeout shares one HTTP client.

use http::HeaderValue;
use http::header::{ACCEPT, HeaderMap};
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::authentication::{AuthMode, HttpAuth};
use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError};
use crate::http_client::{self, HttpClientKey, describe_url, parse_http_url};
use crate::metadata::{AUTH, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pooled::{ApiRequest, HttpApi, Pooled};
use crate::scaler::MetricsAndActivity;
use crate::secret::Secret;

const API_TOKEN: Param = Param::optional("apiToken").order(AUTH).secret();
const HOST: Param = Param::required("host");
const TARGET_VALUE: Param = Param::required("targetValue");
const ACTIVATION_VALUE: Param = Param::optional("activationValue").default("0");
const METRIC_NAME: Param = Param::required("metricName");
const AGGREGATION: Param =
    Param::required("aggregation").allowed(&["COUNT", "MIN", "MAX", "AVG", "SUM", "LAST"]);
const INTERVAL_S: Param = Param::required("intervalS");
const FILTER: Param = Param::optional("filter");

/// The parameters of `solarwinds`.
pub const PARAMS: &[Param] = &[
    API_TOKEN,
    HOST,
    TARGET_VALUE,
    ACTIVATION_VALUE,
    METRIC_NAME,
    AGGREGATION,
    INTERVAL_S,
    FILTER,
];

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct SolarWindsConfig {
    /// The API host and the client key.
    pub host: url::Url,
    /// The client key: the host, `Authorization: Bearer <apiToken>`, the timeout.
    pub key: HttpClientKey,
    /// `metricName`: the SolarWinds metric.
    pub metric: String,
    /// `aggregation`, as sent in `aggregateBy`.
    pub aggregation: String,
    /// `intervalS`: how far back the measurements go.
    pub interval_s: i64,
    /// `filter`.
    pub filter: Option<String>,
    /// `targetValue`.
    pub target: f64,
    /// `activationValue`.
    pub activation: f64,
    /// `s<index>-solarwinds`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
    headers: HeaderMap,
}

impl SolarWindsConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// `host`, `targetValue`, `metricName`, `aggregation` or `intervalS` missing or malformed,
    /// `aggregation` not one of KEDA's, `host` not an http(s) URL (KEDA refuses a host that
    /// is no URL when it parses).
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let token: Option<Secret> = p.get_opt(&API_TOKEN)?;
            let host: String = p.get(&HOST)?;
            let target: f64 = p.get(&TARGET_VALUE)?;
            let activation: f64 = p.get(&ACTIVATION_VALUE)?;
            let metric: String = p.get(&METRIC_NAME)?;
            let aggregation: String = p.get(&AGGREGATION)?;
            let interval_s: i64 = p.get(&INTERVAL_S)?;
            let filter: Option<String> = p.get_opt(&FILTER)?;
            let host = parse_http_url(p, &HOST, host.trim_end_matches('/')).map_err(|_| {
                p.rule(
                    "invalid value for parameter \"host\": it must be a URL such as https://api.na-01.cloud.solarwinds.com",
                )
            })?;
            // The SDK sends the token as a bearer token, and nothing without one.
            let mut auth = HttpAuth::default();
            if let Some(token) = token {
                auth.modes = vec![AuthMode::Bearer];
                auth.bearer = Some(token);
            }
            let key = HttpClientKey {
                origin: http_client::origin(&host),
                auth,
                timeout: ctx.global_http_timeout,
            };
            let mut headers = HeaderMap::new();
            headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
            Ok(Self {
                host,
                key,
                metric,
                aggregation,
                interval_s,
                filter,
                target,
                activation,
                metric_name: ctx.metric_name("solarwinds"),
                metric_type,
                headers,
            })
        })?)
    }

    /// The measurements URL at `now`: the last `intervalS` seconds, UTC, whole seconds.
    pub fn url(&self, now: jiff::Timestamp) -> url::Url {
        let format = |t: jiff::Timestamp| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        let start = now
            .checked_sub(jiff::SignedDuration::from_secs(self.interval_s))
            .unwrap_or(jiff::Timestamp::MIN);
        let mut url = self.host.clone();
        url.set_query(None);
        url.set_fragment(None);
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty()
                .extend(["v1", "metrics", &self.metric, "measurements"]);
        }
        {
            let mut query = url.query_pairs_mut();
            if let Some(filter) = &self.filter {
                query.append_pair("filter", filter);
            }
            query
                .append_pair("aggregateBy", &self.aggregation)
                .append_pair("startTime", &format(start))
                .append_pair("endTime", &format(now))
                .append_pair("seriesType", "SCALAR");
        }
        url
    }
}

/// KEDA's `getFirstMeasurement`: the first measurement with a value, in the groupings' order
/// (`{"groupings": [{"attributes": [...], "measurements": [{"time": "...", "value": 1.5}]}],
/// "bucketSizeInSeconds": 60, "pageInfo": {...}}`).
///
/// # Errors
/// Not that shape, no groupings, a grouping without measurements before a value, no value.
pub fn first_measurement(body: &[u8]) -> Result<f64, String> {
    #[derive(serde::Deserialize)]
    struct Answer {
        #[serde(default)]
        groupings: Option<Vec<Grouping>>,
    }
    #[derive(serde::Deserialize)]
    struct Grouping {
        #[serde(default)]
        measurements: Option<Vec<Measurement>>,
    }
    #[derive(serde::Deserialize)]
    struct Measurement {
        #[serde(default)]
        value: Option<f64>,
    }
    let answer: Answer = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the SolarWinds answer is not a list of measurements: {}",
            crate::remote::json_error(&e)
        )
    })?;
    let groupings = answer
        .groupings
        .ok_or_else(|| "the SolarWinds answer has no groupings".to_string())?;
    for grouping in groupings {
        let measurements = grouping
            .measurements
            .ok_or_else(|| "the SolarWinds answer has no measurements".to_string())?;
        if let Some(value) = measurements.into_iter().find_map(|m| m.value) {
            return Ok(value);
        }
    }
    Err("the SolarWinds answer has no measurements (parameters \"metricName\", \"filter\")".into())
}

/// A `solarwinds` scaler.
pub type SolarWindsScaler = Pooled<SolarWindsConfig>;

impl HttpApi for SolarWindsConfig {
    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        SolarWindsConfig::parse(ctx)
    }

    fn client_key(&self) -> Result<HttpClientKey, MetadataError> {
        Ok(self.key.clone())
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target_milli(self.metric_type, self.target),
        )]
    }

    fn request(&self, now: jiff::Timestamp) -> Result<ApiRequest<'_>, MetadataError> {
        Ok(ApiRequest::get(self.url(now), &self.headers))
    }

    fn operation(&self, request: &ApiRequest<'_>) -> String {
        format!(
            "SolarWinds measurements of metric {} on {}",
            self.metric,
            describe_url(&request.url)
        )
    }

    fn read(&self, body: &[u8], metric_name: &str) -> Result<MetricsAndActivity, String> {
        let value = first_measurement(body)?;
        if !value.is_finite() {
            return Err("the SolarWinds measurement is not a finite number".into());
        }
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

    const META: &[(&str, &str)] = &[
        ("host", "https://api.na-01.cloud.solarwinds.com"),
        ("targetValue", "10"),
        ("activationValue", "1"),
        ("metricName", "composite.custom.system.cpu.utilization"),
        ("aggregation", "AVG"),
        ("intervalS", "60"),
        ("filter", "host.name:my-host"),
    ];

    fn parse(metadata: &[(&str, &str)]) -> Result<SolarWindsConfig, String> {
        SolarWindsConfig::parse(&test_context(
            "solarwinds",
            0,
            metadata,
            &[],
            &[("apiToken", "sw-t0ken")],
        ))
        .map_err(|e| e.to_string())
    }

    /// KEDA's `testSolarWindsMetadata` (`pkg/scalers/solarwinds_scaler_test.go`).
    #[test]
    fn keda_s_metadata_cases() {
        let config = parse(META).unwrap();
        assert_eq!(config.metric_name, "s0-solarwinds");
        assert_eq!(
            (config.target, config.activation, config.interval_s),
            (10.0, 1.0, 60)
        );
        assert!(config.key.auth.bearer.is_some());
        for name in [
            "host",
            "targetValue",
            "metricName",
            "aggregation",
            "intervalS",
        ] {
            let m: Vec<_> = META.iter().copied().filter(|(k, _)| *k != name).collect();
            let err = parse(&m).unwrap_err();
            assert!(err.contains(&format!("\"{name}\"")), "{err}");
        }
        let mut bad = META.to_vec();
        bad.push(("aggregation", "MEDIAN"));
        bad.remove(4);
        assert!(parse(&bad).unwrap_err().contains("aggregation"));
        let mut bad = META[1..].to_vec();
        bad.push(("host", "invalid-url"));
        assert!(parse(&bad).unwrap_err().contains("\"host\""));
        let mut bad = META.to_vec();
        bad.retain(|(k, _)| *k != "intervalS");
        bad.push(("intervalS", "1m"));
        assert!(parse(&bad).unwrap_err().contains("\"intervalS\""));
    }

    #[test]
    fn the_request_is_the_sdk_s() {
        let config = parse(META).unwrap();
        let now: jiff::Timestamp = "2026-01-01T12:00:00Z".parse().unwrap();
        assert_eq!(
            config.url(now).as_str(),
            "https://api.na-01.cloud.solarwinds.com/v1/metrics/composite.custom.system.cpu.utilization/measurements?filter=host.name%3Amy-host&aggregateBy=AVG&startTime=2026-01-01T11%3A59%3A00Z&endTime=2026-01-01T12%3A00%3A00Z&seriesType=SCALAR"
        );
    }

    /// KEDA's `getFirstMeasurement` cases.
    #[test]
    fn the_first_measurement_with_a_value_is_read() {
        let body = br#"{"groupings":[{"attributes":[{"key":"host.name","value":"a"}],"measurements":[{"time":"2026-01-01T11:59:00Z","value":null},{"time":"2026-01-01T12:00:00Z","value":42.5}]},{"measurements":[{"value":1}]}],"bucketSizeInSeconds":60,"pageInfo":{}}"#;
        assert_eq!(first_measurement(body), Ok(42.5));
        assert!(first_measurement(br#"{"groupings":null}"#).is_err());
        assert!(first_measurement(br#"{"groupings":[{"measurements":null}]}"#).is_err());
        assert!(first_measurement(br#"{"groupings":[]}"#).is_err());
        for garbage in ["", "SECRETSECRET", r#"{"groupings":"SECRETSECRET"}"#] {
            let err = first_measurement(garbage.as_bytes()).unwrap_err();
            assert!(!err.contains("SECRETSECRET"), "{err}");
        }
    }
}
