//! `aws-dynamodb`: the number of items a DynamoDB query matches (KEDA's
//! `aws_dynamodb_scaler.go`).
//!
//! One `Query` call (DynamoDB's JSON protocol) per poll with `keyConditionExpression`,
//! `expressionAttributeNames`, `expressionAttributeValues` and optionally `filterExpression`
//! and `indexName`; the value is the answer's `Count`, like KEDA one page (DynamoDB stops a page
//! at 1 MB read). Active iff the count is above `activationTargetValue`. Metric
//! `s<i>-aws-dynamodb-<tableName>`, integer target `targetValue`.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use std::collections::BTreeMap;

use async_trait::async_trait;
use k8s_openapi::api::autoscaling::v2::MetricSpec;
use serde_json::Value;

use crate::aws::client::{DYNAMODB, Input, Service};
use crate::aws::source::{AwsApi, AwsCall, count_report};
use crate::aws::{AwsSettings, COMMON_PARAMS};
use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError};
use crate::metadata::{MetadataParser, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target};
use crate::scaler::MetricsAndActivity;

const TABLE_NAME: Param = Param::required("tableName");
const KEY_CONDITION_EXPRESSION: Param = Param::required("keyConditionExpression");
const INDEX_NAME: Param = Param::optional("indexName");
const TARGET_VALUE: Param = Param::optional("targetValue").default("-1");
const ACTIVATION_TARGET_VALUE: Param = Param::optional("activationTargetValue").default("0");
const FILTER_EXPRESSION: Param = Param::optional("filterExpression");
const EXPRESSION_ATTRIBUTE_NAMES: Param = Param::required("expressionAttributeNames");
const EXPRESSION_ATTRIBUTE_VALUES: Param = Param::required("expressionAttributeValues");

/// The parameters of `aws-dynamodb`.
pub const PARAMS: &[Param] = &[
    TABLE_NAME,
    KEY_CONDITION_EXPRESSION,
    INDEX_NAME,
    TARGET_VALUE,
    ACTIVATION_TARGET_VALUE,
    FILTER_EXPRESSION,
    EXPRESSION_ATTRIBUTE_NAMES,
    EXPRESSION_ATTRIBUTE_VALUES,
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

/// How deep `L` and `M` attribute values may nest.
const MAX_DEPTH: usize = 32;

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct DynamoDbConfig {
    /// `tableName`.
    pub table_name: String,
    /// The `Query` request, without anything secret in it.
    pub request: Value,
    /// `targetValue` (0 when the trigger only feeds `scalingModifiers` and has none).
    pub target: i64,
    /// `activationTargetValue`.
    pub activation: i64,
    /// Region, endpoint, credentials.
    pub aws: AwsSettings,
    /// `s<index>-aws-dynamodb-<tableName>`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
}

impl DynamoDbConfig {
    /// Parses the trigger with KEDA's rules.
    ///
    /// # Errors
    /// A parameter is missing or malformed: `expressionAttributeNames` not a non-empty JSON
    /// object of strings, `expressionAttributeValues` not a JSON object of DynamoDB attribute
    /// values, `targetValue` absent outside `scalingModifiers`.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let table_name: String = p.get(&TABLE_NAME)?;
            let names = attribute_names(p)?;
            let values = attribute_values(p)?;
            let mut target: i64 = p.get(&TARGET_VALUE)?;
            if target == -1 {
                if ctx.as_metric_source {
                    target = 0;
                } else {
                    return Err(p.rule("missing required parameter \"targetValue\""));
                }
            }
            let mut request = serde_json::json!({
                "TableName": table_name,
                "KeyConditionExpression": p.get::<String>(&KEY_CONDITION_EXPRESSION)?,
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
            });
            if let Some(filter) = p.get_opt::<String>(&FILTER_EXPRESSION)? {
                request["FilterExpression"] = Value::String(filter);
            }
            if let Some(index) = p.get_opt::<String>(&INDEX_NAME)? {
                request["IndexName"] = Value::String(index);
            }
            Ok(Self {
                metric_name: ctx.metric_name(&format!("aws-dynamodb-{table_name}")),
                table_name,
                request,
                target,
                activation: p.get(&ACTIVATION_TARGET_VALUE)?,
                aws: AwsSettings::parse(p)?,
                metric_type,
            })
        })?)
    }
}

fn attribute_names(p: &MetadataParser<'_>) -> Result<BTreeMap<String, String>, MetadataError> {
    let raw: String = p.get(&EXPRESSION_ATTRIBUTE_NAMES)?;
    let names: BTreeMap<String, String> = serde_json::from_str(&raw).map_err(|e| {
        p.rule(format!(
            "parameter \"expressionAttributeNames\" is not a JSON object of strings \
             (e.g. {{\"#k\": \"status\"}}): {e}"
        ))
    })?;
    if names.is_empty() {
        return Err(p.rule("parameter \"expressionAttributeNames\" is an empty JSON object"));
    }
    Ok(names)
}

fn attribute_values(
    p: &MetadataParser<'_>,
) -> Result<serde_json::Map<String, Value>, MetadataError> {
    let raw: String = p.get(&EXPRESSION_ATTRIBUTE_VALUES)?;
    let values: serde_json::Map<String, Value> = serde_json::from_str(&raw).map_err(|e| {
        p.rule(format!(
            "parameter \"expressionAttributeValues\" is not a JSON object \
             (e.g. {{\":v\": {{\"S\": \"pending\"}}}}): {e}"
        ))
    })?;
    let mut wire = serde_json::Map::new();
    for (name, value) in values {
        let converted = attribute_value(&value, 0).map_err(|message| {
            p.rule(format!(
                "parameter \"expressionAttributeValues\": {name}: {message}"
            ))
        })?;
        wire.insert(name, converted);
    }
    Ok(wire)
}

/// One attribute value as KEDA reads it (`S`, `N` as a string, `BOOL`, `B` as a string whose
/// bytes are the binary value, `L`, `M`, `NULL`), in DynamoDB's wire form (`B` in base64).
fn attribute_value(value: &Value, depth: usize) -> Result<Value, String> {
    if depth > MAX_DEPTH {
        return Err(format!("nested deeper than {MAX_DEPTH} levels"));
    }
    let Some(object) = value.as_object() else {
        return Err(
            "unsupported data type for attribute value: not an object like {\"S\": \"x\"}".into(),
        );
    };
    let mut entries = object.iter();
    let (Some((kind, inner)), None) = (entries.next(), entries.next()) else {
        return Err("an attribute value has exactly one type key, like {\"S\": \"x\"}".into());
    };
    let converted = match (kind.as_str(), inner) {
        ("S", Value::String(_)) | ("N", Value::String(_)) | ("BOOL", Value::Bool(_)) => {
            inner.clone()
        }
        ("B", Value::String(s)) => Value::String(base64(s.as_bytes())),
        ("NULL", _) => Value::Bool(true),
        ("L", Value::Array(items)) => Value::Array(
            items
                .iter()
                .map(|item| attribute_value(item, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        ("M", Value::Object(map)) => Value::Object(
            map.iter()
                .map(|(k, v)| attribute_value(v, depth + 1).map(|v| (k.clone(), v)))
                .collect::<Result<_, _>>()?,
        ),
        ("S" | "N" | "BOOL" | "B" | "L" | "M", _) => {
            return Err(format!("the value of type {kind} has the wrong JSON type"));
        }
        (other, _) => {
            return Err(format!(
                "unsupported data type for attribute value: {other}"
            ));
        }
    };
    let mut typed = serde_json::Map::new();
    typed.insert(kind.clone(), converted);
    Ok(Value::Object(typed))
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

#[async_trait]
impl AwsApi for DynamoDbConfig {
    const SERVICE: Service = DYNAMODB;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        DynamoDbConfig::parse(ctx)
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

    /// One `Query`; the value is the answer's `Count`.
    async fn read(
        &self,
        call: &AwsCall<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let table = &self.table_name;
        let body = call
            .call(
                "Query",
                &Input::Json(&self.request),
                &format!("table \"{table}\" (tableName)"),
            )
            .await?;
        let answer: Value = crate::remote::from_json(&body).unwrap_or(Value::Null);
        let count = answer.get("Count").and_then(Value::as_i64).ok_or_else(|| {
            call.read.unexpected(format!(
                "DynamoDB answered the Query of table \"{table}\" without a Count"
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

    const BASE: &[(&str, &str)] = &[
        ("tableName", "Jobs.Table"),
        ("awsRegion", "eu-west-1"),
        ("keyConditionExpression", "#k = :v"),
        ("expressionAttributeNames", r##"{"#k": "status"}"##),
        ("expressionAttributeValues", r#"{":v": {"S": "pending"}}"#),
        ("targetValue", "3"),
    ];

    fn parse_with(changes: &[(&str, &str)], source: bool) -> Result<DynamoDbConfig, ScalerError> {
        let mut metadata: BTreeMap<&str, &str> = BASE.iter().copied().collect();
        metadata.extend(changes.iter().copied());
        let pairs: Vec<(&str, &str)> = metadata
            .into_iter()
            .filter(|(_, v)| !v.is_empty())
            .collect();
        let ctx = ScalerContext {
            as_metric_source: source,
            ..test_context("aws-dynamodb", 0, &pairs, &[], AUTH)
        };
        DynamoDbConfig::parse(&ctx)
    }

    fn parse(changes: &[(&str, &str)]) -> Result<DynamoDbConfig, ScalerError> {
        parse_with(changes, false)
    }

    #[test]
    fn the_query_request_metric_name_and_target() {
        let config = parse(&[
            ("filterExpression", "attempts < :max"),
            ("indexName", "by-status"),
            (
                "expressionAttributeValues",
                r#"{":v": {"S": "pending"}, ":max": {"N": "3"}, ":b": {"B": "ab"}, ":n": {"NULL": true}, ":l": {"L": [{"BOOL": false}, {"M": {"x": {"S": "y"}}}]}}"#,
            ),
        ])
        .unwrap();
        assert_eq!(config.metric_name, "s0-aws-dynamodb-Jobs-Table");
        assert_eq!((config.target, config.activation), (3, 0));
        assert_eq!(
            config.request,
            serde_json::json!({
                "TableName": "Jobs.Table",
                "KeyConditionExpression": "#k = :v",
                "ExpressionAttributeNames": {"#k": "status"},
                "ExpressionAttributeValues": {
                    ":v": {"S": "pending"},
                    ":max": {"N": "3"},
                    ":b": {"B": "YWI="},
                    ":n": {"NULL": true},
                    ":l": {"L": [{"BOOL": false}, {"M": {"x": {"S": "y"}}}]},
                },
                "FilterExpression": "attempts < :max",
                "IndexName": "by-status",
            })
        );
    }

    #[test]
    fn target_value_is_required_unless_the_trigger_feeds_scaling_modifiers() {
        let err = parse(&[("targetValue", "")]).expect_err("required");
        assert_eq!(
            err.to_string(),
            r#"trigger 0 (aws-dynamodb): missing required parameter "targetValue""#
        );
        assert_eq!(parse_with(&[("targetValue", "")], true).unwrap().target, 0);
    }

    #[test]
    fn errors_name_the_parameter() {
        let rows: &[(&[(&str, &str)], &str)] = &[
            (
                &[("tableName", "")],
                r#"trigger 0 (aws-dynamodb): missing required parameter "tableName""#,
            ),
            (
                &[("keyConditionExpression", "")],
                r#"trigger 0 (aws-dynamodb): missing required parameter "keyConditionExpression""#,
            ),
            (
                &[("expressionAttributeNames", "")],
                r#"trigger 0 (aws-dynamodb): missing required parameter "expressionAttributeNames""#,
            ),
            (
                &[("expressionAttributeNames", "{}")],
                r#"trigger 0 (aws-dynamodb): parameter "expressionAttributeNames" is an empty JSON object"#,
            ),
            (
                &[("expressionAttributeValues", r#"{":v": {"X": "1"}}"#)],
                r#"trigger 0 (aws-dynamodb): parameter "expressionAttributeValues": :v: unsupported data type for attribute value: X"#,
            ),
            (
                &[("expressionAttributeValues", r#"{":v": {"N": 3}}"#)],
                r#"trigger 0 (aws-dynamodb): parameter "expressionAttributeValues": :v: the value of type N has the wrong JSON type"#,
            ),
            (
                &[("expressionAttributeValues", r#"{":v": "pending"}"#)],
                r#"trigger 0 (aws-dynamodb): parameter "expressionAttributeValues": :v: unsupported data type for attribute value: not an object like {"S": "x"}"#,
            ),
            (
                &[("activationTargetValue", "x")],
                r#"trigger 0 (aws-dynamodb): parameter "activationTargetValue": "x" is not a valid integer"#,
            ),
        ];
        for (i, (changes, expected)) in rows.iter().enumerate() {
            let err = parse(changes).expect_err("invalid");
            assert_eq!(err.to_string(), *expected, "row {i}");
        }
        let err = parse(&[("expressionAttributeNames", "[1]")])
            .expect_err("invalid")
            .to_string();
        assert!(err.starts_with(r#"trigger 0 (aws-dynamodb): parameter "expressionAttributeNames" is not a JSON object of strings"#), "{err}");
    }

    #[test]
    fn base64_pads_like_the_standard() {
        for (raw, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
        ] {
            assert_eq!(base64(raw.as_bytes()), encoded);
        }
    }
}
