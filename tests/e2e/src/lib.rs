//! Harness for the end-to-end suite: the same scenarios the integration tests run against the
//! in-memory API server, run against a real cluster.
//!
//! The suite runs only when asked for: every test is `#[ignore]`d (so `cargo test` reports it as
//! ignored, never as passed) and is run with
//!
//! ```text
//! KEDA_RS_E2E_KUBECONFIG=$HOME/.kube/kind-config cargo test -p keda-e2e -- --ignored --test-threads=1
//! ```
//!
//! It changes the cluster: it installs keda-rs's CRDs and creates (and deletes) namespaces named
//! `keda-rs-e2e-*`. Use a throwaway cluster. Where CRDs of group `keda.sh` already exist and were
//! not installed by this suite (for example a KEDA installation), it stops with an error instead
//! of replacing them, unless `KEDA_RS_E2E_REPLACE_CRDS=true`.

use std::path::{Path, PathBuf};

use serde::Deserialize as _;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// The environment variable naming the kubeconfig of the cluster to test against.
pub const KUBECONFIG_ENV: &str = "KEDA_RS_E2E_KUBECONFIG";
/// Set to `true` to let the suite replace `keda.sh` CRDs it did not install.
pub const REPLACE_CRDS_ENV: &str = "KEDA_RS_E2E_REPLACE_CRDS";
/// The field manager the suite applies with; it marks what the suite installed.
pub const FIELD_MANAGER: &str = "keda-rs-e2e";
/// The environment variable naming the `keda-operator` binary the scenarios that run the
/// operator as a local process start; default: `keda-operator` beside this test's
/// `target/<profile>/` directory (build it with `cargo build -p keda-operator`).
pub const OPERATOR_BIN_ENV: &str = "KEDA_RS_E2E_OPERATOR_BIN";

/// Why the suite cannot start.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// The variable naming the cluster is not set.
    #[error(
        "{KUBECONFIG_ENV} is not set: the end-to-end suite needs a real cluster \
         (set it to a kubeconfig path, see docs/testing.md)"
    )]
    NoCluster,
    /// The kubeconfig could not be read or used.
    #[error("cannot use the kubeconfig {path} named by {KUBECONFIG_ENV}: {source}")]
    Kubeconfig {
        /// The kubeconfig path.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// The kubeconfig path named by [`KUBECONFIG_ENV`], for processes the suite starts.
///
/// # Errors
/// [`HarnessError::NoCluster`] when the variable is unset.
pub fn kubeconfig_path() -> Result<PathBuf, HarnessError> {
    std::env::var_os(KUBECONFIG_ENV)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .ok_or(HarnessError::NoCluster)
}

/// The `keda-operator` binary: [`OPERATOR_BIN_ENV`], else `keda-operator` in the target
/// directory of the running test (`target/debug/deps/<test>` -> `target/debug/keda-operator`).
///
/// # Errors
/// A message saying how to build it when there is none.
pub fn operator_binary() -> Result<PathBuf, String> {
    let path = match std::env::var_os(OPERATOR_BIN_ENV).filter(|p| !p.is_empty()) {
        Some(path) => PathBuf::from(path),
        None => std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent()?.parent().map(|dir| dir.join("keda-operator")))
            .unwrap_or_else(|| PathBuf::from("keda-operator")),
    };
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "no keda-operator binary at {}: run `cargo build -p keda-operator` first, or name one with {OPERATOR_BIN_ENV}",
            path.display()
        ))
    }
}

/// A client for the cluster named by [`KUBECONFIG_ENV`].
///
/// # Errors
/// [`HarnessError::NoCluster`] when the variable is unset, [`HarnessError::Kubeconfig`] when the
/// file cannot be read or names no usable context.
pub async fn cluster_client() -> Result<Client, HarnessError> {
    let path = kubeconfig_path()?;
    let wrap = |source: Box<dyn std::error::Error + Send + Sync>| HarnessError::Kubeconfig {
        path: path.clone(),
        source,
    };
    let kubeconfig = Kubeconfig::read_from(&path).map_err(|e| wrap(Box::new(e)))?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| wrap(Box::new(e)))?;
    Client::try_from(config).map_err(|e| wrap(Box::new(e)))
}

/// The repository root (this crate lives in `tests/e2e`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Every YAML document in the `.yaml` files of `dir` (sorted by file name), with its file name.
///
/// # Errors
/// An error naming the file when a file cannot be read or parsed.
pub fn yaml_documents(dir: &Path) -> Result<Vec<(String, serde_json::Value)>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    let mut docs = Vec::new();
    for file in files {
        let name = file.display().to_string();
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("cannot read {name}: {e}"))?;
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let value = serde_json::Value::deserialize(doc).map_err(|e| format!("{name}: {e}"))?;
            if !value.is_null() {
                docs.push((name.clone(), value));
            }
        }
    }
    Ok(docs)
}
