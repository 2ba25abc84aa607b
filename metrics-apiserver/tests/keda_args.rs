//! The real `keda-metrics-apiserver` started with KEDA's exact argument lists: its install
//! manifest (`config/metrics-server/deployment.yaml` at kedacore/keda
//! 8b4f083ca8c8c2baf8477e322bd4d16ac4dfa09a) and its Helm chart's (`keda/templates/metrics-
//! server/deployment.yaml` at kedacore/charts 1444d00d90d7668cf7f53f270777d039371d90d0,
//! default values, profiling on). Only the mount path `/certs` is moved to a temporary
//! directory holding a certificate, and free loopback ports are appended (the last occurrence
//! of a flag wins, as in Go).

use harness::{Started, TempDir, free_port, starts_with_rfc3339_seconds, with_certs};
use memkube::MemKube;

#[path = "keda_args_harness.rs"]
mod harness;

use keda_install_args::{METRICS_APISERVER_HELM as HELM, METRICS_APISERVER_MANIFEST as MANIFEST};

#[path = "../../tests/fixtures/keda_install_args.rs"]
mod keda_install_args;

const BINARY: &str = env!("CARGO_BIN_EXE_keda-metrics-apiserver");

async fn start(name: &str, keda: &[&str]) -> (MemKube, memkube::Loopback, TempDir, Started) {
    let server = MemKube::new();
    let loopback = server.serve_loopback().await.expect("loopback");
    let dir = TempDir::new(name);
    let kubeconfig = dir.0.join("kubeconfig");
    loopback.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let (cert, key) =
        keda_metrics_apiserver::tls::self_signed(&["localhost".into()]).expect("a certificate");
    std::fs::write(dir.0.join("tls.crt"), &cert).expect("cert");
    std::fs::write(dir.0.join("tls.key"), key).expect("key");
    std::fs::write(dir.0.join("ca.crt"), cert).expect("ca");
    let mut args = with_certs(keda, &dir.0);
    args.extend([
        "--bind-address=127.0.0.1".to_string(),
        format!("--secure-port={}", free_port()),
        format!("--port={}", free_port()),
    ]);
    let process = Started::spawn(
        BINARY,
        &args,
        &[("HOME", &dir.0), ("KUBECONFIG", &kubeconfig)],
    );
    (server, loopback, dir, process)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keda_s_manifest_arguments_start_the_metrics_apiserver() {
    let (_server, _loopback, _dir, mut process) = start("ma-manifest", MANIFEST).await;
    process.wait_for("metrics-apiserver serving");
    assert_eq!(
        process.warnings(),
        vec![format!(
            "--client-ca-file={}/ca.crt has no effect in keda-rs: the aggregator is authenticated by its front-proxy certificate (--requestheader-client-ca-file or the extension-apiserver-authentication ConfigMap); a certificate signed by KEDA's own CA is no caller identity here, so an operator or webhook certificate cannot read metrics as a user",
            _dir.0.display()
        )]
    );
    assert!(process.is_running());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keda_s_helm_arguments_start_the_metrics_apiserver_with_rfc3339_times() {
    let (_server, _loopback, _dir, mut process) = start("ma-helm", HELM).await;
    let line = process.wait_for("metrics-apiserver serving");
    assert!(starts_with_rfc3339_seconds(&line), "{line}");
    let warnings = process.warnings();
    for prefix in [
        "--stderrthreshold=ERROR has no effect",
        "--client-ca-file=",
        "--profiling-bind-address=:8083 has no effect",
    ] {
        assert_eq!(
            warnings.iter().filter(|w| w.starts_with(prefix)).count(),
            1,
            "{prefix} in {warnings:#?}"
        );
    }
    assert_eq!(warnings.len(), 3, "{warnings:#?}");
    assert!(process.is_running());
}
