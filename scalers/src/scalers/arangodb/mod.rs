//! `arangodb`: scales on the `value` of the one document an AQL query returns, through
//! ArangoDB's HTTP API as KEDA's Go driver calls it (the database, then the collection, must
//! exist; then `POST /_db/<db>/_api/cursor` with `count: true`). Compatible with KEDA's
//! `arangodb` trigger (`pkg/scalers/arangodb_scaler.go`).
//!
//! `endpoints` may list several coordinators: a read goes to the first that can be reached, as
//! the driver fails over. Every trigger with the same endpoints, credentials, TLS settings and
//! timeout shares one HTTP client.

use std::borrow::Cow;

use http::HeaderValue;
use http::header::{CONTENT_TYPE, HeaderMap};
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::authentication::{AUTH_MODES, AuthMode, BEARER_TOKEN, HttpAuth, PASSWORD, USERNAME};
use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError, Source};
use crate::http_client::{self, HttpClientKey, describe_url};
use crate::metadata::{AUTH_METADATA, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pooled::{ApiRequest, HttpApi, HttpCall, Pooled};
use crate::remote::Kind;
use crate::scaler::MetricsAndActivity;
use crate::tls::TlsSettings;

const METADATA_AUTH: &[Source] = &[Source::Metadata, Source::Auth];

const ENDPOINTS: Param = Param::required("endpoints").order(AUTH_METADATA);
const DB_NAME: Param = Param::required("dbName").order(METADATA_AUTH);
const COLLECTION: Param = Param::required("collection");
const QUERY: Param = Param::required("query");
const QUERY_VALUE: Param = Param::optional("queryValue").default("0");
const ACTIVATION_QUERY_VALUE: Param = Param::optional("activationQueryValue").default("0");
const UNSAFE_SSL: Param = Param::optional("unsafeSsl").default("false");
const CONNECTION_LIMIT: Param = Param::optional("connectionLimit");

/// The parameters of `arangodb`.
pub const PARAMS: &[Param] = &[
    ENDPOINTS,
    DB_NAME,
    COLLECTION,
    QUERY,
    QUERY_VALUE,
    ACTIVATION_QUERY_VALUE,
    UNSAFE_SSL,
    CONNECTION_LIMIT,
    AUTH_MODES,
    USERNAME,
    PASSWORD,
    BEARER_TOKEN,
];

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct ArangoDbConfig {
    /// The coordinators (`endpoints`) and the client key, or why an endpoint cannot be used.
    pub endpoints: Result<(Vec<url::Url>, HttpClientKey), MetadataError>,
    /// `dbName`.
    pub db_name: String,
    /// `collection`.
    pub collection: String,
    /// `query` (AQL).
    pub query: String,
    /// The target (0 when the trigger feeds `scalingModifiers`).
    pub target: f64,
    /// Active iff the value is above this.
    pub activation: f64,
    /// `s<index>-arangodb`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
    headers: HeaderMap,
}

impl ArangoDbConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// `endpoints`, `dbName`, `collection` or `query` missing, `queryValue` 0 (unless the
    /// trigger feeds `scalingModifiers`), a malformed number, or the authentication block
    /// incomplete.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let endpoints: String = p.get(&ENDPOINTS)?;
            let db_name: String = p.get(&DB_NAME)?;
            let collection: String = p.get(&COLLECTION)?;
            let query: String = p.get(&QUERY)?;
            let target: f64 = p.get(&QUERY_VALUE)?;
            let activation: f64 = p.get(&ACTIVATION_QUERY_VALUE)?;
            let unsafe_ssl: bool = p.get(&UNSAFE_SSL)?;
            let _: Option<i64> = p.get_opt(&CONNECTION_LIMIT)?;
            let parsed = HttpAuth::parse(p, unsafe_ssl)?;
            if target == 0.0 && !ctx.as_metric_source {
                return Err(p.rule("no parameter \"queryValue\" given (it must not be 0)"));
            }
            // KEDA's driver: Basic credentials; `bearer` makes a JWT only with a server ID,
            // which KEDA never sets, so nothing is sent; no client certificate.
            let auth = HttpAuth {
                modes: if parsed.basic.is_some() {
                    vec![AuthMode::Basic]
                } else {
                    Vec::new()
                },
                basic: parsed.basic,
                tls: TlsSettings {
                    insecure: unsafe_ssl,
                    ca: None,
                    client: None,
                },
                ..HttpAuth::default()
            };
            let endpoints = endpoints
                .split(',')
                .map(|e| {
                    url::Url::parse(e.trim())
                        .ok()
                        .filter(|u| {
                            matches!(u.scheme(), "http" | "https")
                                && u.host_str().is_some_and(|h| !h.is_empty())
                        })
                        .ok_or_else(|| {
                            p.rule(format!(
                                "parameter \"{}\": an endpoint is not an http(s) URL",
                                ENDPOINTS.name
                            ))
                        })
                })
                .collect::<Result<Vec<_>, _>>()
                .map(|urls| {
                    let key = HttpClientKey {
                        origin: urls
                            .iter()
                            .map(http_client::origin)
                            .collect::<Vec<_>>()
                            .join(","),
                        auth,
                        timeout: ctx.global_http_timeout,
                    };
                    (urls, key)
                });
            let mut headers = HeaderMap::new();
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            Ok(Self {
                endpoints,
                db_name,
                collection,
                query,
                target: if ctx.as_metric_source { 0.0 } else { target },
                activation,
                metric_name: ctx.metric_name("arangodb"),
                metric_type,
                headers,
            })
        })?)
    }

    fn url(&self, endpoint: &url::Url, segments: &[&str]) -> url::Url {
        let mut url = endpoint.clone();
        url.set_query(None);
        url.set_fragment(None);
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(["_db", self.db_name.as_str()]);
            path.extend(segments);
        }
        url
    }
}

/// The `value` of the one document of a cursor answer (`{"result":[{"value":N}],
/// "hasMore":false,"count":1,...}`), as KEDA reads it: the count must be 1.
///
/// # Errors
/// Not a cursor answer, a count other than 1, or the document has no numeric `value`.
/// Messages never quote the answer.
pub fn cursor_value(body: &[u8]) -> Result<f64, String> {
    #[derive(serde::Deserialize)]
    struct Cursor {
        #[serde(default)]
        result: Vec<serde_json::Value>,
        #[serde(default)]
        count: Option<i64>,
    }
    let cursor: Cursor = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the ArangoDB answer is not a cursor: {}",
            crate::remote::json_error(&e)
        )
    })?;
    if cursor.count != Some(1) {
        return Err(
            "more than one values received, please check the query (the count is not 1)".into(),
        );
    }
    let document = cursor
        .result
        .first()
        .and_then(serde_json::Value::as_object)
        .ok_or(
            "query result is not in the specified format, please check the query (no document)",
        )?;
    match document.get("value") {
        None | Some(serde_json::Value::Null) => Ok(0.0),
        Some(v) => v.as_f64().ok_or_else(|| {
            "query result is not in the specified format, please check the query (value is not a number)".to_string()
        }),
    }
}

/// An `arangodb` scaler.
pub type ArangoDbScaler = Pooled<ArangoDbConfig>;

fn is_404(e: &ScalerError) -> bool {
    matches!(e, ScalerError::Query { source, .. } if matches!(source.kind(), Kind::Status { code: 404, .. }))
}

fn unreachable(e: &ScalerError) -> bool {
    matches!(e, ScalerError::Query { source, .. } if matches!(
        source.kind(),
        Kind::Refused | Kind::Unresolved | Kind::TimedOut | Kind::Closed | Kind::Io(_)
    ))
}

#[async_trait::async_trait]
impl HttpApi for ArangoDbConfig {
    /// A self-hosted server: polled sooner after a sign of activity.
    const ADAPTIVE_POLLING: bool = true;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        ArangoDbConfig::parse(ctx)
    }

    fn client_key(&self) -> Result<HttpClientKey, MetadataError> {
        self.endpoints
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

    /// The query of the first endpoint (a read first checks the database and the collection:
    /// see `fetch`).
    fn request(&self, _now: jiff::Timestamp) -> Result<ApiRequest<'_>, MetadataError> {
        let (urls, _) = self.endpoints.as_ref().map_err(Clone::clone)?;
        let endpoint = urls.first().cloned().unwrap_or_else(|| {
            url::Url::parse("http://localhost:8529").unwrap_or_else(|_| unreachable!())
        });
        let body = serde_json::json!({ "query": self.query, "count": true }).to_string();
        Ok(ApiRequest::post(
            self.url(&endpoint, &["_api", "cursor"]),
            Cow::Borrowed(&self.headers),
            body,
        ))
    }

    fn operation(&self, request: &ApiRequest<'_>) -> String {
        format!(
            "ArangoDB query on collection {} of database {} at {}",
            self.collection,
            self.db_name,
            describe_url(&request.url)
        )
    }

    fn read(&self, body: &[u8], metric_name: &str) -> Result<MetricsAndActivity, String> {
        Ok(MetricsAndActivity::single(
            metric_name,
            cursor_value(body)?,
            self.activation,
        ))
    }

    /// KEDA's read on the first endpoint that can be reached: the database exists (`GET
    /// /_db/<db>/_api/database/current`), the collection exists (`GET
    /// /_db/<db>/_api/collection/<collection>`), then the query.
    async fn fetch(
        &self,
        call: &HttpCall<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let (urls, _) = self
            .endpoints
            .as_ref()
            .map_err(|e| ScalerError::Metadata(e.clone()))?;
        let mut last = None;
        for endpoint in urls {
            let database = self.url(endpoint, &["_api", "database", "current"]);
            match call
                .send(self, ApiRequest::get(database, &self.headers))
                .await
            {
                Ok(_) => {}
                Err(e) if is_404(&e) => {
                    return Err(call
                        .read
                        .unexpected(format!("{} database not found", self.db_name)));
                }
                Err(e) if unreachable(&e) => {
                    last = Some(e);
                    continue;
                }
                Err(e) => return Err(e),
            }
            let collection = self.url(endpoint, &["_api", "collection", &self.collection]);
            match call
                .send(self, ApiRequest::get(collection, &self.headers))
                .await
            {
                Ok(_) => {}
                Err(e) if is_404(&e) => {
                    return Err(call.read.unexpected(format!(
                        "{} collection not found in {} database",
                        self.collection, self.db_name
                    )));
                }
                Err(e) => return Err(e),
            }
            let body = serde_json::json!({ "query": self.query, "count": true }).to_string();
            let query = ApiRequest::post(
                self.url(endpoint, &["_api", "cursor"]),
                Cow::Borrowed(&self.headers),
                body,
            );
            let answer = call.send(self, query).await?;
            return self
                .read(&answer, metric_name)
                .map_err(|m| call.read.unexpected(m));
        }
        Err(last.unwrap_or_else(|| call.read.unexpected("no endpoint given")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::test_context;

    fn parse(metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> Result<ArangoDbConfig, String> {
        ArangoDbConfig::parse(&test_context("arangodb", 0, metadata, &[], auth))
            .map_err(|e| e.to_string())
    }

    const META: &[(&str, &str)] = &[
        ("endpoints", "https://1.2.3.4:8529,https://5.6.7.8:8529"),
        ("dbName", "db"),
        ("collection", "col"),
        ("query", "FOR d IN col RETURN {value: 1}"),
        ("queryValue", "10"),
    ];

    /// KEDA's `testArangoDBMetadata` and `testArangoDBAuthMetadata`
    /// (`pkg/scalers/arangodb_scaler_test.go`).
    #[test]
    fn keda_s_metadata_cases() {
        let config = parse(META, &[]).unwrap();
        let (urls, key) = config.endpoints.as_ref().unwrap();
        assert_eq!(urls.len(), 2);
        assert!(key.auth.modes.is_empty());
        assert_eq!(config.metric_name, "s0-arangodb");
        assert_eq!(
            config
                .url(&urls[0], &["_api", "collection", "col"])
                .as_str(),
            "https://1.2.3.4:8529/_db/db/_api/collection/col"
        );
        for (i, name) in ["endpoints", "dbName", "collection", "query"]
            .iter()
            .enumerate()
        {
            let mut m = META.to_vec();
            m.remove(i);
            let err = parse(&m, &[]).unwrap_err();
            assert!(err.contains(&format!("\"{name}\"")), "{err}");
        }
        let err = parse(&META[..4], &[]).unwrap_err();
        assert!(err.contains("\"queryValue\""), "{err}");
        // endpoints and dbName from the TriggerAuthentication.
        let config = parse(
            &META[2..],
            &[("endpoints", "http://a:8529"), ("dbName", "adb")],
        )
        .unwrap();
        assert_eq!(config.db_name, "adb");
        let mut basic = META.to_vec();
        basic.push(("authModes", "basic"));
        let config = parse(&basic, &[("username", "root"), ("password", "pw")]).unwrap();
        assert_eq!(
            config.endpoints.unwrap().1.auth.modes,
            vec![AuthMode::Basic]
        );
        let err = parse(&basic, &[("password", "pw")]).unwrap_err();
        assert!(err.contains("\"username\""), "{err}");
        let mut bearer = META.to_vec();
        bearer.push(("authModes", "bearer"));
        let config = parse(&bearer, &[("bearerToken", "t")]).unwrap();
        assert!(config.endpoints.unwrap().1.auth.modes.is_empty());
        let mut bad = META[1..].to_vec();
        bad.push(("endpoints", "1.2.3.4:8529"));
        let err = parse(&bad, &[]).unwrap().endpoints.unwrap_err().to_string();
        assert!(err.contains("\"endpoints\""), "{err}");
    }

    #[test]
    fn the_value_is_the_one_document_s() {
        assert_eq!(
            cursor_value(br#"{"result":[{"value":3.5}],"hasMore":false,"count":1,"cached":false,"extra":{},"error":false,"code":201}"#),
            Ok(3.5)
        );
        assert!(cursor_value(br#"{"result":[{"value":1},{"value":2}],"count":2}"#).is_err());
        assert!(cursor_value(br#"{"result":[],"count":0}"#).is_err());
        for garbage in [
            "",
            "SECRETSECRET",
            r#"{"result":[{"value":"SECRETSECRET"}],"count":1}"#,
            r#"{"result":["SECRETSECRET"],"count":1}"#,
        ] {
            let err = cursor_value(garbage.as_bytes()).unwrap_err();
            assert!(!err.contains("SECRETSECRET"), "{err}");
        }
    }
}
