//! `ibmmq`: scales on the current depth of IBM MQ queues, read as KEDA's `ibmmq` trigger reads
//! it (`pkg/scalers/ibmmq_scaler.go`): for each queue, `POST <host>` (the queue manager's MQSC
//! endpoint of the administrative REST API, `https://<mqweb>:9443/ibmmq/rest/v2/admin/action/qmgr/<qm>/mqsc`)
//! with `{"type": "runCommandJSON", "command": "display", "qualifier": "qlocal", "name":
//! <queue>, "responseParameters": ["CURDEPTH"]}`, basic authentication and the
//! `ibm-mq-rest-csrf-token` header; the depths combined by `operation`.
//!
//! Every trigger on the same host with the same credentials, TLS settings and timeout shares
//! one HTTP client.

use std::borrow::Cow;

use bytes::Bytes;
use http::HeaderValue;
use http::header::{CONTENT_TYPE, HeaderMap};
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::authentication::{
    AuthMode, CA, CERT, HttpAuth, KEY, KEY_PASSWORD, client_certificate_tls,
};
use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError, Source};
use crate::http_client::{self, HttpClientKey, describe_url, parse_http_url};
use crate::metadata::Param;
use crate::metric::{MetricTargetType, external_metric_spec, metric_target};
use crate::pooled::{ApiRequest, HttpApi, HttpCall, Pooled};
use crate::scaler::MetricsAndActivity;
use crate::secret::Secret;

/// KEDA's `order=authParams;resolvedEnv;triggerMetadata`.
const AUTH_ENV_METADATA: &[Source] = &[Source::Auth, Source::Env, Source::Metadata];

const HOST: Param = Param::required("host");
const QUEUE_NAME: Param = Param::required("queueName").aliases(&["queueNames"]);
const QUEUE_DEPTH: Param = Param::optional("queueDepth").default("20");
const ACTIVATION_QUEUE_DEPTH: Param = Param::optional("activationQueueDepth").default("0");
const OPERATION: Param = Param::optional("operation")
    .default("max")
    .allowed(&["max", "avg", "sum"]);
const USERNAME: Param = Param::required("username").order(AUTH_ENV_METADATA);
const PASSWORD: Param = Param::required("password")
    .order(AUTH_ENV_METADATA)
    .secret();
const UNSAFE_SSL: Param = Param::optional("unsafeSsl").default("false");

/// The parameters of `ibmmq`, in KEDA's order.
pub const PARAMS: &[Param] = &[
    HOST,
    QUEUE_NAME,
    QUEUE_DEPTH,
    ACTIVATION_QUEUE_DEPTH,
    OPERATION,
    USERNAME,
    PASSWORD,
    UNSAFE_SSL,
    CA,
    CERT,
    KEY,
    KEY_PASSWORD,
];

/// How the queues' depths are combined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// The largest.
    Max,
    /// The mean, rounded down (KEDA's integer division).
    Avg,
    /// The sum.
    Sum,
}

impl Operation {
    /// KEDA's `calculateDepth`: `0` without depths.
    pub fn combine(self, depths: &[i64]) -> i64 {
        if depths.is_empty() {
            return 0;
        }
        let sum = depths.iter().fold(0i64, |a, d| a.saturating_add(*d));
        match self {
            Self::Max => depths.iter().copied().max().unwrap_or(0),
            Self::Sum => sum,
            Self::Avg => sum / i64::try_from(depths.len()).unwrap_or(i64::MAX),
        }
    }
}

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct IbmMqConfig {
    /// `host`: the MQSC endpoint.
    pub host: url::Url,
    /// `queueName` / `queueNames`.
    pub queues: Vec<String>,
    /// `queueDepth`.
    pub target: i64,
    /// `activationQueueDepth`.
    pub activation: i64,
    /// `operation`.
    pub operation: Operation,
    /// `s<index>-ibmmq-<first queue>`, normalized.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
    /// The host, basic authentication, TLS and timeout.
    pub key: HttpClientKey,
    headers: HeaderMap,
}

impl IbmMqConfig {
    /// Parses the trigger as KEDA's `parseIBMMQMetadata` and `Validate`.
    ///
    /// # Errors
    /// `host`, `queueName`, `username` or `password` missing; `host` not an http(s) URL; an
    /// `operation` other than `max`, `avg`, `sum`; `cert` without `key` or the reverse; a
    /// malformed number.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let host: String = p.get(&HOST)?;
            let queues: Vec<String> = p.get(&QUEUE_NAME)?;
            let target: i64 = p.get(&QUEUE_DEPTH)?;
            let activation: i64 = p.get(&ACTIVATION_QUEUE_DEPTH)?;
            let operation = match p.get::<String>(&OPERATION)?.as_str() {
                "avg" => Operation::Avg,
                "sum" => Operation::Sum,
                _ => Operation::Max,
            };
            let username: String = p.get(&USERNAME)?;
            let password: Secret = p.get(&PASSWORD)?;
            let tls = client_certificate_tls(p, &UNSAFE_SSL)?;
            let host = parse_http_url(p, &HOST, host.trim())?;
            let Some(first) = queues.first() else {
                return Err(p.rule("parameter \"queueName\" names no queue"));
            };
            let metric_name = ctx.metric_name(&format!("ibmmq-{first}"));
            let key = HttpClientKey {
                origin: http_client::origin(&host),
                auth: HttpAuth {
                    modes: vec![AuthMode::Basic],
                    basic: Some((username, password)),
                    tls,
                    ..HttpAuth::default()
                },
                timeout: ctx.global_http_timeout,
            };
            let mut headers = HeaderMap::new();
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            // Any value: the header's presence is the CSRF protection.
            headers.insert("ibm-mq-rest-csrf-token", HeaderValue::from_static("value"));
            Ok(Self {
                host,
                queues,
                target,
                activation,
                operation,
                metric_name,
                metric_type,
                key,
                headers,
            })
        })?)
    }

    /// The MQSC command of `queue`, as KEDA sends it (the name JSON-escaped).
    pub fn command(queue: &str) -> String {
        serde_json::json!({
            "type": "runCommandJSON",
            "command": "display",
            "qualifier": "qlocal",
            "name": queue,
            "responseParameters": ["CURDEPTH"],
        })
        .to_string()
    }
}

/// The `CURDEPTH` of a `runCommandJSON` answer (`{"commandResponse": [{"completionCode": 0,
/// "reasonCode": 0, "parameters": {"curdepth": 3, "queue": "Q"}}], ...}`), as KEDA reads it.
///
/// # Errors
/// Not that shape; the command failed (`message` given: the completion and reason codes are
/// shown, never MQ's text); no `parameters`.
pub fn current_depth(body: &[u8]) -> Result<i64, String> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Answer {
        #[serde(default)]
        command_response: Vec<Response>,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Response {
        #[serde(default)]
        completion_code: Option<i64>,
        #[serde(default)]
        reason_code: Option<i64>,
        #[serde(default)]
        parameters: Option<Parameters>,
        #[serde(default)]
        message: Option<Vec<serde_json::Value>>,
    }
    #[derive(serde::Deserialize)]
    struct Parameters {
        curdepth: i64,
    }
    let answer: Answer = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the IBM MQ answer is not an MQSC command response: {}",
            crate::remote::json_error(&e)
        )
    })?;
    let Some(first) = answer.command_response.into_iter().next() else {
        return Err("the IBM MQ answer has no command response".into());
    };
    if first.message.is_some_and(|m| !m.is_empty()) {
        let code = |c: Option<i64>| c.map_or_else(|| "none".to_string(), |c| c.to_string());
        return Err(format!(
            "the queue manager refused the command (completion code {}, reason code {})",
            code(first.completion_code),
            code(first.reason_code)
        ));
    }
    let depth = first
        .parameters
        .ok_or("the IBM MQ answer has no current queue depth")?
        .curdepth;
    if depth < 0 {
        return Err("the IBM MQ answer's current queue depth is negative".into());
    }
    Ok(depth)
}

/// An `ibmmq` scaler.
pub type IbmMqScaler = Pooled<IbmMqConfig>;

#[async_trait::async_trait]
impl HttpApi for IbmMqConfig {
    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        IbmMqConfig::parse(ctx)
    }

    fn client_key(&self) -> Result<HttpClientKey, MetadataError> {
        Ok(self.key.clone())
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target(self.metric_type, self.target),
        )]
    }

    /// The first queue's request (reads send one per queue, see `fetch`).
    fn request(&self, _now: jiff::Timestamp) -> Result<ApiRequest<'_>, MetadataError> {
        let queue = self.queues.first().map_or("", String::as_str);
        Ok(self.queue_request(queue))
    }

    fn operation(&self, request: &ApiRequest<'_>) -> String {
        let queue = request
            .body
            .as_ref()
            .and_then(|b| crate::remote::from_json::<serde_json::Value>(b).ok())
            .and_then(|v| v["name"].as_str().map(str::to_string))
            .unwrap_or_default();
        format!(
            "IBM MQ DISPLAY QLOCAL({queue}) CURDEPTH on {}",
            describe_url(&request.url)
        )
    }

    fn read(&self, body: &[u8], metric_name: &str) -> Result<MetricsAndActivity, String> {
        let depth = current_depth(body)?;
        Ok(self.report(metric_name, depth))
    }

    /// KEDA's `getQueueDepthViaHTTP`: one command per queue, in order; the first failure fails
    /// the read.
    async fn fetch(
        &self,
        call: &HttpCall<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let mut depths = Vec::with_capacity(self.queues.len());
        for queue in &self.queues {
            let body = call.send(self, self.queue_request(queue)).await?;
            let depth = current_depth(&body)
                .map_err(|why| call.read.unexpected(format!("queue {queue}: {why}")))?;
            depths.push(depth);
        }
        Ok(self.report(metric_name, self.operation.combine(&depths)))
    }
}

impl IbmMqConfig {
    fn queue_request(&self, queue: &str) -> ApiRequest<'_> {
        ApiRequest::post(
            self.host.clone(),
            Cow::Borrowed(&self.headers),
            Bytes::from(Self::command(queue)),
        )
    }

    fn report(&self, metric_name: &str, depth: i64) -> MetricsAndActivity {
        #[allow(clippy::cast_precision_loss)]
        let (value, activation) = (depth as f64, self.activation as f64);
        MetricsAndActivity::single(metric_name, value, activation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::test_context;

    const HOST_URL: &str = "https://mq.example:9443/ibmmq/rest/v2/admin/action/qmgr/QM1/mqsc";

    fn parse(metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> Result<IbmMqConfig, String> {
        IbmMqConfig::parse(&test_context("ibmmq", 0, metadata, &[], auth))
            .map_err(|e| e.to_string())
    }

    const AUTH: &[(&str, &str)] = &[("username", "admin"), ("password", "passw0rd")];

    /// KEDA's `testIBMMQMetadata` cases.
    #[test]
    fn parameters_follow_keda() {
        let c = parse(&[("host", HOST_URL), ("queueName", "DEV.QUEUE.1")], AUTH).unwrap();
        assert_eq!(
            (c.target, c.activation, c.operation),
            (20, 0, Operation::Max)
        );
        assert_eq!(c.metric_name, "s0-ibmmq-DEV-QUEUE-1");
        let c = parse(
            &[
                ("host", HOST_URL),
                ("queueNames", "A, B"),
                ("queueDepth", "10"),
                ("operation", "sum"),
            ],
            AUTH,
        )
        .unwrap();
        assert_eq!(c.queues, ["A", "B"]);
        assert_eq!((c.target, c.operation), (10, Operation::Sum));
        // username and password from the metadata, as KEDA's last source.
        assert!(
            parse(
                &[
                    ("host", HOST_URL),
                    ("queueName", "Q"),
                    ("username", "u"),
                    ("password", "p")
                ],
                &[]
            )
            .is_ok()
        );
        let err = |m: &[(&str, &str)], a: &[(&str, &str)]| parse(m, a).unwrap_err();
        assert!(err(&[("queueName", "Q")], AUTH).contains("\"host\""));
        assert!(err(&[("host", HOST_URL)], AUTH).contains("\"queueName\""));
        assert!(err(&[("host", "not a url"), ("queueName", "Q")], AUTH).contains("\"host\""));
        assert!(
            err(
                &[("host", HOST_URL), ("queueName", "Q"), ("operation", "min")],
                AUTH
            )
            .contains("operation")
        );
        assert!(
            err(&[("host", HOST_URL), ("queueName", "Q")], &AUTH[..1]).contains("\"password\"")
        );
        let mut half = AUTH.to_vec();
        half.push(("cert", "-----BEGIN CERTIFICATE-----"));
        assert!(err(&[("host", HOST_URL), ("queueName", "Q")], &half).contains("\"key\""));
    }

    #[test]
    fn the_command_is_keda_s_with_the_name_escaped() {
        assert_eq!(
            IbmMqConfig::command("DEV.\"Q\""),
            r#"{"command":"display","name":"DEV.\"Q\"","qualifier":"qlocal","responseParameters":["CURDEPTH"],"type":"runCommandJSON"}"#
        );
    }

    #[test]
    fn depths_and_operations() {
        let ok = br#"{"commandResponse":[{"completionCode":0,"reasonCode":0,"parameters":{"curdepth":7,"queue":"DEV.QUEUE.1"}}],"overallCompletionCode":0,"overallReasonCode":0}"#;
        assert_eq!(current_depth(ok), Ok(7));
        let refused = br#"{"commandResponse":[{"completionCode":2,"reasonCode":2085,"message":["AMQ8147E: IBM MQ object SECRETSECRET not found."]}],"overallCompletionCode":2,"overallReasonCode":3008}"#;
        let e = current_depth(refused).unwrap_err();
        assert!(e.contains("2085") && !e.contains("SECRETSECRET"), "{e}");
        assert!(current_depth(br#"{"commandResponse":[]}"#).is_err());
        assert!(current_depth(br#"{"commandResponse":[{"completionCode":0}]}"#).is_err());
        assert!(
            current_depth(b"SECRETSECRET")
                .unwrap_err()
                .find("SECRET")
                .is_none()
        );
        assert_eq!(Operation::Max.combine(&[1, 5, 3]), 5);
        assert_eq!(Operation::Sum.combine(&[1, 5, 3]), 9);
        assert_eq!(Operation::Avg.combine(&[1, 5, 3]), 3);
        assert_eq!(Operation::Avg.combine(&[1, 2]), 1);
        assert_eq!(Operation::Max.combine(&[]), 0);
    }
}
