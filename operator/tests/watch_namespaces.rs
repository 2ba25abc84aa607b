//! `WATCH_NAMESPACE` with several namespaces: the ScaledObject controller watches each of them
//! (one watch per namespace, merged into one cache) and nothing else, and a namespace whose
//! watch has to list again keeps the other namespaces' objects.

mod scenarios;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use keda_api::ScaledObject;
use keda_operator::resolve::WatchScope;
use keda_operator::{ControllerConfig, ManualTicks, ScaledObjectController};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use memkube::MemKube;
use scenarios::eventually;
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// A Deployment `app` at 0 replicas and a ScaledObject `so` on it with a cron trigger (no event
/// source needed: the test is about which objects are reconciled).
async fn app_and_object(client: &Client, ns: &str) {
    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "app", "namespace": ns},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "app"}},
                 "template": {"metadata": {"labels": {"app": "app"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
    }))
    .expect("deployment");
    Api::<Deployment>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &deployment)
        .await
        .expect("create deployment");
    let so: ScaledObject = serde_json::from_value(json!({
        "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
        "metadata": {"name": "so", "namespace": ns},
        "spec": {"scaleTargetRef": {"name": "app"}, "maxReplicaCount": 3,
                 "triggers": [{"type": "cron", "metadata": {
                     "timezone": "UTC", "start": "0 0 1 1 *", "end": "1 0 1 1 *",
                     "desiredReplicas": "2"}}]}
    }))
    .expect("scaledobject");
    Api::<ScaledObject>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &so)
        .await
        .expect("create scaledobject");
}

async fn max_replicas(client: &Client, ns: &str) -> Option<i32> {
    Api::<HorizontalPodAutoscaler>::namespaced(client.clone(), ns)
        .get_opt("keda-hpa-so")
        .await
        .expect("get hpa")
        .and_then(|h| h.spec)
        .map(|s| s.max_replicas)
}

#[tokio::test]
async fn only_the_listed_namespaces_are_reconciled_and_a_relist_keeps_the_others() {
    let server = MemKube::new();
    let crds = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/crd");
    server.load_crds_from_dir(crds).expect("CRDs load");
    for ns in ["team-a", "team-b", "other"] {
        server.create_namespace(ns).expect("namespace");
    }
    let client = server.client();
    for ns in ["team-a", "team-b", "other"] {
        app_and_object(&client, ns).await;
    }

    let controller = ScaledObjectController::new(
        client.clone(),
        ControllerConfig {
            ticks: Arc::new(ManualTicks::new()),
            watch_scope: WatchScope::parse("team-b, team-a"),
            retry_after_error: Duration::from_millis(200),
            ..ControllerConfig::default()
        },
    );
    let loops = controller.loops();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(controller.run(shutdown.clone()));

    for ns in ["team-a", "team-b"] {
        eventually(&format!("the HPA in {ns}"), || max_replicas(&client, ns)).await;
        assert!(loops.is_running(ns, "so").await, "a loop runs in {ns}");
    }
    // Both watched namespaces are done; the unwatched one was never touched.
    let other: Api<ScaledObject> = Api::namespaced(client.clone(), "other");
    let untouched = other.get("so").await.expect("so in other");
    assert!(untouched.finalizers().is_empty(), "{untouched:?}");
    assert!(untouched.status.is_none(), "{untouched:?}");
    assert_eq!(max_replicas(&client, "other").await, None);
    assert!(!loops.is_running("other", "so").await);

    // Every watch must list again (history compacted, connections dropped) while team-a's
    // object goes away; team-b's object stays known and keeps being reconciled.
    let team_a: Api<ScaledObject> = Api::namespaced(client.clone(), "team-a");
    server.compact_history();
    server.close_watches();
    team_a
        .delete("so", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("team-a's object and HPA gone", || async {
        let gone = team_a.get_opt("so").await.expect("get").is_none()
            && max_replicas(&client, "team-a").await.is_none();
        gone.then_some(())
    })
    .await;
    Api::<ScaledObject>::namespaced(client.clone(), "team-b")
        .patch(
            "so",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"maxReplicaCount": 7}})),
        )
        .await
        .expect("patch");
    eventually("team-b's HPA updated", || async {
        (max_replicas(&client, "team-b").await == Some(7)).then_some(())
    })
    .await;
    assert!(loops.is_running("team-b", "so").await);
    assert!(!loops.is_running("team-a", "so").await);

    shutdown.cancel();
    tokio::time::timeout(scenarios::WAIT, task)
        .await
        .expect("controller stops")
        .expect("task")
        .expect("controller result");
}

/// `WATCH_LABEL_SELECTOR`: only ScaledObjects whose labels match are watched, reconciled and
/// scaled; the others are never touched, and one that gains the label is picked up.
#[tokio::test]
async fn only_objects_matching_the_watch_label_selector_are_reconciled() {
    let server = MemKube::new();
    let crds = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/crd");
    server.load_crds_from_dir(crds).expect("CRDs load");
    for ns in ["team-a", "team-b"] {
        server.create_namespace(ns).expect("namespace");
    }
    let client = server.client();
    let label = |ns: &str, value: &str| {
        let value = value.to_string();
        let api = Api::<ScaledObject>::namespaced(client.clone(), ns);
        async move {
            api.patch(
                "so",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"autoscaler": value}}})),
            )
            .await
            .expect("label");
        }
    };
    for ns in ["team-a", "team-b"] {
        app_and_object(&client, ns).await;
    }
    label("team-a", "keda-rs").await;
    label("team-b", "other").await;

    let controller = ScaledObjectController::new(
        client.clone(),
        ControllerConfig {
            ticks: Arc::new(ManualTicks::new()),
            label_selector: Some("autoscaler=keda-rs".to_string()),
            retry_after_error: Duration::from_millis(200),
            ..ControllerConfig::default()
        },
    );
    let loops = controller.loops();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(controller.run(shutdown.clone()));

    eventually("the HPA of the matching object", || {
        max_replicas(&client, "team-a")
    })
    .await;
    assert!(loops.is_running("team-a", "so").await);
    let other: Api<ScaledObject> = Api::namespaced(client.clone(), "team-b");
    let untouched = other.get("so").await.expect("so in team-b");
    assert!(untouched.finalizers().is_empty(), "{untouched:?}");
    assert!(untouched.status.is_none(), "{untouched:?}");
    assert_eq!(max_replicas(&client, "team-b").await, None);
    assert!(!loops.is_running("team-b", "so").await);

    // Labelled to match, it is reconciled like the other.
    label("team-b", "keda-rs").await;
    eventually("the HPA of the relabelled object", || {
        max_replicas(&client, "team-b")
    })
    .await;
    assert!(loops.is_running("team-b", "so").await);

    shutdown.cancel();
    tokio::time::timeout(scenarios::WAIT, task)
        .await
        .expect("controller stops")
        .expect("task")
        .expect("controller result");
}

/// Issue 29, row 8: `WATCH_LABEL_SELECTOR_FOR_TRIGGERAUTH` (the resolver's
/// `auth_label_selector`). As in KEDA, whose manager cache lists TriggerAuthentications and
/// ClusterTriggerAuthentications with the selector, one that does not match is not seen: a
/// trigger referencing it resolves as if it were missing (without its parameters), and once
/// labelled to match it is used.
#[tokio::test]
async fn trigger_authentications_not_matching_their_label_selector_are_as_if_missing() {
    use k8s_openapi::api::core::v1::Secret;
    use keda_api::{ClusterTriggerAuthentication, ScaleTrigger, TriggerAuthentication};
    use keda_operator::resolve::{Resolver, ResolverConfig, ScaleTargetPodSource};

    let server = MemKube::new();
    let crds = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/crd");
    server.load_crds_from_dir(crds).expect("CRDs load");
    for ns in ["team", "keda"] {
        server.create_namespace(ns).expect("namespace");
    }
    let client = server.client();
    for ns in ["team", "keda"] {
        let secret: Secret = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "creds", "namespace": ns},
            "data": {"password": "czNjcmV0"}
        }))
        .expect("secret");
        Api::<Secret>::namespaced(client.clone(), ns)
            .create(&PostParams::default(), &secret)
            .await
            .expect("create secret");
    }
    let spec =
        json!({"secretTargetRef": [{"parameter": "password", "name": "creds", "key": "password"}]});
    let tas = Api::<TriggerAuthentication>::namespaced(client.clone(), "team");
    let ctas = Api::<ClusterTriggerAuthentication>::all(client.clone());
    for (name, labels) in [
        ("shared", json!({"keda-rs/operator": "a"})),
        ("elsewhere", json!({"keda-rs/operator": "b"})),
    ] {
        let ta: TriggerAuthentication = serde_json::from_value(json!({
            "apiVersion": "keda.sh/v1alpha1", "kind": "TriggerAuthentication",
            "metadata": {"name": name, "namespace": "team", "labels": labels},
            "spec": spec
        }))
        .expect("ta");
        tas.create(&PostParams::default(), &ta).await.expect("ta");
        let cta: ClusterTriggerAuthentication = serde_json::from_value(json!({
            "apiVersion": "keda.sh/v1alpha1", "kind": "ClusterTriggerAuthentication",
            "metadata": {"name": name, "labels": labels},
            "spec": spec
        }))
        .expect("cta");
        ctas.create(&PostParams::default(), &cta)
            .await
            .expect("cta");
    }

    let mut config = ResolverConfig::new("keda");
    config.cache_sync_timeout = scenarios::WAIT;
    config.auth_label_selector = Some("keda-rs/operator=a".to_string());
    let resolver = Resolver::new(client.clone(), config);
    let so: ScaledObject = serde_json::from_value(json!({
        "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
        "metadata": {"name": "so", "namespace": "team"},
        "spec": {"scaleTargetRef": {"name": "app"}, "triggers": []}
    }))
    .expect("so");
    // The password the trigger gets from `kind`/`name`, `None` when the reference does not
    // resolve to it (an error, or, once missing references resolve empty, no parameter).
    let password = |kind: &'static str, name: &'static str| {
        let resolver = resolver.clone();
        let so = so.clone();
        async move {
            let trigger: ScaleTrigger = serde_json::from_value(json!({
                "type": "redis", "metadata": {"listName": "q"},
                "authenticationRef": {"name": name, "kind": kind}
            }))
            .expect("trigger");
            let mut session = resolver.session(ScaleTargetPodSource::for_scaled_object(&so));
            session.resolve(&trigger, 0).await.ok().and_then(|r| {
                r.auth_params
                    .get("password")
                    .map(|p| p.expose().to_string())
            })
        }
    };
    for kind in ["TriggerAuthentication", "ClusterTriggerAuthentication"] {
        assert_eq!(
            password(kind, "shared").await.as_deref(),
            Some("s3cret"),
            "{kind} matching the selector"
        );
        assert_eq!(
            password(kind, "elsewhere").await,
            None,
            "{kind} outside the selector is not used"
        );
    }

    // Relabelled to match, both are used; relabelled away, no longer.
    let relabel = |value: &'static str| {
        let (tas, ctas) = (tas.clone(), ctas.clone());
        async move {
            let patch = Patch::Merge(json!({"metadata": {"labels": {"keda-rs/operator": value}}}));
            tas.patch("elsewhere", &PatchParams::default(), &patch)
                .await
                .expect("relabel ta");
            ctas.patch("elsewhere", &PatchParams::default(), &patch)
                .await
                .expect("relabel cta");
        }
    };
    relabel("a").await;
    for kind in ["TriggerAuthentication", "ClusterTriggerAuthentication"] {
        eventually("the relabelled authentication is used", || async {
            password(kind, "elsewhere").await.filter(|p| p == "s3cret")
        })
        .await;
    }
    relabel("b").await;
    for kind in ["TriggerAuthentication", "ClusterTriggerAuthentication"] {
        eventually(
            "the authentication labelled away is no longer used",
            || async { password(kind, "elsewhere").await.is_none().then_some(()) },
        )
        .await;
    }
}
