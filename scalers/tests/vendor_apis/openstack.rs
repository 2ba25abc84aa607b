//! `openstack-swift` and `openstack-metric` against one fake of Keystone, Swift and Gnocchi,
//! following their API references:
//! - Keystone v3 (<https://docs.openstack.org/api-ref/identity/v3/>, "Password authentication
//!   with scoped authorization" and "Authenticating with an Application Credential"):
//!   `POST /v3/auth/tokens` with a JSON body, `201 Created`, the token in `X-Subject-Token`,
//!   `{"token": {"expires_at", "catalog": [{"type", "name", "endpoints": [{"interface",
//!   "region", "region_id", "url"}]}]}}`; `401` for wrong credentials.
//! - Swift (<https://docs.openstack.org/api-ref/object-store/>, "Show container metadata"):
//!   `HEAD /v1/{account}/{container}` with `X-Auth-Token`, `204 No Content` with
//!   `X-Container-Object-Count`; `404` for a missing container, `401` for a bad token.
//! - Gnocchi (<https://gnocchi.osci.io/rest.html>, "Get measures"): `GET
//!   /v1/metric/{id}/measures?granularity=&aggregation=&start=`, answered `[[timestamp,
//!   granularity, value], ...]`; `404` for an unknown metric.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use http::StatusCode;

use crate::common::{Harness, Setup, conformance};
use crate::with_headers::{Answer, Fake, Request};

const PROJECT: &str = "p-7";
const CONTAINER: &str = "uploads";
const METRIC: &str = "003bb589-166d-439d-8c31-cbf098d863de";

struct State {
    /// Tokens issued so far; the valid one is `tok-<n>`.
    issued: AtomicUsize,
    /// The container's object count.
    objects: AtomicI64,
    /// The measures Gnocchi answers.
    measures: Mutex<serde_json::Value>,
    /// The fake's own URL, for the catalog.
    base: Mutex<String>,
}

fn json(status: StatusCode, body: serde_json::Value) -> Answer {
    (status, vec![], body.to_string())
}

fn keystone(state: &State, r: &Request) -> Answer {
    let body: serde_json::Value = serde_json::from_str(&r.body).unwrap_or_default();
    let identity = &body["auth"]["identity"];
    let password_ok = identity["methods"] == serde_json::json!(["password"])
        && identity["password"]["user"]["id"] == "u-1"
        && identity["password"]["user"]["password"] == "pa55-w0rd"
        && body["auth"]["scope"]["project"]["id"] == PROJECT;
    let app_ok = identity["methods"] == serde_json::json!(["application_credential"])
        && identity["application_credential"]["id"] == "ac-1"
        && identity["application_credential"]["secret"] == "ac-s3cret";
    if r.header("content-type").as_deref() != Some("application/json") {
        return json(
            StatusCode::BAD_REQUEST,
            serde_json::json!({"error": {"code": 400}}),
        );
    }
    if !password_ok && !app_ok {
        return json(
            StatusCode::UNAUTHORIZED,
            serde_json::json!({"error": {"code": 401, "title": "Unauthorized", "message": "The request you have made requires authentication. SECRET-TEXT"}}),
        );
    }
    let n = state.issued.fetch_add(1, Ordering::SeqCst) + 1;
    let base = state.base.lock().expect("base").clone();
    (
        StatusCode::CREATED,
        vec![("x-subject-token", format!("tok-{n}"))],
        serde_json::json!({"token": {
            "methods": ["password"],
            "expires_at": "2099-01-01T00:00:00.000000Z",
            "issued_at": "2026-01-01T00:00:00.000000Z",
            "project": {"id": PROJECT, "name": "demo", "domain": {"id": "default"}},
            "catalog": [
                {"type": "object-store", "name": "swift", "id": "s1", "endpoints": [
                    {"interface": "internal", "region": "RegionOne", "region_id": "RegionOne", "url": "http://127.0.0.1:9/v1/AUTH_p-7"},
                    {"interface": "public", "region": "RegionTwo", "region_id": "RegionTwo", "url": "http://127.0.0.1:9/v1/AUTH_p-7"},
                    {"interface": "public", "region": "RegionOne", "region_id": "RegionOne", "url": format!("{base}/v1/AUTH_{PROJECT}")}
                ]},
                {"type": "metric", "name": "gnocchi", "id": "g1", "endpoints": [
                    {"interface": "public", "region": "RegionOne", "region_id": "RegionOne", "url": base}
                ]}
            ]
        }})
        .to_string(),
    )
}

fn fake(state: Arc<State>) -> impl Fn(&Request) -> Answer + Send + Sync + 'static {
    move |r: &Request| {
        if r.path() == "/v3/auth/tokens" && r.method == "POST" {
            return keystone(&state, r);
        }
        let valid = format!("tok-{}", state.issued.load(Ordering::SeqCst));
        if r.header("x-auth-token").as_deref() != Some(valid.as_str()) {
            return json(
                StatusCode::UNAUTHORIZED,
                serde_json::json!({"error": "Authentication required SECRET-TEXT"}),
            );
        }
        if r.method == "HEAD" {
            if r.path() != format!("/v1/AUTH_{PROJECT}/{CONTAINER}") {
                return (StatusCode::NOT_FOUND, vec![], String::new());
            }
            let count = state.objects.load(Ordering::SeqCst);
            return (
                StatusCode::NO_CONTENT,
                vec![
                    ("x-container-object-count", count.to_string()),
                    ("x-container-bytes-used", (count * 1024).to_string()),
                    ("x-timestamp", "1767225600.00000".into()),
                ],
                String::new(),
            );
        }
        if r.method == "GET" && r.path() == format!("/v1/metric/{METRIC}/measures") {
            let start_ok = r.query("start").is_some_and(|s| {
                s.len() == 19
                    && s.ends_with(":00")
                    && format!("{s}Z").parse::<jiff::Timestamp>().is_ok()
            });
            if r.query("granularity").as_deref() != Some("300")
                || r.query("aggregation").as_deref() != Some("mean")
                || !start_ok
            {
                return json(
                    StatusCode::BAD_REQUEST,
                    serde_json::json!({"code": 400, "description": "Invalid input SECRET-TEXT"}),
                );
            }
            return json(
                StatusCode::OK,
                state.measures.lock().expect("measures").clone(),
            );
        }
        json(
            StatusCode::NOT_FOUND,
            serde_json::json!({"code": 404, "description": "Metric does not exist SECRET-TEXT"}),
        )
    }
}

async fn start() -> (Arc<State>, Fake) {
    let state = Arc::new(State {
        issued: AtomicUsize::new(0),
        objects: AtomicI64::new(1),
        measures: Mutex::new(serde_json::json!([])),
        base: Mutex::new(String::new()),
    });
    let server = Fake::start(fake(state.clone())).await;
    *state.base.lock().expect("base") = server.url();
    (state, server)
}

async fn swift(server: &Fake, metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> Harness {
    let auth_url = format!("{}/v3", server.url());
    let mut all = vec![("authURL", auth_url.as_str())];
    all.extend_from_slice(auth);
    conformance(
        "openstack-swift",
        Setup {
            metadata,
            auth: &all,
            ..Setup::default()
        },
    )
    .await
}

const PASSWORD: &[(&str, &str)] = &[
    ("userID", "u-1"),
    ("password", "pa55-w0rd"),
    ("projectID", PROJECT),
    ("regionName", "RegionOne"),
];

#[tokio::test]
async fn swift_counts_the_container_s_objects_through_the_catalog_endpoint() {
    let (state, server) = start().await;
    let h = swift(&server, &[], PASSWORD).await;
    assert_eq!(h.metric_name, "s0-openstack-swift-uploads");
    h.expect(1.0, false).await; // not above activationObjectCount 1
    state.objects.store(25, Ordering::SeqCst);
    h.expect(25.0, true).await;
    // One token for both polls.
    assert_eq!(state.issued.load(Ordering::SeqCst), 1);
    // A token the API refuses (revoked) is renewed once, within the poll.
    state.issued.fetch_add(1, Ordering::SeqCst);
    h.expect(25.0, true).await;
    assert_eq!(state.issued.load(Ordering::SeqCst), 3);
    let heads: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.method == "HEAD")
        .collect();
    assert_eq!(heads.len(), 4);
    assert!(heads.iter().all(|r| r.path() == "/v1/AUTH_p-7/uploads"));
    h.close().await;

    // Application credentials, swiftURL instead of the catalog.
    let swift_url = format!("{}/v1/AUTH_{PROJECT}", server.url());
    let app = swift(
        &server,
        &[("swiftURL", &swift_url)],
        &[
            ("appCredentialID", "ac-1"),
            ("appCredentialSecret", "ac-s3cret"),
        ],
    )
    .await;
    app.expect(25.0, true).await;
    app.close().await;
}

#[tokio::test]
async fn swift_errors_show_the_status_never_secrets_or_the_answer() {
    let (_state, server) = start().await;
    let wrong = swift(
        &server,
        &[],
        &[
            ("userID", "u-1"),
            ("password", "wr0ng-pa55"),
            ("projectID", PROJECT),
        ],
    )
    .await;
    let text = wrong.expect_error().await.to_string();
    assert!(
        text.contains("401") && text.contains("Keystone token") && text.contains("user u-1"),
        "{text}"
    );
    assert!(
        !text.contains("wr0ng-pa55") && !text.contains("SECRET-TEXT"),
        "{text}"
    );
    wrong.close().await;

    let missing = swift(&server, &[("containerName", "gone")], PASSWORD).await;
    let text = missing.expect_error().await.to_string();
    assert!(
        text.contains("404") && text.contains("container gone"),
        "{text}"
    );
    assert!(!text.contains("tok-"), "{text}");
    missing.close().await;

    let region = swift(
        &server,
        &[],
        &[
            ("userID", "u-1"),
            ("password", "pa55-w0rd"),
            ("projectID", PROJECT),
            ("regionName", "RegionNine"),
        ],
    )
    .await;
    let text = region.expect_error().await.to_string();
    assert!(text.contains("regionName"), "{text}");
    region.close().await;
}

async fn metric(server: &Fake, auth: &[(&str, &str)]) -> Harness {
    let metrics_url = format!("{}/v1/metric", server.url());
    let auth_url = server.url();
    let mut all = vec![("authURL", auth_url.as_str())];
    all.extend_from_slice(auth);
    conformance(
        "openstack-metric",
        Setup {
            metadata: &[("metricsURL", &metrics_url)],
            auth: &all,
            ..Setup::default()
        },
    )
    .await
}

#[tokio::test]
async fn metric_reads_the_last_gnocchi_measure() {
    let (state, server) = start().await;
    let h = metric(&server, &PASSWORD[..3]).await;
    assert_eq!(h.metric_name, format!("s0-openstack-metric-{METRIC}"));
    h.expect(0.0, false).await; // no measures: KEDA's 0
    *state.measures.lock().unwrap() = serde_json::json!([
        ["2026-01-01T11:55:00+00:00", 300.0, 4.0],
        ["2026-01-01T12:00:00+00:00", 300.0, 1.75]
    ]);
    h.expect(1.75, true).await; // above activationThreshold 0.25
    *state.measures.lock().unwrap() =
        serde_json::json!([["2026-01-01T12:00:00+00:00", 300.0, 0.25]]);
    h.expect(0.25, false).await;
    *state.measures.lock().unwrap() = serde_json::json!([["2026-01-01T12:00:00+00:00", 300.0]]);
    let text = h.expect_error().await.to_string();
    assert!(text.contains("triple"), "{text}");
    assert_eq!(state.issued.load(Ordering::SeqCst), 1);
    h.close().await;

    *state.measures.lock().unwrap() =
        serde_json::json!([["2026-01-01T12:00:00+00:00", 300.0, 3.0]]);
    let app = metric(
        &server,
        &[
            ("appCredentialID", "ac-1"),
            ("appCredentialSecret", "ac-s3cret"),
        ],
    )
    .await;
    app.expect(3.0, true).await;
    app.close().await;

    let unscoped = metric(&server, &PASSWORD[..2]).await;
    let text = unscoped.expect_error().await.to_string();
    assert!(
        text.contains("401") && !text.contains("SECRET-TEXT"),
        "{text}"
    );
    unscoped.close().await;
}
