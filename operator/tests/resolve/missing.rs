//! What is missing or not supported: resolved as KEDA resolves it, named without any value.

use super::*;

#[tokio::test]
async fn missing_objects_keys_and_variables_are_named_without_any_value() {
    let c = cluster();
    c.server
        .seed(&secret(NS, "creds", &[("password", SECRET_VALUE)]))
        .unwrap();
    c.server
        .seed(&deployment(
            "worker",
            "[{name: app, image: x, env: [
                {name: PASSWORD, valueFrom: {secretKeyRef: {name: creds, key: password}}},
                {name: BROKEN, valueFrom: {secretKeyRef: {name: gone, key: k}}},
                {name: NOKEY, valueFrom: {secretKeyRef: {name: creds, key: nokey}}}]}]",
        ))
        .unwrap();
    let cases = [
        (
            "{type: redis, metadata: {}, authenticationRef: {name: x, kind: Secret}}",
            "worker",
            "trigger 0 (redis): authenticationRef.kind \"Secret\" is unknown: use TriggerAuthentication or ClusterTriggerAuthentication",
        ),
        (
            "{type: redis, metadata: {passwordFromEnv: PASWORD}}",
            "worker",
            "trigger 0 (redis): metadata \"passwordFromEnv\": variable \"PASWORD\" is not defined in container \"app\" of Deployment team/worker",
        ),
        (
            "{type: redis, metadata: {passwordFromEnv: BROKEN}}",
            "worker",
            "trigger 0 (redis): metadata \"passwordFromEnv\": variable \"BROKEN\" of container \"app\" of Deployment team/worker: Secret team/gone not found",
        ),
        (
            "{type: redis, metadata: {passwordFromEnv: NOKEY}}",
            "worker",
            "trigger 0 (redis): metadata \"passwordFromEnv\": variable \"NOKEY\" of container \"app\" of Deployment team/worker: key \"nokey\" not found in Secret team/creds",
        ),
        (
            "{type: redis, metadata: {passwordFromEnv: PASSWORD}}",
            "absent",
            "trigger 0 (redis): metadata \"passwordFromEnv\": scale target Deployment team/absent not found",
        ),
    ];
    for (t, target, want) in cases {
        let text = expect_err(resolve(&c.resolver, source("so", target), &trigger(t)).await);
        assert_eq!(text, want, "{t}");
    }
    // a variable that is fine resolves although another one of the container is broken
    let t = trigger("{type: redis, metadata: {passwordFromEnv: PASSWORD}}");
    let resolved = resolve(&c.resolver, source("so", "worker"), &t)
        .await
        .unwrap();
    assert_eq!(resolved.resolved_env["PASSWORD"], SECRET_VALUE);
}

/// Issue 29, row 4: a missing TriggerAuthentication, Secret, ConfigMap or key resolves as KEDA's
/// `resolveAuthRef` resolves it: a missing (Cluster)TriggerAuthentication gives no parameters
/// (the trigger's own metadata only), a missing Secret, ConfigMap or key an empty parameter,
/// which still overrides an earlier source of the same name. Each is listed in `missing`, named
/// without any value, for the Warning Event; the object still depends on it, so creating it
/// rebuilds the scalers.
#[tokio::test]
async fn a_missing_trigger_authentication_secret_config_map_or_key_resolves_as_in_keda() {
    let c = cluster();
    c.server
        .seed(&secret(NS, "creds", &[("password", SECRET_VALUE)]))
        .unwrap();
    c.server
        .seed(&config_map(NS, "settings", &[("host", "redis")]))
        .unwrap();
    c.server
        .seed(&yaml::<keda_api::TriggerAuthentication>(&format!(
            "apiVersion: keda.sh/v1alpha1
kind: TriggerAuthentication
metadata: {{name: partial, namespace: {NS}}}
spec:
  configMapTargetRef:
    - {{parameter: host, name: settings, key: host}}
    - {{parameter: port, name: no-config-map, key: port}}
  secretTargetRef:
    - {{parameter: password, name: creds, key: password}}
    - {{parameter: username, name: no-secret, key: user}}
    - {{parameter: host, name: creds, key: host}}
"
        )))
        .unwrap();
    let t = trigger("{type: redis, metadata: {listName: q}, authenticationRef: {name: partial}}");
    let resolved = resolve(&c.resolver, source("so", "worker"), &t)
        .await
        .expect("missing references are not an error");
    assert_eq!(auth(&resolved, "password"), SECRET_VALUE);
    assert_eq!(auth(&resolved, "port"), "");
    assert_eq!(auth(&resolved, "username"), "");
    // KEDA's order: the Secret's (missing) key comes after the ConfigMap's and empties it.
    assert_eq!(auth(&resolved, "host"), "");
    assert_eq!(
        missing(&resolved),
        [
            "trigger 0 (redis): TriggerAuthentication team/partial: parameter \"port\": ConfigMap team/no-config-map not found; parameter \"port\" is empty, as in KEDA",
            "trigger 0 (redis): TriggerAuthentication team/partial: parameter \"username\": Secret team/no-secret not found; parameter \"username\" is empty, as in KEDA",
            "trigger 0 (redis): TriggerAuthentication team/partial: parameter \"host\": key \"host\" not found in Secret team/creds; parameter \"host\" is empty, as in KEDA",
        ]
    );
    let related: Vec<String> = resolved
        .missing
        .iter()
        .map(|m| m.related.to_string())
        .collect();
    assert_eq!(
        related,
        [
            "ConfigMap team/no-config-map",
            "Secret team/no-secret",
            "Secret team/creds data.host"
        ]
    );

    for (kind, name) in [
        ("TriggerAuthentication", "team/nobody"),
        ("ClusterTriggerAuthentication", "nobody"),
    ] {
        let t = trigger(&format!(
            "{{type: redis, metadata: {{listName: q}}, authenticationRef: {{name: nobody, kind: {kind}}}}}"
        ));
        let resolved = resolve(&c.resolver, source("so", "worker"), &t)
            .await
            .expect("a missing TriggerAuthentication is not an error");
        assert!(resolved.auth_params.is_empty(), "{resolved:?}");
        assert_eq!(
            missing(&resolved),
            [format!(
                "trigger 0 (redis): authenticationRef: {kind} {name} not found; the trigger is built with its metadata only, as KEDA does"
            )]
        );
        assert!(resolved.missing[0].related.is_authentication());
    }

    // The last resolution's list, once, for the Warning Events.
    let so = ScalableRef::new(keda_scalers::ScalableKind::ScaledObject, NS, "so");
    let taken = c.resolver.take_missing(&so);
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].related.kind, "ClusterTriggerAuthentication");
    assert!(c.resolver.take_missing(&so).is_empty());
    assert!(
        c.resolver
            .dependencies(&so)
            .contains(&"ClusterTriggerAuthentication nobody".to_string()),
        "creating the missing object must rebuild the scalers"
    );
}

/// Issue 29, row 4: a TriggerAuthentication `env` entry whose variable the container does not
/// define, whose container does not exist, or whose value cannot be read (a missing Secret) is
/// an empty parameter, as KEDA's `resolveAuthRef` makes it, listed in `missing` with the scale
/// target as the related object. A missing scale target stays an error (KEDA fails the build
/// before resolving any trigger).
#[tokio::test]
async fn trigger_authentication_env_entries_that_cannot_be_read_are_empty_as_in_keda() {
    let c = cluster();
    c.server
        .seed(&deployment(
            "worker",
            "[{name: app, image: x, env: [
                {name: GOOD, value: fine},
                {name: BROKEN, valueFrom: {secretKeyRef: {name: gone, key: k}}}]}]",
        ))
        .unwrap();
    c.server
        .seed(&yaml::<keda_api::TriggerAuthentication>(&format!(
            "apiVersion: keda.sh/v1alpha1
kind: TriggerAuthentication
metadata: {{name: env-auth, namespace: {NS}}}
spec:
  env:
    - {{parameter: host, name: GOOD}}
    - {{parameter: username, name: UNDEFINED}}
    - {{parameter: password, name: BROKEN}}
    - {{parameter: port, name: GOOD, containerName: sidecar}}
"
        )))
        .unwrap();
    let t = trigger("{type: redis, metadata: {listName: q}, authenticationRef: {name: env-auth}}");
    let resolved = resolve(&c.resolver, source("so", "worker"), &t)
        .await
        .expect("unreadable env entries are not an error");
    assert_eq!(auth(&resolved, "host"), "fine");
    for parameter in ["username", "password", "port"] {
        assert_eq!(auth(&resolved, parameter), "", "{parameter}");
    }
    let related: Vec<String> = resolved
        .missing
        .iter()
        .map(|m| m.related.to_string())
        .collect();
    assert_eq!(
        related,
        [
            "Deployment team/worker spec.template.spec.containers{app}.env{UNDEFINED}",
            "Deployment team/worker spec.template.spec.containers{app}.env{BROKEN}",
            "Deployment team/worker spec.template.spec.containers{sidecar}.env{GOOD}",
        ]
    );
    assert_eq!(
        missing(&resolved)[1],
        "trigger 0 (redis): TriggerAuthentication team/env-auth: env parameter \"password\": variable \"BROKEN\" of container \"app\" of Deployment team/worker: Secret team/gone not found; parameter \"password\" is empty, as in KEDA"
    );

    let text = expect_err(resolve(&c.resolver, source("so", "absent"), &t).await);
    assert_eq!(
        text,
        "trigger 0 (redis): TriggerAuthentication team/env-auth: env parameter \"host\": scale target Deployment team/absent not found"
    );
}

#[tokio::test]
async fn unsupported_providers_fail_with_the_field_they_name() {
    let c = cluster();
    let specs = [
        (
            "{podIdentity: {provider: azure-workload}}",
            "podIdentity provider \"azure-workload\" is not supported by keda-rs yet: cloud pod identities (azure-workload, gcp, aws, aws-eks) are out of scope for now; give the credentials through secretTargetRef, configMapTargetRef or env",
        ),
        (
            "{podIdentity: {provider: gcp}}",
            "podIdentity provider \"gcp\" is not supported by keda-rs yet: cloud pod identities (azure-workload, gcp, aws, aws-eks) are out of scope for now; give the credentials through secretTargetRef, configMapTargetRef or env",
        ),
        (
            "{podIdentity: {provider: aws}}",
            "podIdentity provider \"aws\" is not supported by keda-rs yet: cloud pod identities (azure-workload, gcp, aws, aws-eks) are out of scope for now; give the credentials through secretTargetRef, configMapTargetRef or env",
        ),
        (
            "{podIdentity: {provider: aws-eks}}",
            "podIdentity provider \"aws-eks\" is not supported by keda-rs yet: cloud pod identities (azure-workload, gcp, aws, aws-eks) are out of scope for now; give the credentials through secretTargetRef, configMapTargetRef or env",
        ),
        (
            "{azureKeyVault: {vaultUri: 'https://v', secrets: [{parameter: p, name: n}]}}",
            "spec.azureKeyVault is not supported by keda-rs yet",
        ),
        (
            "{gcpSecretManager: {secrets: [{parameter: p, id: i}]}}",
            "spec.gcpSecretManager is not supported by keda-rs yet",
        ),
        (
            "{awsSecretManager: {secrets: [{parameter: p, name: n}]}}",
            "spec.awsSecretManager is not supported by keda-rs yet",
        ),
    ];
    for (i, (spec, _)) in specs.iter().enumerate() {
        c.server
            .seed(&yaml::<keda_api::TriggerAuthentication>(&format!(
                "apiVersion: keda.sh/v1alpha1\nkind: TriggerAuthentication\nmetadata: {{name: ta-{i}, namespace: {NS}}}\nspec: {spec}"
            )))
            .unwrap();
    }
    for (i, (_, want)) in specs.iter().enumerate() {
        let t = trigger(&format!(
            "{{type: redis, metadata: {{}}, authenticationRef: {{name: ta-{i}}}}}"
        ));
        let text = expect_err(resolve(&c.resolver, source("so", "worker"), &t).await);
        assert_eq!(
            text,
            format!("trigger 0 (redis): TriggerAuthentication team/ta-{i}: {want}")
        );
    }
}
