//! Running the built `keda-rs dev` as a user would, and watching what it does through the
//! kubeconfig it writes.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::watcher;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{Mutex, MutexGuard, Notify};

/// How long any awaited step may take.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// Tests that use the Redis list `jobs` (the examples' list) run one at a time.
pub async fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::const_new(());
    LOCK.lock().await
}

/// The workspace root: the examples' paths are relative to it.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the package is in the workspace")
        .to_path_buf()
}

/// A connection to the test Redis, or `None` with a printed reason; with `CI=true` a missing
/// Redis fails the test (CI must not skip).
pub async fn redis_or_skip(test: &str) -> Option<redis::aio::MultiplexedConnection> {
    let attempt = async {
        let client = redis::Client::open("redis://127.0.0.1:6379/")?;
        client.get_multiplexed_async_connection().await
    };
    let error = match tokio::time::timeout(Duration::from_secs(3), attempt).await {
        Ok(Ok(connection)) => return Some(connection),
        Ok(Err(e)) => e.to_string(),
        Err(_) => "timed out".to_string(),
    };
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{test}: Redis at 127.0.0.1:6379 is required in CI: {error}");
    }
    eprintln!("skipping {test}: no Redis at 127.0.0.1:6379 ({error})");
    None
}

/// Lines the process printed, and a wake-up for each new one.
#[derive(Clone, Default)]
struct Lines {
    lines: Arc<std::sync::Mutex<Vec<String>>>,
    added: Arc<Notify>,
}

impl Lines {
    fn push(&self, line: String) {
        self.lines.lock().expect("lines").push(line);
        self.added.notify_waiters();
    }

    fn find(&self, needle: &str) -> Option<String> {
        self.lines
            .lock()
            .expect("lines")
            .iter()
            .find(|l| l.contains(needle))
            .cloned()
    }

    fn all(&self) -> Vec<String> {
        self.lines.lock().expect("lines").clone()
    }

    async fn wait_for(&self, needle: &str) -> String {
        let wait = async {
            loop {
                let added = self.added.notified();
                if let Some(line) = self.find(needle) {
                    return line;
                }
                let _ = tokio::time::timeout(Duration::from_millis(200), added).await;
            }
        };
        match tokio::time::timeout(DEADLINE, wait).await {
            Ok(line) => line,
            Err(_) => panic!(
                "no line with {needle:?}; printed:\n{}",
                self.all().join("\n")
            ),
        }
    }
}

/// The built `keda-rs dev`, in plain mode, killed on drop.
pub struct Dev {
    child: Child,
    lines: Lines,
    pub out: PathBuf,
}

impl Dev {
    /// Starts `keda-rs dev FILES` from the workspace root with a 1 s HPA sync period and the
    /// activator on a free port.
    pub async fn start(files: &[&str]) -> Dev {
        Dev::start_with(files, &[]).await
    }

    /// [`Dev::start`] with more flags (a `--refresh` or `--hpa-sync-period` among them replaces
    /// the default).
    pub async fn start_with(files: &[&str], flags: &[&str]) -> Dev {
        let out = std::env::temp_dir().join(format!(
            "keda-rs-dev-test-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        let mut child = Command::new(env!("CARGO_BIN_EXE_keda-rs"))
            .current_dir(workspace())
            .arg("dev")
            .arg("--out")
            .arg(&out)
            .args(if flags.contains(&"--hpa-sync-period") {
                &[][..]
            } else {
                &["--hpa-sync-period", "1s"][..]
            })
            .args(if flags.contains(&"--refresh") {
                &[][..]
            } else {
                &["--refresh", "250ms"][..]
            })
            .args(flags)
            .args(["--activator-listen", "127.0.0.1:0"])
            .args(files)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("the keda-rs binary starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let lines = Lines::default();
        let sink = lines.clone();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                eprintln!("keda-rs dev | {line}");
                sink.push(line);
            }
        });
        Dev { child, lines, out }
    }

    /// A client built from the kubeconfig whose path `dev` printed.
    pub async fn client(&self) -> kube::Client {
        let line = self.lines.wait_for("kubeconfig: ").await;
        let path = line.trim_start_matches("kubeconfig: ").trim();
        let kubeconfig = Kubeconfig::read_from(path).expect("the printed kubeconfig reads");
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .expect("a client config");
        kube::Client::try_from(config).expect("a client")
    }

    /// The activator's address, as printed.
    pub async fn activator(&self) -> std::net::SocketAddr {
        let line = self.lines.wait_for("activator: http://").await;
        line.trim_start_matches("activator: http://")
            .trim()
            .parse()
            .expect("the printed activator address")
    }

    /// Waits for a printed line containing `needle`.
    pub async fn wait_for_line(&self, needle: &str) -> String {
        self.lines.wait_for(needle).await
    }

    /// Sends `q`, waits for the exit (code 0) and returns the charts it printed.
    pub async fn quit(mut self) -> Vec<(PathBuf, PathBuf)> {
        let mut stdin = self.child.stdin.take().expect("piped stdin");
        stdin.write_all(b"q\n").await.expect("write q");
        stdin.flush().await.expect("flush");
        let status = tokio::time::timeout(DEADLINE, self.child.wait())
            .await
            .expect("dev exits after q")
            .expect("exit status");
        assert!(status.success(), "dev exited with {status}");
        // The reader task may still be draining the pipe.
        self.lines.wait_for("chart: ").await;
        self.lines
            .all()
            .iter()
            .filter_map(|l| l.strip_prefix("chart: "))
            .filter_map(|l| {
                let (svg, png) = l.split_once(' ')?;
                Some((PathBuf::from(svg), PathBuf::from(png)))
            })
            .collect()
    }
}

/// Every `spec.replicas` a Deployment had, in order, as its watch reports them.
#[derive(Clone)]
pub struct ReplicasSeen {
    history: Arc<Mutex<Vec<i32>>>,
    changed: Arc<Notify>,
}

/// Starts recording the replicas of Deployment `namespace/name`.
pub fn replicas_seen(client: kube::Client, namespace: &str, name: &str) -> ReplicasSeen {
    let seen = ReplicasSeen {
        history: Arc::new(Mutex::new(Vec::new())),
        changed: Arc::new(Notify::new()),
    };
    let api: Api<Deployment> = Api::namespaced(client, namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let record = seen.clone();
    tokio::spawn(async move {
        let mut events = std::pin::pin!(watcher(api, config));
        while let Some(event) = events.next().await {
            let deployment = match event {
                Ok(watcher::Event::Apply(d) | watcher::Event::InitApply(d)) => d,
                _ => continue,
            };
            let replicas = deployment.spec.and_then(|s| s.replicas).unwrap_or(1);
            let mut history = record.history.lock().await;
            if history.last() != Some(&replicas) {
                history.push(replicas);
                record.changed.notify_waiters();
            }
        }
    });
    seen
}

impl ReplicasSeen {
    pub async fn history(&self) -> Vec<i32> {
        self.history.lock().await.clone()
    }

    pub async fn last(&self) -> Option<i32> {
        self.history.lock().await.last().copied()
    }

    /// Waits until the latest count is `n`.
    pub async fn wait_for(&self, n: i32) {
        let wait = async {
            loop {
                let changed = self.changed.notified();
                if self.last().await == Some(n) {
                    return;
                }
                let _ = tokio::time::timeout(Duration::from_millis(200), changed).await;
            }
        };
        if tokio::time::timeout(DEADLINE, wait).await.is_err() {
            panic!("replicas never reached {n}: {:?}", self.history().await);
        }
    }
}

/// Whether `expected` occurs in `history` in order (other counts may come between).
pub fn in_order(history: &[i32], expected: &[i32]) -> bool {
    let mut rest = expected.iter().peekable();
    for h in history {
        if rest.peek() == Some(&h) {
            rest.next();
        }
    }
    rest.peek().is_none()
}
