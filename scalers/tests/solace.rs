//! The `solace-event-queue` scaler, built from its documented example through the registry,
//! against the test's own HTTP servers answering as a Solace broker's SEMP v2 monitor API does
//! (https://docs.solace.com/Admin/SEMP/SEMP-API-Ref.htm: `GET /SEMP/v2/monitor/msgVpns/{msgVpnName}`
//! and `.../queues/{queueName}`, `select` of the attributes asked for, basic authentication,
//! every answer with `meta.responseCode`, errors with `meta.error`).

#[allow(dead_code)]
mod common;
#[allow(dead_code)]
#[path = "common/http.rs"]
mod http_server;

use common::{Harness, Setup, conformance};
use http::StatusCode;
use http_server::{Recorded, TestServer, handler};

/// `admin:s3mp` in basic authentication.
const BASIC: &str = "Basic YWRtaW46czNtcA==";

/// A broker whose Message VPN `default` is in `state` and whose queue `orders` holds `count`
/// messages (`spool` bytes, `rate` messages per second).
fn broker(state: &'static str, count: i64, spool: i64, rate: i64) -> http_server::Handler {
    handler(move |r: &Recorded| {
        let error = |status: StatusCode, code: i64, text: &str| {
            (
                status,
                "application/json",
                format!(
                    r#"{{"meta":{{"responseCode":{code},"error":{{"code":1,"description":"{text}","status":"UNAUTHORIZED"}}}}}}"#
                ),
            )
        };
        if r.header("authorization").as_deref() != Some(BASIC) {
            return error(
                StatusCode::UNAUTHORIZED,
                401,
                "SEMP secret text: bad credentials",
            );
        }
        let path = r.uri.split('?').next().unwrap_or_default();
        match (path, r.query("select").as_deref()) {
            ("/SEMP/v2/monitor/msgVpns/default", Some("state")) => (
                StatusCode::OK,
                "application/json",
                format!(r#"{{"data":{{"state":"{state}"}},"meta":{{"responseCode":200}}}}"#),
            ),
            (
                "/SEMP/v2/monitor/msgVpns/default/queues/orders",
                Some("msgs,msgSpoolUsage,averageRxMsgRate"),
            ) => (
                StatusCode::OK,
                "application/json",
                format!(
                    r#"{{"collections":{{"msgs":{{"count":{count}}}}},"data":{{"msgSpoolUsage":{spool},"averageRxMsgRate":{rate}}},"meta":{{"responseCode":200}}}}"#
                ),
            ),
            _ => error(
                StatusCode::BAD_REQUEST,
                400,
                "SEMP secret text: no such object",
            ),
        }
    })
}

async fn harness(bases: &str, password: &str) -> Harness {
    conformance(
        "solace-event-queue",
        Setup {
            metadata: &[
                ("solaceSempBaseURL", bases),
                ("messageVpn", "default"),
                ("queueName", "orders"),
            ],
            auth: &[("username", "admin"), ("password", password)],
            ..Setup::default()
        },
    )
    .await
}

#[tokio::test]
async fn the_message_count_is_read_from_the_first_broker_whose_vpn_is_up() {
    let up = TestServer::start(broker("up", 12, 2048, 5)).await;
    let h = harness(&up.url(""), "s3mp").await;
    assert_eq!(h.metric_name, "s0-solace-orders-msgcount");
    h.expect(12.0, true).await;
    let asked: Vec<String> = up.requests().iter().map(|r| r.uri.clone()).collect();
    assert_eq!(
        asked,
        vec![
            "/SEMP/v2/monitor/msgVpns/default?select=state".to_string(),
            "/SEMP/v2/monitor/msgVpns/default/queues/orders?select=msgs,msgSpoolUsage,averageRxMsgRate"
                .to_string(),
        ]
    );
    h.close().await;

    // An HA pair whose first broker is the standby (its VPN is not up): the second answers,
    // and the next read starts there.
    let standby = TestServer::start(broker("down", 0, 0, 0)).await;
    let active = TestServer::start(broker("up", 0, 0, 0)).await;
    let bases = format!("{},{}", standby.url(""), active.url(""));
    let h = harness(&bases, "s3mp").await;
    h.expect(0.0, false).await;
    assert_eq!(standby.requests().len(), 1, "only the state of the standby");
    h.expect(0.0, false).await;
    assert_eq!(
        standby.requests().len(),
        1,
        "the next read starts at the active broker"
    );
    assert_eq!(active.requests().len(), 4);
    h.close().await;
}

#[tokio::test]
async fn errors_name_each_broker_never_the_password_nor_semp_text() {
    let up = TestServer::start(broker("up", 1, 0, 0)).await;
    let h = harness(&format!("http://127.0.0.1:1,{}", up.url("")), "wr0ng-pass").await;
    let err = keda_scalers::error::error_chain(&h.expect_error().await);
    assert!(err.contains("broker 1 (http://127.0.0.1:1/)"), "{err}");
    assert!(err.contains("broker 2"), "{err}");
    assert!(err.contains("401"), "{err}");
    assert!(err.contains("queueName"), "{err}");
    assert!(!err.contains("wr0ng-pass"), "{err}");
    assert!(!err.contains("SEMP secret text"), "{err}");
    h.close().await;
}
