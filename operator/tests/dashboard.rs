//! Issue 29, migration: keda-rs's Grafana dashboard (`config/grafana/keda-rs-dashboard.json`)
//! and KEDA's own dashboard read series that exist.
//!
//! The real operator binary runs against memkube with two ScaledObjects (one reading a Redis
//! list, one whose key is not a list, so its reads fail), the metrics-apiserver runs in process
//! and serves the HPA's reads, and a real Prometheus scrapes both every second, with the
//! `namespace` target label a Kubernetes service discovery adds (so the series' own
//! `namespace` label is stored as `exported_namespace`, as KEDA's dashboard expects). Then every
//! template variable and every panel query of the dashboard runs against Prometheus's HTTP API,
//! with the variables substituted as Grafana substitutes them (all values selected), and each
//! must return at least one series.
//!
//! KEDA's dashboard's queries (`common/dashboard_queries.rs`, written from KEDA's file at its
//! pinned commit) run the same way. `tests/e2e/tests/dashboard.rs` is this test's twin on a
//! real API server.

use std::path::Path;
use std::time::Duration;

use aggregator::{get_as_hpa, start_metrics_apiserver};
use binary::{Cluster, Operator, create_deployment, eventually};
use dashboard_queries::{
    empty_queries, good_scrapes, keda_panels, keda_variables, read_dashboard, resolve_variables,
    start_prometheus,
};
use keda_api::ScaledObject;
use keda_tls::pki::CertificateAuthority;
use kube::api::{Api, PostParams};
use memkube::MemKube;
use tokio_util::sync::CancellationToken;

#[allow(dead_code)]
#[path = "../../scalers/tests/common/mod.rs"]
mod redis_common;

#[path = "common/binary.rs"]
mod binary;

#[path = "common/aggregator.rs"]
mod aggregator;

#[path = "common/dashboard_queries.rs"]
mod dashboard_queries;

/// The dashboard shipped in `config/`.
const DASHBOARD: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../config/grafana/keda-rs-dashboard.json"
);

/// KEDA's namespace, where the certificate Secrets live and the target label points.
const KEDA_NAMESPACE: &str = "keda";
/// The namespace of the ScaledObjects.
const NS: &str = "team";

/// `prometheus` on the `PATH`, or `None` (skip; in CI a failure).
fn prometheus_or_skip(test: &str) -> Option<std::path::PathBuf> {
    let found = dashboard_queries::prometheus_on_path();
    if found.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{test}: prometheus is required in CI (scripts/services.sh installs it)"
        );
        eprintln!("skipping {test}: no prometheus on the PATH");
    }
    found
}

/// A ScaledObject `name` on Deployment `name` reading Redis list `list` (target 5), polled
/// every second.
async fn scaled_object(client: &kube::Client, name: &str, list: &str) {
    let so: ScaledObject = serde_yaml::from_str(&format!(
        r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {{ name: {name}, namespace: {NS} }}
spec:
  scaleTargetRef: {{ name: {name} }}
  pollingInterval: 1
  maxReplicaCount: 5
  triggers:
    - type: redis
      metadata: {{ address: "{}", listName: {list}, listLength: "5" }}
"#,
        redis_common::REDIS_ADDRESS
    ))
    .expect("ScaledObject");
    Api::<ScaledObject>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &so)
        .await
        .expect("create ScaledObject");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_query_and_keda_s_returns_series_from_a_real_prometheus() {
    use redis::AsyncCommands;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let test = "dashboard queries";
    let Some(mut redis) = redis_common::redis_or_skip(test).await else {
        return;
    };
    let Some(prometheus_binary) = prometheus_or_skip(test) else {
        return;
    };
    let server = MemKube::new();
    server.create_namespace(KEDA_NAMESPACE).expect("namespace");
    server.create_namespace(NS).expect("namespace");
    server
        .load_crds_from_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../config/crd"))
        .expect("CRDs load");
    let client = server.client();
    create_deployment(&client, NS, "worker", 1).await;
    create_deployment(&client, NS, "broken", 1).await;
    let cluster = Cluster::serve(server, "dashboard").await;

    let list = redis_common::unique("dashboard");
    let _: i64 = redis.rpush(&list, vec!["a"; 7]).await.expect("RPUSH");
    let not_a_list = redis_common::unique("dashboard-broken");
    let _: () = redis.set(&not_a_list, "x").await.expect("SET");
    scaled_object(&client, "worker", &list).await;
    scaled_object(&client, "broken", &not_a_list).await;

    let operator = Operator::start(
        &cluster,
        "operator",
        &["--metrics-service-bind-address", "127.0.0.1:0"],
        &[("POD_NAMESPACE", KEDA_NAMESPACE)],
    )
    .await;
    let metric_service = operator.address("metric service listening", None).await;

    // The HPA's reads through the metrics-apiserver, so the metric service's series exist.
    let serving = CertificateAuthority::new("test-serving-ca").expect("CA");
    let front_proxy = CertificateAuthority::new("test-front-proxy-ca").expect("CA");
    let proxy_client = front_proxy
        .issue_client("front-proxy-client")
        .expect("front proxy certificate");
    let cancel = CancellationToken::new();
    let apiserver = start_metrics_apiserver(
        &cluster,
        metric_service,
        &serving,
        &front_proxy,
        KEDA_NAMESPACE,
        cancel.clone(),
    );
    let path = format!(
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/{NS}/s0-redis-{list}?labelSelector=scaledobject.keda.sh%2Fname%3Dworker"
    );
    eventually("the HPA's read is served", Duration::from_secs(30), || {
        let path = path.clone();
        let serving = &serving;
        let proxy_client = &proxy_client;
        async move {
            matches!(
                get_as_hpa(apiserver.secure, serving, proxy_client, &path).await,
                Some((200, _))
            )
        }
    })
    .await;

    let prometheus_dir = cluster.dir.path().join("prometheus");
    std::fs::create_dir_all(&prometheus_dir).expect("dir");
    let (_prometheus, prometheus) = start_prometheus(
        &prometheus_binary,
        &prometheus_dir,
        KEDA_NAMESPACE,
        &[
            ("keda-operator", operator.metrics),
            ("keda-metrics-apiserver", apiserver.metrics),
        ],
    )
    .await;
    // Rates need two samples: wait for three scrapes of each target, all up; keep the HPA
    // reading meanwhile.
    eventually(
        "three good scrapes of each target",
        Duration::from_secs(60),
        || {
            let path = path.clone();
            let serving = &serving;
            let proxy_client = &proxy_client;
            async move {
                let _ = get_as_hpa(apiserver.secure, serving, proxy_client, &path).await;
                let counts = good_scrapes(prometheus).await;
                counts.len() == 2 && counts.iter().all(|c| *c >= 3.0)
            }
        },
    )
    .await;

    let (variables, exprs) = read_dashboard(Path::new(DASHBOARD));
    assert_eq!(
        variables
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>(),
        ["namespace", "scaledObject", "scaler", "metric"],
        "the dashboard's variables are KEDA's"
    );
    let resolved = resolve_variables(prometheus, &variables).await;
    let ours = empty_queries(prometheus, &exprs, &resolved).await;

    let keda_resolved = resolve_variables(prometheus, &keda_variables()).await;
    let keda = empty_queries(prometheus, &keda_panels(), &keda_resolved).await;
    assert!(
        ours.is_empty() && keda.is_empty(),
        "queries without a series:\n  keda-rs's dashboard: {ours:#?}\n  KEDA's dashboard: {keda:#?}"
    );
    // The namespace variable found the ScaledObjects' namespace, not the scrape target's.
    assert_eq!(resolved[0], ("namespace".to_string(), NS.to_string()));

    cancel.cancel();
    let _: i64 = redis.del(&[&list, &not_a_list]).await.expect("DEL");
}
