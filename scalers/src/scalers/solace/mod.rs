//! `solace-event-queue`: a Solace PubSub+ queue's message count, spool usage and receive rate
//! from the broker's SEMP v2 monitor API (KEDA's `solace_scaler.go`).
//!
//! Each read tries the brokers of `solaceSempBaseURL` in turn (a comma list: an HA pair, say),
//! starting with the one that answered last, as KEDA does: on one broker it asks the Message
//! VPN's state (`GET <base>/SEMP/v2/monitor/msgVpns/<vpn>?select=state`), and when it is `up`
//! the queue's figures (`GET <base>/SEMP/v2/monitor/msgVpns/<vpn>/queues/<queue>?select=msgs,msgSpoolUsage,averageRxMsgRate`),
//! with basic authentication. Every figure with a target is one metric of the trigger; the
//! trigger is active when any figure is above its activation target.
//!
//! SEMP reference: <https://docs.solace.com/Admin/SEMP/SEMP-API-Ref.htm> (monitor API,
//! `MsgVpn` and `MsgVpnQueue` objects, the `meta.responseCode` of every answer).

use std::sync::atomic::Ordering;

use async_trait::async_trait;
use http::header::HeaderMap;
use k8s_openapi::api::autoscaling::v2::MetricSpec;
use serde_json::Value;

use crate::authentication::{AuthMode, HttpAuth};
use crate::context::ScalerContext;
use crate::error::Source;
use crate::error::{MetadataError, ScalerError};
use crate::http_client::{self, HttpClientKey, describe_url, parse_http_url};
use crate::http_servers::{self, Servers, ServersKey};
use crate::metadata::{METADATA, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target};
use crate::pool::Lease;
use crate::pooled::{PooledSource, ReadCtx};
use crate::remote::{Classify, Failure};
use crate::scaler::{MetricValue, MetricsAndActivity};
use crate::secret::Secret;

/// Lookup order of the credentials: TriggerAuthentication, metadata, then `<name>FromEnv`.
const AUTH_METADATA_ENV: &[Source] = &[Source::Auth, Source::Metadata, Source::Env];

const SEMP_BASE_URL: Param = Param::required("solaceSempBaseURL").order(METADATA);
const MESSAGE_VPN: Param = Param::required("messageVpn").order(METADATA);
const QUEUE_NAME: Param = Param::required("queueName").order(METADATA);
const USERNAME: Param = Param::required("username").order(AUTH_METADATA_ENV);
const PASSWORD: Param = Param::required("password")
    .order(AUTH_METADATA_ENV)
    .secret();
const MSG_COUNT_TARGET: Param = Param::optional("messageCountTarget").order(METADATA);
const MSG_SPOOL_USAGE_TARGET: Param = Param::optional("messageSpoolUsageTarget").order(METADATA);
const MSG_RX_RATE_TARGET: Param = Param::optional("messageReceiveRateTarget").order(METADATA);
const ACTIVATION_MSG_COUNT_TARGET: Param = Param::optional("activationMessageCountTarget")
    .order(METADATA)
    .default("0");
const ACTIVATION_MSG_SPOOL_USAGE_TARGET: Param =
    Param::optional("activationMessageSpoolUsageTarget")
        .order(METADATA)
        .default("0");
const ACTIVATION_MSG_RX_RATE_TARGET: Param = Param::optional("activationMessageReceiveRateTarget")
    .order(METADATA)
    .default("0");

/// The parameters of `solace-event-queue`.
pub const PARAMS: &[Param] = &[
    SEMP_BASE_URL,
    MESSAGE_VPN,
    QUEUE_NAME,
    USERNAME,
    PASSWORD,
    MSG_COUNT_TARGET,
    MSG_SPOOL_USAGE_TARGET,
    MSG_RX_RATE_TARGET,
    ACTIVATION_MSG_COUNT_TARGET,
    ACTIVATION_MSG_SPOOL_USAGE_TARGET,
    ACTIVATION_MSG_RX_RATE_TARGET,
];

/// One mebibyte: the spool targets are written in megabytes and compared in bytes, as KEDA.
const MIB: i64 = 1024 * 1024;

/// The figures of a queue, as SEMP reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueFigures {
    /// `collections.msgs.count`: messages spooled on the queue.
    pub msg_count: i64,
    /// `data.msgSpoolUsage`: bytes spooled.
    pub msg_spool_usage: i64,
    /// `data.averageRxMsgRate`: messages per second received, averaged.
    pub msg_rx_rate: i64,
}

/// Which figure a metric is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Figure {
    /// `msgcount`.
    MsgCount,
    /// `msgspoolusage`.
    MsgSpoolUsage,
    /// `msgrcvrate`.
    MsgRxRate,
}

impl Figure {
    fn suffix(self) -> &'static str {
        match self {
            Self::MsgCount => "msgcount",
            Self::MsgSpoolUsage => "msgspoolusage",
            Self::MsgRxRate => "msgrcvrate",
        }
    }

    fn of(self, f: &QueueFigures) -> i64 {
        match self {
            Self::MsgCount => f.msg_count,
            Self::MsgSpoolUsage => f.msg_spool_usage,
            Self::MsgRxRate => f.msg_rx_rate,
        }
    }
}

/// One metric of the trigger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SolaceMetric {
    /// The figure.
    pub figure: Figure,
    /// `s<index>-solace-<queue>-<figure>`.
    pub name: String,
    /// The target (bytes for the spool usage).
    pub target: i64,
}

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct SolaceConfig {
    /// The brokers, in order, each with its client key.
    pub brokers: Vec<(url::Url, HttpClientKey)>,
    /// `messageVpn`.
    pub vpn: String,
    /// `queueName`.
    pub queue: String,
    /// The metrics, in KEDA's order (count, spool usage, receive rate), those with a target.
    pub metrics: Vec<SolaceMetric>,
    /// The activation targets, in the figures' units (bytes for the spool usage).
    pub activation: QueueFigures,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
}

impl SolaceConfig {
    /// Parses the trigger with KEDA's rules.
    ///
    /// # Errors
    /// A required parameter missing; a target or activation not an integer; no target of 1
    /// or more; a broker address that is not an http(s) URL.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let bases: String = p.get(&SEMP_BASE_URL)?;
            let vpn: String = p.get(&MESSAGE_VPN)?;
            let queue: String = p.get(&QUEUE_NAME)?;
            let username: String = p.get(&USERNAME)?;
            let password: Secret = p.get(&PASSWORD)?;
            let count: Option<i64> = p.get_opt(&MSG_COUNT_TARGET)?;
            let spool: Option<i64> = p.get_opt(&MSG_SPOOL_USAGE_TARGET)?;
            let rate: Option<i64> = p.get_opt(&MSG_RX_RATE_TARGET)?;
            let targets = [
                (Figure::MsgCount, count.unwrap_or(0)),
                (
                    Figure::MsgSpoolUsage,
                    spool.unwrap_or(0).saturating_mul(MIB),
                ),
                (Figure::MsgRxRate, rate.unwrap_or(0)),
            ];
            if targets.iter().all(|(_, t)| *t < 1) {
                return Err(p.rule(
                    "no target value found in the scaler configuration: set \
                     messageCountTarget, messageSpoolUsageTarget or messageReceiveRateTarget \
                     to 1 or more",
                ));
            }
            let auth = HttpAuth {
                modes: vec![AuthMode::Basic],
                basic: Some((username, password)),
                ..HttpAuth::default()
            };
            let brokers = bases
                .split(',')
                .map(str::trim)
                .filter(|b| !b.is_empty())
                .map(|base| {
                    let url = parse_http_url(p, &SEMP_BASE_URL, base)?;
                    let key = HttpClientKey {
                        origin: http_client::origin(&url),
                        auth: auth.clone(),
                        timeout: ctx.global_http_timeout,
                    };
                    Ok((url, key))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let metrics = targets
                .into_iter()
                .filter(|(_, target)| *target > 0)
                .map(|(figure, target)| SolaceMetric {
                    figure,
                    name: ctx.metric_name(&format!("solace-{queue}-{}", figure.suffix())),
                    target,
                })
                .collect();
            Ok(Self {
                brokers,
                activation: QueueFigures {
                    msg_count: p.get(&ACTIVATION_MSG_COUNT_TARGET)?,
                    msg_spool_usage: p
                        .get::<i64>(&ACTIVATION_MSG_SPOOL_USAGE_TARGET)?
                        .saturating_mul(MIB),
                    msg_rx_rate: p.get(&ACTIVATION_MSG_RX_RATE_TARGET)?,
                },
                vpn,
                queue,
                metrics,
                metric_type,
            })
        })?)
    }
}

/// `<base>/SEMP/v2/monitor/msgVpns/<vpn>[/queues/<queue>]?select=...`, each name one
/// percent-encoded path segment.
pub fn semp_url(base: &url::Url, vpn: &str, queue: Option<&str>) -> url::Url {
    let mut url = base.clone();
    url.set_query(None);
    url.set_fragment(None);
    if let Ok(mut segments) = url.path_segments_mut() {
        segments.pop_if_empty();
        segments.extend(["SEMP", "v2", "monitor", "msgVpns", vpn]);
        if let Some(queue) = queue {
            segments.extend(["queues", queue]);
        }
    }
    url.set_query(Some(match queue {
        Some(_) => "select=msgs,msgSpoolUsage,averageRxMsgRate",
        None => "select=state",
    }));
    url
}

/// `meta.responseCode` of a SEMP answer is 2xx.
fn semp_ok(answer: &Value) -> Result<(), String> {
    match answer
        .get("meta")
        .and_then(|m| m.get("responseCode"))
        .and_then(Value::as_i64)
    {
        Some(code) if (200..300).contains(&code) => Ok(()),
        Some(code) => Err(format!("SEMP answered responseCode {code}")),
        None => Err("the answer is not a SEMP answer (no meta.responseCode)".into()),
    }
}

/// `data.state` of a `MsgVpn` answer.
///
/// # Errors
/// Not JSON, not a successful SEMP answer, no state.
pub fn vpn_state(body: &[u8]) -> Result<String, String> {
    let answer: Value = crate::remote::from_json(body).map_err(|e| format!("the answer is {e}"))?;
    semp_ok(&answer)?;
    answer
        .get("data")
        .and_then(|d| d.get("state"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| "the Message VPN answer has no data.state".into())
}

/// The figures of a `MsgVpnQueue` answer (absent figures count as 0, as KEDA's decoder).
///
/// # Errors
/// Not JSON, not a successful SEMP answer, a figure that is not an integer.
pub fn queue_figures(body: &[u8]) -> Result<QueueFigures, String> {
    let answer: Value = crate::remote::from_json(body).map_err(|e| format!("the answer is {e}"))?;
    semp_ok(&answer)?;
    let int = |v: Option<&Value>, what: &str| -> Result<i64, String> {
        match v {
            None | Some(Value::Null) => Ok(0),
            Some(v) => v
                .as_i64()
                .ok_or_else(|| format!("{what} is not an integer")),
        }
    };
    let data = answer.get("data");
    Ok(QueueFigures {
        msg_count: int(
            answer
                .get("collections")
                .and_then(|c| c.get("msgs"))
                .and_then(|m| m.get("count")),
            "collections.msgs.count",
        )?,
        msg_spool_usage: int(
            data.and_then(|d| d.get("msgSpoolUsage")),
            "data.msgSpoolUsage",
        )?,
        msg_rx_rate: int(
            data.and_then(|d| d.get("averageRxMsgRate")),
            "data.averageRxMsgRate",
        )?,
    })
}

impl SolaceConfig {
    /// The queue's figures from the first broker, from the last one to answer on (shared by
    /// the triggers on the same brokers), whose Message VPN is up.
    ///
    /// # Errors
    /// Every broker failed: the error lists each one's failure (statuses and our words, never
    /// the broker's text).
    pub async fn figures(
        &self,
        servers: &Servers,
        read: ReadCtx<'_>,
    ) -> Result<QueueFigures, ScalerError> {
        let brokers = self.brokers.len().min(servers.len());
        let n = brokers.max(1);
        let first = servers.position().load(Ordering::Relaxed) % n;
        let headers = HeaderMap::new();
        let mut failures = Vec::new();
        for i in 0..brokers {
            let index = (first + i) % n;
            let (Some((base, _)), Some(client)) = (self.brokers.get(index), servers.get(index))
            else {
                continue;
            };
            let state_url = semp_url(base, &self.vpn, None);
            let state = match client.get(state_url.clone(), &headers).await {
                Ok(body) => vpn_state(&body),
                Err(e) => Err(e.classify().to_string()),
            };
            match state {
                Ok(state) if state == "up" => {}
                Ok(_) => {
                    failures.push(format!(
                        "broker {} ({}): Message VPN \"{}\" is not up",
                        index + 1,
                        describe_url(base),
                        self.vpn
                    ));
                    continue;
                }
                Err(why) => {
                    failures.push(format!(
                        "broker {} ({}): Message VPN state: {why}",
                        index + 1,
                        describe_url(base)
                    ));
                    continue;
                }
            }
            let queue_url = semp_url(base, &self.vpn, Some(&self.queue));
            let figures = match client.get(queue_url, &headers).await {
                Ok(body) => queue_figures(&body),
                Err(e) => Err(e.classify().to_string()),
            };
            match figures {
                Ok(figures) => {
                    servers.position().store(index, Ordering::Relaxed);
                    return Ok(figures);
                }
                Err(why) => failures.push(format!(
                    "broker {} ({}): queue \"{}\": {why}",
                    index + 1,
                    describe_url(base),
                    self.queue
                )),
            }
        }
        Err(ScalerError::Query {
            trigger: read.trigger.clone(),
            operation: format!(
                "reading queue \"{}\" (queueName) of Message VPN \"{}\" (messageVpn) over SEMP",
                self.queue, self.vpn
            ),
            source: Failure::local(failures.join("; ")),
        })
    }
}

#[async_trait]
impl PooledSource for SolaceConfig {
    type Key = ServersKey;
    type Client = Servers;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        SolaceConfig::parse(ctx)
    }

    fn client_key(&self) -> Result<ServersKey, MetadataError> {
        Ok(self.brokers.iter().map(|(_, key)| key.clone()).collect())
    }

    async fn connect(
        ctx: &ScalerContext,
        key: ServersKey,
    ) -> Result<Lease<ServersKey, Servers>, ScalerError> {
        http_servers::lease(ctx, key).await
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        self.metrics
            .iter()
            .map(|m| {
                external_metric_spec(m.name.clone(), metric_target(self.metric_type, m.target))
            })
            .collect()
    }

    async fn read(
        &self,
        servers: &Servers,
        read: ReadCtx<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let figures = self.figures(servers, read).await?;
        let metric = self
            .metrics
            .iter()
            .find(|m| m.name == metric_name)
            .ok_or_else(|| {
                read.unexpected(format!("no metric named {metric_name} in this trigger"))
            })?;
        let a = &self.activation;
        #[allow(clippy::cast_precision_loss)]
        let value = metric.figure.of(&figures) as f64;
        Ok(MetricsAndActivity {
            values: vec![MetricValue::new(metric_name, value)],
            active: figures.msg_count > a.msg_count
                || figures.msg_spool_usage > a.msg_spool_usage
                || figures.msg_rx_rate > a.msg_rx_rate,
        })
    }
}

#[cfg(test)]
mod tests;
