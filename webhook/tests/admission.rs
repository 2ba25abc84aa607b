//! The webhook over TLS, asked by a `kube` client as the API server asks it, its caches fed by
//! memkube's watches: KEDA's examples allowed, each KEDA rejection refused with KEDA's words.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::{Webhook, cluster, deployment, redis, review, root, scaled_object};
use keda_webhook::app::{
    CLOUD_EVENT_SOURCE_PATH, CLUSTER_CLOUD_EVENT_SOURCE_PATH, CLUSTER_TRIGGER_AUTHENTICATION_PATH,
    SCALED_JOB_PATH, SCALED_OBJECT_PATH, TRIGGER_AUTHENTICATION_PATH,
};
use keda_webhook::cache::Caches;
use kube::core::admission::AdmissionResponse;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

fn fixtures(dir: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut paths: Vec<_> = std::fs::read_dir(root().join("tests/fixtures").join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    for path in paths {
        let text = std::fs::read_to_string(&path).unwrap();
        let value: Value = serde_yaml::from_str(&text).unwrap();
        out.push((
            path.file_name().unwrap().to_string_lossy().into_owned(),
            value,
        ));
    }
    out
}

fn refused(response: &AdmissionResponse) -> (u16, &str) {
    assert!(!response.allowed, "expected a refusal: {response:?}");
    (response.result.code, response.result.message.as_str())
}

fn allowed(response: &AdmissionResponse, what: &str) {
    assert!(
        response.allowed,
        "{what}: refused with {:?}",
        response.result.message
    );
}

async fn create(webhook: &Webhook, object: &Value) -> AdmissionResponse {
    webhook
        .answer(SCALED_OBJECT_PATH, &review("CREATE", object, None, false))
        .await
}

/// Seeds a ScaledObject and waits until the webhook's cache holds it.
async fn seed_scaled_object(kube: &memkube::MemKube, webhook: &Webhook, object: &Value) {
    let before = webhook.state.caches.scaled_objects.len();
    kube.seed(object).unwrap();
    for _ in 0..1000 {
        if webhook.state.caches.scaled_objects.len() > before {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the ScaledObject never reached the cache");
}

async fn seed_and_wait<F: Fn(&Caches) -> bool>(
    kube: &memkube::MemKube,
    webhook: &Webhook,
    object: &Value,
    arrived: F,
) {
    kube.seed(object).unwrap();
    for _ in 0..1000 {
        if arrived(&webhook.state.caches) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the object never reached the cache");
}

#[tokio::test]
async fn kedas_valid_examples_are_allowed() {
    let kube = cluster();
    // The targets of the cpu and memory examples exist with requests, as KEDA requires.
    for (_, so) in fixtures("scaledobject/valid") {
        let namespace = so["metadata"]["namespace"].as_str().unwrap_or("default");
        let _ = kube.create_namespace(namespace);
        let target = &so["spec"]["scaleTargetRef"];
        let mut workload = deployment(
            namespace,
            target["name"].as_str().unwrap(),
            &[
                ("app", Some("100m"), Some("64Mi")),
                ("worker", Some("1"), Some("1Gi")),
            ],
        );
        if target["kind"] == "StatefulSet" {
            workload["kind"] = json!("StatefulSet");
        }
        kube.seed(&workload).unwrap();
    }
    let webhook = Webhook::start(&kube).await;
    for (name, so) in fixtures("scaledobject/valid") {
        allowed(&create(&webhook, &so).await, &name);
    }
    for (name, sj) in fixtures("scaledjob/valid") {
        let answer = webhook
            .answer(SCALED_JOB_PATH, &review("CREATE", &sj, None, false))
            .await;
        allowed(&answer, &name);
    }
    for (name, ta) in fixtures("triggerauthentication/valid") {
        let path = if ta["kind"] == "ClusterTriggerAuthentication" {
            CLUSTER_TRIGGER_AUTHENTICATION_PATH
        } else {
            TRIGGER_AUTHENTICATION_PATH
        };
        allowed(
            &webhook
                .answer(path, &review("CREATE", &ta, None, false))
                .await,
            &name,
        );
    }
}

#[tokio::test]
async fn kedas_invalid_examples_are_refused_with_a_message_naming_the_field() {
    let kube = cluster();
    for (_, so) in fixtures("scaledobject/invalid") {
        let namespace = so["metadata"]["namespace"].as_str().unwrap_or("default");
        let _ = kube.create_namespace(namespace);
        if let Some(target) = so["spec"]["scaleTargetRef"]["name"].as_str() {
            kube.seed(&deployment(
                namespace,
                target,
                &[("app", Some("1"), Some("1Gi"))],
            ))
            .unwrap();
        }
    }
    let webhook = Webhook::start(&kube).await;
    let mut kinds = Vec::new();
    for (name, so) in fixtures("scaledobject/invalid") {
        let answer = create(&webhook, &so).await;
        let (code, message) = refused(&answer);
        assert!(code == 403 || code == 400, "{name}: code {code}");
        assert!(!message.is_empty(), "{name}");
        kinds.push((name, code));
    }
    // Schema violations do not decode (the API server's schema refuses them before us).
    assert_eq!(
        kinds
            .iter()
            .filter(|(_, code)| *code == 400)
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>(),
        [
            "min-replica-count-not-integer.yaml",
            "missing-scale-target-name.yaml",
            "unknown-fallback-behavior.yaml"
        ]
    );
    for (name, sj) in fixtures("scaledjob/invalid") {
        let answer = webhook
            .answer(SCALED_JOB_PATH, &review("CREATE", &sj, None, false))
            .await;
        assert!(!refused(&answer).1.is_empty(), "{name}");
    }
    for (name, ta) in fixtures("triggerauthentication/invalid") {
        let path = if ta["kind"] == "ClusterTriggerAuthentication" {
            CLUSTER_TRIGGER_AUTHENTICATION_PATH
        } else {
            TRIGGER_AUTHENTICATION_PATH
        };
        let answer = webhook
            .answer(path, &review("CREATE", &ta, None, false))
            .await;
        assert!(!refused(&answer).1.is_empty(), "{name}");
    }
}

#[tokio::test]
async fn per_object_rules_answer_with_the_validation_message_and_kedas_reason() {
    let kube = cluster();
    let webhook = Webhook::start(&kube).await;
    let mut so = scaled_object("orders", "orders", redis());
    so["spec"]["minReplicaCount"] = json!(5);
    so["spec"]["maxReplicaCount"] = json!(2);
    let answer = create(&webhook, &so).await;
    assert_eq!(
        refused(&answer),
        (
            403,
            "spec.minReplicaCount (5) must not be greater than spec.maxReplicaCount (2)"
        )
    );
    assert_eq!(answer.result.reason, "Forbidden");
    let metrics = webhook.state.metrics.encode();
    assert!(
        metrics.contains(
            r#"keda_webhook_scaled_object_validations_total{namespace="team",action="create"} 1"#
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"keda_webhook_scaled_object_validation_errors_total{namespace="team",action="create",reason="incorrect-replicas"} 1"#),
        "{metrics}"
    );
}

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

fn hpa(name: &str, target: &str, owner: Option<&str>, annotations: Value) -> Value {
    let mut hpa = json!({
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": "team", "annotations": annotations},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
            "minReplicas": 1,
            "maxReplicas": 5,
        },
    });
    if let Some(owner) = owner {
        hpa["metadata"]["ownerReferences"] = json!([{
            "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "name": owner,
            "uid": "6b1a3c52-0000-4000-8000-000000000001", "controller": true,
        }]);
    }
    hpa
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

fn cpu(container: Option<&str>) -> Value {
    let mut metadata = json!({"value": "60"});
    if let Some(c) = container {
        metadata["containerName"] = json!(c);
    }
    json!({"type": "cpu", "metricType": "Utilization", "metadata": metadata})
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

#[tokio::test]
async fn before_the_caches_have_listed_a_scaled_object_review_gets_503() {
    let webhook = Webhook::serve(Arc::new(Caches::new()), CancellationToken::new()).await;
    let so = scaled_object("orders", "orders", redis());
    match webhook
        .post(SCALED_OBJECT_PATH, &review("CREATE", &so, None, false))
        .await
    {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 503),
        other => panic!("expected 503, got {other:?}"),
    }
    // Rules that need no cache are answered at once.
    let ta = json!({"apiVersion": "keda.sh/v1alpha1", "kind": "TriggerAuthentication",
        "metadata": {"name": "a", "namespace": "team"}, "spec": {}});
    allowed(
        &webhook
            .answer(
                TRIGGER_AUTHENTICATION_PATH,
                &review("CREATE", &ta, None, false),
            )
            .await,
        "a TriggerAuthentication",
    );
}

#[tokio::test]
async fn a_body_that_is_no_admission_review_gets_400() {
    let kube = cluster();
    let webhook = Webhook::start(&kube).await;
    match webhook.post(SCALED_OBJECT_PATH, &json!({"hello": 1})).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 400),
        other => panic!("expected 400, got {other:?}"),
    }
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

/// Issue 29, row 11: KEDA's admission warnings (`verifyScaledObjects`): `pollingInterval` and
/// `cooldownPeriod` set where they change nothing (`minReplicaCount` above 0, no
/// `idleReplicaCount`; `pollingInterval` stays relevant with `useCachedMetrics`). The object is
/// admitted; a refused one carries no warning, as KEDA's validator drops them with an error.
#[tokio::test]
async fn settings_that_change_nothing_are_admitted_with_kedas_warnings() {
    let kube = cluster();
    let webhook = Webhook::start(&kube).await;
    let polling = "PollingInterval is configured but is not relevant. PollingInterval is only relevant when minReplicaCount = 0, idleReplicaCount is set, or useCachedMetrics is enabled";
    let cooldown = "CooldownPeriod is configured but is not relevant. CooldownPeriod is only relevant when minReplicaCount = 0 or idleReplicaCount is set";
    let warnings = |answer: &AdmissionResponse| answer.warnings.clone().unwrap_or_default();

    let mut so = scaled_object("fixed", "fixed", redis());
    so["spec"]["minReplicaCount"] = json!(2);
    so["spec"]["pollingInterval"] = json!(15);
    so["spec"]["cooldownPeriod"] = json!(60);
    let answer = create(&webhook, &so).await;
    allowed(&answer, "fixed");
    assert_eq!(warnings(&answer), [polling, cooldown]);
    // And KEDA's KEDAScalerInfo Events on the object, one per warning; none for a dry run.
    let dry = webhook
        .answer(SCALED_OBJECT_PATH, &review("CREATE", &so, None, true))
        .await;
    assert_eq!(warnings(&dry), [polling, cooldown]);
    let events: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(kube.client(), "team");
    let mut notes: Vec<(String, String, String, Option<i32>)> = Vec::new();
    for _ in 0..500 {
        notes = events
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("fixed"))
            .map(|e| {
                (
                    e.type_.unwrap_or_default(),
                    e.reason.unwrap_or_default(),
                    e.note.unwrap_or_default(),
                    e.series.map(|s| s.count),
                )
            })
            .collect();
        if notes.len() >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    notes.sort();
    assert_eq!(
        notes,
        [
            (
                "Normal".into(),
                "KEDAScalerInfo".into(),
                cooldown.into(),
                None
            ),
            (
                "Normal".into(),
                "KEDAScalerInfo".into(),
                polling.into(),
                None
            ),
        ]
    );

    // useCachedMetrics keeps pollingInterval relevant.
    let mut cached = so.clone();
    cached["metadata"]["name"] = json!("cached");
    cached["spec"]["scaleTargetRef"]["name"] = json!("cached");
    cached["spec"]["triggers"][0]["useCachedMetrics"] = json!(true);
    let answer = create(&webhook, &cached).await;
    allowed(&answer, "cached");
    assert_eq!(warnings(&answer), [cooldown]);

    // idleReplicaCount or minReplicaCount 0 keep both relevant; unset ones warn about nothing.
    for (name, patch) in [
        ("idle", json!({"idleReplicaCount": 0})),
        ("to-zero", json!({"minReplicaCount": 0})),
    ] {
        let mut quiet = so.clone();
        quiet["metadata"]["name"] = json!(name);
        quiet["spec"]["scaleTargetRef"]["name"] = json!(name);
        for (k, v) in patch.as_object().unwrap() {
            quiet["spec"][k] = v.clone();
        }
        let answer = create(&webhook, &quiet).await;
        allowed(&answer, name);
        assert_eq!(warnings(&answer), Vec::<String>::new(), "{name}");
    }
    let mut plain = scaled_object("plain", "plain", redis());
    plain["spec"]["minReplicaCount"] = json!(2);
    let answer = create(&webhook, &plain).await;
    allowed(&answer, "plain");
    assert_eq!(answer.warnings, None);

    // Refused: no warnings.
    let mut refused_so = so.clone();
    refused_so["metadata"]["name"] = json!("bad");
    refused_so["spec"]["scaleTargetRef"]["name"] = json!("bad");
    refused_so["spec"]["maxReplicaCount"] = json!(1);
    let answer = create(&webhook, &refused_so).await;
    refused(&answer);
    assert_eq!(answer.warnings, None);
}

/// Issue 29, row 11: the `reason` label of a refusal is KEDA's: `fallback.behavior:
/// scalingModifiers` without a formula counts as `scaling-modifiers-fallback` (KEDA's own check
/// of it), not `incorrect-fallback`.
#[tokio::test]
async fn a_scaling_modifiers_fallback_without_formula_counts_under_kedas_reason() {
    let kube = cluster();
    let webhook = Webhook::start(&kube).await;
    let mut so = scaled_object("modifiers", "modifiers", redis());
    so["spec"]["fallback"] =
        json!({"failureThreshold": 3, "replicas": 2, "behavior": "scalingModifiers"});
    let answer = create(&webhook, &so).await;
    let (code, message) = refused(&answer);
    assert_eq!(code, 403);
    assert!(
        message.contains("spec.advanced.scalingModifiers.formula"),
        "{message}"
    );
    let metrics = webhook.state.metrics.encode();
    assert!(
        metrics.contains(r#"keda_webhook_scaled_object_validation_errors_total{namespace="team",action="create",reason="scaling-modifiers-fallback"} 1"#),
        "{metrics}"
    );
    assert!(
        !metrics.contains(r#"reason="incorrect-fallback""#),
        "{metrics}"
    );
}
