//! Reads: lists with selectors and pages, watches, their resumption, bookmarks and streaming lists.

use super::*;

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
