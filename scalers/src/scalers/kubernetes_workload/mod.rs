//! `kubernetes-workload`: scales on the number of pods of the object's namespace that a label
//! selector matches and that are not finished. Compatible with KEDA's `kubernetes-workload`
//! trigger (`pkg/scalers/kubernetes_workload_scaler.go`).
//!
//! KEDA lists the pods on every poll of every object; here every trigger reads the operator's
//! one shared pod watch ([`crate::cluster::ClusterView`]), so a poll makes no API request.

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::cluster::{ClusterView, LabelSelector};
use crate::context::ScalerContext;
use crate::error::{MetadataErrorKind, ScalerError, TriggerId};
use crate::metadata::Param;
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::remote::Classify;
use crate::scaler::{BuiltScaler, MetricsAndActivity, Scaler};

const POD_SELECTOR: Param = Param::required("podSelector");
const VALUE: Param = Param::optional("value").default("0");
const ACTIVATION_VALUE: Param = Param::optional("activationValue").default("0");
const GROUP_BY_NODE: Param = Param::optional("groupByNode").default("false");

/// The parameters of `kubernetes-workload`.
pub const PARAMS: &[Param] = &[POD_SELECTOR, VALUE, ACTIVATION_VALUE, GROUP_BY_NODE];

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct KubernetesWorkloadConfig {
    /// `podSelector`, parsed.
    pub pod_selector: LabelSelector,
    /// The namespace whose pods are counted: the ScaledObject's.
    pub namespace: String,
    /// Target value per replica (0 when the trigger only feeds `scalingModifiers`).
    pub value: f64,
    /// Active iff the count is above this.
    pub activation_value: f64,
    /// Count distinct nodes of the matching pods instead of the pods.
    pub group_by_node: bool,
    /// `s<index>-workload-<namespace>`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
}

impl KubernetesWorkloadConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// `podSelector` missing or not a valid label selector; `value` not a number above 0
    /// (unless the object uses `scalingModifiers`); `activationValue` or `groupByNode`
    /// malformed.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let found = p.find(&POD_SELECTOR)?.ok_or_else(|| {
                p.error(MetadataErrorKind::Missing {
                    param: POD_SELECTOR.name.to_string(),
                })
            })?;
            let pod_selector = LabelSelector::parse(found.value).map_err(|e| {
                p.invalid(
                    &POD_SELECTOR,
                    found,
                    &format!("a valid label selector: {e}"),
                )
            })?;
            let value: f64 = p.get(&VALUE)?;
            if (value.is_nan() || value <= 0.0) && !ctx.as_metric_source {
                let found = p.find(&VALUE)?;
                return Err(match found {
                    Some(found) => p.invalid(&VALUE, found, "a number above 0"),
                    None => p.error(MetadataErrorKind::Missing {
                        param: VALUE.name.to_string(),
                    }),
                });
            }
            Ok(Self {
                pod_selector,
                namespace: ctx.scalable_namespace.clone(),
                value,
                activation_value: p.get(&ACTIVATION_VALUE)?,
                group_by_node: p.get(&GROUP_BY_NODE)?,
                metric_name: ctx.metric_name(&format!("workload-{}", ctx.scalable_namespace)),
                metric_type,
            })
        })?)
    }
}

/// A `kubernetes-workload` scaler reading the shared pod watch.
pub struct KubernetesWorkloadScaler {
    config: KubernetesWorkloadConfig,
    trigger: TriggerId,
    cluster: Arc<dyn ClusterView>,
}

impl KubernetesWorkloadScaler {
    /// Parses the trigger and takes the context's cluster view. Does not read the cluster.
    ///
    /// # Errors
    /// Invalid metadata, or no cluster view in the context.
    pub fn build(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let config = KubernetesWorkloadConfig::parse(ctx)?;
        let cluster = ctx
            .cluster
            .view()
            .map_err(|e| ScalerError::Connect {
                trigger: ctx.trigger_id(),
                target: "the cluster's pods".into(),
                source: e.classify(),
            })?
            .clone();
        Ok(Self {
            config,
            trigger: ctx.trigger_id(),
            cluster,
        })
    }

    /// The parsed trigger.
    pub fn config(&self) -> &KubernetesWorkloadConfig {
        &self.config
    }

    /// The number of matching unfinished pods (or of their distinct nodes with
    /// `groupByNode`).
    ///
    /// # Errors
    /// The shared pod watch has not listed in time; the message names the selector and the
    /// namespace.
    pub async fn value(&self) -> Result<f64, ScalerError> {
        let count = self
            .cluster
            .count_pods(&self.config.namespace, &self.config.pod_selector)
            .await
            .map_err(|e| ScalerError::Query {
                trigger: self.trigger.clone(),
                operation: format!(
                    "counting the pods matching podSelector \"{}\" in namespace {}",
                    self.config.pod_selector, self.config.namespace
                ),
                source: e.classify(),
            })?;
        let n = if self.config.group_by_node {
            count.nodes
        } else {
            count.pods
        };
        // Counts stay far below 2^53, where f64 is exact.
        #[allow(clippy::cast_precision_loss)]
        let value = n as f64;
        Ok(value)
    }
}

#[async_trait]
impl Scaler for KubernetesWorkloadScaler {
    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.config.metric_name.clone(),
            metric_target_milli(self.config.metric_type, self.config.value),
        )]
    }

    async fn metrics_and_activity(
        &self,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let value = self.value().await?;
        Ok(MetricsAndActivity::single(
            metric_name,
            value,
            self.config.activation_value,
        ))
    }

    async fn close(&self) {}
}

/// Factory of `kubernetes-workload`.
///
/// # Errors
/// See [`KubernetesWorkloadScaler::build`].
pub async fn build(ctx: ScalerContext) -> Result<BuiltScaler, ScalerError> {
    Ok(BuiltScaler::Pull(Box::new(
        KubernetesWorkloadScaler::build(&ctx)?,
    )))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::cluster::{ClusterHandle, InMemoryCluster};

    fn ctx(metadata: &[(&str, &str)]) -> ScalerContext {
        ScalerContext {
            scalable_namespace: "Team.A".into(),
            metadata: metadata
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..ScalerContext::new("kubernetes-workload", 2)
        }
    }

    #[test]
    fn metric_name_and_target_follow_keda() {
        let config = KubernetesWorkloadConfig::parse(&ctx(&[
            ("podSelector", "app=web"),
            ("value", "2.5"),
            ("activationValue", "1"),
        ]))
        .unwrap();
        assert_eq!(config.metric_name, "s2-workload-Team-A");
        let target = metric_target_milli(config.metric_type, config.value);
        assert_eq!(target.average_value.map(|q| q.0), Some("2500m".into()));
        assert_eq!(config.activation_value, 1.0);
        assert!(!config.group_by_node);
        assert_eq!(config.namespace, "Team.A");
    }

    #[test]
    fn value_is_optional_only_for_scaling_modifiers() {
        let metadata = [("podSelector", "app=web")];
        let err = KubernetesWorkloadConfig::parse(&ctx(&metadata)).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"trigger 2 (kubernetes-workload): missing required parameter "value""#
        );
        let source = ScalerContext {
            as_metric_source: true,
            ..ctx(&metadata)
        };
        assert_eq!(KubernetesWorkloadConfig::parse(&source).unwrap().value, 0.0);
    }

    #[test]
    fn errors_name_the_parameter() {
        let base = [("podSelector", "app=web"), ("value", "1")];
        // (metadata replacing the base entries, error)
        let rows: &[(&[(&str, &str)], &str)] = &[
            (
                &[("podSelector", "")],
                r#"trigger 2 (kubernetes-workload): missing required parameter "podSelector""#,
            ),
            (
                &[("podSelector", "app in (a")],
                r#"trigger 2 (kubernetes-workload): parameter "podSelector": "app in (a" is not a valid label selector: the set of values of key "app" is not closed with ")""#,
            ),
            (
                &[("value", "0")],
                r#"trigger 2 (kubernetes-workload): parameter "value": "0" is not a number above 0"#,
            ),
            (
                &[("value", "-1")],
                r#"trigger 2 (kubernetes-workload): parameter "value": "-1" is not a number above 0"#,
            ),
            (
                &[("value", "many")],
                r#"trigger 2 (kubernetes-workload): parameter "value": "many" is not a valid number"#,
            ),
            (
                &[("activationValue", "x")],
                r#"trigger 2 (kubernetes-workload): parameter "activationValue": "x" is not a valid number"#,
            ),
            (
                &[("groupByNode", "yes")],
                r#"trigger 2 (kubernetes-workload): parameter "groupByNode": "yes" is not a valid boolean"#,
            ),
        ];
        for (i, (changes, expected)) in rows.iter().enumerate() {
            let mut metadata: BTreeMap<&str, &str> = base.iter().copied().collect();
            metadata.extend(changes.iter().copied());
            let pairs: Vec<(&str, &str)> = metadata.into_iter().collect();
            let err = KubernetesWorkloadConfig::parse(&ctx(&pairs)).expect_err("invalid");
            assert_eq!(err.to_string(), *expected, "row {i}");
        }
    }

    fn pod(name: &str, labels: &[(&str, &str)], node: &str, phase: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                namespace: Some("Team.A".into()),
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some(node.into()),
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
        }
    }

    #[tokio::test]
    async fn counts_unfinished_matching_pods_or_their_nodes() {
        let cluster = Arc::new(InMemoryCluster::new());
        let with = |metadata: &[(&str, &str)]| ScalerContext {
            cluster: ClusterHandle::new(cluster.clone()),
            ..ctx(metadata)
        };
        let pods = KubernetesWorkloadScaler::build(&with(&[
            ("podSelector", "app in (web,api),tier!=debug"),
            ("value", "1"),
            ("activationValue", "2"),
        ]))
        .unwrap();
        let nodes = KubernetesWorkloadScaler::build(&with(&[
            ("podSelector", "app in (web,api),tier!=debug"),
            ("value", "1"),
            ("groupByNode", "true"),
        ]))
        .unwrap();
        let name = pods.config().metric_name.clone();
        let got = pods.metrics_and_activity(&name).await.unwrap();
        assert_eq!((got.values[0].value, got.active), (0.0, false));
        cluster.apply_pod(&pod("w1", &[("app", "web")], "n1", "Running"));
        cluster.apply_pod(&pod("w2", &[("app", "api")], "n1", "Pending"));
        cluster.apply_pod(&pod("w3", &[("app", "web")], "n2", "Running"));
        cluster.apply_pod(&pod(
            "d1",
            &[("app", "web"), ("tier", "debug")],
            "n3",
            "Running",
        ));
        cluster.apply_pod(&pod("j1", &[("app", "web")], "n4", "Succeeded"));
        cluster.apply_pod(&pod("o1", &[("app", "other")], "n5", "Running"));
        let got = pods.metrics_and_activity(&name).await.unwrap();
        // 3 pods > activationValue 2: active.
        assert_eq!((got.values[0].value, got.active), (3.0, true));
        assert_eq!(nodes.value().await.unwrap(), 2.0);
        cluster.apply_pod(&pod("w3", &[("app", "web")], "n2", "Failed"));
        let got = pods.metrics_and_activity(&name).await.unwrap();
        // 2 is not above 2: inactive.
        assert_eq!((got.values[0].value, got.active), (2.0, false));
        assert_eq!(nodes.value().await.unwrap(), 1.0);
    }

    #[test]
    fn building_without_a_cluster_view_says_so() {
        let err = KubernetesWorkloadScaler::build(&ctx(&[("podSelector", "app"), ("value", "1")]))
            .err()
            .expect("no cluster view");
        assert!(
            err.to_string().starts_with(
                "trigger 2 (kubernetes-workload): connecting to the cluster's pods failed: no cluster view"
            ),
            "{err}"
        );
    }
}
