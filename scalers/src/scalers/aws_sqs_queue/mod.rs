//! `aws-sqs-queue`: the number of messages of an Amazon SQS queue (KEDA's
//! `aws_sqs_queue_scaler.go`).
//!
//! One `GetQueueAttributes` call (SQS' JSON protocol) per poll asks for
//! `ApproximateNumberOfMessages`, plus `ApproximateNumberOfMessagesNotVisible` with
//! `scaleOnInFlight` (default) and `ApproximateNumberOfMessagesDelayed` with `scaleOnDelayed`;
//! the value is their sum. Active iff the value is above `activationQueueLength`. Metric
//! `s<i>-aws-sqs-<queue name>`, integer target `queueLength`.

use async_trait::async_trait;
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::aws::client::{Input, SQS, Service};
use crate::aws::source::{AwsApi, AwsCall, count_report};
use crate::aws::{AwsSettings, COMMON_PARAMS};
use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError, Source};
use crate::metadata::{MetadataParser, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target};
use crate::scaler::MetricsAndActivity;

const QUEUE_LENGTH: Param = Param::optional("queueLength")
    .default("5")
    .range(1.0, f64::MAX);
const ACTIVATION_QUEUE_LENGTH: Param = Param::optional("activationQueueLength").default("0");
const QUEUE_URL: Param = Param::required("queueURL").order(&[Source::Metadata, Source::Env]);
const SCALE_ON_IN_FLIGHT: Param = Param::optional("scaleOnInFlight").default("true");
const SCALE_ON_DELAYED: Param = Param::optional("scaleOnDelayed").default("false");

/// The parameters of `aws-sqs-queue`.
pub const PARAMS: &[Param] = &[
    QUEUE_LENGTH,
    ACTIVATION_QUEUE_LENGTH,
    QUEUE_URL,
    SCALE_ON_IN_FLIGHT,
    SCALE_ON_DELAYED,
    COMMON_PARAMS[0],
    COMMON_PARAMS[1],
    COMMON_PARAMS[2],
    COMMON_PARAMS[3],
    COMMON_PARAMS[4],
    COMMON_PARAMS[5],
    COMMON_PARAMS[6],
    COMMON_PARAMS[7],
    COMMON_PARAMS[8],
    COMMON_PARAMS[9],
];

/// Messages ready to be received.
pub const VISIBLE: &str = "ApproximateNumberOfMessages";
/// Messages received and not yet deleted (in flight).
pub const NOT_VISIBLE: &str = "ApproximateNumberOfMessagesNotVisible";
/// Messages not yet visible because of a delay.
pub const DELAYED: &str = "ApproximateNumberOfMessagesDelayed";

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct SqsConfig {
    /// `queueURL` as written (sent as `QueueUrl`).
    pub queue_url: String,
    /// The queue name: the last segment of the URL's `/<account>/<name>` path, or `queueURL`
    /// itself when it is not a URL.
    pub queue_name: String,
    /// The attributes summed, in order.
    pub attributes: Vec<&'static str>,
    /// `queueLength`.
    pub target: i64,
    /// `activationQueueLength`.
    pub activation: i64,
    /// Region, endpoint, credentials.
    pub aws: AwsSettings,
    /// `s<index>-aws-sqs-<queue name>`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
}

impl SqsConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// A parameter is missing or malformed, `queueURL` is a URL whose path is not
    /// `/<account>/<queue>`, or the credentials are incomplete.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let queue_url: String = p.get(&QUEUE_URL)?;
            let queue_name = queue_name(p, &queue_url)?;
            let mut attributes = vec![VISIBLE];
            if p.get(&SCALE_ON_IN_FLIGHT)? {
                attributes.push(NOT_VISIBLE);
            }
            if p.get(&SCALE_ON_DELAYED)? {
                attributes.push(DELAYED);
            }
            Ok(Self {
                metric_name: ctx.metric_name(&format!("aws-sqs-{queue_name}")),
                queue_url,
                queue_name,
                attributes,
                target: p.get(&QUEUE_LENGTH)?,
                activation: p.get(&ACTIVATION_QUEUE_LENGTH)?,
                aws: AwsSettings::parse(p)?,
                metric_type,
            })
        })?)
    }
}

/// KEDA's rule: a URL must have the path `/<account>/<queue>`; anything that is not a URL is
/// the queue's name.
fn queue_name(p: &MetadataParser<'_>, queue_url: &str) -> Result<String, MetadataError> {
    let path = match url::Url::parse(queue_url) {
        Ok(url) if url.cannot_be_a_base() => return Ok(queue_url.to_string()),
        Ok(url) => url.path().to_string(),
        Err(_) if queue_url.starts_with('/') => queue_url.to_string(),
        Err(_) => return Ok(queue_url.to_string()),
    };
    match path.split('/').collect::<Vec<_>>().as_slice() {
        ["", _account, name] if !name.is_empty() => Ok((*name).to_string()),
        _ => Err(p.rule(
            "cannot get the queue name from parameter \"queueURL\": its path must be \
             /<account id>/<queue name>",
        )),
    }
}

/// The sum of `attributes` in a `GetQueueAttributes` answer.
pub(crate) fn sum_attributes(body: &[u8], attributes: &[&str]) -> Result<i64, String> {
    let answer: serde_json::Value =
        crate::remote::from_json(body).map_err(|e| crate::remote::json_error(&e))?;
    let mut total: i64 = 0;
    for name in attributes {
        let raw = answer
            .get("Attributes")
            .and_then(|a| a.get(*name))
            .and_then(|v| v.as_str())
            .ok_or_else(|| format!("no attribute {name}"))?;
        let value: i64 = raw
            .parse()
            .map_err(|_| format!("attribute {name} that is not an integer"))?;
        total = total
            .checked_add(value)
            .ok_or_else(|| format!("attribute {name}: the sum overflows"))?;
    }
    Ok(total)
}

#[async_trait]
impl AwsApi for SqsConfig {
    const SERVICE: Service = SQS;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        SqsConfig::parse(ctx)
    }

    fn settings(&self) -> &AwsSettings {
        &self.aws
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target(self.metric_type, self.target),
        )]
    }

    /// One `GetQueueAttributes`; the value is the sum of the asked attributes.
    async fn read(
        &self,
        call: &AwsCall<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let request = serde_json::json!({
            "QueueUrl": self.queue_url,
            "AttributeNames": self.attributes,
        });
        let body = call
            .call(
                "GetQueueAttributes",
                &Input::Json(&request),
                &format!("queue \"{}\" (queueURL)", self.queue_name),
            )
            .await?;
        let length = sum_attributes(&body, &self.attributes).map_err(|message| {
            call.read.unexpected(format!(
                "SQS answered GetQueueAttributes of queue \"{}\" with {message}",
                self.queue_name
            ))
        })?;
        Ok(count_report(metric_name, length, self.activation))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::test_context;

    const AUTH: &[(&str, &str)] = &[
        ("awsAccessKeyID", "AKIAEXAMPLE"),
        ("awsSecretAccessKey", "s3cret-access-key"),
    ];

    fn parse(metadata: &[(&str, &str)]) -> Result<SqsConfig, ScalerError> {
        SqsConfig::parse(&test_context("aws-sqs-queue", 0, metadata, &[], AUTH))
    }

    #[test]
    fn defaults_metric_name_and_attributes() {
        let config = parse(&[
            (
                "queueURL",
                "https://sqs.eu-west-1.amazonaws.com/123456789012/Orders_Queue.fifo",
            ),
            ("awsRegion", "eu-west-1"),
        ])
        .unwrap();
        assert_eq!(config.queue_name, "Orders_Queue.fifo");
        assert_eq!(config.metric_name, "s0-aws-sqs-Orders_Queue-fifo");
        assert_eq!(config.target, 5);
        assert_eq!(config.activation, 0);
        assert_eq!(config.attributes, [VISIBLE, NOT_VISIBLE]);
        let target = metric_target(config.metric_type, config.target);
        assert_eq!(target.average_value.map(|q| q.0), Some("5".into()));

        let config = parse(&[
            ("queueURL", "orders"),
            ("awsRegion", "eu-west-1"),
            ("scaleOnInFlight", "false"),
            ("scaleOnDelayed", "true"),
            ("queueLength", "20"),
            ("activationQueueLength", "3"),
        ])
        .unwrap();
        assert_eq!(config.queue_name, "orders");
        assert_eq!(config.attributes, [VISIBLE, DELAYED]);
        assert_eq!((config.target, config.activation), (20, 3));
    }

    #[test]
    fn the_queue_url_may_come_from_the_target_environment() {
        let ctx = test_context(
            "aws-sqs-queue",
            0,
            &[("queueURLFromEnv", "QUEUE"), ("awsRegion", "us-east-1")],
            &[("QUEUE", "https://sqs.us-east-1.amazonaws.com/1/jobs")],
            AUTH,
        );
        assert_eq!(SqsConfig::parse(&ctx).unwrap().queue_name, "jobs");
    }

    #[test]
    fn errors_name_the_parameter() {
        let rows: &[(&[(&str, &str)], &str)] = &[
            (
                &[("awsRegion", "eu-west-1")],
                r#"trigger 0 (aws-sqs-queue): missing required parameter "queueURL""#,
            ),
            (
                &[("queueURL", "https://sqs.eu-west-1.amazonaws.com/q")],
                r#"trigger 0 (aws-sqs-queue): cannot get the queue name from parameter "queueURL": its path must be /<account id>/<queue name>"#,
            ),
            (
                &[("queueURL", "q")],
                r#"trigger 0 (aws-sqs-queue): missing required parameter "awsRegion""#,
            ),
            (
                &[("queueURL", "q"), ("awsRegion", "x"), ("queueLength", "0")],
                r#"trigger 0 (aws-sqs-queue): parameter "queueLength": "0" is not at least 1"#,
            ),
            (
                &[
                    ("queueURL", "q"),
                    ("awsRegion", "x"),
                    ("scaleOnInFlight", "yes"),
                ],
                r#"trigger 0 (aws-sqs-queue): parameter "scaleOnInFlight": "yes" is not a valid boolean"#,
            ),
        ];
        for (i, (metadata, expected)) in rows.iter().enumerate() {
            let err = parse(metadata).expect_err("invalid");
            assert_eq!(err.to_string(), *expected, "row {i}");
        }
    }

    #[test]
    fn the_value_is_the_sum_of_the_asked_attributes() {
        let body = br#"{"Attributes":{"ApproximateNumberOfMessages":"3","ApproximateNumberOfMessagesNotVisible":"4","ApproximateNumberOfMessagesDelayed":"100"}}"#;
        assert_eq!(sum_attributes(body, &[VISIBLE, NOT_VISIBLE]), Ok(7));
        assert_eq!(sum_attributes(body, &[VISIBLE, DELAYED]), Ok(103));
        assert_eq!(
            sum_attributes(br#"{"Attributes":{}}"#, &[VISIBLE]),
            Err("no attribute ApproximateNumberOfMessages".into())
        );
        assert_eq!(
            sum_attributes(
                br#"{"Attributes":{"ApproximateNumberOfMessages":"x"}}"#,
                &[VISIBLE]
            ),
            Err("attribute ApproximateNumberOfMessages that is not an integer".into())
        );
    }
}
