//! `sumologic` against a fake of the Sumo Logic API, following
//! <https://api.sumologic.com/docs/#operation/runMetricsQueries> (`POST /api/v1/metricsQueries`
//! with `queries` and a `BeginBoundedTimeRange`, answered `queryResult[].timeSeriesList`, query
//! errors in `errors.errors`), the Search Job API
//! <https://help.sumologic.com/docs/api/search-job/> (`POST /api/v1/search/jobs` answered `202
//! {"id"}` with cookies the later calls must send back, `GET .../{id}` with `state` and
//! `recordCount`, `GET .../{id}/records?offset&limit`, `DELETE .../{id}`) and the API's Basic
//! authentication with an access id and key (`401 {"code":"unauthorized"}` otherwise).

use std::sync::{Arc, Mutex};

use http::StatusCode;

use crate::common::{Harness, Setup, conformance};
use crate::with_headers::{Answer, Fake, Request};

const JOB: &str = "IUUQI-DG3S2-QIU";

#[derive(Default)]
struct Sumo {
    /// The series' values.
    values: Vec<Option<f64>>,
    /// The records' `_count` values.
    counts: Vec<u64>,
    /// Looks at the job so far.
    looks: usize,
    /// Answer the next request 503.
    unavailable: bool,
    /// The job was deleted.
    deleted: bool,
    /// Messages the search found beyond those the records count.
    raw_messages: u64,
}

fn answer(sumo: &Arc<Mutex<Sumo>>, r: &Request) -> Answer {
    let ok = |body: serde_json::Value| (StatusCode::OK, vec![], body.to_string());
    let basic = format!(
        "Basic {}",
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "suAccess:suKey")
    );
    if r.header("authorization").as_deref() != Some(basic.as_str()) {
        return (
            StatusCode::UNAUTHORIZED,
            vec![],
            r#"{"status":401,"id":"X","code":"unauthorized","message":"Credential could not be verified. SECRET-TEXT"}"#.into(),
        );
    }
    if r.header("accept").as_deref() != Some("application/json") {
        return (StatusCode::NOT_ACCEPTABLE, vec![], "{}".into());
    }
    let mut sumo = sumo.lock().expect("sumo");
    if std::mem::take(&mut sumo.unavailable) {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            vec![],
            r#"{"status":503}"#.into(),
        );
    }
    let job_path = format!("/api/v1/search/jobs/{JOB}");
    let cookies_ok = r
        .header("cookie")
        .is_some_and(|c| c.contains("AWSELB=elb1") && c.contains("JSESSIONID=s1"));
    match (r.method.as_str(), r.path()) {
        ("POST", "/api/v1/metricsQueries") => {
            let body: serde_json::Value = serde_json::from_str(&r.body).unwrap_or_default();
            let range = &body["timeRange"];
            let time = |b: &serde_json::Value| {
                b["iso8601Time"]
                    .as_str()
                    .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            };
            let (Some(from), Some(to)) = (time(&range["from"]), time(&range["to"])) else {
                return (
                    StatusCode::BAD_REQUEST,
                    vec![],
                    r#"{"code":"bad.time"}"#.into(),
                );
            };
            let query = &body["queries"][0];
            if r.header("content-type").as_deref() != Some("application/json")
                || range["type"] != "BeginBoundedTimeRange"
                || range["from"]["type"] != "Iso8601TimeRangeBoundary"
                || to.as_second() - from.as_second() != 300
                || query["rowId"] != "A"
                || query["quantization"] != 60_000
                || query["rollup"] != "Sum"
            {
                return (
                    StatusCode::BAD_REQUEST,
                    vec![],
                    r#"{"code":"bad.request"}"#.into(),
                );
            }
            if query["query"] == "broken" {
                return ok(
                    serde_json::json!({"queryResult": [], "errors": {"id": "E", "errors": [
                    {"code": "metrics:query_error", "message": "SECRET-TEXT"}]}}),
                );
            }
            let n = sumo.values.len();
            ok(
                serde_json::json!({"queryResult": [{"rowId": "A", "timeSeriesList": {
                "timeSeries": [{"metricDefinition": {"metric": "jobs_queued"},
                    "points": {"timestamps": (0..n).map(|i| 1_700_000_000_000_u64 + 60_000 * i as u64).collect::<Vec<_>>(),
                               "values": sumo.values}}],
                "unit": ""}}], "errors": null}),
            )
        }
        ("POST", "/api/v1/search/jobs") => {
            let body: serde_json::Value = serde_json::from_str(&r.body).unwrap_or_default();
            if body["query"] != "_sourceCategory=jobs | count" || body["timeZone"] != "Europe/Paris"
            {
                return (
                    StatusCode::BAD_REQUEST,
                    vec![],
                    r#"{"code":"searchjob.invalid"}"#.into(),
                );
            }
            sumo.looks = 0;
            sumo.deleted = false;
            (
                StatusCode::ACCEPTED,
                vec![
                    ("set-cookie", "AWSELB=elb1; Path=/".into()),
                    ("set-cookie", "JSESSIONID=s1; Path=/api; Secure; HttpOnly".into()),
                ],
                serde_json::json!({"id": JOB, "link": {"rel": "self", "href": format!("https://api.sumologic.com/api/v1/search/jobs/{JOB}")}}).to_string(),
            )
        }
        (_, path) if path.starts_with(&job_path) && !cookies_ok => (
            StatusCode::NOT_FOUND,
            vec![],
            r#"{"status":404,"code":"searchjob.jobid.invalid","message":"Job ID is invalid."}"#
                .into(),
        ),
        ("GET", path) if path == job_path => {
            sumo.looks += 1;
            let state = if sumo.looks < 2 {
                "GATHERING RESULTS"
            } else {
                "DONE GATHERING RESULTS"
            };
            // A search that found messages but made no records (not an aggregate query) has
            // messages only; here the messages are those the records count.
            let messages = sumo.counts.iter().sum::<u64>() + sumo.raw_messages;
            ok(
                serde_json::json!({"state": state, "messageCount": messages, "histogramBuckets": [],
                "pendingErrors": [], "pendingWarnings": [], "recordCount": sumo.counts.len()}),
            )
        }
        ("GET", path) if path == format!("{job_path}/records") => {
            let offset: usize = r.query("offset").and_then(|o| o.parse().ok()).unwrap_or(0);
            let limit: usize = r.query("limit").and_then(|o| o.parse().ok()).unwrap_or(0);
            let records: Vec<serde_json::Value> = sumo
                .counts
                .iter()
                .skip(offset)
                .take(limit)
                .map(|c| serde_json::json!({"map": {"_count": c.to_string()}}))
                .collect();
            ok(
                serde_json::json!({"fields": [{"name": "_count", "fieldType": "int", "keyField": false}], "records": records}),
            )
        }
        ("DELETE", path) if path == job_path => {
            sumo.deleted = true;
            ok(serde_json::json!({"id": JOB}))
        }
        _ => (StatusCode::NOT_FOUND, vec![], r#"{"status":404}"#.into()),
    }
}

async fn harness(fake: &Fake, metadata: &[(&str, &str)], key: &str) -> Harness {
    let host = fake.url();
    let mut all = vec![("host", host.as_str())];
    all.extend_from_slice(metadata);
    conformance(
        "sumologic",
        Setup {
            metadata: &all,
            auth: &[("accessID", "suAccess"), ("accessKey", key)],
            ..Setup::default()
        },
    )
    .await
}

#[tokio::test]
async fn a_metrics_query_is_aggregated_and_errors_show_no_remote_text() {
    let sumo = Arc::new(Mutex::new(Sumo {
        values: vec![Some(1.0), None, Some(2.0)],
        ..Sumo::default()
    }));
    let fake = {
        let sumo = sumo.clone();
        Fake::start(move |r| answer(&sumo, r)).await
    };
    let h = harness(&fake, &[], "suKey").await;
    assert_eq!(h.metric_name, "s0-sumologic-metrics");
    h.expect(2.0, false).await; // Max of 1, 0, 2; not above activationThreshold 2
    sumo.lock().unwrap().values = vec![Some(3.0), Some(7.0)];
    h.expect(7.0, true).await;
    // A 503 is tried again after a second, as KEDA does.
    sumo.lock().unwrap().unavailable = true;
    h.expect(7.0, true).await;
    h.close().await;

    let wrong = harness(&fake, &[("maxRetries", "1")], "wr0ngKey").await;
    let text = wrong.expect_error().await.to_string();
    assert!(text.contains("401") && text.contains("sumologic"), "{text}");
    assert!(
        !text.contains("wr0ngKey") && !text.contains("SECRET-TEXT"),
        "{text}"
    );
    wrong.close().await;

    let broken = harness(&fake, &[("query", "broken")], "suKey").await;
    let text = broken.expect_error().await.to_string();
    assert!(
        text.contains("1 error") && !text.contains("SECRET-TEXT"),
        "{text}"
    );
    broken.close().await;
}

#[tokio::test]
async fn a_log_search_job_is_followed_with_its_cookies_then_deleted() {
    let sumo = Arc::new(Mutex::new(Sumo {
        counts: vec![4, 6],
        ..Sumo::default()
    }));
    let fake = {
        let sumo = sumo.clone();
        Fake::start(move |r| answer(&sumo, r)).await
    };
    let logs = [
        ("queryType", "logs"),
        ("query", "_sourceCategory=jobs | count"),
        ("resultField", "_count"),
        ("quantization", ""),
        ("rollup", ""),
        ("timezone", "Europe/Paris"),
        ("logsPollingInterval", "50ms"),
        ("queryAggregator", "Sum"),
    ];
    let h = harness(&fake, &logs, "suKey").await;
    assert_eq!(h.metric_name, "s0-sumologic-logs");
    h.expect(10.0, true).await;
    assert!(
        sumo.lock().unwrap().deleted,
        "the job is deleted after the read"
    );
    assert_eq!(sumo.lock().unwrap().looks, 2);
    let requests = fake.requests();
    let records = requests
        .iter()
        .find(|r| r.path().ends_with("/records"))
        .expect("records asked");
    assert_eq!(
        (
            records.query("offset").as_deref(),
            records.query("limit").as_deref()
        ),
        (Some("0"), Some("2"))
    );
    // No records: 0, inactive, and no records request.
    sumo.lock().unwrap().counts.clear();
    let before = fake.requests().len();
    h.expect(0.0, false).await;
    assert!(
        !fake.requests()[before..]
            .iter()
            .any(|r| r.path().ends_with("/records"))
    );
    // Messages but no records: not an aggregate query, named.
    sumo.lock().unwrap().raw_messages = 5;
    let text = h.expect_error().await.to_string();
    assert!(
        text.contains("aggregate") && text.contains("\"query\""),
        "{text}"
    );
    h.close().await;
}
