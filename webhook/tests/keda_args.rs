//! The real `keda-webhook` started with KEDA's exact argument lists: its install manifest
//! (`config/webhooks/webhooks.yaml` at kedacore/keda 8b4f083ca8c8c2baf8477e322bd4d16ac4dfa09a)
//! and its Helm chart's (`keda/templates/webhooks/deployment.yaml` at kedacore/charts
//! 1444d00d90d7668cf7f53f270777d039371d90d0, default values, profiling on). Only the mount path
//! `/certs` is moved to a temporary directory holding a certificate, and free loopback ports
//! are appended (the last occurrence of a flag wins, as in Go). KEDA's probes ask the
//! `--health-probe-bind-address` port.

use harness::{Started, TempDir, free_port, starts_with_rfc3339_seconds, with_certs};
use memkube::MemKube;

#[path = "../../metrics-apiserver/tests/keda_args_harness.rs"]
mod harness;

use keda_install_args::{WEBHOOK_HELM as HELM, WEBHOOK_MANIFEST as MANIFEST};

#[path = "../../tests/fixtures/keda_install_args.rs"]
mod keda_install_args;

const BINARY: &str = env!("CARGO_BIN_EXE_keda-webhook");

fn self_signed(dir: &std::path::Path) {
    let generated =
        rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("a certificate");
    std::fs::write(dir.join("tls.crt"), generated.cert.pem()).expect("cert");
    std::fs::write(dir.join("tls.key"), generated.signing_key.serialize_pem()).expect("key");
}

async fn probe(port: u16) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return 0;
    };
    let request = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    if stream.write_all(request.as_bytes()).await.is_err() {
        return 0;
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response).await;
    response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

async fn start_and_probe(name: &str, keda: &[&str]) -> Started {
    let server = MemKube::new();
    let loopback = server.serve_loopback().await.expect("loopback");
    let dir = TempDir::new(name);
    let kubeconfig = dir.0.join("kubeconfig");
    loopback.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    self_signed(&dir.0);
    let probes = free_port();
    let mut args = with_certs(keda, &dir.0);
    args.extend([
        format!("--cert-dir={}", dir.0.display()),
        "--webhook-bind-address=127.0.0.1:0".to_string(),
        format!("--port={}", free_port()),
        format!("--metrics-bind-address=127.0.0.1:{}", free_port()),
        format!("--health-probe-bind-address=127.0.0.1:{probes}"),
    ]);
    let mut process = Started::spawn(
        BINARY,
        &args,
        &[("HOME", &dir.0), ("KUBECONFIG", &kubeconfig)],
    );
    let line = process.wait_for("serving");
    assert!(starts_with_rfc3339_seconds(&line), "{line}");
    let mut status = 0;
    for _ in 0..100 {
        status = probe(probes).await;
        if status == 200 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(status, 200, "/healthz on --health-probe-bind-address");
    assert!(process.is_running());
    drop((server, loopback, dir));
    process
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keda_s_manifest_arguments_start_the_webhook_and_its_probe_port() {
    let process = start_and_probe("wh-manifest", MANIFEST).await;
    assert_eq!(process.warnings(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keda_s_helm_arguments_start_the_webhook_and_warn_about_profiling_once() {
    let process = start_and_probe("wh-helm", HELM).await;
    assert_eq!(
        process.warnings(),
        vec![
            "--profiling-bind-address=:8084 has no effect in keda-rs: Go's pprof profiles do not exist in a Rust process"
                .to_string()
        ]
    );
}
