//! `nats-jetstream`: scales on the lag of a JetStream consumer (`num_pending +
//! num_ack_pending`), read from the NATS server's HTTP monitoring endpoint. Compatible with
//! KEDA's `nats-jetstream` trigger (`pkg/scalers/nats_jetstream_scaler.go`), including its
//! clustered mode: in a JetStream cluster only the consumer's leader has its exact state, so the
//! scaler finds the leader's node, asks it, and keeps asking it while it stays the leader.
//!
//! One HTTP client per monitoring endpoint (and timeout), shared by every trigger on it
//! through [`crate::http_client`]. A publish to the stream wakes the trigger's loop early
//! ([`wake`]): one core NATS subscription connection per server for every trigger on it.

pub mod monitoring;
pub mod wake;

use std::time::Duration;

use async_trait::async_trait;
use http::HeaderMap;
use k8s_openapi::api::autoscaling::v2::MetricSpec;
use serde::de::DeserializeOwned;
use url::Url;

use self::monitoring::{Endpoint, Jsz, Target, Varz};
use crate::authentication::HttpAuth;
use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError, TriggerId};
use crate::http_client::{self, HttpClient, HttpClientKey};
use crate::metadata::{AUTH_METADATA, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target};
use crate::pool::Held;
use crate::remote::{Classify, Failure};
use crate::scaler::{BuiltScaler, MetricsAndActivity, Scaler};

const ACCOUNT: Param = Param::optional("account").order(AUTH_METADATA);
const ACCOUNT_ID: Param = Param::optional("accountID").order(AUTH_METADATA);
const STREAM: Param = Param::required("stream");
const CONSUMER: Param = Param::required("consumer");
const LAG_THRESHOLD: Param = Param::optional("lagThreshold")
    .default("10")
    .range(1.0, f64::MAX);
const ACTIVATION_LAG_THRESHOLD: Param = Param::optional("activationLagThreshold").default("0");
const USE_HTTPS: Param = Param::optional("useHttps").default("false");
const MONITORING_ENDPOINT: Param =
    Param::required("natsServerMonitoringEndpoint").order(AUTH_METADATA);

/// Every parameter of the `nats-jetstream` trigger.
pub const PARAMS: &[Param] = &[
    MONITORING_ENDPOINT,
    ACCOUNT,
    ACCOUNT_ID,
    STREAM,
    CONSUMER,
    LAG_THRESHOLD,
    ACTIVATION_LAG_THRESHOLD,
    USE_HTTPS,
];

/// The parsed trigger.
///
/// KEDA's `parseNATSJetStreamMetadata` puts `natsServerMonitoringEndpoint` into the URL's
/// host as written; one that is not a `host:port` fails only when it sends the request, at
/// every fetch. So here it leaves the trigger built, and every read fails with the error naming
/// the parameter ([`NatsJetStreamConfig::endpoint`]); the object's other triggers keep scaling
/// it (issue 29, row 3).
#[derive(Clone, Debug, PartialEq)]
pub struct NatsJetStreamConfig {
    /// `natsServerMonitoringEndpoint` with the scheme `useHttps` selects, or why it cannot be
    /// used: each read fails with this error.
    pub endpoint: Result<Endpoint, MetadataError>,
    /// The account, stream and consumer.
    pub target: Target,
    /// Target lag per replica.
    pub lag_threshold: i64,
    /// Active iff the lag is above this.
    pub activation_lag_threshold: i64,
    /// HTTP timeout (the operator's `KEDA_HTTP_DEFAULT_TIMEOUT`).
    pub timeout: Duration,
    /// `s<index>-nats-jetstream-<stream>`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
}

impl NatsJetStreamConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// A parameter is missing or malformed; neither `account` nor `accountID` is given. A
    /// `natsServerMonitoringEndpoint` that is not a `host:port` is no error here: it is kept in
    /// [`NatsJetStreamConfig::endpoint`] for the reads.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            p.one_of(&[&ACCOUNT, &ACCOUNT_ID])?;
            let account: Option<String> = p.get_opt(&ACCOUNT)?;
            let account_id: Option<String> = p.get_opt(&ACCOUNT_ID)?;
            let stream: String = p.get(&STREAM)?;
            let https: bool = p.get(&USE_HTTPS)?;
            let raw_endpoint: String = p.get(&MONITORING_ENDPOINT)?;
            let endpoint = Endpoint::parse(&raw_endpoint, https).map_err(|why| {
                p.rule(format!(
                    "parameter \"natsServerMonitoringEndpoint\" {why}, e.g. nats.nats.svc:8222"
                ))
            });
            let account = account.unwrap_or_default();
            Ok(Self {
                endpoint,
                target: Target {
                    account_id: account_id.unwrap_or_else(|| account.clone()),
                    account,
                    consumer: p.get(&CONSUMER)?,
                    stream: stream.clone(),
                },
                lag_threshold: p.get(&LAG_THRESHOLD)?,
                activation_lag_threshold: p.get(&ACTIVATION_LAG_THRESHOLD)?,
                timeout: ctx.global_http_timeout,
                metric_name: ctx.metric_name(&format!("nats-jetstream-{stream}")),
                metric_type,
            })
        })?)
    }
}

/// The consumer's leader as last found: its server name and its `/jsz`.
#[derive(Clone, Debug, PartialEq)]
struct Leader {
    name: String,
    jsz: Url,
}

/// A `nats-jetstream` scaler.
pub struct NatsJetStreamScaler {
    config: NatsJetStreamConfig,
    trigger: TriggerId,
    /// The lease on the endpoint's client; `None` when the endpoint cannot be used (every read
    /// fails with its error).
    client: Option<Held<HttpClientKey, HttpClient>>,
    /// Only ever replaced whole, after the requests of a read, so a read dropped half-way
    /// leaves it as it was.
    leader: std::sync::Mutex<Option<Leader>>,
    /// The stream's registration on the server's shared subscription connection ([`wake`]);
    /// `None` when the endpoint cannot be used, and after `close`.
    wake: std::sync::Mutex<Option<wake::Registration>>,
}

impl NatsJetStreamScaler {
    /// Parses the trigger and leases the HTTP client of its endpoint.
    ///
    /// # Errors
    /// Invalid metadata; the HTTP client cannot be built.
    pub async fn build(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let config = NatsJetStreamConfig::parse(ctx)?;
        let client = match &config.endpoint {
            Ok(endpoint) => {
                let varz = endpoint.varz().map_err(|e| ScalerError::Connect {
                    trigger: ctx.trigger_id(),
                    target: format!("NATS monitoring at {}", endpoint.base()),
                    source: Failure::local(e),
                })?;
                let key = HttpClientKey {
                    origin: http_client::origin(&varz),
                    auth: HttpAuth::default(),
                    timeout: config.timeout,
                };
                Some(Held::new(http_client::lease(ctx, key).await?))
            }
            Err(_) => None,
        };
        let registration = match &config.endpoint {
            Ok(endpoint) => wake::register(ctx, endpoint, &config.target, config.timeout).await,
            Err(_) => None,
        };
        Ok(Self {
            config,
            trigger: ctx.trigger_id(),
            client,
            leader: std::sync::Mutex::new(None),
            wake: std::sync::Mutex::new(registration),
        })
    }

    /// The parsed trigger.
    pub fn config(&self) -> &NatsJetStreamConfig {
        &self.config
    }

    fn cached_leader(&self) -> Option<Leader> {
        self.leader
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn set_leader(&self, leader: Option<Leader>) {
        *self
            .leader
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = leader;
    }

    /// The endpoint, or the error every read fails with.
    fn endpoint(&self) -> Result<&Endpoint, ScalerError> {
        self.config
            .endpoint
            .as_ref()
            .map_err(|e| ScalerError::Metadata(e.clone()))
    }

    /// `scheme://host:port` of the endpoint, for messages.
    fn base(&self) -> String {
        self.config
            .endpoint
            .as_ref()
            .map_or_else(|_| String::new(), Endpoint::base)
    }

    fn query_error(&self, source: Failure) -> ScalerError {
        let t = &self.config.target;
        ScalerError::Query {
            trigger: self.trigger.clone(),
            operation: format!(
                "reading consumer \"{}\" of stream \"{}\" from {} (parameter \"natsServerMonitoringEndpoint\")",
                t.consumer,
                t.stream,
                self.base()
            ),
            source,
        }
    }

    /// The consumer's lag now, from the consumer leader's node in a cluster (KEDA's
    /// `getNATSJetstreamMonitoringData`).
    ///
    /// # Errors
    /// A node cannot be reached or answers something that is not its monitoring JSON; the
    /// stream is not there; in a cluster, no node leads the consumer; the scaler is closed;
    /// `natsServerMonitoringEndpoint` cannot be used (at every read, naming the parameter).
    pub async fn lag(&self) -> Result<u64, ScalerError> {
        let endpoint = self.endpoint()?;
        let client =
            self.client
                .as_ref()
                .and_then(Held::client)
                .ok_or_else(|| ScalerError::Closed {
                    trigger: self.trigger.clone(),
                })?;
        let target = &self.config.target;
        let cached = self.cached_leader();
        let first_url = match &cached {
            Some(leader) => leader.jsz.clone(),
            None => endpoint
                .jsz(&target.account_id)
                .map_err(|e| self.query_error(Failure::local(e)))?,
        };
        let first: Jsz = get_json(&client, &first_url)
            .await
            .map_err(|e| self.query_error(e))?;
        let leader_now = target.consumer(&first).map(|c| c.cluster.leader.clone());
        if let Some(cached) = &cached {
            if leader_now.as_deref() == Some(cached.name.as_str()) {
                // Asked the leader, and it still leads.
                return self.lag_in(&first);
            }
            self.set_leader(None);
        }
        if first.meta_cluster.cluster_size <= 1 {
            return self.lag_in(&first);
        }
        let (leader, jsz) = self.find_leader(&client, endpoint).await?;
        let lag = self.lag_in(&jsz)?;
        self.set_leader(Some(leader));
        Ok(lag)
    }

    fn lag_in(&self, jsz: &Jsz) -> Result<u64, ScalerError> {
        let t = &self.config.target;
        t.lag(jsz).ok_or_else(|| ScalerError::Unexpected {
            trigger: self.trigger.clone(),
            message: format!(
                "stream \"{}\" (parameter \"stream\") was not found in account \"{}\" at {}",
                t.stream,
                t.account_id,
                self.base()
            ),
        })
    }

    /// Asks every node of the cluster, in KEDA's order, until one reports that it leads the
    /// consumer; returns it and its answer.
    async fn find_leader(
        &self,
        client: &HttpClient,
        endpoint: &Endpoint,
    ) -> Result<(Leader, Jsz), ScalerError> {
        let target = &self.config.target;
        let varz_url = endpoint
            .varz()
            .map_err(|e| self.query_error(Failure::local(e)))?;
        let varz: Varz = get_json(client, &varz_url)
            .await
            .map_err(|e| self.query_error(e))?;
        let nodes = endpoint
            .cluster_nodes(&varz, &target.account_id)
            .map_err(|e| {
                self.query_error(Failure::answer(
                    "the /varz answer does not describe the cluster's nodes",
                    e.as_bytes(),
                ))
            })?;
        for node in nodes {
            let name = match (&node.name, &node.varz) {
                (Some(name), _) => name.clone(),
                (None, Some(url)) => {
                    get_json::<Varz>(client, url)
                        .await
                        .map_err(|e| self.query_error(e))?
                        .server_name
                }
                (None, None) => continue,
            };
            let jsz: Jsz = get_json(client, &node.jsz)
                .await
                .map_err(|e| self.query_error(e))?;
            if target
                .consumer(&jsz)
                .is_some_and(|c| !name.is_empty() && c.cluster.leader == name)
            {
                return Ok((
                    Leader {
                        name,
                        jsz: node.jsz,
                    },
                    jsz,
                ));
            }
        }
        Err(ScalerError::Unexpected {
            trigger: self.trigger.clone(),
            message: format!(
                "no node of the JetStream cluster at {} leads consumer \"{}\" (parameter \"consumer\") of stream \"{}\"",
                endpoint.base(),
                target.consumer,
                target.stream
            ),
        })
    }
}

/// GETs `url` and decodes its JSON body. The failure does not name `url`: the nodes' URLs
/// come from the server's own answers ([`crate::remote`]).
async fn get_json<T: DeserializeOwned>(client: &HttpClient, url: &Url) -> Result<T, Failure> {
    let body = client
        .get(url.clone(), &HeaderMap::new())
        .await
        .map_err(|e| e.classify())?;
    crate::remote::from_json(&body).map_err(|e| {
        Failure::answer(
            format!(
                "the answer of {} is not the monitoring JSON expected: {}",
                url.path(),
                crate::remote::json_error(&e)
            ),
            &body,
        )
    })
}

#[async_trait]
impl Scaler for NatsJetStreamScaler {
    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.config.metric_name.clone(),
            metric_target(self.config.metric_type, self.config.lag_threshold),
        )]
    }

    async fn metrics_and_activity(
        &self,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let lag = self.lag().await?;
        // Compared as integers, as KEDA does; the lag of a real stream is far below 2^53, so
        // the float value is exact.
        let active = i128::from(lag) > i128::from(self.config.activation_lag_threshold);
        Ok(MetricsAndActivity {
            values: vec![crate::MetricValue::new(metric_name, lag as f64)],
            active,
        })
    }

    async fn close(&self) {
        if let Some(client) = &self.client {
            client.release();
        }
        let registration = self
            .wake
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        drop(registration);
    }

    fn wake(&self) -> Option<crate::wake::Wake> {
        self.wake
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map(wake::Registration::wake)
    }
}

/// Factory of `nats-jetstream`.
///
/// # Errors
/// See [`NatsJetStreamScaler::build`].
pub async fn build(ctx: ScalerContext) -> Result<BuiltScaler, ScalerError> {
    Ok(BuiltScaler::Pull(Box::new(
        NatsJetStreamScaler::build(&ctx).await?,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> ScalerContext {
        crate::context::test_context("nats-jetstream", 2, metadata, &[], auth)
    }

    const BASE: &[(&str, &str)] = &[
        ("natsServerMonitoringEndpoint", "nats.nats.svc:8222"),
        ("account", "$G"),
        ("stream", "orders.v1"),
        ("consumer", "workers"),
    ];

    #[test]
    fn defaults_and_metric_name_follow_keda() {
        let config = NatsJetStreamConfig::parse(&ctx(BASE, &[])).unwrap();
        assert_eq!(config.metric_name, "s2-nats-jetstream-orders-v1");
        assert_eq!(config.lag_threshold, 10);
        assert_eq!(config.activation_lag_threshold, 0);
        assert_eq!(config.target.account_id, "$G");
        assert_eq!(
            config.endpoint.as_ref().map(Endpoint::base).as_deref(),
            Ok("http://nats.nats.svc:8222")
        );
        let target = metric_target(config.metric_type, config.lag_threshold);
        assert_eq!(target.average_value.map(|q| q.0), Some("10".to_string()));
    }

    #[test]
    fn auth_params_win_over_metadata_and_account_id_is_asked_for() {
        let config = NatsJetStreamConfig::parse(&ctx(
            BASE,
            &[
                ("natsServerMonitoringEndpoint", "secure.nats:8222"),
                ("accountID", "ACCOUNTKEY"),
            ],
        ))
        .unwrap();
        assert_eq!(
            config.endpoint.as_ref().map(Endpoint::base).as_deref(),
            Ok("http://secure.nats:8222")
        );
        assert_eq!(config.target.account_id, "ACCOUNTKEY");
        assert_eq!(config.target.account, "$G");
        let https =
            NatsJetStreamConfig::parse(&ctx(&[BASE, &[("useHttps", "true")]].concat(), &[]))
                .unwrap();
        assert_eq!(
            https.endpoint.as_ref().map(Endpoint::base).as_deref(),
            Ok("https://nats.nats.svc:8222")
        );
    }

    #[test]
    fn bad_metadata_names_the_parameter() {
        let without = |key: &str| -> Vec<(&str, &str)> {
            BASE.iter().copied().filter(|(k, _)| *k != key).collect()
        };
        let cases: Vec<(Vec<(&str, &str)>, &str)> = vec![
            (
                without("account"),
                r#"trigger 2 (nats-jetstream): missing required parameter: one of "account" and "accountID""#,
            ),
            (
                without("stream"),
                r#"trigger 2 (nats-jetstream): missing required parameter "stream""#,
            ),
            (
                without("consumer"),
                r#"trigger 2 (nats-jetstream): missing required parameter "consumer""#,
            ),
            (
                without("natsServerMonitoringEndpoint"),
                r#"trigger 2 (nats-jetstream): missing required parameter "natsServerMonitoringEndpoint""#,
            ),
            (
                [BASE, &[("lagThreshold", "ten")]].concat(),
                r#"trigger 2 (nats-jetstream): parameter "lagThreshold": "ten" is not a valid integer"#,
            ),
            (
                [BASE, &[("lagThreshold", "0")]].concat(),
                r#"trigger 2 (nats-jetstream): parameter "lagThreshold": "0" is not at least 1"#,
            ),
            (
                [BASE, &[("useHttps", "yes")]].concat(),
                r#"trigger 2 (nats-jetstream): parameter "useHttps": "yes" is not a valid boolean"#,
            ),
        ];
        for (metadata, expected) in cases {
            let err = NatsJetStreamConfig::parse(&ctx(&metadata, &[])).unwrap_err();
            assert_eq!(err.to_string(), expected);
        }
    }

    /// KEDA's `parseNATSJetStreamMetadata` puts `natsServerMonitoringEndpoint` into the URL as
    /// written; Go fails the request at every fetch. So the trigger builds, its metric is in the
    /// HPA, and every read fails naming the parameter (issue 29, row 3).
    #[tokio::test]
    async fn a_bad_monitoring_endpoint_builds_and_fails_at_every_read_naming_it() {
        let with = |endpoint: &'static str| -> Vec<(&'static str, &'static str)> {
            BASE.iter()
                .copied()
                .filter(|(k, _)| *k != "natsServerMonitoringEndpoint")
                .chain([("natsServerMonitoringEndpoint", endpoint)])
                .collect()
        };
        let rows = [
            (
                "http://nats:8222",
                r#"trigger 2 (nats-jetstream): parameter "natsServerMonitoringEndpoint" must be host:port without a scheme (set useHttps for https), e.g. nats.nats.svc:8222"#,
            ),
            (
                "nats:8222/jsz",
                r#"trigger 2 (nats-jetstream): parameter "natsServerMonitoringEndpoint" must be host:port, without a path, query or user, e.g. nats.nats.svc:8222"#,
            ),
            (
                "admin:s3cret@nats:8222",
                r#"trigger 2 (nats-jetstream): parameter "natsServerMonitoringEndpoint" must be host:port, without a path, query or user, e.g. nats.nats.svc:8222"#,
            ),
            (
                "nats:99999",
                r#"trigger 2 (nats-jetstream): parameter "natsServerMonitoringEndpoint" is not a valid host:port: invalid port number, e.g. nats.nats.svc:8222"#,
            ),
        ];
        for (endpoint, expected) in rows {
            let metadata = with(endpoint);
            let config =
                NatsJetStreamConfig::parse(&ctx(&metadata, &[])).expect("builds, as in KEDA");
            assert_eq!(
                config.endpoint.as_ref().expect_err("unusable").to_string(),
                expected,
                "{endpoint}"
            );
            let scaler = NatsJetStreamScaler::build(&ctx(&metadata, &[]))
                .await
                .expect("builds, as in KEDA");
            assert_eq!(
                scaler.metric_specs().len(),
                1,
                "{endpoint}: the HPA gets the metric"
            );
            for _ in 0..2 {
                let err = scaler
                    .metrics_and_activity("s2-nats-jetstream-orders-v1")
                    .await
                    .expect_err("every read fails");
                assert_eq!(err.to_string(), expected, "{endpoint}");
                assert!(!err.to_string().contains("s3cret"), "{endpoint}");
            }
            scaler.close().await;
        }
    }
}
