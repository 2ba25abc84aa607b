//! What the SQL scalers (`postgresql`, `mysql`) share: the scaler itself ([`SqlScaler`], over
//! a [`SqlDatabase`] each of them implements), their timeouts, the rule for what a query must
//! return, and how errors are worded and scrubbed of credentials.

use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::context::ScalerContext;
use crate::error::{BoxError, MetadataError, MetadataErrorKind, ScalerError, TriggerId};
use crate::metadata::{MetadataParser, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pool::Held;
use crate::remote::Failure;
use crate::scaler::{BuiltScaler, MetricsAndActivity, Scaler};
use crate::scalers::rabbitmq::url::anonymize;
use crate::secret::Secret;
use crate::wake::Wake;

/// Bound of opening a connection (and of waiting for a free pooled one).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Bound of one query. On expiry the server is asked to cancel the statement. Below the
/// operator's 30 s bound of a scaler read, so this error, which names the query, is the one
/// reported.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(20);

/// How many connections a pool opens at most per connection string (pgxpool's default is
/// `max(4, CPUs)`); PostgreSQL's `pool_max_conns` changes it.
pub const DEFAULT_POOL_SIZE: usize = 4;

/// The first row's single column, as the query answered it.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// No row at all.
    NoRow,
    /// The first row has this many columns (not 1).
    Columns(usize),
    /// The value is SQL NULL.
    Null,
    /// The value is of a type that is not a number, or text that is not one.
    NotANumber {
        /// The column's name.
        column: String,
        /// What it is instead, e.g. `of type text` or `"abc"`.
        what: String,
    },
    /// A number.
    Number(f64),
}

impl Answer {
    /// The number, or what the user must change in `query`.
    ///
    /// # Errors
    /// Anything but [`Answer::Number`], worded for the user.
    pub fn number(self) -> Result<f64, String> {
        match self {
            Self::Number(n) => Ok(n),
            Self::NoRow => Err("the query (parameter \"query\") returned no row; it must return one row with one number".to_string()),
            Self::Columns(n) => Err(format!(
                "the query (parameter \"query\") returned {n} columns; it must return exactly one, a number"
            )),
            Self::Null => Err("the query (parameter \"query\") returned NULL; wrap the expression in COALESCE(..., 0)".to_string()),
            Self::NotANumber { column, what } => Err(format!(
                "the query (parameter \"query\") returned column \"{column}\" {what}, not a number; cast it to a numeric type"
            )),
        }
    }
}

/// A failed query of `trigger` against `server`, its cause scrubbed of credentials (URL user
/// info and every one of `secrets`).
fn query_error(
    trigger: &TriggerId,
    server: &str,
    error: &(dyn std::error::Error + 'static),
    secrets: &[&str],
) -> ScalerError {
    ScalerError::Query {
        trigger: trigger.clone(),
        operation: format!("running the query (parameter \"query\") on {server}"),
        source: Failure::of_scrubbed("the database", error, |raw| anonymize(raw, secrets)),
    }
}

/// A query that ran out of `time`.
fn timeout_error(trigger: &TriggerId, server: &str, time: Duration) -> ScalerError {
    ScalerError::Query {
        trigger: trigger.clone(),
        operation: format!("running the query (parameter \"query\") on {server}"),
        source: Failure::local(format!(
            "it did not finish within {time:?} and was cancelled"
        )),
    }
}

/// An answer that is not one number.
fn answer_error(trigger: &TriggerId, server: &str, message: String) -> ScalerError {
    ScalerError::Unexpected {
        trigger: trigger.clone(),
        message: format!("{message} (on {server})"),
    }
}

/// Why a query gave no answer.
#[derive(Debug)]
pub enum QueryFailure {
    /// No connection could be had, or the server refused the query; the cause, not yet
    /// scrubbed of credentials.
    Failed(BoxError),
    /// The query ran out of time (and was stopped on the server).
    TimedOut,
}

/// A database a SQL scaler asks: the connection settings of one trigger, which open the pool
/// that every trigger with the same settings shares.
pub trait SqlDatabase: Clone + Send + Sync + Sized + 'static {
    /// The connections of one connection string.
    type Pool: Send + Sync + 'static;

    /// Parses the trigger.
    ///
    /// # Errors
    /// A parameter is missing or malformed.
    fn parse(ctx: &ScalerContext) -> Result<SqlQueryConfig<Self>, ScalerError>;

    /// What pools are shared by: every setting, the password included.
    fn key(&self) -> Secret;

    /// The server for messages, e.g. `PostgreSQL at db:5432/jobs` (never credentials).
    fn server(&self) -> &str;

    /// What to scrub from messages besides URL user info (the password).
    fn secrets(&self) -> Vec<&str>;

    /// Opens the pool and one connection of it, so that a wrong address or password fails
    /// when the trigger is built.
    fn connect(&self) -> impl Future<Output = Result<Self::Pool, Failure>> + Send;

    /// Runs `query` on a connection of `pool` and reads the first row; past `timeout` the
    /// statement is stopped on the server.
    fn query(
        pool: &Self::Pool,
        query: &str,
        timeout: Duration,
    ) -> impl Future<Output = Result<Answer, QueryFailure>> + Send;

    /// The trigger's wake-ups ([`crate::wake`]) and the registration that keeps them, when its
    /// settings ask for them (PostgreSQL's `listenChannel`). Never blocks on the network.
    /// Default: none (polled only).
    fn wake(&self, _ctx: &ScalerContext) -> impl Future<Output = Option<WakeHandle>> + Send {
        async { None }
    }
}

/// A trigger's wake-ups and what keeps them coming (dropped at `close`).
pub type WakeHandle = (Wake, Box<dyn Send + Sync>);

/// A parsed SQL trigger.
#[derive(Clone, Debug)]
pub struct SqlQueryConfig<D> {
    /// Where to connect.
    pub database: D,
    /// The parameters `database` came from, named in connection errors so that the user knows
    /// what to fix: `parameter "connection"` or `parameters "host", "port", ...`.
    pub connection_params: &'static str,
    /// The query; it must return one number.
    pub query: String,
    /// Target per replica (0 only when the trigger feeds `scalingModifiers`).
    pub target: f64,
    /// Active iff the value is above this.
    pub activation: f64,
    /// The metric's name.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
}

/// A SQL scaler: the number `query` returns, from the pool shared by its connection settings.
pub struct SqlScaler<D: SqlDatabase> {
    config: SqlQueryConfig<D>,
    trigger: TriggerId,
    pool: Held<Secret, D::Pool>,
    query_timeout: Duration,
    /// The wake-ups, until `close`.
    wake: std::sync::Mutex<Option<WakeHandle>>,
}

impl<D: SqlDatabase> SqlScaler<D> {
    /// Parses the trigger and leases the pool of its connection settings, connecting if it is
    /// the first trigger with them.
    ///
    /// # Errors
    /// Invalid metadata; the server cannot be reached or refuses the credentials.
    pub async fn build(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let config = D::parse(ctx)?;
        let database = &config.database;
        let lease = ctx
            .clients
            .pool::<Secret, D::Pool>()
            .get_or_connect(database.key(), || database.connect())
            .await
            .map_err(|e| ScalerError::Connect {
                trigger: ctx.trigger_id(),
                target: format!("{} ({})", database.server(), config.connection_params),
                source: e,
            })?;
        let wake = config.database.wake(ctx).await;
        Ok(Self {
            trigger: ctx.trigger_id(),
            pool: Held::new(lease),
            config,
            query_timeout: QUERY_TIMEOUT,
            wake: std::sync::Mutex::new(wake),
        })
    }

    /// The parsed trigger.
    pub fn config(&self) -> &SqlQueryConfig<D> {
        &self.config
    }

    /// The same scaler with another bound on queries than [`QUERY_TIMEOUT`].
    pub fn with_query_timeout(self, query_timeout: Duration) -> Self {
        Self {
            query_timeout,
            ..self
        }
    }

    /// The number the query returns now.
    ///
    /// # Errors
    /// No connection can be had; the query fails, times out or does not return one number;
    /// the scaler is closed.
    pub async fn value(&self) -> Result<f64, ScalerError> {
        let pool = self.pool.client().ok_or_else(|| ScalerError::Closed {
            trigger: self.trigger.clone(),
        })?;
        let database = &self.config.database;
        let server = database.server();
        match D::query(&pool, &self.config.query, self.query_timeout).await {
            Ok(answer) => answer
                .number()
                .map_err(|message| answer_error(&self.trigger, server, message)),
            Err(QueryFailure::Failed(e)) => {
                Err(query_error(&self.trigger, server, &*e, &database.secrets()))
            }
            Err(QueryFailure::TimedOut) => {
                Err(timeout_error(&self.trigger, server, self.query_timeout))
            }
        }
    }
}

#[async_trait]
impl<D: SqlDatabase> Scaler for SqlScaler<D> {
    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.config.metric_name.clone(),
            metric_target_milli(self.config.metric_type, self.config.target),
        )]
    }

    async fn metrics_and_activity(
        &self,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let value = self.value().await?;
        Ok(MetricsAndActivity::single(
            metric_name,
            value,
            self.config.activation,
        ))
    }

    async fn close(&self) {
        self.pool.release();
        let wake = self
            .wake
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        drop(wake);
    }

    /// MySQL, and PostgreSQL without `listenChannel`: polled sooner after a sign of activity.
    fn adaptive_polling(&self) -> bool {
        self.wake
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_none()
    }

    fn wake(&self) -> Option<Wake> {
        self.wake
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map(|(wake, _)| wake.clone())
    }
}

/// The factory of a SQL trigger type.
///
/// # Errors
/// See [`SqlScaler::build`].
pub async fn build<D: SqlDatabase>(ctx: ScalerContext) -> Result<BuiltScaler, ScalerError> {
    Ok(BuiltScaler::Pull(Box::new(
        SqlScaler::<D>::build(&ctx).await?,
    )))
}

/// KEDA's rule for `targetQueryValue` (and MySQL's `queryValue`): required and not 0, unless
/// the trigger only feeds `scalingModifiers`; also more than 0 here, since the HPA rejects
/// other targets.
pub fn target_value(
    p: &MetadataParser<'_>,
    param: &Param,
    as_metric_source: bool,
) -> Result<f64, MetadataError> {
    let Some(found) = p.find(param)? else {
        if as_metric_source {
            return Ok(0.0);
        }
        return Err(p.error(MetadataErrorKind::Missing {
            param: param.name.to_string(),
        }));
    };
    let value: f64 = p.parse(param, found)?;
    if value <= 0.0 && !(as_metric_source && value == 0.0) {
        return Err(p.invalid(param, found, "greater than 0"));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_that_are_not_one_number_say_what_to_change() {
        let rows = [
            (Answer::Number(2.5), Ok(2.5)),
            (
                Answer::NoRow,
                Err(
                    "the query (parameter \"query\") returned no row; it must return one row with one number",
                ),
            ),
            (
                Answer::Columns(2),
                Err(
                    "the query (parameter \"query\") returned 2 columns; it must return exactly one, a number",
                ),
            ),
            (
                Answer::Null,
                Err(
                    "the query (parameter \"query\") returned NULL; wrap the expression in COALESCE(..., 0)",
                ),
            ),
            (
                Answer::NotANumber {
                    column: "state".into(),
                    what: "of type text".into(),
                },
                Err(
                    "the query (parameter \"query\") returned column \"state\" of type text, not a number; cast it to a numeric type",
                ),
            ),
        ];
        for (answer, expected) in rows {
            assert_eq!(
                answer.clone().number(),
                expected.map_err(str::to_string),
                "{answer:?}"
            );
        }
    }

    #[test]
    fn causes_are_scrubbed_of_secrets() {
        let err = std::io::Error::other("connect postgres://app:hunter22@db failed; hunter22");
        let trigger = TriggerId {
            index: 1,
            trigger_type: "postgresql".into(),
        };
        let message =
            query_error(&trigger, "PostgreSQL at db:5432", &err, &["hunter22"]).to_string();
        assert!(!message.contains("hunter22"), "{message}");
        assert!(message.starts_with(
            "trigger 1 (postgresql): running the query (parameter \"query\") on PostgreSQL at db:5432 failed:"
        ));
    }
}
