//! The behaviours keda-rs's tests rely on, each run in process and over a loopback port.

#[path = "../common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{Ctx, on_both_transports, within};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::{Controller, WatchStreamExt, controller::Action, watcher};
use memkube::{FailureRule, Verb};
use serde_json::json;
use tokio::sync::mpsc;

fn config_map(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "labels": labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
        },
        "data": { "key": "value" },
    }))
    .expect("valid ConfigMap")
}

fn deployment(name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": name },
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": { "containers": [{ "name": "main", "image": "busybox" }] },
            },
        },
    }))
    .expect("valid Deployment")
}

fn api_code(result: Result<impl std::fmt::Debug, kube::Error>) -> u16 {
    match result {
        Err(kube::Error::Api(status)) => status.code,
        other => panic!("expected an API error, got {other:?}"),
    }
}

const WIDGET_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.memkube.test
spec:
  group: memkube.test
  scope: Namespaced
  names: { plural: widgets, singular: widget, kind: Widget, shortNames: [wd] }
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: { type: object, x-kubernetes-preserve-unknown-fields: true }
      subresources:
        status: {}
        scale:
          specReplicasPath: .spec.replicas
          statusReplicasPath: .status.replicas
          labelSelectorPath: .status.selector
"#;

fn widgets(ctx: &Ctx) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("memkube.test", "v1", "Widget"),
        "widgets",
    );
    Api::namespaced_with(ctx.client.clone(), "default", &resource)
}

/// Forwards a watcher's events to a channel so a test can await them one by one.
fn watch_events<K>(
    api: Api<K>,
    config: watcher::Config,
) -> mpsc::UnboundedReceiver<Result<watcher::Event<K>, watcher::Error>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut stream = watcher(api, config).default_backoff().boxed();
        while let Some(event) = stream.next().await {
            if tx.send(event).is_err() {
                return;
            }
        }
    });
    rx
}

/// Awaits the first watcher event `pick` accepts, skipping others.
async fn next_matching<K, T>(
    events: &mut mpsc::UnboundedReceiver<Result<watcher::Event<K>, watcher::Error>>,
    what: &str,
    mut pick: impl FnMut(&Result<watcher::Event<K>, watcher::Error>) -> Option<T>,
) -> T {
    within(what, async {
        loop {
            let event = events.recv().await.expect("watcher keeps running");
            if let Some(found) = pick(&event) {
                return found;
            }
        }
    })
    .await
}

fn name_of<K: kube::Resource>(obj: &K) -> String {
    obj.meta().name.clone().unwrap_or_default()
}

mod reads;
mod server;
mod writes;
