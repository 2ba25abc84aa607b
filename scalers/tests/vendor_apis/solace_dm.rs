//! `solace-direct-messaging` against a fake of the Solace PubSub+ SEMP v1 ("legacy SEMP")
//! management API, following its reference (<https://docs.solace.com/Admin/SEMP/Using-Legacy-SEMP.htm>
//! and the `show client` command's reply schema): `POST /SEMP` with an `<rpc>` XML request,
//! HTTP basic authentication (`401` otherwise), answered `200` with `<rpc-reply
//! semp-version=...><rpc><show><client><primary-virtual-router><client>...</client>...
//! </primary-virtual-router></client></show></rpc><execute-result code="ok"/></rpc-reply>`;
//! a request it cannot parse answers `<execute-result code="fail" reason="..."/>`. The fake
//! matches `<name>*pattern*</name>` as the broker's wildcard does.

use std::sync::{Arc, Mutex};

use http::StatusCode;

use crate::common::{Harness, Setup, conformance};
use crate::http_server::{Recorded, TestServer, handler};

/// `admin:s3mp-pw`.
const BASIC: &str = "Basic YWRtaW46czNtcC1wdw==";

#[derive(Clone, Copy, Default)]
struct Figures {
    msg_rate: i64,
    d1_msgs: i64,
    d1_work: i64,
}

fn client(name: &str, vpn: &str, f: Figures, queues: bool) -> String {
    let queues = if queues {
        format!(
            "<client-queue><queue-priority>D-1</queue-priority><length-msgs>{}</length-msgs><length-work>{}</length-work><high-water-mark-work>9</high-water-mark-work><max-work>10000</max-work><discards-msgs>0</discards-msgs><delivered-msgs>12</delivered-msgs></client-queue>\
             <client-queue><queue-priority>C-1</queue-priority><length-msgs>1000</length-msgs><length-work>1000</length-work></client-queue>",
            f.d1_msgs, f.d1_work
        )
    } else {
        String::new()
    };
    format!(
        "<client><client-address>10.1.2.3:55555</client-address><name>{name}</name><message-vpn>{vpn}</message-vpn><slow-subscriber>false</slow-subscriber><client-username>app</client-username>\
         <stats><current-egress-rate-per-second>{}</current-egress-rate-per-second><average-egress-rate-per-minute>{}</average-egress-rate-per-minute><current-egress-byte-rate-per-second>{}</current-egress-byte-rate-per-second><average-egress-byte-rate-per-minute>0</average-egress-byte-rate-per-minute></stats>{queues}</client>",
        f.msg_rate,
        f.msg_rate,
        f.msg_rate * 100
    )
}

fn semp(figures: Arc<Mutex<Figures>>) -> crate::http_server::Handler {
    handler(move |r: &Recorded| {
        if r.header("authorization").as_deref() != Some(BASIC) {
            return (
                StatusCode::UNAUTHORIZED,
                "text/plain",
                "401 Unauthorized SECRET-TEXT".into(),
            );
        }
        if r.method != "POST" || r.uri != "/SEMP" {
            return (StatusCode::NOT_FOUND, "text/plain", String::new());
        }
        let Some(pattern) = r
            .body
            .strip_prefix("<rpc><show><client><name>*")
            .and_then(|rest| rest.split_once("*</name>"))
            .map(|(pattern, _)| pattern.to_string())
            .filter(|_| r.header("content-type").as_deref() == Some("application/xml"))
        else {
            return (
                StatusCode::OK,
                "text/xml",
                r#"<rpc-reply semp-version="soltr/10_4"><parse-error>SECRET-TEXT</parse-error><execute-result code="fail" reason="parse error"/></rpc-reply>"#.into(),
            );
        };
        let queues = r.body.contains("<queues></queues>");
        let f = *figures.lock().expect("figures");
        let clients: String = [
            ("direct-consumer-1", "default", f),
            (
                "direct-consumer-2",
                "other-vpn",
                Figures {
                    msg_rate: 900,
                    d1_msgs: 900,
                    d1_work: 900,
                },
            ),
            (
                "unrelated",
                "default",
                Figures {
                    msg_rate: 700,
                    d1_msgs: 700,
                    d1_work: 700,
                },
            ),
        ]
        .iter()
        .filter(|(name, _, _)| name.contains(&pattern))
        .map(|(name, vpn, f)| client(name, vpn, *f, queues))
        .collect();
        (
            StatusCode::OK,
            "text/xml",
            format!(
                r#"<rpc-reply semp-version="soltr/10_4"><rpc><show><client><primary-virtual-router>{clients}</primary-virtual-router></client></show></rpc><execute-result code="ok"/></rpc-reply>"#
            ),
        )
    })
}

async fn harness(bases: &str, password: &str) -> Harness {
    conformance(
        "solace-direct-messaging",
        Setup {
            metadata: &[
                ("solaceSempBaseURL", bases),
                ("aggregatedClientTxByteRateTarget", ""),
                ("aggregatedClientTxMsgRateTarget", "50"),
            ],
            auth: &[("username", "admin"), ("password", password)],
            ..Setup::default()
        },
    )
    .await
}

#[tokio::test]
async fn the_rate_adds_the_queued_messages_and_fails_over_to_the_backup() {
    let figures = Arc::new(Mutex::new(Figures {
        msg_rate: 10,
        d1_msgs: 0,
        d1_work: 0,
    }));
    let broker = TestServer::start(semp(figures.clone())).await;
    let down = TestServer::start(handler(|_: &Recorded| {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain",
            "down SECRET-TEXT".into(),
        )
    }))
    .await;
    let bases = format!("{},{}", down.url(""), broker.url(""));
    let h = harness(&bases, "s3mp-pw").await;
    assert_eq!(
        h.metric_name,
        "s0-solace-dm-direct-consumer-aggregatedClientTxMsgRateTarget"
    );
    h.expect(10.0, true).await; // always active, as KEDA
    figures.lock().unwrap().d1_msgs = 4;
    h.expect(22.0, true).await; // 10 + 4 x queuedMessagesFactor 3
    h.close().await;
    assert_eq!(down.requests().len(), 4);
    assert!(
        broker
            .requests()
            .iter()
            .all(|r| r.body.contains("*direct-consumer*"))
    );
}

#[tokio::test]
async fn errors_show_the_status_never_the_answer_or_the_password() {
    let figures = Arc::new(Mutex::new(Figures::default()));
    let broker = TestServer::start(semp(figures)).await;
    let wrong = harness(&broker.url(""), "wr0ng-pw").await;
    let text = wrong.expect_error().await.to_string();
    assert!(text.contains("401") && text.contains("SEMP v1"), "{text}");
    assert!(
        !text.contains("wr0ng-pw") && !text.contains("SECRET-TEXT"),
        "{text}"
    );
    wrong.close().await;
}
