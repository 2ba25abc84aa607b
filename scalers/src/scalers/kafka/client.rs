//! The librdkafka clients of the `kafka` trigger, pooled so that triggers share them.
//!
//! # Why two kinds of client
//!
//! KEDA reads a group's committed offsets with the admin call ListConsumerGroupOffsets, which
//! any client may issue for any group. librdkafka has it (`rd_kafka_ListConsumerGroupOffsets`),
//! but rdkafka 0.39 does not wrap it (only the raw, `unsafe` FFI in `rdkafka-sys` has it, and
//! the workspace forbids `unsafe`). The only safe way to read committed offsets is
//! `Consumer::committed_offsets`, which asks for the group the consumer was created with. So:
//!
//! - [`KafkaCluster`]: one client per cluster (bootstrap servers + SASL + TLS), shared by every
//!   trigger and every consumer group on it. It does everything that is not group-specific:
//!   topic metadata and latest offsets (ListOffsets batched per leader), which is where KEDA's
//!   per-object Sarama clients spent their memory.
//! - [`GroupReader`]: one consumer per (cluster, consumer group), shared by every trigger that
//!   watches that group. It never subscribes or joins the group; it only sends OffsetFetch to
//!   the group's coordinator.
//!
//! 3,000 ScaledObjects on one cluster therefore hold one cluster client plus one reader per
//! distinct consumer group, never one client per object. When rdkafka exposes
//! ListConsumerGroupOffsets, the readers can go and the cluster client can do it all.
//!
//! Every librdkafka call blocks, so each runs on tokio's blocking pool with the context's
//! timeout ([`blocking`]); dropping a client (which joins librdkafka's threads and, for a
//! consumer, closes it) also happens there.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::client::{ClientContext, OAuthToken};
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::lag::{NO_COMMITTED_OFFSET, TopicPartition};
use super::oauth::{TokenProvider, TokenSource};
use crate::context::Clock;
use crate::secret::Secret;

/// SASL mechanisms keda-rs supports (KEDA's `sasl` values `plaintext`, `scram_sha256`,
/// `scram_sha512`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SaslMechanism {
    /// `plaintext`: SASL/PLAIN.
    Plain,
    /// `scram_sha256`.
    ScramSha256,
    /// `scram_sha512`.
    ScramSha512,
}

impl SaslMechanism {
    fn librdkafka_name(self) -> &'static str {
        match self {
            Self::Plain => "PLAIN",
            Self::ScramSha256 => "SCRAM-SHA-256",
            Self::ScramSha512 => "SCRAM-SHA-512",
        }
    }
}

/// SASL, part of the pool key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Sasl {
    /// `plaintext`, `scram_sha256`, `scram_sha512`: a user name and password.
    Password(SaslSettings),
    /// `oauthbearer`: a token keda-rs fetches (see [`super::oauth`]).
    OAuthBearer(TokenProvider),
}

/// SASL user name and password, part of the pool key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SaslSettings {
    /// The mechanism.
    pub mechanism: SaslMechanism,
    /// `username`.
    pub username: String,
    /// `password`.
    pub password: Secret,
}

/// TLS settings, part of the pool key.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct TlsSettings {
    /// `unsafeSsl`: skip certificate and host name verification.
    pub insecure: bool,
    /// `ca`: PEM CA bundle.
    pub ca: Option<Secret>,
    /// `cert` + `key`: PEM client certificate and key (mTLS).
    pub client: Option<(Secret, Secret)>,
    /// `keyPassword`: the password of an encrypted `key`.
    pub key_password: Option<Secret>,
}

/// Everything that identifies a Kafka cluster connection: the key of the shared cluster client.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClusterSettings {
    /// `bootstrapServers`, in the order given.
    pub bootstrap_servers: Vec<String>,
    /// SASL, if enabled.
    pub sasl: Option<Sasl>,
    /// TLS, if enabled.
    pub tls: Option<TlsSettings>,
}

impl ClusterSettings {
    /// `kafka at host:port[,host:port]`, for errors; never includes credentials.
    pub fn describe(&self) -> String {
        format!("kafka at {}", self.bootstrap_servers.join(","))
    }

    /// The librdkafka configuration for these settings (connection and security only).
    pub fn client_config(&self, timeout: Duration) -> ClientConfig {
        let mut config = ClientConfig::new();
        // The operator's timeout (`KEDA_HTTP_DEFAULT_TIMEOUT`, 1 ms to 1 h) within what
        // librdkafka accepts for each property, which refuses the whole configuration otherwise.
        let millis = timeout.as_millis();
        let socket_ms = millis.clamp(10, 300_000).to_string();
        let setup_ms = millis.clamp(1_000, 2_147_483_647).to_string();
        config
            .set("bootstrap.servers", self.bootstrap_servers.join(","))
            // The latest offset is the high watermark, as Sarama's ListOffsets reports it; the
            // default (read_committed) would report the last stable offset instead.
            .set("isolation.level", "read_uncommitted")
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("allow.auto.create.topics", "false")
            .set("socket.timeout.ms", socket_ms.as_str())
            .set("socket.connection.setup.timeout.ms", setup_ms.as_str())
            // Idle broker connections are closed and reopened on demand, so a cluster client
            // holds no socket it does not use.
            .set("connections.max.idle.ms", "300000")
            .set_log_level(RDKafkaLogLevel::Warning);
        let protocol = match (&self.sasl, &self.tls) {
            (None, None) => "plaintext",
            (None, Some(_)) => "ssl",
            (Some(_), None) => "sasl_plaintext",
            (Some(_), Some(_)) => "sasl_ssl",
        };
        config.set("security.protocol", protocol);
        match &self.sasl {
            Some(Sasl::Password(sasl)) => {
                config
                    .set("sasl.mechanisms", sasl.mechanism.librdkafka_name())
                    .set("sasl.username", &sasl.username)
                    .set("sasl.password", sasl.password.expose());
            }
            // The token comes from [`KafkaContext`] through librdkafka's refresh event.
            Some(Sasl::OAuthBearer(_)) => {
                config.set("sasl.mechanisms", "OAUTHBEARER");
            }
            None => {}
        }
        if let Some(tls) = &self.tls {
            if tls.insecure {
                config
                    .set("enable.ssl.certificate.verification", "false")
                    .set("ssl.endpoint.identification.algorithm", "none");
            }
            if let Some(ca) = &tls.ca {
                config.set("ssl.ca.pem", ca.expose());
            }
            if let Some((cert, key)) = &tls.client {
                config
                    .set("ssl.certificate.pem", cert.expose())
                    .set("ssl.key.pem", key.expose());
            }
            if let Some(password) = &tls.key_password {
                config.set("ssl.key.password", password.expose());
            }
        }
        config
    }
}

/// The key of a [`GroupReader`]: a cluster and a consumer group.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GroupKey {
    /// The cluster.
    pub cluster: ClusterSettings,
    /// `consumerGroup`.
    pub group: String,
}

impl crate::remote::Classify for KafkaCallError {
    fn classify(&self) -> crate::remote::Failure {
        match self {
            Self::Kafka(e) => e.classify(),
            // keda-rs' own words: a timeout, a task, a token failure worded by
            // [`super::oauth::TokenError`] (which shows no answer text), a partition's error
            // code.
            other => crate::remote::Failure::local(other.to_string()),
        }
    }
}

/// Why a librdkafka call failed.
#[derive(Debug, thiserror::Error)]
pub enum KafkaCallError {
    /// librdkafka reported an error.
    #[error(transparent)]
    Kafka(#[from] KafkaError),
    /// The call did not finish within the timeout.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// No SASL/OAUTHBEARER token could be had.
    #[error("getting the SASL/OAUTHBEARER token failed: {0}")]
    Token(String),
    /// The blocking task panicked or was cancelled.
    #[error("the blocking task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
    /// The broker answered with an error for one topic or partition.
    #[error("{0}")]
    Broker(String),
}

/// Runs a blocking librdkafka call on tokio's blocking pool and waits at most `timeout` (plus a
/// little, since the call itself is given the same timeout and returns on its own).
///
/// # Errors
/// The call's error, [`KafkaCallError::Timeout`], or a failed task.
pub async fn blocking<T, F>(timeout: Duration, f: F) -> Result<T, KafkaCallError>
where
    F: FnOnce() -> Result<T, KafkaCallError> + Send + 'static,
    T: Send + 'static,
{
    let grace = timeout + Duration::from_millis(500);
    match tokio::time::timeout(grace, tokio::task::spawn_blocking(f)).await {
        Ok(joined) => joined?,
        Err(_) => Err(KafkaCallError::Timeout(timeout)),
    }
}

/// The consumer type of both clients: a [`BaseConsumer`] with [`KafkaContext`].
type KafkaConsumer = BaseConsumer<KafkaContext>;

/// The client context: supplies SASL/OAUTHBEARER tokens when the cluster uses them.
///
/// librdkafka asks for a token with an event served by `poll`: at creation and at 80 % of the
/// token's lifetime. Every call of the clients polls first ([`drain_events`]), and creation
/// waits for the first token ([`wait_for_token`]), so a token is there before a request needs
/// one. The token is fetched on the polling thread (a blocking-pool thread) through the
/// runtime that created the client.
pub struct KafkaContext {
    tokens: Option<TokenSource>,
    runtime: Option<tokio::runtime::Handle>,
    timeout: Duration,
    has_token: AtomicBool,
    failure: Mutex<Option<String>>,
}

impl KafkaContext {
    fn new(
        settings: &ClusterSettings,
        timeout: Duration,
        clock: Clock,
    ) -> Result<Self, KafkaCallError> {
        let tokens = match &settings.sasl {
            Some(Sasl::OAuthBearer(provider)) => Some(
                TokenSource::new(provider.clone(), timeout, clock)
                    .map_err(KafkaCallError::Token)?,
            ),
            _ => None,
        };
        Ok(Self {
            tokens,
            runtime: tokio::runtime::Handle::try_current().ok(),
            timeout,
            has_token: AtomicBool::new(false),
            failure: Mutex::new(None),
        })
    }

    fn fail(&self, message: String) -> String {
        *self.failure.lock().unwrap_or_else(PoisonError::into_inner) = Some(message.clone());
        message
    }
}

impl ClientContext for KafkaContext {
    const ENABLE_REFRESH_OAUTH_TOKEN: bool = true;

    fn generate_oauth_token(
        &self,
        _oauthbearer_config: Option<&str>,
    ) -> Result<OAuthToken, Box<dyn std::error::Error>> {
        let (Some(tokens), Some(runtime)) = (&self.tokens, &self.runtime) else {
            return Err(self.fail("no token provider is configured".into()).into());
        };
        let fetched =
            runtime.block_on(async { tokio::time::timeout(self.timeout, tokens.token()).await });
        match fetched {
            Ok(Ok(token)) => {
                self.has_token.store(true, Ordering::SeqCst);
                *self.failure.lock().unwrap_or_else(PoisonError::into_inner) = None;
                Ok(OAuthToken {
                    token: token.value.expose().to_string(),
                    principal_name: token.principal,
                    lifetime_ms: token.expires_at_ms,
                })
            }
            Ok(Err(e)) => Err(self.fail(e.to_string()).into()),
            Err(_) => Err(self
                .fail(format!("no token within {:?}", self.timeout))
                .into()),
        }
    }
}

impl ConsumerContext for KafkaContext {}

/// Creates a consumer for `settings` and, with SASL/OAUTHBEARER, polls until the first token
/// is set or fetching it failed.
fn create(
    config: &ClientConfig,
    settings: &ClusterSettings,
    timeout: Duration,
    clock: Clock,
) -> Result<KafkaConsumer, KafkaCallError> {
    let context = KafkaContext::new(settings, timeout, clock)?;
    let oauth = context.tokens.is_some();
    let consumer: KafkaConsumer = config.create_with_context(context)?;
    if oauth {
        wait_for_token(&consumer, timeout)?;
    }
    Ok(consumer)
}

fn wait_for_token(consumer: &KafkaConsumer, timeout: Duration) -> Result<(), KafkaCallError> {
    let deadline = Instant::now() + timeout;
    loop {
        let _ = consumer.poll(Duration::from_millis(50));
        let context = consumer.context();
        if context.has_token.load(Ordering::SeqCst) {
            return Ok(());
        }
        if let Some(failure) = context
            .failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
        {
            return Err(KafkaCallError::Token(failure));
        }
        if Instant::now() >= deadline {
            return Err(KafkaCallError::Timeout(timeout));
        }
    }
}

/// A librdkafka consumer handle whose destruction (which may wait for librdkafka's threads and
/// the broker) never runs on an async worker thread.
struct Handle(Option<Arc<KafkaConsumer>>);

impl Handle {
    fn get(&self) -> Option<Arc<KafkaConsumer>> {
        self.0.clone()
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        let Some(consumer) = self.0.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn_blocking(move || drop(consumer));
            }
            Err(_) => drop(consumer),
        }
    }
}

/// Drains the events librdkafka queued for the application (errors, logs) so they do not pile
/// up in a consumer that never consumes. Bounded, and never waits.
fn drain_events(consumer: &KafkaConsumer) {
    for _ in 0..1000 {
        if consumer.poll(Duration::ZERO).is_none() {
            break;
        }
    }
}

/// Topic metadata as the scaler needs it: partition ids per topic.
pub type TopicPartitions = BTreeMap<String, Vec<i32>>;

/// The shared client of one cluster: metadata and latest offsets for every trigger on it.
pub struct KafkaCluster {
    handle: Handle,
    settings: ClusterSettings,
}

impl KafkaCluster {
    /// Creates the client and checks that the cluster answers a metadata request within
    /// `timeout`, so a wrong address fails when the trigger is built, as in KEDA.
    ///
    /// # Errors
    /// The configuration is refused by librdkafka or the cluster does not answer.
    pub async fn connect(
        settings: ClusterSettings,
        timeout: Duration,
        clock: Clock,
    ) -> Result<Self, KafkaCallError> {
        let config = settings.client_config(timeout);
        let for_context = settings.clone();
        let consumer = blocking(timeout, move || -> Result<_, KafkaCallError> {
            let started = Instant::now();
            let consumer = create(&config, &for_context, timeout, clock)?;
            // One metadata request proves the cluster is reachable (once per cluster, not per
            // trigger). It gets what waiting for a SASL/OAUTHBEARER token left of the timeout,
            // so the whole stays within `blocking`'s bound and fails with librdkafka's reason.
            let left = timeout
                .saturating_sub(started.elapsed())
                .max(Duration::from_millis(100));
            consumer.fetch_metadata(None, left)?;
            Ok(consumer)
        })
        .await?;
        Ok(Self {
            handle: Handle(Some(Arc::new(consumer))),
            settings,
        })
    }

    /// The settings this client was created with.
    pub fn settings(&self) -> &ClusterSettings {
        &self.settings
    }

    fn consumer(&self) -> Result<Arc<KafkaConsumer>, KafkaCallError> {
        self.handle
            .get()
            .ok_or_else(|| KafkaCallError::Broker("the client is closed".into()))
    }

    /// The partitions of `topics` (every topic but Kafka's internal ones when `None`).
    ///
    /// # Errors
    /// The request fails, or the broker reports an error for a requested topic (e.g. it does
    /// not exist).
    pub async fn partitions(
        &self,
        topics: Option<Vec<String>>,
        timeout: Duration,
    ) -> Result<TopicPartitions, KafkaCallError> {
        let consumer = self.consumer()?;
        blocking(timeout, move || {
            drain_events(&consumer);
            let mut out = TopicPartitions::new();
            let mut read = |metadata: rdkafka::metadata::Metadata, wanted: Option<&str>| {
                for topic in metadata.topics() {
                    if wanted.is_some_and(|w| w != topic.name()) {
                        continue;
                    }
                    if let Some(err) = topic.error() {
                        // Only a topic the trigger named is shown by name: the others are
                        // the broker's.
                        return Err(KafkaCallError::Broker(format!(
                            "describing topic {}: {:?}",
                            wanted.map_or_else(
                                || "of the cluster".to_string(),
                                |w| format!("\"{w}\"")
                            ),
                            rdkafka::types::RDKafkaErrorCode::from(err)
                        )));
                    }
                    if wanted.is_none() && topic.name().starts_with("__") {
                        continue;
                    }
                    let ids = topic.partitions().iter().map(|p| p.id()).collect();
                    out.insert(topic.name().to_string(), ids);
                }
                Ok(())
            };
            match topics {
                None => read(consumer.fetch_metadata(None, timeout)?, None)?,
                Some(topics) => {
                    for topic in &topics {
                        read(consumer.fetch_metadata(Some(topic), timeout)?, Some(topic))?;
                    }
                }
            }
            Ok(out)
        })
        .await
    }

    /// The latest offset (high watermark) of each partition, in one ListOffsets request per
    /// partition leader. A partition the broker leaves out is absent from the map.
    ///
    /// # Errors
    /// The request fails or reports an error for a partition.
    pub async fn latest_offsets(
        &self,
        partitions: Vec<TopicPartition>,
        timeout: Duration,
    ) -> Result<BTreeMap<TopicPartition, i64>, KafkaCallError> {
        let consumer = self.consumer()?;
        blocking(timeout, move || {
            drain_events(&consumer);
            let mut tpl = TopicPartitionList::with_capacity(partitions.len());
            for (topic, partition) in &partitions {
                // ListOffsets with timestamp -1 (`Offset::End`) answers the latest offset.
                tpl.add_partition_offset(topic, *partition, Offset::End)?;
            }
            let answered = consumer.offsets_for_times(tpl, timeout)?;
            let mut out = BTreeMap::new();
            for elem in answered.elements() {
                elem.error().map_err(|e| {
                    KafkaCallError::Broker(format!(
                        "reading the latest offset of {}/{}: {e}",
                        elem.topic(),
                        elem.partition()
                    ))
                })?;
                if let Offset::Offset(offset) = elem.offset() {
                    out.insert((elem.topic().to_string(), elem.partition()), offset);
                }
            }
            Ok(out)
        })
        .await
    }
}

/// The consumer that reads one group's committed offsets on one cluster.
pub struct GroupReader {
    handle: Handle,
}

impl GroupReader {
    /// Creates the reader. It connects lazily, on its first request.
    ///
    /// # Errors
    /// librdkafka refuses the configuration.
    pub async fn create(
        key: GroupKey,
        timeout: Duration,
        clock: Clock,
    ) -> Result<Self, KafkaCallError> {
        let mut config = key.cluster.client_config(timeout);
        config.set("group.id", &key.group);
        let consumer = blocking(timeout, move || -> Result<KafkaConsumer, KafkaCallError> {
            create(&config, &key.cluster, timeout, clock)
        })
        .await?;
        Ok(Self {
            handle: Handle(Some(Arc::new(consumer))),
        })
    }

    /// The group's committed offset for each of `partitions`
    /// ([`NO_COMMITTED_OFFSET`] where it has none).
    ///
    /// # Errors
    /// The request fails or reports an error for a partition.
    pub async fn committed(
        &self,
        partitions: Vec<TopicPartition>,
        timeout: Duration,
    ) -> Result<BTreeMap<TopicPartition, i64>, KafkaCallError> {
        let consumer = self
            .handle
            .get()
            .ok_or_else(|| KafkaCallError::Broker("the client is closed".into()))?;
        blocking(timeout, move || {
            drain_events(&consumer);
            let mut tpl = TopicPartitionList::with_capacity(partitions.len());
            for (topic, partition) in &partitions {
                tpl.add_partition(topic, *partition);
            }
            let answered = consumer.committed_offsets(tpl, timeout)?;
            let mut out = BTreeMap::new();
            for elem in answered.elements() {
                elem.error().map_err(|e| {
                    KafkaCallError::Broker(format!(
                        "reading the committed offset of {}/{}: {e}",
                        elem.topic(),
                        elem.partition()
                    ))
                })?;
                let offset = match elem.offset() {
                    Offset::Offset(offset) if offset >= 0 => offset,
                    _ => NO_COMMITTED_OFFSET,
                };
                out.insert((elem.topic().to_string(), elem.partition()), offset);
            }
            Ok(out)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(sasl: Option<SaslSettings>, tls: Option<TlsSettings>) -> ClusterSettings {
        ClusterSettings {
            bootstrap_servers: vec!["a:9092".into(), "b:9092".into()],
            sasl: sasl.map(Sasl::Password),
            tls,
        }
    }

    fn get(config: &ClientConfig, key: &str) -> Option<String> {
        config.get(key).map(str::to_string)
    }

    /// Found by the `scaler_connect` fuzz target: librdkafka refuses a connection-setup timeout
    /// under 1 s and a socket timeout over 300 s, so `KEDA_HTTP_DEFAULT_TIMEOUT` outside those
    /// (it may be 1 ms to 1 h) made every kafka trigger fail to build.
    #[test]
    fn every_operator_timeout_gives_a_configuration_librdkafka_accepts() {
        for millis in [1, 10, 500, 999, 1_000, 3_000, 300_000, 300_001, 3_600_000] {
            let config = settings(None, None).client_config(Duration::from_millis(millis));
            if let Err(error) = config.create::<BaseConsumer>() {
                panic!("a timeout of {millis} ms: {error}");
            }
        }
    }

    #[test]
    fn security_settings_map_to_librdkafka_properties() {
        let plain = settings(None, None).client_config(Duration::from_secs(3));
        assert_eq!(
            get(&plain, "security.protocol").as_deref(),
            Some("plaintext")
        );
        assert_eq!(
            get(&plain, "bootstrap.servers").as_deref(),
            Some("a:9092,b:9092")
        );
        assert_eq!(get(&plain, "socket.timeout.ms").as_deref(), Some("3000"));
        assert_eq!(get(&plain, "sasl.mechanisms"), None);

        let sasl = SaslSettings {
            mechanism: SaslMechanism::ScramSha512,
            username: "u".into(),
            password: Secret::new("p"),
        };
        let tls = TlsSettings {
            insecure: true,
            ca: Some(Secret::new("CA")),
            client: Some((Secret::new("CERT"), Secret::new("KEY"))),
            key_password: Some(Secret::new("KP")),
        };
        let full = settings(Some(sasl), Some(tls)).client_config(Duration::from_secs(3));
        for (key, value) in [
            ("security.protocol", "sasl_ssl"),
            ("sasl.mechanisms", "SCRAM-SHA-512"),
            ("sasl.username", "u"),
            ("sasl.password", "p"),
            ("enable.ssl.certificate.verification", "false"),
            ("ssl.endpoint.identification.algorithm", "none"),
            ("ssl.ca.pem", "CA"),
            ("ssl.certificate.pem", "CERT"),
            ("ssl.key.pem", "KEY"),
            ("ssl.key.password", "KP"),
        ] {
            assert_eq!(get(&full, key).as_deref(), Some(value), "{key}");
        }
        let tls_only = settings(None, Some(TlsSettings::default()));
        let config = tls_only.client_config(Duration::from_secs(1));
        assert_eq!(get(&config, "security.protocol").as_deref(), Some("ssl"));
        assert_eq!(get(&config, "enable.ssl.certificate.verification"), None);
    }

    #[test]
    fn descriptions_never_show_credentials() {
        let s = settings(
            Some(SaslSettings {
                mechanism: SaslMechanism::Plain,
                username: "u".into(),
                password: Secret::new("hunter2"),
            }),
            None,
        );
        assert_eq!(s.describe(), "kafka at a:9092,b:9092");
        assert!(!format!("{s:?}").contains("hunter2"));
    }
}
