//! `graphite`: scales on the most recent value of a Graphite render query
//! (`GET <serverAddress>/render?from=<queryTime>&target=<query>&format=json`). Compatible with
//! KEDA's `graphite` trigger (`pkg/scalers/graphite_scaler.go`).
//!
//! Every trigger on the same server with the same credentials and timeout shares one HTTP
//! client leased from the shared [`ClientPools`](crate::pool::ClientPools), as `prometheus`
//! does.
//!
//! Where this differs from KEDA: KEDA sets `Authorization: Basic` with an empty user and
//! password when no `authMode` is given; this sends no `Authorization` header then. KEDA reads
//! the body of any status; a non-2xx answer here is an error naming the status (KEDA fails on
//! it too, when the body is not the JSON it expects).

pub mod response;

use http::header::HeaderMap;
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

const SERVER_ADDRESS: Param = Param::required("serverAddress");
const QUERY: Param = Param::required("query");
const THRESHOLD: Param = Param::optional("threshold").default("100");
const ACTIVATION_THRESHOLD: Param = Param::optional("activationThreshold").default("0");
const QUERY_TIME: Param = Param::required("queryTime");
const AUTH_MODE: Param = Param::optional("authMode").allowed(&["basic"]);
const USERNAME: Param = Param::optional("username").order(AUTH);
const PASSWORD: Param = Param::optional("password").order(AUTH).secret();

/// The path of graphite-web's render API.
pub const RENDER_PATH: &str = "/render";

/// The parameters of `graphite`.
pub const PARAMS: &[Param] = &[
    SERVER_ADDRESS,
    QUERY,
    THRESHOLD,
    ACTIVATION_THRESHOLD,
    QUERY_TIME,
    AUTH_MODE,
    USERNAME,
    PASSWORD,
];

/// The parsed trigger.
///
/// As in KEDA, `serverAddress` is read when the query is sent: one that is not an http(s) URL
/// leaves the trigger built and fails every read naming the parameter.
#[derive(Clone, Debug)]
pub struct GraphiteConfig {
    /// The render URL and the client key, or why `serverAddress` cannot be used.
    pub request: Result<(url::Url, HttpClientKey), MetadataError>,
    /// The render target.
    pub query: String,
    /// `threshold` (0 when the trigger feeds `scalingModifiers`).
    pub threshold: f64,
    /// Active iff the value is above this.
    pub activation_threshold: f64,
    /// `s<index>-graphite`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
    headers: HeaderMap,
}

/// KEDA's render URL: `<serverAddress>/render?from=<queryTime>&target=<query>&format=json`
/// (a trailing `/` of the server's path is not doubled; a query string in `serverAddress` is
/// replaced).
pub fn render_url(server: &url::Url, query: &str, query_time: &str) -> url::Url {
    let mut url = server.clone();
    let path = format!("{}{RENDER_PATH}", server.path().trim_end_matches('/'));
    url.set_path(&path);
    url.set_query(None);
    url.set_fragment(None);
    url.query_pairs_mut()
        .append_pair("from", query_time)
        .append_pair("target", query)
        .append_pair("format", "json");
    url
}

impl GraphiteConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// A required parameter is missing, a number is malformed, `authMode` is not `basic`, or
    /// `authMode` is `basic` without `username`. An unusable `serverAddress` is kept in
    /// [`GraphiteConfig::request`] for the reads.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let server: String = p.get(&SERVER_ADDRESS)?;
            let query: String = p.get(&QUERY)?;
            let threshold: f64 = p.get(&THRESHOLD)?;
            let activation_threshold: f64 = p.get(&ACTIVATION_THRESHOLD)?;
            let query_time: String = p.get(&QUERY_TIME)?;
            let mode: Option<String> = p.get_opt(&AUTH_MODE)?;
            let username: Option<String> = p.get_opt(&USERNAME)?;
            let password: Option<Secret> = p.get_opt(&PASSWORD)?;
            let auth = match mode.as_deref() {
                Some("basic") => {
                    let username = username.filter(|u| !u.is_empty()).ok_or_else(|| {
                        p.rule("parameter \"username\" is required when authMode is \"basic\"")
                    })?;
                    HttpAuth {
                        modes: vec![AuthMode::Basic],
                        basic: Some((username, password.unwrap_or_else(|| Secret::new("")))),
                        ..HttpAuth::default()
                    }
                }
                _ => HttpAuth::default(),
            };
            let request = parse_http_url(p, &SERVER_ADDRESS, &server).map(|server| {
                let key = HttpClientKey {
                    origin: http_client::origin(&server),
                    auth,
                    timeout: ctx.global_http_timeout,
                };
                (render_url(&server, &query, &query_time), key)
            });
            Ok(Self {
                request,
                query,
                // KEDA: a trigger feeding a formula has no target of its own.
                threshold: if ctx.as_metric_source { 0.0 } else { threshold },
                activation_threshold,
                metric_name: ctx.metric_name("graphite"),
                metric_type,
                headers: HeaderMap::new(),
            })
        })?)
    }
}

/// A `graphite` scaler: the parsed trigger and its share of the server's client.
pub type GraphiteScaler = Pooled<GraphiteConfig>;

/// Runs the render query on every read. Errors: the server cannot be reached or answers an
/// error status; the answer is not one usable value; `serverAddress` cannot be used. Messages
/// name the query and the server, never the credentials nor graphite's text.
impl HttpApi for GraphiteConfig {
    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        GraphiteConfig::parse(ctx)
    }

    fn client_key(&self) -> Result<HttpClientKey, MetadataError> {
        self.request
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

    fn request(&self, _now: jiff::Timestamp) -> Result<ApiRequest<'_>, MetadataError> {
        let (url, _) = self.request.as_ref().map_err(Clone::clone)?;
        Ok(ApiRequest::get(url.clone(), &self.headers))
    }

    fn operation(&self, request: &ApiRequest<'_>) -> String {
        format!(
            "graphite query `{}` on serverAddress {}",
            self.query,
            describe_url(&request.url)
        )
    }

    fn read(&self, body: &[u8], metric_name: &str) -> Result<MetricsAndActivity, String> {
        let value = response::render_value(body, &self.query)?;
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

    fn ctx(metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> ScalerContext {
        test_context("graphite", 1, metadata, &[], auth)
    }

    const BASE: &[(&str, &str)] = &[
        ("serverAddress", "http://graphite:81"),
        ("query", "sumSeries(stats.counters.*.count)"),
        ("queryTime", "-10Minutes"),
    ];

    #[test]
    fn the_trigger_parses_with_keda_defaults_and_render_url() {
        let config = GraphiteConfig::parse(&ctx(BASE, &[])).expect("parses");
        assert_eq!(config.metric_name, "s1-graphite");
        assert_eq!(config.threshold, 100.0);
        assert_eq!(config.activation_threshold, 0.0);
        let (url, key) = config.request.as_ref().expect("usable server");
        assert_eq!(
            url.as_str(),
            "http://graphite:81/render?from=-10Minutes&target=sumSeries%28stats.counters.*.count%29&format=json"
        );
        assert_eq!(key.origin, "http://graphite:81");
        assert!(key.auth.basic.is_none());
        let server = url::Url::parse("https://g.example/prefix/?x=1").expect("url");
        assert_eq!(
            render_url(&server, "a.b", "-1h").as_str(),
            "https://g.example/prefix/render?from=-1h&target=a.b&format=json"
        );

        for missing in ["serverAddress", "query", "queryTime"] {
            let metadata: Vec<_> = BASE
                .iter()
                .copied()
                .filter(|(k, _)| *k != missing)
                .collect();
            let err = GraphiteConfig::parse(&ctx(&metadata, &[]))
                .expect_err(missing)
                .to_string();
            assert_eq!(
                err,
                format!(r#"trigger 1 (graphite): missing required parameter "{missing}""#)
            );
        }
        let mut bad = BASE.to_vec();
        bad.push(("threshold", "many"));
        let err = GraphiteConfig::parse(&ctx(&bad, &[]))
            .expect_err("bad threshold")
            .to_string();
        assert!(err.contains("\"threshold\""), "{err}");
        let mut bad = BASE.to_vec();
        bad.push(("authMode", "bearer"));
        let err = GraphiteConfig::parse(&ctx(&bad, &[]))
            .expect_err("bad authMode")
            .to_string();
        assert!(err.contains("\"authMode\""), "{err}");

        let source = ScalerContext {
            as_metric_source: true,
            ..ctx(BASE, &[])
        };
        assert_eq!(
            GraphiteConfig::parse(&source).expect("parses").threshold,
            0.0
        );
    }

    #[test]
    fn basic_auth_needs_a_username_from_the_authentication() {
        let mut basic = BASE.to_vec();
        basic.push(("authMode", "basic"));
        let err = GraphiteConfig::parse(&ctx(&basic, &[("password", "p")]))
            .expect_err("no username")
            .to_string();
        assert!(err.contains("\"username\""), "{err}");

        // username is read from the TriggerAuthentication only, as in KEDA.
        let mut in_metadata = basic.clone();
        in_metadata.push(("username", "u"));
        assert!(GraphiteConfig::parse(&ctx(&in_metadata, &[])).is_err());
        let config = GraphiteConfig::parse(&ctx(&basic, &[("username", "u"), ("password", "p")]))
            .expect("parses");
        let (_, key) = config.request.as_ref().expect("usable server");
        let (user, password) = key.auth.basic.as_ref().expect("basic");
        assert_eq!(user, "u");
        assert_eq!(password.expose(), "p");
        assert_eq!(key.auth.modes, vec![AuthMode::Basic]);
    }

    #[tokio::test]
    async fn an_unusable_server_address_builds_and_fails_every_read_naming_it() {
        let mut metadata = BASE.to_vec();
        metadata[0] = ("serverAddress", "graphite:81");
        let scaler = GraphiteScaler::build(&ctx(&metadata, &[]))
            .await
            .expect("builds, as in KEDA");
        for _ in 0..2 {
            let err = scaler
                .metrics_and_activity("s1-graphite")
                .await
                .expect_err("unusable server");
            assert!(err.to_string().contains("\"serverAddress\""), "{err}");
        }
        scaler.close().await;
    }
}
