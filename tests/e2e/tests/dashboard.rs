//! Issue 29's Done-when on a real API server: the series KEDA's dashboard reads exist with its
//! labels. The twin of `operator/tests/dashboard.rs` (memkube): the real `keda-operator`
//! binary runs as a local process against the cluster named by KEDA_RS_E2E_KUBECONFIG, watching
//! a namespace of its own with two ScaledObjects on the local Redis (one reading a list of 7
//! items, one whose key is not a list, so its reads fail), and serves `/metrics` on loopback.
//!
//! First the exposition itself: each series KEDA's dashboard reads (`keda_scaler_active`,
//! `keda_scaler_metrics_value`, `keda_scaler_detail_errors_total`,
//! `keda_scaled_object_errors_total`) is there for the right ScaledObject with the labels the
//! dashboard selects and groups by (`namespace`, `scaledObject`, `scaler`, `metric`). Then a
//! real Prometheus (`prometheus` on the PATH; `scripts/services.sh` installs one) scrapes the
//! operator every second with the `namespace` target label a Kubernetes service discovery adds
//! (so the series' own label is stored as `exported_namespace`, as KEDA's dashboard expects),
//! and every template variable and panel query of KEDA's dashboard
//! (`operator/tests/common/dashboard_queries.rs`) and of keda-rs's
//! (`config/grafana/keda-rs-dashboard.json`) must return a series, with the variables
//! substituted as Grafana does. keda-rs's panels over the metric service and the
//! metrics-apiserver (`keda_internal_metricsservice_*`, `keda_metrics_apiserver_*`) are not run
//! here: their series need the HPA's reads through the aggregator, which the memkube twin makes
//! and `metrics_apiserver.rs` shows on a real cluster.
//!
//! The keda.sh CRDs must be installed (the `crds` test installs them); build the binary first
//! (`cargo build -p keda-operator`).

#[path = "../../../operator/tests/scenarios/mod.rs"]
mod scenarios;

#[path = "../../../metrics-apiserver/tests/keda_args_harness.rs"]
mod harness;

#[path = "../../../operator/tests/common/dashboard_queries.rs"]
mod dashboard_queries;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::time::Duration;

use dashboard_queries::{
    empty_queries, good_scrapes, keda_panels, keda_variables, prometheus_on_path, read_dashboard,
    resolve_variables, start_prometheus,
};
use futures::FutureExt;
use harness::{Started, TempDir, free_port};
use keda_e2e::{cluster_client, kubeconfig_path, repo_root, until};
use kube::api::{DeleteParams, GroupVersionKind};
use redis::AsyncCommands;
use scenarios::World;

/// The namespace the scrape target label names, as where KEDA runs.
const KEDA_NAMESPACE: &str = "keda";
/// The items on the good ScaledObject's list: its metric value.
const ITEMS: usize = 7;

/// One series of a Prometheus text exposition: its labels and value.
#[derive(Debug)]
struct Sample {
    labels: BTreeMap<String, String>,
    value: f64,
}

/// The samples of `family` in `exposition` (`family{labels} value` lines).
fn samples(exposition: &str, family: &str) -> Vec<Sample> {
    exposition
        .lines()
        .filter_map(|line| line.strip_prefix(family)?.strip_prefix('{'))
        .filter_map(|rest| {
            let (labels, value) = parse_labels(rest)?;
            Some(Sample {
                labels,
                value: value.split_whitespace().next()?.parse().ok()?,
            })
        })
        .collect()
}

/// `a="x",b="y"} rest` -> the labels and `rest`; `None` when malformed.
fn parse_labels(text: &str) -> Option<(BTreeMap<String, String>, &str)> {
    let mut labels = BTreeMap::new();
    let mut rest = text;
    loop {
        rest = rest.trim_start_matches(',');
        if let Some(after) = rest.strip_prefix('}') {
            return Some((labels, after));
        }
        let (name, after) = rest.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                '"' => break i,
                c => value.push(c),
            }
        };
        labels.insert(name.to_string(), value);
        rest = &after[end + 1..];
    }
}

/// `GET /metrics` of the operator: the body, or `None` while it does not answer.
async fn scrape(metrics: SocketAddr) -> Option<String> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(metrics).await.ok()?;
    let request = format!("GET /metrics HTTP/1.0\r\nHost: {metrics}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.ok()?;
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response.split_once("\r\n\r\n")?;
    (head.split_whitespace().nth(1) == Some("200")).then(|| body.to_string())
}

/// The samples of `family` for ScaledObject `name` in `namespace`.
fn of_object<'a>(samples: &'a [Sample], namespace: &str, name: &str) -> Vec<&'a Sample> {
    samples
        .iter()
        .filter(|s| {
            s.labels.get("namespace").map(String::as_str) == Some(namespace)
                && s.labels.get("scaledObject").map(String::as_str) == Some(name)
        })
        .collect()
}

/// Every label KEDA's dashboard selects or groups this family by is set (non-empty).
fn has_keda_labels(sample: &Sample, labels: &[&str]) -> bool {
    labels
        .iter()
        .all(|l| sample.labels.get(*l).is_some_and(|v| !v.is_empty()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "end-to-end: needs a real cluster named by KEDA_RS_E2E_KUBECONFIG"]
async fn the_series_keda_s_dashboard_reads_exist_with_its_labels_on_a_real_cluster() {
    let client = cluster_client().await.expect("a cluster to test against");
    let gvk = GroupVersionKind::gvk("keda.sh", "v1alpha1", "ScaledObject");
    kube::discovery::pinned_kind(&client, &gvk)
        .await
        .expect("the keda.sh CRDs are installed (run the crds test or apply config/crd)");
    let prometheus_binary = prometheus_on_path()
        .expect("`prometheus` on the PATH: this test runs the dashboards' queries on a real one");
    let name = format!("keda-rs-e2e-dashboard-{}", std::process::id());
    let namespaces = keda_e2e::scenario_namespace(&client, &name).await;
    let mut redis = keda_e2e::local_redis().await;
    let list = format!("keda-rs-e2e-dashboard-{}", std::process::id());
    let not_a_list = format!("keda-rs-e2e-dashboard-broken-{}", std::process::id());
    let world = World::new(client, &name, redis.clone());

    let result = AssertUnwindSafe(scenario(
        &world,
        &mut redis,
        (&list, &not_a_list),
        &prometheus_binary,
    ))
    .catch_unwind()
    .await;

    let _: Result<i64, _> = redis.del(&[&list, &not_a_list]).await;
    let _ = namespaces.delete(&name, &DeleteParams::default()).await;
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

async fn scenario(
    w: &World,
    redis: &mut redis::aio::MultiplexedConnection,
    (list, not_a_list): (&str, &str),
    prometheus_binary: &Path,
) {
    let ns = w.namespace.as_str();
    let _: i64 = redis.del(list).await.expect("DEL");
    let _: i64 = redis.rpush(list, vec!["a"; ITEMS]).await.expect("RPUSH");
    let _: () = redis.set(not_a_list, "x").await.expect("SET");
    for (object, key) in [("worker", list), ("broken", not_a_list)] {
        w.deployment(object, 1).await;
        w.create(&scenarios::redis_object(object, object, key, "", ""))
            .await;
    }

    let dir = TempDir::new("e2e-dashboard");
    let kubeconfig = kubeconfig_path().expect("a kubeconfig");
    let metrics = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let binary = keda_e2e::operator_binary().unwrap_or_else(|e| panic!("{e}"));
    let mut operator = Started::spawn(
        &binary.display().to_string(),
        &[
            format!("--metrics-bind-address={metrics}"),
            "--health-probe-bind-address=0".to_string(),
            "--metrics-service-bind-address=0".to_string(),
            "--explain-bind-address=0".to_string(),
        ],
        &[
            ("HOME", &dir.0),
            ("KUBECONFIG", &kubeconfig),
            ("POD_NAMESPACE", Path::new(ns)),
            ("POD_NAME", Path::new("keda-rs-e2e-dashboard")),
            ("WATCH_NAMESPACE", Path::new(ns)),
        ],
    );
    operator.wait_for("leading");

    // The exposition: polls every 10 s (redis_object), so within a minute both objects have
    // polled and the broken one has failed at least once.
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    let exposition = loop {
        if let Some(text) = scrape(metrics).await {
            let values = samples(&text, "keda_scaler_metrics_value");
            let errors = samples(&text, "keda_scaler_detail_errors_total");
            if !of_object(&values, ns, "worker").is_empty()
                && !of_object(&errors, ns, "broken").is_empty()
            {
                break text;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the operator did not expose both ScaledObjects' series within 90 s"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let metric = format!("s0-redis-{list}");
    let active = samples(&exposition, "keda_scaler_active");
    let worker_active = of_object(&active, ns, "worker");
    assert!(
        worker_active.iter().any(|s| {
            has_keda_labels(s, &["scaler", "metric"])
                && s.labels["metric"] == metric
                && s.value == 1.0
        }),
        "keda_scaler_active of worker (7 items, target 5, activation 5): {worker_active:?}"
    );
    let values = samples(&exposition, "keda_scaler_metrics_value");
    let worker_value = of_object(&values, ns, "worker");
    assert!(
        worker_value.iter().any(|s| {
            has_keda_labels(s, &["scaler", "metric"])
                && s.labels["metric"] == metric
                && s.value == ITEMS as f64
        }),
        "keda_scaler_metrics_value of worker is the list length: {worker_value:?}"
    );
    let errors = samples(&exposition, "keda_scaler_detail_errors_total");
    let broken_errors = of_object(&errors, ns, "broken");
    assert!(
        broken_errors
            .iter()
            .any(|s| has_keda_labels(s, &["scaler", "metric"]) && s.value >= 1.0),
        "keda_scaler_detail_errors_total of broken: {broken_errors:?}"
    );
    assert!(
        of_object(&errors, ns, "worker")
            .iter()
            .all(|s| s.value == 0.0),
        "the good ScaledObject counts no scaler error"
    );
    let object_errors = samples(&exposition, "keda_scaled_object_errors_total");
    let broken_object = of_object(&object_errors, ns, "broken");
    assert!(
        broken_object.iter().any(|s| s.value >= 1.0),
        "keda_scaled_object_errors_total of broken: {broken_object:?}"
    );

    // The dashboards' queries on a real Prometheus.
    let prometheus_dir = dir.0.join("prometheus");
    std::fs::create_dir_all(&prometheus_dir).expect("dir");
    let (_prometheus, prometheus) = start_prometheus(
        prometheus_binary,
        &prometheus_dir,
        KEDA_NAMESPACE,
        &[("keda-operator", metrics)],
    )
    .await;
    // Rates need two samples, and the broken object's error count must grow between them:
    // three good scrapes, then one more poll interval.
    until(
        "three good scrapes of the operator",
        Duration::from_secs(60),
        || async move {
            let counts = good_scrapes(prometheus).await;
            counts.len() == 1 && counts[0] >= 3.0
        },
    )
    .await;
    until(
        "the broken object's error rate in Prometheus",
        Duration::from_secs(60),
        || async move {
            !dashboard_queries::query(
                prometheus,
                &format!(
                    r#"rate(keda_scaler_detail_errors_total{{exported_namespace="{ns}",scaledObject="broken"}}[5m]) > 0"#
                ),
            )
            .await
            .is_empty()
        },
    )
    .await;

    let keda_resolved = resolve_variables(prometheus, &keda_variables()).await;
    assert_eq!(
        keda_resolved[0],
        ("namespace".to_string(), ns.to_string()),
        "KEDA's $namespace is the ScaledObjects' namespace, not the scrape target's"
    );
    let keda = empty_queries(prometheus, &keda_panels(), &keda_resolved).await;

    let (variables, exprs) =
        read_dashboard(&repo_root().join("config/grafana/keda-rs-dashboard.json"));
    let (served, scale_loop): (Vec<String>, Vec<String>) = exprs.into_iter().partition(|e| {
        e.contains("keda_internal_metricsservice_") || e.contains("keda_metrics_apiserver_")
    });
    assert!(
        !served.is_empty() && !scale_loop.is_empty(),
        "the dashboard has both kinds of panels: {served:?} {scale_loop:?}"
    );
    let resolved = resolve_variables(prometheus, &variables).await;
    let ours = empty_queries(prometheus, &scale_loop, &resolved).await;
    assert!(
        keda.is_empty() && ours.is_empty(),
        "queries without a series:\n  KEDA's dashboard: {keda:#?}\n  keda-rs's dashboard: {ours:#?}"
    );
    assert!(operator.is_running(), "the operator exited");
}
