//! Issue 29, row 7: KEDA's `keda_scaler_empty_upstream_responses_total`. KEDA's prometheus
//! scaler calls `RecordEmptyUpstreamResponse` when a query's result (or value list) is empty,
//! before `ignoreNullValues` makes that 0 or an error (`pkg/scalers/prometheus_scaler.go`
//! `ExecutePromQuery`; KEDA's e2e `tests/sequential/opentelemetry_metrics` checks the series).
//! Here against the real Prometheus `scripts/services.sh` runs, with memkube for the API.

mod common;
mod scenarios;

#[allow(dead_code)]
#[path = "../../scalers/tests/common/mod.rs"]
mod redis_common;

use common::world::NS;
use scenarios::{Operator, World};

const PROMETHEUS: &str = "127.0.0.1:9090";

/// A ScaledObject `name` on Deployment `name` with one `prometheus` trigger named
/// `empty-upstream-trigger` running `query`.
fn prometheus_object(name: &str, query: &str, ignore_null_values: &str) -> String {
    format!(
        r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: {name}
spec:
  scaleTargetRef:
    name: {name}
  pollingInterval: 10
  maxReplicaCount: 2
  triggers:
    - type: prometheus
      name: empty-upstream-trigger
      metadata:
        serverAddress: http://{PROMETHEUS}
        threshold: "1"
        query: '{query}'
        ignoreNullValues: '{ignore_null_values}'
"#
    )
}

/// `keda_scaler_empty_upstream_responses_total` of `name` with `ignoreNullValues`, if any.
fn empty_responses(w: &World, name: &str, ignore_null_values: &str) -> Option<f64> {
    let series = format!(
        r#"keda_scaler_empty_upstream_responses_total{{namespace="{NS}",scaledResource="{name}",triggerName="empty-upstream-trigger",metricName="s0-prometheus",resourceType="ScaledObject",ignoreNullValues="{ignore_null_values}"}} "#
    );
    w.metrics
        .encode()
        .lines()
        .find_map(|l| l.strip_prefix(&series))
        .and_then(|v| v.parse().ok())
}

/// Every `keda_scaler_empty_upstream_responses_total` series of `name`.
fn any_empty_responses(w: &World, name: &str) -> Vec<String> {
    w.metrics
        .encode()
        .lines()
        .filter(|l| {
            l.starts_with("keda_scaler_empty_upstream_responses_total{")
                && l.contains(&format!("scaledResource=\"{name}\""))
        })
        .map(str::to_string)
        .collect()
}

async fn read_for_the_hpa(w: &World, op: &Operator, name: &str) {
    // Its answer (a value or an error) does not matter here, only that the query ran.
    let _ = op
        .loops
        .metric_values(&w.namespace, name, "s0-prometheus")
        .await;
}

/// A query with an empty result counts one empty upstream response per read (the loop's polls
/// and the HPA's reads alike), with KEDA's labels, whether `ignoreNullValues` makes it 0 or an
/// error; a query with a value counts none. The family has KEDA's help text.
#[tokio::test]
async fn an_empty_prometheus_result_counts_an_empty_upstream_response_with_keda_s_labels() {
    let test = "empty upstream responses";
    let Some((_server, w)) = common::world::world(test, keda_scalers::Registry::builtin()).await
    else {
        return;
    };
    let attempt = async { tokio::net::TcpStream::connect(PROMETHEUS).await };
    if redis_common::service_or_skip(test, &format!("Prometheus at {PROMETHEUS}"), attempt)
        .await
        .is_none()
    {
        return;
    }
    let op = w.start_operator();
    // KEDA's e2e object (ignoreNullValues 'false'), the same with 'true', and one that answers.
    let objects = [
        (
            "lost-strict",
            "nonexistent_metric_empty_upstream_response",
            "false",
        ),
        (
            "lost-lenient",
            "nonexistent_metric_empty_upstream_response",
            "true",
        ),
        ("answers", "vector(3)", "true"),
    ];
    let mut created = Vec::new();
    for (name, query, ignore) in objects {
        w.deployment(name, 1).await;
        created.push(w.create(&prometheus_object(name, query, ignore)).await);
    }
    for so in &created {
        w.polls_reach(&op, so, 1).await;
    }
    for (name, _, ignore) in &objects[..2] {
        let after_poll = empty_responses(&w, name, ignore)
            .unwrap_or_else(|| panic!("{name}: no empty upstream series after a poll"));
        assert!(after_poll >= 1.0, "{name}: {after_poll}");
        read_for_the_hpa(&w, &op, name).await;
        let after_read = empty_responses(&w, name, ignore).expect("series");
        // The loop may poll again meanwhile; the HPA's read counts at least one more.
        assert!(
            after_read > after_poll,
            "{name}: {after_poll} -> {after_read}"
        );
    }
    read_for_the_hpa(&w, &op, "answers").await;
    assert_eq!(
        any_empty_responses(&w, "answers"),
        Vec::<String>::new(),
        "a query with a value is no empty response"
    );
    let text = w.metrics.encode();
    assert!(
        text.contains("# TYPE keda_scaler_empty_upstream_responses counter\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "# HELP keda_scaler_empty_upstream_responses Number of times a query returns an empty result.\n"
        ),
        "{text}"
    );
    op.stop().await;
}
