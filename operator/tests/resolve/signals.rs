//! Which changes signal a rebuild of which objects.

use super::*;

#[tokio::test]
async fn changing_a_secret_signals_only_the_objects_that_use_it() {
    let c = cluster();
    for name in ["a-secret", "b-secret", "unrelated"] {
        c.server
            .seed(&secret(NS, name, &[("password", "v1")]))
            .unwrap();
    }
    for name in ["a", "b"] {
        c.server
            .seed(&yaml::<keda_api::TriggerAuthentication>(&format!(
                "apiVersion: keda.sh/v1alpha1
kind: TriggerAuthentication
metadata: {{name: {name}-auth, namespace: {NS}}}
spec:
  secretTargetRef: [{{parameter: password, name: {name}-secret, key: password}}]
"
            )))
            .unwrap();
    }
    let mut signals = c.resolver.subscribe();
    for name in ["a", "b"] {
        let t = trigger(&format!(
            "{{type: redis, metadata: {{}}, authenticationRef: {{name: {name}-auth}}}}"
        ));
        let resolved = resolve(&c.resolver, source(name, "worker"), &t)
            .await
            .unwrap();
        assert_eq!(auth(&resolved, "password"), "v1");
    }
    let a = ScalableRef::new(keda_scalers::ScalableKind::ScaledObject, NS, "a");
    let b = ScalableRef::new(keda_scalers::ScalableKind::ScaledObject, NS, "b");

    // Secret events reach the resolver in order on one watch: had the unrelated change or the
    // label-only change signalled anything, that signal would arrive before the one for `b`.
    replace_secret(&c.server, "unrelated", &[("password", "v2")]).await;
    let api: Api<Secret> = Api::namespaced(c.server.client(), NS);
    let mut labelled = api.get("a-secret").await.unwrap();
    labelled
        .metadata
        .labels
        .get_or_insert_default()
        .insert("rotated".into(), "soon".into());
    api.replace("a-secret", &PostParams::default(), &labelled)
        .await
        .unwrap();
    replace_secret(&c.server, "b-secret", &[("password", "v2")]).await;
    assert_eq!(next_signal(&mut signals).await, b);

    replace_secret(&c.server, "a-secret", &[("password", "v2")]).await;
    assert_eq!(next_signal(&mut signals).await, a);

    // the rebuild reads the new value
    let t = trigger("{type: redis, metadata: {}, authenticationRef: {name: a-auth}}");
    let resolved = resolve(&c.resolver, source("a", "worker"), &t)
        .await
        .unwrap();
    assert_eq!(auth(&resolved, "password"), "v2");
    assert!(signals.try_recv().is_none());
}

#[tokio::test]
async fn fixing_a_missing_secret_or_editing_a_trigger_authentication_signals_a_rebuild() {
    let c = cluster();
    c.server
        .seed(&yaml::<keda_api::TriggerAuthentication>(&format!(
            "apiVersion: keda.sh/v1alpha1
kind: TriggerAuthentication
metadata: {{name: auth, namespace: {NS}}}
spec:
  secretTargetRef: [{{parameter: password, name: later, key: password}}]
"
        )))
        .unwrap();
    let mut signals = c.resolver.subscribe();
    let t = trigger("{type: redis, metadata: {}, authenticationRef: {name: auth}}");
    let resolved = resolve(&c.resolver, source("so", "worker"), &t)
        .await
        .unwrap();
    assert_eq!(auth(&resolved, "password"), "");
    assert_eq!(resolved.missing[0].related.to_string(), "Secret team/later");

    c.server
        .seed(&secret(
            NS,
            "later",
            &[("password", SECRET_VALUE), ("other", "o")],
        ))
        .unwrap();
    let so = next_signal(&mut signals).await;
    assert_eq!(so.name, "so");
    let resolved = resolve(&c.resolver, source("so", "worker"), &t)
        .await
        .unwrap();
    assert_eq!(auth(&resolved, "password"), SECRET_VALUE);

    let api: Api<keda_api::TriggerAuthentication> = Api::namespaced(c.server.client(), NS);
    let mut ta = api.get("auth").await.unwrap();
    if let Some(refs) = ta.spec.secret_target_ref.as_mut() {
        refs[0].key = "other".into();
    }
    api.replace("auth", &PostParams::default(), &ta)
        .await
        .unwrap();
    assert_eq!(next_signal(&mut signals).await, so);
    let resolved = resolve(&c.resolver, source("so", "worker"), &t)
        .await
        .unwrap();
    assert_eq!(auth(&resolved, "password"), "o");
}

#[tokio::test]
async fn a_changed_pod_template_env_signals_but_scaling_the_target_does_not() {
    let c = cluster();
    for name in ["first", "second"] {
        c.server
            .seed(&deployment(
                name,
                "[{name: app, image: x, env: [{name: HOST, value: one}]}]",
            ))
            .unwrap();
    }
    let mut signals = c.resolver.subscribe();
    let t = trigger("{type: redis, metadata: {hostFromEnv: HOST}}");
    for name in ["first", "second"] {
        let resolved = resolve(&c.resolver, source(name, name), &t).await.unwrap();
        assert_eq!(resolved.resolved_env["HOST"], "one");
    }
    let api: Api<Deployment> = Api::namespaced(c.server.client(), NS);
    // Deployment events arrive in order on one watch: a signal for the scale would come first.
    let mut scaled = api.get("first").await.unwrap();
    if let Some(spec) = scaled.spec.as_mut() {
        spec.replicas = Some(5);
    }
    api.replace("first", &PostParams::default(), &scaled)
        .await
        .unwrap();
    let mut edited = api.get("second").await.unwrap();
    let container = edited
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
        .map(|s| &mut s.containers[0])
        .unwrap();
    container.env.as_mut().unwrap()[0].value = Some("two".into());
    api.replace("second", &PostParams::default(), &edited)
        .await
        .unwrap();
    assert_eq!(next_signal(&mut signals).await.name, "second");
    let resolved = resolve(&c.resolver, source("second", "second"), &t)
        .await
        .unwrap();
    assert_eq!(resolved.resolved_env["HOST"], "two");
}
