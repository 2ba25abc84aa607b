//! `kafka`: scale on the lag of a consumer group (KEDA's `pkg/scalers/kafka_scaler.go`), read
//! through librdkafka (rdkafka). Triggers share one client per cluster; see [`client`] for why
//! a small per-group offset reader exists beside it.

pub mod client;
pub mod lag;
pub mod oauth;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::autoscaling::v2::MetricSpec;
use keda_api::metric_name;

use self::client::{
    ClusterSettings, GroupKey, GroupReader, KafkaCallError, KafkaCluster, Sasl, SaslMechanism,
    SaslSettings, TlsSettings,
};
use self::lag::{
    LagRules, OffsetResetPolicy, PartitionOffsets, PreviousOffsets, TopicPartition,
    parse_partition_limitation, total_lag,
};
use self::oauth::{BearerSettings, TokenProvider};
use crate::aws::{self, AwsSettings};
use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError, Source, TriggerId};
use crate::metadata::{AUTH, MetadataParser, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target};
use crate::pool::Lease;
use crate::remote::Classify;
use crate::scaler::{BuiltScaler, MetricValue, MetricsAndActivity, Scaler};
use crate::secret::Secret;

/// Lookup order: metadata, then `<name>FromEnv` (KEDA's `triggerMetadata;resolvedEnv`).
const METADATA_ENV: &[Source] = &[Source::Metadata, Source::Env];
/// Lookup order: metadata, then TriggerAuthentication (KEDA's `triggerMetadata;authParams`).
const METADATA_AUTH: &[Source] = &[Source::Metadata, Source::Auth];

const BOOTSTRAP_SERVERS: Param = Param::required("bootstrapServers").order(METADATA_ENV);
const CONSUMER_GROUP: Param = Param::required("consumerGroup").order(METADATA_ENV);
const TOPIC: Param = Param::optional("topic").order(METADATA_ENV);
const PARTITION_LIMITATION: Param = Param::optional("partitionLimitation");
const LAG_THRESHOLD: Param = Param::optional("lagThreshold")
    .default("10")
    .range(1.0, f64::MAX);
const ACTIVATION_LAG_THRESHOLD: Param = Param::optional("activationLagThreshold")
    .default("0")
    .range(0.0, f64::MAX);
const OFFSET_RESET_POLICY: Param = Param::optional("offsetResetPolicy")
    .default("latest")
    .allowed(&["latest", "earliest"]);
const ALLOW_IDLE_CONSUMERS: Param = Param::optional("allowIdleConsumers").default("false");
const EXCLUDE_PERSISTENT_LAG: Param = Param::optional("excludePersistentLag").default("false");
const SCALE_TO_ZERO_ON_INVALID_OFFSET: Param =
    Param::optional("scaleToZeroOnInvalidOffset").default("false");
const LIMIT_TO_PARTITIONS_WITH_LAG: Param =
    Param::optional("limitToPartitionsWithLag").default("false");
const ENSURE_EVEN_DISTRIBUTION: Param =
    Param::optional("ensureEvenDistributionOfPartitions").default("false");
const FULL_METADATA: Param = Param::optional("fullMetadata").default("true");
const VERSION: Param = Param::optional("version");

const TLS: Param = Param::optional("tls")
    .order(METADATA_AUTH)
    .default("disable")
    .allowed(&["enable", "disable"]);
const UNSAFE_SSL: Param = Param::optional("unsafeSsl").default("false");
const CA: Param = Param::optional("ca").order(AUTH).secret();
const CERT: Param = Param::optional("cert").order(AUTH).secret();
const KEY: Param = Param::optional("key").order(AUTH).secret();
const KEY_PASSWORD: Param = Param::optional("keyPassword").order(AUTH).secret();

const SASL: Param = Param::optional("sasl")
    .order(METADATA_AUTH)
    .default("none")
    .allowed(&[
        "none",
        "plaintext",
        "scram_sha256",
        "scram_sha512",
        "oauthbearer",
        "gssapi",
    ]);
const USERNAME: Param = Param::optional("username").order(AUTH);
const PASSWORD: Param = Param::optional("password").order(AUTH).secret();
const SASL_TOKEN_PROVIDER: Param = Param::optional("saslTokenProvider")
    .order(METADATA_AUTH)
    .allowed(&["bearer", "aws_msk_iam"]);
const SCOPES: Param = Param::optional("scopes").order(AUTH);
const OAUTH_TOKEN_ENDPOINT_URI: Param = Param::optional("oauthTokenEndpointUri").order(AUTH);
const OAUTH_EXTENSIONS: Param = Param::optional("oauthExtensions").order(AUTH);
const KEYTAB: Param = Param::optional("keytab").order(AUTH).secret();
const REALM: Param = Param::optional("realm").order(AUTH);
const KERBEROS_CONFIG: Param = Param::optional("kerberosConfig").order(AUTH);
const KERBEROS_SERVICE_NAME: Param = Param::optional("kerberosServiceName").order(AUTH);
const KERBEROS_DISABLE_FAST: Param = Param::optional("kerberosDisableFAST").order(AUTH);
const AWS_REGION: Param = Param::optional("awsRegion");

/// Every parameter of the `kafka` trigger, as KEDA names them.
pub const PARAMS: &[Param] = &[
    BOOTSTRAP_SERVERS,
    CONSUMER_GROUP,
    TOPIC,
    PARTITION_LIMITATION,
    LAG_THRESHOLD,
    ACTIVATION_LAG_THRESHOLD,
    OFFSET_RESET_POLICY,
    ALLOW_IDLE_CONSUMERS,
    EXCLUDE_PERSISTENT_LAG,
    SCALE_TO_ZERO_ON_INVALID_OFFSET,
    LIMIT_TO_PARTITIONS_WITH_LAG,
    ENSURE_EVEN_DISTRIBUTION,
    FULL_METADATA,
    VERSION,
    TLS,
    UNSAFE_SSL,
    CA,
    CERT,
    KEY,
    KEY_PASSWORD,
    SASL,
    USERNAME,
    PASSWORD,
    SASL_TOKEN_PROVIDER,
    SCOPES,
    OAUTH_TOKEN_ENDPOINT_URI,
    OAUTH_EXTENSIONS,
    KEYTAB,
    REALM,
    KERBEROS_CONFIG,
    KERBEROS_SERVICE_NAME,
    KERBEROS_DISABLE_FAST,
    AWS_REGION,
    aws::IDENTITY_OWNER,
    aws::AWS_ROLE_ARN,
    aws::AWS_EXTERNAL_ID,
    aws::AWS_ACCESS_KEY_ID_AUTH,
    aws::AWS_SECRET_ACCESS_KEY_AUTH,
    aws::AWS_SESSION_TOKEN,
    aws::AWS_ACCESS_KEY_ID_METADATA,
    aws::AWS_SECRET_ACCESS_KEY_ENV,
];

/// The parsed trigger.
#[derive(Clone, Debug, PartialEq)]
pub struct KafkaConfig {
    /// Where to connect: the key of the shared cluster client.
    pub cluster: ClusterSettings,
    /// `consumerGroup`.
    pub group: String,
    /// `topic`; `None` = every topic the group has committed offsets for.
    pub topic: Option<String>,
    /// `partitionLimitation`: the partitions to watch (all when `None`; ignored without a
    /// topic, as in KEDA).
    pub partition_limitation: Option<Vec<i32>>,
    /// `activationLagThreshold`.
    pub activation_lag_threshold: i64,
    /// The lag rules (`lagThreshold`, `offsetResetPolicy`, the caps, ...).
    pub rules: LagRules,
    /// `s<i>-kafka-<topic>` or `s<i>-kafka-<group>-topics`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
}

impl KafkaConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// Invalid or missing parameters, contradicting options, or an authentication mode
    /// keda-rs does not support.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        let (mut config, msk) = ctx.parse(|p| {
            let group: String = p.get(&CONSUMER_GROUP)?;
            let topic: Option<String> = p.get_opt(&TOPIC)?;
            let rules = LagRules {
                lag_threshold: p.get(&LAG_THRESHOLD)?,
                offset_reset_policy: match p.get::<String>(&OFFSET_RESET_POLICY)?.as_str() {
                    "earliest" => OffsetResetPolicy::Earliest,
                    _ => OffsetResetPolicy::Latest,
                },
                scale_to_zero_on_invalid_offset: p.get(&SCALE_TO_ZERO_ON_INVALID_OFFSET)?,
                allow_idle_consumers: p.get(&ALLOW_IDLE_CONSUMERS)?,
                exclude_persistent_lag: p.get(&EXCLUDE_PERSISTENT_LAG)?,
                limit_to_partitions_with_lag: p.get(&LIMIT_TO_PARTITIONS_WITH_LAG)?,
                ensure_even_distribution: p.get(&ENSURE_EVEN_DISTRIBUTION)?,
            };
            check_rules(p, &rules, topic.is_some())?;
            let partition_limitation = match p.get_opt::<String>(&PARTITION_LIMITATION)? {
                Some(raw) if topic.is_some() => Some(
                    parse_partition_limitation(&raw)
                        .map_err(|e| p.rule(format!("parameter \"partitionLimitation\": {e}")))?,
                ),
                _ => None,
            };
            // Accepted for compatibility, without effect: librdkafka negotiates the protocol
            // version with each broker and always fetches metadata only for the topics asked.
            let _: bool = p.get(&FULL_METADATA)?;
            let _: Option<String> = p.get_opt(&VERSION)?;
            let name = match &topic {
                Some(topic) => format!("kafka-{topic}"),
                None => format!("kafka-{group}-topics"),
            };
            let (cluster, msk) = cluster_settings(p)?;
            let config = Self {
                cluster,
                metric_name: metric_name::with_index(
                    ctx.trigger_index,
                    &metric_name::normalize(&name),
                ),
                group,
                topic,
                partition_limitation,
                activation_lag_threshold: p.get(&ACTIVATION_LAG_THRESHOLD)?,
                rules,
                metric_type,
            };
            Ok((config, msk))
        })?;
        if let Some(settings) = msk {
            // The credentials by KEDA's rules for AWS (`awsRoleArn`, an access key, or the
            // operator's own with `identityOwner: operator`).
            let key = aws::client::client_key(ctx, aws::client::STS, &settings)?;
            config.cluster.sasl = Some(Sasl::OAuthBearer(TokenProvider::MskIam {
                region: settings.region,
                signer: key.signer,
            }));
        }
        Ok(config)
    }
}

/// KEDA's rules between the lag options.
fn check_rules(
    p: &MetadataParser<'_>,
    rules: &LagRules,
    has_topic: bool,
) -> Result<(), MetadataError> {
    if rules.allow_idle_consumers && rules.limit_to_partitions_with_lag {
        return Err(
            p.rule("\"allowIdleConsumers\" and \"limitToPartitionsWithLag\" cannot both be true")
        );
    }
    if rules.limit_to_partitions_with_lag && rules.ensure_even_distribution {
        return Err(p.rule(
            "\"limitToPartitionsWithLag\" and \"ensureEvenDistributionOfPartitions\" cannot both be true",
        ));
    }
    for (set, name) in [
        (
            rules.limit_to_partitions_with_lag,
            "limitToPartitionsWithLag",
        ),
        (
            rules.ensure_even_distribution,
            "ensureEvenDistributionOfPartitions",
        ),
    ] {
        if set && !has_topic {
            return Err(p.rule(format!(
                "parameter \"topic\" is required when \"{name}\" is true"
            )));
        }
    }
    Ok(())
}

/// The connection settings: bootstrap servers, SASL and TLS. With `saslTokenProvider:
/// aws_msk_iam` SASL is left unset and the AWS settings are returned, to be completed with the
/// credentials by the caller.
fn cluster_settings(
    p: &MetadataParser<'_>,
) -> Result<(ClusterSettings, Option<AwsSettings>), MetadataError> {
    let bootstrap_servers: Vec<String> = p.get(&BOOTSTRAP_SERVERS)?;
    let tls = match p.get::<String>(&TLS)?.as_str() {
        "enable" => {
            let cert = p.get_opt::<Secret>(&CERT)?;
            let key = p.get_opt::<Secret>(&KEY)?;
            let client = match (cert, key) {
                (Some(cert), Some(key)) => Some((cert, key)),
                (None, None) => None,
                _ => return Err(p.rule("parameters \"cert\" and \"key\" must be given together")),
            };
            Some(TlsSettings {
                insecure: p.get(&UNSAFE_SSL)?,
                ca: p.get_opt(&CA)?,
                client,
                key_password: p.get_opt(&KEY_PASSWORD)?,
            })
        }
        _ => None,
    };
    let mut msk = None;
    let mechanism = match p.get::<String>(&SASL)?.as_str() {
        "plaintext" => Some(SaslMechanism::Plain),
        "scram_sha256" => Some(SaslMechanism::ScramSha256),
        "scram_sha512" => Some(SaslMechanism::ScramSha512),
        "oauthbearer" => {
            let provider = p
                .get_opt::<String>(&SASL_TOKEN_PROVIDER)?
                .unwrap_or_else(|| "bearer".to_string());
            if provider == "aws_msk_iam" {
                if tls.is_none() {
                    return Err(p.rule(
                        "sasl \"oauthbearer\" with saslTokenProvider \"aws_msk_iam\" requires \"tls\": enable (TLS is required for AWS MSK authentication)",
                    ));
                }
                let _: String = p.get(&AWS_REGION.require())?;
                msk = Some(AwsSettings::parse(p)?);
                return Ok((
                    ClusterSettings {
                        bootstrap_servers,
                        sasl: None,
                        tls,
                    },
                    msk,
                ));
            }
            let bearer = bearer_settings(p)?;
            return Ok((
                ClusterSettings {
                    bootstrap_servers,
                    sasl: Some(Sasl::OAuthBearer(TokenProvider::Bearer(bearer))),
                    tls,
                },
                msk,
            ));
        }
        "gssapi" => {
            return Err(p.rule(
                "sasl \"gssapi\" (Kerberos) is not supported by keda-rs (its librdkafka is built without Cyrus SASL); use plaintext, scram_sha256 or scram_sha512",
            ));
        }
        _ => None,
    };
    let sasl = match mechanism {
        Some(mechanism) => Some(Sasl::Password(SaslSettings {
            mechanism,
            username: p.get(&USERNAME.require())?,
            password: p.get(&PASSWORD.require())?,
        })),
        None => None,
    };
    Ok((
        ClusterSettings {
            bootstrap_servers,
            sasl,
            tls,
        },
        msk,
    ))
}

/// `saslTokenProvider: bearer`: KEDA's rules (`username`, `password` and
/// `oauthTokenEndpointUri` required; `scopes` and `oauthExtensions` comma-separated).
fn bearer_settings(p: &MetadataParser<'_>) -> Result<BearerSettings, MetadataError> {
    let client_id: String = p.get(&USERNAME.require())?;
    let client_secret: Secret = p.get(&PASSWORD.require())?;
    let raw_endpoint: String = p.get(&OAUTH_TOKEN_ENDPOINT_URI.require())?;
    let endpoint =
        crate::http_client::parse_http_url(p, &OAUTH_TOKEN_ENDPOINT_URI, raw_endpoint.trim())?;
    let scopes = p
        .get_opt::<String>(&SCOPES)?
        .map(|raw| {
            raw.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    if let Some(raw) = p.get_opt::<String>(&OAUTH_EXTENSIONS)? {
        // KEDA's format check first, so a malformed value gets KEDA's message.
        for extension in raw.split(',') {
            if extension.split('=').count() != 2 {
                return Err(p.rule(
                    "parameter \"oauthExtensions\": invalid OAuthBearer extension, must be of format key=value",
                ));
            }
        }
        return Err(p.rule(
            "parameter \"oauthExtensions\" is not supported by keda-rs: the librdkafka token API that rdkafka 0.39 exposes cannot send SASL extensions (and the workspace forbids unsafe code); remove it unless the broker requires the extensions",
        ));
    }
    Ok(BearerSettings {
        token_url: endpoint,
        client_id,
        client_secret,
        scopes,
        endpoint_params: Vec::new(),
    })
}

/// The shared clients a scaler holds: the cluster's and its group's.
struct Clients {
    cluster: Lease<ClusterSettings, KafkaCluster>,
    group: Lease<GroupKey, GroupReader>,
}

/// Leases the cluster client and the group reader of `config`, creating them if this is their
/// first user.
async fn lease(
    ctx: &ScalerContext,
    config: &KafkaConfig,
    timeout: Duration,
) -> Result<Clients, ScalerError> {
    let connect_error = |e: KafkaCallError| ScalerError::Connect {
        trigger: ctx.trigger_id(),
        target: config.cluster.describe(),
        source: e.classify(),
    };
    let settings = config.cluster.clone();
    let cluster = ctx
        .clients
        .pool::<ClusterSettings, KafkaCluster>()
        .get_or_connect(settings.clone(), || {
            KafkaCluster::connect(settings, timeout, ctx.clock.clone())
        })
        .await
        .map_err(connect_error)?;
    let key = GroupKey {
        cluster: config.cluster.clone(),
        group: config.group.clone(),
    };
    let group = ctx
        .clients
        .pool::<GroupKey, GroupReader>()
        .get_or_connect(key.clone(), || {
            GroupReader::create(key, timeout, ctx.clock.clone())
        })
        .await
        .map_err(connect_error)?;
    Ok(Clients { cluster, group })
}

/// A `kafka` scaler holding shared clients.
pub struct KafkaScaler {
    config: KafkaConfig,
    trigger: TriggerId,
    timeout: Duration,
    clients: Mutex<Option<Arc<Clients>>>,
    /// The committed offset of each partition at the last poll (`excludePersistentLag`).
    previous: Mutex<PreviousOffsets>,
}

impl KafkaScaler {
    /// Parses the trigger and leases the shared clients (connecting on first use).
    ///
    /// # Errors
    /// Invalid metadata, or the cluster does not answer within the context's timeout.
    pub async fn build(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let config = KafkaConfig::parse(ctx)?;
        let timeout = ctx.global_http_timeout;
        let clients = lease(ctx, &config, timeout).await?;
        Ok(Self {
            config,
            trigger: ctx.trigger_id(),
            timeout,
            clients: Mutex::new(Some(Arc::new(clients))),
            previous: Mutex::new(PreviousOffsets::new()),
        })
    }

    /// The parsed trigger.
    pub fn config(&self) -> &KafkaConfig {
        &self.config
    }

    fn clients(&self) -> Result<Arc<Clients>, ScalerError> {
        self.clients
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| ScalerError::Closed {
                trigger: self.trigger.clone(),
            })
    }

    fn query_error(&self, operation: &str) -> impl Fn(KafkaCallError) -> ScalerError + '_ {
        let operation = operation.to_string();
        move |e| ScalerError::Query {
            trigger: self.trigger.clone(),
            operation: operation.clone(),
            source: e.classify(),
        }
    }

    /// The offsets of every watched partition: committed by the group, and latest.
    async fn offsets(
        &self,
        clients: &Clients,
    ) -> Result<BTreeMap<TopicPartition, PartitionOffsets>, ScalerError> {
        let group = &self.config.group;
        let (partitions, committed) = match &self.config.topic {
            Some(topic) => {
                let described = clients
                    .cluster
                    .partitions(Some(vec![topic.clone()]), self.timeout)
                    .await
                    .map_err(self.query_error(&format!("describing topic \"{topic}\"")))?;
                let ids: Vec<i32> = described
                    .get(topic)
                    .into_iter()
                    .flatten()
                    .copied()
                    .filter(|id| {
                        self.config
                            .partition_limitation
                            .as_ref()
                            .is_none_or(|limit| limit.contains(id))
                    })
                    .collect();
                if ids.is_empty() {
                    return Err(ScalerError::Unexpected {
                        trigger: self.trigger.clone(),
                        message: format!(
                            "topic \"{topic}\" has no partition to watch (it has none, or partitionLimitation matches none)"
                        ),
                    });
                }
                let partitions: Vec<TopicPartition> =
                    ids.into_iter().map(|id| (topic.clone(), id)).collect();
                let committed = clients
                    .group
                    .committed(partitions.clone(), self.timeout)
                    .await
                    .map_err(self.query_error(&format!(
                        "reading the committed offsets of group \"{group}\""
                    )))?;
                (partitions, committed)
            }
            None => {
                // Topic-less: the topics the group has committed offsets for. Without
                // ListConsumerGroupOffsets (see `client`), ask for the group's offsets on every
                // partition of the cluster and keep the topics where one exists.
                let all = clients
                    .cluster
                    .partitions(None, self.timeout)
                    .await
                    .map_err(self.query_error("listing the cluster's topics"))?;
                let every: Vec<TopicPartition> = all
                    .iter()
                    .flat_map(|(t, ids)| ids.iter().map(move |id| (t.clone(), *id)))
                    .collect();
                let committed =
                    if every.is_empty() {
                        BTreeMap::new()
                    } else {
                        clients.group.committed(every, self.timeout).await.map_err(
                            self.query_error(&format!(
                                "reading the committed offsets of group \"{group}\""
                            )),
                        )?
                    };
                let topics: std::collections::BTreeSet<&String> = committed
                    .iter()
                    .filter(|(_, offset)| **offset >= 0)
                    .map(|((topic, _), _)| topic)
                    .collect();
                let partitions: Vec<TopicPartition> = committed
                    .keys()
                    .filter(|(topic, _)| topics.contains(topic))
                    .cloned()
                    .collect();
                (partitions, committed)
            }
        };
        if partitions.is_empty() {
            return Ok(BTreeMap::new());
        }
        let latest = clients
            .cluster
            .latest_offsets(partitions.clone(), self.timeout)
            .await
            .map_err(self.query_error("reading the latest offsets"))?;
        partitions
            .into_iter()
            .map(|partition| {
                let Some(&committed) = committed.get(&partition) else {
                    return Err(ScalerError::Unexpected {
                        trigger: self.trigger.clone(),
                        message: format!(
                            "the broker returned no committed offset of group \"{group}\" for {}/{}",
                            partition.0, partition.1
                        ),
                    });
                };
                let latest = latest.get(&partition).copied();
                Ok((partition, PartitionOffsets { committed, latest }))
            })
            .collect()
    }
}

#[async_trait]
impl Scaler for KafkaScaler {
    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.config.metric_name.clone(),
            metric_target(self.config.metric_type, self.config.rules.lag_threshold),
        )]
    }

    async fn metrics_and_activity(
        &self,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let clients = self.clients()?;
        let offsets = self.offsets(&clients).await?;
        let total = {
            let mut previous = self.previous.lock().unwrap_or_else(PoisonError::into_inner);
            total_lag(&self.config.rules, &offsets, &mut previous)
        };
        Ok(MetricsAndActivity {
            values: vec![MetricValue::new(metric_name, total.value as f64)],
            active: total.with_persistent > self.config.activation_lag_threshold,
        })
    }

    async fn close(&self) {
        let clients = self
            .clients
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        drop(clients);
    }
}

/// Factory of `kafka`.
///
/// # Errors
/// See [`KafkaScaler::build`].
pub async fn build(ctx: ScalerContext) -> Result<BuiltScaler, ScalerError> {
    Ok(BuiltScaler::Pull(Box::new(KafkaScaler::build(&ctx).await?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(index: usize, metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> ScalerContext {
        ScalerContext {
            metadata: metadata
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            auth_params: auth
                .iter()
                .map(|(k, v)| (k.to_string(), Secret::new(*v)))
                .collect(),
            ..ScalerContext::new("kafka", index)
        }
    }

    const BASE: &[(&str, &str)] = &[
        ("bootstrapServers", "k1:9092, k2:9092"),
        ("consumerGroup", "g"),
    ];

    fn with(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
        let mut all = BASE.to_vec();
        all.extend_from_slice(extra);
        all
    }

    #[test]
    fn defaults_and_metric_names() {
        let c = KafkaConfig::parse(&ctx(1, &with(&[("topic", "orders.v1")]), &[])).expect("ok");
        assert_eq!(c.metric_name, "s1-kafka-orders-v1");
        assert_eq!(c.rules.lag_threshold, 10);
        assert_eq!(c.activation_lag_threshold, 0);
        assert_eq!(c.rules.offset_reset_policy, OffsetResetPolicy::Latest);
        assert!(!c.rules.allow_idle_consumers && !c.rules.exclude_persistent_lag);
        assert_eq!(c.cluster.bootstrap_servers, vec!["k1:9092", "k2:9092"]);
        assert_eq!(
            (c.cluster.sasl.as_ref(), c.cluster.tls.as_ref()),
            (None, None)
        );

        let c = KafkaConfig::parse(&ctx(0, BASE, &[])).expect("ok");
        assert_eq!(c.metric_name, "s0-kafka-g-topics");
        assert_eq!(c.topic, None);
    }

    #[test]
    fn partition_limitation_applies_only_with_a_topic() {
        let limit = [("partitionLimitation", "0,2-3")];
        let c = KafkaConfig::parse(&ctx(0, &with(&[("topic", "t"), limit[0]]), &[])).expect("ok");
        assert_eq!(c.partition_limitation, Some(vec![0, 2, 3]));
        let c = KafkaConfig::parse(&ctx(0, &with(&limit), &[])).expect("ok");
        assert_eq!(c.partition_limitation, None);
    }

    #[test]
    fn sasl_and_tls_come_from_metadata_or_trigger_authentication() {
        let c = KafkaConfig::parse(&ctx(
            0,
            &with(&[("topic", "t"), ("unsafeSsl", "true")]),
            &[
                ("sasl", "scram_sha256"),
                ("username", "u"),
                ("password", "p"),
                ("tls", "enable"),
                ("ca", "CA"),
                ("cert", "C"),
                ("key", "K"),
                ("keyPassword", "KP"),
            ],
        ))
        .expect("ok");
        let Some(Sasl::Password(sasl)) = c.cluster.sasl else {
            panic!("password SASL expected");
        };
        assert_eq!(sasl.mechanism, SaslMechanism::ScramSha256);
        assert_eq!((sasl.username.as_str(), sasl.password.expose()), ("u", "p"));
        let tls = c.cluster.tls.expect("tls");
        assert!(tls.insecure);
        assert_eq!(tls.key_password.as_ref().map(Secret::expose), Some("KP"));
        // `version` and `fullMetadata` are accepted and have no effect.
        KafkaConfig::parse(&ctx(
            0,
            &with(&[("version", "2.8.0"), ("fullMetadata", "false")]),
            &[],
        ))
        .expect("accepted");
    }

    #[test]
    fn parse_errors_name_the_parameter() {
        for (metadata, auth, expected) in [
            (
                vec![("consumerGroup", "g")],
                vec![],
                r#"trigger 0 (kafka): missing required parameter "bootstrapServers""#,
            ),
            (
                vec![("bootstrapServers", "k:9092")],
                vec![],
                r#"trigger 0 (kafka): missing required parameter "consumerGroup""#,
            ),
            (
                with(&[("lagThreshold", "0")]),
                vec![],
                r#"trigger 0 (kafka): parameter "lagThreshold": "0" is not at least 1"#,
            ),
            (
                with(&[("activationLagThreshold", "-1")]),
                vec![],
                r#"trigger 0 (kafka): parameter "activationLagThreshold": "-1" is not at least 0"#,
            ),
            (
                with(&[("offsetResetPolicy", "newest")]),
                vec![],
                r#"trigger 0 (kafka): parameter "offsetResetPolicy": "newest" is not one of latest, earliest"#,
            ),
            (
                with(&[("topic", "t"), ("partitionLimitation", "1,a")]),
                vec![],
                r#"trigger 0 (kafka): parameter "partitionLimitation": invalid partition limitation: "a""#,
            ),
            (
                with(&[
                    ("topic", "t"),
                    ("allowIdleConsumers", "true"),
                    ("limitToPartitionsWithLag", "true"),
                ]),
                vec![],
                r#"trigger 0 (kafka): "allowIdleConsumers" and "limitToPartitionsWithLag" cannot both be true"#,
            ),
            (
                with(&[
                    ("topic", "t"),
                    ("ensureEvenDistributionOfPartitions", "true"),
                    ("limitToPartitionsWithLag", "true"),
                ]),
                vec![],
                r#"trigger 0 (kafka): "limitToPartitionsWithLag" and "ensureEvenDistributionOfPartitions" cannot both be true"#,
            ),
            (
                with(&[("limitToPartitionsWithLag", "true")]),
                vec![],
                r#"trigger 0 (kafka): parameter "topic" is required when "limitToPartitionsWithLag" is true"#,
            ),
            (
                with(&[("ensureEvenDistributionOfPartitions", "true")]),
                vec![],
                r#"trigger 0 (kafka): parameter "topic" is required when "ensureEvenDistributionOfPartitions" is true"#,
            ),
            (
                with(&[("sasl", "plaintext")]),
                vec![("password", "p")],
                r#"trigger 0 (kafka): missing required parameter "username""#,
            ),
            (
                with(&[]),
                vec![("sasl", "scram_sha512"), ("username", "u")],
                r#"trigger 0 (kafka): missing required parameter "password""#,
            ),
            (
                with(&[("sasl", "kerberos")]),
                vec![],
                r#"trigger 0 (kafka): parameter "sasl": "kerberos" is not one of none, plaintext, scram_sha256, scram_sha512, oauthbearer, gssapi"#,
            ),
            (
                with(&[("tls", "on")]),
                vec![],
                r#"trigger 0 (kafka): parameter "tls": "on" is not one of enable, disable"#,
            ),
            (
                with(&[("tls", "enable")]),
                vec![("cert", "C")],
                r#"trigger 0 (kafka): parameters "cert" and "key" must be given together"#,
            ),
            (
                with(&[("allowIdleConsumers", "yes")]),
                vec![],
                r#"trigger 0 (kafka): parameter "allowIdleConsumers": "yes" is not a valid boolean"#,
            ),
        ] {
            let err = KafkaConfig::parse(&ctx(0, &metadata, &auth)).expect_err(expected);
            assert_eq!(err.to_string(), expected);
        }
    }

    #[test]
    fn unsupported_sasl_modes_are_rejected_with_the_reason() {
        for (metadata, auth, needle) in [
            (
                with(&[]),
                vec![("sasl", "gssapi")],
                "\"gssapi\" (Kerberos) is not supported by keda-rs",
            ),
            (
                with(&[]),
                vec![
                    ("sasl", "oauthbearer"),
                    ("username", "id"),
                    ("password", "secret"),
                    ("oauthTokenEndpointUri", "https://idp/token"),
                    (
                        "oauthExtensions",
                        "logicalCluster=lkc-1,identityPoolId=pool-2",
                    ),
                ],
                "parameter \"oauthExtensions\" is not supported by keda-rs",
            ),
        ] {
            let err = KafkaConfig::parse(&ctx(0, &metadata, &auth)).expect_err("unsupported");
            assert!(err.to_string().contains(needle), "{err}");
            assert!(!err.to_string().contains("secret"), "{err}");
        }
    }

    #[test]
    fn oauthbearer_takes_keda_parameters_for_both_token_providers() {
        // bearer (the default provider): client credentials, scopes split at commas.
        let c = KafkaConfig::parse(&ctx(
            0,
            &with(&[("sasl", "oauthbearer")]),
            &[
                ("username", "client"),
                ("password", "s3cret"),
                ("oauthTokenEndpointUri", "https://idp.example/token"),
                ("scopes", "a, b,,c"),
            ],
        ))
        .expect("ok");
        let Some(Sasl::OAuthBearer(TokenProvider::Bearer(bearer))) = c.cluster.sasl else {
            panic!("bearer expected");
        };
        assert_eq!(bearer.token_url.as_str(), "https://idp.example/token");
        assert_eq!(bearer.client_id, "client");
        assert_eq!(bearer.client_secret.expose(), "s3cret");
        assert_eq!(bearer.scopes, ["a", "b", "c"]);
        // aws_msk_iam: TLS, awsRegion (metadata) and AWS credentials.
        let c = KafkaConfig::parse(&ctx(
            0,
            &with(&[
                ("sasl", "oauthbearer"),
                ("saslTokenProvider", "aws_msk_iam"),
                ("tls", "enable"),
                ("awsRegion", "eu-west-1"),
            ]),
            &[("awsAccessKeyID", "AKID"), ("awsSecretAccessKey", "SECRET")],
        ))
        .expect("ok");
        let Some(Sasl::OAuthBearer(TokenProvider::MskIam { region, signer })) = c.cluster.sasl
        else {
            panic!("msk expected");
        };
        assert_eq!(region, "eu-west-1");
        let aws::client::Signer::Static(credentials) = signer else {
            panic!("static credentials expected");
        };
        assert_eq!(credentials.access_key_id, "AKID");
        assert_eq!(credentials.secret_access_key.expose(), "SECRET");

        for (metadata, auth, expected) in [
            (
                vec![("sasl", "oauthbearer")],
                vec![("password", "p"), ("oauthTokenEndpointUri", "https://i/t")],
                r#"trigger 0 (kafka): missing required parameter "username""#,
            ),
            (
                vec![("sasl", "oauthbearer")],
                vec![("username", "u"), ("oauthTokenEndpointUri", "https://i/t")],
                r#"trigger 0 (kafka): missing required parameter "password""#,
            ),
            (
                vec![("sasl", "oauthbearer")],
                vec![("username", "u"), ("password", "hunter2")],
                r#"trigger 0 (kafka): missing required parameter "oauthTokenEndpointUri""#,
            ),
            (
                vec![("sasl", "oauthbearer")],
                vec![
                    ("username", "u"),
                    ("password", "hunter2"),
                    ("oauthTokenEndpointUri", "ftp://i/t"),
                ],
                r#"trigger 0 (kafka): parameter "oauthTokenEndpointUri" must be an http:// or https:// URL, not ftp:"#,
            ),
            (
                vec![("sasl", "oauthbearer")],
                vec![
                    ("username", "u"),
                    ("password", "hunter2"),
                    ("oauthTokenEndpointUri", "https://i/t"),
                    ("oauthExtensions", "a=b,c"),
                ],
                r#"trigger 0 (kafka): parameter "oauthExtensions": invalid OAuthBearer extension, must be of format key=value"#,
            ),
            (
                vec![("sasl", "oauthbearer"), ("saslTokenProvider", "iam")],
                vec![],
                r#"trigger 0 (kafka): parameter "saslTokenProvider": "iam" is not one of bearer, aws_msk_iam"#,
            ),
            (
                vec![
                    ("sasl", "oauthbearer"),
                    ("saslTokenProvider", "aws_msk_iam"),
                    ("awsRegion", "eu-west-1"),
                ],
                vec![
                    ("awsAccessKeyID", "AKID"),
                    ("awsSecretAccessKey", "hunter2"),
                ],
                r#"trigger 0 (kafka): sasl "oauthbearer" with saslTokenProvider "aws_msk_iam" requires "tls": enable (TLS is required for AWS MSK authentication)"#,
            ),
            (
                vec![
                    ("sasl", "oauthbearer"),
                    ("saslTokenProvider", "aws_msk_iam"),
                    ("tls", "enable"),
                ],
                vec![
                    ("awsAccessKeyID", "AKID"),
                    ("awsSecretAccessKey", "hunter2"),
                ],
                r#"trigger 0 (kafka): missing required parameter "awsRegion""#,
            ),
        ] {
            let err = KafkaConfig::parse(&ctx(0, &with(&metadata), &auth)).expect_err(expected);
            assert_eq!(err.to_string(), expected);
        }
    }

    #[test]
    fn secrets_from_trigger_authentication_never_reach_errors() {
        let err = KafkaConfig::parse(&ctx(
            0,
            &with(&[("tls", "enable")]),
            &[("key", "-----BEGIN PRIVATE KEY----- hunter2")],
        ))
        .expect_err("key without cert");
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }
}
