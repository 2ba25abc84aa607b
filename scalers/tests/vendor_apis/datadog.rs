//! `datadog` against a fake of Datadog's "Query timeseries points" API, following
//! <https://docs.datadoghq.com/api/latest/metrics/#query-timeseries-points>: `GET
//! /api/v1/query` with the required query parameters `from`, `to` (Unix seconds) and `query`;
//! authentication by the `DD-API-KEY` and `DD-APPLICATION-KEY` headers
//! (<https://docs.datadoghq.com/api/latest/authentication/>), 403 `{"errors":["Forbidden"]}`
//! without them; 400 for a bad request; 429 when rate limited
//! (<https://docs.datadoghq.com/api/latest/rate-limits/>); the `MetricsQueryResponse` answer
//! with `series[].pointlist` of `[<ms>, <value or null>]`.

use std::sync::{Arc, Mutex};

use http::StatusCode;
use keda_scalers::http_client::VendorEndpoints;
use keda_scalers::{Clock, ScalerError};

use crate::common::{Harness, Setup, conformance};
use crate::http_server::{Recorded, TestServer, handler};

const API_KEY: &str = "dd-api-k3y-0123";
const APP_KEY: &str = "dd-app-k3y-4567";
/// 2023-11-14T22:13:20Z.
const NOW: i64 = 1_700_000_000;

/// What the fake answers to a well-formed, authenticated query.
type Reply = Arc<Mutex<(StatusCode, String)>>;

fn series(pointlists: &[&str]) -> String {
    let series: Vec<String> = pointlists
        .iter()
        .enumerate()
        .map(|(i, p)| {
            format!(
                r#"{{"metric":"trace.redis.command.hits","display_name":"trace.redis.command.hits","scope":"host:h{i}","expression":"e","unit":null,"aggr":"sum","interval":20,"length":3,"start":1699999880000,"end":1700000000000,"pointlist":{p},"attributes":{{}},"tag_set":["host:h{i}"],"query_index":0}}"#
            )
        })
        .collect();
    format!(
        r#"{{"status":"ok","res_type":"time_series","resp_version":1,"query":"q","from_date":1699999880000,"to_date":1700000000000,"series":[{}],"values":[],"times":[],"message":"","group_by":["host"]}}"#,
        series.join(",")
    )
}

/// Datadog's answer: 403 without both keys, 400 without `from`, `to` or `query` or with
/// `from` after `to`, else the reply set by the test.
fn datadog(reply: Reply) -> crate::http_server::Handler {
    handler(move |r: &Recorded| {
        if r.header("dd-api-key").as_deref() != Some(API_KEY)
            || r.header("dd-application-key").as_deref() != Some(APP_KEY)
        {
            return (
                StatusCode::FORBIDDEN,
                "application/json",
                r#"{"errors":["Forbidden"]}"#.into(),
            );
        }
        if r.method != "GET" || !r.uri.starts_with("/api/v1/query?") {
            return (
                StatusCode::NOT_FOUND,
                "application/json",
                r#"{"errors":["Not found"]}"#.into(),
            );
        }
        let seconds = |name: &str| r.query(name).and_then(|v| v.parse::<i64>().ok());
        match (seconds("from"), seconds("to"), r.query("query")) {
            (Some(from), Some(to), Some(query)) if from <= to && !query.is_empty() => {}
            _ => {
                return (
                    StatusCode::BAD_REQUEST,
                    "application/json",
                    r#"{"errors":["Error parsing query: unable to parse from, to or query"]}"#
                        .into(),
                );
            }
        }
        let (status, body) = reply.lock().expect("reply").clone();
        (status, "application/json", body)
    })
}

fn reply(status: StatusCode, body: &str) -> Reply {
    Arc::new(Mutex::new((status, body.to_string())))
}

/// The documented example (site `datadoghq.eu`) with `metadata` replacing its entries, its keys,
/// the fake as `api.datadoghq.eu` and the clock at [`NOW`].
async fn harness(server: &TestServer, metadata: &[(&str, &str)], app_key: &str) -> Harness {
    let fake = url::Url::parse(&server.url("/")).expect("fake URL");
    conformance(
        "datadog",
        Setup {
            metadata,
            auth: &[
                ("apiKey", API_KEY),
                ("appKey", app_key),
                ("datadogSite", "datadoghq.eu"),
            ],
            clock: Some(Clock::fixed(
                jiff::Timestamp::from_second(NOW).expect("time"),
            )),
            vendor_endpoints: VendorEndpoints::default().with("api.datadoghq.eu", fake),
            ..Setup::default()
        },
    )
    .await
}

#[tokio::test]
async fn the_value_is_the_last_point_with_a_value_aggregated_over_series() {
    let answer = reply(
        StatusCode::OK,
        &series(&[
            "[[1699999880000,3.0],[1699999900000,9.5],[1699999920000,null]]",
            "[[1699999880000,2.0]]",
        ]),
    );
    let server = TestServer::start(datadog(answer.clone())).await;
    let h = harness(&server, &[], APP_KEY).await;
    assert_eq!(h.metric_name, "s0-datadog-sum-trace-redis-command-hits");
    // queryAggregator max: 9.5 (the trailing null skipped) over 2.0; above activation 1.1.
    h.expect(9.5, true).await;
    let request = server.last_request();
    assert_eq!(request.method, "GET");
    assert!(request.uri.starts_with("/api/v1/query?"), "{}", request.uri);
    // age 120, timeWindowOffset 0.
    assert_eq!(request.query("to").as_deref(), Some("1700000000"));
    assert_eq!(request.query("from").as_deref(), Some("1699999880"));
    assert_eq!(
        request.query("query").as_deref(),
        Some("sum:trace.redis.command.hits{env:none,service:redis}.as_count()")
    );
    // The keys travel in headers only.
    assert!(!request.uri.contains(API_KEY) && !request.uri.contains(APP_KEY));

    // average, and the point before the last with lastAvailablePointOffset 1.
    let h2 = harness(
        &server,
        &[
            ("queryAggregator", "average"),
            ("lastAvailablePointOffset", "1"),
        ],
        APP_KEY,
    )
    .await;
    let err = h2.expect_error().await;
    assert!(
        err.to_string().contains("lastAvailablePointOffset"),
        "the second series has one point: {err}"
    );
    *answer.lock().unwrap() = (
        StatusCode::OK,
        series(&["[[1,3.0],[2,9.5],[3,null]]", "[[1,1.0],[2,2.0]]"]),
    );
    h2.expect(2.0, true).await; // (3.0 + 1.0) / 2
    h2.close().await;

    // At or below activationQueryValue (1.1): inactive.
    *answer.lock().unwrap() = (StatusCode::OK, series(&["[[1,1.1]]"]));
    h.expect(1.1, false).await;
    h.close().await;
}

#[tokio::test]
async fn no_value_is_metric_unavailable_value_or_an_error() {
    let answer = reply(StatusCode::OK, &series(&[]));
    let server = TestServer::start(datadog(answer.clone())).await;
    // The example sets metricUnavailableValue: "0".
    let h = harness(&server, &[], APP_KEY).await;
    h.expect(0.0, false).await;
    *answer.lock().unwrap() = (StatusCode::OK, series(&["[[1,null],[2,null]]"]));
    h.expect(0.0, false).await;
    // 422: Datadog cannot compute the metric (yet); KEDA uses the filler too.
    *answer.lock().unwrap() = (
        StatusCode::UNPROCESSABLE_ENTITY,
        r#"{"errors":["metric unavailable"]}"#.into(),
    );
    h.expect(0.0, false).await;
    h.close().await;

    let strict = harness(&server, &[("metricUnavailableValue", "")], APP_KEY).await;
    let err = strict.expect_error().await;
    assert!(matches!(err, ScalerError::Query { .. }), "{err:?}");
    assert!(err.to_string().contains("422"), "{err}");
    assert!(!err.to_string().contains("metric unavailable"), "{err}");
    *answer.lock().unwrap() = (StatusCode::OK, series(&[]));
    let err = strict.expect_error().await;
    assert!(
        err.to_string().contains("no Datadog metrics returned"),
        "{err}"
    );
    strict.close().await;
}

#[tokio::test]
async fn refusals_and_throttling_are_named_without_keys_or_datadog_text() {
    let answer = reply(StatusCode::OK, &series(&["[[1,5.0]]"]));
    let server = TestServer::start(datadog(answer.clone())).await;
    let h = harness(&server, &[], "wrong-app-k3y").await;
    let text = h.expect_error().await.to_string();
    assert!(text.contains("403") && text.contains("keys"), "{text}");
    assert!(text.contains("datadog"), "{text}");
    assert!(
        !text.contains("wrong-app-k3y") && !text.contains(API_KEY),
        "{text}"
    );
    assert!(!text.contains("Forbidden"), "{text}");
    h.close().await;

    let h = harness(&server, &[], APP_KEY).await;
    *answer.lock().unwrap() = (
        StatusCode::TOO_MANY_REQUESTS,
        r#"{"errors":["Rate limit of 1600 requests in 3600 seconds reached. SECRET-TEXT"]}"#.into(),
    );
    let text = h.expect_error().await.to_string();
    assert!(
        text.contains("429") && text.contains("rate limit"),
        "{text}"
    );
    assert!(!text.contains("SECRET-TEXT"), "{text}");

    // A 200 whose status is "error": said so, Datadog's error text not shown.
    *answer.lock().unwrap() = (
        StatusCode::OK,
        r#"{"status":"error","res_type":"time_series","series":[],"error":"SECRET-TEXT in query"}"#
            .into(),
    );
    let err = h.expect_error().await;
    assert!(matches!(err, ScalerError::Unexpected { .. }), "{err:?}");
    assert!(err.to_string().contains("status \"error\""), "{err}");
    assert!(!err.to_string().contains("SECRET-TEXT"), "{err}");

    // Several series without queryAggregator.
    let one = harness(&server, &[("queryAggregator", "")], APP_KEY).await;
    *answer.lock().unwrap() = (StatusCode::OK, series(&["[[1,1.0]]", "[[1,2.0]]"]));
    let err = one.expect_error().await;
    assert!(err.to_string().contains("queryAggregator"), "{err}");
    one.close().await;
    h.close().await;
}

#[tokio::test]
async fn a_site_that_is_not_datadogs_builds_and_fails_every_poll_naming_it() {
    let server = TestServer::start(datadog(reply(StatusCode::OK, &series(&["[[1,5.0]]"])))).await;
    let fake = url::Url::parse(&server.url("/")).expect("fake URL");
    let h = conformance(
        "datadog",
        Setup {
            auth: &[
                ("apiKey", API_KEY),
                ("appKey", APP_KEY),
                ("datadogSite", "127.0.0.1.nip.io"),
            ],
            vendor_endpoints: VendorEndpoints::default().with("api.127.0.0.1.nip.io", fake),
            ..Setup::default()
        },
    )
    .await;
    for _ in 0..2 {
        let err = h.expect_error().await;
        assert!(err.to_string().contains("\"datadogSite\""), "{err}");
    }
    assert!(server.requests().is_empty(), "nothing sent");
    // No client was leased: closing leaves the same error (not `Closed`).
    h.built.scaler().close().await;
}
