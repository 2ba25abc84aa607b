//! `aws-kinesis-stream`: the number of open shards of a Kinesis data stream (KEDA's
//! `aws_kinesis_stream_scaler.go`).
//!
//! One `DescribeStreamSummary` call (Kinesis' JSON 1.1 protocol) per poll; the value is the
//! answer's `StreamDescriptionSummary.OpenShardCount`. Active iff the count is above
//! `activationShardCount` (default 0). Metric `s<i>-aws-kinesis-<streamName>`, integer target
//! `shardCount` (default 2).

use async_trait::async_trait;
use k8s_openapi::api::autoscaling::v2::MetricSpec;
use serde_json::Value;

use crate::aws::client::{Input, KINESIS, Service};
use crate::aws::source::{AwsApi, AwsCall, count_report};
use crate::aws::{AwsSettings, COMMON_PARAMS};
use crate::context::ScalerContext;
use crate::error::ScalerError;
use crate::metadata::Param;
use crate::metric::{MetricTargetType, external_metric_spec, metric_target};
use crate::scaler::MetricsAndActivity;

const STREAM_NAME: Param = Param::required("streamName");
const SHARD_COUNT: Param = Param::optional("shardCount").default("2");
const ACTIVATION_SHARD_COUNT: Param = Param::optional("activationShardCount").default("0");

/// The parameters of `aws-kinesis-stream`.
pub const PARAMS: &[Param] = &[
    STREAM_NAME,
    SHARD_COUNT,
    ACTIVATION_SHARD_COUNT,
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

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct KinesisConfig {
    /// `streamName`.
    pub stream_name: String,
    /// `shardCount`.
    pub target: i64,
    /// `activationShardCount`.
    pub activation: i64,
    /// Region, endpoint, credentials.
    pub aws: AwsSettings,
    /// `s<index>-aws-kinesis-<streamName>`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
}

impl KinesisConfig {
    /// Parses the trigger with KEDA's rules.
    ///
    /// # Errors
    /// `streamName` missing, `shardCount`/`activationShardCount` not integers, AWS settings
    /// invalid.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let stream_name: String = p.get(&STREAM_NAME)?;
            Ok(Self {
                metric_name: ctx.metric_name(&format!("aws-kinesis-{stream_name}")),
                stream_name,
                target: p.get(&SHARD_COUNT)?,
                activation: p.get(&ACTIVATION_SHARD_COUNT)?,
                aws: AwsSettings::parse(p)?,
                metric_type,
            })
        })?)
    }

    /// The `DescribeStreamSummary` request.
    pub fn request(&self) -> Value {
        serde_json::json!({ "StreamName": self.stream_name })
    }
}

/// Reads `StreamDescriptionSummary.OpenShardCount` from a `DescribeStreamSummary` answer
/// (<https://docs.aws.amazon.com/kinesis/latest/APIReference/API_DescribeStreamSummary.html>):
/// a non-negative integer, anything else is `None`.
pub fn open_shard_count(body: &[u8]) -> Option<i64> {
    let answer: Value = crate::remote::from_json(body).ok()?;
    answer
        .get("StreamDescriptionSummary")?
        .get("OpenShardCount")?
        .as_i64()
        .filter(|n| *n >= 0)
}

#[async_trait]
impl AwsApi for KinesisConfig {
    const SERVICE: Service = KINESIS;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        KinesisConfig::parse(ctx)
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

    /// One `DescribeStreamSummary`; the value is the stream's open shard count.
    async fn read(
        &self,
        call: &AwsCall<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let stream = &self.stream_name;
        let body = call
            .call(
                "DescribeStreamSummary",
                &Input::Json(&self.request()),
                &format!("stream \"{stream}\" (streamName)"),
            )
            .await?;
        let count = open_shard_count(&body).ok_or_else(|| {
            call.read.unexpected(format!(
                "Kinesis answered the DescribeStreamSummary of stream \"{stream}\" without an OpenShardCount"
            ))
        })?;
        Ok(count_report(metric_name, count, self.activation))
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

    fn parse(metadata: &[(&str, &str)]) -> Result<KinesisConfig, ScalerError> {
        let ctx = test_context("aws-kinesis-stream", 1, metadata, &[], AUTH);
        KinesisConfig::parse(&ctx)
    }

    #[test]
    fn defaults_metric_name_and_request() {
        let config = parse(&[("streamName", "Orders.Stream"), ("awsRegion", "eu-west-1")]).unwrap();
        assert_eq!(config.metric_name, "s1-aws-kinesis-Orders-Stream");
        assert_eq!((config.target, config.activation), (2, 0));
        assert_eq!(
            config.request(),
            serde_json::json!({"StreamName": "Orders.Stream"})
        );
        let config = parse(&[
            ("streamName", "s"),
            ("awsRegion", "eu-west-1"),
            ("shardCount", "5"),
            ("activationShardCount", "3"),
        ])
        .unwrap();
        assert_eq!((config.target, config.activation), (5, 3));
    }

    #[test]
    fn errors_name_the_parameter() {
        let err = parse(&[("awsRegion", "eu-west-1")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("streamName"), "{err}");
        let err = parse(&[
            ("streamName", "s"),
            ("awsRegion", "eu-west-1"),
            ("shardCount", "two"),
        ])
        .unwrap_err()
        .to_string();
        assert!(err.contains("shardCount"), "{err}");
        let err = parse(&[
            ("streamName", "s"),
            ("awsRegion", "eu-west-1"),
            ("activationShardCount", "1.5"),
        ])
        .unwrap_err()
        .to_string();
        assert!(err.contains("activationShardCount"), "{err}");
        let err = parse(&[("streamName", "s")]).unwrap_err().to_string();
        assert!(err.contains("awsRegion"), "{err}");
    }

    #[test]
    fn answer_reading() {
        let ok = br#"{"StreamDescriptionSummary":{"StreamName":"s","OpenShardCount":4,"StreamStatus":"ACTIVE"}}"#;
        assert_eq!(open_shard_count(ok), Some(4));
        for bad in [
            &br#"{"StreamDescriptionSummary":{}}"#[..],
            br#"{"StreamDescriptionSummary":{"OpenShardCount":-1}}"#,
            br#"{"StreamDescriptionSummary":{"OpenShardCount":1.5}}"#,
            br#"{"StreamDescriptionSummary":{"OpenShardCount":"4"}}"#,
            br#"{}"#,
            b"not json",
            b"",
        ] {
            assert_eq!(open_shard_count(bad), None);
        }
    }
}
