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

use common::world::{NS, becomes_ready, dial_object, dial_world, not_ready, poll_all};
use kube::api::{Patch, PatchParams};
use scenarios::World;

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

#[tokio::test]
async fn an_http_hold_timeout_of_1e20_is_ready_false_naming_the_bound_while_others_scale() {
    let Some((_server, w, dials)) = dial_world("bounds-hold-timeout").await else {
        return;
    };
    w.deployment("steady", 0).await;
    w.deployment("shop", 0).await;
    let op = w.start_operator();
    let steady = w.create(&dial_object("steady", 1)).await;
    w.create(&http_object("shop", "1e20")).await;

    let (reason, message) = not_ready(&w, "shop").await;
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
    poll_all(&w, &op, &[&steady], 10).await;
    assert_eq!(w.replicas("steady").await, 1, "steady goes 0 -> 1");
    dials.set("steady", 0.0);
    poll_all(&w, &op, &[&steady], 11).await;
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
    becomes_ready(&w, "shop").await;
    assert!(op.loops.is_running(NS, "shop").await);
    op.stop().await;
}
