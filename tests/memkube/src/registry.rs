//! The resources the server serves: built-ins and those registered by CustomResourceDefinitions.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::error::ApiError;

/// Storage identity of a resource: objects are shared by every served version of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct GroupResource {
    pub group: String,
    pub plural: String,
}

/// JSON paths of the `/scale` subresource, as a CRD declares them (`.spec.replicas`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScalePaths {
    pub spec_replicas: String,
    pub status_replicas: String,
    pub label_selector: Option<String>,
}

/// One `additionalPrinterColumns` entry of a CRD version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PrinterColumn {
    pub name: String,
    pub type_: String,
    pub format: String,
    pub description: Option<String>,
    pub priority: i64,
    pub json_path: String,
}

impl PrinterColumn {
    /// The column the API server shows for a CRD version without printer columns.
    fn age() -> Self {
        Self {
            name: "Age".to_string(),
            type_: "date".to_string(),
            format: String::new(),
            description: Some("Time since the object was created.".to_string()),
            priority: 0,
            json_path: ".metadata.creationTimestamp".to_string(),
        }
    }
}

/// What a resource accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResourceKind {
    /// A stored resource with the full verb set.
    Stored,
    /// A virtual, create-only review resource (SubjectAccessReview, TokenReview).
    AccessReview,
}

/// One served group/version/resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResourceDef {
    pub group: String,
    pub version: String,
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub status: bool,
    pub scale: Option<ScalePaths>,
    pub resource_kind: ResourceKind,
    /// Set for resources registered by a CRD: the CRD's name.
    pub crd: Option<String>,
    /// A CRD version's printer columns (after `Name`); `None` for built-ins, which have
    /// kube-apiserver's own.
    pub printer_columns: Option<Vec<PrinterColumn>>,
}

impl ResourceDef {
    pub(crate) fn group_resource(&self) -> GroupResource {
        GroupResource {
            group: self.group.clone(),
            plural: self.plural.clone(),
        }
    }

    pub(crate) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub(crate) fn verbs(&self) -> Vec<&'static str> {
        match self.resource_kind {
            ResourceKind::Stored => {
                vec![
                    "create",
                    "delete",
                    "deletecollection",
                    "get",
                    "list",
                    "patch",
                    "update",
                    "watch",
                ]
            }
            ResourceKind::AccessReview => vec!["create"],
        }
    }
}

const REPLICAS: fn() -> Option<ScalePaths> = || {
    Some(ScalePaths {
        spec_replicas: ".spec.replicas".to_string(),
        status_replicas: ".status.replicas".to_string(),
        // Built-in workloads report `spec.selector` rendered as a string.
        label_selector: None,
    })
};

#[allow(clippy::too_many_arguments)] // a table row; named fields would triple the table's length
fn builtin(
    group: &str,
    version: &str,
    plural: &str,
    kind: &str,
    namespaced: bool,
    short_names: &[&str],
    status: bool,
    scale: bool,
) -> ResourceDef {
    ResourceDef {
        group: group.to_string(),
        version: version.to_string(),
        plural: plural.to_string(),
        singular: kind.to_lowercase(),
        kind: kind.to_string(),
        namespaced,
        short_names: short_names.iter().map(|s| s.to_string()).collect(),
        categories: Vec::new(),
        status,
        scale: if scale { REPLICAS() } else { None },
        resource_kind: ResourceKind::Stored,
        crd: None,
        printer_columns: None,
    }
}

/// The built-in resources.
pub(crate) fn builtins() -> Vec<ResourceDef> {
    let mut defs = vec![
        builtin(
            "",
            "v1",
            "namespaces",
            "Namespace",
            false,
            &["ns"],
            true,
            false,
        ),
        builtin("", "v1", "pods", "Pod", true, &["po"], true, false),
        builtin("", "v1", "secrets", "Secret", true, &[], false, false),
        builtin(
            "",
            "v1",
            "configmaps",
            "ConfigMap",
            true,
            &["cm"],
            false,
            false,
        ),
        builtin("", "v1", "services", "Service", true, &["svc"], true, false),
        builtin(
            "",
            "v1",
            "endpoints",
            "Endpoints",
            true,
            &["ep"],
            false,
            false,
        ),
        builtin("", "v1", "events", "Event", true, &["ev"], false, false),
        builtin(
            "",
            "v1",
            "limitranges",
            "LimitRange",
            true,
            &["limits"],
            false,
            false,
        ),
        builtin(
            "",
            "v1",
            "serviceaccounts",
            "ServiceAccount",
            true,
            &["sa"],
            false,
            false,
        ),
        builtin(
            "apps",
            "v1",
            "deployments",
            "Deployment",
            true,
            &["deploy"],
            true,
            true,
        ),
        builtin(
            "apps",
            "v1",
            "statefulsets",
            "StatefulSet",
            true,
            &["sts"],
            true,
            true,
        ),
        builtin(
            "apps",
            "v1",
            "replicasets",
            "ReplicaSet",
            true,
            &["rs"],
            true,
            true,
        ),
        builtin("batch", "v1", "jobs", "Job", true, &[], true, false),
        builtin(
            "batch",
            "v1",
            "cronjobs",
            "CronJob",
            true,
            &["cj"],
            true,
            false,
        ),
        builtin(
            "autoscaling",
            "v2",
            "horizontalpodautoscalers",
            "HorizontalPodAutoscaler",
            true,
            &["hpa"],
            true,
            false,
        ),
        builtin(
            "discovery.k8s.io",
            "v1",
            "endpointslices",
            "EndpointSlice",
            true,
            &[],
            false,
            false,
        ),
        builtin(
            "coordination.k8s.io",
            "v1",
            "leases",
            "Lease",
            true,
            &[],
            false,
            false,
        ),
        builtin(
            "events.k8s.io",
            "v1",
            "events",
            "Event",
            true,
            &["ev"],
            false,
            false,
        ),
        builtin(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            false,
            &["crd", "crds"],
            true,
            false,
        ),
        builtin(
            "admissionregistration.k8s.io",
            "v1",
            "validatingwebhookconfigurations",
            "ValidatingWebhookConfiguration",
            false,
            &[],
            false,
            false,
        ),
        builtin(
            "apiregistration.k8s.io",
            "v1",
            "apiservices",
            "APIService",
            false,
            &[],
            true,
            false,
        ),
    ];
    let mut sar = builtin(
        "authorization.k8s.io",
        "v1",
        "subjectaccessreviews",
        "SubjectAccessReview",
        false,
        &[],
        false,
        false,
    );
    sar.resource_kind = ResourceKind::AccessReview;
    defs.push(sar);
    let mut token_review = builtin(
        "authentication.k8s.io",
        "v1",
        "tokenreviews",
        "TokenReview",
        false,
        &[],
        false,
        false,
    );
    token_review.resource_kind = ResourceKind::AccessReview;
    defs.push(token_review);
    defs
}

/// Served resources by (group, version, plural).
#[derive(Debug, Clone, Default)]
pub(crate) struct Registry {
    defs: BTreeMap<(String, String, String), Arc<ResourceDef>>,
}

impl Registry {
    pub(crate) fn with_builtins() -> Self {
        let mut registry = Self::default();
        for def in builtins() {
            registry.insert(def);
        }
        registry
    }

    pub(crate) fn insert(&mut self, def: ResourceDef) {
        self.defs.insert(
            (def.group.clone(), def.version.clone(), def.plural.clone()),
            Arc::new(def),
        );
    }

    pub(crate) fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.defs
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
            .cloned()
    }

    /// Any served version of a resource (for storage-level work such as garbage collection).
    pub(crate) fn any_version(&self, gr: &GroupResource) -> Option<Arc<ResourceDef>> {
        self.defs
            .values()
            .find(|d| d.group == gr.group && d.plural == gr.plural)
            .cloned()
    }

    pub(crate) fn remove_crd(&mut self, crd_name: &str) {
        self.defs
            .retain(|_, def| def.crd.as_deref() != Some(crd_name));
    }

    pub(crate) fn all(&self) -> impl Iterator<Item = &Arc<ResourceDef>> {
        self.defs.values()
    }

    /// Served versions per group, in the order discovery prefers them.
    pub(crate) fn groups(&self) -> BTreeMap<String, Vec<String>> {
        let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for def in self.defs.values() {
            let versions = groups.entry(def.group.clone()).or_default();
            if !versions.contains(&def.version) {
                versions.push(def.version.clone());
            }
        }
        for versions in groups.values_mut() {
            versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        }
        groups
    }
}

/// Kubernetes version priority: GA over beta over alpha, then higher numbers first.
fn version_priority(version: &str) -> (u8, u32, u32) {
    let Some(rest) = version.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let major = digits.parse().unwrap_or(0);
    let tail = &rest[digits.len()..];
    let (stage, minor_str) = if tail.is_empty() {
        (3, "")
    } else if let Some(n) = tail.strip_prefix("beta") {
        (2, n)
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (1, n)
    } else {
        (0, "")
    };
    (stage, major, minor_str.parse().unwrap_or(0))
}

fn str_at<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    value.pointer(pointer).and_then(Value::as_str)
}

fn strings_at(value: &Value, pointer: &str) -> Vec<String> {
    value
        .pointer(pointer)
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The resources a CustomResourceDefinition serves, one per served version.
///
/// # Errors
/// `Invalid` when required fields are missing or the name is not `<plural>.<group>`.
pub(crate) fn defs_from_crd(crd: &Value) -> Result<Vec<ResourceDef>, ApiError> {
    let name = str_at(crd, "/metadata/name").unwrap_or_default();
    let invalid = |msg: &str| {
        ApiError::invalid(
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            name,
            format!("CustomResourceDefinition.apiextensions.k8s.io \"{name}\" is invalid: {msg}"),
        )
    };
    let group = str_at(crd, "/spec/group").ok_or_else(|| invalid("spec.group: Required value"))?;
    let plural = str_at(crd, "/spec/names/plural")
        .ok_or_else(|| invalid("spec.names.plural: Required value"))?;
    let kind = str_at(crd, "/spec/names/kind")
        .ok_or_else(|| invalid("spec.names.kind: Required value"))?;
    if name != format!("{plural}.{group}") {
        return Err(invalid(
            "metadata.name: Invalid value: must be spec.names.plural+\".\"+spec.group",
        ));
    }
    let namespaced = match str_at(crd, "/spec/scope") {
        Some("Namespaced") => true,
        Some("Cluster") => false,
        _ => {
            return Err(invalid(
                "spec.scope: Unsupported value: must be Namespaced or Cluster",
            ));
        }
    };
    let singular =
        str_at(crd, "/spec/names/singular").map_or_else(|| kind.to_lowercase(), str::to_string);
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| invalid("spec.versions: Required value"))?;
    let mut defs = Vec::new();
    for version in versions {
        if version.get("served").and_then(Value::as_bool) == Some(false) {
            continue;
        }
        let version_name = str_at(version, "/name")
            .ok_or_else(|| invalid("spec.versions[].name: Required value"))?;
        let scale = version
            .pointer("/subresources/scale")
            .map(|scale| ScalePaths {
                spec_replicas: str_at(scale, "/specReplicasPath")
                    .unwrap_or(".spec.replicas")
                    .to_string(),
                status_replicas: str_at(scale, "/statusReplicasPath")
                    .unwrap_or(".status.replicas")
                    .to_string(),
                label_selector: str_at(scale, "/labelSelectorPath").map(str::to_string),
            });
        let printer_columns = printer_columns(version).map_err(|msg| invalid(&msg))?;
        defs.push(ResourceDef {
            group: group.to_string(),
            version: version_name.to_string(),
            plural: plural.to_string(),
            singular: singular.clone(),
            kind: kind.to_string(),
            namespaced,
            short_names: strings_at(crd, "/spec/names/shortNames"),
            categories: strings_at(crd, "/spec/names/categories"),
            status: version.pointer("/subresources/status").is_some(),
            scale,
            resource_kind: ResourceKind::Stored,
            crd: Some(name.to_string()),
            printer_columns: Some(printer_columns),
        });
    }
    Ok(defs)
}

/// A CRD version's `additionalPrinterColumns`, or the `Age` column when it has none.
///
/// # Errors
/// A column without a name, type or JSONPath, or whose JSONPath does not parse, as the API
/// server refuses the CRD.
fn printer_columns(version: &Value) -> Result<Vec<PrinterColumn>, String> {
    let Some(columns) = version
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
        .filter(|c| !c.is_empty())
    else {
        return Ok(vec![PrinterColumn::age()]);
    };
    columns
        .iter()
        .enumerate()
        .map(|(i, column)| {
            let field = |key: &str| {
                str_at(column, &format!("/{key}"))
                    .filter(|v| !v.is_empty())
                    .map(str::to_string)
                    .ok_or_else(|| {
                        format!("spec.versions[].additionalPrinterColumns[{i}].{key}: Required value")
                    })
            };
            let json_path = field("jsonPath")?;
            crate::table::JsonPath::parse(&json_path).map_err(|e| {
                format!(
                    "spec.versions[].additionalPrinterColumns[{i}].jsonPath: Invalid value: {json_path:?}: {}",
                    e.0
                )
            })?;
            Ok(PrinterColumn {
                name: field("name")?,
                type_: field("type")?,
                format: str_at(column, "/format").unwrap_or_default().to_string(),
                description: str_at(column, "/description").map(str::to_string),
                priority: column.get("priority").and_then(Value::as_i64).unwrap_or(0),
                json_path,
            })
        })
        .collect()
}

/// Converts a JSON path like `.spec.replicas` to a JSON pointer `/spec/replicas`.
pub(crate) fn json_path_to_pointer(path: &str) -> String {
    path.trim_start_matches('.')
        .split('.')
        .fold(String::new(), |mut acc, seg| {
            acc.push('/');
            acc.push_str(seg);
            acc
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_by_kubernetes_priority() {
        let mut versions = vec!["v1alpha1", "v1", "v2beta1", "v1beta2", "v2"];
        versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        assert_eq!(versions, vec!["v2", "v1", "v2beta1", "v1beta2", "v1alpha1"]);
    }

    #[test]
    fn json_paths_become_pointers() {
        assert_eq!(json_path_to_pointer(".spec.replicas"), "/spec/replicas");
    }
}
