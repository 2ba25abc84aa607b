//! The real `keda-operator` binary against memkube over loopback: a cluster with a kubeconfig
//! for the process, the process with its JSON log lines and the addresses they announce, and
//! plain HTTP probes; and the `keda-metrics-apiserver` binary beside it.
//!
//! Only external crates are used here, so a test binary without the rest of `common` includes
//! this file by path (`#[path = "common/binary.rs"] mod binary;`).

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use memkube::{Loopback, MemKube};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};
use tokio::time::timeout;

/// The binary under test.
pub const BINARY: &str = env!("CARGO_BIN_EXE_keda-operator");

/// A fresh empty directory for one test, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(name: &str) -> Self {
        let path =
            std::env::temp_dir().join(format!("keda-rs-binary-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("temp dir");
        Self(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A memkube served on loopback, with a directory (the process's `HOME`) holding its
/// kubeconfig.
pub struct Cluster {
    pub server: MemKube,
    _loopback: Loopback,
    pub dir: TempDir,
    pub kubeconfig: PathBuf,
}

impl Cluster {
    /// Serves `server` (set up by the caller) on loopback for the test `name`.
    pub async fn serve(server: MemKube, name: &str) -> Cluster {
        let loopback = server.serve_loopback().await.expect("loopback");
        let dir = TempDir::new(name);
        let kubeconfig = dir.path().join("kubeconfig");
        loopback.write_kubeconfig(&kubeconfig).expect("kubeconfig");
        Cluster {
            server,
            _loopback: loopback,
            dir,
            kubeconfig,
        }
    }
}

/// The `keda-metrics-apiserver` binary: `KEDA_RS_METRICS_APISERVER_BIN`, else the one cargo
/// built beside this test binary (`target/<profile>/`). Cargo's `CARGO_BIN_EXE_*` names only
/// the binaries of the test's own package, so this one is found by place: `cargo test
/// --workspace` builds it (the metrics-apiserver's own tests run it); with `cargo test -p
/// keda-operator`, run `cargo build -p keda-metrics-apiserver` first, or a stale one is used.
pub fn metrics_apiserver_binary() -> PathBuf {
    const NAME: &str = "keda-metrics-apiserver";
    let path = match std::env::var_os("KEDA_RS_METRICS_APISERVER_BIN").filter(|p| !p.is_empty()) {
        Some(path) => PathBuf::from(path),
        // target/<profile>/deps/<test> -> target/<profile>/keda-metrics-apiserver
        None => std::env::current_exe()
            .expect("the test binary's path")
            .parent()
            .and_then(Path::parent)
            .map(|dir| dir.join(NAME))
            .expect("the test binary is in target/<profile>/deps"),
    };
    assert!(
        path.is_file(),
        "no {NAME} binary at {}: run `cargo build -p {NAME}` first (`cargo test --workspace` builds it), or name one with KEDA_RS_METRICS_APISERVER_BIN",
        path.display()
    );
    path
}

/// The metrics-apiserver binary ([`metrics_apiserver_binary`]) for `cluster` with `args`: an
/// environment of only `HOME` and `RUST_LOG` (`info`).
pub fn metrics_apiserver_command(cluster: &Cluster, args: &[String]) -> Command {
    let mut command = Command::new(metrics_apiserver_binary());
    command
        .args(args)
        .env_clear()
        .env("HOME", cluster.dir.path())
        .env("RUST_LOG", "info")
        .kill_on_drop(true);
    command
}

/// The binary for `cluster`: `/metrics` and the probes on free loopback ports, JSON logs at
/// `info`, then `args`; an environment of only `HOME`, `KUBECONFIG`, `RUST_LOG` and `env`.
pub fn command(cluster: &Cluster, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(BINARY);
    command
        .args([
            "--metrics-bind-address",
            "127.0.0.1:0",
            "--health-probe-bind-address",
            "127.0.0.1:0",
            "--log-format",
            "json",
        ])
        .args(args)
        .env_clear()
        .env("HOME", cluster.dir.path())
        .env("KUBECONFIG", &cluster.kubeconfig)
        .env("RUST_LOG", "info")
        .envs(env.iter().copied())
        .kill_on_drop(true);
    command
}

/// One running operator process and its JSON log lines so far (echoed to the test's output
/// with `[label]` in front).
pub struct Process {
    pub child: Child,
    logs: Arc<Mutex<Vec<serde_json::Value>>>,
}

impl Process {
    /// Starts [`command`] as `label`.
    pub fn start(cluster: &Cluster, label: &str, args: &[&str], env: &[(&str, &str)]) -> Process {
        Process::spawn(command(cluster, args, env), label)
    }

    /// Starts `command` (of any binary logging JSON lines) as `label`.
    pub fn spawn(mut command: Command, label: &str) -> Process {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the binary starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let logs = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&logs);
        let label = label.to_string();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                println!("[{label}] {line}");
                if let Ok(entry) = serde_json::from_str(&line) {
                    sink.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(entry);
                }
            }
        });
        Process { child, logs }
    }

    /// The log entries whose message starts with `prefix`.
    pub fn logged(&self, prefix: &str) -> Vec<serde_json::Value> {
        self.logs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|e| e["message"].as_str().is_some_and(|m| m.starts_with(prefix)))
            .cloned()
            .collect()
    }

    /// The `addr` field of the first entry with `message` (and `endpoints`, when given),
    /// within 20 s.
    pub async fn address(&self, message: &str, endpoints: Option<&str>) -> SocketAddr {
        let found = timeout(Duration::from_secs(20), async {
            loop {
                let hit = self.logged(message).into_iter().find_map(|e| {
                    let wanted = endpoints.is_none_or(|want| e["endpoints"] == want);
                    wanted
                        .then(|| e["addr"].as_str().and_then(|a| a.parse().ok()))
                        .flatten()
                });
                if let Some(addr) = hit {
                    return addr;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        found.unwrap_or_else(|_| panic!("the operator logs {message:?} with an address"))
    }

    /// Whether the process still runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    async fn signal(&mut self, signal: &str) {
        let pid = self.child.id().expect("running").to_string();
        let sent = Command::new("kill")
            .args([signal, &pid])
            .status()
            .await
            .expect("kill runs");
        assert!(sent.success());
    }

    /// SIGTERM, and the exit status.
    pub async fn terminate(&mut self) -> std::process::ExitStatus {
        self.signal("-TERM").await;
        timeout(Duration::from_secs(15), self.child.wait())
            .await
            .expect("the operator exits after SIGTERM")
            .expect("exit status")
    }

    /// SIGKILL, as a crash or an OOM kill: no shutdown, the Lease is not released.
    pub async fn kill(&mut self) {
        self.signal("-KILL").await;
        let _ = timeout(Duration::from_secs(15), self.child.wait())
            .await
            .expect("the operator dies");
    }
}

/// Creates Deployment `namespace/name` at `replicas` (one pause container, selector
/// `app: <name>`).
pub async fn create_deployment(client: &kube::Client, namespace: &str, name: &str, replicas: i32) {
    let deployment: k8s_openapi::api::apps::v1::Deployment =
        serde_json::from_value(serde_json::json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": { "name": name, "namespace": namespace },
            "spec": {
                "replicas": replicas,
                "selector": { "matchLabels": { "app": name } },
                "template": {
                    "metadata": { "labels": { "app": name } },
                    "spec": { "containers": [{ "name": "app", "image": "registry.k8s.io/pause:3.9" }] }
                }
            }
        }))
        .expect("a Deployment");
    kube::Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), namespace)
        .create(&kube::api::PostParams::default(), &deployment)
        .await
        .expect("create Deployment");
}

/// An operator [`Process`] and the listeners its logs announced.
pub struct Operator {
    process: Process,
    /// `/healthz` and `/readyz`.
    pub probes: SocketAddr,
    /// `/metrics`.
    pub metrics: SocketAddr,
}

impl Operator {
    /// Starts [`Process::start`] as `pod` and waits for its probes and metrics listeners.
    pub async fn start(
        cluster: &Cluster,
        pod: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Operator {
        let process = Process::start(cluster, pod, args, env);
        let probes = process
            .address("admin server listening", Some("probes"))
            .await;
        let metrics = process
            .address("admin server listening", Some("metrics"))
            .await;
        Operator {
            process,
            probes,
            metrics,
        }
    }
}

impl std::ops::Deref for Operator {
    type Target = Process;
    fn deref(&self) -> &Process {
        &self.process
    }
}

impl std::ops::DerefMut for Operator {
    fn deref_mut(&mut self) -> &mut Process {
        &mut self.process
    }
}

/// A plain HTTP/1.1 GET: status code and body; `(0, "")` when nothing answers.
pub async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let Ok(mut stream) = TcpStream::connect(addr).await else {
        return (0, String::new());
    };
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return (0, String::new());
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response).await;
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default();
    (status, body)
}

/// Waits until `check` holds, at most `within`.
pub async fn eventually<F, Fut>(what: &str, within: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let done = timeout(within, async {
        while !check().await {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(
        done.is_ok(),
        "timed out after {within:?} waiting until {what}"
    );
}
