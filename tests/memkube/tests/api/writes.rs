//! Writes: conflicts, finalizers, status and generation, generated names, namespaces, patches,
//! and the garbage collector.

use super::*;

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
