//! `kafka`: scale on the lag of a consumer group (KEDA's `pkg/scalers/kafka_scaler.go`), read
//! through librdkafka (rdkafka). Triggers share one client per cluster; see [`client`] for why
//! a small per-group offset reader exists beside it. A trigger with `topic` is woken early when
//! the topic's end offsets move ([`wake`]).

pub mod apache;
pub mod client;
pub mod lag;
pub mod oauth;
pub mod wake;

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
    /// `topic` (`apache-kafka`: a comma-separated list); empty = every topic the group has
    /// committed offsets for.
    pub topics: Vec<String>,
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
            let (cluster, msk) = cluster_settings(p, &SASL, true)?;
            let config = Self {
                cluster,
                metric_name: metric_name::with_index(
                    ctx.trigger_index,
                    &metric_name::normalize(&name),
                ),
                group,
                topics: topic.into_iter().collect(),
                partition_limitation,
                activation_lag_threshold: p.get(&ACTIVATION_LAG_THRESHOLD)?,
                rules,
                metric_type,
            };
            Ok((config, msk))
        })?;
        with_msk(ctx, &mut config, msk)?;
        Ok(config)
    }
}

/// Completes `config`'s SASL with AWS MSK IAM when [`cluster_settings`] returned AWS settings
/// (`kafka` and `apache-kafka` alike): the credentials by KEDA's rules for AWS (`awsRoleArn`,
/// an access key, or the operator's own with `identityOwner: operator`).
///
/// # Errors
/// The AWS credentials cannot be resolved (named in the error).
pub(super) fn with_msk(
    ctx: &ScalerContext,
    config: &mut KafkaConfig,
    msk: Option<AwsSettings>,
) -> Result<(), ScalerError> {
    if let Some(settings) = msk {
        let key = aws::client::client_key(ctx, aws::client::STS, &settings)?;
        config.cluster.sasl = Some(Sasl::OAuthBearer(TokenProvider::MskIam {
            region: settings.region,
            signer: key.signer,
        }));
    }
    Ok(())
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
/// `sasl` is the trigger type's `sasl` parameter (`apache-kafka` names `aws_msk_iam` there);
/// `unsafe_ssl` says whether the type has `unsafeSsl` (`apache-kafka` has not).
fn cluster_settings(
    p: &MetadataParser<'_>,
    sasl: &Param,
    unsafe_ssl: bool,
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
                insecure: unsafe_ssl && p.get(&UNSAFE_SSL)?,
                ca: p.get_opt(&CA)?,
                client,
                key_password: p.get_opt(&KEY_PASSWORD)?,
            })
        }
        _ => None,
    };
    let mut msk = None;
    let mechanism = match p.get::<String>(sasl)?.as_str() {
        // apache-kafka's spelling of oauthbearer with saslTokenProvider aws_msk_iam.
        "aws_msk_iam" => {
            let _: String = p.get(&AWS_REGION.require())?;
            if tls.is_none() {
                return Err(p.rule(
                    "sasl \"aws_msk_iam\" requires \"tls\": enable (TLS must be enabled when using AWS MSK IAM)",
                ));
            }
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
    /// The topics' registrations on the cluster's end-offset refresh ([`wake`]), one per
    /// topic (`apache-kafka` watches several); none without `topic`, and after `close`.
    wake: Mutex<Vec<wake::Registration>>,
}

impl KafkaScaler {
    /// Parses the trigger and leases the shared clients (connecting on first use).
    ///
    /// # Errors
    /// Invalid metadata, or the cluster does not answer within the context's timeout.
    pub async fn build(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        Self::build_from(ctx, KafkaConfig::parse(ctx)?).await
    }

    /// Leases the shared clients of an already parsed trigger (`kafka` or `apache-kafka`).
    ///
    /// # Errors
    /// The cluster does not answer within the context's timeout.
    pub async fn build_from(ctx: &ScalerContext, config: KafkaConfig) -> Result<Self, ScalerError> {
        let timeout = ctx.global_http_timeout;
        let clients = lease(ctx, &config, timeout).await?;
        let mut registrations = Vec::with_capacity(config.topics.len());
        for topic in &config.topics {
            let cluster = ctx
                .clients
                .pool::<ClusterSettings, KafkaCluster>()
                .get_or_connect(config.cluster.clone(), || {
                    KafkaCluster::connect(config.cluster.clone(), timeout, ctx.clock.clone())
                })
                .await
                .ok();
            if let Some(cluster) = cluster {
                registrations.push(wake::register(cluster, &ctx.clients, topic, timeout).await);
            }
        }
        Ok(Self {
            config,
            trigger: ctx.trigger_id(),
            timeout,
            clients: Mutex::new(Some(Arc::new(clients))),
            previous: Mutex::new(PreviousOffsets::new()),
            wake: Mutex::new(registrations),
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
        let topics = &self.config.topics;
        let (partitions, committed) = if topics.is_empty() {
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
            let committed = if every.is_empty() {
                BTreeMap::new()
            } else {
                clients
                    .group
                    .committed(every, self.timeout)
                    .await
                    .map_err(self.query_error(&format!(
                        "reading the committed offsets of group \"{group}\""
                    )))?
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
        } else {
            let named = topics.join(",");
            let described = clients
                .cluster
                .partitions(Some(topics.clone()), self.timeout)
                .await
                .map_err(self.query_error(&format!("describing topic \"{named}\"")))?;
            let mut partitions: Vec<TopicPartition> = Vec::new();
            for topic in topics {
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
                partitions.extend(ids.into_iter().map(|id| (topic.clone(), id)));
            }
            let committed = clients
                .group
                .committed(partitions.clone(), self.timeout)
                .await
                .map_err(self.query_error(&format!(
                    "reading the committed offsets of group \"{group}\""
                )))?;
            (partitions, committed)
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
        let registrations =
            std::mem::take(&mut *self.wake.lock().unwrap_or_else(PoisonError::into_inner));
        drop(registrations);
    }

    fn wake(&self) -> Option<crate::wake::Wake> {
        self.wake
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(wake::Registration::wake)
            .reduce(crate::wake::Wake::merge)
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
mod tests;
