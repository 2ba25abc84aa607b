//! Scaling a ScaledObject: activation and cooldown, paused replicas, fallback, restarts,
//! push scalers, loops starting together.

use super::*;

#[tokio::test]
async fn a_list_below_activation_stays_at_zero_then_activates_and_cools_down() {
    let Some((_server, w)) = world("activation").await else {
        return;
    };
    scenarios::activation_and_cooldown(&w, &list("activation")).await;
}

#[tokio::test]
async fn paused_replicas_hold_the_count_above_max_and_resume_when_removed() {
    let Some((_server, w)) = world("paused").await else {
        return;
    };
    scenarios::paused_replicas(&w, &list("paused")).await;
}

#[tokio::test]
async fn fallback_replaces_a_failing_metric() {
    let Some((_server, w)) = world("fallback").await else {
        return;
    };
    scenarios::fallback(&w, &list("fallback")).await;
}

#[tokio::test]
async fn a_restart_mid_cooldown_does_not_scale_to_zero_early() {
    let Some((_server, w)) = world("restart").await else {
        return;
    };
    scenarios::restart_mid_cooldown(&w, &list("restart")).await;
}

#[tokio::test]
async fn a_push_scaler_activation_scales_from_zero_without_waiting_for_a_poll() {
    let Some((_server, mut w)) = world("push").await else {
        return;
    };
    let source = push::Source::default();
    w.registry = std::sync::Arc::new(push::registry(source.clone()));
    w.deployment("pushed", 0).await;
    let op = w.start_operator();
    let so = w
        .create(
            "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata:\n  name: pushed\nspec:\n  scaleTargetRef:\n    name: pushed\n  triggers:\n    - type: switch\n      metadata: {}\n",
        )
        .await;
    w.polls_reach(&op, &so, 1).await;
    assert_eq!(w.replicas("pushed").await, 0);
    source
        .active
        .store(true, std::sync::atomic::Ordering::SeqCst);
    source.wake.notify_one();
    // No tick is given: only the push can cause this poll.
    w.polls_reach(&op, &so, 2).await;
    assert_eq!(w.replicas("pushed").await, 1);
    op.stop().await;
}

/// Loops that start together all read their target's replicas as soon as the target cache has
/// listed. (kube's own readiness future wakes only its last waiter: the others used to sleep
/// until the cache's 30 s timeout, so most objects created together activated one polling
/// interval late.)
#[tokio::test]
async fn loops_starting_together_all_read_replicas_once_the_target_cache_has_listed() {
    use keda_operator::resolve::WatchScope;
    use keda_operator::target::{TargetCache, resolve_target};

    let server = MemKube::new();
    server.create_namespace("team").expect("namespace");
    let client = server.client();
    let mut targets = Vec::new();
    for i in 0..20 {
        let deployment: k8s_openapi::api::apps::v1::Deployment = serde_json::from_value(json!({
            "metadata": { "name": format!("worker-{i}"), "namespace": "team" },
            "spec": {
                "replicas": i,
                "selector": { "matchLabels": { "app": "worker" } },
                "template": { "metadata": { "labels": { "app": "worker" } } }
            }
        }))
        .expect("a Deployment");
        server.seed(&deployment).expect("seed");
        let so: keda_api::ScaledObject = serde_json::from_value(json!({
            "apiVersion": "keda.sh/v1alpha1",
            "kind": "ScaledObject",
            "metadata": { "name": format!("so-{i}"), "namespace": "team" },
            "spec": { "scaleTargetRef": { "name": format!("worker-{i}") }, "triggers": [] }
        }))
        .expect("a ScaledObject");
        targets.push(resolve_target(&client, &so).await.expect("target"));
    }
    let cache = TargetCache::new(
        client,
        WatchScope::All,
        tokio_util::sync::CancellationToken::new(),
    );
    // One task per read, as one per loop: each waits with its own waker.
    let reads = targets.into_iter().map(|t| {
        let cache = cache.clone();
        async move {
            tokio::spawn(async move { cache.current_replicas(&t).await })
                .await
                .expect("the read task")
        }
    });
    let replicas = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        futures::future::join_all(reads),
    )
    .await
    .expect("every concurrent read returns once the cache has listed, not after 30 s");
    let replicas: Vec<i32> = replicas.into_iter().map(|r| r.expect("replicas")).collect();
    assert_eq!(replicas, (0..20).collect::<Vec<i32>>());
}
