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

#[path = "keda_crd/embedded.rs"]
mod embedded;
#[path = "keda_crd/facts.rs"]
mod facts;
#[path = "keda_crd/mirror.rs"]
mod mirror;

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
