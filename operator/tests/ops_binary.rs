//! The real `keda-operator` binary: started with no cluster, and started twice against the
//! in-memory API server over loopback (leader and standby, SIGTERM hand-over).

use std::time::Duration;

use binary::{BINARY, Cluster, Operator, TempDir, create_deployment, eventually, get};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use memkube::MemKube;

#[allow(dead_code)]
#[path = "../../scalers/tests/common/mod.rs"]
mod redis_common;

#[path = "common/binary.rs"]
mod binary;

const NAMESPACE: &str = "keda";
const LEASE: &str = "operator.keda.sh";

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

/// An operator with leader election on, a long lease and a short retry: a hand-over within
/// seconds can only come from a release, never from expiry. No certificates here: the metric
/// service is tested in process.
async fn start_operator(cluster: &Cluster, pod: &str) -> Operator {
    let args = ["--leader-elect", "--metrics-service-bind-address", "0"];
    let env = [
        ("POD_NAME", pod),
        ("POD_NAMESPACE", NAMESPACE),
        ("KEDA_OPERATOR_LEADER_ELECTION_LEASE_DURATION", "60s"),
        ("KEDA_OPERATOR_LEADER_ELECTION_RENEW_DEADLINE", "40s"),
        ("KEDA_OPERATOR_LEADER_ELECTION_RETRY_PERIOD", "200ms"),
    ];
    Operator::start(cluster, pod, &args, &env).await
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

async fn cluster(name: &str) -> Cluster {
    let server = MemKube::new();
    server.create_namespace(NAMESPACE).expect("namespace");
    Cluster::serve(server, name).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_serves_probes_and_metrics_and_takes_the_lease() {
    let cluster = cluster("serves").await;
    let leases: Api<Lease> = Api::namespaced(cluster.server.client(), NAMESPACE);
    let mut a = start_operator(&cluster, "operator-a").await;

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
    let mut a = start_operator(&cluster, "operator-a").await;
    eventually(
        "operator-a holds the lease",
        Duration::from_secs(10),
        || async { holder(&leases).await.as_deref() == Some("operator-a") },
    )
    .await;

    let mut b = start_operator(&cluster, "operator-b").await;
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
    create_deployment(&client, "apps", "worker", 0).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "apps");
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
    let mut operator = start_operator(&cluster, "operator-a").await;
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
