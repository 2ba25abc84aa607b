//! The behaviours keda-rs's tests rely on, each run in process and over a loopback port.

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

#[tokio::test]
async fn a_controller_sees_create_and_update_and_a_watcher_sees_delete() {
    on_both_transports(|ctx| async move {
        let api: Api<ConfigMap> = Api::default_namespaced(ctx.client.clone());
        let (seen_tx, mut seen) = mpsc::unbounded_channel::<(String, String)>();
        let controller = Controller::new(api.clone(), watcher::Config::default())
            .run(
                |cm: Arc<ConfigMap>, seen: Arc<mpsc::UnboundedSender<(String, String)>>| async move {
                    let value = cm.data.as_ref().and_then(|d| d.get("key")).cloned().unwrap_or_default();
                    let _ = seen.send((name_of(cm.as_ref()), value));
                    Ok::<_, kube::Error>(Action::await_change())
                },
                |_, _, _| Action::await_change(),
                Arc::new(seen_tx),
            )
            .for_each(|_| async {});
        let controller = tokio::spawn(controller);
        let mut events = watch_events(api.clone(), watcher::Config::default());
        next_matching(&mut events, "initial list", |e| matches!(e, Ok(watcher::Event::InitDone)).then_some(())).await;

        api.create(&PostParams::default(), &config_map("cm", &[])).await.expect("create");
        let reconciled = within("reconcile of the create", seen.recv()).await.expect("controller runs");
        assert_eq!(reconciled, ("cm".to_string(), "value".to_string()), "{}", ctx.transport);
        next_matching(&mut events, "ADDED", |e| match e {
            Ok(watcher::Event::Apply(cm)) if name_of(cm) == "cm" => Some(()),
            _ => None,
        })
        .await;

        api.patch("cm", &PatchParams::default(), &Patch::Merge(json!({ "data": { "key": "changed" } })))
            .await
            .expect("patch");
        loop {
            let (_, value) = within("reconcile of the update", seen.recv()).await.expect("controller runs");
            if value == "changed" {
                break;
            }
        }
        next_matching(&mut events, "MODIFIED", |e| match e {
            Ok(watcher::Event::Apply(cm)) if cm.data.as_ref().and_then(|d| d.get("key")).map(String::as_str) == Some("changed") => Some(()),
            _ => None,
        })
        .await;

        api.delete("cm", &DeleteParams::default()).await.expect("delete");
        next_matching(&mut events, "DELETED", |e| match e {
            Ok(watcher::Event::Delete(cm)) if name_of(cm) == "cm" => Some(()),
            _ => None,
        })
        .await;
        controller.abort();
    })
    .await;
}

#[tokio::test]
async fn an_update_with_a_stale_resource_version_gets_409_conflict() {
    on_both_transports(|ctx| async move {
        let api: Api<ConfigMap> = Api::default_namespaced(ctx.client.clone());
        let created = api
            .create(&PostParams::default(), &config_map("cm", &[]))
            .await
            .expect("create");
        let mut first = created.clone();
        first.data = Some(BTreeMap::from([("key".to_string(), "first".to_string())]));
        let updated = api
            .replace("cm", &PostParams::default(), &first)
            .await
            .expect("fresh update succeeds");
        assert_ne!(
            updated.metadata.resource_version,
            created.metadata.resource_version
        );

        let mut stale = created.clone();
        stale.data = Some(BTreeMap::from([("key".to_string(), "stale".to_string())]));
        assert_eq!(
            api_code(api.replace("cm", &PostParams::default(), &stale).await),
            409,
            "{}",
            ctx.transport
        );

        // An empty resourceVersion is an unconditional update.
        stale.metadata.resource_version = None;
        let forced = api
            .replace("cm", &PostParams::default(), &stale)
            .await
            .expect("unconditional update");
        assert_eq!(
            forced.data.and_then(|d| d.get("key").cloned()).as_deref(),
            Some("stale")
        );
        // So is a patch without one; a patch naming a stale one conflicts.
        let stale_rv = created.metadata.resource_version.clone().expect("has rv");
        let patch = Patch::Merge(
            json!({ "metadata": { "resourceVersion": stale_rv }, "data": { "key": "x" } }),
        );
        assert_eq!(
            api_code(api.patch("cm", &PatchParams::default(), &patch).await),
            409
        );
        assert_eq!(
            api_code(
                api.create(&PostParams::default(), &config_map("cm", &[]))
                    .await
            ),
            409,
            "already exists"
        );
    })
    .await;
}

#[tokio::test]
async fn a_finalizer_blocks_deletion_until_it_is_removed() {
    on_both_transports(|ctx| async move {
        let api: Api<ConfigMap> = Api::default_namespaced(ctx.client.clone());
        let mut cm = config_map("cm", &[]);
        cm.metadata.finalizers = Some(vec!["memkube.test/hold".to_string()]);
        api.create(&PostParams::default(), &cm)
            .await
            .expect("create");
        let mut events = watch_events(api.clone(), watcher::Config::default());
        next_matching(&mut events, "initial list", |e| {
            matches!(e, Ok(watcher::Event::InitDone)).then_some(())
        })
        .await;

        let deleting = api
            .delete("cm", &DeleteParams::default())
            .await
            .expect("delete");
        assert!(
            deleting.is_left(),
            "{}: the object lingers while a finalizer is set",
            ctx.transport
        );
        let still_there = api.get("cm").await.expect("object still gettable");
        assert!(still_there.metadata.deletion_timestamp.is_some());

        // No new finalizers may be added while deleting.
        let add =
            Patch::Merge(json!({ "metadata": { "finalizers": ["memkube.test/hold", "another"] } }));
        assert_eq!(
            api_code(api.patch("cm", &PatchParams::default(), &add).await),
            422
        );

        let release = Patch::Json::<()>(
            serde_json::from_value(json!([
                { "op": "test", "path": "/metadata/finalizers", "value": ["memkube.test/hold"] },
                { "op": "remove", "path": "/metadata/finalizers" },
            ]))
            .expect("valid JSON patch"),
        );
        api.patch("cm", &PatchParams::default(), &release)
            .await
            .expect("finalizer removed");
        assert!(
            api.get_opt("cm").await.expect("get").is_none(),
            "{}",
            ctx.transport
        );
        next_matching(&mut events, "DELETED", |e| match e {
            Ok(watcher::Event::Delete(cm)) if name_of(cm) == "cm" => Some(()),
            _ => None,
        })
        .await;
    })
    .await;
}

#[tokio::test]
async fn a_watch_resumed_from_a_too_old_resource_version_gets_410_and_the_watcher_relists() {
    on_both_transports(|ctx| async move {
        let api: Api<ConfigMap> = Api::default_namespaced(ctx.client.clone());
        api.create(&PostParams::default(), &config_map("a", &[]))
            .await
            .expect("create a");
        let old_rv = ctx.server.resource_version().to_string();
        let mut events = watch_events(api.clone(), watcher::Config::default());
        next_matching(&mut events, "initial list", |e| {
            matches!(e, Ok(watcher::Event::InitDone)).then_some(())
        })
        .await;

        // Keep the watcher from reconnecting while history moves on and is compacted.
        ctx.server.inject_failure(
            FailureRule::new(503)
                .verb(Verb::Watch)
                .resource("configmaps"),
        );
        ctx.server.close_watches();
        api.create(&PostParams::default(), &config_map("b", &[]))
            .await
            .expect("create b");
        api.delete("a", &DeleteParams::default())
            .await
            .expect("delete a");
        ctx.server.compact_history();

        // A raw watch from the old version gets the ERROR event a real server sends.
        ctx.server.clear_failures();
        let mut raw = api
            .watch(&WatchParams::default(), &old_rv)
            .await
            .expect("watch starts")
            .boxed();
        match within("410 event", raw.try_next()).await {
            Ok(Some(WatchEvent::Error(status))) => {
                assert_eq!(
                    (status.code, status.reason.as_str()),
                    (410, "Expired"),
                    "{}",
                    ctx.transport
                );
            }
            other => panic!("expected a 410 ERROR event, got {other:?}"),
        }

        // kube's watcher gets the same, relists, and sees the current state.
        next_matching(&mut events, "410 from the resumed watch", |e| match e {
            Err(watcher::Error::WatchError(status)) if status.code == 410 => Some(()),
            _ => None,
        })
        .await;
        let mut relisted = Vec::new();
        next_matching(&mut events, "relist", |e| match e {
            Ok(watcher::Event::InitApply(cm)) => {
                relisted.push(name_of(cm));
                None
            }
            Ok(watcher::Event::InitDone) => Some(()),
            _ => None,
        })
        .await;
        assert_eq!(relisted, vec!["b".to_string()], "{}", ctx.transport);

        api.create(&PostParams::default(), &config_map("c", &[]))
            .await
            .expect("create c");
        next_matching(&mut events, "events after the relist", |e| match e {
            Ok(watcher::Event::Apply(cm)) if name_of(cm) == "c" => Some(()),
            _ => None,
        })
        .await;
    })
    .await;
}

#[tokio::test]
async fn scale_reads_and_writes_spec_replicas_of_a_deployment() {
    on_both_transports(|ctx| async move {
        let api: Api<Deployment> = Api::default_namespaced(ctx.client.clone());
        let created = api
            .create(&PostParams::default(), &deployment("web", 2))
            .await
            .expect("create");
        assert_eq!(created.metadata.generation, Some(1));

        let scale = api.get_scale("web").await.expect("get scale");
        assert_eq!(
            scale.spec.as_ref().and_then(|s| s.replicas),
            Some(2),
            "{}",
            ctx.transport
        );
        assert_eq!(
            scale
                .status
                .as_ref()
                .and_then(|s| s.selector.clone())
                .as_deref(),
            Some("app=web")
        );

        let patched = api
            .patch_scale(
                "web",
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": { "replicas": 5 } })),
            )
            .await
            .expect("patch scale");
        assert_eq!(patched.spec.and_then(|s| s.replicas), Some(5));
        let deploy = api.get("web").await.expect("get");
        assert_eq!(deploy.spec.as_ref().and_then(|s| s.replicas), Some(5));
        assert_eq!(
            deploy.metadata.generation,
            Some(2),
            "a replicas change is a spec change"
        );

        let mut scale = api.get_scale("web").await.expect("get scale");
        scale.spec.as_mut().expect("spec").replicas = Some(0);
        api.replace_scale("web", &PostParams::default(), &scale)
            .await
            .expect("replace scale");
        assert_eq!(
            api.get("web")
                .await
                .expect("get")
                .spec
                .and_then(|s| s.replicas),
            Some(0)
        );
        // The Scale carries the parent's resourceVersion: a stale one conflicts.
        assert_eq!(
            api_code(
                api.replace_scale("web", &PostParams::default(), &scale)
                    .await
            ),
            409
        );
    })
    .await;
}

#[tokio::test]
async fn scale_works_for_a_crd_loaded_from_a_directory() {
    on_both_transports(|ctx| async move {
        let dir = std::env::temp_dir().join(format!(
            "memkube-crds-{}-{}",
            std::process::id(),
            ctx.transport
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        std::fs::write(dir.join("widget.yaml"), WIDGET_CRD).expect("write CRD");
        std::fs::write(dir.join("notes.txt"), "not yaml: [").expect("write other file");
        let names = ctx.server.load_crds_from_dir(&dir).expect("CRDs load");
        std::fs::remove_dir_all(&dir).expect("clean up");
        assert_eq!(names, vec!["widgets.memkube.test".to_string()]);

        let api = widgets(&ctx);
        let widget: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "memkube.test/v1",
            "kind": "Widget",
            "metadata": { "name": "w" },
            "spec": { "replicas": 1 },
            "status": { "ignored": "on create" },
        }))
        .expect("valid object");
        let created = api
            .create(&PostParams::default(), &widget)
            .await
            .expect("create widget");
        assert!(
            created.data.get("status").is_none(),
            "{}: status is dropped on create",
            ctx.transport
        );
        api.patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": { "replicas": 1, "selector": "app=w" } })),
        )
        .await
        .expect("status patch");

        let scale = api.get_scale("w").await.expect("get scale");
        assert_eq!(scale.spec.as_ref().and_then(|s| s.replicas), Some(1));
        assert_eq!(scale.status.as_ref().map(|s| s.replicas), Some(1));
        assert_eq!(
            scale
                .status
                .as_ref()
                .and_then(|s| s.selector.clone())
                .as_deref(),
            Some("app=w")
        );
        api.patch_scale(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "replicas": 4 } })),
        )
        .await
        .expect("patch scale");
        let widget = api.get("w").await.expect("get widget");
        assert_eq!(
            widget.data.pointer("/spec/replicas"),
            Some(&json!(4)),
            "{}",
            ctx.transport
        );
        assert_eq!(widget.metadata.generation, Some(2));
    })
    .await;
}

#[tokio::test]
async fn owner_reference_garbage_collection_deletes_dependents() {
    on_both_transports(|ctx| async move {
        let deployments: Api<Deployment> = Api::default_namespaced(ctx.client.clone());
        let config_maps: Api<ConfigMap> = Api::default_namespaced(ctx.client.clone());
        let owner = deployments.create(&PostParams::default(), &deployment("owner", 1)).await.expect("owner");
        let owner_ref = json!([{
            "apiVersion": "apps/v1", "kind": "Deployment", "name": "owner",
            "uid": owner.metadata.uid.clone().expect("uid"), "controller": true,
        }]);
        for name in ["child", "orphan-candidate"] {
            let mut cm = config_map(name, &[]);
            cm.metadata.owner_references = serde_json::from_value(owner_ref.clone()).expect("owner refs");
            let created = config_maps.create(&PostParams::default(), &cm).await.expect("dependent");
            // A grandchild owned by the dependent goes too, transitively.
            let mut grandchild = config_map(&format!("{name}-grandchild"), &[]);
            grandchild.metadata.owner_references = serde_json::from_value(json!([{
                "apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": created.metadata.uid.clone().expect("uid"),
            }]))
            .expect("owner refs");
            config_maps.create(&PostParams::default(), &grandchild).await.expect("grandchild");
        }
        // A dependent with a finalizer is marked for deletion, not removed.
        let mut held = config_map("held", &[]);
        held.metadata.owner_references = serde_json::from_value(owner_ref.clone()).expect("owner refs");
        held.metadata.finalizers = Some(vec!["memkube.test/hold".to_string()]);
        config_maps.create(&PostParams::default(), &held).await.expect("held");

        deployments.delete("owner", &DeleteParams::background()).await.expect("delete owner");
        let remaining: Vec<String> =
            config_maps.list(&ListParams::default()).await.expect("list").items.iter().map(name_of).collect();
        assert_eq!(remaining, vec!["held".to_string()], "{}", ctx.transport);
        assert!(config_maps.get("held").await.expect("get").metadata.deletion_timestamp.is_some());

        // Orphan propagation keeps dependents and drops their owner reference.
        let owner = deployments.create(&PostParams::default(), &deployment("owner2", 1)).await.expect("owner2");
        let mut cm = config_map("kept", &[]);
        cm.metadata.owner_references = serde_json::from_value(json!([{
            "apiVersion": "apps/v1", "kind": "Deployment", "name": "owner2", "uid": owner.metadata.uid.clone().expect("uid"),
        }]))
        .expect("owner refs");
        config_maps.create(&PostParams::default(), &cm).await.expect("kept");
        deployments.delete("owner2", &DeleteParams::orphan()).await.expect("delete owner2");
        let kept = config_maps.get("kept").await.expect("orphan survives");
        assert!(kept.metadata.owner_references.unwrap_or_default().is_empty(), "{}", ctx.transport);
    })
    .await;
}

#[tokio::test]
async fn foreground_deletion_removes_the_owner_after_its_dependents() {
    on_both_transports(|ctx| async move {
        let deployments: Api<Deployment> = Api::default_namespaced(ctx.client.clone());
        let config_maps: Api<ConfigMap> = Api::default_namespaced(ctx.client.clone());
        let owner = deployments.create(&PostParams::default(), &deployment("owner", 1)).await.expect("owner");
        let mut cm = config_map("child", &[]);
        cm.metadata.finalizers = Some(vec!["memkube.test/hold".to_string()]);
        cm.metadata.owner_references = serde_json::from_value(json!([{
            "apiVersion": "apps/v1", "kind": "Deployment", "name": "owner", "uid": owner.metadata.uid.clone().expect("uid"),
        }]))
        .expect("owner refs");
        config_maps.create(&PostParams::default(), &cm).await.expect("child");

        deployments.delete("owner", &DeleteParams::foreground()).await.expect("delete");
        let waiting = deployments.get("owner").await.expect("owner waits for its dependents");
        assert!(waiting.metadata.finalizers.unwrap_or_default().contains(&"foregroundDeletion".to_string()));
        config_maps
            .patch("child", &PatchParams::default(), &Patch::Merge(json!({ "metadata": { "finalizers": null } })))
            .await
            .expect("release child");
        assert!(config_maps.get_opt("child").await.expect("get").is_none());
        assert!(deployments.get_opt("owner").await.expect("get").is_none(), "{}", ctx.transport);
    })
    .await;
}

#[tokio::test]
async fn list_filters_by_label_and_field_selectors_and_pages_with_continue() {
    on_both_transports(|ctx| async move {
        let api: Api<ConfigMap> = Api::default_namespaced(ctx.client.clone());
        for i in 0..7 {
            let tier = if i % 2 == 0 { "even" } else { "odd" };
            api.create(
                &PostParams::default(),
                &config_map(&format!("cm-{i}"), &[("tier", tier), ("app", "x")]),
            )
            .await
            .expect("create");
        }
        api.create(&PostParams::default(), &config_map("unlabelled", &[]))
            .await
            .expect("create");
        let names = |list: kube::core::ObjectList<ConfigMap>| {
            list.items.iter().map(name_of).collect::<Vec<_>>()
        };
        let count = |selector: &'static str| {
            let api = api.clone();
            async move {
                api.list(&ListParams::default().labels(selector))
                    .await
                    .expect("list")
                    .items
                    .len()
            }
        };
        assert_eq!(count("tier=even").await, 4, "{}", ctx.transport);
        assert_eq!(count("tier!=even").await, 4, "includes the unlabelled one");
        assert_eq!(count("tier in (odd,other)").await, 3);
        assert_eq!(count("tier notin (odd)").await, 5);
        assert_eq!(count("app").await, 7);
        assert_eq!(count("!app").await, 1);
        assert_eq!(count("app=x,tier==odd").await, 3);
        let by_name = api
            .list(&ListParams::default().fields("metadata.name=cm-3"))
            .await
            .expect("list");
        assert_eq!(names(by_name), vec!["cm-3".to_string()]);

        let mut pages = 0;
        let mut seen = Vec::new();
        let mut params = ListParams::default().limit(3);
        let mut list_rv = None;
        loop {
            let page = api.list(&params).await.expect("page");
            pages += 1;
            list_rv.get_or_insert(page.metadata.resource_version.clone());
            assert_eq!(
                Some(page.metadata.resource_version.clone()),
                list_rv,
                "pages share the list's resourceVersion"
            );
            let token = page.metadata.continue_.clone();
            seen.extend(names(page));
            match token {
                Some(token) if !token.is_empty() => params = params.continue_token(&token),
                _ => break,
            }
        }
        assert_eq!(pages, 3);
        assert_eq!(seen.len(), 8);
        let mut sorted = seen.clone();
        sorted.sort();
        assert_eq!(seen, sorted, "items come in key order");
    })
    .await;
}

#[tokio::test]
async fn status_writes_only_change_status_and_main_writes_never_do() {
    on_both_transports(|ctx| async move {
        let api: Api<Deployment> = Api::default_namespaced(ctx.client.clone());
        api.create(&PostParams::default(), &deployment("web", 1))
            .await
            .expect("create");
        let status_patch = json!({ "spec": { "replicas": 9 }, "status": { "replicas": 3 } });
        let after_status = api
            .patch_status("web", &PatchParams::default(), &Patch::Merge(status_patch))
            .await
            .expect("status patch");
        assert_eq!(
            after_status.status.as_ref().and_then(|s| s.replicas),
            Some(3)
        );
        assert_eq!(
            after_status.spec.as_ref().and_then(|s| s.replicas),
            Some(1),
            "{}: spec ignored on /status",
            ctx.transport
        );
        assert_eq!(
            after_status.metadata.generation,
            Some(1),
            "status writes do not bump generation"
        );

        let main_patch = json!({ "spec": { "replicas": 2 }, "status": { "replicas": 7 } });
        let after_main = api
            .patch("web", &PatchParams::default(), &Patch::Merge(main_patch))
            .await
            .expect("patch");
        assert_eq!(
            after_main.status.as_ref().and_then(|s| s.replicas),
            Some(3),
            "status ignored on the main resource"
        );
        assert_eq!(after_main.spec.as_ref().and_then(|s| s.replicas), Some(2));

        let mut replaced = after_main.clone();
        replaced.status = None;
        let replaced = api
            .replace_status("web", &PostParams::default(), &replaced)
            .await
            .expect("replace status");
        assert!(replaced.status.is_none());
        // ConfigMaps have no status subresource.
        let cms: Api<ConfigMap> = Api::default_namespaced(ctx.client.clone());
        cms.create(&PostParams::default(), &config_map("cm", &[]))
            .await
            .expect("create");
        assert_eq!(api_code(cms.get_status("cm").await), 404);
    })
    .await;
}

#[tokio::test]
async fn generation_bumps_only_when_the_spec_changes() {
    on_both_transports(|ctx| async move {
        let api: Api<Deployment> = Api::default_namespaced(ctx.client.clone());
        let created = api
            .create(&PostParams::default(), &deployment("web", 1))
            .await
            .expect("create");
        assert_eq!(created.metadata.generation, Some(1));
        let labelled = api
            .patch(
                "web",
                &PatchParams::default(),
                &Patch::Merge(json!({ "metadata": { "labels": { "a": "b" } } })),
            )
            .await
            .expect("label");
        assert_eq!(
            labelled.metadata.generation,
            Some(1),
            "{}: metadata is not spec",
            ctx.transport
        );
        let unchanged = api
            .patch(
                "web",
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": { "replicas": 1 } })),
            )
            .await
            .expect("no-op");
        assert_eq!(
            unchanged.metadata.resource_version, labelled.metadata.resource_version,
            "a no-op write is not a write"
        );
        let scaled = api
            .patch(
                "web",
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": { "replicas": 3 } })),
            )
            .await
            .expect("spec change");
        assert_eq!(scaled.metadata.generation, Some(2));
    })
    .await;
}

#[tokio::test]
async fn generate_name_creates_distinct_names_with_the_prefix() {
    on_both_transports(|ctx| async move {
        let api: Api<ConfigMap> = Api::default_namespaced(ctx.client.clone());
        let mut names = std::collections::BTreeSet::new();
        for _ in 0..20 {
            let mut cm = config_map("", &[]);
            cm.metadata.name = None;
            cm.metadata.generate_name = Some("gen-".to_string());
            let created = api
                .create(&PostParams::default(), &cm)
                .await
                .expect("create");
            let name = name_of(&created);
            assert!(
                name.starts_with("gen-") && name.len() == 9,
                "{}: {name}",
                ctx.transport
            );
            assert!(
                created.metadata.uid.is_some() && created.metadata.creation_timestamp.is_some()
            );
            names.insert(name);
        }
        assert_eq!(names.len(), 20);
    })
    .await;
}

#[tokio::test]
async fn namespaced_objects_need_their_namespace_and_go_with_it() {
    on_both_transports(|ctx| async move {
        let missing: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), "missing");
        assert_eq!(
            api_code(
                missing
                    .create(&PostParams::default(), &config_map("cm", &[]))
                    .await
            ),
            404,
            "{}",
            ctx.transport
        );

        let namespaces: Api<Namespace> = Api::all(ctx.client.clone());
        let names: Vec<String> = namespaces
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .iter()
            .map(name_of)
            .collect();
        assert_eq!(names, vec!["default", "kube-public", "kube-system"]);

        ctx.server.create_namespace("team").expect("namespace");
        let team: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), "team");
        let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), "team");
        team.create(&PostParams::default(), &config_map("cm", &[]))
            .await
            .expect("create");
        let mut held = config_map("held", &[]);
        held.metadata.finalizers = Some(vec!["memkube.test/hold".to_string()]);
        team.create(&PostParams::default(), &held)
            .await
            .expect("create");
        let pod: Pod = serde_json::from_value(
            json!({ "metadata": { "name": "p" }, "spec": { "containers": [] } }),
        )
        .expect("pod");
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("pod");

        namespaces
            .delete("team", &DeleteParams::default())
            .await
            .expect("delete namespace");
        let terminating = namespaces
            .get("team")
            .await
            .expect("waits for the held object");
        assert_eq!(
            terminating.status.and_then(|s| s.phase).as_deref(),
            Some("Terminating")
        );
        assert!(team.get_opt("cm").await.expect("get").is_none());
        assert!(pods.get_opt("p").await.expect("get").is_none());
        assert_eq!(
            api_code(
                team.create(&PostParams::default(), &config_map("new", &[]))
                    .await
            ),
            403
        );
        team.patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "finalizers": null } })),
        )
        .await
        .expect("release");
        assert!(
            namespaces.get_opt("team").await.expect("get").is_none(),
            "{}",
            ctx.transport
        );
    })
    .await;
}

#[tokio::test]
async fn injected_failures_fail_matching_requests_and_requests_are_counted() {
    on_both_transports(|ctx| async move {
        let api: Api<ConfigMap> = Api::default_namespaced(ctx.client.clone());
        api.create(&PostParams::default(), &config_map("cm", &[]))
            .await
            .expect("create");
        ctx.server.reset_request_counts();
        ctx.server.inject_failure(
            FailureRule::new(500)
                .verb(Verb::Get)
                .resource("configmaps")
                .name("cm")
                .times(2),
        );
        assert_eq!(api_code(api.get("cm").await), 500, "{}", ctx.transport);
        match api.get("cm").await {
            Err(kube::Error::Api(status)) => assert_eq!(status.reason, "InternalError"),
            other => panic!("expected the second injected failure, got {other:?}"),
        }
        api.get("cm").await.expect("the rule is used up");
        api.list(&ListParams::default())
            .await
            .expect("lists are not matched");

        ctx.server
            .inject_failure(FailureRule::new(403).resource("configmaps"));
        assert_eq!(api_code(api.list(&ListParams::default()).await), 403);
        ctx.server.clear_failures();
        api.list(&ListParams::default()).await.expect("cleared");

        // Reading the store directly is not a request.
        let stored = ctx.server.objects("v1", "ConfigMap").expect("served kind");
        assert_eq!(stored.len(), 1);
        assert_eq!(stored[0]["metadata"]["name"], "cm");
        assert!(ctx.server.objects("v1", "Nothing").is_err());

        let counts = ctx.server.request_counts();
        assert_eq!(counts.get(Verb::Get, "configmaps"), 3, "{}", ctx.transport);
        assert_eq!(counts.get(Verb::List, "configmaps"), 3);
        assert_eq!(counts.total(), 6);
    })
    .await;
}

#[tokio::test]
async fn merge_json_and_apply_patches_change_objects() {
    on_both_transports(|ctx| async move {
        let api: Api<ConfigMap> = Api::default_namespaced(ctx.client.clone());
        api.create(&PostParams::default(), &config_map("cm", &[])).await.expect("create");
        let merged = api
            .patch("cm", &PatchParams::default(), &Patch::Merge(json!({ "data": { "key": null, "m": "1" } })))
            .await
            .expect("merge");
        assert_eq!(merged.data, Some(BTreeMap::from([("m".to_string(), "1".to_string())])), "{}", ctx.transport);

        let json_patch: json_patch::Patch =
            serde_json::from_value(json!([{ "op": "add", "path": "/data/j", "value": "2" }])).expect("patch");
        let patched = api.patch("cm", &PatchParams::default(), &Patch::Json::<()>(json_patch)).await.expect("json");
        assert_eq!(patched.data.as_ref().and_then(|d| d.get("j")).map(String::as_str), Some("2"));

        let strategic = api
            .patch("cm", &PatchParams::default(), &Patch::Strategic(json!({ "data": { "s": "3" } })))
            .await
            .expect("strategic");
        assert_eq!(strategic.data.as_ref().map(BTreeMap::len), Some(3));

        let applied = api
            .patch(
                "cm",
                &PatchParams::apply("memkube-test").force(),
                &Patch::Apply(json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "cm" }, "data": { "a": "4" } })),
            )
            .await
            .expect("apply");
        assert_eq!(applied.data.as_ref().and_then(|d| d.get("a")).map(String::as_str), Some("4"));
        let managers: Vec<String> =
            applied.metadata.managed_fields.unwrap_or_default().into_iter().filter_map(|m| m.manager).collect();
        assert_eq!(managers, vec!["memkube-test".to_string()]);

        // Apply creates what does not exist.
        let created = api
            .patch(
                "fresh",
                &PatchParams::apply("memkube-test"),
                &Patch::Apply(json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "fresh" } })),
            )
            .await
            .expect("apply creates");
        assert!(created.metadata.uid.is_some(), "{}", ctx.transport);
    })
    .await;
}

#[tokio::test]
async fn discovery_finds_builtins_subresources_and_installed_crds() {
    on_both_transports(|ctx| async move {
        ctx.server.load_crd_yaml(WIDGET_CRD).expect("CRD installs");
        let discovery = kube::Discovery::new(ctx.client.clone())
            .run()
            .await
            .expect("discovery runs");
        for (group, kind) in [
            ("apps", "Deployment"),
            ("autoscaling", "HorizontalPodAutoscaler"),
            ("coordination.k8s.io", "Lease"),
            ("discovery.k8s.io", "EndpointSlice"),
            ("batch", "Job"),
            ("", "Secret"),
            ("memkube.test", "Widget"),
        ] {
            let gvk = GroupVersionKind {
                group: group.to_string(),
                version: String::new(),
                kind: kind.to_string(),
            };
            let found = discovery
                .groups()
                .flat_map(|g| g.recommended_resources())
                .any(|(ar, _)| ar.group == gvk.group && ar.kind == gvk.kind);
            assert!(found, "{}: {group}/{kind} is discovered", ctx.transport);
        }
        let apps = ctx
            .client
            .list_api_group_resources("apps/v1")
            .await
            .expect("apps/v1");
        let names: Vec<&str> = apps.resources.iter().map(|r| r.name.as_str()).collect();
        assert!(names.contains(&"deployments/scale") && names.contains(&"deployments/status"));
        let widgets = ctx
            .client
            .list_api_group_resources("memkube.test/v1")
            .await
            .expect("widgets");
        let widget = widgets
            .resources
            .iter()
            .find(|r| r.name == "widgets")
            .expect("widgets listed");
        assert_eq!(
            widget.short_names.clone().unwrap_or_default(),
            vec!["wd".to_string()]
        );
        let version = ctx.client.apiserver_version().await.expect("version");
        assert_eq!(version.major, "1");
    })
    .await;
}

#[tokio::test]
async fn subject_access_reviews_are_answered_by_the_policy() {
    use k8s_openapi::api::authorization::v1::{SubjectAccessReview, SubjectAccessReviewStatus};
    on_both_transports(|ctx| async move {
        let api: Api<SubjectAccessReview> = Api::all(ctx.client.clone());
        let review: SubjectAccessReview = serde_json::from_value(json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": { "user": "mallory", "resourceAttributes": { "verb": "get", "resource": "pods" } },
        }))
        .expect("review");
        let allowed = api.create(&PostParams::default(), &review).await.expect("review");
        assert!(allowed.status.expect("status").allowed, "{}: allowed by default", ctx.transport);

        ctx.server.set_access_policy(|spec| SubjectAccessReviewStatus {
            allowed: spec.user.as_deref() != Some("mallory"),
            reason: Some("memkube test policy".to_string()),
            ..Default::default()
        });
        let denied = api.create(&PostParams::default(), &review).await.expect("review");
        assert!(!denied.status.expect("status").allowed);
    })
    .await;
}

#[tokio::test]
async fn token_reviews_are_answered_by_the_token_policy() {
    use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewStatus, UserInfo};
    on_both_transports(|ctx| async move {
        let api: Api<TokenReview> = Api::all(ctx.client.clone());
        let review = |token: &str| -> TokenReview {
            serde_json::from_value(json!({
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenReview",
                "spec": { "token": token },
            }))
            .expect("review")
        };
        let unknown = api
            .create(&PostParams::default(), &review("t1"))
            .await
            .expect("review");
        assert_eq!(
            unknown.status.expect("status").authenticated,
            Some(false),
            "{}: no token is known by default",
            ctx.transport
        );

        ctx.server.set_token_policy(|spec| TokenReviewStatus {
            authenticated: Some(spec.token.as_deref() == Some("t1")),
            user: Some(UserInfo {
                username: Some("alice".to_string()),
                ..Default::default()
            }),
            ..Default::default()
        });
        let known = api
            .create(&PostParams::default(), &review("t1"))
            .await
            .expect("review");
        let status = known.status.expect("status");
        assert_eq!(status.authenticated, Some(true));
        assert_eq!(
            status.user.and_then(|u| u.username).as_deref(),
            Some("alice")
        );
        let other = api
            .create(&PostParams::default(), &review("t2"))
            .await
            .expect("review");
        assert_eq!(other.status.expect("status").authenticated, Some(false));
    })
    .await;
}

#[tokio::test]
async fn ten_thousand_created_objects_are_all_observed_through_a_watch() {
    const COUNT: usize = 10_000;
    on_both_transports(|ctx| async move {
        ctx.server.create_namespace("bulk").expect("namespace");
        let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), "bulk");
        let mut events = watch_events(api.clone(), watcher::Config::default());
        next_matching(&mut events, "initial list", |e| {
            matches!(e, Ok(watcher::Event::InitDone)).then_some(())
        })
        .await;

        let creates = futures::stream::iter(0..COUNT)
            .map(|i| {
                let api = api.clone();
                async move {
                    api.create(
                        &PostParams::default(),
                        &config_map(&format!("cm-{i:05}"), &[]),
                    )
                    .await
                }
            })
            .buffer_unordered(32)
            .try_collect::<Vec<_>>();
        let created = within("10,000 creates", creates)
            .await
            .expect("creates succeed");
        assert_eq!(created.len(), COUNT);

        let mut seen = std::collections::HashSet::new();
        while seen.len() < COUNT {
            next_matching(&mut events, "10,000 watch events", |e| match e {
                Ok(watcher::Event::Apply(cm)) => Some(seen.insert(name_of(cm))),
                _ => None,
            })
            .await;
        }
        assert_eq!(seen.len(), COUNT, "{}", ctx.transport);
        assert_eq!(
            ctx.server.request_counts().get(Verb::Create, "configmaps"),
            COUNT as u64
        );
        let listed = api.list(&ListParams::default()).await.expect("list");
        assert_eq!(listed.items.len(), COUNT);
    })
    .await;
}

#[tokio::test]
async fn a_kubeconfig_written_for_the_loopback_port_reaches_the_server() {
    let server = memkube::MemKube::new();
    let loopback = server.serve_loopback().await.expect("bind");
    let path = std::env::temp_dir().join(format!("memkube-kubeconfig-{}.yaml", std::process::id()));
    loopback.write_kubeconfig(&path).expect("write kubeconfig");
    let kubeconfig = kube::config::Kubeconfig::read_from(&path).expect("kubeconfig parses");
    std::fs::remove_file(&path).expect("clean up");
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("config");
    let client = kube::Client::try_from(config).expect("client");
    let namespaces: Api<Namespace> = Api::all(client);
    assert!(namespaces.get("default").await.is_ok());
}

#[tokio::test]
async fn streaming_list_watchers_bookmarks_and_metadata_watchers_work() {
    on_both_transports(|ctx| async move {
        let api: Api<ConfigMap> = Api::default_namespaced(ctx.client.clone());
        api.create(&PostParams::default(), &config_map("before", &[]))
            .await
            .expect("create");

        // sendInitialEvents=true: initial ADDED events, then the initial-events-end bookmark.
        let mut streaming = watch_events(api.clone(), watcher::Config::default().streaming_lists());
        let mut initial = Vec::new();
        next_matching(&mut streaming, "streamed initial state", |e| match e {
            Ok(watcher::Event::InitApply(cm)) => {
                initial.push(name_of(cm));
                None
            }
            Ok(watcher::Event::InitDone) => Some(()),
            _ => None,
        })
        .await;
        assert_eq!(initial, vec!["before".to_string()], "{}", ctx.transport);

        // A raw watch that allows bookmarks gets one.
        let mut raw = api
            .watch(&WatchParams::default().timeout(30), "0")
            .await
            .expect("watch")
            .boxed();
        within("a bookmark", async {
            loop {
                match raw.try_next().await.expect("watch works") {
                    Some(WatchEvent::Bookmark(bookmark)) => {
                        assert!(!bookmark.metadata.resource_version.is_empty());
                        return;
                    }
                    Some(_) => {}
                    None => panic!("watch ended before a bookmark"),
                }
            }
        })
        .await;

        let metadata_api: Api<kube::core::PartialObjectMeta<ConfigMap>> =
            Api::default_namespaced(ctx.client.clone());
        let mut metadata = watcher(metadata_api, watcher::Config::default()).boxed();
        api.create(&PostParams::default(), &config_map("after", &[]))
            .await
            .expect("create");
        let mut names = Vec::new();
        within("metadata events", async {
            while !(names.contains(&"after".to_string()) && names.contains(&"before".to_string())) {
                if let Some(watcher::Event::Apply(meta) | watcher::Event::InitApply(meta)) =
                    metadata.try_next().await.expect("metadata watch works")
                {
                    names.push(name_of(&meta));
                }
            }
        })
        .await;
        next_matching(
            &mut streaming,
            "events after the streamed list",
            |e| match e {
                Ok(watcher::Event::Apply(cm)) if name_of(cm) == "after" => Some(()),
                _ => None,
            },
        )
        .await;
    })
    .await;
}

#[tokio::test]
async fn a_selector_watch_sees_objects_enter_and_leave_the_selection() {
    on_both_transports(|ctx| async move {
        let api: Api<ConfigMap> = Api::default_namespaced(ctx.client.clone());
        let mut events = watch_events(api.clone(), watcher::Config::default().labels("team=a"));
        next_matching(&mut events, "initial list", |e| {
            matches!(e, Ok(watcher::Event::InitDone)).then_some(())
        })
        .await;
        api.create(&PostParams::default(), &config_map("cm", &[("team", "b")]))
            .await
            .expect("create");
        let relabel =
            |team: &str| Patch::Merge(json!({ "metadata": { "labels": { "team": team } } }));
        api.patch("cm", &PatchParams::default(), &relabel("a"))
            .await
            .expect("enter");
        next_matching(&mut events, "entering the selection", |e| match e {
            Ok(watcher::Event::Apply(cm)) if name_of(cm) == "cm" => Some(()),
            Ok(watcher::Event::Delete(_)) => panic!("unexpected delete"),
            _ => None,
        })
        .await;
        api.patch("cm", &PatchParams::default(), &relabel("c"))
            .await
            .expect("leave");
        next_matching(&mut events, "leaving the selection", |e| match e {
            Ok(watcher::Event::Delete(cm)) if name_of(cm) == "cm" => Some(()),
            _ => None,
        })
        .await;
        assert_eq!(
            api.list(&ListParams::default().labels("team=a"))
                .await
                .expect("list")
                .items
                .len(),
            0,
            "{}",
            ctx.transport
        );
    })
    .await;
}

#[tokio::test]
async fn service_account_token_requests_issue_tokens_for_existing_accounts_only() {
    use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
    use k8s_openapi::api::core::v1::ServiceAccount;
    on_both_transports(|ctx| async move {
        let accounts: Api<ServiceAccount> = Api::default_namespaced(ctx.client.clone());
        let request = |seconds: Option<i64>| TokenRequest {
            spec: TokenRequestSpec {
                expiration_seconds: seconds,
                audiences: vec!["vault".to_string()],
                ..Default::default()
            },
            ..Default::default()
        };
        // No such ServiceAccount: 404, as on a real server.
        assert_eq!(
            api_code(
                accounts
                    .create_token_request("reader", &PostParams::default(), &request(None))
                    .await
            ),
            404
        );
        let account: ServiceAccount =
            serde_json::from_value(json!({"metadata": {"name": "reader"}})).expect("account");
        accounts
            .create(&PostParams::default(), &account)
            .await
            .expect("create");
        let first = accounts
            .create_token_request("reader", &PostParams::default(), &request(None))
            .await
            .expect("a token");
        let second = accounts
            .create_token_request("reader", &PostParams::default(), &request(Some(7200)))
            .await
            .expect("a token");
        let status = first.status.expect("status");
        assert!(!status.token.is_empty());
        assert_ne!(Some(status.token.clone()), second.status.map(|s| s.token));
        assert_eq!(first.spec.expiration_seconds, Some(3600));
        assert_eq!(second.spec.expiration_seconds, Some(7200));
        // Shorter than 10 minutes: 422 Invalid.
        assert_eq!(
            api_code(
                accounts
                    .create_token_request("reader", &PostParams::default(), &request(Some(60)))
                    .await
            ),
            422
        );
        let issued = ctx.server.issued_tokens();
        assert_eq!(issued.len(), 2);
        assert_eq!(issued[0].token, status.token);
        assert_eq!(issued[0].service_account, "reader");
        assert_eq!(issued[0].namespace, "default");
        assert_eq!(issued[0].audiences, vec!["vault".to_string()]);
        assert_eq!(issued[1].expiration_seconds, 7200);
        assert_eq!(
            ctx.server
                .request_counts()
                .get(Verb::Create, "serviceaccounts/token"),
            4
        );
    })
    .await;
}
