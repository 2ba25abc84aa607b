//! The `graphite` scaler against a real graphite-web and carbon (Debian's, started by
//! `scripts/services.sh` on 127.0.0.1: carbon's plaintext receiver on 2003, graphite-web's
//! render API on 8089), built from its documented example through the registry. Each test
//! writes datapoints of its own metric names through carbon's plaintext protocol
//! (`<path> <value> <timestamp>\n`) and reads them back through the render API, so every rule
//! of KEDA's reading (last non-null datapoint, no series, several series, all null) is
//! exercised against graphite-web's own answers.

#[allow(dead_code)]
mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{Harness, Setup, conformance};
use tokio::io::AsyncWriteExt;

const CARBON: &str = "127.0.0.1:2003";
const GRAPHITE: &str = "http://127.0.0.1:8089";

/// Carbon's plaintext port, or `None` (skip; a failure under CI=true).
async fn carbon_or_skip(test: &str) -> Option<tokio::net::TcpStream> {
    let attempt = async {
        // graphite-web must be up too.
        drop(tokio::net::TcpStream::connect("127.0.0.1:8089").await?);
        tokio::net::TcpStream::connect(CARBON).await
    };
    common::service_or_skip(
        test,
        "carbon on 127.0.0.1:2003 and graphite-web on :8089",
        attempt,
    )
    .await
}

/// A metric path prefix no other run uses.
fn unique_prefix(test: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_nanos();
    format!("keda_rs.{test}.p{}_{nanos}", std::process::id())
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs()
}

/// Writes `(path, value, seconds ago)` datapoints through carbon's plaintext protocol.
async fn feed(carbon: &mut tokio::net::TcpStream, points: &[(&str, f64, u64)]) {
    let now = now_secs();
    let mut lines = String::new();
    for (path, value, ago) in points {
        lines.push_str(&format!("{path} {value} {}\n", now - ago));
    }
    carbon
        .write_all(lines.as_bytes())
        .await
        .expect("write to carbon");
    carbon.flush().await.expect("flush to carbon");
}

/// The documented example on the shared graphite-web, reading `query`.
async fn harness(query: &str, activation: &str) -> Harness {
    conformance(
        "graphite",
        Setup {
            metadata: &[
                ("serverAddress", GRAPHITE),
                ("query", query),
                ("queryTime", "-5min"),
                ("activationThreshold", activation),
            ],
            // The documented example's basic authentication: graphite-web, as installed,
            // does not check it.
            auth: &[("username", "keda"), ("password", "not-checked")],
            ..Setup::default()
        },
    )
    .await
}

/// Reads until the value is `value` (carbon hands new points to graphite-web within a moment),
/// then asserts it and the activity exactly.
async fn expect_eventually(h: &Harness, value: f64, active: bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let read = h.built.scaler().metrics_and_activity(&h.metric_name).await;
        if matches!(&read, Ok(r) if r.values.len() == 1 && r.values[0].value == value) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "graphite never answered {value}: last read {read:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    h.expect(value, active).await;
}

#[tokio::test]
async fn the_most_recent_non_null_datapoint_is_the_value_and_activity_is_above_the_threshold() {
    let test = "graphite_value";
    let Some(mut carbon) = carbon_or_skip(test).await else {
        return;
    };
    let prefix = unique_prefix("value");
    let path = format!("{prefix}.jobs");
    // Older points first, a gap (nulls) after the last: the last non-null one is the value.
    feed(
        &mut carbon,
        &[(&path, 1.0, 40), (&path, 9.5, 30), (&path, 42.25, 20)],
    )
    .await;
    let h = harness(&path, "2").await;
    expect_eventually(&h, 42.25, true).await;
    // A newer, smaller point: activity follows activationThreshold (2 is inactive: not above).
    feed(&mut carbon, &[(&path, 2.0, 5)]).await;
    expect_eventually(&h, 2.0, false).await;
    h.close().await;

    // A function of graphite's own over the series.
    let h = harness(&format!("scale({path},3)"), "2").await;
    expect_eventually(&h, 6.0, true).await;
    h.close().await;
}

#[tokio::test]
async fn no_series_is_zero_and_several_series_or_all_nulls_are_errors_naming_the_query() {
    let test = "graphite_shapes";
    let Some(mut carbon) = carbon_or_skip(test).await else {
        return;
    };
    let prefix = unique_prefix("shapes");
    let (a, b) = (format!("{prefix}.a"), format!("{prefix}.b"));
    feed(&mut carbon, &[(&a, 5.0, 20), (&b, 7.0, 20)]).await;

    // The sum of both proves the points arrived before the shapes are read.
    let h = harness(&format!("sumSeries({prefix}.*)"), "0").await;
    expect_eventually(&h, 12.0, true).await;
    h.close().await;

    let h = harness(&format!("{prefix}.no_such_metric"), "0").await;
    h.expect(0.0, false).await;
    h.close().await;

    let query = format!("{prefix}.*");
    let h = harness(&query, "0").await;
    let err = h.expect_error().await.to_string();
    assert!(err.contains("returned multiple series (2)"), "{err}");
    assert!(err.contains(&query), "{err}");
    h.close().await;

    // removeAboveValue turns every datapoint above 1 into null: a series of nulls only.
    let query = format!("removeAboveValue({a},1)");
    let h = harness(&query, "0").await;
    let err = h.expect_error().await.to_string();
    assert!(
        err.contains("no valid non-null response") && err.contains("increasing your queryTime"),
        "{err}"
    );
    h.close().await;
}

#[tokio::test]
async fn an_unreachable_server_fails_the_read_naming_the_query_and_server() {
    let test = "graphite_unreachable";
    // A loopback port nothing listens on.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    let server = format!("http://127.0.0.1:{port}");
    let h = conformance(
        "graphite",
        Setup {
            metadata: &[("serverAddress", &server), ("queryTime", "-5min")],
            auth: &[("username", "keda"), ("password", "secret-password")],
            ..Setup::default()
        },
    )
    .await;
    let err = h.expect_error().await.to_string();
    assert!(
        err.contains(&format!("serverAddress {server}")),
        "{test}: {err}"
    );
    assert!(!err.contains("secret-password"), "{err}");
    h.close().await;
}
