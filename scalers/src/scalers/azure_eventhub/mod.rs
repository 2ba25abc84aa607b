//! `azure-eventhub`: the events of an Event Hub not yet processed by a consumer group (KEDA's
//! `azure_eventhub_scaler.go`).
//!
//! Each poll reads the hub's partitions and, for each, its last enqueued sequence number
//! through the Event Hubs REST API of the namespace ([`runtime`]; shared access signatures
//! from the `connection` string, [`crate::azure::sas`]), and the consumer group's checkpoint
//! of the partition from blob storage (`storageConnection`; where and how per
//! `checkpointStrategy`, [`checkpoint`]). A partition's unprocessed events are its last
//! sequence number minus the checkpoint's (with KEDA's wrap-around and stale-information
//! rules); without a checkpoint blob (or container) all its events count. The total, capped
//! at `unprocessedEventThreshold` x the number of partitions (KEDA does not scale beyond one
//! replica per partition), is the value; active iff the uncapped total is above
//! `activationUnprocessedEventThreshold`. Metric `s<i>-azure-eventhub-<consumerGroup>`.
//!
//! Azure AD (podIdentity `azure-workload`) is not supported for azure-eventhub yet: both
//! connection strings are required.

pub mod checkpoint;
pub mod runtime;

use async_trait::async_trait;
use bytes::Bytes;
use http::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use http::{Method, StatusCode};
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use self::checkpoint::Strategy;
use self::runtime::Partition;
use crate::authentication::HttpAuth;
use crate::azure::client::{StorageClient, StorageClientKey};
use crate::azure::sas::{SasConnection, parse_connection_string};
use crate::azure::{self, Service};
use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError, Source};
use crate::http_client::{
    self, HttpClient, HttpClientKey, HttpGetError, VendorEndpoints, describe_url,
};
use crate::metadata::Param;
use crate::metric::{MetricTargetType, external_metric_spec, metric_target};
use crate::pool::Lease;
use crate::pooled::{PooledSource, ReadCtx};
use crate::remote::{Classify, Failure, Kind};
use crate::scaler::{MetricValue, MetricsAndActivity};
use crate::secret::Secret;

const THRESHOLD: Param = Param::optional("unprocessedEventThreshold").default("64");
const ACTIVATION_THRESHOLD: Param =
    Param::optional("activationUnprocessedEventThreshold").default("0");
const STALE_THRESHOLD: Param = Param::optional("stalePartitionInfoThreshold").default("10000");
const CONNECTION: Param = Param::optional("connection")
    .order(&[Source::Auth, Source::Env])
    .secret();
const CONSUMER_GROUP: Param = Param::optional("consumerGroup").default("$Default");
const STORAGE_CONNECTION: Param = Param::optional("storageConnection")
    .order(&[Source::Auth, Source::Env])
    .secret();
const STORAGE_ACCOUNT_NAME: Param = Param::optional("storageAccountName");
const BLOB_CONTAINER: Param = Param::optional("blobContainer");
const EVENT_HUB_NAMESPACE: Param =
    Param::optional("eventHubNamespace").order(&[Source::Metadata, Source::Env]);
const EVENT_HUB_NAME: Param =
    Param::optional("eventHubName").order(&[Source::Metadata, Source::Env]);
const CHECKPOINT_STRATEGY: Param = Param::optional("checkpointStrategy");

/// The parameters of `azure-eventhub`, in KEDA's order.
pub const PARAMS: &[Param] = &[
    THRESHOLD,
    ACTIVATION_THRESHOLD,
    STALE_THRESHOLD,
    CONNECTION,
    CONSUMER_GROUP,
    STORAGE_CONNECTION,
    STORAGE_ACCOUNT_NAME,
    BLOB_CONTAINER,
    EVENT_HUB_NAMESPACE,
    EVENT_HUB_NAME,
    CHECKPOINT_STRATEGY,
];

/// The REST API version of the Event Hubs runtime descriptions.
pub const API_VERSION: &str = "2014-01";
/// The consumer group whose partition descriptions are read: runtime information does not
/// depend on the group (KEDA reads it over AMQP without one), and `$Default` always exists.
pub const RUNTIME_CONSUMER_GROUP: &str = "$Default";

/// What triggers share a client by: the namespace's HTTP client and the storage client.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EventHubKey {
    /// The Event Hubs namespace (origin, timeout).
    pub http: HttpClientKey,
    /// The checkpoint store.
    pub storage: StorageClientKey,
}

/// The clients of one [`EventHubKey`].
pub struct EventHubClients {
    http: HttpClient,
    storage: StorageClient,
}

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct EventHubConfig {
    /// `unprocessedEventThreshold`.
    pub threshold: i64,
    /// `activationUnprocessedEventThreshold`.
    pub activation: i64,
    /// `stalePartitionInfoThreshold`.
    pub stale: i64,
    /// `consumerGroup`.
    pub consumer_group: String,
    /// The hub: the connection string's `EntityPath`, else `eventHubName`.
    pub hub: String,
    /// Where checkpoints are.
    pub strategy: Strategy,
    /// `blobContainer` (empty when absent).
    pub container: String,
    /// The namespace connection and `https://<namespace>/`.
    namespace: SasConnection,
    base: url::Url,
    vendor_endpoints: VendorEndpoints,
    /// The clients' key.
    key: EventHubKey,
    /// `s<index>-azure-eventhub-<consumerGroup>`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
}

impl EventHubConfig {
    /// Parses the trigger as KEDA does.
    ///
    /// # Errors
    /// A malformed number, `unprocessedEventThreshold` not positive, no `storageConnection`,
    /// no `connection` (Azure AD is not supported for azure-eventhub yet), no hub name, a
    /// connection string that cannot be used (naming what is wrong, never its secrets).
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let threshold: i64 = p.get(&THRESHOLD)?;
            let activation: i64 = p.get(&ACTIVATION_THRESHOLD)?;
            let stale: i64 = p.get(&STALE_THRESHOLD)?;
            let connection: Option<Secret> = p.get_opt(&CONNECTION)?;
            let consumer_group: String = p.get(&CONSUMER_GROUP)?;
            let storage: Option<Secret> = p.get_opt(&STORAGE_CONNECTION)?;
            let _account: Option<String> = p.get_opt(&STORAGE_ACCOUNT_NAME)?;
            let container: Option<String> = p.get_opt(&BLOB_CONTAINER)?;
            let _namespace: Option<String> = p.get_opt(&EVENT_HUB_NAMESPACE)?;
            let name: Option<String> = p.get_opt(&EVENT_HUB_NAME)?;
            let strategy: Option<String> = p.get_opt(&CHECKPOINT_STRATEGY)?;
            if threshold <= 0 {
                return Err(p.rule("\"unprocessedEventThreshold\" must be a positive number"));
            }
            let not_supported = "(Azure AD (podIdentity azure-workload) is not supported for \
                                 azure-eventhub yet; use connection strings)";
            let Some(storage) = storage else {
                return Err(p.rule(format!(
                    "no storage connection string given: set the TriggerAuthentication \
                     parameter \"storageConnection\" or \"storageConnectionFromEnv\" \
                     {not_supported}"
                )));
            };
            let Some(connection) = connection else {
                return Err(p.rule(format!(
                    "no event hub connection string given: set the TriggerAuthentication \
                     parameter \"connection\" or \"connectionFromEnv\" {not_supported}"
                )));
            };
            let namespace = parse_connection_string(connection.expose()).map_err(|why| {
                p.rule(format!(
                    "parameter \"connection\": the Event Hubs connection string cannot be used: \
                     {why}"
                ))
            })?;
            let Some(hub) = namespace.entity_path.clone().or(name) else {
                return Err(p.rule(
                    "connection string does not contain event hub name, and parameter \
                     eventHubName not provided",
                ));
            };
            let base =
                url::Url::parse(&format!("https://{}/", namespace.namespace)).map_err(|_| {
                    p.rule(
                        "parameter \"connection\": the Endpoint's host cannot make an https:// URL",
                    )
                })?;
            let key = azure::parse_connection_string(storage.expose(), Service::Blob)
                .map_err(|why| {
                    p.rule(format!(
                        "parameter \"storageConnection\": the storage connection string cannot \
                         be used: {why}"
                    ))
                })
                .map(|(endpoint, credential)| EventHubKey {
                    http: HttpClientKey {
                        origin: http_client::origin(&ctx.vendor_endpoints.redirect(base.clone())),
                        auth: HttpAuth::default(),
                        timeout: ctx.global_http_timeout,
                    },
                    storage: StorageClientKey {
                        endpoint,
                        credential,
                        timeout: ctx.global_http_timeout,
                    },
                })?;
            Ok(Self {
                threshold,
                activation,
                stale,
                metric_name: ctx.metric_name(&format!("azure-eventhub-{consumer_group}")),
                strategy: Strategy::of(strategy.as_deref(), container.as_deref()),
                container: container.unwrap_or_default(),
                consumer_group,
                hub,
                namespace,
                base,
                vendor_endpoints: ctx.vendor_endpoints.clone(),
                key,
                metric_type,
            })
        })?)
    }

    /// GETs `segments` below the namespace with a fresh signature and returns the body.
    async fn get(
        &self,
        client: &HttpClient,
        read: ReadCtx<'_>,
        segments: &[&str],
        what: &str,
    ) -> Result<Bytes, ScalerError> {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty();
            path.extend(segments);
        }
        url.query_pairs_mut()
            .append_pair("api-version", API_VERSION);
        let token = self
            .namespace
            .credential
            .authorization(url.as_str(), read.now().as_second());
        let url = self.vendor_endpoints.redirect(url);
        let operation = format!(
            "Event Hubs GET of {what} at {} (connection)",
            describe_url(&url)
        );
        let mut headers = HeaderMap::new();
        let mut value = HeaderValue::from_str(&token).map_err(|_| {
            read.unexpected("the connection string's signature cannot be sent in a header")
        })?;
        value.set_sensitive(true);
        headers.insert(AUTHORIZATION, value);
        client.get(url, &headers).await.map_err(|e| {
            let source = match &e {
                HttpGetError::Status { status, body, .. } => {
                    refusal(*status, body).unwrap_or_else(|| e.classify())
                }
                _ => e.classify(),
            };
            ScalerError::Query {
                trigger: read.trigger.clone(),
                operation,
                source,
            }
        })
    }

    /// The checkpoint's sequence number of `partition`, `None` without a checkpoint (no blob,
    /// no container).
    async fn checkpoint(
        &self,
        storage: &StorageClient,
        read: ReadCtx<'_>,
        partition: &str,
    ) -> Result<Option<i64>, ScalerError> {
        let (container, blob) = self.strategy.location(
            &self.container,
            &self.namespace.namespace,
            &self.hub,
            &self.consumer_group,
            partition,
        );
        let mut segments = vec![container.as_str()];
        segments.extend(blob.split('/'));
        let answer = match storage
            .send(Method::GET, &segments, &[], &[], Bytes::new(), read.clock)
            .await
        {
            Ok(answer) => answer,
            Err(e) if matches!(e.code(), Some("BlobNotFound" | "ContainerNotFound")) => {
                return Ok(None);
            }
            Err(e) => {
                return Err(ScalerError::Query {
                    trigger: read.trigger.clone(),
                    operation: format!(
                        "Get Blob of checkpoint \"{blob}\" in container \"{container}\" at {} \
                         (storageConnection)",
                        describe_url(&storage.key().endpoint)
                    ),
                    source: e.classify(),
                });
            }
        };
        let number = if self.strategy == Strategy::BlobMetadata {
            checkpoint::metadata_sequence_number(
                answer
                    .headers
                    .get("x-ms-meta-sequencenumber")
                    .and_then(|v| v.to_str().ok()),
            )
        } else {
            checkpoint::sequence_number(self.strategy, &answer.body)
        };
        number.map(Some).map_err(|why| {
            read.unexpected(format!(
                "the checkpoint \"{blob}\" in container \"{container}\" is unusable: {why}"
            ))
        })
    }
}

/// The Event Hubs answers named in our words: refused signatures (401), missing rights (403),
/// an unknown hub (404), throttling (429).
fn refusal(status: StatusCode, body: &[u8]) -> Option<Failure> {
    let code = match status.as_u16() {
        401 => "unauthorized (HTTP 401): check SharedAccessKeyName and SharedAccessKey (or \
                SharedAccessSignature) of the connection string"
            .to_string(),
        403 => "forbidden (HTTP 403): the connection string's shared access policy needs the \
                Manage right to read runtime information"
            .to_string(),
        404 => "not found (HTTP 404): check the event hub name".to_string(),
        429 => "throttled (HTTP 429): the namespace's request quota was reached".to_string(),
        _ => return None,
    };
    Some(Failure::new(
        Kind::Server {
            system: "Azure Event Hubs",
            code: Some(code),
        },
        Some(String::from_utf8_lossy(body).into_owned()),
    ))
}

/// KEDA's count of a partition's unprocessed events: 0 for an empty partition (`end` -1);
/// without a checkpoint every event in it (`end - begin + 1`, or 0 when both are equal and not
/// 0); else `end - checkpoint`, wrapping around the sequence numbers' range, and 0 when that
/// is within `stale` of the range's end (stale partition information).
pub fn unprocessed(partition: Partition, checkpoint: Option<i64>, stale: i64) -> i64 {
    if partition.end == -1 {
        return 0;
    }
    let Some(checkpoint) = checkpoint else {
        let (begin, end) = (partition.begin, partition.end);
        return if (begin == 0 && end == 0) || begin != end {
            end.wrapping_sub(begin).wrapping_add(1)
        } else {
            0
        };
    };
    let count = if partition.end >= checkpoint {
        partition.end - checkpoint
    } else {
        (i64::MAX - checkpoint).wrapping_add(partition.end)
    };
    if count > i64::MAX.wrapping_sub(stale) {
        0
    } else {
        count
    }
}

/// KEDA's `getTotalLagRelatedToPartitionAmount`: no more than `threshold` per partition.
pub fn lag_for_partitions(total: i64, partitions: i64, threshold: i64) -> i64 {
    if threshold > 0 && total / threshold > partitions {
        partitions.saturating_mul(threshold)
    } else {
        total
    }
}

#[async_trait]
impl PooledSource for EventHubConfig {
    type Key = EventHubKey;
    type Client = EventHubClients;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        EventHubConfig::parse(ctx)
    }

    fn client_key(&self) -> Result<EventHubKey, MetadataError> {
        Ok(self.key.clone())
    }

    async fn connect(
        ctx: &ScalerContext,
        key: EventHubKey,
    ) -> Result<Lease<EventHubKey, EventHubClients>, ScalerError> {
        let target = format!(
            "Event Hubs at {} and Azure Storage at {}",
            key.http.origin,
            describe_url(&key.storage.endpoint)
        );
        ctx.clients
            .pool::<EventHubKey, EventHubClients>()
            .get_or_connect(key.clone(), || async move {
                Ok::<_, String>(EventHubClients {
                    http: HttpClient::new(&key.http).map_err(|e| e.to_string())?,
                    storage: StorageClient::new(key.storage).map_err(|e| e.to_string())?,
                })
            })
            .await
            .map_err(|e| ScalerError::Connect {
                trigger: ctx.trigger_id(),
                target,
                source: Failure::local(e),
            })
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target(self.metric_type, self.threshold),
        )]
    }

    #[allow(clippy::cast_precision_loss)]
    async fn read(
        &self,
        client: &EventHubClients,
        read: ReadCtx<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let hub = format!("event hub \"{}\"", self.hub);
        let body = self.get(&client.http, read, &[&self.hub], &hub).await?;
        let ids = runtime::partition_ids(&body)
            .map_err(|why| read.unexpected(format!("Event Hubs answered {why} for {hub}")))?
            .ok_or_else(|| read.unexpected(format!("{hub} doesn't exist")))?;
        let mut total: i64 = 0;
        for id in &ids {
            let what = format!("partition {id} of {hub}");
            let body = self
                .get(
                    &client.http,
                    read,
                    &[
                        &self.hub,
                        "consumergroups",
                        RUNTIME_CONSUMER_GROUP,
                        "partitions",
                        id,
                    ],
                    &what,
                )
                .await?;
            let partition = runtime::partition(&body)
                .map_err(|why| read.unexpected(format!("Event Hubs answered {why} for {what}")))?
                .ok_or_else(|| read.unexpected(format!("{what} doesn't exist")))?;
            let checkpoint = if partition.end == -1 {
                None
            } else {
                self.checkpoint(&client.storage, read, id).await?
            };
            total = total.wrapping_add(unprocessed(partition, checkpoint, self.stale));
        }
        if total < 0 {
            total = i64::MAX;
        }
        let partitions = i64::try_from(ids.len()).unwrap_or(i64::MAX);
        let lag = lag_for_partitions(total, partitions, self.threshold);
        Ok(MetricsAndActivity {
            values: vec![MetricValue::new(metric_name, lag as f64)],
            active: total > self.activation,
        })
    }
}

#[cfg(test)]
mod tests;
