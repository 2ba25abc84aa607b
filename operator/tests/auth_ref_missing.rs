//! Issue 29, row 4: a missing TriggerAuthentication, Secret, ConfigMap or key resolves as KEDA
//! resolves it (the trigger built without it, or the parameter empty) with a Warning Event
//! `KEDAAuthRefMissing` naming what is missing; the operator in process against memkube and the
//! local Redis (which has no password).

mod common;
mod scenarios;

#[allow(dead_code)]
#[path = "../../scalers/tests/common/mod.rs"]
mod redis_common;

use common::world::{NS, becomes_ready, not_ready, world};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use keda_api::TriggerAuthentication;
use kube::Api;
use kube::api::{ListParams, PostParams};
use scenarios::{World, eventually, redis_object};
use serde::de::DeserializeOwned;

const REASON: &str = "KEDAAuthRefMissing";
/// The value of the test Secret: never in an Event.
const SECRET_VALUE: &str = "row4-never-print-me";

fn yaml<T: DeserializeOwned>(text: &str) -> T {
    serde_yaml::from_str(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// The `KEDAAuthRefMissing` Events on `name`: (type, note, related kind/namespace/name
/// fieldPath).
async fn missing_events(w: &World, name: &str) -> Vec<(String, String, String)> {
    let api: Api<Event> = Api::namespaced(w.client.clone(), NS);
    let mut found: Vec<(String, String, String)> = api
        .list(&ListParams::default())
        .await
        .expect("list Events")
        .items
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                && e.reason.as_deref() == Some(REASON)
        })
        .map(|e| {
            let related = e
                .related
                .map(|r| {
                    format!(
                        "{}/{}/{}{}",
                        r.kind.unwrap_or_default(),
                        r.namespace.unwrap_or_default(),
                        r.name.unwrap_or_default(),
                        r.field_path.map(|f| format!(" {f}")).unwrap_or_default()
                    )
                })
                .unwrap_or_default();
            (
                e.type_.unwrap_or_default(),
                e.note.unwrap_or_default(),
                related,
            )
        })
        .collect();
    found.sort_by(|a, b| a.2.cmp(&b.2));
    found
}

/// Waits for `n` `KEDAAuthRefMissing` Events on `name`.
async fn wait_missing_events(w: &World, name: &str, n: usize) -> Vec<(String, String, String)> {
    let events = eventually(&format!("{n} {REASON} Events on {name}"), || async {
        let events = missing_events(w, name).await;
        (events.len() >= n).then_some(events)
    })
    .await;
    for (kind, note, _) in &events {
        assert_eq!(kind, "Warning", "{note}");
        assert!(!note.contains(SECRET_VALUE), "{note}");
    }
    events
}

/// A redis ScaledObject on Deployment `name` whose trigger names TriggerAuthentication `auth`;
/// `address` false leaves the trigger without one (it must come from the TriggerAuthentication).
fn redis_with_auth(name: &str, auth: &str, address: bool) -> String {
    let mut text = redis_object(name, name, &format!("row4-{name}"), "", "");
    if !address {
        text = text.replace("        address: 127.0.0.1:6379\n", "");
    }
    text + &format!("      authenticationRef:\n        name: {auth}\n")
}

async fn create_auth(w: &World, text: &str) {
    let api: Api<TriggerAuthentication> = Api::namespaced(w.client.clone(), NS);
    api.create(&PostParams::default(), &yaml(text))
        .await
        .expect("TriggerAuthentication created");
}

/// A redis trigger naming a TriggerAuthentication that does not exist builds from its metadata
/// alone and scales (Ready=True, polls without `KEDAScalerFailed`), with one Warning naming the
/// TriggerAuthentication (KEDA: "error getting triggerAuth" in its log, the trigger goes on).
#[tokio::test]
async fn a_missing_trigger_authentication_is_a_warning_and_the_trigger_works_without_it() {
    let Some((_server, w)) = world("row4-missing-ta", keda_scalers::Registry::builtin()).await
    else {
        return;
    };
    w.deployment("no-auth", 0).await;
    let op = w.start_operator_resolving();
    let so = w.create(&redis_with_auth("no-auth", "absent", true)).await;
    becomes_ready(&w, "no-auth").await;
    w.polls_reach(&op, &so, 1).await;
    let events = wait_missing_events(&w, "no-auth", 1).await;
    assert_eq!(
        events,
        [(
            "Warning".to_string(),
            "trigger 0 (redis): authenticationRef: TriggerAuthentication team/absent not found; \
             the trigger is built with its metadata only, as KEDA does"
                .to_string(),
            "TriggerAuthentication/team/absent".to_string()
        )]
    );
    let api: Api<Event> = Api::namespaced(w.client.clone(), NS);
    let failed = api
        .list(&ListParams::default())
        .await
        .expect("list Events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("KEDAScalerFailed"))
        .count();
    assert_eq!(
        failed, 0,
        "the scaler reads without the TriggerAuthentication"
    );
    op.stop().await;
}

/// A TriggerAuthentication naming a Secret that does not exist, a key an existing Secret does
/// not have and a ConfigMap that does not exist: each parameter is empty (a redis without a
/// password connects), the object is Ready, and each missing object or key is its own Warning
/// Event, its `related` reference the missing object.
#[tokio::test]
async fn missing_secrets_config_maps_and_keys_are_empty_parameters_and_one_warning_each() {
    let Some((_server, w)) = world("row4-missing-refs", keda_scalers::Registry::builtin()).await
    else {
        return;
    };
    let secrets: Api<Secret> = Api::namespaced(w.client.clone(), NS);
    let mut creds: Secret = yaml("apiVersion: v1\nkind: Secret\nmetadata: {name: creds}");
    creds.data = Some(
        [(
            "other".to_string(),
            k8s_openapi::ByteString(SECRET_VALUE.as_bytes().to_vec()),
        )]
        .into(),
    );
    secrets
        .create(&PostParams::default(), &creds)
        .await
        .expect("Secret created");
    create_auth(
        &w,
        "apiVersion: keda.sh/v1alpha1
kind: TriggerAuthentication
metadata: {name: partial}
spec:
  configMapTargetRef: [{parameter: port, name: no-config-map, key: port}]
  secretTargetRef:
    - {parameter: password, name: gone, key: password}
    - {parameter: username, name: creds, key: user}
",
    )
    .await;
    w.deployment("partial", 0).await;
    let op = w.start_operator_resolving();
    let so = w.create(&redis_with_auth("partial", "partial", true)).await;
    becomes_ready(&w, "partial").await;
    w.polls_reach(&op, &so, 1).await;
    let events = wait_missing_events(&w, "partial", 3).await;
    let related: Vec<&str> = events.iter().map(|(_, _, r)| r.as_str()).collect();
    assert_eq!(
        related,
        [
            "ConfigMap/team/no-config-map",
            "Secret/team/creds data.user",
            "Secret/team/gone"
        ]
    );
    assert!(
        events[1].1.ends_with(
            "parameter \"username\": key \"user\" not found in Secret team/creds; \
             parameter \"username\" is empty, as in KEDA"
        ),
        "{}",
        events[1].1
    );
    assert!(
        events[2]
            .1
            .contains("parameter \"password\": Secret team/gone not found"),
        "{}",
        events[2].1
    );

    op.stop().await;
}

/// A trigger whose required parameter was to come from a missing Secret fails with the
/// scaler's own error naming the parameter (as KEDA's scaler parse does), plus the Warning
/// naming the Secret.
#[tokio::test]
async fn a_required_parameter_from_a_missing_secret_fails_with_the_scaler_s_own_error() {
    let Some((_server, w)) = world("row4-required", keda_scalers::Registry::builtin()).await else {
        return;
    };
    create_auth(
        &w,
        "apiVersion: keda.sh/v1alpha1
kind: TriggerAuthentication
metadata: {name: address-auth}
spec:
  secretTargetRef: [{parameter: address, name: redis-address, key: address}]
",
    )
    .await;
    w.deployment("needs-address", 0).await;
    let _op = w.start_operator_resolving();
    w.create(&redis_with_auth("needs-address", "address-auth", false))
        .await;
    let (_, message) = not_ready(&w, "needs-address").await;
    assert!(
        message.contains("missing required parameter") && message.contains("\"address\""),
        "{message}"
    );
    let events = wait_missing_events(&w, "needs-address", 1).await;
    assert_eq!(events[0].2, "Secret/team/redis-address");
}

/// A ScaledJob goes through the same resolution: a redis trigger naming a missing
/// TriggerAuthentication makes the ScaledJob Ready, with the Warning on the ScaledJob.
#[tokio::test]
async fn a_scaled_job_naming_a_missing_trigger_authentication_is_ready_with_the_warning() {
    use keda_api::ScaledJob;
    use keda_operator::ControllerConfig;
    use keda_operator::resolve::WatchScope;
    use keda_operator::scaled_job::ScaledJobController;
    use keda_operator::scalers::ScalerEnv;

    let Some((_server, w)) = world("row4-scaled-job", keda_scalers::Registry::builtin()).await
    else {
        return;
    };
    let config = ControllerConfig {
        env: ScalerEnv {
            pools: w.pools.clone(),
            clock: w.clock.clock(),
            registry: w.registry.clone(),
            ..ScalerEnv::default()
        },
        ticks: std::sync::Arc::new(w.ticks.clone()),
        clock: w.clock.clock(),
        watch_scope: WatchScope::Namespaces(vec![NS.to_string()]),
        retry_after_error: std::time::Duration::from_millis(200),
        ..ControllerConfig::default()
    };
    let controller = ScaledJobController::new(w.client.clone(), config);
    let shutdown = tokio_util::sync::CancellationToken::new();
    let token = shutdown.clone();
    let task = tokio::spawn(async move {
        let _ = controller.run(token).await;
    });
    let sj: ScaledJob = yaml(&format!(
        r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledJob
metadata:
  name: job-no-auth
  namespace: {NS}
spec:
  jobTargetRef:
    template:
      spec:
        containers: [{{ name: worker, image: busybox }}]
  triggers:
    - type: redis
      metadata:
        address: 127.0.0.1:6379
        listName: row4-job-no-auth
        listLength: "5"
      authenticationRef:
        name: absent-for-jobs
"#
    ));
    let jobs: Api<ScaledJob> = Api::namespaced(w.client.clone(), NS);
    jobs.create(&PostParams::default(), &sj)
        .await
        .expect("ScaledJob created");
    eventually("Ready=True on the ScaledJob", || async {
        let sj = jobs.get("job-no-auth").await.ok()?;
        sj.status?
            .conditions?
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
            .then_some(())
    })
    .await;
    let events = wait_missing_events(&w, "job-no-auth", 1).await;
    assert_eq!(events[0].2, "TriggerAuthentication/team/absent-for-jobs");
    shutdown.cancel();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), task).await;
}
