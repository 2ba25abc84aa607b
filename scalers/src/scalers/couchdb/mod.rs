//! `couchdb`: scales on the number of documents a CouchDB Mango query finds
//! (`POST <server>/<dbName>/_find`). Compatible with KEDA's `couchdb` trigger
//! (`pkg/scalers/couchdb_scaler.go`), including its quirks: the metric is named
//! `coucdb-<dbName>`, and the Basic user is always `admin` (KEDA authenticates with
//! `BasicAuth("admin", password)`; `username` is only required).
//!
//! Every trigger on the same server with the same password and timeout shares one HTTP client.

use std::borrow::Cow;

use http::HeaderValue;
use http::header::{CONTENT_TYPE, HeaderMap};
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::authentication::{AuthMode, HttpAuth};
use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError, Source};
use crate::http_client::{self, HttpClientKey, describe_url, parse_http_url};
use crate::metadata::{AUTH_METADATA, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target};
use crate::pooled::{ApiRequest, HttpApi, Pooled};
use crate::scaler::MetricsAndActivity;
use crate::secret::Secret;

/// KEDA's `authParams;triggerMetadata;resolvedEnv`.
const AUTH_METADATA_ENV: &[Source] = &[Source::Auth, Source::Metadata, Source::Env];

const CONNECTION_STRING: Param = Param::optional("connectionString")
    .order(AUTH_METADATA_ENV)
    .secret();
const HOST: Param = Param::optional("host").order(AUTH_METADATA);
const PORT: Param = Param::optional("port").order(AUTH_METADATA);
const USERNAME: Param = Param::optional("username").order(AUTH_METADATA);
const PASSWORD: Param = Param::optional("password")
    .order(AUTH_METADATA_ENV)
    .secret();
const DB_NAME: Param = Param::optional("dbName").order(AUTH_METADATA);
const QUERY: Param = Param::optional("query");
const QUERY_VALUE: Param = Param::optional("queryValue");
const ACTIVATION_QUERY_VALUE: Param = Param::optional("activationQueryValue").default("0");

/// The parameters of `couchdb`.
pub const PARAMS: &[Param] = &[
    CONNECTION_STRING,
    HOST,
    PORT,
    USERNAME,
    PASSWORD,
    DB_NAME,
    QUERY,
    QUERY_VALUE,
    ACTIVATION_QUERY_VALUE,
];

/// The Basic user KEDA authenticates as, whatever `username` says.
pub const USER: &str = "admin";

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct CouchDbConfig {
    /// `<server>/<dbName>/_find` and the client key, or why the server cannot be used.
    pub endpoint: Result<(url::Url, HttpClientKey), MetadataError>,
    /// The `_find` body: the query's `selector` and `fields`, as KEDA's request keeps them.
    pub body: Result<String, MetadataError>,
    /// `dbName`.
    pub db_name: String,
    /// `queryValue` (0 when the trigger feeds `scalingModifiers`).
    pub target: i64,
    /// `activationQueryValue`.
    pub activation: i64,
    /// `s<index>-coucdb-<dbName>` (KEDA's spelling).
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
    headers: HeaderMap,
}

/// KEDA's `couchDBQueryRequest`: the query keeps only `selector` and `fields`.
fn find_body(query: &str) -> Result<String, String> {
    #[derive(serde::Deserialize, serde::Serialize)]
    struct Find {
        selector: Option<serde_json::Map<String, serde_json::Value>>,
        fields: Option<Vec<String>>,
    }
    let find: Find = serde_json::from_str(query).map_err(|e| {
        format!(
            "parameter \"query\" is not a Mango query: {}",
            crate::remote::json_error(&e)
        )
    })?;
    serde_json::to_string(&find).map_err(|e| e.to_string())
}

impl CouchDbConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// Without `connectionString`: `host`, `port`, `username`, `password` or `dbName` missing;
    /// `queryValue` missing or 0 (unless the trigger feeds `scalingModifiers`); a malformed
    /// number.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let connection: Option<Secret> = p.get_opt(&CONNECTION_STRING)?;
            let host: Option<String> = p.get_opt(&HOST)?;
            let port: Option<String> = p.get_opt(&PORT)?;
            let username: Option<String> = p.get_opt(&USERNAME)?;
            let password: Option<Secret> = p.get_opt(&PASSWORD)?;
            let db_name: String = p.get_opt(&DB_NAME)?.unwrap_or_default();
            let query: String = p.get_opt(&QUERY)?.unwrap_or_default();
            let target: i64 = p.get_opt(&QUERY_VALUE)?.unwrap_or(0);
            let activation: i64 = p.get(&ACTIVATION_QUERY_VALUE)?;
            if connection.is_none() {
                for (name, given) in [
                    ("host", host.is_some()),
                    ("port", port.is_some()),
                    ("username", username.is_some()),
                    ("password", password.is_some()),
                    ("dbName", !db_name.is_empty()),
                ] {
                    if !given {
                        return Err(p.rule(format!(
                            "no parameter \"{name}\" given (it is required without connectionString)"
                        )));
                    }
                }
            }
            if target == 0 && !ctx.as_metric_source {
                return Err(p.rule("no parameter \"queryValue\" given (it must not be 0)"));
            }
            let server = match &connection {
                Some(connection) => connection.expose().to_string(),
                None => {
                    let host = host.unwrap_or_default();
                    let host = if host.contains(':') && !host.starts_with('[') {
                        format!("[{host}]")
                    } else {
                        host
                    };
                    format!("http://{host}:{}", port.unwrap_or_default())
                }
            };
            let param = if connection.is_some() { &CONNECTION_STRING } else { &HOST };
            let auth = HttpAuth {
                modes: vec![AuthMode::Basic],
                basic: Some((USER.to_string(), password.unwrap_or_else(|| Secret::new("")))),
                ..HttpAuth::default()
            };
            let endpoint = parse_http_url(p, param, &server).map(|server| {
                let mut url = server.clone();
                url.set_query(None);
                url.set_fragment(None);
                url.set_username("").ok();
                url.set_password(None).ok();
                if let Ok(mut segments) = url.path_segments_mut() {
                    segments.pop_if_empty().extend([db_name.as_str(), "_find"]);
                }
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
                body: find_body(&query).map_err(|m| p.rule(m)),
                metric_name: ctx.metric_name(&format!("coucdb-{db_name}")),
                db_name,
                target: if ctx.as_metric_source { 0 } else { target },
                activation,
                metric_type,
                headers,
            })
        })?)
    }
}

/// The number of documents in a `_find` answer (`{"docs":[...],"bookmark":"...",
/// "warning":"..."}`), each read as KEDA's `Res` (`_id` a string, `feet` an integer,
/// `greeting` a string, when present).
///
/// # Errors
/// Not such an answer, or a document KEDA could not scan. Messages never quote the answer.
pub fn doc_count(body: &[u8]) -> Result<usize, String> {
    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct Res {
        #[serde(default, rename = "_id")]
        id: Option<String>,
        #[serde(default)]
        feet: Option<i64>,
        #[serde(default)]
        greeting: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct Answer {
        docs: Vec<serde_json::Value>,
    }
    let answer: Answer = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the CouchDB answer is not a _find response: {}",
            crate::remote::json_error(&e)
        )
    })?;
    for (i, doc) in answer.docs.iter().enumerate() {
        Res::deserialize(doc).map_err(|_| {
            format!("error scanning document {i}: _id, feet or greeting is not of KEDA's type")
        })?;
    }
    Ok(answer.docs.len())
}

use serde::Deserialize as _;

/// A `couchdb` scaler.
pub type CouchDbScaler = Pooled<CouchDbConfig>;

impl HttpApi for CouchDbConfig {
    /// A self-hosted server: polled sooner after a sign of activity.
    const ADAPTIVE_POLLING: bool = true;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        CouchDbConfig::parse(ctx)
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
            metric_target(self.metric_type, self.target),
        )]
    }

    fn request(&self, _now: jiff::Timestamp) -> Result<ApiRequest<'_>, MetadataError> {
        let (url, _) = self.endpoint.as_ref().map_err(Clone::clone)?;
        let body = self.body.as_ref().map_err(Clone::clone)?;
        Ok(ApiRequest::post(
            url.clone(),
            Cow::Borrowed(&self.headers),
            body.clone(),
        ))
    }

    fn operation(&self, request: &ApiRequest<'_>) -> String {
        format!(
            "couchdb _find in database {} on {}",
            self.db_name,
            describe_url(&request.url)
        )
    }

    fn read(&self, body: &[u8], metric_name: &str) -> Result<MetricsAndActivity, String> {
        let count = doc_count(body)?;
        #[allow(clippy::cast_precision_loss, clippy::cast_possible_wrap)]
        let mut report = MetricsAndActivity::single(metric_name, count as f64, 0.0);
        #[allow(clippy::cast_possible_wrap)]
        {
            report.active = count as i64 > self.activation;
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::test_context;

    fn parse(metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> Result<CouchDbConfig, String> {
        CouchDbConfig::parse(&test_context("couchdb", 1, metadata, &[], auth))
            .map_err(|e| e.to_string())
    }

    const QUERY_TEXT: &str = r#"{ "selector": { "feet": { "$gt": 0 } }, "fields": ["_id", "feet", "greeting"], "limit": 3 }"#;

    #[test]
    fn keda_s_metadata_cases() {
        let meta = [
            ("host", "couchdb.default"),
            ("port", "5984"),
            ("dbName", "animals"),
            ("queryValue", "5"),
            ("query", QUERY_TEXT),
            ("username", "someone"),
        ];
        let config = parse(&meta, &[("password", "pw")]).unwrap();
        assert_eq!(config.metric_name, "s1-coucdb-animals");
        let (url, key) = config.endpoint.as_ref().unwrap();
        assert_eq!(url.as_str(), "http://couchdb.default:5984/animals/_find");
        assert_eq!(
            key.auth.basic.as_ref().map(|(u, _)| u.as_str()),
            Some("admin")
        );
        let body: serde_json::Value = serde_json::from_str(config.body.as_ref().unwrap()).unwrap();
        assert_eq!(body["fields"][1], "feet");
        assert!(
            body.get("limit").is_none(),
            "KEDA keeps selector and fields only"
        );
        for missing in ["host", "port", "username", "dbName"] {
            let m: Vec<(&str, &str)> = meta
                .iter()
                .copied()
                .filter(|(k, _)| *k != missing)
                .collect();
            let err = parse(&m, &[("password", "pw")]).unwrap_err();
            assert!(err.contains(&format!("\"{missing}\"")), "{err}");
        }
        assert!(parse(&meta, &[]).unwrap_err().contains("\"password\""));
        let m: Vec<(&str, &str)> = meta
            .iter()
            .copied()
            .filter(|(k, _)| *k != "queryValue")
            .collect();
        assert!(
            parse(&m, &[("password", "pw")])
                .unwrap_err()
                .contains("\"queryValue\"")
        );
        // A connection string replaces host, port, username and dbName checks.
        let config = parse(
            &[("queryValue", "1"), ("query", QUERY_TEXT), ("dbName", "db")],
            &[("connectionString", "http://user:secret@couch:5984/")],
        )
        .unwrap();
        let (url, _) = config.endpoint.as_ref().unwrap();
        assert_eq!(url.as_str(), "http://couch:5984/db/_find");
        // A query that is not JSON builds and fails the reads naming it.
        let config = parse(
            &[("queryValue", "1"), ("query", "{x"), ("dbName", "db")],
            &[("connectionString", "http://couch:5984")],
        )
        .unwrap();
        let err = config.body.unwrap_err().to_string();
        assert!(err.contains("\"query\"") && !err.contains("{x"), "{err}");
    }

    #[test]
    fn documents_are_counted_and_scanned_as_keda_does() {
        assert_eq!(
            doc_count(
                br#"{"docs":[{"_id":"a","feet":4,"greeting":"hi"},{"_id":"b"}],"bookmark":"x"}"#
            ),
            Ok(2)
        );
        assert_eq!(doc_count(br#"{"docs":[]}"#), Ok(0));
        assert!(doc_count(br#"{"docs":[{"_id":"a","feet":"four"}]}"#).is_err());
        assert!(doc_count(br#"{"docs":[{"feet":1.5}]}"#).is_err());
        for garbage in ["", "SECRETSECRET", r#"{"docs":"SECRETSECRET"}"#] {
            let err = doc_count(garbage.as_bytes()).unwrap_err();
            assert!(!err.contains("SECRETSECRET"), "{err}");
        }
    }
}
