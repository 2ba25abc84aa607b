//! `artemis-queue` against a fake of ActiveMQ Artemis' Jolokia endpoint, following Jolokia's
//! protocol <https://jolokia.org/reference/html/manual/jolokia_protocol.html#read> (`GET
//! /console/jolokia/read/<mbean>/<attribute>`, answered `{"request":{...},"value":N,
//! "timestamp":T,"status":200}`; an MBean that does not exist is HTTP 200 with `"status":404`
//! and `error_type` `javax.management.InstanceNotFoundException`), its CORS check
//! <https://jolokia.org/reference/html/manual/security.html> (the `Origin` must be allowed,
//! Artemis allowing the console's own: 403 otherwise) and the console's Basic authentication
//! <https://activemq.apache.org/components/artemis/documentation/latest/management-console.html>
//! (401 without valid credentials).

use std::sync::{Arc, Mutex};

use http::StatusCode;

use crate::common::{Harness, Setup, conformance};
use crate::http_server::{Recorded, TestServer, handler};

const MBEAN: &str = "org.apache.activemq.artemis:broker=\"artemis-activemq\",component=addresses,address=\"test\",subcomponent=queues,routing-type=\"anycast\",queue=\"test\"";

fn artemis(count: Arc<Mutex<i64>>) -> crate::http_server::Handler {
    handler(move |r: &Recorded| {
        use base64::Engine;
        let basic = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("admin:art3mis")
        );
        if r.header("authorization").as_deref() != Some(basic.as_str()) {
            return (
                StatusCode::UNAUTHORIZED,
                "text/html",
                "<html>SECRET-TEXT</html>".into(),
            );
        }
        // Artemis' jolokia-access.xml allows the console's own origin.
        let origin = format!("http://{}", r.header("host").unwrap_or_default());
        if r.header("origin").as_deref() != Some(origin.as_str()) {
            return (
                StatusCode::FORBIDDEN,
                "text/plain",
                "Origin SECRET-TEXT not allowed".into(),
            );
        }
        let path = percent_encoding::percent_decode_str(&r.uri)
            .decode_utf8_lossy()
            .into_owned();
        let Some(read) = path.strip_prefix("/console/jolokia/read/") else {
            return (StatusCode::NOT_FOUND, "text/html", "SECRET-TEXT".into());
        };
        if r.method != "GET" {
            return (StatusCode::METHOD_NOT_ALLOWED, "text/plain", String::new());
        }
        let Some((mbean, attribute)) = read.rsplit_once('/') else {
            return (
                StatusCode::OK,
                "application/json",
                r#"{"status":400,"error":"SECRET-TEXT"}"#.into(),
            );
        };
        if mbean != MBEAN || attribute != "MessageCount" {
            return (
                StatusCode::OK,
                "application/json",
                r#"{"request":{"type":"read"},"error_type":"javax.management.InstanceNotFoundException","error":"javax.management.InstanceNotFoundException : SECRET-TEXT","status":404}"#.into(),
            );
        }
        let n = *count.lock().expect("count");
        (
            StatusCode::OK,
            "application/json",
            serde_json::json!({
                "request": {"mbean": MBEAN, "attribute": "MessageCount", "type": "read"},
                "value": n, "timestamp": 1_700_000_000, "status": 200,
            })
            .to_string(),
        )
    })
}

async fn harness(server: &TestServer, queue: &str, password: &str) -> Harness {
    let endpoint = server.url("");
    let endpoint = endpoint.trim_start_matches("http://").trim_end_matches('/');
    conformance(
        "artemis-queue",
        Setup {
            metadata: &[("managementEndpoint", endpoint), ("queueName", queue)],
            auth: &[("username", "admin"), ("password", password)],
            ..Setup::default()
        },
    )
    .await
}

#[tokio::test]
async fn the_value_is_the_message_count_and_errors_show_codes_only() {
    let count = Arc::new(Mutex::new(1));
    let server = TestServer::start(artemis(count.clone())).await;
    run(&server, &count).await;
}

async fn run(server: &TestServer, count: &Arc<Mutex<i64>>) {
    let h = harness(server, "test", "art3mis").await;
    assert_eq!(h.metric_name, "s0-artemis-test");
    h.expect(1.0, false).await; // not above activationQueueLength 1
    *count.lock().expect("count") = 25;
    h.expect(25.0, true).await;
    h.close().await;

    let wrong = harness(server, "test", "wr0ng").await;
    let text = wrong.expect_error().await.to_string();
    assert!(
        text.contains("401") && text.contains("artemis-queue"),
        "{text}"
    );
    assert!(
        !text.contains("wr0ng") && !text.contains("SECRET-TEXT"),
        "{text}"
    );
    wrong.close().await;

    let missing = harness(server, "gone", "art3mis").await;
    let text = missing.expect_error().await.to_string();
    assert!(
        text.contains("404") && !text.contains("SECRET-TEXT"),
        "{text}"
    );
    missing.close().await;
}
