//! `redis-streams`, `redis-cluster-streams`, `redis-sentinel-streams`: scale on a stream's
//! length, a consumer group's pending entries, or a consumer group's lag.

use std::collections::HashMap;

use async_trait::async_trait;
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use super::connection::{self, Held, RedisClient, RedisSettings, Topology};
use super::{notify, xread};
use crate::context::ScalerContext;
use crate::error::{ScalerError, TriggerId};
use crate::metadata::Param;
use crate::metric::{MetricTargetType, external_metric_spec, metric_target};
use crate::remote::Classify;
use crate::scaler::{BuiltScaler, MetricValue, MetricsAndActivity, Scaler};

const STREAM: Param = Param::required("stream");
const CONSUMER_GROUP: Param = Param::optional("consumerGroup");
const PENDING_ENTRIES_COUNT: Param = Param::optional("pendingEntriesCount").default("5");
const STREAM_LENGTH: Param = Param::optional("streamLength").default("5");
const LAG_COUNT: Param = Param::optional("lagCount");
const ACTIVATION_LAG_COUNT: Param = Param::optional("activationLagCount").default("0");

/// The parameters of the Redis stream scalers.
pub const PARAMS: &[Param] = &[
    STREAM,
    CONSUMER_GROUP,
    PENDING_ENTRIES_COUNT,
    STREAM_LENGTH,
    LAG_COUNT,
    ACTIVATION_LAG_COUNT,
];

/// What is measured, chosen by which parameters are set (KEDA's rule).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamMode {
    /// No `consumerGroup`: `XLEN`, target `streamLength`.
    Length,
    /// `consumerGroup` without `lagCount`: `XPENDING` count, target `pendingEntriesCount`.
    Pending {
        /// The group.
        group: String,
    },
    /// `consumerGroup` and a non-zero `lagCount`: the group's `lag` from `XINFO GROUPS` (Redis
    /// 7+), or the stream length when the group does not exist yet; 0 when the stream does not
    /// exist or Redis cannot tell the lag (a nil `lag`), as KEDA; target `lagCount`.
    Lag {
        /// The group.
        group: String,
    },
}

/// The parsed trigger.
#[derive(Clone, Debug, PartialEq)]
pub struct RedisStreamsConfig {
    /// Where to connect.
    pub connection: RedisSettings,
    /// The stream key.
    pub stream: String,
    /// What is measured.
    pub mode: StreamMode,
    /// Target per replica of the measured count.
    pub target: i64,
    /// Active iff the count is above this (every mode).
    pub activation_lag_count: i64,
    /// `s<i>-redis-streams-<stream>`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
}

impl RedisStreamsConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// Invalid or missing parameters.
    pub fn parse(ctx: &ScalerContext, topology: Topology) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let stream: String = p.get(&STREAM)?;
            let group: Option<String> = p.get_opt(&CONSUMER_GROUP)?;
            let lag: Option<i64> = p.get_opt(&LAG_COUNT)?;
            // Parse every count so a typo is reported even where the mode ignores it.
            let pending: i64 = p.get(&PENDING_ENTRIES_COUNT)?;
            let length: i64 = p.get(&STREAM_LENGTH)?;
            // As KEDA (a typed field whose zero value means unset), `lagCount: "0"` is unset.
            let lag = lag.filter(|&lag| lag != 0);
            let (mode, target) = match (group, lag) {
                (Some(group), Some(lag)) => (StreamMode::Lag { group }, lag),
                (Some(group), None) => (StreamMode::Pending { group }, pending),
                // As in KEDA, lagCount without consumerGroup measures the stream length.
                (None, _) => (StreamMode::Length, length),
            };
            Ok(Self {
                connection: RedisSettings::parse(p, topology)?,
                metric_name: ctx.metric_name(&format!("redis-streams-{stream}")),
                stream,
                mode,
                target,
                activation_lag_count: p.get(&ACTIVATION_LAG_COUNT)?,
                metric_type,
            })
        })?)
    }
}

/// A Redis streams scaler holding a shared connection.
pub struct RedisStreamsScaler {
    config: RedisStreamsConfig,
    trigger: TriggerId,
    client: Held,
    /// Keyspace notifications of the stream's key (`XADD`), until `close`.
    notify: std::sync::Mutex<Option<notify::Registration>>,
    /// The blocking `XREAD` of the stream (servers without keyspace notifications), until
    /// `close`.
    xread: std::sync::Mutex<Option<xread::Registration>>,
}

impl RedisStreamsScaler {
    /// Parses the trigger and leases the shared connection for its settings.
    ///
    /// # Errors
    /// Invalid metadata, or the first connection to these settings fails.
    pub async fn build(ctx: &ScalerContext, topology: Topology) -> Result<Self, ScalerError> {
        let config = RedisStreamsConfig::parse(ctx, topology)?;
        let lease = connection::lease(ctx, &config.connection).await?;
        let notify = notify::register(ctx, &config.connection, &config.stream).await;
        let client = Held::new(lease);
        let xread = xread::register(
            ctx,
            &config.connection,
            &config.stream,
            client.client().as_ref(),
        )
        .await;
        Ok(Self {
            config,
            trigger: ctx.trigger_id(),
            client,
            notify: std::sync::Mutex::new(notify),
            xread: std::sync::Mutex::new(xread),
        })
    }

    fn query_error(&self, operation: String) -> impl FnOnce(redis::RedisError) -> ScalerError {
        let trigger = self.trigger.clone();
        move |e| ScalerError::Query {
            trigger,
            operation,
            source: e.classify(),
        }
    }

    async fn xlen(&self, client: &RedisClient) -> Result<i64, ScalerError> {
        let mut cmd = redis::cmd("XLEN");
        cmd.arg(&self.config.stream);
        client
            .query(&cmd)
            .await
            .map_err(self.query_error(format!("XLEN \"{}\"", self.config.stream)))
    }

    async fn exists(&self, client: &RedisClient) -> Result<bool, ScalerError> {
        let mut cmd = redis::cmd("EXISTS");
        cmd.arg(&self.config.stream);
        let n: i64 = client
            .query(&cmd)
            .await
            .map_err(self.query_error(format!("EXISTS \"{}\"", self.config.stream)))?;
        Ok(n > 0)
    }

    /// The count the current mode measures.
    ///
    /// # Errors
    /// The query fails; the group does not exist (pending mode); Redis is older than 7.0 (lag
    /// mode).
    pub async fn count(&self) -> Result<i64, ScalerError> {
        let client = self.client.client().ok_or_else(|| ScalerError::Closed {
            trigger: self.trigger.clone(),
        })?;
        let stream = &self.config.stream;
        match &self.config.mode {
            StreamMode::Length => self.xlen(&client).await,
            StreamMode::Pending { group } => {
                let mut cmd = redis::cmd("XPENDING");
                cmd.arg(stream).arg(group);
                // Summary form: [count, smallest id, greatest id, consumers].
                let reply: Vec<redis::Value> = client
                    .query(&cmd)
                    .await
                    .map_err(self.query_error(format!("XPENDING \"{stream}\" \"{group}\"")))?;
                match reply.first() {
                    Some(redis::Value::Int(n)) => Ok(*n),
                    other => Err(ScalerError::Unexpected {
                        trigger: self.trigger.clone(),
                        message: format!(
                            "XPENDING \"{stream}\" \"{group}\" answered {}",
                            reply_kind(other)
                        ),
                    }),
                }
            }
            StreamMode::Lag { group } => {
                let mut cmd = redis::cmd("XINFO");
                cmd.arg("GROUPS").arg(stream);
                let operation = format!("XINFO GROUPS \"{stream}\"");
                // One map per group. Read raw: Redis 7 sends `lag` as nil when it cannot tell
                // it, Redis 6 sends no `lag` at all; a typed reply would not tell them apart.
                let reply: Vec<HashMap<String, redis::Value>> = match client.query(&cmd).await {
                    Ok(reply) => reply,
                    Err(e) => {
                        // KEDA checks EXISTS first: a stream that does not exist has no lag.
                        if self.exists(&client).await? {
                            return Err(self.query_error(operation)(e));
                        }
                        return Ok(0);
                    }
                };
                let found = reply.iter().find(|g| {
                    g.get("name").is_some_and(|n| {
                        redis::from_redis_value_ref::<String>(n).is_ok_and(|n| &n == group)
                    })
                });
                match found {
                    Some(g) => match g.get("lag") {
                        // KEDA (go-redis) reads a nil lag as 0: entries were deleted past the
                        // group's last delivered one, so Redis cannot count.
                        Some(redis::Value::Nil) => Ok(0),
                        Some(redis::Value::Int(lag)) => Ok(*lag),
                        Some(other) => Err(ScalerError::Unexpected {
                            trigger: self.trigger.clone(),
                            message: format!(
                                "{operation} answered a lag that is {}",
                                reply_kind(Some(other))
                            ),
                        }),
                        None => Err(ScalerError::Unexpected {
                            trigger: self.trigger.clone(),
                            message: format!(
                                "Redis does not report the lag of group \"{group}\" on stream \"{stream}\": lagCount needs Redis 7.0 or newer"
                            ),
                        }),
                    },
                    // The producer created the stream but no consumer created the group yet
                    // (scaled to zero): everything in the stream is lag.
                    None => self.xlen(&client).await,
                }
            }
        }
    }
}

#[async_trait]
impl Scaler for RedisStreamsScaler {
    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.config.metric_name.clone(),
            metric_target(self.config.metric_type, self.config.target),
        )]
    }

    async fn metrics_and_activity(
        &self,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let count = self.count().await?;
        Ok(MetricsAndActivity {
            values: vec![MetricValue::new(metric_name, count as f64)],
            active: count > self.config.activation_lag_count,
        })
    }

    async fn close(&self) {
        self.client.release();
        notify::release(&self.notify);
        let xread = self
            .xread
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        drop(xread);
    }

    fn wake(&self) -> Option<crate::wake::Wake> {
        let xread = self
            .xread
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map(xread::Registration::wake);
        crate::wake::Wake::either(notify::wake_of(&self.notify), xread)
    }
}

/// Factory of `redis-streams`.
///
/// # Errors
/// See [`RedisStreamsScaler::build`].
pub async fn build_redis_streams(ctx: ScalerContext) -> Result<BuiltScaler, ScalerError> {
    Ok(BuiltScaler::Pull(Box::new(
        RedisStreamsScaler::build(&ctx, Topology::Standalone).await?,
    )))
}

/// Factory of `redis-cluster-streams`.
///
/// # Errors
/// See [`RedisStreamsScaler::build`].
pub async fn build_redis_cluster_streams(ctx: ScalerContext) -> Result<BuiltScaler, ScalerError> {
    Ok(BuiltScaler::Pull(Box::new(
        RedisStreamsScaler::build(&ctx, Topology::Cluster).await?,
    )))
}

/// Factory of `redis-sentinel-streams`.
///
/// # Errors
/// See [`RedisStreamsScaler::build`].
pub async fn build_redis_sentinel_streams(ctx: ScalerContext) -> Result<BuiltScaler, ScalerError> {
    Ok(BuiltScaler::Pull(Box::new(
        RedisStreamsScaler::build(&ctx, Topology::Sentinel).await?,
    )))
}

/// What a reply is, in Redis' words, without its content (the server's text).
fn reply_kind(reply: Option<&redis::Value>) -> &'static str {
    match reply {
        None => "nothing",
        Some(redis::Value::Nil) => "nil",
        Some(redis::Value::Int(_)) => "an integer",
        Some(redis::Value::BulkString(_) | redis::Value::SimpleString(_)) => "a string",
        Some(redis::Value::Array(_) | redis::Value::Set(_)) => "an array",
        Some(redis::Value::Map(_)) => "a map",
        Some(redis::Value::ServerError(_)) => "an error",
        Some(_) => "a reply of another type",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(metadata: &[(&str, &str)]) -> Result<RedisStreamsConfig, String> {
        let ctx = ScalerContext {
            metadata: metadata
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..ScalerContext::new("redis-streams", 0)
        };
        RedisStreamsConfig::parse(&ctx, Topology::Standalone).map_err(|e| e.to_string())
    }

    #[test]
    fn mode_follows_keda_rules() {
        let base = [("address", "r:6379"), ("stream", "orders")];
        let c = parse(&base).unwrap();
        assert_eq!((c.mode, c.target), (StreamMode::Length, 5));
        assert_eq!(c.metric_name, "s0-redis-streams-orders");

        let c = parse(&[
            base[0],
            base[1],
            ("consumerGroup", "g"),
            ("pendingEntriesCount", "7"),
        ])
        .unwrap();
        assert_eq!(
            (c.mode, c.target),
            (StreamMode::Pending { group: "g".into() }, 7)
        );

        let c = parse(&[
            base[0],
            base[1],
            ("consumerGroup", "g"),
            ("lagCount", "3"),
            ("activationLagCount", "2"),
        ])
        .unwrap();
        assert_eq!(
            (c.mode, c.target, c.activation_lag_count),
            (StreamMode::Lag { group: "g".into() }, 3, 2)
        );

        let c = parse(&[base[0], base[1], ("streamLength", "9"), ("lagCount", "3")]).unwrap();
        assert_eq!((c.mode, c.target), (StreamMode::Length, 9));
    }

    #[test]
    fn a_lag_count_of_zero_is_unset_as_in_keda() {
        let c = parse(&[
            ("address", "r:6379"),
            ("stream", "orders"),
            ("consumerGroup", "g"),
            ("lagCount", "0"),
        ])
        .unwrap();
        assert_eq!(
            (c.mode, c.target),
            (StreamMode::Pending { group: "g".into() }, 5),
            "pending mode with the default pendingEntriesCount"
        );
    }

    #[test]
    fn parse_errors_name_the_parameter() {
        assert_eq!(
            parse(&[("address", "r:6379")]).unwrap_err(),
            r#"trigger 0 (redis-streams): missing required parameter "stream""#
        );
        assert_eq!(
            parse(&[
                ("address", "r:6379"),
                ("stream", "s"),
                ("pendingEntriesCount", "x")
            ])
            .unwrap_err(),
            r#"trigger 0 (redis-streams): parameter "pendingEntriesCount": "x" is not a valid integer"#
        );
    }
}
