//! Group/version/kind/resource of a scale target (`status.scaleTargetGVKR`) and KEDA's parsing of
//! `scaleTargetRef.apiVersion` / `.kind` (`ParseGVKR`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Group used when `scaleTargetRef.apiVersion` is empty.
pub const DEFAULT_GROUP: &str = "apps";
/// Version used when `scaleTargetRef.apiVersion` is empty.
pub const DEFAULT_VERSION: &str = "v1";
/// Kind used when `scaleTargetRef.kind` is empty.
pub const DEFAULT_KIND: &str = "Deployment";

/// `status.scaleTargetGVKR`: the resolved scale target type.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq, Hash)]
pub struct GroupVersionKindResource {
    /// API group, empty for the core group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind, e.g. `Deployment`.
    pub kind: String,
    /// Plural resource, e.g. `deployments`.
    pub resource: String,
}

impl GroupVersionKindResource {
    /// `group/version`, or just `version` for the core group (the `apiVersion` spelling).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `apiVersion.Kind`, the format of `status.scaleTargetKind` (e.g. `apps/v1.Deployment`).
    pub fn gvk_string(&self) -> String {
        format!("{}.{}", self.api_version(), self.kind)
    }

    /// `resource.group` (e.g. `deployments.apps`), the key the scale client uses.
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }
}

/// A scale target type before its plural resource is known.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct GroupVersionKind {
    /// API group, empty for the core group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
}

impl GroupVersionKind {
    /// The plural resource KEDA knows without asking the API server: `deployments` for
    /// `Deployment`, `statefulsets` for `StatefulSet` (KEDA matches on the kind alone). Any other
    /// kind needs discovery (a REST mapping), which is the caller's job.
    pub fn well_known_resource(&self) -> Option<&'static str> {
        match self.kind.as_str() {
            "Deployment" => Some("deployments"),
            "StatefulSet" => Some("statefulsets"),
            _ => None,
        }
    }

    /// Completes this with a resource name found by discovery.
    pub fn with_resource(self, resource: impl Into<String>) -> GroupVersionKindResource {
        GroupVersionKindResource {
            group: self.group,
            version: self.version,
            kind: self.kind,
            resource: resource.into(),
        }
    }
}

/// Why a scale target's type could not be resolved.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GvkrError {
    /// `apiVersion` has more than one `/`.
    #[error("spec.scaleTargetRef.apiVersion: unexpected GroupVersion string {0:?}")]
    InvalidApiVersion(String),
    /// The kind is neither Deployment nor StatefulSet: its resource needs discovery.
    #[error(
        "spec.scaleTargetRef: the resource of kind {kind:?} in {api_version:?} must be found by discovery"
    )]
    NeedsDiscovery {
        /// The target's apiVersion (after defaulting).
        api_version: String,
        /// The target's kind.
        kind: String,
    },
}

/// Parses `apiVersion` and `kind` as KEDA does: empty apiVersion means `apps/v1`, empty kind
/// means `Deployment`; `v1` alone is the core group.
///
/// # Errors
/// [`GvkrError::InvalidApiVersion`] when apiVersion has more than one `/`.
pub fn parse_gvk(api_version: &str, kind: &str) -> Result<GroupVersionKind, GvkrError> {
    let (group, version) = if api_version.is_empty() {
        (DEFAULT_GROUP.to_string(), DEFAULT_VERSION.to_string())
    } else {
        match api_version.split_once('/') {
            None => (String::new(), api_version.to_string()),
            Some((g, v)) if !v.contains('/') => (g.to_string(), v.to_string()),
            Some(_) => return Err(GvkrError::InvalidApiVersion(api_version.to_string())),
        }
    };
    let kind = if kind.is_empty() { DEFAULT_KIND } else { kind };
    Ok(GroupVersionKind {
        group,
        version,
        kind: kind.to_string(),
    })
}

/// KEDA's `ParseGVKR` without a REST mapper: resolves Deployment and StatefulSet, and reports
/// [`GvkrError::NeedsDiscovery`] for any other kind.
///
/// # Errors
/// See [`parse_gvk`] and [`GvkrError::NeedsDiscovery`].
pub fn parse_gvkr(api_version: &str, kind: &str) -> Result<GroupVersionKindResource, GvkrError> {
    let gvk = parse_gvk(api_version, kind)?;
    match gvk.well_known_resource() {
        Some(resource) => Ok(gvk.with_resource(resource)),
        None => Err(GvkrError::NeedsDiscovery {
            api_version: if gvk.group.is_empty() {
                gvk.version
            } else {
                format!("{}/{}", gvk.group, gvk.version)
            },
            kind: gvk.kind,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gvkr_parsing_follows_keda_defaults() {
        let cases = [
            // empty everything: apps/v1 Deployment
            ("", "", Ok(("apps", "v1", "Deployment", "deployments"))),
            // empty kind defaults to Deployment even with an explicit apiVersion
            (
                "apps/v1",
                "",
                Ok(("apps", "v1", "Deployment", "deployments")),
            ),
            // StatefulSet is known without discovery
            (
                "apps/v1",
                "StatefulSet",
                Ok(("apps", "v1", "StatefulSet", "statefulsets")),
            ),
            // KEDA matches on kind only, whatever the group
            (
                "example.com/v2",
                "Deployment",
                Ok(("example.com", "v2", "Deployment", "deployments")),
            ),
        ];
        for (api_version, kind, want) in cases {
            let got = parse_gvkr(api_version, kind);
            let want = want.map(|(g, v, k, r)| GroupVersionKindResource {
                group: g.into(),
                version: v.into(),
                kind: k.into(),
                resource: r.into(),
            });
            assert_eq!(got, want, "{api_version:?} {kind:?}");
        }
    }

    #[test]
    fn other_kinds_need_discovery_and_core_group_has_no_group() {
        assert_eq!(
            parse_gvkr("argoproj.io/v1alpha1", "Rollout"),
            Err(GvkrError::NeedsDiscovery {
                api_version: "argoproj.io/v1alpha1".into(),
                kind: "Rollout".into()
            })
        );
        let gvk = parse_gvk("v1", "ReplicationController").unwrap();
        assert_eq!(gvk.group, "");
        assert_eq!(gvk.version, "v1");
        let gvkr = gvk.with_resource("replicationcontrollers");
        assert_eq!(gvkr.gvk_string(), "v1.ReplicationController");
        assert_eq!(gvkr.group_resource(), "replicationcontrollers");
        assert_eq!(
            parse_gvk("a/b/c", "X"),
            Err(GvkrError::InvalidApiVersion("a/b/c".into()))
        );
        assert_eq!(
            parse_gvkr("", "").unwrap().gvk_string(),
            "apps/v1.Deployment"
        );
    }
}
