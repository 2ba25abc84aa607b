//! Trigger resolution against the in-memory API server: container environment, trigger
//! authentication, errors that name what to fix without values, and rotation signals.

// The scalers crate's test helpers, for the Redis availability check (fails under CI=true,
// skips with a message otherwise). Only part of them is used here.
#[allow(dead_code)]
#[path = "../../scalers/tests/common/mod.rs"]
mod common;

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use keda_api::{ScaleTrigger, ScaledJob, ScaledObject};
use keda_operator::resolve::{
    ResolveError, ResolvedTrigger, Resolver, ResolverConfig, ScalableRef, ScaleTargetPodSource,
};
use keda_scalers::{Registry, ScalerContext};
use kube::api::{Api, PostParams};
use memkube::MemKube;
use serde::de::DeserializeOwned;

/// The value every test Secret holds; it must never appear in an error or a Debug output.
const SECRET_VALUE: &str = "hunter2-never-print-me";
const NS: &str = "team";
const KEDA_NS: &str = "keda";
const WAIT: Duration = Duration::from_secs(10);

struct Cluster {
    server: MemKube,
    resolver: Resolver,
}

fn cluster_with(config: ResolverConfig) -> Cluster {
    let server = MemKube::new();
    let crds = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../config/crd");
    server.load_crds_from_dir(crds).expect("CRDs load");
    for ns in [NS, KEDA_NS, "other"] {
        server.create_namespace(ns).expect("namespace");
    }
    let resolver = Resolver::new(server.client(), config);
    Cluster { server, resolver }
}

fn cluster() -> Cluster {
    let mut config = ResolverConfig::new(KEDA_NS);
    config.cache_sync_timeout = WAIT;
    cluster_with(config)
}

fn yaml<T: DeserializeOwned>(text: &str) -> T {
    serde_yaml::from_str(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn secret(namespace: &str, name: &str, data: &[(&str, &str)]) -> Secret {
    let mut s: Secret = yaml(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: {namespace}}}"
    ));
    s.data = Some(
        data.iter()
            .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
            .collect(),
    );
    s
}

fn config_map(namespace: &str, name: &str, data: &[(&str, &str)]) -> ConfigMap {
    let mut c: ConfigMap = yaml(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {namespace}}}"
    ));
    c.data = Some(
        data.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    c
}

/// A Deployment whose pod template has `containers` (YAML flow list).
fn deployment(name: &str, containers: &str) -> Deployment {
    yaml(&format!(
        "apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: {NS}}}
spec:
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers: {containers}
"
    ))
}

fn scaled_object(name: &str, target: &str, env_source: Option<&str>) -> ScaledObject {
    let env_source = env_source
        .map(|c| format!(", envSourceContainerName: {c}"))
        .unwrap_or_default();
    yaml(&format!(
        "apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {{name: {name}, namespace: {NS}}}
spec:
  scaleTargetRef: {{name: {target}{env_source}}}
  triggers: []
"
    ))
}

fn source(name: &str, target: &str) -> ScaleTargetPodSource {
    ScaleTargetPodSource::for_scaled_object(&scaled_object(name, target, None))
}

fn trigger(text: &str) -> ScaleTrigger {
    yaml(text)
}

async fn resolve(
    resolver: &Resolver,
    source: ScaleTargetPodSource,
    trigger: &ScaleTrigger,
) -> Result<ResolvedTrigger, ResolveError> {
    let mut session = resolver.session(source);
    session.resolve(trigger, 0).await
}

fn auth(resolved: &ResolvedTrigger, parameter: &str) -> String {
    resolved
        .auth_params
        .get(parameter)
        .unwrap_or_else(|| panic!("auth param {parameter} missing: {resolved:?}"))
        .expose()
        .to_string()
}

/// The error's message, after checking that neither it nor its Debug form shows the secret.
fn message(error: &ResolveError) -> String {
    let text = error.to_string();
    let debug = format!("{error:?}");
    assert!(!text.contains(SECRET_VALUE), "value in message: {text}");
    assert!(!debug.contains(SECRET_VALUE), "value in Debug: {debug}");
    text
}

fn expect_err(result: Result<ResolvedTrigger, ResolveError>) -> String {
    match result {
        Ok(r) => panic!("expected an error, got {r:?}"),
        Err(e) => message(&e),
    }
}

async fn next_signal(signals: &mut keda_operator::resolve::RebuildSignals) -> ScalableRef {
    tokio::time::timeout(WAIT, signals.recv())
        .await
        .expect("a rebuild signal in time")
        .expect("the resolver is alive")
}

async fn replace_secret(server: &MemKube, name: &str, data: &[(&str, &str)]) {
    let api: Api<Secret> = Api::namespaced(server.client(), NS);
    let mut current = api.get(name).await.expect("secret exists");
    current.data = secret(NS, name, data).data;
    api.replace(name, &PostParams::default(), &current)
        .await
        .expect("secret replaced");
}

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

/// The messages of `resolved.missing`, after checking that none shows the secret.
fn missing(resolved: &ResolvedTrigger) -> Vec<String> {
    resolved
        .missing
        .iter()
        .map(|m| {
            let debug = format!("{m:?}");
            assert!(!debug.contains(SECRET_VALUE), "value in Debug: {debug}");
            m.message.clone()
        })
        .collect()
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

fn service_account(namespace: &str, name: &str) -> k8s_openapi::api::core::v1::ServiceAccount {
    yaml(&format!(
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: {name}, namespace: {namespace}}}"
    ))
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
