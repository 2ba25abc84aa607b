//! `azure-queue`: the number of messages of an Azure Storage queue (KEDA's
//! `azure_queue_scaler.go`).
//!
//! With `queueLengthStrategy: all` (default) one Get Queue Metadata call per poll reads
//! `x-ms-approximate-messages-count` (visible and invisible messages). With `visibleonly` the
//! scaler first peeks at up to 32 messages (peeking sees visible messages only); fewer than 32
//! is the value, else it falls back to the approximate count, as KEDA does. Active iff the value
//! is above `activationQueueLength`. Metric `s<i>-azure-queue-<queueName>`, integer target
//! `queueLength`.

use async_trait::async_trait;
use bytes::Bytes;
use http::Method;
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::azure::client::{self, StorageClient, StorageClientKey};
use crate::azure::{
    ACCOUNT_NAME, CLOUD, CONNECTION_QUEUE, ENDPOINT_SUFFIX, Service, StorageSettings,
};
use crate::context::ScalerContext;
use crate::error::ScalerError;
use crate::metadata::Param;
use crate::metric::{MetricTargetType, external_metric_spec, metric_target};
use crate::pooled::{KeyedSource, ReadCtx};
use crate::scaler::{MetricValue, MetricsAndActivity};

const QUEUE_NAME: Param = Param::required("queueName");
const QUEUE_LENGTH: Param = Param::optional("queueLength")
    .default("5")
    .range(1.0, f64::MAX);
const ACTIVATION_QUEUE_LENGTH: Param = Param::optional("activationQueueLength").default("0");
const QUEUE_LENGTH_STRATEGY: Param = Param::optional("queueLengthStrategy")
    .default("all")
    .allowed(&["all", "visibleonly"]);

/// The parameters of `azure-queue`.
pub const PARAMS: &[Param] = &[
    QUEUE_NAME,
    QUEUE_LENGTH,
    ACTIVATION_QUEUE_LENGTH,
    QUEUE_LENGTH_STRATEGY,
    CONNECTION_QUEUE,
    ACCOUNT_NAME,
    ENDPOINT_SUFFIX,
    CLOUD,
];

/// How many messages `visibleonly` peeks at (the service's maximum).
pub const MAX_PEEK_MESSAGES: usize = 32;

/// How the queue's length is counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// The approximate count of all messages.
    All,
    /// Visible messages, peeked; the approximate count from 32 on.
    VisibleOnly,
}

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct AzureQueueConfig {
    /// `queueName`.
    pub queue_name: String,
    /// `queueLength`.
    pub target: i64,
    /// `activationQueueLength`.
    pub activation: i64,
    /// `queueLengthStrategy`.
    pub strategy: Strategy,
    /// Endpoint and credential.
    pub storage: StorageSettings,
    /// `s<index>-azure-queue-<queueName>`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
    /// The pooled client's key: the storage endpoint, the credential and the timeout of one
    /// request (`KEDA_HTTP_DEFAULT_TIMEOUT`).
    pub key: StorageClientKey,
}

impl AzureQueueConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// A parameter is missing or malformed, or the connection string cannot be used.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let queue_name: String = p.get(&QUEUE_NAME)?;
            let strategy = match p.get::<String>(&QUEUE_LENGTH_STRATEGY)?.as_str() {
                "visibleonly" => Strategy::VisibleOnly,
                _ => Strategy::All,
            };
            // The targets, then the connection string: the order its errors are reported in.
            let target = p.get(&QUEUE_LENGTH)?;
            let activation = p.get(&ACTIVATION_QUEUE_LENGTH)?;
            let storage = StorageSettings::parse(p, Service::Queue, &CONNECTION_QUEUE)?;
            Ok(Self {
                metric_name: ctx.metric_name(&format!("azure-queue-{queue_name}")),
                target,
                activation,
                strategy,
                key: StorageClientKey {
                    endpoint: storage.endpoint.clone(),
                    credential: storage.credential.clone(),
                    timeout: ctx.global_http_timeout,
                },
                storage,
                queue_name,
                metric_type,
            })
        })?)
    }
}

#[async_trait]
impl KeyedSource for AzureQueueConfig {
    type Client = StorageClient;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        AzureQueueConfig::parse(ctx)
    }

    fn key(&self) -> &StorageClientKey {
        &self.key
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target(self.metric_type, self.target),
        )]
    }

    /// The queue's length, counted as `queueLengthStrategy` says.
    ///
    /// # Errors
    /// The service cannot be reached or answers an error (a missing queue, a key it refuses),
    /// an answer cannot be read.
    async fn read(
        &self,
        client: &StorageClient,
        read: ReadCtx<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let length = self.queue_length(client, read).await?;
        Ok(MetricsAndActivity {
            values: vec![MetricValue::new(metric_name, length as f64)],
            active: length > self.activation,
        })
    }
}

impl AzureQueueConfig {
    async fn queue_length(
        &self,
        client: &StorageClient,
        read: ReadCtx<'_>,
    ) -> Result<i64, ScalerError> {
        let queue = self.queue_name.as_str();
        let what = format!("queue \"{queue}\" (queueName)");
        if self.strategy == Strategy::VisibleOnly {
            let peek = MAX_PEEK_MESSAGES.to_string();
            let answer = client
                .send(
                    Method::GET,
                    &[queue, "messages"],
                    &[("peekonly", "true"), ("numofmessages", &peek)],
                    &[],
                    Bytes::new(),
                    read.clock,
                )
                .await
                .map_err(|e| {
                    client::query_error(client, read.trigger, "Peek Messages", &what, &e)
                })?;
            let visible = count_messages(&answer.body).map_err(|message| {
                read.unexpected(format!(
                    "Peek Messages of queue \"{queue}\" answered {message}"
                ))
            })?;
            if let Some(visible) = (visible < MAX_PEEK_MESSAGES)
                .then(|| i64::try_from(visible).ok())
                .flatten()
            {
                return Ok(visible);
            }
        }
        let answer = client
            .send(
                Method::GET,
                &[queue],
                &[("comp", "metadata")],
                &[],
                Bytes::new(),
                read.clock,
            )
            .await
            .map_err(|e| {
                client::query_error(client, read.trigger, "Get Queue Metadata", &what, &e)
            })?;
        let raw = answer
            .headers
            .get("x-ms-approximate-messages-count")
            .and_then(|v| v.to_str().ok());
        raw.and_then(|v| v.trim().parse::<i64>().ok())
            .filter(|n| *n >= 0)
            .ok_or_else(|| {
                read.unexpected(format!(
                    "Get Queue Metadata of queue \"{queue}\" answered {}",
                    match raw {
                        Some(v) => format!(
                            "an x-ms-approximate-messages-count ({} bytes) that is not a count",
                            v.len()
                        ),
                        None => "no x-ms-approximate-messages-count".into(),
                    }
                ))
            })
    }
}

/// The number of `QueueMessage` elements of a Peek Messages answer.
pub(crate) fn count_messages(body: &[u8]) -> Result<usize, String> {
    let text = std::str::from_utf8(body).map_err(|_| "a body that is not UTF-8".to_string())?;
    let doc = crate::remote::xml(text.trim_start_matches('\u{feff}').trim())
        .map_err(|e| crate::remote::xml_error(&e))?;
    let root = doc.root_element();
    if !root.has_tag_name("QueueMessagesList") {
        // The element's name is the server's text: not shown.
        return Err("another root element than <QueueMessagesList>".to_string());
    }
    Ok(root
        .children()
        .filter(|n| n.has_tag_name("QueueMessage"))
        .count())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::test_context;

    const AUTH: &[(&str, &str)] = &[(
        "connection",
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=c2VjcmV0LWtleS1ieXRlcw==;EndpointSuffix=core.windows.net",
    )];

    fn parse(metadata: &[(&str, &str)]) -> Result<AzureQueueConfig, ScalerError> {
        AzureQueueConfig::parse(&test_context("azure-queue", 1, metadata, &[], AUTH))
    }

    #[test]
    fn defaults_and_the_metric_name_follow_keda() {
        let config = parse(&[("queueName", "Orders_Queue")]).unwrap();
        assert_eq!(config.metric_name, "s1-azure-queue-Orders_Queue");
        assert_eq!((config.target, config.activation), (5, 0));
        assert_eq!(config.strategy, Strategy::All);
        assert_eq!(
            config.storage.endpoint.as_str(),
            "https://acct.queue.core.windows.net/"
        );
        let config = parse(&[
            ("queueName", "jobs"),
            ("queueLength", "20"),
            ("activationQueueLength", "3"),
            ("queueLengthStrategy", "visibleonly"),
        ])
        .unwrap();
        assert_eq!((config.target, config.activation), (20, 3));
        assert_eq!(config.strategy, Strategy::VisibleOnly);
    }

    #[test]
    fn errors_name_the_trigger_and_the_parameter() {
        let rows: &[(&[(&str, &str)], &str)] = &[
            (
                &[],
                r#"trigger 1 (azure-queue): missing required parameter "queueName""#,
            ),
            (
                &[("queueName", "q"), ("queueLength", "0")],
                r#"trigger 1 (azure-queue): parameter "queueLength": "0" is not at least 1"#,
            ),
            (
                &[("queueName", "q"), ("activationQueueLength", "x")],
                r#"trigger 1 (azure-queue): parameter "activationQueueLength": "x" is not a valid integer"#,
            ),
            (
                &[("queueName", "q"), ("queueLengthStrategy", "VisibleOnly")],
                r#"trigger 1 (azure-queue): parameter "queueLengthStrategy": "VisibleOnly" is not one of all, visibleonly"#,
            ),
        ];
        for (i, (metadata, expected)) in rows.iter().enumerate() {
            assert_eq!(
                parse(metadata).expect_err("invalid").to_string(),
                *expected,
                "row {i}"
            );
        }
    }

    #[test]
    fn peeked_messages_are_counted() {
        let body = b"\xef\xbb\xbf<?xml version=\"1.0\" encoding=\"utf-8\"?><QueueMessagesList>\
            <QueueMessage><MessageId>1</MessageId></QueueMessage>\
            <QueueMessage><MessageId>2</MessageId></QueueMessage></QueueMessagesList>";
        assert_eq!(count_messages(body), Ok(2));
        assert_eq!(count_messages(b"<QueueMessagesList/>"), Ok(0));
        assert_eq!(
            count_messages(b"<Error/>"),
            Err("another root element than <QueueMessagesList>".into())
        );
    }
}
