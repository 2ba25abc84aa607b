//! `elastic-forecast` against a fake of Elasticsearch's machine learning forecasts, following
//! the forecast API
//! <https://www.elastic.co/docs/api/doc/elasticsearch/operation/operation-ml-forecast>
//! (`POST /_ml/anomaly_detectors/<job_id>/_forecast` with `duration` and `expires_in`, answered
//! `{"acknowledged":true,"forecast_id":"..."}`; an unknown job is 404
//! `resource_not_found_exception`), the search API
//! <https://www.elastic.co/docs/api/doc/elasticsearch/operation/operation-search> over the
//! job's results indices `.ml-anomalies-*`, whose forecast documents have `result_type`
//! `model_forecast`, `forecast_id`, `timestamp` (epoch milliseconds) and `forecast_prediction`
//! (<https://www.elastic.co/docs/explore-analyze/machine-learning/anomaly-detection/ml-ad-forecast>),
//! Basic authentication with `security_exception` 401s
//! (<https://www.elastic.co/docs/deploy-manage/users-roles/cluster-or-deployment-auth/user-authentication>),
//! and a node's search thread pool rejecting with 429 `es_rejected_execution_exception`
//! (<https://www.elastic.co/docs/reference/elasticsearch/configuration-reference/thread-pool-settings>).
//! A forecast's documents become searchable a moment after the API answers: the fake indexes
//! a new forecast only when the test says so.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use http::StatusCode;
use keda_scalers::Clock;
use serde_json::{Value, json};

use crate::common::{Harness, Setup, conformance};
use crate::http_server::{Recorded, TestServer, handler};

const JOB: &str = "cpu-job";

/// A forecast's buckets: (epoch ms, prediction).
type Buckets = Vec<(i64, Value)>;

/// A created forecast.
struct Forecast {
    id: String,
    buckets: Buckets,
    /// Searchable yet.
    indexed: bool,
}

/// The cluster's state.
#[derive(Default)]
struct Cluster {
    /// The buckets the next forecast will hold.
    model: Buckets,
    /// Created forecasts.
    forecasts: Vec<Forecast>,
    /// Index the forecasts as soon as they are created.
    index_at_once: bool,
    /// Reject searches with 429.
    overloaded: bool,
    /// The `duration` of every forecast request.
    durations: Vec<String>,
}

type Shared = Arc<Mutex<Cluster>>;

fn error(status: StatusCode, kind: &str) -> (StatusCode, &'static str, String) {
    (
        status,
        "application/json",
        json!({
            "error": {"root_cause": [{"type": kind, "reason": "SECRET-TEXT"}], "type": kind, "reason": "SECRET-TEXT"},
            "status": status.as_u16(),
        })
        .to_string(),
    )
}

fn elasticsearch(cluster: Shared) -> crate::http_server::Handler {
    handler(move |r: &Recorded| {
        use base64::Engine;
        let basic = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("elastic:changeme")
        );
        if r.header("authorization").as_deref() != Some(basic.as_str()) {
            return error(StatusCode::UNAUTHORIZED, "security_exception");
        }
        if r.header("content-type").as_deref() != Some("application/json") {
            return error(StatusCode::NOT_ACCEPTABLE, "media_type_header_exception");
        }
        let Ok(body) = serde_json::from_str::<Value>(&r.body) else {
            return error(StatusCode::BAD_REQUEST, "parsing_exception");
        };
        let mut cluster = cluster.lock().expect("cluster");
        let path = r.uri.split('?').next().unwrap_or_default();
        if r.method != "POST" {
            return error(StatusCode::METHOD_NOT_ALLOWED, "illegal_argument_exception");
        }
        if let Some(job) = path
            .strip_prefix("/_ml/anomaly_detectors/")
            .and_then(|p| p.strip_suffix("/_forecast"))
        {
            if job != JOB {
                return error(StatusCode::NOT_FOUND, "resource_not_found_exception");
            }
            let (Some(duration), Some(expires)) =
                (body["duration"].as_str(), body["expires_in"].as_str())
            else {
                return error(StatusCode::BAD_REQUEST, "x_content_parse_exception");
            };
            let seconds = duration
                .strip_suffix('s')
                .and_then(|s| s.parse::<u64>().ok());
            if seconds.is_none() || duration != expires {
                return error(StatusCode::BAD_REQUEST, "illegal_argument_exception");
            }
            cluster.durations.push(duration.to_string());
            let id = format!("fc-{}", cluster.forecasts.len() + 1);
            let model = cluster.model.clone();
            let indexed = cluster.index_at_once;
            cluster.forecasts.push(Forecast {
                id: id.clone(),
                buckets: model,
                indexed,
            });
            return (
                StatusCode::OK,
                "application/json",
                json!({"acknowledged": true, "forecast_id": id}).to_string(),
            );
        }
        if path.starts_with("/.ml-anomalies-") && path.ends_with("/_search") {
            if cluster.overloaded {
                return error(
                    StatusCode::TOO_MANY_REQUESTS,
                    "es_rejected_execution_exception",
                );
            }
            // The query KEDA sends: terms on job_id, forecast_id and result_type, a range on
            // timestamp, newest first, one hit.
            let filters = body["query"]["bool"]["filter"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let term = |field: &str| {
                filters
                    .iter()
                    .find_map(|f| f["term"][field].as_str().map(str::to_string))
            };
            let lte = filters
                .iter()
                .find_map(|f| f["range"]["timestamp"]["lte"].as_i64());
            let sorted = body["sort"][0]["timestamp"]["order"] == "desc";
            if term("result_type").as_deref() != Some("model_forecast")
                || body["size"] != 1
                || !sorted
            {
                return error(StatusCode::BAD_REQUEST, "search_phase_execution_exception");
            }
            let (Some(job), Some(forecast), Some(lte)) = (term("job_id"), term("forecast_id"), lte)
            else {
                return error(StatusCode::BAD_REQUEST, "search_phase_execution_exception");
            };
            let bucket = cluster
                .forecasts
                .iter()
                .filter(|f| f.indexed && f.id == forecast && job == JOB)
                .flat_map(|f| f.buckets.iter())
                .filter(|(t, _)| *t <= lte)
                .max_by_key(|(t, _)| *t);
            let hits: Vec<Value> = bucket
                .map(|(t, v)| {
                    json!({
                        "_index": ".ml-anomalies-shared",
                        "_id": format!("{JOB}_model_forecast_{forecast}_{t}"),
                        "_score": null,
                        "_source": {"forecast_prediction": v, "timestamp": t},
                        "sort": [t],
                    })
                })
                .into_iter()
                .collect();
            return (
                StatusCode::OK,
                "application/json",
                json!({
                    "took": 2,
                    "timed_out": false,
                    "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
                    "hits": {"total": {"value": hits.len(), "relation": "eq"}, "max_score": null, "hits": hits},
                })
                .to_string(),
            );
        }
        error(StatusCode::NOT_FOUND, "index_not_found_exception")
    })
}

/// A clock the test moves: epoch milliseconds.
fn clock(at: &Arc<AtomicI64>) -> Clock {
    let at = at.clone();
    Clock::from_fn(move || {
        jiff::Timestamp::from_millisecond(at.load(Ordering::SeqCst)).expect("valid instant")
    })
}

async fn harness(server: &TestServer, now: &Arc<AtomicI64>, password: &str) -> Harness {
    let address = server.url("");
    conformance(
        "elastic-forecast",
        Setup {
            metadata: &[("addresses", address.trim_end_matches('/'))],
            auth: &[("username", "elastic"), ("password", password)],
            clock: Some(clock(now)),
            ..Setup::default()
        },
    )
    .await
}

const T0: i64 = 1_700_000_000_000;
const MINUTE: i64 = 60_000;

#[tokio::test]
async fn the_value_is_the_forecast_for_look_ahead_and_the_forecast_is_renewed() {
    let cluster: Shared = Arc::default();
    {
        let mut c = cluster.lock().expect("cluster");
        // The documented example: lookAhead 10m. Buckets every 5 minutes.
        c.model = (0..8)
            .map(|i| (T0 + i * 5 * MINUTE, json!(10 * i)))
            .collect();
        c.index_at_once = true;
    }
    let server = TestServer::start(elasticsearch(cluster.clone())).await;
    let now = Arc::new(AtomicI64::new(T0));
    let h = harness(&server, &now, "changeme").await;
    assert_eq!(h.metric_name, "s0-elastic-forecast-cpu-job");
    // now + 10m: the bucket at 10 minutes (20), above activationTargetValue 5.
    h.expect(20.0, true).await;
    assert_eq!(
        cluster.lock().expect("c").durations,
        vec!["1200s".to_string()]
    );
    // 7 minutes on: the bucket at 15 (30); the forecast (20 minutes) is not due yet.
    now.store(T0 + 7 * MINUTE, Ordering::SeqCst);
    h.expect(30.0, true).await;
    assert_eq!(cluster.lock().expect("c").forecasts.len(), 1);
    // 10 minutes on, less than lookAhead of the window remains: renewed, and the new
    // forecast (not yet indexed) falls back to the previous one.
    cluster.lock().expect("c").index_at_once = false;
    now.store(T0 + 10 * MINUTE, Ordering::SeqCst);
    h.expect(40.0, true).await;
    assert_eq!(cluster.lock().expect("c").forecasts.len(), 2);
    // Once indexed, the new forecast is read: its model says 2 at every bucket.
    {
        let mut c = cluster.lock().expect("c");
        c.forecasts[1].buckets = (0..12).map(|i| (T0 + i * 5 * MINUTE, json!("2"))).collect();
        c.forecasts[1].indexed = true;
    }
    h.expect(2.0, false).await;
    // A rejected search fails the poll with the error type and status, never the reason.
    cluster.lock().expect("c").overloaded = true;
    let text = h.expect_error().await.to_string();
    assert!(
        text.contains("es_rejected_execution_exception (HTTP 429)"),
        "{text}"
    );
    assert!(!text.contains("SECRET-TEXT"), "{text}");
    h.close().await;
}

#[tokio::test]
async fn no_indexed_bucket_reads_zero_and_a_refused_forecast_fails_the_poll() {
    let cluster: Shared = Arc::default();
    let server = TestServer::start(elasticsearch(cluster.clone())).await;
    let now = Arc::new(AtomicI64::new(T0));
    // Created but not yet indexed: 0 and inactive, as in KEDA.
    let h = harness(&server, &now, "changeme").await;
    h.expect(0.0, false).await;
    h.close().await;

    // Wrong credentials: no forecast can be created, the poll fails with KEDA's hint.
    let wrong = harness(&server, &now, "wrong-pass").await;
    let text = wrong.expect_error().await.to_string();
    assert!(
        text.contains("elasticsearch authentication failed (HTTP 401)"),
        "{text}"
    );
    assert!(
        text.contains("creating a forecast of ML job cpu-job"),
        "{text}"
    );
    assert!(
        !text.contains("wrong-pass") && !text.contains("SECRET"),
        "{text}"
    );
    wrong.close().await;

    // An unknown job: the error type and status.
    let address = server.url("");
    let unknown = conformance(
        "elastic-forecast",
        Setup {
            metadata: &[
                ("addresses", address.trim_end_matches('/')),
                ("jobID", "gone"),
            ],
            auth: &[("username", "elastic"), ("password", "changeme")],
            clock: Some(clock(&now)),
            ..Setup::default()
        },
    )
    .await;
    let text = unknown.expect_error().await.to_string();
    assert!(
        text.contains("resource_not_found_exception (HTTP 404)"),
        "{text}"
    );
    unknown.close().await;
}
