//! The ScaledObject scenarios against the in-memory API server and the local Redis.

mod scenarios;

#[allow(dead_code)]
#[path = "../../scalers/tests/common/mod.rs"]
mod redis_common;

use kube::api::{Patch, PatchParams};
use memkube::{MemKube, Verb};
use scenarios::World;
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

fn list(prefix: &str) -> String {
    redis_common::unique(prefix)
}

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
async fn a_deleted_object_leaves_no_loop_no_hpa_and_restores_replicas() {
    let Some((_server, w)) = world("restore").await else {
        return;
    };
    scenarios::deletion_restores(&w, &list("restore")).await;
}

#[tokio::test]
async fn broken_objects_are_not_ready_with_a_message_naming_the_field() {
    let Some((_server, w)) = world("broken").await else {
        return;
    };
    scenarios::broken_objects(&w).await;
}

#[tokio::test]
async fn a_formula_bomb_is_not_ready_naming_the_formula_and_its_budget_and_gets_no_hpa() {
    let Some((_server, w)) = world("formula-bomb").await else {
        return;
    };
    w.deployment("bomb", 0).await;
    let op = w.start_operator();
    // Nested map over array literals of 200 elements: 8 million array elements if it ran.
    let ones = format!("[{}]", vec!["1"; 200].join(","));
    let formula = format!("queue + count(map({ones}, map({ones}, map({ones}, #))), true)");
    let yaml = format!(
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata:\n  name: bomb\nspec:\n  \
         scaleTargetRef:\n    name: bomb\n  advanced:\n    scalingModifiers:\n      \
         formula: \"{formula}\"\n      target: \"5\"\n  triggers:\n    - type: redis\n      \
         name: queue\n      metadata:\n        address: 127.0.0.1:6379\n        listName: {}\n",
        list("bomb")
    );
    w.create(&yaml).await;
    let (_, reason, message) = scenarios::eventually("Ready=False on the bomb", || async {
        scenarios::ready(&w.get("bomb").await).filter(|(s, _, _)| s == "False")
    })
    .await;
    assert_eq!(reason, "ScaledObjectCheckFailed");
    assert!(
        message.contains("spec.advanced.scalingModifiers.formula: evaluating the formula may take")
            && message.contains("over the step budget of 100000 steps"),
        "{message}"
    );
    assert!(
        w.hpas()
            .get_opt("keda-hpa-bomb")
            .await
            .expect("HPA lookup")
            .is_none(),
        "a refused object gets no HPA"
    );
    op.stop().await;
}

/// KEDA's reconcile first puts `Paused` right (`Paused=False` / `ScaledObjectUnpaused` once the
/// pause annotation is gone), then runs its checks; a failed check sets `Ready=False` and
/// `Active=Unknown` / `UnknownState`. Unpausing and breaking the object in one update must not
/// leave `Paused=True` beside `Ready=False`.
#[tokio::test]
async fn unpausing_an_object_whose_check_fails_sets_paused_false_and_active_unknown() {
    let Some((_server, w)) = world("unpause-broken").await else {
        return;
    };
    let list = list("unpause-broken");
    w.deployment("unpause", 0).await;
    let op = w.start_operator();
    w.create(&scenarios::redis_object(
        "unpause",
        "unpause",
        &list,
        "",
        "autoscaling.keda.sh/paused-replicas: \"1\"",
    ))
    .await;
    scenarios::eventually("Paused=True", || async {
        (scenarios::condition(&w.get("unpause").await, "Paused")
            == Some(("True".into(), "ScaledObjectPaused".into())))
        .then_some(())
    })
    .await;

    // One update: the pause annotation removed and the target renamed to one that is missing.
    let patch = json!({
        "metadata": { "annotations": { "autoscaling.keda.sh/paused-replicas": null } },
        "spec": { "scaleTargetRef": { "name": "missing" } },
    });
    w.scaled_objects()
        .patch("unpause", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch");
    let so = scenarios::eventually("Ready=False", || async {
        let so = w.get("unpause").await;
        scenarios::ready(&so)
            .is_some_and(|(s, _, _)| s == "False")
            .then_some(so)
    })
    .await;
    let conditions = so
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let find = |t: &str| {
        let c = conditions
            .iter()
            .find(|c| c.type_ == t)
            .unwrap_or_else(|| panic!("condition {t}"));
        (
            c.status.as_str(),
            c.reason.as_deref().unwrap_or_default(),
            c.message.as_deref().unwrap_or_default(),
        )
    };
    assert_eq!(find("Ready").1, "ScaledObjectCheckFailed");
    assert_eq!(
        find("Paused"),
        (
            "False",
            "ScaledObjectUnpaused",
            "pause annotation removed for ScaledObject"
        )
    );
    assert_eq!(
        find("Active"),
        ("Unknown", "UnknownState", "ScaledObject check failed")
    );
    op.stop().await;
}

/// As in KEDA, the finalizer leaves the HPA to the garbage collector (the HPA's controller owner
/// reference): an orphaning delete keeps the HPA, without the owner reference.
#[tokio::test]
async fn an_orphaning_delete_keeps_the_hpa_as_in_keda() {
    let Some((_server, w)) = world("orphan").await else {
        return;
    };
    let list = list("orphan");
    w.deployment("orphan", 0).await;
    let op = w.start_operator();
    w.create(&scenarios::redis_object("orphan", "orphan", &list, "", ""))
        .await;
    scenarios::hpa_exists(&w, "keda-hpa-orphan").await;
    w.scaled_objects()
        .delete(
            "orphan",
            &kube::api::DeleteParams {
                propagation_policy: Some(kube::api::PropagationPolicy::Orphan),
                ..kube::api::DeleteParams::default()
            },
        )
        .await
        .expect("delete");
    scenarios::eventually("the ScaledObject gone", || async {
        matches!(w.scaled_objects().get_opt("orphan").await, Ok(None)).then_some(())
    })
    .await;
    let hpa = w
        .hpas()
        .get_opt("keda-hpa-orphan")
        .await
        .expect("HPA lookup")
        .expect("the orphaned HPA is kept");
    assert!(
        hpa.metadata.owner_references.unwrap_or_default().is_empty(),
        "the orphaned HPA has no owner left"
    );
    op.stop().await;
}

#[tokio::test]
async fn status_is_not_patched_again_when_nothing_changed() {
    let Some((server, w)) = world("quiet").await else {
        return;
    };
    let list = list("quiet");
    w.deployment("quiet", 0).await;
    let op = w.start_operator();
    let so = w
        .create(&scenarios::redis_object("quiet", "quiet", &list, "", ""))
        .await;
    scenarios::hpa_exists(&w, "keda-hpa-quiet").await;
    w.poll_after(&op, &so, 10).await;
    w.poll_after(&op, &so, 10).await;
    server.reset_request_counts();
    for _ in 0..5 {
        w.poll_after(&op, &so, 10).await;
    }
    let counts = server.request_counts();
    assert_eq!(
        counts.get(Verb::Patch, "scaledobjects/status"),
        0,
        "{counts:?}"
    );
    assert_eq!(counts.get(Verb::Patch, "deployments/scale"), 0);
    assert_eq!(
        counts.get(Verb::Get, "deployments"),
        0,
        "replicas come from the cache"
    );
    op.stop().await;
}

/// A new ScaledObject gets KEDA's finalizer and its name label in one write, its HPA is created
/// without a read first (the HPA watch tells it does not exist), and its status is written once
/// by the reconciler and once by the loop's first poll.
#[tokio::test]
async fn a_new_object_is_claimed_in_one_write() {
    let Some((server, w)) = world("claim").await else {
        return;
    };
    let list = list("claim");
    w.deployment("claim", 0).await;
    let op = w.start_operator();
    server.reset_request_counts();
    w.create(&scenarios::redis_object("claim", "claim", &list, "", ""))
        .await;
    // Waits without requests of its own: only the operator's are counted.
    let ready = || {
        server
            .objects("keda.sh/v1alpha1", "ScaledObject")
            .expect("ScaledObjects")
            .iter()
            .any(|so| so["status"]["hpaName"] == "keda-hpa-claim")
    };
    let started = std::time::Instant::now();
    while !ready() {
        assert!(
            started.elapsed() < scenarios::WAIT,
            "no hpaName in the status"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // A moment for any further reconcile the claim or the HPA's creation would cause.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let counts = server.request_counts();
    let so = w.get("claim").await;
    assert_eq!(
        so.metadata.finalizers,
        Some(vec!["finalizer.keda.sh".to_string()])
    );
    assert_eq!(
        so.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("scaledobject.keda.sh/name"))
            .map(String::as_str),
        Some("claim")
    );
    assert_eq!(counts.get(Verb::Patch, "scaledobjects"), 1, "{counts:?}");
    assert_eq!(
        counts.get(Verb::Create, "horizontalpodautoscalers"),
        1,
        "{counts:?}"
    );
    assert_eq!(
        counts.get(Verb::Get, "horizontalpodautoscalers"),
        0,
        "{counts:?}"
    );
    // The reconciler's status and the loop's first poll, one write each: the loop polls after
    // the reconcile that started it, and neither writes back a stale view of the other's.
    assert_eq!(
        counts.get(Verb::Patch, "scaledobjects/status"),
        2,
        "{counts:?}"
    );
    // The Deployment comes from the target cache once it has listed; only a reconcile that runs
    // before that checks /scale.
    assert!(
        counts.get(Verb::Get, "deployments/scale") <= 1,
        "{counts:?}"
    );
    op.stop().await;
}

/// `HPAActive` follows the HPA's `ScalingActive` condition, which the HPA controller writes
/// (memkube has none, so the test writes it): absent until the HPA reports, then mirrored on the
/// next poll with KEDA's reasons and messages (`getHPAHealth`: `False` passes the HPA's own
/// reason through, issue 29 row 5), while `Ready` keeps describing the ScaledObject itself.
#[tokio::test]
async fn hpa_active_mirrors_the_hpas_scaling_active_condition() {
    let Some((_server, w)) = world("hpa-active").await else {
        return;
    };
    let list = list("hpa-active");
    w.deployment("mirror", 0).await;
    let op = w.start_operator();
    let so = w
        .create(&scenarios::redis_object("mirror", "mirror", &list, "", ""))
        .await;
    scenarios::hpa_exists(&w, "keda-hpa-mirror").await;
    w.poll_after(&op, &so, 10).await;
    assert_eq!(
        scenarios::condition(&w.get("mirror").await, "HPAActive"),
        None,
        "the HPA has not reported ScalingActive yet"
    );

    let cases = [
        (
            json!({"type": "ScalingActive", "status": "False", "reason": "FailedGetExternalMetric",
                   "message": "unable to get external metric team/s0-redis/&LabelSelector{}: no metrics"}),
            (
                "False",
                "FailedGetExternalMetric",
                "HPA is not actively scaling: unable to get external metric team/s0-redis/&LabelSelector{}: no metrics",
            ),
        ),
        (
            json!({"type": "ScalingActive", "status": "False", "reason": "ScalingDisabled",
                   "message": "scaling is disabled since the replica count of the target is zero"}),
            (
                "True",
                "ScalingDisabled",
                "scaling is disabled since the replica count of the target is zero",
            ),
        ),
        (
            json!({"type": "ScalingActive", "status": "True", "reason": "ValidMetricFound",
                   "message": "the HPA was able to successfully calculate a replica count"}),
            ("True", "HPAActive", "HPA is actively scaling"),
        ),
    ];
    for (hpa_condition, (status, reason, message)) in cases {
        w.hpas()
            .patch_status(
                "keda-hpa-mirror",
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"status": {"currentReplicas": 0, "desiredReplicas": 0,
                                                "conditions": [hpa_condition]}}),
                ),
            )
            .await
            .expect("HPA status");
        let found = scenarios::eventually(&format!("HPAActive {reason}"), || async {
            w.poll_after(&op, &so, 10).await;
            let now = w.get("mirror").await;
            let c = now
                .status
                .as_ref()?
                .conditions
                .as_ref()?
                .iter()
                .find(|c| c.type_ == "HPAActive" && c.reason.as_deref() == Some(reason))?
                .clone();
            Some((c, now))
        })
        .await;
        let (c, now) = found;
        assert_eq!(c.status, status);
        assert_eq!(c.message.as_deref(), Some(message));
        assert_eq!(
            scenarios::ready(&now).map(|r| r.0),
            Some("True".to_string()),
            "an unhealthy HPA does not make the ScaledObject unready"
        );
    }
    op.stop().await;
}

/// A push scaler whose source a test switches on: `run` sends `true` when told to.
mod push {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use async_trait::async_trait;
    use k8s_openapi::api::autoscaling::v2::MetricSpec;
    use keda_scalers::metric::{MetricTargetType, external_metric_spec, metric_target};
    use keda_scalers::{
        BuiltScaler, MetricsAndActivity, PushScaler, Scaler, ScalerContext, ScalerError,
    };
    use tokio::sync::{Notify, mpsc};
    use tokio_util::sync::CancellationToken;

    #[derive(Clone, Default)]
    pub struct Source {
        pub active: Arc<AtomicBool>,
        pub wake: Arc<Notify>,
    }

    struct Switch(Source);

    #[async_trait]
    impl Scaler for Switch {
        fn metric_specs(&self) -> Vec<MetricSpec> {
            vec![external_metric_spec(
                "s0-switch",
                metric_target(MetricTargetType::AverageValue, 1),
            )]
        }
        async fn metrics_and_activity(
            &self,
            name: &str,
        ) -> Result<MetricsAndActivity, ScalerError> {
            let on = self.0.active.load(Ordering::SeqCst);
            Ok(MetricsAndActivity::single(
                name,
                if on { 1.0 } else { 0.0 },
                0.0,
            ))
        }
        async fn close(&self) {}
    }

    #[async_trait]
    impl PushScaler for Switch {
        async fn run(&self, cancel: CancellationToken, activity: mpsc::Sender<bool>) {
            loop {
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = self.0.wake.notified() => {
                        if activity.send(self.0.active.load(Ordering::SeqCst)).await.is_err() {
                            return;
                        }
                    }
                }
            }
        }
    }

    pub fn registry(source: Source) -> keda_scalers::Registry {
        let mut r = keda_scalers::Registry::builtin();
        r.register("switch", move |_ctx: ScalerContext| {
            let s = source.clone();
            async move { Ok::<_, ScalerError>(BuiltScaler::Push(Box::new(Switch(s)))) }
        });
        r
    }
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

/// A Redis ACL user only this test knows.
struct AclUser {
    redis: redis::aio::MultiplexedConnection,
    name: String,
}

impl AclUser {
    async fn create(redis: &redis::aio::MultiplexedConnection, password: &str) -> AclUser {
        let name = list("acl-user");
        let mut c = redis.clone();
        let _: () = redis::cmd("ACL")
            .arg("SETUSER")
            .arg(&name)
            .arg("on")
            .arg(format!(">{password}"))
            .arg("~*")
            .arg("&*")
            .arg("+@all")
            .query_async(&mut c)
            .await
            .expect("ACL SETUSER");
        AclUser {
            redis: redis.clone(),
            name,
        }
    }

    /// Deletes the user (a failed test leaves it behind; its name is unique).
    async fn delete(self) {
        let mut c = self.redis.clone();
        let _: i64 = redis::cmd("ACL")
            .arg("DELUSER")
            .arg(&self.name)
            .query_async(&mut c)
            .await
            .expect("ACL DELUSER");
    }
}

async fn write_secret(w: &scenarios::World, name: &str, data: &[(&str, &str)]) {
    use k8s_openapi::api::core::v1::Secret;
    use kube::api::{Api, Patch, PatchParams};
    let data: serde_json::Map<String, serde_json::Value> = data
        .iter()
        .map(|(k, v)| ((*k).to_string(), serde_json::Value::from(*v)))
        .collect();
    let secret = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": { "name": name, "namespace": w.namespace },
        "stringData": data,
    });
    let api: Api<Secret> = Api::namespaced(w.client.clone(), &w.namespace);
    api.patch(
        name,
        &PatchParams::apply("keda-rs-test").force(),
        &Patch::Apply(&secret),
    )
    .await
    .expect("apply Secret");
}

async fn create_yaml<K>(w: &scenarios::World, yaml: &str)
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + serde::de::DeserializeOwned
        + serde::Serialize
        + Clone
        + std::fmt::Debug,
{
    let object: K = serde_yaml::from_str(yaml).expect("YAML");
    let api: kube::Api<K> = kube::Api::namespaced(w.client.clone(), &w.namespace);
    api.create(&Default::default(), &object)
        .await
        .expect("create");
}

fn authenticated_object(name: &str, list: &str, auth: &str) -> String {
    format!(
        r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {{ name: {name} }}
spec:
  scaleTargetRef: {{ name: {name} }}
  pollingInterval: 10
  maxReplicaCount: 1
  triggers:
    - type: redis
      metadata:
        address: 127.0.0.1:6379
        listName: {list}
        listLength: "5"
        activationListLength: "5"
      authenticationRef: {{ name: {auth} }}
"#
    )
}

#[tokio::test]
async fn a_password_from_a_trigger_authentication_scales_and_its_rotation_is_picked_up() {
    let Some((_server, w)) = world("auth-rotation").await else {
        return;
    };
    let list = list("auth-rotation");
    let user = AclUser::create(&w.redis, "right-password").await;
    write_secret(
        &w,
        "redis-auth",
        &[("user", &user.name), ("password", "right-password")],
    )
    .await;
    create_yaml::<keda_api::TriggerAuthentication>(
        &w,
        r#"
apiVersion: keda.sh/v1alpha1
kind: TriggerAuthentication
metadata: { name: redis-auth }
spec:
  secretTargetRef:
    - { parameter: username, name: redis-auth, key: user }
    - { parameter: password, name: redis-auth, key: password }
"#,
    )
    .await;
    w.deployment("authed", 0).await;
    w.push(&list, 10).await;
    let op = w.start_operator();
    w.create(&authenticated_object("authed", &list, "redis-auth"))
        .await;
    scenarios::eventually("the Deployment scaled 0 -> 1", || async {
        (w.replicas("authed").await == 1).then_some(())
    })
    .await;
    let ready = scenarios::ready(&w.get("authed").await);
    assert_eq!(ready.map(|r| r.0), Some("True".to_string()));

    // Rotate the Secret to a password Redis does not accept: the scalers are rebuilt with it
    // and the object reports the failure.
    write_secret(
        &w,
        "redis-auth",
        &[("user", &user.name), ("password", "wrong-password")],
    )
    .await;
    let (status, reason, message) =
        scenarios::eventually("Ready=False after the rotation", || async {
            scenarios::ready(&w.get("authed").await).filter(|r| r.0 == "False")
        })
        .await;
    assert_eq!(status, "False");
    assert!(
        message.contains("the server refused the credentials"),
        "{reason}: {message}"
    );
    // Only the kind of failure: never the server's own words (issue 30, finding 5).
    assert!(
        !message.contains("Password authentication failed"),
        "{reason}: {message}"
    );
    op.stop().await;
    user.delete().await;
}

/// Issue 29, row 4: as in KEDA, a trigger naming a TriggerAuthentication that does not exist is
/// built from its metadata alone (this Redis needs no password): the object is ready, and a
/// Warning `KEDAAuthRefMissing` names the TriggerAuthentication (before issue 29 the object was
/// `Ready=False` with the resolver's message).
#[tokio::test]
async fn a_missing_trigger_authentication_leaves_the_object_ready_with_a_warning_naming_it() {
    let Some((_server, w)) = world("auth-missing").await else {
        return;
    };
    w.deployment("unauthed", 0).await;
    let op = w.start_operator();
    w.create(&authenticated_object(
        "unauthed",
        &list("auth-missing"),
        "nowhere",
    ))
    .await;
    scenarios::eventually("Ready=True", || async {
        scenarios::ready(&w.get("unauthed").await).filter(|r| r.0 == "True")
    })
    .await;
    let events: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(w.client.clone(), &w.namespace);
    let note = scenarios::eventually("a KEDAAuthRefMissing Event", || async {
        events
            .list(&Default::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some("KEDAAuthRefMissing")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("unauthed")
            })
            .and_then(|e| e.note)
    })
    .await;
    assert!(
        note.contains("TriggerAuthentication team/nowhere not found"),
        "{note}"
    );
    op.stop().await;
}

/// Cloud pod identities are out of scope for now: an object whose TriggerAuthentication asks for
/// one is not ready, and the message says so (never a silently missing credential).
#[tokio::test]
async fn a_cloud_pod_identity_makes_the_object_not_ready_saying_it_is_not_supported_yet() {
    let Some((_server, w)) = world("pod-identity").await else {
        return;
    };
    let op = w.start_operator();
    for provider in ["azure-workload", "gcp", "aws", "aws-eks"] {
        let name = format!("identity-{provider}");
        create_yaml::<keda_api::TriggerAuthentication>(
            &w,
            &format!(
                "apiVersion: keda.sh/v1alpha1
kind: TriggerAuthentication
metadata: {{ name: {name} }}
spec:
  podIdentity: {{ provider: {provider} }}
"
            ),
        )
        .await;
        w.deployment(&name, 0).await;
        w.create(&authenticated_object(&name, &list("pod-identity"), &name))
            .await;
        let (_, reason, message) = scenarios::eventually("Ready=False", || async {
            scenarios::ready(&w.get(&name).await).filter(|r| r.0 == "False")
        })
        .await;
        assert_eq!(reason, "ScaledObjectCheckFailed");
        let want = format!(
            "TriggerAuthentication team/{name}: podIdentity provider \"{provider}\" is not supported by keda-rs yet: cloud pod identities (azure-workload, gcp, aws, aws-eks) are out of scope for now"
        );
        assert!(message.contains(&want), "{message}");
    }
    op.stop().await;
}

#[tokio::test]
async fn a_poll_records_the_scaler_value_and_activity_under_keda_s_names_and_labels() {
    let Some((_server, w)) = world("recording").await else {
        return;
    };
    let list = list("recording");
    w.deployment("recorded", 0).await;
    w.push(&list, 7).await;
    let op = w.start_operator();
    let so = w
        .create(&scenarios::redis_object(
            "recorded", "recorded", &list, "", "",
        ))
        .await;
    w.polls_reach(&op, &so, 1).await;
    let text = w.metrics.encode();
    let labels = format!(
        r#"{{namespace="team",metric="s0-redis-{list}",scaledObject="recorded",scaler="redisScaler",triggerIndex="0",type="scaledobject"}}"#
    );
    let sample = |name: &str| {
        let prefix = format!("{name}{labels} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no {name}{labels} in\n{text}"))
    };
    assert_eq!(sample("keda_scaler_metrics_value"), 7.0);
    assert_eq!(sample("keda_scaler_active"), 1.0);
    assert!(
        text.contains(r#"keda_trigger_registered_total{type="redis"} 1"#),
        "{text}"
    );
    op.stop().await;
}

/// The value of the series `name{labels}` in the exposition `text`.
fn sample(text: &str, name: &str, labels: &str) -> Option<f64> {
    let prefix = format!("{name}{{{labels}}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.parse().ok())
}

/// Waits until the series `name{labels}` of `w`'s metrics has `value`.
async fn series_reaches(w: &World, name: &str, labels: &str, value: f64) {
    scenarios::eventually(&format!("{name}{{{labels}}} = {value}"), || async {
        (sample(&w.metrics.encode(), name, labels) == Some(value)).then_some(())
    })
    .await;
}

async fn create_cluster_yaml<K>(w: &World, yaml: &str)
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
        + serde::de::DeserializeOwned
        + serde::Serialize
        + Clone
        + std::fmt::Debug,
{
    let object: K = serde_yaml::from_str(yaml).expect("YAML");
    let api: kube::Api<K> = kube::Api::all(w.client.clone());
    api.create(&Default::default(), &object)
        .await
        .expect("create");
}

/// Issue 16, as KEDA's controllers' `updatePromMetrics`: `keda_resource_registered_total`
/// counts ScaledObjects at reconcile, a paused one included (with its triggers in
/// `keda_trigger_registered_total`), and every TriggerAuthentication (per namespace) and
/// ClusterTriggerAuthentication (under `default`) that exists; deletions count down.
#[tokio::test]
async fn custom_resources_are_counted_at_reconcile_paused_objects_and_authentications_included() {
    let Some((_server, w)) = world("registered").await else {
        return;
    };
    let list = list("registered");
    create_yaml::<keda_api::TriggerAuthentication>(
        &w,
        "apiVersion: keda.sh/v1alpha1\nkind: TriggerAuthentication\nmetadata: { name: counted-auth }\nspec: {}\n",
    )
    .await;
    create_cluster_yaml::<keda_api::ClusterTriggerAuthentication>(
        &w,
        "apiVersion: keda.sh/v1alpha1\nkind: ClusterTriggerAuthentication\nmetadata: { name: counted-cluster-auth }\nspec: {}\n",
    )
    .await;
    w.deployment("counted", 0).await;
    let op = w.start_operator();
    w.create(&scenarios::redis_object(
        "counted",
        "counted",
        &list,
        "",
        r#""autoscaling.keda.sh/paused": "true""#,
    ))
    .await;
    let objects = r#"type="scaled_object",namespace="team""#;
    series_reaches(&w, "keda_resource_registered_total", objects, 1.0).await;
    series_reaches(&w, "keda_trigger_registered_total", r#"type="redis""#, 1.0).await;
    series_reaches(
        &w,
        "keda_resource_registered_total",
        r#"type="trigger_authentication",namespace="team""#,
        1.0,
    )
    .await;
    series_reaches(
        &w,
        "keda_resource_registered_total",
        r#"type="cluster_trigger_authentication",namespace="default""#,
        1.0,
    )
    .await;
    assert!(
        !op.loops.is_running("team", "counted").await,
        "paused: no loop, yet counted"
    );

    w.delete("counted").await;
    series_reaches(&w, "keda_resource_registered_total", objects, 0.0).await;
    series_reaches(&w, "keda_trigger_registered_total", r#"type="redis""#, 0.0).await;
    let auths: kube::Api<keda_api::TriggerAuthentication> =
        kube::Api::namespaced(w.client.clone(), &w.namespace);
    auths
        .delete("counted-auth", &Default::default())
        .await
        .expect("delete TriggerAuthentication");
    series_reaches(
        &w,
        "keda_resource_registered_total",
        r#"type="trigger_authentication",namespace="team""#,
        0.0,
    )
    .await;
    op.stop().await;
}

/// The `status.scaledobjects` of TriggerAuthentication `name` in `w`'s namespace.
async fn trigger_auth_users(w: &World, name: &str) -> Option<String> {
    let api: kube::Api<keda_api::TriggerAuthentication> =
        kube::Api::namespaced(w.client.clone(), &w.namespace);
    api.get(name)
        .await
        .expect("get TriggerAuthentication")
        .status
        .and_then(|s| s.scaledobjects)
}

/// The `status.scaledobjects` of ClusterTriggerAuthentication `name`.
async fn cluster_trigger_auth_users(w: &World, name: &str) -> Option<String> {
    let api: kube::Api<keda_api::ClusterTriggerAuthentication> = kube::Api::all(w.client.clone());
    api.get(name)
        .await
        .expect("get ClusterTriggerAuthentication")
        .status
        .and_then(|s| s.scaledobjects)
}

/// A ScaledObject `name` whose redis trigger uses authentication `auth` of `kind`.
fn object_using(name: &str, list: &str, auth: &str, kind: &str) -> String {
    format!(
        r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {{ name: {name} }}
spec:
  scaleTargetRef: {{ name: {name} }}
  pollingInterval: 10
  maxReplicaCount: 1
  triggers:
    - type: redis
      metadata:
        address: 127.0.0.1:6379
        listName: {list}
        listLength: "5"
      authenticationRef: {{ name: {auth}, kind: {kind} }}
"#
    )
}

/// Issue 16, as KEDA's `updateTriggerAuthenticationStatus`: a (Cluster)TriggerAuthentication's
/// `status.scaledobjects` lists the ScaledObjects that use it, comma separated, in the order
/// they first used it (not sorted); a deleted object leaves the list, and an empty list is no
/// field. keda-rs writes only when the list changes.
#[tokio::test]
async fn trigger_authentications_list_the_scaled_objects_that_use_them() {
    let Some((server, w)) = world("auth-users").await else {
        return;
    };
    let list = list("auth-users");
    create_yaml::<keda_api::TriggerAuthentication>(
        &w,
        "apiVersion: keda.sh/v1alpha1\nkind: TriggerAuthentication\nmetadata: { name: used-auth }\nspec: {}\n",
    )
    .await;
    create_cluster_yaml::<keda_api::ClusterTriggerAuthentication>(
        &w,
        "apiVersion: keda.sh/v1alpha1\nkind: ClusterTriggerAuthentication\nmetadata: { name: used-cluster-auth }\nspec: {}\n",
    )
    .await;
    for name in ["user-b", "user-a", "user-c"] {
        w.deployment(name, 0).await;
    }
    let op = w.start_operator();
    w.create(&object_using(
        "user-b",
        &list,
        "used-auth",
        "TriggerAuthentication",
    ))
    .await;
    scenarios::eventually("user-b listed", || async {
        (trigger_auth_users(&w, "used-auth").await.as_deref() == Some("user-b")).then_some(())
    })
    .await;
    w.create(&object_using(
        "user-a",
        &list,
        "used-auth",
        "TriggerAuthentication",
    ))
    .await;
    w.create(&object_using(
        "user-c",
        &list,
        "used-cluster-auth",
        "ClusterTriggerAuthentication",
    ))
    .await;
    scenarios::eventually("user-b,user-a listed", || async {
        (trigger_auth_users(&w, "used-auth").await.as_deref() == Some("user-b,user-a"))
            .then_some(())
    })
    .await;
    scenarios::eventually("user-c listed on the cluster authentication", || async {
        (cluster_trigger_auth_users(&w, "used-cluster-auth")
            .await
            .as_deref()
            == Some("user-c"))
        .then_some(())
    })
    .await;

    // Another reconcile of a listed object writes nothing.
    let writes = || {
        server
            .request_counts()
            .get(Verb::Patch, "triggerauthentications/status")
    };
    // Two reconciles of user-a that show on its status; the second starts after the first
    // (and its authentication update) finished.
    let before = writes();
    let paused = |status: &'static str| {
        let w = &w;
        async move {
            scenarios::eventually(&format!("Paused={status} on user-a"), || async {
                scenarios::condition(&w.get("user-a").await, "Paused")
                    .filter(|(s, _)| s == status)
                    .map(|_| ())
            })
            .await;
        }
    };
    w.annotate(
        "user-a",
        "autoscaling.keda.sh/paused-scale-in",
        Some("true"),
    )
    .await;
    paused("True").await;
    w.annotate("user-a", "autoscaling.keda.sh/paused-scale-in", None)
        .await;
    paused("False").await;
    assert_eq!(writes(), before, "an unchanged list is not written again");

    w.delete("user-b").await;
    scenarios::eventually("user-b unlisted", || async {
        (trigger_auth_users(&w, "used-auth").await.as_deref() == Some("user-a")).then_some(())
    })
    .await;
    w.delete("user-a").await;
    w.delete("user-c").await;
    scenarios::eventually("the lists emptied", || async {
        (trigger_auth_users(&w, "used-auth").await.is_none()
            && cluster_trigger_auth_users(&w, "used-cluster-auth")
                .await
                .is_none())
        .then_some(())
    })
    .await;
    op.stop().await;
}

/// Issue 16, as KEDA's getScalerState, which skips every metric spec that is not External: a
/// `cpu` trigger gets no per-scaler series at all (no value, no activity, no latency, no error
/// counter), while the External trigger beside it does.
#[tokio::test]
async fn a_cpu_trigger_records_only_keda_scaler_active_as_in_keda() {
    let Some((_server, w)) = world("cpu-series").await else {
        return;
    };
    let list = list("cpu-series");
    w.deployment("mixed-cpu", 0).await;
    w.push(&list, 7).await;
    let op = w.start_operator();
    let so = w
        .create(&format!(
            r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: mixed-cpu
spec:
  scaleTargetRef:
    name: mixed-cpu
  pollingInterval: 10
  minReplicaCount: 1
  maxReplicaCount: 3
  triggers:
    - type: cpu
      metricType: Utilization
      metadata:
        value: "60"
    - type: redis
      metadata:
        address: 127.0.0.1:6379
        listName: {list}
        listLength: "5"
"#
        ))
        .await;
    w.polls_reach(&op, &so, 1).await;
    let text = w.metrics.encode();
    let per_scaler = |line: &&str| {
        line.starts_with("keda_scaler_") && line.contains(r#"scaledObject="mixed-cpu""#)
    };
    let series: Vec<&str> = text.lines().filter(per_scaler).collect();
    assert!(
        series
            .iter()
            .any(|l| l.starts_with("keda_scaler_active{") && l.contains(r#"triggerIndex="1""#)),
        "the redis trigger is recorded: {text}"
    );
    // KEDA's getScalerState records only `keda_scaler_active` 1 for a cpu trigger (issue 29,
    // row 7), no value, latency or error series.
    let cpu: Vec<&&str> = series
        .iter()
        .filter(|l| l.contains(r#"triggerIndex="0""#) || l.contains("cpuMemoryScaler"))
        .collect();
    assert_eq!(
        cpu,
        [
            &"keda_scaler_active{namespace=\"team\",metric=\"cpu\",scaledObject=\"mixed-cpu\",scaler=\"cpuMemoryScaler\",triggerIndex=\"0\",type=\"scaledobject\"} 1.0"
        ],
        "the cpu trigger is only active: {series:#?}"
    );
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

/// Issue 29, row 10: a restore to `originalReplicaCount` that the API server refuses (the
/// target's `/scale` write fails) is logged and reported as a Warning Event, and the finalizer
/// is still removed, as in KEDA's `finalizeScaledObject`: the delete completes instead of
/// retrying forever.
#[tokio::test]
async fn a_failed_restore_is_evented_and_the_delete_still_completes() {
    let Some((server, w)) = world("restore-fails").await else {
        return;
    };
    let list = list("restore-fails");
    w.deployment("stuck", 2).await;
    let op = w.start_operator();
    let so = w
        .create(&scenarios::redis_object(
            "stuck",
            "stuck",
            &list,
            "  advanced:\n    restoreToOriginalReplicaCount: true",
            "",
        ))
        .await;
    scenarios::hpa_exists(&w, "keda-hpa-stuck").await;
    w.polls_reach(&op, &so, 1).await;
    scenarios::eventually("scaled to zero", || async {
        (w.replicas("stuck").await == 0).then_some(())
    })
    .await;
    server.inject_failure(
        memkube::FailureRule::new(500)
            .resource("deployments/scale")
            .name("stuck"),
    );
    w.delete("stuck").await;
    scenarios::eventually("the ScaledObject gone", || async {
        matches!(w.scaled_objects().get_opt("stuck").await, Ok(None)).then_some(())
    })
    .await;
    server.clear_failures();
    assert_eq!(w.replicas("stuck").await, 0, "the restore could not happen");
    let events: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(w.client.clone(), "team");
    let failed: Vec<_> = events
        .list(&Default::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some("KEDAScaleTargetRestoreFailed")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("stuck")
        })
        .collect();
    assert_eq!(failed.len(), 1, "one Warning about the failed restore");
    assert_eq!(failed[0].type_.as_deref(), Some("Warning"));
    let note = failed[0].note.clone().unwrap_or_default();
    assert!(
        note.contains("apps/v1.Deployment team/stuck") && note.contains("2 replicas"),
        "{note}"
    );
    op.stop().await;
}

/// Issue 29, row 7: KEDA's getScalerState sets `keda_scaler_active` to 1 for every cpu and
/// memory trigger at each poll (they are Resource metrics the HPA reads itself), with the
/// resource as `metric` and the trigger's name (else `cpuMemoryScaler`) as `scaler`.
#[tokio::test]
async fn cpu_and_memory_triggers_are_active_in_keda_scaler_active() {
    let Some((_server, w)) = world("cpu-active").await else {
        return;
    };
    let list = list("cpu-active");
    w.deployment("busy", 1).await;
    let op = w.start_operator();
    let so = w
        .create(&format!(
            r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: busy
spec:
  scaleTargetRef:
    name: busy
  minReplicaCount: 1
  triggers:
    - type: redis
      metadata:
        address: 127.0.0.1:6379
        listName: {list}
        listLength: "5"
    - type: cpu
      metricType: Utilization
      metadata:
        value: "60"
    - type: memory
      name: mem
      metricType: Utilization
      metadata:
        value: "70"
"#
        ))
        .await;
    scenarios::hpa_exists(&w, "keda-hpa-busy").await;
    w.polls_reach(&op, &so, 1).await;
    let text = w.metrics.encode();
    let active = |metric: &str, scaler: &str| {
        text.lines().any(|l| {
            l.starts_with("keda_scaler_active{")
                && l.contains(&format!("metric=\"{metric}\""))
                && l.contains(&format!("scaler=\"{scaler}\""))
                && l.contains("scaledObject=\"busy\"")
                && l.ends_with(" 1.0")
        })
    };
    assert!(active("cpu", "cpuMemoryScaler"), "{text}");
    assert!(active("memory", "mem"), "{text}");
    op.stop().await;
}
