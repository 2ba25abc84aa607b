//! `splunk`: scales on a field of a Splunk saved search's result, run through the search
//! export endpoint (`POST <host>/servicesNS/<username>/search/search/jobs/export`).
//! Compatible with KEDA's `splunk` trigger (`pkg/scalers/splunk_scaler.go`,
//! `pkg/scalers/splunk/splunk.go`).
//!
//! `host` comes from the trigger; `username` and the `apiToken` (Bearer) or `password` (Basic)
//! from the TriggerAuthentication only, as in KEDA. Every trigger with the same host,
//! credentials, TLS setting and timeout shares one HTTP client.

use std::borrow::Cow;

use http::HeaderValue;
use http::header::{CONTENT_TYPE, HeaderMap};
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::authentication::{AuthMode, HttpAuth};
use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError};
use crate::http_client::{self, HttpClientKey, describe_url, parse_http_url};
use crate::metadata::{AUTH, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target};
use crate::pooled::{ApiRequest, HttpApi, Pooled};
use crate::scaler::MetricsAndActivity;
use crate::secret::Secret;

const API_TOKEN: Param = Param::optional("apiToken").order(AUTH).secret();
const PASSWORD: Param = Param::optional("password").order(AUTH).secret();
const USERNAME: Param = Param::required("username").order(AUTH);
const HOST: Param = Param::required("host");
const UNSAFE_SSL: Param = Param::optional("unsafeSsl").default("false");
const TARGET_VALUE: Param = Param::required("targetValue");
const ACTIVATION_VALUE: Param = Param::required("activationValue");
const SAVED_SEARCH_NAME: Param = Param::required("savedSearchName");
const VALUE_FIELD: Param = Param::required("valueField");

/// The parameters of `splunk`.
pub const PARAMS: &[Param] = &[
    API_TOKEN,
    PASSWORD,
    USERNAME,
    HOST,
    UNSAFE_SSL,
    TARGET_VALUE,
    ACTIVATION_VALUE,
    SAVED_SEARCH_NAME,
    VALUE_FIELD,
];

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct SplunkConfig {
    /// The export URL and the client key, or why `host` cannot be used.
    pub endpoint: Result<(url::Url, HttpClientKey), MetadataError>,
    /// `savedSearchName`.
    pub saved_search: String,
    /// `valueField`.
    pub value_field: String,
    /// `targetValue`.
    pub target: i64,
    /// `activationValue`: active iff the value, truncated to an integer, is above it.
    pub activation: i64,
    /// `s<index>-splunk-<savedSearchName>`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
    headers: HeaderMap,
}

/// Whether Go's `url.ParseRequestURI` takes `host`: an absolute path, or a scheme followed by
/// a `/`.
fn is_request_uri(host: &str) -> bool {
    host.starts_with('/') || url::Url::parse(host).is_ok_and(|u| !u.cannot_be_a_base())
}

/// `<host>/servicesNS/<username>/search/search/jobs/export?output_mode=json`; the user name is
/// one percent-encoded path segment.
pub fn export_url(host: &url::Url, username: &str) -> url::Url {
    let mut url = host.clone();
    url.set_query(None);
    url.set_fragment(None);
    if let Ok(mut segments) = url.path_segments_mut() {
        segments.pop_if_empty().extend([
            "servicesNS",
            username,
            "search",
            "search",
            "jobs",
            "export",
        ]);
    }
    url.query_pairs_mut().append_pair("output_mode", "json");
    url
}

impl SplunkConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// A required parameter missing (`username` from the TriggerAuthentication), a malformed
    /// number or boolean, both `apiToken` and `password`, or a `host` Go's request URI parser
    /// refuses.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let api_token: Option<Secret> = p.get_opt(&API_TOKEN)?;
            let password: Option<Secret> = p.get_opt(&PASSWORD)?;
            let username: String = p.get(&USERNAME)?;
            let host: String = p.get(&HOST)?;
            let unsafe_ssl: bool = p.get(&UNSAFE_SSL)?;
            let target: i64 = p.get(&TARGET_VALUE)?;
            let activation: i64 = p.get(&ACTIVATION_VALUE)?;
            let saved_search: String = p.get(&SAVED_SEARCH_NAME)?;
            let value_field: String = p.get(&VALUE_FIELD)?;
            if !is_request_uri(&host) {
                return Err(p.rule(
                    "invalid value for parameter \"host\": it must be a valid URL such as https://localhost:8089",
                ));
            }
            let mut auth = HttpAuth::default();
            auth.tls.insecure = unsafe_ssl;
            match (api_token, password) {
                (Some(_), Some(_)) => {
                    return Err(p.rule(
                        "parameters \"apiToken\" and \"password\" are both set; with apiToken, give only username",
                    ));
                }
                (Some(token), None) => {
                    if HeaderValue::from_str(token.expose()).is_err() {
                        return Err(p.rule(
                            "parameter \"apiToken\" holds characters an HTTP header cannot carry",
                        ));
                    }
                    auth.modes = vec![AuthMode::Bearer];
                    auth.bearer = Some(token);
                }
                (None, password) => {
                    auth.modes = vec![AuthMode::Basic];
                    auth.basic = Some((username.clone(), password.unwrap_or_else(|| Secret::new(""))));
                }
            }
            let endpoint = parse_http_url(p, &HOST, &host).map(|server| {
                let key = HttpClientKey {
                    origin: http_client::origin(&server),
                    auth,
                    timeout: ctx.global_http_timeout,
                };
                (export_url(&server, &username), key)
            });
            let mut headers = HeaderMap::new();
            headers.insert(
                CONTENT_TYPE,
                HeaderValue::from_static("application/x-www-form-urlencoded"),
            );
            Ok(Self {
                endpoint,
                metric_name: ctx.metric_name(&format!("splunk-{saved_search}")),
                saved_search,
                value_field,
                target,
                activation,
                metric_type,
                headers,
            })
        })?)
    }
}

/// The value of `field` in the first result of a search export answer (`output_mode=json`:
/// one JSON object per result, `{"preview":false,"offset":0,"result":{"<field>":"<value>"}}`;
/// KEDA decodes the first and requires every field of its `result` to be a string).
///
/// # Errors
/// The first JSON value is not such an object, the field is missing, or it is not a number.
/// Messages never quote the answer.
pub fn field_value(body: &[u8], field: &str) -> Result<f64, String> {
    #[derive(serde::Deserialize)]
    struct Export {
        #[serde(default)]
        result: Option<std::collections::BTreeMap<String, String>>,
    }
    let first = serde_json::Deserializer::from_slice(body)
        .into_iter::<Export>()
        .next()
        .ok_or("the Splunk answer is empty")?
        .map_err(|e| {
            format!(
                "the Splunk answer is not a search result: {}",
                crate::remote::json_error(&e)
            )
        })?;
    let text = first
        .result
        .unwrap_or_default()
        .remove(field)
        .ok_or_else(|| format!("field {field} not found in the search results"))?;
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| format!("the value of field {field} is not a float value"))
}

/// A `splunk` scaler.
pub type SplunkScaler = Pooled<SplunkConfig>;

impl HttpApi for SplunkConfig {
    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        SplunkConfig::parse(ctx)
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

    /// KEDA's body `search=savedsearch <name>`, as it writes it (not form-encoded).
    fn request(&self, _now: jiff::Timestamp) -> Result<ApiRequest<'_>, MetadataError> {
        let (url, _) = self.endpoint.as_ref().map_err(Clone::clone)?;
        Ok(ApiRequest::post(
            url.clone(),
            Cow::Borrowed(&self.headers),
            format!("search=savedsearch {}", self.saved_search),
        ))
    }

    fn operation(&self, request: &ApiRequest<'_>) -> String {
        format!(
            "splunk saved search `{}` on host {}",
            self.saved_search,
            describe_url(&request.url)
        )
    }

    fn read(&self, body: &[u8], metric_name: &str) -> Result<MetricsAndActivity, String> {
        let value = field_value(body, &self.value_field)?;
        let mut report = MetricsAndActivity::single(metric_name, value, 0.0);
        // KEDA: int(value) > activationValue.
        #[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
        {
            report.active = (value.trunc() as i64) > self.activation;
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::test_context;

    /// (metadata, TriggerAuthentication parameters, what the error names).
    type Case<'a> = (Vec<(&'a str, &'a str)>, Vec<(&'a str, &'a str)>, &'a str);

    fn parse(metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> Result<SplunkConfig, String> {
        SplunkConfig::parse(&test_context("splunk", 1, metadata, &[], auth))
            .map_err(|e| e.to_string())
    }

    const META: &[(&str, &str)] = &[
        ("host", "https://splunk.example:8089"),
        ("targetValue", "5"),
        ("activationValue", "2"),
        ("savedSearchName", "Errors Last Hour"),
        ("valueField", "count"),
    ];

    #[test]
    fn keda_s_metadata_cases() {
        let config = parse(META, &[("username", "admin"), ("password", "pw")]).unwrap();
        // KEDA's NormalizeString keeps spaces.
        assert_eq!(config.metric_name, "s1-splunk-Errors Last Hour");
        let (url, key) = config.endpoint.as_ref().unwrap();
        assert_eq!(
            url.as_str(),
            "https://splunk.example:8089/servicesNS/admin/search/search/jobs/export?output_mode=json"
        );
        assert!(key.auth.basic.is_some());
        let request = config.request(jiff::Timestamp::UNIX_EPOCH).unwrap();
        assert_eq!(
            request.body.as_deref(),
            Some(&b"search=savedsearch Errors Last Hour"[..])
        );
        let config = parse(META, &[("username", "a/../b"), ("apiToken", "t")]).unwrap();
        let (url, key) = config.endpoint.as_ref().unwrap();
        assert!(url.path().starts_with("/servicesNS/a%2F..%2Fb/"), "{url}");
        assert!(key.auth.bearer.is_some() && key.auth.basic.is_none());

        let without = |name: &str| -> Vec<(&str, &str)> {
            META.iter().copied().filter(|(k, _)| *k != name).collect()
        };
        let rows: Vec<Case<'_>> = vec![
            (META.to_vec(), vec![], "\"username\""),
            (
                META.to_vec(),
                vec![("username", "a"), ("apiToken", "t"), ("password", "p")],
                "\"apiToken\"",
            ),
            (without("host"), vec![("username", "a")], "\"host\""),
            (
                without("activationValue"),
                vec![("username", "a")],
                "\"activationValue\"",
            ),
            (
                without("targetValue"),
                vec![("username", "a")],
                "\"targetValue\"",
            ),
            (
                without("savedSearchName"),
                vec![("username", "a")],
                "\"savedSearchName\"",
            ),
            (
                without("valueField"),
                vec![("username", "a")],
                "\"valueField\"",
            ),
        ];
        for (i, (metadata, auth, name)) in rows.iter().enumerate() {
            let err = parse(metadata, auth).expect_err(name);
            assert!(err.contains(name), "row {i}: {err}");
        }
        let mut bad_host = without("host");
        bad_host.push(("host", "localhost:8089"));
        assert!(
            parse(&bad_host, &[("username", "a")])
                .unwrap_err()
                .contains("\"host\"")
        );
        // A request URI that is no http(s) URL builds and fails every read naming host.
        let mut path_host = without("host");
        path_host.push(("host", "/splunk"));
        let config = parse(&path_host, &[("username", "a")]).unwrap();
        assert!(
            config
                .endpoint
                .unwrap_err()
                .to_string()
                .contains("\"host\"")
        );
    }

    #[test]
    fn the_first_result_gives_the_field() {
        let body = b"{\"preview\":false,\"offset\":0,\"result\":{\"count\":\"12.5\",\"host\":\"a\"}}\n{\"preview\":false,\"offset\":1,\"result\":{\"count\":\"99\"}}\n";
        assert_eq!(field_value(body, "count"), Ok(12.5));
        assert_eq!(
            field_value(body, "missing"),
            Err("field missing not found in the search results".into())
        );
        assert_eq!(
            field_value(br#"{"result":{"count":"many"}}"#, "count"),
            Err("the value of field count is not a float value".into())
        );
        assert!(field_value(br#"{"result":{"count":["1","2"]}}"#, "count").is_err());
        assert!(field_value(b"", "count").is_err());
        for garbage in ["SECRETSECRET", r#"{"result":"SECRETSECRET"}"#] {
            let err = field_value(garbage.as_bytes(), "count").unwrap_err();
            assert!(!err.contains("SECRETSECRET"), "{err}");
        }
        let config = parse(META, &[("username", "a")]).unwrap();
        let report = config.read(br#"{"result":{"count":"2.9"}}"#, "m").unwrap();
        assert!(!report.active, "int(2.9) = 2 is not above 2");
        let report = config.read(br#"{"result":{"count":"3"}}"#, "m").unwrap();
        assert!(report.active);
    }
}
