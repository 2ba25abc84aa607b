//! The `forgejo-runner` scaler, built from its documented example through the registry, against
//! the test's own HTTP server answering as Forgejo's API does. The shapes follow Forgejo's API
//! reference: `GET /orgs/{org}/actions/runners/jobs` and the `ActionRunJob` model
//! (https://code.forgejo.org/api/swagger#/organization/getOrgRunnerJobs, token authentication
//! https://forgejo.org/docs/latest/user/api-usage/#authentication).

#[allow(dead_code)]
mod common;
#[allow(dead_code)]
#[path = "common/http.rs"]
mod http_server;

use common::{Harness, Setup, conformance};
use http::StatusCode;
use http_server::{Recorded, TestServer, handler};
use keda_scalers::ScalerError;

const TOKEN: &str = "f0rgej0-t0ken";
const JOBS_PATH: &str = "/forgejo/api/v1/orgs/my-org/actions/runners/jobs";

/// Forgejo's answer to a request: 401 without the token, 404 on another path, else `jobs`
/// waiting for runners with the labels asked for.
fn forgejo(jobs: &'static [&'static [&'static str]]) -> http_server::Handler {
    handler(move |r: &Recorded| {
        // https://forgejo.org/docs/latest/user/api-usage/#authentication: `Authorization: token ...`.
        if r.header("authorization").as_deref() != Some(&format!("token {TOKEN}")) {
            return (
                StatusCode::UNAUTHORIZED,
                "application/json",
                r#"{"message":"token is required","url":"/api/swagger"}"#.into(),
            );
        }
        if r.method != "GET" || !r.uri.starts_with(&format!("{JOBS_PATH}?")) {
            return (StatusCode::NOT_FOUND, "application/json", "{}".into());
        }
        let asked = r.query("labels").unwrap_or_default();
        let asked: Vec<&str> = asked.split(',').collect();
        let listed: Vec<String> = jobs
            .iter()
            .enumerate()
            .filter(|(_, runs_on)| runs_on.iter().all(|l| asked.contains(l)))
            .map(|(i, runs_on)| {
                format!(
                    r#"{{"id":{i},"repo_id":3,"owner_id":2,"name":"build","needs":[],"runs_on":{},"task_id":0,"status":"waiting"}}"#,
                    serde_json::to_string(runs_on).expect("labels")
                )
            })
            .collect();
        (
            StatusCode::OK,
            "application/json",
            format!("[{}]", listed.join(",")),
        )
    })
}

async fn harness(server: &TestServer, token: &str) -> Harness {
    let address = server.url("/forgejo/");
    conformance(
        "forgejo-runner",
        Setup {
            metadata: &[("address", &address)],
            auth: &[("token", token)],
            ..Setup::default()
        },
    )
    .await
}

#[tokio::test]
async fn the_value_is_the_number_of_waiting_jobs_and_active_iff_one_waits() {
    let server = TestServer::start(forgejo(&[
        &["docker"],
        &["docker", "ubuntu-22.04"],
        &["windows"],
    ]))
    .await;
    let h = harness(&server, TOKEN).await;
    h.expect(2.0, true).await;
    let request = server.last_request();
    assert_eq!(request.method, "GET");
    assert_eq!(
        request.query("labels").as_deref(),
        Some("docker,ubuntu-22.04")
    );
    assert!(request.uri.starts_with(JOBS_PATH), "{}", request.uri);
    h.close().await;

    let server = TestServer::start(forgejo(&[&["windows"]])).await;
    let h = harness(&server, TOKEN).await;
    h.expect(0.0, false).await;
    h.close().await;
}

#[tokio::test]
async fn errors_show_the_status_never_the_token_nor_forgejo_text() {
    let server = TestServer::start(forgejo(&[])).await;
    let h = harness(&server, "wrong-t0ken").await;
    let err = h.expect_error().await;
    assert!(matches!(err, ScalerError::Query { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("401"), "{text}");
    assert!(text.contains("forgejo-runner"), "{text}");
    assert!(!text.contains("wrong-t0ken"), "{text}");
    assert!(!text.contains("token is required"), "{text}");

    // Throttled (Forgejo's rate limiter answers 429) and an answer that is not a job list.
    let server = TestServer::start(handler(|r: &Recorded| {
        if r.uri.contains("throttle") {
            (
                StatusCode::TOO_MANY_REQUESTS,
                "text/plain",
                "slow down".into(),
            )
        } else {
            (StatusCode::OK, "application/json", r#"{"jobs":[]}"#.into())
        }
    }))
    .await;
    let h = harness(&server, TOKEN).await;
    let err = h.expect_error().await;
    assert!(matches!(err, ScalerError::Unexpected { .. }), "{err:?}");
    assert!(err.to_string().contains("not a JSON list of jobs"), "{err}");
    let address = server.url("/throttle/");
    let h = conformance(
        "forgejo-runner",
        Setup {
            metadata: &[("address", &address)],
            auth: &[("token", TOKEN)],
            ..Setup::default()
        },
    )
    .await;
    let err = h.expect_error().await;
    assert!(err.to_string().contains("429"), "{err}");
    assert!(!err.to_string().contains("slow down"), "{err}");
}
