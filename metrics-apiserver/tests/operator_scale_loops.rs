//! The operator's metric service over the real scale loops (memkube + the local Redis), asked
//! through the metrics-apiserver's `OperatorClient`: the value is the list length, read by the
//! loop's own scaler.

mod common;
#[path = "../../scalers/tests/common/mod.rs"]
#[allow(dead_code)] // The scalers' harness has more than this test needs.
mod scalers_common;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use keda_api::ScaledObject;
use keda_metrics_apiserver::operator_client::MetricSource;
use keda_operator::{ControllerConfig, ScaledObjectController};
use kube::Api;
use kube::api::PostParams;
use memkube::MemKube;
use redis::AsyncCommands;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);

#[tokio::test]
async fn the_metric_service_answers_from_the_scale_loop_s_own_scaler() {
    let Some(mut redis) = scalers_common::redis_or_skip("metric service over scale loops").await
    else {
        return;
    };
    let server = MemKube::new();
    server
        .load_crds_from_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../config/crd"))
        .expect("CRDs load");
    server.create_namespace("apps").expect("namespace");
    let client = server.client();
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
    Api::<Deployment>::namespaced(client.clone(), "apps")
        .create(&PostParams::default(), &deployment)
        .await
        .expect("create Deployment");

    let list = scalers_common::unique("metric-service-Jobs");
    let _: i64 = redis
        .rpush(&list, vec!["a", "b", "c"])
        .await
        .expect("RPUSH");
    let controller = ScaledObjectController::new(
        client.clone(),
        ControllerConfig {
            watch_scope: keda_operator::resolve::WatchScope::Namespaces(vec!["apps".into()]),
            ..ControllerConfig::default()
        },
    );
    let loops = controller.loops();
    let cancel = CancellationToken::new();
    let run = tokio::spawn(controller.run(cancel.clone()));
    let yaml = format!(
        r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {{ name: worker, namespace: apps }}
spec:
  scaleTargetRef: {{ name: worker }}
  triggers:
    - type: redis
      metadata:
        address: {address}
        listName: {list}
        listLength: "5"
"#,
        address = scalers_common::REDIS_ADDRESS
    );
    let so: ScaledObject = serde_yaml::from_str(&yaml).expect("ScaledObject");
    Api::<ScaledObject>::namespaced(client.clone(), "apps")
        .create(&PostParams::default(), &so)
        .await
        .expect("create ScaledObject");
    tokio::time::timeout(WAIT, async {
        while !loops.is_running("apps", "worker").await {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the scale loop starts");

    let pki = common::Pki::new();
    let address = common::start_operator(&pki, Arc::new(loops.clone()), cancel.clone()).await;
    let operator = common::operator_client(&pki, address);
    // The HPA asks with the lower-cased name; the list's name has capitals.
    let metric = format!("s0-redis-{list}").to_lowercase();
    let values = operator
        .metric_values("apps", "worker", &metric)
        .await
        .expect("the operator answers");
    assert_eq!(values.len(), 1, "{values:?}");
    assert_eq!(values[0].metric_name, format!("s0-redis-{list}"));
    assert_eq!(values[0].value.0, "3");

    let _: i64 = redis.rpush(&list, "d").await.expect("RPUSH");
    let values = operator
        .metric_values("apps", "worker", &metric)
        .await
        .expect("the operator answers");
    assert_eq!(values[0].value.0, "4", "read live, not cached");

    let missing = operator.metric_values("apps", "nobody", &metric).await;
    assert!(missing.is_err(), "{missing:?}");

    cancel.cancel();
    let _ = tokio::time::timeout(WAIT, run).await;
    let _: i64 = redis.del(&list).await.expect("DEL");
}
