//! `azure-pipelines` against a fake of the Azure DevOps REST API, following Microsoft's
//! references: authentication with a personal access token as HTTP basic authentication with
//! an empty user name
//! (<https://learn.microsoft.com/azure/devops/organizations/accounts/use-personal-access-tokens-to-authenticate>,
//! 401 for a token it does not know), "Pools - Get Agent Pools"
//! (<https://learn.microsoft.com/rest/api/azure/devops/distributedtask/pools/get-agent-pools>:
//! `GET {organization}/_apis/distributedtask/pools?poolName=`, `{"count", "value": [pool]}`),
//! and a pool's job requests (`GET .../pools/{poolId}/jobrequests`, `{"count", "value":
//! [TaskAgentJobRequest]}` with `result`, `receiveTime`, `demands`, `matchedAgents`;
//! `$top` and `completedRequestCount` as the agent pool pages use them), 404 for an unknown
//! pool, 429 when the token is rate limited.

use std::sync::{Arc, Mutex};

use base64::Engine as _;
use http::StatusCode;

use crate::common::{Harness, Setup, conformance};
use crate::http_server::{Recorded, TestServer, handler};

const PAT: &str = "azp-pat-0123456789abcdef";

#[derive(Default)]
struct Organization {
    /// The job requests of pool 12 (also named "linux-agents"), as JSON objects.
    jobs: Vec<String>,
    throttled: bool,
}

type Shared = Arc<Mutex<Organization>>;

fn json(status: StatusCode, body: String) -> crate::http_server::Answer {
    (status, "application/json; charset=utf-8", body)
}

fn devops(state: Shared) -> crate::http_server::Handler {
    handler(move |r: &Recorded| {
        let expected = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!(":{PAT}"))
        );
        if r.header("authorization").as_deref() != Some(expected.as_str()) {
            return json(
                StatusCode::UNAUTHORIZED,
                r#"{"message":"TF400813: SECRET-TEXT is not authorized"}"#.into(),
            );
        }
        let org = state.lock().expect("organization");
        if org.throttled {
            return json(
                StatusCode::TOO_MANY_REQUESTS,
                r#"{"message":"SECRET-TEXT"}"#.into(),
            );
        }
        let path = r.uri.split('?').next().unwrap_or_default();
        match path {
            "/contoso/_apis/distributedtask/pools" => {
                let pools = match r.query("poolName").as_deref() {
                    Some("linux-agents") => {
                        r#"[{"id":12,"name":"linux-agents","isHosted":false,"poolType":"automation","size":3}]"#
                    }
                    Some("twins") => r#"[{"id":1,"name":"twins"},{"id":2,"name":"twins"}]"#,
                    _ => "[]",
                };
                let count = pools.matches("\"id\"").count();
                json(
                    StatusCode::OK,
                    format!(r#"{{"count":{count},"value":{pools}}}"#),
                )
            }
            "/contoso/_apis/distributedtask/pools/12/jobrequests" => {
                let top = r.query("$top").and_then(|t| t.parse::<usize>().ok());
                let unfinished = r.query("completedRequestCount").as_deref() == Some("0");
                let jobs: Vec<&String> = org
                    .jobs
                    .iter()
                    .filter(|j| !unfinished || !j.contains("\"result\""))
                    .take(top.unwrap_or(usize::MAX))
                    .collect();
                json(
                    StatusCode::OK,
                    format!(
                        r#"{{"count":{},"value":[{}]}}"#,
                        jobs.len(),
                        jobs.iter()
                            .map(|j| j.as_str())
                            .collect::<Vec<_>>()
                            .join(",")
                    ),
                )
            }
            _ => json(
                StatusCode::NOT_FOUND,
                r#"{"message":"TF400860: SECRET-TEXT pool not found"}"#.into(),
            ),
        }
    })
}

fn job(id: u32, demands: &[&str], parent: &str, state: &str) -> String {
    let extra = match state {
        "done" => {
            r#","result":"succeeded","receiveTime":"2026-11-20T10:00:00Z","finishTime":"2026-11-20T10:01:00Z""#
        }
        "running" => r#","receiveTime":"2026-11-20T10:00:00Z""#,
        _ => "",
    };
    let demands: Vec<String> = demands.iter().map(|d| format!("\"{d}\"")).collect();
    format!(
        r#"{{"requestId":{id},"queueTime":"2026-11-20T09:59:00Z","serviceOwner":"00025394-6065-48ca-87d9-7f5672854ef7","hostId":"h","scopeId":"s","planType":"Build","planId":"p","jobId":"j","demands":[{}],"matchedAgents":[{{"id":1,"name":"{parent}","version":"3.232.0","enabled":true,"status":"online"}}],"poolId":12,"orchestrationId":"o","priority":0{extra}}}"#,
        demands.join(",")
    )
}

async fn harness(server: &TestServer, metadata: &[(&str, &str)], pat: &str) -> Harness {
    let url = server.url("/contoso");
    conformance(
        "azure-pipelines",
        Setup {
            metadata,
            env: &[("AZP_URL", url.as_str())],
            auth: &[("personalAccessToken", pat)],
            ..Setup::default()
        },
    )
    .await
}

fn organization() -> Shared {
    let org = Organization {
        jobs: vec![
            job(
                1,
                &["maven", "java", "Agent.Version -gtVersion 3.0"],
                "template-a",
                "queued",
            ),
            job(2, &["maven"], "template-b", "queued"),
            job(3, &["maven", "java"], "template-a", "done"),
            job(4, &["maven", "java"], "template-a", "running"),
            job(5, &["dotnet"], "template-b", "queued"),
        ],
        throttled: false,
    };
    Arc::new(Mutex::new(org))
}

#[tokio::test]
async fn waiting_jobs_are_counted_by_demands_parent_or_all() {
    let state = organization();
    let server = TestServer::start(devops(state.clone())).await;
    // The documented example: demands maven,java -> jobs 1 and 2.
    let h = harness(&server, &[], PAT).await;
    assert_eq!(h.metric_name, "s0-azure-pipelines-12");
    h.expect(2.0, true).await;
    assert_eq!(
        server.last_request().uri,
        "/contoso/_apis/distributedtask/pools/12/jobrequests?$top=250"
    );
    h.close().await;
    let all = harness(&server, &[("demands", "")], PAT).await;
    all.expect(3.0, true).await;
    all.close().await;
    let strict = harness(&server, &[("requireAllDemands", "true")], PAT).await;
    strict.expect(1.0, true).await;
    strict.close().await;
    // parent by pool name, resolved once: no $top.
    let parent = harness(
        &server,
        &[
            ("poolID", ""),
            ("poolName", "linux-agents"),
            ("demands", ""),
            ("parent", "template-b"),
        ],
        PAT,
    )
    .await;
    assert_eq!(parent.metric_name, "s0-azure-pipelines-linux-agents");
    parent.expect(2.0, true).await;
    parent.expect(2.0, true).await;
    let lookups = server
        .requests()
        .iter()
        .filter(|r| r.uri.starts_with("/contoso/_apis/distributedtask/pools?"))
        .count();
    assert_eq!(lookups, 1);
    assert_eq!(
        server.last_request().uri,
        "/contoso/_apis/distributedtask/pools/12/jobrequests"
    );
    parent.close().await;
    // None waiting: inactive.
    state
        .lock()
        .expect("a value")
        .jobs
        .retain(|j| j.contains("\"result\""));
    let h = harness(
        &server,
        &[("fetchUnfinishedJobsOnly", "true"), ("demands", "")],
        PAT,
    )
    .await;
    h.expect(0.0, false).await;
    assert!(
        server
            .last_request()
            .uri
            .ends_with("jobrequests?completedRequestCount=0")
    );
    h.close().await;
}

#[tokio::test]
async fn unknown_pools_refused_tokens_and_rate_limits_are_named_without_devops_text() {
    let state = organization();
    let server = TestServer::start(devops(state.clone())).await;
    for (name, expected) in [
        ("missing", "agent pool with name `missing` not found"),
        ("twins", "found 2 agent pool with name `twins`"),
    ] {
        let h = harness(&server, &[("poolID", ""), ("poolName", name)], PAT).await;
        let text = h.expect_error().await.to_string();
        assert!(text.contains(expected), "{text}");
        h.close().await;
    }
    let h = harness(&server, &[("poolID", "99")], PAT).await;
    let text = h.expect_error().await.to_string();
    assert!(
        text.contains("404") && text.contains("organizationURL"),
        "{text}"
    );
    assert!(!text.contains("SECRET-TEXT"), "{text}");
    h.close().await;
    let h = harness(&server, &[], "wrong-pat-value").await;
    let text = h.expect_error().await.to_string();
    assert!(
        text.contains("401") && text.contains("personalAccessToken"),
        "{text}"
    );
    assert!(
        !text.contains("SECRET-TEXT") && !text.contains("wrong-pat-value"),
        "{text}"
    );
    h.close().await;
    state.lock().expect("fake state").throttled = true;
    let h = harness(&server, &[], PAT).await;
    let text = h.expect_error().await.to_string();
    assert!(
        text.contains("429") && text.contains("rate limit"),
        "{text}"
    );
    h.close().await;
}
