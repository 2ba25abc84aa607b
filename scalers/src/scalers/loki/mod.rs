//! `loki`: scales on the value of a LogQL metric query (`GET /loki/api/v1/query`).
//! Compatible with KEDA's `loki` trigger (`pkg/scalers/loki_scaler.go`).
//!
//! Every trigger on the same server with the same credentials, TLS settings and timeout shares
//! one HTTP client leased from the shared [`ClientPools`](crate::pool::ClientPools), as
//! `prometheus` does.

pub mod response;

use http::header::HeaderMap;
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::authentication::{
    API_KEY, AUTH_MODES, BEARER_TOKEN, CA, CERT, CUSTOM_AUTH_HEADER, CUSTOM_AUTH_VALUE, HttpAuth,
    KEY, KEY_PARAM_NAME, METHOD, PASSWORD, USERNAME,
};
use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError};
use crate::http_client::{self, HttpClientKey, describe_url, header_map, parse_http_url};
use crate::metadata::Param;
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pooled::{ApiRequest, HttpApi, Pooled};
use crate::scaler::MetricsAndActivity;

const SERVER_ADDRESS: Param = Param::required("serverAddress");
const QUERY: Param = Param::required("query");
const THRESHOLD: Param = Param::required("threshold");
const ACTIVATION_THRESHOLD: Param = Param::optional("activationThreshold").default("0");
const TENANT_NAME: Param = Param::optional("tenantName");
const IGNORE_NULL_VALUES: Param = Param::optional("ignoreNullValues").default("true");
const UNSAFE_SSL: Param = Param::optional("unsafeSsl").default("false");

/// Loki's multi-tenant header, set from `tenantName`.
pub const TENANT_HEADER: &str = "X-Scope-OrgID";

/// The path of Loki's instant query API.
pub const QUERY_PATH: &str = "/loki/api/v1/query";

/// The parameters of `loki`.
pub const PARAMS: &[Param] = &[
    SERVER_ADDRESS,
    QUERY,
    THRESHOLD,
    ACTIVATION_THRESHOLD,
    TENANT_NAME,
    IGNORE_NULL_VALUES,
    UNSAFE_SSL,
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
/// As in KEDA, `serverAddress` is read when the query is sent: one that is not an http(s) URL
/// leaves the trigger built and fails every read naming the parameter (issue 29, row 3), and so
/// does a `tenantName` HTTP does not allow in a header.
#[derive(Clone, Debug)]
pub struct LokiConfig {
    /// The query URL and headers, or why they cannot be used.
    pub request: Result<LokiRequest, MetadataError>,
    /// The LogQL metric query.
    pub query: String,
    /// The target (0 when the trigger feeds `scalingModifiers`).
    pub threshold: f64,
    /// Active iff the value is above this.
    pub activation_threshold: f64,
    /// An empty result is 0 instead of an error.
    pub ignore_null_values: bool,
    /// `s<index>-loki`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
}

/// A usable `serverAddress` and headers.
#[derive(Clone, Debug)]
pub struct LokiRequest {
    /// `<serverAddress>/loki/api/v1/query?query=<query>`.
    pub url: url::Url,
    /// The pooled client's key.
    pub client: HttpClientKey,
    /// `X-Scope-OrgID` from `tenantName`.
    pub headers: HeaderMap,
}

/// KEDA's `getServerAddress`: the path of `server` completed to [`QUERY_PATH`]. A path that
/// already ends with it is kept; one that is a leading part of it (`/loki`, `/loki/api`)
/// becomes it; any other is a prefix (`/gateway` → `/gateway/loki/api/v1/query`). A query
/// string in `serverAddress` is replaced by the trigger's query.
pub fn query_url(server: &url::Url, query: &str) -> url::Url {
    let mut url = server.clone();
    let path = server.path().trim_end_matches('/');
    let full = if path.ends_with(QUERY_PATH) {
        path.to_string()
    } else if QUERY_PATH.starts_with(&format!("{path}/")) {
        QUERY_PATH.to_string()
    } else {
        format!("{path}{QUERY_PATH}")
    };
    url.set_path(&full);
    url.set_query(None);
    url.query_pairs_mut().append_pair("query", query);
    url
}

impl LokiConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// A required parameter is missing, a value is malformed, or the authentication block is
    /// incomplete. An unusable `serverAddress` or `tenantName` is kept in
    /// [`LokiConfig::request`] for the reads.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let server: String = p.get(&SERVER_ADDRESS)?;
            let server = parse_http_url(p, &SERVER_ADDRESS, &server);
            let query: String = p.get(&QUERY)?;
            let tenant: Option<String> = p.get_opt(&TENANT_NAME)?;
            let headers = match &tenant {
                Some(tenant) => header_map(p, &TENANT_NAME, [(TENANT_HEADER, tenant.as_str())]),
                None => Ok(HeaderMap::new()),
            };
            let auth = HttpAuth::parse(p, p.get(&UNSAFE_SSL)?)?;
            let threshold: f64 = p.get(&THRESHOLD)?;
            Ok(Self {
                request: server.and_then(|server| {
                    Ok(LokiRequest {
                        url: query_url(&server, &query),
                        client: HttpClientKey {
                            origin: http_client::origin(&server),
                            auth,
                            timeout: ctx.global_http_timeout,
                        },
                        headers: headers?,
                    })
                }),
                query,
                // KEDA: a trigger feeding a formula has no target of its own.
                threshold: if ctx.as_metric_source { 0.0 } else { threshold },
                activation_threshold: p.get(&ACTIVATION_THRESHOLD)?,
                ignore_null_values: p.get(&IGNORE_NULL_VALUES)?,
                metric_name: ctx.metric_name("loki"),
                metric_type,
            })
        })?)
    }
}

/// A `loki` scaler: the parsed trigger and its share of the server's client.
pub type LokiScaler = Pooled<LokiConfig>;

/// Runs the query on every read. Errors: the server cannot be reached or answers an error
/// status (429 included); the answer is not one usable value; `serverAddress` or `tenantName`
/// cannot be used. Messages name the query and the server, never the credentials nor Loki's
/// text.
impl HttpApi for LokiConfig {
    /// A self-hosted server: polled sooner after a sign of activity.
    const ADAPTIVE_POLLING: bool = true;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        LokiConfig::parse(ctx)
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

    fn request(&self, _now: jiff::Timestamp) -> Result<ApiRequest<'_>, MetadataError> {
        let request = self.request.as_ref().map_err(Clone::clone)?;
        Ok(ApiRequest::get(request.url.clone(), &request.headers))
    }

    fn operation(&self, request: &ApiRequest<'_>) -> String {
        format!(
            "loki query `{}` on serverAddress {}",
            self.query,
            describe_url(&request.url)
        )
    }

    fn read(&self, body: &[u8], metric_name: &str) -> Result<MetricsAndActivity, String> {
        let value = response::query_value(body, &self.query, self.ignore_null_values)?;
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
    use crate::context::test_context;
    use crate::scaler::Scaler;

    fn ctx(metadata: &[(&str, &str)]) -> ScalerContext {
        test_context("loki", 1, metadata, &[], &[])
    }

    #[test]
    fn the_server_path_is_completed_as_keda_does() {
        // (serverAddress, request URL) from KEDA's getServerAddress and its tests.
        let rows = [
            (
                "http://loki:3100",
                "http://loki:3100/loki/api/v1/query?query=q",
            ),
            (
                "http://loki:3100/",
                "http://loki:3100/loki/api/v1/query?query=q",
            ),
            (
                "http://loki:3100/loki",
                "http://loki:3100/loki/api/v1/query?query=q",
            ),
            (
                "http://loki:3100/loki/api/",
                "http://loki:3100/loki/api/v1/query?query=q",
            ),
            (
                "http://loki:3100/loki/api/v1/query",
                "http://loki:3100/loki/api/v1/query?query=q",
            ),
            (
                "https://gw.example/tenant-a/loki/api/v1/query/",
                "https://gw.example/tenant-a/loki/api/v1/query?query=q",
            ),
            (
                "https://gw.example/gateway?x=1",
                "https://gw.example/gateway/loki/api/v1/query?query=q",
            ),
            (
                "http://loki:3100/lok",
                "http://loki:3100/lok/loki/api/v1/query?query=q",
            ),
        ];
        for (server, expected) in rows {
            let server = url::Url::parse(server).unwrap();
            assert_eq!(query_url(&server, "q").as_str(), expected, "{server}");
        }
    }

    #[test]
    fn the_trigger_parses_with_keda_defaults_tenant_and_metric_name() {
        let config = LokiConfig::parse(&ctx(&[
            ("serverAddress", "http://loki:3100"),
            (
                "query",
                r#"sum(rate({filename="/var/log/syslog"}[1m])) by (level)"#,
            ),
            ("threshold", "0.7"),
            ("tenantName", "team-a"),
        ]))
        .unwrap();
        assert_eq!(config.metric_name, "s1-loki");
        assert!(config.ignore_null_values);
        assert_eq!(config.activation_threshold, 0.0);
        let request = config.request.as_ref().unwrap();
        assert_eq!(request.headers.get(TENANT_HEADER).unwrap(), "team-a");
        assert_eq!(
            request.url.query_pairs().next().unwrap().1,
            r#"sum(rate({filename="/var/log/syslog"}[1m])) by (level)"#
        );
        assert_eq!(request.client.origin, "http://loki:3100");
        let target = metric_target_milli(config.metric_type, config.threshold);
        assert_eq!(target.average_value.map(|q| q.0), Some("700m".into()));

        let err = LokiConfig::parse(&ctx(&[("serverAddress", "http://loki"), ("query", "q")]))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            r#"trigger 1 (loki): missing required parameter "threshold""#
        );
        let err = LokiConfig::parse(&ctx(&[
            ("serverAddress", "http://loki"),
            ("query", "q"),
            ("threshold", "1"),
            ("ignoreNullValues", "maybe"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(err.contains("ignoreNullValues"), "{err}");
        let source = ScalerContext {
            as_metric_source: true,
            ..ctx(&[
                ("serverAddress", "http://loki"),
                ("query", "q"),
                ("threshold", "5"),
            ])
        };
        assert_eq!(LokiConfig::parse(&source).unwrap().threshold, 0.0);
    }

    #[tokio::test]
    async fn an_unusable_server_address_builds_and_fails_every_read_naming_it() {
        let scaler = LokiScaler::build(&ctx(&[
            ("serverAddress", "loki:3100"),
            ("query", "q"),
            ("threshold", "1"),
        ]))
        .await
        .expect("builds, as in KEDA");
        for _ in 0..2 {
            let err = scaler.metrics_and_activity("s1-loki").await.unwrap_err();
            assert_eq!(
                err.to_string(),
                r#"trigger 1 (loki): parameter "serverAddress" must be an http:// or https:// URL, not loki:"#
            );
        }
        scaler.close().await;
    }
}
