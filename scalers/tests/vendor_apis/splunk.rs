//! `splunk` against a fake of Splunk's REST API, following the search endpoint reference
//! <https://docs.splunk.com/Documentation/Splunk/latest/RESTREF/RESTsearch#search.2Fjobs.2Fexport>
//! (`POST /servicesNS/<user>/<app>/search/jobs/export`, form body `search=...`,
//! `output_mode=json` streaming one `{"preview":false,"offset":N,"result":{...}}` per result),
//! authentication by Basic user and password or `Authorization: Bearer <token>`
//! (<https://docs.splunk.com/Documentation/Splunk/latest/Security/UseAuthTokens>, 401
//! `{"messages":[{"type":"WARN","text":"call not properly authenticated"}]}`), an unknown saved
//! search answered 400 with a FATAL message, and a search refused for the concurrency quota
//! answered 503.

use std::sync::{Arc, Mutex};

use http::StatusCode;
use keda_scalers::ScalerError;

use crate::common::{Harness, Setup, conformance};
use crate::http_server::{Recorded, TestServer, handler};

const USER: &str = "keda";
const PASSWORD: &str = "spl-pa55word";
const TOKEN: &str = "eyJraWQiOiJzcGx1bmsi.fake.token";

/// The result rows of the saved search `my-saved-search-name` (field `count`), or a status.
type Rows = Arc<Mutex<Result<Vec<&'static str>, StatusCode>>>;

fn splunk(rows: Rows) -> crate::http_server::Handler {
    handler(move |r: &Recorded| {
        use base64::Engine;
        let basic = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"))
        );
        let auth = r.header("authorization").unwrap_or_default();
        if auth != basic && auth != format!("Bearer {TOKEN}") {
            return (
                StatusCode::UNAUTHORIZED,
                "application/json",
                r#"{"messages":[{"type":"WARN","text":"call not properly authenticated"}]}"#.into(),
            );
        }
        if r.method != "POST"
            || r.uri != format!("/servicesNS/{USER}/search/search/jobs/export?output_mode=json")
            || r.header("content-type").as_deref() != Some("application/x-www-form-urlencoded")
        {
            return (StatusCode::NOT_FOUND, "application/json", "{}".into());
        }
        // The form body as Splunk decodes it.
        let search: Option<String> = url::form_urlencoded::parse(r.body.as_bytes())
            .find(|(k, _)| k == "search")
            .map(|(_, v)| v.into_owned());
        if search.as_deref() != Some("savedsearch my-saved-search-name") {
            return (
                StatusCode::BAD_REQUEST,
                "application/json",
                r#"{"messages":[{"type":"FATAL","text":"Error in 'savedsearch' command: Unable to find saved search named 'SECRET-TEXT'."}]}"#.into(),
            );
        }
        match rows.lock().expect("rows").clone() {
            Err(status) => (
                status,
                "application/json",
                r#"{"messages":[{"type":"FATAL","text":"Search not executed: SECRET-TEXT quota"}]}"#
                    .into(),
            ),
            Ok(rows) => {
                let lines: Vec<String> = rows
                    .iter()
                    .enumerate()
                    .map(|(i, count)| {
                        format!(
                            r#"{{"preview":false,"offset":{i},{}"result":{{"count":"{count}","sourcetype":"syslog"}}}}"#,
                            if i + 1 == rows.len() { r#""lastrow":true,"# } else { "" }
                        )
                    })
                    .collect();
                (StatusCode::OK, "application/json", lines.join("\n"))
            }
        }
    })
}

async fn harness(server: &TestServer, metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> Harness {
    let host = server.url("");
    let host = host.trim_end_matches('/').to_string();
    let mut all = vec![("host", host.as_str())];
    all.extend_from_slice(metadata);
    conformance(
        "splunk",
        Setup {
            metadata: &all,
            auth,
            ..Setup::default()
        },
    )
    .await
}

#[tokio::test]
async fn the_first_result_gives_the_value_with_a_token_or_a_password() {
    let rows: Rows = Arc::new(Mutex::new(Ok(vec!["3", "40"])));
    let server = TestServer::start(splunk(rows.clone())).await;
    let h = harness(&server, &[], &[("username", USER), ("apiToken", TOKEN)]).await;
    assert_eq!(h.metric_name, "s0-splunk-my-saved-search-name");
    h.expect(3.0, true).await;
    *rows.lock().unwrap() = Ok(vec!["1.9"]);
    h.expect(1.9, false).await; // int(1.9) = 1, not above activationValue 1
    h.close().await;

    let h = harness(&server, &[], &[("username", USER), ("password", PASSWORD)]).await;
    *rows.lock().unwrap() = Ok(vec!["2"]);
    h.expect(2.0, true).await;
    h.close().await;
}

#[tokio::test]
async fn errors_show_the_status_never_credentials_nor_splunk_text() {
    let rows: Rows = Arc::new(Mutex::new(Ok(vec!["3"])));
    let server = TestServer::start(splunk(rows.clone())).await;
    let h = harness(
        &server,
        &[],
        &[("username", USER), ("password", "wrong-pa55")],
    )
    .await;
    let text = h.expect_error().await.to_string();
    assert!(text.contains("401") && text.contains("splunk"), "{text}");
    assert!(
        !text.contains("wrong-pa55") && !text.contains("properly authenticated"),
        "{text}"
    );
    h.close().await;

    let auth = [("username", USER), ("apiToken", TOKEN)];
    let unknown = harness(&server, &[("savedSearchName", "nope")], &auth).await;
    let text = unknown.expect_error().await.to_string();
    assert!(
        text.contains("400") && !text.contains("SECRET-TEXT"),
        "{text}"
    );
    unknown.close().await;

    let h = harness(&server, &[], &auth).await;
    *rows.lock().unwrap() = Err(StatusCode::SERVICE_UNAVAILABLE);
    let text = h.expect_error().await.to_string();
    assert!(
        text.contains("503") && !text.contains("SECRET-TEXT"),
        "{text}"
    );
    // No result at all: the field is not found.
    *rows.lock().unwrap() = Ok(vec![]);
    let err = h.expect_error().await;
    assert!(matches!(err, ScalerError::Unexpected { .. }), "{err:?}");
    let missing = harness(&server, &[("valueField", "errors")], &auth).await;
    *rows.lock().unwrap() = Ok(vec!["3"]);
    let err = missing.expect_error().await;
    assert!(err.to_string().contains("field errors not found"), "{err}");
    missing.close().await;
    h.close().await;
}
