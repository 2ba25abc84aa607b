//! `solr` against a fake of Solr's select handler, following
//! <https://solr.apache.org/guide/solr/latest/query-guide/common-query-parameters.html> and the
//! JSON response writer <https://solr.apache.org/guide/solr/latest/query-guide/response-writers.html#json-response-writer>
//! (`GET /solr/<collection>/select?q=&wt=json`, `response.numFound`), Basic authentication
//! <https://solr.apache.org/guide/solr/latest/deployment-guide/basic-authentication-plugin.html>
//! (401 without valid credentials), and a missing collection answered 404.

use std::sync::{Arc, Mutex};

use http::StatusCode;

use crate::common::{Harness, Setup, conformance};
use crate::http_server::{Recorded, TestServer, handler};

/// numFound of the query `status:pending` on collection `my_core`.
type Found = Arc<Mutex<u64>>;

fn solr(found: Found) -> crate::http_server::Handler {
    handler(move |r: &Recorded| {
        use base64::Engine;
        let basic = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("solr:s0lr-pass")
        );
        if r.header("authorization").as_deref() != Some(basic.as_str()) {
            return (
                StatusCode::UNAUTHORIZED,
                "text/html",
                "<html><body><h2>HTTP ERROR 401 require authentication SECRET-TEXT</h2></body></html>".into(),
            );
        }
        let path = r.uri.split('?').next().unwrap_or_default();
        if r.method != "GET" || path != "/solr/my_core/select" {
            return (
                StatusCode::NOT_FOUND,
                "application/json",
                r#"{"error":{"msg":"SolrCore 'x' is not available: SECRET-TEXT","code":404}}"#
                    .into(),
            );
        }
        if r.query("wt").as_deref() != Some("json") {
            return (StatusCode::OK, "application/xml", "<response/>".into());
        }
        let n = if r.query("q").as_deref() == Some("status:pending") {
            *found.lock().expect("found")
        } else {
            1000
        };
        (
            StatusCode::OK,
            "application/json",
            format!(
                r#"{{"responseHeader":{{"status":0,"QTime":1,"params":{{"q":"status:pending","wt":"json"}}}},"response":{{"numFound":{n},"start":0,"numFoundExact":true,"docs":[]}}}}"#
            ),
        )
    })
}

async fn harness(server: &TestServer, metadata: &[(&str, &str)], password: &str) -> Harness {
    let host = server.url("");
    let mut all = vec![("host", host.as_str())];
    all.extend_from_slice(metadata);
    conformance(
        "solr",
        Setup {
            metadata: &all,
            auth: &[("username", "solr"), ("password", password)],
            ..Setup::default()
        },
    )
    .await
}

#[tokio::test]
async fn the_value_is_num_found_and_errors_show_the_status_only() {
    let found: Found = Arc::new(Mutex::new(5));
    let server = TestServer::start(solr(found.clone())).await;
    let h = harness(&server, &[], "s0lr-pass").await;
    assert_eq!(h.metric_name, "s0-solr");
    h.expect(5.0, true).await;
    *found.lock().unwrap() = 1;
    h.expect(1.0, false).await; // not above activationTargetQueryValue 1
    h.close().await;

    let wrong = harness(&server, &[], "wrong-pass").await;
    let text = wrong.expect_error().await.to_string();
    assert!(text.contains("401") && text.contains("solr"), "{text}");
    assert!(
        !text.contains("wrong-pass") && !text.contains("SECRET-TEXT"),
        "{text}"
    );
    wrong.close().await;

    let missing = harness(&server, &[("collection", "gone")], "s0lr-pass").await;
    let text = missing.expect_error().await.to_string();
    assert!(
        text.contains("404") && !text.contains("SECRET-TEXT"),
        "{text}"
    );
    missing.close().await;
}
