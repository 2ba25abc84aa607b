//! `prometheus`: scales on the value of a PromQL instant query (`GET /api/v1/query`).
//! Compatible with KEDA's `prometheus` trigger (`pkg/scalers/prometheus_scaler.go`).
//!
//! Every trigger on the same server with the same credentials, TLS settings and timeout shares
//! one HTTP client, and so one pool of keep-alive connections, leased from the shared
//! [`ClientPools`](crate::pool::ClientPools); KEDA builds one client per trigger.

pub mod response;

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use http::header::HeaderMap;
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::authentication::{
    API_KEY, AUTH_MODES, BEARER_TOKEN, CA, CERT, CUSTOM_AUTH_HEADER, CUSTOM_AUTH_VALUE, HttpAuth,
    KEY, KEY_PARAM_NAME, METHOD, PASSWORD, USERNAME,
};
use crate::context::{Clock, ScalerContext};
use crate::error::{ScalerError, TriggerId};
use crate::http_client::{
    self, HttpClient, HttpClientKey, HttpGetError, describe_url, header_map, parse_http_url,
};
use crate::metadata::{MAX_TIMEOUT_MS, METADATA_AUTH, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pool::Held;
use crate::remote::{Classify, Failure};
use crate::scaler::{BuiltScaler, MetricsAndActivity, Scaler};

const SERVER_ADDRESS: Param = Param::required("serverAddress");
const QUERY: Param = Param::required("query");
const QUERY_PARAMETERS: Param = Param::optional("queryParameters");
const THRESHOLD: Param = Param::required("threshold");
const ACTIVATION_THRESHOLD: Param = Param::optional("activationThreshold").default("0");
const NAMESPACE: Param = Param::optional("namespace");
const CUSTOM_HEADERS: Param = Param::optional("customHeaders");
const CORTEX_ORG_ID: Param = Param::optional("cortexOrgID");
const IGNORE_NULL_VALUES: Param = Param::optional("ignoreNullValues").default("true");
const UNSAFE_SSL: Param = Param::optional("unsafeSsl").default("false");
const TIMEOUT: Param = Param::optional("timeout").range(0.0, MAX_TIMEOUT_MS);
const AWS_REGION: Param = Param::optional("awsRegion").order(METADATA_AUTH);
const IDENTITY_OWNER: Param = Param::optional("identityOwner");

/// The multi-tenant header of Cortex, Mimir and Loki, set from `cortexOrgID`.
pub const SCOPE_ORG_ID: &str = "X-Scope-OrgID";

/// The parameters of `prometheus`.
pub const PARAMS: &[Param] = &[
    SERVER_ADDRESS,
    QUERY,
    QUERY_PARAMETERS,
    THRESHOLD,
    ACTIVATION_THRESHOLD,
    NAMESPACE,
    CUSTOM_HEADERS,
    CORTEX_ORG_ID,
    IGNORE_NULL_VALUES,
    UNSAFE_SSL,
    TIMEOUT,
    AWS_REGION,
    IDENTITY_OWNER,
    AUTH_MODES,
    USERNAME,
    PASSWORD,
    BEARER_TOKEN,
    CERT,
    KEY,
    CA,
    CUSTOM_AUTH_HEADER,
    CUSTOM_AUTH_VALUE,
    API_KEY,
    METHOD,
    KEY_PARAM_NAME,
];

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct PrometheusConfig {
    /// `serverAddress/api/v1/query`, without the query parameters.
    pub query_url: url::Url,
    /// The PromQL query.
    pub query: String,
    /// Extra query parameters: `namespace` first, then `queryParameters`.
    pub query_parameters: Vec<(String, String)>,
    /// `customHeaders`, plus `X-Scope-OrgID` from `cortexOrgID`.
    pub headers: HeaderMap,
    /// The target.
    pub threshold: f64,
    /// Active iff the value is above this.
    pub activation_threshold: f64,
    /// An empty result or a non-finite value is 0 instead of an error.
    pub ignore_null_values: bool,
    /// The pooled client's key: server, authentication, timeout.
    pub client: HttpClientKey,
    /// `s<index>-prometheus`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
}

impl PrometheusConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// A required parameter is missing, a value is malformed (`serverAddress` not an http(s)
    /// URL, `threshold` not a number, a header not valid HTTP), or the authentication block is
    /// incomplete.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let server: String = p.get(&SERVER_ADDRESS)?;
            let server = parse_http_url(p, &SERVER_ADDRESS, &server)?;
            let mut query_url = server.clone();
            query_url.set_path(&format!(
                "{}/api/v1/query",
                server.path().trim_end_matches('/')
            ));
            let mut query_parameters = Vec::new();
            if let Some(namespace) = p.get_opt::<String>(&NAMESPACE)? {
                query_parameters.push(("namespace".to_string(), namespace));
            }
            let extra: BTreeMap<String, String> = p.get_opt(&QUERY_PARAMETERS)?.unwrap_or_default();
            query_parameters.extend(extra);
            let custom: BTreeMap<String, String> = p.get_opt(&CUSTOM_HEADERS)?.unwrap_or_default();
            let mut headers = header_map(
                p,
                &CUSTOM_HEADERS,
                custom.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            )?;
            if let Some(org) = p.get_opt::<String>(&CORTEX_ORG_ID)?
                && !headers.contains_key(SCOPE_ORG_ID)
            {
                let org = header_map(p, &CORTEX_ORG_ID, [(SCOPE_ORG_ID, org.as_str())])?;
                headers.extend(org);
            }
            // Accepted for compatibility; they only matter with an AWS pod identity, which the
            // operator rejects.
            let _: Option<String> = p.get_opt(&AWS_REGION)?;
            let _: Option<String> = p.get_opt(&IDENTITY_OWNER)?;
            let timeout_ms: Option<u64> = p.get_opt(&TIMEOUT)?;
            let timeout = timeout_ms
                .filter(|ms| *ms > 0)
                .map_or(ctx.global_http_timeout, Duration::from_millis);
            let auth = HttpAuth::parse(p, p.get(&UNSAFE_SSL)?)?;
            Ok(Self {
                client: HttpClientKey {
                    origin: http_client::origin(&server),
                    auth,
                    timeout,
                },
                query_url,
                query: p.get(&QUERY)?,
                query_parameters,
                headers,
                threshold: p.get(&THRESHOLD)?,
                activation_threshold: p.get(&ACTIVATION_THRESHOLD)?,
                ignore_null_values: p.get(&IGNORE_NULL_VALUES)?,
                metric_name: ctx.metric_name("prometheus"),
                metric_type,
            })
        })?)
    }

    /// The request URL at `now`: `query`, `time` (RFC 3339, seconds, UTC), `namespace`, then
    /// `queryParameters`.
    pub fn request_url(&self, now: jiff::Timestamp) -> url::Url {
        let mut url = self.query_url.clone();
        url.query_pairs_mut()
            .append_pair("query", &self.query)
            .append_pair("time", &now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
            .extend_pairs(&self.query_parameters);
        url
    }
}

/// A `prometheus` scaler holding its share of the server's client.
pub struct PrometheusScaler {
    config: PrometheusConfig,
    trigger: TriggerId,
    clock: Clock,
    client: Held<HttpClientKey, HttpClient>,
}

impl PrometheusScaler {
    /// Parses the trigger and leases the client of its server (building it if it is the first
    /// trigger on that server). Does not connect.
    ///
    /// # Errors
    /// Invalid metadata, or TLS material that does not parse.
    pub async fn build(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let config = PrometheusConfig::parse(ctx)?;
        let lease = http_client::lease(ctx, config.client.clone()).await?;
        Ok(Self {
            config,
            trigger: ctx.trigger_id(),
            clock: ctx.clock.clone(),
            client: Held::new(lease),
        })
    }

    /// The parsed trigger.
    pub fn config(&self) -> &PrometheusConfig {
        &self.config
    }

    /// Runs the query now and returns its value.
    ///
    /// # Errors
    /// The server cannot be reached or answers an error; the result is not one usable value;
    /// the scaler is closed. Messages name the query and the server, never the credentials.
    pub async fn value(&self) -> Result<f64, ScalerError> {
        let client = self.client.client().ok_or_else(|| ScalerError::Closed {
            trigger: self.trigger.clone(),
        })?;
        let url = self.config.request_url(self.clock.now());
        let query = &self.config.query;
        let body = client.get(url, &self.config.headers).await.map_err(|e| {
            // A Prometheus API error shows its errorType (a fixed vocabulary), never its text.
            let failure = match &e {
                HttpGetError::Status { status, body, .. } => match response::api_error(body) {
                    Some(error_type) => Failure::new(
                        crate::remote::Kind::Server {
                            system: "Prometheus",
                            code: Some(format!("{error_type} (HTTP {})", status.as_u16())),
                        },
                        Some(String::from_utf8_lossy(body).into_owned()),
                    ),
                    None => e.classify(),
                },
                _ => e.classify(),
            };
            ScalerError::Query {
                trigger: self.trigger.clone(),
                operation: format!(
                    "prometheus query `{query}` on serverAddress {}",
                    describe_url(&self.config.query_url)
                ),
                source: failure,
            }
        })?;
        let ignore_null_values = self.config.ignore_null_values;
        // KEDA's keda_scaler_empty_upstream_responses_total, counted by the operator for the
        // read in progress (crate::request_metrics).
        response::query_value_reporting_empty(&body, query, ignore_null_values, || {
            crate::request_metrics::empty_upstream_response(ignore_null_values);
        })
        .map_err(|message| ScalerError::Unexpected {
            trigger: self.trigger.clone(),
            message,
        })
    }
}

#[async_trait]
impl Scaler for PrometheusScaler {
    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.config.metric_name.clone(),
            metric_target_milli(self.config.metric_type, self.config.threshold),
        )]
    }

    async fn metrics_and_activity(
        &self,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let value = self.value().await?;
        Ok(MetricsAndActivity::single(
            metric_name,
            value,
            self.config.activation_threshold,
        ))
    }

    async fn close(&self) {
        self.client.release();
    }
}

/// Factory of `prometheus`.
///
/// # Errors
/// See [`PrometheusScaler::build`].
pub async fn build(ctx: ScalerContext) -> Result<BuiltScaler, ScalerError> {
    Ok(BuiltScaler::Pull(Box::new(
        PrometheusScaler::build(&ctx).await?,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(metadata: &[(&str, &str)]) -> ScalerContext {
        ScalerContext {
            metadata: metadata
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..ScalerContext::new("prometheus", 2)
        }
    }

    #[test]
    fn the_request_carries_query_time_namespace_and_parameters() {
        let config = PrometheusConfig::parse(&ctx(&[
            (
                "serverAddress",
                "http://prometheus.monitoring:9090/select/0/prometheus/",
            ),
            ("query", r#"sum(rate(http_requests_total{app="a b"}[2m]))"#),
            ("threshold", "100.5"),
            ("namespace", "team-a"),
            ("queryParameters", "dedup=true, partial_response=false"),
        ]))
        .unwrap();
        let at: jiff::Timestamp = "2024-03-10T12:00:00.123Z".parse().unwrap();
        assert_eq!(
            config.request_url(at).as_str(),
            "http://prometheus.monitoring:9090/select/0/prometheus/api/v1/query?\
             query=sum%28rate%28http_requests_total%7Bapp%3D%22a+b%22%7D%5B2m%5D%29%29\
             &time=2024-03-10T12%3A00%3A00Z&namespace=team-a&dedup=true&partial_response=false"
        );
        assert_eq!(config.metric_name, "s2-prometheus");
        assert_eq!(config.client.origin, "http://prometheus.monitoring:9090");
        let target = metric_target_milli(config.metric_type, config.threshold);
        assert_eq!(target.average_value.map(|q| q.0), Some("100500m".into()));
    }

    #[test]
    fn headers_come_from_custom_headers_and_cortex_org_id() {
        let config = PrometheusConfig::parse(&ctx(&[
            ("serverAddress", "http://p:9090"),
            ("query", "up"),
            ("threshold", "1"),
            ("customHeaders", "X-Client-Id=cid,X-Tenant-Id=tid"),
            ("cortexOrgID", "org-1"),
        ]))
        .unwrap();
        assert_eq!(config.headers["x-client-id"], "cid");
        assert_eq!(config.headers["x-scope-orgid"], "org-1");
        // customHeaders wins over the deprecated cortexOrgID.
        let config = PrometheusConfig::parse(&ctx(&[
            ("serverAddress", "http://p:9090"),
            ("query", "up"),
            ("threshold", "1"),
            ("customHeaders", "X-Scope-OrgID=tenant-b"),
            ("cortexOrgID", "org-1"),
        ]))
        .unwrap();
        assert_eq!(config.headers.get_all("x-scope-orgid").iter().count(), 1);
        assert_eq!(config.headers["x-scope-orgid"], "tenant-b");
    }

    #[test]
    fn errors_name_the_parameter() {
        let base = [
            ("serverAddress", "http://p:9090"),
            ("query", "up"),
            ("threshold", "1"),
        ];
        // (metadata replacing the base entries, error)
        let rows: &[(&[(&str, &str)], &str)] = &[
            (
                &[("query", "")],
                r#"trigger 2 (prometheus): missing required parameter "query""#,
            ),
            (
                &[("threshold", "")],
                r#"trigger 2 (prometheus): missing required parameter "threshold""#,
            ),
            (
                &[("threshold", "lots")],
                r#"trigger 2 (prometheus): parameter "threshold": "lots" is not a valid number"#,
            ),
            (
                &[("serverAddress", "prometheus:9090")],
                r#"trigger 2 (prometheus): parameter "serverAddress" must be an http:// or https:// URL, not prometheus:"#,
            ),
            (
                &[("serverAddress", "http://u:s3cret@")],
                "trigger 2 (prometheus): parameter \"serverAddress\" is not a valid URL (empty host); write it as http://host:port/path",
            ),
            (
                &[("ignoreNullValues", "maybe")],
                r#"trigger 2 (prometheus): parameter "ignoreNullValues": "maybe" is not a valid boolean"#,
            ),
            (
                &[("customHeaders", "X-Bad Name=1")],
                r#"trigger 2 (prometheus): parameter "customHeaders": "X-Bad Name" is not a valid HTTP header name"#,
            ),
            (
                &[("customHeaders", "novalue")],
                r#"trigger 2 (prometheus): parameter "customHeaders": "novalue" is not a list of key=value pairs"#,
            ),
            (
                &[("timeout", "-5")],
                r#"trigger 2 (prometheus): parameter "timeout": "-5" is not between 0 and 3600000"#,
            ),
            (
                &[("authModes", "basic")],
                r#"trigger 2 (prometheus): missing required parameter "username" (TriggerAuthentication) for authModes basic"#,
            ),
        ];
        for (i, (changes, expected)) in rows.iter().enumerate() {
            let mut metadata: BTreeMap<&str, &str> = base.iter().copied().collect();
            metadata.extend(changes.iter().copied());
            let pairs: Vec<(&str, &str)> = metadata.into_iter().collect();
            let err = PrometheusConfig::parse(&ctx(&pairs)).expect_err("invalid");
            assert_eq!(err.to_string(), *expected, "row {i}");
        }
    }
}
