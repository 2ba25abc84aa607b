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
