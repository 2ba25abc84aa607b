//! `azure-servicebus`: the active message count of a Service Bus queue or topic subscription
//! (KEDA's `azure_servicebus_scaler.go`), read through the Service Bus management REST API
//! (ATOM over HTTPS, <https://learn.microsoft.com/rest/api/servicebus/>) with a shared access
//! signature made from the trigger's connection string ([`crate::azure::sas`]).
//!
//! - `queueName`: `GET https://<namespace>/<queue>?api-version=2021-05`;
//! - `topicName` + `subscriptionName`: `GET .../<topic>/Subscriptions/<subscription>`;
//! - with `useRegex: true` the name (`queueName`, or `subscriptionName` under `topicName`) is a
//!   regular expression matched against whole entity names: the namespace's queues
//!   (`$Resources/Queues`) or the topic's subscriptions are listed page by page (`$skip`,
//!   `$top`), and the counts of those that match are combined with `operation` (`sum`, `max`,
//!   or `avg`, an integer division as KEDA's).
//!
//! The value is `CountDetails/ActiveMessageCount` (as KEDA reads it: dead-lettered, scheduled
//! and transfer messages do not count). Active iff it is above `activationMessageCount`.
//! Metric `s<i>-azure-servicebus-<queueName|topicName>` (`-queue-regex` / `-topic-regex` with
//! `useRegex`), integer target `messageCount`.
//!
//! Only connection strings are credentials here; Azure AD (podIdentity `azure-workload`) is not
//! supported for azure-servicebus yet.

pub mod atom;

use std::borrow::Cow;

use async_trait::async_trait;
use http::StatusCode;
use http::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::authentication::HttpAuth;
use crate::azure::sas::{SasConnection, SasCredential, parse_connection_string};
use crate::context::ScalerContext;
use crate::error::{MetadataError, MetadataErrorKind, ScalerError, Source, TriggerId};
use crate::http_client::{self, HttpClientKey, VendorEndpoints, describe_url};
use crate::metadata::Param;
use crate::metric::{MetricTargetType, external_metric_spec, metric_target};
use crate::pooled::{ApiRequest, HttpApi, HttpCall, Pooled};
use crate::remote::{Failure, Kind};
use crate::scaler::MetricsAndActivity;
use crate::secret::Secret;

const MESSAGE_COUNT: Param = Param::optional("messageCount").default("5");
const ACTIVATION_MESSAGE_COUNT: Param = Param::optional("activationMessageCount").default("0");
const QUEUE_NAME: Param = Param::optional("queueName");
const TOPIC_NAME: Param = Param::optional("topicName");
const SUBSCRIPTION_NAME: Param = Param::optional("subscriptionName");
const CONNECTION: Param = Param::optional("connection")
    .order(&[Source::Auth, Source::Env])
    .secret();
const NAMESPACE: Param = Param::optional("namespace");
const USE_REGEX: Param = Param::optional("useRegex").default("false");
const OPERATION: Param = Param::optional("operation")
    .default("sum")
    .allowed(&["sum", "max", "avg"]);

/// The parameters of `azure-servicebus`, in KEDA's order.
pub const PARAMS: &[Param] = &[
    MESSAGE_COUNT,
    ACTIVATION_MESSAGE_COUNT,
    QUEUE_NAME,
    TOPIC_NAME,
    SUBSCRIPTION_NAME,
    CONNECTION,
    NAMESPACE,
    USE_REGEX,
    OPERATION,
];

/// The management API version sent (the one KEDA's SDK sends).
pub const API_VERSION: &str = "2021-05";
/// Entities asked for per page of a listing (Service Bus' largest page).
pub const PAGE_SIZE: usize = 100;
/// The most pages listed in one poll: at most `PAGE_SIZE x MAX_PAGES` (100,000) entities.
pub const MAX_PAGES: usize = 1000;
/// The largest regular expression accepted (compiled size, bytes).
pub const MAX_REGEX_BYTES: usize = 1 << 20;

/// What the trigger reads.
#[derive(Clone, Debug)]
pub enum Entity {
    /// A queue by name.
    Queue(String),
    /// A subscription of a topic.
    Subscription {
        /// `topicName`.
        topic: String,
        /// `subscriptionName`.
        subscription: String,
    },
}

/// How the counts of the entities a regex matched are combined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// The sum.
    Sum,
    /// The largest.
    Max,
    /// The sum divided (integer division) by the number of entities.
    Avg,
}

impl Operation {
    /// KEDA's `performOperation` over `counts` (0 for none).
    pub fn apply(self, counts: &[i64]) -> i64 {
        let mut result: i64 = 0;
        for &count in counts {
            match self {
                Self::Sum | Self::Avg => result = result.saturating_add(count),
                Self::Max => result = result.max(count),
            }
        }
        match (self, i64::try_from(counts.len())) {
            (Self::Avg, Ok(total)) if total != 0 => result / total,
            _ => result,
        }
    }
}

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct ServiceBusConfig {
    /// The queue or subscription.
    pub entity: Entity,
    /// With `useRegex`: the whole-name matcher of `queueName` or `subscriptionName`.
    pub regex: Option<regex::Regex>,
    /// `operation`.
    pub operation: Operation,
    /// `messageCount`.
    pub target: i64,
    /// `activationMessageCount`.
    pub activation: i64,
    /// The connection string and `https://<namespace>/` (the namespace's URL, as signatures
    /// name it), or why the string cannot be used (every read fails with it).
    namespace: Result<(SasConnection, url::Url), MetadataError>,
    /// The trigger, for errors of a request.
    trigger: TriggerId,
    /// Where requests go: `base`, or the process' replacement of its host (tests).
    vendor_endpoints: VendorEndpoints,
    /// The pooled client's key.
    client: Result<HttpClientKey, MetadataError>,
    /// `s<index>-azure-servicebus-<name>`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
}

/// Compiles `pattern` to match whole names, as KEDA's `FindString(name) == name` with
/// leftmost-longest matching does.
fn whole_name_regex(pattern: &str) -> Result<regex::Regex, regex::Error> {
    regex::RegexBuilder::new(pattern)
        .size_limit(MAX_REGEX_BYTES)
        .build()?;
    regex::RegexBuilder::new(&format!("^(?:{pattern})$"))
        .size_limit(MAX_REGEX_BYTES)
        .build()
}

impl ServiceBusConfig {
    /// Parses the trigger as KEDA does: numbers and `operation` first, then the entity rules
    /// (`queueName`, or `topicName` with `subscriptionName`; regexes compiled), then the
    /// connection string.
    ///
    /// # Errors
    /// A malformed number or boolean, an `operation` other than sum/max/avg, no entity or two,
    /// a regex that does not compile, no `connection` (Azure AD is not supported for
    /// azure-servicebus yet), or a connection string that cannot be used (naming what is wrong
    /// in it, never its secrets).
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let target: i64 = p.get(&MESSAGE_COUNT)?;
            let activation: i64 = p.get(&ACTIVATION_MESSAGE_COUNT)?;
            let queue: Option<String> = p.get_opt(&QUEUE_NAME)?;
            let topic: Option<String> = p.get_opt(&TOPIC_NAME)?;
            let subscription: Option<String> = p.get_opt(&SUBSCRIPTION_NAME)?;
            let connection: Option<Secret> = p.get_opt(&CONNECTION)?;
            let _namespace: Option<String> = p.get_opt(&NAMESPACE)?;
            let use_regex: bool = p.get(&USE_REGEX)?;
            let operation = match p.get::<String>(&OPERATION)?.as_str() {
                "max" => Operation::Max,
                "avg" => Operation::Avg,
                _ => Operation::Sum,
            };
            let compile = |param: &Param, pattern: &str| {
                whole_name_regex(pattern).map_err(|_| {
                    p.rule(format!("{} is not a valid regular expression", param.name))
                })
            };
            let (entity, regex, metric) = match (queue, topic) {
                (Some(_), _) if subscription.is_some() => {
                    return Err(p.rule("subscription name provided with queue name"));
                }
                (Some(_), Some(_)) => {
                    return Err(p.rule("both topic and queue name metadata provided"));
                }
                (Some(queue), None) => {
                    let regex = use_regex
                        .then(|| compile(&QUEUE_NAME, &queue))
                        .transpose()?;
                    let metric = if use_regex {
                        "queue-regex".into()
                    } else {
                        queue.clone()
                    };
                    (Entity::Queue(queue), regex, metric)
                }
                (None, Some(topic)) => {
                    let Some(subscription) = subscription else {
                        return Err(p.rule("no subscription name provided with topic name"));
                    };
                    let regex = use_regex
                        .then(|| compile(&SUBSCRIPTION_NAME, &subscription))
                        .transpose()?;
                    let metric = if use_regex {
                        "topic-regex".into()
                    } else {
                        topic.clone()
                    };
                    (
                        Entity::Subscription {
                            topic,
                            subscription,
                        },
                        regex,
                        metric,
                    )
                }
                (None, None) => return Err(p.rule("no service bus entity type set")),
            };
            let Some(connection) = connection else {
                return Err(p.rule(
                    "no connection setting given: give the namespace's connection string as the \
                     TriggerAuthentication parameter \"connection\", or name a variable of the \
                     target's container holding it with \"connectionFromEnv\" (Azure AD \
                     (podIdentity azure-workload) is not supported for azure-servicebus yet; use \
                     a connection string)",
                ));
            };
            // KEDA parses the string when it first reads: an unusable one fails every read.
            let namespace = parse_connection_string(connection.expose())
                .and_then(|c| {
                    if let SasCredential::Key { name, .. } = &c.credential
                        && HeaderValue::from_str(name).is_err()
                    {
                        return Err(
                            "SharedAccessKeyName holds characters an HTTP header cannot \
                                    carry"
                                .to_string(),
                        );
                    }
                    let base =
                        url::Url::parse(&format!("https://{}/", c.namespace)).map_err(|_| {
                            "the Endpoint's host cannot make an https:// URL".to_string()
                        })?;
                    Ok((c, base))
                })
                .map_err(|why| {
                    p.rule(format!(
                        "parameter \"connection\": the Service Bus connection string cannot be \
                         used: {why}"
                    ))
                });
            let client = namespace
                .as_ref()
                .map_err(Clone::clone)
                .map(|(_, base)| HttpClientKey {
                    origin: http_client::origin(&ctx.vendor_endpoints.redirect(base.clone())),
                    auth: HttpAuth::default(),
                    timeout: ctx.global_http_timeout,
                });
            Ok(Self {
                entity,
                regex,
                operation,
                target,
                activation,
                namespace,
                trigger: ctx.trigger_id(),
                vendor_endpoints: ctx.vendor_endpoints.clone(),
                client,
                metric_name: ctx.metric_name(&format!("azure-servicebus-{metric}")),
                metric_type,
            })
        })?)
    }

    /// The namespace URL of `path` (segments, each percent-encoded; a name's `/` separates
    /// segments, as Service Bus paths do) with `query` after `api-version`.
    fn url(&self, path: &[&str], query: &[(&str, &str)]) -> Result<url::Url, MetadataError> {
        let (_, base) = self.namespace.as_ref().map_err(Clone::clone)?;
        let mut url = base.clone();
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop_if_empty();
            for part in path {
                segments.extend(part.split('/'));
            }
        }
        {
            let mut pairs = url.query_pairs_mut();
            pairs.append_pair("api-version", API_VERSION);
            for (k, v) in query {
                pairs.append_pair(k, v);
            }
        }
        Ok(url)
    }

    /// The request of `url` (the namespace's own), signed for it at `now` and sent to its
    /// replacement host if the process set one.
    fn signed(&self, url: url::Url, now: jiff::Timestamp) -> Result<ApiRequest<'_>, MetadataError> {
        let (connection, _) = self.namespace.as_ref().map_err(Clone::clone)?;
        let token = connection
            .credential
            .authorization(url.as_str(), now.as_second());
        let mut headers = HeaderMap::new();
        // The connection string was checked when it was read; a token that still cannot be a
        // header value is refused rather than sent.
        let mut value = HeaderValue::from_str(&token).map_err(|_| MetadataError {
            trigger: self.trigger.clone(),
            kind: MetadataErrorKind::Rule(
                "parameter \"connection\": the signature cannot be sent in a header".into(),
            ),
        })?;
        value.set_sensitive(true);
        headers.insert(AUTHORIZATION, value);
        Ok(ApiRequest {
            url: self.vendor_endpoints.redirect(url),
            headers: Cow::Owned(headers),
            body: None,
        })
    }

    /// The request of page `skip` of the listing of a regex trigger.
    fn page_request(
        &self,
        skip: usize,
        now: jiff::Timestamp,
    ) -> Result<ApiRequest<'_>, MetadataError> {
        let skip = skip.to_string();
        let top = PAGE_SIZE.to_string();
        let query = [("$skip", skip.as_str()), ("$top", top.as_str())];
        let url = match &self.entity {
            Entity::Queue(_) => self.url(&["$Resources", "Queues"], &query)?,
            Entity::Subscription { topic, .. } => {
                self.url(&[topic.as_str(), "Subscriptions"], &query)?
            }
        };
        self.signed(url, now)
    }

    /// What the trigger reads, for messages.
    fn describe(&self) -> String {
        match (&self.entity, &self.regex) {
            (Entity::Queue(q), None) => format!("queue \"{q}\" (queueName)"),
            (Entity::Queue(q), Some(_)) => format!("queues matching \"{q}\" (queueName)"),
            (
                Entity::Subscription {
                    topic,
                    subscription,
                },
                None,
            ) => format!(
                "subscription \"{subscription}\" (subscriptionName) of topic \"{topic}\" (topicName)"
            ),
            (
                Entity::Subscription {
                    topic,
                    subscription,
                },
                Some(_),
            ) => format!(
                "subscriptions matching \"{subscription}\" (subscriptionName) of topic \"{topic}\" (topicName)"
            ),
        }
    }

    /// The active message count now.
    async fn count(&self, call: &HttpCall<'_>) -> Result<i64, ScalerError> {
        let now = call.read.now();
        let Some(regex) = &self.regex else {
            let request = self.request(now).map_err(ScalerError::Metadata)?;
            let body = call.send(self, request).await?;
            let found = atom::entity(&body).map_err(|why| {
                call.read.unexpected(format!(
                    "Service Bus answered {why} for {}",
                    self.describe()
                ))
            })?;
            return match found {
                Some(entity) => Ok(entity.active),
                None => Err(call.read.unexpected(match &self.entity {
                    Entity::Queue(q) => format!("queue {q} doesn't exist"),
                    Entity::Subscription {
                        topic,
                        subscription,
                    } => format!("subscription {subscription} doesn't exist in topic {topic}"),
                })),
            };
        };
        let mut counts = Vec::new();
        let mut skip = 0;
        for _ in 0..MAX_PAGES {
            let request = self
                .page_request(skip, now)
                .map_err(ScalerError::Metadata)?;
            let body = call.send(self, request).await?;
            let page = atom::feed(&body).map_err(|why| {
                call.read.unexpected(format!(
                    "Service Bus answered {why} listing {}",
                    self.describe()
                ))
            })?;
            counts.extend(
                page.iter()
                    .filter(|e| regex.is_match(&e.name))
                    .map(|e| e.active),
            );
            if page.len() < PAGE_SIZE {
                return Ok(self.operation.apply(&counts));
            }
            skip += page.len();
        }
        Err(call.read.unexpected(format!(
            "listing {} gave more than {} entities (the most one poll reads)",
            self.describe(),
            PAGE_SIZE * MAX_PAGES
        )))
    }
}

/// An `azure-servicebus` scaler.
pub type ServiceBusScaler = Pooled<ServiceBusConfig>;

#[async_trait]
impl HttpApi for ServiceBusConfig {
    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        ServiceBusConfig::parse(ctx)
    }

    fn client_key(&self) -> Result<HttpClientKey, MetadataError> {
        self.client.clone()
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target(self.metric_type, self.target),
        )]
    }

    /// The Get Entity request of a trigger without `useRegex` (the first page of the listing
    /// with it).
    fn request(&self, now: jiff::Timestamp) -> Result<ApiRequest<'_>, MetadataError> {
        if self.regex.is_some() {
            return self.page_request(0, now);
        }
        let url = match &self.entity {
            Entity::Queue(queue) => self.url(&[queue.as_str()], &[])?,
            Entity::Subscription {
                topic,
                subscription,
            } => self.url(
                &[topic.as_str(), "Subscriptions", subscription.as_str()],
                &[],
            )?,
        };
        self.signed(url, now)
    }

    fn operation(&self, request: &ApiRequest<'_>) -> String {
        format!(
            "Service Bus management GET for {} at {} (connection)",
            self.describe(),
            describe_url(&request.url)
        )
    }

    /// Service Bus' refusals of the signature (401), of the rule's rights (403), a missing
    /// topic (404) and throttling (429), named; its own text is never shown.
    fn error_answer(&self, status: StatusCode, body: &[u8]) -> Option<Failure> {
        let code = match status.as_u16() {
            401 => "unauthorized (HTTP 401): check SharedAccessKeyName and SharedAccessKey (or \
                    SharedAccessSignature) of the connection string"
                .to_string(),
            403 => "forbidden (HTTP 403): the connection string's shared access policy needs the \
                    Manage right to read entity properties"
                .to_string(),
            404 => "not found (HTTP 404): check topicName".to_string(),
            429 => "throttled (HTTP 429): the namespace's request quota was reached".to_string(),
            _ => return None,
        };
        Some(Failure::new(
            Kind::Server {
                system: "Azure Service Bus",
                code: Some(code),
            },
            Some(String::from_utf8_lossy(body).into_owned()),
        ))
    }

    fn read(&self, body: &[u8], metric_name: &str) -> Result<MetricsAndActivity, String> {
        let count = match atom::entity(body)? {
            Some(entity) => entity.active,
            None => return Err(format!("{} doesn't exist", self.describe())),
        };
        Ok(self.report(count, metric_name))
    }

    async fn fetch(
        &self,
        call: &HttpCall<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let count = self.count(call).await?;
        Ok(self.report(count, metric_name))
    }
}

impl ServiceBusConfig {
    #[allow(clippy::cast_precision_loss)]
    fn report(&self, count: i64, metric_name: &str) -> MetricsAndActivity {
        MetricsAndActivity {
            values: vec![crate::scaler::MetricValue::new(metric_name, count as f64)],
            active: count > self.activation,
        }
    }
}

#[cfg(test)]
mod tests;
