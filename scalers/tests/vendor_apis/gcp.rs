//! `gcp-pubsub`, `gcp-stackdriver`, `gcp-cloudtasks` and `gcp-storage` against fakes of Google's
//! OAuth 2.0 token endpoint, Cloud Monitoring's v3 REST API and Cloud Storage's JSON API, on one
//! loopback server that the process's vendor endpoints put in place of `oauth2.googleapis.com`,
//! `monitoring.googleapis.com` and `storage.googleapis.com`.
//!
//! - Token endpoint, following
//!   <https://developers.google.com/identity/protocols/oauth2/service-account#httprest> and
//!   RFC 7523: `POST /token` with a form `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`
//!   and `assertion=<JWT>`; the fake verifies the RS256 signature with the service account's
//!   public key and checks `iss`, `aud`, `scope`, `iat`/`exp` (at most one hour); a bad
//!   assertion is 400 `{"error":"invalid_grant","error_description":...}`; a good one
//!   `{"access_token":...,"expires_in":3599,"token_type":"Bearer"}`.
//! - Cloud Monitoring, following
//!   <https://cloud.google.com/monitoring/api/ref_v3/rest/v3/projects.timeSeries/list> and
//!   <https://cloud.google.com/monitoring/api/ref_v3/rest/v3/projects.timeSeries/query>:
//!   `Authorization: Bearer <token>` or 401 `UNAUTHENTICATED`; `GET
//!   /v3/projects/{p}/timeSeries` needs `filter`, `interval.endTime` (400 `INVALID_ARGUMENT`
//!   otherwise), answers `ListTimeSeriesResponse` (`timeSeries[].points[].value`, the
//!   `nextPageToken` paging); `POST /v3/projects/{p}/timeSeries:query` with `{"query",
//!   "pageSize"}` answers `QueryTimeSeriesResponse` (`timeSeriesData[].pointData[].values[]`);
//!   errors in Google's JSON error shape (<https://cloud.google.com/apis/design/errors>).
//! - Cloud Storage, following <https://cloud.google.com/storage/docs/json_api/v1/objects/list>:
//!   `GET /storage/v1/b/{bucket}/o` with `prefix`, `delimiter`, `fields`, `pageToken`; answers
//!   `{"items":[{"name","size":"<uint64 as string>"}],"prefixes","nextPageToken"}`; an unknown
//!   bucket is 404 `NOT_FOUND`.

use std::sync::{Arc, Mutex};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::StatusCode;
use keda_scalers::http_client::VendorEndpoints;
use keda_scalers::{Clock, ScalerError};

use crate::common::{Harness, Setup, conformance};
use crate::http_server::{Recorded, TestServer, handler};

/// 2023-11-14T22:13:20Z.
const NOW: i64 = 1_700_000_000;
const EMAIL: &str = "keda@my-project.iam.gserviceaccount.com";
const TOKEN: &str = "ya29.fake-access-t0ken";

/// A fresh 2048-bit RSA key as PKCS#8 PEM, made by the `openssl` command line (ring cannot
/// generate RSA keys): nothing secret is checked in.
fn rsa_key() -> String {
    let output = std::process::Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
        ])
        .output()
        .expect("the openssl command line (Debian package openssl) is installed");
    assert!(output.status.success(), "openssl genpkey failed");
    String::from_utf8(output.stdout).expect("PEM")
}

/// The public key (PKCS#1 DER) of a PKCS#8 PEM private key.
fn public_key(pem_text: &str) -> Vec<u8> {
    let der = pem::parse(pem_text).expect("PEM").into_contents();
    let pair = ring::signature::RsaKeyPair::from_pkcs8(&der).expect("RSA key");
    use ring::signature::KeyPair as _;
    pair.public_key().as_ref().to_vec()
}

fn key_json(private_key: &str, token_uri: &str) -> String {
    serde_json::json!({
        "type": "service_account",
        "project_id": "my-project",
        "private_key_id": "k3y-id-1",
        "private_key": private_key,
        "client_email": EMAIL,
        "client_id": "1234567890",
        "auth_uri": "https://accounts.google.com/o/oauth2/auth",
        "token_uri": token_uri,
    })
    .to_string()
}

/// What the fake Cloud Monitoring answers, and what the fake counted.
#[derive(Default)]
struct Fake {
    /// The answer to an authorized, well-formed API request.
    reply: Option<(StatusCode, String)>,
    /// Pages of `timeSeries.list` by page token (`""` for the first).
    pages: Vec<(String, String)>,
    tokens_issued: usize,
    /// The token endpoint refuses every assertion.
    refuse_tokens: bool,
}

type State = Arc<Mutex<Fake>>;

fn google_error(
    status: StatusCode,
    name: &str,
    message: &str,
) -> (StatusCode, &'static str, String) {
    (
        status,
        "application/json; charset=UTF-8",
        serde_json::json!({"error": {"code": status.as_u16(), "message": message, "status": name}})
            .to_string(),
    )
}

/// Checks an assertion as Google's token endpoint does: signature, issuer, audience, scope and
/// lifetime. `None` when it is good.
fn bad_assertion(assertion: &str, public: &[u8], audience: &str) -> Option<&'static str> {
    let mut parts = assertion.split('.');
    let (Some(header), Some(claims), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Some("not a JWT");
    };
    let decode = |part: &str| -> Option<Vec<u8>> { URL_SAFE_NO_PAD.decode(part).ok() };
    let json =
        |part: &str| -> Option<serde_json::Value> { serde_json::from_slice(&decode(part)?).ok() };
    let (Some(signature), Some(header), Some(claims)) =
        (decode(signature), json(header), json(claims))
    else {
        return Some("malformed JWT");
    };
    let key = ring::signature::UnparsedPublicKey::new(
        &ring::signature::RSA_PKCS1_2048_8192_SHA256,
        public,
    );
    let signed = assertion
        .rsplit_once('.')
        .map(|(s, _)| s)
        .unwrap_or_default();
    if key.verify(signed.as_bytes(), &signature).is_err() {
        return Some("Invalid JWT Signature.");
    }
    if header["alg"] != "RS256" || header["typ"] != "JWT" || header["kid"] != "k3y-id-1" {
        return Some("bad header");
    }
    if claims["iss"] != EMAIL || claims["aud"] != audience {
        return Some("Invalid JWT: issuer or audience");
    }
    let scopes = claims["scope"].as_str().unwrap_or_default();
    // Cloud Monitoring's read scope, or Cloud Storage's.
    if !scopes.split(' ').any(|s| {
        s == "https://www.googleapis.com/auth/monitoring.read"
            || s == "https://www.googleapis.com/auth/devstorage.full_control"
    }) {
        return Some("Invalid scope");
    }
    let (Some(iat), Some(exp)) = (claims["iat"].as_i64(), claims["exp"].as_i64()) else {
        return Some("no iat or exp");
    };
    if exp - iat > 3600 || !(iat..=exp).contains(&NOW) {
        return Some("Invalid JWT: Token must be a short-lived token");
    }
    None
}

fn google(state: State, public: Vec<u8>, audience: String) -> crate::http_server::Handler {
    handler(move |r: &Recorded| {
        let path = r.uri.split('?').next().unwrap_or_default().to_string();
        if path == "/token" {
            assert_eq!(r.method, "POST");
            assert_eq!(
                r.header("content-type").as_deref(),
                Some("application/x-www-form-urlencoded")
            );
            let form: Vec<(String, String)> = url::form_urlencoded::parse(r.body.as_bytes())
                .into_owned()
                .collect();
            let field = |name: &str| {
                form.iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default()
            };
            if field("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
                return (
                    StatusCode::BAD_REQUEST,
                    "application/json",
                    r#"{"error":"unsupported_grant_type","error_description":"Invalid grant_type: "}"#
                        .into(),
                );
            }
            let mut s = state.lock().expect("fake");
            let why = if s.refuse_tokens {
                Some("Invalid JWT Signature.")
            } else {
                bad_assertion(&field("assertion"), &public, &audience)
            };
            if let Some(why) = why {
                return (
                    StatusCode::BAD_REQUEST,
                    "application/json",
                    serde_json::json!({"error": "invalid_grant", "error_description": why})
                        .to_string(),
                );
            }
            s.tokens_issued += 1;
            return (
                StatusCode::OK,
                "application/json; charset=utf-8",
                serde_json::json!({"access_token": TOKEN, "expires_in": 3599,
                    "token_type": "Bearer"})
                .to_string(),
            );
        }
        if r.header("authorization").as_deref() != Some(&format!("Bearer {TOKEN}")) {
            return google_error(
                StatusCode::UNAUTHORIZED,
                "UNAUTHENTICATED",
                "Request had invalid authentication credentials. Expected OAuth 2 access token",
            );
        }
        let s = state.lock().expect("fake");
        if let Some((status, body)) = &s.reply {
            return (*status, "application/json; charset=UTF-8", body.clone());
        }
        if r.method == "GET" && path.starts_with("/v3/projects/") && path.ends_with("/timeSeries") {
            if r.query("filter").is_none() || r.query("interval.endTime").is_none() {
                return google_error(
                    StatusCode::BAD_REQUEST,
                    "INVALID_ARGUMENT",
                    "Field filter had an invalid value",
                );
            }
            let token = r.query("pageToken").unwrap_or_default();
            return match s.pages.iter().find(|(t, _)| *t == token) {
                Some((_, page)) => (StatusCode::OK, "application/json", page.clone()),
                None => google_error(StatusCode::BAD_REQUEST, "INVALID_ARGUMENT", "bad page"),
            };
        }
        if r.method == "GET" && path.starts_with("/storage/v1/b/") && path.ends_with("/o") {
            // https://cloud.google.com/storage/docs/json_api/v1/objects/list
            if path != "/storage/v1/b/my-bucket/o" {
                return google_error(
                    StatusCode::NOT_FOUND,
                    "NOT_FOUND",
                    "The specified bucket does not exist.",
                );
            }
            assert_eq!(r.query("projection").as_deref(), Some("full"));
            let token = r.query("pageToken").unwrap_or_default();
            return match s.pages.iter().find(|(t, _)| *t == token) {
                Some((_, page)) => (StatusCode::OK, "application/json", page.clone()),
                None => google_error(StatusCode::BAD_REQUEST, "INVALID_ARGUMENT", "bad page"),
            };
        }
        if r.method == "POST" && path.ends_with("/timeSeries:query") {
            let body: serde_json::Value = serde_json::from_str(&r.body).expect("JSON body");
            assert_eq!(body["pageSize"], 1);
            let page = s.pages.first().map(|(_, p)| p.clone()).unwrap_or_default();
            return (StatusCode::OK, "application/json", page);
        }
        google_error(StatusCode::NOT_FOUND, "NOT_FOUND", "not found")
    })
}

struct Google {
    server: TestServer,
    state: State,
    key: String,
}

async fn start() -> Google {
    let private = rsa_key();
    let state = State::default();
    let server = TestServer::start(google(
        state.clone(),
        public_key(&private),
        "https://oauth2.googleapis.com/token".into(),
    ))
    .await;
    Google {
        key: key_json(&private, "https://oauth2.googleapis.com/token"),
        server,
        state,
    }
}

impl Google {
    fn endpoints(&self) -> VendorEndpoints {
        let fake = url::Url::parse(&self.server.url("/")).expect("fake URL");
        VendorEndpoints::default()
            .with("oauth2.googleapis.com", fake.clone())
            .with("monitoring.googleapis.com", fake.clone())
            .with("storage.googleapis.com", fake)
    }

    async fn harness(&self, trigger_type: &str, metadata: &[(&str, &str)]) -> Harness {
        conformance(
            trigger_type,
            Setup {
                metadata,
                auth: &[("GoogleApplicationCredentials", &self.key)],
                clock: Some(Clock::fixed(
                    jiff::Timestamp::from_second(NOW).expect("time"),
                )),
                vendor_endpoints: self.endpoints(),
                ..Setup::default()
            },
        )
        .await
    }

    fn pages(&self, pages: &[(&str, &str)]) {
        self.state.lock().expect("fake").pages = pages
            .iter()
            .map(|(t, p)| (t.to_string(), p.to_string()))
            .collect();
    }

    fn api_requests(&self) -> Vec<Recorded> {
        self.server
            .requests()
            .into_iter()
            .filter(|r| !r.uri.starts_with("/token"))
            .collect()
    }
}

fn query_answer(value: &str) -> String {
    format!(
        r#"{{"timeSeriesDescriptor":{{"labelDescriptors":[],"pointDescriptors":[{{"key":"value.num_undelivered_messages","valueType":"INT64","metricKind":"GAUGE"}}]}},"timeSeriesData":[{{"labelValues":[],"pointData":[{{"values":[{value}],"timeInterval":{{"startTime":"2023-11-14T22:12:00Z","endTime":"2023-11-14T22:12:00Z"}}}}]}}]}}"#
    )
}

fn list_answer(points: &str) -> String {
    format!(
        r#"{{"timeSeries":[{{"metric":{{"type":"cloudtasks.googleapis.com/queue/depth"}},"resource":{{"type":"cloud_tasks_queue","labels":{{"project_id":"my-project","queue_id":"my-queue"}}}},"metricKind":"GAUGE","valueType":"INT64","points":[{points}]}}],"unit":"1"}}"#
    )
}

#[tokio::test]
async fn pubsub_queries_cloud_monitoring_with_a_token_of_the_service_account() {
    let g = start().await;
    g.pages(&[("", &query_answer(r#"{"int64Value":"12"}"#))]);
    let h = g.harness("gcp-pubsub", &[]).await;
    assert_eq!(
        h.metric_name,
        "s0-gcp-ps-projects-my-project-subscriptions-orders"
    );
    h.expect(12.0, true).await;
    let request = g.api_requests().pop().expect("a query");
    assert_eq!(request.method, "POST");
    assert_eq!(request.uri, "/v3/projects/my-project/timeSeries:query");
    let body: serde_json::Value = serde_json::from_str(&request.body).expect("JSON");
    assert_eq!(
        body["query"],
        "fetch pubsub_subscription | metric 'pubsub.googleapis.com/subscription/num_undelivered_messages' | filter (resource.project_id == 'my-project' && resource.subscription_id == 'orders') | within 2m0s"
    );
    // The token is reused while fresh: a second poll asks for none.
    h.expect(12.0, true).await;
    assert_eq!(g.state.lock().expect("fake").tokens_issued, 1);

    // No series: an error without valueIfNull, valueIfNull with it.
    g.pages(&[("", r#"{"timeSeriesDescriptor":{}}"#)]);
    let err = h.expect_error().await.to_string();
    assert!(err.contains("could not find stackdriver metric"), "{err}");
    let h2 = g
        .harness(
            "gcp-pubsub",
            &[("valueIfNull", "0"), ("mode", "OldestUnackedMessageAge")],
        )
        .await;
    h2.expect(0.0, false).await;
    assert!(
        g.api_requests()
            .pop()
            .expect("query")
            .body
            .contains("pubsub.googleapis.com/subscription/oldest_unacked_message_age")
    );
    // A double value, and a series without points (-1, as KEDA).
    g.pages(&[("", &query_answer(r#"{"doubleValue":2.5}"#))]);
    h2.expect(2.5, true).await;
    g.pages(&[(
        "",
        r#"{"timeSeriesData":[{"labelValues":[],"pointData":[]}]}"#,
    )]);
    h2.expect(-1.0, false).await;
    h2.close().await;
    h.close().await;
}

#[tokio::test]
async fn the_api_refusals_are_named_by_googles_status_never_its_text() {
    let g = start().await;
    g.pages(&[("", &query_answer(r#"{"int64Value":"1"}"#))]);
    let h = g.harness("gcp-pubsub", &[]).await;
    g.state.lock().expect("fake").reply = Some((
        StatusCode::FORBIDDEN,
        serde_json::json!({"error": {"code": 403, "status": "PERMISSION_DENIED",
            "message": "Permission monitoring.timeSeries.list denied (s3cret detail)"}})
        .to_string(),
    ));
    let err = h.expect_error().await;
    assert!(matches!(err, ScalerError::Query { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("PERMISSION_DENIED"), "{text}");
    assert!(text.contains("my-project"), "{text}");
    assert!(!text.contains("s3cret") && !text.contains(TOKEN), "{text}");
    // Throttling (429 RESOURCE_EXHAUSTED, https://cloud.google.com/monitoring/quotas).
    g.state.lock().expect("fake").reply = Some((
        StatusCode::TOO_MANY_REQUESTS,
        r#"{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED"}}"#.into(),
    ));
    assert!(
        h.expect_error()
            .await
            .to_string()
            .contains("RESOURCE_EXHAUSTED")
    );
    // A 401 drops the token: the next poll asks for a new one.
    let issued = g.state.lock().expect("fake").tokens_issued;
    g.state.lock().expect("fake").reply = Some(google_error(
        StatusCode::UNAUTHORIZED,
        "UNAUTHENTICATED",
        "expired",
    ))
    .map(|(s, _, b)| (s, b));
    assert!(
        h.expect_error()
            .await
            .to_string()
            .contains("UNAUTHENTICATED")
    );
    g.state.lock().expect("fake").reply = None;
    h.expect(1.0, true).await;
    assert_eq!(g.state.lock().expect("fake").tokens_issued, issued + 1);
    h.close().await;
}

#[tokio::test]
async fn a_refused_assertion_names_the_oauth_code_and_a_wrong_key_is_refused_by_signature() {
    let g = start().await;
    g.pages(&[("", &query_answer(r#"{"int64Value":"1"}"#))]);
    g.state.lock().expect("fake").refuse_tokens = true;
    let h = g.harness("gcp-pubsub", &[]).await;
    let text = h.expect_error().await.to_string();
    assert!(
        text.contains("invalid_grant") && text.contains(EMAIL),
        "{text}"
    );
    assert!(!text.contains("Invalid JWT Signature"), "{text}");
    h.close().await;
    g.state.lock().expect("fake").refuse_tokens = false;

    // Another key for the same account: the fake's signature check refuses it.
    let other = key_json(&rsa_key(), "https://oauth2.googleapis.com/token");
    let h = conformance(
        "gcp-pubsub",
        Setup {
            auth: &[("GoogleApplicationCredentials", &other)],
            clock: Some(Clock::fixed(jiff::Timestamp::from_second(NOW).expect("t"))),
            vendor_endpoints: g.endpoints(),
            ..Setup::default()
        },
    )
    .await;
    assert!(h.expect_error().await.to_string().contains("invalid_grant"));
    h.close().await;
    assert_eq!(g.state.lock().expect("fake").tokens_issued, 0);
}

#[tokio::test]
async fn keys_that_cannot_be_used_stop_the_build_naming_the_parameter() {
    let g = start().await;
    let registry = keda_scalers::Registry::builtin();
    let build = |auth: Vec<(&'static str, String)>,
                 env: Vec<(&'static str, String)>,
                 meta: Vec<(&'static str, &'static str)>| {
        let mut ctx = keda_scalers::ScalerContext::new("gcp-pubsub", 0);
        ctx.metadata
            .insert("subscriptionName".into(), "orders".into());
        for (k, v) in meta {
            ctx.metadata.insert(k.into(), v.into());
        }
        ctx.auth_params = auth
            .into_iter()
            .map(|(k, v)| (k.to_string(), keda_scalers::secret::Secret::new(v)))
            .collect();
        ctx.resolved_env = env.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        ctx.vendor_endpoints = g.endpoints();
        ctx
    };
    let err = |ctx| async {
        match registry.build(ctx).await {
            Ok(_) => panic!("built"),
            Err(e) => e.to_string(),
        }
    };
    let e = err(build(
        vec![("GoogleApplicationCredentials", "{not json".into())],
        vec![],
        vec![],
    ))
    .await;
    assert!(
        e.contains("GoogleApplicationCredentials") && e.contains("not JSON"),
        "{e}"
    );
    let plain_http = key_json(
        "-----BEGIN PRIVATE KEY-----\nAA==\n-----END PRIVATE KEY-----",
        "http://169.254.169.254/token",
    );
    let e = err(build(
        vec![("GoogleApplicationCredentials", plain_http)],
        vec![],
        vec![],
    ))
    .await;
    assert!(e.contains("private_key"), "{e}");
    let private = rsa_key();
    let e = err(build(
        vec![],
        vec![(
            "CREDS",
            key_json(&private, "http://metadata.google.internal/token"),
        )],
        vec![("credentialsFromEnv", "CREDS")],
    ))
    .await;
    assert!(
        e.contains("credentialsFromEnv") && e.contains("https://"),
        "{e}"
    );
    let e = err(build(
        vec![],
        vec![("CREDS_FILE", "/etc/passwd".into())],
        vec![("credentialsFromEnvFile", "CREDS_FILE")],
    ))
    .await;
    assert!(
        e.contains("credentialsFromEnvFile") && e.contains("trigger file root"),
        "{e}"
    );
    let e = err(build(vec![], vec![], vec![])).await;
    assert!(
        e.contains("google application credentials not found"),
        "{e}"
    );
    // Nothing reached the fake.
    assert!(g.server.requests().is_empty());
}

#[tokio::test]
async fn stackdriver_lists_time_series_with_the_filter_and_the_alignment() {
    let g = start().await;
    g.pages(&[
        // An empty first page with a next page, as the API may answer.
        ("", r#"{"timeSeries":[],"nextPageToken":"p2"}"#),
        ("p2", &list_answer(r#"{"interval":{"endTime":"2023-11-14T22:13:00Z"},"value":{"int64Value":"140"}},{"value":{"int64Value":"3"}}"#)),
    ]);
    let h = g.harness("gcp-stackdriver", &[]).await;
    assert_eq!(h.metric_name, "s0-gcp-stackdriver-my-project");
    h.expect(140.0, true).await;
    let requests = g.api_requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    let r = &requests[0];
    assert_eq!(r.method, "GET");
    assert!(
        r.uri.starts_with("/v3/projects/my-project/timeSeries?"),
        "{}",
        r.uri
    );
    assert_eq!(
        r.query("filter").as_deref(),
        Some(
            r#"metric.type="storage.googleapis.com/storage/object_count" resource.type="gcs_bucket" resource.label.bucket_name="my-bucket" AND resource.labels.project_id="my-project""#
        )
    );
    assert_eq!(
        r.query("interval.startTime").as_deref(),
        Some("2023-11-14T22:11:20Z")
    );
    assert_eq!(
        r.query("interval.endTime").as_deref(),
        Some("2023-11-14T22:13:20Z")
    );
    assert_eq!(
        r.query("aggregation.alignmentPeriod").as_deref(),
        Some("60s")
    );
    assert_eq!(
        r.query("aggregation.perSeriesAligner").as_deref(),
        Some("ALIGN_MAX")
    );
    assert_eq!(
        r.query("aggregation.crossSeriesReducer").as_deref(),
        Some("REDUCE_SUM")
    );
    assert_eq!(requests[1].query("pageToken").as_deref(), Some("p2"));

    // No series: valueIfNull, or an error naming the filter.
    g.pages(&[("", "{}")]);
    let err = h.expect_error().await.to_string();
    assert!(
        err.contains("could not find stackdriver metric with filter"),
        "{err}"
    );
    let h2 = g
        .harness(
            "gcp-stackdriver",
            &[("valueIfNull", "0"), ("filterDuration", "5")],
        )
        .await;
    h2.expect(0.0, false).await;
    let r = g.api_requests().pop().expect("request");
    assert_eq!(
        r.query("interval.startTime").as_deref(),
        Some("2023-11-14T22:08:20Z")
    );
    // A string value cannot scale, and its text stays out of the message.
    g.pages(&[(
        "",
        &list_answer(r#"{"value":{"stringValue":"s3cret-text"}}"#),
    )]);
    let err = h2.expect_error().await.to_string();
    assert!(
        err.contains("stringValue") && !err.contains("s3cret"),
        "{err}"
    );
    // 400 INVALID_ARGUMENT (a filter Cloud Monitoring refuses).
    g.state.lock().expect("fake").reply = Some((
        StatusCode::BAD_REQUEST,
        r#"{"error":{"code":400,"message":"Field filter had an invalid value of \"x\"","status":"INVALID_ARGUMENT"}}"#.into(),
    ));
    let err = h2.expect_error().await.to_string();
    assert!(
        err.contains("INVALID_ARGUMENT") && !err.contains("invalid value"),
        "{err}"
    );
    h2.close().await;
    h.close().await;
}

#[tokio::test]
async fn cloudtasks_reads_the_queue_depth() {
    let g = start().await;
    g.pages(&[("", &list_answer(r#"{"value":{"int64Value":"7"}}"#))]);
    let h = g.harness("gcp-cloudtasks", &[]).await;
    assert_eq!(h.metric_name, "s0-gcp-ct-my-queue");
    h.expect(7.0, true).await;
    let r = g.api_requests().pop().expect("request");
    assert_eq!(
        r.query("filter").as_deref(),
        Some(
            r#"metric.type="cloudtasks.googleapis.com/queue/depth" AND resource.labels.queue_id="my-queue" AND resource.labels.project_id="my-project""#
        )
    );
    assert!(r.uri.starts_with("/v3/projects/my-project/timeSeries?"));
    assert_eq!(r.query("aggregation.alignmentPeriod"), None);
    // No series: an error (no valueIfNull in KEDA's cloudtasks).
    g.pages(&[("", "{}")]);
    assert!(
        h.expect_error()
            .await
            .to_string()
            .contains("could not find")
    );
    g.pages(&[("", &list_answer(r#"{"value":{"int64Value":"0"}}"#))]);
    h.expect(0.0, false).await;
    h.close().await;
}

fn objects(sizes: &[u64], next: Option<&str>) -> String {
    let items: Vec<serde_json::Value> = sizes
        .iter()
        .enumerate()
        .map(|(i, size)| serde_json::json!({"name": format!("in/o{i}"), "size": size.to_string()}))
        .collect();
    let mut page =
        serde_json::json!({"kind": "storage#objects", "prefixes": ["in/sub/"], "items": items});
    if let Some(next) = next {
        page["nextPageToken"] = next.into();
    }
    page.to_string()
}

#[tokio::test]
async fn storage_counts_non_empty_objects_over_pages_up_to_the_limit() {
    let g = start().await;
    // Two pages: 3 objects (one empty, a folder placeholder) then 2.
    g.pages(&[
        ("", &objects(&[10, 0, 5], Some("p2"))),
        ("p2", &objects(&[1, 7], None)),
    ]);
    let h = g.harness("gcp-storage", &[]).await;
    assert_eq!(h.metric_name, "s0-gcp-storage-my-bucket");
    h.expect(4.0, true).await;
    let requests = g.api_requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    let r = &requests[0];
    assert!(r.uri.starts_with("/storage/v1/b/my-bucket/o?"), "{}", r.uri);
    assert_eq!(r.query("prefix").as_deref(), Some("input/"));
    assert_eq!(r.query("versions").as_deref(), Some("false"));
    assert!(r.query("fields").is_some_and(|f| f.contains("size")));
    assert_eq!(requests[1].query("pageToken").as_deref(), Some("p2"));
    let token = g
        .server
        .requests()
        .into_iter()
        .find(|r| r.uri == "/token")
        .expect("a token request");
    assert!(token.body.contains("assertion="));

    // maxBucketItemsToScan 2: the first page is enough.
    let limited = g
        .harness("gcp-storage", &[("maxBucketItemsToScan", "2")])
        .await;
    let before = g.api_requests().len();
    limited.expect(2.0, true).await;
    assert_eq!(g.api_requests().len(), before + 1);
    limited.close().await;
    // At or below activationTargetObjectCount (the example's 0): an empty bucket is inactive.
    g.pages(&[("", r#"{"kind":"storage#objects"}"#)]);
    h.expect(0.0, false).await;
    h.close().await;

    // A bucket that does not exist counts 0, as in KEDA.
    let missing = g
        .harness("gcp-storage", &[("bucketName", "no-such-bucket")])
        .await;
    missing.expect(0.0, false).await;
    // Other refusals are errors naming Google's status.
    g.state.lock().expect("fake").reply = Some((
        StatusCode::FORBIDDEN,
        r#"{"error":{"code":403,"message":"keda@ does not have storage.objects.list access","status":"PERMISSION_DENIED"}}"#.into(),
    ));
    let text = missing.expect_error().await.to_string();
    assert!(
        text.contains("PERMISSION_DENIED") && !text.contains("storage.objects.list access"),
        "{text}"
    );
    missing.close().await;
}

#[test]
fn every_documented_example_parses_with_its_defaults_documented() {
    let registry = keda_scalers::Registry::builtin();
    for trigger_type in [
        "gcp-cloudtasks",
        "gcp-pubsub",
        "gcp-stackdriver",
        "gcp-storage",
    ] {
        crate::common::assert_defaults_documented(&registry, trigger_type);
        let examples = crate::common::documented_examples(trigger_type);
        assert!(!examples.is_empty(), "{trigger_type}");
        for (trigger, index, auth) in examples {
            assert_eq!(auth, ["GoogleApplicationCredentials"], "{trigger_type}");
            let mut ctx = keda_scalers::ScalerContext::from_trigger(&trigger, index);
            ctx.auth_params.insert(
                "GoogleApplicationCredentials".into(),
                keda_scalers::Secret::new("{}"),
            );
            let checked = registry.check(&ctx).expect("a parse-only check");
            assert!(
                checked.is_ok(),
                "docs/scalers/{trigger_type}.md: {checked:?}"
            );
        }
    }
}
