//! `nsq`: scales on the depth of an NSQ channel (or of its topic while the channel does not
//! exist), summed over the `nsqd` nodes that `nsqlookupd` lists as the topic's producers
//! (`GET /lookup?topic=` on each lookupd, then `GET /stats?format=json&topic=` on each nsqd).
//! Compatible with KEDA's `nsq` trigger (`pkg/scalers/nsq_scaler.go`).
//!
//! Every trigger with the same lookupd addresses, TLS settings and timeout shares one HTTP
//! client (NSQ's HTTP APIs take no credentials).

use std::collections::BTreeSet;

use http::HeaderValue;
use http::header::{ACCEPT, HeaderMap};
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::authentication::HttpAuth;
use crate::context::ScalerContext;
use crate::error::{MetadataError, MetadataErrorKind, ScalerError, Source, TriggerId};
use crate::http_client::{self, HttpClientKey, describe_url};
use crate::metadata::Param;
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pooled::{ApiRequest, HttpApi, HttpCall, Pooled};
use crate::remote::Kind;
use crate::scaler::MetricsAndActivity;
use crate::tls::TlsSettings;

const METADATA_ENV: &[Source] = &[Source::Metadata, Source::Env];

const LOOKUPD: Param = Param::required("nsqLookupdHTTPAddresses").order(METADATA_ENV);
const TOPIC: Param = Param::required("topic").order(METADATA_ENV);
const CHANNEL: Param = Param::required("channel").order(METADATA_ENV);
const DEPTH_THRESHOLD: Param = Param::optional("depthThreshold")
    .order(METADATA_ENV)
    .default("10");
const ACTIVATION_DEPTH_THRESHOLD: Param = Param::optional("activationDepthThreshold")
    .order(METADATA_ENV)
    .default("0");
const USE_HTTPS: Param = Param::optional("useHttps")
    .order(METADATA_ENV)
    .default("false");
const UNSAFE_SSL: Param = Param::optional("unsafeSsl")
    .order(METADATA_ENV)
    .default("false");

/// The parameters of `nsq`.
pub const PARAMS: &[Param] = &[
    LOOKUPD,
    TOPIC,
    CHANNEL,
    DEPTH_THRESHOLD,
    ACTIVATION_DEPTH_THRESHOLD,
    USE_HTTPS,
    UNSAFE_SSL,
];

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct NsqConfig {
    /// The lookup URL of each `nsqLookupdHTTPAddresses` entry and the client key, or why an
    /// address cannot be used.
    pub lookups: Result<(Vec<url::Url>, HttpClientKey), MetadataError>,
    /// `http` or `https` (`useHttps`), for the nsqd nodes too.
    pub scheme: &'static str,
    /// `topic`.
    pub topic: String,
    /// `channel`.
    pub channel: String,
    /// The target per replica.
    pub depth_threshold: i64,
    /// Active iff the depth is above this.
    pub activation: i64,
    /// `s<index>-nsq-<topic>-<channel>`, normalized.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
    headers: HeaderMap,
    trigger: TriggerId,
}

impl NsqConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// `nsqLookupdHTTPAddresses`, `topic` or `channel` missing, `depthThreshold` not positive,
    /// `activationDepthThreshold` negative, a malformed number or boolean.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let addresses: Vec<String> = p.get(&LOOKUPD)?;
            let topic: String = p.get(&TOPIC)?;
            let channel: String = p.get(&CHANNEL)?;
            let depth_threshold: i64 = p.get(&DEPTH_THRESHOLD)?;
            let activation: i64 = p.get(&ACTIVATION_DEPTH_THRESHOLD)?;
            let use_https: bool = p.get(&USE_HTTPS)?;
            let unsafe_ssl: bool = p.get(&UNSAFE_SSL)?;
            if addresses.is_empty() {
                return Err(p.rule("no nsqLookupdHTTPAddresses given"));
            }
            if depth_threshold <= 0 {
                return Err(p.rule("parameter \"depthThreshold\" must be a positive integer"));
            }
            if activation < 0 {
                return Err(p.rule(
                    "parameter \"activationDepthThreshold\" must be greater than or equal to 0",
                ));
            }
            let scheme = if use_https { "https" } else { "http" };
            let lookups = addresses
                .iter()
                .map(|host| {
                    lookup_url(scheme, host, &topic).ok_or_else(|| {
                        p.rule(format!(
                            "parameter \"{}\": an address is not host:port",
                            LOOKUPD.name
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
                        auth: HttpAuth {
                            tls: TlsSettings {
                                insecure: unsafe_ssl,
                                ca: None,
                                client: None,
                            },
                            ..HttpAuth::default()
                        },
                        timeout: ctx.global_http_timeout,
                    };
                    (urls, key)
                });
            let mut headers = HeaderMap::new();
            headers.insert(
                ACCEPT,
                HeaderValue::from_static("application/json; charset=utf-8"),
            );
            Ok(Self {
                lookups,
                scheme,
                metric_name: ctx.metric_name(&format!("nsq-{topic}-{channel}")),
                topic,
                channel,
                depth_threshold,
                activation,
                metric_type,
                headers,
                trigger: ctx.trigger_id(),
            })
        })?)
    }
}

/// `<scheme>://<host>/lookup?topic=<topic>`; `None` when `host` is not an authority.
pub fn lookup_url(scheme: &str, host: &str, topic: &str) -> Option<url::Url> {
    if host.contains(['/', '?', '#', '@']) {
        return None;
    }
    let mut url = url::Url::parse(&format!("{scheme}://{host}/lookup")).ok()?;
    url.host_str().filter(|h| !h.is_empty())?;
    url.query_pairs_mut().append_pair("topic", topic);
    Some(url)
}

/// `<scheme>://<host:port>/stats?format=json&include_clients=false&include_mem=false&topic=`.
fn stats_url(scheme: &str, host_port: &str, topic: &str) -> Option<url::Url> {
    let mut url = url::Url::parse(&format!("{scheme}://{host_port}/stats")).ok()?;
    url.query_pairs_mut()
        .append_pair("format", "json")
        .append_pair("include_clients", "false")
        .append_pair("include_mem", "false")
        .append_pair("topic", topic);
    Some(url)
}

/// The nsqd HTTP addresses (`broadcast_address:http_port`) of a lookupd `/lookup` answer
/// (`{"channels":[...],"producers":[{"broadcast_address":...,"http_port":...}]}`).
///
/// # Errors
/// Not the documented shape. Messages never quote the answer.
pub fn producers(body: &[u8]) -> Result<Vec<String>, String> {
    #[derive(serde::Deserialize)]
    struct Answer {
        #[serde(default)]
        producers: Option<Vec<Producer>>,
    }
    #[derive(serde::Deserialize)]
    struct Producer {
        #[serde(default)]
        broadcast_address: String,
        #[serde(default)]
        http_port: u16,
    }
    let answer: Answer = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the nsqlookupd answer is not a lookup response: {}",
            crate::remote::json_error(&e)
        )
    })?;
    Ok(answer
        .producers
        .unwrap_or_default()
        .into_iter()
        .map(|p| {
            // Go's net.JoinHostPort.
            if p.broadcast_address.contains(':') {
                format!("[{}]:{}", p.broadcast_address, p.http_port)
            } else {
                format!("{}:{}", p.broadcast_address, p.http_port)
            }
        })
        .collect())
}

/// KEDA's depth of `channel` in an nsqd `/stats?format=json` answer (`{"topics":[{"topic_name":
/// ...,"depth":N,"channels":[{"channel_name":...,"depth":N,"paused":false}]}]}`): the
/// channel's depth unless paused; the topic's depth when it has no such channel (messages wait
/// for the channel to be created).
///
/// # Errors
/// Not the documented shape. Messages never quote the answer.
pub fn depth(body: &[u8], topic: &str, channel: &str) -> Result<i64, String> {
    #[derive(serde::Deserialize)]
    struct Answer {
        #[serde(default)]
        topics: Option<Vec<Topic>>,
    }
    #[derive(serde::Deserialize)]
    struct Topic {
        #[serde(default)]
        topic_name: String,
        #[serde(default)]
        depth: i64,
        #[serde(default)]
        channels: Option<Vec<Channel>>,
    }
    #[derive(serde::Deserialize)]
    struct Channel {
        #[serde(default)]
        channel_name: String,
        #[serde(default)]
        depth: i64,
        #[serde(default)]
        paused: bool,
    }
    let answer: Answer = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the nsqd answer is not a stats response: {}",
            crate::remote::json_error(&e)
        )
    })?;
    let mut total = 0i64;
    for t in answer.topics.unwrap_or_default() {
        if t.topic_name != topic {
            continue;
        }
        let channels = t.channels.unwrap_or_default();
        let mut exists = false;
        for c in channels.iter().filter(|c| c.channel_name == channel) {
            exists = true;
            if !c.paused {
                total = total.saturating_add(c.depth);
            }
        }
        if !exists {
            total = total.saturating_add(t.depth);
        }
    }
    Ok(total)
}

/// An `nsq` scaler.
pub type NsqScaler = Pooled<NsqConfig>;

#[async_trait::async_trait]
impl HttpApi for NsqConfig {
    /// A self-hosted server: polled sooner after a sign of activity.
    const ADAPTIVE_POLLING: bool = true;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        NsqConfig::parse(ctx)
    }

    fn client_key(&self) -> Result<HttpClientKey, MetadataError> {
        self.lookups
            .as_ref()
            .map(|(_, key)| key.clone())
            .map_err(Clone::clone)
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        #[allow(clippy::cast_precision_loss)]
        let target = self.depth_threshold as f64;
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target_milli(self.metric_type, target),
        )]
    }

    /// The first lookup (a read makes one per lookupd, then one per nsqd: see `fetch`).
    fn request(&self, _now: jiff::Timestamp) -> Result<ApiRequest<'_>, MetadataError> {
        let (urls, _) = self.lookups.as_ref().map_err(Clone::clone)?;
        let url = urls.first().cloned().ok_or_else(|| MetadataError {
            trigger: self.trigger.clone(),
            kind: MetadataErrorKind::Rule("no nsqLookupdHTTPAddresses given".into()),
        })?;
        Ok(ApiRequest::get(url, &self.headers))
    }

    fn operation(&self, request: &ApiRequest<'_>) -> String {
        let what = if request.url.path() == "/lookup" {
            "NSQ lookup of topic"
        } else {
            "NSQ stats of topic"
        };
        format!(
            "{what} {} (channel {}) on {}",
            self.topic,
            self.channel,
            describe_url(&request.url)
        )
    }

    fn read(&self, body: &[u8], metric_name: &str) -> Result<MetricsAndActivity, String> {
        let depth = depth(body, &self.topic, &self.channel)?;
        #[allow(clippy::cast_precision_loss)]
        let (value, activation) = (depth as f64, self.activation as f64);
        Ok(MetricsAndActivity::single(metric_name, value, activation))
    }

    /// KEDA's read: every lookupd at once (404, an unknown topic, lists no producer), then the
    /// stats of every distinct producer at once, summed; any failure fails the read.
    async fn fetch(
        &self,
        call: &HttpCall<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let (urls, _) = self
            .lookups
            .as_ref()
            .map_err(|e| ScalerError::Metadata(e.clone()))?;
        let lookups = urls.iter().map(|url| async {
            match call
                .send(self, ApiRequest::get(url.clone(), &self.headers))
                .await
            {
                Ok(body) => producers(&body).map_err(|m| call.read.unexpected(m)),
                Err(ScalerError::Query { source, .. })
                    if matches!(source.kind(), Kind::Status { code: 404, .. }) =>
                {
                    Ok(Vec::new())
                }
                Err(e) => Err(e),
            }
        });
        let hosts: BTreeSet<String> = futures::future::try_join_all(lookups)
            .await?
            .into_iter()
            .flatten()
            .collect();
        let stats = hosts.iter().map(|host| async move {
            let url = stats_url(self.scheme, host, &self.topic).ok_or_else(|| {
                call.read
                    .unexpected("nsqlookupd lists a producer whose address is not host:port")
            })?;
            let body = call.send(self, ApiRequest::get(url, &self.headers)).await?;
            depth(&body, &self.topic, &self.channel).map_err(|m| call.read.unexpected(m))
        });
        let total = futures::future::try_join_all(stats)
            .await?
            .into_iter()
            .fold(0i64, i64::saturating_add);
        #[allow(clippy::cast_precision_loss)]
        let (value, activation) = (total as f64, self.activation as f64);
        Ok(MetricsAndActivity::single(metric_name, value, activation))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::test_context;

    fn parse(metadata: &[(&str, &str)]) -> Result<NsqConfig, String> {
        NsqConfig::parse(&test_context("nsq", 0, metadata, &[], &[])).map_err(|e| e.to_string())
    }

    const META: &[(&str, &str)] = &[
        (
            "nsqLookupdHTTPAddresses",
            "nsqlookupd-0:4161,nsqlookupd-1:4161",
        ),
        ("topic", "topic"),
        ("channel", "channel"),
    ];

    /// KEDA's `parseNSQMetadataTestDataset` (`pkg/scalers/nsq_scaler_test.go`).
    #[test]
    fn keda_s_metadata_cases() {
        let config = parse(META).unwrap();
        let (urls, key) = config.lookups.as_ref().unwrap();
        assert_eq!(
            urls.iter().map(url::Url::as_str).collect::<Vec<_>>(),
            [
                "http://nsqlookupd-0:4161/lookup?topic=topic",
                "http://nsqlookupd-1:4161/lookup?topic=topic"
            ]
        );
        assert!(!key.auth.tls.insecure);
        assert_eq!(config.metric_name, "s0-nsq-topic-channel");
        assert_eq!((config.depth_threshold, config.activation), (10, 0));
        let mut https = META.to_vec();
        https.extend([("useHttps", "true"), ("unsafeSsl", "true")]);
        let config = parse(&https).unwrap();
        assert_eq!(config.scheme, "https");
        assert!(config.lookups.unwrap().1.auth.tls.insecure);
        for (i, name) in ["nsqLookupdHTTPAddresses", "topic", "channel"]
            .iter()
            .enumerate()
        {
            let mut m = META.to_vec();
            m.remove(i);
            let err = parse(&m).unwrap_err();
            assert!(err.contains(&format!("\"{name}\"")), "{err}");
        }
        for (extra, name) in [
            (("depthThreshold", "0"), "depthThreshold"),
            (("depthThreshold", "-1"), "depthThreshold"),
            (
                ("activationDepthThreshold", "-1"),
                "activationDepthThreshold",
            ),
            (("useHttps", "maybe"), "useHttps"),
        ] {
            let mut m = META.to_vec();
            m.push(extra);
            let err = parse(&m).unwrap_err();
            assert!(err.contains(name), "{err}");
        }
        let mut bad = META[1..].to_vec();
        bad.push(("nsqLookupdHTTPAddresses", "http://x/y"));
        let err = parse(&bad).unwrap().lookups.unwrap_err().to_string();
        assert!(err.contains("\"nsqLookupdHTTPAddresses\""), "{err}");
    }

    /// KEDA's `TestNSQAggregateDepth` cases, per nsqd answer.
    #[test]
    fn depth_follows_keda() {
        let stats = |channels: &str| {
            format!(r#"{{"topics":[{{"topic_name":"topic","depth":250,"channels":{channels}}}]}}"#)
        };
        assert_eq!(depth(stats("[]").as_bytes(), "topic", "channel"), Ok(250));
        assert_eq!(
            depth(
                stats(r#"[{"channel_name":"other","depth":100}]"#).as_bytes(),
                "topic",
                "channel"
            ),
            Ok(250)
        );
        assert_eq!(
            depth(
                stats(r#"[{"channel_name":"channel","depth":100,"paused":false}]"#).as_bytes(),
                "topic",
                "channel"
            ),
            Ok(100)
        );
        assert_eq!(
            depth(
                stats(r#"[{"channel_name":"channel","depth":100,"paused":true}]"#).as_bytes(),
                "topic",
                "channel"
            ),
            Ok(0)
        );
        assert_eq!(
            depth(
                br#"{"topics":[{"topic_name":"other","depth":9}]}"#,
                "topic",
                "c"
            ),
            Ok(0)
        );
        assert_eq!(
            producers(br#"{"channels":[],"producers":[{"broadcast_address":"nsqd-0","http_port":4151},{"broadcast_address":"::1","http_port":4151}]}"#),
            Ok(vec!["nsqd-0:4151".to_string(), "[::1]:4151".to_string()])
        );
        for garbage in [
            "",
            "SECRETSECRET",
            r#"{"topics":"SECRETSECRET","producers":[{"http_port":"SECRETSECRET"}]}"#,
        ] {
            let a = depth(garbage.as_bytes(), "t", "c").unwrap_err();
            let b = producers(garbage.as_bytes()).unwrap_err();
            assert!(
                !a.contains("SECRETSECRET") && !b.contains("SECRETSECRET"),
                "{a} {b}"
            );
        }
    }
}
