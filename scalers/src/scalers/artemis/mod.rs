//! `artemis-queue`: scales on the message count of an ActiveMQ Artemis queue, read through the
//! broker's Jolokia REST API (`GET .../jolokia/read/org.apache.activemq.artemis:broker=...,
//! queue=.../MessageCount`). Compatible with KEDA's `artemis-queue` trigger
//! (`pkg/scalers/artemis_scaler.go`).
//!
//! Every trigger on the same console with the same credentials, TLS settings and timeout
//! shares one HTTP client.

use std::collections::BTreeMap;

use http::HeaderValue;
use http::header::{HeaderMap, ORIGIN};
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::authentication::{
    AuthMode, CA, CERT, HttpAuth, KEY, KEY_PASSWORD, client_certificate_tls,
};
use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError, Source};
use crate::http_client::{self, HttpClientKey, describe_url};
use crate::metadata::Param;
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pooled::{ApiRequest, HttpApi, Pooled};
use crate::scaler::MetricsAndActivity;
use crate::secret::Secret;

const AUTH_METADATA_ENV: &[Source] = &[Source::Auth, Source::Metadata, Source::Env];

const MANAGEMENT_ENDPOINT: Param = Param::optional("managementEndpoint");
const QUEUE_NAME: Param = Param::optional("queueName");
const BROKER_NAME: Param = Param::optional("brokerName");
const BROKER_ADDRESS: Param = Param::optional("brokerAddress");
const USERNAME: Param = Param::required("username").order(AUTH_METADATA_ENV);
const PASSWORD: Param = Param::required("password")
    .order(AUTH_METADATA_ENV)
    .secret();
const REST_API_TEMPLATE: Param = Param::optional("restApiTemplate");
const QUEUE_LENGTH: Param = Param::optional("queueLength").default("10");
const ACTIVATION_QUEUE_LENGTH: Param = Param::optional("activationQueueLength").default("10");
const CORS_HEADER: Param = Param::optional("corsHeader");
const UNSAFE_SSL: Param = Param::optional("unsafeSsl").default("false");

/// The parameters of `artemis-queue`.
pub const PARAMS: &[Param] = &[
    MANAGEMENT_ENDPOINT,
    QUEUE_NAME,
    BROKER_NAME,
    BROKER_ADDRESS,
    USERNAME,
    PASSWORD,
    REST_API_TEMPLATE,
    QUEUE_LENGTH,
    ACTIVATION_QUEUE_LENGTH,
    CORS_HEADER,
    UNSAFE_SSL,
    CA,
    CERT,
    KEY,
    KEY_PASSWORD,
];

/// KEDA's default `restApiTemplate`.
pub const DEFAULT_REST_API_TEMPLATE: &str = "http://<<managementEndpoint>>/console/jolokia/read/org.apache.activemq.artemis:broker=\"<<brokerName>>\",component=addresses,address=\"<<brokerAddress>>\",subcomponent=queues,routing-type=\"anycast\",queue=\"<<queueName>>\"/MessageCount";

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct ArtemisConfig {
    /// The Jolokia read URL and the client key, or why it cannot be asked.
    pub request: Result<(url::Url, HttpClientKey), MetadataError>,
    /// `queueName` (from `restApiTemplate` when given, quotes included, as KEDA takes it).
    pub queue_name: String,
    /// `brokerName`.
    pub broker_name: String,
    /// `brokerAddress`.
    pub broker_address: String,
    /// `managementEndpoint` (the template's host when a template is given).
    pub management_endpoint: String,
    /// The target per replica.
    pub queue_length: i64,
    /// Active iff the count is above this.
    pub activation: i64,
    /// `s<index>-artemis-<queueName>`, normalized.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
    headers: HeaderMap,
}

/// KEDA's `getAPIParameters`: the object name's keys in the template's path as written (what
/// follows the first `:` up to the next `/`, `,` read as `&`, `""` removed), decoded as a
/// query; the first value of each key.
fn template_keys(template: &str) -> Option<BTreeMap<String, String>> {
    let (_, rest) = template.split_once("://")?;
    let path_start = rest.find('/')?;
    let path = rest[path_start..]
        .split(['?', '#'])
        .next()
        .unwrap_or_default();
    let (_, after) = path.split_once(':')?;
    let names = after.split('/').next().unwrap_or_default();
    let names = names.replace(',', "&").replace("\"\"", "");
    let mut keys = BTreeMap::new();
    for (k, v) in url::form_urlencoded::parse(names.as_bytes()) {
        keys.entry(k.into_owned()).or_insert_with(|| v.into_owned());
    }
    Some(keys)
}

impl ArtemisConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// Without `restApiTemplate`: `managementEndpoint`, `queueName`, `brokerName` or
    /// `brokerAddress` missing; with it: no URL, or no broker, address or queue in its object
    /// name. Credentials missing, `cert` without `key`, a malformed number.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let template: Option<String> = p.get_opt(&REST_API_TEMPLATE)?;
            let (template, management_endpoint, queue_name, broker_name, broker_address) =
                match template {
                    Some(template) => {
                        let bad = |what: &str| {
                            p.rule(format!(
                                "parameter \"{}\": {what}",
                                REST_API_TEMPLATE.name
                            ))
                        };
                        if url::Url::parse(&template).is_err() {
                            return Err(bad("unable to parse the URL"));
                        }
                        let keys = template_keys(&template)
                            .ok_or_else(|| bad("the path has no object name (org.apache.activemq.artemis:broker=...)"))?;
                        let key = |name: &str, param: &str| {
                            keys.get(name).filter(|v| !v.is_empty()).cloned().ok_or_else(|| {
                                bad(&format!("no {param} is given (\"{name}\" in the object name)"))
                            })
                        };
                        let address = key("address", "brokerAddress")?;
                        let queue = key("queue", "queueName")?;
                        let broker = key("broker", "brokerName")?;
                        let endpoint = http_client::written_host(&template);
                        (template, endpoint, queue, broker, address)
                    }
                    None => (
                        DEFAULT_REST_API_TEMPLATE.to_string(),
                        p.get::<String>(&MANAGEMENT_ENDPOINT.require())?,
                        p.get::<String>(&QUEUE_NAME.require())?,
                        p.get::<String>(&BROKER_NAME.require())?,
                        p.get::<String>(&BROKER_ADDRESS.require())?,
                    ),
                };
            let username: String = p.get(&USERNAME)?;
            let password: Secret = p.get(&PASSWORD)?;
            let cors: String = p
                .get_opt(&CORS_HEADER)?
                .unwrap_or_else(|| format!("http://{management_endpoint}"));
            let tls = client_certificate_tls(p, &UNSAFE_SSL)?;
            let auth = HttpAuth {
                modes: vec![AuthMode::Basic],
                basic: Some((username, password)),
                tls,
                ..HttpAuth::default()
            };
            let mut headers = HeaderMap::new();
            let request = (|| {
                let filled = template
                    .replace("<<managementEndpoint>>", &management_endpoint)
                    .replace("<<queueName>>", &queue_name)
                    .replace("<<brokerName>>", &broker_name)
                    .replace("<<brokerAddress>>", &broker_address);
                let url = url::Url::parse(&filled)
                    .ok()
                    .filter(|u| {
                        matches!(u.scheme(), "http" | "https")
                            && u.host_str().is_some_and(|h| !h.is_empty())
                    })
                    .ok_or_else(|| {
                        p.rule(
                            "the URL made from \"restApiTemplate\" (or \"managementEndpoint\") is not an http(s) URL with a host",
                        )
                    })?;
                let cors = HeaderValue::from_str(&cors)
                    .map_err(|_| p.rule("parameter \"corsHeader\" is not valid in an HTTP header"))?;
                headers.insert(ORIGIN, cors);
                let key = HttpClientKey {
                    origin: http_client::origin(&url),
                    auth,
                    timeout: ctx.global_http_timeout,
                };
                Ok((url, key))
            })();
            Ok(Self {
                request,
                metric_name: ctx.metric_name(&format!("artemis-{queue_name}")),
                queue_name,
                broker_name,
                broker_address,
                management_endpoint,
                queue_length: p.get(&QUEUE_LENGTH)?,
                activation: p.get(&ACTIVATION_QUEUE_LENGTH)?,
                metric_type,
                headers,
            })
        })?)
    }
}

/// The message count of a Jolokia read answer (`{"request":{...},"value":N,"timestamp":T,
/// "status":200}`): Jolokia answers HTTP 200 with its own `status` (404 for a queue that does
/// not exist), and only 200 is a count, as in KEDA.
///
/// # Errors
/// Not a JSON object, `status` not 200 (the code is named, never Jolokia's text), or `value`
/// not an integer. Messages never quote the answer.
pub fn message_count(body: &[u8]) -> Result<i64, String> {
    #[derive(serde::Deserialize)]
    struct Answer {
        #[serde(default)]
        value: Option<serde_json::Value>,
        #[serde(default)]
        status: i64,
    }
    let answer: Answer = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the Jolokia answer is not a read response: {}",
            crate::remote::json_error(&e)
        )
    })?;
    if answer.status != 200 {
        return Err(format!(
            "artemis management endpoint response error code: 200 {}",
            answer.status
        ));
    }
    match answer.value {
        None => Ok(0),
        Some(serde_json::Value::Number(n)) => n
            .as_i64()
            .ok_or_else(|| "the Jolokia value is not an integer message count".to_string()),
        Some(_) => Err("the Jolokia value is not an integer message count".into()),
    }
}

/// An `artemis-queue` scaler.
pub type ArtemisScaler = Pooled<ArtemisConfig>;

impl HttpApi for ArtemisConfig {
    /// A self-hosted server: polled sooner after a sign of activity.
    const ADAPTIVE_POLLING: bool = true;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        ArtemisConfig::parse(ctx)
    }

    fn client_key(&self) -> Result<HttpClientKey, MetadataError> {
        self.request
            .as_ref()
            .map(|(_, key)| key.clone())
            .map_err(Clone::clone)
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        #[allow(clippy::cast_precision_loss)]
        let target = self.queue_length as f64;
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target_milli(self.metric_type, target),
        )]
    }

    fn request(&self, _now: jiff::Timestamp) -> Result<ApiRequest<'_>, MetadataError> {
        let (url, _) = self.request.as_ref().map_err(Clone::clone)?;
        Ok(ApiRequest::get(url.clone(), &self.headers))
    }

    fn operation(&self, request: &ApiRequest<'_>) -> String {
        format!(
            "Artemis message count of queue {} on broker {} at {}",
            self.queue_name,
            self.broker_name,
            describe_url(&request.url)
        )
    }

    fn read(&self, body: &[u8], metric_name: &str) -> Result<MetricsAndActivity, String> {
        let count = message_count(body)?;
        #[allow(clippy::cast_precision_loss)]
        let (value, activation) = (count as f64, self.activation as f64);
        Ok(MetricsAndActivity::single(metric_name, value, activation))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::test_context;

    fn parse(metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> Result<ArtemisConfig, String> {
        ArtemisConfig::parse(&test_context("artemis-queue", 0, metadata, &[], auth))
            .map_err(|e| e.to_string())
    }

    const CREDS: &[(&str, &str)] = &[("username", "myUserName"), ("password", "myPassword")];
    const META: &[(&str, &str)] = &[
        ("managementEndpoint", "localhost:8161"),
        ("queueName", "queue1"),
        ("brokerName", "broker-activemq"),
        ("brokerAddress", "test"),
    ];

    /// KEDA's `testArtemisMetadata` (`pkg/scalers/artemis_scaler_test.go`).
    #[test]
    fn keda_s_metadata_cases() {
        let config = parse(META, CREDS).unwrap();
        let (url, key) = config.request.as_ref().unwrap();
        assert_eq!(
            url.as_str(),
            "http://localhost:8161/console/jolokia/read/org.apache.activemq.artemis:broker=%22broker-activemq%22,component=addresses,address=%22test%22,subcomponent=queues,routing-type=%22anycast%22,queue=%22queue1%22/MessageCount"
        );
        assert_eq!(key.auth.modes, vec![AuthMode::Basic]);
        assert_eq!(config.metric_name, "s0-artemis-queue1");
        assert_eq!((config.queue_length, config.activation), (10, 10));
        assert_eq!(config.headers[ORIGIN], "http://localhost:8161");
        for (i, missing) in [
            "managementEndpoint",
            "queueName",
            "brokerName",
            "brokerAddress",
        ]
        .iter()
        .enumerate()
        {
            let mut metadata = META.to_vec();
            metadata.remove(i);
            let err = parse(&metadata, CREDS).unwrap_err();
            assert!(err.contains(&format!("\"{missing}\"")), "{err}");
        }
        for (i, missing) in ["username", "password"].iter().enumerate() {
            let mut creds = CREDS.to_vec();
            creds.remove(i);
            let err = parse(META, &creds).unwrap_err();
            assert!(err.contains(&format!("\"{missing}\"")), "{err}");
        }
        let template = "https://localhost:8443/console/jolokia/read/org.apache.activemq.artemis:broker=\"broker-activemq\",component=addresses,address=\"test\",subcomponent=queues,routing-type=\"anycast\",queue=\"queue1\"/MessageCount";
        let config = parse(
            &[("restApiTemplate", template), ("unsafeSsl", "true")],
            CREDS,
        )
        .unwrap();
        assert_eq!(config.queue_name, "\"queue1\"");
        assert_eq!(config.broker_name, "\"broker-activemq\"");
        assert_eq!(config.management_endpoint, "localhost:8443");
        assert_eq!(config.metric_name, "s0-artemis-\"queue1\"");
        let (url, key) = config.request.as_ref().unwrap();
        assert!(key.auth.tls.insecure);
        assert_eq!(url.host_str(), Some("localhost"));
        let empty_broker = template.replace("broker=\"broker-activemq\"", "broker=\"\"");
        let err = parse(&[("restApiTemplate", &empty_broker)], CREDS).unwrap_err();
        assert!(
            err.contains("\"restApiTemplate\"") && err.contains("brokerName"),
            "{err}"
        );
        let err = parse(&[("restApiTemplate", "not a url")], CREDS).unwrap_err();
        assert!(err.contains("\"restApiTemplate\""), "{err}");
        let err = parse(META, &[CREDS[0], CREDS[1], ("cert", "C")]).unwrap_err();
        assert!(err.contains("\"cert\""), "{err}");
        let mut bad = META.to_vec();
        bad.push(("queueLength", "ten"));
        let err = parse(&bad, CREDS).unwrap_err();
        assert!(err.contains("\"queueLength\""), "{err}");
        // Credentials: the TriggerAuthentication before the metadata.
        let mut with_creds = META.to_vec();
        with_creds.extend([("username", "m"), ("password", "mp")]);
        let config = parse(&with_creds, &[("username", "a")]).unwrap();
        let (_, key) = config.request.unwrap();
        assert_eq!(key.auth.basic.map(|(u, _)| u), Some("a".to_string()));
    }

    #[test]
    fn the_count_is_jolokia_s_value_when_its_status_is_200() {
        assert_eq!(
            message_count(br#"{"request":{"mbean":"org.apache.activemq.artemis:broker=\"b\"","attribute":"MessageCount","type":"read"},"value":42,"timestamp":1700000000,"status":200}"#),
            Ok(42)
        );
        let err = message_count(br#"{"request":{"type":"read"},"error_type":"javax.management.InstanceNotFoundException","error":"SECRETSECRET","status":404}"#).unwrap_err();
        assert!(
            err.contains("404") && !err.contains("SECRETSECRET"),
            "{err}"
        );
        for garbage in [
            "",
            "SECRETSECRET",
            r#"{"value":"SECRETSECRET","status":200}"#,
            r#"{"value":1.5,"status":200}"#,
        ] {
            let err = message_count(garbage.as_bytes()).unwrap_err();
            assert!(!err.contains("SECRETSECRET"), "{err}");
        }
    }
}
