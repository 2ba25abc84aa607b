//! KEDA's install arguments start keda-rs's three processes against a real API server (issue
//! 29, row 1's Done-when): each binary runs as a local process with the exact lists of KEDA's
//! Helm chart and install manifests (`tests/fixtures/keda_install_args.rs`), the certificate
//! mount `/certs` moved to a temporary directory and free loopback ports appended (the last
//! occurrence of a flag wins, as in Go), with the kubeconfig of the cluster named by
//! KEDA_RS_E2E_KUBECONFIG. The operator leads and makes a ScaledObject ready (its HPA exists on
//! the cluster); the metrics-apiserver serves (it reads the cluster's
//! `extension-apiserver-authentication` ConfigMap); the webhook serves and answers its probe.
//!
//! Build the binaries first: `cargo build -p keda-operator -p keda-metrics-apiserver -p
//! keda-webhook`.

#[path = "../../../operator/tests/scenarios/mod.rs"]
mod scenarios;

#[path = "../../../metrics-apiserver/tests/keda_args_harness.rs"]
mod harness;

#[path = "../../fixtures/keda_install_args.rs"]
mod keda_install_args;

use std::path::Path;

use harness::{Started, TempDir, free_port, with_certs};
use keda_e2e::{cluster_client, kubeconfig_path};
use kube::api::DeleteParams;

fn certificates(dir: &Path) {
    let (cert, key) =
        keda_metrics_apiserver::tls::self_signed(&["localhost".into()]).expect("a certificate");
    std::fs::write(dir.join("tls.crt"), &cert).expect("cert");
    std::fs::write(dir.join("tls.key"), key).expect("key");
    std::fs::write(dir.join("ca.crt"), cert).expect("ca");
}

fn path(binary: Result<std::path::PathBuf, String>) -> String {
    binary
        .unwrap_or_else(|e| panic!("{e}"))
        .display()
        .to_string()
}

async fn http_status(port: u16, path: &str) -> u16 {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return 0;
    };
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "end-to-end: needs a real cluster named by KEDA_RS_E2E_KUBECONFIG"]
async fn keda_s_helm_arguments_start_the_operator_which_readies_a_scaled_object_on_a_real_cluster()
{
    let client = cluster_client().await.expect("a cluster to test against");
    let kubeconfig = kubeconfig_path().expect("a kubeconfig");
    let name = format!("keda-rs-e2e-keda-args-{}", std::process::id());
    let namespaces = keda_e2e::scenario_namespace(&client, &name).await;
    let redis = keda_e2e::local_redis().await;
    let world = scenarios::World::new(client, &name, redis);

    let dir = TempDir::new("e2e-operator");
    certificates(&dir.0);
    let mut args = with_certs(keda_install_args::OPERATOR_HELM, &dir.0);
    args.extend([
        format!("--health-probe-bind-address=127.0.0.1:{}", free_port()),
        format!("--metrics-bind-address=127.0.0.1:{}", free_port()),
        "--metrics-service-bind-address=0".to_string(),
        "--explain-bind-address=0".to_string(),
    ]);
    let mut operator = Started::spawn(
        &path(keda_e2e::operator_binary()),
        &args,
        &[
            ("HOME", &dir.0),
            ("KUBECONFIG", &kubeconfig),
            ("POD_NAMESPACE", Path::new(&name)),
            ("POD_NAME", Path::new("keda-rs-e2e-keda-args")),
            ("WATCH_NAMESPACE", Path::new(&name)),
        ],
    );
    operator.wait_for("leading");

    world.deployment("args", 0).await;
    world
        .create(&scenarios::redis_object(
            "args",
            "args",
            &format!("keda-rs-e2e-keda-args-{}", std::process::id()),
            "",
            "",
        ))
        .await;
    scenarios::hpa_exists(&world, "keda-hpa-args").await;
    let ready = scenarios::eventually("Ready=True", || async {
        scenarios::ready(&world.get("args").await).filter(|(status, _, _)| status == "True")
    })
    .await;
    // KEDA's condition message (`ScaledObjectConditionReadySuccessMessage`).
    assert_eq!(
        ready.2,
        "ScaledObject is defined correctly and is ready for scaling"
    );
    assert!(operator.is_running());
    drop(operator);
    let _ = namespaces.delete(&name, &DeleteParams::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "end-to-end: needs a real cluster named by KEDA_RS_E2E_KUBECONFIG"]
async fn keda_s_arguments_start_the_metrics_apiserver_on_a_real_cluster() {
    let kubeconfig = kubeconfig_path().expect("a kubeconfig");
    for (list, keda) in [
        ("manifest", keda_install_args::METRICS_APISERVER_MANIFEST),
        ("helm", keda_install_args::METRICS_APISERVER_HELM),
    ] {
        let dir = TempDir::new(&format!("e2e-metrics-apiserver-{list}"));
        certificates(&dir.0);
        let mut args = with_certs(keda, &dir.0);
        args.extend([
            "--bind-address=127.0.0.1".to_string(),
            format!("--secure-port={}", free_port()),
            format!("--port={}", free_port()),
        ]);
        let mut process = Started::spawn(
            &path(keda_e2e::metrics_apiserver_binary()),
            &args,
            &[("HOME", &dir.0), ("KUBECONFIG", &kubeconfig)],
        );
        process.wait_for("metrics-apiserver serving");
        assert!(process.is_running(), "KEDA's {list} arguments");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "end-to-end: needs a real cluster named by KEDA_RS_E2E_KUBECONFIG"]
async fn keda_s_arguments_start_the_webhook_on_a_real_cluster() {
    let kubeconfig = kubeconfig_path().expect("a kubeconfig");
    for (list, keda) in [
        ("manifest", keda_install_args::WEBHOOK_MANIFEST),
        ("helm", keda_install_args::WEBHOOK_HELM),
    ] {
        let dir = TempDir::new(&format!("e2e-webhook-{list}"));
        certificates(&dir.0);
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
            &path(keda_e2e::webhook_binary()),
            &args,
            &[("HOME", &dir.0), ("KUBECONFIG", &kubeconfig)],
        );
        process.wait_for("serving");
        let mut status = 0;
        for _ in 0..100 {
            status = http_status(probes, "/healthz").await;
            if status == 200 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert_eq!(status, 200, "/healthz with KEDA's {list} arguments");
        assert!(process.is_running(), "KEDA's {list} arguments");
    }
}
