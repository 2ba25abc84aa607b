//! `selenium-grid` against a fake of the Grid's GraphQL endpoint, following
//! <https://www.selenium.dev/documentation/grid/advanced_features/graphql_support/>
//! (`POST /graphql` with a JSON `{"query": ...}`; `nodesInfo.nodes` with their `stereotypes` and
//! `sessions` as JSON strings, `sessionsInfo.sessionQueueRequests` as JSON strings of the
//! requested capabilities), the Router's Basic authentication
//! <https://www.selenium.dev/documentation/grid/configuration/cli_options/#router> (401 without
//! valid credentials) and a path outside the Grid's routes answered 404.

use std::sync::{Arc, Mutex};

use http::StatusCode;

use crate::common::{Harness, Setup, conformance};
use crate::http_server::{Recorded, TestServer, handler};

/// The Grid's state: queued requests (browser names) and one `UP` chrome node with
/// `maxSession` 1 running `busy` chrome sessions.
#[derive(Default)]
struct Grid {
    queued: Vec<&'static str>,
    busy: u32,
}

type Shared = Arc<Mutex<Grid>>;

fn answer(grid: &Grid) -> String {
    let chrome = r#"{"browserName":"chrome","browserVersion":"","platformName":"linux","se:downloadsEnabled":true}"#;
    let stereotypes = format!(r#"[{{"slots":1,"stereotype":{chrome}}}]"#);
    let sessions: Vec<serde_json::Value> = (0..grid.busy)
        .map(|i| {
            serde_json::json!({
                "id": format!("s{i}"),
                "capabilities": chrome,
                "slot": {"id": format!("slot{i}"), "stereotype": chrome},
            })
        })
        .collect();
    let queue: Vec<String> = grid
        .queued
        .iter()
        .map(|b| format!(r#"{{"browserName":"{b}","platformName":"linux"}}"#))
        .collect();
    serde_json::json!({
        "data": {
            "grid": {"sessionCount": grid.busy, "maxSession": 1, "totalSlots": 1},
            "nodesInfo": {"nodes": [{
                "id": "node-1", "status": "UP", "sessionCount": grid.busy,
                "maxSession": 1, "slotCount": 1,
                "stereotypes": stereotypes, "sessions": sessions,
            }]},
            "sessionsInfo": {"sessionQueueRequests": queue},
        }
    })
    .to_string()
}

fn selenium(grid: Shared) -> crate::http_server::Handler {
    handler(move |r: &Recorded| {
        use base64::Engine;
        let basic = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("admin:gr1d-pass")
        );
        if r.header("authorization").as_deref() != Some(basic.as_str()) {
            return (
                StatusCode::UNAUTHORIZED,
                "text/plain",
                "Unauthorized SECRET-TEXT".into(),
            );
        }
        if r.uri != "/graphql" {
            return (
                StatusCode::NOT_FOUND,
                "application/json",
                r#"{"value":{"error":"unknown command","message":"SECRET-TEXT"}}"#.into(),
            );
        }
        if r.method != "POST" {
            return (StatusCode::METHOD_NOT_ALLOWED, "text/plain", String::new());
        }
        let query = serde_json::from_str::<serde_json::Value>(&r.body)
            .ok()
            .and_then(|b| b["query"].as_str().map(str::to_string));
        let Some(query) = query else {
            // graphql-java: a request without a query is a validation error, still 200.
            return (
                StatusCode::OK,
                "application/json",
                r#"{"errors":[{"message":"SECRET-TEXT","extensions":{"classification":"ValidationError"}}],"data":null}"#.into(),
            );
        };
        for field in ["sessionQueueRequests", "stereotypes", "sessions", "slot"] {
            assert!(query.contains(field), "the query asks for {field}");
        }
        (
            StatusCode::OK,
            "application/json",
            answer(&grid.lock().expect("grid")),
        )
    })
}

async fn harness(server: &TestServer, path: &str, password: &str) -> Harness {
    let url = server.url(path);
    conformance(
        "selenium-grid",
        Setup {
            metadata: &[("url", url.as_str())],
            auth: &[("username", "admin"), ("password", password)],
            ..Setup::default()
        },
    )
    .await
}

#[tokio::test]
async fn the_value_is_new_nodes_plus_running_sessions() {
    let grid: Shared = Arc::default();
    let server = TestServer::start(selenium(grid.clone())).await;
    let h = harness(&server, "/graphql", "gr1d-pass").await;
    assert_eq!(h.metric_name, "s0-selenium-grid-chrome-linux");
    h.expect(0.0, false).await;
    // One chrome request and a free chrome slot: no new node.
    grid.lock().unwrap().queued = vec!["chrome", "firefox"];
    h.expect(0.0, false).await;
    // The slot busy: the running session and, for three requests, two new nodes of
    // nodeMaxSessions 2.
    {
        let mut g = grid.lock().unwrap();
        g.busy = 1;
        g.queued = vec!["chrome", "firefox", "chrome", "chrome"];
    }
    h.expect(3.0, true).await;
    let request = server.last_request();
    assert_eq!(request.method, "POST");
    h.close().await;
}

#[tokio::test]
async fn errors_show_the_status_never_the_password_nor_grid_text() {
    let server = TestServer::start(selenium(Arc::default())).await;
    let wrong = harness(&server, "/graphql", "wr0ng-pass").await;
    let text = wrong.expect_error().await.to_string();
    assert!(
        text.contains("401") && text.contains("selenium-grid"),
        "{text}"
    );
    assert!(
        !text.contains("wr0ng-pass") && !text.contains("SECRET-TEXT"),
        "{text}"
    );
    wrong.close().await;
    let elsewhere = harness(&server, "/wd/hub", "gr1d-pass").await;
    let text = elsewhere.expect_error().await.to_string();
    assert!(
        text.contains("404") && !text.contains("SECRET-TEXT"),
        "{text}"
    );
    elsewhere.close().await;
}
