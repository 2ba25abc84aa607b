//! Client-side QPS/burst limiting on a real `kube::Client` against the in-memory API server.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use keda_operator::config::{RateLimitLayer, TokenBucket, build_client};
use keda_operator::telemetry::Metrics;
use kube::api::{Api, ListParams};
use kube::client::ClientBuilder;
use memkube::{MemKube, Verb};
use tokio::time::Instant;

#[tokio::test(start_paused = true)]
async fn concurrent_requests_pass_the_burst_at_once_then_one_per_refill() {
    let server = MemKube::new();
    let bucket = TokenBucket::new(5.0, 2).expect("limited");
    let client = ClientBuilder::new(server.service(), "default")
        .with_layer(&RateLimitLayer::new(bucket))
        .build();
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let start = Instant::now();
    let requests = (0..7).map(|_| {
        let api = api.clone();
        tokio::spawn(async move {
            api.list(&ListParams::default()).await.expect("list");
            start.elapsed()
        })
    });
    let mut done: Vec<Duration> = Vec::new();
    for request in requests.collect::<Vec<_>>() {
        done.push(request.await.expect("request task"));
    }
    done.sort();
    // Two at once (the burst), then one every 200 ms (5 per second).
    let expected: Vec<Duration> = [0, 0, 200, 400, 600, 800, 1000]
        .into_iter()
        .map(Duration::from_millis)
        .collect();
    for (got, want) in done.iter().zip(&expected) {
        assert!(
            got.abs_diff(*want) < Duration::from_millis(5),
            "completion times {done:?}, expected {expected:?}"
        );
    }
    assert_eq!(server.request_counts().get(Verb::List, "configmaps"), 7);
}

#[tokio::test(start_paused = true)]
async fn requests_that_waited_for_a_token_are_counted_as_throttled_by_verb() {
    let server = MemKube::new();
    let metrics = Metrics::new();
    let bucket = TokenBucket::new(5.0, 2).expect("limited");
    let client = ClientBuilder::new(server.service(), "default")
        .with_layer(&RateLimitLayer::new(bucket).recording(metrics.clone()))
        .build();
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let requests: Vec<_> = (0..5)
        .map(|_| {
            let api = api.clone();
            tokio::spawn(async move { api.list(&ListParams::default()).await.map(|_| ()) })
        })
        .collect();
    for request in requests {
        request.await.expect("request task").expect("list");
    }
    let text = metrics.encode();
    let value = |series: &str| {
        text.lines()
            .find(|l| l.starts_with(series))
            .and_then(|l| l.rsplit(' ').next())
            .map(str::to_string)
    };
    // Two found a token (the burst); three waited. kube's client hands requests to the
    // limiter one at a time, so each of the three waited one refill (200 ms) for its token.
    assert_eq!(
        value(r#"rest_client_rate_limiter_throttled_requests_total{verb="GET"}"#),
        Some("3".into()),
        "{text}"
    );
    assert_eq!(
        value(r#"rest_client_rate_limiter_duration_seconds_count{verb="GET"}"#),
        Some("5".into()),
        "{text}"
    );
    let waited: f64 = value(r#"rest_client_rate_limiter_duration_seconds_sum{verb="GET"}"#)
        .and_then(|v| v.parse().ok())
        .expect("a sum");
    assert!(
        (waited - 0.6).abs() < 0.05,
        "waited {waited} s in all: {text}"
    );
}

#[tokio::test]
async fn the_operator_s_client_applies_kube_api_qps_and_burst() {
    let server = MemKube::new();
    let loopback = server.serve_loopback().await.expect("loopback");
    // 20 requests at 40 QPS with a burst of 4: at least 16 / 40 = 0.4 s.
    let limited = build_client(loopback.config(), 40.0, 4, &Metrics::new()).expect("client");
    let api: Api<ConfigMap> = Api::default_namespaced(limited);
    let start = std::time::Instant::now();
    for _ in 0..20 {
        api.list(&ListParams::default()).await.expect("list");
    }
    let elapsed = start.elapsed();
    assert!(
        elapsed >= Duration::from_millis(390),
        "20 requests at 40 QPS (burst 4) took only {elapsed:?}"
    );
}
