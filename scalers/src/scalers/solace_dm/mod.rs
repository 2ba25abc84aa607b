//! `solace-direct-messaging`: scales consumers of direct messages on a Solace PubSub+ broker on
//! the egress rates of their clients, read as KEDA's `solace-direct-messaging` trigger reads
//! them (`pkg/scalers/solace_dm_scaler.go`): two SEMP v1 requests, `POST <solaceSempBaseURL>/SEMP`
//! with `<rpc><show><client><name>*<clientNamePattern>*</name><stats/></client></show></rpc>`
//! (the clients' current and average egress message and byte rates) and the same with
//! `<queues/>` (the messages and units of work queued in each client's `D-1` priority queue),
//! both summed over the clients of `messageVpn`, the queued work weighted by
//! `queuedMessagesFactor` and added to the rates. The base URLs are tried in order until one
//! answers (an HA pair).
//!
//! Every trigger on the same first URL with the same credentials and TLS setting shares one HTTP
//! client.

use std::borrow::Cow;

use bytes::Bytes;
use http::HeaderValue;
use http::header::{CONTENT_TYPE, HeaderMap};
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::authentication::{AuthMode, HttpAuth};
use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError};
use crate::http_client::{self, HttpClientKey, describe_url, parse_http_url};
use crate::metadata::{AUTH_ENV, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target};
use crate::pooled::{ApiRequest, HttpApi, HttpCall, Pooled};
use crate::scaler::MetricsAndActivity;
use crate::secret::Secret;
use crate::tls::TlsSettings;

const SEMP_BASE_URL: Param = Param::required("solaceSempBaseURL");
const USERNAME: Param = Param::required("username").order(AUTH_ENV);
const PASSWORD: Param = Param::required("password").order(AUTH_ENV).secret();
const MESSAGE_VPN: Param = Param::required("messageVpn");
const CLIENT_NAME_PATTERN: Param = Param::required("clientNamePattern");
const UNSAFE_SSL: Param = Param::optional("unsafeSSL").default("false");
const QUEUED_MESSAGES_FACTOR: Param = Param::optional("queuedMessagesFactor").default("3");
const TX_BYTE_RATE: Param = Param::optional("aggregatedClientTxByteRateTarget").default("0");
const AVG_TX_BYTE_RATE: Param =
    Param::optional("aggregatedClientAverageTxByteRateTarget").default("0");
const TX_MSG_RATE: Param = Param::optional("aggregatedClientTxMsgRateTarget").default("0");
const AVG_TX_MSG_RATE: Param =
    Param::optional("aggregatedClientAverageTxMsgRateTarget").default("0");
const ACTIVATION_TX_BYTE_RATE: Param =
    Param::optional("activationAggregatedClientTxByteRateTarget").default("0");
const ACTIVATION_AVG_TX_BYTE_RATE: Param =
    Param::optional("activationAggregatedClientAverageTxByteRateTarget").default("0");
const ACTIVATION_TX_MSG_RATE: Param =
    Param::optional("activationAggregatedClientTxMsgRateTarget").default("0");
const ACTIVATION_AVG_TX_MSG_RATE: Param =
    Param::optional("activationAggregatedClientAverageTxMsgRateTarget").default("0");

/// The parameters of `solace-direct-messaging`, in KEDA's order.
pub const PARAMS: &[Param] = &[
    SEMP_BASE_URL,
    USERNAME,
    PASSWORD,
    MESSAGE_VPN,
    CLIENT_NAME_PATTERN,
    UNSAFE_SSL,
    QUEUED_MESSAGES_FACTOR,
    TX_BYTE_RATE,
    AVG_TX_BYTE_RATE,
    TX_MSG_RATE,
    AVG_TX_MSG_RATE,
    ACTIVATION_TX_BYTE_RATE,
    ACTIVATION_AVG_TX_BYTE_RATE,
    ACTIVATION_TX_MSG_RATE,
    ACTIVATION_AVG_TX_MSG_RATE,
];

/// The bytes one unit of work of a client queue counts for (KEDA's `unitOfWorkByteSize`).
pub const UNIT_OF_WORK_BYTES: i64 = 2048;

/// The four metrics, in KEDA's order: their name suffixes.
const METRICS: [&str; 4] = [
    "aggregatedClientTxByteRateTarget",
    "aggregatedClientAverageTxByteRateTarget",
    "aggregatedClientTxMsgRateTarget",
    "aggregatedClientAverageTxMsgRateTarget",
];

/// The clients' egress figures summed over the message VPN.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientRates {
    /// `current-egress-byte-rate-per-second`.
    pub tx_byte_rate: i64,
    /// `average-egress-byte-rate-per-minute`.
    pub average_tx_byte_rate: i64,
    /// `current-egress-rate-per-second`.
    pub tx_msg_rate: i64,
    /// `average-egress-rate-per-minute`.
    pub average_tx_msg_rate: i64,
}

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct SolaceDmConfig {
    /// `<solaceSempBaseURL>/SEMP` of each base URL, in order.
    pub semp_urls: Vec<url::Url>,
    /// `messageVpn`.
    pub vpn: String,
    /// `clientNamePattern`.
    pub pattern: String,
    /// `queuedMessagesFactor`.
    pub factor: i64,
    /// The metrics with a positive target: (KEDA's name suffix, metric name, target).
    pub metrics: Vec<(&'static str, String, i64)>,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
    /// The first URL, basic authentication, TLS and timeout.
    pub key: HttpClientKey,
    headers: HeaderMap,
}

/// `text` with `&`, `<` and `>` escaped, for an XML element's content.
fn xml_text(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

impl SolaceDmConfig {
    /// Parses the trigger as KEDA's `parseSolaceDMConfiguration` and `Validate`.
    ///
    /// # Errors
    /// A required parameter missing; a base URL that is not an http(s) URL; a
    /// `clientNamePattern` with `*`; `queuedMessagesFactor` outside 1..=100; no positive
    /// target; a malformed number.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let bases: String = p.get(&SEMP_BASE_URL)?;
            let username: String = p.get(&USERNAME)?;
            let password: Secret = p.get(&PASSWORD)?;
            let vpn: String = p.get(&MESSAGE_VPN)?;
            let pattern: String = p.get(&CLIENT_NAME_PATTERN)?;
            let insecure: bool = p.get(&UNSAFE_SSL)?;
            let factor: i64 = p.get(&QUEUED_MESSAGES_FACTOR)?;
            let targets: [i64; 4] = [
                p.get(&TX_BYTE_RATE)?,
                p.get(&AVG_TX_BYTE_RATE)?,
                p.get(&TX_MSG_RATE)?,
                p.get(&AVG_TX_MSG_RATE)?,
            ];
            // Parsed as KEDA parses them; KEDA reports every read active.
            for activation in [
                &ACTIVATION_TX_BYTE_RATE,
                &ACTIVATION_AVG_TX_BYTE_RATE,
                &ACTIVATION_TX_MSG_RATE,
                &ACTIVATION_AVG_TX_MSG_RATE,
            ] {
                let _: i64 = p.get(activation)?;
            }
            let mut semp_urls = Vec::new();
            for (i, base) in bases.split(',').map(str::trim).enumerate() {
                if base.is_empty() {
                    return Err(p.rule(format!(
                        "parameter \"solaceSempBaseURL\": URL {i} of the list is empty"
                    )));
                }
                let base = parse_http_url(p, &SEMP_BASE_URL, base)?;
                let semp = url::Url::parse(&format!("{}/SEMP", base.as_str().trim_end_matches('/')))
                    .map_err(|_| p.rule(format!("parameter \"solaceSempBaseURL\": URL {i} of the list cannot take /SEMP")))?;
                semp_urls.push(semp);
            }
            if pattern.contains('*') {
                return Err(p.rule("parameter \"clientNamePattern\" must not contain '*'"));
            }
            if !(1..=100).contains(&factor) {
                return Err(p.rule(
                    "parameter \"queuedMessagesFactor\" must be between 1 and 100",
                ));
            }
            let metrics: Vec<_> = METRICS
                .iter()
                .zip(targets)
                .filter(|(_, target)| *target > 0)
                .map(|(suffix, target)| {
                    (
                        *suffix,
                        ctx.metric_name(&format!("solace-dm-{pattern}-{suffix}")),
                        target,
                    )
                })
                .collect();
            if metrics.is_empty() {
                return Err(p.rule(
                    "no target value found: set at least one of aggregatedClientTxByteRateTarget, aggregatedClientAverageTxByteRateTarget, aggregatedClientTxMsgRateTarget, aggregatedClientAverageTxMsgRateTarget above 0",
                ));
            }
            let key = HttpClientKey {
                origin: http_client::origin(&semp_urls[0]),
                auth: HttpAuth {
                    modes: vec![AuthMode::Basic],
                    basic: Some((username, password)),
                    tls: TlsSettings {
                        insecure,
                        ..TlsSettings::default()
                    },
                    ..HttpAuth::default()
                },
                timeout: ctx.global_http_timeout,
            };
            let mut headers = HeaderMap::new();
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/xml"));
            Ok(Self {
                semp_urls,
                vpn,
                pattern,
                factor,
                metrics,
                metric_type,
                key,
                headers,
            })
        })?)
    }

    /// The SEMP v1 request of the clients' stats (`queues`: with their queues).
    pub fn command(&self, queues: bool) -> String {
        let pattern = xml_text(&self.pattern);
        if queues {
            format!(
                "<rpc><show><client><name>*{pattern}*</name><stats></stats><queues></queues></client></show></rpc>"
            )
        } else {
            format!("<rpc><show><client><name>*{pattern}*</name><stats/></client></show></rpc>")
        }
    }

    /// The four values of a read: the rates plus the queued work, as KEDA adds them.
    pub fn values(&self, rates: ClientRates, (messages, work): (i64, i64)) -> [i64; 4] {
        let queued_messages = messages.saturating_mul(self.factor);
        let queued_bytes = work
            .saturating_mul(self.factor)
            .saturating_mul(UNIT_OF_WORK_BYTES);
        [
            rates.tx_byte_rate.saturating_add(queued_bytes),
            rates.average_tx_byte_rate.saturating_add(queued_bytes),
            rates.tx_msg_rate.saturating_add(queued_messages),
            rates.average_tx_msg_rate.saturating_add(queued_messages),
        ]
    }
}

/// The `client` elements of a SEMP v1 `show client` reply
/// (`<rpc-reply><rpc><show><client><primary-virtual-router><client>...`) in `vpn`.
fn clients<'a, 'input>(
    doc: &'a roxmltree::Document<'input>,
    vpn: &str,
) -> Result<Vec<roxmltree::Node<'a, 'input>>, String> {
    let root = doc.root_element();
    if !root.has_tag_name("rpc-reply") {
        return Err("the SEMP answer is not an rpc-reply".into());
    }
    if let Some(result) = root.children().find(|n| n.has_tag_name("execute-result"))
        && result.attribute("code").is_some_and(|c| c != "ok")
    {
        return Err("the SEMP command failed (its execute-result code is not ok)".into());
    }
    let child = |node: roxmltree::Node<'a, 'input>, name: &str| {
        node.children().find(|n| n.has_tag_name(name))
    };
    let Some(router) = child(root, "rpc")
        .and_then(|n| child(n, "show"))
        .and_then(|n| child(n, "client"))
        .and_then(|n| child(n, "primary-virtual-router"))
    else {
        return Ok(Vec::new());
    };
    Ok(router
        .children()
        .filter(|n| n.has_tag_name("client"))
        .filter(|n| text_of(*n, "message-vpn").unwrap_or_default() == vpn)
        .collect())
}

fn text_of<'a>(node: roxmltree::Node<'a, '_>, name: &str) -> Option<&'a str> {
    node.children()
        .find(|n| n.has_tag_name(name))
        .map(|n| n.text().unwrap_or_default().trim())
}

/// A whole number element of `node` (absent: 0, as Go's XML decoding leaves it).
fn number(node: roxmltree::Node<'_, '_>, name: &str) -> Result<i64, String> {
    match text_of(node, name) {
        None => Ok(0),
        Some(text) => text
            .parse::<i64>()
            .map_err(|_| format!("the SEMP answer's {name} is not a whole number")),
    }
}

fn document(body: &[u8]) -> Result<roxmltree::Document<'_>, String> {
    let text =
        std::str::from_utf8(body).map_err(|_| "the SEMP answer is not UTF-8 text".to_string())?;
    crate::remote::xml(text.trim_start_matches('\u{feff}'))
        .map_err(|e| format!("the SEMP answer is not XML (at {})", e.pos()))
}

/// KEDA's `getClientStats`: the egress rates of the clients of `vpn`, summed.
///
/// # Errors
/// Not an `rpc-reply`, a failed command, a rate that is not a whole number. Messages never
/// quote the answer.
pub fn client_rates(body: &[u8], vpn: &str) -> Result<ClientRates, String> {
    let doc = document(body)?;
    let mut rates = ClientRates::default();
    for client in clients(&doc, vpn)? {
        let Some(stats) = client.children().find(|n| n.has_tag_name("stats")) else {
            continue;
        };
        let add = |sum: &mut i64, name: &str| -> Result<(), String> {
            *sum = sum.saturating_add(number(stats, name)?);
            Ok(())
        };
        add(
            &mut rates.tx_byte_rate,
            "current-egress-byte-rate-per-second",
        )?;
        add(
            &mut rates.average_tx_byte_rate,
            "average-egress-byte-rate-per-minute",
        )?;
        add(&mut rates.tx_msg_rate, "current-egress-rate-per-second")?;
        add(
            &mut rates.average_tx_msg_rate,
            "average-egress-rate-per-minute",
        )?;
    }
    Ok(rates)
}

/// KEDA's `getClientStatQueues`: the messages and units of work in the `D-1` queues of the
/// clients of `vpn`, summed.
///
/// # Errors
/// As [`client_rates`].
pub fn d1_queued(body: &[u8], vpn: &str) -> Result<(i64, i64), String> {
    let doc = document(body)?;
    let (mut messages, mut work) = (0i64, 0i64);
    for client in clients(&doc, vpn)? {
        for queue in client
            .children()
            .filter(|n| n.has_tag_name("client-queue"))
            .filter(|n| text_of(*n, "queue-priority") == Some("D-1"))
        {
            messages = messages.saturating_add(number(queue, "length-msgs")?);
            work = work.saturating_add(number(queue, "length-work")?);
        }
    }
    Ok((messages, work))
}

/// A `solace-direct-messaging` scaler.
pub type SolaceDmScaler = Pooled<SolaceDmConfig>;

#[async_trait::async_trait]
impl HttpApi for SolaceDmConfig {
    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        SolaceDmConfig::parse(ctx)
    }

    fn client_key(&self) -> Result<HttpClientKey, MetadataError> {
        Ok(self.key.clone())
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        self.metrics
            .iter()
            .map(|(_, name, target)| {
                external_metric_spec(name.clone(), metric_target(self.metric_type, *target))
            })
            .collect()
    }

    /// The stats request to the first URL (a read sends both requests, see `fetch`).
    fn request(&self, _now: jiff::Timestamp) -> Result<ApiRequest<'_>, MetadataError> {
        Ok(self.semp_request(0, false))
    }

    fn operation(&self, request: &ApiRequest<'_>) -> String {
        let what = if request
            .body
            .as_ref()
            .is_some_and(|b| b.windows(8).any(|w| w == b"<queues>"))
        {
            "client queues"
        } else {
            "client stats"
        };
        format!(
            "SEMP v1 show {what} of clients *{}* in message VPN {} on {}",
            self.pattern,
            self.vpn,
            describe_url(&request.url)
        )
    }

    fn read(&self, body: &[u8], metric_name: &str) -> Result<MetricsAndActivity, String> {
        let rates = client_rates(body, &self.vpn)?;
        self.report(metric_name, self.values(rates, (0, 0)))
    }

    async fn fetch(
        &self,
        call: &HttpCall<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let stats = self.send_failing_over(call, false).await?;
        let rates = client_rates(&stats, &self.vpn).map_err(|why| call.read.unexpected(why))?;
        let queues = self.send_failing_over(call, true).await?;
        let queued = d1_queued(&queues, &self.vpn).map_err(|why| call.read.unexpected(why))?;
        self.report(metric_name, self.values(rates, queued))
            .map_err(|why| call.read.unexpected(why))
    }
}

impl SolaceDmConfig {
    fn semp_request(&self, index: usize, queues: bool) -> ApiRequest<'_> {
        ApiRequest::post(
            self.semp_urls[index.min(self.semp_urls.len() - 1)].clone(),
            Cow::Borrowed(&self.headers),
            Bytes::from(self.command(queues)),
        )
    }

    /// KEDA's `GetSolaceDMSempMetrics`: each URL in order until one answers 2xx; the last
    /// failure otherwise.
    async fn send_failing_over(
        &self,
        call: &HttpCall<'_>,
        queues: bool,
    ) -> Result<Bytes, ScalerError> {
        let mut last = None;
        for index in 0..self.semp_urls.len() {
            match call.send(self, self.semp_request(index, queues)).await {
                Ok(body) => return Ok(body),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| call.read.unexpected("no SEMP URL")))
    }

    /// The value of `metric_name`; KEDA reports every read active.
    fn report(&self, metric_name: &str, values: [i64; 4]) -> Result<MetricsAndActivity, String> {
        let index = self
            .metrics
            .iter()
            .find(|(_, name, _)| name == metric_name)
            .and_then(|(suffix, _, _)| METRICS.iter().position(|m| m == suffix))
            .ok_or_else(|| format!("unknown metric {metric_name}"))?;
        #[allow(clippy::cast_precision_loss)]
        let value = values[index] as f64;
        let mut report = MetricsAndActivity::single(metric_name, value, 0.0);
        report.active = true;
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::test_context;

    const META: &[(&str, &str)] = &[
        (
            "solaceSempBaseURL",
            "http://solace-a:8080, http://solace-b:8080",
        ),
        ("messageVpn", "default"),
        ("clientNamePattern", "consumer"),
        ("aggregatedClientTxMsgRateTarget", "100"),
        ("aggregatedClientTxByteRateTarget", "10000"),
    ];
    const AUTH: &[(&str, &str)] = &[("username", "admin"), ("password", "pw")];

    fn parse(metadata: &[(&str, &str)]) -> Result<SolaceDmConfig, String> {
        SolaceDmConfig::parse(&test_context(
            "solace-direct-messaging",
            0,
            metadata,
            &[],
            AUTH,
        ))
        .map_err(|e| e.to_string())
    }

    /// KEDA's `testSolaceDMMetadata` cases.
    #[test]
    fn parameters_follow_keda() {
        let c = parse(META).unwrap();
        assert_eq!(c.semp_urls[1].as_str(), "http://solace-b:8080/SEMP");
        assert_eq!(c.factor, 3);
        let names: Vec<_> = c.metrics.iter().map(|(_, n, t)| (n.as_str(), *t)).collect();
        assert_eq!(
            names,
            [
                (
                    "s0-solace-dm-consumer-aggregatedClientTxByteRateTarget",
                    10000
                ),
                ("s0-solace-dm-consumer-aggregatedClientTxMsgRateTarget", 100)
            ]
        );
        let with = |k: &'static str, v: &'static str| {
            let mut m: Vec<_> = META.iter().copied().filter(|(n, _)| *n != k).collect();
            m.push((k, v));
            parse(&m)
        };
        assert!(
            with("clientNamePattern", "con*")
                .unwrap_err()
                .contains("clientNamePattern")
        );
        assert!(
            with("queuedMessagesFactor", "0")
                .unwrap_err()
                .contains("queuedMessagesFactor")
        );
        assert!(
            with("queuedMessagesFactor", "101")
                .unwrap_err()
                .contains("queuedMessagesFactor")
        );
        assert!(
            with("solaceSempBaseURL", "http://a:8080,,")
                .unwrap_err()
                .contains("solaceSempBaseURL")
        );
        assert!(
            with("solaceSempBaseURL", "solace:8080")
                .unwrap_err()
                .contains("solaceSempBaseURL")
        );
        let none: Vec<_> = META[..3].to_vec();
        assert!(parse(&none).unwrap_err().contains("no target value"));
        assert!(
            parse(&META[1..])
                .unwrap_err()
                .contains("\"solaceSempBaseURL\"")
        );
    }

    #[test]
    fn the_commands_escape_the_pattern() {
        let mut m = META.to_vec();
        m[2] = ("clientNamePattern", "a<b>&c");
        let c = parse(&m).unwrap();
        assert_eq!(
            c.command(false),
            "<rpc><show><client><name>*a&lt;b&gt;&amp;c*</name><stats/></client></show></rpc>"
        );
        assert!(c.command(true).contains("<queues></queues>"));
    }

    const STATS: &str = r#"<rpc-reply semp-version="soltr/10_4"><rpc><show><client><primary-virtual-router>
<client><client-address>10.0.0.1:5000</client-address><name>consumer-1</name><message-vpn>default</message-vpn><stats>
<current-egress-rate-per-second>10</current-egress-rate-per-second><average-egress-rate-per-minute>8</average-egress-rate-per-minute>
<current-egress-byte-rate-per-second>1000</current-egress-byte-rate-per-second><average-egress-byte-rate-per-minute>800</average-egress-byte-rate-per-minute></stats></client>
<client><name>consumer-2</name><message-vpn>other</message-vpn><stats><current-egress-rate-per-second>99</current-egress-rate-per-second></stats></client>
<client><name>consumer-3</name><message-vpn>default</message-vpn><stats><current-egress-rate-per-second>5</current-egress-rate-per-second></stats></client>
</primary-virtual-router></client></show></rpc><execute-result code="ok"/></rpc-reply>"#;

    const QUEUES: &str = r#"<rpc-reply><rpc><show><client><primary-virtual-router>
<client><name>consumer-1</name><message-vpn>default</message-vpn>
<client-queue><queue-priority>D-1</queue-priority><length-msgs>4</length-msgs><length-work>6</length-work><max-work>100</max-work></client-queue>
<client-queue><queue-priority>C-1</queue-priority><length-msgs>50</length-msgs><length-work>50</length-work></client-queue></client>
<client><name>consumer-2</name><message-vpn>other</message-vpn>
<client-queue><queue-priority>D-1</queue-priority><length-msgs>70</length-msgs><length-work>70</length-work></client-queue></client>
</primary-virtual-router></client></show></rpc><execute-result code="ok"/></rpc-reply>"#;

    #[test]
    fn rates_and_queues_are_summed_over_the_vpn() {
        let rates = client_rates(STATS.as_bytes(), "default").unwrap();
        assert_eq!(
            rates,
            ClientRates {
                tx_byte_rate: 1000,
                average_tx_byte_rate: 800,
                tx_msg_rate: 15,
                average_tx_msg_rate: 8
            }
        );
        assert_eq!(d1_queued(QUEUES.as_bytes(), "default"), Ok((4, 6)));
        let c = parse(META).unwrap();
        assert_eq!(
            c.values(rates, (4, 6)),
            [1000 + 6 * 3 * 2048, 800 + 6 * 3 * 2048, 15 + 12, 8 + 12]
        );
        let report = c
            .report(
                "s0-solace-dm-consumer-aggregatedClientTxMsgRateTarget",
                c.values(rates, (4, 6)),
            )
            .unwrap();
        assert_eq!(report.values[0].value, 27.0);
        assert!(report.active);
        assert!(
            client_rates(
                b"<rpc-reply><execute-result code=\"fail\"/></rpc-reply>",
                "v"
            )
            .is_err()
        );
        assert_eq!(
            client_rates(b"<rpc-reply/>", "v"),
            Ok(ClientRates::default())
        );
        for bad in [
            "SECRETSECRET",
            "<other>SECRETSECRET</other>",
            "<rpc-reply><rpc><show><client><primary-virtual-router><client><message-vpn>v</message-vpn><stats><current-egress-rate-per-second>SECRETSECRET</current-egress-rate-per-second></stats></client></primary-virtual-router></client></show></rpc></rpc-reply>",
        ] {
            let e = client_rates(bad.as_bytes(), "v").unwrap_err();
            assert!(!e.contains("SECRETSECRET"), "{e}");
        }
    }
}
