//! The ScaledObject scenarios against the in-memory API server and the local Redis.

#[path = "../scenarios/mod.rs"]
mod scenarios;

#[allow(dead_code)]
#[path = "../../../scalers/tests/common/mod.rs"]
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

mod authentication;
mod lifecycle;
mod metrics;
mod scaling;
