//! Offline checks of the install manifests in config/ (no cluster needed): every kustomization
//! names files that exist, every document is a well-formed object, and the objects reference
//! each other consistently (service accounts, selectors, probe ports).

use std::collections::BTreeSet;
use std::path::Path;

use keda_e2e::{repo_root, yaml_documents};
use serde_json::Value;

fn kustomization_resources(dir: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join("kustomization.yaml"))
        .unwrap_or_else(|e| panic!("{}/kustomization.yaml: {e}", dir.display()));
    let k: Value = serde_yaml::from_str(&text).expect("kustomization is YAML");
    k["resources"]
        .as_array()
        .unwrap_or_else(|| panic!("{}/kustomization.yaml has no resources", dir.display()))
        .iter()
        .map(|r| {
            r.as_str()
                .expect("resource entries are strings")
                .to_string()
        })
        .collect()
}

/// Every object the top-level kustomization installs, following nested kustomizations.
fn installed_objects(dir: &Path, out: &mut Vec<(String, Value)>) {
    for resource in kustomization_resources(dir) {
        let path = dir.join(&resource);
        if path.is_dir() {
            installed_objects(&path, out);
        } else {
            assert!(
                path.is_file(),
                "{} lists {resource}, which does not exist",
                dir.display()
            );
            let text = std::fs::read_to_string(&path).expect("manifest readable");
            for doc in serde_yaml::Deserializer::from_str(&text) {
                let value: Value = serde::Deserialize::deserialize(doc)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                if !value.is_null() {
                    out.push((path.display().to_string(), value));
                }
            }
        }
    }
}

fn objects() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    installed_objects(&repo_root().join("config"), &mut out);
    out
}

#[test]
fn every_installed_manifest_is_a_named_kubernetes_object() {
    let objects = objects();
    assert!(
        objects.len() > 10,
        "the install has only {} objects",
        objects.len()
    );
    for (file, obj) in &objects {
        assert!(
            obj["apiVersion"].is_string(),
            "{file}: an object without apiVersion"
        );
        assert!(obj["kind"].is_string(), "{file}: an object without kind");
        assert!(
            obj["metadata"]["name"].is_string(),
            "{file}: a {} without a name",
            obj["kind"]
        );
    }
}

#[test]
fn every_crd_file_is_installed_by_the_kustomization() {
    let installed: BTreeSet<String> = objects()
        .into_iter()
        .filter(|(_, o)| o["kind"] == "CustomResourceDefinition")
        .map(|(_, o)| {
            o["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    let on_disk: BTreeSet<String> = yaml_documents(&repo_root().join("config/crd"))
        .expect("config/crd readable")
        .into_iter()
        .filter(|(_, o)| o["kind"] == "CustomResourceDefinition")
        .map(|(_, o)| {
            o["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(installed, on_disk);
    for name in [
        "scaledobjects.keda.sh",
        "scaledjobs.keda.sh",
        "triggerauthentications.keda.sh",
        "clustertriggerauthentications.keda.sh",
    ] {
        assert!(installed.contains(name), "{name} is not installed");
    }
}

#[test]
fn deployments_use_existing_service_accounts_and_named_probe_ports() {
    let objects = objects();
    let accounts: BTreeSet<(String, String)> = objects
        .iter()
        .filter(|(_, o)| o["kind"] == "ServiceAccount")
        .map(|(_, o)| {
            let m = &o["metadata"];
            (
                m["namespace"].as_str().unwrap_or("").into(),
                m["name"].as_str().unwrap_or("").into(),
            )
        })
        .collect();
    let deployments: Vec<_> = objects
        .iter()
        .filter(|(_, o)| o["kind"] == "Deployment")
        .collect();
    assert_eq!(
        deployments.len(),
        4,
        "operator, metrics-apiserver, activator and admission webhooks"
    );
    for (file, d) in deployments {
        let ns = d["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let pod = &d["spec"]["template"]["spec"];
        let sa = pod["serviceAccountName"].as_str().unwrap_or("").to_string();
        assert!(
            accounts.contains(&(ns.clone(), sa.clone())),
            "{file}: no ServiceAccount {ns}/{sa}"
        );
        let selector = d["spec"]["selector"]["matchLabels"]
            .as_object()
            .expect("matchLabels");
        for (k, v) in selector {
            assert_eq!(
                &d["spec"]["template"]["metadata"]["labels"][k], v,
                "{file}: selector {k}"
            );
        }
        for c in pod["containers"].as_array().expect("containers") {
            let ports: BTreeSet<&str> = c["ports"]
                .as_array()
                .map(|p| p.iter().filter_map(|p| p["name"].as_str()).collect())
                .unwrap_or_default();
            for probe in ["livenessProbe", "readinessProbe"] {
                if let Some(port) = c[probe]["httpGet"]["port"].as_str() {
                    assert!(
                        ports.contains(port),
                        "{file}: {probe} names unknown port {port}"
                    );
                }
            }
        }
    }
}

/// The file a container's `--http-host-policy` names, read from the ConfigMap volume mounted
/// there, as the kubelet would present it.
fn host_policy_of(objects: &[(String, Value)], deployment: &str) -> String {
    let (file, d) = objects
        .iter()
        .find(|(_, o)| o["kind"] == "Deployment" && o["metadata"]["name"] == deployment)
        .unwrap_or_else(|| panic!("no Deployment {deployment}"));
    let pod = &d["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let path = container["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .find_map(|a| a.strip_prefix("--http-host-policy="))
        .unwrap_or_else(|| panic!("{file}: {deployment} is not given --http-host-policy"));
    let (mount, key) = container["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|m| {
            let dir = m["mountPath"].as_str()?;
            let key = path.strip_prefix(dir)?.strip_prefix('/')?;
            Some((m, key))
        })
        .unwrap_or_else(|| panic!("{file}: nothing is mounted at {path}"));
    let volume = pod["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == mount["name"])
        .unwrap_or_else(|| panic!("{file}: no volume {}", mount["name"]));
    let name = volume["configMap"]["name"]
        .as_str()
        .unwrap_or_else(|| panic!("{file}: the host policy volume is not a ConfigMap"));
    let (_, map) = objects
        .iter()
        .find(|(_, o)| {
            o["kind"] == "ConfigMap"
                && o["metadata"]["name"] == name
                && o["metadata"]["namespace"] == d["metadata"]["namespace"]
        })
        .unwrap_or_else(|| panic!("{file}: ConfigMap {name} is not installed"));
    map["data"][key]
        .as_str()
        .unwrap_or_else(|| panic!("ConfigMap {name} has no key {key}"))
        .to_string()
}

/// Finding 8 of issue 30: with no policy, any namespace could claim any host (`*` included).
/// The install ships one policy file, mounted into the operator and the activator alike, that
/// grants nothing until the administrator lists hosts.
#[test]
fn the_operator_and_the_activator_read_one_shipped_host_policy_that_grants_no_host() {
    use keda_scalers::scalers::http::claims::HostPolicy;
    let objects = objects();
    let operator = host_policy_of(&objects, "keda-operator");
    let activator = host_policy_of(&objects, "keda-activator");
    assert_eq!(operator, activator, "both read the same file");
    let policy = HostPolicy::from_yaml(&operator).expect("the shipped policy parses");
    assert_eq!(policy, HostPolicy::deny_all());
    for host in ["*", "shop.example.com", "*.example.com"] {
        assert!(!policy.allows("default", host), "{host}");
    }
}

#[test]
fn services_select_a_deployment_and_target_its_named_ports() {
    let objects = objects();
    let deployments: Vec<&Value> = objects
        .iter()
        .filter(|(_, o)| o["kind"] == "Deployment")
        .map(|(_, o)| o)
        .collect();
    for (file, svc) in objects.iter().filter(|(_, o)| o["kind"] == "Service") {
        let selector = svc["spec"]["selector"]
            .as_object()
            .expect("service selector");
        let target = deployments
            .iter()
            .find(|d| {
                selector
                    .iter()
                    .all(|(k, v)| &d["spec"]["template"]["metadata"]["labels"][k] == v)
            })
            .unwrap_or_else(|| panic!("{file}: Service selects no Deployment"));
        let names: BTreeSet<&str> = target["spec"]["template"]["spec"]["containers"]
            .as_array()
            .expect("containers")
            .iter()
            .flat_map(|c| c["ports"].as_array().into_iter().flatten())
            .filter_map(|p| p["name"].as_str())
            .collect();
        for port in svc["spec"]["ports"].as_array().expect("service ports") {
            if let Some(t) = port["targetPort"].as_str() {
                assert!(
                    names.contains(t),
                    "{file}: targetPort {t} is not a container port"
                );
            }
        }
    }
}

#[test]
fn the_api_service_points_at_the_metrics_apiserver_service() {
    let objects = objects();
    let (_, api) = objects
        .iter()
        .find(|(_, o)| o["kind"] == "APIService")
        .expect("an APIService is installed");
    assert_eq!(api["metadata"]["name"], "v1beta1.external.metrics.k8s.io");
    let svc = &api["spec"]["service"];
    assert!(
        objects.iter().any(|(_, o)| o["kind"] == "Service"
            && o["metadata"]["name"] == svc["name"]
            && o["metadata"]["namespace"] == svc["namespace"]),
        "the APIService names a Service that is not installed"
    );
}

/// The API server's limit on the total size of an object's annotations (keys and values).
const ANNOTATIONS_LIMIT: usize = 262_144;

/// The annotation `kubectl apply` (client-side) writes: the whole object as JSON.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The size of `obj`'s annotations once client-side apply has added its own.
fn annotations_after_client_side_apply(obj: &Value) -> usize {
    let existing: usize = obj["metadata"]["annotations"]
        .as_object()
        .map(|a| {
            a.iter()
                .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
                .sum()
        })
        .unwrap_or_default();
    existing + LAST_APPLIED.len() + serde_json::to_string(obj).map_or(0, |s| s.len())
}

/// The README and every page of docs/, with their names.
fn documentation() -> Vec<(String, String)> {
    let root = repo_root();
    let mut pages = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("docs readable").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    pages
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("page readable");
            (p.display().to_string(), text)
        })
        .collect()
}

#[test]
fn the_documented_install_command_works_for_every_object_in_config() {
    // Client-side apply stores each object in an annotation; objects larger than the limit
    // (the ScaledJob CRD) are refused with "metadata.annotations: Too long". Server-side apply
    // stores nothing of the kind.
    let too_large: Vec<String> = objects()
        .iter()
        .filter(|(_, obj)| annotations_after_client_side_apply(obj) > ANNOTATIONS_LIMIT)
        .map(|(file, obj)| format!("{} {} ({file})", obj["kind"], obj["metadata"]["name"]))
        .collect();
    let mut client_side = Vec::new();
    let mut server_side = 0;
    for (page, text) in documentation() {
        for (number, line) in text.lines().enumerate() {
            if !(line.contains("kubectl apply") && line.contains("config/")) {
                continue;
            }
            if line.contains("--server-side") {
                server_side += 1;
            } else {
                client_side.push(format!("{page}:{}: {line}", number + 1));
            }
        }
    }
    assert!(
        too_large.is_empty() || client_side.is_empty(),
        "client-side `kubectl apply` of config/ is documented, but these objects exceed the {ANNOTATIONS_LIMIT}-byte annotation limit it needs: {too_large:?}; use `kubectl apply --server-side -k config/` in:\n{}",
        client_side.join("\n")
    );
    assert!(
        server_side > 0,
        "the README and docs name no install command"
    );
}

#[test]
fn every_image_config_deploys_is_built_by_a_target_of_the_dockerfile() {
    let dockerfile =
        std::fs::read_to_string(repo_root().join("Dockerfile")).expect("Dockerfile readable");
    let targets: BTreeSet<String> = dockerfile
        .lines()
        .filter(|l| l.starts_with("FROM "))
        .filter_map(|l| {
            l.split_once(" AS ")
                .map(|(_, name)| name.trim().to_string())
        })
        .filter(|name| name != "build")
        .collect();
    let mut deployed = BTreeSet::new();
    for (file, obj) in objects() {
        if obj["kind"] != "Deployment" {
            continue;
        }
        for container in obj["spec"]["template"]["spec"]["containers"]
            .as_array()
            .expect("containers")
        {
            let image = container["image"].as_str().expect("an image");
            let target = image
                .strip_prefix("keda-rs/keda-rs-")
                .and_then(|rest| rest.strip_suffix(&format!(":{}", env!("CARGO_PKG_VERSION"))))
                .unwrap_or_else(|| {
                    panic!(
                        "{file}: image {image} is not keda-rs/keda-rs-<target>:{}",
                        env!("CARGO_PKG_VERSION")
                    )
                });
            assert!(
                targets.contains(target),
                "{file}: image {image} has no Dockerfile target {target:?} (targets: {targets:?})"
            );
            assert!(
                dockerfile.contains(&format!("--target {target}")) && dockerfile.contains(image),
                "the Dockerfile's header does not show how to build {image}"
            );
            deployed.insert(target.to_string());
        }
    }
    assert_eq!(
        deployed, targets,
        "every image the Dockerfile builds is deployed"
    );
}
