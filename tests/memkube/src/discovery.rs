//! Discovery documents: `/version`, `/api`, `/api/v1`, `/apis`, `/apis/{group}` and
//! `/apis/{group}/{version}`, built from the registry.

use serde_json::{Value, json};

use crate::registry::Registry;

pub(crate) fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0-memkube",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

pub(crate) fn core_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "apiVersion": "v1",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{ "clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1" }],
    })
}

fn group_entry(name: &str, versions: &[String]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| json!({ "groupVersion": format!("{name}/{v}"), "version": v }))
        .collect();
    let preferred = versions.first().cloned().unwrap_or_else(|| json!({}));
    json!({ "name": name, "versions": versions, "preferredVersion": preferred })
}

pub(crate) fn groups(registry: &Registry) -> Value {
    let groups: Vec<Value> = registry
        .groups()
        .iter()
        .filter(|(name, _)| !name.is_empty())
        .map(|(name, versions)| group_entry(name, versions))
        .collect();
    json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups })
}

pub(crate) fn group(registry: &Registry, name: &str) -> Option<Value> {
    let groups = registry.groups();
    let versions = groups.get(name).filter(|_| !name.is_empty())?;
    let mut entry = group_entry(name, versions);
    if let Some(map) = entry.as_object_mut() {
        map.insert("kind".to_string(), json!("APIGroup"));
        map.insert("apiVersion".to_string(), json!("v1"));
    }
    Some(entry)
}

/// The `APIResourceList` for one group/version, with `status` and `scale` subresource entries.
pub(crate) fn resources(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let mut entries = Vec::new();
    for def in registry
        .all()
        .filter(|d| d.group == group && d.version == version)
    {
        entries.push(json!({
            "name": def.plural,
            "singularName": def.singular,
            "namespaced": def.namespaced,
            "kind": def.kind,
            "verbs": def.verbs(),
            "shortNames": def.short_names,
            "categories": def.categories,
        }));
        let sub_verbs = ["get", "patch", "update"];
        if def.status {
            entries.push(json!({
                "name": format!("{}/status", def.plural),
                "singularName": "",
                "namespaced": def.namespaced,
                "kind": def.kind,
                "verbs": sub_verbs,
            }));
        }
        if def.group.is_empty() && def.plural == "serviceaccounts" {
            entries.push(json!({
                "name": "serviceaccounts/token",
                "singularName": "",
                "namespaced": true,
                "group": "authentication.k8s.io",
                "version": "v1",
                "kind": "TokenRequest",
                "verbs": ["create"],
            }));
        }
        if def.scale.is_some() {
            entries.push(json!({
                "name": format!("{}/scale", def.plural),
                "singularName": "",
                "namespaced": def.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": sub_verbs,
            }));
        }
    }
    if entries.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({ "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": entries }),
    )
}
