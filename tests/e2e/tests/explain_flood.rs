//! Issue 30, finding 3, on a real API server: 25 s of 256 concurrent unauthenticated explain
//! requests neither delay a 0 -> 1 beyond 10 s nor lose the Lease.
//!
//! The real `keda-operator` binary runs as a local process against the cluster named by
//! `KEDA_RS_E2E_KUBECONFIG` (build it first: `cargo build -p keda-operator`, or name it with
//! `KEDA_RS_E2E_OPERATOR_BIN`), with its defaults (20 qps, burst 30, explain budget 5 qps,
//! burst 10, client-go's Lease durations), leader election on, watching only the scenario's
//! namespace (`WATCH_NAMESPACE`), its Lease in that namespace. Its explain endpoint listens on
//! loopback; the TokenReviews of the flood go to the real API server. The redis ScaledObject
//! reads the local Redis (127.0.0.1:6379), which the local operator reaches; the cluster never
//! has to reach this machine. The memkube twin of this scenario, which also counts the
//! TokenReviews, is `operator/tests/api_budget.rs`.

#[path = "../../../operator/tests/common/explain_flood.rs"]
mod explain_flood;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use explain_flood::{Answers, flood};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use keda_api::ScaledObject;
use keda_e2e::{OPERATOR_POD_NAME, OperatorProcess, cluster_client, until};
use kube::api::{Api, DeleteParams, GroupVersionKind, PostParams};
use redis::AsyncCommands;

const REDIS: &str = "redis://127.0.0.1:6379/";
const CLIENTS: usize = 256;
const FLOOD: Duration = Duration::from_secs(25);
const FILL_AFTER: Duration = Duration::from_secs(5);
const SCALE_DEADLINE: Duration = Duration::from_secs(10);

async fn lease(leases: &Api<Lease>, name: &str) -> Option<(String, jiff::Timestamp)> {
    let spec = leases.get_opt(name).await.ok().flatten()?.spec?;
    Some((spec.holder_identity?, spec.renew_time?.0))
}

async fn replicas(deployments: &Api<Deployment>) -> Option<i32> {
    deployments.get("worker").await.ok()?.spec?.replicas
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "end-to-end: needs a real cluster named by KEDA_RS_E2E_KUBECONFIG"]
async fn a_flood_of_unauthenticated_explain_requests_neither_delays_scaling_nor_loses_the_lease_on_a_real_cluster()
 {
    let client = cluster_client().await.unwrap_or_else(|e| panic!("{e}"));
    let gvk = GroupVersionKind::gvk("keda.sh", "v1alpha1", "ScaledObject");
    kube::discovery::pinned_kind(&client, &gvk)
        .await
        .expect("the keda.sh CRDs are installed (run the crds test or apply config/crd)");
    let pid = std::process::id();
    let namespace = format!("keda-rs-e2e-explain-flood-{pid}");
    let lease_name = format!("keda-rs-e2e-{pid}");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({
                "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": namespace }
            }))
            .expect("a namespace"),
        )
        .await
        .expect("namespace created");
    let mut redis = redis::Client::open(REDIS)
        .expect("a Redis URL")
        .get_multiplexed_async_connection()
        .await
        .expect("the local Redis at 127.0.0.1:6379");
    let list = format!("keda-rs-e2e-explain-flood-{pid}");
    let _: i64 = redis.del(&list).await.expect("DEL");

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
    let deployment: Deployment = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": "worker" },
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
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .expect("create Deployment");
    let so: ScaledObject = serde_yaml::from_str(&format!(
        r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {{ name: worker }}
spec:
  scaleTargetRef: {{ name: worker }}
  pollingInterval: 1
  triggers:
    - type: redis
      metadata:
        address: 127.0.0.1:6379
        listName: {list}
        listLength: "5"
"#
    ))
    .expect("ScaledObject");
    Api::<ScaledObject>::namespaced(client.clone(), &namespace)
        .create(&PostParams::default(), &so)
        .await
        .expect("create ScaledObject");

    let operator = OperatorProcess::start(
        &namespace,
        &["--leader-elect", "--leader-election-id", &lease_name],
    );
    let explain_addr = operator.explain_addr().await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), &namespace);
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(client.clone(), &namespace);
    until("the HPA exists", Duration::from_secs(60), || async {
        matches!(hpas.get_opt("keda-hpa-worker").await, Ok(Some(_)))
    })
    .await;
    assert_eq!(
        replicas(&deployments).await,
        Some(0),
        "an empty list stays at 0"
    );

    let stop = Arc::new(AtomicBool::new(false));
    let answers = Arc::new(Answers::default());
    let started = Instant::now();
    let path = format!("/explain/v1/namespaces/{namespace}/scaledobjects/worker");
    let attackers = flood(explain_addr, &path, CLIENTS, stop.clone(), answers.clone());
    tokio::time::sleep(FILL_AFTER).await;
    let (_, renewed_before) = lease(&leases, &lease_name).await.expect("the Lease");
    let _: i64 = redis
        .rpush(&list, vec!["a", "b", "c"])
        .await
        .expect("RPUSH");
    let filled = Instant::now();
    let mut scaled_after = None;
    while filled.elapsed() < SCALE_DEADLINE {
        if replicas(&deployments).await == Some(1) {
            scaled_after = Some(filled.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if let Some(rest) = FLOOD.checked_sub(started.elapsed()) {
        tokio::time::sleep(rest).await;
    }
    let lease_at_end = lease(&leases, &lease_name).await;
    stop.store(true, Ordering::Relaxed);
    for attacker in attackers {
        let _ = attacker.await;
    }
    let (refused, total) = answers.refused_of_total();
    println!(
        "flood of {:.1} s: answers by status {:?}, 0 -> 1 after {scaled_after:?}, Lease at the end {lease_at_end:?}",
        started.elapsed().as_secs_f64(),
        answers.get()
    );
    let stepped_down = !operator
        .logged("leader election: leadership lost")
        .is_empty()
        || !operator
            .logged("leader election: no renewal within")
            .is_empty();
    operator.terminate().await;
    let _: i64 = redis.del(&list).await.expect("DEL");
    let _ = namespaces
        .delete(&namespace, &DeleteParams::default())
        .await;

    assert!(
        scaled_after.is_some(),
        "the ScaledObject did not go 0 -> 1 within {SCALE_DEADLINE:?} of its list filling, during the flood"
    );
    let (holder, renewed_at_end) = lease_at_end.expect("the Lease exists");
    assert_eq!(
        holder, OPERATOR_POD_NAME,
        "the leader lost its Lease during the flood"
    );
    assert!(
        renewed_at_end > renewed_before,
        "the Lease was not renewed during the flood"
    );
    assert!(!stepped_down, "the leader stepped down during the flood");
    assert!(
        refused * 10 >= total * 9 && refused >= 1000,
        "the endpoint held the flood instead of answering it: {:?}",
        answers.get()
    );
}
