//! The real `keda-operator` binary started with KEDA's exact argument lists: its install
//! manifest (`config/manager/manager.yaml` at kedacore/keda
//! 8b4f083ca8c8c2baf8477e322bd4d16ac4dfa09a) and its Helm chart's (`keda/templates/manager/
//! deployment.yaml` at kedacore/charts 1444d00d90d7668cf7f53f270777d039371d90d0, default values
//! and every optional argument on). It starts, serves its probes, leads, and logs one warning
//! per flag without effect here; `--enable-opentelemetry-metrics=true` starts the OTLP
//! exporter on KEDA's default endpoint (tests/otel.rs sends to a real receiver).

use std::time::Duration;

use binary::{Cluster, Process, eventually, get};
use memkube::MemKube;

#[path = "common/binary.rs"]
mod binary;

use keda_install_args::{OPERATOR_HELM as HELM, OPERATOR_MANIFEST as MANIFEST};

#[path = "../../tests/fixtures/keda_install_args.rs"]
mod keda_install_args;

const NAMESPACE: &str = "keda";

/// What the test adds after KEDA's list (the last occurrence of a flag wins, as in Go): free
/// loopback ports, no metric service or explain endpoint, JSON logs to read.
const HARNESS: &[&str] = &[
    "--health-probe-bind-address=127.0.0.1:0",
    "--metrics-service-bind-address=0",
    "--explain-bind-address=0",
    "--log-format=json",
];

async fn start(name: &str, keda: &[&str], extra: &[&str]) -> (Cluster, Process) {
    let server = MemKube::new();
    server.create_namespace(NAMESPACE).expect("namespace");
    let cluster = Cluster::serve(server, name).await;
    let args: Vec<&str> = keda.iter().chain(HARNESS).chain(extra).copied().collect();
    let process = Process::start(
        &cluster,
        name,
        &args,
        &[("POD_NAMESPACE", NAMESPACE), ("POD_NAME", name)],
    );
    (cluster, process)
}

async fn is_ready(process: &Process) {
    let probes = process
        .address("admin server listening", Some("probes"))
        .await;
    eventually("/readyz is ok", Duration::from_secs(20), || async {
        get(probes, "/readyz").await.0 == 200
    })
    .await;
}

fn warnings(process: &Process) -> Vec<String> {
    process
        .logged("--")
        .into_iter()
        .filter(|e| e["level"] == "WARN")
        .filter_map(|e| e["message"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keda_s_manifest_arguments_start_the_operator_with_rfc3339_times_and_one_warning() {
    let (_cluster, mut process) = start(
        "keda-manifest",
        MANIFEST,
        &["--metrics-bind-address=127.0.0.1:0"],
    )
    .await;
    is_ready(&process).await;
    // --enable-cert-rotation=true is what keda-rs does anyway: no warning.
    assert_eq!(warnings(&process), Vec::<String>::new());
    // --zap-time-encoding=rfc3339: whole seconds, as zap writes them.
    let started = process.logged("admin server listening");
    let timestamp = started[0]["timestamp"].as_str().unwrap_or_default();
    assert_eq!(timestamp.len(), "2026-08-01T10:00:00Z".len(), "{timestamp}");
    assert!(timestamp.ends_with('Z'), "{timestamp}");
    assert!(process.terminate().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keda_s_helm_arguments_start_the_operator_and_each_flag_without_effect_warns_once() {
    let (_cluster, mut process) = start("keda-helm", HELM, &[]).await;
    is_ready(&process).await;
    let warned = warnings(&process);
    let expected_prefixes = [
        "--profiling-bind-address=:8082 has no effect",
        "--zap-stacktrace-level=error has no effect",
        "--cert-secret-name=kedaorg-certs has no effect",
        "--operator-service-name=keda-operator has no effect",
        "--metrics-server-service-name=keda-operator-metrics-apiserver has no effect",
        "--webhooks-service-name=keda-admission-webhooks has no effect",
        "--k8s-cluster-domain=cluster.local has no effect",
    ];
    for prefix in expected_prefixes {
        assert_eq!(
            warned.iter().filter(|w| w.starts_with(prefix)).count(),
            1,
            "{prefix} in {warned:#?}"
        );
    }
    assert_eq!(warned.len(), expected_prefixes.len(), "{warned:#?}");
    // --enable-opentelemetry-metrics=true with no OTEL_* variable: KEDA's Go exporter's default
    // endpoint (OTLP/HTTP with TLS on localhost:4318), every 60 s.
    let exporting = process.logged("exporting OpenTelemetry metrics over OTLP");
    assert_eq!(exporting.len(), 1, "{exporting:#?}");
    assert_eq!(
        exporting[0]["endpoint"],
        "https://localhost:4318/v1/metrics"
    );
    assert_eq!(exporting[0]["interval_ms"], "60000");
    // --enable-prometheus-metrics=false turns /metrics off, as in KEDA.
    assert!(
        process
            .logged("admin server listening")
            .iter()
            .all(|e| e["endpoints"] != "metrics"),
        "a metrics listener was started"
    );
    assert!(process.terminate().await.success());
}
