//! Bounds (issue 14): a number out of range in one ScaledObject makes that object `Ready=False`
//! with a message naming the field and the bound; it is not a panic (not even a caught one), and
//! the operator and every other object's scaling go on.
//!
//! The case that took the operator down before: an `http` trigger with `holdTimeout: "1e20"`,
//! which `Duration::from_secs_f64` refused with a panic in the reconcile.

mod common;
mod scenarios;

#[allow(dead_code)]
#[path = "../../scalers/tests/common/mod.rs"]
mod redis_common;

use std::sync::Arc;

use common::dial::Dials;
use keda_api::ScaledObject;
use kube::api::{Patch, PatchParams};
use memkube::MemKube;
use scenarios::{Operator, World, eventually, ready};

const NS: &str = "team";

async fn world(test: &str) -> Option<(MemKube, World, Dials)> {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .try_init();
    let redis = redis_common::redis_or_skip(test).await?;
    let server = MemKube::new();
    server
        .load_crds_from_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../config/crd"))
        .expect("CRDs load");
    server.create_namespace(NS).expect("namespace");
    let dials = Dials::new();
    let world = World {
        registry: Arc::new(dials.registry()),
        ..World::new(server.client(), NS, redis)
    };
    Some((server, world, dials))
}

/// A ScaledObject on Deployment `name` with one `dial` trigger of the same name.
fn dial_object(name: &str) -> String {
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
  cooldownPeriod: 10
  maxReplicaCount: 1
  triggers:
    - type: dial
      metadata:
        dial: {name}
"#
    )
}

/// A ScaledObject on Deployment `name` with one `http` trigger holding requests `hold`.
fn http_object(name: &str, hold: &str) -> String {
    format!(
        r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: {name}
spec:
  scaleTargetRef:
    name: {name}
  maxReplicaCount: 3
  triggers:
    - type: http
      metadata:
        hosts: {name}.example.com
        service: {name}
        holdTimeout: "{hold}"
"#
    )
}

/// Every `keda_internal_panics_total` series of `name`.
fn panic_series(w: &World, name: &str) -> Vec<String> {
    w.metrics
        .encode()
        .lines()
        .filter(|l| {
            l.starts_with("keda_internal_panics_total{")
                && l.contains(&format!("resource=\"{name}\""))
        })
        .map(str::to_string)
        .collect()
}

/// Moves the clock by `secs`, lets the loop of `so` poll once more and waits for it.
async fn poll(w: &World, op: &Operator, so: &ScaledObject, secs: i64) {
    let before = w.polls(op, so);
    w.clock.advance(secs);
    w.ticks.tick();
    w.polls_reach(op, so, before + 1).await;
}

#[tokio::test]
async fn an_http_hold_timeout_of_1e20_is_ready_false_naming_the_bound_while_others_scale() {
    let Some((_server, w, dials)) = world("bounds-hold-timeout").await else {
        return;
    };
    w.deployment("steady", 0).await;
    w.deployment("shop", 0).await;
    let op = w.start_operator();
    let steady = w.create(&dial_object("steady")).await;
    w.create(&http_object("shop", "1e20")).await;

    let (_, reason, message) = eventually("Ready=False on shop", || async {
        ready(&w.get("shop").await).filter(|(status, _, _)| status == "False")
    })
    .await;
    assert_eq!(reason, "ScaledObjectCheckFailed", "{message}");
    for part in ["trigger 0 (http)", "\"holdTimeout\"", "between 0s and 1h"] {
        assert!(message.contains(part), "{message:?} should say {part:?}");
    }
    assert!(!message.contains("internal error"), "{message}");
    assert_eq!(
        panic_series(&w, "shop"),
        Vec::<String>::new(),
        "no panic, caught or not"
    );
    assert!(!op.loops.is_running(NS, "shop").await);

    // The operator goes on: the other object scales 0 -> 1 -> 0.
    w.polls_reach(&op, &steady, 1).await;
    dials.set("steady", 10.0);
    poll(&w, &op, &steady, 10).await;
    assert_eq!(w.replicas("steady").await, 1, "steady goes 0 -> 1");
    dials.set("steady", 0.0);
    poll(&w, &op, &steady, 11).await;
    assert_eq!(w.replicas("steady").await, 0, "steady goes 1 -> 0");

    // Fixed, the object becomes Ready and its loop starts.
    let fixed: serde_json::Value = serde_yaml::from_str(&http_object("shop", "30s")).expect("yaml");
    w.scaled_objects()
        .patch(
            "shop",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": fixed["spec"]})),
        )
        .await
        .expect("patch");
    eventually("Ready=True on shop", || async {
        ready(&w.get("shop").await)
            .filter(|(status, _, _)| status == "True")
            .map(|_| ())
    })
    .await;
    assert!(op.loops.is_running(NS, "shop").await);
    op.stop().await;
}
