//! `nsq` against fakes of nsqlookupd and nsqd, following NSQ's HTTP API references:
//! nsqlookupd <https://nsq.io/components/nsqlookupd.html#get-lookup> (`GET /lookup?topic=`,
//! answered `{"channels":[...],"producers":[{"broadcast_address":...,"http_port":...}]}`; an
//! unknown topic 404 `{"message":"TOPIC_NOT_FOUND"}`; a missing `topic` 400
//! `{"message":"MISSING_ARG_TOPIC"}`) and nsqd <https://nsq.io/components/nsqd.html#get-stats>
//! (`GET /stats?format=json&topic=`, answered `{"version":...,"health":"OK","topics":[{
//! "topic_name":...,"depth":N,"channels":[{"channel_name":...,"depth":N,"paused":false}]}]}`).

use std::sync::{Arc, Mutex};

use http::StatusCode;

use crate::common::{Harness, Setup, conformance};
use crate::http_server::{Recorded, TestServer, handler};

/// One nsqd: its topic's depth and its channels (name, depth, paused).
#[derive(Clone, Default)]
struct Nsqd {
    topic_depth: i64,
    channels: Vec<(&'static str, i64, bool)>,
}

fn nsqd(state: Arc<Mutex<Nsqd>>) -> crate::http_server::Handler {
    handler(move |r: &Recorded| {
        let path = r.uri.split('?').next().unwrap_or_default();
        if r.method != "GET" || path != "/stats" {
            return (
                StatusCode::NOT_FOUND,
                "application/json",
                r#"{"message":"NOT_FOUND"}"#.into(),
            );
        }
        assert_eq!(r.query("format").as_deref(), Some("json"));
        assert_eq!(r.query("include_clients").as_deref(), Some("false"));
        let s = state.lock().expect("nsqd").clone();
        let channels: Vec<serde_json::Value> = s
            .channels
            .iter()
            .map(|(name, depth, paused)| {
                serde_json::json!({"channel_name": name, "depth": depth, "backend_depth": 0,
                    "in_flight_count": 0, "paused": paused, "clients": []})
            })
            .collect();
        let topics = if r.query("topic").as_deref() == Some("orders") {
            serde_json::json!([{"topic_name": "orders", "depth": s.topic_depth,
                "backend_depth": 0, "message_count": 100, "paused": false, "channels": channels}])
        } else {
            serde_json::json!([])
        };
        (
            StatusCode::OK,
            "application/json",
            serde_json::json!({"version": "1.3.0", "health": "OK", "start_time": 1_700_000_000,
                "topics": topics, "memory": {}, "producers": []})
            .to_string(),
        )
    })
}

fn lookupd(producers: Arc<Mutex<Vec<u16>>>) -> crate::http_server::Handler {
    handler(move |r: &Recorded| {
        let path = r.uri.split('?').next().unwrap_or_default();
        if r.method != "GET" || path != "/lookup" {
            return (
                StatusCode::NOT_FOUND,
                "application/json",
                r#"{"message":"NOT_FOUND"}"#.into(),
            );
        }
        match r.query("topic").as_deref() {
            None => (
                StatusCode::BAD_REQUEST,
                "application/json",
                r#"{"message":"MISSING_ARG_TOPIC"}"#.into(),
            ),
            Some("orders") => {
                let producers: Vec<serde_json::Value> = producers
                    .lock()
                    .expect("producers")
                    .iter()
                    .map(|port| serde_json::json!({"remote_address": "127.0.0.1:40000",
                        "hostname": "nsqd", "broadcast_address": "127.0.0.1", "tcp_port": 4150,
                        "http_port": port, "version": "1.3.0", "tombstones": [false], "topics": ["orders"]}))
                    .collect();
                (
                    StatusCode::OK,
                    "application/json",
                    serde_json::json!({"channels": ["workers"], "producers": producers})
                        .to_string(),
                )
            }
            Some(_) => (
                StatusCode::NOT_FOUND,
                "application/json",
                r#"{"message":"TOPIC_NOT_FOUND SECRET-TEXT"}"#.into(),
            ),
        }
    })
}

async fn harness(lookupds: &[&TestServer], topic: &str) -> Harness {
    let addresses: Vec<String> = lookupds
        .iter()
        .map(|s| {
            s.url("")
                .trim_start_matches("http://")
                .trim_end_matches('/')
                .to_string()
        })
        .collect();
    let addresses = addresses.join(",");
    conformance(
        "nsq",
        Setup {
            metadata: &[
                ("nsqLookupdHTTPAddresses", addresses.as_str()),
                ("topic", topic),
                ("channel", "workers"),
            ],
            ..Setup::default()
        },
    )
    .await
}

fn port(server: &TestServer) -> u16 {
    url::Url::parse(&server.url(""))
        .expect("url")
        .port()
        .expect("port")
}

#[tokio::test]
async fn the_depth_is_summed_over_the_producers_of_every_lookupd() {
    let a = Arc::new(Mutex::new(Nsqd {
        topic_depth: 50,
        channels: vec![("workers", 7, false)],
    }));
    let b = Arc::new(Mutex::new(Nsqd {
        topic_depth: 30,
        channels: vec![],
    }));
    let nsqd_a = TestServer::start(nsqd(a.clone())).await;
    let nsqd_b = TestServer::start(nsqd(b.clone())).await;
    let first = Arc::new(Mutex::new(vec![port(&nsqd_a)]));
    // The second lookupd knows both: nsqd A is asked once.
    let second = Arc::new(Mutex::new(vec![port(&nsqd_a), port(&nsqd_b)]));
    let lookupd_1 = TestServer::start(lookupd(first)).await;
    let lookupd_2 = TestServer::start(lookupd(second)).await;
    let h = harness(&[&lookupd_1, &lookupd_2], "orders").await;
    assert_eq!(h.metric_name, "s0-nsq-orders-workers");
    // A's channel (7) and B's topic, which has no such channel yet (30).
    h.expect(37.0, true).await;
    assert_eq!(nsqd_a.requests().len(), 1);
    // A paused channel counts 0.
    a.lock().unwrap().channels = vec![("workers", 7, true)];
    b.lock().unwrap().channels = vec![("workers", 0, false), ("other", 9, false)];
    h.expect(0.0, false).await;
    h.close().await;

    // An unknown topic: 404 from every lookupd, no producers, 0.
    let unknown = harness(&[&lookupd_1], "nope").await;
    unknown.expect(0.0, false).await;
    unknown.close().await;
}

#[tokio::test]
async fn a_failing_nsqd_fails_the_poll_naming_its_status_only() {
    let down = TestServer::start(handler(|_: &Recorded| {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain",
            "SECRET-TEXT".into(),
        )
    }))
    .await;
    let lookupd_1 = TestServer::start(lookupd(Arc::new(Mutex::new(vec![port(&down)])))).await;
    let h = harness(&[&lookupd_1], "orders").await;
    let text = h.expect_error().await.to_string();
    assert!(
        text.contains("500") && text.contains("nsq") && !text.contains("SECRET-TEXT"),
        "{text}"
    );
    h.close().await;
}
