//! `huawei-cloudeye` against one fake of Huawei Cloud's IAM and Cloud Eye behind API Gateway,
//! following Huawei's API references:
//! - AK/SK authentication ("Calling APIs > Authentication > AK/SK-based authentication", and
//!   API Gateway's "App Authentication / signing"): each request carries `X-Sdk-Date`
//!   (`YYYYMMDDTHHMMSSZ`, at most 15 minutes off), `Host` and `Authorization:
//!   SDK-HMAC-SHA256 ...`; the gateway recomputes the signature from the canonical request and
//!   the secret key and refuses a wrong one with `401` and `{"error_code": "APIGW.0301",
//!   "error_msg": "Incorrect IAM authentication information: ..."}`; a throttled request gets
//!   `429` and `"error_code": "APIGW.0308"` (API Gateway's error codes). The fake verifies the
//!   signature in the form Huawei's gophercloud (the SDK KEDA uses) sends it, with its own
//!   code (below), not keda-rs'.
//! - IAM ("Service and Endpoint Management": "Querying Services", `GET /v3/services`;
//!   "Querying Endpoints", `GET /v3/endpoints`): `{"services": [{"id", "type", "name",
//!   "enabled", "links"}], "links": {"self", "previous", "next"}}` and `{"endpoints": [{"id",
//!   "interface", "region", "region_id", "service_id", "url", "enabled", "links"}], "links":
//!   ...}`; the services are served in two pages here, linked by `links.next`. A versionless
//!   identity URL answers Keystone's version document (`{"versions": {"values": [...]}}`).
//! - Cloud Eye API v1 ("Querying Monitoring Data of Multiple Metrics", `POST
//!   /V1.0/{project_id}/batch-query-metric-data`, `X-Project-Id` required): `{"metrics":
//!   [{"namespace", "metric_name", "dimensions": [{"name", "value"}]}], "from", "to",
//!   "period", "filter"}` with `from` < `to`, `period` one of 1, 300, 1200, 3600, 14400, 86400
//!   and `filter` one of average, max, min, sum, variance; answered `200` with `{"metrics":
//!   [{"unit", "datapoints": [{"<filter>": value, "timestamp"}], "namespace", "dimensions",
//!   "metric_name"}]}`, and `400` with `{"code", "message", "details": {"code": "ces.0014",
//!   "details"}}` for a bad parameter.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use hmac::{Hmac, Mac};
use http::StatusCode;
use sha2::{Digest, Sha256};

use crate::common::{Harness, Setup, conformance};
use crate::with_headers::{Answer, Fake, Request};

const PROJECT: &str = "0b5e2d6c9a8f4e1b8c3d7a6f5e4d3c2b";
const AK: &str = "HPUAQ3XKHUKZYTNEXAMPLE";
const SK: &str = "kT0sY9pQx2Lr8Vn4Wm6Zc1Bd3Fh5Jg7KlMnOpEXAMPLE";

struct State {
    base: Mutex<String>,
    /// Whether the catalog names a `cesv1` endpoint.
    catalog_ces: AtomicBool,
    /// Whether Cloud Eye is throttling.
    throttled: AtomicBool,
    /// Whether the first service page links its next page on another server.
    foreign_next: AtomicBool,
    /// The datapoints Cloud Eye answers.
    datapoints: Mutex<serde_json::Value>,
}

fn json(status: StatusCode, body: serde_json::Value) -> Answer {
    (status, vec![], body.to_string())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn hmac(key: &[u8], data: &str) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("any key length");
    mac.update(data.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

/// Java's `URLEncoder`-like encoding of the signer: unreserved bytes kept, `/` kept in paths.
fn encode(text: &str, path: bool) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) || (path && b == b'/') {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Why the request's signature is refused, or `None` when it is right: the gateway's check,
/// recomputed from the request as received.
fn signature_problem(r: &Request) -> Option<&'static str> {
    verify(r).err()
}

fn verify(r: &Request) -> Result<(), &'static str> {
    let date = r.header("x-sdk-date").ok_or("no X-Sdk-Date")?;
    let at = jiff::civil::DateTime::strptime("%Y%m%dT%H%M%SZ", &date)
        .ok()
        .and_then(|d| d.to_zoned(jiff::tz::TimeZone::UTC).ok())
        .ok_or("X-Sdk-Date is not YYYYMMDDTHHMMSSZ")?
        .timestamp();
    if (jiff::Timestamp::now().as_second() - at.as_second()).abs() > 15 * 60 {
        return Err("X-Sdk-Date is more than 15 minutes off");
    }
    let authorization = r.header("authorization").ok_or("no Authorization")?;
    let rest = authorization
        .strip_prefix("SDK-HMAC-SHA256 ")
        .ok_or("not SDK-HMAC-SHA256")?;
    let mut credential = None;
    let mut signed = None;
    let mut signature = None;
    for part in rest.split(", ") {
        match part.split_once('=') {
            Some(("Credential", v)) => credential = Some(v),
            Some(("SignedHeaders", v)) => signed = Some(v),
            Some(("Signature", v)) => signature = Some(v),
            _ => return Err("malformed Authorization"),
        }
    }
    let (Some(credential), Some(signed), Some(signature)) = (credential, signed, signature) else {
        return Err("incomplete Authorization");
    };
    let (ak, scope) = credential.split_once('/').ok_or("malformed Credential")?;
    if ak != AK {
        return Err("unknown access key");
    }
    let scope_parts: Vec<&str> = scope.split('/').collect();
    let [day, region, service, "sdk_request"] = scope_parts.as_slice() else {
        return Err("malformed scope");
    };
    if !date.starts_with(day) {
        return Err("the scope's date is not X-Sdk-Date's");
    }
    let names: Vec<&str> = signed.split(';').collect();
    if !names.contains(&"host") || !names.contains(&"x-sdk-date") {
        return Err("host and x-sdk-date must be signed");
    }
    let mut canonical_headers = String::new();
    for name in &names {
        let value = r.header(name).ok_or("a signed header is missing")?;
        let value = value.split_whitespace().collect::<Vec<_>>().join(" ");
        canonical_headers.push_str(&format!("{name}:{value}\n"));
    }
    let url = url::Url::parse(&format!("http://fake{}", r.uri)).map_err(|_| "bad URI")?;
    let mut path = percent_encoding::percent_decode_str(url.path())
        .decode_utf8_lossy()
        .into_owned();
    if !path.ends_with('/') {
        path.push('/');
    }
    let mut query: Vec<(String, String)> = Vec::new();
    for (k, v) in url.query_pairs() {
        if !query.iter().any(|(n, _)| *n == encode(&k, false)) {
            query.push((encode(&k, false), encode(&v, false)));
        }
    }
    query.sort_by_key(|(k, _)| k.to_lowercase());
    let query: Vec<String> = query.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let canonical = format!(
        "{}\n{}\n{}\n{}\n{}\n{}",
        r.method,
        encode(&path, true),
        query.join("&"),
        canonical_headers,
        signed,
        hex(&Sha256::digest(r.body.as_bytes()))
    );
    let to_sign = format!(
        "SDK-HMAC-SHA256\n{date}\n{scope}\n{}",
        hex(&Sha256::digest(canonical.as_bytes()))
    );
    let key = [*region, *service, "sdk_request"]
        .iter()
        .fold(hmac(format!("SDK{SK}").as_bytes(), day), |k, part| {
            hmac(&k, part)
        });
    if hex(&hmac(&key, &to_sign)) == signature {
        Ok(())
    } else {
        Err("signature mismatch")
    }
}

fn refused(why: &str) -> Answer {
    json(
        StatusCode::UNAUTHORIZED,
        serde_json::json!({
            "error_code": "APIGW.0301",
            "error_msg": format!("Incorrect IAM authentication information: {why} SECRET-TEXT"),
            "request_id": "3b1d0e5c2a4f",
        }),
    )
}

fn iam(state: &State, r: &Request) -> Answer {
    let base = state.base.lock().expect("base").clone();
    if r.path() == "/v3/services" {
        let page2 = r.query("page").as_deref() == Some("2");
        let (services, next) = if page2 {
            (
                serde_json::json!([{"id": "svc-ces", "type": "cesv1", "name": "ces", "enabled": true,
                    "links": {"self": format!("{base}/v3/services/svc-ces")}}]),
                serde_json::Value::Null,
            )
        } else {
            (
                serde_json::json!([{"id": "svc-ecs", "type": "ecs", "name": "nova", "enabled": true,
                    "links": {"self": format!("{base}/v3/services/svc-ecs")}}]),
                if state.foreign_next.load(Ordering::SeqCst) {
                    serde_json::json!("http://169.254.169.254/v3/services?page=2")
                } else {
                    serde_json::json!(format!("{base}/v3/services?page=2"))
                },
            )
        };
        return json(
            StatusCode::OK,
            serde_json::json!({"services": services, "links": {"self": format!("{base}/v3/services"), "previous": null, "next": next}}),
        );
    }
    let mut endpoints = vec![
        serde_json::json!({"id": "e-ecs", "interface": "public", "region": "cn-north-4",
        "region_id": "cn-north-4", "service_id": "svc-ecs", "enabled": true,
        "url": "https://ecs.cn-north-4.myhuaweicloud.com/v2/$(tenant_id)s"}),
    ];
    if state.catalog_ces.load(Ordering::SeqCst) {
        endpoints.push(serde_json::json!({"id": "e-ces-internal", "interface": "internal", "region": "cn-north-4",
            "region_id": "cn-north-4", "service_id": "svc-ces", "enabled": true,
            "url": "http://127.0.0.1:9/V1.0/$(tenant_id)s"}));
        endpoints.push(
            serde_json::json!({"id": "e-ces", "interface": "public", "region": "cn-north-4",
            "region_id": "cn-north-4", "service_id": "svc-ces", "enabled": true,
            "url": format!("{base}/V1.0/$(tenant_id)s")}),
        );
    }
    json(
        StatusCode::OK,
        serde_json::json!({"endpoints": endpoints, "links": {"self": format!("{base}/v3/endpoints"), "previous": null, "next": null}}),
    )
}

fn bad_parameter(what: &str) -> Answer {
    json(
        StatusCode::BAD_REQUEST,
        serde_json::json!({"code": 400, "message": "Bad Request", "element": what,
            "details": {"code": "ces.0014", "details": format!("Some content in message body is not correct: {what} SECRET-TEXT")}}),
    )
}

fn cloud_eye(state: &State, r: &Request) -> Answer {
    if r.header("x-project-id").as_deref() != Some(PROJECT) {
        return bad_parameter("X-Project-Id");
    }
    if r.header("content-type").as_deref() != Some("application/json") {
        return bad_parameter("Content-Type");
    }
    if state.throttled.load(Ordering::SeqCst) {
        return json(
            StatusCode::TOO_MANY_REQUESTS,
            serde_json::json!({"error_code": "APIGW.0308", "request_id": "9c1f",
                "error_msg": "The throttling threshold has been reached: policy user over ratelimit,limit:20,time:1 second SECRET-TEXT"}),
        );
    }
    let Ok(body) = serde_json::from_str::<serde_json::Value>(&r.body) else {
        return bad_parameter("body");
    };
    let (Some(from), Some(to)) = (body["from"].as_i64(), body["to"].as_i64()) else {
        return bad_parameter("from/to");
    };
    if from >= to {
        return bad_parameter("from");
    }
    let period = body["period"].as_str().unwrap_or_default();
    if !["1", "300", "1200", "3600", "14400", "86400"].contains(&period) {
        return bad_parameter("period");
    }
    let filter = body["filter"].as_str().unwrap_or_default().to_string();
    if !["average", "max", "min", "sum", "variance"].contains(&filter.as_str()) {
        return bad_parameter("filter");
    }
    let Some(metrics) = body["metrics"]
        .as_array()
        .filter(|m| (1..=500).contains(&m.len()))
    else {
        return bad_parameter("metrics");
    };
    let metric = &metrics[0];
    let dimensions = &metric["dimensions"];
    if metric["namespace"] != "SYS.ELB"
        || metric["metric_name"] != "mb_l7_qps"
        || dimensions[0]["name"] != "lbaas_instance_id"
        || dimensions[0]["value"] != "5e052238-0346-xxb0-86ea-92d9f33e29d2"
    {
        // An unknown metric has no data.
        return json(
            StatusCode::OK,
            serde_json::json!({"metrics": [{"namespace": metric["namespace"], "metric_name": metric["metric_name"],
                "dimensions": dimensions, "datapoints": [], "unit": ""}]}),
        );
    }
    let points: Vec<serde_json::Value> = state
        .datapoints
        .lock()
        .expect("datapoints")
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .zip((0_i64..).map(|i| from + 60_000 * i))
        .map(|(v, timestamp)| {
            let mut point = serde_json::Map::new();
            point.insert(filter.clone(), v);
            point.insert("timestamp".into(), timestamp.into());
            serde_json::Value::Object(point)
        })
        .collect();
    json(
        StatusCode::OK,
        serde_json::json!({"metrics": [{"unit": "Count/s", "datapoints": points, "namespace": "SYS.ELB",
            "dimensions": dimensions, "metric_name": "mb_l7_qps"}]}),
    )
}

fn fake(state: Arc<State>) -> impl Fn(&Request) -> Answer + Send + Sync + 'static {
    move |r: &Request| {
        // Keystone's version document, served without authentication.
        if r.method == "GET" && r.path() == "/" {
            let base = state.base.lock().expect("base").clone();
            return (
                StatusCode::MULTIPLE_CHOICES,
                vec![],
                serde_json::json!({"versions": {"values": [
                    {"id": "v3.0", "status": "stable", "updated": "2016-04-04T00:00:00Z",
                     "links": [{"rel": "self", "href": format!("{base}/v3/")}]},
                    {"id": "v2.0", "status": "deprecated", "links": [{"rel": "self", "href": format!("{base}/v2.0/")}]}]}})
                .to_string(),
            );
        }
        if let Some(why) = signature_problem(r) {
            return refused(why);
        }
        if r.header("x-project-id").as_deref() != Some(PROJECT) {
            return refused("X-Project-Id is not the key's project");
        }
        match (r.method.as_str(), r.path()) {
            ("GET", "/v3/services" | "/v3/endpoints") => iam(&state, r),
            ("POST", path) if path == format!("/V1.0/{PROJECT}/batch-query-metric-data") => {
                cloud_eye(&state, r)
            }
            _ => json(
                StatusCode::NOT_FOUND,
                serde_json::json!({"error_code": "APIGW.0101", "error_msg": "The API does not exist or has not been published in the environment SECRET-TEXT"}),
            ),
        }
    }
}

async fn start() -> (Arc<State>, Fake) {
    let state = Arc::new(State {
        base: Mutex::new(String::new()),
        catalog_ces: AtomicBool::new(true),
        throttled: AtomicBool::new(false),
        foreign_next: AtomicBool::new(false),
        datapoints: Mutex::new(serde_json::json!([])),
    });
    let server = Fake::start(fake(state.clone())).await;
    *state.base.lock().expect("base") = server.url();
    (state, server)
}

async fn harness(
    identity: &str,
    secret: &str,
    vendor_endpoints: keda_scalers::http_client::VendorEndpoints,
) -> Harness {
    conformance(
        "huawei-cloudeye",
        Setup {
            auth: &[
                ("IdentityEndpoint", identity),
                ("ProjectID", PROJECT),
                ("DomainID", "d-1"),
                ("Region", "cn-north-4"),
                ("Domain", "myhuaweicloud.com"),
                ("AccessKey", AK),
                ("SecretKey", secret),
            ],
            vendor_endpoints,
            ..Setup::default()
        },
    )
    .await
}

fn count(server: &Fake, method: &str, path: &str) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| r.method == method && r.path() == path)
        .count()
}

#[tokio::test]
async fn cloud_eye_s_first_datapoint_through_iam_s_catalog_every_request_signed() {
    let (state, server) = start().await;
    let identity = format!("{}/v3", server.url());
    let h = harness(&identity, SK, Default::default()).await;
    assert_eq!(h.metric_name, "s0-huawei-cloudeye-mb_l7_qps");
    *state.datapoints.lock().unwrap() = serde_json::json!([4.25, 9.0]);
    h.expect(4.25, true).await; // the first datapoint, above activationTargetMetricValue 1.5
    *state.datapoints.lock().unwrap() = serde_json::json!([1.5]);
    h.expect(1.5, false).await;
    // Both pages of services, the endpoints once: the catalog is kept between polls.
    assert_eq!(count(&server, "GET", "/v3/services"), 2);
    assert_eq!(count(&server, "GET", "/v3/endpoints"), 1);
    let queries: Vec<Request> = server
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST")
        .collect();
    assert_eq!(queries.len(), 2);
    for q in &queries {
        assert_eq!(q.path(), format!("/V1.0/{PROJECT}/batch-query-metric-data"));
        let body: serde_json::Value = serde_json::from_str(&q.body).unwrap();
        let (from, to) = (body["from"].as_i64().unwrap(), body["to"].as_i64().unwrap());
        assert_eq!((to % 60_000, to - from), (0, 300_000), "{body}");
        assert_eq!(
            (body["period"].as_str(), body["filter"].as_str()),
            (Some("300"), Some("average"))
        );
        let auth = q.header("authorization").unwrap();
        assert!(
            auth.starts_with(&format!("SDK-HMAC-SHA256 Credential={AK}/"))
                && auth.contains(
                    "SignedHeaders=accept;content-type;host;user-agent;x-project-id;x-sdk-date,"
                ),
            "{auth}"
        );
        assert!(!auth.contains(SK));
    }
    // Every request but the version document's is signed, and none carries the secret.
    assert!(server.requests().iter().all(|r| {
        r.header("authorization").is_some() && !format!("{:?}", r.headers).contains(SK)
    }));

    // Throttled (429, APIGW.0308): the status and keda-rs' words, the catalog kept.
    state.throttled.store(true, Ordering::SeqCst);
    let text = h.expect_error().await.to_string();
    assert!(
        text.contains("429") && text.contains("APIGW.0308") && text.contains("throttled"),
        "{text}"
    );
    assert!(!text.contains("SECRET-TEXT"), "{text}");
    state.throttled.store(false, Ordering::SeqCst);
    h.expect(1.5, false).await;
    assert_eq!(count(&server, "GET", "/v3/endpoints"), 1);

    // No datapoint in the collection time: KEDA's error.
    *state.datapoints.lock().unwrap() = serde_json::json!([]);
    let text = h.expect_error().await.to_string();
    assert!(text.contains("no datapoint"), "{text}");
    h.close().await;
}

#[tokio::test]
async fn a_wrong_secret_key_is_refused_by_the_gateway_and_never_shown() {
    let (_state, server) = start().await;
    let identity = format!("{}/v3", server.url());
    let wrong = "wr0ng-SECRET-key-EXAMPLE";
    let h = harness(&identity, wrong, Default::default()).await;
    let text = h.expect_error().await.to_string();
    assert!(
        text.contains("401") && text.contains("APIGW.0301") && text.contains("SecretKey"),
        "{text}"
    );
    assert!(
        !text.contains(wrong) && !text.contains("SECRET-TEXT") && !text.contains(AK),
        "{text}"
    );
    // The gateway refused it: the fake's own check, not a missing header.
    assert_eq!(count(&server, "GET", "/v3/services"), 1);
    h.close().await;
}

#[tokio::test]
async fn a_versionless_identity_endpoint_and_no_catalog_entry_use_gophercloud_s_defaults() {
    let (state, server) = start().await;
    state.catalog_ces.store(false, Ordering::SeqCst);
    *state.datapoints.lock().unwrap() = serde_json::json!([7]);
    // Without a cesv1 endpoint, https://ces.<Region>.<Cloud>/V1.0/<project>/: the process's
    // vendor endpoints point that host at the fake.
    let vendor = keda_scalers::http_client::VendorEndpoints::default().with(
        "ces.cn-north-4.myhuaweicloud.com",
        url::Url::parse(&server.url()).unwrap(),
    );
    let h = harness(&server.url(), SK, vendor).await;
    h.expect(7.0, true).await;
    let requests = server.requests();
    // The version document first, unsigned; then the v3 lists it names.
    assert_eq!(requests[0].path(), "/");
    assert!(requests[0].header("authorization").is_none());
    assert_eq!(count(&server, "GET", "/v3/endpoints"), 1);
    h.close().await;
}

#[tokio::test]
async fn a_next_page_on_another_server_is_not_followed() {
    let (state, server) = start().await;
    state.foreign_next.store(true, Ordering::SeqCst);
    let h = harness(&format!("{}/v3", server.url()), SK, Default::default()).await;
    let text = h.expect_error().await.to_string();
    assert!(text.contains("next page"), "{text}");
    assert!(!text.contains("169.254"), "{text}");
    // One page read, nothing sent elsewhere or to Cloud Eye.
    assert_eq!(server.requests().len(), 1);
    h.close().await;
}
