//! The `prometheus` scaler against real Prometheus servers, built from its documented example
//! through the registry: the shared instance on 127.0.0.1:9090 (`scripts/services.sh`) for
//! values, the test's own HTTP(S) server in front of it for headers, bearer tokens and a test
//! CA, and an instance of the test's own with Prometheus' web config (basic auth, TLS with
//! client certificates) scraping a target the test serves.
//!
//! Values come from PromQL expressions the server evaluates (`vector(5)`, `vector(NaN)`, two
//! labelled vectors joined with `or`), so every KEDA rule is exercised against a real answer.

#[allow(dead_code)]
mod common;
#[allow(dead_code)]
#[path = "common/http.rs"]
mod http_server;
#[allow(dead_code)]
#[path = "common/prometheus.rs"]
mod prom;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Harness, Setup, conformance};
use http::StatusCode;
use http_server::{Recorded, TestCa, TestServer};
use keda_scalers::http_client::{HttpClient, HttpClientKey};
use keda_scalers::pool::ClientPools;
use keda_scalers::{BuiltScaler, Clock, Registry, ScalerContext, ScalerError};
use prom::{BASIC_PASSWORD, BASIC_PASSWORD_HASH, BASIC_USER, PROMETHEUS};

/// Two series, so a query for both returns two elements.
const TWO_ELEMENTS: &str =
    r#"label_replace(vector(1), "a", "x", "", "") or label_replace(vector(2), "a", "y", "", "")"#;

/// The documented example on the shared instance, without its TriggerAuthentication, with
/// `changes` applied.
async fn on_shared(test: &str, changes: &[(&str, &str)]) -> Option<Harness> {
    prom::shared_or_skip(test).await?;
    let mut metadata = vec![("serverAddress", PROMETHEUS), ("authModes", "")];
    metadata.extend_from_slice(changes);
    Some(
        conformance(
            "prometheus",
            Setup {
                metadata: &metadata,
                ..Setup::default()
            },
        )
        .await,
    )
}

#[tokio::test]
async fn a_one_element_vector_is_the_value_and_active_only_above_the_activation_threshold() {
    let test = "prometheus_value";
    // The documented activationThreshold is 5.
    let Some(h) = on_shared(test, &[("query", "vector(5)")]).await else {
        return;
    };
    h.expect(5.0, false).await;
    let h = on_shared(test, &[("query", "vector(5.25)")])
        .await
        .expect("shared");
    h.expect(5.25, true).await;
    // A real series: the shared instance scrapes itself.
    let h = on_shared(test, &[("query", r#"sum(up{job="prometheus"})"#)])
        .await
        .expect("shared");
    h.expect(1.0, false).await;
    // A scalar reads like a one-element vector (KEDA fails to decode it).
    let h = on_shared(test, &[("query", "scalar(vector(7))")])
        .await
        .expect("shared");
    h.expect(7.0, true).await;
    h.close().await;
}

#[tokio::test]
async fn an_empty_result_is_zero_with_ignore_null_values_and_an_error_naming_the_query_without() {
    let test = "prometheus_empty";
    let empty = r#"up{job="keda-rs-no-such-job"}"#;
    let Some(h) = on_shared(test, &[("query", empty), ("ignoreNullValues", "true")]).await else {
        return;
    };
    h.expect(0.0, false).await;
    // The documented example sets ignoreNullValues to false.
    let h = on_shared(test, &[("query", empty)]).await.expect("shared");
    let err = h.expect_error().await;
    assert!(matches!(err, ScalerError::Unexpected { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "trigger 0 (prometheus): prometheus query `up{job=\"keda-rs-no-such-job\"}`: the result is \
         empty, the target may be lost (with ignoreNullValues \"false\" this is an error)"
    );
}

#[tokio::test]
async fn several_elements_are_an_error_naming_the_query_whatever_ignore_null_values_says() {
    let test = "prometheus_several";
    for ignore in ["true", "false"] {
        let Some(h) = on_shared(
            test,
            &[("query", TWO_ELEMENTS), ("ignoreNullValues", ignore)],
        )
        .await
        else {
            return;
        };
        let err = h.expect_error().await.to_string();
        assert_eq!(
            err,
            format!(
                "trigger 0 (prometheus): prometheus query `{TWO_ELEMENTS}` returned multiple \
                 elements (2); it must return at most one, e.g. aggregate it with sum(...)"
            )
        );
    }
}

#[tokio::test]
async fn nan_and_infinities_are_zero_with_ignore_null_values_and_errors_without() {
    let test = "prometheus_non_finite";
    for (query, shown) in [
        ("vector(NaN)", "NaN"),
        ("vector(+Inf)", "+Inf"),
        ("vector(-Inf)", "-Inf"),
    ] {
        let Some(h) = on_shared(test, &[("query", query), ("ignoreNullValues", "true")]).await
        else {
            return;
        };
        h.expect(0.0, false).await;
        let h = on_shared(test, &[("query", query)]).await.expect("shared");
        assert_eq!(
            h.expect_error().await.to_string(),
            format!(
                "trigger 0 (prometheus): prometheus query `{query}` returned {shown} (with \
                 ignoreNullValues \"false\" this is an error)"
            )
        );
    }
}

#[tokio::test]
async fn a_malformed_query_is_an_error_with_prometheus_own_message() {
    let Some(h) = on_shared("prometheus_malformed", &[("query", "sum(")]).await else {
        return;
    };
    let err = h.expect_error().await.to_string();
    assert!(
        err.starts_with(
            "trigger 0 (prometheus): prometheus query `sum(` on serverAddress \
             http://127.0.0.1:9090/api/v1/query failed: Prometheus answered error bad_data (HTTP 400)"
        ),
        "{err}"
    );
    // Prometheus' own text is the server's: at debug level only (issue 30, finding 5).
    assert!(!err.contains("parse error"), "{err}");
}

#[tokio::test]
async fn an_unreachable_server_is_a_poll_error_naming_the_server_and_never_its_credentials() {
    // Nothing listens on port 1; building does not connect, polling fails.
    let h = conformance(
        "prometheus",
        Setup {
            metadata: &[("serverAddress", "http://user:s3cret@127.0.0.1:1/prom")],
            auth: &[("username", "u"), ("password", "p4ss")],
            ..Setup::default()
        },
    )
    .await;
    let err = h.expect_error().await;
    assert!(matches!(err, ScalerError::Query { .. }), "{err:?}");
    let err = err.to_string();
    assert!(
        err.starts_with(
            "trigger 0 (prometheus): prometheus query `sum(rate(http_requests_total{deployment=\"api\"}[2m]))` \
             on serverAddress http://127.0.0.1:1/prom/api/v1/query failed: "
        ),
        "{err}"
    );
    assert!(!err.contains("s3cret") && !err.contains("p4ss"), "{err}");
}

/// A front server that checks the bearer token and passes queries on to the shared instance.
fn front(expected_token: &'static str) -> http_server::Handler {
    let client = http_server::client();
    Arc::new(move |request: Recorded| {
        let client = client.clone();
        Box::pin(async move {
            if request.header("authorization").as_deref()
                != Some(&format!("Bearer {expected_token}"))
            {
                return (
                    StatusCode::UNAUTHORIZED,
                    "text/plain",
                    "Unauthorized".into(),
                );
            }
            let answer = client
                .get(format!("{PROMETHEUS}{}", request.uri))
                .send()
                .await
                .expect("shared Prometheus");
            let status = StatusCode::from_u16(answer.status().as_u16()).expect("status");
            (
                status,
                "application/json",
                answer.text().await.expect("body"),
            )
        })
    })
}

fn context(pools: &ClientPools, metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> ScalerContext {
    ScalerContext {
        metadata: metadata
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        auth_params: auth
            .iter()
            .map(|(k, v)| (k.to_string(), keda_scalers::Secret::new(*v)))
            .collect(),
        clients: pools.clone(),
        ..ScalerContext::new("prometheus", 0)
    }
}

async fn value_of(scaler: &BuiltScaler) -> Result<f64, ScalerError> {
    scaler
        .scaler()
        .metrics_and_activity("s0-prometheus")
        .await
        .map(|r| r.values[0].value)
}

#[tokio::test]
async fn headers_bearer_token_namespace_query_parameters_and_time_reach_the_server() {
    if prom::shared_or_skip("prometheus_headers").await.is_none() {
        return;
    }
    let server = TestServer::start(front("t0ken")).await;
    let at: jiff::Timestamp = "2030-01-02T03:04:05.678Z".parse().expect("time");
    let h = conformance(
        "prometheus",
        Setup {
            metadata: &[
                ("serverAddress", &server.url("/")),
                ("query", "vector(3)"),
                ("authModes", "bearer"),
                ("namespace", "team-a"),
                ("queryParameters", "dedup=true,partial_response=false"),
                (
                    "customHeaders",
                    "X-Scope-OrgID=tenant-a, X-Client-Id=keda-rs",
                ),
            ],
            auth: &[("bearerToken", "t0ken")],
            clock: Some(Clock::fixed(at)),
            ..Setup::default()
        },
    )
    .await;
    h.expect(3.0, false).await;
    let seen = server.last_request();
    assert_eq!(seen.method, "GET");
    assert!(seen.uri.starts_with("/api/v1/query?"), "{}", seen.uri);
    assert_eq!(seen.query("query").as_deref(), Some("vector(3)"));
    assert_eq!(seen.query("time").as_deref(), Some("2030-01-02T03:04:05Z"));
    assert_eq!(seen.query("namespace").as_deref(), Some("team-a"));
    assert_eq!(seen.query("dedup").as_deref(), Some("true"));
    assert_eq!(seen.query("partial_response").as_deref(), Some("false"));
    assert_eq!(seen.header("x-scope-orgid").as_deref(), Some("tenant-a"));
    assert_eq!(seen.header("x-client-id").as_deref(), Some("keda-rs"));

    // A wrong token: the server's 401, with a hint, and not the token.
    let h = conformance(
        "prometheus",
        Setup {
            metadata: &[("serverAddress", &server.url("")), ("authModes", "bearer")],
            auth: &[("token", "wr0ng")],
            ..Setup::default()
        },
    )
    .await;
    let err = h.expect_error().await.to_string();
    assert!(
        err.ends_with("bytes of text/plain); check the trigger's authModes and its credentials"),
        "{err}"
    );
    assert!(!err.contains("wr0ng"), "{err}");
}

#[tokio::test]
async fn triggers_on_one_server_share_one_client_and_its_connection() {
    if prom::shared_or_skip("prometheus_shared").await.is_none() {
        return;
    }
    let server = TestServer::start(front("t0ken-2")).await;
    let pools = ClientPools::new();
    let registry = Registry::builtin();
    let address = server.url("");
    let mut scalers = Vec::new();
    for i in 0..3 {
        let query = format!("vector({i})");
        let metadata = [
            ("serverAddress", address.as_str()),
            ("query", query.as_str()),
            ("threshold", "1"),
            ("authModes", "bearer"),
        ];
        let ctx = context(&pools, &metadata, &[("bearerToken", "t0ken-2")]);
        scalers.push(registry.build(ctx).await.expect("builds"));
    }
    let pool = pools.pool::<HttpClientKey, HttpClient>();
    assert_eq!(pool.len(), 1, "one client for one server and one token");
    for round in 0..2 {
        for (i, scaler) in scalers.iter().enumerate() {
            assert_eq!(
                value_of(scaler).await.expect("value"),
                i as f64,
                "round {round}"
            );
        }
    }
    assert_eq!(server.requests().len(), 6);
    assert_eq!(
        server.connections(),
        1,
        "six polls over one keep-alive connection"
    );

    // Other credentials: another client.
    let other = context(
        &pools,
        &[
            ("serverAddress", address.as_str()),
            ("query", "vector(1)"),
            ("threshold", "1"),
            ("authModes", "bearer"),
        ],
        &[("bearerToken", "other")],
    );
    let other = registry.build(other).await.expect("builds");
    assert_eq!(pool.len(), 2);
    other.scaler().close().await;
    assert_eq!(pool.len(), 1);
    for scaler in &scalers {
        scaler.scaler().close().await;
    }
    assert!(pool.is_empty(), "the last close drops the client");
    assert!(matches!(
        value_of(&scalers[0]).await,
        Err(ScalerError::Closed { .. })
    ));
}

#[tokio::test]
async fn a_server_with_a_test_ca_is_trusted_through_ca_and_refused_without_it() {
    if prom::shared_or_skip("prometheus_ca").await.is_none() {
        return;
    }
    let ca = TestCa::new("keda-rs test CA");
    let server = TestServer::start_tls(front("t0ken-2"), ca.server_config(false)).await;
    let address = server.url("");
    let ca_pem = ca.pem();
    let metadata = [
        ("serverAddress", address.as_str()),
        ("query", "vector(2)"),
        ("authModes", "bearer"),
    ];
    let trusted = conformance(
        "prometheus",
        Setup {
            metadata: &metadata,
            auth: &[("bearerToken", "t0ken-2"), ("ca", &ca_pem)],
            ..Setup::default()
        },
    )
    .await;
    trusted.expect(2.0, false).await;

    let untrusted = conformance(
        "prometheus",
        Setup {
            metadata: &metadata,
            auth: &[("bearerToken", "t0ken-2")],
            ..Setup::default()
        },
    )
    .await;
    let err = untrusted.expect_error().await.to_string();
    assert!(err.contains("certificate"), "{err}");

    let mut insecure = metadata.to_vec();
    insecure.push(("unsafeSsl", "true"));
    let insecure = conformance(
        "prometheus",
        Setup {
            metadata: &insecure,
            auth: &[("bearerToken", "t0ken-2")],
            ..Setup::default()
        },
    )
    .await;
    insecure.expect(2.0, false).await;
}

/// Web config of the own instance: TLS requiring client certificates of the test CA, and one
/// basic-auth user.
const WEB_CONFIG: &str = "tls_server_config:
  cert_file: {dir}/server.crt
  key_file: {dir}/server.key
  client_auth_type: RequireAndVerifyClientCert
  client_ca_file: {dir}/ca.crt
basic_auth_users:
  {user}: {hash}
";

#[tokio::test]
async fn basic_auth_and_client_certificates_work_against_prometheus_own_web_config() {
    let test = "prometheus_web_config";
    let ca = TestCa::new("keda-rs test CA");
    let (server_cert, server_key) = ca.issue(
        &["127.0.0.1", "localhost"],
        rcgen::ExtendedKeyUsagePurpose::ServerAuth,
    );
    let (client_cert, client_key) = ca.client("keda-rs");
    let ca_pem = ca.pem();

    // The target Prometheus scrapes: one gauge the test sets.
    let depth = Arc::new(Mutex::new(7));
    let target = {
        let depth = Arc::clone(&depth);
        TestServer::start(http_server::handler(move |_| {
            let value = *depth.lock().expect("depth");
            (
                StatusCode::OK,
                "text/plain; version=0.0.4",
                format!(
                    "# TYPE keda_rs_test_queue_depth gauge\nkeda_rs_test_queue_depth {value}\n"
                ),
            )
        }))
        .await
    };
    let web = WEB_CONFIG
        .replace("{user}", BASIC_USER)
        .replace("{hash}", BASIC_PASSWORD_HASH);
    let ready_client = {
        let tls = keda_scalers::tls::TlsSettings {
            insecure: false,
            ca: Some(ca_pem.clone().into()),
            client: Some((client_cert.clone().into(), client_key.clone().into())),
        };
        keda_scalers::http_client::reqwest_client(&tls, Duration::from_secs(2)).expect("client")
    };
    let options = prom::Options {
        web_config: Some(&web),
        files: &[
            ("server.crt", &server_cert),
            ("server.key", &server_key),
            ("ca.crt", &ca_pem),
        ],
        scrape: Some(target.addr.to_string()),
    };
    let Some(instance) = prom::own_or_skip(test, options, |port| {
        let client = ready_client.clone();
        async move {
            client
                .get(format!("https://127.0.0.1:{port}/-/ready"))
                .basic_auth(BASIC_USER, Some(BASIC_PASSWORD))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
        }
    })
    .await
    else {
        return;
    };
    let address = format!("https://127.0.0.1:{}", instance.port);
    let metadata = [
        ("serverAddress", address.as_str()),
        ("query", "keda_rs_test_queue_depth"),
        ("authModes", "basic,tls"),
    ];
    let good_auth = [
        ("username", BASIC_USER),
        ("password", BASIC_PASSWORD),
        ("cert", client_cert.as_str()),
        ("key", client_key.as_str()),
        ("ca", ca_pem.as_str()),
    ];
    let h = conformance(
        "prometheus",
        Setup {
            metadata: &metadata,
            auth: &good_auth,
            ..Setup::default()
        },
    )
    .await;
    // Scraped every 500 ms: wait (bounded) for the first sample, then for a change.
    for depth_now in [7, 12] {
        let expected = f64::from(depth_now);
        *depth.lock().expect("depth") = depth_now;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            match h.built.scaler().metrics_and_activity(&h.metric_name).await {
                Ok(r) if r.values[0].value == expected => break,
                other if tokio::time::Instant::now() > deadline => {
                    panic!("the scraped value never became {expected}: {other:?}")
                }
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }
    h.expect(12.0, true).await;

    // A wrong password: Prometheus' 401, with a hint, without the password.
    let mut wrong = good_auth.to_vec();
    wrong[1] = ("password", "not-the-password");
    let h = conformance(
        "prometheus",
        Setup {
            metadata: &metadata,
            auth: &wrong,
            ..Setup::default()
        },
    )
    .await;
    let err = h.expect_error().await.to_string();
    assert!(err.contains("HTTP 401 Unauthorized"), "{err}");
    assert!(err.contains("check the trigger's authModes"), "{err}");
    assert!(!err.contains("not-the-password"), "{err}");

    // Basic auth but no client certificate: the TLS handshake is refused.
    let h = conformance(
        "prometheus",
        Setup {
            metadata: &[
                ("serverAddress", address.as_str()),
                ("query", "keda_rs_test_queue_depth"),
                ("authModes", "basic"),
            ],
            auth: &good_auth,
            ..Setup::default()
        },
    )
    .await;
    let err = h.expect_error().await;
    assert!(matches!(err, ScalerError::Query { .. }), "{err:?}");
    drop(instance);
}

/// `authModes: custom` sends `customAuthHeader: customAuthValue` (from the
/// TriggerAuthentication) on every query; a server that answers later than `timeout`
/// (milliseconds) fails the poll at the timeout, saying so, with the query and the server.
#[tokio::test]
async fn the_custom_auth_header_reaches_the_server_and_timeout_bounds_a_slow_one() {
    if prom::shared_or_skip("prometheus_custom_timeout")
        .await
        .is_none()
    {
        return;
    }
    let inner = front("unused");
    let slow = Arc::new(Mutex::new(false));
    let handler: http_server::Handler = {
        let slow = Arc::clone(&slow);
        Arc::new(move |mut request: Recorded| {
            let inner = Arc::clone(&inner);
            let slow = *slow.lock().expect("slow");
            Box::pin(async move {
                if request.header("x-org-token").as_deref() != Some("c0stom") {
                    return (StatusCode::FORBIDDEN, "text/plain", "Forbidden".into());
                }
                if slow {
                    tokio::time::sleep(Duration::from_secs(3)).await;
                }
                // The front's own check is for bearer tokens; hand it one.
                request.headers.insert(
                    "authorization",
                    "Bearer unused".parse().expect("header value"),
                );
                inner(request).await
            })
        })
    };
    let server = TestServer::start(handler).await;
    let address = server.url("");
    let metadata = [
        ("serverAddress", address.as_str()),
        ("query", "vector(4)"),
        ("threshold", "2"),
        ("authModes", "custom"),
        ("timeout", "300"),
    ];
    let auth = [
        ("customAuthHeader", "X-Org-Token"),
        ("customAuthValue", "c0stom"),
    ];
    let pools = ClientPools::new();
    let scaler = Registry::builtin()
        .build(context(&pools, &metadata, &auth))
        .await
        .map_err(|e| e.to_string())
        .expect("built");
    assert_eq!(value_of(&scaler).await.expect("a value"), 4.0);
    assert_eq!(
        server.last_request().header("x-org-token").as_deref(),
        Some("c0stom")
    );

    *slow.lock().expect("slow") = true;
    let started = std::time::Instant::now();
    let err = value_of(&scaler).await.expect_err("too slow").to_string();
    assert!(started.elapsed() < Duration::from_secs(2), "{err}");
    assert!(
        err.starts_with("trigger 0 (prometheus): prometheus query `vector(4)` on serverAddress http://127.0.0.1:")
            && err.ends_with("failed: no answer within the timeout of 300 ms"),
        "{err}"
    );
    scaler.scaler().close().await;

    // A wrong value is the server's 403, with the hint, and never the value.
    let scaler = Registry::builtin()
        .build(context(
            &pools,
            &metadata,
            &[
                ("customAuthHeader", "X-Org-Token"),
                ("customAuthValue", "wr0ng-value"),
            ],
        ))
        .await
        .map_err(|e| e.to_string())
        .expect("built");
    let err = value_of(&scaler).await.expect_err("forbidden").to_string();
    assert!(
        err.ends_with("bytes of text/plain); check the trigger's authModes and its credentials"),
        "{err}"
    );
    assert!(!err.contains("wr0ng-value"), "{err}");
    scaler.scaler().close().await;
}
