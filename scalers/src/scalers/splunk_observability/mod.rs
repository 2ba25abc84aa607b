//! `splunk-observability`: scales on the values a SignalFlow program publishes in Splunk
//! Observability Cloud, aggregated over `duration` seconds. Compatible with KEDA's
//! `splunk-observability` trigger (`pkg/scalers/splunk_observability_scaler.go`).
//!
//! KEDA runs the program live over SignalFlow's WebSocket API and listens for `duration`
//! seconds. keda-rs asks the same computation of SignalFlow's documented REST API instead
//! (`POST https://stream.<realm>.signalfx.com/v2/signalflow/execute`, Server-Sent Events),
//! over the `duration` seconds that just ended, with `immediate=true` so that the answer ends
//! as soon as that window is computed: the same data points, without holding the poll open for
//! `duration` seconds.
//!
//! Every trigger of one realm with the same token and timeout shares one HTTP client.

use std::borrow::Cow;

use http::HeaderValue;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName};
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::authentication::{AuthMode, HttpAuth};
use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError};
use crate::http_client::{self, HttpClientKey, describe_url};
use crate::metadata::{AUTH, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pooled::{ApiRequest, HttpApi, Pooled};
use crate::scaler::MetricsAndActivity;
use crate::secret::Secret;

const ACCESS_TOKEN: Param = Param::required("accessToken").order(AUTH).secret();
const REALM: Param = Param::required("realm").order(AUTH);
const QUERY: Param = Param::required("query");
const DURATION: Param = Param::required("duration");
const TARGET_VALUE: Param = Param::required("targetValue");
const QUERY_AGGREGATOR: Param = Param::required("queryAggregator");
const ACTIVATION_TARGET_VALUE: Param = Param::required("activationTargetValue");

/// The parameters of `splunk-observability`.
pub const PARAMS: &[Param] = &[
    ACCESS_TOKEN,
    REALM,
    QUERY,
    DURATION,
    TARGET_VALUE,
    QUERY_AGGREGATOR,
    ACTIVATION_TARGET_VALUE,
];

/// The header SignalFlow reads the access token from.
pub const TOKEN_HEADER: &str = "X-SF-Token";

/// How the window's values become one (`queryAggregator`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aggregator {
    /// `max`.
    Max,
    /// `min`.
    Min,
    /// `avg`.
    Avg,
}

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct SplunkObservabilityConfig {
    /// The stream endpoint of the realm.
    pub stream: url::Url,
    /// The client key: the realm's stream host, `X-SF-Token`, the timeout.
    pub key: HttpClientKey,
    /// `query`: the SignalFlow program.
    pub program: String,
    /// `duration` in seconds.
    pub duration: i64,
    /// `queryAggregator`, or the value as written when it is none of `max`, `min`, `avg`
    /// (every read fails naming it, as in KEDA).
    pub aggregator: Result<Aggregator, String>,
    /// `targetValue` (always a `Value` target, as in KEDA).
    pub target: f64,
    /// `activationTargetValue`.
    pub activation: f64,
    /// `s<index>-signalfx`.
    pub metric_name: String,
    headers: HeaderMap,
}

impl SplunkObservabilityConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// Any parameter missing (all are required, as in KEDA), a malformed number, a `realm`
    /// that cannot be a host name.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        Ok(ctx.parse(|p| {
            let token: Secret = p.get(&ACCESS_TOKEN)?;
            let realm: String = p.get(&REALM)?;
            let program: String = p.get(&QUERY)?;
            let duration: i64 = p.get(&DURATION)?;
            let target: f64 = p.get(&TARGET_VALUE)?;
            let aggregator: String = p.get(&QUERY_AGGREGATOR)?;
            let activation: f64 = p.get(&ACTIVATION_TARGET_VALUE)?;
            if !realm
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            {
                return Err(p.rule(format!(
                    "parameter \"{}\" must be a realm name such as us1",
                    REALM.name
                )));
            }
            let stream = url::Url::parse(&format!("https://stream.{realm}.signalfx.com"))
                .map_err(|_| p.rule(format!("parameter \"{}\" is not a realm", REALM.name)))?;
            // The realm's host is Splunk's: the process may move it (tests), a namespace
            // cannot.
            let stream = ctx.vendor_endpoints.redirect(stream);
            let auth = HttpAuth {
                modes: vec![AuthMode::Custom],
                custom: Some((HeaderName::from_static("x-sf-token"), token)),
                ..HttpAuth::default()
            };
            let key = HttpClientKey {
                origin: http_client::origin(&stream),
                auth,
                timeout: ctx.global_http_timeout,
            };
            let aggregator = match aggregator.as_str() {
                "max" => Ok(Aggregator::Max),
                "min" => Ok(Aggregator::Min),
                "avg" => Ok(Aggregator::Avg),
                _ => Err(aggregator),
            };
            let mut headers = HeaderMap::new();
            headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
            Ok(Self {
                stream,
                key,
                program,
                duration,
                aggregator,
                target,
                activation,
                metric_name: ctx.metric_name("signalfx"),
                headers,
            })
        })?)
    }

    /// The execute URL for the window ending at `now`.
    pub fn url(&self, now: jiff::Timestamp) -> url::Url {
        let stop = now.as_millisecond();
        let start = stop.saturating_sub(self.duration.saturating_mul(1000));
        let mut url = self.stream.clone();
        url.set_path("/v2/signalflow/execute");
        url.query_pairs_mut()
            .append_pair("start", &start.to_string())
            .append_pair("stop", &stop.to_string())
            .append_pair("immediate", "true");
        url
    }
}

/// Every value of the `data` events of a SignalFlow Server-Sent Events answer
/// (`event: data` then `data:` lines holding `{"data": [{"tsId": "...", "value": 1.0}],
/// "logicalTimestampMs": ...}`); an `event: error` or an `ABORT_CHANNEL` control message fails.
///
/// # Errors
/// A `data` event that is not that JSON, a value that is not a number, or the computation
/// reported an error. Messages never quote the answer.
pub fn stream_values(body: &[u8]) -> Result<Vec<f64>, String> {
    #[derive(serde::Deserialize)]
    struct Data {
        #[serde(default)]
        data: Vec<Point>,
    }
    #[derive(serde::Deserialize)]
    struct Point {
        value: serde_json::Value,
    }
    #[derive(serde::Deserialize)]
    struct Control {
        #[serde(default)]
        event: String,
    }
    let text = String::from_utf8_lossy(body);
    let mut values = Vec::new();
    let mut event = String::new();
    let mut data = String::new();
    // A blank line ends an event (the last one may end with the body).
    for line in text.lines().chain(std::iter::once("")) {
        if line.is_empty() {
            if !data.is_empty() {
                match event.as_str() {
                    "data" => {
                        let message: Data =
                            crate::remote::from_json(data.as_bytes()).map_err(|e| {
                                format!(
                                    "a SignalFlow data message is not the documented JSON: {}",
                                    crate::remote::json_error(&e)
                                )
                            })?;
                        for point in message.data {
                            let value = point.value.as_f64().ok_or_else(|| {
                                "a SignalFlow data point's value is not a number".to_string()
                            })?;
                            values.push(value);
                        }
                    }
                    "error" => {
                        return Err(
                            "the SignalFlow computation reported an error (check parameter \"query\")"
                                .into(),
                        );
                    }
                    "control-message" => {
                        let control: Option<Control> =
                            crate::remote::from_json(data.as_bytes()).ok();
                        if control.is_some_and(|c| c.event == "ABORT_CHANNEL") {
                            return Err("the SignalFlow computation was aborted".into());
                        }
                    }
                    _ => {}
                }
            }
            event.clear();
            data.clear();
            continue;
        }
        if let Some(name) = line.strip_prefix("event:") {
            event = name.trim().to_string();
        } else if let Some(chunk) = line.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(chunk.strip_prefix(' ').unwrap_or(chunk));
        }
    }
    Ok(values)
}

/// KEDA's reading of the window's values.
///
/// # Errors
/// No values.
pub fn aggregate(values: &[f64], aggregator: Aggregator) -> Result<f64, String> {
    if values.is_empty() {
        return Err("the SignalFlow query returned no data points".into());
    }
    #[allow(clippy::cast_precision_loss)]
    let count = values.len() as f64;
    Ok(match aggregator {
        Aggregator::Max => values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        Aggregator::Min => values.iter().copied().fold(f64::INFINITY, f64::min),
        Aggregator::Avg => values.iter().sum::<f64>() / count,
    })
}

/// A `splunk-observability` scaler.
pub type SplunkObservabilityScaler = Pooled<SplunkObservabilityConfig>;

impl HttpApi for SplunkObservabilityConfig {
    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        SplunkObservabilityConfig::parse(ctx)
    }

    fn client_key(&self) -> Result<HttpClientKey, MetadataError> {
        Ok(self.key.clone())
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target_milli(MetricTargetType::Value, self.target),
        )]
    }

    fn request(&self, now: jiff::Timestamp) -> Result<ApiRequest<'_>, MetadataError> {
        Ok(ApiRequest::post(
            self.url(now),
            Cow::Borrowed(&self.headers),
            self.program.clone(),
        ))
    }

    fn operation(&self, request: &ApiRequest<'_>) -> String {
        format!("SignalFlow execute on {}", describe_url(&request.url))
    }

    fn read(&self, body: &[u8], metric_name: &str) -> Result<MetricsAndActivity, String> {
        let aggregator = self.aggregator.clone().map_err(|written| {
            format!("parameter \"queryAggregator\": {written:?} is not one of max, min, avg")
        })?;
        let value = aggregate(&stream_values(body)?, aggregator)?;
        if !value.is_finite() {
            return Err("the SignalFlow value is not a finite number".into());
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

    const AUTH_PARAMS: &[(&str, &str)] = &[
        ("accessToken", "my-super-secret-access-token"),
        ("realm", "my-realm"),
    ];
    const META: &[(&str, &str)] = &[
        ("query", "data('demo.trans.latency').max().publish()"),
        ("duration", "10"),
        ("targetValue", "200.0"),
        ("queryAggregator", "avg"),
        ("activationTargetValue", "1.1"),
    ];

    fn parse(
        index: usize,
        metadata: &[(&str, &str)],
        auth: &[(&str, &str)],
    ) -> Result<SplunkObservabilityConfig, String> {
        SplunkObservabilityConfig::parse(&test_context(
            "splunk-observability",
            index,
            metadata,
            &[],
            auth,
        ))
        .map_err(|e| e.to_string())
    }

    /// KEDA's `testSplunkObservabilityMetadata` and metric identifiers
    /// (`pkg/scalers/splunk_observability_scaler_test.go`).
    #[test]
    fn keda_s_metadata_cases() {
        let config = parse(0, META, AUTH_PARAMS).unwrap();
        assert_eq!(config.metric_name, "s0-signalfx");
        assert_eq!(
            parse(1, META, AUTH_PARAMS).unwrap().metric_name,
            "s1-signalfx"
        );
        assert_eq!(
            config.stream.as_str(),
            "https://stream.my-realm.signalfx.com/"
        );
        assert_eq!(config.aggregator, Ok(Aggregator::Avg));
        assert!(parse(0, &[], &[]).is_err());
        assert!(parse(0, &[], AUTH_PARAMS).is_err());
        assert!(parse(0, META, &[]).unwrap_err().contains("\"accessToken\""));
        for (i, name) in [
            "query",
            "duration",
            "targetValue",
            "queryAggregator",
            "activationTargetValue",
        ]
        .iter()
        .enumerate()
        {
            let mut m = META.to_vec();
            m.remove(i);
            let err = parse(0, &m, AUTH_PARAMS).unwrap_err();
            assert!(err.contains(&format!("\"{name}\"")), "{err}");
        }
        let err = parse(0, META, &[("accessToken", ""), ("realm", "my-realm")]).unwrap_err();
        assert!(err.contains("\"accessToken\""), "{err}");
        let err = parse(0, META, &[("accessToken", "t"), ("realm", "evil.com/x")]).unwrap_err();
        assert!(err.contains("\"realm\""), "{err}");
    }

    #[test]
    fn the_window_is_the_last_duration() {
        let config = parse(0, META, AUTH_PARAMS).unwrap();
        let now = jiff::Timestamp::from_millisecond(1_700_000_000_000).unwrap();
        assert_eq!(
            config.url(now).as_str(),
            "https://stream.my-realm.signalfx.com/v2/signalflow/execute?start=1699999990000&stop=1700000000000&immediate=true"
        );
    }

    #[test]
    fn data_events_are_read_and_aggregated() {
        let body = "event: control-message\ndata: {\ndata:   \"event\" : \"STREAM_START\",\ndata:   \"timestampMs\" : 1700000000000\ndata: }\n\nevent: metadata\ndata: {\"tsId\":\"AAAAAKDQ3RA\",\"properties\":{\"sf_metric\":\"demo.trans.latency\"}}\n\nevent: data\ndata: {\ndata:   \"data\" : [ {\ndata:     \"tsId\" : \"AAAAAKDQ3RA\",\ndata:     \"value\" : 3\ndata:   } ],\ndata:   \"logicalTimestampMs\" : 1699999995000\ndata: }\n\nevent: data\ndata: {\"data\":[{\"tsId\":\"AAAAAKDQ3RA\",\"value\":5.5}],\"logicalTimestampMs\":1700000000000}\n\nevent: control-message\ndata: {\"event\":\"END_OF_CHANNEL\",\"timestampMs\":1700000000001}\n";
        let values = stream_values(body.as_bytes()).unwrap();
        assert_eq!(values, [3.0, 5.5]);
        assert_eq!(aggregate(&values, Aggregator::Avg), Ok(4.25));
        assert_eq!(aggregate(&values, Aggregator::Max), Ok(5.5));
        assert_eq!(aggregate(&values, Aggregator::Min), Ok(3.0));
        assert!(aggregate(&[], Aggregator::Avg).is_err());
        assert!(
            stream_values(b"event: error\ndata: {\"error\":400,\"message\":\"SECRETSECRET\"}\n\n")
                .is_err()
        );
        assert!(
            stream_values(b"event: control-message\ndata: {\"event\":\"ABORT_CHANNEL\"}\n\n")
                .is_err()
        );
        for garbage in [
            "event: data\ndata: SECRETSECRET\n\n",
            "event: data\ndata: {\"data\":[{\"value\":\"SECRETSECRET\"}]}\n\n",
        ] {
            let err = stream_values(garbage.as_bytes()).unwrap_err();
            assert!(!err.contains("SECRETSECRET"), "{err}");
        }
    }
}
