//! ScaledObject scenarios with the pull triggers of issue 18 against memkube: what KEDA's own
//! e2e tests check with `metrics-api` (paused-replicas, idleReplicaCount below
//! minReplicaCount, fallback when the metrics API goes down, a scalingModifiers formula), and
//! bad input through the operator for `prometheus`, `metrics-api`, `postgresql`, `mysql` and
//! `nats-jetstream`: Ready=False (or a fallback) with a message naming the trigger and the
//! parameter, and recovery once the input is fixed (no panic, no stuck loop).
//!
//! The metrics API is a real HTTP server on loopback whose answer the test sets
//! (`common/metrics_api.rs`); Prometheus, PostgreSQL, MariaDB and NATS are the ones
//! `scripts/services.sh` runs.

#[path = "../common/mod.rs"]
mod common;
#[path = "../scenarios/mod.rs"]
mod scenarios;

#[allow(dead_code)]
#[path = "../../../scalers/tests/common/mod.rs"]
mod redis_common;

use common::metrics_api::MetricsApi;
use common::world::{becomes_ready, not_ready};
use kube::api::{Patch, PatchParams};
use memkube::MemKube;
use scenarios::{World, condition, eventually, hpa_exists};

/// The metric of a `metrics-api` trigger at index 0 reading `queue.depth`.
const METRIC: &str = "s0-metric-api-queue-depth";

async fn world(test: &str) -> Option<(MemKube, World)> {
    common::world::world(test, keda_scalers::Registry::builtin()).await
}

/// A ScaledObject `name` on Deployment `name` with one `metrics-api` trigger on `url`
/// (`queue.depth`, target 5, activation 2), polled every 10 s, cooldown 60 s.
fn metrics_api_object(name: &str, url: &str, spec: &str, annotations: &str) -> String {
    format!(
        r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: {name}
  annotations: {{{annotations}}}
spec:
  scaleTargetRef:
    name: {name}
  pollingInterval: 10
  cooldownPeriod: 60
{spec}
  triggers:
    - type: metrics-api
      metadata:
        url: {url}
        valueLocation: queue.depth
        targetValue: "5"
        activationTargetValue: "2"
"#
    )
}

/// The value the HPA would be served for `metric`.
async fn served(w: &World, op: &scenarios::Operator, name: &str, metric: &str) -> Option<f64> {
    op.loops
        .metric_values(&w.namespace, name, metric)
        .await
        .ok()
        .map(|v| v[0].value)
}

async fn wait_replicas(w: &World, name: &str, expected: i32) {
    eventually(&format!("{name} at {expected} replicas"), || async {
        (w.replicas(name).await == expected).then_some(())
    })
    .await;
}

/// The value of the series `name{labels}` in the exposition `text`.
fn sample(text: &str, name: &str, labels: &str) -> Option<f64> {
    let prefix = format!("{name}{{{labels}}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.parse().ok())
}

// ---------------------------------------------------------------------------------------------
// Bad input through the operator.

/// A ScaledObject `name` (on Deployment `bad`) with one trigger given as YAML lines at the
/// trigger's indentation.
fn object(name: &str, trigger: &str) -> String {
    format!(
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata:\n  name: {name}\nspec:\n  \
         scaleTargetRef:\n    name: bad\n  pollingInterval: 10\n  triggers:\n    - {trigger}\n"
    )
}

/// Creates ScaledObject `name` with `trigger` ([`object`]), waits for `Ready=False` with
/// `reason` and a message naming each of `expected`, and returns the message.
async fn refused(w: &World, name: &str, trigger: &str, reason: &str, expected: &[&str]) -> String {
    w.create(&object(name, trigger)).await;
    let (actual, message) = not_ready(w, name).await;
    assert_eq!(actual, reason, "{message}");
    assert_names(&message, expected);
    message
}

/// Sets trigger 0's metadata `(name, key, value)` of each object, then waits for each to be
/// Ready.
async fn fixed(w: &World, changes: &[(&str, &str, &str)]) {
    for (name, key, value) in changes {
        set_metadata(w, name, key, value).await;
    }
    for (name, _, _) in changes {
        becomes_ready(w, name).await;
    }
}

/// Replaces trigger 0's metadata entry `key` with `value`.
async fn set_metadata(w: &World, name: &str, key: &str, value: &str) {
    let mut so = w.get(name).await;
    so.spec.triggers[0]
        .metadata
        .insert(key.to_string(), value.to_string());
    let patch = serde_json::json!({ "spec": { "triggers": so.spec.triggers } });
    w.scaled_objects()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch triggers");
}

/// A port nothing listens on.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

fn assert_names(message: &str, expected: &[&str]) {
    for e in expected {
        assert!(message.contains(e), "{message:?} should name {e:?}");
    }
}

/// Whether `host:port` accepts connections, or skips (fails under `CI=true`).
async fn reachable_or_skip(test: &str, what: &str, address: &str) -> Option<()> {
    let attempt = async { tokio::net::TcpStream::connect(address).await.map(drop) };
    redis_common::service_or_skip(test, &format!("{what} at {address}"), attempt).await
}

/// The monitoring endpoint of the local NATS (8222, or 8223 for its own instance) and its
/// client port, from `/varz`.
async fn nats_or_skip(test: &str) -> Option<(String, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let attempt = async {
        let mut last = String::new();
        for port in [8222, 8223] {
            let monitoring = format!("127.0.0.1:{port}");
            let answer = async {
                let mut s = tokio::net::TcpStream::connect(&monitoring).await?;
                s.write_all(b"GET /varz HTTP/1.0\r\nHost: localhost\r\n\r\n")
                    .await?;
                let mut text = String::new();
                s.read_to_string(&mut text).await?;
                Ok::<_, std::io::Error>(text)
            };
            match tokio::time::timeout(std::time::Duration::from_secs(5), answer).await {
                Ok(Ok(text)) => {
                    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default();
                    let varz: serde_json::Value =
                        serde_json::from_str(body).map_err(|e| e.to_string())?;
                    let client = varz["port"].as_u64().ok_or("varz has no port")?;
                    return Ok((monitoring, format!("127.0.0.1:{client}")));
                }
                Ok(Err(e)) => last = e.to_string(),
                Err(_) => last = "timed out".to_string(),
            }
        }
        Err(last)
    };
    redis_common::service_or_skip(test, "NATS with JetStream and monitoring", attempt).await
}

#[path = "../../../scalers/tests/nats_jetstream/client.rs"]
#[allow(dead_code)]
mod nats_client;

mod bad_input;
mod decisions;
