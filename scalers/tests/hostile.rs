//! Hostile event sources (issue 30, finding 5). A tenant chooses where a trigger points; if a
//! scaler's error quoted what the source answered, the tenant would read internal endpoints
//! (cloud metadata, in-cluster services) through `KEDAScalerFailed` Events, the `Ready`
//! condition and `explain`, which all show the scaler error's message. Each test here runs a
//! real server on loopback (a small HTTP server, a fake Redis speaking RESP, the real
//! PostgreSQL) that puts a marker into its answer (a body, a value, an error message, a media
//! type, an error code) and asserts the marker is in no message of the error: not `Display`,
//! not `Debug` (errors are logged with it), not the source chain. The message still names the
//! trigger and the kind of failure.

#[allow(dead_code)]
mod common;
#[allow(dead_code)]
#[path = "common/http.rs"]
mod http_server;

use http::StatusCode;
use http_server::TestServer;
use keda_scalers::error::error_chain;
use keda_scalers::{Registry, ScalerContext, ScalerError, Secret};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What every hostile answer carries. The scalers' requests never contain it.
const MARKER: &str = "SECRET-MARKER-7f3a";

/// Every message of `err` that can reach a person or a log at info level.
fn assert_no_marker(what: &str, err: &ScalerError) {
    for (how, text) in [
        ("Display", err.to_string()),
        ("Debug", format!("{err:?}")),
        ("chain", error_chain(err)),
    ] {
        assert!(
            !text.contains(MARKER) && !text.contains("SECRET"),
            "{what}: the {how} of the error quotes the event source: {text}"
        );
    }
}

fn context(trigger_type: &str, metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> ScalerContext {
    let mut ctx = ScalerContext::new(trigger_type, 0);
    ctx.scalable_name = "hostile".into();
    ctx.scalable_namespace = "tenant".into();
    for (k, v) in metadata {
        ctx.metadata.insert((*k).to_string(), (*v).to_string());
    }
    ctx.auth_params = auth
        .iter()
        .map(|(k, v)| ((*k).to_string(), Secret::new(*v)))
        .collect();
    ctx
}

/// Builds the trigger and reads its first metric: the error of whichever step failed.
async fn error_of(ctx: ScalerContext) -> ScalerError {
    let built = match Registry::builtin().build(ctx).await {
        Ok(built) => built,
        Err(e) => return e,
    };
    let specs = built.scaler().metric_specs();
    let name = specs[0]
        .external
        .as_ref()
        .map(|e| e.metric.name.clone())
        .unwrap_or_default();
    let err = built
        .scaler()
        .metrics_and_activity(&name)
        .await
        .expect_err("a hostile answer is an error");
    built.scaler().close().await;
    err
}

/// A server answering each path with a hostile answer.
async fn hostile_http() -> TestServer {
    TestServer::start(http_server::handler(|request| {
        let path = request.uri.split('?').next().unwrap_or_default().to_string();
        match path.as_str() {
            // A non-2xx answer whose body (and media type) is what the endpoint holds.
            "/forbidden" => (
                StatusCode::FORBIDDEN,
                "text/SECRET-MARKER-7f3a",
                format!("<html>token={MARKER}</html>"),
            ),
            // A 2xx answer whose value is a string that is not a number.
            "/string" => (
                StatusCode::OK,
                "application/json",
                format!(r#"{{"v": "{MARKER}"}}"#),
            ),
            // XML with an entity reference: parsers quote the entity's name.
            "/xml" => (
                StatusCode::OK,
                "application/xml",
                format!("<a><v>&{MARKER};</v></a>"),
            ),
            // Prometheus text with a label value and a sample that are the secret.
            "/exposition" => (
                StatusCode::OK,
                "text/plain",
                format!("queue{{name=\"{MARKER}\"}} {MARKER}\n"),
            ),
            // A Prometheus API error with the secret in its type and text.
            "/prometheus-error/api/v1/query" => (
                StatusCode::BAD_REQUEST,
                "application/json",
                format!(
                    r#"{{"status":"error","errorType":"{MARKER}","error":"{MARKER}"}}"#
                ),
            ),
            // A Prometheus answer whose value and result type are the secret.
            "/prometheus-value/api/v1/query" => (
                StatusCode::OK,
                "application/json",
                format!(
                    r#"{{"status":"success","data":{{"resultType":"vector","result":[{{"metric":{{}},"value":[1,"{MARKER}"]}}]}}}}"#
                ),
            ),
            "/prometheus-type/api/v1/query" => (
                StatusCode::OK,
                "application/json",
                format!(r#"{{"status":"success","data":{{"resultType":"{MARKER}","result":[]}}}}"#),
            ),
            _ => (StatusCode::NOT_FOUND, "text/plain", MARKER.to_string()),
        }
    }))
    .await
}

#[tokio::test]
async fn metrics_api_never_quotes_the_answer() {
    let server = hostile_http().await;
    // (path, metadata besides url and targetValue, what the message must still say)
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, &'a str);
    let cases: Vec<Case<'_>> = vec![
        ("/forbidden", vec![("valueLocation", "v")], "403"),
        ("/string", vec![("valueLocation", "v")], "is not a number"),
        (
            "/xml",
            vec![("valueLocation", "a.v"), ("format", "xml")],
            "not valid XML",
        ),
        (
            "/exposition",
            vec![("valueLocation", "queue"), ("format", "prometheus")],
            "not Prometheus text format",
        ),
    ];
    for (path, extra, shown) in cases {
        let url = server.url(path);
        let mut metadata = vec![("url", url.as_str()), ("targetValue", "1")];
        metadata.extend(extra);
        let err = error_of(context("metrics-api", &metadata, &[])).await;
        assert_no_marker(path, &err);
        let message = err.to_string();
        // Still useful: the trigger and what kind of failure.
        assert!(message.starts_with("trigger 0 (metrics-api):"), "{message}");
        assert!(message.contains(shown), "{path}: {message}");
    }
}

#[tokio::test]
async fn prometheus_never_quotes_the_answer() {
    let server = hostile_http().await;
    for (path, shown) in [
        ("/prometheus-error", "400"),
        ("/prometheus-value", "not a number"),
        ("/prometheus-type", "another type"),
    ] {
        let url = server.url(path);
        let err = error_of(context(
            "prometheus",
            &[
                ("serverAddress", url.as_str()),
                ("query", "sum(up)"),
                ("threshold", "1"),
            ],
            &[],
        ))
        .await;
        assert_no_marker(path, &err);
        let message = err.to_string();
        assert!(message.starts_with("trigger 0 (prometheus):"), "{message}");
        assert!(message.contains(shown), "{path}: {message}");
    }
}

/// A "Redis" that answers every command with an error reply carrying the marker: what a tenant
/// gets by pointing `address` at a service that is not Redis, or at a Redis it controls.
async fn hostile_redis() -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("addr").to_string();
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buffer = [0u8; 4096];
                loop {
                    match socket.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            // One error reply per command in the read (RESP arrays start
                            // with `*`).
                            let commands = buffer[..n].iter().filter(|b| **b == b'*').count();
                            let reply = format!("-ERR {MARKER} internal.example:6379\r\n");
                            for _ in 0..commands.max(1) {
                                if socket.write_all(reply.as_bytes()).await.is_err() {
                                    return;
                                }
                            }
                        }
                    }
                }
            });
        }
    });
    (address, task)
}

#[tokio::test]
async fn redis_error_replies_are_not_quoted() {
    let (address, task) = hostile_redis().await;
    let err = error_of(context(
        "redis",
        &[
            ("address", address.as_str()),
            ("listName", "jobs"),
            ("listLength", "5"),
        ],
        &[],
    ))
    .await;
    task.abort();
    assert_no_marker("redis", &err);
    let message = err.to_string();
    assert!(message.starts_with("trigger 0 (redis):"), "{message}");
    assert!(message.contains("Redis"), "{message}");
}

#[tokio::test]
async fn postgresql_error_messages_are_not_quoted() {
    let test = "postgresql_error_messages_are_not_quoted";
    let attempt = async {
        let (client, connection) = tokio_postgres::connect(
            "host=127.0.0.1 port=5432 user=postgres dbname=test",
            tokio_postgres::NoTls,
        )
        .await?;
        tokio::spawn(connection);
        Ok::<_, tokio_postgres::Error>(client)
    };
    if common::service_or_skip(test, "PostgreSQL at 127.0.0.1:5432", attempt)
        .await
        .is_none()
    {
        return;
    }
    // The server builds the marker (the query holds only its pieces) and puts it into its
    // `ERROR: invalid input syntax for type integer: "..."` message.
    let query = "SELECT (repeat('SECRET', 1) || '-MARK' || 'ER-7f3a')::int";
    let err = error_of(context(
        "postgresql",
        &[("query", query), ("targetQueryValue", "1")],
        &[(
            "connection",
            "host=127.0.0.1 port=5432 user=postgres dbname=test sslmode=disable",
        )],
    ))
    .await;
    let message = err.to_string();
    assert!(
        !message.contains(MARKER),
        "the error quotes PostgreSQL's message: {message}"
    );
    assert!(!format!("{err:?}").contains(MARKER), "{err:?}");
    // The SQLSTATE says what kind of error it was.
    assert!(message.contains("SQLSTATE 22P02"), "{message}");
}
