//! `arangodb` against a fake of ArangoDB's HTTP API, following
//! <https://docs.arangodb.com/stable/develop/http-api/databases/#get-information-about-the-current-database>
//! (`GET /_db/{db}/_api/database/current`; 404 `{"error":true,"errorNum":1228,"code":404,
//! "errorMessage":"database not found"}`),
//! <https://docs.arangodb.com/stable/develop/http-api/collections/#get-the-collection-information>
//! (`GET /_db/{db}/_api/collection/{name}`; 404 `errorNum` 1203),
//! <https://docs.arangodb.com/stable/develop/http-api/queries/aql-queries/#create-a-cursor>
//! (`POST /_db/{db}/_api/cursor` with `{"query":...,"count":true}`, answered 201 `{"result":[...],
//! "hasMore":false,"count":N,...}`) and Basic authentication (401 `errorNum` 11 otherwise).

use std::sync::{Arc, Mutex};

use http::StatusCode;

use crate::common::{Harness, Setup, conformance};
use crate::http_server::{Recorded, TestServer, handler};

fn error(code: StatusCode, num: u32) -> (StatusCode, &'static str, String) {
    (
        code,
        "application/json",
        format!(
            r#"{{"error":true,"errorNum":{num},"code":{},"errorMessage":"SECRET-TEXT"}}"#,
            code.as_u16()
        ),
    )
}

/// The pending tasks of collection `tasks` in database `jobs`.
fn arangodb(pending: Arc<Mutex<u64>>) -> crate::http_server::Handler {
    handler(move |r: &Recorded| {
        use base64::Engine;
        let basic = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("root:ar4ngo")
        );
        if r.header("authorization").as_deref() != Some(basic.as_str()) {
            return error(StatusCode::UNAUTHORIZED, 11);
        }
        let Some(rest) = r.uri.strip_prefix("/_db/jobs/") else {
            return error(StatusCode::NOT_FOUND, 1228);
        };
        match (r.method.as_str(), rest) {
            ("GET", "_api/database/current") => (
                StatusCode::OK,
                "application/json",
                r#"{"error":false,"code":200,"result":{"name":"jobs","id":"123","isSystem":false,"path":"none"}}"#.into(),
            ),
            ("GET", "_api/collection/tasks") => (
                StatusCode::OK,
                "application/json",
                r#"{"error":false,"code":200,"id":"456","name":"tasks","status":3,"type":2,"isSystem":false}"#.into(),
            ),
            ("GET", _) if rest.starts_with("_api/collection/") => error(StatusCode::NOT_FOUND, 1203),
            ("POST", "_api/cursor") => {
                let body: serde_json::Value = serde_json::from_str(&r.body).unwrap_or_default();
                let Some(query) = body["query"].as_str() else {
                    return error(StatusCode::BAD_REQUEST, 1502);
                };
                assert_eq!(body["count"], true, "KEDA's driver asks for the count");
                let n = *pending.lock().expect("pending");
                let result = if query.contains("COLLECT WITH COUNT") {
                    serde_json::json!([{"value": n}])
                } else {
                    serde_json::json!([{"value": 1}, {"value": 2}])
                };
                let count = result.as_array().map_or(0, Vec::len);
                (
                    StatusCode::CREATED,
                    "application/json",
                    serde_json::json!({"result": result, "hasMore": false, "count": count,
                        "cached": false, "extra": {"warnings": [], "stats": {}},
                        "error": false, "code": 201})
                    .to_string(),
                )
            }
            _ => error(StatusCode::METHOD_NOT_ALLOWED, 405),
        }
    })
}

async fn harness(endpoints: &str, metadata: &[(&str, &str)], password: &str) -> Harness {
    let mut all = vec![("endpoints", endpoints)];
    all.extend_from_slice(metadata);
    conformance(
        "arangodb",
        Setup {
            metadata: &all,
            auth: &[("username", "root"), ("password", password)],
            ..Setup::default()
        },
    )
    .await
}

#[tokio::test]
async fn the_value_is_the_query_s_document_past_an_unreachable_coordinator() {
    let pending = Arc::new(Mutex::new(1));
    let server = TestServer::start(arangodb(pending.clone())).await;
    let live = server.url("");
    let live = live.trim_end_matches('/');
    // Nothing listens on port 9 of loopback: the driver fails over to the next coordinator.
    let endpoints = format!("http://127.0.0.1:9,{live}");
    let h = harness(&endpoints, &[], "ar4ngo").await;
    assert_eq!(h.metric_name, "s0-arangodb");
    h.expect(1.0, false).await; // not above activationQueryValue 1
    *pending.lock().unwrap() = 12;
    h.expect(12.0, true).await;
    h.close().await;

    let many = harness(
        live,
        &[("query", "FOR t IN tasks RETURN {value: 1}")],
        "ar4ngo",
    )
    .await;
    let text = many.expect_error().await.to_string();
    assert!(text.contains("count is not 1"), "{text}");
    many.close().await;
}

#[tokio::test]
async fn missing_database_collection_and_credentials_fail_without_arangodb_s_text() {
    let server = TestServer::start(arangodb(Arc::new(Mutex::new(0)))).await;
    let live = server.url("");
    let live = live.trim_end_matches('/');
    for (metadata, password, expected) in [
        (
            &[("dbName", "nope")][..],
            "ar4ngo",
            "nope database not found",
        ),
        (
            &[("collection", "gone")][..],
            "ar4ngo",
            "gone collection not found in jobs database",
        ),
        (&[][..], "wr0ng", "401"),
    ] {
        let h = harness(live, metadata, password).await;
        let text = h.expect_error().await.to_string();
        assert!(text.contains(expected), "{text}");
        assert!(
            !text.contains("SECRET-TEXT") && !text.contains("wr0ng"),
            "{text}"
        );
        h.close().await;
    }
}
