//! The triggers of issue 24 (`loki`, `influxdb`, ..., `forgejo-runner`, `aws-kinesis-stream`,
//! `aws-dynamodb-streams`, `kubernetes-resource`, `datadog`, `new-relic`, `dynatrace`, `splunk`,
//! `solr`, `couchdb`, `solace-event-queue`, `selenium-grid`, `artemis-queue`, `nsq`, `pulsar`,
//! `arangodb`, `github-runner`, `sumologic`, `solarwinds`, `splunk-observability`, `gcp-pubsub`,
//! `gcp-stackdriver`, `gcp-cloudtasks`, `gcp-storage`, `azure-monitor`, `azure-log-analytics`,
//! `azure-app-insights`, `azure-data-explorer`, `azure-servicebus`, `azure-eventhub`,
//! `azure-pipelines`, `openstack-swift`, `openstack-metric`, `ibmmq`, `solace-direct-messaging`,
//! `graphite`, `clickhouse`, `elastic-forecast`, `huawei-cloudeye`, `predictkube`) through the
//! operator on memkube: each
//! scales its target 0 -> 1 when its source's
//! value rises above the activation threshold, and bad input is `Ready=False` with a message naming
//! the trigger and the parameter. The sources are the tests' loopback server (`common/source.rs`)
//! answering each API's documented shape at the API's path; the scalers' own tests check the
//! requests.

mod common;
mod scenarios;

#[allow(dead_code)]
#[path = "../../scalers/tests/common/mod.rs"]
mod redis_common;

#[path = "../../scalers/tests/common/predictkube_engine.rs"]
mod predictkube_engine;

use common::source::Source;
use common::world::{not_ready, world};
use memkube::MemKube;
use scenarios::{World, eventually};

async fn obs_world(test: &str) -> Option<(MemKube, World)> {
    world(test, keda_scalers::Registry::builtin()).await
}

/// A ScaledObject `name` on Deployment `target`, 0 <-> 1..3, polled every 10 s, with one
/// trigger given as YAML lines at the trigger's indentation.
fn object(name: &str, target: &str, trigger: &str) -> String {
    format!(
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata:\n  name: {name}\nspec:\n  \
         scaleTargetRef:\n    name: {target}\n  pollingInterval: 10\n  cooldownPeriod: 10\n  \
         minReplicaCount: 0\n  maxReplicaCount: 3\n  triggers:\n    - {trigger}\n"
    )
}

/// Creates `name` at 0 replicas with `trigger`, then: inactive at the source's first value,
/// 0 -> 1 once `activate` has set a value above the activation threshold.
async fn zero_to_one(w: &World, name: &str, trigger: &str, activate: impl FnOnce()) {
    w.deployment(name, 0).await;
    let op = w.start_operator();
    let so = w.create(&object(name, name, trigger)).await;
    w.polls_reach(&op, &so, 1).await;
    assert_eq!(w.replicas(name).await, 0, "inactive at first");
    activate();
    eventually(&format!("{name} at 1 replica"), || async {
        w.poll_after(&op, &so, 10).await;
        (w.replicas(name).await == 1).then_some(())
    })
    .await;
    op.stop().await;
}

/// Creates `name` (on Deployment `bad`) with `trigger`, waits for `Ready=False` with `reason`
/// and a message naming each of `expected`.
async fn refused(w: &World, name: &str, trigger: &str, reason: &str, expected: &[&str]) {
    w.create(&object(name, "bad", trigger)).await;
    let (actual, message) = not_ready(w, name).await;
    assert_eq!(actual, reason, "{message}");
    for e in expected {
        assert!(message.contains(e), "{message:?} should name {e:?}");
    }
}

/// A Loki instant-query answer of one series whose value is `value`.
fn loki_vector(value: f64) -> String {
    format!(
        r#"{{"status":"success","data":{{"resultType":"vector","result":[{{"metric":{{}},"value":[1700000000,"{value}"]}}]}}}}"#
    )
}

#[tokio::test]
async fn loki_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    let Some((_server, w)) = obs_world("loki triggers").await else {
        return;
    };
    let loki = Source::start().await;
    let path = "loki/api/v1/query";
    loki.set_body(path, &loki_vector(0.0));
    let server = loki.url("");
    let trigger = format!(
        "type: loki\n      metadata:\n        serverAddress: {server}\n        query: sum(rate({{app=\"api\"}}[1m]))\n        threshold: \"2\"\n        activationThreshold: \"0.5\""
    );
    zero_to_one(&w, "loki", &trigger, || {
        loki.set_body(path, &loki_vector(3.0))
    })
    .await;
    assert!(loki.requests(path) > 0);

    let op = w.start_operator();
    w.deployment("bad", 0).await;
    // Not a URL: built, as in KEDA, and every poll fails naming serverAddress.
    refused(
        &w,
        "loki-address",
        "type: loki\n      metadata:\n        serverAddress: loki:3100\n        query: up\n        threshold: \"2\"",
        "TriggerError",
        &["(loki)", "serverAddress"],
    )
    .await;
    refused(
        &w,
        "loki-threshold",
        &format!("type: loki\n      metadata:\n        serverAddress: {server}\n        query: up"),
        "ScaledObjectCheckFailed",
        &["(loki)", "threshold"],
    )
    .await;
    op.stop().await;
}

/// An InfluxDB query answer (annotated CSV) whose first `_value` is the `long` `value`.
fn influx_csv(value: i64) -> String {
    format!(
        "#datatype,string,long,long,string\r\n#group,false,false,false,true\r\n#default,_result,,,\r\n,result,table,_value,_field\r\n,,0,{value},depth\r\n\r\n"
    )
}

#[tokio::test]
async fn influxdb_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    let Some((_server, w)) = obs_world("influxdb triggers").await else {
        return;
    };
    let influx = Source::start().await;
    let path = "api/v2/query";
    influx.set_body(path, &influx_csv(0));
    let server = influx.url("");
    let trigger = format!(
        "type: influxdb\n      metadata:\n        serverURL: {server}\n        organizationName: keda\n        query: 'from(bucket: \"jobs\") |> range(start: -1h) |> last()'\n        thresholdValue: \"4\"\n        activationThresholdValue: \"1\""
    );
    zero_to_one(&w, "influx", &trigger, || {
        influx.set_body(path, &influx_csv(5))
    })
    .await;
    assert!(influx.requests(path) > 0);

    let op = w.start_operator();
    w.deployment("bad", 0).await;
    refused(
        &w,
        "influx-threshold",
        &format!("type: influxdb\n      metadata:\n        serverURL: {server}\n        organizationName: keda\n        query: q"),
        "ScaledObjectCheckFailed",
        &["(influxdb)", "thresholdValue"],
    )
    .await;
    refused(
        &w,
        "influx-token",
        &format!("type: influxdb\n      metadata:\n        serverURL: {server}\n        organizationName: keda\n        query: q\n        thresholdValue: \"4\"\n        authToken: s3cret-token"),
        "ScaledObjectCheckFailed",
        &["(influxdb)", "authToken", "authTokenFromEnv"],
    )
    .await;
    let (_, message) = not_ready(&w, "influx-token").await;
    assert!(!message.contains("s3cret-token"), "{message}");
    // A first record that is not a number fails the polls naming the organization.
    influx.set_body(
        path,
        "#datatype,string,long,string\r\n,result,table,_value\r\n,,0,many\r\n",
    );
    refused(
        &w,
        "influx-answer",
        &trigger,
        "TriggerError",
        &[
            "(influxdb)",
            "organizationName keda",
            "_value is of type string",
        ],
    )
    .await;
    op.stop().await;
}

/// A search answer with `total` hits.
fn es_hits(total: u64) -> String {
    format!(
        r#"{{"took":1,"timed_out":false,"hits":{{"total":{{"value":{total},"relation":"eq"}},"hits":[]}}}}"#
    )
}

#[tokio::test]
async fn elasticsearch_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    let Some((_server, w)) = obs_world("elasticsearch triggers").await else {
        return;
    };
    let es = Source::start().await;
    let path = "jobs/_search/template";
    es.set_body(path, &es_hits(0));
    let address = es.url("");
    let trigger = format!(
        "type: elasticsearch\n      metadata:\n        addresses: {address}\n        username: elastic\n        passwordFromEnv: ES_PASSWORD\n        index: jobs\n        searchTemplateName: pending\n        valueLocation: hits.total.value\n        targetValue: \"10\"\n        activationTargetValue: \"1\""
    );
    // passwordFromEnv names a variable the Deployment does not have.
    let op = w.start_operator();
    w.deployment("bad", 0).await;
    refused(
        &w,
        "es-password",
        &trigger,
        "ScaledObjectCheckFailed",
        &["(elasticsearch)", "passwordFromEnv", "ES_PASSWORD"],
    )
    .await;
    refused(
        &w,
        "es-both",
        &format!(
            "{}\n        query: '{{}}'",
            trigger.replace("passwordFromEnv: ES_PASSWORD", "password: p")
        ),
        "ScaledObjectCheckFailed",
        &[
            "(elasticsearch)",
            "cannot provide both searchTemplateName and query",
        ],
    )
    .await;
    refused(
        &w,
        "es-parameters",
        &format!(
            "{}\n        parameters: queue",
            trigger.replace("passwordFromEnv: ES_PASSWORD", "password: p")
        ),
        "TriggerError",
        &["(elasticsearch)", "parameters", "expected key:value"],
    )
    .await;
    op.stop().await;

    let trigger = trigger.replace("passwordFromEnv: ES_PASSWORD", "password: p");
    zero_to_one(&w, "es", &trigger, || es.set_body(path, &es_hits(4))).await;
    assert!(es.requests(path) > 0);
}

#[tokio::test]
async fn opensearch_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    let Some((_server, w)) = obs_world("opensearch triggers").await else {
        return;
    };
    let os = Source::start().await;
    let path = "jobs/_search";
    os.set_body(path, &es_hits(0));
    let address = os.url("");
    let trigger = format!(
        "type: opensearch\n      metadata:\n        addresses: {address}\n        username: admin\n        password: p\n        index: jobs\n        query: '{{\"query\":{{\"match_all\":{{}}}}}}'\n        valueLocation: hits.total.value\n        targetValue: \"10\"\n        activationTargetValue: \"1\""
    );
    let op = w.start_operator();
    w.deployment("bad", 0).await;
    refused(
        &w,
        "os-tls",
        &format!("{trigger}\n        enableTLS: \"true\""),
        "ScaledObjectCheckFailed",
        &[
            "(opensearch)",
            "both clientCert and clientKey must be provided when enableTLS is true",
        ],
    )
    .await;
    refused(
        &w,
        "os-query",
        &trigger.replace(r#"'{"query":{"match_all":{}}}'"#, "'{size: 0'"),
        "TriggerError",
        &["(opensearch)", "query", "invalid query JSON"],
    )
    .await;
    op.stop().await;

    zero_to_one(&w, "os", &trigger, || os.set_body(path, &es_hits(4))).await;
    assert!(os.requests(path) > 0);
}

/// Secret `name` with `data`, and TriggerAuthentication `name` giving each key as the
/// parameter of the same name.
async fn secret_auth(w: &World, name: &str, data: &[(&str, &str)]) {
    let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": { "name": name },
        "stringData": data.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<std::collections::BTreeMap<_, _>>(),
    }))
    .expect("a Secret");
    kube::Api::<k8s_openapi::api::core::v1::Secret>::namespaced(w.client.clone(), &w.namespace)
        .create(&kube::api::PostParams::default(), &secret)
        .await
        .expect("create Secret");
    let refs: Vec<serde_json::Value> = data
        .iter()
        .map(|(k, _)| serde_json::json!({"parameter": k, "name": name, "key": k}))
        .collect();
    let auth: keda_api::TriggerAuthentication = serde_json::from_value(serde_json::json!({
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "TriggerAuthentication",
        "metadata": { "name": name, "namespace": w.namespace },
        "spec": { "secretTargetRef": refs },
    }))
    .expect("a TriggerAuthentication");
    kube::Api::<keda_api::TriggerAuthentication>::namespaced(w.client.clone(), &w.namespace)
        .create(&kube::api::PostParams::default(), &auth)
        .await
        .expect("create TriggerAuthentication");
}

/// [`zero_to_one`] with an operator that resolves `authenticationRef`.
async fn zero_to_one_resolving(
    w: &World,
    name: &str,
    trigger: &str,
    activate: impl std::future::Future<Output = ()>,
) {
    w.deployment(name, 0).await;
    let op = w.start_operator_resolving();
    let so = w.create(&object(name, name, trigger)).await;
    w.polls_reach(&op, &so, 1).await;
    assert_eq!(w.replicas(name).await, 0, "inactive at first");
    activate.await;
    eventually(&format!("{name} at 1 replica"), || async {
        w.poll_after(&op, &so, 10).await;
        (w.replicas(name).await == 1).then_some(())
    })
    .await;
    op.stop().await;
}

#[tokio::test]
async fn forgejo_runner_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    let Some((_server, w)) = obs_world("forgejo-runner triggers").await else {
        return;
    };
    let forgejo = Source::start().await;
    // GET /api/v1/orgs/{org}/actions/runners/jobs answers a JSON list of ActionRunJob
    // (https://code.forgejo.org/api/swagger#/organization/getOrgRunnerJobs).
    let path = "api/v1/orgs/my-org/actions/runners/jobs";
    forgejo.set_body(path, "[]");
    secret_auth(&w, "forgejo", &[("token", "forgejo-token")]).await;
    let address = forgejo.url("");
    let address = address.trim_end_matches('/');
    let trigger = format!(
        "type: forgejo-runner\n      metadata:\n        address: {address}\n        org: my-org\n        labels: docker\n      authenticationRef:\n        name: forgejo"
    );
    zero_to_one_resolving(&w, "forgejo", &trigger, async {
        forgejo.set_body(
            path,
            r#"[{"id":7,"name":"build","runs_on":["docker"],"status":"waiting"}]"#,
        );
    })
    .await;
    assert!(forgejo.requests(path) > 0);

    let op = w.start_operator_resolving();
    w.deployment("bad", 0).await;
    refused(
        &w,
        "forgejo-labels",
        &format!("type: forgejo-runner\n      metadata:\n        address: {address}\n        org: my-org\n      authenticationRef:\n        name: forgejo"),
        "ScaledObjectCheckFailed",
        &["(forgejo-runner)", "labels"],
    )
    .await;
    refused(
        &w,
        "forgejo-token",
        &format!("type: forgejo-runner\n      metadata:\n        address: {address}\n        org: my-org\n        labels: docker"),
        "ScaledObjectCheckFailed",
        &["(forgejo-runner)", "token"],
    )
    .await;
    op.stop().await;
}

/// Calls `operation` of `service` on moto (scripts/services.sh runs it on 127.0.0.1:5000; it
/// checks no credentials), panicking with the operation on failure.
async fn moto_call(
    service: keda_scalers::aws::client::Service,
    operation: &str,
    request: serde_json::Value,
) {
    use keda_scalers::aws::client::{AwsClientKey, Signer};
    keda_scalers::aws::AwsClient::new(AwsClientKey {
        service,
        region: "eu-west-1".into(),
        endpoint: url::Url::parse("http://127.0.0.1:5000").expect("endpoint"),
        signer: Signer::Static(keda_scalers::aws::Credentials {
            access_key_id: "AKIAKEDARSTEST".into(),
            secret_access_key: keda_scalers::Secret::new("keda-rs-test-secret-key"),
            session_token: None,
        }),
        timeout: std::time::Duration::from_secs(10),
    })
    .expect("client")
    .call(
        operation,
        &keda_scalers::aws::client::Input::Json(&request),
        &keda_scalers::Clock::system(),
    )
    .await
    .unwrap_or_else(|e| panic!("{operation}: {e}"));
}

async fn kinesis_call(operation: &str, request: serde_json::Value) {
    moto_call(keda_scalers::aws::client::KINESIS, operation, request).await;
}

#[tokio::test]
async fn aws_kinesis_stream_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    let test = "aws-kinesis-stream triggers";
    let Some((_server, w)) = obs_world(test).await else {
        return;
    };
    let up = async { tokio::net::TcpStream::connect("127.0.0.1:5000").await };
    if redis_common::service_or_skip(test, "moto at 127.0.0.1:5000", up)
        .await
        .is_none()
    {
        return;
    }
    let stream = format!("keda-rs-op-{}-{}", std::process::id(), w.namespace);
    kinesis_call(
        "CreateStream",
        serde_json::json!({"StreamName": stream, "ShardCount": 2}),
    )
    .await;
    secret_auth(
        &w,
        "aws",
        &[
            ("awsAccessKeyID", "AKIAKEDARSTEST"),
            ("awsSecretAccessKey", "keda-rs-test-secret-key"),
        ],
    )
    .await;
    let trigger = format!(
        "type: aws-kinesis-stream\n      metadata:\n        streamName: {stream}\n        awsRegion: eu-west-1\n        awsEndpoint: http://127.0.0.1:5000\n        shardCount: \"2\"\n        activationShardCount: \"2\"\n      authenticationRef:\n        name: aws"
    );
    // Two shards: not above activationShardCount; four: active.
    zero_to_one_resolving(&w, "kinesis", &trigger, async {
        kinesis_call(
            "UpdateShardCount",
            serde_json::json!({"StreamName": stream, "TargetShardCount": 4, "ScalingType": "UNIFORM_SCALING"}),
        )
        .await;
    })
    .await;

    let op = w.start_operator_resolving();
    w.deployment("bad", 0).await;
    refused(
        &w,
        "kinesis-stream",
        "type: aws-kinesis-stream\n      metadata:\n        awsRegion: eu-west-1\n      authenticationRef:\n        name: aws",
        "ScaledObjectCheckFailed",
        &["(aws-kinesis-stream)", "streamName"],
    )
    .await;
    // The operator's own credentials are not a namespace's to use (no opt-in here).
    refused(
        &w,
        "kinesis-operator",
        &format!("type: aws-kinesis-stream\n      metadata:\n        streamName: {stream}\n        awsRegion: eu-west-1\n        identityOwner: operator"),
        "ScaledObjectCheckFailed",
        &["(aws-kinesis-stream)", "identityOwner", "--allow-namespace-aws-operator-identity"],
    )
    .await;
    op.stop().await;
}

/// A DynamoDB table keyed by `id` on moto, with a stream when `stream`.
async fn dynamodb_table(name: &str, stream: bool) {
    let mut request = serde_json::json!({
        "TableName": name,
        "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}],
        "AttributeDefinitions": [{"AttributeName": "id", "AttributeType": "S"}],
        "BillingMode": "PAY_PER_REQUEST",
    });
    if stream {
        request["StreamSpecification"] =
            serde_json::json!({"StreamEnabled": true, "StreamViewType": "NEW_IMAGE"});
    }
    moto_call(keda_scalers::aws::client::DYNAMODB, "CreateTable", request).await;
}

#[tokio::test]
async fn aws_dynamodb_streams_scales_from_zero_and_a_table_without_a_stream_is_not_ready() {
    let test = "aws-dynamodb-streams triggers";
    let Some((_server, w)) = obs_world(test).await else {
        return;
    };
    let up = async { tokio::net::TcpStream::connect("127.0.0.1:5000").await };
    if redis_common::service_or_skip(test, "moto at 127.0.0.1:5000", up)
        .await
        .is_none()
    {
        return;
    }
    let streamed = format!("keda-rs-op-streamed-{}-{}", std::process::id(), w.namespace);
    let plain = format!("keda-rs-op-plain-{}-{}", std::process::id(), w.namespace);
    dynamodb_table(&streamed, true).await;
    dynamodb_table(&plain, false).await;
    secret_auth(
        &w,
        "aws",
        &[
            ("awsAccessKeyID", "AKIAKEDARSTEST"),
            ("awsSecretAccessKey", "keda-rs-test-secret-key"),
        ],
    )
    .await;
    let trigger = |table: &str| {
        format!(
            "type: aws-dynamodb-streams\n      metadata:\n        tableName: {table}\n        awsRegion: eu-west-1\n        awsEndpoint: http://127.0.0.1:5000\n      authenticationRef:\n        name: aws"
        )
    };
    // moto gives the stream one shard: above activationShardCount 0 at the first poll.
    w.deployment("ddbs", 0).await;
    w.deployment("bad", 0).await;
    let op = w.start_operator_resolving();
    let so = w.create(&object("ddbs", "ddbs", &trigger(&streamed))).await;
    eventually("ddbs at 1 replica", || async {
        w.poll_after(&op, &so, 10).await;
        (w.replicas("ddbs").await == 1).then_some(())
    })
    .await;
    refused(
        &w,
        "ddbs-no-stream",
        &trigger(&plain),
        "ScaledObjectCheckFailed",
        &["(aws-dynamodb-streams)", "tableName", "has no stream"],
    )
    .await;
    refused(
        &w,
        "ddbs-table",
        "type: aws-dynamodb-streams\n      metadata:\n        awsRegion: eu-west-1\n      authenticationRef:\n        name: aws",
        "ScaledObjectCheckFailed",
        &["(aws-dynamodb-streams)", "tableName"],
    )
    .await;
    op.stop().await;
}

#[tokio::test]
async fn kubernetes_resource_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    let Some((_server, w)) = obs_world("kubernetes-resource triggers").await else {
        return;
    };
    let maps = kube::Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(
        w.client.clone(),
        &w.namespace,
    );
    let stats = |depth: u32| -> k8s_openapi::api::core::v1::ConfigMap {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": { "name": "queue-stats" },
            "data": { "stats.json": format!(r#"{{"queue":{{"depth":{depth}}}}}"#) },
        }))
        .expect("a ConfigMap")
    };
    maps.create(&kube::api::PostParams::default(), &stats(0))
        .await
        .expect("create ConfigMap");
    let trigger = "type: kubernetes-resource\n      metadata:\n        resourceKind: ConfigMap\n        resourceName: queue-stats\n        key: stats.json\n        format: json\n        valueLocation: queue.depth\n        targetValue: \"10\"";
    // The scalers read the operator's watch of the namespace: a change of the ConfigMap is
    // seen by the next poll.
    let replace = async {
        maps.replace("queue-stats", &kube::api::PostParams::default(), &stats(4))
            .await
            .expect("update ConfigMap");
    };
    w.deployment("resource", 0).await;
    let op = w.start_operator_resolving();
    let so = w.create(&object("resource", "resource", trigger)).await;
    w.polls_reach(&op, &so, 1).await;
    assert_eq!(w.replicas("resource").await, 0, "inactive at first");
    replace.await;
    eventually("resource at 1 replica", || async {
        w.poll_after(&op, &so, 10).await;
        (w.replicas("resource").await == 1).then_some(())
    })
    .await;

    w.deployment("bad", 0).await;
    refused(
        &w,
        "resource-location",
        "type: kubernetes-resource\n      metadata:\n        resourceKind: ConfigMap\n        resourceName: queue-stats\n        key: stats.json\n        format: json\n        targetValue: \"10\"",
        "ScaledObjectCheckFailed",
        &["(kubernetes-resource)", "valueLocation"],
    )
    .await;
    refused(
        &w,
        "resource-kind",
        "type: kubernetes-resource\n      metadata:\n        resourceKind: Pod\n        resourceName: queue-stats\n        key: stats.json\n        targetValue: \"10\"",
        "ScaledObjectCheckFailed",
        &["(kubernetes-resource)", "resourceKind"],
    )
    .await;
    // A key that is missing fails the polls, naming it; the object stays built.
    refused(
        &w,
        "resource-key",
        "type: kubernetes-resource\n      metadata:\n        resourceKind: ConfigMap\n        resourceName: queue-stats\n        key: size\n        targetValue: \"10\"",
        "TriggerError",
        &["(kubernetes-resource)", "key \"size\" (key) not found"],
    )
    .await;
    op.stop().await;
}

/// A SEMP v2 queue answer with `count` messages spooled.
fn semp_queue(count: u32) -> String {
    format!(
        r#"{{"collections":{{"msgs":{{"count":{count}}}}},"data":{{"msgSpoolUsage":0,"averageRxMsgRate":0}},"meta":{{"responseCode":200}}}}"#
    )
}

#[tokio::test]
async fn solace_event_queue_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    let Some((_server, w)) = obs_world("solace-event-queue triggers").await else {
        return;
    };
    let broker = Source::start().await;
    broker.set_body(
        "SEMP/v2/monitor/msgVpns/default",
        r#"{"data":{"state":"up"},"meta":{"responseCode":200}}"#,
    );
    let queue = "SEMP/v2/monitor/msgVpns/default/queues/orders";
    broker.set_body(queue, &semp_queue(0));
    secret_auth(&w, "semp", &[("username", "admin"), ("password", "s3mp")]).await;
    let base = broker.url("");
    let base = base.trim_end_matches('/');
    let trigger = format!(
        "type: solace-event-queue\n      metadata:\n        solaceSempBaseURL: {base}\n        messageVpn: default\n        queueName: orders\n        messageCountTarget: \"10\"\n      authenticationRef:\n        name: semp"
    );
    zero_to_one_resolving(&w, "solace", &trigger, async {
        broker.set_body(queue, &semp_queue(25));
    })
    .await;
    assert!(broker.requests(queue) > 0);

    let op = w.start_operator_resolving();
    w.deployment("bad", 0).await;
    refused(
        &w,
        "solace-targets",
        &format!("type: solace-event-queue\n      metadata:\n        solaceSempBaseURL: {base}\n        messageVpn: default\n        queueName: orders\n      authenticationRef:\n        name: semp"),
        "ScaledObjectCheckFailed",
        &["(solace-event-queue)", "no target value found"],
    )
    .await;
    refused(
        &w,
        "solace-queue",
        &format!("type: solace-event-queue\n      metadata:\n        solaceSempBaseURL: {base}\n        messageVpn: default\n        messageCountTarget: \"10\"\n      authenticationRef:\n        name: semp"),
        "ScaledObjectCheckFailed",
        &["(solace-event-queue)", "queueName"],
    )
    .await;
    op.stop().await;
}

/// `S`'s factory with the process' vendor endpoints set to `endpoints` (the operator binary
/// leaves them empty).
fn redirected<S: keda_scalers::pooled::PooledSource>(
    endpoints: keda_scalers::http_client::VendorEndpoints,
    params: &'static [keda_scalers::Param],
) -> impl keda_scalers::ScalerFactory + 'static {
    keda_scalers::registry::Declared::new(
        move |mut ctx: keda_scalers::ScalerContext| {
            ctx.vendor_endpoints = endpoints.clone();
            keda_scalers::pooled::build::<S>(ctx)
        },
        params,
    )
    .with_check(keda_scalers::pooled::check::<S>)
}

/// The built-in registry with the vendor types whose API host is fixed (`datadog`,
/// `new-relic`) reaching `host` at `fake`.
fn vendor_registry(host: &str, fake: url::Url) -> keda_scalers::Registry {
    use keda_scalers::scalers::{datadog, new_relic};
    let endpoints = keda_scalers::http_client::VendorEndpoints::default().with(host, fake);
    let mut registry = keda_scalers::Registry::builtin();
    registry.register(
        "datadog",
        redirected::<datadog::DatadogConfig>(endpoints.clone(), datadog::PARAMS),
    );
    registry.register(
        "new-relic",
        redirected::<new_relic::NewRelicConfig>(endpoints, new_relic::PARAMS),
    );
    registry
}

/// A Datadog `MetricsQueryResponse` of one series whose last point is `value`
/// (https://docs.datadoghq.com/api/latest/metrics/#query-timeseries-points).
fn datadog_series(value: f64) -> String {
    format!(
        r#"{{"status":"ok","res_type":"time_series","series":[{{"metric":"queue.depth","scope":"service:worker","pointlist":[[1700000000000.0,{value}],[1700000020000.0,null]]}}],"from_date":1700000000000,"to_date":1700000090000,"query":"avg:queue.depth{{service:worker}}"}}"#
    )
}

#[tokio::test]
async fn datadog_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    let datadog = Source::start().await;
    let fake = url::Url::parse(&datadog.url("")).expect("fake URL");
    let Some((_server, w)) = world(
        "datadog triggers",
        vendor_registry("api.datadoghq.com", fake),
    )
    .await
    else {
        return;
    };
    let path = "api/v1/query";
    datadog.set_body(path, &datadog_series(0.0));
    secret_auth(
        &w,
        "datadog",
        &[("apiKey", "dd-api-key"), ("appKey", "dd-app-key")],
    )
    .await;
    let trigger = "type: datadog\n      metadata:\n        query: avg:queue.depth{service:worker}\n        queryValue: \"2\"\n        activationQueryValue: \"1\"\n      authenticationRef:\n        name: datadog";
    zero_to_one_resolving(&w, "datadog", trigger, async {
        datadog.set_body(path, &datadog_series(5.0));
    })
    .await;
    assert!(datadog.requests(path) > 0);

    let op = w.start_operator_resolving();
    w.deployment("bad", 0).await;
    secret_auth(&w, "datadog-api-only", &[("apiKey", "dd-api-key")]).await;
    refused(
        &w,
        "datadog-app-key",
        "type: datadog\n      metadata:\n        query: avg:queue.depth{service:worker}\n        queryValue: \"2\"\n      authenticationRef:\n        name: datadog-api-only",
        "ScaledObjectCheckFailed",
        &["(datadog)", "appKey"],
    )
    .await;
    refused(
        &w,
        "datadog-query",
        "type: datadog\n      metadata:\n        query: avg:queue.depth\n        queryValue: \"2\"\n      authenticationRef:\n        name: datadog",
        "ScaledObjectCheckFailed",
        &["(datadog)", "query", "scope"],
    )
    .await;
    op.stop().await;
}

/// A NerdGraph answer to an NRQL query whose one row is `{"count": value}`
/// (https://docs.newrelic.com/docs/apis/nerdgraph/examples/nerdgraph-nrql-tutorial/).
fn nerdgraph_rows(value: f64) -> String {
    format!(
        r#"{{"data":{{"actor":{{"account":{{"nrql":{{"results":[{{"count":{value}}}]}}}}}}}}}}"#
    )
}

#[tokio::test]
async fn new_relic_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    let nerdgraph = Source::start().await;
    let fake = url::Url::parse(&nerdgraph.url("")).expect("fake URL");
    let Some((_server, w)) = world(
        "new-relic triggers",
        vendor_registry("api.newrelic.com", fake),
    )
    .await
    else {
        return;
    };
    let path = "graphql";
    nerdgraph.set_body(path, &nerdgraph_rows(0.0));
    secret_auth(
        &w,
        "new-relic",
        &[("queryKey", "NRAK-KEY"), ("account", "1234567")],
    )
    .await;
    let trigger = "type: new-relic\n      metadata:\n        nrql: SELECT count(*) FROM Transaction\n        threshold: \"10\"\n        activationThreshold: \"1\"\n      authenticationRef:\n        name: new-relic";
    zero_to_one_resolving(&w, "new-relic", trigger, async {
        nerdgraph.set_body(path, &nerdgraph_rows(4.0));
    })
    .await;
    assert!(nerdgraph.requests(path) > 0);

    let op = w.start_operator_resolving();
    w.deployment("bad", 0).await;
    refused(
        &w,
        "new-relic-account",
        "type: new-relic\n      metadata:\n        nrql: SELECT count(*) FROM Transaction\n        threshold: \"10\"\n        account: ABC\n        queryKey: k",
        "ScaledObjectCheckFailed",
        &["(new-relic)", "account"],
    )
    .await;
    refused(
        &w,
        "new-relic-region",
        "type: new-relic\n      metadata:\n        nrql: SELECT count(*) FROM Transaction\n        threshold: \"10\"\n        account: \"1\"\n        region: local\n      authenticationRef:\n        name: new-relic",
        "ScaledObjectCheckFailed",
        &["(new-relic)", "region"],
    )
    .await;
    op.stop().await;
}

/// A Metrics API v2 answer whose first value is `value`
/// (https://docs.dynatrace.com/docs/dynatrace-api/environment-api/metric-v2/get-data-points).
fn dynatrace_metric(value: f64) -> String {
    format!(
        r#"{{"totalCount":1,"nextPageKey":null,"resolution":"1m","result":[{{"metricId":"m","data":[{{"dimensions":[],"dimensionMap":{{}},"timestamps":[1700000000000],"values":[{value}]}}]}}]}}"#
    )
}

#[tokio::test]
async fn dynatrace_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    let Some((_server, w)) = obs_world("dynatrace triggers").await else {
        return;
    };
    let dynatrace = Source::start().await;
    let path = "api/v2/metrics/query";
    dynatrace.set_body(path, &dynatrace_metric(0.0));
    secret_auth(&w, "dynatrace", &[("token", "dt0c01.TOKEN")]).await;
    let host = dynatrace.url("");
    let trigger = format!(
        "type: dynatrace\n      metadata:\n        host: {host}\n        metricSelector: \"builtin:service.requestCount.total:splitBy():fold\"\n        threshold: \"10\"\n        activationThreshold: \"1\"\n      authenticationRef:\n        name: dynatrace"
    );
    zero_to_one_resolving(&w, "dynatrace", &trigger, async {
        dynatrace.set_body(path, &dynatrace_metric(3.0));
    })
    .await;
    assert!(dynatrace.requests(path) > 0);

    let op = w.start_operator_resolving();
    w.deployment("bad", 0).await;
    refused(
        &w,
        "dynatrace-selector",
        &format!("type: dynatrace\n      metadata:\n        host: {host}\n        threshold: \"10\"\n      authenticationRef:\n        name: dynatrace"),
        "ScaledObjectCheckFailed",
        &["(dynatrace)", "metricSelector", "query"],
    )
    .await;
    // Not a URL: built, as in KEDA, and every poll fails naming host.
    refused(
        &w,
        "dynatrace-host",
        "type: dynatrace\n      metadata:\n        host: abc.live.dynatrace.com\n        metricSelector: m\n        threshold: \"10\"\n      authenticationRef:\n        name: dynatrace",
        "TriggerError",
        &["(dynatrace)", "host"],
    )
    .await;
    op.stop().await;
}

/// A Splunk search export answer (`output_mode=json`) whose first result has `count`
/// (https://docs.splunk.com/Documentation/Splunk/latest/RESTREF/RESTsearch#search.2Fjobs.2Fexport).
fn splunk_export(count: u32) -> String {
    format!(r#"{{"preview":false,"offset":0,"lastrow":true,"result":{{"count":"{count}"}}}}"#)
}

#[tokio::test]
async fn splunk_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    let Some((_server, w)) = obs_world("splunk triggers").await else {
        return;
    };
    let splunk = Source::start().await;
    let path = "servicesNS/keda/search/search/jobs/export";
    splunk.set_body(path, &splunk_export(0));
    secret_auth(
        &w,
        "splunk",
        &[("username", "keda"), ("apiToken", "spl-token")],
    )
    .await;
    let host = splunk.url("");
    let host = host.trim_end_matches('/');
    let trigger = format!(
        "type: splunk\n      metadata:\n        host: {host}\n        savedSearchName: errors\n        valueField: count\n        targetValue: \"5\"\n        activationValue: \"1\"\n      authenticationRef:\n        name: splunk"
    );
    zero_to_one_resolving(&w, "splunk", &trigger, async {
        splunk.set_body(path, &splunk_export(3));
    })
    .await;
    assert!(splunk.requests(path) > 0);

    let op = w.start_operator_resolving();
    w.deployment("bad", 0).await;
    refused(
        &w,
        "splunk-activation",
        &format!("type: splunk\n      metadata:\n        host: {host}\n        savedSearchName: errors\n        valueField: count\n        targetValue: \"5\"\n      authenticationRef:\n        name: splunk"),
        "ScaledObjectCheckFailed",
        &["(splunk)", "activationValue"],
    )
    .await;
    refused(
        &w,
        "splunk-username",
        &format!("type: splunk\n      metadata:\n        host: {host}\n        savedSearchName: errors\n        valueField: count\n        targetValue: \"5\"\n        activationValue: \"1\"\n        username: keda"),
        "ScaledObjectCheckFailed",
        &["(splunk)", "username"],
    )
    .await;
    op.stop().await;
}

/// A Solr select answer finding `n` documents
/// (https://solr.apache.org/guide/solr/latest/query-guide/response-writers.html#json-response-writer).
fn solr_found(n: u64) -> String {
    format!(
        r#"{{"responseHeader":{{"status":0,"QTime":1}},"response":{{"numFound":{n},"start":0,"docs":[]}}}}"#
    )
}

#[tokio::test]
async fn solr_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    let Some((_server, w)) = obs_world("solr triggers").await else {
        return;
    };
    let solr = Source::start().await;
    let path = "solr/jobs/select";
    solr.set_body(path, &solr_found(0));
    secret_auth(&w, "solr", &[("username", "solr"), ("password", "s0lr")]).await;
    let host = solr.url("");
    let trigger = format!(
        "type: solr\n      metadata:\n        host: {host}\n        collection: jobs\n        targetQueryValue: \"10\"\n        activationTargetQueryValue: \"1\"\n      authenticationRef:\n        name: solr"
    );
    zero_to_one_resolving(&w, "solr", &trigger, async {
        solr.set_body(path, &solr_found(4));
    })
    .await;
    assert!(solr.requests(path) > 0);

    let op = w.start_operator_resolving();
    w.deployment("bad", 0).await;
    refused(
        &w,
        "solr-target",
        &format!("type: solr\n      metadata:\n        host: {host}\n        collection: jobs\n        targetQueryValue: \"0\"\n      authenticationRef:\n        name: solr"),
        "ScaledObjectCheckFailed",
        &["(solr)", "targetQueryValue"],
    )
    .await;
    refused(
        &w,
        "solr-password",
        &format!("type: solr\n      metadata:\n        host: {host}\n        collection: jobs\n        targetQueryValue: \"10\"\n        username: solr"),
        "ScaledObjectCheckFailed",
        &["(solr)", "password"],
    )
    .await;
    op.stop().await;
}

/// A CouchDB `_find` answer with `n` documents
/// (https://docs.couchdb.org/en/stable/api/database/find.html).
fn couchdb_docs(n: usize) -> String {
    let docs: Vec<String> = (0..n)
        .map(|i| format!(r#"{{"_id":"d{i}","feet":4}}"#))
        .collect();
    format!(r#"{{"docs":[{}],"bookmark":"g1AAAA"}}"#, docs.join(","))
}

#[tokio::test]
async fn couchdb_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    let Some((_server, w)) = obs_world("couchdb triggers").await else {
        return;
    };
    let couch = Source::start().await;
    let path = "animals/_find";
    couch.set_body(path, &couchdb_docs(0));
    let server = couch.url("");
    secret_auth(
        &w,
        "couchdb",
        &[("connectionString", server.as_str()), ("password", "c0uch")],
    )
    .await;
    let trigger = "type: couchdb\n      metadata:\n        dbName: animals\n        queryValue: \"5\"\n        query: '{\"selector\": {\"feet\": {\"$gt\": 0}}}'\n      authenticationRef:\n        name: couchdb";
    zero_to_one_resolving(&w, "couchdb", trigger, async {
        couch.set_body(path, &couchdb_docs(3));
    })
    .await;
    assert!(couch.requests(path) > 0);

    let op = w.start_operator_resolving();
    w.deployment("bad", 0).await;
    refused(
        &w,
        "couchdb-host",
        "type: couchdb\n      metadata:\n        port: \"5984\"\n        dbName: animals\n        username: admin\n        queryValue: \"5\"\n        query: '{}'",
        "ScaledObjectCheckFailed",
        &["(couchdb)", "host"],
    )
    .await;
    refused(
        &w,
        "couchdb-query-value",
        "type: couchdb\n      metadata:\n        dbName: animals\n        query: '{}'\n      authenticationRef:\n        name: couchdb",
        "ScaledObjectCheckFailed",
        &["(couchdb)", "queryValue"],
    )
    .await;
    op.stop().await;
}

/// A Selenium Grid GraphQL answer with `queued` chrome session requests and no nodes
/// (https://www.selenium.dev/documentation/grid/advanced_features/graphql_support/).
fn selenium_queue(queued: usize) -> String {
    let requests = vec![r#"{\"browserName\":\"chrome\",\"platformName\":\"linux\"}"#; queued];
    let requests: Vec<String> = requests.iter().map(|r| format!("\"{r}\"")).collect();
    format!(
        r#"{{"data":{{"grid":{{"sessionCount":0,"maxSession":0,"totalSlots":0}},"nodesInfo":{{"nodes":[]}},"sessionsInfo":{{"sessionQueueRequests":[{}]}}}}}}"#,
        requests.join(",")
    )
}

#[tokio::test]
async fn selenium_grid_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    let Some((_server, w)) = obs_world("selenium-grid triggers").await else {
        return;
    };
    let grid = Source::start().await;
    let path = "graphql";
    grid.set_body(path, &selenium_queue(0));
    let url = grid.url(path);
    let trigger = format!(
        "type: selenium-grid\n      metadata:\n        url: {url}\n        browserName: chrome\n        platformName: linux"
    );
    zero_to_one(&w, "selenium", &trigger, || {
        grid.set_body(path, &selenium_queue(2));
    })
    .await;
    assert!(grid.requests(path) > 0);

    let op = w.start_operator();
    w.deployment("bad", 0).await;
    refused(
        &w,
        "selenium-url",
        "type: selenium-grid\n      metadata:\n        browserName: chrome",
        "ScaledObjectCheckFailed",
        &["(selenium-grid)", "url"],
    )
    .await;
    refused(
        &w,
        "selenium-capabilities",
        &format!("type: selenium-grid\n      metadata:\n        url: {url}\n        capabilities: \"not json\""),
        "ScaledObjectCheckFailed",
        &["(selenium-grid)", "capabilities"],
    )
    .await;
    op.stop().await;
}

/// A Jolokia read answer of an Artemis queue's MessageCount
/// (https://jolokia.org/reference/html/manual/jolokia_protocol.html#read).
fn artemis_count(n: u64) -> String {
    format!(
        r#"{{"request":{{"mbean":"org.apache.activemq.artemis:broker=\"b\",component=addresses,address=\"jobs\",subcomponent=queues,routing-type=\"anycast\",queue=\"jobs\"","attribute":"MessageCount","type":"read"}},"value":{n},"timestamp":1700000000,"status":200}}"#
    )
}

#[tokio::test]
async fn artemis_queue_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    let Some((_server, w)) = obs_world("artemis-queue triggers").await else {
        return;
    };
    let artemis = Source::start().await;
    let path = "console/jolokia/read/org.apache.activemq.artemis:broker=%22b%22,component=addresses,address=%22jobs%22,subcomponent=queues,routing-type=%22anycast%22,queue=%22jobs%22/MessageCount";
    artemis.set_body(path, &artemis_count(0));
    secret_auth(
        &w,
        "artemis",
        &[("username", "admin"), ("password", "art3mis")],
    )
    .await;
    let endpoint = artemis.url("");
    let endpoint = endpoint.trim_start_matches("http://").trim_end_matches('/');
    let trigger = format!(
        "type: artemis-queue\n      metadata:\n        managementEndpoint: {endpoint}\n        queueName: jobs\n        brokerName: b\n        brokerAddress: jobs\n        activationQueueLength: \"1\"\n      authenticationRef:\n        name: artemis"
    );
    zero_to_one_resolving(&w, "artemis", &trigger, async {
        artemis.set_body(path, &artemis_count(4));
    })
    .await;
    assert!(artemis.requests(path) > 0);

    let op = w.start_operator_resolving();
    w.deployment("bad", 0).await;
    refused(
        &w,
        "artemis-broker",
        &format!("type: artemis-queue\n      metadata:\n        managementEndpoint: {endpoint}\n        queueName: jobs\n        brokerAddress: jobs\n      authenticationRef:\n        name: artemis"),
        "ScaledObjectCheckFailed",
        &["(artemis-queue)", "brokerName"],
    )
    .await;
    refused(
        &w,
        "artemis-password",
        &format!("type: artemis-queue\n      metadata:\n        managementEndpoint: {endpoint}\n        queueName: jobs\n        brokerName: b\n        brokerAddress: jobs\n        username: admin"),
        "ScaledObjectCheckFailed",
        &["(artemis-queue)", "password"],
    )
    .await;
    op.stop().await;
}

/// An nsqd `/stats?format=json` answer with `depth` messages in channel `workers` of topic
/// `orders` (https://nsq.io/components/nsqd.html#get-stats).
fn nsq_stats(depth: u64) -> String {
    format!(
        r#"{{"version":"1.3.0","health":"OK","start_time":1700000000,"topics":[{{"topic_name":"orders","depth":0,"channels":[{{"channel_name":"workers","depth":{depth},"paused":false}}]}}]}}"#
    )
}

#[tokio::test]
async fn nsq_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    let Some((_server, w)) = obs_world("nsq triggers").await else {
        return;
    };
    // One loopback source plays nsqlookupd (GET /lookup,
    // https://nsq.io/components/nsqlookupd.html#get-lookup) and the one nsqd it lists.
    let nsq = Source::start().await;
    let address = nsq.url("");
    let address = address
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let port = address.rsplit_once(':').map(|(_, p)| p).unwrap_or_default();
    nsq.set_body(
        "lookup",
        &format!(
            r#"{{"channels":["workers"],"producers":[{{"broadcast_address":"127.0.0.1","tcp_port":4150,"http_port":{port},"version":"1.3.0"}}]}}"#
        ),
    );
    nsq.set_body("stats", &nsq_stats(0));
    let trigger = format!(
        "type: nsq\n      metadata:\n        nsqLookupdHTTPAddresses: {address}\n        topic: orders\n        channel: workers\n        depthThreshold: \"5\""
    );
    zero_to_one(&w, "nsq", &trigger, || {
        nsq.set_body("stats", &nsq_stats(3));
    })
    .await;
    assert!(nsq.requests("lookup") > 0 && nsq.requests("stats") > 0);

    let op = w.start_operator();
    w.deployment("bad", 0).await;
    refused(
        &w,
        "nsq-depth",
        &format!("type: nsq\n      metadata:\n        nsqLookupdHTTPAddresses: {address}\n        topic: orders\n        channel: workers\n        depthThreshold: \"0\""),
        "ScaledObjectCheckFailed",
        &["(nsq)", "depthThreshold"],
    )
    .await;
    refused(
        &w,
        "nsq-channel",
        &format!("type: nsq\n      metadata:\n        nsqLookupdHTTPAddresses: {address}\n        topic: orders"),
        "ScaledObjectCheckFailed",
        &["(nsq)", "channel"],
    )
    .await;
    op.stop().await;
}

/// A Pulsar `TopicStats` answer with `backlog` messages in subscription `workers`
/// (https://pulsar.apache.org/admin-rest-api/#operation/PersistentTopics_getStats).
fn pulsar_stats(backlog: u64) -> String {
    format!(
        r#"{{"msgRateIn":0.0,"msgInCounter":10,"publishers":[],"subscriptions":{{"workers":{{"msgRateOut":0.0,"msgBacklog":{backlog},"type":"Shared","consumers":[]}}}},"replication":{{}},"deduplicationStatus":"Disabled"}}"#
    )
}

#[tokio::test]
async fn pulsar_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    let Some((_server, w)) = obs_world("pulsar triggers").await else {
        return;
    };
    let pulsar = Source::start().await;
    let path = "admin/v2/persistent/public/default/jobs/stats";
    pulsar.set_body(path, &pulsar_stats(0));
    secret_auth(&w, "pulsar", &[("bearerToken", "puls4r")]).await;
    let admin = pulsar.url("");
    let admin = admin.trim_end_matches('/');
    let trigger = format!(
        "type: pulsar\n      metadata:\n        adminURL: {admin}\n        topic: persistent://public/default/jobs\n        subscription: workers\n        authModes: bearer\n      authenticationRef:\n        name: pulsar"
    );
    zero_to_one_resolving(&w, "pulsar", &trigger, async {
        pulsar.set_body(path, &pulsar_stats(3));
    })
    .await;
    assert!(pulsar.requests(path) > 0);

    let op = w.start_operator_resolving();
    w.deployment("bad", 0).await;
    refused(
        &w,
        "pulsar-subscription",
        &format!("type: pulsar\n      metadata:\n        adminURL: {admin}\n        topic: persistent://public/default/jobs"),
        "ScaledObjectCheckFailed",
        &["(pulsar)", "subscription"],
    )
    .await;
    refused(
        &w,
        "pulsar-token",
        &format!("type: pulsar\n      metadata:\n        adminURL: {admin}\n        topic: persistent://public/default/jobs\n        subscription: workers\n        authModes: bearer"),
        "ScaledObjectCheckFailed",
        &["(pulsar)", "bearerToken"],
    )
    .await;
    op.stop().await;
}

/// An ArangoDB cursor answer with one document `{"value": n}`
/// (https://docs.arangodb.com/stable/develop/http-api/queries/aql-queries/#create-a-cursor).
fn arangodb_cursor(n: u64) -> String {
    format!(
        r#"{{"result":[{{"value":{n}}}],"hasMore":false,"count":1,"cached":false,"extra":{{}},"error":false,"code":201}}"#
    )
}

#[tokio::test]
async fn arangodb_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    let Some((_server, w)) = obs_world("arangodb triggers").await else {
        return;
    };
    let arango = Source::start().await;
    arango.set_body(
        "_db/jobs/_api/database/current",
        r#"{"error":false,"code":200,"result":{"name":"jobs","id":"1","isSystem":false}}"#,
    );
    arango.set_body(
        "_db/jobs/_api/collection/tasks",
        r#"{"error":false,"code":200,"id":"2","name":"tasks","status":3,"type":2}"#,
    );
    let cursor = "_db/jobs/_api/cursor";
    arango.set_body(cursor, &arangodb_cursor(0));
    let endpoint = arango.url("");
    let endpoint = endpoint.trim_end_matches('/');
    let trigger = format!(
        "type: arangodb\n      metadata:\n        endpoints: {endpoint}\n        dbName: jobs\n        collection: tasks\n        query: \"RETURN {{value: 1}}\"\n        queryValue: \"5\""
    );
    zero_to_one(&w, "arangodb", &trigger, || {
        arango.set_body(cursor, &arangodb_cursor(2));
    })
    .await;
    assert!(arango.requests(cursor) > 0);

    let op = w.start_operator();
    w.deployment("bad", 0).await;
    refused(
        &w,
        "arangodb-query-value",
        &format!("type: arangodb\n      metadata:\n        endpoints: {endpoint}\n        dbName: jobs\n        collection: tasks\n        query: \"RETURN 1\""),
        "ScaledObjectCheckFailed",
        &["(arangodb)", "queryValue"],
    )
    .await;
    refused(
        &w,
        "arangodb-collection",
        &format!("type: arangodb\n      metadata:\n        endpoints: {endpoint}\n        dbName: jobs\n        query: \"RETURN 1\"\n        queryValue: \"5\""),
        "ScaledObjectCheckFailed",
        &["(arangodb)", "collection"],
    )
    .await;
    op.stop().await;
}

// Issue 24, batch A (github-runner, ...): the same checks, one test per type.

/// A GitHub workflow runs answer with one queued run of repository `api`
/// (https://docs.github.com/en/rest/actions/workflow-runs#list-workflow-runs-for-a-repository).
const GITHUB_RUNS: &str = r#"{"total_count":1,"workflow_runs":[{"id":11,"name":"Build","status":"queued","conclusion":null,"repository":{"id":1,"name":"api","full_name":"my-org/api"}}]}"#;

/// A GitHub jobs answer with `queued` queued jobs labelled `golang`
/// (https://docs.github.com/en/rest/actions/workflow-jobs#list-jobs-for-a-workflow-run).
fn github_jobs(queued: usize) -> String {
    let jobs: Vec<String> = (0..queued)
        .map(|i| {
            format!(
                r#"{{"id":{i},"run_id":11,"status":"queued","labels":["self-hosted","golang"]}}"#
            )
        })
        .collect();
    format!(r#"{{"total_count":{queued},"jobs":[{}]}}"#, jobs.join(","))
}

#[tokio::test]
async fn github_runner_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    let Some((_server, w)) = obs_world("github-runner triggers").await else {
        return;
    };
    let github = Source::start().await;
    // The fake answers by path: `?status=queued` and `?status=in_progress` both list run 11.
    let runs = "repos/my-org/api/actions/runs";
    let jobs = "repos/my-org/api/actions/runs/11/jobs";
    github.set_body(runs, GITHUB_RUNS);
    github.set_body(jobs, &github_jobs(0));
    secret_auth(&w, "github", &[("personalAccessToken", "ghp_t0ken")]).await;
    let api = github.url("");
    let api = api.trim_end_matches('/');
    let trigger = format!(
        "type: github-runner\n      metadata:\n        githubApiURL: {api}\n        owner: my-org\n        runnerScope: org\n        repos: api\n        labels: golang\n      authenticationRef:\n        name: github"
    );
    zero_to_one_resolving(&w, "github-runner", &trigger, async {
        github.set_body(jobs, &github_jobs(1));
    })
    .await;
    assert!(github.requests(jobs) > 0);

    let op = w.start_operator_resolving();
    w.deployment("bad", 0).await;
    refused(
        &w,
        "github-runner-scope",
        &format!("type: github-runner\n      metadata:\n        githubApiURL: {api}\n        owner: my-org\n      authenticationRef:\n        name: github"),
        "ScaledObjectCheckFailed",
        &["(github-runner)", "runnerScope"],
    )
    .await;
    refused(
        &w,
        "github-runner-token",
        &format!("type: github-runner\n      metadata:\n        githubApiURL: {api}\n        owner: my-org\n        runnerScope: org"),
        "ScaledObjectCheckFailed",
        &["(github-runner)", "personalAccessToken"],
    )
    .await;
    op.stop().await;
}

/// A Sumo Logic metrics query answer of one series whose last value is `value`
/// (https://api.sumologic.com/docs/#operation/runMetricsQueries).
fn sumologic_series(value: f64) -> String {
    format!(
        r#"{{"queryResult":[{{"rowId":"A","timeSeriesList":{{"timeSeries":[{{"metricDefinition":{{"metric":"jobs_queued"}},"points":{{"timestamps":[1700000000000,1700000060000],"values":[0.0,{value}]}}}}],"unit":""}}}}],"errors":null}}"#
    )
}

#[tokio::test]
async fn sumologic_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    let Some((_server, w)) = obs_world("sumologic triggers").await else {
        return;
    };
    let sumo = Source::start().await;
    let path = "api/v1/metricsQueries";
    sumo.set_body(path, &sumologic_series(0.0));
    secret_auth(
        &w,
        "sumo",
        &[("accessID", "suAccess"), ("accessKey", "suKey")],
    )
    .await;
    let host = sumo.url("");
    let host = host.trim_end_matches('/');
    let trigger = format!(
        "type: sumologic\n      metadata:\n        host: {host}\n        queryType: metrics\n        query: metric=jobs_queued\n        quantization: 60s\n        timerange: 5m\n        queryAggregator: Latest\n        threshold: \"5\"\n      authenticationRef:\n        name: sumo"
    );
    zero_to_one_resolving(&w, "sumologic", &trigger, async {
        sumo.set_body(path, &sumologic_series(3.0));
    })
    .await;
    assert!(sumo.requests(path) > 0);

    let op = w.start_operator_resolving();
    w.deployment("bad", 0).await;
    refused(
        &w,
        "sumologic-quantization",
        &format!("type: sumologic\n      metadata:\n        host: {host}\n        queryType: metrics\n        query: metric=jobs_queued\n        timerange: 5m\n        threshold: \"5\"\n      authenticationRef:\n        name: sumo"),
        "ScaledObjectCheckFailed",
        &["(sumologic)", "quantization"],
    )
    .await;
    refused(
        &w,
        "sumologic-access-key",
        &format!("type: sumologic\n      metadata:\n        host: {host}\n        queryType: metrics\n        query: metric=jobs_queued\n        quantization: 60s\n        timerange: 5m\n        threshold: \"5\""),
        "ScaledObjectCheckFailed",
        &["(sumologic)", "accessID"],
    )
    .await;
    op.stop().await;
}

/// A SolarWinds Observability measurements answer whose one value is `value`
/// (https://api.solarwinds.com/, operation listMetricMeasurements).
fn solarwinds_measurements(value: f64) -> String {
    format!(
        r#"{{"groupings":[{{"attributes":[],"measurements":[{{"time":"2026-01-01T12:00:00Z","value":{value}}}]}}],"bucketSizeInSeconds":60,"pageInfo":{{}}}}"#
    )
}

#[tokio::test]
async fn solarwinds_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    let Some((_server, w)) = obs_world("solarwinds triggers").await else {
        return;
    };
    let swo = Source::start().await;
    let path = "v1/metrics/jobs.queued/measurements";
    swo.set_body(path, &solarwinds_measurements(0.0));
    secret_auth(&w, "swo", &[("apiToken", "sw0-token")]).await;
    let host = swo.url("");
    let host = host.trim_end_matches('/');
    let trigger = format!(
        "type: solarwinds\n      metadata:\n        host: {host}\n        metricName: jobs.queued\n        aggregation: MAX\n        intervalS: \"60\"\n        targetValue: \"5\"\n      authenticationRef:\n        name: swo"
    );
    zero_to_one_resolving(&w, "solarwinds", &trigger, async {
        swo.set_body(path, &solarwinds_measurements(2.0));
    })
    .await;
    assert!(swo.requests(path) > 0);

    let op = w.start_operator_resolving();
    w.deployment("bad", 0).await;
    refused(
        &w,
        "solarwinds-aggregation",
        &format!("type: solarwinds\n      metadata:\n        host: {host}\n        metricName: jobs.queued\n        aggregation: MEDIAN\n        intervalS: \"60\"\n        targetValue: \"5\""),
        "ScaledObjectCheckFailed",
        &["(solarwinds)", "aggregation"],
    )
    .await;
    refused(
        &w,
        "solarwinds-host",
        "type: solarwinds\n      metadata:\n        host: invalid-url\n        metricName: jobs.queued\n        aggregation: MAX\n        intervalS: \"60\"\n        targetValue: \"5\"",
        "ScaledObjectCheckFailed",
        &["(solarwinds)", "host"],
    )
    .await;
    op.stop().await;
}

/// A SignalFlow execute answer (Server-Sent Events) with one data point of `value`
/// (https://dev.splunk.com/observability/reference/api/signalflow/latest).
fn signalflow_events(value: f64) -> String {
    format!(
        "event: control-message\ndata: {{\"event\":\"STREAM_START\"}}\n\nevent: data\ndata: {{\"data\":[{{\"tsId\":\"AAAAAKDQ3RA\",\"value\":{value}}}],\"logicalTimestampMs\":1700000000000}}\n\nevent: control-message\ndata: {{\"event\":\"END_OF_CHANNEL\"}}\n\n"
    )
}

#[tokio::test]
async fn splunk_observability_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    use keda_scalers::scalers::splunk_observability as o11y;
    let signalflow = Source::start().await;
    let fake = url::Url::parse(&signalflow.url("")).expect("fake URL");
    let endpoints =
        keda_scalers::http_client::VendorEndpoints::default().with("stream.us1.signalfx.com", fake);
    let mut registry = keda_scalers::Registry::builtin();
    registry.register(
        "splunk-observability",
        redirected::<o11y::SplunkObservabilityConfig>(endpoints, o11y::PARAMS),
    );
    let Some((_server, w)) = world("splunk-observability triggers", registry).await else {
        return;
    };
    let path = "v2/signalflow/execute";
    signalflow.set_body(path, &signalflow_events(0.0));
    secret_auth(
        &w,
        "o11y",
        &[("accessToken", "sfx-t0ken"), ("realm", "us1")],
    )
    .await;
    let trigger = "type: splunk-observability\n      metadata:\n        query: data('jobs.queued').sum().publish()\n        duration: \"60\"\n        queryAggregator: max\n        targetValue: \"5\"\n        activationTargetValue: \"1\"\n      authenticationRef:\n        name: o11y";
    zero_to_one_resolving(&w, "splunk-o11y", trigger, async {
        signalflow.set_body(path, &signalflow_events(3.0));
    })
    .await;
    assert!(signalflow.requests(path) > 0);

    let op = w.start_operator_resolving();
    w.deployment("bad", 0).await;
    refused(
        &w,
        "splunk-o11y-duration",
        "type: splunk-observability\n      metadata:\n        query: data('jobs.queued').sum().publish()\n        queryAggregator: max\n        targetValue: \"5\"\n        activationTargetValue: \"1\"\n      authenticationRef:\n        name: o11y",
        "ScaledObjectCheckFailed",
        &["(splunk-observability)", "duration"],
    )
    .await;
    refused(
        &w,
        "splunk-o11y-token",
        "type: splunk-observability\n      metadata:\n        query: data('jobs.queued').sum().publish()\n        duration: \"60\"\n        queryAggregator: max\n        targetValue: \"5\"\n        activationTargetValue: \"1\"",
        "ScaledObjectCheckFailed",
        &["(splunk-observability)", "accessToken"],
    )
    .await;
    op.stop().await;
}

/// The Datadog Cluster Agent's `ExternalMetricValueList` for `datadogmetric@default:jobs`
/// (https://docs.datadoghq.com/containers/cluster_agent/external_metrics/).
fn cluster_agent_value(value: &str) -> String {
    format!(
        r#"{{"kind":"ExternalMetricValueList","apiVersion":"external.metrics.k8s.io/v1beta1","metadata":{{}},"items":[{{"metricName":"datadogmetric@default:jobs","metricLabels":null,"timestamp":"2026-01-01T00:00:00Z","value":"{value}"}}]}}"#
    )
}

#[tokio::test]
async fn datadog_cluster_agent_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    let agent = Source::start().await;
    let fake = url::Url::parse(&agent.url("")).expect("fake URL");
    let Some((_server, w)) = world(
        "datadog cluster agent triggers",
        vendor_registry("datadog-cluster-agent-metrics-api.datadog", fake),
    )
    .await
    else {
        return;
    };
    let path = "apis/external.metrics.k8s.io/v1beta1/namespaces/default/datadogmetric@default:jobs";
    agent.set_body(path, &cluster_agent_value("0"));
    secret_auth(
        &w,
        "dca",
        &[
            ("datadogNamespace", "datadog"),
            ("datadogMetricsService", "datadog-cluster-agent-metrics-api"),
        ],
    )
    .await;
    let trigger = "type: datadog\n      metadata:\n        useClusterAgentProxy: \"true\"\n        datadogMetricName: jobs\n        datadogMetricNamespace: default\n        targetValue: \"2\"\n      authenticationRef:\n        name: dca";
    zero_to_one_resolving(&w, "datadog-dca", trigger, async {
        agent.set_body(path, &cluster_agent_value("1500m"));
    })
    .await;
    assert!(agent.requests(path) > 0);

    let op = w.start_operator_resolving();
    w.deployment("bad", 0).await;
    refused(
        &w,
        "datadog-dca-metric",
        "type: datadog\n      metadata:\n        useClusterAgentProxy: \"true\"\n        datadogMetricNamespace: default\n        targetValue: \"2\"\n      authenticationRef:\n        name: dca",
        "ScaledObjectCheckFailed",
        &["(datadog)", "datadogMetricName"],
    )
    .await;
    refused(
        &w,
        "datadog-dca-service",
        "type: datadog\n      metadata:\n        useClusterAgentProxy: \"true\"\n        datadogMetricName: jobs\n        datadogMetricNamespace: default\n        targetValue: \"2\"",
        "ScaledObjectCheckFailed",
        &["(datadog)", "datadogMetricsService"],
    )
    .await;
    op.stop().await;
}

/// The built-in registry with the `gcp-*` types reaching Google's token endpoint and Cloud
/// Monitoring at `fake`.
fn gcp_registry(fake: url::Url) -> keda_scalers::Registry {
    use keda_scalers::scalers::{gcp_cloudtasks, gcp_pubsub, gcp_stackdriver, gcp_storage};
    let endpoints = keda_scalers::http_client::VendorEndpoints::default()
        .with("oauth2.googleapis.com", fake.clone())
        .with("monitoring.googleapis.com", fake.clone())
        .with("storage.googleapis.com", fake);
    let mut registry = keda_scalers::Registry::builtin();
    registry.register(
        "gcp-cloudtasks",
        redirected::<keda_scalers::pooled::Keyed<gcp_cloudtasks::CloudTasksConfig>>(
            endpoints.clone(),
            gcp_cloudtasks::PARAMS,
        ),
    );
    registry.register(
        "gcp-pubsub",
        redirected::<keda_scalers::pooled::Keyed<gcp_pubsub::PubSubConfig>>(
            endpoints.clone(),
            gcp_pubsub::PARAMS,
        ),
    );
    registry.register(
        "gcp-stackdriver",
        redirected::<keda_scalers::pooled::Keyed<gcp_stackdriver::StackdriverConfig>>(
            endpoints.clone(),
            gcp_stackdriver::PARAMS,
        ),
    );
    registry.register(
        "gcp-storage",
        redirected::<keda_scalers::pooled::Keyed<gcp_storage::StorageConfig>>(
            endpoints,
            gcp_storage::PARAMS,
        ),
    );
    registry
}

/// A service account key JSON with a fresh RSA key (made by the `openssl` command line).
fn gcp_key_json() -> String {
    let output = std::process::Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
        ])
        .output()
        .expect("the openssl command line (Debian package openssl) is installed");
    assert!(output.status.success(), "openssl genpkey failed");
    serde_json::json!({
        "type": "service_account",
        "project_id": "my-project",
        "private_key_id": "k1",
        "private_key": String::from_utf8(output.stdout).expect("PEM"),
        "client_email": "keda@my-project.iam.gserviceaccount.com",
        "token_uri": "https://oauth2.googleapis.com/token",
    })
    .to_string()
}

/// A Cloud Monitoring `timeSeries.query` answer whose first value is `value`
/// (https://cloud.google.com/monitoring/api/ref_v3/rest/v3/projects.timeSeries/query).
fn gcp_query(value: u64) -> String {
    format!(
        r#"{{"timeSeriesDescriptor":{{}},"timeSeriesData":[{{"labelValues":[],"pointData":[{{"values":[{{"int64Value":"{value}"}}],"timeInterval":{{}}}}]}}]}}"#
    )
}

/// A Cloud Monitoring `timeSeries.list` answer whose first point is `value`
/// (https://cloud.google.com/monitoring/api/ref_v3/rest/v3/projects.timeSeries/list).
fn gcp_list(value: u64) -> String {
    format!(r#"{{"timeSeries":[{{"points":[{{"value":{{"int64Value":"{value}"}}}}]}}]}}"#)
}

#[tokio::test]
async fn gcp_triggers_scale_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    let google = Source::start().await;
    let fake = url::Url::parse(&google.url("")).expect("fake URL");
    let Some((_server, w)) = world("gcp triggers", gcp_registry(fake)).await else {
        return;
    };
    google.set_body(
        "token",
        r#"{"access_token":"ya29.t","expires_in":3599,"token_type":"Bearer"}"#,
    );
    let (query, list) = (
        "v3/projects/my-project/timeSeries:query",
        "v3/projects/my-project/timeSeries",
    );
    google.set_body(query, &gcp_query(0));
    google.set_body(list, &gcp_list(0));
    secret_auth(
        &w,
        "gcp",
        &[("GoogleApplicationCredentials", &gcp_key_json())],
    )
    .await;
    let auth = "\n      authenticationRef:\n        name: gcp";
    zero_to_one_resolving(
        &w,
        "pubsub",
        &format!("type: gcp-pubsub\n      metadata:\n        subscriptionName: orders\n        value: \"5\"{auth}"),
        async {
            google.set_body(query, &gcp_query(3));
        },
    )
    .await;
    assert!(google.requests(query) > 0 && google.requests("token") > 0);
    zero_to_one_resolving(
        &w,
        "cloudtasks",
        &format!("type: gcp-cloudtasks\n      metadata:\n        projectID: my-project\n        queueName: q\n        activationValue: \"4\"{auth}"),
        async {
            google.set_body(list, &gcp_list(5));
        },
    )
    .await;
    google.set_body(list, &gcp_list(0));
    zero_to_one_resolving(
        &w,
        "stackdriver",
        &format!("type: gcp-stackdriver\n      metadata:\n        projectId: my-project\n        filter: metric.type=\"x\"{auth}"),
        async {
            google.set_body(list, &gcp_list(2));
        },
    )
    .await;

    let objects = "storage/v1/b/my-bucket/o";
    google.set_body(objects, r#"{"kind":"storage#objects"}"#);
    zero_to_one_resolving(
        &w,
        "storage",
        &format!("type: gcp-storage\n      metadata:\n        bucketName: my-bucket{auth}"),
        async {
            google.set_body(
                objects,
                r#"{"kind":"storage#objects","items":[{"name":"a","size":"12"}]}"#,
            );
        },
    )
    .await;
    assert!(google.requests(objects) > 0);

    let op = w.start_operator_resolving();
    w.deployment("bad", 0).await;
    refused(
        &w,
        "pubsub-name",
        &format!("type: gcp-pubsub\n      metadata:\n        value: \"5\"{auth}"),
        "ScaledObjectCheckFailed",
        &["(gcp-pubsub)", "exactly one of subscription or topic name"],
    )
    .await;
    refused(
        &w,
        "stackdriver-project",
        &format!("type: gcp-stackdriver\n      metadata:\n        filter: metric.type=\"x\"{auth}"),
        "ScaledObjectCheckFailed",
        &["(gcp-stackdriver)", "projectId"],
    )
    .await;
    secret_auth(
        &w,
        "gcp-bad",
        &[("GoogleApplicationCredentials", "{not json")],
    )
    .await;
    refused(
        &w,
        "cloudtasks-key",
        "type: gcp-cloudtasks\n      metadata:\n        projectID: my-project\n        queueName: q\n      authenticationRef:\n        name: gcp-bad",
        "ScaledObjectCheckFailed",
        &["(gcp-cloudtasks)", "GoogleApplicationCredentials", "not JSON"],
    )
    .await;
    op.stop().await;
}

/// The built-in registry with the `azure-*` REST API types reaching Microsoft Entra ID's token
/// endpoint, Azure Resource Manager, Log Analytics, Application Insights and the Data Explorer
/// cluster `keda.westeurope.kusto.windows.net` at `fake`.
fn azure_registry(fake: url::Url) -> keda_scalers::Registry {
    use keda_scalers::scalers::{
        azure_app_insights, azure_data_explorer, azure_log_analytics, azure_monitor,
    };
    let endpoints = [
        "login.microsoftonline.com",
        "management.azure.com",
        "api.loganalytics.io",
        "api.applicationinsights.io",
        "keda.westeurope.kusto.windows.net",
    ]
    .into_iter()
    .fold(
        keda_scalers::http_client::VendorEndpoints::default(),
        |e, host| e.with(host, fake.clone()),
    );
    let mut registry = keda_scalers::Registry::builtin();
    registry.register(
        "azure-app-insights",
        redirected::<keda_scalers::pooled::Keyed<azure_app_insights::AppInsightsConfig>>(
            endpoints.clone(),
            azure_app_insights::PARAMS,
        ),
    );
    registry.register(
        "azure-data-explorer",
        redirected::<keda_scalers::pooled::Keyed<azure_data_explorer::DataExplorerConfig>>(
            endpoints.clone(),
            azure_data_explorer::PARAMS,
        ),
    );
    registry.register(
        "azure-log-analytics",
        redirected::<keda_scalers::pooled::Keyed<azure_log_analytics::LogAnalyticsConfig>>(
            endpoints.clone(),
            azure_log_analytics::PARAMS,
        ),
    );
    registry.register(
        "azure-monitor",
        redirected::<keda_scalers::pooled::Keyed<azure_monitor::AzureMonitorConfig>>(
            endpoints,
            azure_monitor::PARAMS,
        ),
    );
    registry
}

/// An Azure Monitor Metrics - List answer whose last point averages `value`
/// (https://learn.microsoft.com/en-us/rest/api/monitor/metrics/list).
fn azure_metrics(value: f64) -> String {
    format!(
        r#"{{"value":[{{"name":{{"value":"Http5xx"}},"timeseries":[{{"data":[{{"timeStamp":"2023-11-14T22:13:00Z","average":{value}}}]}}],"errorCode":"Success"}}]}}"#
    )
}

/// A Log Analytics Query - Execute answer of one `long` cell
/// (https://learn.microsoft.com/en-us/rest/api/loganalytics/dataaccess/query/execute).
fn azure_table(value: u64) -> String {
    format!(
        r#"{{"tables":[{{"name":"PrimaryResult","columns":[{{"name":"count_","type":"long"}}],"rows":[[{value}]]}}]}}"#
    )
}

/// A Kusto v2 answer whose primary result is one `long` cell
/// (https://learn.microsoft.com/en-us/kusto/api/rest/response-v2).
fn kusto_result(value: u64) -> String {
    format!(
        r#"[{{"FrameType":"DataSetHeader","Version":"v2.0"}},{{"FrameType":"DataTable","TableId":1,"TableKind":"PrimaryResult","TableName":"PrimaryResult","Columns":[{{"ColumnName":"Count","ColumnType":"long"}}],"Rows":[[{value}]]}},{{"FrameType":"DataSetCompletion","HasErrors":false,"Cancelled":false}}]"#
    )
}

#[tokio::test]
async fn azure_rest_triggers_scale_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    let azure = Source::start().await;
    let fake = url::Url::parse(&azure.url("")).expect("fake URL");
    let Some((_server, w)) = world("azure triggers", azure_registry(fake)).await else {
        return;
    };
    let tenant = "72f988bf-86f1-41af-91ab-2d7cd011db47";
    let token = format!("{tenant}/oauth2/v2.0/token");
    azure.set_body(
        &token,
        r#"{"token_type":"Bearer","expires_in":3599,"ext_expires_in":3599,"access_token":"eyJ0.t"}"#,
    );
    secret_auth(
        &w,
        "azure-sp",
        &[
            ("activeDirectoryClientId", "app"),
            ("activeDirectoryClientPassword", "s3cret"),
            ("tenantId", tenant),
            ("clientId", "app"),
            ("clientSecret", "s3cret"),
        ],
    )
    .await;
    let auth = "\n      authenticationRef:\n        name: azure-sp";

    let metrics = "subscriptions/sub-1/resourceGroups/rg/providers/Microsoft.Web/sites/shop/providers/Microsoft.Insights/metrics";
    azure.set_body(metrics, &azure_metrics(0.0));
    zero_to_one_resolving(
        &w,
        "monitor",
        &format!("type: azure-monitor\n      metadata:\n        resourceURI: Microsoft.Web/sites/shop\n        tenantId: {tenant}\n        subscriptionId: sub-1\n        resourceGroupName: rg\n        metricName: Http5xx\n        metricAggregationType: Average\n        targetValue: \"5\"{auth}"),
        async {
            azure.set_body(metrics, &azure_metrics(2.5));
        },
    )
    .await;
    assert!(azure.requests(metrics) > 0 && azure.requests(&token) > 0);

    let logs = "v1/workspaces/ws-1/query";
    azure.set_body(logs, &azure_table(0));
    zero_to_one_resolving(
        &w,
        "logs",
        &format!("type: azure-log-analytics\n      metadata:\n        workspaceId: ws-1\n        query: Heartbeat | count\n        threshold: \"10\"{auth}"),
        async {
            azure.set_body(logs, &azure_table(3));
        },
    )
    .await;
    assert!(azure.requests(logs) > 0);

    let insights = "v1/apps/app-1/metrics/requests/count";
    azure.set_body(insights, r#"{"value":{"requests/count":{"sum":0}}}"#);
    zero_to_one_resolving(
        &w,
        "insights",
        &format!("type: azure-app-insights\n      metadata:\n        applicationInsightsId: app-1\n        tenantId: {tenant}\n        metricId: requests/count\n        metricAggregationTimespan: \"0:5\"\n        metricAggregationType: sum\n        targetValue: \"10\"{auth}"),
        async {
            azure.set_body(insights, r#"{"value":{"requests/count":{"sum":4}}}"#);
        },
    )
    .await;
    assert!(azure.requests(insights) > 0);

    let kusto = "v2/rest/query";
    azure.set_body(kusto, &kusto_result(0));
    zero_to_one_resolving(
        &w,
        "kusto",
        &format!("type: azure-data-explorer\n      metadata:\n        databaseName: jobs\n        endpoint: https://keda.westeurope.kusto.windows.net\n        query: Jobs | count\n        threshold: \"10\"{auth}"),
        async {
            azure.set_body(kusto, &kusto_result(7));
        },
    )
    .await;
    assert!(azure.requests(kusto) > 0);

    let op = w.start_operator_resolving();
    w.deployment("bad", 0).await;
    refused(
        &w,
        "monitor-aggregation",
        &format!("type: azure-monitor\n      metadata:\n        resourceURI: Microsoft.Web/sites/shop\n        tenantId: {tenant}\n        subscriptionId: sub-1\n        resourceGroupName: rg\n        metricName: Http5xx\n        targetValue: \"5\"{auth}"),
        "ScaledObjectCheckFailed",
        &["(azure-monitor)", "metricAggregationType"],
    )
    .await;
    refused(
        &w,
        "logs-workspace",
        &format!("type: azure-log-analytics\n      metadata:\n        query: Heartbeat | count\n        threshold: \"10\"{auth}"),
        "ScaledObjectCheckFailed",
        &["(azure-log-analytics)", "workspaceId"],
    )
    .await;
    refused(
        &w,
        "insights-timespan",
        &format!("type: azure-app-insights\n      metadata:\n        applicationInsightsId: app-1\n        tenantId: {tenant}\n        metricId: requests/count\n        metricAggregationTimespan: \"00:05:00\"\n        metricAggregationType: sum\n        targetValue: \"10\"{auth}"),
        "ScaledObjectCheckFailed",
        &["(azure-app-insights)", "metricAggregationTimespan"],
    )
    .await;
    refused(
        &w,
        "kusto-endpoint",
        &format!("type: azure-data-explorer\n      metadata:\n        databaseName: jobs\n        endpoint: http://169.254.169.254\n        query: Jobs | count\n        threshold: \"10\"{auth}"),
        "ScaledObjectCheckFailed",
        &["(azure-data-explorer)", "endpoint", "https://"],
    )
    .await;
    op.stop().await;
}
/// A Service Bus Get Queue answer (an ATOM entry whose `QueueDescription` counts `active`
/// active messages; https://learn.microsoft.com/rest/api/servicebus/get-entity).
fn service_bus_queue(active: u32) -> String {
    format!(
        r#"<entry xmlns="http://www.w3.org/2005/Atom"><title type="text">orders</title><content type="application/xml"><QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><CountDetails xmlns:d2p1="http://schemas.microsoft.com/netservices/2011/06/servicebus"><d2p1:ActiveMessageCount>{active}</d2p1:ActiveMessageCount><d2p1:DeadLetterMessageCount>9</d2p1:DeadLetterMessageCount></CountDetails></QueueDescription></content></entry>"#
    )
}

#[tokio::test]
async fn azure_servicebus_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    use keda_scalers::scalers::azure_servicebus;
    let service_bus = Source::start().await;
    let fake = url::Url::parse(&service_bus.url("")).expect("fake URL");
    let host = "keda-test.servicebus.windows.net";
    let mut registry = keda_scalers::Registry::builtin();
    registry.register(
        "azure-servicebus",
        redirected::<azure_servicebus::ServiceBusConfig>(
            keda_scalers::http_client::VendorEndpoints::default().with(host, fake),
            azure_servicebus::PARAMS,
        ),
    );
    let Some((_server, w)) = world("azure-servicebus triggers", registry).await else {
        return;
    };
    let path = "orders";
    service_bus.set_body(path, &service_bus_queue(0));
    secret_auth(
        &w,
        "service-bus",
        &[(
            "connection",
            &format!("Endpoint=sb://{host}/;SharedAccessKeyName=Root;SharedAccessKey=c2VjcmV0"),
        )],
    )
    .await;
    let trigger = "type: azure-servicebus\n      metadata:\n        queueName: orders\n        activationMessageCount: \"1\"\n      authenticationRef:\n        name: service-bus";
    zero_to_one_resolving(&w, "azure-servicebus", trigger, async {
        service_bus.set_body(path, &service_bus_queue(4));
    })
    .await;
    assert!(service_bus.requests(path) > 0);

    let op = w.start_operator_resolving();
    w.deployment("bad", 0).await;
    refused(
        &w,
        "azure-servicebus-count",
        "type: azure-servicebus\n      metadata:\n        queueName: orders\n        messageCount: many\n      authenticationRef:\n        name: service-bus",
        "ScaledObjectCheckFailed",
        &["(azure-servicebus)", "messageCount"],
    )
    .await;
    refused(
        &w,
        "azure-servicebus-connection",
        "type: azure-servicebus\n      metadata:\n        queueName: orders",
        "ScaledObjectCheckFailed",
        &[
            "(azure-servicebus)",
            "connection",
            "not supported for azure-servicebus yet",
        ],
    )
    .await;
    op.stop().await;
}

/// An Event Hubs runtime description: the hub's one partition `0`, or that partition's
/// sequence numbers 0..=`end` (https://learn.microsoft.com/rest/api/eventhub/get-partition).
fn event_hub_entry(description: &str) -> String {
    format!(
        r#"<entry xmlns="http://www.w3.org/2005/Atom"><title type="text">x</title><content type="application/xml">{description}</content></entry>"#
    )
}

fn event_hub_partition(end: i64) -> String {
    event_hub_entry(&format!(
        r#"<PartitionDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><BeginSequenceNumber>0</BeginSequenceNumber><EndSequenceNumber>{end}</EndSequenceNumber><LastEnqueuedOffset>-1</LastEnqueuedOffset></PartitionDescription>"#
    ))
}

/// Checkpoints in Azurite (`scripts/services.sh`), in a container that does not exist: every
/// event of the partition counts, as in KEDA.
#[tokio::test]
async fn azure_eventhub_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    use keda_scalers::scalers::azure_eventhub;
    let event_hubs = Source::start().await;
    let fake = url::Url::parse(&event_hubs.url("")).expect("fake URL");
    let host = "keda-hub.servicebus.windows.net";
    let mut registry = keda_scalers::Registry::builtin();
    registry.register(
        "azure-eventhub",
        redirected::<azure_eventhub::EventHubConfig>(
            keda_scalers::http_client::VendorEndpoints::default().with(host, fake),
            azure_eventhub::PARAMS,
        ),
    );
    let Some((_server, w)) = world("azure-eventhub triggers", registry).await else {
        return;
    };
    let azurite = tokio::net::TcpStream::connect(("127.0.0.1", 10000));
    if redis_common::service_or_skip(
        "azure-eventhub triggers",
        "Azurite on 127.0.0.1:10000",
        azurite,
    )
    .await
    .is_none()
    {
        return;
    }
    event_hubs.set_body(
        "telemetry",
        &event_hub_entry(
            r#"<EventHubDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><PartitionCount>1</PartitionCount><PartitionIds xmlns:d2p1="http://schemas.microsoft.com/2003/10/Serialization/Arrays"><d2p1:string>0</d2p1:string></PartitionIds></EventHubDescription>"#,
        ),
    );
    let partition = "telemetry/consumergroups/$Default/partitions/0";
    event_hubs.set_body(partition, &event_hub_partition(-1));
    secret_auth(
        &w,
        "event-hub",
        &[
            (
                "connection",
                &format!(
                    "Endpoint=sb://{host}/;SharedAccessKeyName=Root;SharedAccessKey=c2VjcmV0;EntityPath=telemetry"
                ),
            ),
            ("storageConnection", "UseDevelopmentStorage=true"),
        ],
    )
    .await;
    let trigger = "type: azure-eventhub\n      metadata:\n        blobContainer: no-such-checkpoints\n        checkpointStrategy: goSdk\n        activationUnprocessedEventThreshold: \"2\"\n      authenticationRef:\n        name: event-hub";
    zero_to_one_resolving(&w, "azure-eventhub", trigger, async {
        // Events 0..=4, no checkpoint: 5 unprocessed.
        event_hubs.set_body(partition, &event_hub_partition(4));
    })
    .await;
    assert!(event_hubs.requests(partition) > 0);

    let op = w.start_operator_resolving();
    w.deployment("bad", 0).await;
    refused(
        &w,
        "azure-eventhub-threshold",
        "type: azure-eventhub\n      metadata:\n        unprocessedEventThreshold: \"0\"\n      authenticationRef:\n        name: event-hub",
        "ScaledObjectCheckFailed",
        &["(azure-eventhub)", "unprocessedEventThreshold"],
    )
    .await;
    refused(
        &w,
        "azure-eventhub-storage",
        "type: azure-eventhub\n      metadata:\n        eventHubName: telemetry",
        "ScaledObjectCheckFailed",
        &[
            "(azure-eventhub)",
            "storageConnection",
            "not supported for azure-eventhub yet",
        ],
    )
    .await;
    op.stop().await;
}

/// A pool's job requests answer with `waiting` jobs not yet received by an agent
/// (https://learn.microsoft.com/rest/api/azure/devops/distributedtask/).
fn pipelines_jobs(waiting: usize) -> String {
    let jobs: Vec<String> = (0..waiting)
        .map(|i| format!(r#"{{"requestId":{i},"demands":["maven"],"poolId":12}}"#))
        .chain(std::iter::once(
            r#"{"requestId":99,"demands":["maven"],"result":"succeeded","receiveTime":"2026-11-20T10:00:00Z"}"#.to_string(),
        ))
        .collect();
    format!(r#"{{"count":{},"value":[{}]}}"#, jobs.len(), jobs.join(","))
}

#[tokio::test]
async fn azure_pipelines_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    let Some((_server, w)) = obs_world("azure-pipelines triggers").await else {
        return;
    };
    let devops = Source::start().await;
    let path = "contoso/_apis/distributedtask/pools/12/jobrequests";
    devops.set_body(path, &pipelines_jobs(0));
    secret_auth(
        &w,
        "azure-pipelines",
        &[
            ("personalAccessToken", "azp-pat"),
            ("organizationURL", &devops.url("contoso")),
        ],
    )
    .await;
    let trigger = "type: azure-pipelines\n      metadata:\n        poolID: \"12\"\n        activationTargetPipelinesQueueLength: \"1\"\n      authenticationRef:\n        name: azure-pipelines";
    zero_to_one_resolving(&w, "azure-pipelines", trigger, async {
        devops.set_body(path, &pipelines_jobs(3));
    })
    .await;
    assert!(devops.requests(path) > 0);

    let op = w.start_operator_resolving();
    w.deployment("bad", 0).await;
    refused(
        &w,
        "azure-pipelines-top",
        "type: azure-pipelines\n      metadata:\n        poolID: \"12\"\n        jobsToFetch: \"10\"\n        parent: template\n      authenticationRef:\n        name: azure-pipelines",
        "ScaledObjectCheckFailed",
        &["(azure-pipelines)", "jobsToFetch", "parent"],
    )
    .await;
    refused(
        &w,
        "azure-pipelines-pat",
        "type: azure-pipelines\n      metadata:\n        poolID: \"12\"\n        organizationURL: https://dev.azure.com/contoso",
        "ScaledObjectCheckFailed",
        &["(azure-pipelines)", "personalAccessToken", "not supported for azure-pipelines yet"],
    )
    .await;
    op.stop().await;
}

/// Keystone, Swift and Gnocchi on one loopback port, answering the documented shapes with the
/// headers `Source` does not send: `POST /v3/auth/tokens` -> `201` with `X-Subject-Token`
/// (https://docs.openstack.org/api-ref/identity/v3/), `HEAD /v1/AUTH_p/<container>` -> `204`
/// with `X-Container-Object-Count` (https://docs.openstack.org/api-ref/object-store/),
/// `GET /v1/metric/<id>/measures` -> `[[timestamp, granularity, value]]`
/// (https://gnocchi.osci.io/rest.html). Requests without the token get `401`.
struct OpenStackFake {
    addr: std::net::SocketAddr,
    /// The container's object count and the metric's last value.
    value: std::sync::Arc<std::sync::atomic::AtomicI64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for OpenStackFake {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl OpenStackFake {
    async fn start() -> Self {
        use std::sync::atomic::Ordering;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let value = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(0));
        let shared = value.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let value = shared.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(
                        move |request: hyper::Request<hyper::body::Incoming>| {
                            let value = value.load(Ordering::SeqCst);
                            async move {
                                let path = request.uri().path().to_string();
                                let authorized = request
                                    .headers()
                                    .get("x-auth-token")
                                    .is_some_and(|t| t == "os-t0ken");
                                let builder = hyper::Response::builder();
                                let (builder, body) = match (request.method().as_str(), path.as_str()) {
                                    ("POST", "/v3/auth/tokens") => (
                                        builder.status(201).header("x-subject-token", "os-t0ken"),
                                        r#"{"token":{"expires_at":"2099-01-01T00:00:00.000000Z","catalog":[]}}"#.to_string(),
                                    ),
                                    _ if !authorized => (builder.status(401), String::new()),
                                    ("HEAD", "/v1/AUTH_p/uploads") => (
                                        builder
                                            .status(204)
                                            .header("x-container-object-count", value.to_string()),
                                        String::new(),
                                    ),
                                    ("GET", "/v1/metric/m-1/measures") => (
                                        builder.status(200),
                                        format!(r#"[["2026-01-01T12:00:00+00:00",300.0,{value}]]"#),
                                    ),
                                    _ => (builder.status(404), String::new()),
                                };
                                Ok::<_, std::convert::Infallible>(
                                    builder
                                        .header("content-type", "application/json")
                                        .body(http_body_util::Full::new(hyper::body::Bytes::from(
                                            body,
                                        )))
                                        .expect("a response"),
                                )
                            }
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self { addr, value, task }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

#[tokio::test]
async fn openstack_swift_and_metric_scale_from_zero_and_bad_input_is_not_ready_naming_the_parameter()
 {
    let Some((_server, w)) = obs_world("openstack triggers").await else {
        return;
    };
    let fake = OpenStackFake::start().await;
    let base = fake.url();
    secret_auth(
        &w,
        "openstack",
        &[
            ("authURL", &format!("{base}/v3")),
            ("userID", "u-1"),
            ("password", "pa55-w0rd"),
            ("projectID", "p"),
        ],
    )
    .await;
    let swift = format!(
        "type: openstack-swift\n      metadata:\n        swiftURL: {base}/v1/AUTH_p\n        containerName: uploads\n        objectCount: \"5\"\n      authenticationRef:\n        name: openstack"
    );
    zero_to_one_resolving(&w, "swift", &swift, async {
        fake.value.store(3, std::sync::atomic::Ordering::SeqCst);
    })
    .await;
    fake.value.store(0, std::sync::atomic::Ordering::SeqCst);
    let metric = format!(
        "type: openstack-metric\n      metadata:\n        metricsURL: {base}/v1/metric\n        metricID: m-1\n        aggregationMethod: mean\n        granularity: \"300\"\n        threshold: \"5\"\n      authenticationRef:\n        name: openstack"
    );
    zero_to_one_resolving(&w, "gnocchi", &metric, async {
        fake.value.store(2, std::sync::atomic::Ordering::SeqCst);
    })
    .await;

    let op = w.start_operator_resolving();
    w.deployment("bad", 0).await;
    secret_auth(
        &w,
        "openstack-half",
        &[("authURL", &format!("{base}/v3")), ("userID", "u-1")],
    )
    .await;
    refused(
        &w,
        "swift-password",
        "type: openstack-swift\n      metadata:\n        containerName: uploads\n      authenticationRef:\n        name: openstack-half",
        "ScaledObjectCheckFailed",
        &["(openstack-swift)", "password"],
    )
    .await;
    refused(
        &w,
        "gnocchi-granularity",
        &format!("type: openstack-metric\n      metadata:\n        metricsURL: {base}/v1/metric\n        metricID: m-1\n        aggregationMethod: mean\n        granularity: \"0\"\n        threshold: \"5\"\n      authenticationRef:\n        name: openstack"),
        "ScaledObjectCheckFailed",
        &["(openstack-metric)", "granularity"],
    )
    .await;
    op.stop().await;
}

/// An MQSC `runCommandJSON` answer of one queue at `depth`
/// (https://www.ibm.com/docs/en/ibm-mq/9.4?topic=adminactionqmgrqmgrnamemqsc-post-json-formatted-command).
fn mqsc_depth(depth: u32) -> String {
    format!(
        r#"{{"commandResponse":[{{"completionCode":0,"reasonCode":0,"parameters":{{"curdepth":{depth},"queue":"DEV.QUEUE.1"}}}}],"overallCompletionCode":0,"overallReasonCode":0}}"#
    )
}

#[tokio::test]
async fn ibmmq_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    let Some((_server, w)) = obs_world("ibmmq triggers").await else {
        return;
    };
    let mq = Source::start().await;
    let path = "ibmmq/rest/v2/admin/action/qmgr/QM1/mqsc";
    mq.set_body(path, &mqsc_depth(0));
    secret_auth(&w, "mq", &[("username", "admin"), ("password", "passw0rd")]).await;
    let host = mq.url(path);
    let trigger = format!(
        "type: ibmmq\n      metadata:\n        host: {host}\n        queueName: DEV.QUEUE.1\n        queueDepth: \"5\"\n      authenticationRef:\n        name: mq"
    );
    zero_to_one_resolving(&w, "ibmmq", &trigger, async {
        mq.set_body(path, &mqsc_depth(2));
    })
    .await;
    assert!(mq.requests(path) > 0);

    let op = w.start_operator_resolving();
    w.deployment("bad", 0).await;
    refused(
        &w,
        "ibmmq-operation",
        &format!("type: ibmmq\n      metadata:\n        host: {host}\n        queueName: DEV.QUEUE.1\n        operation: median\n      authenticationRef:\n        name: mq"),
        "ScaledObjectCheckFailed",
        &["(ibmmq)", "operation"],
    )
    .await;
    refused(
        &w,
        "ibmmq-password",
        &format!("type: ibmmq\n      metadata:\n        host: {host}\n        queueName: DEV.QUEUE.1\n        username: admin"),
        "ScaledObjectCheckFailed",
        &["(ibmmq)", "password"],
    )
    .await;
    op.stop().await;
}

/// A SEMP v1 `show client` reply with one client of VPN `default` sending `rate` messages a
/// second and one message queued in its `D-1` queue
/// (https://docs.solace.com/Admin/SEMP/Using-Legacy-SEMP.htm).
fn semp_clients(rate: u32) -> String {
    format!(
        r#"<rpc-reply semp-version="soltr/10_4"><rpc><show><client><primary-virtual-router><client><name>direct-consumer-1</name><message-vpn>default</message-vpn><stats><current-egress-rate-per-second>{rate}</current-egress-rate-per-second><average-egress-rate-per-minute>{rate}</average-egress-rate-per-minute><current-egress-byte-rate-per-second>0</current-egress-byte-rate-per-second><average-egress-byte-rate-per-minute>0</average-egress-byte-rate-per-minute></stats><client-queue><queue-priority>D-1</queue-priority><length-msgs>1</length-msgs><length-work>1</length-work></client-queue></client></primary-virtual-router></client></show></rpc><execute-result code="ok"/></rpc-reply>"#
    )
}

/// `solace-direct-messaging` is always active (as in KEDA): 0 -> 1 at the first poll, the SEMP
/// stats read; bad input is `Ready=False` naming the parameter.
#[tokio::test]
async fn solace_direct_messaging_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter()
{
    let Some((_server, w)) = obs_world("solace-direct-messaging triggers").await else {
        return;
    };
    let broker = Source::start().await;
    broker.set_body("SEMP", &semp_clients(0));
    secret_auth(
        &w,
        "semp",
        &[("username", "admin"), ("password", "s3mp-pw")],
    )
    .await;
    let base = broker.url("");
    let base = base.trim_end_matches('/');
    let trigger = format!(
        "type: solace-direct-messaging\n      metadata:\n        solaceSempBaseURL: {base}\n        messageVpn: default\n        clientNamePattern: direct-consumer\n        aggregatedClientTxMsgRateTarget: \"10\"\n      authenticationRef:\n        name: semp"
    );
    w.deployment("solace-dm", 0).await;
    let op = w.start_operator_resolving();
    let so = w.create(&object("solace-dm", "solace-dm", &trigger)).await;
    eventually("solace-dm at 1 replica", || async {
        w.poll_after(&op, &so, 10).await;
        (w.replicas("solace-dm").await == 1).then_some(())
    })
    .await;
    assert!(broker.requests("SEMP") >= 2);
    op.stop().await;

    let op = w.start_operator_resolving();
    w.deployment("bad", 0).await;
    refused(
        &w,
        "solace-dm-pattern",
        &format!("type: solace-direct-messaging\n      metadata:\n        solaceSempBaseURL: {base}\n        messageVpn: default\n        clientNamePattern: direct*\n        aggregatedClientTxMsgRateTarget: \"10\"\n      authenticationRef:\n        name: semp"),
        "ScaledObjectCheckFailed",
        &["(solace-direct-messaging)", "clientNamePattern"],
    )
    .await;
    refused(
        &w,
        "solace-dm-target",
        &format!("type: solace-direct-messaging\n      metadata:\n        solaceSempBaseURL: {base}\n        messageVpn: default\n        clientNamePattern: direct-consumer\n      authenticationRef:\n        name: semp"),
        "ScaledObjectCheckFailed",
        &["(solace-direct-messaging)", "aggregatedClientTxMsgRateTarget"],
    )
    .await;
    op.stop().await;
}

/// A graphite-web render answer (https://graphite.readthedocs.io/en/latest/render_api.html#json)
/// of one series whose most recent non-null datapoint is `value`.
fn graphite_render(value: f64) -> String {
    format!(
        r#"[{{"target":"stats.jobs","tags":{{"name":"stats.jobs"}},"datapoints":[[1,1700000000],[{value},1700000010],[null,1700000020]]}}]"#
    )
}

#[tokio::test]
async fn graphite_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    let Some((_server, w)) = obs_world("graphite triggers").await else {
        return;
    };
    let graphite = Source::start().await;
    let path = "render";
    graphite.set_body(path, &graphite_render(0.0));
    let server = graphite.url("");
    let server = server.trim_end_matches('/');
    let trigger = format!(
        "type: graphite\n      metadata:\n        serverAddress: {server}\n        query: stats.jobs\n        queryTime: -10Minutes\n        threshold: \"2\"\n        activationThreshold: \"0.5\""
    );
    zero_to_one(&w, "graphite", &trigger, || {
        graphite.set_body(path, &graphite_render(3.0));
    })
    .await;
    assert!(graphite.requests(path) > 0);

    let op = w.start_operator();
    w.deployment("bad", 0).await;
    refused(
        &w,
        "graphite-query-time",
        &format!("type: graphite\n      metadata:\n        serverAddress: {server}\n        query: stats.jobs"),
        "ScaledObjectCheckFailed",
        &["(graphite)", "queryTime"],
    )
    .await;
    refused(
        &w,
        "graphite-auth-mode",
        &format!("type: graphite\n      metadata:\n        serverAddress: {server}\n        query: stats.jobs\n        queryTime: -1h\n        authMode: bearer"),
        "ScaledObjectCheckFailed",
        &["(graphite)", "authMode"],
    )
    .await;
    op.stop().await;
}

/// A ClickHouse HTTP interface answer in the `JSONCompact` format
/// (https://clickhouse.com/docs/interfaces/formats/JSONCompact) of one row whose first column
/// is `value` (a `UInt64`, which ClickHouse quotes).
fn clickhouse_compact(value: u64) -> String {
    format!(
        r#"{{"meta":[{{"name":"count()","type":"UInt64"}}],"data":[["{value}"]],"rows":1,"statistics":{{"elapsed":0.0001,"rows_read":1,"bytes_read":1}}}}"#
    )
}

#[tokio::test]
async fn clickhouse_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    let Some((_server, w)) = obs_world("clickhouse triggers").await else {
        return;
    };
    let clickhouse = Source::start().await;
    // The HTTP interface answers at its root (the query is the POST body).
    clickhouse.set_body("", &clickhouse_compact(0));
    let port = clickhouse
        .url("")
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .expect("a port")
        .to_string();
    let trigger = format!(
        "type: clickhouse\n      metadata:\n        host: 127.0.0.1\n        httpPort: \"{port}\"\n        query: SELECT count() FROM jobs\n        targetQueryValue: \"5\"\n        activationTargetQueryValue: \"1\""
    );
    zero_to_one(&w, "clickhouse", &trigger, || {
        clickhouse.set_body("", &clickhouse_compact(3));
    })
    .await;
    assert!(clickhouse.requests("") > 0);

    let op = w.start_operator();
    w.deployment("bad", 0).await;
    // A native port with no known HTTP counterpart: built, as in KEDA (which fails when it
    // connects), and every poll fails naming port and httpPort.
    refused(
        &w,
        "clickhouse-port",
        "type: clickhouse\n      metadata:\n        host: 127.0.0.1\n        port: \"19000\"\n        query: SELECT 1\n        targetQueryValue: \"5\"",
        "TriggerError",
        &["(clickhouse)", "port", "httpPort"],
    )
    .await;
    refused(
        &w,
        "clickhouse-query",
        "type: clickhouse\n      metadata:\n        host: 127.0.0.1\n        targetQueryValue: \"5\"",
        "ScaledObjectCheckFailed",
        &["(clickhouse)", "query"],
    )
    .await;
    op.stop().await;
}

/// A search answer over an ML job's results whose newest `model_forecast` bucket predicts
/// `value` (https://www.elastic.co/docs/api/doc/elasticsearch/operation/operation-search).
fn forecast_hit(value: f64) -> String {
    format!(
        r#"{{"took":1,"timed_out":false,"hits":{{"total":{{"value":1,"relation":"eq"}},"max_score":null,"hits":[{{"_index":".ml-anomalies-shared","_id":"cpu-job_model_forecast_f1","_score":null,"_source":{{"forecast_prediction":{value},"timestamp":1700000000000}},"sort":[1700000000000]}}]}}}}"#
    )
}

#[tokio::test]
async fn elastic_forecast_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    let Some((_server, w)) = obs_world("elastic-forecast triggers").await else {
        return;
    };
    let es = Source::start().await;
    // The forecast API (https://www.elastic.co/docs/api/doc/elasticsearch/operation/operation-ml-forecast).
    let forecast = "_ml/anomaly_detectors/cpu-job/_forecast";
    es.set_body(forecast, r#"{"acknowledged":true,"forecast_id":"f1"}"#);
    let search = ".ml-anomalies-*/_search";
    es.set_body(search, &forecast_hit(0.0));
    let address = es.url("");
    let address = address.trim_end_matches('/');
    secret_auth(
        &w,
        "elastic",
        &[("username", "elastic"), ("password", "changeme")],
    )
    .await;
    let trigger = format!(
        "type: elastic-forecast\n      metadata:\n        addresses: {address}\n        jobID: cpu-job\n        targetValue: \"50\"\n        activationTargetValue: \"5\"\n      authenticationRef:\n        name: elastic"
    );
    w.deployment("elastic-forecast", 0).await;
    let op = w.start_operator_resolving();
    let so = w
        .create(&object("elastic-forecast", "elastic-forecast", &trigger))
        .await;
    w.polls_reach(&op, &so, 1).await;
    assert_eq!(w.replicas("elastic-forecast").await, 0, "inactive at first");
    es.set_body(search, &forecast_hit(80.0));
    eventually("elastic-forecast at 1 replica", || async {
        w.poll_after(&op, &so, 10).await;
        (w.replicas("elastic-forecast").await == 1).then_some(())
    })
    .await;
    // One forecast, created in the first poll and not due again within lookAhead.
    assert_eq!(es.requests(forecast), 1);
    assert!(es.requests(search) >= 2);
    op.stop().await;

    let op = w.start_operator_resolving();
    w.deployment("bad", 0).await;
    refused(
        &w,
        "elastic-forecast-look-ahead",
        &format!("type: elastic-forecast\n      metadata:\n        addresses: {address}\n        jobID: cpu-job\n        targetValue: \"50\"\n        lookAhead: soon\n      authenticationRef:\n        name: elastic"),
        "ScaledObjectCheckFailed",
        &["(elastic-forecast)", "lookAhead"],
    )
    .await;
    refused(
        &w,
        "elastic-forecast-job",
        &format!("type: elastic-forecast\n      metadata:\n        addresses: {address}\n        targetValue: \"50\"\n      authenticationRef:\n        name: elastic"),
        "ScaledObjectCheckFailed",
        &["(elastic-forecast)", "jobID"],
    )
    .await;
    op.stop().await;
}

/// Cloud Eye's batch query answer (Huawei Cloud Eye API, "Querying Monitoring Data of
/// Multiple Metrics") of one metric whose first datapoint averages `value`.
fn cloudeye_datapoint(value: f64) -> String {
    format!(
        r#"{{"metrics":[{{"unit":"Count/s","datapoints":[{{"average":{value},"timestamp":1767268500000}}],"namespace":"SYS.ELB","dimensions":[{{"name":"lbaas_instance_id","value":"lb-1"}}],"metric_name":"mb_l7_qps"}}]}}"#
    )
}

#[tokio::test]
async fn huawei_cloudeye_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    let Some((_server, w)) = obs_world("huawei-cloudeye triggers").await else {
        return;
    };
    let huawei = Source::start().await;
    // IAM's service and endpoint lists (Huawei IAM API, "Querying Services" and "Querying
    // Endpoints"); the one public cesv1 endpoint is this source.
    huawei.set_body(
        "v3/services",
        r#"{"services":[{"id":"svc-ces","type":"cesv1","name":"ces","enabled":true}],"links":{"next":null}}"#,
    );
    let ces = huawei.url("V1.0/$(tenant_id)s");
    huawei.set_body(
        "v3/endpoints",
        &format!(
            r#"{{"endpoints":[{{"id":"e-1","interface":"public","region":"cn-north-4","service_id":"svc-ces","url":"{ces}"}}],"links":{{"next":null}}}}"#
        ),
    );
    let query = "V1.0/p-1/batch-query-metric-data";
    huawei.set_body(query, &cloudeye_datapoint(0.0));
    let identity = huawei.url("v3");
    secret_auth(
        &w,
        "huawei",
        &[
            ("IdentityEndpoint", &identity),
            ("ProjectID", "p-1"),
            ("DomainID", "d-1"),
            ("Region", "cn-north-4"),
            ("Domain", "myhuaweicloud.com"),
            ("AccessKey", "HPUAEXAMPLE"),
            ("SecretKey", "sk-EXAMPLE-s3cret"),
        ],
    )
    .await;
    let trigger = "type: huawei-cloudeye\n      metadata:\n        namespace: SYS.ELB\n        metricName: mb_l7_qps\n        dimensionName: lbaas_instance_id\n        dimensionValue: lb-1\n        targetMetricValue: \"5.5\"\n        activationTargetMetricValue: \"1.5\"\n      authenticationRef:\n        name: huawei";
    zero_to_one_resolving(&w, "cloudeye", trigger, async {
        huawei.set_body(query, &cloudeye_datapoint(3.25));
    })
    .await;
    assert!(huawei.requests(query) >= 2);
    assert!(huawei.requests("v3/endpoints") >= 1);

    let op = w.start_operator_resolving();
    w.deployment("bad", 0).await;
    refused(
        &w,
        "cloudeye-min",
        "type: huawei-cloudeye\n      metadata:\n        namespace: SYS.ELB\n        metricName: mb_l7_qps\n        dimensionName: lbaas_instance_id\n        dimensionValue: lb-1\n        targetMetricValue: \"5.5\"\n        minMetricValue: \"1\"\n      authenticationRef:\n        name: huawei",
        "ScaledObjectCheckFailed",
        &["(huawei-cloudeye)", "minMetricValue", "activationTargetMetricValue"],
    )
    .await;
    refused(
        &w,
        "cloudeye-target",
        "type: huawei-cloudeye\n      metadata:\n        namespace: SYS.ELB\n        metricName: mb_l7_qps\n        dimensionName: lbaas_instance_id\n        dimensionValue: lb-1\n      authenticationRef:\n        name: huawei",
        "ScaledObjectCheckFailed",
        &["(huawei-cloudeye)", "targetMetricValue"],
    )
    .await;
    op.stop().await;
}

/// A Prometheus range answer (`/api/v1/query_range`) of one series whose last sample is
/// `last` (https://prometheus.io/docs/prometheus/latest/querying/api/#range-queries).
fn prometheus_matrix(last: f64) -> String {
    format!(
        r#"{{"status":"success","data":{{"resultType":"matrix","result":[{{"metric":{{}},"values":[[1700000000,"0"],[1700000060,"{last}"]]}}]}}}}"#
    )
}

#[tokio::test]
async fn predictkube_scales_from_zero_and_bad_input_is_not_ready_naming_the_parameter() {
    use keda_scalers::scalers::predictkube;
    use predictkube_engine::{FakeEngine, GOOD_KEY};
    // The engine's fixed host reaches the fake (the operator binary never moves it).
    let engine = FakeEngine::start(1000).await;
    let mut registry = keda_scalers::Registry::builtin();
    registry.register(
        "predictkube",
        redirected::<predictkube::PredictKubeConfig>(engine.endpoints(), predictkube::PARAMS),
    );
    let Some((_server, w)) = world("predictkube triggers", registry).await else {
        return;
    };
    let prometheus = Source::start().await;
    let path = "api/v1/query_range";
    prometheus.set_body(path, &prometheus_matrix(0.0));
    let address = prometheus.url("");
    let address = address.trim_end_matches('/');
    secret_auth(&w, "predictkube", &[("apiKey", GOOD_KEY)]).await;
    engine.set_forecast(0);
    let trigger = format!(
        "type: predictkube\n      metadata:\n        predictHorizon: \"2h\"\n        historyTimeWindow: \"7d\"\n        prometheusAddress: {address}\n        query: sum(rate(http_requests_total[2m]))\n        queryStep: \"2m\"\n        threshold: \"10\"\n        activationThreshold: \"1\"\n      authenticationRef:\n        name: predictkube"
    );
    zero_to_one_resolving(&w, "predictkube", &trigger, async {
        // Active on the last sample (5 > 1); the forecast is the value the HPA gets.
        engine.set_forecast(30);
        prometheus.set_body(path, &prometheus_matrix(5.0));
    })
    .await;
    assert!(prometheus.requests(path) > 0);
    let requests = engine.requests();
    assert!(!requests.is_empty());
    assert!(
        requests.iter().all(|(key, r)| key == GOOD_KEY
            && r.forecast_horizon == 60
            && r.observations.len() == 2)
    );

    let op = w.start_operator_resolving();
    w.deployment("bad", 0).await;
    secret_auth(&w, "predictkube-not-jwt", &[("apiKey", "not-a-key")]).await;
    refused(
        &w,
        "predictkube-key",
        &format!("type: predictkube\n      metadata:\n        predictHorizon: \"2h\"\n        historyTimeWindow: \"7d\"\n        prometheusAddress: {address}\n        query: up\n        queryStep: \"2m\"\n        threshold: \"10\"\n      authenticationRef:\n        name: predictkube-not-jwt"),
        "ScaledObjectCheckFailed",
        &["(predictkube)", "apiKey"],
    )
    .await;
    refused(
        &w,
        "predictkube-step",
        &format!("type: predictkube\n      metadata:\n        predictHorizon: \"2h\"\n        historyTimeWindow: \"7d\"\n        prometheusAddress: {address}\n        query: up\n        threshold: \"10\"\n      authenticationRef:\n        name: predictkube"),
        "ScaledObjectCheckFailed",
        &["(predictkube)", "queryStep"],
    )
    .await;
    op.stop().await;
}
