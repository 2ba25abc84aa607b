//! The real `keda-operator` binary started without certificate files against the in-memory API
//! server over loopback: it creates keda-rs' certificate Secrets and serves metrics with them
//! (to the metrics-apiserver, which reads its own Secret), or, when Secrets are forbidden, keeps
//! running with the metric service off and says so once.
//!
//! The only flags move the listeners to free loopback ports, so parallel tests do not collide;
//! no certificate flag is given and no certificate file exists.

use std::path::Path;
use std::time::Duration;

use aggregator::{get_as_hpa, start_metrics_apiserver};
use binary::{BINARY, Cluster, Process, command, create_deployment, eventually, get};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Secret;
use keda_api::ScaledObject;
use keda_tls::Identity;
use keda_tls::pki::CertificateAuthority;
use kube::api::{Api, PostParams};
use memkube::{FailureRule, MemKube};
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;

#[allow(dead_code)]
#[path = "../../scalers/tests/common/mod.rs"]
mod redis_common;

#[path = "common/binary.rs"]
mod binary;

#[path = "common/aggregator.rs"]
mod aggregator;

const NAMESPACE: &str = "keda";

/// memkube with keda-rs' CRDs, namespaces `keda` and `apps`, and Deployment `apps/worker` at 0.
async fn cluster(name: &str) -> Cluster {
    assert!(
        !Path::new("/certs").exists(),
        "these tests need the default certificate files (/certs/...) to be absent"
    );
    let server = MemKube::new();
    server.create_namespace(NAMESPACE).expect("namespace");
    server.create_namespace("apps").expect("namespace");
    server
        .load_crds_from_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../config/crd"))
        .expect("CRDs load");
    create_deployment(&server.client(), "apps", "worker", 0).await;
    Cluster::serve(server, name).await
}

/// The operator, with certificate files nowhere, the metric service on a free port.
fn start_operator(cluster: &Cluster) -> Process {
    Process::start(
        cluster,
        "operator",
        &["--metrics-service-bind-address", "127.0.0.1:0"],
        &[("POD_NAMESPACE", NAMESPACE)],
    )
}

async fn create_scaled_object(client: kube::Client, trigger: &str) {
    let so: ScaledObject = serde_yaml::from_str(&format!(
        r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {{ name: worker, namespace: apps }}
spec:
  scaleTargetRef: {{ name: worker }}
  pollingInterval: 1
  triggers:
{trigger}
"#
    ))
    .expect("ScaledObject");
    Api::<ScaledObject>::namespaced(client, "apps")
        .create(&PostParams::default(), &so)
        .await
        .expect("create ScaledObject");
}

async fn hpa_exists(client: &kube::Client) -> bool {
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(client.clone(), "apps");
    matches!(hpas.get_opt("keda-hpa-worker").await, Ok(Some(_)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_certificate_files_the_binary_creates_the_secrets_and_serves_metrics_through_the_metrics_apiserver()
 {
    use redis::AsyncCommands;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let Some(mut redis) = redis_common::redis_or_skip("binary without certificate files").await
    else {
        return;
    };
    let cluster = cluster("no-files").await;
    let client = cluster.server.client();
    let list = redis_common::unique("certs");
    let _: i64 = redis.rpush(&list, vec!["a"; 7]).await.expect("RPUSH");
    create_scaled_object(
        client.clone(),
        &format!(
            "    - type: redis\n      metadata: {{ address: \"{}\", listName: {list}, listLength: \"5\" }}",
            redis_common::REDIS_ADDRESS
        ),
    )
    .await;

    let mut operator = start_operator(&cluster);
    let metric_service = operator.address("metric service listening", None).await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    for identity in Identity::ALL {
        let secret = secrets
            .get_opt(identity.secret_name())
            .await
            .expect("get")
            .unwrap_or_else(|| panic!("the operator created {}", identity.secret_name()));
        assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    }
    eventually("the HPA exists", Duration::from_secs(20), || {
        let client = client.clone();
        async move { hpa_exists(&client).await }
    })
    .await;

    let serving = CertificateAuthority::new("test-serving-ca").expect("CA");
    let front_proxy = CertificateAuthority::new("test-front-proxy-ca").expect("CA");
    let proxy_client = front_proxy
        .issue_client("front-proxy-client")
        .expect("front proxy certificate");
    let cancel = CancellationToken::new();
    let apiserver = start_metrics_apiserver(
        &cluster,
        metric_service,
        &serving,
        &front_proxy,
        NAMESPACE,
        cancel.clone(),
    )
    .secure;
    let metric = format!("s0-redis-{list}");
    let path = format!(
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/apps/{metric}?labelSelector=scaledobject.keda.sh%2Fname%3Dworker"
    );
    let mut last = None;
    let served = timeout(Duration::from_secs(30), async {
        loop {
            let answer = get_as_hpa(apiserver, &serving, &proxy_client, &path).await;
            if let Some((200, body)) = &answer {
                return body.clone();
            }
            last = answer;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no metric served within 30 s; last answer {last:?}"));
    let list_value: serde_json::Value = serde_json::from_str(&served).expect("JSON");
    assert_eq!(list_value["kind"], "ExternalMetricValueList", "{served}");
    assert_eq!(list_value["items"][0]["value"], "7", "{served}");
    assert_eq!(list_value["items"][0]["metricName"], metric, "{served}");

    cancel.cancel();
    operator.child.start_kill().expect("kill");
    let _: i64 = redis.del(&list).await.expect("DEL");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_secrets_are_forbidden_the_binary_keeps_running_with_the_metric_service_off() {
    let cluster = cluster("forbidden").await;
    // What RBAC answers a service account without access to the namespace's Secrets.
    cluster.server.inject_failure(
        FailureRule::new(403)
            .resource("secrets")
            .namespace(NAMESPACE)
            .message("secrets is forbidden: User \"system:serviceaccount:keda:keda-operator\" cannot get resource \"secrets\" in the namespace \"keda\""),
    );
    let client = cluster.server.client();
    create_scaled_object(
        client.clone(),
        "    - type: cron\n      metadata: { timezone: UTC, start: \"0 0 * * *\", end: \"0 1 * * *\", desiredReplicas: \"2\" }",
    )
    .await;
    let mut operator = start_operator(&cluster);
    let probes = operator
        .address("admin server listening", Some("probes"))
        .await;
    eventually(
        "the ScaledObject is reconciled into an HPA",
        Duration::from_secs(20),
        || {
            let client = client.clone();
            async move { hpa_exists(&client).await }
        },
    )
    .await;
    eventually(
        "the operator warns that the metric service is off",
        Duration::from_secs(10),
        || {
            let seen = !operator.logged("metric service off").is_empty();
            async move { seen }
        },
    )
    .await;
    // Several certificate checks' worth of time later: still one line, still running.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let warnings = operator.logged("metric service off");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0]["level"], "WARN", "{warnings:?}");
    let error = warnings[0]["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("no permission to get Secret keda/keda-rs-certs"),
        "{error}"
    );
    assert!(
        operator.logged("metric service listening").is_empty(),
        "no metric service"
    );
    assert!(
        operator.child.try_wait().expect("status").is_none(),
        "the operator keeps running"
    );
    assert_eq!(get(probes, "/healthz").await.0, 200);
    operator.child.start_kill().expect("kill");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_some_certificate_files_exist_a_missing_one_is_one_line_naming_its_flag() {
    let cluster = cluster("some-files").await;
    // The client CA exists, the serving certificate (default /certs/tls.crt) does not: the files
    // are meant, and the missing one is named.
    let ca = cluster.dir.path().join("ca.crt");
    std::fs::write(&ca, CertificateAuthority::new("ca").expect("CA").cert_pem()).expect("write");
    let ca_flag = format!("--metrics-service-client-ca-file={}", ca.display());
    let output = command(
        &cluster,
        &["--metrics-service-bind-address", "127.0.0.1:0", &ca_flag],
        &[("POD_NAMESPACE", NAMESPACE)],
    )
    .output();
    let output = timeout(Duration::from_secs(30), output)
        .await
        .expect("the operator exits")
        .expect("the binary runs");
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("keda-operator: leader-only component metric-service failed: cannot read the metric service's serving certificate (--metrics-service-cert-file) /certs/tls.crt: "),
        "{stderr}"
    );
}

#[test]
fn a_bad_flag_is_one_line_naming_the_flag_and_help() {
    let output = std::process::Command::new(BINARY)
        .arg("--kube-api-qps=fast")
        .env_clear()
        .output()
        .expect("the binary runs");
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("keda-operator: invalid value 'fast' for '--kube-api-qps <QPS>': ")
            && stderr.ends_with("; see keda-operator --help\n"),
        "{stderr}"
    );
}

#[test]
fn help_lists_the_environment_variables_it_reads() {
    let output = std::process::Command::new(BINARY)
        .arg("--help")
        .output()
        .expect("the binary runs");
    assert_eq!(output.status.code(), Some(0));
    let help = String::from_utf8_lossy(&output.stdout);
    for variable in [
        "WATCH_NAMESPACE",
        "POD_NAMESPACE",
        "POD_NAME",
        "KEDA_CLUSTER_OBJECT_NAMESPACE",
        "KEDA_OPERATOR_LEADER_ELECTION_LEASE_DURATION",
        "KEDA_OPERATOR_LEADER_ELECTION_RENEW_DEADLINE",
        "KEDA_OPERATOR_LEADER_ELECTION_RETRY_PERIOD",
        "RUST_LOG",
        "KUBECONFIG",
    ] {
        assert!(
            help.contains(variable),
            "--help does not name {variable}:\n{help}"
        );
    }
}
