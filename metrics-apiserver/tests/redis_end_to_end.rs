//! A ScaledObject with a Redis trigger, end to end: the redis scaler built from the trigger the
//! way the operator builds it, behind the operator's metric service, behind the
//! metrics-apiserver. Items pushed to the list are the value the HPA reads, in milli-units.

mod common;
#[path = "../../scalers/tests/common/mod.rs"]
#[allow(dead_code)] // The scalers' harness has more than this test needs.
mod scalers_common;

use std::sync::Arc;

use async_trait::async_trait;
use keda_api::ScaledObject;
use keda_api::external_metrics::metric_names_match;
use keda_operator::metrics_service::{MetricValues, MetricsError};
use keda_scalers::{BuiltScaler, MetricValue, Registry, ScalerContext};
use redis::AsyncCommands;

/// The scale loop's scaler of trigger 0, answering the metric service as the operator does.
struct ScalerBacked {
    namespace: String,
    name: String,
    scaler: BuiltScaler,
}

#[async_trait]
impl MetricValues for ScalerBacked {
    async fn metric_values(
        &self,
        namespace: &str,
        scaled_object: &str,
        metric_name: &str,
    ) -> Result<Vec<MetricValue>, MetricsError> {
        if namespace != self.namespace || scaled_object != self.name {
            return Err(MetricsError::ScaledObjectNotFound {
                namespace: namespace.into(),
                name: scaled_object.into(),
            });
        }
        let name = self
            .scaler
            .scaler()
            .metric_specs()
            .into_iter()
            .filter_map(|spec| spec.external.map(|e| e.metric.name))
            .find(|name| metric_names_match(metric_name, name))
            .ok_or_else(|| MetricsError::MetricNotFound {
                namespace: namespace.into(),
                name: scaled_object.into(),
                metric: metric_name.into(),
            })?;
        let answer = self
            .scaler
            .scaler()
            .metrics_and_activity(&name)
            .await
            .map_err(|source| MetricsError::ScalerFailed {
                namespace: namespace.into(),
                name: scaled_object.into(),
                metric: name.clone(),
                source,
            })?;
        Ok(answer.values)
    }
}

#[tokio::test]
async fn the_hpa_reads_the_redis_list_length_in_milli_units() {
    let Some(mut redis) = scalers_common::redis_or_skip("metrics-apiserver redis end to end").await
    else {
        return;
    };
    let list = scalers_common::unique("metrics-apiserver-Jobs");
    let yaml = format!(
        r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: worker
  namespace: apps
spec:
  scaleTargetRef:
    name: worker
  triggers:
    - type: redis
      metadata:
        address: {address}
        listName: {list}
        listLength: "5"
"#,
        address = scalers_common::REDIS_ADDRESS
    );
    let object: ScaledObject = serde_yaml::from_str(&yaml).expect("a KEDA ScaledObject");
    let trigger = &object.spec.triggers[0];
    let mut context = ScalerContext::from_trigger(trigger, 0);
    context.scalable_name = "worker".into();
    context.scalable_namespace = "apps".into();
    let scaler = Registry::builtin()
        .build(context)
        .await
        .expect("the redis trigger builds");
    let stack = common::start(Arc::new(ScalerBacked {
        namespace: "apps".into(),
        name: "worker".into(),
        scaler,
    }))
    .await;

    // The HPA asks with the lower-cased name; the list's name has capitals.
    let metric = format!("s0-redis-{list}").to_lowercase();
    let path = common::metric_path("apps", &metric, "worker");
    for (pushed, expected) in [(0, "0"), (3, "3"), (1, "4")] {
        for i in 0..pushed {
            let _: i64 = redis.rpush(&list, format!("job-{i}")).await.expect("RPUSH");
        }
        let answer = common::get(
            &stack,
            &path,
            Some(&stack.pki.front_proxy),
            &common::as_hpa(),
        )
        .await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        let json = answer.json();
        assert_eq!(json["items"][0]["metricName"], format!("s0-redis-{list}"));
        assert_eq!(
            json["items"][0]["value"], expected,
            "after pushing {pushed}"
        );
    }
    let _: i64 = redis.del(&list).await.expect("DEL");
}
