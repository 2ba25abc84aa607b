//! The aws-* scalers (sqs, cloudwatch, dynamodb, dynamodb-streams, kinesis) against moto (`scripts/services.sh` runs it on 127.0.0.1:5000), built
//! from their documented examples through the registry: values and activity on the shared
//! server; signatures, wrong credentials and `awsRoleArn` (STS `AssumeRole`) on servers of the
//! tests' own that authenticate every request with botocore, the way AWS does.

#[allow(dead_code)]
mod common;
#[allow(dead_code)]
#[path = "common/moto.rs"]
mod moto;

use common::{Harness, Setup, conformance, unique};
use keda_scalers::aws::client::SQS;
use keda_scalers::{ProcessEnv, Registry, ScalerContext, ScalerError, Secret};
use moto::{MOTO, REGION};

/// The documented `aws-sqs-queue` example pointed at `endpoint` and `queue_url`, with `auth`
/// as its TriggerAuthentication's parameters and `changes` to its metadata.
async fn sqs_harness(
    endpoint: &str,
    queue_url: &str,
    auth: &[(&str, &str)],
    changes: &[(&str, &str)],
) -> Harness {
    let mut metadata = vec![
        ("queueURL", queue_url),
        ("awsEndpoint", endpoint),
        ("awsRegion", REGION),
    ];
    metadata.extend_from_slice(changes);
    conformance(
        "aws-sqs-queue",
        Setup {
            metadata: &metadata,
            auth,
            ..Setup::default()
        },
    )
    .await
}

const SHARED_AUTH: &[(&str, &str)] = &[
    ("awsAccessKeyID", "AKIAKEDARSTEST"),
    ("awsSecretAccessKey", "keda-rs-test-secret-key"),
];

/// The documented example of `trigger_type` on the shared server with the shared keys, with
/// `metadata` (its own parameters) and `changes` over it.
async fn moto_harness(
    trigger_type: &str,
    metadata: &[(&str, &str)],
    changes: &[(&str, &str)],
) -> Harness {
    let mut all = metadata.to_vec();
    all.extend_from_slice(&[("awsEndpoint", MOTO), ("awsRegion", REGION)]);
    all.extend_from_slice(changes);
    conformance(
        trigger_type,
        Setup {
            metadata: &all,
            auth: SHARED_AUTH,
            ..Setup::default()
        },
    )
    .await
}

#[tokio::test]
async fn sqs_counts_visible_and_in_flight_messages_and_activates_above_the_threshold() {
    let test = "aws_sqs_values";
    if moto::shared_or_skip(test).await.is_none() {
        return;
    }
    let name = unique("sqs");
    let url = moto::create_queue(MOTO, moto::any_credentials(), &name, serde_json::json!({})).await;
    let sqs = moto::client(SQS, MOTO, moto::any_credentials());
    // The documented example: queueLength 10, activationQueueLength 1.
    let h = sqs_harness(MOTO, &url, SHARED_AUTH, &[]).await;
    assert_eq!(h.metric_name, format!("s0-aws-sqs-{name}"));
    h.expect(0.0, false).await;
    moto::send(&sqs, &url, 1, 0).await;
    // Equal to the activation threshold: not active.
    h.expect(1.0, false).await;
    moto::send(&sqs, &url, 2, 0).await;
    h.expect(3.0, true).await;
    // Received messages are in flight: still counted by default, not without scaleOnInFlight.
    assert_eq!(moto::receive(&sqs, &url, 2).await, 2);
    h.expect(3.0, true).await;
    let visible_only = sqs_harness(MOTO, &url, SHARED_AUTH, &[("scaleOnInFlight", "false")]).await;
    visible_only.expect(1.0, false).await;
    // Delayed messages count only with scaleOnDelayed.
    moto::send(&sqs, &url, 4, 600).await;
    h.expect(3.0, true).await;
    let with_delayed = sqs_harness(MOTO, &url, SHARED_AUTH, &[("scaleOnDelayed", "true")]).await;
    with_delayed.expect(7.0, true).await;
    h.close().await;
    visible_only.close().await;
    with_delayed.close().await;
}

#[tokio::test]
async fn sqs_triggers_with_the_same_region_endpoint_and_credentials_share_one_client() {
    let test = "aws_sqs_shared_client";
    if moto::shared_or_skip(test).await.is_none() {
        return;
    }
    let url = moto::create_queue(
        MOTO,
        moto::any_credentials(),
        &unique("shared"),
        serde_json::json!({}),
    )
    .await;
    let registry = Registry::builtin();
    let ctx = |index: usize, secret: &str| {
        let mut ctx = ScalerContext::new("aws-sqs-queue", index);
        for (k, v) in [
            ("queueURL", url.as_str()),
            ("awsRegion", REGION),
            ("awsEndpoint", MOTO),
        ] {
            ctx.metadata.insert(k.into(), v.into());
        }
        ctx.auth_params
            .insert("awsAccessKeyID".into(), Secret::new("AKIAKEDARSTEST"));
        ctx.auth_params
            .insert("awsSecretAccessKey".into(), Secret::new(secret));
        ctx
    };
    let first = ctx(0, "secret-a");
    let pools = first.clients.clone();
    let a = registry.build(first).await.expect("a");
    let b = registry
        .build(ScalerContext {
            clients: pools.clone(),
            ..ctx(1, "secret-a")
        })
        .await
        .expect("b");
    let c = registry
        .build(ScalerContext {
            clients: pools.clone(),
            ..ctx(2, "secret-b")
        })
        .await
        .expect("c");
    let pool = pools.pool::<keda_scalers::aws::AwsClientKey, keda_scalers::aws::AwsClient>();
    // Two keys: the same credentials share one client, other credentials get their own.
    assert_eq!(pool.len(), 2);
    for built in [&a, &b, &c] {
        built.scaler().close().await;
    }
    assert!(pool.is_empty());
}

#[tokio::test]
async fn sqs_a_missing_queue_fails_the_poll_naming_trigger_queue_and_parameter() {
    let test = "aws_sqs_missing_queue";
    if moto::shared_or_skip(test).await.is_none() {
        return;
    }
    let url = format!("{MOTO}/{}/keda-rs-no-such-queue", moto::ACCOUNT);
    let h = sqs_harness(MOTO, &url, SHARED_AUTH, &[]).await;
    let err = h.expect_error().await.to_string();
    assert!(
        err.starts_with(
            "trigger 0 (aws-sqs-queue): GetQueueAttributes of queue \"keda-rs-no-such-queue\" (queueURL) on SQS at http://127.0.0.1:5000/ (awsEndpoint) failed: answered HTTP 400 Bad Request ("
        ),
        "{err}"
    );
    assert!(
        err.contains("NonExistentQueue") || err.contains("QueueDoesNotExist"),
        "{err}"
    );
    assert!(!err.contains("keda-rs-test-secret-key"), "{err}");
}

#[tokio::test]
async fn sqs_an_unreachable_endpoint_fails_the_poll_naming_the_endpoint() {
    // Nothing listens on port 1 of the loopback address.
    let url = format!("http://127.0.0.1:1/{}/q", moto::ACCOUNT);
    let h = sqs_harness("http://127.0.0.1:1", &url, SHARED_AUTH, &[]).await;
    let err = h.expect_error().await;
    assert!(matches!(err, ScalerError::Query { .. }), "{err:?}");
    let err = keda_scalers::error::error_chain(&err);
    assert!(
        err.starts_with(
            "trigger 0 (aws-sqs-queue): GetQueueAttributes of queue \"q\" (queueURL) on SQS at http://127.0.0.1:1/ (awsEndpoint) failed: "
        ),
        "{err}"
    );
    assert!(!err.contains("keda-rs-test-secret-key"), "{err}");
}

#[tokio::test]
async fn sqs_signatures_are_accepted_and_wrong_credentials_refused_by_an_authenticating_server() {
    let test = "aws_sqs_credentials";
    let Some(own) = moto::own_or_skip(test, 5).await else {
        return;
    };
    let iam = moto::iam_setup(&own.endpoint, &["*"]).await;
    // From here on every request is authenticated.
    let url = moto::create_queue(
        &own.endpoint,
        iam.user.clone(),
        "authenticated",
        serde_json::json!({}),
    )
    .await;
    let sqs = moto::client(SQS, &own.endpoint, iam.user.clone());
    moto::send(&sqs, &url, 2, 0).await;

    let secret = iam.user.secret_access_key.expose().to_string();
    let good = [
        ("awsAccessKeyID", iam.user.access_key_id.as_str()),
        ("awsSecretAccessKey", secret.as_str()),
    ];
    let h = sqs_harness(&own.endpoint, &url, &good, &[]).await;
    h.expect(2.0, true).await;

    // A wrong secret: the signature does not match.
    let wrong_secret = [
        ("awsAccessKeyID", iam.user.access_key_id.as_str()),
        ("awsSecretAccessKey", "wrong-secret-access-key"),
    ];
    let h = sqs_harness(&own.endpoint, &url, &wrong_secret, &[]).await;
    let err = h.expect_error().await.to_string();
    assert!(
        err.starts_with(
            "trigger 0 (aws-sqs-queue): GetQueueAttributes of queue \"authenticated\" (queueURL)"
        ),
        "{err}"
    );
    assert!(err.contains("SignatureDoesNotMatch"), "{err}");
    assert!(err.contains("check the trigger's AWS credentials"), "{err}");
    assert!(!err.contains("wrong-secret-access-key"), "{err}");

    // An access key AWS does not know.
    let unknown = [
        ("awsAccessKeyID", "AKIANOSUCHKEY0000000"),
        ("awsSecretAccessKey", secret.as_str()),
    ];
    let h = sqs_harness(&own.endpoint, &url, &unknown, &[]).await;
    let err = h.expect_error().await.to_string();
    assert!(err.contains("InvalidClientTokenId"), "{err}");
    assert!(!err.contains(&secret), "{err}");
}

#[tokio::test]
async fn sqs_aws_role_arn_is_assumed_through_sts_with_the_operator_credentials() {
    let test = "aws_sqs_assume_role";
    let Some(own) = moto::own_or_skip(test, 5).await else {
        return;
    };
    // The user may set up the queue and assume the role, but not read the queue's attributes:
    // only the role's credentials can.
    let iam = moto::iam_setup(
        &own.endpoint,
        &["sts:AssumeRole", "sqs:CreateQueue", "sqs:SendMessage"],
    )
    .await;
    let url = moto::create_queue(
        &own.endpoint,
        iam.user.clone(),
        "assumed",
        serde_json::json!({}),
    )
    .await;
    let sqs = moto::client(SQS, &own.endpoint, iam.user.clone());
    moto::send(&sqs, &url, 3, 0).await;

    let secret = iam.user.secret_access_key.expose().to_string();
    let build = |env: Vec<(&str, &str)>| {
        let mut ctx = ScalerContext::new("aws-sqs-queue", 2);
        for (k, v) in [
            ("queueURL", url.as_str()),
            ("awsRegion", REGION),
            ("awsEndpoint", own.endpoint.as_str()),
        ] {
            ctx.metadata.insert(k.into(), v.into());
        }
        ctx.auth_params
            .insert("awsRoleArn".into(), Secret::new(iam.role_arn.clone()));
        ctx.process_env = ProcessEnv::from_pairs(&env);
        // The role is in a TriggerAuthentication and moto is the trigger's awsEndpoint: the
        // administrator's opt-in (scalers/src/aws/mod.rs `check_operator_identity`).
        ctx.operator_identity.namespaces = true;
        ctx
    };
    let operator = vec![
        ("AWS_ACCESS_KEY_ID", iam.user.access_key_id.as_str()),
        ("AWS_SECRET_ACCESS_KEY", secret.as_str()),
        ("AWS_ENDPOINT_URL_STS", own.endpoint.as_str()),
    ];
    let registry = Registry::builtin();
    let built = registry
        .build(build(operator.clone()))
        .await
        .expect("builds");
    // moto accepts the temporary key only with its session token, so a value proves the role
    // was assumed and its credentials signed the request.
    let report = built
        .scaler()
        .metrics_and_activity("s2-aws-sqs-assumed")
        .await
        .expect("value through the assumed role");
    assert_eq!(report.values[0].value, 3.0);
    assert!(report.active);
    built.scaler().close().await;

    // The operator's credentials are wrong: assuming the role fails, named.
    let mut wrong = operator.clone();
    wrong[1] = ("AWS_SECRET_ACCESS_KEY", "wrong-operator-secret");
    let built = registry.build(build(wrong)).await.expect("builds");
    let err = built
        .scaler()
        .metrics_and_activity("s2-aws-sqs-assumed")
        .await
        .expect_err("refused");
    let err = keda_scalers::error::error_chain(&err);
    assert!(
        err.contains(&format!(
            "assuming awsRoleArn {} through STS at {}/ failed: answered HTTP 403 Forbidden (SignatureDoesNotMatch)",
            iam.role_arn, own.endpoint
        )),
        "{err}"
    );
    assert!(!err.contains("wrong-operator-secret"), "{err}");

    // No operator credentials at all: the build fails, saying what is missing.
    let err = registry
        .build(build(vec![]))
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.starts_with(
            "trigger 2 (aws-sqs-queue): awsRoleArn uses the operator's own AWS credentials, and the operator has none"
        ),
        "{err}"
    );
}

/// Puts `value` for metric `Depth{Queue=<namespace>}` in `namespace` at `at`. The dimension
/// repeats the namespace because moto 5.2.1 ignores the namespace of a query with dimensions.
async fn put_metric(namespace: &str, value: f64, at: jiff::Timestamp) {
    let cloudwatch = moto::client(
        keda_scalers::aws::client::CLOUDWATCH,
        MOTO,
        moto::any_credentials(),
    );
    let value = value.to_string();
    let at = at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    moto::query(
        &cloudwatch,
        "PutMetricData",
        &[
            ("Namespace", namespace),
            ("MetricData.member.1.MetricName", "Depth"),
            ("MetricData.member.1.Value", &value),
            ("MetricData.member.1.Timestamp", &at),
            ("MetricData.member.1.Dimensions.member.1.Name", "Queue"),
            ("MetricData.member.1.Dimensions.member.1.Value", namespace),
        ],
    )
    .await
    .unwrap_or_else(|e| panic!("PutMetricData: {e}"));
}

/// The documented `aws-cloudwatch` example on the shared server, reading
/// `Depth{Queue=<namespace>}` in `namespace`, with `changes`.
async fn cloudwatch_harness(namespace: &str, changes: &[(&str, &str)]) -> Harness {
    let mut metadata = vec![
        ("namespace", namespace),
        ("metricName", "Depth"),
        ("dimensionName", "Queue"),
        ("dimensionValue", namespace),
        ("awsEndpoint", MOTO),
        ("awsRegion", REGION),
    ];
    metadata.extend_from_slice(changes);
    conformance(
        "aws-cloudwatch",
        Setup {
            metadata: &metadata,
            auth: SHARED_AUTH,
            ..Setup::default()
        },
    )
    .await
}

#[tokio::test]
async fn cloudwatch_reads_the_newest_value_of_the_window_and_activates_above_the_threshold() {
    let test = "aws_cloudwatch_values";
    if moto::shared_or_skip(test).await.is_none() {
        return;
    }
    // The documented example: metricStatPeriod 60, metricCollectionTime 300, Maximum,
    // activationTargetMetricValue 2. The window ends at the start of the current minute.
    let now = jiff::Timestamp::now();
    let end = jiff::Timestamp::from_second(now.as_second() - now.as_second().rem_euclid(60))
        .expect("time");
    let namespace = unique("cw");
    put_metric(&namespace, 7.0, end - jiff::SignedDuration::from_secs(150)).await;
    put_metric(&namespace, 42.0, end - jiff::SignedDuration::from_secs(30)).await;
    let h = cloudwatch_harness(&namespace, &[]).await;
    assert_eq!(h.metric_name, "s0-aws-cloudwatch");
    h.expect(42.0, true).await;

    let at_threshold = unique("cw");
    put_metric(
        &at_threshold,
        2.0,
        end - jiff::SignedDuration::from_secs(30),
    )
    .await;
    cloudwatch_harness(&at_threshold, &[])
        .await
        .expect(2.0, false)
        .await;
    h.close().await;
}

#[tokio::test]
async fn cloudwatch_without_data_is_min_metric_value_or_an_error_without_ignore_null_values() {
    let test = "aws_cloudwatch_no_data";
    if moto::shared_or_skip(test).await.is_none() {
        return;
    }
    let namespace = unique("cw-empty");
    let h = cloudwatch_harness(&namespace, &[("minMetricValue", "3.5")]).await;
    h.expect(3.5, true).await;
    let h = cloudwatch_harness(&namespace, &[("ignoreNullValues", "false")]).await;
    let err = h.expect_error().await.to_string();
    assert_eq!(
        err,
        format!(
            "trigger 0 (aws-cloudwatch): GetMetricData of metric {namespace}/Depth: CloudWatch returned no metric data and ignoreNullValues is false"
        )
    );
}

#[tokio::test]
async fn cloudwatch_an_unreachable_endpoint_fails_the_poll_naming_metric_and_endpoint() {
    let h = conformance(
        "aws-cloudwatch",
        Setup {
            metadata: &[("awsEndpoint", "http://127.0.0.1:1")],
            auth: SHARED_AUTH,
            ..Setup::default()
        },
    )
    .await;
    let err = h.expect_error().await.to_string();
    assert!(
        err.starts_with(
            "trigger 0 (aws-cloudwatch): GetMetricData of metric AWS/SQS/ApproximateNumberOfMessagesVisible on CloudWatch at http://127.0.0.1:1/ (awsEndpoint) failed: "
        ),
        "{err}"
    );
}

/// A DynamoDB table on the shared server, keyed by `status` and `id`, with `items` as
/// (status, attempts).
async fn create_table(items: &[(&str, u32)]) -> String {
    let dynamodb = moto::client(
        keda_scalers::aws::client::DYNAMODB,
        MOTO,
        moto::any_credentials(),
    );
    let table = unique("ddb");
    moto::json(
        &dynamodb,
        "CreateTable",
        serde_json::json!({
            "TableName": table,
            "KeySchema": [
                {"AttributeName": "status", "KeyType": "HASH"},
                {"AttributeName": "id", "KeyType": "RANGE"},
            ],
            "AttributeDefinitions": [
                {"AttributeName": "status", "AttributeType": "S"},
                {"AttributeName": "id", "AttributeType": "S"},
            ],
            "BillingMode": "PAY_PER_REQUEST",
        }),
    )
    .await
    .unwrap_or_else(|e| panic!("CreateTable: {e}"));
    for (i, (status, attempts)) in items.iter().enumerate() {
        moto::json(
            &dynamodb,
            "PutItem",
            serde_json::json!({
                "TableName": table,
                "Item": {
                    "status": {"S": status},
                    "id": {"S": i.to_string()},
                    "attempts": {"N": attempts.to_string()},
                },
            }),
        )
        .await
        .unwrap_or_else(|e| panic!("PutItem: {e}"));
    }
    table
}

async fn dynamodb_harness(table: &str, changes: &[(&str, &str)]) -> Harness {
    moto_harness("aws-dynamodb", &[("tableName", table)], changes).await
}

#[tokio::test]
async fn dynamodb_counts_the_items_the_query_matches() {
    let test = "aws_dynamodb_values";
    if moto::shared_or_skip(test).await.is_none() {
        return;
    }
    let table = create_table(&[("pending", 1), ("pending", 3), ("done", 1), ("pending", 5)]).await;
    // The documented example: status = pending, targetValue 5, activationTargetValue 0.
    let h = dynamodb_harness(&table, &[]).await;
    assert_eq!(h.metric_name, format!("s0-aws-dynamodb-{table}"));
    h.expect(3.0, true).await;
    // A filter on top of the key condition.
    let filtered = dynamodb_harness(
        &table,
        &[
            ("filterExpression", "attempts >= :min"),
            (
                "expressionAttributeValues",
                r#"{":pending": {"S": "pending"}, ":min": {"N": "3"}}"#,
            ),
            ("activationTargetValue", "2"),
        ],
    )
    .await;
    filtered.expect(2.0, false).await;
    // Nothing matches.
    let none = dynamodb_harness(
        &table,
        &[(
            "expressionAttributeValues",
            r#"{":pending": {"S": "failed"}}"#,
        )],
    )
    .await;
    none.expect(0.0, false).await;
    h.close().await;
}

#[tokio::test]
async fn dynamodb_a_missing_table_fails_the_poll_naming_the_table() {
    let test = "aws_dynamodb_missing_table";
    if moto::shared_or_skip(test).await.is_none() {
        return;
    }
    let h = dynamodb_harness("keda-rs-no-such-table", &[]).await;
    let err = h.expect_error().await.to_string();
    assert!(
        err.starts_with(
            "trigger 0 (aws-dynamodb): Query of table \"keda-rs-no-such-table\" (tableName) on DynamoDB at http://127.0.0.1:5000/ (awsEndpoint) failed: answered HTTP 400 Bad Request (ResourceNotFoundException)"
        ),
        "{err}"
    );
    assert!(!err.contains("keda-rs-test-secret-key"), "{err}");
}

/// A Kinesis stream of `shards` shards on the shared server.
async fn create_stream(shards: u32) -> String {
    let kinesis = moto::client(
        keda_scalers::aws::client::KINESIS,
        MOTO,
        moto::any_credentials(),
    );
    let stream = unique("kinesis");
    moto::json(
        &kinesis,
        "CreateStream",
        serde_json::json!({"StreamName": stream, "ShardCount": shards}),
    )
    .await
    .unwrap_or_else(|e| panic!("CreateStream: {e}"));
    stream
}

async fn kinesis_harness(stream: &str, changes: &[(&str, &str)]) -> Harness {
    moto_harness("aws-kinesis-stream", &[("streamName", stream)], changes).await
}

#[tokio::test]
async fn kinesis_reads_the_open_shard_count_and_activates_above_the_threshold() {
    let test = "aws_kinesis_values";
    if moto::shared_or_skip(test).await.is_none() {
        return;
    }
    let stream = create_stream(3).await;
    // The documented example: shardCount 2, activationShardCount 0.
    let h = kinesis_harness(&stream, &[]).await;
    assert_eq!(h.metric_name, format!("s0-aws-kinesis-{stream}"));
    h.expect(3.0, true).await;
    // Active only above activationShardCount.
    let quiet = kinesis_harness(&stream, &[("activationShardCount", "3")]).await;
    quiet.expect(3.0, false).await;
    // The count follows a resharding (moto 5's OpenShardCount is right after UpdateShardCount;
    // after MergeShards it still counts a closed parent).
    let kinesis = moto::client(
        keda_scalers::aws::client::KINESIS,
        MOTO,
        moto::any_credentials(),
    );
    moto::json(
        &kinesis,
        "UpdateShardCount",
        serde_json::json!({"StreamName": stream, "TargetShardCount": 5, "ScalingType": "UNIFORM_SCALING"}),
    )
    .await
    .unwrap_or_else(|e| panic!("UpdateShardCount: {e}"));
    h.expect(5.0, true).await;
    quiet.expect(5.0, true).await;
    quiet.close().await;
    h.close().await;
}

#[tokio::test]
async fn kinesis_a_missing_stream_fails_the_poll_naming_the_stream() {
    let test = "aws_kinesis_missing_stream";
    if moto::shared_or_skip(test).await.is_none() {
        return;
    }
    let h = kinesis_harness("keda-rs-no-such-stream", &[]).await;
    let err = h.expect_error().await.to_string();
    assert!(
        err.starts_with(
            "trigger 0 (aws-kinesis-stream): DescribeStreamSummary of stream \"keda-rs-no-such-stream\" (streamName) on Kinesis at http://127.0.0.1:5000/ (awsEndpoint) failed: answered HTTP 400 Bad Request (ResourceNotFoundException)"
        ),
        "{err}"
    );
    assert!(!err.contains("keda-rs-test-secret-key"), "{err}");
}

/// A table on the shared server keyed by `id`, with a stream when `stream`.
async fn create_streamed_table(stream: bool) -> String {
    let dynamodb = moto::client(
        keda_scalers::aws::client::DYNAMODB,
        MOTO,
        moto::any_credentials(),
    );
    let table = unique("ddbs");
    let mut request = serde_json::json!({
        "TableName": table,
        "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}],
        "AttributeDefinitions": [{"AttributeName": "id", "AttributeType": "S"}],
        "BillingMode": "PAY_PER_REQUEST",
    });
    if stream {
        request["StreamSpecification"] =
            serde_json::json!({"StreamEnabled": true, "StreamViewType": "NEW_IMAGE"});
    }
    moto::json(&dynamodb, "CreateTable", request)
        .await
        .unwrap_or_else(|e| panic!("CreateTable: {e}"));
    table
}

async fn dynamodb_streams_harness(table: &str, changes: &[(&str, &str)]) -> Harness {
    moto_harness("aws-dynamodb-streams", &[("tableName", table)], changes).await
}

#[tokio::test]
async fn dynamodb_streams_count_the_shards_of_the_tables_stream() {
    let test = "aws_dynamodb_streams_values";
    if moto::shared_or_skip(test).await.is_none() {
        return;
    }
    let table = create_streamed_table(true).await;
    // moto 5 gives a new stream one shard. The documented example: shardCount 2,
    // activationShardCount 0.
    let h = dynamodb_streams_harness(&table, &[]).await;
    assert_eq!(h.metric_name, format!("s0-aws-dynamodb-streams-{table}"));
    h.expect(1.0, true).await;
    let quiet = dynamodb_streams_harness(&table, &[("activationShardCount", "1")]).await;
    quiet.expect(1.0, false).await;
    quiet.close().await;
    h.close().await;
}

#[tokio::test]
async fn dynamodb_streams_a_table_without_a_stream_is_refused_naming_it() {
    let test = "aws_dynamodb_streams_refused";
    if moto::shared_or_skip(test).await.is_none() {
        return;
    }
    let registry = Registry::builtin();
    let build = |table: String| {
        let mut ctx = ScalerContext::new("aws-dynamodb-streams", 0);
        for (k, v) in [
            ("tableName", table.as_str()),
            ("awsRegion", REGION),
            ("awsEndpoint", MOTO),
        ] {
            ctx.metadata.insert(k.into(), v.into());
        }
        for (k, v) in SHARED_AUTH {
            ctx.auth_params.insert(k.to_string(), Secret::new(*v));
        }
        ctx
    };
    // As KEDA, the stream is looked up when the scaler is built.
    let table = create_streamed_table(false).await;
    let err = registry
        .build(build(table.clone()))
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert_eq!(
        err,
        format!(
            "trigger 0 (aws-dynamodb-streams): table \"{table}\" (tableName) has no stream: enable DynamoDB Streams on it"
        )
    );
    let err = registry
        .build(build("keda-rs-no-such-table".into()))
        .await
        .err()
        .map(|e| keda_scalers::error::error_chain(&e))
        .unwrap_or_default();
    assert!(
        err.starts_with(
            "trigger 0 (aws-dynamodb-streams): DescribeTable of table \"keda-rs-no-such-table\" (tableName) on DynamoDB at http://127.0.0.1:5000/ (awsEndpoint) failed: answered HTTP 400 Bad Request (ResourceNotFoundException)"
        ),
        "{err}"
    );
    assert!(!err.contains("keda-rs-test-secret-key"), "{err}");
}
