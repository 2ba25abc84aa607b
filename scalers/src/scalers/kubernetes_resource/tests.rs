use super::*;
use crate::cluster::{ClusterHandle, InMemoryCluster};
use crate::context::test_context;

fn ctx(metadata: &[(&str, &str)]) -> ScalerContext {
    let mut ctx = test_context("kubernetes-resource", 2, metadata, &[], &[]);
    ctx.scalable_namespace = "team".into();
    ctx
}

fn parse(metadata: &[(&str, &str)]) -> Result<KubernetesResourceConfig, String> {
    KubernetesResourceConfig::parse(&ctx(metadata)).map_err(|e| e.to_string())
}

const BASE: &[(&str, &str)] = &[
    ("resourceKind", "ConfigMap"),
    ("resourceName", "queue-stats"),
    ("key", "depth"),
    ("targetValue", "10"),
];

fn with(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    let mut m: Vec<(&str, &str)> = BASE.to_vec();
    for (k, v) in extra {
        m.retain(|(key, _)| key != k);
        m.push((k, v));
    }
    m
}

#[test]
fn defaults_and_metric_name_are_kedas() {
    let c = parse(BASE).unwrap();
    assert_eq!(c.kind, DataKind::ConfigMap);
    assert_eq!(c.reading, Reading::Number);
    assert_eq!(c.value_type, ValueType::Float64);
    assert_eq!((c.target, c.activation), (10.0, 0.0));
    assert_eq!(c.namespace, "team");
    assert_eq!(c.metric_name, "s2-configmap-queue-stats-depth");
    let c = parse(&with(&[("resourceKind", "Secret")])).unwrap();
    assert_eq!(c.metric_name, "s2-secret-queue-stats-depth");
}

#[test]
fn errors_name_the_parameter() {
    for (metadata, named) in [
        (with(&[("resourceKind", "Pod")]), "\"resourceKind\""),
        (with(&[("format", "xml")]), "\"format\""),
        (with(&[("valueType", "int32")]), "\"valueType\""),
        (with(&[("targetValue", "0")]), "\"targetValue\""),
        (
            with(&[("valueLocation", "a.b")]),
            "valueLocation is only supported",
        ),
        (
            with(&[("format", "json")]),
            "valueLocation is required with format json",
        ),
        (
            with(&[("format", "yaml"), ("valueLocation", "a..b")]),
            "\"valueLocation\"",
        ),
    ] {
        let err = parse(&metadata).unwrap_err();
        assert!(
            err.starts_with("trigger 2 (kubernetes-resource): "),
            "{err}"
        );
        assert!(err.contains(named), "{named}: {err}");
    }
    let missing: Vec<(&str, &str)> = BASE.iter().copied().filter(|(k, _)| *k != "key").collect();
    assert!(parse(&missing).unwrap_err().contains("\"key\""));
}

#[test]
fn numbers_are_read_as_kedas_sscanf_reads_them() {
    let number = parse(BASE).unwrap();
    for (raw, want) in [
        ("12", 12.0),
        ("  3.5\n", 3.5),
        ("7 jobs", 7.0),
        ("-2e3x", -2000.0),
    ] {
        assert_eq!(number.value(raw.as_bytes()), Ok(want), "{raw:?}");
    }
    let err = number.value(b"secret-text").unwrap_err();
    assert!(!err.contains("secret-text"), "{err}");
    let int = parse(&with(&[("valueType", "int64")])).unwrap();
    assert_eq!(int.value(b"42 items"), Ok(42.0));
    assert!(int.value(b"x42").is_err());
    let quantity = parse(&with(&[("valueType", "quantity")])).unwrap();
    assert_eq!(quantity.value(b"1500m"), Ok(1.5));
    assert_eq!(quantity.value(b"2Ki"), Ok(2048.0));
    let err = quantity.value(b"lots-of-secret").unwrap_err();
    assert!(!err.contains("lots-of-secret"), "{err}");
}

#[test]
fn documents_are_read_at_the_value_location() {
    let json = parse(&with(&[
        ("format", "json"),
        ("valueLocation", "queue.depth"),
    ]))
    .unwrap();
    assert_eq!(json.value(br#"{"queue":{"depth":5}}"#), Ok(5.0));
    // float64 also takes a quantity string, as KEDA.
    assert_eq!(json.value(br#"{"queue":{"depth":"250m"}}"#), Ok(0.25));
    let int = parse(&with(&[
        ("format", "json"),
        ("valueLocation", "queue.depth"),
        ("valueType", "int64"),
    ]))
    .unwrap();
    assert_eq!(int.value(br#"{"queue":{"depth":5.9}}"#), Ok(5.0));
    let err = int.value(br#"{"queue":{"depth":"5"}}"#).unwrap_err();
    assert!(err.contains("not to a number"), "{err}");
    let yaml = parse(&with(&[
        ("format", "yaml"),
        ("valueLocation", "queues.1.depth"),
    ]))
    .unwrap();
    assert_eq!(
        yaml.value(b"queues:\n  - depth: 1\n  - depth: 8\n"),
        Ok(8.0)
    );
    let yaml_int = parse(&with(&[
        ("format", "yaml"),
        ("valueLocation", "depth"),
        ("valueType", "int64"),
    ]))
    .unwrap();
    assert_eq!(yaml_int.value(b"depth: 3\n"), Ok(3.0));
    let err = yaml_int.value(b"depth: hidden-word\n").unwrap_err();
    assert!(!err.contains("hidden-word"), "{err}");
}

#[tokio::test]
async fn the_value_comes_from_the_objects_own_namespace_and_missing_things_are_named() {
    let cluster = Arc::new(InMemoryCluster::new());
    cluster.apply_data(
        DataKind::ConfigMap,
        "team",
        "queue-stats",
        &[("depth", b"12")],
    );
    cluster.apply_data(
        DataKind::ConfigMap,
        "other",
        "elsewhere",
        &[("depth", b"99")],
    );
    cluster.apply_data(
        DataKind::Secret,
        "team",
        "queue-stats",
        &[("depth", b"not-a-number")],
    );
    let build = |metadata: &[(&str, &str)]| {
        let mut ctx = ctx(metadata);
        ctx.cluster = ClusterHandle::new(cluster.clone());
        KubernetesResourceScaler::build(&ctx).expect("builds")
    };
    let scaler = build(BASE);
    let read = scaler
        .metrics_and_activity("s2-configmap-queue-stats-depth")
        .await
        .unwrap();
    assert_eq!(read.values[0].value, 12.0);
    assert!(read.active);
    // Another namespace's ConfigMap of that name is never read.
    let other = build(&with(&[("resourceName", "elsewhere")]));
    let err = other.value().await.unwrap_err().to_string();
    assert!(
        err.contains("ConfigMap team/elsewhere (resourceName) does not exist"),
        "{err}"
    );
    let no_key = build(&with(&[("key", "size")]));
    let err = no_key.value().await.unwrap_err().to_string();
    assert!(
        err.contains("key \"size\" (key) not found in ConfigMap team/queue-stats"),
        "{err}"
    );
    // A Secret's content is never shown.
    let secret = build(&with(&[("resourceKind", "Secret")]));
    let err = secret.value().await.unwrap_err().to_string();
    assert!(
        err.contains("key \"depth\" of Secret team/queue-stats"),
        "{err}"
    );
    assert!(!err.contains("not-a-number"), "{err}");
}

#[test]
fn building_without_a_cluster_view_says_so() {
    let err = KubernetesResourceScaler::build(&ctx(BASE))
        .err()
        .map(|e| crate::error::error_chain(&e))
        .unwrap_or_default();
    assert!(err.contains("no cluster view"), "{err}");
}
