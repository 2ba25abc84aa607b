//! The installed Deployment (`config/operator/deployment.yaml`) passes flags and environment
//! the binary accepts, and its named ports are the ones those flags choose.

use std::path::PathBuf;

use keda_operator::config::{MapEnv, Settings, WatchScope};
use keda_scalers::scalers::http::claims::HostPolicy;
use serde_json::Value;

fn operator_deployment() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../config/operator/deployment.yaml");
    let text = std::fs::read_to_string(&path).expect("deployment.yaml");
    text.split("\n---")
        .map(|doc| serde_yaml::from_str::<Value>(doc).expect("YAML"))
        .find(|doc| doc["kind"] == "Deployment")
        .expect("a Deployment")
}

fn operator_container() -> Value {
    operator_deployment()["spec"]["template"]["spec"]["containers"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == "keda-operator"))
        .cloned()
        .expect("the keda-operator container")
}

/// The files the container's ConfigMap volumes put under their mount paths (the ConfigMaps
/// found in `config/`), as the kubelet would.
fn mounted_files(container: &Value) -> Vec<(String, String)> {
    let config = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../config");
    let mut config_maps = Vec::new();
    let mut dirs = vec![config];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("config/ readable") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml") {
                let text = std::fs::read_to_string(&path).expect("manifest");
                for doc in text.split("\n---") {
                    let doc: Value = serde_yaml::from_str(doc).expect("YAML");
                    if doc["kind"] == "ConfigMap" {
                        config_maps.push(doc);
                    }
                }
            }
        }
    }
    let volumes = operator_deployment()["spec"]["template"]["spec"]["volumes"].clone();
    let mut files = Vec::new();
    for mount in container["volumeMounts"].as_array().into_iter().flatten() {
        let volume = volumes
            .as_array()
            .and_then(|v| v.iter().find(|v| v["name"] == mount["name"]))
            .unwrap_or_else(|| panic!("no volume {}", mount["name"]));
        let Some(name) = volume["configMap"]["name"].as_str() else {
            continue;
        };
        let map = config_maps
            .iter()
            .find(|m| m["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("ConfigMap {name} is not in config/"));
        for (key, value) in map["data"].as_object().expect("data") {
            files.push((
                format!("{}/{key}", mount["mountPath"].as_str().expect("mountPath")),
                value.as_str().expect("string data").to_string(),
            ));
        }
    }
    files
}

/// The settings the operator's container (`container`) runs with: its args, its env (values
/// from the pod as the kubelet would set them) and the files of its ConfigMap volumes.
fn operator_settings(container: &Value) -> Settings {
    let mut argv = vec!["keda-operator".to_string()];
    argv.extend(
        container["args"]
            .as_array()
            .expect("args")
            .iter()
            .map(|a| a.as_str().expect("string arg").to_string()),
    );
    // Values from the pod (fieldRef) get what the kubelet would put there.
    let vars: Vec<(String, String)> = container["env"]
        .as_array()
        .expect("env")
        .iter()
        .map(|e| {
            let name = e["name"].as_str().expect("env name").to_string();
            let value = match e["value"].as_str() {
                Some(v) => v.to_string(),
                None => match e["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
                    Some("metadata.namespace") => "keda".to_string(),
                    Some("metadata.name") => "keda-operator-5d8f7-abcde".to_string(),
                    Some("status.podIP") => "10.1.2.3".to_string(),
                    other => panic!("unexpected env source for {name}: {other:?}"),
                },
            };
            (name, value)
        })
        .collect();
    let refs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let env = mounted_files(container)
        .into_iter()
        .fold(MapEnv::new(&refs), |env, (path, text)| {
            env.with_file_contents(path, &text)
        });
    Settings::from_sources(argv, &env).expect("the manifest's settings parse")
}

#[test]
fn the_installed_deployment_s_args_and_env_are_accepted_and_match_its_ports() {
    let container = operator_container();
    let settings = operator_settings(&container);

    // The shipped host policy is mounted and read, and grants nothing until the administrator
    // lists hosts.
    assert_eq!(settings.http_host_policy, HostPolicy::deny_all());

    let lease = settings
        .leader_election
        .expect("the manifest enables leader election");
    assert_eq!(lease.name, "operator.keda.sh");
    assert_eq!(lease.namespace, "keda");
    assert_eq!(lease.identity, "keda-operator-5d8f7-abcde");
    assert_eq!(settings.watch_namespaces, WatchScope::All);

    let port = |name: &str| -> u16 {
        container["ports"]
            .as_array()
            .and_then(|ports| ports.iter().find(|p| p["name"] == name))
            .and_then(|p| p["containerPort"].as_u64())
            .and_then(|p| u16::try_from(p).ok())
            .unwrap_or_else(|| panic!("no container port named {name}"))
    };
    assert_eq!(
        settings.metrics_addr.map(|a| a.port()),
        Some(port("metrics"))
    );
    assert_eq!(settings.probe_addr.map(|a| a.port()), Some(port("probes")));
    assert_eq!(
        settings.metrics_service_addr.map(|a| a.port()),
        Some(port("metricsservice"))
    );
    assert_eq!(
        settings.explain_addr.map(|a| a.port()),
        Some(port("explain"))
    );
    for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
        assert_eq!(container[probe]["httpGet"]["path"], path, "{probe}");
        assert_eq!(container[probe]["httpGet"]["port"], "probes", "{probe}");
    }
}

/// Issue 30, finding 7: the install lets the operator mint tokens for no ServiceAccount: no
/// ClusterRole of `config/` grants `create` on `serviceaccounts/token` (an administrator opts
/// a ServiceAccount in with a namespaced Role and `--bound-token-service-accounts`), and the
/// Deployment opts none in.
#[test]
fn the_shipped_rbac_grants_no_token_creation_cluster_wide() {
    let config = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../config");
    let mut dirs = vec![config];
    let mut cluster_roles = 0;
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("config/ readable") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "yaml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("manifest");
            for doc in text.split("\n---") {
                let Ok(doc) = serde_yaml::from_str::<Value>(doc) else {
                    continue;
                };
                if doc["kind"] != "ClusterRole" {
                    continue;
                }
                cluster_roles += 1;
                for rule in doc["rules"].as_array().into_iter().flatten() {
                    let resources: Vec<&str> = rule["resources"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .collect();
                    let core = rule["apiGroups"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|g| g == "" || g == "*");
                    let creates = rule["verbs"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|v| v == "create" || v == "*");
                    assert!(
                        !core
                            || !creates
                            || !resources
                                .iter()
                                .any(|r| *r == "serviceaccounts/token" || *r == "*"),
                        "{}: ClusterRole {} grants {resources:?}",
                        path.display(),
                        doc["metadata"]["name"]
                    );
                }
            }
        }
    }
    assert!(cluster_roles > 0, "the ClusterRoles were read");
    let container = operator_container();
    let text = container.to_string();
    assert!(
        !text.contains("bound-token-service-accounts")
            && !text.contains("KEDA_RS_BOUND_TOKEN_SERVICE_ACCOUNTS")
            && !text.contains("allow-namespace-vault-operator-identity")
            && !text.contains("allow-namespace-aws-operator-identity")
            && !text.contains("KEDA_RS_ALLOW_NAMESPACE"),
        "the install opts nothing in: {text}"
    );
}

/// The webhook's container in `config/webhooks/deployment.yaml`.
fn webhook_container() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../config/webhooks/deployment.yaml");
    let text = std::fs::read_to_string(&path).expect("webhooks/deployment.yaml");
    text.split("\n---")
        .map(|doc| serde_yaml::from_str::<Value>(doc).expect("YAML"))
        .find(|doc| doc["kind"] == "Deployment")
        .and_then(|d| {
            d["spec"]["template"]["spec"]["containers"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["name"] == "keda-admission-webhooks"))
                .cloned()
        })
        .expect("the keda-admission-webhooks container")
}

/// The identity rules the webhook's container runs with, parsed by the webhook's own flags.
/// clap reads `env` from the process, so the container's `KEDA_RS_*` variables become flags
/// placed before its args: a flag given in `args` still wins over the variable, as in the pod.
fn webhook_identity(container: &Value) -> keda_api::identity::IdentityPolicy {
    use clap::Parser;
    let mut argv = vec!["keda-webhook".to_string()];
    for var in container["env"].as_array().into_iter().flatten() {
        let name = var["name"].as_str().expect("env name");
        let flag = match name {
            keda_api::identity::ALLOW_NAMESPACE_VAULT_OPERATOR_IDENTITY_ENV => {
                "--allow-namespace-vault-operator-identity"
            }
            keda_api::identity::BOUND_TOKEN_SERVICE_ACCOUNTS_ENV => {
                "--bound-token-service-accounts"
            }
            _ => continue,
        };
        let value = var["value"]
            .as_str()
            .unwrap_or_else(|| panic!("{name} of the webhook is not a literal value"));
        argv.push(format!("{flag}={value}"));
    }
    argv.extend(
        container["args"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|a| a.as_str().expect("string arg").to_string()),
    );
    keda_webhook::config::Args::try_parse_from(&argv)
        .unwrap_or_else(|e| panic!("the webhook's manifest args parse: {e}"))
        .identity()
        .expect("the webhook's identity flags parse")
}

/// Issue 30, findings 1 and 7: the webhook refuses at admission what the operator refuses when
/// it resolves a trigger, with the same rules, so both must be given the same
/// `--allow-namespace-vault-operator-identity` and `--bound-token-service-accounts` (flag or
/// `KEDA_RS_*` variable). The shipped Deployments agree, and give neither (the safe defaults):
/// a manifest that opts one in must opt in the other alike.
#[test]
fn the_shipped_operator_and_webhook_agree_on_the_identity_opt_ins() {
    let operator = operator_settings(&operator_container()).identity;
    let webhook = webhook_identity(&webhook_container());
    // The AWS opt-in is the operator's alone (its scalers check it; the webhook has no AWS
    // rule), and the shipped operator gives none (the last assertion).
    let operator_rules = keda_api::identity::IdentityPolicy {
        allow_namespace_aws_operator_identity: false,
        ..operator.clone()
    };
    assert_eq!(
        operator_rules, webhook,
        "config/operator/deployment.yaml and config/webhooks/deployment.yaml must give the same \
         --allow-namespace-vault-operator-identity and --bound-token-service-accounts \
         (docs/webhooks.md#identity-rules)"
    );
    assert_eq!(
        operator,
        keda_api::identity::IdentityPolicy::default(),
        "the install opts nothing in"
    );
}

/// `config/shards/<file>`: the overlay's JSON patch of one base Deployment.
fn shards_patch(file: &str) -> json_patch::Patch {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../config/shards")
        .join(file);
    let text = std::fs::read_to_string(&path).expect("config/shards patch");
    serde_yaml::from_str(&text).expect("a JSON patch")
}

/// The first Deployment of `config/<file>` with `patch` applied, as kustomize would.
fn patched_deployment(file: &str, patch: &json_patch::Patch) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../config")
        .join(file);
    let text = std::fs::read_to_string(&path).expect("deployment");
    let mut deployment = text
        .split("\n---")
        .map(|doc| serde_yaml::from_str::<Value>(doc).expect("YAML"))
        .find(|doc| doc["kind"] == "Deployment")
        .expect("a Deployment");
    json_patch::patch(&mut deployment, patch).expect("the overlay's patch applies to the base");
    deployment
}

/// Issue 25: `kubectl apply -k config/shards/` runs N operator replicas with `--shards=auto`
/// (each naming its Lease after its pod and publishing its pod IP for the metric service) and
/// metrics-apiservers with `--operator-shards`, which may list the shard Leases.
#[test]
fn the_shards_overlay_runs_sharded_replicas_the_binaries_accept() {
    let kustomization: Value = serde_yaml::from_str(
        &std::fs::read_to_string(
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../config/shards/kustomization.yaml"),
        )
        .expect("kustomization"),
    )
    .expect("YAML");
    let patches: Vec<&str> = kustomization["patches"]
        .as_array()
        .expect("patches")
        .iter()
        .map(|p| p["path"].as_str().expect("path"))
        .collect();
    assert_eq!(patches, ["operator.yaml", "metrics-apiserver.yaml"]);

    let operator = patched_deployment("operator/deployment.yaml", &shards_patch("operator.yaml"));
    assert!(operator["spec"]["replicas"].as_u64() > Some(1));
    let container = operator["spec"]["template"]["spec"]["containers"][0].clone();
    assert_eq!(container["name"], "keda-operator");
    let settings = operator_settings(&container);
    assert!(
        settings.leader_election.is_none(),
        "shards replace the election"
    );
    let shards = settings.shards.expect("--shards=auto is on");
    assert_eq!(shards.lease.namespace, "keda");
    assert_eq!(shards.lease.identity, "keda-operator-5d8f7-abcde");
    assert_eq!(
        shards.lease.name,
        keda_api::shards::lease_name("keda-operator-5d8f7-abcde")
    );
    assert_eq!(
        shards.address.as_deref(),
        Some("10.1.2.3:9666"),
        "the metric service is reached at the pod IP"
    );

    let apiserver = patched_deployment(
        "metrics-apiserver/deployment.yaml",
        &shards_patch("metrics-apiserver.yaml"),
    );
    assert!(apiserver["spec"]["replicas"].as_u64() > Some(1));
    let container = &apiserver["spec"]["template"]["spec"]["containers"][0];
    let mut argv = vec!["keda-metrics-apiserver".to_string()];
    argv.extend(
        container["args"]
            .as_array()
            .expect("args")
            .iter()
            .map(|a| a.as_str().expect("string arg").to_string()),
    );
    let args = <keda_metrics_apiserver::config::Args as clap::Parser>::try_parse_from(&argv)
        .expect("the metrics-apiserver accepts the overlay's args");
    assert!(args.operator_shards);

    // Its service account may list the Leases in the operator's namespace.
    let rbac = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../config/shards/rbac.yaml"),
    )
    .expect("rbac.yaml");
    let docs: Vec<Value> = rbac
        .split("\n---")
        .map(|doc| serde_yaml::from_str(doc).expect("YAML"))
        .collect();
    let role = docs.iter().find(|d| d["kind"] == "Role").expect("a Role");
    assert_eq!(role["metadata"]["namespace"], "keda");
    assert!(role["rules"].as_array().expect("rules").iter().any(|r| {
        r["resources"]
            .as_array()
            .is_some_and(|v| v.iter().any(|x| x == "leases"))
            && r["verbs"]
                .as_array()
                .is_some_and(|v| v.iter().any(|x| x == "list"))
    }));
    let binding = docs
        .iter()
        .find(|d| d["kind"] == "RoleBinding")
        .expect("a RoleBinding");
    assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
    assert_eq!(
        binding["subjects"][0]["name"],
        apiserver["spec"]["template"]["spec"]["serviceAccountName"]
    );
}
