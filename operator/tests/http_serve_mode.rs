//! Issue 28: no scale to zero from serve mode. While an activator reports that a managed
//! Service leads an `http` target's clients straight to its pods (`serving` in its samples),
//! the operator keeps the target active, whatever the activators themselves forward; once the
//! Service leads back to the activators the cooldown starts after the drain
//! (`SERVE_DRAIN_SECONDS`), and only then does the target go to zero.

mod common;
mod scenarios;

#[allow(dead_code)]
#[path = "../../scalers/tests/common/mod.rs"]
mod redis_common;

use keda_scalers::scalers::http::hub::{ActivatorHub, SERVE_DRAIN_SECONDS};
use keda_scalers::scalers::http::protocol::{Report, TargetKey, TargetSample};
use scenarios::{condition, eventually};

fn sample(w: &scenarios::World, serving: bool) -> Report {
    Report::Sample {
        replica: "activator-0".into(),
        second: u64::try_from(w.clock.now().as_second()).expect("after 1970"),
        targets: vec![TargetSample {
            target: TargetKey::new(common::world::NS, "shop", 0),
            concurrency: 0.0,
            requests: 0.0,
            held: 0,
            in_flight: 0,
            ready: 2,
            serving,
        }],
    }
}

/// Moves the clock by `secs`, the activator reporting at the new time (it reports every
/// second), and lets the loop poll once more.
async fn poll_after(
    w: &scenarios::World,
    op: &scenarios::Operator,
    so: &keda_api::ScaledObject,
    hub: &ActivatorHub,
    secs: i64,
    serving: bool,
) {
    let before = w.polls(op, so);
    w.clock.advance(secs);
    hub.apply(&sample(w, serving));
    w.ticks.tick();
    w.polls_reach(op, so, before + 1).await;
}

#[tokio::test]
async fn a_target_served_by_its_pods_goes_to_zero_only_after_the_flip_back_and_the_cooldown() {
    let Some((_server, w)) = common::world::world(
        "a_target_served_by_its_pods_goes_to_zero_only_after_the_flip_back_and_the_cooldown",
        keda_scalers::Registry::builtin(),
    )
    .await
    else {
        return;
    };
    w.deployment("shop", 1).await;
    let op = w.start_operator();
    let so = w
        .create(
            r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: shop
spec:
  scaleTargetRef:
    name: shop
  pollingInterval: 10
  cooldownPeriod: 30
  triggers:
    - type: http
      metadata:
        service: shop-pods
        podConcurrencyMetric: inflight
"#,
        )
        .await;
    w.polls_reach(&op, &so, 1).await;
    let hub = ActivatorHub::shared(&w.pools, &w.clock.clock()).await;

    // Two minutes in serve mode with no request through the activators: four cooldowns.
    for _ in 0..12 {
        poll_after(&w, &op, &so, &hub, 10, true).await;
        assert_eq!(w.replicas("shop").await, 1, "never to zero while serving");
    }
    eventually("Active=True while serving", || async {
        (condition(&w.get("shop").await, "Active").map(|c| c.0) == Some("True".into()))
            .then_some(())
    })
    .await;

    // Back to proxy mode: the drain, then the whole cooldown, before zero.
    let drain = i64::try_from(SERVE_DRAIN_SECONDS).expect("small");
    poll_after(&w, &op, &so, &hub, 1, false).await;
    poll_after(&w, &op, &so, &hub, drain - 2, false).await;
    assert_eq!(w.replicas("shop").await, 1, "still draining");
    // The last serving report was `drain - 1` s ago: active until `drain` s after it.
    poll_after(&w, &op, &so, &hub, 29, false).await;
    assert_eq!(
        w.replicas("shop").await,
        1,
        "within the cooldown after the drain"
    );
    poll_after(&w, &op, &so, &hub, 10, false).await;
    assert_eq!(
        w.replicas("shop").await,
        0,
        "after drain and cooldown: zero"
    );
    op.stop().await;
}
