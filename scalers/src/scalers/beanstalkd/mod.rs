//! `beanstalkd`: scales on the jobs of a beanstalkd tube (ready + reserved, plus delayed with
//! `includeDelayed`), read with `stats-tube` over one connection per server shared by every
//! trigger on it (KEDA's `pkg/scalers/beanstalkd_scaler.go`).

pub mod protocol;

use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use self::protocol::{BeanstalkdClient, BeanstalkdError, TubeStats};
use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError};
use crate::metadata::{MAX_TIMEOUT_MS, MetadataParser, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pool::Lease;
use crate::pooled::{PooledSource, ReadCtx};
use crate::remote::Classify;
use crate::scaler::MetricsAndActivity;
use crate::scalers::rabbitmq::config::KedaDuration;
use crate::scalers::rabbitmq::url::query_escape;

const SERVER: Param = Param::required("server");
const TUBE: Param = Param::required("tube");
const VALUE: Param = Param::required("value");
const ACTIVATION_VALUE: Param = Param::optional("activationValue").default("0");
const INCLUDE_DELAYED: Param = Param::optional("includeDelayed").default("false");
/// KEDA reads it as a Go `time.Duration`: `30s`, or a bare number of milliseconds. Its
/// default `30` is therefore 30 ms.
const TIMEOUT: Param = Param::optional("timeout")
    .default("30")
    .range(1.0, MAX_TIMEOUT_MS);

/// The parameters of `beanstalkd`.
pub const PARAMS: &[Param] = &[
    SERVER,
    TUBE,
    VALUE,
    ACTIVATION_VALUE,
    INCLUDE_DELAYED,
    TIMEOUT,
];

/// The longest wait for the answer to `stats-tube` (beanstalkd answers it from memory).
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest tube name beanstalkd accepts.
const MAX_TUBE_NAME: usize = 200;

/// What a pooled connection is shared by: the server and the connect timeout.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BeanstalkdKey {
    /// `host:port`.
    pub server: String,
    /// `timeout`: how long connecting may take.
    pub connect_timeout: Duration,
}

/// The parsed trigger.
#[derive(Clone, Debug, PartialEq)]
pub struct BeanstalkdConfig {
    /// The server and connect timeout.
    pub key: BeanstalkdKey,
    /// The tube.
    pub tube: String,
    /// Target per replica.
    pub value: f64,
    /// Active iff the job count is above this.
    pub activation_value: f64,
    /// Count delayed jobs too.
    pub include_delayed: bool,
    /// `s<i>-beanstalkd-<QueryEscape(tube)>`, normalized.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
}

/// beanstalkd's rule for names: 1 to 200 bytes of letters, digits and `-+/;.$_()`, not
/// starting with `-`. Checked here so a name can never carry a second command.
fn valid_tube_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TUBE_NAME
        && !name.starts_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-+/;.$_()".contains(c))
}

/// `host:port` with a port, as `net.Dial` needs it.
fn parse_server(p: &MetadataParser<'_>) -> Result<String, MetadataError> {
    let server: String = p.get(&SERVER)?;
    let valid = server.rsplit_once(':').is_some_and(|(host, port)| {
        !host.is_empty()
            && !host.chars().any(char::is_whitespace)
            && port.parse::<u16>().is_ok_and(|p| p != 0)
    });
    if !valid {
        return Err(p.rule(format!(
            "parameter \"server\": \"{server}\" is not a host:port address (beanstalkd listens on 11300 by default)"
        )));
    }
    Ok(server)
}

impl BeanstalkdConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// Invalid or missing parameters.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let tube: String = p.get(&TUBE)?;
            if !valid_tube_name(&tube) {
                return Err(p.rule(format!(
                    "parameter \"tube\": \"{tube}\" is not a beanstalkd tube name (1 to 200 letters, digits or -+/;.$_(), not starting with -)"
                )));
            }
            let timeout: KedaDuration = p.get(&TIMEOUT)?;
            Ok(Self {
                key: BeanstalkdKey {
                    server: parse_server(p)?,
                    connect_timeout: timeout.0,
                },
                metric_name: ctx.metric_name(&format!("beanstalkd-{}", query_escape(&tube))),
                tube,
                value: p.get(&VALUE)?,
                activation_value: p.get(&ACTIVATION_VALUE)?,
                include_delayed: p.get(&INCLUDE_DELAYED)?,
                metric_type,
            })
        })?)
    }

    /// The jobs the trigger counts: ready + reserved (+ delayed).
    pub fn jobs(&self, stats: &TubeStats) -> i64 {
        let mut jobs = stats.ready.saturating_add(stats.reserved);
        if self.include_delayed {
            jobs = jobs.saturating_add(stats.delayed);
        }
        jobs
    }

    fn describe(&self) -> String {
        self.key.describe()
    }
}

impl BeanstalkdKey {
    fn describe(&self) -> String {
        format!("beanstalkd at {} (parameter \"server\")", self.server)
    }
}

#[async_trait]
impl PooledSource for BeanstalkdConfig {
    type Key = BeanstalkdKey;
    type Client = BeanstalkdClient;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        BeanstalkdConfig::parse(ctx)
    }

    fn client_key(&self) -> Result<BeanstalkdKey, MetadataError> {
        Ok(self.key.clone())
    }

    /// The shared connection to the server, connecting if it is the first trigger there (KEDA
    /// also dials when it builds the scaler).
    async fn connect(
        ctx: &ScalerContext,
        key: BeanstalkdKey,
    ) -> Result<Lease<BeanstalkdKey, BeanstalkdClient>, ScalerError> {
        ctx.clients
            .pool::<BeanstalkdKey, BeanstalkdClient>()
            .get_or_connect(key.clone(), || {
                BeanstalkdClient::connect(&key.server, key.connect_timeout, RESPONSE_TIMEOUT)
            })
            .await
            .map_err(|e| ScalerError::Connect {
                trigger: ctx.trigger_id(),
                target: key.describe(),
                source: e.classify(),
            })
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target_milli(self.metric_type, self.value),
        )]
    }

    /// The tube's stats; a tube that does not exist has none of its jobs, as in KEDA.
    async fn read(
        &self,
        client: &BeanstalkdClient,
        read: ReadCtx<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let stats = client
            .stats_tube(&self.tube)
            .await
            .map_err(|e: BeanstalkdError| ScalerError::Query {
                trigger: read.trigger.clone(),
                operation: format!(
                    "reading the stats of tube \"{}\" from {}",
                    self.tube,
                    self.describe()
                ),
                source: e.classify(),
            })?
            .unwrap_or_default();
        let jobs = self.jobs(&stats);
        Ok(MetricsAndActivity::single(
            metric_name,
            jobs as f64,
            self.activation_value,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::test_context;

    fn parse(metadata: &[(&str, &str)]) -> Result<BeanstalkdConfig, String> {
        BeanstalkdConfig::parse(&test_context("beanstalkd", 1, metadata, &[], &[]))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_and_the_metric_name_follow_keda() {
        let c = parse(&[
            ("server", "beanstalkd.jobs:11300"),
            ("tube", "emails/eu(1)"),
            ("value", "5.5"),
        ])
        .unwrap();
        // QueryEscape, then NormalizeString: `/` -> %2F -> -2F, `(` -> %28 -> -28.
        assert_eq!(c.metric_name, "s1-beanstalkd-emails-2Feu-281-29");
        assert_eq!(c.key.connect_timeout, Duration::from_millis(30));
        assert_eq!((c.value, c.activation_value), (5.5, 0.0));
        assert!(!c.include_delayed);
        let c = parse(&[
            ("server", "b:11300"),
            ("tube", "t"),
            ("value", "1"),
            ("timeout", "10s"),
            ("includeDelayed", "true"),
            ("activationValue", "2"),
        ])
        .unwrap();
        assert_eq!(c.key.connect_timeout, Duration::from_secs(10));
        assert!(c.include_delayed);
        assert_eq!(c.activation_value, 2.0);
    }

    #[test]
    fn jobs_are_ready_plus_reserved_and_delayed_only_when_asked() {
        let stats = TubeStats {
            ready: 3,
            reserved: 2,
            delayed: 7,
            urgent: 1,
            buried: 9,
            total: 40,
        };
        let base = [("server", "b:11300"), ("tube", "t"), ("value", "1")];
        assert_eq!(parse(&base).unwrap().jobs(&stats), 5);
        let mut delayed = base.to_vec();
        delayed.push(("includeDelayed", "true"));
        assert_eq!(parse(&delayed).unwrap().jobs(&stats), 12);
    }

    #[test]
    fn errors_name_the_trigger_and_the_parameter() {
        for (metadata, expected) in [
            (
                vec![("tube", "t"), ("value", "1")],
                r#"trigger 1 (beanstalkd): missing required parameter "server""#,
            ),
            (
                vec![("server", "b:11300"), ("value", "1")],
                r#"trigger 1 (beanstalkd): missing required parameter "tube""#,
            ),
            (
                vec![("server", "b:11300"), ("tube", "t")],
                r#"trigger 1 (beanstalkd): missing required parameter "value""#,
            ),
            (
                vec![("server", "b"), ("tube", "t"), ("value", "1")],
                r#"trigger 1 (beanstalkd): parameter "server": "b" is not a host:port address (beanstalkd listens on 11300 by default)"#,
            ),
            (
                vec![("server", "b:11300"), ("tube", "a\r\nquit"), ("value", "1")],
                "trigger 1 (beanstalkd): parameter \"tube\": \"a\r\nquit\" is not a beanstalkd tube name (1 to 200 letters, digits or -+/;.$_(), not starting with -)",
            ),
            (
                vec![("server", "b:11300"), ("tube", "-t"), ("value", "1")],
                "trigger 1 (beanstalkd): parameter \"tube\": \"-t\" is not a beanstalkd tube name (1 to 200 letters, digits or -+/;.$_(), not starting with -)",
            ),
            (
                vec![("server", "b:11300"), ("tube", "t"), ("value", "x")],
                r#"trigger 1 (beanstalkd): parameter "value": "x" is not a valid number"#,
            ),
            (
                vec![
                    ("server", "b:11300"),
                    ("tube", "t"),
                    ("value", "1"),
                    ("timeout", "0"),
                ],
                r#"trigger 1 (beanstalkd): parameter "timeout": "0" is not between 1ms and 1h"#,
            ),
            (
                vec![
                    ("server", "b:11300"),
                    ("tube", "t"),
                    ("value", "1"),
                    ("includeDelayed", "yes"),
                ],
                r#"trigger 1 (beanstalkd): parameter "includeDelayed": "yes" is not a valid boolean"#,
            ),
        ] {
            assert_eq!(parse(&metadata).unwrap_err(), expected, "{metadata:?}");
        }
    }
}
