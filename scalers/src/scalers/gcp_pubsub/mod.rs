//! `gcp-pubsub`: scales on a Pub/Sub subscription's or topic's metric (by default the
//! subscription's undelivered messages) read from Cloud Monitoring with a Monitoring Query
//! Language query, as KEDA's `gcp-pubsub` trigger does (`pkg/scalers/gcp_pubsub_scaler.go`,
//! `pkg/scalers/gcp/gcp_stackdriver_client.go` `BuildMQLQuery` and `QueryMetrics`).
//!
//! Every trigger with the same service account key and timeout shares one client (its token
//! and its connections to Cloud Monitoring).

use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError, Source, TriggerId};
use crate::gcp::{self, GcpClient, GcpKey, KeySource, monitoring};
use crate::metadata::Param;
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pooled::{KeyedSource, Pooled, ReadCtx};
use crate::scaler::MetricsAndActivity;

const METADATA: &[Source] = &[Source::Metadata];
const METADATA_ENV: &[Source] = &[Source::Metadata, Source::Env];

const SUBSCRIPTION_SIZE: Param = Param::deprecated(
    "subscriptionSize",
    "The 'subscriptionSize' setting is DEPRECATED and is removed in v2.20 - Use 'mode' and 'value' instead",
);
const MODE: Param = Param::optional("mode")
    .order(METADATA)
    .default("SubscriptionSize");
const VALUE: Param = Param::optional("value").order(METADATA).default("10");
const ACTIVATION_VALUE: Param = Param::optional("activationValue")
    .order(METADATA)
    .default("0");
const AGGREGATION: Param = Param::optional("aggregation").order(METADATA);
const TIME_HORIZON: Param = Param::optional("timeHorizon").order(METADATA);
const VALUE_IF_NULL: Param = Param::optional("valueIfNull").order(METADATA);
const SUBSCRIPTION_NAME: Param = Param::optional("subscriptionName").order(METADATA_ENV);
const TOPIC_NAME: Param = Param::optional("topicName").order(METADATA_ENV);

/// The parameters of `gcp-pubsub`.
pub const PARAMS: &[Param] = &[
    SUBSCRIPTION_SIZE,
    MODE,
    VALUE,
    ACTIVATION_VALUE,
    AGGREGATION,
    TIME_HORIZON,
    VALUE_IF_NULL,
    SUBSCRIPTION_NAME,
    TOPIC_NAME,
    gcp::APPLICATION_CREDENTIALS,
    gcp::CREDENTIALS,
    gcp::CREDENTIALS_FROM_ENV_FILE,
];

/// What the query needs beyond the project: the resource's id, the project named in a
/// composite name, and the MQL aggregation.
#[derive(Clone, Debug, PartialEq)]
pub struct QueryParts {
    /// The subscription or topic id.
    pub resource_id: String,
    /// The project of a `projects/<p>/subscriptions/<id>` name.
    pub project: Option<String>,
    /// `mean(value)`, `percentile(value, 99)`, ...
    pub aggregation: Option<String>,
}

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct PubSubConfig {
    /// `subscription` or `topic`.
    pub resource_type: &'static str,
    /// `subscriptionName` or `topicName`, as given.
    pub resource_name: String,
    /// `pubsub.googleapis.com/<type>/<mode in snake case>`.
    pub metric_type: String,
    /// The query's parts, or why the name or aggregation cannot be used (every read fails
    /// with it, as KEDA fails when it builds the query).
    pub parts: Result<QueryParts, MetadataError>,
    /// `timeHorizon`.
    pub time_horizon: std::time::Duration,
    /// `valueIfNull`.
    pub value_if_null: Option<f64>,
    /// `value`.
    pub value: f64,
    /// `activationValue`.
    pub activation: f64,
    /// `s<index>-gcp-ps-<name>`, normalized.
    pub metric_name: String,
    /// AverageValue or Value.
    pub target_type: MetricTargetType,
    /// The client's key.
    pub key: GcpKey,
    /// Cloud Monitoring's base URL.
    pub base: url::Url,
    trigger: TriggerId,
}

impl PubSubConfig {
    /// Parses the trigger as KEDA's `parsePubSubMetadata`.
    ///
    /// # Errors
    /// `subscriptionSize` given; not exactly one of `subscriptionName` and `topicName`; a
    /// malformed number or duration; no credentials.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let target_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let _: Option<String> = p.get_opt(&SUBSCRIPTION_SIZE)?;
            let mode: String = p.get(&MODE)?;
            let value: f64 = p.get(&VALUE)?;
            let activation: f64 = p.get(&ACTIVATION_VALUE)?;
            let aggregation: Option<String> = p.get_opt(&AGGREGATION)?;
            let time_horizon = match p.find(&TIME_HORIZON)? {
                None => std::time::Duration::ZERO,
                Some(found) => monitoring::parse_go_duration(found.value).ok_or_else(|| {
                    p.invalid(&TIME_HORIZON, found, "a duration such as 2m or 90s")
                })?,
            };
            let value_if_null: Option<f64> = p.get_opt(&VALUE_IF_NULL)?;
            let subscription: Option<String> = p.get_opt(&SUBSCRIPTION_NAME)?;
            let topic: Option<String> = p.get_opt(&TOPIC_NAME)?;
            let (resource_type, resource_name, param) = match (subscription, topic) {
                (Some(s), None) => ("subscription", s, SUBSCRIPTION_NAME.name),
                (None, Some(t)) => ("topic", t, TOPIC_NAME.name),
                _ => {
                    return Err(p.rule("exactly one of subscription or topic name must be given"));
                }
            };
            let key = KeySource::parse(p, ctx)?;
            let base =
                gcp::api_base(&ctx.vendor_endpoints, monitoring::HOST).map_err(|e| p.rule(e))?;
            // SubscriptionSize is NumUndeliveredMessages (KEDA keeps the old name).
            let mode = if mode == "SubscriptionSize" {
                "NumUndeliveredMessages".to_string()
            } else {
                mode
            };
            let (resource_id, project) = resource_data(&resource_name);
            let parts = validate_resource_name(&resource_id)
                .map_err(|why| p.rule(format!("parameter \"{param}\": {why}")))
                .and_then(|()| {
                    aggregation
                        .as_deref()
                        .map(build_aggregation)
                        .transpose()
                        .map_err(|why| p.rule(format!("parameter \"aggregation\": {why}")))
                })
                .map(|aggregation| QueryParts {
                    resource_id,
                    project,
                    aggregation,
                });
            Ok(Self {
                resource_type,
                metric_type: format!(
                    "pubsub.googleapis.com/{resource_type}/{}",
                    snake_case(&mode)
                ),
                metric_name: ctx.metric_name(&format!("gcp-ps-{resource_name}")),
                resource_name,
                parts,
                time_horizon,
                value_if_null,
                value,
                activation,
                target_type,
                key: GcpKey::new(ctx, &base, key, gcp::MONITORING_SCOPES),
                base,
                trigger: ctx.trigger_id(),
            })
        })?)
    }

    /// KEDA's `BuildMQLQuery` for `project`.
    pub fn query(&self, parts: &QueryParts, project: &str) -> String {
        let horizon = if self.time_horizon.is_zero() {
            if parts.aggregation.is_some() {
                monitoring::AGGREGATION_TIME_HORIZON
            } else {
                monitoring::DEFAULT_TIME_HORIZON
            }
        } else {
            self.time_horizon
        };
        let rt = self.resource_type;
        let mut q = format!(
            "fetch pubsub_{rt} | metric '{}' | filter (resource.project_id == '{project}' && resource.{rt}_id == '{}') | within {}",
            self.metric_type,
            parts.resource_id,
            monitoring::go_duration(horizon)
        );
        if let Some(aggregation) = &parts.aggregation {
            let period = monitoring::go_duration(monitoring::ALIGNMENT_PERIOD);
            q.push_str(&format!(
                " | align delta({period}) | every {period} | group_by [], {aggregation}"
            ));
        }
        q
    }
}

/// KEDA's `getResourceData`: a name holding `projects/<p>/(subscriptions|topics)/<id>` gives
/// `<id>` and `<p>` (the name's 4th and 2nd `/` parts); any other name is the id itself.
pub fn resource_data(name: &str) -> (String, Option<String>) {
    if composite(name) {
        let parts: Vec<&str> = name.split('/').collect();
        if let (Some(project), Some(id)) = (parts.get(1), parts.get(3)) {
            return ((*id).to_string(), Some((*project).to_string()));
        }
    }
    (name.to_string(), None)
}

/// KEDA's unanchored `projects/[a-z][a-zA-Z0-9-]*[a-zA-Z0-9]/(subscriptions|topics)/[a-zA-Z]`
/// somewhere in `name`.
fn composite(name: &str) -> bool {
    name.match_indices("projects/").any(|(i, m)| {
        let rest = &name[i + m.len()..];
        let Some((project, rest)) = rest.split_once('/') else {
            return false;
        };
        let b = project.as_bytes();
        let project_ok = b.len() >= 2
            && b[0].is_ascii_lowercase()
            && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
            && b.last().is_some_and(u8::is_ascii_alphanumeric);
        let rest = rest
            .strip_prefix("subscriptions/")
            .or_else(|| rest.strip_prefix("topics/"));
        project_ok
            && rest.is_some_and(|r| r.as_bytes().first().is_some_and(u8::is_ascii_alphabetic))
    })
}

/// KEDA's `validateResourceName`: not starting with `goog`, and
/// `^[A-Za-z][A-Za-z0-9\-_.~+%]{2,254}$`.
///
/// # Errors
/// KEDA's message.
pub fn validate_resource_name(name: &str) -> Result<(), String> {
    if name.to_ascii_lowercase().starts_with("goog") {
        return Err(format!(
            "invalid Pub/Sub resource name {name:?}: names cannot start with \"goog\""
        ));
    }
    let b = name.as_bytes();
    let ok = (3..=255).contains(&b.len())
        && b[0].is_ascii_alphabetic()
        && b[1..]
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || b"-_.~+%".contains(c));
    if ok {
        Ok(())
    } else {
        Err(format!("invalid Pub/Sub resource name {name:?}"))
    }
}

/// KEDA's `buildAggregation`: `percentile<N>` (0 to 100) is `percentile(value, N)`; `median`,
/// `mean`, `variance`, `stddev`, `sum`, `count` are `<name>(value)`.
///
/// # Errors
/// KEDA's messages.
pub fn build_aggregation(aggregation: &str) -> Result<String, String> {
    if let Some(p) = aggregation.strip_prefix("percentile") {
        return match p.parse::<i64>() {
            Ok(n) if (0..=100).contains(&n) => Ok(format!("percentile(value, {n})")),
            _ => Err(format!("invalid percentile value: {p}")),
        };
    }
    match aggregation {
        "median" | "mean" | "variance" | "stddev" | "sum" | "count" => {
            Ok(format!("{aggregation}(value)"))
        }
        _ => Err(format!("unsupported aggregation function: {aggregation}")),
    }
}

/// KEDA's `snakeCase`: `(.)([A-Z][a-z]+)` -> `$1_$2`, then `([a-z0-9])([A-Z])` -> `$1_$2`,
/// lower-cased (`NumUndeliveredMessages` -> `num_undelivered_messages`).
pub fn snake_case(camel: &str) -> String {
    let chars: Vec<char> = camel.chars().collect();
    // Pass 1, leftmost non-overlapping matches of (.)([A-Z][a-z]+).
    let mut first = String::new();
    let mut i = 0;
    while i < chars.len() {
        let matched = i + 2 < chars.len()
            && chars[i + 1].is_ascii_uppercase()
            && chars[i + 2].is_ascii_lowercase();
        if matched {
            let mut end = i + 3;
            while end < chars.len() && chars[end].is_ascii_lowercase() {
                end += 1;
            }
            first.push(chars[i]);
            first.push('_');
            first.extend(&chars[i + 1..end]);
            i = end;
        } else {
            first.push(chars[i]);
            i += 1;
        }
    }
    // Pass 2, ([a-z0-9])([A-Z]).
    let chars: Vec<char> = first.chars().collect();
    let mut second = String::new();
    let mut i = 0;
    while i < chars.len() {
        if i + 1 < chars.len()
            && (chars[i].is_ascii_lowercase() || chars[i].is_ascii_digit())
            && chars[i + 1].is_ascii_uppercase()
        {
            second.push(chars[i]);
            second.push('_');
            second.push(chars[i + 1]);
            i += 2;
        } else {
            second.push(chars[i]);
            i += 1;
        }
    }
    second.to_lowercase()
}

/// A `gcp-pubsub` scaler.
pub type PubSubScaler = Pooled<PubSubConfig>;

#[async_trait::async_trait]
impl KeyedSource for PubSubConfig {
    type Client = GcpClient;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        PubSubConfig::parse(ctx)
    }

    fn key(&self) -> &GcpKey {
        &self.key
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target_milli(self.target_type, self.value),
        )]
    }

    async fn read(
        &self,
        client: &GcpClient,
        read: ReadCtx<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let parts = self
            .parts
            .as_ref()
            .map_err(|e| ScalerError::Metadata(e.clone()))?;
        // KEDA's getActualProjectID: the name's project, else the key's.
        let project = parts
            .project
            .clone()
            .unwrap_or_else(|| client.account().project_id.clone());
        let query = self.query(parts, &project);
        let value = monitoring::query_metrics(
            client,
            read,
            &self.base,
            &project,
            &query,
            self.value_if_null,
        )
        .await?;
        debug_assert_eq!(read.trigger, &self.trigger);
        Ok(MetricsAndActivity::single(
            metric_name,
            value,
            self.activation,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::test_context;

    fn parse(metadata: &[(&str, &str)]) -> Result<PubSubConfig, ScalerError> {
        PubSubConfig::parse(&test_context(
            "gcp-pubsub",
            0,
            metadata,
            &[("GOOGLE_CREDS", "{}")],
            &[],
        ))
    }

    #[test]
    fn snake_case_is_kedas() {
        // (mode, metric suffix)
        let rows = [
            ("NumUndeliveredMessages", "num_undelivered_messages"),
            ("OldestUnackedMessageAge", "oldest_unacked_message_age"),
            ("MessageSizes", "message_sizes"),
            ("AckLatencies", "ack_latencies"),
            ("num_undelivered_messages", "num_undelivered_messages"),
        ];
        for (mode, snake) in rows {
            assert_eq!(snake_case(mode), snake, "{mode}");
        }
    }

    #[test]
    fn names_give_the_resource_and_its_project_as_keda() {
        assert_eq!(resource_data("mysub"), ("mysub".into(), None));
        assert_eq!(
            resource_data("projects/myproject/subscriptions/mysub"),
            ("mysub".into(), Some("myproject".into()))
        );
        assert_eq!(
            resource_data("projects/my-proj/topics/t1"),
            ("t1".into(), Some("my-proj".into()))
        );
        // An upper-case project does not match KEDA's pattern.
        assert_eq!(
            resource_data("projects/My/subscriptions/s"),
            ("projects/My/subscriptions/s".into(), None)
        );
        assert!(validate_resource_name("mysub").is_ok());
        assert!(validate_resource_name("goog-sub").is_err());
        assert!(validate_resource_name("ab").is_err());
        assert!(validate_resource_name("projects/x").is_err());
    }

    #[test]
    fn queries_are_kedas_mql() {
        let config = parse(&[
            ("subscriptionName", "projects/myproject/subscriptions/mysub"),
            ("credentialsFromEnv", "GOOGLE_CREDS"),
        ])
        .unwrap();
        let parts = config.parts.clone().unwrap();
        assert_eq!(
            config.query(&parts, "myproject"),
            "fetch pubsub_subscription | metric 'pubsub.googleapis.com/subscription/num_undelivered_messages' | filter (resource.project_id == 'myproject' && resource.subscription_id == 'mysub') | within 2m0s"
        );
        assert_eq!(
            config.metric_name,
            "s0-gcp-ps-projects-myproject-subscriptions-mysub"
        );
        let config = parse(&[
            ("topicName", "mytopic"),
            ("mode", "MessageSizes"),
            ("aggregation", "percentile99"),
            ("credentialsFromEnv", "GOOGLE_CREDS"),
        ])
        .unwrap();
        let parts = config.parts.clone().unwrap();
        assert_eq!(
            config.query(&parts, "p"),
            "fetch pubsub_topic | metric 'pubsub.googleapis.com/topic/message_sizes' | filter (resource.project_id == 'p' && resource.topic_id == 'mytopic') | within 5m0s | align delta(3m0s) | every 3m0s | group_by [], percentile(value, 99)"
        );
    }

    #[test]
    fn bad_input_names_the_parameter() {
        let err = |metadata: &[(&str, &str)]| parse(metadata).unwrap_err().to_string();
        assert!(
            err(&[("credentialsFromEnv", "GOOGLE_CREDS")])
                .contains("exactly one of subscription or topic name must be given")
        );
        assert!(
            err(&[
                ("subscriptionName", "a"),
                ("topicName", "b"),
                ("credentialsFromEnv", "GOOGLE_CREDS")
            ])
            .contains("exactly one")
        );
        assert!(
            err(&[("subscriptionName", "mysub"), ("subscriptionSize", "5")])
                .contains("subscriptionSize")
        );
        assert!(
            err(&[("subscriptionName", "mysub")])
                .contains("google application credentials not found")
        );
        assert!(
            err(&[
                ("subscriptionName", "mysub"),
                ("timeHorizon", "5"),
                ("credentialsFromEnv", "GOOGLE_CREDS")
            ])
            .contains("timeHorizon")
        );
        // Read-time failures, as KEDA's: the trigger builds, reads name the parameter.
        let config = parse(&[
            ("subscriptionName", "mysub"),
            ("aggregation", "p99"),
            ("credentialsFromEnv", "GOOGLE_CREDS"),
        ])
        .unwrap();
        let e = config.parts.unwrap_err().to_string();
        assert!(
            e.contains("\"aggregation\": unsupported aggregation function: p99"),
            "{e}"
        );
        let config = parse(&[
            ("subscriptionName", "goog-x"),
            ("credentialsFromEnv", "GOOGLE_CREDS"),
        ])
        .unwrap();
        assert!(
            config
                .parts
                .unwrap_err()
                .to_string()
                .contains("subscriptionName")
        );
    }
}
