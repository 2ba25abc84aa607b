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
//! KEDA's dashboard (`config/grafana/keda-dashboard.json` at KEDA's pinned commit 8b4f083) is
//! not in this repository; its queries over KEDA's series are listed below as facts, written
//! from that file, and run the same way. Its four queries over
//! `kube_horizontalpodautoscaler_*` read kube-state-metrics, not KEDA, and are not run.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use aggregator::{get_as_hpa, start_metrics_apiserver};
use binary::{Cluster, Operator, create_deployment, eventually};
use keda_api::ScaledObject;
use keda_tls::pki::CertificateAuthority;
use kube::api::{Api, PostParams};
use memkube::MemKube;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

#[allow(dead_code)]
#[path = "../../scalers/tests/common/mod.rs"]
mod redis_common;

#[path = "common/binary.rs"]
mod binary;

#[path = "common/aggregator.rs"]
mod aggregator;

/// The dashboard shipped in `config/`.
const DASHBOARD: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../config/grafana/keda-rs-dashboard.json"
);

/// KEDA's namespace, where the certificate Secrets live and the target label points.
const KEDA_NAMESPACE: &str = "keda";
/// The namespace of the ScaledObjects.
const NS: &str = "team";

/// KEDA's dashboard's template variables, in order: name and query (`templating.list`).
const KEDA_VARIABLES: [(&str, &str); 4] = [
    (
        "namespace",
        "label_values(keda_scaler_active,exported_namespace)",
    ),
    (
        "scaledObject",
        r#"label_values(keda_scaler_active{exported_namespace="$namespace"},scaledObject)"#,
    ),
    (
        "scaler",
        r#"label_values(keda_scaler_active{exported_namespace="$namespace"},scaler)"#,
    ),
    (
        "metric",
        r#"label_values(keda_scaler_active{exported_namespace="$namespace"},metric)"#,
    ),
];

/// KEDA's dashboard's panel queries over KEDA's series ("Scaler Total Errors", "Scaler
/// Errors", "Scaled Object Errors", "Scaler Metric Value").
const KEDA_PANELS: [&str; 4] = [
    "sum by(job) (rate(keda_scaler_detail_errors_total{}[5m]))",
    r#"sum by(scaler) (rate(keda_scaler_detail_errors_total{exported_namespace=~"$namespace", scaledObject=~"$scaledObject", scaler=~"$scaler"}[5m]))"#,
    r#"sum by(scaledObject) (rate(keda_scaled_object_errors_total{exported_namespace=~"$namespace", scaledObject=~"$scaledObject"}[5m]))"#,
    r#"sum by(metric) (keda_scaler_metrics_value{exported_namespace=~"$namespace", metric=~"$metric", scaledObject=~"$scaledObject"})"#,
];

/// `prometheus` on the `PATH`, or `None` (skip; in CI a failure).
fn prometheus_or_skip(test: &str) -> Option<std::path::PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("prometheus"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{test}: prometheus is required in CI (scripts/services.sh installs it)"
        );
        eprintln!("skipping {test}: no prometheus on the PATH");
    }
    found
}

/// One GET on Prometheus's HTTP API (HTTP/1.0, so the answer is never chunked): the JSON.
async fn api(prometheus: SocketAddr, path: &str) -> Option<Value> {
    let mut stream = TcpStream::connect(prometheus).await.ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: {prometheus}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.ok()?;
    let response = String::from_utf8_lossy(&response);
    let (_, body) = response.split_once("\r\n\r\n")?;
    serde_json::from_str(body).ok()
}

/// Percent-encoding of a query parameter.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The series an instant query returns (`data.result`); panics on a query Prometheus refuses.
async fn query(prometheus: SocketAddr, expr: &str) -> Vec<Value> {
    let answer = api(prometheus, &format!("/api/v1/query?query={}", encode(expr)))
        .await
        .unwrap_or_else(|| panic!("no answer from Prometheus to {expr}"));
    assert_eq!(answer["status"], "success", "{expr}: {answer}");
    answer["data"]["result"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Grafana's `label_values(<selector>, <label>)`: the values of `label` on the series the
/// selector matches (`/api/v1/series`).
async fn label_values(prometheus: SocketAddr, variable_query: &str) -> Vec<String> {
    let inner = variable_query
        .strip_prefix("label_values(")
        .and_then(|q| q.strip_suffix(')'))
        .unwrap_or_else(|| panic!("not a label_values query: {variable_query}"));
    let (selector, label) = inner
        .rsplit_once(',')
        .unwrap_or_else(|| panic!("no label in {variable_query}"));
    let answer = api(
        prometheus,
        &format!("/api/v1/series?match[]={}", encode(selector.trim())),
    )
    .await
    .unwrap_or_else(|| panic!("no answer from Prometheus to {selector}"));
    assert_eq!(answer["status"], "success", "{selector}: {answer}");
    let mut values: Vec<String> = answer["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|series| series[label.trim()].as_str().map(str::to_string))
        .collect();
    values.sort();
    values.dedup();
    values
}

/// A variable's value as Grafana writes it into a query with every value selected: the value
/// itself, or `(a|b)` (regex-escaped, for `=~`).
fn grafana_value(values: &[String]) -> String {
    let escaped: Vec<String> = values
        .iter()
        .map(|v| {
            v.chars()
                .flat_map(|c| {
                    if r"\.+*?()|[]{}^$".contains(c) {
                        vec!['\\', c]
                    } else {
                        vec![c]
                    }
                })
                .collect()
        })
        .collect();
    match escaped.as_slice() {
        [one] => one.clone(),
        many => format!("({})", many.join("|")),
    }
}

/// `expr` with every `$variable` replaced, longest names first (`$scaledObject` before a
/// hypothetical `$scaled`).
fn substitute(expr: &str, variables: &[(String, String)]) -> String {
    let mut sorted: Vec<&(String, String)> = variables.iter().collect();
    sorted.sort_by_key(|(name, _)| std::cmp::Reverse(name.len()));
    sorted
        .into_iter()
        .fold(expr.to_string(), |e, (name, value)| {
            e.replace(&format!("${name}"), value)
        })
}

/// Resolves the template variables in order (each may use the ones before it); every one must
/// have at least one value.
async fn resolve_variables(
    prometheus: SocketAddr,
    variables: &[(String, String)],
) -> Vec<(String, String)> {
    let mut resolved = Vec::new();
    for (name, variable_query) in variables {
        let values = label_values(prometheus, &substitute(variable_query, &resolved)).await;
        assert!(
            !values.is_empty(),
            "template variable ${name} ({variable_query}) has no values"
        );
        resolved.push((name.clone(), grafana_value(&values)));
    }
    resolved
}

/// Runs every expression with the variables substituted; returns the ones without a series.
async fn empty_queries(
    prometheus: SocketAddr,
    exprs: &[String],
    variables: &[(String, String)],
) -> Vec<String> {
    let mut empty = Vec::new();
    for expr in exprs {
        let concrete = substitute(expr, variables);
        if query(prometheus, &concrete).await.is_empty() {
            empty.push(concrete);
        }
    }
    empty
}

/// The dashboard's template variables of type `query` (name, query) and every panel's
/// target expressions, checking the structure Grafana needs on the way.
fn read_dashboard() -> (Vec<(String, String)>, Vec<String>) {
    let text = std::fs::read_to_string(DASHBOARD).expect("the dashboard file");
    let dashboard: Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let variables: Vec<(String, String)> = dashboard["templating"]["list"]
        .as_array()
        .expect("templating.list")
        .iter()
        .filter(|v| v["type"] == "query")
        .map(|v| {
            let query = v["query"]["query"].as_str().expect("a variable query");
            assert_eq!(
                v["definition"].as_str(),
                Some(query),
                "variable {} shows another query than it runs",
                v["name"]
            );
            (
                v["name"].as_str().expect("name").to_string(),
                query.to_string(),
            )
        })
        .collect();
    let mut exprs = Vec::new();
    let mut ids = std::collections::HashSet::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        let title = panel["title"].as_str().unwrap_or_default();
        assert!(
            ids.insert(panel["id"].clone()),
            "duplicate panel id in {title}"
        );
        assert!(panel["gridPos"].is_object(), "{title} has no gridPos");
        if panel["type"] == "row" {
            continue;
        }
        assert_eq!(
            panel["datasource"]["uid"], "${datasource}",
            "{title} does not use the data source variable"
        );
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title} has no query");
        for target in targets {
            exprs.push(target["expr"].as_str().expect("expr").to_string());
        }
    }
    (variables, exprs)
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

/// Prometheus scraping `targets` (job, address) every second, each with the target label
/// `namespace="keda"`, on a free loopback port; killed when dropped.
async fn start_prometheus(
    binary: &Path,
    dir: &Path,
    targets: &[(&str, SocketAddr)],
) -> (tokio::process::Child, SocketAddr) {
    let mut config = String::from(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n",
    );
    for (job, address) in targets {
        config.push_str(&format!(
            "  - job_name: {job}\n    static_configs:\n      - targets: [\"{address}\"]\n        labels: {{ namespace: {KEDA_NAMESPACE} }}\n"
        ));
    }
    let file = dir.join("prometheus.yml");
    std::fs::write(&file, config).expect("write the Prometheus config");
    let address = SocketAddr::from(([127, 0, 0, 1], aggregator::free_port()));
    let child = Command::new(binary)
        .arg(format!("--config.file={}", file.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("tsdb").display()
        ))
        .arg(format!("--web.listen-address={address}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("prometheus starts");
    (child, address)
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
                let scrapes = api(
                    prometheus,
                    &format!(
                        "/api/v1/query?query={}",
                        encode("min_over_time(up[1m]) * count_over_time(up[1m])")
                    ),
                )
                .await;
                let counts: Vec<f64> = scrapes
                    .as_ref()
                    .and_then(|a| a["data"]["result"].as_array().cloned())
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|s| s["value"][1].as_str().and_then(|v| v.parse().ok()))
                    .collect();
                counts.len() == 2 && counts.iter().all(|c| *c >= 3.0)
            }
        },
    )
    .await;

    let (variables, exprs) = read_dashboard();
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

    let keda_variables: Vec<(String, String)> = KEDA_VARIABLES
        .iter()
        .map(|(n, q)| (n.to_string(), q.to_string()))
        .collect();
    let keda_resolved = resolve_variables(prometheus, &keda_variables).await;
    let keda_panels: Vec<String> = KEDA_PANELS.iter().map(|q| q.to_string()).collect();
    let keda = empty_queries(prometheus, &keda_panels, &keda_resolved).await;
    assert!(
        ours.is_empty() && keda.is_empty(),
        "queries without a series:\n  keda-rs's dashboard: {ours:#?}\n  KEDA's dashboard: {keda:#?}"
    );
    // The namespace variable found the ScaledObjects' namespace, not the scrape target's.
    assert_eq!(resolved[0], ("namespace".to_string(), NS.to_string()));

    cancel.cancel();
    let _: i64 = redis.del(&[&list, &not_a_list]).await.expect("DEL");
}
