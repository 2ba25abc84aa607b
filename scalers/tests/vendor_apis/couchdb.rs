//! `couchdb` against a fake of CouchDB's `_find` endpoint, following
//! <https://docs.couchdb.org/en/stable/api/database/find.html> (`POST /{db}/_find` with a JSON
//! `selector` and `fields`, answered `{"docs":[...],"bookmark":...}`; at most 25 documents
//! without `limit`; 404 `{"error":"not_found","reason":"Database does not exist."}`) and Basic
//! authentication <https://docs.couchdb.org/en/stable/api/server/authn.html#basic-authentication>
//! (401 `{"error":"unauthorized","reason":"Name or password is incorrect."}`).

use std::sync::{Arc, Mutex};

use http::StatusCode;

use crate::common::{Harness, Setup, conformance};
use crate::http_server::{Recorded, TestServer, handler};

/// The documents of database `animals`: (id, feet).
type Docs = Arc<Mutex<Vec<(&'static str, i64)>>>;

fn couchdb(docs: Docs) -> crate::http_server::Handler {
    handler(move |r: &Recorded| {
        use base64::Engine;
        let basic = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("admin:c0uch")
        );
        if r.header("authorization").as_deref() != Some(basic.as_str()) {
            return (
                StatusCode::UNAUTHORIZED,
                "application/json",
                r#"{"error":"unauthorized","reason":"Name or password is incorrect. SECRET-TEXT"}"#
                    .into(),
            );
        }
        if r.method != "POST" || r.uri != "/animals/_find" {
            return (
                StatusCode::NOT_FOUND,
                "application/json",
                r#"{"error":"not_found","reason":"Database does not exist. SECRET-TEXT"}"#.into(),
            );
        }
        let Ok(find) = serde_json::from_str::<serde_json::Value>(&r.body) else {
            return (
                StatusCode::BAD_REQUEST,
                "application/json",
                r#"{"error":"bad_request","reason":"invalid UTF-8 JSON"}"#.into(),
            );
        };
        // The selector this test uses: {"feet": {"$gt": N}}.
        let Some(gt) = find["selector"]["feet"]["$gt"].as_i64() else {
            return (
                StatusCode::BAD_REQUEST,
                "application/json",
                r#"{"error":"bad_request","reason":"selector"}"#.into(),
            );
        };
        let limit = find["limit"]
            .as_u64()
            .and_then(|l| usize::try_from(l).ok())
            .unwrap_or(25);
        let fields: Vec<String> = find["fields"]
            .as_array()
            .map(|f| {
                f.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let matching: Vec<String> = docs
            .lock()
            .expect("docs")
            .iter()
            .filter(|(_, feet)| *feet > gt)
            .take(limit)
            .map(|(id, feet)| {
                let mut doc = serde_json::Map::new();
                if fields.is_empty() || fields.iter().any(|f| f == "_id") {
                    doc.insert("_id".into(), (*id).into());
                }
                if fields.is_empty() || fields.iter().any(|f| f == "feet") {
                    doc.insert("feet".into(), (*feet).into());
                }
                serde_json::Value::Object(doc).to_string()
            })
            .collect();
        (
            StatusCode::OK,
            "application/json",
            format!(
                r#"{{"docs":[{}],"bookmark":"g1AAAA","warning":"No matching index found, create an index to optimize query time."}}"#,
                matching.join(",")
            ),
        )
    })
}

async fn harness(server: &TestServer, db: &str, password: &str) -> Harness {
    let server = server.url("");
    conformance(
        "couchdb",
        Setup {
            metadata: &[("dbName", db)],
            auth: &[("connectionString", &server), ("password", password)],
            ..Setup::default()
        },
    )
    .await
}

#[tokio::test]
async fn the_value_is_the_number_of_documents_found_as_admin() {
    let docs: Docs = Arc::new(Mutex::new(vec![("cat", 4), ("bird", 2)]));
    let server = TestServer::start(couchdb(docs.clone())).await;
    let h = harness(&server, "animals", "c0uch").await;
    assert_eq!(h.metric_name, "s0-coucdb-animals");
    h.expect(2.0, true).await;
    let body: serde_json::Value =
        serde_json::from_str(&server.last_request().body).expect("JSON body");
    assert_eq!(
        body["fields"],
        serde_json::json!(["_id", "feet", "greeting"])
    );
    *docs.lock().unwrap() = vec![("snake", 0), ("cat", 4)];
    h.expect(1.0, false).await; // not above activationQueryValue 1
    // CouchDB's default limit: 25 documents at most.
    *docs.lock().unwrap() = vec![("ant", 6); 30];
    h.expect(25.0, true).await;
    h.close().await;
}

#[tokio::test]
async fn errors_show_the_status_never_the_password_nor_couchdb_text() {
    let docs: Docs = Arc::new(Mutex::new(vec![("cat", 4)]));
    let server = TestServer::start(couchdb(docs)).await;
    let wrong = harness(&server, "animals", "wr0ng-pass").await;
    let text = wrong.expect_error().await.to_string();
    assert!(text.contains("401") && text.contains("couchdb"), "{text}");
    assert!(
        !text.contains("wr0ng-pass") && !text.contains("SECRET-TEXT"),
        "{text}"
    );
    wrong.close().await;
    let missing = harness(&server, "plants", "c0uch").await;
    let text = missing.expect_error().await.to_string();
    assert!(
        text.contains("404") && !text.contains("SECRET-TEXT"),
        "{text}"
    );
    missing.close().await;
}
