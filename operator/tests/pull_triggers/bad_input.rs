//! Bad pull triggers: Ready=False naming the parameter, never a secret, and recovery once fixed.

use super::*;

/// `metrics-api`: a malformed JSON path, a path that does not resolve and an unreachable API
/// fail the polls (naming the trigger, `valueLocation` and the url; a malformed path is not
/// refused at build, as KEDA reads it only when it fetches: issue 29, row 3); fixed, the
/// object becomes Ready.
#[tokio::test]
async fn bad_metrics_api_triggers_are_not_ready_naming_the_parameter_and_recover() {
    let Some((_server, w)) = world("metrics-api bad input").await else {
        return;
    };
    let api = MetricsApi::start(1.0).await;
    w.deployment("bad", 0).await;
    let op = w.start_operator();
    let trigger = |location: &str, url: &str| {
        format!(
            "type: metrics-api\n      metadata:\n        url: {url}\n        valueLocation: \"{location}\"\n        targetValue: \"5\""
        )
    };

    refused(
        &w,
        "malformed",
        &trigger("queue..depth", &api.url()),
        "TriggerError",
        &["(metrics-api)", "valueLocation", "queue..depth"],
    )
    .await;

    refused(
        &w,
        "missing",
        &trigger("queue.length", &api.url()),
        "TriggerError",
        &["metrics-api", "valueLocation \"queue.length\""],
    )
    .await;

    let down = format!("http://127.0.0.1:{}/stats", closed_port());
    refused(
        &w,
        "unreachable",
        &trigger("queue.depth", &down),
        "TriggerError",
        &["metrics-api", "url http://127.0.0.1:"],
    )
    .await;

    // Fixed, each becomes Ready, and its loop keeps polling.
    set_metadata(&w, "malformed", "valueLocation", "queue.depth").await;
    set_metadata(&w, "missing", "valueLocation", "queue.depth").await;
    set_metadata(&w, "unreachable", "url", &api.url()).await;
    for name in ["malformed", "missing", "unreachable"] {
        becomes_ready(&w, name).await;
        let so = w.get(name).await;
        let before = w.polls(&op, &so);
        w.poll_after(&op, &so, 10).await;
        assert!(w.polls(&op, &so) > before);
    }
    op.stop().await;
}

/// `prometheus`: an unreachable server and a query that returns nothing (with
/// `ignoreNullValues: "false"`) fail the polls, naming the trigger, the server or the query;
/// pointed at the real server with a query that answers, the object becomes Ready.
#[tokio::test]
async fn bad_prometheus_triggers_are_not_ready_naming_the_query_or_server_and_recover() {
    let Some((_server, w)) = world("prometheus bad input").await else {
        return;
    };
    let attempt = async { tokio::net::TcpStream::connect("127.0.0.1:9090").await };
    if redis_common::service_or_skip(
        "prometheus bad input",
        "Prometheus at 127.0.0.1:9090",
        attempt,
    )
    .await
    .is_none()
    {
        return;
    }
    w.deployment("bad", 0).await;
    let op = w.start_operator();
    let trigger = |server: &str, query: &str| {
        format!(
            "type: prometheus\n      metadata:\n        serverAddress: {server}\n        query: '{query}'\n        threshold: \"5\"\n        ignoreNullValues: \"false\""
        )
    };
    let down = format!("http://127.0.0.1:{}", closed_port());
    refused(
        &w,
        "unreachable",
        &trigger(&down, "vector(1)"),
        "TriggerError",
        &["prometheus", "serverAddress http://127.0.0.1:", "vector(1)"],
    )
    .await;

    let query = "sum(no_such_series_keda_rs_test)";
    refused(
        &w,
        "empty",
        &trigger("http://127.0.0.1:9090", query),
        "TriggerError",
        &["prometheus", query, "the result is empty"],
    )
    .await;

    fixed(
        &w,
        &[
            ("unreachable", "serverAddress", "http://127.0.0.1:9090"),
            ("empty", "query", "vector(3)"),
        ],
    )
    .await;
    op.stop().await;
}

/// `postgresql` (from separate parameters): an unreachable server is refused when the object
/// is built, naming the connection parameters; a query that returns no row fails the polls
/// naming `query`; fixed, both become Ready.
#[tokio::test]
async fn bad_postgresql_triggers_are_not_ready_naming_the_parameter_and_recover() {
    let test = "postgresql bad input";
    let Some((_server, w)) = world(test).await else {
        return;
    };
    if reachable_or_skip(test, "PostgreSQL", "127.0.0.1:5432")
        .await
        .is_none()
    {
        return;
    }
    w.deployment("bad", 0).await;
    let op = w.start_operator();
    let trigger = |port: u16, query: &str| {
        format!(
            "type: postgresql\n      metadata:\n        host: 127.0.0.1\n        port: \"{port}\"\n        userName: postgres\n        dbName: test\n        sslmode: disable\n        query: \"{query}\"\n        targetQueryValue: \"5\""
        )
    };
    refused(
        &w,
        "unreachable",
        &trigger(closed_port(), "SELECT 1"),
        "ScaledObjectCheckFailed",
        &[
            "(postgresql)",
            "connecting to PostgreSQL at 127.0.0.1:",
            "\"host\", \"port\"",
        ],
    )
    .await;

    refused(
        &w,
        "no-row",
        &trigger(5432, "SELECT 1 WHERE false"),
        "TriggerError",
        &[
            "(postgresql)",
            "the query (parameter \"query\") returned no row",
        ],
    )
    .await;

    fixed(
        &w,
        &[
            ("unreachable", "port", "5432"),
            ("no-row", "query", "SELECT 2"),
        ],
    )
    .await;
    op.stop().await;
}

/// `mysql` with its password from a TriggerAuthentication: a wrong password is refused when
/// the object is built, naming the trigger and the connection parameters but never the
/// password; once the Secret holds the right (here: empty) password, the object becomes Ready.
#[tokio::test]
async fn a_wrong_mysql_password_is_not_ready_naming_the_parameters_and_recovers() {
    let test = "mysql wrong password";
    let Some((_server, w)) = world(test).await else {
        return;
    };
    if reachable_or_skip(test, "MariaDB", "127.0.0.1:3306")
        .await
        .is_none()
    {
        return;
    }
    const WRONG: &str = "wrong-password-never-print-me";
    w.deployment("bad", 0).await;
    let op = w.start_operator_resolving();
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(w.client.clone(), &w.namespace);
    let secret = |password: &str| -> k8s_openapi::api::core::v1::Secret {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": { "name": "mysql-secret" },
            "data": { "password": k8s_openapi::ByteString(password.as_bytes().to_vec()) },
        }))
        .expect("a Secret")
    };
    secrets
        .create(&kube::api::PostParams::default(), &secret(WRONG))
        .await
        .expect("create Secret");
    let auth: keda_api::TriggerAuthentication = serde_yaml::from_str(
        "apiVersion: keda.sh/v1alpha1\nkind: TriggerAuthentication\nmetadata:\n  name: mysql-auth\n  namespace: team\nspec:\n  secretTargetRef:\n    - parameter: password\n      name: mysql-secret\n      key: password\n",
    )
    .expect("TriggerAuthentication");
    kube::Api::<keda_api::TriggerAuthentication>::namespaced(w.client.clone(), &w.namespace)
        .create(&kube::api::PostParams::default(), &auth)
        .await
        .expect("create TriggerAuthentication");
    let message = refused(&w, "wrong-password", "type: mysql\n      metadata:\n        host: 127.0.0.1\n        port: \"3306\"\n        username: root\n        dbName: test\n        query: SELECT 3\n        queryValue: \"5\"\n      authenticationRef:\n        name: mysql-auth", "ScaledObjectCheckFailed", &["(mysql)", "connecting to MySQL at 127.0.0.1:3306/test", "\"password\"", "the server refused the credentials"]).await;
    assert!(!message.contains(WRONG), "{message}");

    // root has no password on the test server; an empty value counts as absent.
    secrets
        .patch(
            "mysql-secret",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "data": { "password": "" } })),
        )
        .await
        .expect("patch Secret");
    becomes_ready(&w, "wrong-password").await;
    op.stop().await;
}

/// `nats-jetstream`: an unreachable monitoring endpoint and a stream that does not exist fail
/// the polls, naming `natsServerMonitoringEndpoint` and `stream`; fixed, both become Ready.
#[tokio::test]
async fn bad_nats_jetstream_triggers_are_not_ready_naming_the_parameter_and_recover() {
    let test = "nats-jetstream bad input";
    let Some((_server, w)) = world(test).await else {
        return;
    };
    let Some((monitoring, client)) = nats_or_skip(test).await else {
        return;
    };
    let stream = redis_common::unique("js");
    let mut nats = nats_client::NatsClient::connect(&client)
        .await
        .expect("NATS client");
    nats.create_stream(&stream, 1).await.expect("stream");
    w.deployment("bad", 0).await;
    let op = w.start_operator();
    let trigger = |endpoint: &str, stream: &str| {
        format!(
            "type: nats-jetstream\n      metadata:\n        natsServerMonitoringEndpoint: \"{endpoint}\"\n        account: $G\n        stream: {stream}\n        consumer: workers"
        )
    };
    let down = format!("127.0.0.1:{}", closed_port());
    refused(
        &w,
        "unreachable",
        &trigger(&down, &stream),
        "TriggerError",
        &["(nats-jetstream)", "\"natsServerMonitoringEndpoint\""],
    )
    .await;

    refused(
        &w,
        "no-stream",
        &trigger(&monitoring, "no-such-stream"),
        "TriggerError",
        &[
            "(nats-jetstream)",
            "stream \"no-such-stream\" (parameter \"stream\") was not found",
        ],
    )
    .await;

    fixed(
        &w,
        &[
            ("unreachable", "natsServerMonitoringEndpoint", &monitoring),
            ("no-stream", "stream", &stream),
        ],
    )
    .await;
    op.stop().await;
    nats.delete_stream(&stream).await.expect("delete stream");
}
