//! `new-relic` against a fake of New Relic's NerdGraph API, following
//! <https://docs.newrelic.com/docs/apis/nerdgraph/get-started/introduction-new-relic-nerdgraph/>
//! (`POST /graphql`, JSON body `{"query", "variables"}`, the user key in the `Api-Key` header,
//! 401 without a valid key), the NRQL tutorial
//! <https://docs.newrelic.com/docs/apis/nerdgraph/examples/nerdgraph-nrql-tutorial/>
//! (`actor.account(id).nrql(query).results`, GraphQL errors with HTTP 200 and
//! `extensions.errorClass`) and NerdGraph's rate limits
//! <https://docs.newrelic.com/docs/apis/nerdgraph/nerdgraph-rate-limits/> (429).

use std::sync::{Arc, Mutex};

use http::StatusCode;
use keda_scalers::ScalerError;
use keda_scalers::http_client::VendorEndpoints;

use crate::common::{Harness, Setup, conformance};
use crate::http_server::{Recorded, TestServer, handler};

const KEY: &str = "NRAK-TESTKEY0123456789";
const ACCOUNT: i64 = 1_234_567;

type Reply = Arc<Mutex<(StatusCode, String)>>;

fn rows(rows: &str) -> String {
    format!(r#"{{"data":{{"actor":{{"account":{{"nrql":{{"results":{rows}}}}}}}}}}}"#)
}

/// NerdGraph: 401 without the key; a GraphQL error for a body that is not a query with the
/// `Nrql!` and `Int!` variables, or for another account (FORBIDDEN, as NerdGraph answers an
/// account the key cannot read); else the reply set by the test.
fn nerdgraph(reply: Reply) -> crate::http_server::Handler {
    handler(move |r: &Recorded| {
        if r.header("api-key").as_deref() != Some(KEY) {
            return (
                StatusCode::UNAUTHORIZED,
                "application/json",
                r#"{"errors":[{"message":"Invalid API key"}]}"#.into(),
            );
        }
        if r.method != "POST" || r.uri != "/graphql" {
            return (StatusCode::NOT_FOUND, "text/plain", "not found".into());
        }
        let graphql_error = |class: &str| {
            (
                StatusCode::OK,
                "application/json",
                format!(
                    r#"{{"data":{{"actor":{{"account":null}}}},"errors":[{{"message":"refused: SECRET-TEXT","extensions":{{"errorClass":"{class}"}}}}]}}"#
                ),
            )
        };
        if r.header("content-type").as_deref() != Some("application/json") {
            return graphql_error("INVALID_INPUT");
        }
        let Ok(body) = serde_json::from_str::<serde_json::Value>(&r.body) else {
            return graphql_error("INVALID_INPUT");
        };
        let query = body["query"].as_str().unwrap_or_default();
        if !query.contains("$query: Nrql!")
            || !query.contains("$accountId: Int!")
            || !query.contains("nrql(query: $query)")
            || !body["variables"]["query"].is_string()
        {
            return graphql_error("INVALID_INPUT");
        }
        if body["variables"]["accountId"].as_i64() != Some(ACCOUNT) {
            return graphql_error("FORBIDDEN");
        }
        let (status, answer) = reply.lock().expect("reply").clone();
        (status, "application/json", answer)
    })
}

async fn harness(server: &TestServer, metadata: &[(&str, &str)]) -> Harness {
    let fake = url::Url::parse(&server.url("/")).expect("fake URL");
    conformance(
        "new-relic",
        Setup {
            metadata,
            auth: &[("queryKey", KEY)],
            vendor_endpoints: VendorEndpoints::default().with("api.newrelic.com", fake),
            ..Setup::default()
        },
    )
    .await
}

#[tokio::test]
async fn the_value_is_the_first_rows_number_and_the_nrql_travels_as_a_variable() {
    let reply = Arc::new(Mutex::new((
        StatusCode::OK,
        rows(r#"[{"average.duration":35.5}]"#),
    )));
    let server = TestServer::start(nerdgraph(reply.clone())).await;
    let h = harness(&server, &[]).await;
    assert_eq!(h.metric_name, "s0-new-relic");
    h.expect(35.5, true).await;
    let request = server.last_request();
    let body: serde_json::Value = serde_json::from_str(&request.body).expect("JSON body");
    assert_eq!(
        body["variables"]["query"],
        "SELECT average(duration) FROM Transaction WHERE appName = 'worker' SINCE 1 minute ago"
    );
    assert!(!body["query"].as_str().unwrap().contains("SELECT"));
    // At activationThreshold (20): inactive.
    *reply.lock().unwrap() = (StatusCode::OK, rows(r#"[{"average.duration":20}]"#));
    h.expect(20.0, false).await;
    // The example sets noDataError: no row is an error; without it, 0.
    *reply.lock().unwrap() = (StatusCode::OK, rows("[]"));
    let err = h.expect_error().await;
    assert!(matches!(err, ScalerError::Unexpected { .. }), "{err:?}");
    assert!(err.to_string().contains("returned no results"), "{err}");
    let lenient = harness(&server, &[("noDataError", "false")]).await;
    lenient.expect(0.0, false).await;
    lenient.close().await;
    h.close().await;
}

#[tokio::test]
async fn refusals_errors_and_throttling_are_named_without_key_or_new_relic_text() {
    let reply = Arc::new(Mutex::new((StatusCode::OK, rows(r#"[{"count":1}]"#))));
    let server = TestServer::start(nerdgraph(reply.clone())).await;
    // Another account: NerdGraph's FORBIDDEN GraphQL error.
    let h = harness(&server, &[("account", "42")]).await;
    let text = h.expect_error().await.to_string();
    assert!(text.contains("errorClass FORBIDDEN"), "{text}");
    assert!(!text.contains("SECRET-TEXT"), "{text}");
    h.close().await;

    let h = harness(&server, &[]).await;
    *reply.lock().unwrap() = (
        StatusCode::TOO_MANY_REQUESTS,
        r#"{"errors":[{"message":"SECRET-TEXT"}]}"#.into(),
    );
    let text = h.expect_error().await.to_string();
    assert!(
        text.contains("429") && text.contains("rate limit"),
        "{text}"
    );
    assert!(
        !text.contains("SECRET-TEXT") && !text.contains(KEY),
        "{text}"
    );
    h.close().await;

    let fake = url::Url::parse(&server.url("/")).expect("fake URL");
    let wrong = conformance(
        "new-relic",
        Setup {
            auth: &[("queryKey", "NRAK-WRONGKEY")],
            vendor_endpoints: VendorEndpoints::default().with("api.newrelic.com", fake),
            ..Setup::default()
        },
    )
    .await;
    let text = wrong.expect_error().await.to_string();
    assert!(text.contains("401") && text.contains("queryKey"), "{text}");
    assert!(
        !text.contains("NRAK-WRONGKEY") && !text.contains("Invalid API key"),
        "{text}"
    );
    wrong.close().await;
}
