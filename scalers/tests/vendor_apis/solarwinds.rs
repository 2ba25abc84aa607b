//! `solarwinds` against a fake of the SolarWinds Observability REST API, following its
//! OpenAPI description (<https://api.solarwinds.com/>, operation `listMetricMeasurements`: `GET
//! /v1/metrics/{name}/measurements` with `filter`, `aggregateBy`, `startTime`, `endTime` (ISO
//! 8601, UTC) and `seriesType`, answered `{"groupings": [{"attributes", "measurements":
//! [{"time", "value"}]}], "bucketSizeInSeconds", "pageInfo"}`), bearer-token authentication
//! (`401` without a valid token) and `404` for an unknown metric.

use std::sync::{Arc, Mutex};

use http::StatusCode;

use crate::common::{Harness, Setup, conformance};
use crate::http_server::{Recorded, TestServer, handler};

fn swo(value: Arc<Mutex<Option<f64>>>) -> crate::http_server::Handler {
    handler(move |r: &Recorded| {
        if r.header("authorization").as_deref() != Some("Bearer sw0-token") {
            return (
                StatusCode::UNAUTHORIZED,
                "application/json",
                r#"{"code":"Unauthorized","message":"invalid token SECRET-TEXT"}"#.into(),
            );
        }
        let path = r.uri.split('?').next().unwrap_or_default();
        if path != "/v1/metrics/composite.custom.jobs.queued/measurements" {
            return (
                StatusCode::NOT_FOUND,
                "application/json",
                r#"{"code":"NotFound","message":"metric not found SECRET-TEXT"}"#.into(),
            );
        }
        let time = |name: &str| {
            r.query(name)
                .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        };
        let well_formed = r.method == "GET"
            && r.header("accept").as_deref() == Some("application/json")
            && r.query("aggregateBy").as_deref() == Some("MAX")
            && r.query("seriesType").as_deref() == Some("SCALAR")
            && r.query("filter").as_deref() == Some("service.name:jobs")
            && matches!((time("startTime"), time("endTime")), (Some(s), Some(e)) if e.as_second() - s.as_second() == 60)
            && r.query("endTime").is_some_and(|t| t.ends_with('Z'));
        if !well_formed {
            return (
                StatusCode::BAD_REQUEST,
                "application/json",
                r#"{"code":"BadRequest"}"#.into(),
            );
        }
        let value = *value.lock().expect("value");
        (
            StatusCode::OK,
            "application/json",
            serde_json::json!({
                "groupings": [
                    {"attributes": [{"key": "service.name", "value": "jobs"}],
                     "measurements": [{"time": "2026-01-01T11:59:00Z", "value": null},
                                      {"time": "2026-01-01T12:00:00Z", "value": value}]}
                ],
                "bucketSizeInSeconds": 60,
                "pageInfo": {"prevPage": null, "nextPage": null}
            })
            .to_string(),
        )
    })
}

async fn harness(server: &TestServer, metadata: &[(&str, &str)], token: &str) -> Harness {
    let host = server.url("");
    let host = host.trim_end_matches('/');
    let mut all = vec![("host", host)];
    all.extend_from_slice(metadata);
    conformance(
        "solarwinds",
        Setup {
            metadata: &all,
            auth: &[("apiToken", token)],
            ..Setup::default()
        },
    )
    .await
}

#[tokio::test]
async fn the_value_is_the_first_measurement_and_errors_show_the_status_only() {
    let value = Arc::new(Mutex::new(Some(1.0)));
    let server = TestServer::start(swo(value.clone())).await;
    let h = harness(&server, &[], "sw0-token").await;
    assert_eq!(h.metric_name, "s0-solarwinds");
    h.expect(1.0, false).await; // not above activationValue 1
    *value.lock().unwrap() = Some(4.5);
    h.expect(4.5, true).await;
    *value.lock().unwrap() = None;
    let text = h.expect_error().await.to_string();
    assert!(text.contains("no measurements"), "{text}");
    h.close().await;

    let wrong = harness(&server, &[], "wr0ng-token").await;
    let text = wrong.expect_error().await.to_string();
    assert!(
        text.contains("401") && text.contains("solarwinds"),
        "{text}"
    );
    assert!(
        !text.contains("wr0ng-token") && !text.contains("SECRET-TEXT"),
        "{text}"
    );
    wrong.close().await;

    let missing = harness(&server, &[("metricName", "gone")], "sw0-token").await;
    let text = missing.expect_error().await.to_string();
    assert!(
        text.contains("404") && !text.contains("SECRET-TEXT"),
        "{text}"
    );
    missing.close().await;
}
