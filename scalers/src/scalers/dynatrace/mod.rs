//! `dynatrace`: scales on a Dynatrace metric (Metrics API v2, `metricSelector`) or a DQL query
//! on Grail (`query`). Compatible with KEDA's `dynatrace` trigger
//! (`pkg/scalers/dynatrace_scaler.go`).
//!
//! `host` comes from the trigger; the token from the TriggerAuthentication only, sent as
//! `Authorization: Api-Token <token>` (metrics) or `Bearer <token>` (DQL), as in KEDA. Every
//! trigger with the same host, token and timeout shares one HTTP client.

pub mod response;

use std::borrow::Cow;
use std::time::Duration;

use http::HeaderValue;
use http::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap};
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::authentication::{AuthMode, HttpAuth};
use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError};
use crate::http_client::{self, HttpClientKey, describe_url, parse_http_url};
use crate::metadata::{AUTH, METADATA_AUTH, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pooled::{ApiRequest, HttpApi, HttpCall, Pooled};
use crate::scaler::MetricsAndActivity;
use crate::scalers::rabbitmq::config::KedaDuration;
use crate::secret::Secret;

const HOST: Param = Param::required("host").order(METADATA_AUTH);
const TOKEN: Param = Param::required("token").order(AUTH).secret();
const METRIC_SELECTOR: Param = Param::optional("metricSelector");
const QUERY: Param = Param::optional("query");
const QUERY_TIMEOUT_SECONDS: Param = Param::optional("queryTimeoutSeconds")
    .default("10")
    .range(0.0, 3600.0);
const QUERY_POLLING_WAIT: Param = Param::optional("queryPollingWait")
    .default("1s")
    .range(0.0, 60_000.0);
const QUERY_POLLING_TRIES: Param = Param::optional("queryPollingTries")
    .default("5")
    .range(0.0, 60.0);
const FROM: Param = Param::optional("from");
const THRESHOLD: Param = Param::required("threshold");
const ACTIVATION_THRESHOLD: Param = Param::optional("activationThreshold");

/// The parameters of `dynatrace`.
pub const PARAMS: &[Param] = &[
    HOST,
    TOKEN,
    METRIC_SELECTOR,
    QUERY,
    QUERY_TIMEOUT_SECONDS,
    QUERY_POLLING_WAIT,
    QUERY_POLLING_TRIES,
    FROM,
    THRESHOLD,
    ACTIVATION_THRESHOLD,
];

/// The Metrics API v2 data points path.
pub const METRICS_PATH: &str = "api/v2/metrics/query";
/// The Grail query API path (`:execute`, `:poll`).
pub const DQL_PATH: &str = "platform/storage/query/v1/query";

/// What is read.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// `metricSelector` from `from` (default `now-2h`).
    Metric {
        /// The selector.
        selector: String,
        /// The start of the timeframe.
        from: String,
    },
    /// A DQL `query`, polled `tries` times `wait` apart.
    Dql {
        /// The query.
        query: String,
        /// `queryTimeoutSeconds`, sent as `fetchTimeoutSeconds`.
        timeout_seconds: u32,
        /// `queryPollingWait`.
        wait: Duration,
        /// `queryPollingTries`.
        tries: u32,
    },
}

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct DynatraceConfig {
    /// `host` (trailing `/` removed) and the client key, or why `host` cannot be used.
    pub endpoint: Result<(url::Url, HttpClientKey), MetadataError>,
    /// What is read.
    pub source: Source,
    /// The target.
    pub threshold: f64,
    /// Active iff the value is above this.
    pub activation_threshold: f64,
    /// `s<index>-dynatrace`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
    headers: HeaderMap,
}

impl DynatraceConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// `host`, `token` or `threshold` missing; a malformed number or duration; neither or both
    /// of `metricSelector` and `query`; `from` with `query`; a token an HTTP header cannot
    /// carry.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let host: String = p.get(&HOST)?;
            let token: Secret = p.get(&TOKEN)?;
            let selector: Option<String> = p.get_opt(&METRIC_SELECTOR)?;
            let query: Option<String> = p.get_opt(&QUERY)?;
            let timeout_seconds: u32 = p.get(&QUERY_TIMEOUT_SECONDS)?;
            let KedaDuration(wait) = p.get(&QUERY_POLLING_WAIT)?;
            let tries: u32 = p.get(&QUERY_POLLING_TRIES)?;
            let from: Option<String> = p.get_opt(&FROM)?;
            let threshold: f64 = p.get(&THRESHOLD)?;
            let activation_threshold: f64 = p.get_opt(&ACTIVATION_THRESHOLD)?.unwrap_or(0.0);
            let source = match (selector, query) {
                (None, None) => {
                    return Err(p.rule(
                        "either parameter \"metricSelector\" or parameter \"query\" must be given",
                    ));
                }
                (Some(_), Some(_)) => {
                    return Err(p.rule(
                        "parameters \"metricSelector\" and \"query\" are mutually exclusive; give only one",
                    ));
                }
                (Some(selector), None) => Source::Metric {
                    selector,
                    from: from.unwrap_or_else(|| "now-2h".into()),
                },
                (None, Some(_)) if from.is_some() => {
                    return Err(p.rule(
                        "parameter \"from\" cannot be used with \"query\"; set the time range in the DQL query itself",
                    ));
                }
                (None, Some(query)) => Source::Dql {
                    query,
                    timeout_seconds,
                    wait,
                    tries,
                },
            };
            let scheme = match source {
                Source::Metric { .. } => "Api-Token",
                Source::Dql { .. } => "Bearer",
            };
            let value = format!("{scheme} {}", token.expose());
            if HeaderValue::from_str(&value).is_err() {
                return Err(p.rule(
                    "parameter \"token\" holds characters an HTTP header cannot carry",
                ));
            }
            let auth = HttpAuth {
                modes: vec![AuthMode::Custom],
                custom: Some((AUTHORIZATION, Secret::new(value))),
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
            let mut headers = HeaderMap::new();
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            Ok(Self {
                endpoint,
                source,
                threshold,
                activation_threshold,
                metric_name: ctx.metric_name("dynatrace"),
                metric_type,
                headers,
            })
        })?)
    }

    /// `host` followed by `path` (KEDA: `<host without trailing />/<path>`).
    fn url(&self, path: &str) -> Result<url::Url, MetadataError> {
        let (host, _) = self.endpoint.as_ref().map_err(Clone::clone)?;
        let mut url = host.clone();
        url.set_query(None);
        url.set_fragment(None);
        let base = url.path().trim_end_matches('/').to_string();
        url.set_path(&format!("{base}/{path}"));
        Ok(url)
    }
}

/// A `dynatrace` scaler.
pub type DynatraceScaler = Pooled<DynatraceConfig>;

#[async_trait::async_trait]
impl HttpApi for DynatraceConfig {
    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        DynatraceConfig::parse(ctx)
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

    /// The first request of a read: the metric query, or the DQL `:execute`.
    fn request(&self, _now: jiff::Timestamp) -> Result<ApiRequest<'_>, MetadataError> {
        match &self.source {
            Source::Metric { selector, from } => {
                let mut url = self.url(METRICS_PATH)?;
                url.query_pairs_mut()
                    .append_pair("from", from)
                    .append_pair("metricSelector", selector);
                Ok(ApiRequest::get(url, &self.headers))
            }
            Source::Dql {
                query,
                timeout_seconds,
                ..
            } => {
                let url = self.url(&format!("{DQL_PATH}:execute"))?;
                let body = serde_json::json!({
                    "query": query,
                    "fetchTimeoutSeconds": timeout_seconds,
                });
                Ok(ApiRequest::post(
                    url,
                    Cow::Borrowed(&self.headers),
                    body.to_string(),
                ))
            }
        }
    }

    fn operation(&self, request: &ApiRequest<'_>) -> String {
        match &self.source {
            Source::Metric { selector, .. } => format!(
                "dynatrace metricSelector `{selector}` on host {}",
                describe_url(&request.url)
            ),
            Source::Dql { query, .. } => format!(
                "dynatrace DQL query `{query}` on host {}",
                describe_url(&request.url)
            ),
        }
    }

    fn read(&self, body: &[u8], metric_name: &str) -> Result<MetricsAndActivity, String> {
        let value = response::metrics_value(body)?;
        Ok(MetricsAndActivity::single(
            metric_name,
            value,
            self.activation_threshold,
        ))
    }

    /// The metric query in one request; a DQL query started with `:execute`, then polled at
    /// most `queryPollingTries` times, `queryPollingWait` apart (none before the first).
    async fn fetch(
        &self,
        call: &HttpCall<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let request = self
            .request(call.read.now())
            .map_err(ScalerError::Metadata)?;
        let Source::Dql { wait, tries, .. } = &self.source else {
            let body = call.send(self, request).await?;
            return self
                .read(&body, metric_name)
                .map_err(|message| call.read.unexpected(message));
        };
        let started = call.send(self, request).await?;
        let token = response::execute_token(&started).map_err(|m| call.read.unexpected(m))?;
        let mut poll = self
            .url(&format!("{DQL_PATH}:poll"))
            .map_err(ScalerError::Metadata)?;
        poll.query_pairs_mut().append_pair("request-token", &token);
        for attempt in 0..*tries {
            if attempt > 0 {
                tokio::time::sleep(*wait).await;
            }
            let body = call
                .send(self, ApiRequest::get(poll.clone(), &self.headers))
                .await?;
            if let Some(value) = response::poll_value(&body).map_err(|m| call.read.unexpected(m))? {
                return Ok(MetricsAndActivity::single(
                    metric_name,
                    value,
                    self.activation_threshold,
                ));
            }
        }
        Err(call.read.unexpected(format!(
            "the DQL query did not complete within {tries} polls (queryPollingTries)"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::test_context;

    /// (metadata, TriggerAuthentication parameters, what the error names if any).
    type Case<'a> = (
        Vec<(&'a str, &'a str)>,
        Vec<(&'a str, &'a str)>,
        Option<&'a str>,
    );

    fn parse(metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> Result<DynatraceConfig, String> {
        DynatraceConfig::parse(&test_context("dynatrace", 1, metadata, &[], auth))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn keda_s_metadata_cases() {
        let token = [("token", "dt0c01.TOKEN")];
        let host = ("host", "https://abc12345.live.dynatrace.com/");
        let sel = (
            "metricSelector",
            "builtin:service.requestCount.total:splitBy():fold",
        );
        let dql = ("query", "fetch logs | summarize r = count()");
        let rows: Vec<Case<'_>> = vec![
            (vec![host, sel, ("threshold", "10")], token.to_vec(), None),
            (vec![host, dql, ("threshold", "10")], token.to_vec(), None),
            (vec![sel, ("threshold", "10")], vec![token[0], host], None),
            (
                vec![host, ("threshold", "10")],
                token.to_vec(),
                Some("\"metricSelector\""),
            ),
            (
                vec![host, sel, dql, ("threshold", "10")],
                token.to_vec(),
                Some("mutually exclusive"),
            ),
            (
                vec![host, dql, ("from", "now-1h"), ("threshold", "10")],
                token.to_vec(),
                Some("\"from\""),
            ),
            (vec![host, sel], token.to_vec(), Some("\"threshold\"")),
            (
                vec![host, sel, ("threshold", "10")],
                vec![],
                Some("\"token\""),
            ),
            // The token is read from the TriggerAuthentication only.
            (
                vec![host, sel, ("threshold", "10"), ("token", "t")],
                vec![],
                Some("\"token\""),
            ),
            (
                vec![sel, ("threshold", "10")],
                token.to_vec(),
                Some("\"host\""),
            ),
            (
                vec![host, dql, ("threshold", "10"), ("queryPollingWait", "soon")],
                token.to_vec(),
                Some("\"queryPollingWait\""),
            ),
            (
                vec![
                    host,
                    dql,
                    ("threshold", "10"),
                    ("queryPollingTries", "1000"),
                ],
                token.to_vec(),
                Some("\"queryPollingTries\""),
            ),
        ];
        for (i, (metadata, auth, error)) in rows.iter().enumerate() {
            match (parse(metadata, auth), error) {
                (Ok(_), None) => {}
                (Err(e), Some(name)) => assert!(e.contains(name), "row {i}: {e}"),
                (got, _) => panic!("row {i}: {:?}", got.map(|c| c.metric_name)),
            }
        }
        let config = parse(&[host, sel, ("threshold", "10")], &token).unwrap();
        assert_eq!(config.metric_name, "s1-dynatrace");
        assert_eq!(
            config.source,
            Source::Metric {
                selector: sel.1.into(),
                from: "now-2h".into()
            }
        );
        let request = config.request(jiff::Timestamp::UNIX_EPOCH).unwrap();
        assert_eq!(
            request.url.as_str(),
            "https://abc12345.live.dynatrace.com/api/v2/metrics/query?from=now-2h&metricSelector=builtin%3Aservice.requestCount.total%3AsplitBy%28%29%3Afold"
        );
        let (_, key) = config.endpoint.as_ref().unwrap();
        assert_eq!(
            key.auth
                .custom
                .as_ref()
                .map(|(_, v)| v.expose().to_string()),
            Some("Api-Token dt0c01.TOKEN".into())
        );
        let config = parse(&[host, dql, ("threshold", "10")], &token).unwrap();
        let request = config.request(jiff::Timestamp::UNIX_EPOCH).unwrap();
        assert_eq!(
            request.url.as_str(),
            "https://abc12345.live.dynatrace.com/platform/storage/query/v1/query:execute"
        );
        let body: serde_json::Value =
            serde_json::from_slice(request.body.as_ref().unwrap()).unwrap();
        assert_eq!(body["fetchTimeoutSeconds"], 10);
        assert_eq!(body["query"], dql.1);
        // A host that is not a URL builds and fails reads naming it.
        let config = parse(
            &[("host", "abc.live.dynatrace.com"), sel, ("threshold", "1")],
            &token,
        )
        .unwrap();
        assert!(
            config
                .endpoint
                .unwrap_err()
                .to_string()
                .contains("\"host\"")
        );
    }
}
