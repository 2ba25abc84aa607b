//! `pulsar`: scales on the message backlog of an Apache Pulsar subscription, read from the
//! admin REST API (`GET <adminURL>/admin/v2/persistent/<topic>/stats` or `/partitioned-stats`).
//! Compatible with KEDA's `pulsar` trigger (`pkg/scalers/pulsar_scaler.go`).
//!
//! Every trigger on the same admin server with the same credentials, TLS settings and timeout
//! shares one HTTP client.

use http::HeaderValue;
use http::header::{HeaderMap, HeaderName};
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::authentication::{
    AUTH_MODES, AuthMode, BEARER_TOKEN, CA, CERT, HttpAuth, KEY, PASSWORD, USERNAME,
};
use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError, Source};
use crate::http_client::{self, HttpClientKey, describe_url};
use crate::metadata::Param;
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pooled::{ApiRequest, HttpApi, Pooled};
use crate::scaler::MetricsAndActivity;

const METADATA_ENV: &[Source] = &[Source::Metadata, Source::Env];

const ADMIN_URL: Param = Param::required("adminURL").order(METADATA_ENV);
const TOPIC: Param = Param::required("topic").order(METADATA_ENV);
const SUBSCRIPTION: Param = Param::required("subscription").order(METADATA_ENV);
const MSG_BACKLOG_THRESHOLD: Param = Param::optional("msgBacklogThreshold").default("10");
const ACTIVATION_MSG_BACKLOG_THRESHOLD: Param =
    Param::optional("activationMsgBacklogThreshold").default("0");
const IS_PARTITIONED_TOPIC: Param = Param::optional("isPartitionedTopic").default("false");
const TLS: Param = Param::optional("tls");

/// The parameters of `pulsar`.
pub const PARAMS: &[Param] = &[
    ADMIN_URL,
    TOPIC,
    SUBSCRIPTION,
    MSG_BACKLOG_THRESHOLD,
    ACTIVATION_MSG_BACKLOG_THRESHOLD,
    IS_PARTITIONED_TOPIC,
    TLS,
    AUTH_MODES,
    USERNAME,
    PASSWORD,
    BEARER_TOKEN,
    CERT,
    KEY,
    CA,
];

/// The header that tells Pulsar which authentication provider to use.
pub const AUTH_METHOD_HEADER: &str = "X-Pulsar-Auth-Method-Name";

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct PulsarConfig {
    /// The stats URL and the client key, or why `adminURL` cannot be used.
    pub endpoint: Result<(url::Url, HttpClientKey), MetadataError>,
    /// `topic` as written.
    pub topic: String,
    /// `subscription`.
    pub subscription: String,
    /// The target per replica (always an AverageValue, as in KEDA).
    pub msg_backlog_threshold: i64,
    /// Active iff the backlog is above this.
    pub activation: i64,
    /// `s<index>-pulsar-<topic>-<subscription>`, normalized.
    pub metric_name: String,
    headers: HeaderMap,
}

/// `<adminURL>/admin/v2/persistent/<topic without persistent://>/stats` (or
/// `/partitioned-stats`), pasted together as KEDA does.
pub fn stats_url(admin_url: &str, topic: &str, partitioned: bool) -> String {
    let topic = topic.replace("persistent://", "");
    let stats = if partitioned {
        "partitioned-stats"
    } else {
        "stats"
    };
    format!("{admin_url}/admin/v2/persistent/{topic}/{stats}")
}

impl PulsarConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// `adminURL`, `topic` or `subscription` missing, a malformed number or boolean, or the
    /// authentication block incomplete (`authModes` `oauth` is not supported: refused naming
    /// it).
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        // KEDA's backwards compatibility: `tls: enable` with a client certificate or key in the
        // TriggerAuthentication adds the `tls` mode.
        let mut ctx = ctx.clone();
        let has_client = ["cert", "key"].iter().any(|k| {
            ctx.auth_params
                .get(*k)
                .is_some_and(|v| !v.expose().is_empty())
        });
        if ctx.metadata.get("tls").map(String::as_str) == Some("enable") && has_client {
            let modes = match ctx.metadata.get("authModes") {
                Some(modes) => format!("{modes},tls"),
                None => "tls".to_string(),
            };
            ctx.metadata.insert("authModes".into(), modes);
        }
        let ctx = &ctx;
        Ok(ctx.parse(|p| {
            let admin_url: String = p.get(&ADMIN_URL)?;
            let topic: String = p.get(&TOPIC)?;
            let subscription: String = p.get(&SUBSCRIPTION)?;
            let msg_backlog_threshold: i64 = p.get(&MSG_BACKLOG_THRESHOLD)?;
            let activation: i64 = p.get(&ACTIVATION_MSG_BACKLOG_THRESHOLD)?;
            let partitioned: bool = p.get(&IS_PARTITIONED_TOPIC)?;
            let _: Option<String> = p.get_opt(&TLS)?;
            let mut auth = HttpAuth::parse(p, false)?;
            // KEDA's Pulsar requests carry only basic, bearer and the client certificate.
            auth.custom = None;
            auth.api_key = None;
            auth.modes
                .retain(|m| matches!(m, AuthMode::Basic | AuthMode::Bearer | AuthMode::Tls));
            let method = if auth.bearer.is_some() {
                Some("token")
            } else if auth.basic.is_some() {
                Some("basic")
            } else if auth.modes.contains(&AuthMode::Tls) {
                Some("tls")
            } else {
                None
            };
            let mut headers = HeaderMap::new();
            if let Some(method) = method {
                headers.insert(
                    HeaderName::from_static("x-pulsar-auth-method-name"),
                    HeaderValue::from_static(method),
                );
            }
            let written = stats_url(&admin_url, &topic, partitioned);
            let endpoint = url::Url::parse(&written)
                .ok()
                .filter(|u| {
                    matches!(u.scheme(), "http" | "https")
                        && u.host_str().is_some_and(|h| !h.is_empty())
                })
                .ok_or_else(|| {
                    p.rule(format!(
                        "parameter \"{}\" does not make an http(s) stats URL with topic \"{}\"",
                        ADMIN_URL.name, TOPIC.name
                    ))
                })
                .map(|url| {
                    let key = HttpClientKey {
                        origin: http_client::origin(&url),
                        auth,
                        timeout: ctx.global_http_timeout,
                    };
                    (url, key)
                });
            Ok(Self {
                endpoint,
                metric_name: ctx.metric_name(&format!("pulsar-{topic}-{subscription}")),
                topic,
                subscription,
                msg_backlog_threshold,
                activation,
                headers,
            })
        })?)
    }
}

/// The `msgBacklog` of `subscription` in a topic stats answer (`TopicStats` or
/// `PartitionedTopicStats`: `{"msgRateIn":...,"subscriptions":{"<name>":{"msgBacklog":N,
/// ...}},...}`); `None` when the topic has no such subscription.
///
/// # Errors
/// Not the documented shape. Messages never quote the answer.
pub fn msg_backlog(body: &[u8], subscription: &str) -> Result<Option<i64>, String> {
    #[derive(serde::Deserialize)]
    struct Stats {
        #[serde(default)]
        subscriptions: Option<std::collections::HashMap<String, Subscription>>,
    }
    #[derive(serde::Deserialize)]
    struct Subscription {
        #[serde(default, rename = "msgBacklog")]
        msg_backlog: i64,
    }
    let stats: Option<Stats> = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the Pulsar answer is not topic stats: {}",
            crate::remote::json_error(&e)
        )
    })?;
    Ok(stats
        .and_then(|s| s.subscriptions)
        .and_then(|mut s| s.remove(subscription))
        .map(|s| s.msg_backlog))
}

/// A `pulsar` scaler.
pub type PulsarScaler = Pooled<PulsarConfig>;

impl HttpApi for PulsarConfig {
    /// A self-hosted server: polled sooner after a sign of activity.
    const ADAPTIVE_POLLING: bool = true;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        PulsarConfig::parse(ctx)
    }

    fn client_key(&self) -> Result<HttpClientKey, MetadataError> {
        self.endpoint
            .as_ref()
            .map(|(_, key)| key.clone())
            .map_err(Clone::clone)
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        #[allow(clippy::cast_precision_loss)]
        let target = self.msg_backlog_threshold as f64;
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target_milli(MetricTargetType::AverageValue, target),
        )]
    }

    fn request(&self, _now: jiff::Timestamp) -> Result<ApiRequest<'_>, MetadataError> {
        let (url, _) = self.endpoint.as_ref().map_err(Clone::clone)?;
        Ok(ApiRequest::get(url.clone(), &self.headers))
    }

    fn operation(&self, request: &ApiRequest<'_>) -> String {
        format!(
            "Pulsar stats of topic {} on {}",
            self.topic,
            describe_url(&request.url)
        )
    }

    fn read(&self, body: &[u8], metric_name: &str) -> Result<MetricsAndActivity, String> {
        let backlog = msg_backlog(body, &self.subscription)?.ok_or_else(|| {
            format!(
                "the topic has no subscription {:?} (parameter \"subscription\")",
                self.subscription
            )
        })?;
        #[allow(clippy::cast_precision_loss)]
        let (value, activation) = (backlog as f64, self.activation as f64);
        Ok(MetricsAndActivity::single(metric_name, value, activation))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::test_context;

    fn parse(metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> Result<PulsarConfig, String> {
        PulsarConfig::parse(&test_context("pulsar", 0, metadata, &[], auth))
            .map_err(|e| e.to_string())
    }

    const META: &[(&str, &str)] = &[
        ("adminURL", "http://172.20.0.151:80"),
        ("topic", "persistent://public/default/my-topic"),
        ("subscription", "sub1"),
    ];

    /// KEDA's `parsePulsarMetadataTestDataset` and `TestPulsarAuthParams`
    /// (`pkg/scalers/pulsar_scaler_test.go`).
    #[test]
    fn keda_s_metadata_cases() {
        let config = parse(META, &[]).unwrap();
        let (url, key) = config.endpoint.as_ref().unwrap();
        assert_eq!(
            url.as_str(),
            "http://172.20.0.151/admin/v2/persistent/public/default/my-topic/stats"
        );
        assert!(key.auth.modes.is_empty());
        assert!(config.headers.is_empty());
        assert_eq!(
            config.metric_name,
            "s0-pulsar-persistent---public-default-my-topic-sub1"
        );
        assert_eq!((config.msg_backlog_threshold, config.activation), (10, 0));
        let mut partitioned = META.to_vec();
        partitioned.push(("isPartitionedTopic", "true"));
        let config = parse(&partitioned, &[]).unwrap();
        assert!(
            config
                .endpoint
                .unwrap()
                .0
                .path()
                .ends_with("/partitioned-stats")
        );
        for (i, name) in ["adminURL", "topic", "subscription"].iter().enumerate() {
            let mut m = META.to_vec();
            m.remove(i);
            let err = parse(&m, &[]).unwrap_err();
            assert!(err.contains(&format!("\"{name}\"")), "{err}");
        }
        let mut bad = META.to_vec();
        bad.push(("msgBacklogThreshold", "ten"));
        assert!(
            parse(&bad, &[])
                .unwrap_err()
                .contains("\"msgBacklogThreshold\"")
        );

        // Bearer: Authorization and the method header "token".
        let mut bearer = META.to_vec();
        bearer.push(("authModes", "bearer"));
        let config = parse(&bearer, &[("bearerToken", "t0ken")]).unwrap();
        assert_eq!(config.headers[AUTH_METHOD_HEADER], "token");
        assert!(config.endpoint.unwrap().1.auth.bearer.is_some());
        let mut basic = META.to_vec();
        basic.push(("authModes", "basic"));
        let config = parse(&basic, &[("username", "u"), ("password", "p")]).unwrap();
        assert_eq!(config.headers[AUTH_METHOD_HEADER], "basic");
        let err = parse(&bearer, &[]).unwrap_err();
        assert!(err.contains("bearerToken"), "{err}");
        let mut oauth = META.to_vec();
        oauth.push(("authModes", "oauth"));
        assert!(parse(&oauth, &[]).unwrap_err().contains("oauth"));
        // `tls: enable` with only a key: the tls mode is added, and needs the certificate too.
        let mut tls = META.to_vec();
        tls.push(("tls", "enable"));
        let err = parse(&tls, &[("key", "K")]).unwrap_err();
        assert!(err.contains("\"cert\""), "{err}");
        // An adminURL that makes no URL builds; every read fails naming it.
        let mut bad = META[1..].to_vec();
        bad.push(("adminURL", "pulsar:8080"));
        let err = parse(&bad, &[]).unwrap().endpoint.unwrap_err().to_string();
        assert!(err.contains("\"adminURL\""), "{err}");
    }

    #[test]
    fn the_backlog_is_the_subscription_s() {
        let body = br#"{"msgRateIn":0.0,"msgInCounter":5,"publishers":[],"subscriptions":{"sub1":{"msgRateOut":0.0,"msgBacklog":42,"type":"Shared","consumers":[]}},"replication":{},"deduplicationStatus":"Disabled"}"#;
        assert_eq!(msg_backlog(body, "sub1"), Ok(Some(42)));
        assert_eq!(msg_backlog(body, "sub2"), Ok(None));
        assert_eq!(msg_backlog(b"{}", "sub1"), Ok(None));
        for garbage in [
            "",
            "SECRETSECRET",
            r#"{"subscriptions":{"sub1":{"msgBacklog":"SECRETSECRET"}}}"#,
        ] {
            let err = msg_backlog(garbage.as_bytes(), "sub1").unwrap_err();
            assert!(!err.contains("SECRETSECRET"), "{err}");
        }
    }
}
