//! `keda-rs simulate` end to end: the built binary on files written by the test.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A fresh directory under the system's temporary directory.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "keda-rs-simulate-{test}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// Runs `keda-rs simulate ARGS` in `dir`; its standard output, or a panic with both outputs.
fn simulate(dir: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_keda-rs"))
        .current_dir(dir)
        .arg("simulate")
        .args(args)
        .output()
        .expect("the keda-rs binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "simulate {args:?} failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

const ORDERS: &str = "
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: orders, namespace: shop}
spec:
  scaleTargetRef: {name: worker}
  pollingInterval: 30
  cooldownPeriod: 60
  maxReplicaCount: 10
  triggers:
    - type: redis
      name: queue
      metadata: {listName: q, listLength: '10', activationListLength: '5'}
";

const VALUES: &str = "time,trigger,value
2026-01-01T00:00:00Z,queue,4
2026-01-01T00:01:00Z,queue,30
2026-01-01T00:03:00Z,queue,0
2026-01-01T00:15:00Z,queue,0
";

#[test]
fn compare_prints_both_versions_side_by_side_and_charts_both_timelines() {
    let dir = scratch("compare");
    std::fs::write(dir.join("orders.yaml"), ORDERS).expect("write");
    std::fs::write(
        dir.join("orders-slow.yaml"),
        ORDERS.replace("cooldownPeriod: 60", "cooldownPeriod: 300"),
    )
    .expect("write");
    std::fs::write(dir.join("values.csv"), VALUES).expect("write");
    let printed = simulate(
        &dir,
        &[
            "orders.yaml",
            "--compare",
            "orders-slow.yaml",
            "--values",
            "values.csv",
            "--out",
            "out",
        ],
    );
    let hours = printed
        .lines()
        .find(|l| l.contains("replica-hours:"))
        .unwrap_or_else(|| panic!("no replica-hours in {printed}"));
    assert_eq!(
        hours.split_whitespace().skip(1).collect::<Vec<_>>(),
        ["0.15", "0.35"],
        "{printed}"
    );
    let out = dir.join("out");
    let first = std::fs::read_to_string(out.join("shop-orders.csv")).expect("first CSV");
    let second = std::fs::read_to_string(out.join("shop-orders.compare.csv")).expect("second CSV");
    assert_eq!(
        first,
        "time,replicas\n2026-01-01T00:00:00Z,0\n2026-01-01T00:01:00Z,3\n2026-01-01T00:04:00Z,0\n"
    );
    assert_eq!(
        second,
        "time,replicas\n2026-01-01T00:00:00Z,0\n2026-01-01T00:01:00Z,3\n2026-01-01T00:08:00Z,0\n"
    );
    let svg = std::fs::read_to_string(out.join("shop-orders.svg")).expect("the SVG");
    let doc = roxmltree::Document::parse(&svg).expect("well-formed");
    let legend: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .collect();
    for name in [
        "replicas: orders.yaml (left axis)",
        "replicas: orders-slow.yaml (left axis)",
    ] {
        assert!(legend.contains(&name), "{name} not in {legend:?}");
    }
    assert!(out.join("shop-orders.png").exists());
}

#[test]
fn compare_names_an_object_missing_from_the_other_file() {
    let dir = scratch("compare-missing");
    let two = format!(
        "{ORDERS}---{}",
        ORDERS.replace("name: orders", "name: billing")
    );
    std::fs::write(dir.join("a.yaml"), &two).expect("write");
    std::fs::write(
        dir.join("b.yaml"),
        format!(
            "{ORDERS}---{}",
            ORDERS.replace("name: orders", "name: other")
        ),
    )
    .expect("write");
    std::fs::write(dir.join("values.csv"), VALUES).expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_keda-rs"))
        .current_dir(&dir)
        .args([
            "simulate",
            "a.yaml",
            "--compare",
            "b.yaml",
            "--values",
            "values.csv",
        ])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("b.yaml: no ScaledObject shop/billing to compare with"),
        "{stderr}"
    );
}

/// The Prometheus of `scripts/services.sh` (127.0.0.1:9090), or `None` with a printed reason;
/// with `CI=true` a missing Prometheus fails the test.
fn prometheus_or_skip(test: &str) -> Option<&'static str> {
    let addr: std::net::SocketAddr = "127.0.0.1:9090".parse().expect("an address");
    match std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(3)) {
        Ok(_) => Some("http://127.0.0.1:9090"),
        Err(e) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("{test}: Prometheus at {addr} is required in CI: {e}")
        }
        Err(e) => {
            eprintln!("skipping {test}: no Prometheus at {addr} ({e})");
            None
        }
    }
}

fn prometheus_object(query: &str, extra: &str) -> String {
    format!(
        "
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {{name: api, namespace: shop}}
spec:
  scaleTargetRef: {{name: api}}
  pollingInterval: 15
  maxReplicaCount: 10
{extra}  triggers:
    - type: prometheus
      name: load
      metadata:
        serverAddress: http://prometheus.monitoring:9090
        query: '{query}'
        threshold: '10'
        activationThreshold: '5'
"
    )
}

/// The `time,trigger,value` rows simulate wrote for `shop/api`.
fn history(dir: &Path) -> Vec<(String, String, String)> {
    let text =
        std::fs::read_to_string(dir.join("out/shop-api.history.csv")).expect("the history CSV");
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("time,trigger,value"));
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[0].to_string(), f[1].to_string(), f[2].to_string())
        })
        .collect()
}

fn end_now() -> String {
    // A few seconds back, so the last step has been scraped.
    (jiff::Timestamp::now() - jiff::SignedDuration::from_secs(5)).to_string()
}

#[test]
fn prometheus_history_is_the_triggers_own_query_as_a_range_query() {
    let Some(url) = prometheus_or_skip("prometheus_history") else {
        return;
    };
    let dir = scratch("prometheus");
    // Prometheus scrapes itself every second: `up` is 1 at every step of the last minute.
    std::fs::write(
        dir.join("api.yaml"),
        prometheus_object("sum(up{job=\"prometheus\"}) * 20", ""),
    )
    .expect("write");
    let end = end_now();
    let printed = simulate(
        &dir,
        &[
            "api.yaml",
            "--prometheus",
            url,
            "--range",
            "1m",
            "--step",
            "5s",
            "--end",
            &end,
            "--out",
            "out",
        ],
    );
    let rows = history(&dir);
    assert_eq!(
        rows.len(),
        13,
        "one sample per 5 s step, both ends: {rows:?}"
    );
    assert!(
        rows.iter().all(|(_, t, v)| t == "load" && v == "20"),
        "{rows:?}"
    );
    // Active from the first poll; the HPA asks 20 / 10 = 2 at the same instant.
    let changes = std::fs::read_to_string(dir.join("out/shop-api.csv")).expect("the timeline");
    let counts: Vec<&str> = changes
        .lines()
        .skip(1)
        .filter_map(|l| l.split(',').nth(1))
        .collect();
    assert_eq!(counts, ["0", "2"], "{changes}\n{printed}");
}

#[test]
fn a_long_range_is_read_in_requests_prometheus_accepts() {
    let Some(url) = prometheus_or_skip("prometheus_long_range") else {
        return;
    };
    let dir = scratch("prometheus-long");
    // vector(3) answers at every time, also before the server's data began.
    std::fs::write(dir.join("api.yaml"), prometheus_object("vector(3)", "")).expect("write");
    let end = end_now();
    // 2 days of 10 s steps: 17,281 steps, over Prometheus' 11,000 points per query.
    simulate(
        &dir,
        &[
            "api.yaml",
            "--prometheus",
            url,
            "--range",
            "2d",
            "--step",
            "10s",
            "--end",
            &end,
            "--out",
            "out",
        ],
    );
    let rows = history(&dir);
    assert_eq!(rows.len(), 17_281);
    assert!(rows.iter().all(|(_, _, v)| v == "3"));
    let times: Vec<jiff::Timestamp> = rows
        .iter()
        .map(|r| r.0.parse().expect("RFC 3339"))
        .collect();
    assert!(
        times
            .windows(2)
            .all(|w| w[1].duration_since(w[0]).as_secs() == 10),
        "every step once, in order"
    );
}

#[test]
fn several_series_are_failed_reads_that_count_towards_fallback() {
    let Some(url) = prometheus_or_skip("prometheus_several_series") else {
        return;
    };
    let dir = scratch("prometheus-several");
    let query = "label_replace(vector(1), \"a\", \"x\", \"\", \"\") or label_replace(vector(2), \"a\", \"y\", \"\", \"\")";
    std::fs::write(
        dir.join("api.yaml"),
        prometheus_object(query, "  fallback: {failureThreshold: 1, replicas: 4}\n"),
    )
    .expect("write");
    let end = end_now();
    simulate(
        &dir,
        &[
            "api.yaml",
            "--prometheus",
            url,
            "--range",
            "2m",
            "--step",
            "15s",
            "--end",
            &end,
            "--out",
            "out",
            "--replicas",
            "1",
        ],
    );
    let rows = history(&dir);
    assert_eq!(rows.len(), 9);
    assert!(rows.iter().all(|(_, _, v)| v == "error"), "{rows:?}");
    let changes = std::fs::read_to_string(dir.join("out/shop-api.csv")).expect("the timeline");
    assert!(
        changes.trim_end().ends_with(",4"),
        "fallback replicas: {changes}"
    );
}

#[test]
fn a_query_prometheus_refuses_is_named_without_the_servers_words() {
    let Some(url) = prometheus_or_skip("prometheus_refused") else {
        return;
    };
    let dir = scratch("prometheus-refused");
    std::fs::write(dir.join("api.yaml"), prometheus_object("sum(", "")).expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_keda-rs"))
        .current_dir(&dir)
        .args(["simulate", "api.yaml", "--prometheus", url, "--range", "1m"])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("trigger shop/api load"), "{stderr}");
    assert!(stderr.contains("400"), "{stderr}");
    // Prometheus' own message ("parse error: unclosed left parenthesis") stays out.
    assert!(!stderr.contains("parse error"), "{stderr}");
}

#[test]
fn a_trigger_prometheus_cannot_answer_needs_values() {
    let dir = scratch("prometheus-no-history");
    std::fs::write(dir.join("so.yaml"), ORDERS).expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_keda-rs"))
        .current_dir(&dir)
        .args(["simulate", "so.yaml", "--prometheus", "http://127.0.0.1:9"])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("shop/orders: trigger queue (type redis) has no history"),
        "{stderr}"
    );
}

#[test]
fn the_worked_example_of_the_docs_prints_and_draws_what_the_docs_show() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_path_buf();
    let docs = std::fs::read_to_string(root.join("docs/simulate.md")).expect("docs/simulate.md");
    let example = |name: &str| {
        root.join("examples/simulate")
            .join(name)
            .display()
            .to_string()
    };
    let dir = scratch("docs");
    let printed = simulate(
        &dir,
        &[&example("orders.yaml"), "--values", &example("orders.csv")],
    );
    let compared = simulate(
        &dir,
        &[
            &example("orders.yaml"),
            "--compare",
            &example("orders-tuned.yaml"),
            "--values",
            &example("orders.csv"),
            "--out",
            "compare",
        ],
    );
    for line in printed
        .lines()
        .chain(compared.lines().filter(|l| !l.contains("wrote ")))
    {
        assert!(
            docs.lines().any(|d| d == line),
            "docs/simulate.md does not show the line {line:?}; printed:\n{printed}{compared}"
        );
    }
    for (chart, drawn) in [
        (
            "simulate-orders.svg",
            dir.join("keda-rs-simulate/shop-orders.svg"),
        ),
        (
            "simulate-orders-compare.svg",
            dir.join("compare/shop-orders.svg"),
        ),
    ] {
        let committed = std::fs::read_to_string(root.join("docs").join(chart)).expect(chart);
        let drawn = std::fs::read_to_string(&drawn).expect("the chart drawn");
        // The title names the files by name only, so the charts match wherever the repo is.
        assert!(
            committed == drawn,
            "docs/{chart} is not the chart the example draws now: copy {}",
            dir.display()
        );
    }
}
