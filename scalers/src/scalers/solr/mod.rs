//! `solr`: scales on the number of documents an Apache Solr query finds
//! (`GET <host>/solr/<collection>/select?q=<query>&wt=json`, `response.numFound`). Compatible
//! with KEDA's `solr` trigger (`pkg/scalers/solr_scaler.go`).
//!
//! Every trigger on the same server with the same credentials and timeout shares one HTTP
//! client.

use http::header::HeaderMap;
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::authentication::{AuthMode, HttpAuth};
use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError};
use crate::http_client::{self, HttpClientKey, describe_url, parse_http_url};
use crate::metadata::{AUTH_METADATA, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pooled::{ApiRequest, HttpApi, Pooled};
use crate::scaler::MetricsAndActivity;
use crate::secret::Secret;

const HOST: Param = Param::required("host");
const COLLECTION: Param = Param::required("collection");
const TARGET_QUERY_VALUE: Param = Param::required("targetQueryValue");
const ACTIVATION_TARGET_QUERY_VALUE: Param =
    Param::optional("activationTargetQueryValue").default("0");
const QUERY: Param = Param::optional("query").default("*:*");
const USERNAME: Param = Param::required("username").order(AUTH_METADATA);
const PASSWORD: Param = Param::required("password").order(AUTH_METADATA).secret();

/// The parameters of `solr`.
pub const PARAMS: &[Param] = &[
    HOST,
    COLLECTION,
    TARGET_QUERY_VALUE,
    ACTIVATION_TARGET_QUERY_VALUE,
    QUERY,
    USERNAME,
    PASSWORD,
];

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct SolrConfig {
    /// The select URL and the client key, or why `host` cannot be used.
    pub endpoint: Result<(url::Url, HttpClientKey), MetadataError>,
    /// `collection`.
    pub collection: String,
    /// `query`.
    pub query: String,
    /// The target (0 when the trigger feeds `scalingModifiers`).
    pub target: f64,
    /// Active iff the count is above this.
    pub activation: f64,
    /// `s<index>-solr`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
    headers: HeaderMap,
}

/// `<host>/solr/<collection>/select?q=<query>&wt=json`, the collection one percent-encoded
/// path segment.
pub fn select_url(host: &url::Url, collection: &str, query: &str) -> url::Url {
    let mut url = host.clone();
    url.set_query(None);
    url.set_fragment(None);
    if let Ok(mut segments) = url.path_segments_mut() {
        segments
            .pop_if_empty()
            .extend(["solr", collection, "select"]);
    }
    url.query_pairs_mut()
        .append_pair("q", query)
        .append_pair("wt", "json");
    url
}

impl SolrConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// A required parameter missing (`username` and `password` from the TriggerAuthentication
    /// or metadata), a malformed number, or `targetQueryValue` 0 (unless the trigger feeds
    /// `scalingModifiers`).
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let host: String = p.get(&HOST)?;
            let collection: String = p.get(&COLLECTION)?;
            let target: f64 = p.get(&TARGET_QUERY_VALUE)?;
            let activation: f64 = p.get(&ACTIVATION_TARGET_QUERY_VALUE)?;
            let query: String = p.get(&QUERY)?;
            let username: String = p.get(&USERNAME)?;
            let password: Secret = p.get(&PASSWORD)?;
            if target == 0.0 && !ctx.as_metric_source {
                return Err(p.rule("no parameter \"targetQueryValue\" given (it must not be 0)"));
            }
            let auth = HttpAuth {
                modes: vec![AuthMode::Basic],
                basic: Some((username, password)),
                ..HttpAuth::default()
            };
            let endpoint = parse_http_url(p, &HOST, host.trim_end_matches('/')).map(|server| {
                let key = HttpClientKey {
                    origin: http_client::origin(&server),
                    auth,
                    timeout: ctx.global_http_timeout,
                };
                (select_url(&server, &collection, &query), key)
            });
            Ok(Self {
                endpoint,
                collection,
                query,
                target: if ctx.as_metric_source { 0.0 } else { target },
                activation,
                metric_name: ctx.metric_name("solr"),
                metric_type,
                headers: HeaderMap::new(),
            })
        })?)
    }
}

/// `response.numFound` of a select answer (Solr's JSON response writer:
/// `{"responseHeader":{...},"response":{"numFound":N,"start":0,"docs":[...]}}`); a missing
/// `response` is 0, as Go reads it.
///
/// # Errors
/// Not a JSON object, or `numFound` not an integer. Messages never quote the answer.
pub fn num_found(body: &[u8]) -> Result<f64, String> {
    #[derive(serde::Deserialize)]
    struct Answer {
        #[serde(default)]
        response: Option<Found>,
    }
    #[derive(serde::Deserialize)]
    struct Found {
        #[serde(default, rename = "numFound")]
        num_found: Option<i64>,
    }
    let answer: Option<Answer> = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the Solr answer is not a select response: {}",
            crate::remote::json_error(&e)
        )
    })?;
    let answer = answer.ok_or("the Solr answer is null")?;
    #[allow(clippy::cast_precision_loss)]
    Ok(answer.response.and_then(|r| r.num_found).unwrap_or(0) as f64)
}

/// A `solr` scaler.
pub type SolrScaler = Pooled<SolrConfig>;

impl HttpApi for SolrConfig {
    /// A self-hosted server: polled sooner after a sign of activity.
    const ADAPTIVE_POLLING: bool = true;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        SolrConfig::parse(ctx)
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

    fn request(&self, _now: jiff::Timestamp) -> Result<ApiRequest<'_>, MetadataError> {
        let (url, _) = self.endpoint.as_ref().map_err(Clone::clone)?;
        Ok(ApiRequest::get(url.clone(), &self.headers))
    }

    fn operation(&self, request: &ApiRequest<'_>) -> String {
        format!(
            "solr query `{}` in collection {} on host {}",
            self.query,
            self.collection,
            describe_url(&request.url)
        )
    }

    fn read(&self, body: &[u8], metric_name: &str) -> Result<MetricsAndActivity, String> {
        Ok(MetricsAndActivity::single(
            metric_name,
            num_found(body)?,
            self.activation,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::test_context;

    fn parse(metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> Result<SolrConfig, String> {
        SolrConfig::parse(&test_context("solr", 1, metadata, &[], auth)).map_err(|e| e.to_string())
    }

    const META: &[(&str, &str)] = &[
        ("host", "http://solr:8983/"),
        ("collection", "my core"),
        ("targetQueryValue", "10"),
    ];

    #[test]
    fn keda_s_metadata_cases() {
        let config = parse(META, &[("username", "u"), ("password", "p")]).unwrap();
        assert_eq!(config.metric_name, "s1-solr");
        let (url, key) = config.endpoint.as_ref().unwrap();
        assert_eq!(
            url.as_str(),
            "http://solr:8983/solr/my%20core/select?q=*%3A*&wt=json"
        );
        assert_eq!(key.origin, "http://solr:8983");
        // Credentials from metadata too (after the TriggerAuthentication).
        let mut with_creds = META.to_vec();
        with_creds.extend([("username", "m"), ("password", "mp")]);
        let config = parse(&with_creds, &[("username", "a")]).unwrap();
        let (_, key) = config.endpoint.as_ref().unwrap();
        assert_eq!(key.auth.basic.as_ref().map(|(u, _)| u.as_str()), Some("a"));
        for (metadata, auth, name) in [
            (META, &[("password", "p")][..], "\"username\""),
            (META, &[("username", "u")][..], "\"password\""),
            (
                &META[1..],
                &[("username", "u"), ("password", "p")][..],
                "\"host\"",
            ),
            (
                &META[..2],
                &[("username", "u"), ("password", "p")][..],
                "\"targetQueryValue\"",
            ),
        ] {
            let err = parse(metadata, auth).unwrap_err();
            assert!(err.contains(name), "{err}");
        }
        let mut zero = META[..2].to_vec();
        zero.push(("targetQueryValue", "0"));
        let err = parse(&zero, &[("username", "u"), ("password", "p")]).unwrap_err();
        assert!(err.contains("\"targetQueryValue\""), "{err}");
        let mut bad = META[1..].to_vec();
        bad.push(("host", "solr:8983"));
        let config = parse(&bad, &[("username", "u"), ("password", "p")]).unwrap();
        assert!(
            config
                .endpoint
                .unwrap_err()
                .to_string()
                .contains("\"host\"")
        );
    }

    #[test]
    fn num_found_follows_keda() {
        assert_eq!(
            num_found(br#"{"responseHeader":{"status":0,"QTime":1},"response":{"numFound":42,"start":0,"numFoundExact":true,"docs":[]}}"#),
            Ok(42.0)
        );
        assert_eq!(num_found(br#"{"responseHeader":{"status":0}}"#), Ok(0.0));
        assert_eq!(num_found(b"null"), Err("the Solr answer is null".into()));
        for garbage in [
            "",
            "SECRETSECRET",
            r#"{"response":{"numFound":"SECRETSECRET"}}"#,
            r#"{"response":{"numFound":1.5}}"#,
        ] {
            let err = num_found(garbage.as_bytes()).unwrap_err();
            assert!(!err.contains("SECRETSECRET"), "{err}");
        }
    }
}
