//! The watch task under `supervise`, as the binary runs it, against the in-memory API server
//! (memkube's REST and watch protocol, the real kube client and reflectors) and a real proxy
//! on loopback. The watch is made to fail by wrapping it: its first run (or every run) panics
//! once it has synced, as a bug in it would.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{activator, backend, client, eventually, get, within};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use keda_activator::metrics::Metrics;
use keda_activator::server::{self, Readiness};
use keda_activator::supervise::{self, Health};
use keda_activator::watch::{self, WatchConfig};
use keda_api::ScaledObject;
use kube::api::{Api, PostParams};
use serde_json::json;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// memkube with the CRDs and namespace `shop`, and its client.
fn cluster() -> (memkube::MemKube, kube::Client) {
    let kube = memkube::MemKube::new();
    let crd_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/crd");
    kube.load_crds_from_dir(crd_dir).expect("CRDs");
    kube.create_namespace("shop").expect("namespace");
    let client = kube.client();
    (kube, client)
}

/// Creates ScaledObject `shop/<name>` routing `<name>.example.com` to Service `<name>`, and
/// its ready EndpointSlice pointing at `pod`.
async fn publish(client: &kube::Client, name: &str, pod: SocketAddr) {
    let so: ScaledObject = serde_json::from_value(json!({
        "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {
            "scaleTargetRef": {"name": name},
            "triggers": [{"type": "http", "metadata": {
                "hosts": format!("{name}.example.com"), "service": name
            }}]
        }
    }))
    .expect("scaledobject");
    Api::<ScaledObject>::namespaced(client.clone(), "shop")
        .create(&PostParams::default(), &so)
        .await
        .expect("create scaledobject");
    let slice: EndpointSlice = serde_json::from_value(json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("{name}-1"), "namespace": "shop",
                     "labels": {"kubernetes.io/service-name": name}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": pod.port(), "protocol": "TCP"}],
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}]
    }))
    .expect("slice");
    Api::<EndpointSlice>::namespaced(client.clone(), "shop")
        .create(&PostParams::default(), &slice)
        .await
        .expect("create slice");
}

/// The watch as the binary starts it, under `supervise`, feeding `targets`; runs for which
/// `panics(run)` holds panic once their caches have synced. Returns the number of runs
/// started and the admin endpoint's address.
async fn supervised_watch(
    client: kube::Client,
    targets: Arc<keda_activator::targets::Targets>,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    stop: &CancellationToken,
    panics: impl Fn(usize) -> bool + Send + Sync + 'static,
) -> (Arc<AtomicUsize>, SocketAddr) {
    let runs = Arc::new(AtomicUsize::new(0));
    let ready = Readiness::default();
    let admin = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let admin_addr = admin.local_addr().expect("addr");
    tokio::spawn(server::serve_admin(
        admin,
        ready.clone(),
        Arc::clone(&health),
        Arc::clone(&metrics),
        server::AdminLimits::default(),
        stop.clone(),
    ));
    let panics = Arc::new(panics);
    let started = Arc::clone(&runs);
    let stop_watching = stop.clone();
    tokio::spawn(supervise::supervise(
        "watch",
        health,
        metrics,
        stop.clone(),
        move || {
            let run = started.fetch_add(1, Ordering::SeqCst);
            let ready = ready.clone();
            // Each run starts unsynced, so its own first list is what sets it.
            ready.set(false);
            let watching = watch::run(
                client.clone(),
                WatchConfig::default(),
                Arc::clone(&targets),
                ready.clone(),
                stop_watching.clone(),
            );
            let panics = Arc::clone(&panics);
            async move {
                if !panics(run) {
                    return watching.await;
                }
                let mut watching = std::pin::pin!(watching);
                loop {
                    tokio::select! {
                        result = &mut watching => return result,
                        () = tokio::time::sleep(Duration::from_millis(5)) => {
                            if ready.get() {
                                panic!("a bug in the watch (run {run})");
                            }
                        }
                    }
                }
            }
        },
    ));
    (runs, admin_addr)
}

/// `/healthz`'s status and body.
async fn healthz(admin: SocketAddr) -> (u16, String) {
    get(&client(), admin, "localhost", "/healthz").await
}

#[tokio::test]
async fn a_watch_that_panics_is_restarted_and_sees_what_changed_while_it_was_down() {
    let stop = CancellationToken::new();
    let _stop_on_exit = stop.clone().drop_guard();
    let (_kube, kube_client) = cluster();
    let a = activator().await;
    let (shop, _) = backend("shop").await;
    let (late, _) = backend("late").await;
    publish(&kube_client, "shop", shop).await;
    let health = Health::new(Duration::from_secs(30));
    let (runs, admin) = supervised_watch(
        kube_client.clone(),
        Arc::clone(&a.targets),
        Arc::clone(&a.metrics),
        Arc::clone(&health),
        &stop,
        |run| run == 0,
    )
    .await;

    // The first run syncs (the route works), then panics.
    eventually("the first watch to fail", || health.is_failing("watch")).await;
    let c = client();
    assert_eq!(
        get(&c, a.addr, "shop.example.com", "/").await,
        (200, "hello from shop".into())
    );
    // A ScaledObject created after the failure is routed: the watch was started again.
    publish(&kube_client, "late", late).await;
    within(10, "the restarted watch to route the new object", async {
        while get(&c, a.addr, "late.example.com", "/").await.0 != 200 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    // One failure that a restart cured does not fail the probe; it is counted.
    assert_eq!(healthz(admin).await, (200, "ok".into()));
    let (_, metrics) = get(&c, admin, "localhost", "/metrics").await;
    assert!(
        metrics.contains("keda_activator_task_failures_total{task=\"watch\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_watch_that_fails_on_every_start_fails_healthz_while_the_known_routes_serve() {
    let stop = CancellationToken::new();
    let _stop_on_exit = stop.clone().drop_guard();
    let (_kube, kube_client) = cluster();
    let a = activator().await;
    let (shop, _) = backend("shop").await;
    publish(&kube_client, "shop", shop).await;
    let grace = Duration::from_secs(1);
    let health = Health::new(grace);
    let (runs, admin) = supervised_watch(
        kube_client.clone(),
        Arc::clone(&a.targets),
        Arc::clone(&a.metrics),
        Arc::clone(&health),
        &stop,
        |_| true,
    )
    .await;

    eventually("the first watch to fail", || health.is_failing("watch")).await;
    let failed_at = tokio::time::Instant::now();
    // Within the grace period the probe passes; after it, it fails and says why.
    assert_eq!(healthz(admin).await.0, 200);
    within(10, "/healthz to fail", async {
        while healthz(admin).await.0 == 200 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(failed_at.elapsed() + Duration::from_millis(50) >= grace);
    let (status, body) = healthz(admin).await;
    assert_eq!(status, 503);
    assert!(body.starts_with("task watch failing for "), "{body}");
    assert!(
        body.contains("last failure: panicked: a bug in the watch (run "),
        "{body}"
    );
    // Restarted with backoff (0.1, 0.2, 0.4, 0.8 s...): a few runs, not a spin.
    let started = runs.load(Ordering::SeqCst);
    assert!(
        (3..=8).contains(&started),
        "{started} runs in about a second"
    );
    // The routes last synced keep serving.
    assert_eq!(
        get(&client(), a.addr, "shop.example.com", "/").await,
        (200, "hello from shop".into())
    );
}

/// A stand-in for the operator's report endpoint: every chunk of every report stream's body
/// (one line each), in order.
async fn operator() -> (SocketAddr, tokio::sync::mpsc::UnboundedReceiver<String>) {
    use http_body_util::BodyExt;
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (lines_tx, lines) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let lines_tx = lines_tx.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request: http::Request<_>| {
                    let lines_tx = lines_tx.clone();
                    async move {
                        let mut body: hyper::body::Incoming = request.into_body();
                        while let Some(Ok(frame)) = body.frame().await {
                            if let Ok(data) = frame.into_data() {
                                let _ = lines_tx.send(String::from_utf8_lossy(&data).into_owned());
                            }
                        }
                        Ok::<_, std::convert::Infallible>(http::Response::new(
                            http_body_util::Empty::<bytes::Bytes>::new(),
                        ))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (addr, lines)
}

#[tokio::test]
async fn a_report_stream_that_panics_is_restarted_and_still_carries_the_wake_ups() {
    use keda_activator::report::{self, ReporterConfig};
    use keda_scalers::scalers::http::protocol::{REPORT_PATH, TargetKey};

    let stop = CancellationToken::new();
    let _stop_on_exit = stop.clone().drop_guard();
    let (operator, mut lines) = operator().await;
    let metrics = Arc::new(Metrics::new());
    let health = Health::new(Duration::from_secs(30));
    let (wake_tx, wake_rx) = tokio::sync::mpsc::channel(16);
    let wake = report::wake_receiver(wake_rx);
    let (unused_tx, _unused_rx) = tokio::sync::mpsc::channel(16);
    let targets = keda_activator::targets::Targets::new(unused_tx, Arc::clone(&metrics));
    let config = ReporterConfig {
        url: format!("http://{operator}{REPORT_PATH}")
            .parse()
            .expect("url"),
        tls: None,
        replica: "activator-0".into(),
        idle_after: Duration::from_secs(120),
    };
    let runs = Arc::new(AtomicUsize::new(0));
    let started = Arc::clone(&runs);
    let stop_reporting = stop.clone();
    tokio::spawn(supervise::supervise(
        "report",
        Arc::clone(&health),
        Arc::clone(&metrics),
        stop.clone(),
        move || {
            let run = started.fetch_add(1, Ordering::SeqCst);
            let reporting = report::run(
                config.clone(),
                Arc::clone(&targets),
                Arc::clone(&wake),
                stop_reporting.clone(),
            );
            async move {
                if run == 0 {
                    // The first run streams (it holds the wake-up channel), then panics.
                    tokio::select! {
                        () = reporting => {}
                        () = tokio::time::sleep(Duration::from_millis(300)) => {
                            panic!("a bug in the report stream");
                        }
                    }
                } else {
                    reporting.await;
                }
                Ok::<(), std::convert::Infallible>(())
            }
        },
    ));
    let first = within(10, "the first run's sample", lines.recv())
        .await
        .expect("a line");
    assert!(first.contains("\"type\":\"sample\""), "{first}");
    eventually("the first run to fail", || health.is_failing("report")).await;
    eventually("the second run", || runs.load(Ordering::SeqCst) == 2).await;
    // A wake-up sent now reaches the operator through the restarted stream.
    wake_tx
        .send(TargetKey::new("shop", "shop", 0))
        .await
        .expect("the wake-up channel is still open");
    within(10, "the wake-up line", async {
        loop {
            let line = lines.recv().await.expect("a line");
            if line.contains("\"type\":\"wake\"") {
                assert!(line.contains("\"shop\""), "{line}");
                return;
            }
        }
    })
    .await;
    assert!(
        metrics
            .encode()
            .contains("keda_activator_task_failures_total{task=\"report\"} 1")
    );
}
