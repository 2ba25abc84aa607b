//! `datadog`: scales on the value of a Datadog metrics query (API mode, `GET
//! https://api.<datadogSite>/api/v1/query`), or on a `DatadogMetric` the Datadog Cluster Agent
//! serves (`useClusterAgentProxy: true`, `GET https://<datadogMetricsService>.<datadogNamespace>:<port>/apis/external.metrics.k8s.io/v1beta1/namespaces/<ns>/datadogmetric@<ns>:<name>`).
//! Compatible with KEDA's `datadog` trigger (`pkg/scalers/datadog_scaler.go`).
//!
//! The keys come from the TriggerAuthentication only (`apiKey`, `appKey`, `datadogSite`), as
//! in KEDA. The host is Datadog's own: `datadogSite` must be one of Datadog's sites (the Go
//! client refuses others when it sends), so a trigger cannot send its keys anywhere else.
//! Every trigger with the same site, keys and timeout shares one HTTP client.

pub mod response;

use std::time::Duration;

use http::HeaderName;
use http::header::HeaderMap;
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::authentication::{ApiKeyPlacement, AuthMode, HttpAuth};
use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError};
use crate::http_client::{self, HttpClientKey, describe_url};
use crate::metadata::{AUTH, MAX_TIMEOUT_MS, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pooled::{ApiRequest, HttpApi, HttpCall, Pooled};
use crate::remote::{Failure, Kind};
use crate::scaler::MetricsAndActivity;
use crate::scalers::rabbitmq::config::KedaDuration;
use crate::secret::Secret;

use self::response::{Aggregator, Reading};

const API_KEY: Param = Param::optional("apiKey").order(AUTH).secret();
const APP_KEY: Param = Param::optional("appKey").order(AUTH).secret();
const DATADOG_SITE: Param = Param::optional("datadogSite")
    .order(AUTH)
    .default("datadoghq.com");
const QUERY: Param = Param::optional("query");
const QUERY_AGGREGATOR: Param = Param::optional("queryAggregator").allowed(&["average", "max"]);
const ACTIVATION_QUERY_VALUE: Param = Param::optional("activationQueryValue").default("0");
const AGE: Param = Param::optional("age").default("90").range(0.0, f64::MAX);
const TIME_WINDOW_OFFSET: Param = Param::optional("timeWindowOffset")
    .default("0")
    .range(0.0, f64::MAX);
const LAST_AVAILABLE_POINT_OFFSET: Param = Param::optional("lastAvailablePointOffset")
    .default("0")
    .range(0.0, f64::MAX);
const USE_CLUSTER_AGENT_PROXY: Param = Param::optional("useClusterAgentProxy").default("false");
const HPA_METRIC_NAME: Param = Param::optional("hpaMetricName");
const METRIC_UNAVAILABLE_VALUE: Param = Param::optional("metricUnavailableValue");
const TARGET_VALUE: Param = Param::optional("targetValue").aliases(&["queryValue"]);
const TIMEOUT: Param = Param::optional("timeout").range(0.0, MAX_TIMEOUT_MS);
const TYPE: Param = Param::optional("type");
const DATADOG_NAMESPACE: Param = Param::optional("datadogNamespace").order(AUTH);
const DATADOG_METRICS_SERVICE: Param = Param::optional("datadogMetricsService").order(AUTH);
const DATADOG_METRICS_SERVICE_PORT: Param = Param::optional("datadogMetricsServicePort")
    .order(AUTH)
    .default("8443")
    .range(1.0, 65535.0);
const UNSAFE_SSL: Param = Param::optional("unsafeSsl").order(AUTH).default("false");
const AUTH_MODE: Param = Param::optional("authMode").order(AUTH);
const TOKEN: Param = Param::optional("token").order(AUTH).secret();
const DATADOG_METRIC_NAME: Param = Param::optional("datadogMetricName");
const DATADOG_METRIC_NAMESPACE: Param = Param::optional("datadogMetricNamespace");
const ACTIVATION_TARGET_VALUE: Param = Param::optional("activationTargetValue").default("0");

/// The parameters of `datadog`.
pub const PARAMS: &[Param] = &[
    API_KEY,
    APP_KEY,
    DATADOG_SITE,
    QUERY,
    QUERY_AGGREGATOR,
    ACTIVATION_QUERY_VALUE,
    AGE,
    TIME_WINDOW_OFFSET,
    LAST_AVAILABLE_POINT_OFFSET,
    USE_CLUSTER_AGENT_PROXY,
    HPA_METRIC_NAME,
    METRIC_UNAVAILABLE_VALUE,
    TARGET_VALUE,
    TIMEOUT,
    TYPE,
    DATADOG_NAMESPACE,
    DATADOG_METRICS_SERVICE,
    DATADOG_METRICS_SERVICE_PORT,
    UNSAFE_SSL,
    AUTH_MODE,
    TOKEN,
    DATADOG_METRIC_NAME,
    DATADOG_METRIC_NAMESPACE,
    ACTIVATION_TARGET_VALUE,
];

/// The sites of Datadog's API client (`site` of its server `https://{subdomain}.{site}`).
pub const SITES: &[&str] = &[
    "datadoghq.com",
    "us3.datadoghq.com",
    "us5.datadoghq.com",
    "ap1.datadoghq.com",
    "datadoghq.eu",
    "ddog-gov.com",
];

/// The header of the API key.
pub const API_KEY_HEADER: &str = "DD-API-KEY";
/// The header of the application key.
pub const APP_KEY_HEADER: &str = "DD-APPLICATION-KEY";
/// The path of the query API.
pub const QUERY_PATH: &str = "/api/v1/query";

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct DatadogConfig {
    /// `https://api.<datadogSite>/api/v1/query` and the client key, or why `datadogSite`
    /// cannot be used.
    pub endpoint: Result<(url::Url, HttpClientKey), MetadataError>,
    /// The metrics query.
    pub query: String,
    /// Seconds of the window (`age`).
    pub age: i64,
    /// Seconds the window ends before now (`timeWindowOffset`).
    pub time_window_offset: i64,
    /// How the answer is read.
    pub reading: Reading,
    /// The target (0 when the trigger feeds `scalingModifiers`).
    pub target: f64,
    /// Active iff the value is above this (`activationQueryValue`).
    pub activation: f64,
    /// `s<index>-datadog-<metric of the query>`, or in Cluster Agent mode KEDA's
    /// `datadogmetric@<datadogMetricNamespace>:<datadogMetricName>`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
    /// `useClusterAgentProxy: true`: the `endpoint` is the `DatadogMetric`'s URL on the
    /// Cluster Agent, whose answer is an `ExternalMetricValueList`.
    pub cluster_agent: bool,
}

/// Whether `query` has a scope in braces on one line (KEDA's `.*\{.*\}.*`).
fn has_scope(query: &str) -> bool {
    query
        .lines()
        .any(|line| line.find('{').is_some_and(|i| line[i..].contains('}')))
}

impl DatadogConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// What KEDA refuses: a malformed value; in API mode `appKey` or `apiKey` missing, no `targetValue` (unless the trigger feeds
    /// `scalingModifiers`), `type` with `metricType` or other than `average`/`global`, no
    /// `query` or one without a scope in braces.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        Ok(ctx.parse(|p| {
            let age: i64 = p.get(&AGE)?;
            let time_window_offset: i64 = p.get(&TIME_WINDOW_OFFSET)?;
            let last_available_point_offset: usize = p.get(&LAST_AVAILABLE_POINT_OFFSET)?;
            let aggregator = match p.get_opt::<String>(&QUERY_AGGREGATOR)?.as_deref() {
                Some("average") => Aggregator::Average,
                Some(_) => Aggregator::Max,
                None => Aggregator::None,
            };
            let fill_value: Option<f64> = p.get_opt(&METRIC_UNAVAILABLE_VALUE)?;
            let target: Option<f64> = p.get_opt(&TARGET_VALUE)?;
            let activation: f64 = p.get(&ACTIVATION_QUERY_VALUE)?;
            let timeout: Option<KedaDuration> = p.get_opt(&TIMEOUT)?;
            let site: String = p.get(&DATADOG_SITE)?;
            let query: Option<String> = p.get_opt(&QUERY)?;
            let _: Option<String> = p.get_opt(&HPA_METRIC_NAME)?;
            if let Some(query) = &query
                && !has_scope(query)
            {
                return Err(p.rule(
                    "parameter \"query\" is malformed: missing query scope (a filter in braces, e.g. {*} or {env:prod})",
                ));
            }
            let metric_type = match p.get_opt::<String>(&TYPE)? {
                Some(_) if ctx.metric_type.is_some() => {
                    return Err(p.rule(
                        "only one of parameter \"type\" (deprecated) or the trigger's metricType may be given",
                    ));
                }
                Some(kind) => match kind.to_lowercase().as_str() {
                    "average" => MetricTargetType::AverageValue,
                    "global" => MetricTargetType::Value,
                    _ => {
                        return Err(p.rule("parameter \"type\" has to be global or average"));
                    }
                },
                None => ctx.external_metric_type()?,
            };
            let target = match target {
                Some(target) if target != -1.0 => Some(target),
                _ if ctx.as_metric_source => Some(0.0),
                _ => None,
            };
            if p.get::<bool>(&USE_CLUSTER_AGENT_PROXY)? {
                return cluster_agent(ctx, p, target, metric_type, timeout, fill_value);
            }
            let app_key: Option<Secret> = p.get_opt(&APP_KEY)?;
            let api_key: Option<Secret> = p.get_opt(&API_KEY)?;
            let (Some(app_key), Some(api_key)) = (app_key, api_key) else {
                let missing = if p.is_present(&APP_KEY) { "apiKey" } else { "appKey" };
                return Err(p.rule(format!(
                    "parameter \"{missing}\" is missing: the Datadog API mode needs apiKey and appKey from the TriggerAuthentication"
                )));
            };
            let Some(target) = target else {
                return Err(p.rule("no parameter \"targetValue\" (or \"queryValue\") given"));
            };
            let Some(query) = query else {
                return Err(p.rule("missing parameter \"query\""));
            };
            let metric = query.split('{').next().unwrap_or_default();
            let metric_name = ctx.metric_name(&format!("datadog-{metric}"));
            let endpoint = endpoint(ctx, p, &site, api_key, app_key, timeout);
            Ok(Self {
                endpoint,
                query,
                age,
                time_window_offset,
                reading: Reading {
                    aggregator,
                    last_available_point_offset,
                    fill_value,
                },
                target,
                activation,
                metric_name,
                metric_type,
                cluster_agent: false,
            })
        })?)
    }
}

/// A DNS label (a Service or namespace name): nothing that could leave the host name.
fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// KEDA's `validateClusterAgentMetadata`: the Cluster Agent's metrics Service, the
/// `DatadogMetric`, the target; bearer authentication with `authMode: bearer`.
fn cluster_agent(
    ctx: &ScalerContext,
    p: &crate::metadata::MetadataParser<'_>,
    target: Option<f64>,
    metric_type: MetricTargetType,
    timeout: Option<KedaDuration>,
    fill_value: Option<f64>,
) -> Result<DatadogConfig, MetadataError> {
    let service: Option<String> = p.get_opt(&DATADOG_METRICS_SERVICE)?;
    let metric: Option<String> = p.get_opt(&DATADOG_METRIC_NAME)?;
    let namespace: Option<String> = p.get_opt(&DATADOG_NAMESPACE)?;
    let metric_namespace: Option<String> = p.get_opt(&DATADOG_METRIC_NAMESPACE)?;
    let port: u16 = p.get(&DATADOG_METRICS_SERVICE_PORT)?;
    let unsafe_ssl: bool = p.get(&UNSAFE_SSL)?;
    let activation: f64 = p.get(&ACTIVATION_TARGET_VALUE)?;
    let auth_mode: Option<String> = p.get_opt(&AUTH_MODE)?;
    let token: Option<Secret> = p.get_opt(&TOKEN)?;
    let missing = |name: &str| {
        p.rule(format!(
            "parameter \"{name}\" is required with useClusterAgentProxy"
        ))
    };
    let service = service.ok_or_else(|| missing(DATADOG_METRICS_SERVICE.name))?;
    let metric = metric.ok_or_else(|| missing(DATADOG_METRIC_NAME.name))?;
    let namespace = namespace.ok_or_else(|| missing(DATADOG_NAMESPACE.name))?;
    let metric_namespace =
        metric_namespace.ok_or_else(|| missing(DATADOG_METRIC_NAMESPACE.name))?;
    let target =
        target.ok_or_else(|| p.rule("no parameter \"targetValue\" (or \"queryValue\") given"))?;
    let bearer = match auth_mode.as_deref().map(str::trim) {
        None => None,
        Some("bearer") => Some(
            token.ok_or_else(|| p.rule("parameter \"token\" is required with authMode bearer"))?,
        ),
        Some(other) => {
            return Err(p.rule(format!(
                "parameter \"authMode\": {other:?} is not supported (only bearer)"
            )));
        }
    };
    for (param, value) in [
        (&DATADOG_METRICS_SERVICE, &service),
        (&DATADOG_NAMESPACE, &namespace),
    ] {
        if !is_dns_label(value) {
            return Err(p.rule(format!(
                "parameter \"{}\" must be a Kubernetes name (lowercase letters, digits, -)",
                param.name
            )));
        }
    }
    let hpa_metric_name = format!("datadogmetric@{metric_namespace}:{metric}");
    let mut url = url::Url::parse(&format!("https://{service}.{namespace}:{port}"))
        .map_err(|e| p.rule(format!("the Cluster Agent address is not a URL ({e})")))?;
    if let Ok(mut path) = url.path_segments_mut() {
        path.clear().extend([
            "apis",
            "external.metrics.k8s.io",
            "v1beta1",
            "namespaces",
            &metric_namespace,
            &hpa_metric_name,
        ]);
    }
    // Only the process can move this host (tests); a namespace cannot.
    let url = ctx.vendor_endpoints.redirect(url);
    let auth = HttpAuth {
        modes: if bearer.is_some() {
            vec![AuthMode::Bearer]
        } else {
            Vec::new()
        },
        bearer,
        tls: crate::tls::TlsSettings {
            insecure: unsafe_ssl,
            ..Default::default()
        },
        ..HttpAuth::default()
    };
    let timeout = match timeout {
        Some(KedaDuration(t)) if t > Duration::ZERO => t,
        _ => ctx.global_http_timeout,
    };
    let key = HttpClientKey {
        origin: http_client::origin(&url),
        auth,
        timeout,
    };
    Ok(DatadogConfig {
        endpoint: Ok((url, key)),
        query: String::new(),
        age: 0,
        time_window_offset: 0,
        reading: Reading {
            aggregator: Aggregator::None,
            last_available_point_offset: 0,
            fill_value,
        },
        target,
        activation,
        metric_name: hpa_metric_name,
        metric_type,
        cluster_agent: true,
    })
}

/// The query URL on `site` (through the process' vendor endpoints) and the client key.
fn endpoint(
    ctx: &ScalerContext,
    p: &crate::metadata::MetadataParser<'_>,
    site: &str,
    api_key: Secret,
    app_key: Secret,
    timeout: Option<KedaDuration>,
) -> Result<(url::Url, HttpClientKey), MetadataError> {
    if !SITES.contains(&site) {
        return Err(p.rule(format!(
            "parameter \"datadogSite\" must be one of Datadog's sites ({})",
            SITES.join(", ")
        )));
    }
    let url = url::Url::parse(&format!("https://api.{site}{QUERY_PATH}")).map_err(|e| {
        p.rule(format!(
            "parameter \"datadogSite\" does not make a URL ({e})"
        ))
    })?;
    let url = ctx.vendor_endpoints.redirect(url);
    let auth = HttpAuth {
        modes: vec![AuthMode::Custom, AuthMode::ApiKey],
        custom: Some((HeaderName::from_static("dd-api-key"), api_key)),
        api_key: Some((
            app_key,
            ApiKeyPlacement::Header(HeaderName::from_static("dd-application-key")),
        )),
        ..HttpAuth::default()
    };
    let timeout = match timeout {
        Some(KedaDuration(t)) if t > Duration::ZERO => t,
        _ => ctx.global_http_timeout,
    };
    let key = HttpClientKey {
        origin: http_client::origin(&url),
        auth,
        timeout,
    };
    Ok((url, key))
}

/// A `datadog` scaler.
pub type DatadogScaler = Pooled<DatadogConfig>;

#[async_trait::async_trait]
impl HttpApi for DatadogConfig {
    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        DatadogConfig::parse(ctx)
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
            metric_target_milli(self.metric_type, self.target),
        )]
    }

    fn request(&self, now: jiff::Timestamp) -> Result<ApiRequest<'_>, MetadataError> {
        static NO_HEADERS: std::sync::LazyLock<HeaderMap> =
            std::sync::LazyLock::new(HeaderMap::new);
        let (url, _) = self.endpoint.as_ref().map_err(Clone::clone)?;
        if self.cluster_agent {
            return Ok(ApiRequest::get(url.clone(), &NO_HEADERS));
        }
        let to = now.as_second().saturating_sub(self.time_window_offset);
        let from = to.saturating_sub(self.age);
        let mut url = url.clone();
        url.query_pairs_mut()
            .append_pair("from", &from.to_string())
            .append_pair("to", &to.to_string())
            .append_pair("query", &self.query);
        Ok(ApiRequest::get(url, &NO_HEADERS))
    }

    fn operation(&self, request: &ApiRequest<'_>) -> String {
        if self.cluster_agent {
            return format!(
                "Datadog Cluster Agent metric {} on {}",
                self.metric_name,
                describe_url(&request.url)
            );
        }
        format!(
            "datadog query `{}` on {}",
            self.query,
            describe_url(&request.url)
        )
    }

    /// Datadog's documented refusals, in KEDA's words: 403 (keys), 429 (rate limit).
    fn error_answer(&self, status: http::StatusCode, body: &[u8]) -> Option<Failure> {
        let code = match status.as_u16() {
            403 => {
                "forbidden (HTTP 403): check that the Datadog API and App keys are correct and that the App key has the permissions to query metrics"
            }
            429 => "rate limited (HTTP 429): the Datadog account reached its query rate limit",
            _ => return None,
        };
        Some(Failure::new(
            Kind::Server {
                system: "Datadog",
                code: Some(code.into()),
            },
            Some(String::from_utf8_lossy(body).into_owned()),
        ))
    }

    fn read(&self, body: &[u8], metric_name: &str) -> Result<MetricsAndActivity, String> {
        let value = if self.cluster_agent {
            response::cluster_agent_value(body)?
        } else {
            response::query_value(body, &self.reading)?
        };
        Ok(MetricsAndActivity::single(
            metric_name,
            value,
            self.activation,
        ))
    }

    /// One query; with `metricUnavailableValue`, Datadog's 422 (metric unavailable) is that
    /// value, as in KEDA.
    async fn fetch(
        &self,
        call: &HttpCall<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let request = self
            .request(call.read.now())
            .map_err(ScalerError::Metadata)?;
        match call.send(self, request).await {
            Ok(body) => self
                .read(&body, metric_name)
                .map_err(|message| call.read.unexpected(message)),
            Err(ScalerError::Query { source, .. })
                if matches!(source.kind(), Kind::Status { code: 422, .. })
                    && self.reading.fill_value.is_some() =>
            {
                let fill = self.reading.fill_value.unwrap_or_default();
                Ok(MetricsAndActivity::single(
                    metric_name,
                    fill,
                    self.activation,
                ))
            }
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::test_context;

    /// (metadata, TriggerAuthentication parameters, what the error names).
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a [(&'a str, &'a str)], &'a str);

    fn ctx(metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> ScalerContext {
        test_context("datadog", 1, metadata, &[], auth)
    }

    const KEYS: &[(&str, &str)] = &[("apiKey", "api-k3y"), ("appKey", "app-k3y")];

    #[test]
    fn the_trigger_parses_with_keda_defaults_and_metric_name() {
        let config = DatadogConfig::parse(&ctx(
            &[
                (
                    "query",
                    "sum:trace.redis.command.hits{env:none,service:redis}.as_count()",
                ),
                ("queryValue", "7"),
            ],
            KEYS,
        ))
        .expect("valid");
        assert_eq!(
            config.metric_name,
            "s1-datadog-sum-trace-redis-command-hits"
        );
        assert_eq!(config.age, 90);
        assert_eq!(config.time_window_offset, 0);
        assert_eq!(config.target, 7.0);
        assert_eq!(config.reading.aggregator, Aggregator::None);
        let (url, key) = config.endpoint.as_ref().expect("usable");
        assert_eq!(url.as_str(), "https://api.datadoghq.com/api/v1/query");
        assert_eq!(key.origin, "https://api.datadoghq.com:443");
        let now = jiff::Timestamp::from_second(1_700_000_000).unwrap();
        let request = config.request(now).unwrap();
        let pairs: Vec<(String, String)> = request
            .url
            .query_pairs()
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        assert_eq!(pairs[0], ("from".into(), "1699999910".into()));
        assert_eq!(pairs[1], ("to".into(), "1700000000".into()));
        assert_eq!(pairs[2].0, "query");
    }

    #[test]
    fn errors_name_the_parameter_as_keda_refuses() {
        let q = ("query", "avg:nginx.net.request_per_s{*}");
        let rows: &[Case<'_>] = &[
            (&[q, ("targetValue", "2")], &[("apiKey", "k")], "\"appKey\""),
            (&[q, ("targetValue", "2")], &[("appKey", "k")], "\"apiKey\""),
            (&[q], KEYS, "\"targetValue\""),
            (&[("targetValue", "2")], KEYS, "\"query\""),
            (
                &[
                    ("query", "avg:nginx.net.request_per_s"),
                    ("targetValue", "2"),
                ],
                KEYS,
                "missing query scope",
            ),
            (&[q, ("targetValue", "2"), ("age", "-1")], KEYS, "\"age\""),
            (
                &[q, ("targetValue", "2"), ("queryAggregator", "min")],
                KEYS,
                "\"queryAggregator\"",
            ),
            (
                &[q, ("targetValue", "2"), ("type", "sum")],
                KEYS,
                "\"type\"",
            ),
            (
                &[q, ("targetValue", "2"), ("useClusterAgentProxy", "true")],
                KEYS,
                "\"datadogMetricsService\"",
            ),
            (
                &[q, ("targetValue", "2"), ("timeout", "soon")],
                KEYS,
                "\"timeout\"",
            ),
        ];
        for (metadata, auth, expected) in rows {
            let err = DatadogConfig::parse(&ctx(metadata, auth))
                .expect_err(expected)
                .to_string();
            assert!(err.starts_with("trigger 1 (datadog): "), "{err}");
            assert!(err.contains(expected), "{err} should name {expected}");
        }
        // Keys in metadata are not read (TriggerAuthentication only, as in KEDA).
        let err = DatadogConfig::parse(&ctx(
            &[q, ("targetValue", "2"), ("apiKey", "k"), ("appKey", "k")],
            &[],
        ))
        .expect_err("metadata keys");
        assert!(err.to_string().contains("\"appKey\""), "{err}");
        // An unknown site builds and fails every read naming it.
        let config = DatadogConfig::parse(&ctx(
            &[q, ("targetValue", "2")],
            &[
                ("apiKey", "k"),
                ("appKey", "k"),
                ("datadogSite", "evil.example"),
            ],
        ))
        .expect("builds");
        let err = config.endpoint.expect_err("unknown site").to_string();
        assert!(err.contains("\"datadogSite\""), "{err}");
        // A trigger feeding scalingModifiers needs no target.
        let source = ScalerContext {
            as_metric_source: true,
            ..ctx(&[q], KEYS)
        };
        assert_eq!(DatadogConfig::parse(&source).unwrap().target, 0.0);
    }

    #[test]
    fn the_deprecated_type_sets_the_metric_type() {
        let q = ("query", "avg:m{*}");
        let config =
            DatadogConfig::parse(&ctx(&[q, ("queryValue", "1"), ("type", "Global")], KEYS))
                .unwrap();
        assert_eq!(config.metric_type, MetricTargetType::Value);
        let both = ScalerContext {
            metric_type: Some("Value".into()),
            ..ctx(&[q, ("queryValue", "1"), ("type", "average")], KEYS)
        };
        let err = DatadogConfig::parse(&both).unwrap_err().to_string();
        assert!(err.contains("\"type\""), "{err}");
    }

    #[test]
    fn vendor_endpoints_move_the_fixed_host_for_tests_only() {
        let fake = url::Url::parse("http://127.0.0.1:4567").unwrap();
        let context = ScalerContext {
            vendor_endpoints: http_client::VendorEndpoints::default()
                .with("api.datadoghq.com", fake),
            ..ctx(&[("query", "avg:m{*}"), ("queryValue", "1")], KEYS)
        };
        let config = DatadogConfig::parse(&context).unwrap();
        let (url, key) = config.endpoint.unwrap();
        assert_eq!(url.as_str(), "http://127.0.0.1:4567/api/v1/query");
        assert_eq!(key.origin, "http://127.0.0.1:4567");
    }

    const AGENT: &[(&str, &str)] = &[
        ("useClusterAgentProxy", "true"),
        ("datadogMetricName", "nginx-hits"),
        ("datadogMetricNamespace", "default"),
        ("targetValue", "2"),
        ("activationTargetValue", "1"),
    ];
    const AGENT_AUTH: &[(&str, &str)] = &[
        ("datadogNamespace", "datadog"),
        ("datadogMetricsService", "datadog-cluster-agent-metrics-api"),
        ("authMode", "bearer"),
        ("token", "t0ken"),
        ("unsafeSsl", "true"),
    ];

    /// KEDA's `testDatadogClusterAgentMetadata` (`pkg/scalers/datadog_scaler_test.go`): the
    /// metric name, the URL, bearer authentication and the refusals, in KEDA's order.
    #[test]
    fn the_cluster_agent_mode_reads_the_datadog_metric() {
        let config = DatadogConfig::parse(&ctx(AGENT, AGENT_AUTH)).expect("valid");
        assert!(config.cluster_agent);
        assert_eq!(config.metric_name, "datadogmetric@default:nginx-hits");
        assert_eq!((config.target, config.activation), (2.0, 1.0));
        let (url, key) = config.endpoint.as_ref().expect("usable");
        assert_eq!(
            url.as_str(),
            "https://datadog-cluster-agent-metrics-api.datadog:8443/apis/external.metrics.k8s.io/v1beta1/namespaces/default/datadogmetric@default:nginx-hits"
        );
        assert!(key.auth.bearer.is_some() && key.auth.tls.insecure);
        let rows: &[(&str, &str)] = &[
            ("datadogMetricsService", "\"datadogMetricsService\""),
            ("datadogNamespace", "\"datadogNamespace\""),
            ("token", "\"token\""),
        ];
        for (drop, named) in rows {
            let auth: Vec<_> = AGENT_AUTH
                .iter()
                .copied()
                .filter(|(k, _)| k != drop)
                .collect();
            let err = DatadogConfig::parse(&ctx(AGENT, &auth))
                .unwrap_err()
                .to_string();
            assert!(err.contains(named), "{err}");
        }
        for (drop, named) in [
            ("datadogMetricName", "\"datadogMetricName\""),
            ("datadogMetricNamespace", "\"datadogMetricNamespace\""),
            ("targetValue", "\"targetValue\""),
        ] {
            let meta: Vec<_> = AGENT.iter().copied().filter(|(k, _)| *k != drop).collect();
            let err = DatadogConfig::parse(&ctx(&meta, AGENT_AUTH))
                .unwrap_err()
                .to_string();
            assert!(err.contains(named), "{err}");
        }
        let mut basic = AGENT_AUTH.to_vec();
        basic.retain(|(k, _)| *k != "authMode");
        basic.push(("authMode", "basic"));
        let err = DatadogConfig::parse(&ctx(AGENT, &basic))
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"authMode\""), "{err}");
        let mut evil = AGENT_AUTH.to_vec();
        evil.retain(|(k, _)| *k != "datadogNamespace");
        evil.push(("datadogNamespace", "evil.example.com/x?"));
        let err = DatadogConfig::parse(&ctx(AGENT, &evil))
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"datadogNamespace\""), "{err}");
    }

    #[test]
    fn the_cluster_agent_answer_is_an_external_metric_value_list() {
        let list = |value: &str| {
            format!(
                r#"{{"kind":"ExternalMetricValueList","apiVersion":"external.metrics.k8s.io/v1beta1","metadata":{{}},"items":[{{"metricName":"datadogmetric@default:nginx-hits","metricLabels":null,"timestamp":"2026-01-01T00:00:00Z","value":{value}}}]}}"#
            )
        };
        assert_eq!(
            response::cluster_agent_value(list("\"12\"").as_bytes()),
            Ok(12.0)
        );
        assert_eq!(
            response::cluster_agent_value(list("\"1500m\"").as_bytes()),
            Ok(1.5)
        );
        assert_eq!(
            response::cluster_agent_value(list("3.5").as_bytes()),
            Ok(3.5)
        );
        for bad in [
            list("\"SECRETSECRET\""),
            list("true"),
            r#"{"items":[]}"#.into(),
            "SECRETSECRET".into(),
        ] {
            let err = response::cluster_agent_value(bad.as_bytes()).unwrap_err();
            assert!(!err.contains("SECRETSECRET"), "{err}");
        }
    }
}
