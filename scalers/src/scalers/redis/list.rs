//! `redis`, `redis-cluster`, `redis-sentinel`: scale on the length of a list (or the size of
//! a set, sorted set or hash).

use async_trait::async_trait;
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use super::connection::{self, Held, RedisSettings, Topology};
use super::notify;
use crate::context::ScalerContext;
use crate::error::{ScalerError, TriggerId};
use crate::metadata::Param;
use crate::metric::{MetricTargetType, external_metric_spec, metric_target};
use crate::remote::Classify;
use crate::scaler::{BuiltScaler, MetricsAndActivity, Scaler};

const LIST_NAME: Param = Param::required("listName");
const LIST_LENGTH: Param = Param::optional("listLength").default("5");
const ACTIVATION_LIST_LENGTH: Param = Param::optional("activationListLength").default("0");

/// The parameters of the Redis list scalers.
pub const PARAMS: &[Param] = &[LIST_NAME, LIST_LENGTH, ACTIVATION_LIST_LENGTH];

/// Reads the size of the key whatever its type, atomically: lists (and missing keys) by LLEN,
/// sorted sets by ZCARD, sets by SCARD, hashes by HLEN. Any other type is returned as its name
/// so the caller can report it.
const LENGTH_SCRIPT: &str = r"
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'list' or kind == 'none' then return redis.call('LLEN', KEYS[1]) end
if kind == 'zset' then return redis.call('ZCARD', KEYS[1]) end
if kind == 'set' then return redis.call('SCARD', KEYS[1]) end
if kind == 'hash' then return redis.call('HLEN', KEYS[1]) end
return kind
";

/// The parsed trigger.
#[derive(Clone, Debug, PartialEq)]
pub struct RedisListConfig {
    /// Where to connect.
    pub connection: RedisSettings,
    /// The key.
    pub list_name: String,
    /// Target per replica.
    pub list_length: i64,
    /// Active iff the length is above this.
    pub activation_list_length: i64,
    /// `s<i>-redis-<listName>`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
}

impl RedisListConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// Invalid or missing parameters.
    pub fn parse(ctx: &ScalerContext, topology: Topology) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let list_name: String = p.get(&LIST_NAME)?;
            Ok(Self {
                connection: RedisSettings::parse(p, topology)?,
                metric_name: ctx.metric_name(&format!("redis-{list_name}")),
                list_name,
                list_length: p.get(&LIST_LENGTH)?,
                activation_list_length: p.get(&ACTIVATION_LIST_LENGTH)?,
                metric_type,
            })
        })?)
    }
}

/// A Redis list scaler holding a shared connection.
pub struct RedisListScaler {
    config: RedisListConfig,
    trigger: TriggerId,
    client: Held,
    /// Keyspace notifications of the list's key, until `close`.
    notify: std::sync::Mutex<Option<notify::Registration>>,
}

impl RedisListScaler {
    /// Parses the trigger and leases the shared connection for its settings.
    ///
    /// # Errors
    /// Invalid metadata, or the first connection to these settings fails.
    pub async fn build(ctx: &ScalerContext, topology: Topology) -> Result<Self, ScalerError> {
        let config = RedisListConfig::parse(ctx, topology)?;
        let lease = connection::lease(ctx, &config.connection).await?;
        let notify = notify::register(ctx, &config.connection, &config.list_name).await;
        Ok(Self {
            config,
            trigger: ctx.trigger_id(),
            client: Held::new(lease),
            notify: std::sync::Mutex::new(notify),
        })
    }

    /// The current length of the key.
    ///
    /// # Errors
    /// The query fails, or the key has an unsupported type.
    pub async fn length(&self) -> Result<i64, ScalerError> {
        let client = self.client.client().ok_or_else(|| ScalerError::Closed {
            trigger: self.trigger.clone(),
        })?;
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(LENGTH_SCRIPT).arg(1).arg(&self.config.list_name);
        let reply: redis::Value = client.query(&cmd).await.map_err(|e| ScalerError::Query {
            trigger: self.trigger.clone(),
            operation: format!("reading the length of \"{}\"", self.config.list_name),
            source: e.classify(),
        })?;
        match reply {
            redis::Value::Int(n) => Ok(n),
            other => {
                // The script answers the key's TYPE; only Redis' own type names are shown.
                let named = match &other {
                    redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                    redis::Value::SimpleString(s) => s.clone(),
                    _ => String::new(),
                };
                let kind = [
                    "string",
                    "stream",
                    "ReJSON-RL",
                    "vectorset",
                    "MBbloom--",
                    "TSDB-TYPE",
                ]
                .into_iter()
                .find(|t| *t == named)
                .unwrap_or("key of another type");
                Err(ScalerError::Unexpected {
                    trigger: self.trigger.clone(),
                    message: format!(
                        "key \"{}\" is a {kind}; only list, set, sorted set (zset) and hash keys are supported",
                        self.config.list_name
                    ),
                })
            }
        }
    }
}

#[async_trait]
impl Scaler for RedisListScaler {
    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.config.metric_name.clone(),
            metric_target(self.config.metric_type, self.config.list_length),
        )]
    }

    async fn metrics_and_activity(
        &self,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let length = self.length().await?;
        Ok(MetricsAndActivity {
            values: vec![crate::MetricValue::new(metric_name, length as f64)],
            active: length > self.config.activation_list_length,
        })
    }

    async fn close(&self) {
        self.client.release();
        notify::release(&self.notify);
    }

    fn wake(&self) -> Option<crate::wake::Wake> {
        notify::wake_of(&self.notify)
    }
}

/// Factory of `redis`.
///
/// # Errors
/// See [`RedisListScaler::build`].
pub async fn build_redis(ctx: ScalerContext) -> Result<BuiltScaler, ScalerError> {
    Ok(BuiltScaler::Pull(Box::new(
        RedisListScaler::build(&ctx, Topology::Standalone).await?,
    )))
}

/// Factory of `redis-cluster`.
///
/// # Errors
/// See [`RedisListScaler::build`].
pub async fn build_redis_cluster(ctx: ScalerContext) -> Result<BuiltScaler, ScalerError> {
    Ok(BuiltScaler::Pull(Box::new(
        RedisListScaler::build(&ctx, Topology::Cluster).await?,
    )))
}

/// Factory of `redis-sentinel`.
///
/// # Errors
/// See [`RedisListScaler::build`].
pub async fn build_redis_sentinel(ctx: ScalerContext) -> Result<BuiltScaler, ScalerError> {
    Ok(BuiltScaler::Pull(Box::new(
        RedisListScaler::build(&ctx, Topology::Sentinel).await?,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(index: usize, metadata: &[(&str, &str)]) -> ScalerContext {
        ScalerContext {
            metadata: metadata
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..ScalerContext::new("redis", index)
        }
    }

    #[test]
    fn defaults_and_metric_name() {
        let c = RedisListConfig::parse(
            &ctx(2, &[("address", "r:6379"), ("listName", "my.list/x")]),
            Topology::Standalone,
        )
        .unwrap();
        assert_eq!((c.list_length, c.activation_list_length), (5, 0));
        assert_eq!(c.metric_name, "s2-redis-my-list-x");
        assert_eq!(c.connection.database, 0);
    }

    #[test]
    fn parse_errors() {
        for (metadata, expected) in [
            (
                vec![("address", "r:6379")],
                r#"trigger 0 (redis): missing required parameter "listName""#,
            ),
            (
                vec![
                    ("address", "r:6379"),
                    ("listName", "l"),
                    ("listLength", "abc"),
                ],
                r#"trigger 0 (redis): parameter "listLength": "abc" is not a valid integer"#,
            ),
            (
                vec![
                    ("address", "r:6379"),
                    ("listName", "l"),
                    ("activationListLength", "1.5"),
                ],
                r#"trigger 0 (redis): parameter "activationListLength": "1.5" is not a valid integer"#,
            ),
        ] {
            let err = RedisListConfig::parse(&ctx(0, &metadata), Topology::Standalone).unwrap_err();
            assert_eq!(err.to_string(), expected);
        }
    }
}
