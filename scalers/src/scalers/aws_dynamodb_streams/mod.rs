//! `aws-dynamodb-streams`: the number of shards of a DynamoDB table's stream (KEDA's
//! `aws_dynamodb_streams_scaler.go`).
//!
//! When the scaler is built, one `DescribeTable` (DynamoDB) finds the table's
//! `LatestStreamArn`, as KEDA does: a missing table or a table without a stream refuses the
//! trigger, naming `tableName`. Each poll pages through `DescribeStream` (DynamoDB Streams, up
//! to 100 shards a page, `ExclusiveStartShardId` = the previous page's `LastEvaluatedShardId`)
//! and counts every shard listed, closed ones included, as KEDA does. Active iff the count is
//! above `activationShardCount` (default 0). Metric `s<i>-aws-dynamodb-streams-<tableName>`,
//! integer target `shardCount` (default 2).

use async_trait::async_trait;
use k8s_openapi::api::autoscaling::v2::MetricSpec;
use serde_json::Value;

use crate::aws::client::{self, DYNAMODB, DYNAMODB_STREAMS, Input, Service};
use crate::aws::source::{self, AwsApi, AwsCall, count_report};
use crate::aws::{AwsSettings, COMMON_PARAMS};
use crate::context::ScalerContext;
use crate::error::{MetadataError, MetadataErrorKind, ScalerError};
use crate::metadata::Param;
use crate::metric::{MetricTargetType, external_metric_spec, metric_target};
use crate::pool::Held;
use crate::scaler::MetricsAndActivity;

const TABLE_NAME: Param = Param::required("tableName");
const SHARD_COUNT: Param = Param::optional("shardCount").default("2");
const ACTIVATION_SHARD_COUNT: Param = Param::optional("activationShardCount").default("0");

/// The most `DescribeStream` pages one poll reads (100 shards a page: 100,000 shards). A
/// server that keeps answering a `LastEvaluatedShardId` past this fails the poll instead of
/// holding it forever.
pub const MAX_PAGES: usize = 1000;

/// The parameters of `aws-dynamodb-streams`.
pub const PARAMS: &[Param] = &[
    TABLE_NAME,
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
pub struct DynamoDbStreamsConfig {
    /// `tableName`.
    pub table_name: String,
    /// `shardCount`.
    pub target: i64,
    /// `activationShardCount`.
    pub activation: i64,
    /// Region, endpoint, credentials.
    pub aws: AwsSettings,
    /// `s<index>-aws-dynamodb-streams-<tableName>`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
    /// The table's latest stream, found with `DescribeTable` when the trigger is built (none
    /// after parsing).
    pub stream_arn: Option<String>,
}

impl DynamoDbStreamsConfig {
    /// Parses the trigger with KEDA's rules.
    ///
    /// # Errors
    /// `tableName` missing, `shardCount`/`activationShardCount` not integers, AWS settings
    /// invalid.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let table_name: String = p.get(&TABLE_NAME)?;
            Ok(Self {
                metric_name: ctx.metric_name(&format!("aws-dynamodb-streams-{table_name}")),
                table_name,
                target: p.get(&SHARD_COUNT)?,
                activation: p.get(&ACTIVATION_SHARD_COUNT)?,
                aws: AwsSettings::parse(p)?,
                metric_type,
                stream_arn: None,
            })
        })?)
    }

    /// The `DescribeTable` request.
    pub fn describe_table(&self) -> Value {
        serde_json::json!({ "TableName": self.table_name })
    }
}

/// `Table.LatestStreamArn` of a `DescribeTable` answer
/// (<https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_DescribeTable.html>);
/// `None` when the table has no stream or the answer is not one.
pub fn latest_stream_arn(body: &[u8]) -> Option<String> {
    let answer: Value = crate::remote::from_json(body).ok()?;
    answer
        .get("Table")?
        .get("LatestStreamArn")?
        .as_str()
        .filter(|arn| !arn.is_empty())
        .map(str::to_string)
}

/// One `DescribeStream` page
/// (<https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_streams_DescribeStream.html>):
/// the number of shards listed and `LastEvaluatedShardId` (`None` on the last page). `None`
/// when the answer has no `StreamDescription.Shards` list.
pub fn shard_page(body: &[u8]) -> Option<(usize, Option<String>)> {
    let answer: Value = crate::remote::from_json(body).ok()?;
    let description = answer.get("StreamDescription")?;
    let shards = description.get("Shards")?.as_array()?.len();
    let last = description
        .get("LastEvaluatedShardId")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .map(str::to_string);
    Some((shards, last))
}

#[async_trait]
impl AwsApi for DynamoDbStreamsConfig {
    const SERVICE: Service = DYNAMODB_STREAMS;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        DynamoDbStreamsConfig::parse(ctx)
    }

    fn settings(&self) -> &AwsSettings {
        &self.aws
    }

    /// Finds the table's stream with `DescribeTable` on DynamoDB (its own pooled client, held
    /// for this call only), as KEDA does when it builds the scaler.
    ///
    /// # Errors
    /// The table missing, without a stream, or DynamoDB unreachable (each naming
    /// `tableName`).
    async fn prepare(&mut self, ctx: &ScalerContext) -> Result<(), ScalerError> {
        let trigger = ctx.trigger_id();
        let tables = client::lease(ctx, client::client_key(ctx, DYNAMODB, &self.aws)?).await?;
        let table = &self.table_name;
        let described = {
            let tables = Held::new(tables);
            let client = tables.client().ok_or_else(|| ScalerError::Closed {
                trigger: trigger.clone(),
            })?;
            let answer = source::call(
                &client,
                &self.aws,
                &trigger,
                &ctx.clock,
                "DescribeTable",
                &Input::Json(&self.describe_table()),
                &format!("table \"{table}\" (tableName)"),
            )
            .await;
            tables.release();
            answer?
        };
        let stream_arn = latest_stream_arn(&described).ok_or_else(|| {
            ScalerError::Metadata(MetadataError {
                trigger: trigger.clone(),
                kind: MetadataErrorKind::Rule(format!(
                    "table \"{table}\" (tableName) has no stream: enable DynamoDB Streams on it"
                )),
            })
        })?;
        self.stream_arn = Some(stream_arn);
        Ok(())
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target(self.metric_type, self.target),
        )]
    }

    /// Pages through `DescribeStream`; the value is the number of shards listed.
    ///
    /// # Errors
    /// DynamoDB Streams cannot be reached or answers an error, an answer without shards, more
    /// than [`MAX_PAGES`] pages.
    async fn read(
        &self,
        call: &AwsCall<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let table = &self.table_name;
        let stream_arn = self.stream_arn.as_deref().ok_or_else(|| {
            call.read.unexpected(format!(
                "the stream of table \"{table}\" (tableName) is found when the trigger is built"
            ))
        })?;
        let what = format!("the stream of table \"{table}\" (tableName)");
        let mut count: i64 = 0;
        let mut start: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut request = serde_json::json!({ "StreamArn": stream_arn });
            if let Some(id) = &start {
                request["ExclusiveStartShardId"] = Value::String(id.clone());
            }
            let body = call
                .call("DescribeStream", &Input::Json(&request), &what)
                .await?;
            let (shards, last) = shard_page(&body).ok_or_else(|| {
                call.read.unexpected(format!(
                    "DynamoDB Streams answered the DescribeStream of the stream of table \"{table}\" without a list of shards"
                ))
            })?;
            count = count.saturating_add(i64::try_from(shards).unwrap_or(i64::MAX));
            match last {
                None => return Ok(count_report(metric_name, count, self.activation)),
                Some(id) if start.as_deref() == Some(id.as_str()) => break,
                Some(id) => start = Some(id),
            }
        }
        Err(call.read.unexpected(format!(
            "DynamoDB Streams kept paging the stream of table \"{table}\" past {MAX_PAGES} pages (or repeated a page)"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::test_context;

    fn parse(metadata: &[(&str, &str)]) -> Result<DynamoDbStreamsConfig, ScalerError> {
        let auth = [("awsAccessKeyID", "AKIA1"), ("awsSecretAccessKey", "s1")];
        DynamoDbStreamsConfig::parse(&test_context(
            "aws-dynamodb-streams",
            1,
            metadata,
            &[],
            &auth,
        ))
    }

    #[test]
    fn defaults_and_metric_name_are_kedas() {
        let c = parse(&[("tableName", "orders.v2"), ("awsRegion", "eu-west-1")]).unwrap();
        assert_eq!(c.target, 2);
        assert_eq!(c.activation, 0);
        assert_eq!(c.metric_name, "s1-aws-dynamodb-streams-orders-v2");
        assert_eq!(
            c.describe_table(),
            serde_json::json!({"TableName": "orders.v2"})
        );
        let c = parse(&[
            ("tableName", "t"),
            ("awsRegion", "eu-west-1"),
            ("shardCount", "5"),
            ("activationShardCount", "3"),
        ])
        .unwrap();
        assert_eq!((c.target, c.activation), (5, 3));
    }

    #[test]
    fn errors_name_the_parameter() {
        for (metadata, named) in [
            (vec![("awsRegion", "eu-west-1")], "\"tableName\""),
            (vec![("tableName", "t")], "\"awsRegion\""),
            (
                vec![
                    ("tableName", "t"),
                    ("awsRegion", "eu-west-1"),
                    ("shardCount", "two"),
                ],
                "\"shardCount\"",
            ),
        ] {
            let err = parse(&metadata).unwrap_err().to_string();
            assert!(
                err.starts_with("trigger 1 (aws-dynamodb-streams): "),
                "{err}"
            );
            assert!(err.contains(named), "{err}");
        }
    }

    #[test]
    fn answers_are_read_as_documented() {
        assert_eq!(
            latest_stream_arn(
                br#"{"Table":{"TableName":"t","LatestStreamArn":"arn:aws:dynamodb:eu-west-1:1:table/t/stream/x"}}"#
            )
            .as_deref(),
            Some("arn:aws:dynamodb:eu-west-1:1:table/t/stream/x")
        );
        assert_eq!(latest_stream_arn(br#"{"Table":{"TableName":"t"}}"#), None);
        assert_eq!(latest_stream_arn(b"not json"), None);
        assert_eq!(
            shard_page(
                br#"{"StreamDescription":{"Shards":[{"ShardId":"a"},{"ShardId":"b"}],"LastEvaluatedShardId":"b"}}"#
            ),
            Some((2, Some("b".to_string())))
        );
        assert_eq!(
            shard_page(br#"{"StreamDescription":{"Shards":[]}}"#),
            Some((0, None))
        );
        assert_eq!(shard_page(br#"{"StreamDescription":{}}"#), None);
    }
}
