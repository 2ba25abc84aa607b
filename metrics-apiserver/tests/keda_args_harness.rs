//! Starting a real binary with KEDA's arguments against memkube over loopback, reading its
//! standard output as it goes. Included by path from the webhook's tests too.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// A fresh directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> Self {
        let path =
            std::env::temp_dir().join(format!("keda-rs-keda-args-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("temp dir");
        Self(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A loopback port free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A running process and the lines it printed so far.
pub struct Started {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Started {
    /// Starts `binary` with `args`, an environment of only `env`.
    pub fn spawn(binary: &str, args: &[String], env: &[(&str, &Path)]) -> Self {
        let mut child = Command::new(binary)
            .args(args)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (*k, v.as_os_str())))
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the binary starts");
        let stdout = child.stdout.take().expect("stdout");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                println!("| {line}");
                sink.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(line);
            }
        });
        Self { child, lines }
    }

    pub fn lines(&self) -> Vec<String> {
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Waits up to 30 s for a line containing `needle`, asserting the process still runs.
    pub fn wait_for(&mut self, needle: &str) -> String {
        let start = Instant::now();
        loop {
            if let Some(line) = self.lines().into_iter().find(|l| l.contains(needle)) {
                return line;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("exited with {status} before logging {needle:?}");
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "no line with {needle:?} within 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The "has no effect" warning lines, the text after the level and target.
    pub fn warnings(&self) -> Vec<String> {
        self.lines()
            .into_iter()
            .filter(|l| l.contains(" WARN ") && l.contains("has no effect in keda-rs"))
            .filter_map(|l| l.find("--").map(|i| l[i..].to_string()))
            .collect()
    }

    /// Whether the process still runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// KEDA's list with the certificate mount path `/certs` moved to `certs`.
pub fn with_certs(keda: &[&str], certs: &Path) -> Vec<String> {
    let dir = certs.display().to_string();
    keda.iter().map(|a| a.replace("/certs", &dir)).collect()
}

/// Whether a text log line starts with an RFC 3339 timestamp in whole seconds
/// (`2026-08-01T10:00:00Z`), as `--zap-time-encoding=rfc3339` asks.
pub fn starts_with_rfc3339_seconds(line: &str) -> bool {
    let stamp = line.split_whitespace().next().unwrap_or_default();
    stamp.len() == 20 && stamp.ends_with('Z') && stamp.as_bytes()[10] == b'T'
}
