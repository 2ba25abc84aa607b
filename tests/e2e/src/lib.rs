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
    binary(OPERATOR_BIN_ENV, "keda-operator")
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

/// The environment variable naming the `keda-activator` binary the scenarios that run the
/// activator as a local process start; default: `keda-activator` beside this test's
/// `target/<profile>/` directory (build it with `cargo build -p keda-activator`).
pub const ACTIVATOR_BIN_ENV: &str = "KEDA_RS_E2E_ACTIVATOR_BIN";

/// The `keda-activator` binary: [`ACTIVATOR_BIN_ENV`], else `keda-activator` in the target
/// directory of the running test.
///
/// # Errors
/// A message saying how to build it when there is none.
pub fn activator_binary() -> Result<PathBuf, String> {
    binary(ACTIVATOR_BIN_ENV, "keda-activator")
}

/// The environment variable naming the `keda-metrics-apiserver` binary the suite starts.
pub const METRICS_APISERVER_BIN_ENV: &str = "KEDA_RS_E2E_METRICS_APISERVER_BIN";
/// The environment variable naming the `keda-webhook` binary the suite starts.
pub const WEBHOOK_BIN_ENV: &str = "KEDA_RS_E2E_WEBHOOK_BIN";

/// The `keda-metrics-apiserver` binary: [`METRICS_APISERVER_BIN_ENV`], else the one in the
/// target directory of the running test.
///
/// # Errors
/// A message saying how to build it when there is none.
pub fn metrics_apiserver_binary() -> Result<PathBuf, String> {
    binary(METRICS_APISERVER_BIN_ENV, "keda-metrics-apiserver")
}

/// The `keda-webhook` binary: [`WEBHOOK_BIN_ENV`], else the one in the target directory of the
/// running test.
///
/// # Errors
/// A message saying how to build it when there is none.
pub fn webhook_binary() -> Result<PathBuf, String> {
    binary(WEBHOOK_BIN_ENV, "keda-webhook")
}

fn binary(env: &str, name: &str) -> Result<PathBuf, String> {
    let path = match std::env::var_os(env).filter(|p| !p.is_empty()) {
        Some(path) => PathBuf::from(path),
        None => std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent()?.parent().map(|dir| dir.join(name)))
            .unwrap_or_else(|| PathBuf::from(name)),
    };
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "no {name} binary at {}: run `cargo build -p {name}` first, or name one with {env}",
            path.display()
        ))
    }
}

/// The resident set size of process `pid` in bytes (`VmRSS` of `/proc/<pid>/status`), or
/// `None` once the process is gone.
pub fn rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| kib * 1024)
}

/// Waits until `check` holds, polling every 200 ms; panics naming `what` after `within`.
pub async fn until<F, Fut>(what: &str, within: std::time::Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + within;
    while !check().await {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out after {within:?} waiting until {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// The real `keda-operator` binary as a local process against the cluster named by
/// [`KUBECONFIG_ENV`], with its defaults, watching only one namespace (`WATCH_NAMESPACE`), its
/// metrics, health and metrics-service listeners off, explain on a loopback port, JSON logs
/// (echoed, and kept for [`OperatorProcess::logged`]). Killed on drop.
pub struct OperatorProcess {
    child: tokio::process::Child,
    logs: std::sync::Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
}

/// The `POD_NAME` the local operator runs as (its Lease holder identity).
pub const OPERATOR_POD_NAME: &str = "keda-rs-e2e-operator";

impl OperatorProcess {
    /// Starts the operator for `namespace` with `args` added to the listener settings above.
    ///
    /// # Panics
    /// When the binary or the kubeconfig is missing, or the process cannot start.
    pub fn start(namespace: &str, args: &[&str]) -> OperatorProcess {
        use tokio::io::AsyncBufReadExt as _;
        let binary = operator_binary().unwrap_or_else(|e| panic!("{e}"));
        let kubeconfig = kubeconfig_path().unwrap_or_else(|e| panic!("{e}"));
        let mut child = tokio::process::Command::new(binary)
            .args(args)
            .args([
                "--metrics-bind-address",
                "0",
                "--health-probe-bind-address",
                "0",
                "--metrics-service-bind-address",
                "0",
                "--explain-bind-address",
                "127.0.0.1:0",
                "--log-format",
                "json",
            ])
            .env_clear()
            .env("HOME", std::env::temp_dir())
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info")
            .env("POD_NAMESPACE", namespace)
            .env("POD_NAME", OPERATOR_POD_NAME)
            .env("WATCH_NAMESPACE", namespace)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("keda-operator starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let logs = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = logs.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                println!("[operator] {line}");
                if let Ok(entry) = serde_json::from_str(&line) {
                    sink.lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push(entry);
                }
            }
        });
        OperatorProcess { child, logs }
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The log entries whose message starts with `prefix`.
    pub fn logged(&self, prefix: &str) -> Vec<serde_json::Value> {
        self.logs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .filter(|e| e["message"].as_str().is_some_and(|m| m.starts_with(prefix)))
            .cloned()
            .collect()
    }

    /// The explain endpoint's address, once the process serves it (within 60 s).
    ///
    /// # Panics
    /// When it does not within 60 s.
    pub async fn explain_addr(&self) -> std::net::SocketAddr {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            if let Some(addr) = self
                .logged("explain endpoint listening")
                .iter()
                .find_map(|e| e["addr"].as_str().and_then(|a| a.parse().ok()))
            {
                return addr;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the operator did not lead and serve explain within 60 s"
            );
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }

    /// SIGTERM, then waits up to 20 s for the exit.
    pub async fn terminate(mut self) {
        if let Some(pid) = self.child.id() {
            let _ = tokio::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status()
                .await;
        }
        let _ = tokio::time::timeout(std::time::Duration::from_secs(20), self.child.wait()).await;
    }
}

/// Creates the namespace `name` for one scenario; the handle deletes it at the end.
///
/// # Panics
/// When the API server refuses it.
pub async fn scenario_namespace(
    client: &Client,
    name: &str,
) -> kube::Api<k8s_openapi::api::core::v1::Namespace> {
    let namespaces = kube::Api::all(client.clone());
    let ns: k8s_openapi::api::core::v1::Namespace = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": name }
    }))
    .expect("a namespace");
    namespaces
        .create(&kube::api::PostParams::default(), &ns)
        .await
        .expect("namespace created");
    namespaces
}

/// A connection to the local Redis at `127.0.0.1:6379` the scenarios' triggers read.
///
/// # Panics
/// When it does not answer.
pub async fn local_redis() -> redis::aio::MultiplexedConnection {
    redis::Client::open("redis://127.0.0.1:6379/")
        .expect("a Redis URL")
        .get_multiplexed_async_connection()
        .await
        .expect("the local Redis at 127.0.0.1:6379")
}
