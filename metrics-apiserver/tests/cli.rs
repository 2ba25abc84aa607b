//! The real `keda-metrics-apiserver` binary's start-up failures: each is one line on standard
//! error naming what to fix, and `--help` lists the environment variables it reads.

use std::path::PathBuf;
use std::process::{Command, Output};

const BINARY: &str = env!("CARGO_BIN_EXE_keda-metrics-apiserver");

/// A fresh empty directory (used as `HOME`), removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let path =
            std::env::temp_dir().join(format!("keda-rs-ma-cli-{}-{name}", std::process::id()));
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

/// Runs the binary with `args`, no environment but `HOME`, and free ports.
fn run(home: &TempDir, args: &[&str]) -> Output {
    Command::new(BINARY)
        .args([
            "--bind-address=127.0.0.1",
            "--secure-port=0",
            "--metrics-port=0",
        ])
        .args(args)
        .env_clear()
        .env("HOME", &home.0)
        .output()
        .expect("the binary runs")
}

/// Standard error, which must be exactly one line.
fn one_line(output: &Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        stderr.ends_with('\n') && stderr.lines().count() == 1,
        "not one line: {stderr:?}"
    );
    stderr.trim_end().to_string()
}

#[test]
fn without_any_cluster_it_says_in_one_line_what_is_missing() {
    let home = TempDir::new("no-cluster");
    let output = run(&home, &[]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert_eq!(
        one_line(&output),
        format!(
            "keda-metrics-apiserver: no Kubernetes cluster found: KUBECONFIG is not set, {}/.kube/config does not exist, and this is not a pod (KUBERNETES_SERVICE_HOST unset) (or pass --kubeconfig)",
            home.0.display()
        )
    );
}

#[test]
fn a_bad_flag_is_one_line_naming_the_flag_and_help() {
    let home = TempDir::new("bad-flag");
    let output = run(&home, &["--metrics-service-timeout=soon"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let line = one_line(&output);
    assert!(
        line.starts_with("keda-metrics-apiserver: invalid value 'soon' for '--metrics-service-timeout <METRICS_SERVICE_TIMEOUT>'"),
        "{line}"
    );
    assert!(
        line.ends_with("; see keda-metrics-apiserver --help"),
        "{line}"
    );
}

#[test]
fn an_unreadable_file_is_one_line_naming_its_flag() {
    let home = TempDir::new("no-file");
    let cert = home.0.join("missing").join("tls.crt");
    let key = home.0.join("missing").join("tls.key");
    let output = run(
        &home,
        &[
            &format!("--tls-cert-file={}", cert.display()),
            &format!("--tls-private-key-file={}", key.display()),
        ],
    );
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let line = one_line(&output);
    assert!(
        line.starts_with(&format!(
            "keda-metrics-apiserver: --tls-cert-file / --tls-private-key-file: cannot read {}: ",
            cert.display()
        )),
        "{line}"
    );
}

#[test]
fn help_lists_the_environment_variables_it_reads() {
    let output = Command::new(BINARY)
        .arg("--help")
        .output()
        .expect("the binary runs");
    assert_eq!(output.status.code(), Some(0));
    let help = String::from_utf8_lossy(&output.stdout);
    for variable in ["POD_NAMESPACE", "KUBECONFIG", "RUST_LOG"] {
        assert!(
            help.contains(variable),
            "--help does not name {variable}:\n{help}"
        );
    }
}
