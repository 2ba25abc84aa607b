//! Per-object rules: KEDA's examples, the validation messages and reasons, KEDA's warnings.

use super::*;

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
