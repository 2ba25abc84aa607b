//! `pulsar` against a fake of Pulsar's admin REST API, following
//! <https://pulsar.apache.org/admin-rest-api/#operation/PersistentTopics_getStats> (`GET
//! /admin/v2/persistent/{tenant}/{namespace}/{topic}/stats`, answered `TopicStats` with
//! `subscriptions.<name>.msgBacklog`; an unknown topic 404 `{"reason":"Topic not found"}`),
//! token authentication <https://pulsar.apache.org/docs/security-jwt/> (`Authorization: Bearer
//! <token>`, 401 `{"reason":"Authentication required"}` otherwise) and the
//! `X-Pulsar-Auth-Method-Name` header the broker reads to pick the provider.

use std::sync::{Arc, Mutex};

use http::StatusCode;

use crate::common::{Harness, Setup, conformance};
use crate::http_server::{Recorded, TestServer, handler};

fn pulsar(backlog: Arc<Mutex<i64>>) -> crate::http_server::Handler {
    handler(move |r: &Recorded| {
        if r.header("authorization").as_deref() != Some("Bearer puls4r-token")
            || r.header("x-pulsar-auth-method-name").as_deref() != Some("token")
        {
            return (
                StatusCode::UNAUTHORIZED,
                "application/json",
                r#"{"reason":"Authentication required SECRET-TEXT"}"#.into(),
            );
        }
        if r.method != "GET" || r.uri != "/admin/v2/persistent/public/default/my-topic/stats" {
            return (
                StatusCode::NOT_FOUND,
                "application/json",
                r#"{"reason":"Topic not found SECRET-TEXT"}"#.into(),
            );
        }
        let n = *backlog.lock().expect("backlog");
        (
            StatusCode::OK,
            "application/json",
            serde_json::json!({
                "msgRateIn": 0.0, "msgThroughputIn": 0.0, "msgInCounter": 100,
                "averageMsgSize": 12.0, "storageSize": 1200, "backlogSize": 120,
                "publishers": [], "replication": {}, "deduplicationStatus": "Disabled",
                "subscriptions": {
                    "sub1": {"msgRateOut": 0.0, "msgBacklog": n, "msgBacklogNoDelayed": n,
                        "type": "Shared", "consumers": [], "isDurable": true},
                    "other": {"msgBacklog": 999, "type": "Exclusive", "consumers": []}
                }
            })
            .to_string(),
        )
    })
}

async fn harness(server: &TestServer, topic: &str, token: &str) -> Harness {
    let admin = server.url("");
    let admin = admin.trim_end_matches('/');
    conformance(
        "pulsar",
        Setup {
            metadata: &[("adminURL", admin), ("topic", topic)],
            auth: &[("bearerToken", token)],
            ..Setup::default()
        },
    )
    .await
}

#[tokio::test]
async fn the_value_is_the_subscription_backlog_and_errors_show_the_status_only() {
    let backlog = Arc::new(Mutex::new(2));
    let server = TestServer::start(pulsar(backlog.clone())).await;
    let topic = "persistent://public/default/my-topic";
    let h = harness(&server, topic, "puls4r-token").await;
    assert_eq!(
        h.metric_name,
        "s0-pulsar-persistent---public-default-my-topic-sub1"
    );
    h.expect(2.0, false).await; // not above activationMsgBacklogThreshold 2
    *backlog.lock().unwrap() = 9;
    h.expect(9.0, true).await;
    h.close().await;

    let wrong = harness(&server, topic, "wr0ng-token").await;
    let text = wrong.expect_error().await.to_string();
    assert!(text.contains("401") && text.contains("pulsar"), "{text}");
    assert!(
        !text.contains("wr0ng-token") && !text.contains("SECRET-TEXT"),
        "{text}"
    );
    wrong.close().await;

    let missing = harness(&server, "persistent://public/default/gone", "puls4r-token").await;
    let text = missing.expect_error().await.to_string();
    assert!(
        text.contains("404") && !text.contains("SECRET-TEXT"),
        "{text}"
    );
    missing.close().await;
}
