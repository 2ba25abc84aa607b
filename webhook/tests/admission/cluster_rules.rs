//! Rules that read the cluster: one ScaledObject per workload, HPA names and owners, resource
//! requests, finalizer-only updates, CloudEventSources, the operator's identity.

use super::*;

#[tokio::test]
async fn a_second_scaled_object_on_one_workload_is_refused_and_the_first_may_still_update() {
    let kube = cluster();
    let webhook = Webhook::start(&kube).await;
    let first = scaled_object("orders", "orders", redis());
    seed_scaled_object(&kube, &webhook, &first).await;

    let second = scaled_object("orders-2", "orders", redis());
    let answer = create(&webhook, &second).await;
    assert_eq!(
        refused(&answer),
        (
            403,
            "the workload 'orders' of type 'apps/v1.Deployment' is already managed by the ScaledObject 'orders'"
        )
    );
    // The same target spelled with explicit defaults is the same workload.
    let mut explicit = second.clone();
    explicit["spec"]["scaleTargetRef"] =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "orders"});
    assert!(!create(&webhook, &explicit).await.allowed);
    // Another kind with that name is another workload.
    let mut sts = second.clone();
    sts["spec"]["scaleTargetRef"] =
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "orders"});
    allowed(
        &create(&webhook, &sts).await,
        "a StatefulSet of the same name",
    );
    // Another namespace is another workload.
    kube.create_namespace("other").unwrap();
    let mut elsewhere = second.clone();
    elsewhere["metadata"]["namespace"] = json!("other");
    allowed(&create(&webhook, &elsewhere).await, "another namespace");

    // The first ScaledObject updating itself is not "another" ScaledObject.
    let mut updated = first.clone();
    updated["spec"]["maxReplicaCount"] = json!(7);
    let answer = webhook
        .answer(
            SCALED_OBJECT_PATH,
            &review("UPDATE", &updated, Some(&first), false),
        )
        .await;
    allowed(&answer, "the first updating itself");
    let metrics = webhook.state.metrics.encode();
    assert!(
        metrics.contains(r#"reason="other-scaled-object"} 2"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_scaled_object_deleted_from_the_cluster_no_longer_blocks_its_workload() {
    let kube = cluster();
    let webhook = Webhook::start(&kube).await;
    let first = scaled_object("orders", "orders", redis());
    seed_scaled_object(&kube, &webhook, &first).await;
    let second = scaled_object("orders-2", "orders", redis());
    assert!(!create(&webhook, &second).await.allowed);

    let api: kube::Api<keda_api::scaled_object::ScaledObject> =
        kube::Api::namespaced(kube.client(), "team");
    api.delete("orders", &Default::default()).await.unwrap();
    for _ in 0..1000 {
        if webhook.state.caches.scaled_objects.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    allowed(&create(&webhook, &second).await, "after the first is gone");
}

#[tokio::test]
async fn two_scaled_objects_may_not_own_one_hpa_name() {
    let kube = cluster();
    let webhook = Webhook::start(&kube).await;
    let mut first = scaled_object("orders", "orders", redis());
    first["spec"]["advanced"] = json!({"horizontalPodAutoscalerConfig": {"name": "shared"}});
    seed_scaled_object(&kube, &webhook, &first).await;
    let mut second = scaled_object("payments", "payments", redis());
    second["spec"]["advanced"] = json!({"horizontalPodAutoscalerConfig": {"name": "shared"}});
    assert_eq!(
        refused(&create(&webhook, &second).await),
        (
            403,
            "the HPA 'shared' is already managed by the ScaledObject 'orders'"
        )
    );
    // A custom name equal to another's derived name clashes too.
    let derived = scaled_object("keda", "keda", redis());
    seed_scaled_object(&kube, &webhook, &derived).await;
    let mut third = scaled_object("inventory", "inventory", redis());
    third["spec"]["advanced"] = json!({"horizontalPodAutoscalerConfig": {"name": "keda-hpa-keda"}});
    assert_eq!(
        refused(&create(&webhook, &third).await),
        (
            403,
            "the HPA 'keda-hpa-keda' is already managed by the ScaledObject 'keda'"
        )
    );
}

#[tokio::test]
async fn an_hpa_not_owned_by_the_scaled_object_blocks_it_unless_it_opts_out_or_is_transferred() {
    let kube = cluster();
    let webhook = Webhook::start(&kube).await;
    let wait_hpas = |n: usize| move |c: &Caches| c.hpas.len() == n;
    seed_and_wait(
        &kube,
        &webhook,
        &hpa("by-hand", "orders", None, json!({})),
        wait_hpas(1),
    )
    .await;

    let so = scaled_object("orders", "orders", redis());
    assert_eq!(
        refused(&create(&webhook, &so).await),
        (
            403,
            "the workload 'orders' of type 'apps/v1.Deployment' is already managed by the hpa 'by-hand'"
        )
    );

    // Transfer requested without naming the HPA.
    let mut transfer = so.clone();
    transfer["metadata"]["annotations"] =
        json!({"scaledobject.keda.sh/transfer-hpa-ownership": "true"});
    assert_eq!(
        refused(&create(&webhook, &transfer).await),
        (
            403,
            "the existing hpa 'by-hand' for workload 'orders' of type 'apps/v1.Deployment' must be specified by name in advanced settings to enable ownership transfer"
        )
    );
    // Transfer with the HPA named: allowed.
    transfer["spec"]["advanced"] = json!({"horizontalPodAutoscalerConfig": {"name": "by-hand"}});
    allowed(
        &create(&webhook, &transfer).await,
        "transfer naming the HPA",
    );

    // An HPA that opts out of the check, and the ScaledObject's own HPA, do not block.
    let mut other = scaled_object("payments", "payments", redis());
    seed_and_wait(
        &kube,
        &webhook,
        &hpa(
            "ignored",
            "payments",
            None,
            json!({"validations.keda.sh/hpa-ownership": "false"}),
        ),
        wait_hpas(2),
    )
    .await;
    seed_and_wait(
        &kube,
        &webhook,
        &hpa("keda-hpa-payments", "payments", Some("payments"), json!({})),
        wait_hpas(3),
    )
    .await;
    allowed(&create(&webhook, &other).await, "opted-out and owned HPAs");
    // An HPA owned by another ScaledObject does block.
    other["metadata"]["name"] = json!("payments-2");
    assert_eq!(
        refused(&create(&webhook, &other).await).1,
        "the workload 'payments' of type 'apps/v1.Deployment' is already managed by the hpa 'keda-hpa-payments'"
    );
    let metrics = webhook.state.metrics.encode();
    for reason in ["other-hpa", "transfer-ownership-missing-hpa-name"] {
        assert!(
            metrics.contains(&format!("reason=\"{reason}\"")),
            "{metrics}"
        );
    }
}

#[tokio::test]
async fn cpu_and_memory_triggers_need_requests_on_the_workloads_containers() {
    let kube = cluster();
    kube.seed(&deployment(
        "team",
        "api",
        &[("app", Some("250m"), None), ("sidecar", None, Some("0"))],
    ))
    .unwrap();
    let webhook = Webhook::start(&kube).await;

    let mut so = scaled_object("api", "api", json!([cpu(None)]));
    so["spec"]["minReplicaCount"] = json!(1);
    assert_eq!(
        refused(&create(&webhook, &so).await),
        (
            403,
            "the scaledobject has a cpu trigger but the container sidecar doesn't have the cpu request defined"
        )
    );
    // Only the named container counts.
    so["spec"]["triggers"] = json!([cpu(Some("app"))]);
    allowed(
        &create(&webhook, &so).await,
        "cpu on the container with a request",
    );
    // A memory request of "0" is no request.
    so["spec"]["triggers"] = json!([{"type": "memory", "metricType": "Utilization", "metadata": {"value": "60", "containerName": "sidecar"}}]);
    assert_eq!(
        refused(&create(&webhook, &so).await).1,
        "the scaledobject has a memory trigger but the container sidecar doesn't have the memory request defined"
    );
    // Dry-run skips the check, as in KEDA.
    let dry = webhook
        .answer(SCALED_OBJECT_PATH, &review("CREATE", &so, None, true))
        .await;
    allowed(&dry, "dry-run");

    // Only cpu/memory with min 0 cannot scale to zero: KEDA's words.
    so["spec"]["triggers"] = json!([cpu(Some("app"))]);
    so["spec"]["minReplicaCount"] = json!(0);
    assert_eq!(
        refused(&create(&webhook, &so).await).1,
        "scaledobject has only cpu/memory triggers AND minReplica is 0 (scale to zero doesn't work in this case)"
    );
    // KEDA checks that for Deployments and StatefulSets only.
    let mut rollout = so.clone();
    rollout["spec"]["scaleTargetRef"] =
        json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": "api"});
    allowed(&create(&webhook, &rollout).await, "a Rollout target");

    // A missing workload is KEDA's GET error.
    let mut missing = scaled_object("ghost", "ghost", json!([cpu(None)]));
    missing["spec"]["minReplicaCount"] = json!(1);
    assert_eq!(
        refused(&create(&webhook, &missing).await).1,
        "deployments.apps \"ghost\" not found"
    );

    // A LimitRange default for containers satisfies the check.
    let limit_range = json!({
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "defaults", "namespace": "team"},
        "spec": {"limits": [{"type": "Container", "defaultRequest": {"memory": "128Mi"}}]},
    });
    seed_and_wait(&kube, &webhook, &limit_range, |c| {
        c.limit_range_default("team", "memory")
    })
    .await;
    so["spec"]["minReplicaCount"] = json!(1);
    so["spec"]["triggers"] =
        json!([{"type": "memory", "metricType": "Utilization", "metadata": {"value": "60"}}]);
    allowed(
        &create(&webhook, &so).await,
        "memory with a LimitRange default",
    );
}

#[tokio::test]
async fn an_update_that_only_removes_the_finalizer_is_not_validated() {
    let kube = cluster();
    let webhook = Webhook::start(&kube).await;
    let mut old = scaled_object("broken", "broken", json!([]));
    old["metadata"]["finalizers"] = json!(["finalizer.keda.sh"]);
    let mut new = old.clone();
    new["metadata"]["finalizers"] = json!([]);
    let answer = webhook
        .answer(
            SCALED_OBJECT_PATH,
            &review("UPDATE", &new, Some(&old), false),
        )
        .await;
    allowed(&answer, "finalizer removal");
    // Any other update of it is validated.
    new["metadata"]["labels"] = json!({"a": "b"});
    new["metadata"]["finalizers"] = json!(["finalizer.keda.sh"]);
    let answer = webhook
        .answer(
            SCALED_OBJECT_PATH,
            &review("UPDATE", &new, Some(&old), false),
        )
        .await;
    assert_eq!(
        refused(&answer).1,
        "spec.triggers: at least one trigger is required"
    );
}

/// KEDA's CloudEventSource webhooks: the subscription lists are checked (both lists, an unknown
/// type) with KEDA's messages; a destination keda-rs cannot send to is admitted, as KEDA
/// admits it.
#[tokio::test]
async fn cloud_event_sources_are_refused_for_their_subscription_lists_only() {
    let kube = cluster();
    let webhook = Webhook::start(&kube).await;
    let source = |kind: &str, subscription: Value, destination: Value| {
        json!({"apiVersion": "eventing.keda.sh/v1alpha1", "kind": kind,
            "metadata": {"name": "events", "namespace": "team"},
            "spec": {"destination": destination, "eventSubscription": subscription}})
    };
    let http = json!({"http": {"uri": "http://sink.team.svc:8080/"}});
    for (path, kind) in [
        (CLOUD_EVENT_SOURCE_PATH, "CloudEventSource"),
        (CLUSTER_CLOUD_EVENT_SOURCE_PATH, "ClusterCloudEventSource"),
    ] {
        let ok = source(
            kind,
            json!({"includedEventTypes": ["keda.scaledobject.failed.v1"]}),
            http.clone(),
        );
        allowed(
            &webhook
                .answer(path, &review("CREATE", &ok, None, false))
                .await,
            kind,
        );
        let grid = source(
            kind,
            json!({}),
            json!({"azureEventGridTopic": {"endpoint": "https://t"}}),
        );
        allowed(
            &webhook
                .answer(path, &review("CREATE", &grid, None, false))
                .await,
            "Event Grid",
        );
        let both = source(
            kind,
            json!({"includedEventTypes": ["keda.scaledobject.failed.v1"],
                   "excludedEventTypes": ["keda.scaledobject.ready.v1"]}),
            http.clone(),
        );
        let answer = webhook
            .answer(path, &review("CREATE", &both, None, false))
            .await;
        assert_eq!(
            refused(&answer),
            (
                403,
                "setting included types and excluded types at the same time is not supported"
            )
        );
        let unknown = source(
            kind,
            json!({"excludedEventTypes": ["keda.scaledobject.readyy.v1"]}),
            http.clone(),
        );
        let answer = webhook
            .answer(path, &review("UPDATE", &unknown, Some(&ok), false))
            .await;
        assert_eq!(
            refused(&answer),
            (
                403,
                "excludedEventType: keda.scaledobject.readyy.v1 in cloudeventsource/clustercloudeventsource spec is not supported"
            )
        );
    }
}

/// Issue 30, findings 1 and 7: with the defaults, a namespaced TriggerAuthentication that
/// would send the operator's token or files to Vault, or mint a token for a ServiceAccount the
/// administrator did not opt in, is refused naming the field; a ClusterTriggerAuthentication is
/// the administrator's and is admitted.
#[tokio::test]
async fn namespaced_trigger_authentications_may_not_borrow_the_operators_identity() {
    let kube = cluster();
    let safe = {
        let caches = Arc::new(Caches::new());
        let cancel = CancellationToken::new();
        caches.follow(&kube.client(), &cancel);
        Webhook::serve_with(
            caches,
            cancel,
            keda_api::identity::IdentityPolicy::default(),
        )
        .await
    };
    let vault = |kind: &str, credential: Value| {
        json!({"apiVersion": "keda.sh/v1alpha1", "kind": kind,
            "metadata": {"name": "v", "namespace": "team"},
            "spec": {"hashiCorpVault": {"address": "http://attacker:8200", "authentication": "kubernetes",
                "mount": "k8s", "role": "r", "credential": credential,
                "secrets": [{"parameter": "p", "path": "secret/x", "key": "k"}]}}})
    };
    for (object, field) in [
        (
            vault("TriggerAuthentication", json!({})),
            "spec.hashiCorpVault.credential.serviceAccount",
        ),
        (
            vault(
                "TriggerAuthentication",
                json!({"serviceAccount": "/var/run/secrets/kubernetes.io/serviceaccount/token"}),
            ),
            "spec.hashiCorpVault.credential.serviceAccount",
        ),
        (
            json!({"apiVersion": "keda.sh/v1alpha1", "kind": "TriggerAuthentication",
                "metadata": {"name": "t", "namespace": "team"},
                "spec": {"boundServiceAccountToken": [{"parameter": "token", "serviceAccountName": "admin"}]}}),
            "spec.boundServiceAccountToken[0].serviceAccountName",
        ),
    ] {
        let response = safe
            .answer(
                TRIGGER_AUTHENTICATION_PATH,
                &review("CREATE", &object, None, false),
            )
            .await;
        let (_, message) = refused(&response);
        assert!(message.contains(field), "{message}");
    }
    let mut cluster_wide = vault("ClusterTriggerAuthentication", json!({}));
    cluster_wide["metadata"] = json!({"name": "v"});
    allowed(
        &safe
            .answer(
                CLUSTER_TRIGGER_AUTHENTICATION_PATH,
                &review("CREATE", &cluster_wide, None, false),
            )
            .await,
        "a ClusterTriggerAuthentication",
    );
}
