//! The real `keda-activator` binary's start-up failures: each is one line on standard error
//! naming what to fix, and `--help` lists the environment variables it reads.

#[path = "common/memory_attack.rs"]
mod memory_attack;

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

/// Whether the admin listener on `port` answers `/healthz` with an HTTP response within
/// `deadline`.
fn admin_answers(port: u16, deadline: std::time::Duration) -> bool {
    use std::io::{Read, Write};
    let until = std::time::Instant::now() + deadline;
    while std::time::Instant::now() < until {
        if let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            let _ = stream.set_read_timeout(Some(std::time::Duration::from_millis(300)));
            let mut head = [0_u8; 12];
            if stream
                .write_all(b"GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
                .is_ok()
                && stream.read_exact(&mut head).is_ok()
                && head.starts_with(b"HTTP/1.1")
            {
                return true;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    false
}

/// Starts the binary against `kubeconfig` with the operator's identity read from its Secret
/// (no certificate files), and reports whether its admin port came up within 10 seconds.
fn starts_reading_its_secret(home: &TempDir, kubeconfig: &std::path::Path) -> bool {
    let admin_port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let missing = home.0.join("missing");
    let mut child = Command::new(BINARY)
        .args(["--listen=127.0.0.1:0", "--pod-namespace=keda"])
        .arg(format!("--admin-listen=127.0.0.1:{admin_port}"))
        .arg("--operator-url=https://127.0.0.1:9/activator/v1/reports")
        .arg(format!(
            "--operator-ca-file={}",
            missing.join("ca").display()
        ))
        .arg(format!(
            "--operator-client-cert-file={}",
            missing.join("crt").display()
        ))
        .arg(format!(
            "--operator-client-key-file={}",
            missing.join("key").display()
        ))
        .env_clear()
        .env("HOME", &home.0)
        .env("KUBECONFIG", kubeconfig)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the binary starts");
    let up = admin_answers(admin_port, std::time::Duration::from_secs(10));
    let _ = child.kill();
    let _ = child.wait();
    up
}

/// The activator's client (`keda_cli::infer_client`) retries a 503 as the operator's does: a
/// 503 then success reads the Secret; through an outage the read gives up after 3 retries
/// within seconds and start-up goes on (kube's default would hold it for minutes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn its_api_client_retries_a_503_a_bounded_number_of_times() {
    use memkube::{FailureRule, MemKube, Verb};

    let home = TempDir::new("retries");
    let server = MemKube::new();
    server.create_namespace("keda").expect("namespace");
    let loopback = server.serve_loopback().await.expect("loopback");
    let kubeconfig = home.0.join("kubeconfig");
    loopback.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let secret_gets = || server.request_counts().get(Verb::Get, "secrets");

    server.inject_failure(
        FailureRule::new(503)
            .verb(Verb::Get)
            .resource("secrets")
            .times(1),
    );
    let (h, k) = (&home, kubeconfig.clone());
    let up = tokio::task::block_in_place(|| starts_reading_its_secret(h, &k));
    assert!(up, "the activator came up after one 503");
    assert_eq!(secret_gets(), 2, "one 503, then the answer");

    server.clear_failures();
    server.inject_failure(FailureRule::new(503).verb(Verb::Get).resource("secrets"));
    let up = tokio::task::block_in_place(|| starts_reading_its_secret(h, &k));
    assert!(
        up,
        "the activator came up although the Secret could not be read"
    );
    assert_eq!(
        secret_gets(),
        2 + 4,
        "the first read and 3 retries, not more"
    );
}

/// The activator process started with its defaults on a memkube on loopback, its proxy on
/// `port`; killed on drop.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Issue 30's attack on the real binary with its default limits: 1,100 clients each send an
/// unfinished 460 KB request head. The process stays under the shipped 500 MiB limit and
/// keeps answering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eleven_hundred_unfinished_460_kb_heads_leave_the_activator_under_500_mib_and_answering() {
    use memory_attack::{CLIENTS, HEAD};

    let home = TempDir::new("memory-attack");
    let server = memkube::MemKube::new();
    server.create_namespace("keda").expect("namespace");
    let loopback = server.serve_loopback().await.expect("loopback");
    let kubeconfig = home.0.join("kubeconfig");
    loopback.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let child = Command::new(BINARY)
        .args([
            format!("--listen=127.0.0.1:{port}"),
            "--admin-listen=127.0.0.1:0".to_owned(),
            "--operator-url=http://127.0.0.1:1/activator/v1/reports".to_owned(),
            "--http-any-host".to_owned(),
        ])
        .env_clear()
        .env("HOME", &home.0)
        .env("KUBECONFIG", &kubeconfig)
        .env("RUST_LOG", "error")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the binary runs");
    let running = Running(child);
    let pid = running.0.id();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    assert!(
        memory_attack::answers_404(addr).await,
        "the activator did not start answering"
    );
    let (peak, open) = memory_attack::unfinished_heads(addr, pid, CLIENTS, HEAD).await;
    let answer = memory_attack::answer(addr).await.unwrap_or_default();
    println!(
        "{CLIENTS} clients x {HEAD} B unfinished heads: peak RSS {} MiB, answering: {}",
        peak >> 20,
        answer.lines().next().unwrap_or("no answer")
    );
    assert!(peak < 500 << 20, "peak RSS {} MiB", peak >> 20);
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer:?}");
    drop(open);
}
