//! Latency of the metrics-apiserver under the HPA's kind of load, with the operator's metric
//! service behind it answering cached values from memory.
//!
//! Drives `GET .../namespaces/bench/s0-redis-jobs?labelSelector=...` over TLS with a kept-alive
//! HTTP/2 connection (as the aggregator does) at a fixed rate, open loop (each request is sent
//! when it is due, whether or not earlier ones were answered), and prints p50/p99/max latency
//! from the moment each request was sent and the throughput; then the same load against a
//! trivial actix TLS handler returning a fixed body, measured in the same run, as the baseline.
//!
//! Latency counts from the send, not from the due time: tokio's timer has a resolution of one
//! millisecond, so at 2,000 requests/s most requests leave up to a millisecond after their due
//! time, which says nothing about the server. So that a stalled sender cannot hide a stalled
//! server, the report also gives how late the sender was (p99 and max of send - due).
//!
//! ```text
//! cargo bench -p keda-metrics-apiserver --bench serving -- [rate] [seconds]
//! ```
//! (defaults: 2000 requests/s for 10 s). Not part of `cargo test`.

#[path = "../tests/common/mod.rs"]
mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use actix_web::{App, HttpResponse, HttpServer, web};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use keda_metrics_apiserver::tls::secure_port_config;
use keda_scalers::MetricValue;
use keda_tls::pki::PemPair;
use keda_tls::{CertStore, certificates, certified_key};
use rustls::RootCertStore;
use rustls_pki_types::ServerName;
use rustls_pki_types::pem::PemObject;

struct Report {
    p50: Duration,
    p99: Duration,
    max: Duration,
    /// How late requests were sent (p99, max), the sender's own delay.
    late_p99: Duration,
    late_max: Duration,
    throughput: f64,
    errors: usize,
}

async fn drive(
    address: SocketAddr,
    ca_pem: &str,
    client: &PemPair,
    path: &str,
    headers: &[(&str, &str)],
    rate: u32,
    seconds: u64,
) -> Report {
    let mut roots = RootCertStore::empty();
    for ca in certificates(ca_pem.as_bytes(), "serving CA").expect("CA") {
        roots.add(ca).expect("root");
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_client_auth_cert(
        certificates(client.cert.as_bytes(), "client").expect("cert"),
        rustls_pki_types::PrivateKeyDer::from_pem_slice(client.key.as_bytes()).expect("key"),
    )
    .expect("client auth");
    config.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    tcp.set_nodelay(true).expect("nodelay");
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").expect("name"), tcp)
        .await
        .expect("TLS");
    let (sender, connection) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .timer(TokioTimer::new())
        .handshake(TokioIo::new(tls))
        .await
        .expect("HTTP/2");
    tokio::spawn(connection);

    let request = {
        let path = path.to_string();
        let headers: Vec<(String, String)> = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move || {
            let mut builder = http::Request::get(format!("https://localhost{path}"));
            for (k, v) in &headers {
                builder = builder.header(k, v);
            }
            builder.body(Empty::<Bytes>::new()).expect("request")
        }
    };
    // Warm-up: one request end to end (connections to the operator, the SAR cache).
    let mut warm = sender.clone();
    let response = warm.send_request(request()).await.expect("warm-up");
    assert_eq!(response.status(), 200, "warm-up request failed");

    let total = rate as u64 * seconds;
    let interval = Duration::from_secs(1) / rate.max(1);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let start = tokio::time::Instant::now();
    for i in 0..total {
        let due = start + interval * u32::try_from(i).expect("fits");
        tokio::time::sleep_until(due).await;
        let mut sender = sender.clone();
        let request = request();
        let tx = tx.clone();
        tokio::spawn(async move {
            let sent = tokio::time::Instant::now();
            let ok = match sender.send_request(request).await {
                Ok(response) => {
                    let ok = response.status() == 200;
                    ok && response.into_body().collect().await.is_ok()
                }
                Err(_) => false,
            };
            let _ = tx.send((ok, sent.elapsed(), sent - due));
        });
    }
    drop(tx);
    let capacity = usize::try_from(total).expect("fits");
    let mut latencies = Vec::with_capacity(capacity);
    let mut lateness = Vec::with_capacity(capacity);
    let mut errors = 0;
    while let Some((ok, latency, late)) = rx.recv().await {
        if !ok {
            errors += 1;
        }
        latencies.push(latency);
        lateness.push(late);
    }
    let elapsed = start.elapsed();
    latencies.sort();
    lateness.sort();
    let at = |v: &[Duration], q: f64| {
        let rank = keda_api::num::f64_to_u64_saturating(v.len() as f64 * q);
        v[usize::try_from(rank).unwrap_or(usize::MAX).min(v.len() - 1)]
    };
    Report {
        p50: at(&latencies, 0.50),
        p99: at(&latencies, 0.99),
        max: latencies[latencies.len() - 1],
        late_p99: at(&lateness, 0.99),
        late_max: lateness[lateness.len() - 1],
        throughput: latencies.len() as f64 / elapsed.as_secs_f64(),
        errors,
    }
}

fn print(name: &str, r: &Report) {
    println!(
        "{name:<36} p50 {:>7.3} ms   p99 {:>7.3} ms   max {:>7.3} ms   {:>5.0} req/s   errors {}   sent late p99 {:.3} ms max {:.3} ms",
        r.p50.as_secs_f64() * 1e3,
        r.p99.as_secs_f64() * 1e3,
        r.max.as_secs_f64() * 1e3,
        r.throughput,
        r.errors,
        r.late_p99.as_secs_f64() * 1e3,
        r.late_max.as_secs_f64() * 1e3,
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let rate: u32 = args.first().and_then(|a| a.parse().ok()).unwrap_or(2000);
    let seconds: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(10);
    println!(
        "{rate} requests/s for {seconds} s over one kept-alive HTTP/2 TLS connection, {} CPUs",
        std::thread::available_parallelism().map_or(0, usize::from)
    );

    // The metrics-apiserver with the operator behind it, serving cached values.
    let table = Arc::new(common::Table::default());
    table.set(
        "bench",
        "worker",
        vec![MetricValue::new("s0-redis-jobs", 42.0)],
    );
    let stack = common::start(table).await;
    let headers = common::as_hpa();
    let report = drive(
        stack.secure,
        &stack.pki.serving_ca.cert_pem(),
        &stack.pki.front_proxy,
        &common::metric_path("bench", "s0-redis-jobs", "worker"),
        &headers,
        rate,
        seconds,
    )
    .await;
    print("metrics-apiserver + operator", &report);

    // Baseline: actix over the same TLS configuration, a fixed body, nothing else.
    let serving = stack
        .pki
        .serving_ca
        .issue_server("baseline", &["localhost", "127.0.0.1"])
        .expect("certificate");
    let store = Arc::new(CertStore::new(
        certified_key(serving.cert.as_bytes(), serving.key.as_bytes(), "baseline").expect("loads"),
    ));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address");
    let body: &'static str = r#"{"kind":"ExternalMetricValueList","apiVersion":"external.metrics.k8s.io/v1beta1","metadata":{},"items":[{"metricName":"s0-redis-jobs","metricLabels":{},"timestamp":"2026-03-04T05:06:07Z","value":"42"}]}"#;
    let server = HttpServer::new(move || {
        App::new().default_service(web::to(move || async move {
            HttpResponse::Ok()
                .content_type("application/json")
                .body(body)
        }))
    })
    .workers(1)
    .disable_signals()
    .listen_rustls_0_23(
        listener,
        secure_port_config(store, &Default::default()).expect("TLS"),
    )
    .expect("listen")
    .run();
    let handle = server.handle();
    tokio::spawn(server);
    let baseline = drive(
        address,
        &stack.pki.serving_ca.cert_pem(),
        &stack.pki.front_proxy,
        "/baseline",
        &headers,
        rate,
        seconds,
    )
    .await;
    print("baseline (actix TLS, fixed body)", &baseline);
    println!(
        "ratio to baseline: p50 {:.2}x   p99 {:.2}x",
        report.p50.as_secs_f64() / baseline.p50.as_secs_f64(),
        report.p99.as_secs_f64() / baseline.p99.as_secs_f64()
    );
    handle.stop(false).await;
}
