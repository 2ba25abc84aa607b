//! Applying YAML files as `kubectl apply -f` would: every document of every file, any kind the
//! API server serves, created or (when it exists) replaced.

use std::path::{Path, PathBuf};

use kube::api::{Api, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;
use kube::{Client, ResourceExt};
use serde::Deserialize;

/// Why a file could not be applied; each names the file and the document.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: document {index} is not a Kubernetes object: {source}")]
    Parse {
        path: PathBuf,
        index: usize,
        #[source]
        source: serde_yaml::Error,
    },
    #[error("{path}: document {index} has no apiVersion or kind")]
    NoKind { path: PathBuf, index: usize },
    #[error(
        "{path}: document {index}: the API server does not serve {api_version} {kind}: {source}"
    )]
    UnknownKind {
        path: PathBuf,
        index: usize,
        api_version: String,
        kind: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("{path}: document {index}: cannot apply {kind} {name}: {source}")]
    Write {
        path: PathBuf,
        index: usize,
        kind: String,
        name: String,
        #[source]
        source: Box<kube::Error>,
    },
}

/// One applied object: `Deployment default/worker`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
    /// Whether it existed and was replaced.
    pub replaced: bool,
}

impl std::fmt::Display for Applied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let verb = if self.replaced {
            "configured"
        } else {
            "created"
        };
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{} {verb}", self.kind, self.name),
            None => write!(f, "{} {} {verb}", self.kind, self.name),
        }
    }
}

/// The Kubernetes objects of a multi-document YAML text (empty documents skipped).
///
/// # Errors
/// A document that is not an object with `apiVersion` and `kind`.
pub fn documents(path: &Path, text: &str) -> Result<Vec<DynamicObject>, ApplyError> {
    let mut objects = Vec::new();
    for (index, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let value =
            serde_yaml::Value::deserialize(document).map_err(|source| ApplyError::Parse {
                path: path.to_path_buf(),
                index,
                source,
            })?;
        if value.is_null() {
            continue;
        }
        let object: DynamicObject =
            serde_yaml::from_value(value).map_err(|source| ApplyError::Parse {
                path: path.to_path_buf(),
                index,
                source,
            })?;
        if object.types.is_none() {
            return Err(ApplyError::NoKind {
                path: path.to_path_buf(),
                index,
            });
        }
        objects.push(object);
    }
    Ok(objects)
}

/// Applies every document of `path`; namespaced objects without a namespace go to `default`.
///
/// # Errors
/// See [`ApplyError`]; documents before the failing one stay applied.
pub async fn apply_file(client: &Client, path: &Path) -> Result<Vec<Applied>, ApplyError> {
    let text = std::fs::read_to_string(path).map_err(|source| ApplyError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let mut applied = Vec::new();
    for (index, mut object) in documents(path, &text)?.into_iter().enumerate() {
        let types = object.types.clone().unwrap_or_default();
        let (group, version) = match types.api_version.split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), types.api_version.clone()),
        };
        let gvk = GroupVersionKind::gvk(&group, &version, &types.kind);
        let (resource, caps) =
            kube::discovery::pinned_kind(client, &gvk)
                .await
                .map_err(|source| ApplyError::UnknownKind {
                    path: path.to_path_buf(),
                    index,
                    api_version: types.api_version.clone(),
                    kind: types.kind.clone(),
                    source: Box::new(source),
                })?;
        let api: Api<DynamicObject> = if caps.scope == Scope::Namespaced {
            let namespace = object.namespace().unwrap_or_else(|| "default".to_string());
            object.metadata.namespace = Some(namespace.clone());
            Api::namespaced_with(client.clone(), &namespace, &resource)
        } else {
            Api::all_with(client.clone(), &resource)
        };
        let name = object.name_any();
        let write_error = |source| ApplyError::Write {
            path: path.to_path_buf(),
            index,
            kind: types.kind.clone(),
            name: name.clone(),
            source: Box::new(source),
        };
        let replaced = match api.create(&PostParams::default(), &object).await {
            Ok(_) => false,
            Err(kube::Error::Api(status)) if status.code == 409 => {
                let existing = api.get(&name).await.map_err(write_error)?;
                object.metadata.resource_version = existing.metadata.resource_version;
                api.replace(&name, &PostParams::default(), &object)
                    .await
                    .map_err(write_error)?;
                true
            }
            Err(source) => return Err(write_error(source)),
        };
        applied.push(Applied {
            kind: types.kind.clone(),
            namespace: object.metadata.namespace.clone(),
            name,
            replaced,
        });
    }
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_document_of_a_multi_document_file_is_an_object() {
        let text = "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n---\n\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: w\n";
        let objects = documents(Path::new("x.yaml"), text).expect("parses");
        let kinds: Vec<_> = objects
            .iter()
            .map(|o| o.types.as_ref().map(|t| t.kind.clone()))
            .collect();
        assert_eq!(
            kinds,
            vec![
                Some("Namespace".to_string()),
                Some("Deployment".to_string())
            ]
        );
    }

    #[test]
    fn a_document_without_kind_names_the_file_and_document() {
        let text =
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n---\nmetadata:\n  name: b\n";
        let error = documents(Path::new("x.yaml"), text).expect_err("no kind");
        let message = error.to_string();
        assert!(message.starts_with("x.yaml: document 1"), "{message}");
    }
}
