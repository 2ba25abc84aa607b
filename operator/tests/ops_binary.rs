//! The real `keda-operator` binary: started with no cluster, and started twice against the
//! in-memory API server over loopback (leader and standby, SIGTERM hand-over).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use memkube::{Loopback, MemKube};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio::time::timeout;

#[allow(dead_code)]
#[path = "../../scalers/tests/common/mod.rs"]
mod redis_common;

const BINARY: &str = env!("CARGO_BIN_EXE_keda-operator");
const NAMESPACE: &str = "keda";
const LEASE: &str = "operator.keda.sh";

/// A fresh empty directory for one test, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let path = std::env::temp_dir().join(format!("keda-rs-ops-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("temp dir");
        Self(path)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn without_any_cluster_the_binary_exits_1_with_one_line_naming_what_is_missing() {
    let home = TempDir::new("no-cluster");
    let output = std::process::Command::new(BINARY)
        .env_clear()
        .env("HOME", home.path())
        .output()
        .expect("the binary runs");
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let expected = format!(
        "keda-operator: no Kubernetes cluster found: KUBECONFIG is not set, {}/.kube/config does not exist, and this is not a pod (KUBERNETES_SERVICE_HOST unset)\n",
        home.path().display()
    );
    assert_eq!(stderr, expected);
}

#[test]
fn help_lists_the_flags_and_exits_0() {
    let output = std::process::Command::new(BINARY)
        .arg("--help")
        .output()
        .expect("the binary runs");
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("--kube-api-qps"), "{stdout}");
    assert!(stdout.contains("WATCH_NAMESPACE"), "{stdout}");
}

/// One running operator process and the addresses its logs announced.
struct Operator {
    child: Child,
    probes: SocketAddr,
    metrics: SocketAddr,
}

impl Operator {
    async fn start(kubeconfig: &Path, home: &Path, pod: &str) -> Self {
        let mut child = Command::new(BINARY)
            .args([
                "--leader-elect",
                "--metrics-bind-address",
                "127.0.0.1:0",
                "--health-probe-bind-address",
                "127.0.0.1:0",
                // No certificates here: the metric service is tested in process.
                "--metrics-service-bind-address",
                "0",
                "--log-format",
                "json",
            ])
            .env_clear()
            .env("HOME", home)
            .env("KUBECONFIG", kubeconfig)
            .env("POD_NAME", pod)
            .env("POD_NAMESPACE", NAMESPACE)
            // A long lease and a short retry: a hand-over within seconds can only come from a
            // release, never from expiry.
            .env("KEDA_OPERATOR_LEADER_ELECTION_LEASE_DURATION", "60s")
            .env("KEDA_OPERATOR_LEADER_ELECTION_RENEW_DEADLINE", "40s")
            .env("KEDA_OPERATOR_LEADER_ELECTION_RETRY_PERIOD", "200ms")
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("the binary starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, mut rx) = mpsc::unbounded_channel();
        let pod_name = pod.to_string();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                println!("[{pod_name}] {line}");
                let Ok(entry) = serde_json::from_str::<serde_json::Value>(&line) else {
                    continue;
                };
                if entry["message"] == "admin server listening" {
                    let endpoints = entry["endpoints"].as_str().unwrap_or_default().to_string();
                    if let Some(addr) = entry["addr"].as_str().and_then(|a| a.parse().ok()) {
                        let _ = tx.send((endpoints, addr));
                    }
                }
            }
        });
        let mut probes = None;
        let mut metrics = None;
        while probes.is_none() || metrics.is_none() {
            let (endpoints, addr) = timeout(Duration::from_secs(20), rx.recv())
                .await
                .expect("the operator announces its listeners")
                .expect("the operator is running");
            match endpoints.as_str() {
                "probes" => probes = Some(addr),
                "metrics" => metrics = Some(addr),
                _ => {}
            }
        }
        Self {
            child,
            probes: probes.expect("probes address"),
            metrics: metrics.expect("metrics address"),
        }
    }

    async fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = self.child.id().expect("running").to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .await
            .expect("kill runs");
        assert!(sent.success());
        timeout(Duration::from_secs(15), self.child.wait())
            .await
            .expect("the operator exits after SIGTERM")
            .expect("exit status")
    }
}

/// A plain HTTP/1.1 GET: status code and body.
async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("read");
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

async fn eventually<F, Fut>(what: &str, within: Duration, mut check: F)
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

async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases
        .get_opt(LEASE)
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
}

struct Cluster {
    server: MemKube,
    _loopback: Loopback,
    dir: TempDir,
    kubeconfig: PathBuf,
}

async fn cluster(name: &str) -> Cluster {
    let server = MemKube::new();
    server.create_namespace(NAMESPACE).expect("namespace");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_serves_probes_and_metrics_and_takes_the_lease() {
    let cluster = cluster("serves").await;
    let leases: Api<Lease> = Api::namespaced(cluster.server.client(), NAMESPACE);
    let mut a = Operator::start(&cluster.kubeconfig, cluster.dir.path(), "operator-a").await;

    assert_eq!(get(a.probes, "/healthz").await, (200, "ok\n".into()));
    eventually("/readyz is ok", Duration::from_secs(10), || async {
        get(a.probes, "/readyz").await.0 == 200
    })
    .await;
    let (status, metrics) = get(a.metrics, "/metrics").await;
    assert_eq!(status, 200);
    assert!(metrics.contains("keda_build_info{version=\""), "{metrics}");
    assert!(metrics.contains("goversion=\"rustc 1."), "{metrics}");
    assert!(metrics.ends_with("# EOF\n"), "{metrics}");
    eventually(
        "operator-a holds the lease",
        Duration::from_secs(10),
        || async { holder(&leases).await.as_deref() == Some("operator-a") },
    )
    .await;

    let status = a.terminate().await;
    assert!(status.success(), "{status:?}");
    // Released on the way out.
    assert_eq!(holder(&leases).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_binary_stays_standby_until_the_leader_gets_sigterm_then_leads_quickly() {
    let cluster = cluster("standby").await;
    let leases: Api<Lease> = Api::namespaced(cluster.server.client(), NAMESPACE);
    let mut a = Operator::start(&cluster.kubeconfig, cluster.dir.path(), "operator-a").await;
    eventually(
        "operator-a holds the lease",
        Duration::from_secs(10),
        || async { holder(&leases).await.as_deref() == Some("operator-a") },
    )
    .await;

    let mut b = Operator::start(&cluster.kubeconfig, cluster.dir.path(), "operator-b").await;
    // Ready means "leadership known": the standby serves probes and metrics too.
    eventually("operator-b is ready", Duration::from_secs(10), || async {
        get(b.probes, "/readyz").await.0 == 200
    })
    .await;
    assert!(
        get(b.metrics, "/metrics")
            .await
            .1
            .contains("keda_build_info")
    );
    // Many of operator-b's retries (200 ms) later, operator-a still leads.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(holder(&leases).await.as_deref(), Some("operator-a"));

    let status = a.terminate().await;
    assert!(status.success(), "{status:?}");
    // The lease lasts 60 s: taking over within 5 s proves the release.
    eventually("operator-b takes over", Duration::from_secs(5), || async {
        holder(&leases).await.as_deref() == Some("operator-b")
    })
    .await;

    let status = b.terminate().await;
    assert!(status.success(), "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_scales_a_deployment_from_zero_for_a_redis_scaled_object() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
    use keda_api::ScaledObject;
    use kube::api::PostParams;
    use redis::AsyncCommands;

    let Some(mut redis) = redis_common::redis_or_skip("binary scales from zero").await else {
        return;
    };
    let cluster = cluster("scales").await;
    cluster
        .server
        .load_crds_from_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../config/crd"))
        .expect("CRDs load");
    cluster.server.create_namespace("apps").expect("namespace");
    let client = cluster.server.client();
    let deployment: Deployment = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": "worker", "namespace": "apps" },
        "spec": {
            "replicas": 0,
            "selector": { "matchLabels": { "app": "worker" } },
            "template": {
                "metadata": { "labels": { "app": "worker" } },
                "spec": { "containers": [{ "name": "app", "image": "registry.k8s.io/pause:3.9" }] }
            }
        }
    }))
    .expect("a Deployment");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "apps");
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .expect("create Deployment");
    let list = redis_common::unique("binary");
    let so: ScaledObject = serde_yaml::from_str(&format!(
        r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {{ name: worker, namespace: apps }}
spec:
  scaleTargetRef: {{ name: worker }}
  pollingInterval: 1
  triggers:
    - type: redis
      metadata:
        address: {address}
        listName: {list}
        listLength: "5"
"#,
        address = redis_common::REDIS_ADDRESS
    ))
    .expect("ScaledObject");
    let mut operator = Operator::start(&cluster.kubeconfig, cluster.dir.path(), "operator-a").await;
    Api::<ScaledObject>::namespaced(client.clone(), "apps")
        .create(&PostParams::default(), &so)
        .await
        .expect("create ScaledObject");
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(client.clone(), "apps");
    eventually(
        "the HPA keda-hpa-worker exists",
        Duration::from_secs(20),
        || async { matches!(hpas.get_opt("keda-hpa-worker").await, Ok(Some(_))) },
    )
    .await;
    assert_eq!(
        replicas(&deployments).await,
        0,
        "an empty list leaves the Deployment at 0"
    );
    let _: i64 = redis
        .rpush(&list, vec!["a", "b", "c"])
        .await
        .expect("RPUSH");
    eventually(
        "the Deployment scales to 1",
        Duration::from_secs(20),
        || async { replicas(&deployments).await == 1 },
    )
    .await;
    let status = operator.terminate().await;
    assert!(status.success(), "{status:?}");
    let _: i64 = redis.del(&list).await.expect("DEL");
}

async fn replicas(deployments: &Api<k8s_openapi::api::apps::v1::Deployment>) -> i32 {
    deployments
        .get("worker")
        .await
        .expect("get Deployment")
        .spec
        .and_then(|s| s.replicas)
        .unwrap_or(-1)
}
