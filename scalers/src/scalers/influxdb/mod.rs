//! `influxdb`: scales on the first value a Flux query returns, asked of InfluxDB 2's query API
//! (`POST /api/v2/query`, the answer in annotated CSV). Compatible with KEDA's `influxdb`
//! trigger (`pkg/scalers/influxdb_scaler.go`) with `influxVersion: "2"`; InfluxDB 3 (queried
//! over Arrow Flight, gRPC) is refused with a message.
//!
//! Every trigger on the same server with the same token and TLS settings shares one HTTP
//! client leased from the shared [`ClientPools`](crate::pool::ClientPools).

pub mod csv;

use std::borrow::Cow;

use async_trait::async_trait;
use bytes::Bytes;
use http::StatusCode;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::authentication::{AuthMode, HttpAuth};
use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError, Source};
use crate::http_client::{self, HttpClientKey, HttpGetError, describe_url, parse_http_url};
use crate::metadata::{METADATA_AUTH, METADATA_ENV_AUTH, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pooled::{ApiRequest, HttpApi, HttpCall};
use crate::remote::{Classify, Failure, Kind};
use crate::scaler::MetricsAndActivity;
use crate::secret::Secret;
use crate::tls::TlsSettings;

/// `authToken` from the container's environment, then the TriggerAuthentication.
const ENV_AUTH: &[Source] = &[Source::Env, Source::Auth];

const AUTH_TOKEN: Param = Param::optional("authToken").order(ENV_AUTH).secret();
/// KEDA removed `authToken` from the trigger's metadata in 2.20.
const AUTH_TOKEN_IN_METADATA: Param = Param::deprecated(
    "authToken",
    "a token in the trigger's metadata is no longer supported; give authToken through authTokenFromEnv or a TriggerAuthentication",
)
.secret();
const ORGANIZATION_NAME: Param = Param::optional("organizationName").order(METADATA_ENV_AUTH);
const QUERY: Param = Param::required("query");
const INFLUX_VERSION: Param = Param::optional("influxVersion")
    .default("2")
    .allowed(&["2", "3"]);
const QUERY_TYPE: Param = Param::optional("queryType").default("InfluxQL");
const DATABASE: Param = Param::optional("database").order(METADATA_AUTH);
const METRIC_KEY: Param = Param::optional("metricKey");
const SERVER_URL: Param = Param::required("serverURL").order(METADATA_AUTH);
const UNSAFE_SSL: Param = Param::optional("unsafeSsl").default("false");
const THRESHOLD_VALUE: Param = Param::optional("thresholdValue").default("0");
const ACTIVATION_THRESHOLD_VALUE: Param = Param::optional("activationThresholdValue").default("0");

/// The parameters of `influxdb`.
pub const PARAMS: &[Param] = &[
    AUTH_TOKEN,
    ORGANIZATION_NAME,
    QUERY,
    INFLUX_VERSION,
    QUERY_TYPE,
    DATABASE,
    METRIC_KEY,
    SERVER_URL,
    UNSAFE_SSL,
    THRESHOLD_VALUE,
    ACTIVATION_THRESHOLD_VALUE,
];

/// InfluxDB's error codes (`{"code": ..., "message": ...}` of an error answer), which may be
/// shown: <https://docs.influxdata.com/influxdb/v2/api/#section/Response-codes>.
pub const ERROR_CODES: &[&str] = &[
    "internal error",
    "not found",
    "conflict",
    "invalid",
    "unprocessable entity",
    "empty value",
    "unavailable",
    "forbidden",
    "too many requests",
    "unauthorized",
    "method not allowed",
    "request too large",
    "unsupported media type",
];

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct InfluxDbConfig {
    /// The query URL, or why `serverURL` cannot be used (each read fails with it, as KEDA's
    /// client fails at each query).
    pub request: Result<InfluxDbRequest, MetadataError>,
    /// The Flux query.
    pub query: String,
    /// `organizationName`.
    pub organization: String,
    /// The target.
    pub threshold: f64,
    /// Active iff the value is above this.
    pub activation_threshold: f64,
    /// `s<index>-influxdb-<organizationName>`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
}

/// A usable `serverURL`.
#[derive(Clone, Debug)]
pub struct InfluxDbRequest {
    /// `<serverURL>/api/v2/query?org=<organizationName>`.
    pub url: url::Url,
    /// The pooled client's key: server, token, TLS.
    pub client: HttpClientKey,
}

/// The query URL of the Go client InfluxDB documents (`influxdb-client-go`): `serverURL` with a
/// `/` ensured at the end, then `api/v2/query`, then `org`.
pub fn query_url(server: &url::Url, organization: &str) -> url::Url {
    let mut url = server.clone();
    let path = format!("{}/api/v2/query", server.path().trim_end_matches('/'));
    url.set_path(&path);
    url.set_query(None);
    url.query_pairs_mut().append_pair("org", organization);
    url
}

/// The body of a Flux query with the annotations [`csv::first_value`] reads: the request of
/// <https://docs.influxdata.com/influxdb/v2/api/#operation/PostQuery>, as the Go client sends it.
pub fn query_body(query: &str) -> Bytes {
    let body = serde_json::json!({
        "query": query,
        "type": "flux",
        "dialect": {
            "annotations": ["datatype", "group", "default"],
            "delimiter": ",",
            "header": true,
        },
    });
    Bytes::from(body.to_string())
}

impl InfluxDbConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// A required parameter is missing or malformed, `organizationName` is missing,
    /// `thresholdValue` is missing (0) for a trigger that does not feed `scalingModifiers`,
    /// `influxVersion` is `3`, or `authToken` is in the trigger's metadata. A `serverURL` that
    /// is not an http(s) URL is no error here: it is kept in [`InfluxDbConfig::request`].
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let _: Option<String> = p.get_opt(&AUTH_TOKEN_IN_METADATA)?;
            let version: String = p.get(&INFLUX_VERSION)?;
            // Read for compatibility: they matter only to InfluxDB 3.
            let _: String = p.get(&QUERY_TYPE)?;
            let _: Option<String> = p.get_opt(&DATABASE)?;
            let _: Option<String> = p.get_opt(&METRIC_KEY)?;
            if version == "3" {
                return Err(p.rule(
                    "influxVersion \"3\" is not supported by keda-rs (InfluxDB 3 is queried over Arrow Flight, gRPC); query InfluxDB 3 through its v2-compatible API with influxVersion \"2\", or through an external scaler",
                ));
            }
            let organization: String = p.get_opt(&ORGANIZATION_NAME)?.ok_or_else(|| {
                p.rule("organizationName is required if influxVersion is 2")
            })?;
            let query: String = p.get(&QUERY)?;
            let threshold: f64 = p.get(&THRESHOLD_VALUE)?;
            if threshold == 0.0 && !ctx.as_metric_source {
                return Err(p.rule("no threshold value given: set thresholdValue"));
            }
            let token: Option<Secret> = p.get_opt(&AUTH_TOKEN)?;
            let mut auth = HttpAuth {
                tls: TlsSettings {
                    insecure: p.get(&UNSAFE_SSL)?,
                    ..TlsSettings::default()
                },
                ..HttpAuth::default()
            };
            if let Some(token) = token {
                if HeaderValue::from_str(&format!("Token {}", token.expose())).is_err() {
                    return Err(p.rule(
                        "parameter \"authToken\" contains characters that are not allowed in an HTTP header",
                    ));
                }
                // InfluxDB's token scheme: `Authorization: Token <token>`.
                auth.modes = vec![AuthMode::Custom];
                auth.custom = Some((
                    AUTHORIZATION,
                    Secret::new(format!("Token {}", token.expose())),
                ));
            }
            let server: String = p.get(&SERVER_URL)?;
            let request = parse_http_url(p, &SERVER_URL, &server).map(|server| InfluxDbRequest {
                url: query_url(&server, &organization),
                client: HttpClientKey {
                    origin: http_client::origin(&server),
                    auth,
                    timeout: ctx.global_http_timeout,
                },
            });
            Ok(Self {
                request,
                metric_name: ctx.metric_name(&format!("influxdb-{organization}")),
                query,
                organization,
                threshold,
                activation_threshold: p.get(&ACTIVATION_THRESHOLD_VALUE)?,
                metric_type,
            })
        })?)
    }
}

/// The failure of an error answer: InfluxDB's `code` when it is one of [`ERROR_CODES`] (with
/// the status), the status with its hint for 401 and 403; the message at debug level only.
pub fn error_answer(error: &HttpGetError) -> Failure {
    match error {
        HttpGetError::Status { status, body, .. } => {
            coded_answer(*status, body).unwrap_or_else(|| error.classify())
        }
        _ => error.classify(),
    }
}

/// The failure of an error status whose body names one of [`ERROR_CODES`] (never for 401 and
/// 403, reported by their status).
fn coded_answer(status: StatusCode, body: &[u8]) -> Option<Failure> {
    if matches!(status.as_u16(), 401 | 403) {
        return None;
    }
    #[derive(serde::Deserialize)]
    struct ErrorBody {
        #[serde(default)]
        code: String,
    }
    let code = crate::remote::from_json::<ErrorBody>(body)
        .ok()
        .and_then(|b| ERROR_CODES.iter().find(|c| **c == b.code).copied())?;
    Some(Failure::new(
        Kind::Server {
            system: "InfluxDB",
            code: Some(format!("\"{code}\" (HTTP {})", status.as_u16())),
        },
        Some(String::from_utf8_lossy(body).into_owned()),
    ))
}

/// An `influxdb` trigger as an [`HttpApi`]: the parsed trigger and what every read sends.
pub struct InfluxDb {
    config: InfluxDbConfig,
    headers: HeaderMap,
    body: Bytes,
}

impl InfluxDb {
    /// The parsed trigger.
    pub fn config(&self) -> &InfluxDbConfig {
        &self.config
    }
}

#[async_trait]
impl HttpApi for InfluxDb {
    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let config = InfluxDbConfig::parse(ctx)?;
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(ACCEPT, HeaderValue::from_static("application/csv"));
        Ok(Self {
            body: query_body(&config.query),
            config,
            headers,
        })
    }

    fn client_key(&self) -> Result<HttpClientKey, MetadataError> {
        self.config
            .request
            .as_ref()
            .map(|request| request.client.clone())
            .map_err(Clone::clone)
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.config.metric_name.clone(),
            metric_target_milli(self.config.metric_type, self.config.threshold),
        )]
    }

    fn request(&self, _now: jiff::Timestamp) -> Result<ApiRequest<'_>, MetadataError> {
        let request = self.config.request.as_ref().map_err(Clone::clone)?;
        Ok(ApiRequest::post(
            request.url.clone(),
            Cow::Borrowed(&self.headers),
            self.body.clone(),
        ))
    }

    fn operation(&self, request: &ApiRequest<'_>) -> String {
        format!(
            "influxdb query of organizationName {} on serverURL {}",
            self.config.organization,
            describe_url(&request.url)
        )
    }

    /// InfluxDB's error code when it is one of [`ERROR_CODES`] (its message never).
    fn error_answer(&self, status: StatusCode, body: &[u8]) -> Option<Failure> {
        coded_answer(status, body)
    }

    fn read(&self, body: &[u8], metric_name: &str) -> Result<MetricsAndActivity, String> {
        let value = csv::first_value(body)?;
        Ok(MetricsAndActivity::single(
            metric_name,
            value,
            self.config.activation_threshold,
        ))
    }

    /// One query; an answer without a usable first `_value` fails naming the query (its
    /// body at debug level only).
    async fn fetch(
        &self,
        call: &HttpCall<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let request = self
            .request(call.read.now())
            .map_err(ScalerError::Metadata)?;
        let operation = self.operation(&request);
        let answer = call.send(self, request).await?;
        self.read(&answer, metric_name)
            .map_err(|why| ScalerError::Query {
                trigger: call.read.trigger.clone(),
                operation,
                source: Failure::answer(why, &answer),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::test_context;

    const BASE: &[(&str, &str)] = &[
        ("serverURL", "http://influxdb:8086/"),
        ("organizationName", "my.org"),
        ("query", "from(bucket: \"b\") |> range(start: -1h)"),
        ("thresholdValue", "4.5"),
    ];

    fn parse(
        metadata: &[(&str, &str)],
        env: &[(&str, &str)],
        auth: &[(&str, &str)],
    ) -> Result<InfluxDbConfig, String> {
        let mut all: std::collections::BTreeMap<&str, &str> = BASE.iter().copied().collect();
        all.extend(metadata.iter().copied());
        let pairs: Vec<(&str, &str)> = all.into_iter().filter(|(_, v)| !v.is_empty()).collect();
        InfluxDbConfig::parse(&test_context("influxdb", 2, &pairs, env, auth))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn the_trigger_parses_as_keda_reads_it() {
        let config = parse(&[("authTokenFromEnv", "TOKEN")], &[("TOKEN", "t0ken")], &[]).unwrap();
        assert_eq!(config.metric_name, "s2-influxdb-my-org");
        let request = config.request.as_ref().unwrap();
        assert_eq!(
            request.url.as_str(),
            "http://influxdb:8086/api/v2/query?org=my.org"
        );
        let (header, value) = request.client.auth.custom.as_ref().unwrap();
        assert_eq!(header, AUTHORIZATION);
        assert_eq!(value.expose(), "Token t0ken");
        assert_eq!(config.threshold, 4.5);
        // The TriggerAuthentication gives the token when the environment does not.
        let config = parse(
            &[],
            &[],
            &[("authToken", "a-t0ken"), ("serverURL", "https://x")],
        )
        .unwrap();
        let request = config.request.as_ref().unwrap();
        assert_eq!(
            request.client.auth.custom.as_ref().unwrap().1.expose(),
            "Token a-t0ken"
        );
        // serverURL from the metadata wins over the TriggerAuthentication.
        assert_eq!(request.client.origin, "http://influxdb:8086");
        let config = parse(
            &[("serverURL", "")],
            &[],
            &[("serverURL", "https://influx.example/proxy")],
        )
        .unwrap();
        assert_eq!(
            config.request.unwrap().url.as_str(),
            "https://influx.example/proxy/api/v2/query?org=my.org"
        );
        let body: serde_json::Value = serde_json::from_slice(&query_body("q")).unwrap();
        assert_eq!(body["type"], "flux");
        assert_eq!(body["dialect"]["annotations"][0], "datatype");
    }

    #[test]
    fn errors_name_the_parameter() {
        // (metadata changes, error)
        let rows: &[(&[(&str, &str)], &str)] = &[
            (
                &[("thresholdValue", "")],
                "trigger 2 (influxdb): no threshold value given: set thresholdValue",
            ),
            (
                &[("organizationName", "")],
                "trigger 2 (influxdb): organizationName is required if influxVersion is 2",
            ),
            (
                &[("authToken", "s3cret-token")],
                "trigger 2 (influxdb): parameter \"authToken\" is no longer supported: a token in the trigger's metadata is no longer supported; give authToken through authTokenFromEnv or a TriggerAuthentication",
            ),
            (
                &[("influxVersion", "1")],
                "trigger 2 (influxdb): parameter \"influxVersion\": \"1\" is not one of 2, 3",
            ),
            (
                &[("thresholdValue", "many")],
                "trigger 2 (influxdb): parameter \"thresholdValue\": \"many\" is not a valid number",
            ),
            (
                &[("query", "")],
                "trigger 2 (influxdb): missing required parameter \"query\"",
            ),
        ];
        for (changes, expected) in rows {
            assert_eq!(parse(changes, &[], &[]).unwrap_err(), *expected);
        }
        let err = parse(
            &[
                ("influxVersion", "3"),
                ("database", "d"),
                ("metricKey", "k"),
            ],
            &[],
            &[],
        )
        .unwrap_err();
        assert!(
            err.contains("influxVersion \"3\" is not supported by keda-rs"),
            "{err}"
        );
        let source = ScalerContext {
            as_metric_source: true,
            ..test_context(
                "influxdb",
                0,
                &[
                    ("serverURL", "http://i"),
                    ("organizationName", "o"),
                    ("query", "q"),
                ],
                &[],
                &[],
            )
        };
        assert_eq!(InfluxDbConfig::parse(&source).unwrap().threshold, 0.0);
        // A serverURL that is not a URL fails the reads, not the build.
        let config = parse(&[("serverURL", "influxdb:8086")], &[], &[]).unwrap();
        assert_eq!(
            config.request.unwrap_err().to_string(),
            "trigger 2 (influxdb): parameter \"serverURL\" must be an http:// or https:// URL, not influxdb:"
        );
    }

    #[test]
    fn error_answers_show_influxdb_codes_from_the_vocabulary_only() {
        let status = |code: u16, body: &str| HttpGetError::Status {
            status: http::StatusCode::from_u16(code).unwrap(),
            content_type: Some("application/json".into()),
            body: Bytes::from(body.to_string()),
        };
        let f = error_answer(&status(
            400,
            r#"{"code":"invalid","message":"compilation failed: SECRET"}"#,
        ));
        assert_eq!(
            f.to_string(),
            "InfluxDB answered error \"invalid\" (HTTP 400)"
        );
        let f = error_answer(&status(400, r#"{"code":"SECRET","message":"x"}"#));
        assert_eq!(
            f.to_string(),
            "answered HTTP 400 Bad Request (31 bytes of application/json)"
        );
        let f = error_answer(&status(
            401,
            r#"{"code":"unauthorized","message":"unauthorized access"}"#,
        ));
        assert!(
            f.to_string()
                .ends_with("check the trigger's authModes and its credentials")
        );
        let f = error_answer(&status(
            429,
            r#"{"code":"too many requests","message":"SECRET"}"#,
        ));
        assert_eq!(
            f.to_string(),
            "InfluxDB answered error \"too many requests\" (HTTP 429)"
        );
    }
}
