//! Where trigger parameters come from: Secrets, ConfigMaps and container variables, the
//! cluster object namespace, OAuth2, bound tokens, filePath, and a documented example end to end.

use super::*;

#[tokio::test]
async fn secret_target_ref_config_map_target_ref_and_env_fill_auth_params() {
    let c = cluster();
    c.server
        .seed(&secret(NS, "creds", &[("password", SECRET_VALUE)]))
        .unwrap();
    c.server
        .seed(&config_map(NS, "settings", &[("user", "app")]))
        .unwrap();
    c.server
        .seed(&deployment(
            "worker",
            "[{name: app, image: x, env: [{name: REGION, value: eu-1}]}]",
        ))
        .unwrap();
    c.server
        .seed(&yaml::<keda_api::TriggerAuthentication>(&format!(
            "apiVersion: keda.sh/v1alpha1
kind: TriggerAuthentication
metadata: {{name: all-sources, namespace: {NS}}}
spec:
  podIdentity: {{provider: none}}
  secretTargetRef: [{{parameter: password, name: creds, key: password}}]
  configMapTargetRef: [{{parameter: username, name: settings, key: user}}]
  env: [{{parameter: region, name: REGION}}]
"
        )))
        .unwrap();
    let t =
        trigger("{type: redis, metadata: {listName: q}, authenticationRef: {name: all-sources}}");

    let resolved = resolve(&c.resolver, source("so", "worker"), &t)
        .await
        .unwrap();

    assert_eq!(auth(&resolved, "password"), SECRET_VALUE);
    assert_eq!(auth(&resolved, "username"), "app");
    assert_eq!(auth(&resolved, "region"), "eu-1");
    assert_eq!(resolved.pod_identity.provider, "none");
    assert!(resolved.resolved_env.is_empty());
    let debug = format!("{resolved:?}");
    assert!(!debug.contains(SECRET_VALUE), "{debug}");

    // applying it fills the scaler context the factories parse
    let mut ctx = ScalerContext::from_trigger(&t, 0);
    resolved.apply(&mut ctx);
    assert_eq!(ctx.auth_params["password"].expose(), SECRET_VALUE);
    let so = ScalableRef::new(keda_scalers::ScalableKind::ScaledObject, NS, "so");
    assert_eq!(
        c.resolver.dependencies(&so),
        [
            "ConfigMap team/settings",
            "Secret team/creds",
            "TriggerAuthentication team/all-sources",
            "apps/v1/deployments team/worker",
        ]
    );
}

#[tokio::test]
async fn from_env_reads_plain_values_secret_and_config_map_keys_and_env_from_with_prefix() {
    let c = cluster();
    c.server
        .seed(&secret(NS, "creds", &[("password", SECRET_VALUE)]))
        .unwrap();
    c.server
        .seed(&secret(NS, "bulk", &[("token", "t-1")]))
        .unwrap();
    c.server
        .seed(&config_map(
            NS,
            "settings",
            &[("host", "redis"), ("port", "6379")],
        ))
        .unwrap();
    c.server
        .seed(&deployment(
            "worker",
            "[{name: app, image: x,
               envFrom: [{prefix: CFG_, configMapRef: {name: settings}}, {secretRef: {name: bulk}}],
               env: [
                 {name: ADDRESS, value: '$(CFG_host):$(CFG_port)'},
                 {name: PASSWORD, valueFrom: {secretKeyRef: {name: creds, key: password}}},
                 {name: HOST, valueFrom: {configMapKeyRef: {name: settings, key: host}}},
                 {name: OPTIONAL, valueFrom: {secretKeyRef: {name: absent, key: k, optional: true}}}
               ]}]",
        ))
        .unwrap();
    let t = trigger(
        "{type: redis, metadata: {
            addressFromEnv: ADDRESS, passwordFromEnv: PASSWORD, hostFromEnv: HOST,
            usernameFromEnv: CFG_host, tokenFromEnv: token, listName: q}}",
    );

    let resolved = resolve(&c.resolver, source("so", "worker"), &t)
        .await
        .unwrap();

    let env = &resolved.resolved_env;
    assert_eq!(env["ADDRESS"], "redis:6379");
    assert_eq!(env["PASSWORD"], SECRET_VALUE);
    assert_eq!(env["HOST"], "redis");
    assert_eq!(env["CFG_host"], "redis");
    assert_eq!(env["token"], "t-1");
    // only the variables a trigger names reach the scaler
    assert_eq!(env.len(), 5, "{resolved:?}");

    // the optional reference leaves its variable undefined, so asking for it fails clearly
    let t = trigger("{type: redis, metadata: {passwordFromEnv: OPTIONAL, listName: q}}");
    let text = expect_err(resolve(&c.resolver, source("so", "worker"), &t).await);
    assert_eq!(
        text,
        "trigger 0 (redis): metadata \"passwordFromEnv\": variable \"OPTIONAL\" is not defined in container \"app\" of Deployment team/worker"
    );
}

#[tokio::test]
async fn env_source_container_name_selects_the_container_and_auth_env_can_pick_another() {
    let c = cluster();
    c.server
        .seed(&deployment(
            "worker",
            "[{name: first, image: x, env: [{name: ROLE, value: first}]},
              {name: second, image: x, env: [{name: ROLE, value: second}]}]",
        ))
        .unwrap();
    c.server
        .seed(&yaml::<keda_api::TriggerAuthentication>(&format!(
            "apiVersion: keda.sh/v1alpha1
kind: TriggerAuthentication
metadata: {{name: by-container, namespace: {NS}}}
spec:
  env:
    - {{parameter: default, name: ROLE}}
    - {{parameter: explicit, name: ROLE, containerName: first}}
"
        )))
        .unwrap();
    let t = trigger(
        "{type: redis, metadata: {roleFromEnv: ROLE}, authenticationRef: {name: by-container}}",
    );

    let default = resolve(&c.resolver, source("so", "worker"), &t)
        .await
        .unwrap();
    assert_eq!(default.resolved_env["ROLE"], "first");

    let so = scaled_object("so", "worker", Some("second"));
    let mut session = c
        .resolver
        .session(ScaleTargetPodSource::for_scaled_object(&so));
    let chosen = session.resolve(&t, 0).await.unwrap();
    assert_eq!(chosen.resolved_env["ROLE"], "second");
    assert_eq!(auth(&chosen, "default"), "second");
    assert_eq!(auth(&chosen, "explicit"), "first");

    let so = scaled_object("so", "worker", Some("third"));
    let text = expect_err(
        c.resolver
            .session(ScaleTargetPodSource::for_scaled_object(&so))
            .resolve(&t, 0)
            .await,
    );
    assert_eq!(
        text,
        "trigger 0 (redis): metadata \"roleFromEnv\": container \"third\" not found in Deployment team/worker (containers: first, second)"
    );
}

#[tokio::test]
async fn a_scaled_job_reads_its_inline_job_template() {
    let c = cluster();
    c.server
        .seed(&secret(NS, "creds", &[("password", SECRET_VALUE)]))
        .unwrap();
    let sj: ScaledJob = yaml(&format!(
        "apiVersion: keda.sh/v1alpha1
kind: ScaledJob
metadata: {{name: batch, namespace: {NS}}}
spec:
  envSourceContainerName: job
  jobTargetRef:
    template:
      spec:
        containers:
          - {{name: init, image: x}}
          - name: job
            image: x
            env: [{{name: PASSWORD, valueFrom: {{secretKeyRef: {{name: creds, key: password}}}}}}]
  triggers: []
"
    ));
    let t = trigger("{type: redis, metadata: {passwordFromEnv: PASSWORD}}");
    let mut session = c
        .resolver
        .session(ScaleTargetPodSource::for_scaled_job(&sj));
    // the controller resolves inside spawned tasks: the future must be Send
    fn assert_send<T: Send>(value: T) -> T {
        value
    }
    let resolved = assert_send(session.resolve(&t, 0)).await.unwrap();
    assert_eq!(resolved.resolved_env["PASSWORD"], SECRET_VALUE);
}

#[tokio::test]
async fn cluster_trigger_authentication_reads_only_the_cluster_object_namespace() {
    let c = cluster();
    c.server
        .seed(&secret(
            NS,
            "shared",
            &[("password", "from-the-object-namespace")],
        ))
        .unwrap();
    c.server
        .seed(&secret(KEDA_NS, "shared", &[("password", SECRET_VALUE)]))
        .unwrap();
    c.server
        .seed(&secret(NS, "only-here", &[("password", SECRET_VALUE)]))
        .unwrap();
    for (name, secret) in [("cta", "shared"), ("cta-wrong-ns", "only-here")] {
        c.server
            .seed(&yaml::<keda_api::ClusterTriggerAuthentication>(&format!(
                "apiVersion: keda.sh/v1alpha1
kind: ClusterTriggerAuthentication
metadata: {{name: {name}}}
spec:
  secretTargetRef: [{{parameter: password, name: {secret}, key: password}}]
"
            )))
            .unwrap();
    }
    let t = trigger(
        "{type: redis, metadata: {}, authenticationRef: {name: cta, kind: ClusterTriggerAuthentication}}",
    );
    let resolved = resolve(&c.resolver, source("so", "worker"), &t)
        .await
        .unwrap();
    assert_eq!(auth(&resolved, "password"), SECRET_VALUE);

    let t = trigger(
        "{type: redis, metadata: {}, authenticationRef: {name: cta-wrong-ns, kind: ClusterTriggerAuthentication}}",
    );
    // Not found where a ClusterTriggerAuthentication reads: empty, as in KEDA (issue 29, row 4).
    let resolved = resolve(&c.resolver, source("so", "worker"), &t)
        .await
        .unwrap();
    assert_eq!(auth(&resolved, "password"), "");
    assert_eq!(
        missing(&resolved),
        [
            "trigger 0 (redis): ClusterTriggerAuthentication cta-wrong-ns: parameter \"password\": Secret keda/only-here not found; parameter \"password\" is empty, as in KEDA"
        ]
    );
}

/// Issue 16, `KEDA_RESTRICT_SECRET_ACCESS=true`: Secrets are read only in the cluster object
/// namespace. A ClusterTriggerAuthentication (whose Secrets live there) works; a
/// TriggerAuthentication's `secretTargetRef` and a container variable from a Secret in the
/// object's namespace are refused with KEDA's hint (use a ClusterTriggerAuthentication), where
/// KEDA reads the TriggerAuthentication's Secret name in its own namespace instead and leaves
/// the variable undefined. ConfigMaps are read as before.
#[tokio::test]
async fn restricted_secret_access_reads_secrets_only_in_the_cluster_object_namespace() {
    let mut config = ResolverConfig::new(KEDA_NS);
    config.cache_sync_timeout = WAIT;
    config.restrict_secret_access = true;
    let c = cluster_with(config);
    for ns in [NS, KEDA_NS] {
        c.server
            .seed(&secret(ns, "creds", &[("password", SECRET_VALUE)]))
            .unwrap();
    }
    c.server
        .seed(&config_map(NS, "settings", &[("host", "redis")]))
        .unwrap();
    c.server
        .seed(&yaml::<keda_api::TriggerAuthentication>(&format!(
            "apiVersion: keda.sh/v1alpha1
kind: TriggerAuthentication
metadata: {{name: ta, namespace: {NS}}}
spec:
  configMapTargetRef: [{{parameter: host, name: settings, key: host}}]
  secretTargetRef: [{{parameter: password, name: creds, key: password}}]
"
        )))
        .unwrap();
    c.server
        .seed(&yaml::<keda_api::ClusterTriggerAuthentication>(
            "apiVersion: keda.sh/v1alpha1
kind: ClusterTriggerAuthentication
metadata: {name: cta}
spec:
  secretTargetRef: [{parameter: password, name: creds, key: password}]
",
        ))
        .unwrap();
    c.server
        .seed(&deployment(
            "worker",
            "[{name: app, image: x, env: [
                 {name: PASSWORD, valueFrom: {secretKeyRef: {name: creds, key: password}}},
                 {name: HOST, valueFrom: {configMapKeyRef: {name: settings, key: host}}}
               ]}]",
        ))
        .unwrap();

    let t = trigger(
        "{type: redis, metadata: {}, authenticationRef: {name: cta, kind: ClusterTriggerAuthentication}}",
    );
    let resolved = resolve(&c.resolver, source("so", "worker"), &t)
        .await
        .unwrap();
    assert_eq!(auth(&resolved, "password"), SECRET_VALUE);

    let t = trigger("{type: redis, metadata: {}, authenticationRef: {name: ta}}");
    let text = expect_err(resolve(&c.resolver, source("so", "worker"), &t).await);
    assert_eq!(
        text,
        "trigger 0 (redis): TriggerAuthentication team/ta: parameter \"password\": Secret team/creds is not read: \
         secret access is restricted to the cluster object namespace \"keda\" (KEDA_RESTRICT_SECRET_ACCESS=true); \
         use a ClusterTriggerAuthentication, whose Secrets are read there, instead of a TriggerAuthentication"
    );

    let t = trigger("{type: redis, metadata: {hostFromEnv: HOST, listName: q}}");
    let resolved = resolve(&c.resolver, source("so", "worker"), &t)
        .await
        .unwrap();
    assert_eq!(resolved.resolved_env["HOST"], "redis");
    let t = trigger("{type: redis, metadata: {passwordFromEnv: PASSWORD, listName: q}}");
    let text = expect_err(resolve(&c.resolver, source("so", "worker"), &t).await);
    assert!(
        text.starts_with("trigger 0 (redis): metadata \"passwordFromEnv\": variable \"PASSWORD\"")
            && text.contains("Secret team/creds is not read: secret access is restricted")
            && text.contains("KEDA_RESTRICT_SECRET_ACCESS=true"),
        "{text}"
    );
}

/// Issue 16: `spec.oauth2` fills KEDA's parameters (`oauthTokenURI`, `clientID`,
/// `clientSecret` from its Secret, `scopes` comma-joined, `endpointParams` form-encoded), and
/// they win over a `secretTargetRef` parameter of the same name, as in KEDA (set last). A
/// missing client Secret is named as the `clientSecret` parameter, without any value.
#[tokio::test]
async fn oauth2_fills_the_client_credentials_parameters_keda_passes() {
    let c = cluster();
    c.server
        .seed(&secret(NS, "oauth", &[("secret", SECRET_VALUE)]))
        .unwrap();
    c.server
        .seed(&secret(NS, "other", &[("v", "from-secret-target-ref")]))
        .unwrap();
    c.server
        .seed(&yaml::<keda_api::TriggerAuthentication>(&format!(
            "apiVersion: keda.sh/v1alpha1
kind: TriggerAuthentication
metadata: {{name: oauth, namespace: {NS}}}
spec:
  secretTargetRef: [{{parameter: clientID, name: other, key: v}}]
  oauth2:
    type: clientCredentials
    clientId: keda-client
    clientSecret: {{valueFrom: {{secretKeyRef: {{name: oauth, key: secret}}}}}}
    tokenUrl: https://idp.example/oauth/token
    scopes: [read, 'tag:monitoring']
    tokenUrlParams: {{resource: 'api://rabbit mq', audience: rabbitmq}}
"
        )))
        .unwrap();
    c.server
        .seed(&yaml::<keda_api::TriggerAuthentication>(&format!(
            "apiVersion: keda.sh/v1alpha1
kind: TriggerAuthentication
metadata: {{name: oauth-missing, namespace: {NS}}}
spec:
  oauth2:
    type: clientCredentials
    clientId: keda-client
    clientSecret: {{valueFrom: {{secretKeyRef: {{name: oauth, key: nope}}}}}}
    tokenUrl: https://idp.example/oauth/token
"
        )))
        .unwrap();
    let t = trigger("{type: rabbitmq, metadata: {queueName: q}, authenticationRef: {name: oauth}}");
    let resolved = resolve(&c.resolver, source("so", "worker"), &t)
        .await
        .unwrap();
    assert_eq!(
        auth(&resolved, "oauthTokenURI"),
        "https://idp.example/oauth/token"
    );
    assert_eq!(auth(&resolved, "clientID"), "keda-client");
    assert_eq!(auth(&resolved, "clientSecret"), SECRET_VALUE);
    assert_eq!(auth(&resolved, "scopes"), "read,tag:monitoring");
    assert_eq!(
        auth(&resolved, "endpointParams"),
        "audience=rabbitmq&resource=api%3A%2F%2Frabbit+mq"
    );
    let so = ScalableRef::new(keda_scalers::ScalableKind::ScaledObject, NS, "so");
    assert!(
        c.resolver
            .dependencies(&so)
            .contains(&"Secret team/oauth".to_string()),
        "a changed client secret must rebuild the scaler"
    );

    let t = trigger(
        "{type: rabbitmq, metadata: {queueName: q}, authenticationRef: {name: oauth-missing}}",
    );
    // A missing client secret is empty, as KEDA's resolveAuthSecret makes it (issue 29, row 4).
    let resolved = resolve(&c.resolver, source("so", "worker"), &t)
        .await
        .unwrap();
    assert_eq!(auth(&resolved, "clientSecret"), "");
    assert_eq!(auth(&resolved, "clientID"), "keda-client");
    assert_eq!(
        missing(&resolved),
        [
            "trigger 0 (rabbitmq): TriggerAuthentication team/oauth-missing: parameter \"clientSecret\": key \"nope\" not found in Secret team/oauth; parameter \"clientSecret\" is empty, as in KEDA"
        ]
    );
}

#[tokio::test]
async fn bound_service_account_tokens_are_requested_through_the_token_request_api() {
    let mut config = ResolverConfig::new(KEDA_NS);
    config.cache_sync_timeout = WAIT;
    config.bound_service_account_token_expiry = Duration::from_secs(2 * 3600);
    // The administrator opted these in (`--bound-token-service-accounts`).
    config.identity.bound_token_service_accounts =
        keda_api::identity::ServiceAccountAllowList::parse(&format!("{NS}/reader,{NS}/nobody"))
            .unwrap();
    let c = cluster_with(config);
    c.server.seed(&service_account(NS, "reader")).unwrap();
    c.server
        .seed(&service_account(KEDA_NS, "shared-reader"))
        .unwrap();
    c.server
        .seed(&secret(NS, "creds", &[("password", SECRET_VALUE)]))
        .unwrap();
    c.server
        .seed(&yaml::<keda_api::TriggerAuthentication>(&format!(
            "apiVersion: keda.sh/v1alpha1
kind: TriggerAuthentication
metadata: {{name: tokens, namespace: {NS}}}
spec:
  secretTargetRef: [{{parameter: password, name: creds, key: password}}]
  boundServiceAccountToken:
    - {{parameter: bearerToken, serviceAccountName: reader}}
"
        )))
        .unwrap();
    c.server
        .seed(&yaml::<keda_api::ClusterTriggerAuthentication>(
            "apiVersion: keda.sh/v1alpha1
kind: ClusterTriggerAuthentication
metadata: {name: cluster-tokens}
spec:
  boundServiceAccountToken:
    - {parameter: token, serviceAccountName: shared-reader}
",
        ))
        .unwrap();
    c.server
        .seed(&yaml::<keda_api::TriggerAuthentication>(&format!(
            "apiVersion: keda.sh/v1alpha1
kind: TriggerAuthentication
metadata: {{name: missing-account, namespace: {NS}}}
spec:
  boundServiceAccountToken:
    - {{parameter: bearerToken, serviceAccountName: nobody}}
"
        )))
        .unwrap();

    let t = trigger("{type: prometheus, metadata: {}, authenticationRef: {name: tokens}}");
    let resolved = resolve(&c.resolver, source("so", "worker"), &t)
        .await
        .unwrap();
    let issued = c.server.issued_tokens();
    assert_eq!(issued.len(), 1, "{issued:?}");
    assert_eq!(
        (
            issued[0].namespace.as_str(),
            issued[0].service_account.as_str()
        ),
        (NS, "reader")
    );
    // KEDA_BOUND_SERVICE_ACCOUNT_TOKEN_EXPIRY is the lifetime asked for.
    assert_eq!(issued[0].expiration_seconds, 7200);
    assert_eq!(auth(&resolved, "bearerToken"), issued[0].token);
    assert_eq!(auth(&resolved, "password"), SECRET_VALUE);
    assert!(!format!("{resolved:?}").contains(&issued[0].token));
    // Each resolution gets a fresh token.
    let again = resolve(&c.resolver, source("so", "worker"), &t)
        .await
        .unwrap();
    assert_ne!(auth(&again, "bearerToken"), auth(&resolved, "bearerToken"));

    // A ClusterTriggerAuthentication's accounts live in the cluster-object namespace.
    let t = trigger(
        "{type: prometheus, metadata: {}, authenticationRef: {name: cluster-tokens, kind: ClusterTriggerAuthentication}}",
    );
    let resolved = resolve(&c.resolver, source("so", "worker"), &t)
        .await
        .unwrap();
    let issued = c.server.issued_tokens();
    assert_eq!(issued.len(), 3);
    assert_eq!(
        (
            issued[2].namespace.as_str(),
            issued[2].service_account.as_str()
        ),
        (KEDA_NS, "shared-reader")
    );
    assert_eq!(auth(&resolved, "token"), issued[2].token);

    // A ServiceAccount the API server does not have: empty, as KEDA's
    // resolveBoundServiceAccountToken makes it (issue 29, row 4).
    let t = trigger("{type: prometheus, metadata: {}, authenticationRef: {name: missing-account}}");
    let resolved = resolve(&c.resolver, source("so", "worker"), &t)
        .await
        .unwrap();
    assert_eq!(auth(&resolved, "bearerToken"), "");
    assert_eq!(
        missing(&resolved),
        [
            "trigger 0 (prometheus): TriggerAuthentication team/missing-account: boundServiceAccountToken parameter \"bearerToken\": ServiceAccount team/nobody not found; parameter \"bearerToken\" is empty, as in KEDA"
        ]
    );
    assert_eq!(
        resolved.missing[0].related.to_string(),
        "ServiceAccount team/nobody"
    );
}

#[tokio::test]
async fn file_path_reads_a_json_map_under_the_root_for_cluster_trigger_authentications_only() {
    let root = std::env::temp_dir().join(common::unique("file-path-auth"));
    std::fs::create_dir_all(root.join("redis")).unwrap();
    std::fs::write(
        root.join("redis/creds.json"),
        format!(r#"{{"password": "{SECRET_VALUE}", "username": "from-file"}}"#),
    )
    .unwrap();
    std::fs::write(root.join("redis/list.json"), r#"["not", "a", "map"]"#).unwrap();
    let mut config = ResolverConfig::new(KEDA_NS);
    config.file_path_auth_root = Some(root.clone());
    let c = cluster_with(config);
    c.server
        .seed(&secret(KEDA_NS, "creds", &[("database", "ignored")]))
        .unwrap();
    // KEDA's shape: `filePath` is one string, the path of a JSON object of parameters.
    let cta = |name: &str, path: &str| {
        yaml::<keda_api::ClusterTriggerAuthentication>(&format!(
            "apiVersion: keda.sh/v1alpha1
kind: ClusterTriggerAuthentication
metadata: {{name: {name}}}
spec:
  secretTargetRef: [{{parameter: database, name: creds, key: database}}]
  filePath: '{path}'
"
        ))
    };
    c.server.seed(&cta("files", "redis/creds.json")).unwrap();
    c.server.seed(&cta("escape", "../etc/passwd")).unwrap();
    c.server.seed(&cta("absolute", "/etc/passwd")).unwrap();
    c.server.seed(&cta("absent", "redis/nothing.json")).unwrap();
    c.server.seed(&cta("not-a-map", "redis/list.json")).unwrap();
    c.server
        .seed(&yaml::<keda_api::TriggerAuthentication>(&format!(
            "apiVersion: keda.sh/v1alpha1
kind: TriggerAuthentication
metadata: {{name: namespaced, namespace: {NS}}}
spec:
  filePath: redis/creds.json
"
        )))
        .unwrap();
    let cluster_trigger = |name: &str| {
        trigger(&format!(
            "{{type: redis, metadata: {{}}, authenticationRef: {{name: {name}, kind: ClusterTriggerAuthentication}}}}"
        ))
    };

    let resolved = resolve(
        &c.resolver,
        source("so", "worker"),
        &cluster_trigger("files"),
    )
    .await
    .unwrap();
    assert_eq!(auth(&resolved, "password"), SECRET_VALUE);
    assert_eq!(auth(&resolved, "username"), "from-file");
    // filePath replaces the other sources, as in KEDA
    assert!(!resolved.auth_params.contains_key("database"));

    for name in ["escape", "absolute"] {
        let text =
            expect_err(resolve(&c.resolver, source("so", "w"), &cluster_trigger(name)).await);
        assert!(
            text.contains("must be relative and must not contain \"..\""),
            "{text}"
        );
    }
    let text =
        expect_err(resolve(&c.resolver, source("so", "w"), &cluster_trigger("absent")).await);
    assert!(
        text.starts_with(
            "trigger 0 (redis): ClusterTriggerAuthentication absent: spec.filePath: cannot read "
        ),
        "{text}"
    );
    let text = expect_err(
        resolve(
            &c.resolver,
            source("so", "w"),
            &cluster_trigger("not-a-map"),
        )
        .await,
    );
    assert!(
        text.contains("is not a JSON object of parameter names to string values"),
        "{text}"
    );
    let t = trigger("{type: redis, metadata: {}, authenticationRef: {name: namespaced}}");
    let text = expect_err(resolve(&c.resolver, source("so", "w"), &t).await);
    assert_eq!(
        text,
        "trigger 0 (redis): TriggerAuthentication team/namespaced: spec.filePath is only allowed on a ClusterTriggerAuthentication"
    );
    std::fs::remove_dir_all(&root).unwrap();
}

#[tokio::test]
async fn a_redis_trigger_with_a_password_from_a_secret_builds_a_working_scaler() {
    let Some(mut redis) = common::redis_or_skip("resolve redis password").await else {
        return;
    };
    // A unique ACL user with a password on the shared Redis, deleted at the end.
    let user = common::unique("resolve-user");
    let password = common::unique("resolve-password");
    let list = common::unique("resolve-list");
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg(&user)
        .arg("reset")
        .arg("on")
        .arg(format!(">{password}"))
        .arg("~*")
        .arg("+@all")
        .query_async(&mut redis)
        .await
        .expect("ACL SETUSER");
    let _: () = redis::cmd("RPUSH")
        .arg(&list)
        .arg(&["a", "b", "c"])
        .query_async(&mut redis)
        .await
        .expect("RPUSH");

    let c = cluster();
    c.server
        .seed(&secret(
            NS,
            "redis-secret",
            &[("password", password.as_str())],
        ))
        .unwrap();
    c.server
        .seed(&secret(
            NS,
            "wrong-secret",
            &[("password", "not-the-password")],
        ))
        .unwrap();
    for (name, secret) in [
        ("redis-auth", "redis-secret"),
        ("wrong-auth", "wrong-secret"),
    ] {
        c.server
            .seed(&yaml::<keda_api::TriggerAuthentication>(&format!(
                "apiVersion: keda.sh/v1alpha1
kind: TriggerAuthentication
metadata: {{name: {name}, namespace: {NS}}}
spec:
  secretTargetRef: [{{parameter: password, name: {secret}, key: password}}]
"
            )))
            .unwrap();
    }
    let registry = Registry::builtin();
    let build = |auth_name: &str| {
        let t = trigger(&format!(
            "{{type: redis, metadata: {{address: '{}', username: {user}, listName: {list}, listLength: '5'}},
               authenticationRef: {{name: {auth_name}}}}}",
            common::REDIS_ADDRESS
        ));
        let resolver = c.resolver.clone();
        let registry = &registry;
        async move {
            let mut session = resolver.session(source("so", "worker"));
            let mut ctx = ScalerContext::from_trigger(&t, 0);
            ctx.scalable_name = "so".into();
            ctx.scalable_namespace = NS.into();
            session
                .resolve(&t, 0)
                .await
                .expect("resolves")
                .apply(&mut ctx);
            let built = registry.build(ctx).await.map_err(|e| e.to_string())?;
            let scaler = built.scaler();
            let name = scaler.metric_specs()[0]
                .external
                .as_ref()
                .map(|e| e.metric.name.clone())
                .unwrap_or_default();
            let result = scaler
                .metrics_and_activity(&name)
                .await
                .map(|r| (r.values[0].value, r.active))
                .map_err(|e| e.to_string());
            scaler.close().await;
            result
        }
    };
    let good = build("redis-auth").await;
    let wrong = build("wrong-auth").await;

    let _: Result<(), _> = redis::cmd("ACL")
        .arg("DELUSER")
        .arg(&user)
        .query_async(&mut redis)
        .await;
    let _: Result<(), _> = redis::cmd("DEL").arg(&list).query_async(&mut redis).await;

    assert_eq!(good, Ok((3.0, true)));
    let error = wrong.expect_err("a wrong password must fail");
    assert!(
        !error.contains(&password) && !error.contains("not-the-password"),
        "{error}"
    );
}

#[tokio::test]
async fn the_example_in_docs_authentication_resolves_as_documented() {
    let page = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/authentication.md"),
    )
    .expect("docs/authentication.md");
    let block = page
        .split("```yaml")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a yaml example");
    let mut documents = block.split("\n---\n");
    let so: ScaledObject = yaml(documents.next().expect("the ScaledObject"));
    let ta: keda_api::TriggerAuthentication =
        yaml(documents.next().expect("the TriggerAuthentication"));
    let c = cluster();
    c.server.seed(&ta).unwrap();
    c.server
        .seed(&secret(NS, "redis-secret", &[("password", SECRET_VALUE)]))
        .unwrap();
    c.server
        .seed(&deployment(
            "worker",
            "[{name: sidecar, image: x}, {name: app, image: x, env: [{name: REDIS_ADDRESS, value: 'redis:6379'}]}]",
        ))
        .unwrap();
    let mut session = c
        .resolver
        .session(ScaleTargetPodSource::for_scaled_object(&so));
    let resolved = session.resolve(&so.spec.triggers[0], 0).await.unwrap();
    assert_eq!(resolved.resolved_env["REDIS_ADDRESS"], "redis:6379");
    assert_eq!(auth(&resolved, "password"), SECRET_VALUE);
}
