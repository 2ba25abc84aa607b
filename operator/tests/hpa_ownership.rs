//! Issue 30, finding 10: keda-rs changes and deletes only the HPAs it owns, those whose
//! controller owner reference is the ScaledObject itself (same UID). An HPA of another workload
//! under the name a ScaledObject asks for (`spec.advanced.horizontalPodAutoscalerConfig.name`)
//! is left exactly as it is, resourceVersion included, through the ScaledObject's create,
//! update, pause and delete, and the ScaledObject says why it is not ready. KEDA's
//! `transfer-hpa-ownership` annotation takes an HPA over only with the operator's
//! `--allow-hpa-ownership-transfer`.

mod scenarios;

#[allow(dead_code)]
#[path = "../../scalers/tests/common/mod.rs"]
mod redis_common;

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use keda_api::ScaledObject;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use memkube::MemKube;
use scenarios::{World, eventually};
use serde_json::json;

async fn world(test: &str) -> Option<(MemKube, World)> {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .try_init();
    let redis = redis_common::redis_or_skip(test).await?;
    let server = MemKube::new();
    let crds = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/crd");
    server.load_crds_from_dir(crds).expect("CRDs load");
    server.create_namespace("team").expect("namespace");
    let world = World::new(server.client(), "team", redis);
    Some((server, world))
}

/// An HPA `name` on Deployment `target`, with `metadata` merged into its metadata.
fn hpa(name: &str, target: &str, metadata: serde_json::Value) -> HorizontalPodAutoscaler {
    let mut value = json!({
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": { "name": name, "namespace": "team", "labels": { "team": "shop" } },
        "spec": {
            "scaleTargetRef": { "apiVersion": "apps/v1", "kind": "Deployment", "name": target },
            "minReplicas": 2,
            "maxReplicas": 9,
            "metrics": [{ "type": "Resource", "resource": {
                "name": "cpu", "target": { "type": "Utilization", "averageUtilization": 60 } } }]
        }
    });
    if let (Some(into), Some(extra)) = (value["metadata"].as_object_mut(), metadata.as_object()) {
        into.extend(extra.clone());
    }
    serde_json::from_value(value).expect("an HPA")
}

/// The HPA as the API server stores it: every field, resourceVersion included.
async fn stored(w: &World, name: &str) -> serde_json::Value {
    let hpa = w
        .hpas()
        .get_opt(name)
        .await
        .expect("HPA lookup")
        .unwrap_or_else(|| panic!("the HPA {name} was deleted"));
    serde_json::to_value(hpa).expect("json")
}

/// `keda_scaled_object_errors_total` of `name`: one more per failed reconcile.
fn errors(w: &World, name: &str) -> u64 {
    w.metrics
        .encode()
        .lines()
        .filter(|l| {
            l.starts_with("keda_scaled_object_errors_total{") && l.contains(&format!("\"{name}\""))
        })
        .filter_map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<u64>().ok()))
        .sum()
}

/// Waits for one more failed reconcile of `name` than `before`, while checking at every step
/// that the HPA `hpa` is still `unchanged`, so a change is reported as soon as it happens.
async fn another_failed_reconcile(
    w: &World,
    name: &str,
    before: u64,
    hpa: &str,
    unchanged: &serde_json::Value,
) {
    eventually(&format!("another failed reconcile of {name}"), || async {
        assert_eq!(
            &stored(w, hpa).await,
            unchanged,
            "keda-rs changed the HPA {hpa} it does not own"
        );
        (errors(w, name) > before).then_some(())
    })
    .await;
}

/// `Ready=False` on `name` with a message naming the field and the HPA, while checking that
/// the HPA is unchanged.
async fn refused(w: &World, name: &str, hpa: &str, unchanged: &serde_json::Value) -> String {
    let (_, reason, message) = eventually(&format!("Ready=False on {name}"), || async {
        assert_eq!(
            &stored(w, hpa).await,
            unchanged,
            "keda-rs changed the HPA {hpa} it does not own"
        );
        scenarios::ready(&w.get(name).await).filter(|(status, _, _)| status == "False")
    })
    .await;
    assert_eq!(reason, "ScaledObjectCheckFailed");
    assert!(
        message.contains("spec.advanced.horizontalPodAutoscalerConfig.name")
            && message.contains(&format!("HorizontalPodAutoscaler {hpa}")),
        "{message}"
    );
    message
}

fn object_naming_hpa(name: &str, target: &str, list: &str, hpa: &str) -> String {
    scenarios::redis_object(
        name,
        target,
        list,
        &format!("  advanced:\n    horizontalPodAutoscalerConfig:\n      name: {hpa}"),
        "",
    )
}

/// Create, update, pause, delete: the foreign HPA is never written, and the ScaledObject is
/// `Ready=False` naming `spec.advanced.horizontalPodAutoscalerConfig.name` and the HPA.
async fn foreign_hpa_survives_every_step(w: &World, so: &str, hpa: &str) {
    let unchanged = stored(w, hpa).await;
    let message = refused(w, so, hpa, &unchanged).await;
    assert!(
        message.contains("is not owned by this ScaledObject"),
        "{message}"
    );

    // Update: another generation, reconciled again, refused again.
    let before = errors(w, so);
    w.scaled_objects()
        .patch(
            so,
            &PatchParams::default(),
            &Patch::Merge(&json!({ "spec": { "maxReplicaCount": 3 } })),
        )
        .await
        .expect("update");
    another_failed_reconcile(w, so, before, hpa, &unchanged).await;
    refused(w, so, hpa, &unchanged).await;

    // Pause: a paused object's HPA is deleted, but only if it is its own.
    let before = errors(w, so);
    w.annotate(so, "autoscaling.keda.sh/paused", Some("true"))
        .await;
    another_failed_reconcile(w, so, before, hpa, &unchanged).await;
    refused(w, so, hpa, &unchanged).await;

    // Delete: gone, and the HPA with it only if it was owned.
    w.delete(so).await;
    eventually(&format!("ScaledObject {so} gone"), || async {
        matches!(w.scaled_objects().get_opt(so).await, Ok(None)).then_some(())
    })
    .await;
    assert_eq!(stored(w, hpa).await, unchanged, "the HPA changed at delete");
}

#[tokio::test]
async fn a_foreign_hpa_under_the_configured_name_is_never_changed_or_deleted() {
    let Some((_server, w)) = world("foreign-hpa").await else {
        return;
    };
    let list = redis_common::unique("foreign-hpa");
    w.deployment("shop", 2).await;
    w.deployment("worker", 0).await;
    // The shop team's own HPA, made by hand: no owner, not labelled as keda-rs's.
    w.hpas()
        .create(&PostParams::default(), &hpa("shop", "shop", json!({})))
        .await
        .expect("create the shop's HPA");
    let op = w.start_operator();
    w.create(&object_naming_hpa("worker", "worker", &list, "shop"))
        .await;
    foreign_hpa_survives_every_step(&w, "worker", "shop").await;
    op.stop().await;
}

#[tokio::test]
async fn the_hpa_of_another_scaled_object_is_not_taken_over() {
    let Some((_server, w)) = world("stolen-hpa").await else {
        return;
    };
    let list = redis_common::unique("stolen-hpa");
    w.deployment("owner", 0).await;
    w.deployment("thief", 0).await;
    let op = w.start_operator();
    w.create(&scenarios::redis_object("owner", "owner", &list, "", ""))
        .await;
    // Owned by `owner` and labelled as keda-rs's: it is in the operator's HPA cache.
    scenarios::hpa_exists(&w, "keda-hpa-owner").await;
    eventually("owner is Ready", || async {
        scenarios::ready(&w.get("owner").await).filter(|(status, _, _)| status == "True")
    })
    .await;
    w.create(&object_naming_hpa(
        "thief",
        "thief",
        &list,
        "keda-hpa-owner",
    ))
    .await;
    foreign_hpa_survives_every_step(&w, "thief", "keda-hpa-owner").await;
    assert_eq!(
        scenarios::ready(&w.get("owner").await).map(|(status, _, _)| status),
        Some("True".to_string()),
        "the owner is untouched"
    );
    op.stop().await;
}

/// KEDA's HPAs carry a controller owner reference to their ScaledObject: one KEDA left for
/// this very object (same UID) is keda-rs's to update.
#[tokio::test]
async fn an_hpa_with_a_controller_reference_to_this_object_is_updated() {
    let Some((_server, w)) = world("keda-left-hpa").await else {
        return;
    };
    let list = redis_common::unique("keda-left-hpa");
    w.deployment("migrated", 0).await;
    let so: ScaledObject = w
        .create(&scenarios::redis_object(
            "migrated", "migrated", &list, "", "",
        ))
        .await;
    let owner = json!([{
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "name": "migrated",
        "uid": so.uid().expect("uid"),
        "controller": true,
        "blockOwnerDeletion": true
    }]);
    let left: Api<HorizontalPodAutoscaler> = w.hpas();
    left.create(
        &PostParams::default(),
        &hpa(
            "keda-hpa-migrated",
            "migrated",
            json!({ "ownerReferences": owner }),
        ),
    )
    .await
    .expect("create KEDA's HPA");
    let op = w.start_operator();
    eventually("the HPA is updated to keda-rs's", || async {
        let hpa = left.get("keda-hpa-migrated").await.ok()?;
        let spec = hpa.spec?;
        (spec.max_replicas == 1 && spec.metrics.is_some_and(|m| m[0].type_ == "External"))
            .then_some(())
    })
    .await;
    eventually("migrated is Ready", || async {
        scenarios::ready(&w.get("migrated").await).filter(|(status, _, _)| status == "True")
    })
    .await;
    op.stop().await;
}

/// The operator as [`World::start_operator`] starts it, with `--allow-hpa-ownership-transfer`;
/// cancel the token to stop it.
fn start_operator_allowing_transfer(w: &World) -> tokio_util::sync::CancellationToken {
    use keda_operator::resolve::WatchScope;
    use keda_operator::{ControllerConfig, ScaledObjectController, ScalerEnv};
    let config = ControllerConfig {
        env: ScalerEnv {
            pools: w.pools.clone(),
            clock: w.clock.clock(),
            registry: w.registry.clone(),
            ..ScalerEnv::default()
        },
        ticks: std::sync::Arc::new(w.ticks.clone()),
        clock: w.clock.clock(),
        operator_started_at: Some(w.clock.now()),
        watch_scope: WatchScope::Namespaces(vec![w.namespace.clone()]),
        retry_after_error: std::time::Duration::from_millis(200),
        metrics: w.metrics.clone(),
        allow_hpa_ownership_transfer: true,
        ..ControllerConfig::default()
    };
    let controller = ScaledObjectController::new(w.client.clone(), config);
    let shutdown = tokio_util::sync::CancellationToken::new();
    let token = shutdown.clone();
    tokio::spawn(async move {
        let _ = controller.run(token).await;
    });
    shutdown
}

fn transferring_object(list: &str) -> String {
    scenarios::redis_object(
        "worker",
        "worker",
        list,
        "  advanced:\n    horizontalPodAutoscalerConfig:\n      name: shop",
        "scaledobject.keda.sh/transfer-hpa-ownership: \"true\"",
    )
}

/// KEDA's `transfer-hpa-ownership` annotation is the tenant's to write: without the
/// administrator's `--allow-hpa-ownership-transfer` it takes nothing over, and the message
/// says what is missing.
#[tokio::test]
async fn the_transfer_annotation_alone_takes_no_hpa_over() {
    let Some((_server, w)) = world("transfer-refused").await else {
        return;
    };
    let list = redis_common::unique("transfer-refused");
    w.deployment("worker", 0).await;
    w.hpas()
        .create(&PostParams::default(), &hpa("shop", "worker", json!({})))
        .await
        .expect("create the HPA made by hand");
    let unchanged = stored(&w, "shop").await;
    let op = w.start_operator();
    w.create(&transferring_object(&list)).await;
    let message = refused(&w, "worker", "shop", &unchanged).await;
    assert!(
        message.contains(
            "takes effect only when the operator runs with --allow-hpa-ownership-transfer"
        ),
        "{message}"
    );
    op.stop().await;
}

/// With the administrator's opt-in, KEDA's behaviour: the named HPA is taken over (its spec
/// and owner reference replaced), and from then on it is owned.
#[tokio::test]
async fn with_the_operator_s_opt_in_the_transfer_annotation_takes_the_named_hpa_over() {
    let Some((_server, w)) = world("transfer-allowed").await else {
        return;
    };
    let list = redis_common::unique("transfer-allowed");
    w.deployment("worker", 0).await;
    w.hpas()
        .create(&PostParams::default(), &hpa("shop", "worker", json!({})))
        .await
        .expect("create the HPA made by hand");
    let stop = start_operator_allowing_transfer(&w);
    let so = w.create(&transferring_object(&list)).await;
    eventually("the HPA is taken over", || async {
        let hpa = w.hpas().get("shop").await.ok()?;
        let owned = hpa
            .metadata
            .owner_references
            .unwrap_or_default()
            .iter()
            .any(|o| o.controller == Some(true) && Some(&o.uid) == so.metadata.uid.as_ref());
        (owned && hpa.spec?.max_replicas == 1).then_some(())
    })
    .await;
    eventually("worker is Ready", || async {
        scenarios::ready(&w.get("worker").await).filter(|(status, _, _)| status == "True")
    })
    .await;
    stop.cancel();
}

/// Issue 29, row 9: the HPA is compared as KEDA compares it (`updateHPAIfNeeded`: only the
/// fields keda-rs sets), so a label and an annotation another tool (a policy controller, a
/// cost tool) adds to `keda-hpa-*` survive every reconcile, keda-rs does not write the HPA back
/// (its resourceVersion stays), and an update keda-rs does make keeps them too.
#[tokio::test]
async fn labels_and_annotations_other_tools_add_to_the_hpa_survive_and_cause_no_writes() {
    let Some((_server, w)) = world("foreign-hpa-labels").await else {
        return;
    };
    let list = redis_common::unique("foreign-hpa-labels");
    w.deployment("tagged", 0).await;
    let op = w.start_operator();
    w.create(&scenarios::redis_object("tagged", "tagged", &list, "", ""))
        .await;
    scenarios::hpa_exists(&w, "keda-hpa-tagged").await;
    let foreign = json!({ "metadata": {
        "labels": { "policy.example.com/owner": "platform" },
        "annotations": { "cost.example.com/center": "42" } } });
    let hpas = w.hpas();
    let patched = hpas
        .patch(
            "keda-hpa-tagged",
            &PatchParams::default(),
            &Patch::Merge(&foreign),
        )
        .await
        .expect("a policy controller labels the HPA");
    let rv = patched.resource_version();
    let has_foreign = |h: &HorizontalPodAutoscaler| {
        h.labels()
            .get("policy.example.com/owner")
            .map(String::as_str)
            == Some("platform")
            && h.annotations()
                .get("cost.example.com/center")
                .map(String::as_str)
                == Some("42")
    };
    // The patch itself makes the HPA watch reconcile the object; more reconciles come from
    // edits of the ScaledObject that do not change the HPA (a status-only change would not
    // reconcile). Each must leave the HPA exactly as it is.
    for i in 0..3 {
        let touch = json!({ "spec": { "pollingInterval": 10 + i } });
        w.scaled_objects()
            .patch("tagged", &PatchParams::default(), &Patch::Merge(&touch))
            .await
            .expect("touch the ScaledObject");
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let now = hpas.get("keda-hpa-tagged").await.expect("HPA");
        assert!(
            has_foreign(&now),
            "foreign metadata removed: {:?}",
            now.metadata
        );
        assert_eq!(now.resource_version(), rv, "keda-rs wrote the HPA back");
    }
    // A change keda-rs must make (maxReplicaCount) updates the HPA and keeps them.
    let grow = json!({ "spec": { "maxReplicaCount": 4 } });
    w.scaled_objects()
        .patch("tagged", &PatchParams::default(), &Patch::Merge(&grow))
        .await
        .expect("grow");
    let updated = eventually("the HPA follows maxReplicaCount", || async {
        let h = hpas.get("keda-hpa-tagged").await.ok()?;
        (h.spec.as_ref()?.max_replicas == 4).then_some(h)
    })
    .await;
    assert!(has_foreign(&updated), "an update removed foreign metadata");
    op.stop().await;
}
