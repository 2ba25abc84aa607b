//! `external` and `external-push` against the tests' own gRPC external scaler
//! (`common/external.rs`), plain and with mutual TLS: KEDA's metric names, targets, values and
//! activity; the metadata the server receives; one connection per address and TLS settings
//! however many triggers use it; `StreamIsActive` answers passed on, and the stream reopened
//! with KEDA's backoff after the server goes away; errors that name the trigger and the
//! parameter.

#[allow(dead_code)]
mod common;
#[path = "common/external.rs"]
mod external_server;
#[path = "common/http.rs"]
#[allow(dead_code)]
mod http_server;

use std::time::{Duration, Instant};

use common::{Setup, conformance};
use external_server::{ExternalServer, spec};
use http_server::TestCa;
use keda_scalers::pool::ClientPools;
use keda_scalers::{BuiltScaler, Registry, ScalerContext, ScalerError, Secret};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A context for trigger `index` of `trigger_type` on `address`, with `auth` parameters.
fn context(
    trigger_type: &str,
    index: usize,
    metadata: &[(&str, &str)],
    auth: &[(&str, &str)],
    pools: &ClientPools,
) -> ScalerContext {
    let mut ctx = ScalerContext::new(trigger_type, index);
    ctx.scalable_name = "worker".into();
    ctx.scalable_namespace = "team".into();
    ctx.clients = pools.clone();
    for (k, v) in metadata {
        ctx.metadata.insert(k.to_string(), v.to_string());
    }
    for (k, v) in auth {
        ctx.auth_params.insert(k.to_string(), Secret::new(*v));
    }
    ctx
}

async fn build(ctx: ScalerContext) -> Result<BuiltScaler, ScalerError> {
    Registry::builtin().build(ctx).await
}

#[test]
fn every_documented_example_parses() {
    let registry = Registry::builtin();
    for trigger_type in ["external", "external-push"] {
        common::assert_parameters_documented(&registry, trigger_type);
        common::assert_defaults_documented(&registry, trigger_type);
        let examples = common::documented_examples(trigger_type);
        assert!(!examples.is_empty(), "{trigger_type}");
        for (trigger, index, auth) in examples {
            let mut ctx = ScalerContext::from_trigger(&trigger, index);
            for param in auth {
                ctx.auth_params.insert(param, Secret::new("PEM"));
            }
            let checked = registry.check(&ctx).expect("a parse-only check");
            assert!(
                checked.is_ok(),
                "docs/scalers/{trigger_type}.md: {checked:?}"
            );
        }
    }
}

#[tokio::test]
async fn the_documented_example_reads_metrics_and_activity_from_the_server() {
    let server = ExternalServer::plain(vec![spec("queue-depth", 10)]).await;
    let address = server.address();
    let h = conformance(
        "external",
        Setup {
            metadata: &[("scalerAddress", &address)],
            ..Setup::default()
        },
    )
    .await;
    // KEDA's name: s<index>-<metricName as the server returns it>.
    assert_eq!(h.metric_name, "s0-queue-depth");
    let specs = h.built.scaler().metric_specs();
    let target = &specs[0].external.as_ref().expect("External").target;
    assert_eq!(
        (
            target.type_.as_str(),
            target.average_value.as_ref().map(|q| q.0.as_str())
        ),
        ("AverageValue", Some("10"))
    );

    server.set_value("queue-depth", 3, 0.0);
    server.set_active(false);
    h.expect(3.0, false).await;
    // metricValueFloat wins when above 0; the activity is IsActive's answer, not a threshold.
    server.set_value("queue-depth", 3, 7.5);
    server.set_active(true);
    h.expect(7.5, true).await;
    server.set_value("queue-depth", 0, 0.0);
    h.expect(0.0, true).await;

    // The server is asked with the bare metric name and gets the object and the whole
    // metadata.
    assert_eq!(
        server
            .state
            .asked
            .lock()
            .expect("asked")
            .last()
            .map(String::as_str),
        Some("queue-depth")
    );
    let seen = server.last_seen();
    assert_eq!(
        (seen.name.as_str(), seen.namespace.as_str()),
        ("conformance", "default")
    );
    assert_eq!(
        seen.scaler_metadata
            .get("scalerAddress")
            .map(String::as_str),
        Some(address.as_str())
    );
    assert_eq!(
        seen.scaler_metadata.get("queueName").map(String::as_str),
        Some("jobs"),
        "keys the scaler does not know are passed on"
    );
    assert_eq!(
        server.calls("GetMetricSpec"),
        1,
        "specs are read once, at build"
    );
    h.close().await;
}

#[tokio::test]
async fn a_float_target_and_several_metrics_become_hpa_specs() {
    let mut float = spec("lag", 0);
    float.target_size_float = 2.5;
    let server = ExternalServer::plain(vec![float, spec("Jobs.Waiting", 4)]).await;
    let pools = ClientPools::new();
    let built = build(context(
        "external",
        3,
        &[("scalerAddress", &server.address())],
        &[],
        &pools,
    ))
    .await
    .expect("builds");
    let specs = built.scaler().metric_specs();
    let names: Vec<_> = specs
        .iter()
        .map(|s| s.external.as_ref().expect("External"))
        .map(|e| {
            (
                e.metric.name.clone(),
                e.target.average_value.as_ref().map(|q| q.0.clone()),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("s3-lag".to_string(), Some("2500m".to_string())),
            ("s3-Jobs.Waiting".to_string(), Some("4".to_string())),
        ]
    );
    server.set_value("Jobs.Waiting", 9, 0.0);
    let read = built
        .scaler()
        .metrics_and_activity("s3-Jobs.Waiting")
        .await
        .expect("reads");
    assert_eq!(read.values[0].name, "s3-Jobs.Waiting");
    assert_eq!(read.values[0].value, 9.0);
    // A name without this trigger's prefix is not one of its metrics.
    let err = built
        .scaler()
        .metrics_and_activity("s0-Jobs.Waiting")
        .await
        .expect_err("wrong index");
    assert!(matches!(err, ScalerError::UnknownMetric { .. }), "{err}");
}

#[tokio::test]
async fn mutual_tls_needs_the_ca_and_the_client_certificate() {
    let ca = TestCa::new("external-ca");
    let server = ExternalServer::tls(vec![spec("m", 1)], ca.server_config(true)).await;
    server.set_value("m", 4, 0.0);
    let (cert, key) = ca.client("keda-rs");
    let pools = ClientPools::new();
    let address = server.address();
    let metadata = [("scalerAddress", address.as_str())];

    let ok = build(context(
        "external",
        0,
        &metadata,
        &[
            ("caCert", &ca.pem()),
            ("tlsClientCert", &cert),
            ("tlsClientKey", &key),
        ],
        &pools,
    ))
    .await
    .expect("mutual TLS works");
    let read = ok
        .scaler()
        .metrics_and_activity("s0-m")
        .await
        .expect("reads");
    assert_eq!(read.values[0].value, 4.0);

    // No client certificate: the server refuses the handshake.
    let err = build(context(
        "external",
        0,
        &metadata,
        &[("caCert", &ca.pem())],
        &pools,
    ))
    .await
    .expect_err("no client certificate")
    .to_string();
    assert!(
        err.starts_with(&format!(
            "trigger 0 (external): connecting to external scaler at {address} (GetMetricSpec) failed"
        )),
        "{err}"
    );
    // The system roots do not know the test CA.
    let (other_cert, other_key) = ca.client("other");
    let err = build(context(
        "external",
        1,
        &[("scalerAddress", &address), ("enableTLS", "true")],
        &[("tlsClientCert", &other_cert), ("tlsClientKey", &other_key)],
        &pools,
    ))
    .await
    .expect_err("unknown CA")
    .to_string();
    assert!(
        err.starts_with("trigger 1 (external): connecting to"),
        "{err}"
    );
    // A client key that is not PEM: the parameter is named, the value is not shown.
    let err = build(context(
        "external",
        2,
        &metadata,
        &[
            ("caCert", &ca.pem()),
            ("tlsClientCert", &cert),
            ("tlsClientKey", "s3cret-key"),
        ],
        &pools,
    ))
    .await
    .expect_err("bad key")
    .to_string();
    assert!(err.contains("\"tlsClientKey\""), "{err}");
    assert!(!err.contains("s3cret-key"), "{err}");
    ok.scaler().close().await;
}

#[tokio::test]
async fn unsafe_ssl_skips_verification_of_a_tls_server() {
    let ca = TestCa::new("untrusted");
    let server = ExternalServer::tls(vec![spec("m", 1)], ca.server_config(false)).await;
    server.set_value("m", 2, 0.0);
    let pools = ClientPools::new();
    let built = build(context(
        "external",
        0,
        &[
            ("scalerAddress", &server.address()),
            ("enableTLS", "true"),
            ("unsafeSsl", "true"),
        ],
        &[],
        &pools,
    ))
    .await
    .expect("unsafeSsl accepts any certificate");
    let read = built
        .scaler()
        .metrics_and_activity("s0-m")
        .await
        .expect("reads");
    assert_eq!(read.values[0].value, 2.0);
    // A plaintext client against the TLS server fails, naming the trigger.
    let err = build(context(
        "external",
        0,
        &[("scalerAddress", &server.address())],
        &[],
        &pools,
    ))
    .await
    .expect_err("h2c against TLS");
    assert!(
        err.to_string()
            .starts_with("trigger 0 (external): connecting to"),
        "{err}"
    );
}

#[tokio::test]
async fn triggers_on_one_address_and_tls_settings_share_one_connection() {
    let server = ExternalServer::plain(vec![spec("m", 1)]).await;
    server.set_value("m", 1, 0.0);
    let pools = ClientPools::new();
    let mut scalers = Vec::new();
    for i in 0..50 {
        let mut ctx = context(
            if i % 2 == 0 {
                "external"
            } else {
                "external-push"
            },
            0,
            &[("scalerAddress", &server.address())],
            &[],
            &pools,
        );
        ctx.scalable_name = format!("object-{i}");
        scalers.push(build(ctx).await.expect("builds"));
    }
    for s in &scalers {
        s.scaler()
            .metrics_and_activity("s0-m")
            .await
            .expect("reads");
    }
    assert_eq!(server.accepted(), 1, "50 triggers, one connection");
    assert_eq!(server.calls("GetMetrics"), 50);
    // Another host name for the same server is another channel.
    let other = build(context(
        "external",
        0,
        &[(
            "scalerAddress",
            &format!("localhost:{}", server.addr.port()),
        )],
        &[],
        &pools,
    ))
    .await
    .expect("builds");
    assert_eq!(server.accepted(), 2);
    // Closing every user releases the channel: the connection closes.
    for s in scalers.iter().chain([&other]) {
        s.scaler().close().await;
    }
    drop(scalers);
    drop(other);
    external_server::eventually("the connections to close", || {
        server.open_connections() == 0
    })
    .await;
}

#[tokio::test]
async fn an_unreachable_server_fails_the_build_and_a_lost_one_fails_polls_until_it_returns() {
    let pools = ClientPools::new();
    // Nothing listens on port 1.
    let err = build(context(
        "external",
        2,
        &[("scalerAddress", "127.0.0.1:1")],
        &[],
        &pools,
    ))
    .await
    .expect_err("unreachable");
    assert!(
        err.to_string()
            .starts_with("trigger 2 (external): connecting to external scaler at 127.0.0.1:1 (GetMetricSpec) failed: gRPC status Unavailable"),
        "{err}"
    );

    let mut server = ExternalServer::plain(vec![spec("m", 1)]).await;
    server.set_value("m", 5, 0.0);
    let built = build(context(
        "external",
        0,
        &[("scalerAddress", &server.address())],
        &[],
        &pools,
    ))
    .await
    .expect("builds");
    built
        .scaler()
        .metrics_and_activity("s0-m")
        .await
        .expect("reads");
    server.stop().await;
    let err = built
        .scaler()
        .metrics_and_activity("s0-m")
        .await
        .expect_err("server gone")
        .to_string();
    assert!(
        err.starts_with(&format!(
            "trigger 0 (external): GetMetrics on the external scaler at {} failed: gRPC status",
            server.address()
        )),
        "{err}"
    );
    server.start().await;
    server.set_value("m", 6, 0.0);
    let read = external_server::eventually_ok("the channel to reconnect", || async {
        built.scaler().metrics_and_activity("s0-m").await
    })
    .await;
    assert_eq!(read.values[0].value, 6.0);
}

#[tokio::test]
async fn a_server_without_usable_metric_specs_is_refused() {
    let server = ExternalServer::plain(Vec::new()).await;
    let pools = ClientPools::new();
    let err = build(context(
        "external",
        0,
        &[("scalerAddress", &server.address())],
        &[],
        &pools,
    ))
    .await
    .expect_err("no specs")
    .to_string();
    assert_eq!(
        err,
        format!(
            "trigger 0 (external): the external scaler at {} answered GetMetricSpec with no metric",
            server.address()
        )
    );
    *server.state.specs.lock().expect("specs") = vec![spec("m", 0)];
    let err = build(context(
        "external",
        0,
        &[("scalerAddress", &server.address())],
        &[],
        &pools,
    ))
    .await
    .expect_err("no target")
    .to_string();
    assert!(
        err.ends_with("without a positive targetSizeFloat or targetSize"),
        "{err}"
    );
}

/// Runs the push side of `built` in a task; returns the receiver and the cancel token.
fn run_push(
    built: BuiltScaler,
) -> (
    mpsc::Receiver<bool>,
    CancellationToken,
    tokio::task::JoinHandle<()>,
) {
    let (tx, rx) = mpsc::channel(16);
    let cancel = CancellationToken::new();
    let token = cancel.clone();
    let task = tokio::spawn(async move {
        let push = built.push().expect("external-push is a push scaler");
        push.run(token, tx).await;
    });
    (rx, cancel, task)
}

async fn next(rx: &mut mpsc::Receiver<bool>) -> Option<bool> {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("an answer within 10 s")
}

#[tokio::test]
async fn external_push_passes_on_stream_answers_and_reopens_after_the_server_returns() {
    let mut server = ExternalServer::plain(vec![spec("m", 1)]).await;
    let pools = ClientPools::new();
    let built = build(context(
        "external-push",
        0,
        &[("scalerAddress", &server.address())],
        &[],
        &pools,
    ))
    .await
    .expect("builds");
    assert!(built.push().is_some());
    let (mut rx, cancel, task) = run_push(built);
    external_server::eventually("the stream to open", || server.open_streams() == 1).await;
    assert_eq!(server.push(true), 1);
    assert_eq!(next(&mut rx).await, Some(true));
    server.push(false);
    assert_eq!(next(&mut rx).await, Some(false));
    let seen = server.last_seen();
    assert_eq!(
        (seen.name.as_str(), seen.namespace.as_str()),
        ("worker", "team")
    );

    // The server goes away and comes back: the stream is reopened (first retry after 2 s).
    server.stop().await;
    let gone = Instant::now();
    server.start().await;
    external_server::eventually("the stream to reopen", || server.open_streams() == 1).await;
    let waited = gone.elapsed();
    assert!(
        waited >= Duration::from_millis(1900),
        "reopened after the backoff: {waited:?}"
    );
    server.push(true);
    assert_eq!(next(&mut rx).await, Some(true));

    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("run returns promptly on cancel")
        .expect("no panic");
}

#[tokio::test]
async fn external_push_retries_a_refused_stream_with_a_growing_backoff() {
    let server = ExternalServer::plain(vec![spec("m", 1)]).await;
    server
        .state
        .refuse_streams
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let pools = ClientPools::new();
    let built = build(context(
        "external-push",
        0,
        &[("scalerAddress", &server.address())],
        &[],
        &pools,
    ))
    .await
    .expect("builds");
    let (rx, cancel, task) = run_push(built);
    external_server::eventually_within("three stream attempts", Duration::from_secs(15), || {
        server.state.stream_opens.lock().expect("opens").len() >= 3
    })
    .await;
    let opens = server.state.stream_opens.lock().expect("opens").clone();
    let gaps: Vec<Duration> = opens.windows(2).map(|w| w[1] - w[0]).collect();
    // KEDA's backoff: 2 s, then 4 s (a little scheduling slack either way).
    assert!(
        gaps[0] >= Duration::from_millis(1900) && gaps[0] < Duration::from_millis(3500),
        "{gaps:?}"
    );
    assert!(
        gaps[1] >= Duration::from_millis(3900) && gaps[1] < Duration::from_millis(5500),
        "{gaps:?}"
    );
    // Dropping the receiver ends nothing by itself while no answer is sent; cancel does.
    drop(rx);
    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("run returns on cancel")
        .expect("no panic");
}

#[tokio::test]
async fn external_push_stops_when_the_loop_drops_its_receiver() {
    let server = ExternalServer::plain(vec![spec("m", 1)]).await;
    let pools = ClientPools::new();
    let built = build(context(
        "external-push",
        0,
        &[("scalerAddress", &server.address())],
        &[],
        &pools,
    ))
    .await
    .expect("builds");
    let (rx, _cancel, task) = run_push(built);
    external_server::eventually("the stream to open", || server.open_streams() == 1).await;
    drop(rx);
    server.push(true);
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("run returns once a send fails")
        .expect("no panic");
}
