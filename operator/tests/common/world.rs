//! The world of the in-process operator tests: memkube with keda-rs' CRDs and namespace [`NS`],
//! and the scenarios harness over its in-process client.
//!
//! The harness holds a Redis connection, so a test binary using this module declares
//! `mod scenarios;` and `mod redis_common;` (the scalers' `tests/common/mod.rs`), and its tests
//! skip without Redis, as the other operator tests do.

use std::sync::Arc;

use keda_api::ScaledObject;
use memkube::MemKube;

use super::dial::Dials;
use crate::scenarios::{Operator, World, eventually, ready};

/// The namespace of the objects.
pub const NS: &str = "team";

/// Test logging, filtered by `RUST_LOG`, once per binary.
pub fn init_logging() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .try_init();
}

/// A memkube with the CRDs and namespace [`NS`], and a world over its in-process client using
/// `registry`; `None` (the test skips) without Redis.
pub async fn world(test: &str, registry: keda_scalers::Registry) -> Option<(MemKube, World)> {
    init_logging();
    let redis = crate::redis_common::redis_or_skip(test).await?;
    let server = MemKube::new();
    server
        .load_crds_from_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../config/crd"))
        .expect("CRDs load");
    server.create_namespace(NS).expect("namespace");
    let world = World {
        registry: Arc::new(registry),
        ..World::new(server.client(), NS, redis)
    };
    Some((server, world))
}

/// [`world`] with the built-in scalers and `dial` (`common/dial.rs`), and the dials.
pub async fn dial_world(test: &str) -> Option<(MemKube, World, Dials)> {
    let dials = Dials::new();
    let (server, world) = world(test, dials.registry()).await?;
    Some((server, world, dials))
}

/// A ScaledObject on Deployment `name` with one `dial` trigger of the same name, 0 <-> 1 (HPA
/// up to `max`), polled every 10 s with a 10 s cooldown.
pub fn dial_object(name: &str, max: i32) -> String {
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
  maxReplicaCount: {max}
  triggers:
    - type: dial
      metadata:
        dial: {name}
"#
    )
}

/// Moves the clock by `secs`, lets every loop poll once more and waits for the polls of
/// `objects`.
pub async fn poll_all(w: &World, op: &Operator, objects: &[&ScaledObject], secs: i64) {
    let before: Vec<u64> = objects.iter().map(|so| w.polls(op, so)).collect();
    w.clock.advance(secs);
    w.ticks.tick();
    for (so, n) in objects.iter().zip(before) {
        w.polls_reach(op, so, n + 1).await;
    }
}

/// Waits for `Ready=False` on `name` and returns its (reason, message).
pub async fn not_ready(w: &World, name: &str) -> (String, String) {
    let (_, reason, message) = eventually(&format!("Ready=False on {name}"), || async {
        ready(&w.get(name).await).filter(|(status, _, _)| status == "False")
    })
    .await;
    (reason, message)
}

/// Waits for `Ready=True` on `name`.
pub async fn becomes_ready(w: &World, name: &str) {
    eventually(&format!("Ready=True on {name}"), || async {
        ready(&w.get(name).await)
            .filter(|(status, _, _)| status == "True")
            .map(|_| ())
    })
    .await;
}
