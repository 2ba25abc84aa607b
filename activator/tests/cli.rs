//! The real `keda-activator` binary's start-up failures: each is one line on standard error
//! naming what to fix, and `--help` lists the environment variables it reads.

use std::path::PathBuf;
use std::process::{Command, Output};

const BINARY: &str = env!("CARGO_BIN_EXE_keda-activator");

/// A fresh empty directory (used as `HOME`), removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let path =
            std::env::temp_dir().join(format!("keda-rs-act-cli-{}-{name}", std::process::id()));
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

/// Runs the binary with `args` on free loopback ports and no environment but `HOME` and `vars`.
fn run(home: &TempDir, args: &[&str], vars: &[(&str, &str)]) -> Output {
    Command::new(BINARY)
        .args(["--listen=127.0.0.1:0", "--admin-listen=127.0.0.1:0"])
        .args(args)
        .env_clear()
        .env("HOME", &home.0)
        .envs(vars.iter().copied())
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
    let output = run(&home, &[], &[]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert_eq!(
        one_line(&output),
        format!(
            "keda-activator: no Kubernetes cluster found: KUBECONFIG is not set, {}/.kube/config does not exist, and this is not a pod (KUBERNETES_SERVICE_HOST unset)",
            home.0.display()
        )
    );
}

#[test]
fn a_bad_flag_is_one_line_naming_the_flag_and_help() {
    let home = TempDir::new("bad-flag");
    let output = run(&home, &["--max-connections=0"], &[]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let line = one_line(&output);
    assert!(
        line.starts_with(
            "keda-activator: invalid value '0' for '--max-connections <MAX_CONNECTIONS>'"
        ),
        "{line}"
    );
    assert!(line.ends_with("; see keda-activator --help"), "{line}");
}

#[test]
fn an_unreadable_file_is_one_line_naming_its_flag() {
    let home = TempDir::new("no-file");
    // A cluster nobody answers for: the client is built without contacting it.
    let kubeconfig = home.0.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\nusers: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n",
    )
    .expect("kubeconfig");
    // The client certificate exists, the CA does not: the files are used, and the CA is named.
    let cert = home.0.join("tls.crt");
    std::fs::write(&cert, "not a certificate").expect("write");
    let ca = home.0.join("missing-ca.crt");
    let output = run(
        &home,
        &[
            &format!("--operator-ca-file={}", ca.display()),
            &format!("--operator-client-cert-file={}", cert.display()),
        ],
        &[("KUBECONFIG", &kubeconfig.display().to_string())],
    );
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let line = one_line(&output);
    assert!(
        line.starts_with(&format!(
            "keda-activator: --operator-ca-file: cannot read {}: ",
            ca.display()
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
    for variable in [
        "KEDA_ACTIVATOR_LISTEN",
        "KEDA_ACTIVATOR_OPERATOR_URL",
        "POD_NAME",
        "POD_NAMESPACE",
        "POD_IP",
        "KUBECONFIG",
        "RUST_LOG",
    ] {
        assert!(
            help.contains(variable),
            "--help does not name {variable}:\n{help}"
        );
    }
}
