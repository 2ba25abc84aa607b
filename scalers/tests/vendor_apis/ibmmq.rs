//! `ibmmq` against a fake of IBM MQ's administrative REST API, following its reference
//! (<https://www.ibm.com/docs/en/ibm-mq/9.4?topic=adminactionqmgrqmgrnamemqsc-post-json-formatted-command>):
//! `POST /ibmmq/rest/v2/admin/action/qmgr/{qmgrName}/mqsc` with a `runCommandJSON` body, basic
//! authentication, and the `ibm-mq-rest-csrf-token` header (any value; `403` without it). A
//! command answers `200` with `{"commandResponse": [{"completionCode", "reasonCode",
//! "parameters": {"curdepth", "queue"}}], "overallCompletionCode", "overallReasonCode"}`; an
//! unknown queue answers `200` with completion code 2, reason code 2085 and a `message`; an
//! unknown queue manager `404` with `{"error": [{"msgId", "message", ...}]}`; wrong
//! credentials `401`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use http::StatusCode;

use crate::common::{Harness, Setup, conformance};
use crate::http_server::{Recorded, TestServer, handler};

const PATH: &str = "/ibmmq/rest/v2/admin/action/qmgr/QM1/mqsc";
/// `admin:passw0rd`.
const BASIC: &str = "Basic YWRtaW46cGFzc3cwcmQ=";

fn mq(depths: Arc<Mutex<BTreeMap<String, i64>>>) -> crate::http_server::Handler {
    handler(move |r: &Recorded| {
        if r.header("authorization").as_deref() != Some(BASIC) {
            return (
                StatusCode::UNAUTHORIZED,
                "application/json",
                r#"{"error":[{"msgId":"MQWB0104E","message":"SECRET-TEXT"}]}"#.into(),
            );
        }
        if r.header("ibm-mq-rest-csrf-token").is_none() {
            return (
                StatusCode::FORBIDDEN,
                "application/json",
                r#"{"error":[{"msgId":"MQWB0105E"}]}"#.into(),
            );
        }
        if r.method != "POST" || !r.uri.starts_with("/ibmmq/rest/v2/admin/action/qmgr/") {
            return (StatusCode::NOT_FOUND, "text/plain", String::new());
        }
        if r.uri != PATH {
            return (
                StatusCode::NOT_FOUND,
                "application/json",
                r#"{"error":[{"msgId":"MQWB0009E","action":"Resubmit the request with a valid queue manager name.","completionCode":2,"reasonCode":2058,"type":"rest","message":"MQWB0009E: Could not query the queue manager 'QM9'. SECRET-TEXT"}]}"#.into(),
            );
        }
        let body: serde_json::Value = serde_json::from_str(&r.body).unwrap_or_default();
        let well_formed = r.header("content-type").as_deref() == Some("application/json")
            && body["type"] == "runCommandJSON"
            && body["command"]
                .as_str()
                .is_some_and(|c| c.eq_ignore_ascii_case("display"))
            && body["qualifier"]
                .as_str()
                .is_some_and(|c| c.eq_ignore_ascii_case("qlocal"))
            && body["responseParameters"] == serde_json::json!(["CURDEPTH"]);
        let Some(name) = body["name"].as_str().filter(|_| well_formed) else {
            return (
                StatusCode::BAD_REQUEST,
                "application/json",
                r#"{"error":[{"msgId":"MQWB0107E"}]}"#.into(),
            );
        };
        let depth = depths.lock().expect("depths").get(name).copied();
        let answer = match depth {
            Some(depth) => serde_json::json!({
                "commandResponse": [{"completionCode": 0, "reasonCode": 0,
                                     "parameters": {"curdepth": depth, "queue": name}}],
                "overallCompletionCode": 0, "overallReasonCode": 0
            }),
            None => serde_json::json!({
                "commandResponse": [{"completionCode": 2, "reasonCode": 2085,
                                     "message": [format!("AMQ8147E: IBM MQ object {name} not found. SECRET-TEXT")]}],
                "overallCompletionCode": 2, "overallReasonCode": 3008
            }),
        };
        (StatusCode::OK, "application/json", answer.to_string())
    })
}

async fn harness(server: &TestServer, metadata: &[(&str, &str)], password: &str) -> Harness {
    let host = server.url(PATH);
    let mut all = vec![("host", host.as_str())];
    all.extend_from_slice(metadata);
    conformance(
        "ibmmq",
        Setup {
            metadata: &all,
            auth: &[("username", "admin"), ("password", password)],
            ..Setup::default()
        },
    )
    .await
}

#[tokio::test]
async fn the_depth_is_curdepth_combined_over_the_queues() {
    let depths = Arc::new(Mutex::new(BTreeMap::from([
        ("DEV.QUEUE.1".to_string(), 1),
        ("DEV.QUEUE.2".to_string(), 6),
    ])));
    let server = TestServer::start(mq(depths.clone())).await;
    let h = harness(&server, &[], "passw0rd").await;
    assert_eq!(h.metric_name, "s0-ibmmq-DEV-QUEUE-1");
    h.expect(1.0, false).await; // not above activationQueueDepth 1
    depths.lock().unwrap().insert("DEV.QUEUE.1".into(), 4);
    h.expect(4.0, true).await;
    h.close().await;

    for (operation, value) in [("max", 6.0), ("sum", 10.0), ("avg", 5.0)] {
        let h = harness(
            &server,
            &[
                ("queueName", ""),
                ("queueNames", "DEV.QUEUE.1,DEV.QUEUE.2"),
                ("operation", operation),
            ],
            "passw0rd",
        )
        .await;
        h.expect(value, true).await;
        h.close().await;
    }
    let names: Vec<String> = server
        .requests()
        .iter()
        .filter_map(|r| serde_json::from_str::<serde_json::Value>(&r.body).ok())
        .filter_map(|b| b["name"].as_str().map(str::to_string))
        .collect();
    assert_eq!(&names[names.len() - 2..], ["DEV.QUEUE.1", "DEV.QUEUE.2"]);
}

#[tokio::test]
async fn errors_show_codes_and_statuses_never_mq_s_text_or_the_password() {
    let depths = Arc::new(Mutex::new(BTreeMap::from([("DEV.QUEUE.1".to_string(), 1)])));
    let server = TestServer::start(mq(depths)).await;

    let missing = harness(&server, &[("queueName", "NO.SUCH.QUEUE")], "passw0rd").await;
    let text = missing.expect_error().await.to_string();
    assert!(
        text.contains("2085") && text.contains("NO.SUCH.QUEUE"),
        "{text}"
    );
    assert!(
        !text.contains("SECRET-TEXT") && !text.contains("AMQ8147E"),
        "{text}"
    );
    missing.close().await;

    let wrong = harness(&server, &[], "wr0ng-passw0rd").await;
    let text = wrong.expect_error().await.to_string();
    assert!(text.contains("401") && text.contains("ibmmq"), "{text}");
    assert!(
        !text.contains("wr0ng-passw0rd") && !text.contains("SECRET-TEXT"),
        "{text}"
    );
    wrong.close().await;

    let qmgr = server.url("/ibmmq/rest/v2/admin/action/qmgr/QM9/mqsc");
    let unknown = harness(&server, &[("host", &qmgr)], "passw0rd").await;
    let text = unknown.expect_error().await.to_string();
    assert!(
        text.contains("404") && !text.contains("SECRET-TEXT"),
        "{text}"
    );
    unknown.close().await;
}
