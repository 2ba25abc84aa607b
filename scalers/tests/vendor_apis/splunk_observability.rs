//! `splunk-observability` against a fake of SignalFlow's REST API, following
//! <https://dev.splunk.com/observability/reference/api/signalflow/latest> ("Start SignalFlow
//! computation": `POST /v2/signalflow/execute?start&stop&immediate` on
//! `stream.<realm>.signalfx.com`, the program as a `text/plain` body, `X-SF-Token`, answered
//! with Server-Sent Events: `control-message`, `metadata` and `data` events, `data` holding
//! `{"data": [{"tsId", "value"}], "logicalTimestampMs"}`; `401` without a valid token).

use std::sync::{Arc, Mutex};

use http::StatusCode;

use crate::common::{Harness, Setup, conformance};
use crate::http_server::{Recorded, TestServer, handler};

const PROGRAM: &str = "data('jobs.queued').sum().publish()";

fn events(values: &[f64]) -> String {
    let mut out = String::from(
        "event: control-message\ndata: {\ndata:   \"event\" : \"STREAM_START\",\ndata:   \"timestampMs\" : 1700000000000\ndata: }\n\nevent: metadata\ndata: {\"tsId\":\"AAAAAKDQ3RA\",\"properties\":{\"sf_metric\":\"jobs.queued\"}}\n\n",
    );
    for (i, v) in values.iter().enumerate() {
        out.push_str(&format!(
            "event: data\ndata: {{\ndata:   \"data\" : [ {{\ndata:     \"tsId\" : \"AAAAAKDQ3RA\",\ndata:     \"value\" : {v}\ndata:   }} ],\ndata:   \"logicalTimestampMs\" : {}\ndata: }}\n\n",
            1_700_000_000_000_u64 + 1000 * i as u64
        ));
    }
    out.push_str("event: control-message\ndata: {\"event\":\"END_OF_CHANNEL\",\"timestampMs\":1700000060000}\n\n");
    out
}

fn signalflow(values: Arc<Mutex<Vec<f64>>>) -> crate::http_server::Handler {
    handler(move |r: &Recorded| {
        if r.header("x-sf-token").as_deref() != Some("sfx-t0ken") {
            return (
                StatusCode::UNAUTHORIZED,
                "application/json",
                r#"{"code":401,"message":"Unauthorized SECRET-TEXT"}"#.into(),
            );
        }
        let start: Option<i64> = r.query("start").and_then(|s| s.parse().ok());
        let stop: Option<i64> = r.query("stop").and_then(|s| s.parse().ok());
        let well_formed = r.method == "POST"
            && r.uri.starts_with("/v2/signalflow/execute?")
            && r.header("content-type").as_deref() == Some("text/plain")
            && r.query("immediate").as_deref() == Some("true")
            && matches!((start, stop), (Some(a), Some(b)) if b - a == 60_000)
            && r.body == PROGRAM;
        if !well_formed {
            return (
                StatusCode::BAD_REQUEST,
                "application/json",
                r#"{"code":400,"message":"bad request"}"#.into(),
            );
        }
        let values = values.lock().expect("values").clone();
        (StatusCode::OK, "text/event-stream", events(&values))
    })
}

async fn harness(server: &TestServer, token: &str) -> Harness {
    let fake = url::Url::parse(&server.url("")).expect("url");
    conformance(
        "splunk-observability",
        Setup {
            auth: &[("accessToken", token), ("realm", "us1")],
            vendor_endpoints: keda_scalers::http_client::VendorEndpoints::default()
                .with("stream.us1.signalfx.com", fake),
            ..Setup::default()
        },
    )
    .await
}

#[tokio::test]
async fn the_window_s_values_are_aggregated_and_errors_show_the_status_only() {
    let values = Arc::new(Mutex::new(vec![0.0, 1.0]));
    let server = TestServer::start(signalflow(values.clone())).await;
    let h = harness(&server, "sfx-t0ken").await;
    assert_eq!(h.metric_name, "s0-signalfx");
    h.expect(1.0, false).await; // max 1, not above activationTargetValue 1
    *values.lock().unwrap() = vec![2.0, 7.0, 3.0];
    h.expect(7.0, true).await;
    values.lock().unwrap().clear();
    let text = h.expect_error().await.to_string();
    assert!(text.contains("no data points"), "{text}");
    h.close().await;

    let wrong = harness(&server, "wr0ng-t0ken").await;
    let text = wrong.expect_error().await.to_string();
    assert!(
        text.contains("401") && text.contains("splunk-observability"),
        "{text}"
    );
    assert!(
        !text.contains("wr0ng-t0ken") && !text.contains("SECRET-TEXT"),
        "{text}"
    );
    wrong.close().await;
}
