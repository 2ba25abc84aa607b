//! Our CRDs against KEDA's, mechanically: what the API server admits (types, required fields,
//! enums, defaults, bounds, patterns, `x-kubernetes-*` markers), what it stores (defaults,
//! pruning) and what `kubectl get` shows (printer columns, names).
//!
//! In every run the CRDs are compared with facts written from KEDA's files
//! (`keda_crd/facts.rs`). Where KEDA's repository is mirrored on the machine
//! (`/work/.mirror/kedacore+keda/repo`, or `KEDA_RS_KEDA_MIRROR`), KEDA's files at the pinned
//! commit are also read and diffed with ours key by key, embedded Kubernetes types included;
//! without the mirror that test says so and passes (CI has no mirror: the facts carry it there).
//!
//! Every difference that stays is listed here with the reason it stays.

#[path = "keda_crd/facts.rs"]
mod facts;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use facts::{Column, Fact, Names};
use serde_json::{Value, json};

/// The commit of kedacore/keda that `docs/keda-compatibility.md` pins.
const KEDA_COMMIT: &str = "8b4f083";

/// The schema keys that are facts (see `keda_crd/facts.rs`).
const KEYS: &[&str] = &[
    "type",
    "format",
    "default",
    "enum",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "nullable",
    "anyOf",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-validations",
];

/// Subtrees typed by Kubernetes' own API types (k8s-openapi here, k8s.io/api in KEDA).
const EMBEDDED: &[&str] = &[
    ".spec.jobTargetRef",
    ".spec.advanced.horizontalPodAutoscalerConfig.behavior",
];

/// Differences that stay, by CRD plural, path and key, with the reason.
const DOCUMENTED: &[(&str, &str, &str, &str)] = &[(
    "scaledjobs",
    "",
    "required",
    "keda-rs requires `spec`: KEDA's ScaledJob marks it omitempty, so its API server admits a \
     ScaledJob without spec that no reconcile can run; a typed client cannot read such an object, \
     and one of them would stop the operator's ScaledJob watch for every namespace",
)];

fn ours(plural: &str) -> Value {
    // Generated once: the ScaledJob's pod template makes generation slow.
    static ALL: std::sync::OnceLock<Vec<Value>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        keda_api::crd::all()
            .into_iter()
            .map(|crd| serde_json::to_value(crd).expect("the CRD serializes"))
            .collect()
    })
    .iter()
    .find(|crd| crd["spec"]["names"]["plural"] == plural)
    .cloned()
    .unwrap_or_else(|| panic!("keda_api::crd::all() has no CRD {plural}"))
}

fn schema(crd: &Value) -> &Value {
    crd.pointer("/spec/versions/0/schema/openAPIV3Schema")
        .expect("the CRD has a schema")
}

/// `(path, key) -> value` for every fact of `schema` outside the embedded Kubernetes types.
fn collect(schema: &Value, path: &str, out: &mut BTreeMap<(String, String), Value>) {
    if EMBEDDED.iter().any(|p| path.starts_with(p)) {
        return;
    }
    for key in KEYS {
        if let Some(value) = schema.get(*key) {
            out.insert((path.to_string(), (*key).to_string()), value.clone());
        }
    }
    let sorted = |v: Option<&Value>| -> Option<Value> {
        let mut names: Vec<String> = match v? {
            Value::Array(items) => items
                .iter()
                .filter_map(|i| i.as_str().map(str::to_string))
                .collect(),
            Value::Object(map) => map.keys().cloned().collect(),
            _ => return None,
        };
        names.sort();
        (!names.is_empty()).then(|| json!(names))
    };
    if let Some(required) = sorted(schema.get("required")) {
        out.insert((path.to_string(), "required".to_string()), required);
    }
    if let Some(properties) = sorted(schema.get("properties")) {
        out.insert((path.to_string(), "properties".to_string()), properties);
    }
    if let Some(Value::Object(properties)) = schema.get("properties") {
        for (name, sub) in properties {
            collect(sub, &format!("{path}.{name}"), out);
        }
    }
    if let Some(items) = schema.get("items") {
        collect(items, &format!("{path}[]"), out);
    }
    if let Some(values @ Value::Object(_)) = schema.get("additionalProperties") {
        collect(values, &format!("{path}{{*}}"), out);
    }
}

fn from_facts(facts: &[Fact]) -> BTreeMap<(String, String), Value> {
    facts
        .iter()
        .map(|(path, key, value)| {
            let value: Value = serde_json::from_str(value)
                .unwrap_or_else(|e| panic!("fact {path} {key} is not JSON: {e}"));
            ((path.to_string(), key.to_string()), value)
        })
        .collect()
}

fn documented(plural: &str, path: &str, key: &str) -> bool {
    DOCUMENTED
        .iter()
        .any(|(p, pa, k, _)| *p == plural && *pa == path && *k == key)
}

/// Equal as JSON, numbers compared by value (`0` and `0.0` are one minimum).
fn same(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (Some(Value::Number(x)), Some(Value::Number(y))) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// Every `(path, key)` whose value differs between KEDA's facts and ours, as readable lines.
fn differences(
    plural: &str,
    keda: &BTreeMap<(String, String), Value>,
    ours: &BTreeMap<(String, String), Value>,
) -> Vec<String> {
    let mut keys: Vec<&(String, String)> = keda.keys().chain(ours.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|(path, key)| !documented(plural, path, key))
        .filter_map(|k| {
            let (a, b) = (keda.get(k), ours.get(k));
            (!same(a, b)).then(|| {
                let show = |v: Option<&Value>| v.map_or("(none)".to_string(), Value::to_string);
                format!(
                    "{plural} `{}` {}: KEDA {}, keda-rs {}",
                    k.0,
                    k.1,
                    show(a),
                    show(b)
                )
            })
        })
        .collect()
}

const CRDS: &[(&str, &[Fact])] = &[
    ("scaledobjects", facts::SCALED_OBJECT),
    ("scaledjobs", facts::SCALED_JOB),
    ("triggerauthentications", facts::TRIGGER_AUTHENTICATION),
    (
        "clustertriggerauthentications",
        facts::TRIGGER_AUTHENTICATION,
    ),
    ("cloudeventsources", facts::CLOUD_EVENT_SOURCE),
    ("clustercloudeventsources", facts::CLOUD_EVENT_SOURCE),
];

#[test]
fn every_constraint_of_keda_s_crds_is_in_ours_and_no_other() {
    let mut all = Vec::new();
    for (plural, facts) in CRDS {
        let mut ours_facts = BTreeMap::new();
        collect(schema(&ours(plural)), "", &mut ours_facts);
        all.extend(differences(plural, &from_facts(facts), &ours_facts));
    }
    assert!(
        all.is_empty(),
        "our CRDs differ from KEDA's ({KEDA_COMMIT}):\n{}",
        all.join("\n")
    );
}

const META: &[(&str, &[Column], &Names)] = &[
    (
        "scaledobjects",
        facts::SCALED_OBJECT_COLUMNS,
        &facts::SCALED_OBJECT_NAMES,
    ),
    (
        "scaledjobs",
        facts::SCALED_JOB_COLUMNS,
        &facts::SCALED_JOB_NAMES,
    ),
    (
        "triggerauthentications",
        facts::TRIGGER_AUTHENTICATION_COLUMNS,
        &facts::TRIGGER_AUTHENTICATION_NAMES,
    ),
    (
        "clustertriggerauthentications",
        facts::CLUSTER_TRIGGER_AUTHENTICATION_COLUMNS,
        &facts::CLUSTER_TRIGGER_AUTHENTICATION_NAMES,
    ),
    (
        "cloudeventsources",
        facts::CLOUD_EVENT_SOURCE_COLUMNS,
        &facts::CLOUD_EVENT_SOURCE_NAMES,
    ),
    (
        "clustercloudeventsources",
        facts::CLUSTER_CLOUD_EVENT_SOURCE_COLUMNS,
        &facts::CLUSTER_CLOUD_EVENT_SOURCE_NAMES,
    ),
];

fn columns_of(crd: &Value) -> Vec<(String, String, String, i64)> {
    crd.pointer("/spec/versions/0/additionalPrinterColumns")
        .and_then(Value::as_array)
        .map(|cols| {
            cols.iter()
                .map(|c| {
                    let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                    (
                        s("name"),
                        s("type"),
                        s("jsonPath"),
                        c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn names_of(crd: &Value) -> Value {
    let names = &crd["spec"]["names"];
    let list = |k: &str| names.get(k).cloned().unwrap_or_else(|| json!([]));
    json!({
        "scope": crd["spec"]["scope"],
        "kind": names["kind"],
        "listKind": names["listKind"],
        "plural": names["plural"],
        "singular": names["singular"],
        "shortNames": list("shortNames"),
        "categories": list("categories"),
        "subresources": crd["spec"]["versions"][0]["subresources"],
    })
}

fn names_from_facts(n: &Names) -> Value {
    json!({
        "scope": n.scope,
        "kind": n.kind,
        "listKind": n.list_kind,
        "plural": n.plural,
        "singular": n.singular,
        "shortNames": n.short_names,
        "categories": n.categories,
        "subresources": serde_json::from_str::<Value>(n.subresources).expect("subresources JSON"),
    })
}

#[test]
fn printer_columns_names_and_subresources_are_keda_s() {
    for (plural, columns, names) in META {
        let crd = ours(plural);
        let want: Vec<(String, String, String, i64)> = columns
            .iter()
            .map(|(n, t, p, prio)| (n.to_string(), t.to_string(), p.to_string(), *prio))
            .collect();
        pretty_assertions::assert_eq!(
            columns_of(&crd),
            want,
            "{plural}: additionalPrinterColumns (name, type, JSONPath, priority) in KEDA's order"
        );
        pretty_assertions::assert_eq!(
            names_of(&crd),
            names_from_facts(names),
            "{plural}: scope, names and subresources"
        );
    }
}

/// The quantity pattern of the Kubernetes API (`resource.Quantity`).
const QUANTITY: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// Constraints KEDA's CRDs carry inside the embedded Kubernetes types, one per rule keda-rs
/// applies (`keda_api::crd`): the Kubernetes API's own markers and defaults that k8s-openapi's
/// schemas leave out, and KEDA's kustomize patches. `null`: the key is absent.
fn embedded_facts() -> Vec<(&'static str, String, &'static str, Value)> {
    let behavior = ".spec.advanced.horizontalPodAutoscalerConfig.behavior";
    let pod = ".spec.jobTargetRef.template.spec";
    let int_or_string = json!([{"type": "integer"}, {"type": "string"}]);
    let so = "scaledobjects";
    let sj = "scaledjobs";
    vec![
        // KEDA's scaledobject_patch.yaml: the HPA's own bounds on the windows.
        (
            so,
            format!("{behavior}.scaleUp.stabilizationWindowSeconds"),
            "minimum",
            json!(0),
        ),
        (
            so,
            format!("{behavior}.scaleDown.stabilizationWindowSeconds"),
            "maximum",
            json!(3600),
        ),
        (
            so,
            format!("{behavior}.scaleDown.policies"),
            "x-kubernetes-list-type",
            json!("atomic"),
        ),
        (
            so,
            format!("{behavior}.scaleUp.tolerance"),
            "pattern",
            json!(QUANTITY),
        ),
        (
            so,
            format!("{behavior}.scaleUp.tolerance"),
            "anyOf",
            int_or_string.clone(),
        ),
        (
            so,
            format!("{behavior}.scaleUp.tolerance"),
            "nullable",
            Value::Null,
        ),
        // KEDA's scaledjob_patch.yaml: the template's metadata is kept as written; ports need a
        // protocol (defaulted to TCP); ScaledJob triggers have no metricType.
        (
            sj,
            ".spec.jobTargetRef.template.metadata".into(),
            "x-kubernetes-preserve-unknown-fields",
            json!(true),
        ),
        (
            sj,
            ".spec.jobTargetRef.template.metadata".into(),
            "properties",
            json!(["annotations", "finalizers", "labels", "name", "namespace"]),
        ),
        (
            sj,
            format!("{pod}.containers[].ports[]"),
            "required",
            json!(["containerPort", "protocol"]),
        ),
        (
            sj,
            format!("{pod}.initContainers[].ports[].protocol"),
            "default",
            json!("TCP"),
        ),
        (
            sj,
            ".spec.triggers[]".into(),
            "properties",
            json!([
                "authenticationRef",
                "metadata",
                "name",
                "type",
                "useCachedMetrics"
            ]),
        ),
        // Lists the API server keeps as maps: duplicate keys are refused.
        (
            sj,
            format!("{pod}.containers"),
            "x-kubernetes-list-map-keys",
            json!(["name"]),
        ),
        (
            sj,
            format!("{pod}.containers[].env"),
            "x-kubernetes-list-type",
            json!("map"),
        ),
        (
            sj,
            format!("{pod}.containers[].ports"),
            "x-kubernetes-list-map-keys",
            json!(["containerPort", "protocol"]),
        ),
        (
            sj,
            format!("{pod}.ephemeralContainers[].volumeMounts"),
            "x-kubernetes-list-map-keys",
            json!(["mountPath"]),
        ),
        (
            sj,
            format!("{pod}.initContainers[].volumeDevices"),
            "x-kubernetes-list-map-keys",
            json!(["devicePath"]),
        ),
        (
            sj,
            format!("{pod}.volumes"),
            "x-kubernetes-list-type",
            json!("map"),
        ),
        (
            sj,
            format!("{pod}.topologySpreadConstraints"),
            "x-kubernetes-list-map-keys",
            json!(["topologyKey", "whenUnsatisfiable"]),
        ),
        (
            sj,
            format!("{pod}.hostAliases"),
            "x-kubernetes-list-map-keys",
            json!(["ip"]),
        ),
        (
            sj,
            format!("{pod}.resources.claims"),
            "x-kubernetes-list-map-keys",
            json!(["name"]),
        ),
        (
            sj,
            ".spec.jobTargetRef.podFailurePolicy.rules[].onExitCodes.values".into(),
            "x-kubernetes-list-type",
            json!("set"),
        ),
        // Quantities have the quantity pattern; ports are int-or-string.
        (
            sj,
            format!("{pod}.containers[].resources.limits{{*}}"),
            "pattern",
            json!(QUANTITY),
        ),
        (
            sj,
            format!("{pod}.overhead{{*}}"),
            "anyOf",
            int_or_string.clone(),
        ),
        (
            sj,
            format!("{pod}.volumes[].emptyDir.sizeLimit"),
            "pattern",
            json!(QUANTITY),
        ),
        (
            sj,
            format!("{pod}.containers[].livenessProbe.httpGet.port"),
            "anyOf",
            int_or_string.clone(),
        ),
        (
            sj,
            format!("{pod}.containers[].livenessProbe.httpGet.port"),
            "pattern",
            Value::Null,
        ),
        // References whose name may be left out (defaulted to "").
        (
            sj,
            format!("{pod}.containers[].env[].valueFrom.secretKeyRef"),
            "required",
            json!(["key"]),
        ),
        (
            sj,
            format!("{pod}.containers[].env[].valueFrom.secretKeyRef.name"),
            "default",
            json!(""),
        ),
        (
            sj,
            format!("{pod}.initContainers[].envFrom[].configMapRef"),
            "required",
            Value::Null,
        ),
        (
            sj,
            format!("{pod}.imagePullSecrets[]"),
            "required",
            Value::Null,
        ),
        (
            sj,
            format!("{pod}.volumes[].configMap.name"),
            "default",
            json!(""),
        ),
        (
            sj,
            format!("{pod}.volumes[].projected.sources[].secret"),
            "required",
            Value::Null,
        ),
        // Other defaults the API server writes into the stored object.
        (
            sj,
            format!("{pod}.containers[].readinessProbe.grpc.service"),
            "default",
            json!(""),
        ),
        (
            sj,
            format!("{pod}.volumes[].azureDisk.fsType"),
            "default",
            json!("ext4"),
        ),
        (
            sj,
            format!("{pod}.volumes[].rbd.pool"),
            "default",
            json!("rbd"),
        ),
        (
            sj,
            format!("{pod}.volumes[].scaleIO.storageMode"),
            "default",
            json!("ThinProvisioned"),
        ),
        (
            sj,
            ".spec.jobTargetRef.podFailurePolicy.rules[].onPodConditions[]".into(),
            "required",
            json!(["type"]),
        ),
        // Embedded ObjectMeta keeps the fields a claim template may set.
        (
            sj,
            format!("{pod}.volumes[].ephemeral.volumeClaimTemplate.metadata"),
            "properties",
            json!(["annotations", "finalizers", "labels", "name", "namespace"]),
        ),
    ]
}

/// The value at a dotted schema path (`.a`, `[]`, `{*}` steps).
fn at<'a>(schema: &'a Value, path: &str) -> Option<&'a Value> {
    let mut node = schema;
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("[]") {
            node = node.get("items")?;
            rest = r;
        } else if let Some(r) = rest.strip_prefix("{*}") {
            node = node.get("additionalProperties")?;
            rest = r;
        } else if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[', '{']).unwrap_or(r.len());
            node = node.get("properties")?.get(&r[..end])?;
            rest = &r[end..];
        } else {
            return None;
        }
    }
    Some(node)
}

fn fact_at(schema: &Value, path: &str, key: &str) -> Option<Value> {
    let node = at(schema, path)?;
    match key {
        "required" | "properties" => {
            let mut names: Vec<String> = match node.get(key)? {
                Value::Array(items) => items
                    .iter()
                    .filter_map(|i| i.as_str().map(str::to_string))
                    .collect(),
                Value::Object(map) => map.keys().cloned().collect(),
                _ => return None,
            };
            names.sort();
            (!names.is_empty()).then(|| json!(names))
        }
        _ => node.get(key).cloned(),
    }
}

#[test]
fn embedded_kubernetes_types_carry_keda_s_constraints() {
    let mut wrong = Vec::new();
    for (plural, path, key, want) in embedded_facts() {
        let crd = ours(plural);
        let schema = schema(&crd);
        assert!(
            at(schema, &path).is_some(),
            "{plural}: no schema at `{path}`"
        );
        let got = fact_at(schema, &path, key).unwrap_or(Value::Null);
        if !same(Some(&got), Some(&want)) {
            wrong.push(format!(
                "{plural} `{path}` {key}: KEDA {want}, keda-rs {got}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// Against KEDA's files themselves, where the repository is mirrored.

fn mirror() -> Option<PathBuf> {
    let path = std::env::var_os("KEDA_RS_KEDA_MIRROR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/work/.mirror/kedacore+keda/repo"));
    path.exists().then_some(path)
}

fn git_show(repo: &Path, file: &str) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .arg("show")
        .arg(format!("{KEDA_COMMIT}:{file}"))
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git show {KEDA_COMMIT}:{file} in {}: {}",
        repo.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// KEDA's CRD as its install applies it: the base file with its kustomize JSON patch.
fn keda_crd(repo: &Path, file: &str, patch: Option<&str>) -> Value {
    let yaml = git_show(repo, &format!("config/crd/bases/{file}"));
    let mut crd: Value = serde_yaml::from_str(&yaml).expect("KEDA's CRD is YAML");
    if let Some(patch) = patch {
        let ops: json_patch::Patch =
            serde_yaml::from_str(&git_show(repo, &format!("config/crd/patches/{patch}")))
                .expect("KEDA's patch is a JSON patch");
        json_patch::patch(&mut crd, &ops).expect("KEDA's patch applies");
    }
    crd
}

const KEDA_FILES: &[(&str, &str, Option<&str>)] = &[
    (
        "scaledobjects",
        "keda.sh_scaledobjects.yaml",
        Some("scaledobject_patch.yaml"),
    ),
    (
        "scaledjobs",
        "keda.sh_scaledjobs.yaml",
        Some("scaledjob_patch.yaml"),
    ),
    (
        "triggerauthentications",
        "keda.sh_triggerauthentications.yaml",
        None,
    ),
    (
        "clustertriggerauthentications",
        "keda.sh_clustertriggerauthentications.yaml",
        None,
    ),
    (
        "cloudeventsources",
        "eventing.keda.sh_cloudeventsources.yaml",
        None,
    ),
    (
        "clustercloudeventsources",
        "eventing.keda.sh_clustercloudeventsources.yaml",
        None,
    ),
];

/// Why a difference inside an embedded Kubernetes type stays, or `None` when it must not.
fn embedded_difference_stays(
    plural: &str,
    path: &str,
    key: &str,
    keda: Option<&Value>,
    ours: Option<&Value>,
) -> Option<&'static str> {
    if plural != "scaledjobs" || !path.starts_with(".spec.jobTargetRef") {
        return None;
    }
    match (key, keda, ours) {
        ("x-kubernetes-list-type", Some(v), None) if v == "atomic" => Some(
            "atomic is what the API server assumes for a CRD list without a list type: \
             no difference in what is admitted or merged",
        ),
        ("x-kubernetes-map-type", Some(v), None) if v == "atomic" => Some(
            "server-side apply merges the object as one value in KEDA, field by field here; \
             nothing admitted differs",
        ),
        ("(field)", Some(_), None)
            if [
                ".restartPolicyRules",
                ".fileKeyRef",
                ".hostnameOverride",
                ".podCertificate",
                ".workloadRef",
            ]
            .iter()
            .any(|f| path.ends_with(f)) =>
        {
            Some(
                "fields of Kubernetes 1.34/1.35 alpha features (k8s.io/api 0.35 in KEDA); \
                 keda-rs's Kubernetes types are 1.33's, so the API server prunes them",
            )
        }
        _ => None,
    }
}

/// Every difference between two schemas, descriptions aside, as `(path, key, keda, ours)`;
/// `(field)` for a property only one side has.
fn full_diff(
    keda: &Value,
    ours: &Value,
    path: &str,
    out: &mut Vec<(String, String, Option<Value>, Option<Value>)>,
) {
    let (Some(a), Some(b)) = (keda.as_object(), ours.as_object()) else {
        if keda != ours {
            out.push((
                path.to_string(),
                "(value)".into(),
                Some(keda.clone()),
                Some(ours.clone()),
            ));
        }
        return;
    };
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    for key in keys {
        let (va, vb) = (a.get(key), b.get(key));
        match key.as_str() {
            "description" => {}
            "properties" => {
                let empty = serde_json::Map::new();
                let pa = va.and_then(Value::as_object).unwrap_or(&empty);
                let pb = vb.and_then(Value::as_object).unwrap_or(&empty);
                let mut names: Vec<&String> = pa.keys().chain(pb.keys()).collect();
                names.sort();
                names.dedup();
                for name in names {
                    let sub = format!("{path}.{name}");
                    match (pa.get(name), pb.get(name)) {
                        (Some(x), Some(y)) => full_diff(x, y, &sub, out),
                        (x, y) => out.push((sub, "(field)".into(), x.cloned(), y.cloned())),
                    }
                }
            }
            "items" | "additionalProperties"
                if va.is_some_and(Value::is_object) && vb.is_some_and(Value::is_object) =>
            {
                let step = if key == "items" { "[]" } else { "{*}" };
                full_diff(
                    va.unwrap_or(&Value::Null),
                    vb.unwrap_or(&Value::Null),
                    &format!("{path}{step}"),
                    out,
                );
            }
            "required" => {
                let sorted = |v: Option<&Value>| {
                    let mut names: Vec<String> = v
                        .and_then(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .filter_map(|i| i.as_str().map(str::to_string))
                                .collect()
                        })
                        .unwrap_or_default();
                    names.sort();
                    names
                };
                if sorted(va) != sorted(vb) {
                    out.push((path.to_string(), key.clone(), va.cloned(), vb.cloned()));
                }
            }
            _ => {
                if !same(va, vb) {
                    out.push((path.to_string(), key.clone(), va.cloned(), vb.cloned()));
                }
            }
        }
    }
}

#[test]
fn keda_s_crds_at_the_pinned_commit_differ_from_ours_only_where_documented() {
    let Some(repo) = mirror() else {
        eprintln!(
            "skipped: KEDA's repository is not mirrored here (set KEDA_RS_KEDA_MIRROR); \
             every_constraint_of_keda_s_crds_is_in_ours_and_no_other carries its facts"
        );
        return;
    };
    let mut problems = Vec::new();
    let mut kept: BTreeMap<String, usize> = BTreeMap::new();
    for (plural, file, patch) in KEDA_FILES {
        let keda = keda_crd(&repo, file, *patch);
        let ours = ours(plural);

        // The facts table is true of KEDA's file.
        let (_, facts) = CRDS.iter().find(|(p, _)| p == plural).expect("facts");
        let mut keda_facts = BTreeMap::new();
        collect(schema(&keda), "", &mut keda_facts);
        for line in differences("", &from_facts(facts), &keda_facts) {
            problems.push(format!("keda_crd/facts.rs is not KEDA's {file}: {line}"));
        }
        let (_, columns, names) = META.iter().find(|(p, _, _)| p == plural).expect("meta");
        let want: Vec<(String, String, String, i64)> = columns
            .iter()
            .map(|(n, t, p, prio)| (n.to_string(), t.to_string(), p.to_string(), *prio))
            .collect();
        if columns_of(&keda) != want || names_of(&keda) != names_from_facts(names) {
            problems.push(format!(
                "keda_crd/facts.rs columns or names are not KEDA's {file}"
            ));
        }

        // Key by key, embedded types included.
        let mut diff = Vec::new();
        full_diff(schema(&keda), schema(&ours), "", &mut diff);
        for (path, key, a, b) in diff {
            if documented(plural, &path, &key) {
                *kept.entry(format!("{plural} `{path}` {key}")).or_default() += 1;
                continue;
            }
            if let Some(reason) =
                embedded_difference_stays(plural, &path, &key, a.as_ref(), b.as_ref())
            {
                *kept.entry(reason.to_string()).or_default() += 1;
                continue;
            }
            let show = |v: Option<Value>| v.map_or("(none)".to_string(), |v| v.to_string());
            let (a, b) = (show(a), show(b));
            let clip = |s: String| {
                if s.chars().count() > 200 {
                    format!("{}...", s.chars().take(200).collect::<String>())
                } else {
                    s
                }
            };
            problems.push(format!(
                "{plural} `{path}` {key}: KEDA {}, keda-rs {}",
                clip(a),
                clip(b)
            ));
        }
    }
    for (reason, count) in &kept {
        eprintln!("documented difference, {count} place(s): {reason}");
    }
    assert!(
        problems.is_empty(),
        "{} differences from KEDA's CRDs at {KEDA_COMMIT}:\n{}",
        problems.len(),
        problems.join("\n")
    );
}
