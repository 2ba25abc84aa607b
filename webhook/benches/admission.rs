//! Admission latency with 10,000 ScaledObjects in the caches, against a fixed-answer TLS server
//! measured in the same run.
//!
//! The caches hold 10,000 ScaledObjects in one namespace, each with its HPA (owned by it) and its
//! Deployment (two containers with requests), plus a LimitRange: what a large KEDA cluster looks
//! like to the webhook. The load is AdmissionReview v1 CREATEs of a ScaledObject (a redis and a
//! cpu trigger, so every rule runs: both ScaledObject indexes, the HPA index, the workload and
//! LimitRange lookups, the per-object rules) POSTed over one kept-alive HTTP/2 TLS connection, as
//! the API server sends them, open loop (each request is sent when it is due). Two kinds: one
//! that is admitted, one that is refused (its workload already has a ScaledObject). The baseline
//! is an actix server with the same TLS configuration and one worker that reads the same body
//! and answers a fixed AdmissionReview.
//!
//! ```text
//! nice -n 19 cargo bench -p keda-webhook --bench admission -- [rate] [seconds] [--objects N]
//! ```
//! (defaults: 1000 requests/s for 10 s, 10,000 objects; issue 25 asks for `--objects 100000`).
//! It prints the process's RSS before and after filling the caches (bytes per object with its
//! HPA and Deployment) and after the load. Not part of `cargo test`.
#![allow(clippy::unwrap_used)]

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

use actix_web::{App, HttpResponse, HttpServer, web};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::LimitRange;
use keda_api::scaled_object::ScaledObject;
use keda_tls::CertStore;
use keda_tls::pki::CertificateAuthority;
use keda_webhook::app::{AppState, SCALED_OBJECT_PATH};
use keda_webhook::cache::Caches;
use keda_webhook::metrics::Metrics;
use keda_webhook::start::{server_tls, webhook_server};
use rustls::RootCertStore;
use rustls_pki_types::ServerName;
use serde_json::{Value, json};

/// ScaledObjects (and as many HPAs, one more Deployment) in the caches, unless `--objects`.
const OBJECTS: usize = 10_000;
const NAMESPACE: &str = "bench";

fn scaled_object(name: &str, target: &str) -> Value {
    json!({
        "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "scaleTargetRef": {"name": target},
            "minReplicaCount": 1,
            "maxReplicaCount": 20,
            "triggers": [
                {"type": "redis", "name": "queue", "metadata": {"address": "redis:6379", "listName": name, "listLength": "5"}},
                {"type": "cpu", "metricType": "Utilization", "metadata": {"value": "60"}},
            ],
        },
    })
}

/// The process's resident set (VmRSS), in bytes.
fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kib| kib * 1024)
}

fn fill(caches: &Caches, objects: usize) {
    for i in 0..objects {
        let name = format!("app-{i}");
        let so: ScaledObject = serde_json::from_value(scaled_object(&name, &name)).unwrap();
        caches.scaled_objects.apply(&so);
        let hpa: HorizontalPodAutoscaler = serde_json::from_value(json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": format!("keda-hpa-{name}"), "namespace": NAMESPACE,
                "ownerReferences": [{"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "name": name, "uid": "u", "controller": true}]},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}, "maxReplicas": 20},
        }))
        .unwrap();
        caches.hpas.apply(&hpa);
    }
    for i in 0..=objects {
        let name = format!("app-{i}");
        let deployment: Deployment = serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {
                "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
                    {"name": "app", "image": "app", "resources": {"requests": {"cpu": "250m", "memory": "128Mi"}}},
                    {"name": "sidecar", "image": "proxy", "resources": {"limits": {"cpu": "100m"}}},
                ]}},
            },
        }))
        .unwrap();
        caches.deployments.apply(&deployment);
    }
    let limit_range: LimitRange = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "LimitRange",
        "metadata": {"name": "defaults", "namespace": NAMESPACE},
        "spec": {"limits": [{"type": "Container", "defaultRequest": {"memory": "64Mi"}}]},
    }))
    .unwrap();
    caches.limit_ranges.apply(&limit_range);
    caches.mark_listed();
}

fn review(object: &Value) -> Bytes {
    Bytes::from(
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "kind": {"group": "keda.sh", "version": "v1alpha1", "kind": "ScaledObject"},
                "resource": {"group": "keda.sh", "version": "v1alpha1", "resource": "scaledobjects"},
                "name": object["metadata"]["name"], "namespace": NAMESPACE,
                "operation": "CREATE",
                "userInfo": {"username": "admin", "groups": ["system:authenticated"]},
                "object": object, "oldObject": null, "dryRun": false,
                "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
            }
        }))
        .unwrap(),
    )
}

struct Report {
    p50: Duration,
    p99: Duration,
    max: Duration,
    late_p99: Duration,
    throughput: f64,
    errors: usize,
    allowed: Option<bool>,
}

async fn drive(address: SocketAddr, ca_pem: &str, body: Bytes, rate: u32, seconds: u64) -> Report {
    let mut roots = RootCertStore::empty();
    for ca in keda_tls::certificates(ca_pem.as_bytes(), "CA").unwrap() {
        roots.add(ca).unwrap();
    }
    let mut config = rustls::ClientConfig::builder_with_provider(keda_tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(address).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    let (sender, connection) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .timer(TokioTimer::new())
        .handshake(TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(connection);
    let request = move || {
        http::Request::post(format!("https://localhost{SCALED_OBJECT_PATH}"))
            .header("content-type", "application/json")
            .body(Full::new(body.clone()))
            .unwrap()
    };
    // Warm-up, and what the answer says.
    let response = sender.clone().send_request(request()).await.unwrap();
    assert_eq!(response.status(), 200);
    let answer: Value =
        serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes()).unwrap();
    let allowed = answer["response"]["allowed"].as_bool();

    let total = u64::from(rate) * seconds;
    let interval = Duration::from_secs(1) / rate.max(1);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let start = tokio::time::Instant::now();
    for i in 0..total {
        let due = start + interval * u32::try_from(i).unwrap();
        tokio::time::sleep_until(due).await;
        let mut sender = sender.clone();
        let request = request();
        let tx = tx.clone();
        tokio::spawn(async move {
            let sent = tokio::time::Instant::now();
            let ok = match sender.send_request(request).await {
                Ok(response) => {
                    response.status() == 200 && response.into_body().collect().await.is_ok()
                }
                Err(_) => false,
            };
            let _ = tx.send((ok, sent.elapsed(), sent - due));
        });
    }
    drop(tx);
    let mut latencies = Vec::new();
    let mut lateness = Vec::new();
    let mut errors = 0;
    while let Some((ok, latency, late)) = rx.recv().await {
        errors += usize::from(!ok);
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
        throughput: latencies.len() as f64 / elapsed.as_secs_f64(),
        errors,
        allowed,
    }
}

fn print(name: &str, r: &Report) {
    println!(
        "{name:<44} p50 {:>7.3} ms   p99 {:>7.3} ms   max {:>7.3} ms   {:>5.0} req/s   errors {}   allowed {:?}   sent late p99 {:.3} ms",
        r.p50.as_secs_f64() * 1e3,
        r.p99.as_secs_f64() * 1e3,
        r.max.as_secs_f64() * 1e3,
        r.throughput,
        r.errors,
        r.allowed,
        r.late_p99.as_secs_f64() * 1e3,
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // `[rate] [seconds] [--objects N]`; other `--` flags (cargo's `--bench`) are ignored.
    let mut objects = OBJECTS;
    let mut args = Vec::new();
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        if arg == "--objects" {
            objects = it
                .next()
                .and_then(|n| n.parse().ok())
                .expect("--objects takes a number");
        } else if !arg.starts_with('-') {
            args.push(arg);
        }
    }
    let rate: u32 = args.first().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let seconds: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(10);
    println!(
        "{rate} AdmissionReviews/s for {seconds} s over one kept-alive HTTP/2 TLS connection, {objects} ScaledObjects (+ HPAs, Deployments) cached, {} CPUs",
        std::thread::available_parallelism().map_or(0, usize::from)
    );

    let ca = CertificateAuthority::new("bench-ca").unwrap();
    let pair = ca.issue_server("localhost", &["localhost"]).unwrap();
    let store = || {
        Arc::new(CertStore::new(
            keda_tls::certified_key(pair.cert.as_bytes(), pair.key.as_bytes(), "bench").unwrap(),
        ))
    };

    let caches = Arc::new(Caches::new());
    let filled = std::time::Instant::now();
    let empty_rss = rss();
    fill(&caches, objects);
    let filled_rss = rss();
    #[allow(clippy::cast_precision_loss)]
    let per_object = filled_rss.saturating_sub(empty_rss) as f64 / objects.max(1) as f64;
    println!(
        "RSS {:.1} MiB before filling, {:.1} MiB filled: {per_object:.0} bytes per ScaledObject with its HPA and Deployment",
        empty_rss as f64 / 1048576.0,
        filled_rss as f64 / 1048576.0,
    );
    println!(
        "caches filled in {:.2} s: {} ScaledObjects, {} HPAs, {} Deployments",
        filled.elapsed().as_secs_f64(),
        caches.scaled_objects.len(),
        caches.hpas.len(),
        caches.deployments.len()
    );
    let state = AppState {
        caches,
        metrics: Arc::new(Metrics::new()),
        identity: Default::default(),
        events: None,
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let webhook = listener.local_addr().unwrap();
    tokio::spawn(webhook_server(state, listener, server_tls(store()), 1).unwrap());

    // The baseline: same TLS, one worker, reads the body, answers a fixed review.
    let fixed = Bytes::from(
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": true, "status": {"metadata": {}}},
        }))
        .unwrap(),
    );
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let baseline = listener.local_addr().unwrap();
    let server = HttpServer::new(move || {
        let fixed = fixed.clone();
        App::new().route(
            SCALED_OBJECT_PATH,
            web::post().to(move |_body: Bytes| {
                let fixed = fixed.clone();
                async move {
                    HttpResponse::Ok()
                        .content_type("application/json")
                        .body(fixed)
                }
            }),
        )
    })
    .tcp_nodelay(true)
    .workers(1)
    .disable_signals()
    .listen_rustls_0_23(listener, server_tls(store()))
    .unwrap()
    .run();
    tokio::spawn(server);

    // A new ScaledObject on a Deployment nobody scales yet: admitted after every check.
    let admitted = review(&scaled_object("new", &format!("app-{objects}")));
    // A second ScaledObject on app-42: refused (other ScaledObject and its HPA).
    let refused = review(&scaled_object("intruder", "app-42"));

    let ca_pem = ca.cert_pem();
    let base = drive(baseline, &ca_pem, admitted.clone(), rate, seconds).await;
    print("baseline (actix TLS, fixed answer)", &base);
    let ok = drive(webhook, &ca_pem, admitted, rate, seconds).await;
    print("webhook, admitted", &ok);
    let no = drive(webhook, &ca_pem, refused, rate, seconds).await;
    print("webhook, refused", &no);
    println!("RSS after the load: {:.1} MiB", rss() as f64 / 1048576.0);
    let ratio =
        |r: &Report, q: fn(&Report) -> Duration| q(r).as_secs_f64() / q(&base).as_secs_f64();
    println!(
        "p99 ratio to baseline: admitted {:.2}x, refused {:.2}x (goal: within 2x); p50 ratio: admitted {:.2}x, refused {:.2}x",
        ratio(&ok, |r| r.p99),
        ratio(&no, |r| r.p99),
        ratio(&ok, |r| r.p50),
        ratio(&no, |r| r.p50),
    );
}
