//! Against KEDA's files themselves, where the repository is mirrored: key by key, embedded
//! Kubernetes types included, every difference either documented or failing.

use super::*;

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
