//! KEDA's Events on ScaledObjects that alerting relies on (issue 16), against memkube with the
//! `dial` scaler (`tests/common/dial.rs`).

mod common;
mod scenarios;

#[allow(dead_code)]
#[path = "../../scalers/tests/common/mod.rs"]
mod redis_common;

use common::world::{NS, dial_object, dial_world};
use kube::Api;
use kube::api::ListParams;
use scenarios::{World, eventually};

/// The Events on `name` with `reason`: (type, note).
async fn events(w: &World, name: &str, reason: &str) -> Vec<(String, String)> {
    let api: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(w.client.clone(), NS);
    api.list(&ListParams::default())
        .await
        .expect("list Events")
        .items
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                && e.reason.as_deref() == Some(reason)
        })
        .map(|e| (e.type_.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect()
}

/// A scaler whose read fails gives its ScaledObject KEDA's `KEDAScalerFailed` Warning with the
/// scaler's error as the note, so event-based alerts fire.
#[tokio::test]
async fn a_failing_scaler_read_emits_a_keda_scaler_failed_warning() {
    let Some((_server, w, dials)) = dial_world("keda-scaler-failed").await else {
        return;
    };
    w.deployment("flaky", 0).await;
    dials.fail_on_read("flaky", true);
    let op = w.start_operator();
    let so = w.create(&dial_object("flaky", 3)).await;
    w.polls_reach(&op, &so, 1).await;
    let (kind, note) = eventually("a KEDAScalerFailed Event", || async {
        events(&w, "flaky", "KEDAScalerFailed")
            .await
            .into_iter()
            .next()
    })
    .await;
    assert_eq!(kind, "Warning");
    assert!(note.contains("dial flaky is down"), "{note}");
    op.stop().await;
}

/// `keda_scaler_detail_errors_total` of `name`.
fn scaler_errors(w: &World, name: &str) -> String {
    w.metrics
        .encode()
        .lines()
        .filter(|l| {
            l.starts_with("keda_scaler_detail_errors_total{")
                && l.contains(&format!("scaledObject=\"{name}\""))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// All `reason` Events on `name`, with their series counts: what changes when one is repeated.
async fn event_snapshot(w: &World, name: &str, reason: &str) -> Vec<Option<i32>> {
    let api: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(w.client.clone(), NS);
    api.list(&ListParams::default())
        .await
        .expect("list Events")
        .items
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                && e.reason.as_deref() == Some(reason)
        })
        .map(|e| e.series.map(|s| s.count))
        .collect()
}

/// Issue 29, row 6: while a fallback value stands in for a failing read there is no
/// `KEDAScalerFailed` and no error count (KEDA's GetMetricsWithFallback returns no error then);
/// before the threshold is crossed both are there.
#[tokio::test]
async fn a_fallback_standing_in_suppresses_keda_scaler_failed_and_the_error_count() {
    let Some((_server, w, dials)) = dial_world("fallback-quiet").await else {
        return;
    };
    w.deployment("quiet", 1).await;
    dials.fail_on_read("quiet", true);
    let op = w.start_operator();
    let so = w
        .create(
            "
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: quiet
spec:
  scaleTargetRef:
    name: quiet
  pollingInterval: 10
  minReplicaCount: 1
  maxReplicaCount: 5
  fallback:
    failureThreshold: 1
    replicas: 2
  triggers:
    - type: dial
      metadata:
        dial: quiet
",
        )
        .await;
    w.polls_reach(&op, &so, 1).await;
    // Poll 1: one failure, not above the threshold: KEDA's Warning and one error.
    eventually("a KEDAScalerFailed Event", || async {
        (!event_snapshot(&w, "quiet", "KEDAScalerFailed")
            .await
            .is_empty())
        .then_some(())
    })
    .await;
    let errors_before = scaler_errors(&w, "quiet");
    assert!(errors_before.ends_with(" 1"), "{errors_before}");
    let events_before = event_snapshot(&w, "quiet", "KEDAScalerFailed").await;
    // Polls 2 and 3: the fallback stands in.
    common::world::poll_all(&w, &op, &[&so], 10).await;
    common::world::poll_all(&w, &op, &[&so], 10).await;
    eventually("Fallback=True", || async {
        scenarios::condition(&w.get("quiet").await, "Fallback")
            .filter(|(status, _)| status == "True")
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        scaler_errors(&w, "quiet"),
        errors_before,
        "no error counted"
    );
    assert_eq!(
        event_snapshot(&w, "quiet", "KEDAScalerFailed").await,
        events_before,
        "no KEDAScalerFailed while the fallback stands in"
    );
    op.stop().await;
}

/// Issue 29, row 6: with `scalingModifiers` a failed read is KEDA's `KEDAMetricSourceFailed`.
#[tokio::test]
async fn a_failed_read_with_scaling_modifiers_emits_keda_metric_source_failed() {
    let Some((_server, w, dials)) = dial_world("metric-source-failed").await else {
        return;
    };
    w.deployment("formula", 1).await;
    dials.fail_on_read("formula", true);
    let op = w.start_operator();
    let so = w
        .create(
            "
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: formula
spec:
  scaleTargetRef:
    name: formula
  pollingInterval: 10
  advanced:
    scalingModifiers:
      formula: \"d * 2\"
      target: \"5\"
  triggers:
    - type: dial
      name: d
      metadata:
        dial: formula
",
        )
        .await;
    w.polls_reach(&op, &so, 1).await;
    let (kind, note) = eventually("a KEDAMetricSourceFailed Event", || async {
        events(&w, "formula", "KEDAMetricSourceFailed")
            .await
            .into_iter()
            .next()
    })
    .await;
    assert_eq!(kind, "Warning");
    assert!(note.contains("dial formula is down"), "{note}");
    assert!(events(&w, "formula", "KEDAScalerFailed").await.is_empty());
    op.stop().await;
}

/// Issue 29, row 11: a scaler that cannot be built (a redis trigger pointing at a closed port)
/// gives its ScaledObject KEDA's `KEDAScalerFailed` Warning within one reconcile, as KEDA's
/// scalers builder emits it, with the scaler's error (never what a server said).
#[tokio::test]
async fn a_scaler_that_cannot_be_built_emits_keda_scaler_failed() {
    let Some((_server, w, _dials)) = dial_world("keda-scaler-build-failed").await else {
        return;
    };
    w.deployment("unbuilt", 0).await;
    let _op = w.start_operator();
    let yaml = scenarios::redis_object("unbuilt", "unbuilt", "unbuilt-list", "", "")
        .replace("127.0.0.1:6379", "127.0.0.1:1");
    w.create(&yaml).await;
    let (kind, note) = eventually("a KEDAScalerFailed Event", || async {
        events(&w, "unbuilt", "KEDAScalerFailed")
            .await
            .into_iter()
            .next()
    })
    .await;
    assert_eq!(kind, "Warning");
    assert!(note.contains("redis"), "{note}");
    // The same text as the Ready condition's, which names the trigger and the failure.
    let (_, message) = common::world::not_ready(&w, "unbuilt").await;
    assert!(
        message.contains(&note) || note.contains(&message),
        "{note} / {message}"
    );
}

/// Issue 29, row 11: the Ready Event and the check-failed Events in KEDA's current words
/// (`pkg/common/message`): "ScaledObject is ready for scaling"; a missing target gets KEDA's
/// "Target resource doesn't exist" and "ScaledObject doesn't have correct scaleTargetRef
/// specification: ..." (KEDA's text first, then keda-rs's naming the field).
#[tokio::test]
async fn ready_and_check_failed_events_are_in_keda_s_words() {
    let Some((_server, w, _dials)) = dial_world("keda-event-words").await else {
        return;
    };
    w.deployment("here", 0).await;
    let _op = w.start_operator();
    w.create(&dial_object("here", 3)).await;
    w.create(&dial_object("nowhere", 3)).await;
    let (kind, note) = eventually("a ScaledObjectReady Event", || async {
        events(&w, "here", "ScaledObjectReady")
            .await
            .into_iter()
            .next()
    })
    .await;
    assert_eq!(
        (kind.as_str(), note.as_str()),
        ("Normal", "ScaledObject is ready for scaling")
    );
    let notes = eventually("both ScaledObjectCheckFailed Events", || async {
        let notes: Vec<String> = events(&w, "nowhere", "ScaledObjectCheckFailed")
            .await
            .into_iter()
            .map(|(kind, note)| {
                assert_eq!(kind, "Warning");
                note
            })
            .collect();
        (notes.len() >= 2).then_some(notes)
    })
    .await;
    assert!(
        notes.iter().any(|n| n == "Target resource doesn't exist"),
        "{notes:?}"
    );
    let prefixed =
        "ScaledObject doesn't have correct scaleTargetRef specification: spec.scaleTargetRef: ";
    assert!(notes.iter().any(|n| n.starts_with(prefixed)), "{notes:?}");
    let (_, message) = common::world::not_ready(&w, "nowhere").await;
    assert!(message.starts_with(prefixed), "{message}");
}

/// Issue 29, row 11: KEDA's scale handler events and types: `KEDAScalersStarted` "Started
/// scalers watch" when a loop first starts (besides "Scaler dial is built"),
/// `ScaledObjectPaused` for `paused-scale-in` too, `KEDAScalersStopped` "Stopped scalers
/// watch" when a pause stops the loop, and `ScaledObjectDeleted` a Warning.
#[tokio::test]
async fn scaler_watch_pause_and_deletion_events_have_keda_s_types_and_texts() {
    let Some((_server, w, _dials)) = dial_world("keda-event-types").await else {
        return;
    };
    w.deployment("watched", 0).await;
    w.deployment("one-way", 0).await;
    let _op = w.start_operator();
    w.create(&dial_object("watched", 3)).await;
    let started = eventually("both KEDAScalersStarted Events", || async {
        let notes = events(&w, "watched", "KEDAScalersStarted").await;
        (notes.len() >= 2).then_some(notes)
    })
    .await;
    for expected in ["Started scalers watch", "Scaler dial is built"] {
        assert!(
            started
                .iter()
                .any(|(kind, note)| kind == "Normal" && note == expected),
            "{started:?}"
        );
    }
    let one_way = dial_object("one-way", 3).replace(
        "metadata:\n  name: one-way",
        "metadata:\n  name: one-way\n  annotations:\n    autoscaling.keda.sh/paused-scale-in: \"true\"",
    );
    w.create(&one_way).await;
    let (kind, note) = eventually("a ScaledObjectPaused Event", || async {
        events(&w, "one-way", "ScaledObjectPaused")
            .await
            .into_iter()
            .next()
    })
    .await;
    assert_eq!(
        (kind.as_str(), note.as_str()),
        ("Normal", "ScaledObject is paused")
    );

    w.annotate("watched", "autoscaling.keda.sh/paused", Some("true"))
        .await;
    let (kind, note) = eventually("a KEDAScalersStopped Event", || async {
        events(&w, "watched", "KEDAScalersStopped")
            .await
            .into_iter()
            .next()
    })
    .await;
    assert_eq!(
        (kind.as_str(), note.as_str()),
        ("Normal", "Stopped scalers watch")
    );
    w.delete("one-way").await;
    let (kind, note) = eventually("a ScaledObjectDeleted Event", || async {
        events(&w, "one-way", "ScaledObjectDeleted")
            .await
            .into_iter()
            .next()
    })
    .await;
    assert_eq!(
        (kind.as_str(), note.as_str()),
        ("Warning", "ScaledObject was deleted")
    );
}

/// Every Event on the object `name` of `kind`, in any namespace: (namespace, type, reason, note).
async fn auth_events(
    client: &kube::Client,
    kind: &str,
    name: &str,
) -> Vec<(String, String, String, String)> {
    let api: Api<k8s_openapi::api::events::v1::Event> = Api::all(client.clone());
    api.list(&ListParams::default())
        .await
        .expect("list Events")
        .items
        .into_iter()
        .filter(|e| {
            e.regarding
                .as_ref()
                .is_some_and(|r| r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name))
        })
        .map(|e| {
            (
                e.metadata.namespace.unwrap_or_default(),
                e.type_.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.note.unwrap_or_default(),
            )
        })
        .collect()
}

/// Issue 29, row 11: KEDA's TriggerAuthentication and ClusterTriggerAuthentication Events.
/// Added when one appears (generation 1), an update (KEDA's reason string
/// `ClusterTriggerAuthenticationUpdated` and note for both kinds) when its generation changes
/// and not for a label change, Deleted when it goes; one left with KEDA's finalizer is freed on
/// deletion; one outside `WATCH_LABEL_SELECTOR_FOR_TRIGGERAUTH` gets nothing.
#[tokio::test]
async fn trigger_authentications_get_keda_s_added_updated_and_deleted_events() {
    use keda_api::{ClusterTriggerAuthentication, TriggerAuthentication};
    use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
    use serde_json::json;

    let server = memkube::MemKube::new();
    let crds = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/crd");
    server.load_crds_from_dir(crds).expect("CRDs load");
    server.create_namespace("team").expect("namespace");
    let client = server.client();
    let tas = Api::<TriggerAuthentication>::namespaced(client.clone(), "team");
    let ctas = Api::<ClusterTriggerAuthentication>::all(client.clone());
    let ta = |name: &str, labels: serde_json::Value, finalizers: serde_json::Value| {
        serde_json::from_value::<TriggerAuthentication>(json!({
            "apiVersion": "keda.sh/v1alpha1", "kind": "TriggerAuthentication",
            "metadata": {"name": name, "namespace": "team", "labels": labels,
                         "finalizers": finalizers},
            "spec": {"env": [{"parameter": "host", "name": "HOST"}]}
        }))
        .expect("ta")
    };
    // Present before the operator starts, already edited once: an update at start, as KEDA's
    // reconcile of its first list.
    tas.create(
        &PostParams::default(),
        &ta("edited", json!({"auth": "mine"}), json!([])),
    )
    .await
    .expect("create");
    tas.patch(
        "edited",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"env": [{"parameter": "host", "name": "OTHER"}]}})),
    )
    .await
    .expect("edit");

    let config = keda_operator::ControllerConfig {
        watch_scope: keda_operator::resolve::WatchScope::Namespaces(vec!["team".into()]),
        resolver: keda_operator::resolve::ResolverConfig {
            auth_label_selector: Some("auth=mine".into()),
            ..keda_operator::resolve::ResolverConfig::new("keda")
        },
        ..keda_operator::ControllerConfig::default()
    };
    let cancel = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(keda_operator::auth_events::run(
        client.clone(),
        config,
        cancel.clone(),
    ));
    let expect = |kind: &'static str, name: &'static str, reason: &'static str, want: usize| {
        let client = client.clone();
        async move {
            eventually(&format!("{want} {reason} on {kind} {name}"), || async {
                let found: Vec<_> = auth_events(&client, kind, name)
                    .await
                    .into_iter()
                    .filter(|e| e.2 == reason)
                    .collect();
                (found.len() >= want).then_some(found)
            })
            .await
        }
    };

    let found = expect(
        "TriggerAuthentication",
        "edited",
        "ClusterTriggerAuthenticationUpdated",
        1,
    )
    .await;
    assert_eq!(
        found[0],
        (
            "team".to_string(),
            "Normal".to_string(),
            "ClusterTriggerAuthenticationUpdated".to_string(),
            "ClusterTriggerAuthentication edited is updated".to_string()
        )
    );

    tas.create(
        &PostParams::default(),
        &ta("fresh", json!({"auth": "mine"}), json!([])),
    )
    .await
    .expect("create");
    let found = expect(
        "TriggerAuthentication",
        "fresh",
        "TriggerAuthenticationAdded",
        1,
    )
    .await;
    assert_eq!(found[0].1, "Normal");
    assert_eq!(found[0].3, "New TriggerAuthentication configured");

    let cta: ClusterTriggerAuthentication = serde_json::from_value(json!({
        "apiVersion": "keda.sh/v1alpha1", "kind": "ClusterTriggerAuthentication",
        "metadata": {"name": "shared", "labels": {"auth": "mine"}},
        "spec": {"env": [{"parameter": "host", "name": "HOST"}]}
    }))
    .expect("cta");
    ctas.create(&PostParams::default(), &cta)
        .await
        .expect("cta");
    let found = expect(
        "ClusterTriggerAuthentication",
        "shared",
        "ClusterTriggerAuthenticationAdded",
        1,
    )
    .await;
    assert_eq!(
        found[0].0, "default",
        "cluster objects' Events are in default"
    );
    assert_eq!(found[0].3, "New ClusterTriggerAuthentication configured");
    ctas.patch(
        "shared",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"env": [{"parameter": "host", "name": "OTHER"}]}})),
    )
    .await
    .expect("edit cta");
    let found = expect(
        "ClusterTriggerAuthentication",
        "shared",
        "ClusterTriggerAuthenticationUpdated",
        1,
    )
    .await;
    assert_eq!(found[0].3, "ClusterTriggerAuthentication shared is updated");

    // A label change is no update (KEDA's GenerationChangedPredicate).
    tas.patch(
        "fresh",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"extra": "x"}}})),
    )
    .await
    .expect("label");
    // Outside the label selector: never any Event.
    tas.create(
        &PostParams::default(),
        &ta("foreign", json!({"auth": "theirs"}), json!([])),
    )
    .await
    .expect("create");
    // Left by KEDA with its finalizer: deleting it completes, with KEDA's Event.
    tas.create(
        &PostParams::default(),
        &ta(
            "from-keda",
            json!({"auth": "mine"}),
            json!(["finalizer.keda.sh"]),
        ),
    )
    .await
    .expect("create");
    expect(
        "TriggerAuthentication",
        "from-keda",
        "TriggerAuthenticationAdded",
        1,
    )
    .await;
    tas.delete("from-keda", &DeleteParams::default())
        .await
        .expect("delete");
    tas.delete("fresh", &DeleteParams::default())
        .await
        .expect("delete");
    for name in ["from-keda", "fresh"] {
        let found = expect(
            "TriggerAuthentication",
            name,
            "TriggerAuthenticationDeleted",
            1,
        )
        .await;
        assert_eq!(found[0].3, "TriggerAuthentication was deleted");
    }
    eventually("the finalizer left by KEDA is removed", || async {
        tas.get_opt("from-keda")
            .await
            .expect("get")
            .is_none()
            .then_some(())
    })
    .await;
    ctas.delete("shared", &DeleteParams::default())
        .await
        .expect("delete");
    let found = expect(
        "ClusterTriggerAuthentication",
        "shared",
        "ClusterTriggerAuthenticationDeleted",
        1,
    )
    .await;
    assert_eq!(found[0].3, "ClusterTriggerAuthentication was deleted");

    // Everything has been seen: exactly one Event each, none for the label change or the
    // foreign object.
    let fresh = auth_events(&client, "TriggerAuthentication", "fresh").await;
    let mut reasons: Vec<&str> = fresh.iter().map(|e| e.2.as_str()).collect();
    reasons.sort_unstable();
    assert_eq!(
        reasons,
        ["TriggerAuthenticationAdded", "TriggerAuthenticationDeleted"],
        "{fresh:?}"
    );
    // Published once each: a repeat would be folded into a series of the same Event.
    let api: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), "team");
    for e in api.list(&ListParams::default()).await.expect("list").items {
        assert!(e.series.is_none(), "published more than once: {e:?}");
    }
    assert_eq!(
        auth_events(&client, "TriggerAuthentication", "foreign").await,
        []
    );
    cancel.cancel();
    tokio::time::timeout(scenarios::WAIT, task)
        .await
        .expect("stops")
        .expect("task");
}
