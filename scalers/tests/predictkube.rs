//! The `predictkube` scaler, built from its documented example through the registry, against
//! the shared Prometheus on 127.0.0.1:9090 (`scripts/services.sh`) for the history and the
//! tests' fake PredictKube engine (`common/predictkube_engine.rs`) for the forecast, reached
//! through the process's vendor endpoints as the operator never is.
//!
//! The fake checks each call as the real engine does (API key metadata, quota, timestamps);
//! the tests check what it received against what Prometheus itself answers for the same
//! range.

#[allow(dead_code)]
mod common;
#[path = "common/predictkube_engine.rs"]
mod engine;
#[allow(dead_code)]
#[path = "common/http.rs"]
mod http_server;
#[allow(dead_code)]
#[path = "common/prometheus.rs"]
mod prom;

use std::time::Duration;

use common::{Harness, Setup, conformance};
use engine::{ENGINE_SAID, FakeEngine, GOOD_KEY, UNKNOWN_KEY};
use keda_scalers::http_client::{HttpClient, HttpClientKey};
use keda_scalers::scalers::predictkube::proto::ReqGetPredictMetric;
use keda_scalers::{Clock, ScalerError};
use prom::PROMETHEUS;

const METRIC: &str = "s0-predictkube-predictkube_metric";

/// A minute ago, to the second: every scrape up to then is stored, so Prometheus answers the
/// same range the same way twice.
fn settled_now() -> jiff::Timestamp {
    let now = jiff::Timestamp::now().as_second() - 60;
    jiff::Timestamp::from_second(now).expect("now")
}

/// The documented example on the shared Prometheus with `changes`, the engine reached at
/// `engine`, the clock fixed at `now`, and `key` as the TriggerAuthentication's apiKey.
async fn harness(
    engine: &FakeEngine,
    now: jiff::Timestamp,
    key: &str,
    changes: &[(&str, &str)],
) -> Harness {
    let mut metadata = vec![("prometheusAddress", PROMETHEUS)];
    metadata.extend_from_slice(changes);
    conformance(
        "predictkube",
        Setup {
            metadata: &metadata,
            auth: &[("apiKey", key)],
            clock: Some(Clock::fixed(now)),
            vendor_endpoints: engine.endpoints(),
            ..Setup::default()
        },
    )
    .await
}

/// What Prometheus itself answers for `query` over `[start, end]` at `step` seconds: the
/// (milliseconds, value) pairs of its one series.
async fn prometheus_range(query: &str, start: i64, end: i64, step: u64) -> Vec<(i64, f64)> {
    let mut url = url::Url::parse(&format!("{PROMETHEUS}/api/v1/query_range")).expect("a URL");
    url.query_pairs_mut()
        .append_pair("query", query)
        .append_pair("start", &start.to_string())
        .append_pair("end", &end.to_string())
        .append_pair("step", &step.to_string());
    // The crate's own client (reqwest alone has no TLS provider installed here).
    let client = HttpClient::new(&HttpClientKey {
        origin: PROMETHEUS.to_string(),
        auth: keda_scalers::authentication::HttpAuth::default(),
        timeout: Duration::from_secs(5),
    })
    .expect("a client");
    let body = client
        .get(url, &http::HeaderMap::new())
        .await
        .expect("Prometheus answers");
    let body: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
    let result = body["data"]["result"].as_array().expect("a matrix");
    assert!(result.len() <= 1, "one series: {body}");
    result
        .iter()
        .flat_map(|series| series["values"].as_array().cloned().unwrap_or_default())
        .map(|pair| {
            let seconds = pair[0].as_f64().expect("time");
            #[allow(clippy::cast_possible_truncation)]
            let millis = (seconds * 1000.0).round() as i64;
            let value: f64 = pair[1].as_str().expect("value").parse().expect("number");
            (millis, value)
        })
        .collect()
}

/// The (milliseconds, value) pairs and metric names a request carried.
fn observations(request: &ReqGetPredictMetric) -> (Vec<(i64, f64)>, Vec<String>) {
    let pairs = request
        .observations
        .iter()
        .map(|o| {
            let t = o.timestamp.expect("a timestamp");
            (t.seconds * 1000 + i64::from(t.nanos) / 1_000_000, o.value)
        })
        .collect();
    let names = request
        .observations
        .iter()
        .map(|o| o.metric_name.clone())
        .collect();
    (pairs, names)
}

#[tokio::test]
async fn the_engine_gets_prometheus_history_the_horizon_and_the_key_and_its_forecast_is_the_value()
{
    if prom::shared_or_skip("predictkube_history").await.is_none() {
        return;
    }
    let fake = FakeEngine::start(100).await;
    let now = settled_now();
    let query = r#"sum(up{job="prometheus"})"#;
    // 10 minutes at 30 s: up to 21 samples of the shared instance's own scrape health (1).
    let h = harness(
        &fake,
        now,
        GOOD_KEY,
        &[
            ("query", query),
            ("historyTimeWindow", "10m"),
            ("queryStep", "30s"),
            ("predictHorizon", "5m"),
            ("activationThreshold", "0.5"),
        ],
    )
    .await;
    fake.set_forecast(42);
    h.expect(42.0, true).await;

    let expected = prometheus_range(query, now.as_second() - 600, now.as_second(), 30).await;
    assert!(!expected.is_empty(), "the shared Prometheus scrapes itself");
    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    let (key, request) = &requests[0];
    assert_eq!(key, GOOD_KEY, "the API key travels as x-auth-api-key");
    assert_eq!(request.forecast_horizon, 10, "5m / 30s");
    let (pairs, names) = observations(request);
    assert_eq!(pairs, expected, "the history is Prometheus' own answer");
    assert!(names.iter().all(|n| n == METRIC), "{names:?}");

    // The last sample (1) above the forecast: the last sample is the value.
    fake.set_forecast(0);
    h.expect(1.0, true).await;
    h.close().await;
}

#[tokio::test]
async fn activity_follows_the_last_sample_and_a_zero_value_reports_nothing() {
    if prom::shared_or_skip("predictkube_activity").await.is_none() {
        return;
    }
    let fake = FakeEngine::start(100).await;
    let now = settled_now();
    // vector(3): every step of the window has the sample 3.
    let h = harness(
        &fake,
        now,
        GOOD_KEY,
        &[
            ("query", "vector(3)"),
            ("historyTimeWindow", "2m"),
            ("queryStep", "1m"),
            ("predictHorizon", "2h"),
            ("activationThreshold", "3"),
        ],
    )
    .await;
    fake.set_forecast(250);
    // 3 is not above the activation threshold 3: inactive, whatever the forecast.
    h.expect(250.0, false).await;
    let (pairs, _) = observations(&fake.requests()[0].1);
    let start = (now.as_second() - 120) * 1000;
    assert_eq!(
        pairs,
        vec![(start, 3.0), (start + 60_000, 3.0), (start + 120_000, 3.0)]
    );
    assert_eq!(fake.requests()[0].1.forecast_horizon, 120, "2h / 1m");

    // vector(0) and a forecast of 0: KEDA reports no value, inactive.
    let h = harness(
        &fake,
        now,
        GOOD_KEY,
        &[
            ("query", "vector(0)"),
            ("historyTimeWindow", "2m"),
            ("queryStep", "1m"),
        ],
    )
    .await;
    fake.set_forecast(0);
    let report = h
        .built
        .scaler()
        .metrics_and_activity(&h.metric_name)
        .await
        .expect("a read");
    assert!(report.values.is_empty(), "{report:?}");
    assert!(!report.active);
}

#[tokio::test]
async fn engine_errors_show_the_grpc_code_and_never_what_the_engine_said() {
    if prom::shared_or_skip("predictkube_engine_errors")
        .await
        .is_none()
    {
        return;
    }
    let fake = FakeEngine::start(1).await;
    let now = settled_now();
    let changes = [("query", "vector(1)"), ("historyTimeWindow", "1m")];
    let engine_at = format!(
        "GetPredictMetric on the PredictKube engine at {}",
        fake.addr
    );

    // A key the engine never issued.
    let h = harness(&fake, now, UNKNOWN_KEY, &changes).await;
    let err = h.expect_error().await.to_string();
    assert_eq!(
        err,
        format!(
            "trigger 0 (predictkube): {engine_at} failed: the PredictKube engine answered error \
             UNAUTHENTICATED; check the apiKey of the trigger's TriggerAuthentication"
        )
    );
    assert!(
        !err.contains(ENGINE_SAID) && !err.contains(UNKNOWN_KEY),
        "{err}"
    );

    // The good key's quota is one call: the second is RESOURCE_EXHAUSTED.
    let h = harness(&fake, now, GOOD_KEY, &changes).await;
    fake.set_forecast(7);
    // The last sample (1) is below the documented activationThreshold (50).
    h.expect(7.0, false).await;
    let err = h.expect_error().await.to_string();
    assert_eq!(
        err,
        format!(
            "trigger 0 (predictkube): {engine_at} failed: the PredictKube engine answered error \
             RESOURCE_EXHAUSTED; the API key's quota or rate limit is used up, or the history \
             is too large"
        )
    );
    assert!(
        !err.contains(ENGINE_SAID) && !err.contains(GOOD_KEY),
        "{err}"
    );
    assert_eq!(
        fake.refused(),
        vec![tonic::Code::Unauthenticated, tonic::Code::ResourceExhausted]
    );
}

#[tokio::test]
async fn a_prometheus_error_fails_the_poll_naming_the_query_before_the_engine_is_asked() {
    if prom::shared_or_skip("predictkube_bad_query")
        .await
        .is_none()
    {
        return;
    }
    let fake = FakeEngine::start(100).await;
    let h = harness(&fake, settled_now(), GOOD_KEY, &[("query", "sum(")]).await;
    let err = h.expect_error().await;
    assert_eq!(
        err.to_string(),
        "trigger 0 (predictkube): prometheus range query `sum(` on prometheusAddress \
         http://127.0.0.1:9090/api/v1/query_range failed: Prometheus answered error bad_data (HTTP 400)"
    );
    assert!(fake.requests().is_empty() && fake.refused().is_empty());

    // More points than Prometheus gives for one series (11,000): its error, named.
    let h = harness(
        &fake,
        settled_now(),
        GOOD_KEY,
        &[("historyTimeWindow", "2w"), ("queryStep", "1m")],
    )
    .await;
    let err = h.expect_error().await.to_string();
    assert!(
        err.ends_with("failed: Prometheus answered error bad_data (HTTP 400)"),
        "{err}"
    );
}

#[tokio::test]
async fn an_unreachable_engine_is_a_poll_error_naming_its_address() {
    if prom::shared_or_skip("predictkube_unreachable")
        .await
        .is_none()
    {
        return;
    }
    let fake = FakeEngine::start(100).await;
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr")
    };
    let moved = keda_scalers::http_client::VendorEndpoints::default().with(
        keda_scalers::scalers::predictkube::engine::ENGINE_HOST,
        url::Url::parse(&format!("http://{closed}")).expect("url"),
    );
    let metadata = [
        ("prometheusAddress", PROMETHEUS),
        ("query", "vector(1)"),
        ("historyTimeWindow", "1m"),
    ];
    let h = conformance(
        "predictkube",
        Setup {
            metadata: &metadata,
            auth: &[("apiKey", GOOD_KEY)],
            vendor_endpoints: moved,
            ..Setup::default()
        },
    )
    .await;
    let err = tokio::time::timeout(Duration::from_secs(20), h.expect_error())
        .await
        .expect("bounded");
    assert_eq!(
        err.to_string(),
        format!(
            "trigger 0 (predictkube): GetPredictMetric on the PredictKube engine at {closed} \
             failed: connection refused"
        )
    );
    assert!(matches!(err, ScalerError::Query { .. }));
    drop(fake);
}

#[tokio::test]
async fn triggers_share_one_engine_connection_and_one_prometheus_client() {
    if prom::shared_or_skip("predictkube_shared").await.is_none() {
        return;
    }
    let fake = FakeEngine::start(100).await;
    fake.set_forecast(5);
    let registry = keda_scalers::Registry::builtin();
    let pools = keda_scalers::pool::ClientPools::new();
    let (trigger, index) = common::documented_trigger("predictkube");
    let mut scalers = Vec::new();
    for i in 0..5 {
        let query = format!("vector({i})");
        let mut ctx = keda_scalers::ScalerContext::from_trigger(&trigger, index);
        ctx.metadata
            .insert("prometheusAddress".into(), PROMETHEUS.into());
        ctx.metadata.insert("query".into(), query);
        ctx.metadata.insert("historyTimeWindow".into(), "1m".into());
        ctx.auth_params
            .insert("apiKey".into(), keda_scalers::Secret::new(GOOD_KEY));
        ctx.clients = pools.clone();
        ctx.vendor_endpoints = fake.endpoints();
        scalers.push(registry.build(ctx).await.expect("builds"));
    }
    for (i, s) in scalers.iter().enumerate() {
        let report = s.scaler().metrics_and_activity(METRIC).await.expect("read");
        // The forecast 5 above every last sample (0 to 4).
        assert_eq!(report.values[0].value, 5.0, "trigger {i}");
    }
    assert_eq!(
        fake.accepted(),
        1,
        "one HTTP/2 connection for every trigger"
    );
    let engine_pool = pools.pool::<
        keda_scalers::scalers::predictkube::engine::EngineKey,
        keda_scalers::scalers::external::channel::ExternalChannel,
    >();
    assert_eq!(engine_pool.len(), 1);
    let http_pool = pools
        .pool::<keda_scalers::http_client::HttpClientKey, keda_scalers::http_client::HttpClient>();
    assert_eq!(http_pool.len(), 1, "one Prometheus client");
    for s in &scalers {
        s.scaler().close().await;
    }
    assert!(
        engine_pool.is_empty() && http_pool.is_empty(),
        "the last user closed both"
    );
}

/// A front server under `/prom` that takes no `POST` (as some proxies do), checks the bearer
/// token, and passes `GET`s on to the shared instance.
fn get_only_front(token: &'static str) -> http_server::Handler {
    let client = http_server::client();
    std::sync::Arc::new(move |request: http_server::Recorded| {
        let client = client.clone();
        Box::pin(async move {
            if request.header("authorization").as_deref() != Some(&format!("Bearer {token}")) {
                return (
                    http::StatusCode::UNAUTHORIZED,
                    "text/plain",
                    "Unauthorized".into(),
                );
            }
            if request.method != "GET" {
                return (
                    http::StatusCode::METHOD_NOT_ALLOWED,
                    "text/plain",
                    "GET only".into(),
                );
            }
            let uri = request.uri.strip_prefix("/prom").expect("under /prom");
            let answer = client
                .get(format!("{PROMETHEUS}{uri}"))
                .send()
                .await
                .expect("shared Prometheus");
            let status = http::StatusCode::from_u16(answer.status().as_u16()).expect("status");
            (
                status,
                "application/json",
                answer.text().await.expect("body"),
            )
        })
    })
}

/// client_golang's order: a form `POST` first, the same parameters in a `GET` when the server
/// answers 405; the trigger's Prometheus authentication on both.
#[tokio::test]
async fn a_server_without_post_gets_the_range_query_as_a_get_with_the_authentication() {
    if prom::shared_or_skip("predictkube_get_fallback")
        .await
        .is_none()
    {
        return;
    }
    let fake = FakeEngine::start(100).await;
    let front = http_server::TestServer::start(get_only_front("prom-t0ken")).await;
    let address = front.url("/prom");
    let now = settled_now();
    let metadata = [
        ("prometheusAddress", address.as_str()),
        ("query", "vector(2)"),
        ("historyTimeWindow", "2m"),
        ("queryStep", "1m"),
        ("authModes", "bearer"),
    ];
    let h = conformance(
        "predictkube",
        Setup {
            metadata: &metadata,
            auth: &[("apiKey", GOOD_KEY), ("bearerToken", "prom-t0ken")],
            clock: Some(Clock::fixed(now)),
            vendor_endpoints: fake.endpoints(),
            ..Setup::default()
        },
    )
    .await;
    fake.set_forecast(9);
    h.expect(9.0, false).await;
    let requests = front.requests();
    let methods: Vec<&str> = requests.iter().map(|r| r.method.as_str()).collect();
    assert_eq!(methods, ["POST", "GET"]);
    let (post, get) = (&requests[0], &requests[1]);
    assert_eq!(post.uri, "/prom/api/v1/query_range");
    assert_eq!(
        post.header("content-type").as_deref(),
        Some("application/x-www-form-urlencoded")
    );
    let start = (now.as_second() - 120).to_string();
    let end = now.as_second().to_string();
    assert_eq!(
        post.body,
        format!("query=vector%282%29&start={start}&end={end}&step=60")
    );
    assert_eq!(get.query("query").as_deref(), Some("vector(2)"));
    assert_eq!(get.query("start"), Some(start));
    assert_eq!(get.query("end"), Some(end));
    assert_eq!(get.query("step").as_deref(), Some("60"));
    let (pairs, _) = observations(&fake.requests()[0].1);
    assert_eq!(pairs.len(), 3);
    assert!(pairs.iter().all(|(_, v)| *v == 2.0), "{pairs:?}");
}
