//! Trigger resolution against the in-memory API server: container environment, trigger
//! authentication, errors that name what to fix without values, and rotation signals.

// The scalers crate's test helpers, for the Redis availability check (fails under CI=true,
// skips with a message otherwise). Only part of them is used here.
#[allow(dead_code)]
#[path = "../../../scalers/tests/common/mod.rs"]
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

fn service_account(namespace: &str, name: &str) -> k8s_openapi::api::core::v1::ServiceAccount {
    yaml(&format!(
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: {name}, namespace: {namespace}}}"
    ))
}

mod missing;
mod signals;
mod sources;
