//! `activemq`: scales on the size of an ActiveMQ (classic) queue, read from the broker's Jolokia
//! REST API (KEDA's `pkg/scalers/activemq_scaler.go`): `GET http://<managementEndpoint>/api/
//! jolokia/read/org.apache.activemq:type=Broker,brokerName=<b>,destinationType=Queue,
//! destinationName=<d>/QueueSize` with HTTP basic authentication and an `Origin` header.
//!
//! Triggers on the same endpoint with the same credentials share one pooled HTTP client.

use std::collections::BTreeMap;

use async_trait::async_trait;
use http::header::{HeaderMap, HeaderValue};
use k8s_openapi::api::autoscaling::v2::MetricSpec;
use percent_encoding::percent_decode_str;

use crate::authentication::{AuthMode, HttpAuth};
use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError, Source};
use crate::http_client::{self, HttpClientKey, describe_url, origin};
use crate::metadata::{MetadataParser, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target};
use crate::pooled::{ApiRequest, HttpApi, HttpCall};
use crate::remote::Failure;
use crate::scaler::MetricsAndActivity;
use crate::secret::Secret;

/// KEDA's `order=authParams;resolvedEnv;triggerMetadata`.
const AUTH_ENV_METADATA: &[Source] = &[Source::Auth, Source::Env, Source::Metadata];

const MANAGEMENT_ENDPOINT: Param = Param::optional("managementEndpoint");
const DESTINATION_NAME: Param = Param::optional("destinationName");
const BROKER_NAME: Param = Param::optional("brokerName");
const USERNAME: Param = Param::required("username").order(AUTH_ENV_METADATA);
const PASSWORD: Param = Param::required("password")
    .order(AUTH_ENV_METADATA)
    .secret();
const CORS_HEADER: Param = Param::optional("corsHeader");
const REST_API_TEMPLATE: Param = Param::optional("restAPITemplate");
const TARGET_QUEUE_SIZE: Param = Param::optional("targetQueueSize").default("10");
const ACTIVATION_TARGET_QUEUE_SIZE: Param =
    Param::optional("activationTargetQueueSize").default("0");

/// The parameters of `activemq`.
pub const PARAMS: &[Param] = &[
    MANAGEMENT_ENDPOINT,
    DESTINATION_NAME,
    BROKER_NAME,
    USERNAME,
    PASSWORD,
    CORS_HEADER,
    REST_API_TEMPLATE,
    TARGET_QUEUE_SIZE,
    ACTIVATION_TARGET_QUEUE_SIZE,
];

/// KEDA's default `restAPITemplate`.
pub const DEFAULT_REST_API_TEMPLATE: &str = "http://{{.ManagementEndpoint}}/api/jolokia/read/org.apache.activemq:type=Broker,brokerName={{.BrokerName}},destinationType=Queue,destinationName={{.DestinationName}}/QueueSize";

/// The parsed trigger.
///
/// KEDA's `activeMQMetadata.Validate` checks `restAPITemplate` as a URL and reads the broker
/// and destination out of it, or requires `managementEndpoint`, `destinationName` and
/// `brokerName`; those refuse the build here too. The template is filled in (Go's
/// `html/template`), the URL made and the `Origin` header set only when KEDA fetches: a template
/// that does not fill, a filled-in URL that is not an http(s) URL with a host, or a `corsHeader`
/// HTTP does not allow fail each of its reads, not its parse. So here they leave the trigger
/// built, and every read fails with the error naming the parameter
/// ([`ActiveMqConfig::request`]); the object's other triggers keep scaling it (issue 29, row 3).
#[derive(Clone, Debug, PartialEq)]
pub struct ActiveMqConfig {
    /// `host:port` of the broker's web console (the host of `restAPITemplate` as written).
    pub management_endpoint: String,
    /// The queue.
    pub destination_name: String,
    /// The broker's name.
    pub broker_name: String,
    /// The URL, header and client of the reads, or why they cannot be made: each read fails
    /// with this error.
    pub request: Result<ActiveMqRequest, MetadataError>,
    /// Target per replica.
    pub target_queue_size: i64,
    /// Active iff the queue size is above this.
    pub activation_target_queue_size: i64,
    /// `s<i>-activemq-<destinationName>`, normalized.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
}

/// A usable filled-in URL and `Origin` header.
#[derive(Clone, Debug, PartialEq)]
pub struct ActiveMqRequest {
    /// The URL asked, the template filled in.
    pub url: url::Url,
    /// The `Origin` header sent.
    pub cors_header: HeaderValue,
    /// The pooled client's key: origin, basic credentials, timeout.
    pub client: HttpClientKey,
}

/// The `key=value` pairs of the object name in a Jolokia read URL's path: what follows the
/// first `:` up to the next `/` (`type=Broker,brokerName=b,...`), decoded, as KEDA reads them
/// with `url.ParseQuery` after turning `,` into `&`.
fn object_name_keys(path: &str) -> Option<BTreeMap<String, String>> {
    let decoded = percent_decode_str(path).decode_utf8().ok()?;
    let (_, after) = decoded.split_once(':')?;
    let names = after.split('/').next().unwrap_or_default();
    let mut keys = BTreeMap::new();
    for pair in names.split(',') {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        keys.entry(k.to_string()).or_insert_with(|| v.to_string());
    }
    Some(keys)
}

/// Fills the template's `{{.ManagementEndpoint}}`, `{{.BrokerName}}` and
/// `{{.DestinationName}}` (spaces inside the braces allowed, as in Go templates).
fn fill_template(
    p: &MetadataParser<'_>,
    template: &str,
    values: [(&str, &str); 3],
) -> Result<String, MetadataError> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find("}}").ok_or_else(|| {
            p.rule("parameter \"restAPITemplate\": a \"{{\" is not closed by \"}}\"")
        })?;
        let field = after[..end].trim();
        let value = values
            .iter()
            .find(|(name, _)| field.strip_prefix('.') == Some(*name))
            .map(|(_, v)| *v)
            .ok_or_else(|| {
                p.rule(format!(
                    "parameter \"restAPITemplate\": unknown placeholder \"{{{{{field}}}}}\"; use {{{{.ManagementEndpoint}}}}, {{{{.BrokerName}}}} or {{{{.DestinationName}}}}"
                ))
            })?;
        out.push_str(value);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

impl ActiveMqConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// Missing parameters, a `restAPITemplate` that is no URL or names no broker or
    /// destination, credentials missing, a size that is not an integer. A template that does not
    /// fill, a filled-in URL that cannot be asked or a `corsHeader` HTTP does not allow is no
    /// error here: it is kept in [`ActiveMqConfig::request`] for the reads.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let (template, management_endpoint, destination_name, broker_name) =
                match p.get_opt::<String>(&REST_API_TEMPLATE)? {
                    Some(template) => {
                        // Go's url.ParseRequestURI also takes an absolute path: KEDA builds
                        // with it and fails at each fetch (no host), as the filled-in URL does
                        // below.
                        let url = if template.starts_with('/') {
                            url::Url::parse("http://localhost")
                                .and_then(|base| base.join(&template))
                        } else {
                            url::Url::parse(&template)
                        }
                        .map_err(|e| {
                            p.rule(format!(
                                "parameter \"restAPITemplate\": unable to parse the URL ({e})"
                            ))
                        })?;
                        let keys = object_name_keys(url.path()).ok_or_else(|| {
                            p.rule(
                                "parameter \"restAPITemplate\": the path has no object name (org.apache.activemq:type=Broker,...)",
                            )
                        })?;
                        let key = |name: &str| {
                            keys.get(name).filter(|v| !v.is_empty()).cloned().ok_or_else(|| {
                                p.rule(format!(
                                    "parameter \"restAPITemplate\": no {name} is given in the object name"
                                ))
                            })
                        };
                        let destination = key("destinationName")?;
                        let broker = key("brokerName")?;
                        let endpoint = http_client::written_host(&template);
                        (template, endpoint, destination, broker)
                    }
                    None => (
                        DEFAULT_REST_API_TEMPLATE.to_string(),
                        p.get::<String>(&MANAGEMENT_ENDPOINT.require())?,
                        p.get::<String>(&DESTINATION_NAME.require())?,
                        p.get::<String>(&BROKER_NAME.require())?,
                    ),
                };
            let cors: Option<String> = p.get_opt(&CORS_HEADER)?;
            let username: String = p.get(&USERNAME)?;
            let password: Secret = p.get(&PASSWORD)?;
            let auth = HttpAuth {
                modes: vec![AuthMode::Basic],
                basic: Some((username, password)),
                ..HttpAuth::default()
            };
            // What KEDA does at each fetch (getMonitoringEndpoint, http.NewRequest, the
            // Origin header): its errors are kept for the reads.
            let request = (|| {
                let filled = fill_template(
                    p,
                    &template,
                    [
                        ("ManagementEndpoint", &management_endpoint),
                        ("BrokerName", &broker_name),
                        ("DestinationName", &destination_name),
                    ],
                )?;
                let url = url::Url::parse(&filled).map_err(|e| {
                    p.rule(format!(
                        "the URL made from \"restAPITemplate\" (or \"managementEndpoint\") is not valid ({e})"
                    ))
                })?;
                if !matches!(url.scheme(), "http" | "https")
                    || url.host_str().is_none_or(str::is_empty)
                {
                    return Err(p.rule(
                        "the URL made from \"restAPITemplate\" (or \"managementEndpoint\") must be http:// or https:// with a host",
                    ));
                }
                let cors = cors
                    .clone()
                    .unwrap_or_else(|| format!("http://{management_endpoint}"));
                let cors_header = HeaderValue::from_str(&cors).map_err(|_| {
                    p.rule("parameter \"corsHeader\" is not valid in an HTTP header")
                })?;
                Ok(ActiveMqRequest {
                    client: HttpClientKey {
                        origin: origin(&url),
                        auth,
                        timeout: ctx.global_http_timeout,
                    },
                    url,
                    cors_header,
                })
            })();
            Ok(Self {
                metric_name: ctx.metric_name(&format!("activemq-{destination_name}")),
                request,
                management_endpoint,
                destination_name,
                broker_name,
                target_queue_size: p.get(&TARGET_QUEUE_SIZE)?,
                activation_target_queue_size: p.get(&ACTIVATION_TARGET_QUEUE_SIZE)?,
                metric_type,
            })
        })?)
    }
}

/// Jolokia's answer to a read: the value and the request's own status (Jolokia answers HTTP
/// 200 with `"status": 404` for an MBean that does not exist).
#[derive(Debug, serde::Deserialize)]
struct Monitoring {
    #[serde(default)]
    value: Option<serde_json::Value>,
    #[serde(default)]
    status: i64,
    #[serde(default)]
    error: Option<String>,
}

/// An `activemq` trigger as an [`HttpApi`]: the parsed trigger and the headers of its reads.
pub struct ActiveMq {
    config: ActiveMqConfig,
    headers: HeaderMap,
}

impl ActiveMq {
    /// The parsed trigger.
    pub fn config(&self) -> &ActiveMqConfig {
        &self.config
    }
}

/// Why a Jolokia answer gives no queue size.
enum Unusable {
    /// Not the documented JSON.
    NotJson(String),
    /// Jolokia's own `status` is not 200 (its `error` text, the server's, for debug only).
    Status(i64, Option<String>),
    /// `value` is not an integer.
    NotAnInteger,
}

impl ActiveMq {
    /// The queue size in a Jolokia answer.
    fn queue_size(body: &[u8]) -> Result<i64, Unusable> {
        let answer: Monitoring = crate::remote::from_json(body).map_err(|e| {
            Unusable::NotJson(format!("the answer is {}", crate::remote::json_error(&e)))
        })?;
        if answer.status != 200 {
            return Err(Unusable::Status(answer.status, answer.error));
        }
        answer
            .value
            .as_ref()
            .and_then(serde_json::Value::as_i64)
            .ok_or(Unusable::NotAnInteger)
    }
}

#[async_trait]
impl HttpApi for ActiveMq {
    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let config = ActiveMqConfig::parse(ctx)?;
        let mut headers = HeaderMap::new();
        if let Ok(request) = &config.request {
            headers.insert(
                http::header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            headers.insert(http::header::ORIGIN, request.cors_header.clone());
        }
        Ok(Self { config, headers })
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
            metric_target(self.config.metric_type, self.config.target_queue_size),
        )]
    }

    /// The template's URL (a `GET`), or why it cannot be asked (naming the parameter).
    fn request(&self, _now: jiff::Timestamp) -> Result<ApiRequest<'_>, MetadataError> {
        let request = self.config.request.as_ref().map_err(Clone::clone)?;
        Ok(ApiRequest::get(request.url.clone(), &self.headers))
    }

    fn operation(&self, request: &ApiRequest<'_>) -> String {
        format!(
            "reading the size of queue \"{}\" of broker \"{}\" from {} (parameter \"managementEndpoint\")",
            self.config.destination_name,
            self.config.broker_name,
            describe_url(&request.url)
        )
    }

    fn read(&self, body: &[u8], metric_name: &str) -> Result<MetricsAndActivity, String> {
        let size = Self::queue_size(body).map_err(|unusable| match unusable {
            Unusable::NotJson(why) => why,
            Unusable::Status(status, _) => {
                format!("ActiveMQ management endpoint response error code: 200 {status}")
            }
            Unusable::NotAnInteger => "the answer's \"value\" is not an integer".into(),
        })?;
        Ok(MetricsAndActivity {
            values: vec![crate::MetricValue::new(metric_name, size as f64)],
            active: size > self.config.activation_target_queue_size,
        })
    }

    /// One Jolokia read; an unusable answer fails naming the read, Jolokia's own error text
    /// at debug level only.
    async fn fetch(
        &self,
        call: &HttpCall<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let request = self
            .request(call.read.now())
            .map_err(ScalerError::Metadata)?;
        let operation = self.operation(&request);
        let body = call.send(self, request).await?;
        let query = |source: Failure| ScalerError::Query {
            trigger: call.read.trigger.clone(),
            operation: operation.clone(),
            source,
        };
        match Self::queue_size(&body) {
            Ok(size) => Ok(MetricsAndActivity {
                values: vec![crate::MetricValue::new(metric_name, size as f64)],
                active: size > self.config.activation_target_queue_size,
            }),
            Err(Unusable::NotJson(why)) => Err(query(Failure::answer(why, &body))),
            Err(Unusable::Status(status, error)) => Err(query(Failure::new(
                crate::remote::Kind::Local(format!(
                    "ActiveMQ management endpoint response error code: 200 {status}; check \"destinationName\" and \"brokerName\""
                )),
                error,
            ))),
            Err(Unusable::NotAnInteger) => Err(call.read.unexpected(format!(
                "{operation}: the answer's \"value\" is not an integer"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::test_context;
    use crate::pooled::Pooled;
    use crate::scaler::Scaler;

    fn parse(metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> Result<ActiveMqConfig, String> {
        ActiveMqConfig::parse(&test_context("activemq", 2, metadata, &[], auth))
            .map_err(|e| e.to_string())
    }

    const CREDENTIALS: [(&str, &str); 2] = [("username", "admin"), ("password", "s3cret")];

    #[test]
    fn the_default_template_is_filled_and_defaults_follow_keda() {
        let c = parse(
            &[
                ("managementEndpoint", "activemq.mq:8161"),
                ("destinationName", "orders.eu"),
                ("brokerName", "localhost"),
            ],
            &CREDENTIALS,
        )
        .unwrap();
        let r = c.request.as_ref().expect("usable");
        assert_eq!(
            r.url.as_str(),
            "http://activemq.mq:8161/api/jolokia/read/org.apache.activemq:type=Broker,brokerName=localhost,destinationType=Queue,destinationName=orders.eu/QueueSize"
        );
        assert_eq!(r.cors_header, "http://activemq.mq:8161");
        assert_eq!(c.metric_name, "s2-activemq-orders-eu");
        assert_eq!(
            (c.target_queue_size, c.activation_target_queue_size),
            (10, 0)
        );
        assert_eq!(r.client.origin, "http://activemq.mq:8161");
    }

    #[test]
    fn a_rest_api_template_gives_endpoint_broker_and_destination() {
        let template = "https://mq.example:8443/api/jolokia/read/org.apache.activemq:type=Broker,brokerName=b1,destinationType=Queue,destinationName=jobs%20eu/QueueSize";
        let c = parse(
            &[
                ("restAPITemplate", template),
                ("corsHeader", "https://console"),
            ],
            &CREDENTIALS,
        )
        .unwrap();
        assert_eq!(
            (
                c.management_endpoint.as_str(),
                c.broker_name.as_str(),
                c.destination_name.as_str()
            ),
            ("mq.example:8443", "b1", "jobs eu")
        );
        let r = c.request.as_ref().expect("usable");
        assert_eq!(r.url.as_str(), template);
        assert_eq!(r.cors_header, "https://console");
        assert_eq!(c.metric_name, "s2-activemq-jobs eu");
    }

    #[test]
    fn credentials_are_looked_up_in_auth_then_env_then_metadata() {
        let ctx = test_context(
            "activemq",
            0,
            &[
                ("managementEndpoint", "m:8161"),
                ("destinationName", "q"),
                ("brokerName", "b"),
                ("username", "meta-user"),
                ("passwordFromEnv", "P"),
                ("password", "meta-pw"),
            ],
            &[("P", "env-pw")],
            &[("username", "auth-user")],
        );
        let c = ActiveMqConfig::parse(&ctx).unwrap();
        let (user, password) = c.request.unwrap().client.auth.basic.unwrap();
        assert_eq!((user.as_str(), password.expose()), ("auth-user", "env-pw"));
    }

    #[test]
    fn errors_name_the_trigger_and_the_parameter() {
        for (metadata, auth, expected) in [
            (
                vec![("destinationName", "q"), ("brokerName", "b")],
                CREDENTIALS.to_vec(),
                r#"trigger 2 (activemq): missing required parameter "managementEndpoint""#,
            ),
            (
                vec![("managementEndpoint", "m:8161"), ("brokerName", "b")],
                CREDENTIALS.to_vec(),
                r#"trigger 2 (activemq): missing required parameter "destinationName""#,
            ),
            (
                vec![("managementEndpoint", "m:8161"), ("destinationName", "q")],
                CREDENTIALS.to_vec(),
                r#"trigger 2 (activemq): missing required parameter "brokerName""#,
            ),
            (
                vec![
                    ("managementEndpoint", "m:8161"),
                    ("destinationName", "q"),
                    ("brokerName", "b"),
                ],
                vec![("password", "pw")],
                r#"trigger 2 (activemq): missing required parameter "username""#,
            ),
            (
                vec![
                    ("managementEndpoint", "m:8161"),
                    ("destinationName", "q"),
                    ("brokerName", "b"),
                ],
                vec![("username", "u")],
                r#"trigger 2 (activemq): missing required parameter "password""#,
            ),
            (
                vec![(
                    "restAPITemplate",
                    "http://m:8161/api/jolokia/read/org.apache.activemq:type=Broker,destinationName=q/QueueSize",
                )],
                CREDENTIALS.to_vec(),
                r#"trigger 2 (activemq): parameter "restAPITemplate": no brokerName is given in the object name"#,
            ),
            (
                vec![("restAPITemplate", "http://m:8161/api/jolokia/version")],
                CREDENTIALS.to_vec(),
                r#"trigger 2 (activemq): parameter "restAPITemplate": the path has no object name (org.apache.activemq:type=Broker,...)"#,
            ),
            (
                vec![("restAPITemplate", "not a url")],
                CREDENTIALS.to_vec(),
                r#"trigger 2 (activemq): parameter "restAPITemplate": unable to parse the URL (relative URL without a base)"#,
            ),
            (
                vec![
                    ("managementEndpoint", "m:8161"),
                    ("destinationName", "q"),
                    ("brokerName", "b"),
                    ("targetQueueSize", "1.5"),
                ],
                CREDENTIALS.to_vec(),
                r#"trigger 2 (activemq): parameter "targetQueueSize": "1.5" is not a valid integer"#,
            ),
        ] {
            assert_eq!(
                parse(&metadata, &auth).unwrap_err(),
                expected,
                "{metadata:?}"
            );
        }
    }

    /// The management endpoint KEDA derives from a `restAPITemplate` is its host as written
    /// (Go's `url.URL.Host`): the default `Origin` keeps a written default port.
    #[test]
    fn the_default_origin_is_the_template_host_as_written() {
        let c = parse(
            &[(
                "restAPITemplate",
                "http://admin:pw@mq:80/api/jolokia/read/org.apache.activemq:type=Broker,brokerName=b,destinationType=Queue,destinationName=q/QueueSize",
            )],
            &CREDENTIALS,
        )
        .unwrap();
        assert_eq!(c.management_endpoint, "mq:80");
        assert_eq!(c.request.unwrap().cors_header, "http://mq:80");
    }

    /// KEDA fills the template, makes the URL and sets the `Origin` header at each fetch
    /// (`getMonitoringEndpoint`, `http.NewRequest`, `client.Do`), not in
    /// `parseActiveMQMetadata`: so the trigger builds, its metric is in the HPA, and every read
    /// fails naming the parameter (issue 29, row 3).
    #[tokio::test]
    async fn a_bad_template_endpoint_or_cors_header_builds_and_fails_at_every_read_naming_it() {
        let base = [
            ("managementEndpoint", "m:8161"),
            ("destinationName", "q"),
            ("brokerName", "b"),
        ];
        let rows: &[(&[(&str, &str)], &str)] = &[
            (
                &[(
                    "restAPITemplate",
                    "http://m:1/read/a:brokerName=b,destinationName={{.Queue}}/QueueSize",
                )],
                r#"trigger 2 (activemq): parameter "restAPITemplate": unknown placeholder "{{.Queue}}"; use {{.ManagementEndpoint}}, {{.BrokerName}} or {{.DestinationName}}"#,
            ),
            (
                &[(
                    "restAPITemplate",
                    "http://m:1/read/a:brokerName=b,destinationName=q/{{.BrokerName",
                )],
                r#"trigger 2 (activemq): parameter "restAPITemplate": a "{{" is not closed by "}}""#,
            ),
            (
                &[(
                    "restAPITemplate",
                    "/api/jolokia/read/org.apache.activemq:type=Broker,brokerName=b,destinationType=Queue,destinationName=q/QueueSize",
                )],
                r#"trigger 2 (activemq): the URL made from "restAPITemplate" (or "managementEndpoint") is not valid (relative URL without a base)"#,
            ),
            (
                &[("managementEndpoint", "mq host:8161")],
                r#"trigger 2 (activemq): the URL made from "restAPITemplate" (or "managementEndpoint") is not valid (invalid international domain name)"#,
            ),
            (
                &[("managementEndpoint", "")],
                r#"trigger 2 (activemq): missing required parameter "managementEndpoint""#,
            ),
            (
                &[("corsHeader", "http://console\u{7f}")],
                r#"trigger 2 (activemq): parameter "corsHeader" is not valid in an HTTP header"#,
            ),
        ];
        for (i, (changes, expected)) in rows.iter().enumerate() {
            let mut metadata: BTreeMap<&str, &str> = base.iter().copied().collect();
            if changes.iter().any(|(k, _)| *k == "restAPITemplate") {
                metadata.clear();
            }
            metadata.extend(changes.iter().copied());
            let pairs: Vec<(&str, &str)> = metadata.into_iter().collect();
            let ctx = || test_context("activemq", 2, &pairs, &[], &CREDENTIALS);
            if expected.contains("missing required") {
                // A parse error in KEDA too: still refused at build.
                let err = Pooled::<ActiveMq>::build(&ctx())
                    .await
                    .err()
                    .expect("refused");
                assert_eq!(err.to_string(), *expected, "row {i}");
                continue;
            }
            let config = ActiveMqConfig::parse(&ctx()).expect("builds, as in KEDA");
            assert_eq!(
                config.request.as_ref().expect_err("unusable").to_string(),
                *expected,
                "row {i}"
            );
            let scaler = Pooled::<ActiveMq>::build(&ctx())
                .await
                .expect("builds, as in KEDA");
            assert_eq!(
                scaler.metric_specs().len(),
                1,
                "row {i}: the HPA gets the metric"
            );
            for _ in 0..2 {
                let err = scaler
                    .metrics_and_activity("s2-activemq-q")
                    .await
                    .expect_err("every read fails");
                assert_eq!(err.to_string(), *expected, "row {i}");
                assert!(!err.to_string().contains("s3cret"), "row {i}");
            }
            scaler.close().await;
        }
    }
}
