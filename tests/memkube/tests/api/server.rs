//! The rest of the API server: the scale subresource, discovery, access and token reviews, token
//! requests, injected failures, and a kubeconfig for the loopback port.

use super::*;

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
