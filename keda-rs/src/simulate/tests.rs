//! Hand-made histories with the exact timeline each decision feature must produce.

use std::path::Path;

use jiff::{SignedDuration, Timestamp};

use super::*;
use crate::hpa::HpaSettings;

const START: &str = "2026-01-01T00:00:00Z";

fn at(secs: i64) -> Timestamp {
    START.parse::<Timestamp>().expect("start") + SignedDuration::from_secs(secs)
}

fn object(yaml: &str) -> SimObject {
    let mut objects = parse_objects(Path::new("so.yaml"), yaml).expect("valid YAML");
    assert_eq!(objects.len(), 1);
    objects.remove(0)
}

fn csv(rows: &[(i64, f64)]) -> String {
    let mut text = String::from("time,trigger,value\n");
    for (secs, value) in rows {
        text.push_str(&format!("{},0,{value}\n", at(*secs)));
    }
    text
}

fn run(object: &SimObject, rows: &[(i64, f64)], replicas: i32) -> Timeline {
    let points = parse_csv(Path::new("v.csv"), &csv(rows), object).expect("valid CSV");
    simulate(object, &points, &HpaSettings::default(), replicas)
}

const ACTIVATION_AND_COOLDOWN: &str = "
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: orders}
spec:
  scaleTargetRef: {name: worker}
  pollingInterval: 30
  cooldownPeriod: 60
  maxReplicaCount: 10
  triggers:
    - type: redis
      metadata: {listName: q, listLength: '10', activationListLength: '5'}
";

#[test]
fn activation_threshold_then_cooldown_to_zero() {
    let o = object(ACTIVATION_AND_COOLDOWN);
    assert_eq!(o.namespace, "default");
    // 4 is below the activation threshold 5: nothing happens until 30 arrives at 60 s. The
    // poll at 60 s activates (0 -> 1), the HPA sync of the same instant asks 30/10 = 3. The
    // last active poll is at 150 s; the cooldown (strictly after 150 + 60) ends at the poll of
    // 240 s, which scales to zero.
    let t = run(&o, &[(0, 4.0), (60, 30.0), (180, 0.0), (600, 0.0)], 0);
    assert_eq!(t.changes, vec![(at(0), 0), (at(60), 3), (at(240), 0)]);
    assert_eq!(t.summary.scale_ups, 1);
    assert_eq!(t.summary.scale_downs, 1);
    assert_eq!(t.summary.activation_delays, vec![0]);
    assert_eq!(t.summary.seconds_at_zero, 60 + 360);
    assert!((t.summary.replica_hours - 3.0 * 180.0 / 3600.0).abs() < 1e-9);
}

#[test]
fn idle_replicas_are_the_floor_when_inactive() {
    let yaml = ACTIVATION_AND_COOLDOWN.replace(
        "cooldownPeriod: 60",
        "cooldownPeriod: 60\n  idleReplicaCount: 0\n  minReplicaCount: 2",
    );
    let o = object(&yaml);
    // Activation goes to max(min, 1) = 2, the HPA then to 3; after the cooldown back to idle 0.
    let t = run(&o, &[(0, 0.0), (60, 30.0), (180, 0.0), (600, 0.0)], 0);
    assert_eq!(t.changes, vec![(at(0), 0), (at(60), 3), (at(240), 0)]);
}

const BEHAVIOR: &str = "
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: api, namespace: shop}
spec:
  scaleTargetRef: {name: api}
  minReplicaCount: 1
  maxReplicaCount: 10
  advanced:
    horizontalPodAutoscalerConfig:
      behavior:
        scaleDown:
          stabilizationWindowSeconds: 0
          policies: [{type: Pods, value: 1, periodSeconds: 60}]
  triggers:
    - type: prometheus
      metadata: {serverAddress: 'http://p', query: q, threshold: '10'}
";

#[test]
fn scale_down_policy_removes_one_pod_per_period() {
    let o = object(BEHAVIOR);
    // Up: 50/10 = 5 at the sync of 30 s (default scale-up allows +4). Down: no window, one pod
    // per 60 s from 120 s on.
    let t = run(&o, &[(0, 10.0), (30, 50.0), (120, 0.0), (400, 0.0)], 1);
    assert_eq!(
        t.changes,
        vec![
            (at(0), 1),
            (at(30), 5),
            (at(120), 4),
            (at(180), 3),
            (at(240), 2),
            (at(300), 1)
        ]
    );
    assert_eq!(t.summary.scale_downs, 4);
}

#[test]
fn legacy_downscale_window_holds_the_peak_for_five_minutes() {
    let yaml = BEHAVIOR.replace(
        "  advanced:\n    horizontalPodAutoscalerConfig:\n      behavior:\n        scaleDown:\n          stabilizationWindowSeconds: 0\n          policies: [{type: Pods, value: 1, periodSeconds: 60}]\n",
        "",
    );
    let o = object(&yaml);
    assert!(o.behavior.is_none());
    // Legacy scale-up is limited to max(2 x 1, 4) = 4 at 30 s, then 5 at 45 s. The last
    // recommendation of 5 (the sync of 105 s) is held by the 300 s window including its edge:
    // Kubernetes' legacy `stabilizeRecommendation` drops only samples `Before(now - window)`,
    // so at 405 s it still counts and the drop comes with the sync of 420 s.
    let t = run(&o, &[(0, 10.0), (30, 50.0), (120, 0.0), (600, 0.0)], 1);
    assert_eq!(
        t.changes,
        vec![(at(0), 1), (at(30), 4), (at(45), 5), (at(420), 1)]
    );
}

#[test]
fn a_bad_csv_line_is_named() {
    let o = object(ACTIVATION_AND_COOLDOWN);
    let text = format!("time,trigger,value\n{},0,1\nyesterday,0,2\n", at(0));
    let err = parse_csv(Path::new("v.csv"), &text, &o).expect_err("bad time");
    assert!(err.to_string().starts_with("v.csv:3: time:"), "{err}");
    let err = parse_csv(
        Path::new("v.csv"),
        "time,trigger,value\n2026-01-01T00:00:00Z,queue,1\n",
        &o,
    )
    .expect_err("unknown trigger");
    assert!(err.to_string().contains("v.csv:2: trigger:"), "{err}");
}

#[test]
fn a_trigger_without_a_target_is_named() {
    let yaml = ACTIVATION_AND_COOLDOWN.replace("listLength: '10', ", "");
    let err = parse_objects(Path::new("so.yaml"), &yaml).expect_err("no target");
    let text = err.to_string();
    assert!(
        text.contains("so.yaml: document 1 (ScaledObject default/orders): spec.triggers[0]"),
        "{text}"
    );
}

#[test]
fn a_history_longer_than_two_years_is_refused_naming_the_line() {
    let o = object(ACTIVATION_AND_COOLDOWN);
    let text = "time,trigger,value\n2025-01-01T00:00:00Z,0,1\n2205-01-01T00:00:00Z,0,2\n";
    let err = parse_csv(Path::new("v.csv"), text, &o).expect_err("a mistyped year");
    let text = err.to_string();
    assert!(text.starts_with("v.csv:3: time:"), "{text}");
    assert!(text.contains("line 2"), "{text}");
}

/// A CSV of `(seconds, trigger, value)` rows; `value` is written as is (`error` is a failed read).
fn csv_rows(rows: &[(i64, &str, &str)]) -> String {
    let mut text = String::from("time,trigger,value\n");
    for (secs, trigger, value) in rows {
        text.push_str(&format!("{},{trigger},{value}\n", at(*secs)));
    }
    text
}

fn run_rows(object: &SimObject, rows: &[(i64, &str, &str)], replicas: i32) -> Timeline {
    let points = parse_csv(Path::new("v.csv"), &csv_rows(rows), object).expect("valid CSV");
    simulate(object, &points, &HpaSettings::default(), replicas)
}

const FALLBACK: &str = "
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: api, namespace: shop}
spec:
  scaleTargetRef: {name: api}
  pollingInterval: 30
  minReplicaCount: 1
  maxReplicaCount: 10
  fallback: {failureThreshold: 2, replicas: 6}
  triggers:
    - type: prometheus
      metadata: {serverAddress: 'http://p', query: q, threshold: '10'}
";

#[test]
fn fallback_replaces_a_failing_metric_after_the_threshold() {
    let o = object(FALLBACK);
    assert_eq!(o.fallback.map(|f| f.replicas), Some(6));
    // Reads fail from 30 s. Every read counts (the poll and the HPA's read at 30 s: 2 failures,
    // not above the threshold 2); the HPA's read at 45 s is the third: fallback serves
    // 6 x 10, the legacy scale-up limit max(2 x 2, 4) allows 4, then 6 at 60 s. Values return
    // at 300 s (2 replicas' worth); the legacy 300 s window holds the last 6 (sync of 285 s)
    // until the sync of 600 s.
    let mut rows = vec![(0, "0", "20")];
    rows.extend((30..300).step_by(15).map(|s| (s, "0", "error")));
    rows.extend([(300, "0", "20"), (700, "0", "20")]);
    let t = run_rows(&o, &rows, 2);
    assert_eq!(
        t.changes,
        vec![(at(0), 2), (at(45), 4), (at(60), 6), (at(600), 2)]
    );
}

#[test]
fn without_fallback_a_failing_metric_holds_the_replicas() {
    let o = object(&FALLBACK.replace("  fallback: {failureThreshold: 2, replicas: 6}\n", ""));
    assert!(o.fallback.is_none());
    let mut rows = vec![(0, "0", "20")];
    rows.extend((30..300).step_by(15).map(|s| (s, "0", "error")));
    rows.extend([(300, "0", "20"), (700, "0", "20")]);
    let t = run_rows(&o, &rows, 2);
    assert_eq!(t.changes, vec![(at(0), 2)]);
}

const FORMULA: &str = "
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: pair}
spec:
  scaleTargetRef: {name: worker}
  pollingInterval: 30
  cooldownPeriod: 60
  maxReplicaCount: 10
  advanced:
    scalingModifiers: {formula: 'a + b', target: '10', activationTarget: '5'}
  triggers:
    - {type: redis, name: a, metadata: {listName: a, listLength: '100'}}
    - {type: redis, name: b, metadata: {listName: b, listLength: '100'}}
";

#[test]
fn scaling_modifiers_decide_activity_and_replicas() {
    let o = object(FORMULA);
    // 2 + 2 = 4 is not above activationTarget 5, though each trigger is above its own
    // activation (0): nothing. 20 + 15 = 35 at 60 s: the poll activates, the HPA of the same
    // instant asks ceil(35 / 10) = 4 (the triggers' own targets of 100 would ask 1). 1 + 1 at
    // 180 s: the last active poll was at 150 s, the cooldown ends at the poll of 240 s.
    let rows = [
        (0, "a", "2"),
        (0, "b", "2"),
        (60, "a", "20"),
        (60, "b", "15"),
        (180, "a", "1"),
        (180, "b", "1"),
        (600, "a", "1"),
    ];
    let t = run_rows(&o, &rows, 0);
    assert_eq!(t.changes, vec![(at(0), 0), (at(60), 4), (at(240), 0)]);
}

#[test]
fn a_formula_naming_an_unknown_trigger_is_refused() {
    let err = parse_objects(Path::new("so.yaml"), &FORMULA.replace("'a + b'", "'a + c'"))
        .expect_err("unknown trigger c");
    assert!(
        err.to_string().contains("scalingModifiers") || err.to_string().contains("formula"),
        "{err}"
    );
}

#[test]
fn a_paused_object_is_held_at_its_paused_replicas() {
    let yaml = FALLBACK.replace(
        "metadata: {name: api, namespace: shop}",
        "metadata:\n  name: api\n  namespace: shop\n  annotations: {autoscaling.keda.sh/paused-replicas: '3'}",
    );
    let o = object(&yaml);
    // 90 would ask for 9; the first poll sets the paused count and nothing moves it after.
    let t = run_rows(&o, &[(0, "0", "90"), (600, "0", "90")], 1);
    assert_eq!(t.changes, vec![(at(0), 1), (at(0), 3)]);
    let err = parse_objects(
        Path::new("so.yaml"),
        &yaml.replace("paused-replicas: '3'", "paused-replicas: 'three'"),
    )
    .expect_err("not a count");
    assert!(err.to_string().contains("paused-replicas"), "{err}");
}

#[test]
fn compare_replays_both_versions_over_one_history_side_by_side() {
    let before = object(ACTIVATION_AND_COOLDOWN);
    let after =
        object(&ACTIVATION_AND_COOLDOWN.replace("cooldownPeriod: 60", "cooldownPeriod: 300"));
    let pairs =
        pair_versions(vec![before], vec![after], Path::new("after.yaml")).expect("one each");
    let (a, b) = &pairs[0];
    let rows = [(0, 4.0), (60, 30.0), (180, 0.0), (900, 0.0)];
    let (ta, tb) = (run(a, &rows, 0), run(b, &rows, 0));
    // The same activation; the longer cooldown holds the replicas until the poll of 480 s
    // (the last active poll at 150 s + 300 s, strictly after).
    assert_eq!(ta.changes, vec![(at(0), 0), (at(60), 3), (at(240), 0)]);
    assert_eq!(tb.changes, vec![(at(0), 0), (at(60), 3), (at(480), 0)]);
    let text = render_compare(
        Version {
            name: "before.yaml",
            object: a,
            timeline: &ta,
        },
        Version {
            name: "after.yaml",
            object: b,
            timeline: &tb,
        },
    );
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[1].contains("before.yaml") && lines[1].contains("after.yaml"),
        "{text}"
    );
    let hours = lines
        .iter()
        .find(|l| l.contains("replica-hours:"))
        .expect("replica-hours");
    // 3 replicas for 180 s and for 420 s.
    let figures: Vec<&str> = hours.split_whitespace().skip(1).collect();
    assert_eq!(figures, ["0.15", "0.35"], "{text}");
    // Columns line up: the second column starts at the same place on every line.
    let column = lines[1].find("after.yaml").expect("header");
    assert_eq!(hours.find("0.35"), Some(column), "{text}");
}

#[test]
fn versions_pair_by_namespace_and_name_and_a_missing_one_is_named() {
    let a = object(ACTIVATION_AND_COOLDOWN);
    let b = object(BEHAVIOR);
    let pairs = pair_versions(
        vec![a.clone(), b.clone()],
        vec![b.clone(), a.clone()],
        Path::new("o.yaml"),
    )
    .expect("both present");
    assert_eq!(
        pairs
            .iter()
            .map(|(x, y)| (x.name.as_str(), y.name.as_str()))
            .collect::<Vec<_>>(),
        [("orders", "orders"), ("api", "api")]
    );
    let err = pair_versions(vec![a.clone(), b], vec![a.clone(), a], Path::new("o.yaml"))
        .expect_err("no shop/api in o.yaml");
    assert_eq!(
        err.to_string(),
        "o.yaml: no ScaledObject shop/api to compare with"
    );
}

#[test]
fn the_fast_time_reader_agrees_with_jiff() {
    for text in [
        "1970-01-01T00:00:00Z",
        "2024-02-29T23:59:59Z",
        "2025-03-01T00:00:00Z",
        "2000-12-31T12:34:56Z",
        "1969-07-20T20:17:40Z",
        "2100-02-28T01:02:03Z",
    ] {
        let csv = format!("time,trigger,value\n{text},0,1\n");
        let o = object(ACTIVATION_AND_COOLDOWN);
        let points = parse_csv(Path::new("v.csv"), &csv, &o).expect("valid");
        assert_eq!(
            points[0].time,
            text.parse::<Timestamp>().expect("jiff"),
            "{text}"
        );
    }
    // Not a calendar date: refused as before, naming the line.
    let o = object(ACTIVATION_AND_COOLDOWN);
    let err = parse_csv(
        Path::new("v.csv"),
        "time,trigger,value\n2025-02-29T00:00:00Z,0,1\n",
        &o,
    )
    .expect_err("no 29 February in 2025");
    assert!(err.to_string().starts_with("v.csv:2: time:"), "{err}");
}
