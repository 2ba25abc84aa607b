//! `dynatrace` against a fake of Dynatrace's APIs, following the Metrics API v2
//! <https://docs.dynatrace.com/docs/dynatrace-api/environment-api/metric-v2/get-data-points>
//! (`GET /api/v2/metrics/query?metricSelector=&from=`, `Authorization: Api-Token`, 401 for a
//! bad token, 429 when throttled, the `MetricData` answer), and the Grail query API
//! <https://docs.dynatrace.com/docs/discover-dynatrace/platform/grail/querying-grail/query-api>
//! (`POST .../query:execute` answered 202 with a request token, `GET .../query:poll?request-token=`
//! answered `RUNNING` until `SUCCEEDED`, `Authorization: Bearer`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use http::StatusCode;
use keda_scalers::ScalerError;

use crate::common::{Harness, Setup, conformance};
use crate::http_server::{Recorded, TestServer, handler};

const TOKEN: &str = "dt0c01.FAKE.TOKEN";
const REQUEST_TOKEN: &str = "cmVxdWVzdC10b2tlbg==";

/// The fake's state: the metric value (or a status), the DQL state after how many polls.
struct Env {
    metric: Mutex<(StatusCode, String)>,
    /// Polls answered RUNNING before the final answer.
    running_polls: AtomicUsize,
    /// The final `:poll` answer.
    final_poll: Mutex<String>,
    polls: AtomicUsize,
}

fn metric_data(value: &str) -> String {
    format!(
        r#"{{"totalCount":1,"nextPageKey":null,"resolution":"1m","result":[{{"metricId":"builtin:service.requestCount.total:splitBy():fold","dataPointCountRatio":0.1,"dimensionCountRatio":0.1,"data":[{{"dimensions":[],"dimensionMap":{{}},"timestamps":[1700000000000],"values":[{value}]}}]}}]}}"#
    )
}

fn dynatrace(env: Arc<Env>) -> crate::http_server::Handler {
    handler(move |r: &Recorded| {
        let auth = r.header("authorization").unwrap_or_default();
        let path = r.uri.split('?').next().unwrap_or_default();
        let unauthorized = (
            StatusCode::UNAUTHORIZED,
            "application/json",
            r#"{"error":{"code":401,"message":"Token Authentication failed"}}"#.to_string(),
        );
        match (r.method.as_str(), path) {
            ("GET", "/e/env1/api/v2/metrics/query") => {
                if auth != format!("Api-Token {TOKEN}") {
                    return unauthorized;
                }
                if r.query("metricSelector").is_none() || r.query("from").is_none() {
                    return (
                        StatusCode::BAD_REQUEST,
                        "application/json",
                        r#"{"error":{"code":400,"message":"Constraints violated."}}"#.into(),
                    );
                }
                let (status, body) = env.metric.lock().expect("metric").clone();
                (status, "application/json", body)
            }
            ("POST", "/e/env1/platform/storage/query/v1/query:execute") => {
                if auth != format!("Bearer {TOKEN}") {
                    return unauthorized;
                }
                let body: serde_json::Value = serde_json::from_str(&r.body).unwrap_or_default();
                if r.header("content-type").as_deref() != Some("application/json")
                    || !body["query"].is_string()
                    || !body["fetchTimeoutSeconds"].is_u64()
                {
                    return (
                        StatusCode::BAD_REQUEST,
                        "application/json",
                        r#"{"error":{"code":400,"message":"bad request"}}"#.into(),
                    );
                }
                env.polls.store(0, Ordering::SeqCst);
                (
                    StatusCode::ACCEPTED,
                    "application/json",
                    format!(
                        r#"{{"state":"RUNNING","requestToken":"{REQUEST_TOKEN}","ttlSeconds":300}}"#
                    ),
                )
            }
            ("GET", "/e/env1/platform/storage/query/v1/query:poll") => {
                if auth != format!("Bearer {TOKEN}") {
                    return unauthorized;
                }
                if r.query("request-token").as_deref() != Some(REQUEST_TOKEN) {
                    return (
                        StatusCode::GONE,
                        "application/json",
                        r#"{"error":{"code":410,"message":"unknown request token"}}"#.into(),
                    );
                }
                let poll = env.polls.fetch_add(1, Ordering::SeqCst);
                if poll < env.running_polls.load(Ordering::SeqCst) {
                    return (
                        StatusCode::OK,
                        "application/json",
                        r#"{"state":"RUNNING","progress":50,"ttlSeconds":300}"#.into(),
                    );
                }
                (
                    StatusCode::OK,
                    "application/json",
                    env.final_poll.lock().expect("final poll").clone(),
                )
            }
            _ => (StatusCode::NOT_FOUND, "application/json", "{}".into()),
        }
    })
}

fn env() -> Arc<Env> {
    Arc::new(Env {
        metric: Mutex::new((StatusCode::OK, metric_data("12.5"))),
        running_polls: AtomicUsize::new(2),
        final_poll: Mutex::new(
            r#"{"state":"SUCCEEDED","progress":100,"result":{"records":[{"r":4.0}],"types":[]}}"#
                .into(),
        ),
        polls: AtomicUsize::new(0),
    })
}

async fn harness(server: &TestServer, metadata: &[(&str, &str)], token: &str) -> Harness {
    let host = server.url("/e/env1/");
    let mut all = vec![("host", host.as_str())];
    all.extend_from_slice(metadata);
    conformance(
        "dynatrace",
        Setup {
            metadata: &all,
            auth: &[("token", token)],
            ..Setup::default()
        },
    )
    .await
}

#[tokio::test]
async fn a_metric_selector_reads_the_first_value_with_an_api_token() {
    let env = env();
    let server = TestServer::start(dynatrace(env.clone())).await;
    let h = harness(&server, &[], TOKEN).await;
    assert_eq!(h.metric_name, "s0-dynatrace");
    h.expect(12.5, true).await;
    let request = server.last_request();
    assert_eq!(request.query("from").as_deref(), Some("now-5m"));
    assert_eq!(
        request.query("metricSelector").as_deref(),
        Some("builtin:service.requestCount.total:splitBy():fold")
    );
    // At activationThreshold (2): inactive; a null value is 0.
    *env.metric.lock().unwrap() = (StatusCode::OK, metric_data("2"));
    h.expect(2.0, false).await;
    *env.metric.lock().unwrap() = (StatusCode::OK, metric_data("null"));
    h.expect(0.0, false).await;
    *env.metric.lock().unwrap() = (
        StatusCode::OK,
        r#"{"totalCount":0,"nextPageKey":null,"result":[]}"#.into(),
    );
    let err = h.expect_error().await;
    assert!(
        err.to_string().contains("does not contain any results"),
        "{err}"
    );
    // Throttled.
    *env.metric.lock().unwrap() = (
        StatusCode::TOO_MANY_REQUESTS,
        r#"{"error":{"code":429,"message":"SECRET-TEXT"}}"#.into(),
    );
    let err = h.expect_error().await;
    assert!(matches!(err, ScalerError::Query { .. }), "{err:?}");
    assert!(err.to_string().contains("429"), "{err}");
    assert!(!err.to_string().contains("SECRET-TEXT"), "{err}");
    h.close().await;

    let wrong = harness(&server, &[], "dt0c01.WRONG").await;
    let text = wrong.expect_error().await.to_string();
    assert!(text.contains("401") && text.contains("dynatrace"), "{text}");
    assert!(
        !text.contains("dt0c01.WRONG") && !text.contains("Token Authentication"),
        "{text}"
    );
    wrong.close().await;
}

#[tokio::test]
async fn a_dql_query_is_executed_then_polled_until_it_succeeds() {
    let env = env();
    let server = TestServer::start(dynatrace(env.clone())).await;
    let dql: &[(&str, &str)] = &[
        ("metricSelector", ""),
        ("from", ""),
        (
            "query",
            "fetch logs | filter loglevel == \"ERROR\" | summarize r = count()",
        ),
        ("queryPollingWait", "10ms"),
    ];
    let h = harness(&server, dql, TOKEN).await;
    // Two RUNNING polls, then SUCCEEDED with r = 4.
    h.expect(4.0, true).await;
    assert_eq!(env.polls.load(Ordering::SeqCst), 3);
    let requests = server.requests();
    let execute = requests
        .iter()
        .find(|r| r.method == "POST")
        .expect("an execute");
    let body: serde_json::Value = serde_json::from_str(&execute.body).unwrap();
    assert_eq!(body["fetchTimeoutSeconds"], 10);
    assert_eq!(body["query"], dql[2].1);

    // More RUNNING polls than queryPollingTries (5): the poll fails saying so.
    env.running_polls.store(10, Ordering::SeqCst);
    let err = h.expect_error().await;
    assert!(err.to_string().contains("queryPollingTries"), "{err}");
    assert_eq!(env.polls.load(Ordering::SeqCst), 5);

    env.running_polls.store(0, Ordering::SeqCst);
    *env.final_poll.lock().unwrap() = r#"{"state":"FAILED","progress":100}"#.into();
    let err = h.expect_error().await;
    assert!(err.to_string().contains("query failed"), "{err}");
    *env.final_poll.lock().unwrap() = r#"{"state":"SUCCEEDED","result":{"records":[]}}"#.into();
    let err = h.expect_error().await;
    assert!(err.to_string().contains("empty result"), "{err}");
    h.close().await;
}
