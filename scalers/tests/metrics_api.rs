//! The `metrics-api` scaler against HTTP(S) servers the test runs on loopback, built from its
//! documented example through the registry: every format, every authentication mode that can
//! run locally (apiKey in a header and the query, basic, bearer, TLS client certificates with a
//! CA generated at test time), and the failures a user can cause.

#[allow(dead_code)]
mod common;
#[allow(dead_code)]
#[path = "common/http.rs"]
mod http_server;

use std::sync::{Arc, Mutex};

use common::{Harness, Setup, conformance};
use http::StatusCode;
use http_server::{Recorded, TestCa, TestServer};
use keda_scalers::http_client::{HttpClient, HttpClientKey};
use keda_scalers::pool::ClientPools;
use keda_scalers::{Registry, ScalerContext, ScalerError};

/// A server answering `body` (shared, so the test can change it) with `content_type`, after
/// `check` accepted the request (else 401).
async fn serve(
    content_type: &'static str,
    body: Arc<Mutex<String>>,
    check: impl Fn(&Recorded) -> bool + Send + Sync + 'static,
) -> TestServer {
    TestServer::start(http_server::handler(move |request| {
        if !check(request) {
            return (
                StatusCode::UNAUTHORIZED,
                "text/plain",
                "Unauthorized".into(),
            );
        }
        (
            StatusCode::OK,
            content_type,
            body.lock().expect("body").clone(),
        )
    }))
    .await
}

fn body(text: &str) -> Arc<Mutex<String>> {
    Arc::new(Mutex::new(text.to_string()))
}

/// The documented example pointed at `url`, with `changes` applied and `auth` as the
/// TriggerAuthentication.
async fn example(url: &str, changes: &[(&str, &str)], auth: &[(&str, &str)]) -> Harness {
    let mut metadata = vec![("url", url)];
    metadata.extend_from_slice(changes);
    conformance(
        "metrics-api",
        Setup {
            metadata: &metadata,
            auth,
            ..Setup::default()
        },
    )
    .await
}

const API_KEY: &str = "k3y-for-tests";

#[tokio::test]
async fn the_documented_example_reads_json_and_is_active_only_above_the_activation_target() {
    let answer = body(r#"{"components": {"worker": {"tasks": 3.8}}}"#);
    let server = serve("application/json", Arc::clone(&answer), |r| {
        r.header("x-api-key").as_deref() == Some(API_KEY)
    })
    .await;
    let h = example(&server.url("/api/v1/stats"), &[], &[("apiKey", API_KEY)]).await;
    assert_eq!(h.metric_name, "s0-metric-api-components-worker-tasks");
    // The documented activationTargetValue is 3.8.
    h.expect(3.8, false).await;
    *answer.lock().expect("body") = r#"{"components": {"worker": {"tasks": 12}}}"#.into();
    h.expect(12.0, true).await;
    // Quantity strings, as KEDA reads them.
    for (text, value) in [("\"1500m\"", 1.5), ("\"2Ki\"", 2048.0), ("\"64\"", 64.0)] {
        *answer.lock().expect("body") =
            format!(r#"{{"components": {{"worker": {{"tasks": {text}}}}}}}"#);
        h.expect(value, value > 3.8).await;
    }
    let seen = server.last_request();
    assert_eq!(
        (seen.method.as_str(), seen.uri.as_str()),
        ("GET", "/api/v1/stats")
    );
    h.close().await;
}

#[tokio::test]
async fn json_yaml_xml_and_prometheus_answers_are_read_at_their_value_location() {
    // (content type, answer, format, valueLocation, value)
    let rows = [
        (
            "application/json",
            r#"{"workers": [{"name": "w0", "load": 1}, {"name": "w1", "load": 7.5}]}"#,
            "json",
            r#"workers.#(name=="w1").load"#,
            7.5,
        ),
        (
            "application/json",
            r#"{"workers": [1, 2, 3]}"#,
            "json",
            "workers.#",
            3.0,
        ),
        (
            "application/yaml",
            "queues:\n  - name: a\n    pending: 4\n  - name: b\n    pending: '250m'\n",
            "yaml",
            "queues.1.pending",
            0.25,
        ),
        (
            "application/xml",
            r#"<stats><worker load="6"><tasks>3</tasks></worker><worker><tasks>9</tasks></worker></stats>"#,
            "xml",
            "stats.worker.1.tasks",
            9.0,
        ),
        (
            "application/xml",
            r#"<stats><worker load="6"><tasks>3</tasks></worker><worker><tasks>9</tasks></worker></stats>"#,
            "xml",
            "stats.worker.0.load",
            6.0,
        ),
        (
            "text/plain; version=0.0.4",
            "# TYPE backend_queue_size gauge\nbackend_queue_size{queueName=\"one\"} 1\nbackend_queue_size{queueName=\"two\"} 20\n",
            "prometheus",
            r#"backend_queue_size{queueName="two"}"#,
            20.0,
        ),
    ];
    for (content_type, text, format, location, value) in rows {
        let server = serve(content_type, body(text), |_| true).await;
        let h = example(
            &server.url("/stats"),
            &[
                ("format", format),
                ("valueLocation", location),
                ("authMode", ""),
            ],
            &[],
        )
        .await;
        h.expect(value, value > 3.8).await;
    }
}

#[tokio::test]
async fn a_value_location_that_does_not_resolve_is_an_error_naming_it() {
    let server = serve(
        "application/json",
        body(r#"{"components": {"worker": {"busy": true}}}"#),
        |_| true,
    )
    .await;
    let h = example(&server.url("/api/v1/stats"), &[("authMode", "")], &[]).await;
    let err = h.expect_error().await;
    assert!(matches!(err, ScalerError::Query { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "trigger 0 (metrics-api): GET url {} failed: valueLocation \"components.worker.tasks\" \
             in the answer: key \"tasks\" not found at \"components.worker\"",
            server.url("/api/v1/stats")
        )
    );
    let h = example(
        &server.url("/api/v1/stats"),
        &[
            ("authMode", ""),
            ("valueLocation", "components.worker.busy"),
        ],
        &[],
    )
    .await;
    assert!(
        h.expect_error()
            .await
            .to_string()
            .ends_with("it points to a boolean, not to a number or a string holding a quantity")
    );
    // An answer that is not JSON at all.
    let html = serve("text/html", body("<html>oops</html>"), |_| true).await;
    let h = example(&html.url("/"), &[("authMode", "")], &[]).await;
    let err = h.expect_error().await.to_string();
    assert!(err.contains("the response is not valid JSON"), "{err}");
}

#[tokio::test]
async fn api_keys_in_a_header_or_the_query_basic_auth_and_bearer_tokens_reach_the_server() {
    let answer = r#"{"components": {"worker": {"tasks": 5}}}"#;
    let server = serve("application/json", body(answer), |r| {
        r.header("x-api-key").as_deref() == Some(API_KEY)
            || r.header("x-custom-key").as_deref() == Some(API_KEY)
            || r.query("api_key").as_deref() == Some(API_KEY)
            || r.query("token").as_deref() == Some(API_KEY)
            // user:pass
            || r.header("authorization").as_deref() == Some("Basic dXNlcjpwYXNz")
            || r.header("authorization").as_deref() == Some("Bearer b3arer-t0ken")
    })
    .await;
    let url = server.url("/api/v1/stats?keep=1");
    // (metadata changes, auth params, the request that must have carried the credentials)
    type Check = fn(&Recorded) -> bool;
    type Pairs<'a> = &'a [(&'a str, &'a str)];
    let rows: [(Pairs<'_>, Pairs<'_>, Check); 6] = [
        (&[("keyParamName", "")], &[("apiKey", API_KEY)], |r| {
            r.header("x-api-key").is_some()
        }),
        (
            &[("keyParamName", "X-Custom-Key")],
            &[("apiKey", API_KEY)],
            |r| r.header("x-custom-key").is_some(),
        ),
        (
            &[("method", "query"), ("keyParamName", "")],
            &[("apiKey", API_KEY)],
            |r| r.query("api_key").is_some() && r.query("keep").as_deref() == Some("1"),
        ),
        (
            &[("method", "query"), ("keyParamName", "token")],
            &[("apiKey", API_KEY)],
            |r| r.query("token").is_some() && r.header("x-api-key").is_none(),
        ),
        (
            &[("authMode", "basic")],
            &[("username", "user"), ("password", "pass")],
            |r| {
                r.header("authorization")
                    .is_some_and(|h| h.starts_with("Basic "))
            },
        ),
        (
            &[("authMode", "bearer")],
            &[("token", "b3arer-t0ken")],
            |r| {
                r.header("authorization")
                    .is_some_and(|h| h.starts_with("Bearer "))
            },
        ),
    ];
    for (i, (changes, auth, carried)) in rows.into_iter().enumerate() {
        let h = example(&url, changes, auth).await;
        h.expect(5.0, true).await;
        assert!(
            carried(&server.last_request()),
            "row {i}: {:?}",
            server.last_request()
        );
    }

    // A wrong password: the server's 401, a hint, and no password.
    let h = example(
        &url,
        &[("authMode", "basic")],
        &[("username", "user"), ("password", "wr0ng-pass")],
    )
    .await;
    let err = h.expect_error().await;
    assert!(matches!(err, ScalerError::Query { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "trigger 0 (metrics-api): GET url {} failed: answered HTTP 401 Unauthorized (12 bytes of text/plain); \
             check the trigger's authModes and its credentials",
            server.url("/api/v1/stats")
        )
    );
    // The query key never shows in a message either.
    let broken = TestServer::start(http_server::handler(|_| {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain",
            "boom".into(),
        )
    }))
    .await;
    let h = example(
        &broken.url("/stats"),
        &[("method", "query")],
        &[("apiKey", API_KEY)],
    )
    .await;
    let err = h.expect_error().await.to_string();
    assert!(
        err.ends_with("failed: answered HTTP 500 Internal Server Error (4 bytes of text/plain)"),
        "{err}"
    );
    assert!(!err.contains(API_KEY), "{err}");
}

#[tokio::test]
async fn client_certificates_and_a_test_ca_are_used_over_https() {
    let ca = TestCa::new("keda-rs test CA");
    let answer = r#"{"components": {"worker": {"tasks": 4}}}"#;
    let answer_body = body(answer);
    let mtls = TestServer::start_tls(
        http_server::handler(move |_| {
            (
                StatusCode::OK,
                "application/json",
                answer_body.lock().expect("body").clone(),
            )
        }),
        ca.server_config(true),
    )
    .await;
    let (cert, key) = ca.client("keda-rs");
    let ca_pem = ca.pem();
    let tls_auth = [
        ("cert", cert.as_str()),
        ("key", key.as_str()),
        ("ca", ca_pem.as_str()),
    ];
    let h = example(&mtls.url("/stats"), &[("authMode", "tls")], &tls_auth).await;
    h.expect(4.0, true).await;

    // Without a client certificate the server refuses the handshake.
    let h = example(&mtls.url("/stats"), &[("authMode", "")], &[("ca", &ca_pem)]).await;
    assert!(matches!(h.expect_error().await, ScalerError::Query { .. }));

    // A server certificate of an unknown CA is refused unless unsafeSsl.
    let other_ca = TestCa::new("another CA");
    let plain_tls = TestServer::start_tls(
        http_server::handler(move |_| (StatusCode::OK, "application/json", answer.into())),
        other_ca.server_config(false),
    )
    .await;
    let h = example(
        &plain_tls.url("/stats"),
        &[("authMode", "")],
        &[("ca", &ca_pem)],
    )
    .await;
    let err = h.expect_error().await.to_string();
    assert!(err.contains("certificate"), "{err}");
    let h = example(
        &plain_tls.url("/stats"),
        &[("authMode", ""), ("unsafeSsl", "true")],
        &[],
    )
    .await;
    h.expect(4.0, true).await;

    // TLS material that is not PEM fails the build, naming the parameter.
    let ctx = ScalerContext {
        metadata: [
            ("url", mtls.url("/stats")),
            ("valueLocation", "a".into()),
            ("targetValue", "1".into()),
            ("authMode", "tls".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
        auth_params: [("cert", "C"), ("key", "K"), ("ca", "not a certificate")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), keda_scalers::Secret::new(v)))
            .collect(),
        ..ScalerContext::new("metrics-api", 0)
    };
    let err = Registry::builtin().build(ctx).await.expect_err("bad CA");
    assert_eq!(
        err.to_string(),
        "trigger 0 (metrics-api): parameter \"ca\" is not a valid PEM certificate bundle"
    );
}

#[tokio::test]
async fn an_unreachable_endpoint_is_a_poll_error_naming_the_url_without_its_query() {
    let h = example(
        "http://127.0.0.1:1/stats?api_key=s3cret-in-url",
        &[("authMode", "")],
        &[],
    )
    .await;
    let err = h.expect_error().await;
    assert!(matches!(err, ScalerError::Query { .. }), "{err:?}");
    let err = err.to_string();
    assert!(
        err.starts_with("trigger 0 (metrics-api): GET url http://127.0.0.1:1/stats failed: "),
        "{err}"
    );
    assert!(!err.contains("s3cret"), "{err}");
}

#[tokio::test]
async fn triggers_on_one_endpoint_share_one_client_and_its_connection() {
    let server = serve(
        "application/json",
        body(r#"{"a": 1, "b": 2, "c": 3}"#),
        |_| true,
    )
    .await;
    let pools = ClientPools::new();
    let registry = Registry::builtin();
    let url = server.url("/stats");
    let mut scalers = Vec::new();
    for location in ["a", "b", "c"] {
        let ctx = ScalerContext {
            metadata: [
                ("url", url.as_str()),
                ("valueLocation", location),
                ("targetValue", "1"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
            clients: pools.clone(),
            ..ScalerContext::new("metrics-api", 0)
        };
        scalers.push((registry.build(ctx).await.expect("builds"), location));
    }
    let pool = pools.pool::<HttpClientKey, HttpClient>();
    assert_eq!(pool.len(), 1);
    for (expected, (scaler, location)) in [1.0, 2.0, 3.0].into_iter().zip(&scalers) {
        let name = format!("s0-metric-api-{location}");
        let report = scaler
            .scaler()
            .metrics_and_activity(&name)
            .await
            .expect("value");
        assert_eq!(report.values[0].value, expected);
    }
    assert_eq!(
        server.connections(),
        1,
        "three polls over one keep-alive connection"
    );
    for (scaler, _) in &scalers {
        scaler.scaler().close().await;
    }
    assert!(pool.is_empty());
}

#[tokio::test]
async fn a_burst_of_polls_on_one_endpoint_opens_about_max_in_flight_connections_not_one_each() {
    use keda_scalers::http_client::MAX_IN_FLIGHT;
    // Each answer takes 50 ms, so the 40 polls overlap.
    let server = TestServer::start(Arc::new(|_: Recorded| {
        Box::pin(async {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            (
                StatusCode::OK,
                "application/json",
                r#"{"v": 1}"#.to_string(),
            )
        }) as futures::future::BoxFuture<'static, http_server::Answer>
    }))
    .await;
    let pools = ClientPools::new();
    let registry = Registry::builtin();
    let mut scalers = Vec::new();
    for _ in 0..40 {
        let ctx = ScalerContext {
            metadata: [
                ("url", server.url("/").as_str()),
                ("valueLocation", "v"),
                ("targetValue", "1"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
            clients: pools.clone(),
            ..ScalerContext::new("metrics-api", 0)
        };
        scalers.push(Arc::new(registry.build(ctx).await.expect("builds")));
    }
    let mut polls = tokio::task::JoinSet::new();
    for scaler in &scalers {
        let scaler = Arc::clone(scaler);
        polls.spawn(async move {
            scaler
                .scaler()
                .metrics_and_activity("s0-metric-api-v")
                .await
        });
    }
    while let Some(poll) = polls.join_next().await {
        assert_eq!(poll.expect("joined").expect("value").values[0].value, 1.0);
    }
    assert_eq!(server.requests().len(), 40);
    // A request starting just as a finished one hands its connection back may open another, so
    // a few more than MAX_IN_FLIGHT can be accepted; without the limit there would be 40.
    assert!(
        server.connections() <= MAX_IN_FLIGHT + 4,
        "{} connections for 40 concurrent polls",
        server.connections()
    );
}

/// `timeout` (milliseconds) bounds a request to an endpoint that answers late: the poll fails
/// at the timeout saying so, naming the url; a timeout longer than the delay reads the value.
#[tokio::test]
async fn a_slow_endpoint_fails_at_the_timeout_parameter() {
    let handler: http_server::Handler = Arc::new(|_request| {
        Box::pin(async {
            tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
            (
                StatusCode::OK,
                "application/json",
                r#"{"components":{"worker":{"tasks":6}}}"#.to_string(),
            )
        })
    });
    let server = TestServer::start(handler).await;
    let url = server.url("/stats");
    let started = std::time::Instant::now();
    let h = example(&url, &[("authMode", ""), ("timeout", "300")], &[]).await;
    let err = h.expect_error().await.to_string();
    assert!(
        started.elapsed() < std::time::Duration::from_millis(1100),
        "{err}"
    );
    assert_eq!(
        err,
        format!(
            "trigger 0 (metrics-api): GET url {url} failed: no answer within the timeout of 300 ms"
        )
    );
    let h = example(&url, &[("authMode", ""), ("timeout", "5000")], &[]).await;
    h.expect(6.0, true).await;
}

/// A namespace's reads hold at most its budget of answer bytes at once
/// (`keda_scalers::answers`, the operator's `--answer-bytes-per-namespace`): while one trigger's
/// answer arrives slowly, a second trigger of the same namespace reading a large answer is
/// refused, saying why; a trigger of another namespace reads the same answer; once the slow
/// answer is read, the first namespace reads it too.
#[tokio::test]
async fn a_namespace_s_answers_in_flight_are_bounded_and_other_namespaces_read_on() {
    use keda_scalers::answers::AnswerBudgets;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const LIMIT: usize = 1 << 20;
    // 700 KB: one fits in the budget, one and the slow answer's first 400 KB do not.
    let answer = format!(
        r#"{{"components":{{"worker":{{"tasks":6}}}},"pad":"{}"}}"#,
        "x".repeat(700_000)
    );
    let go_on = Arc::new(tokio::sync::Notify::new());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("address").port();
    let server = {
        let (answer, go_on) = (answer.clone(), Arc::clone(&go_on));
        tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                let (answer, go_on) = (answer.clone(), Arc::clone(&go_on));
                tokio::spawn(async move {
                    // One request a connection: read its head, answer, close.
                    let mut head = Vec::new();
                    let mut buffer = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match socket.read(&mut buffer).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buffer[..n]),
                        }
                    }
                    let slow = head.starts_with(b"GET /slow");
                    let start = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        answer.len()
                    );
                    let body = answer.as_bytes();
                    let first = if slow { 400_000 } else { body.len() };
                    let _ = socket.write_all(start.as_bytes()).await;
                    let _ = socket.write_all(&body[..first]).await;
                    if slow {
                        go_on.notified().await;
                    }
                    let _ = socket.write_all(&body[first..]).await;
                    let _ = socket.shutdown().await;
                });
            }
        })
    };
    let url = |path: &str| format!("http://127.0.0.1:{port}{path}");
    let slow = example(
        &url("/slow"),
        &[("authMode", ""), ("timeout", "20000")],
        &[],
    )
    .await;
    let fast = example(
        &url("/fast"),
        &[("authMode", ""), ("timeout", "20000")],
        &[],
    )
    .await;
    let budgets = AnswerBudgets::new(LIMIT);

    let slow_read = tokio::spawn(budgets.budget("tenant-a").within(async move {
        slow.expect(6.0, true).await;
    }));
    // Until the slow answer's first 400 KB are held.
    let held = budgets.budget("tenant-a");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while LIMIT - held.available() < 390_000 {
        assert!(
            std::time::Instant::now() < deadline,
            "the slow answer never arrived"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let refused = budgets
        .budget("tenant-a")
        .within(fast.expect_error())
        .await
        .to_string();
    assert!(
        refused.contains(
            "would hold more than 1048576 bytes (the operator's --answer-bytes-per-namespace)"
        ),
        "{refused}"
    );
    // Another namespace has a budget of its own.
    budgets
        .budget("tenant-b")
        .within(fast.expect(6.0, true))
        .await;

    go_on.notify_one();
    slow_read.await.expect("the slow read ends");
    drop(held);
    budgets
        .budget("tenant-a")
        .within(fast.expect(6.0, true))
        .await;
    assert_eq!(budgets.budget("tenant-a").available(), LIMIT);
    server.abort();
}

/// `aggregateFromKubeServiceEndpoints`: the endpoints are real servers on 127.0.0.2, .3 and .4,
/// all on one port number (every 127.x address is on the loopback interface), so one
/// EndpointSlice port serves them all as it would for pods. The EndpointSlices are fed to an
/// in-memory cluster view (the operator feeds the same index from its watch).
mod aggregate {
    use std::net::SocketAddr;

    use k8s_openapi::api::discovery::v1::{
        Endpoint, EndpointConditions, EndpointPort, EndpointSlice,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use keda_scalers::cluster::{ClusterHandle, InMemoryCluster};

    use super::*;

    /// Servers answering `{"queue": {"pending": <value>}}` on `127.0.0.<n>:<one port>`, checking
    /// the API key.
    async fn servers_on_one_port(values: &[(u8, f64)]) -> (u16, Vec<TestServer>) {
        'attempt: for _ in 0..20 {
            let mut servers = Vec::new();
            let mut port = 0;
            for (host, value) in values {
                let answer = format!(r#"{{"queue": {{"pending": {value}}}}}"#);
                let handler = http_server::handler(move |r| {
                    if r.header("x-api-key").as_deref() != Some(API_KEY) {
                        return (StatusCode::UNAUTHORIZED, "text/plain", "no".into());
                    }
                    (StatusCode::OK, "application/json", answer.clone())
                });
                let addr = SocketAddr::from(([127, 0, 0, *host], port));
                match TestServer::start_at(handler, addr).await {
                    Ok(server) => {
                        port = server.addr.port();
                        servers.push(server);
                    }
                    // The port is taken on this address: start over with another.
                    Err(_) => continue 'attempt,
                }
            }
            return (port, servers);
        }
        panic!("no port free on 127.0.0.2-6 after 20 attempts");
    }

    fn slice(
        name: &str,
        service: &str,
        port: u16,
        endpoints: &[(&str, Option<bool>)],
    ) -> EndpointSlice {
        EndpointSlice {
            metadata: ObjectMeta {
                namespace: Some("team".into()),
                name: Some(name.into()),
                labels: Some(
                    [(
                        "kubernetes.io/service-name".to_string(),
                        service.to_string(),
                    )]
                    .into(),
                ),
                ..Default::default()
            },
            address_type: "IPv4".into(),
            endpoints: endpoints
                .iter()
                .map(|(ip, ready)| Endpoint {
                    addresses: vec![ip.to_string()],
                    conditions: Some(EndpointConditions {
                        ready: *ready,
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .collect(),
            ports: Some(vec![EndpointPort {
                name: Some("http".into()),
                port: Some(i32::from(port)),
                ..Default::default()
            }]),
        }
    }

    async fn aggregating(cluster: &Arc<InMemoryCluster>, port: u16, aggregation: &str) -> Harness {
        let url = format!("http://consumers.team.svc.cluster.local:{port}/stats?verbose=1");
        conformance(
            "metrics-api",
            Setup {
                metadata: &[
                    ("url", url.as_str()),
                    ("valueLocation", "queue.pending"),
                    ("aggregateFromKubeServiceEndpoints", "true"),
                    ("aggregationType", aggregation),
                ],
                auth: &[("apiKey", API_KEY)],
                cluster: ClusterHandle::new(cluster.clone()),
                ..Setup::default()
            },
        )
        .await
    }

    #[tokio::test]
    async fn every_ready_endpoint_is_asked_and_the_values_combined() {
        // .2, .3, .4 are ready; .5 is ready but nothing listens (left out); .6 is not ready and
        // would answer 1000.
        let (port, servers) =
            servers_on_one_port(&[(2, 2.0), (3, 8.0), (4, 5.0), (6, 1000.0)]).await;
        let cluster = Arc::new(InMemoryCluster::new());
        cluster.apply_slice(&slice(
            "consumers-a",
            "consumers",
            port,
            &[
                ("127.0.0.2", Some(true)),
                ("127.0.0.3", None),
                ("127.0.0.6", Some(false)),
            ],
        ));
        cluster.apply_slice(&slice(
            "consumers-b",
            "consumers",
            port,
            &[("127.0.0.4", Some(true)), ("127.0.0.5", Some(true))],
        ));
        // Another Service's endpoint in the namespace is not asked.
        cluster.apply_slice(&slice(
            "other-a",
            "other",
            port,
            &[("127.0.0.6", Some(true))],
        ));
        // The documented activationTargetValue is 3.8.
        for (aggregation, expected) in [("average", 5.0), ("sum", 15.0), ("max", 8.0), ("min", 2.0)]
        {
            let h = aggregating(&cluster, port, aggregation).await;
            h.expect(expected, expected > 3.8).await;
        }
        for server in &servers[..3] {
            let seen = server.requests();
            assert_eq!(seen.len(), 4, "one request per poll at {}", server.addr);
            assert_eq!(seen[0].uri, "/stats?verbose=1");
        }
        assert!(
            servers[3].requests().is_empty(),
            "the not-ready endpoint was asked"
        );
        // An endpoint that becomes ready is asked at the next poll.
        cluster.apply_slice(&slice(
            "consumers-a",
            "consumers",
            port,
            &[
                ("127.0.0.2", Some(true)),
                ("127.0.0.3", None),
                ("127.0.0.6", Some(true)),
            ],
        ));
        aggregating(&cluster, port, "max")
            .await
            .expect(1000.0, true)
            .await;
    }

    #[tokio::test]
    async fn no_ready_endpoint_or_no_answer_is_an_error_naming_the_service() {
        let cluster = Arc::new(InMemoryCluster::new());
        let h = aggregating(&cluster, 8080, "sum").await;
        assert_eq!(
            h.expect_error().await.to_string(),
            "trigger 0 (metrics-api): Service team/consumers (from url \
             http://consumers.team.svc.cluster.local:8080/stats) has no ready endpoint to aggregate"
        );
        // Ready endpoints where nothing listens.
        let (port, servers) = servers_on_one_port(&[(2, 1.0)]).await;
        drop(servers);
        cluster.apply_slice(&slice(
            "consumers-a",
            "consumers",
            port,
            &[("127.0.0.2", Some(true)), ("127.0.0.3", Some(true))],
        ));
        let err = aggregating(&cluster, port, "sum")
            .await
            .expect_error()
            .await
            .to_string();
        assert!(
            err.starts_with(
                "trigger 0 (metrics-api): asking the 2 ready endpoints of Service team/consumers failed: "
            ),
            "{err}"
        );
    }

    #[tokio::test]
    async fn without_a_cluster_view_the_trigger_does_not_build() {
        let ctx = ScalerContext {
            metadata: [
                ("url", "http://consumers.team:8080/stats"),
                ("valueLocation", "queue.pending"),
                ("targetValue", "1"),
                ("aggregateFromKubeServiceEndpoints", "true"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
            ..ScalerContext::new("metrics-api", 0)
        };
        let err = Registry::builtin().build(ctx).await.expect_err("refused");
        assert!(
            err.to_string().starts_with(
                "trigger 0 (metrics-api): connecting to the EndpointSlices of Service team/consumers failed: no cluster view"
            ),
            "{err}"
        );
        // A host that names no namespace: KEDA only fails when it fetches, so the trigger
        // builds and every read fails naming `url` (issue 29, row 3).
        let ctx = ScalerContext {
            metadata: [
                ("url", "http://consumers:8080/stats"),
                ("valueLocation", "queue.pending"),
                ("targetValue", "1"),
                ("aggregateFromKubeServiceEndpoints", "true"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
            ..ScalerContext::new("metrics-api", 0)
        };
        assert!(matches!(Registry::builtin().check(&ctx), Some(Ok(()))));
        let built = Registry::builtin().build(ctx).await.expect("builds");
        let err = keda_scalers::Scaler::metrics_and_activity(
            built.scaler(),
            "s0-metric-api-queue-pending",
        )
        .await
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "trigger 0 (metrics-api): parameter \"url\" with aggregateFromKubeServiceEndpoints: \
             the host must be <service>.<namespace> (optionally followed by .svc.cluster.local), not \"consumers\""
        );
        keda_scalers::Scaler::close(built.scaler()).await;
    }
}
