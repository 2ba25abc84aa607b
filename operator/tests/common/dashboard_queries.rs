//! Running a Grafana dashboard's queries against a real Prometheus: the dashboards' variables
//! and panels, Grafana's substitution of `$variables`, a Prometheus of the test's own scraping
//! given targets. Shared by `operator/tests/dashboard.rs` (memkube) and its twin on a real
//! cluster, `tests/e2e/tests/dashboard.rs`, which include this file by path
//! (`#[path = "common/dashboard_queries.rs"] mod dashboard_queries;`).
//!
//! KEDA's dashboard (`config/grafana/keda-dashboard.json` at KEDA's pinned commit 8b4f083) is
//! not in this repository; its queries over KEDA's series are listed below as facts, written
//! from that file. Its four queries over `kube_horizontalpodautoscaler_*` read
//! kube-state-metrics, not KEDA, and are not listed.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::Command;

/// KEDA's dashboard's template variables, in order: name and query (`templating.list`).
pub const KEDA_VARIABLES: [(&str, &str); 4] = [
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
pub const KEDA_PANELS: [&str; 4] = [
    "sum by(job) (rate(keda_scaler_detail_errors_total{}[5m]))",
    r#"sum by(scaler) (rate(keda_scaler_detail_errors_total{exported_namespace=~"$namespace", scaledObject=~"$scaledObject", scaler=~"$scaler"}[5m]))"#,
    r#"sum by(scaledObject) (rate(keda_scaled_object_errors_total{exported_namespace=~"$namespace", scaledObject=~"$scaledObject"}[5m]))"#,
    r#"sum by(metric) (keda_scaler_metrics_value{exported_namespace=~"$namespace", metric=~"$metric", scaledObject=~"$scaledObject"})"#,
];

/// KEDA's variables as (name, query) pairs.
pub fn keda_variables() -> Vec<(String, String)> {
    KEDA_VARIABLES
        .iter()
        .map(|(n, q)| (n.to_string(), q.to_string()))
        .collect()
}

/// KEDA's panel queries.
pub fn keda_panels() -> Vec<String> {
    KEDA_PANELS.iter().map(|q| q.to_string()).collect()
}

/// One GET on Prometheus's HTTP API (HTTP/1.0, so the answer is never chunked): the JSON.
pub async fn api(prometheus: SocketAddr, path: &str) -> Option<Value> {
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
pub fn encode(s: &str) -> String {
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
pub async fn query(prometheus: SocketAddr, expr: &str) -> Vec<Value> {
    let answer = api(prometheus, &format!("/api/v1/query?query={}", encode(expr)))
        .await
        .unwrap_or_else(|| panic!("no answer from Prometheus to {expr}"));
    assert_eq!(answer["status"], "success", "{expr}: {answer}");
    answer["data"]["result"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Per scrape target: how many good scrapes of the last minute, none when any failed
/// (`min_over_time(up[1m]) * count_over_time(up[1m])`).
pub async fn good_scrapes(prometheus: SocketAddr) -> Vec<f64> {
    api(
        prometheus,
        &format!(
            "/api/v1/query?query={}",
            encode("min_over_time(up[1m]) * count_over_time(up[1m])")
        ),
    )
    .await
    .as_ref()
    .and_then(|a| a["data"]["result"].as_array().cloned())
    .unwrap_or_default()
    .iter()
    .filter_map(|s| s["value"][1].as_str().and_then(|v| v.parse().ok()))
    .collect()
}

/// Grafana's `label_values(<selector>, <label>)`: the values of `label` on the series the
/// selector matches (`/api/v1/series`).
pub async fn label_values(prometheus: SocketAddr, variable_query: &str) -> Vec<String> {
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
pub fn grafana_value(values: &[String]) -> String {
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
pub fn substitute(expr: &str, variables: &[(String, String)]) -> String {
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
pub async fn resolve_variables(
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
pub async fn empty_queries(
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

/// The template variables of type `query` (name, query) and every panel's target expressions
/// of the dashboard at `path`, checking the structure Grafana needs on the way.
pub fn read_dashboard(path: &Path) -> (Vec<(String, String)>, Vec<String>) {
    let text = std::fs::read_to_string(path).expect("the dashboard file");
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

/// `prometheus` on the `PATH`.
pub fn prometheus_on_path() -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("prometheus"))
            .find(|p| p.is_file())
    })
}

/// A loopback port free a moment ago.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Prometheus (`binary`) scraping `targets` (job, address) every second, each with the target
/// label `namespace="<target_namespace>"` a Kubernetes service discovery adds (so the series'
/// own `namespace` label is stored as `exported_namespace`, as KEDA's dashboard expects), on a
/// free loopback port, its data in `dir`; killed when dropped.
pub async fn start_prometheus(
    binary: &Path,
    dir: &Path,
    target_namespace: &str,
    targets: &[(&str, SocketAddr)],
) -> (tokio::process::Child, SocketAddr) {
    let mut config = String::from(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n",
    );
    for (job, address) in targets {
        config.push_str(&format!(
            "  - job_name: {job}\n    static_configs:\n      - targets: [\"{address}\"]\n        labels: {{ namespace: {target_namespace} }}\n"
        ));
    }
    let file = dir.join("prometheus.yml");
    std::fs::write(&file, config).expect("write the Prometheus config");
    let address = SocketAddr::from(([127, 0, 0, 1], free_port()));
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
