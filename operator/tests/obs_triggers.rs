//! The monitoring-API triggers of issue 24 (`loki`, `influxdb`, ...) through the operator on
//! memkube: each scales its target 0 -> 1 when its source's value rises above the activation
//! threshold, and bad input is `Ready=False` with a message naming the trigger and the
//! parameter. The sources are the tests' loopback server (`common/source.rs`) answering each
//! API's documented shape at the API's path; the scalers' own tests check the requests.

mod common;
mod scenarios;

#[allow(dead_code)]
#[path = "../../scalers/tests/common/mod.rs"]
mod redis_common;

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
