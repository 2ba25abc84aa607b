//! `prometheus`: scales on the value of a PromQL instant query (`GET /api/v1/query`).
//! Compatible with KEDA's `prometheus` trigger (`pkg/scalers/prometheus_scaler.go`).
//!
//! Every trigger on the same server with the same credentials, TLS settings and timeout shares
//! one HTTP client, and so one pool of keep-alive connections, leased from the shared
//! [`ClientPools`](crate::pool::ClientPools); KEDA builds one client per trigger.

pub mod response;

use std::collections::BTreeMap;
use std::time::Duration;

use http::StatusCode;
use http::header::HeaderMap;
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::authentication::{
    API_KEY, AUTH_MODES, BEARER_TOKEN, CA, CERT, CUSTOM_AUTH_HEADER, CUSTOM_AUTH_VALUE, HttpAuth,
    KEY, KEY_PARAM_NAME, METHOD, PASSWORD, USERNAME,
};
use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError};
use crate::http_client::{self, HttpClientKey, describe_url, header_map, parse_http_url};
use crate::metadata::{MAX_TIMEOUT_MS, METADATA_AUTH, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pooled::{ApiRequest, HttpApi, Pooled};
use crate::remote::Failure;
use crate::scaler::MetricsAndActivity;

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
///
/// KEDA's `parsePrometheusMetadata` takes `serverAddress` and the `customHeaders` names and
/// values as written: a value that is not a URL, or a header HTTP does not allow, fails when it
/// sends the request, at every fetch. So here they leave the trigger built, and every read fails
/// with the error naming the parameter ([`PrometheusConfig::request`]); the object's other
/// triggers keep scaling it (issue 29, row 3). The `customHeaders` list format (`key=value`
/// pairs) is KEDA's typed config and still refuses the build.
#[derive(Clone, Debug)]
pub struct PrometheusConfig {
    /// The server and headers, or why `serverAddress` or a header cannot be used: each read
    /// fails with this error.
    pub request: Result<PrometheusRequest, MetadataError>,
    /// The PromQL query.
    pub query: String,
    /// Extra query parameters: `namespace` first, then `queryParameters`.
    pub query_parameters: Vec<(String, String)>,
    /// The target.
    pub threshold: f64,
    /// Active iff the value is above this.
    pub activation_threshold: f64,
    /// An empty result or a non-finite value is 0 instead of an error.
    pub ignore_null_values: bool,
    /// `s<index>-prometheus`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
}

/// A usable `serverAddress` and headers.
#[derive(Clone, Debug)]
pub struct PrometheusRequest {
    /// `serverAddress/api/v1/query`, without the query parameters.
    pub query_url: url::Url,
    /// The pooled client's key: server, authentication, timeout.
    pub client: HttpClientKey,
    /// `customHeaders`, plus `X-Scope-OrgID` from `cortexOrgID`.
    pub headers: HeaderMap,
}

impl PrometheusConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// A required parameter is missing, a value is malformed (`threshold` not a number, a
    /// header list not of `key=value` pairs), or the authentication block is incomplete. A
    /// `serverAddress` that is not an http(s) URL, or a header HTTP does not allow, is no error
    /// here: it is kept in [`PrometheusConfig::request`] for the reads.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let server: String = p.get(&SERVER_ADDRESS)?;
            let server = parse_http_url(p, &SERVER_ADDRESS, &server);
            let mut query_parameters = Vec::new();
            if let Some(namespace) = p.get_opt::<String>(&NAMESPACE)? {
                query_parameters.push(("namespace".to_string(), namespace));
            }
            let extra: BTreeMap<String, String> = p.get_opt(&QUERY_PARAMETERS)?.unwrap_or_default();
            query_parameters.extend(extra);
            let custom: BTreeMap<String, String> = p.get_opt(&CUSTOM_HEADERS)?.unwrap_or_default();
            let cortex_org_id: Option<String> = p.get_opt(&CORTEX_ORG_ID)?;
            // A header name or value HTTP does not allow fails Go's request at every fetch, not
            // KEDA's parse: kept for the reads as `serverAddress` is.
            let headers = (|| {
                let mut headers = header_map(
                    p,
                    &CUSTOM_HEADERS,
                    custom.iter().map(|(k, v)| (k.as_str(), v.as_str())),
                )?;
                if let Some(org) = &cortex_org_id
                    && !headers.contains_key(SCOPE_ORG_ID)
                {
                    let org = header_map(p, &CORTEX_ORG_ID, [(SCOPE_ORG_ID, org.as_str())])?;
                    headers.extend(org);
                }
                Ok(headers)
            })();
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
                request: server.and_then(|server| {
                    let mut query_url = server.clone();
                    query_url.set_path(&format!(
                        "{}/api/v1/query",
                        server.path().trim_end_matches('/')
                    ));
                    Ok(PrometheusRequest {
                        client: HttpClientKey {
                            origin: http_client::origin(&server),
                            auth,
                            timeout,
                        },
                        query_url,
                        headers: headers?,
                    })
                }),
                query: p.get(&QUERY)?,
                query_parameters,
                threshold: p.get(&THRESHOLD)?,
                activation_threshold: p.get(&ACTIVATION_THRESHOLD)?,
                ignore_null_values: p.get(&IGNORE_NULL_VALUES)?,
                metric_name: ctx.metric_name("prometheus"),
                metric_type,
            })
        })?)
    }

    /// The request URL at `now` on `request`'s server: `query`, `time` (RFC 3339, seconds, UTC),
    /// `namespace`, then `queryParameters`.
    pub fn request_url(&self, request: &PrometheusRequest, now: jiff::Timestamp) -> url::Url {
        let mut url = request.query_url.clone();
        url.query_pairs_mut()
            .append_pair("query", &self.query)
            .append_pair("time", &now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
            .extend_pairs(&self.query_parameters);
        url
    }
}

/// A `prometheus` scaler: the parsed trigger and its share of the server's client.
pub type PrometheusScaler = Pooled<PrometheusConfig>;

impl HttpApi for PrometheusConfig {
    /// A self-hosted server: polled sooner after a sign of activity.
    const ADAPTIVE_POLLING: bool = true;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        PrometheusConfig::parse(ctx)
    }

    fn client_key(&self) -> Result<HttpClientKey, MetadataError> {
        self.request
            .as_ref()
            .map(|r| r.client.clone())
            .map_err(Clone::clone)
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target_milli(self.metric_type, self.threshold),
        )]
    }

    fn request(&self, now: jiff::Timestamp) -> Result<ApiRequest<'_>, MetadataError> {
        let request = self.request.as_ref().map_err(Clone::clone)?;
        Ok(ApiRequest::get(
            self.request_url(request, now),
            &request.headers,
        ))
    }

    fn operation(&self, request: &ApiRequest<'_>) -> String {
        format!(
            "prometheus query `{}` on serverAddress {}",
            self.query,
            describe_url(&request.url)
        )
    }

    /// A Prometheus API error shows its errorType (a fixed vocabulary), never its text.
    fn error_answer(&self, status: StatusCode, body: &[u8]) -> Option<Failure> {
        let error_type = response::api_error(body)?;
        Some(Failure::new(
            crate::remote::Kind::Server {
                system: "Prometheus",
                code: Some(format!("{error_type} (HTTP {})", status.as_u16())),
            },
            Some(String::from_utf8_lossy(body).into_owned()),
        ))
    }

    fn read(&self, body: &[u8], metric_name: &str) -> Result<MetricsAndActivity, String> {
        let ignore_null_values = self.ignore_null_values;
        // KEDA's keda_scaler_empty_upstream_responses_total, counted by the operator for the
        // read in progress (crate::request_metrics).
        let value =
            response::query_value_reporting_empty(body, &self.query, ignore_null_values, || {
                crate::request_metrics::empty_upstream_response(ignore_null_values);
            })?;
        Ok(MetricsAndActivity::single(
            metric_name,
            value,
            self.activation_threshold,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scaler::Scaler;

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
        let request = config.request.as_ref().expect("a usable server");
        assert_eq!(
            config.request_url(request, at).as_str(),
            "http://prometheus.monitoring:9090/select/0/prometheus/api/v1/query?\
             query=sum%28rate%28http_requests_total%7Bapp%3D%22a+b%22%7D%5B2m%5D%29%29\
             &time=2024-03-10T12%3A00%3A00Z&namespace=team-a&dedup=true&partial_response=false"
        );
        assert_eq!(config.metric_name, "s2-prometheus");
        assert_eq!(request.client.origin, "http://prometheus.monitoring:9090");
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
        let headers = config.request.expect("usable").headers;
        assert_eq!(headers["x-client-id"], "cid");
        assert_eq!(headers["x-scope-orgid"], "org-1");
        // customHeaders wins over the deprecated cortexOrgID.
        let config = PrometheusConfig::parse(&ctx(&[
            ("serverAddress", "http://p:9090"),
            ("query", "up"),
            ("threshold", "1"),
            ("customHeaders", "X-Scope-OrgID=tenant-b"),
            ("cortexOrgID", "org-1"),
        ]))
        .unwrap();
        let headers = config.request.expect("usable").headers;
        assert_eq!(headers.get_all("x-scope-orgid").iter().count(), 1);
        assert_eq!(headers["x-scope-orgid"], "tenant-b");
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
                &[("ignoreNullValues", "maybe")],
                r#"trigger 2 (prometheus): parameter "ignoreNullValues": "maybe" is not a valid boolean"#,
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

    /// KEDA's `parsePrometheusMetadata` takes `serverAddress` and the header names as written;
    /// Go fails the request at every fetch. So the trigger builds and every read fails, naming
    /// the parameter (issue 29, row 3).
    #[tokio::test]
    async fn a_bad_server_address_or_header_builds_and_fails_at_every_read_naming_it() {
        let base = [
            ("serverAddress", "http://p:9090"),
            ("query", "up"),
            ("threshold", "1"),
        ];
        let rows: &[(&[(&str, &str)], &str)] = &[
            (
                &[("serverAddress", "prometheus:9090")],
                r#"trigger 2 (prometheus): parameter "serverAddress" must be an http:// or https:// URL, not prometheus:"#,
            ),
            (
                &[("serverAddress", "http://u:s3cret@")],
                "trigger 2 (prometheus): parameter \"serverAddress\" is not a valid URL (empty host); write it as http://host:port/path",
            ),
            (
                &[("serverAddress", "not a url")],
                "trigger 2 (prometheus): parameter \"serverAddress\" is not a valid URL (relative URL without a base); write it as http://host:port/path",
            ),
            (
                &[("customHeaders", "X-Bad Name=1")],
                r#"trigger 2 (prometheus): parameter "customHeaders": "X-Bad Name" is not a valid HTTP header name"#,
            ),
        ];
        for (i, (changes, expected)) in rows.iter().enumerate() {
            let mut metadata: BTreeMap<&str, &str> = base.iter().copied().collect();
            metadata.extend(changes.iter().copied());
            let pairs: Vec<(&str, &str)> = metadata.into_iter().collect();
            let config = PrometheusConfig::parse(&ctx(&pairs)).expect("builds, as in KEDA");
            assert_eq!(
                config.request.as_ref().expect_err("unusable").to_string(),
                *expected,
                "row {i}"
            );
            assert!(
                !expected.contains("s3cret"),
                "no credentials in the message"
            );
            let scaler = PrometheusScaler::build(&ctx(&pairs))
                .await
                .expect("builds, as in KEDA");
            assert_eq!(
                scaler.metric_specs().len(),
                1,
                "row {i}: the HPA gets the metric"
            );
            for _ in 0..2 {
                let err = scaler
                    .metrics_and_activity("s2-prometheus")
                    .await
                    .expect_err("every read fails");
                assert_eq!(err.to_string(), *expected, "row {i}");
            }
            scaler.close().await;
        }
    }
}
