//! The request stream through proxy and serve modes (issue 28), shared by the memkube test
//! (`activator/tests/serve_stream.rs`) and the e2e suite (`tests/e2e/tests/serve_modes.rs`,
//! included there by path): the activator's watch and its serve-mode task run against the
//! API server `client` reaches; a stand-in for kube-proxy sends each request to an address of
//! the managed Service's EndpointSlices as they are at that moment. A stream of requests runs
//! through proxy -> serve -> proxy -> zero -> back, and every request is answered exactly once
//! by the pod.
//!
//! A real API server refuses loopback endpoints, and so do the managed slices: the activator
//! and the pod listen on this machine's non-loopback address (`host_ip`); the API server only
//! stores the objects, no traffic goes through the cluster.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use keda_activator::limits::Limits;
use keda_activator::metrics::Metrics;
use keda_activator::proxy::Proxy;
use keda_activator::serve::{MODE_ANNOTATION, ServePolicy};
use keda_activator::server::{self, Readiness};
use keda_activator::serving::{self, ServeConfig};
use keda_activator::targets::{TargetLimits, Targets};
use keda_activator::watch::{self, WatchConfig};
use keda_api::ScaledObject;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use serde_json::json;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// This machine's first address a real API server would take as an endpoint.
fn host_ip() -> IpAddr {
    let out = std::process::Command::new("hostname")
        .arg("-I")
        .output()
        .expect("`hostname -I` lists this machine's addresses");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|a| a.parse::<IpAddr>().ok())
        .find(|ip| ip.is_ipv4() && keda_activator::serve::endpoint_address_ok(*ip))
        .expect(
            "this test needs a non-loopback IPv4 address on this machine (managed EndpointSlices \
             refuse loopback, as real API servers do)",
        )
}

/// The pod: `/metrics` says how many requests it is serving; any other path takes 20 ms and
/// answers the request's `x-id`, counting every id it serves.
struct Pod {
    in_flight: AtomicUsize,
    served: Mutex<HashMap<String, u32>>,
}

async fn pod(ip: IpAddr) -> (SocketAddr, Arc<Pod>) {
    let listener = TcpListener::bind((ip, 0)).await.expect("pod listener");
    let addr = listener.local_addr().expect("pod address");
    let pod = Arc::new(Pod {
        in_flight: AtomicUsize::new(0),
        served: Mutex::new(HashMap::new()),
    });
    let state = Arc::clone(&pod);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let state = Arc::clone(&state);
            tokio::spawn(async move {
                let service = service_fn(move |req: Request<Incoming>| {
                    let state = Arc::clone(&state);
                    async move {
                        if req.uri().path() == "/metrics" {
                            let n = state.in_flight.load(Ordering::SeqCst);
                            let body = format!("# TYPE inflight gauge\ninflight {n}\n");
                            return Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(
                                body,
                            ))));
                        }
                        state.in_flight.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        let id = req
                            .headers()
                            .get("x-id")
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_string();
                        *state
                            .served
                            .lock()
                            .expect("lock")
                            .entry(id.clone())
                            .or_default() += 1;
                        state.in_flight.fetch_sub(1, Ordering::SeqCst);
                        Ok(Response::new(Full::new(Bytes::from(id))))
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (addr, pod)
}

/// Where the managed Service `shop/shop` leads now, as kube-proxy would read it.
async fn route(slices: &Api<EndpointSlice>) -> Option<(SocketAddr, String)> {
    let list = slices
        .list(&ListParams::default().labels("kubernetes.io/service-name=shop"))
        .await
        .ok()?;
    let slice = list.items.into_iter().find(|s| s.address_type == "IPv4")?;
    let mode = slice
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(MODE_ANNOTATION))
        .cloned()
        .unwrap_or_default();
    let port = slice.ports.as_ref()?.first()?.port?;
    let ip: IpAddr = slice.endpoints.first()?.addresses.first()?.parse().ok()?;
    Some((SocketAddr::new(ip, u16::try_from(port).ok()?), mode))
}

/// What the request stream saw.
#[derive(Default)]
struct Seen {
    answers: Mutex<HashMap<String, u32>>,
    direct: AtomicUsize,
    proxied: AtomicUsize,
    failures: AtomicUsize,
}

async fn send(
    client: &hyper_util::client::legacy::Client<
        hyper_util::client::legacy::connect::HttpConnector,
        Full<Bytes>,
    >,
    slices: &Api<EndpointSlice>,
    proxy: SocketAddr,
    id: String,
    seen: &Seen,
) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let (addr, _) = loop {
        if let Some(found) = route(slices).await {
            break found;
        }
        assert!(
            Instant::now() < deadline,
            "the managed Service never got endpoints"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    if addr == proxy {
        seen.proxied.fetch_add(1, Ordering::SeqCst);
    } else {
        seen.direct.fetch_add(1, Ordering::SeqCst);
    }
    let request = Request::get(format!("http://{addr}/"))
        .header(http::header::HOST, "shop.example.com")
        .header("x-id", id.as_str())
        .body(Full::new(Bytes::new()))
        .expect("request");
    match tokio::time::timeout(Duration::from_secs(30), client.request(request)).await {
        Ok(Ok(response)) if response.status() == 200 => {
            let body = response
                .into_body()
                .collect()
                .await
                .expect("body")
                .to_bytes();
            assert_eq!(body, id.as_bytes(), "the answer of another request");
            *seen.answers.lock().expect("lock").entry(id).or_default() += 1;
        }
        _ => {
            seen.failures.fetch_add(1, Ordering::SeqCst);
        }
    }
}

async fn create<K>(api: &Api<K>, value: serde_json::Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let object: K = serde_json::from_value(value).expect("object");
    api.create(&PostParams::default(), &object)
        .await
        .expect("create");
}

fn pod_slice(ns: &str, pod: SocketAddr) -> serde_json::Value {
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "shop-pods-1", "namespace": ns,
                     "labels": {"kubernetes.io/service-name": "shop-pods"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": pod.port(), "protocol": "TCP"}],
        "endpoints": [{"addresses": [pod.ip().to_string()], "conditions": {"ready": true}}]
    })
}

async fn eventually_mode(slices: &Api<EndpointSlice>, mode: &str, secs: u64) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if route(slices).await.is_some_and(|(_, m)| m == mode) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the managed Service never went to {mode} mode"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs the scenario: the workload's objects in namespace `ns`, the activators' own Service
/// (`keda-activator`) in `self_ns` (both must exist; the `keda.sh` CRDs installed).
pub async fn flips_with_a_request_stream(client: kube::Client, ns: &str, self_ns: &str) {
    let ip = host_ip();
    let stop = CancellationToken::new();
    let _stop_on_exit = stop.clone().drop_guard();

    // The activator: proxy, watch and serve-mode task, on this machine's address.
    let metrics = Arc::new(Metrics::new());
    let (wake_tx, _wake_rx) = tokio::sync::mpsc::channel(64);
    let targets = Targets::with_limits(wake_tx, Arc::clone(&metrics), TargetLimits::default());
    let proxy = Arc::new(Proxy::with_limits(
        targets.routes(),
        Arc::clone(&metrics),
        Limits::default(),
    ));
    let listener = TcpListener::bind((ip, 0)).await.expect("proxy listener");
    let proxy_addr = listener.local_addr().expect("proxy address");
    tokio::spawn(server::serve_proxy(
        listener,
        proxy,
        stop.clone(),
        Duration::from_secs(5),
    ));
    let self_service = (self_ns.to_string(), "keda-activator".to_string());
    let routes_ready = Readiness::default();
    tokio::spawn(watch::run(
        client.clone(),
        WatchConfig {
            namespace: Some(ns.to_string()),
            self_service: Some(self_service.clone()),
            pod_ip: Some(ip),
            ..WatchConfig::default()
        },
        Arc::clone(&targets),
        routes_ready.clone(),
        stop.clone(),
    ));
    tokio::spawn(serving::run(
        client.clone(),
        ServeConfig {
            namespace: Some(ns.to_string()),
            self_service,
            pod_ip: Some(ip),
            proxy_port: proxy_addr.port(),
            policy: ServePolicy {
                enter_ready: 1,
                leave_ready: 1,
                settle: Duration::from_secs(1),
            },
            idle: Duration::from_secs(2),
            scrape_timeout: Duration::from_millis(500),
        },
        Arc::clone(&targets),
        routes_ready,
        stop.clone(),
    ));

    // The cluster: the activators' own Service endpoints, the pod behind `shop-pods`, the
    // ScaledObject and the opted-in Service `shop` the clients call.
    let slices_keda: Api<EndpointSlice> = Api::namespaced(client.clone(), self_ns);
    create(
        &slices_keda,
        json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "keda-activator-1", "namespace": self_ns,
                         "labels": {"kubernetes.io/service-name": "keda-activator"}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": proxy_addr.port(), "protocol": "TCP"}],
            "endpoints": [{"addresses": [ip.to_string()], "conditions": {"ready": true}}]
        }),
    )
    .await;
    let (pod_addr, pod) = pod(ip).await;
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), ns);
    create(&slices, pod_slice(ns, pod_addr)).await;
    let scaled_objects: Api<ScaledObject> = Api::namespaced(client.clone(), ns);
    create(
        &scaled_objects,
        json!({
            "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "metadata": {"name": "shop", "namespace": ns},
            "spec": {
                "scaleTargetRef": {"name": "shop"},
                "minReplicaCount": 0,
                "triggers": [{"type": "http", "metadata": {
                    "hosts": "shop.example.com", "service": "shop-pods",
                    "targetConcurrency": "10", "holdTimeout": "30s",
                    "podConcurrencyMetric": "inflight"
                }}]
            }
        }),
    )
    .await;
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    create(
        &services,
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "shop", "namespace": ns,
                         "annotations": {"activator.keda-rs.sh/serves": "shop"}},
            "spec": {"ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}
        }),
    )
    .await;

    // Proxy first: the Service leads to the activator.
    eventually_mode(&slices, "proxy", 10).await;
    assert_eq!(route(&slices).await.map(|(a, _)| a), Some(proxy_addr));

    // A stream of requests, 5 at a time, while the modes flip under it.
    let seen = Arc::new(Seen::default());
    let running = Arc::new(AtomicBool::new(true));
    let next = Arc::new(AtomicUsize::new(0));
    let http = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(0)
        .build_http::<Full<Bytes>>();
    let stream = |count_until: Arc<AtomicBool>| {
        let mut tasks = Vec::new();
        for _ in 0..5 {
            let (seen, next, http, slices, running) = (
                Arc::clone(&seen),
                Arc::clone(&next),
                http.clone(),
                slices.clone(),
                Arc::clone(&count_until),
            );
            tasks.push(tokio::spawn(async move {
                while running.load(Ordering::SeqCst) {
                    let id = next.fetch_add(1, Ordering::SeqCst).to_string();
                    send(&http, &slices, proxy_addr, id, &seen).await;
                }
            }));
        }
        tasks
    };
    let tasks = stream(Arc::clone(&running));
    // Traffic through the activator, one ready pod that answers its gauge: serve mode.
    eventually_mode(&slices, "serve", 15).await;
    assert_eq!(route(&slices).await.map(|(a, _)| a), Some(pod_addr));
    let key = keda_scalers::scalers::http::protocol::TargetKey::new(ns, "shop", 0);
    let target = targets.get(&key).expect("the target");
    let sample = target
        .sample(tokio::time::Instant::now(), Duration::from_secs(60))
        .expect("a serving target is always reported");
    assert!(
        sample.serving,
        "the operator is told the pods are served directly"
    );
    // Requests now reach the pod directly.
    let direct_before = seen.direct.load(Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.direct.load(Ordering::SeqCst) < direct_before + 20 {
        assert!(
            Instant::now() < deadline,
            "no request went straight to the pod"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The stream stops: idle, back to proxy (before any scale to zero).
    running.store(false, Ordering::SeqCst);
    for task in tasks {
        task.await.expect("stream task");
    }
    eventually_mode(&slices, "proxy", 10).await;
    assert_eq!(route(&slices).await.map(|(a, _)| a), Some(proxy_addr));

    // Zero: the pod goes away; requests are held by the activator until it is back.
    slices
        .delete("shop-pods-1", &DeleteParams::default())
        .await
        .expect("delete the pod's slice");
    let deadline = Instant::now() + Duration::from_secs(10);
    while target.ready() > 0 {
        assert!(
            Instant::now() < deadline,
            "the activator still sees the pod"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let running = Arc::new(AtomicBool::new(true));
    let tasks = stream(Arc::clone(&running));
    let deadline = Instant::now() + Duration::from_secs(10);
    while target.held() == 0 {
        assert!(Instant::now() < deadline, "no request held at zero");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        route(&slices).await.map(|(_, m)| m),
        Some("proxy".to_string()),
        "no serve mode without a ready pod"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    create(&slices, pod_slice(ns, pod_addr)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    running.store(false, Ordering::SeqCst);
    for task in tasks {
        task.await.expect("stream task");
    }

    // Every request answered exactly once, by the pod exactly once.
    let sent = next.load(Ordering::SeqCst);
    let answers = seen.answers.lock().expect("lock").clone();
    let served = pod.served.lock().expect("lock").clone();
    assert_eq!(seen.failures.load(Ordering::SeqCst), 0, "failed requests");
    assert_eq!(answers.len(), sent, "every request answered");
    assert!(answers.values().all(|n| *n == 1));
    assert_eq!(served.len(), sent, "every request reached the pod");
    assert!(served.values().all(|n| *n == 1), "no request served twice");
    assert!(seen.proxied.load(Ordering::SeqCst) > 0);
    assert!(seen.direct.load(Ordering::SeqCst) > 0);
    println!(
        "{sent} requests: {} through the activator, {} straight to the pod",
        seen.proxied.load(Ordering::SeqCst),
        seen.direct.load(Ordering::SeqCst)
    );
}
