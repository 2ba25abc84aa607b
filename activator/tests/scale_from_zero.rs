//! Scale from zero end to end, on the in-memory API server: the activator watches the
//! ScaledObject and EndpointSlices, holds 1,000 requests for a Deployment at 0 replicas, wakes
//! the operator's `http` push scaler through the report stream; a small stand-in for the
//! operator's scale loop writes `/scale` 0 -> 1 when the scaler says active; the test then
//! publishes a ready EndpointSlice pointing at a real backend, and every request gets the
//! backend's answer.
//!
//! Real here: memkube's REST/watch API, the activator's watches, proxy, hold queue and report
//! stream over TCP, the operator's report endpoint, hub and push scaler built through the
//! registry. Stand-in: the scale loop (the operator's loop does not exist yet), reduced to
//! "on activity true, if /scale is 0 write 1", which is what KEDA's executor does for 0 -> 1.

mod common;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use common::{backend, get, within};
use http::Request;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use keda_activator::metrics::Metrics;
use keda_activator::proxy::Proxy;
use keda_activator::report::{self, ReporterConfig};
use keda_activator::server::{self, Readiness};
use keda_activator::targets::Targets;
use keda_activator::watch::{self, WatchConfig};
use keda_api::ScaledObject;
use keda_scalers::scalers::http::hub::{ActivatorHub, serve_reports};
use keda_scalers::scalers::http::protocol::REPORT_PATH;
use keda_scalers::{Clock, Registry, ScalerContext};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

const REQUESTS: usize = 1000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_requests_to_a_target_at_zero_all_get_the_backends_answer() {
    let stop = CancellationToken::new();
    let _stop_on_exit = stop.clone().drop_guard();

    // The cluster: CRDs, a Deployment at 0 replicas, a ScaledObject with an http trigger.
    let kube = memkube::MemKube::new();
    let crd_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/crd");
    kube.load_crds_from_dir(crd_dir).expect("CRDs");
    kube.create_namespace("shop").expect("namespace");
    let client = kube.client();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "shop");
    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "shop", "namespace": "shop"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "shop"}},
            "template": {"metadata": {"labels": {"app": "shop"}},
                         "spec": {"containers": [{"name": "shop", "image": "shop"}]}}
        }
    }))
    .expect("deployment");
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .expect("create deployment");
    let so: ScaledObject = serde_json::from_value(json!({
        "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
        "metadata": {"name": "shop", "namespace": "shop"},
        "spec": {
            "scaleTargetRef": {"name": "shop"},
            "minReplicaCount": 0,
            "triggers": [{"type": "http", "metadata": {
                "hosts": "shop.example.com", "service": "shop", "port": "http",
                "targetConcurrency": "10", "holdTimeout": "30s", "queueDepth": "2000"
            }}]
        }
    }))
    .expect("scaledobject");
    let scaled_objects: Api<ScaledObject> = Api::namespaced(client.clone(), "shop");
    scaled_objects
        .create(&PostParams::default(), &so)
        .await
        .expect("create scaledobject");

    // The operator side: the hub's report endpoint and the http push scaler from the registry.
    let ctx = ScalerContext {
        scalable_name: "shop".into(),
        scalable_namespace: "shop".into(),
        clock: Clock::system(),
        ..ScalerContext::from_trigger(&so.spec.triggers[0], 0)
    };
    let hub = ActivatorHub::shared(&ctx.clients, &ctx.clock).await;
    let built = Registry::builtin()
        .build(ctx.clone())
        .await
        .expect("http scaler");
    let operator = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let operator_addr = operator.local_addr().expect("addr");
    let hub_for_server = (*hub).clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = operator.accept().await {
            let _ = stream.set_nodelay(true);
            let hub = hub_for_server.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request: Request<Incoming>| {
                    let hub = hub.clone();
                    async move { Ok::<_, Infallible>(serve_reports(&hub, request).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });

    // The stand-in scale loop: activity true at 0 replicas -> write /scale 1.
    let (activity_tx, mut activity_rx) = mpsc::channel(16);
    let push = Arc::new(built);
    {
        let push = Arc::clone(&push);
        let stop = stop.clone();
        tokio::spawn(async move {
            if let Some(scaler) = push.push() {
                scaler.run(stop, activity_tx).await;
            }
        });
    }
    let (scaled_tx, mut scaled_rx) = mpsc::channel::<Instant>(1);
    {
        let deployments = deployments.clone();
        tokio::spawn(async move {
            while let Some(active) = activity_rx.recv().await {
                if !active {
                    continue;
                }
                let scale = deployments.get_scale("shop").await.expect("get scale");
                if scale.spec.and_then(|s| s.replicas).unwrap_or(0) == 0 {
                    deployments
                        .patch_scale(
                            "shop",
                            &PatchParams::default(),
                            &Patch::Merge(&json!({"spec": {"replicas": 1}})),
                        )
                        .await
                        .expect("write scale");
                    let _ = scaled_tx.try_send(Instant::now());
                }
            }
        });
    }

    // The activator: watches, proxy, report stream.
    let metrics = Arc::new(Metrics::new());
    let (wake_tx, wake_rx) = mpsc::channel(1024);
    let targets = Targets::new(wake_tx, Arc::clone(&metrics));
    let ready = Readiness::default();
    tokio::spawn(watch::run(
        client.clone(),
        WatchConfig::default(),
        Arc::clone(&targets),
        ready.clone(),
        stop.clone(),
    ));
    tokio::spawn(report::run(
        ReporterConfig {
            tls: None,
            url: format!("http://{operator_addr}{REPORT_PATH}")
                .parse()
                .expect("url"),
            replica: "activator-0".into(),
            idle_after: Duration::from_secs(120),
        },
        Arc::clone(&targets),
        report::wake_receiver(wake_rx),
        stop.clone(),
    ));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let activator = listener.local_addr().expect("addr");
    let proxy = Arc::new(Proxy::new(targets.routes(), Arc::clone(&metrics)));
    tokio::spawn(server::serve_proxy(
        listener,
        proxy,
        stop.clone(),
        Duration::from_secs(5),
    ));
    common::eventually("the watches to sync", || {
        ready.get() && !targets.all().is_empty()
    })
    .await;

    // 1,000 concurrent requests while nothing is ready.
    let (pod, _) = backend("shop").await;
    let c = common::client();
    let first_sent = Instant::now();
    let (answered_tx, mut answered_rx) = mpsc::channel::<Instant>(REQUESTS);
    let requests: Vec<_> = (0..REQUESTS)
        .map(|_| {
            let c = c.clone();
            let answered = answered_tx.clone();
            tokio::spawn(async move {
                let result = get(&c, activator, "shop.example.com", "/").await;
                let _ = answered.try_send(Instant::now());
                result
            })
        })
        .collect();

    // The operator writes /scale 0 -> 1.
    let scaled_at = within(10, "/scale 0 -> 1", scaled_rx.recv())
        .await
        .expect("scaled");
    let scale = deployments.get_scale("shop").await.expect("scale");
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(1));
    let target = targets.all().pop().expect("target").0;
    common::eventually("every request to be held", || target.held() == REQUESTS).await;
    assert!(hub.held(&so_key()) > 0 || target.held() == REQUESTS);

    // The pod turns ready a moment later (a scenario delay, not a synchronization).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "shop");
    let slice: EndpointSlice = serde_json::from_value(json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "shop-1", "namespace": "shop",
                     "labels": {"kubernetes.io/service-name": "shop"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": pod.port(), "protocol": "TCP"}],
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}]
    }))
    .expect("slice");
    slices
        .create(&PostParams::default(), &slice)
        .await
        .expect("create slice");
    let ready_at = Instant::now();
    let first_answer = within(10, "first answer", answered_rx.recv())
        .await
        .expect("answer");

    for request in requests {
        let (status, body) = within(30, "every request", request)
            .await
            .expect("request task");
        assert_eq!((status, body.as_str()), (200, "hello from shop"));
    }
    println!(
        "cold start: first request -> /scale write {:?}; endpoint ready -> first answer {:?}",
        scaled_at - first_sent,
        first_answer - ready_at
    );
}

fn so_key() -> keda_scalers::scalers::http::protocol::TargetKey {
    keda_scalers::scalers::http::protocol::TargetKey::new("shop", "shop", 0)
}
