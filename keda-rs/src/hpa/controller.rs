//! The HPA controller of `keda-rs dev`: every sync period it reads every
//! HorizontalPodAutoscaler, asks for its External metrics as the kube-controller-manager asks
//! the external metrics API, runs [`super::algorithm::sync`], writes the target's `/scale` when
//! the count changes and the HPA's status (current and desired replicas, current metrics,
//! `AbleToScale`, `ScalingActive`, `ScalingLimited`) when it changes.
//!
//! The metric values come from a [`MetricValues`] (in `dev`: the operator's scale loops, in
//! process, the same call the operator's metric service answers the metrics-apiserver with).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::{
    ExternalMetricStatus, HPAScalingRules, HorizontalPodAutoscaler,
    HorizontalPodAutoscalerBehavior, HorizontalPodAutoscalerCondition,
    HorizontalPodAutoscalerStatus, MetricIdentifier, MetricStatus, MetricValueStatus,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use keda_api::annotations::SCALED_OBJECT_NAME_LABEL;
use keda_operator::metrics_service::MetricValues;
use keda_operator::scale_loop::quantity_value;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use kube::{Client, ResourceExt};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::algorithm::{
    Behavior, HpaState, MetricTarget, Policy, PolicyKind, Proposal, Reason, Rules, Select, Spec,
    replicas_for_metric, sync,
};

/// How the controller runs (the kube-controller-manager's `--horizontal-pod-autoscaler-*`).
#[derive(Clone, Copy, Debug)]
pub struct HpaSettings {
    /// `--horizontal-pod-autoscaler-sync-period` (15 s).
    pub sync_period: Duration,
    /// `--horizontal-pod-autoscaler-tolerance` (0.1).
    pub tolerance: f64,
    /// `--horizontal-pod-autoscaler-downscale-stabilization` (300 s), in seconds.
    pub downscale_stabilization_seconds: i32,
}

impl Default for HpaSettings {
    fn default() -> Self {
        HpaSettings {
            sync_period: Duration::from_secs(15),
            tolerance: super::algorithm::DEFAULT_TOLERANCE,
            downscale_stabilization_seconds: super::algorithm::DEFAULT_DOWNSCALE_STABILIZATION_SECS,
        }
    }
}

/// One External metric as the last sync saw it.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricObservation {
    /// The metric name (`s0-redis-jobs`).
    pub name: String,
    /// Its value, `None` when it could not be read.
    pub value: Option<f64>,
    /// Why it could not be read.
    pub error: Option<String>,
    /// Its target.
    pub target: Option<MetricTarget>,
}

/// What the last sync of one HPA found, for the live view.
#[derive(Clone, Debug, PartialEq)]
pub struct HpaObservation {
    /// The ScaledObject the HPA's metrics name (`scaledobject.keda.sh/name`), if any.
    pub scaled_object: Option<String>,
    pub metrics: Vec<MetricObservation>,
    /// The count the HPA decided.
    pub desired: i32,
    /// The target's replicas when it decided.
    pub current: i32,
    pub min_replicas: i32,
    pub max_replicas: i32,
    pub reason: Reason,
    pub at: Timestamp,
}

/// The last observation per HPA `(namespace, name)`. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Observations(Arc<Mutex<BTreeMap<(String, String), HpaObservation>>>);

impl Observations {
    /// A copy of every observation.
    pub fn snapshot(&self) -> BTreeMap<(String, String), HpaObservation> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set(&self, key: (String, String), observation: HpaObservation) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, observation);
    }

    fn retain(&self, keep: impl Fn(&(String, String)) -> bool) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|k, _| keep(k));
    }
}

/// Why one HPA could not be synced.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("HPA {namespace}/{name}: cannot list HorizontalPodAutoscalers: {source}")]
    List {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("HPA {hpa}: scaleTargetRef {kind}/{target}: {source}")]
    Target {
        hpa: String,
        kind: String,
        target: String,
        #[source]
        source: kube::Error,
    },
    #[error("HPA {hpa}: writing status: {source}")]
    Status {
        hpa: String,
        #[source]
        source: kube::Error,
    },
}

/// The controller. Run it with [`HpaController::run`].
pub struct HpaController {
    client: Client,
    values: Arc<dyn MetricValues>,
    settings: HpaSettings,
    states: HashMap<String, HpaState>,
    observations: Observations,
    kinds: HashMap<(String, String), ApiResource>,
}

impl HpaController {
    pub fn new(client: Client, values: Arc<dyn MetricValues>, settings: HpaSettings) -> Self {
        HpaController {
            client,
            values,
            settings,
            states: HashMap::new(),
            observations: Observations::default(),
            kinds: HashMap::new(),
        }
    }

    /// Where the last sync of every HPA is published.
    pub fn observations(&self) -> Observations {
        self.observations.clone()
    }

    /// Syncs every HPA each sync period until `cancel`.
    pub async fn run(mut self, cancel: CancellationToken) {
        let mut ticks = tokio::time::interval(self.settings.sync_period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = ticks.tick() => {}
            }
            self.sync_all().await;
        }
    }

    /// One pass over every HPA.
    pub async fn sync_all(&mut self) {
        let api: Api<HorizontalPodAutoscaler> = Api::all(self.client.clone());
        let hpas = match api.list(&ListParams::default()).await {
            Ok(list) => list.items,
            Err(error) => {
                warn!(%error, "cannot list HorizontalPodAutoscalers");
                return;
            }
        };
        let live: Vec<String> = hpas.iter().map(key).collect();
        self.states.retain(|k, _| live.contains(k));
        self.observations
            .retain(|(ns, name)| live.contains(&format!("{ns}/{name}")));
        for hpa in hpas {
            if let Err(error) = self.sync_one(&hpa).await {
                warn!(error = %keda_cli::one_line(&error), "HPA sync failed");
            }
        }
    }

    async fn sync_one(&mut self, hpa: &HorizontalPodAutoscaler) -> Result<(), SyncError> {
        let namespace = hpa.namespace().unwrap_or_default();
        let name = hpa.name_any();
        let id = key(hpa);
        let Some(hpa_spec) = hpa.spec.as_ref() else {
            return Ok(());
        };
        let target_ref = &hpa_spec.scale_target_ref;
        let api_version = target_ref.api_version.clone().unwrap_or_default();
        let target_error = |source| SyncError::Target {
            hpa: id.clone(),
            kind: target_ref.kind.clone(),
            target: target_ref.name.clone(),
            source,
        };
        let resource = self
            .resource(&api_version, &target_ref.kind)
            .await
            .map_err(target_error)?;
        let targets: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &namespace, &resource);
        let scale = targets
            .get_scale(&target_ref.name)
            .await
            .map_err(target_error)?;
        let spec_replicas = scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        let current = scale.status.as_ref().map_or(0, |s| s.replicas);

        let spec = self.spec_of(hpa);
        // A disabled HPA (target at 0) asks for no metric, as Kubernetes' does not.
        let disabled = spec_replicas == 0 && spec.min_replicas != 0;
        let (metrics, proposals) = if disabled {
            (Vec::new(), Vec::new())
        } else {
            self.read_metrics(hpa, &namespace, current).await
        };
        let now = Timestamp::now();
        let state = self.states.entry(id.clone()).or_default();
        let outcome = sync(&spec, state, spec_replicas, current, &proposals, now);
        let rescale = outcome.rescale(current);
        if rescale {
            let patch = serde_json::json!({ "spec": { "replicas": outcome.desired } });
            targets
                .patch_scale(
                    &target_ref.name,
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
                .map_err(target_error)?;
            state.record_scale(spec.behavior.as_ref(), current, outcome.desired, now);
            debug!(hpa = %id, from = current, to = outcome.desired, reason = outcome.reason.as_str(), "HPA rescaled");
        }
        let scaled_object = hpa_spec
            .metrics
            .iter()
            .flatten()
            .filter_map(|m| m.external.as_ref())
            .find_map(|e| scaled_object_of(&e.metric));
        self.observations.set(
            (namespace.clone(), name.clone()),
            HpaObservation {
                scaled_object,
                metrics: metrics.clone(),
                desired: outcome.desired,
                current,
                min_replicas: spec.min_replicas,
                max_replicas: spec.max_replicas,
                reason: outcome.reason,
                at: now,
            },
        );
        let status = status_of(hpa, &outcome, current, &metrics, rescale, now);
        if status_differs(hpa.status.as_ref(), &status) {
            let api: Api<HorizontalPodAutoscaler> =
                Api::namespaced(self.client.clone(), &namespace);
            let patch = serde_json::json!({ "status": status });
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|source| SyncError::Status {
                    hpa: id.clone(),
                    source,
                })?;
        }
        Ok(())
    }

    /// The API resource of `apiVersion`/`kind`, discovered once.
    async fn resource(
        &mut self,
        api_version: &str,
        kind: &str,
    ) -> Result<ApiResource, kube::Error> {
        let cache_key = (api_version.to_string(), kind.to_string());
        if let Some(found) = self.kinds.get(&cache_key) {
            return Ok(found.clone());
        }
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (resource, _) = kube::discovery::pinned_kind(&self.client, &gvk).await?;
        self.kinds.insert(cache_key, resource.clone());
        Ok(resource)
    }

    fn spec_of(&self, hpa: &HorizontalPodAutoscaler) -> Spec {
        let spec = hpa.spec.clone().unwrap_or_default();
        Spec {
            min_replicas: spec.min_replicas.unwrap_or(1),
            max_replicas: spec.max_replicas,
            behavior: spec
                .behavior
                .as_ref()
                .map(|b| behavior_of(b, self.settings.downscale_stabilization_seconds)),
            tolerance: self.settings.tolerance,
            downscale_stabilization_seconds: self.settings.downscale_stabilization_seconds,
        }
    }

    /// Every metric's value and proposal. Only External metrics are served in `dev` (there are
    /// no pods, so no resource metrics): any other kind is an unreadable metric.
    async fn read_metrics(
        &self,
        hpa: &HorizontalPodAutoscaler,
        namespace: &str,
        current: i32,
    ) -> (Vec<MetricObservation>, Vec<Proposal>) {
        let tolerance = self.spec_of(hpa).tolerance();
        let mut observations = Vec::new();
        let mut proposals = Vec::new();
        let metrics = hpa.spec.as_ref().and_then(|s| s.metrics.as_ref());
        for metric in metrics.into_iter().flatten() {
            let Some(external) = &metric.external else {
                observations.push(MetricObservation {
                    name: metric.type_.clone(),
                    value: None,
                    error: Some(format!(
                        "{} metrics are not served by keda-rs dev (no pods run)",
                        metric.type_
                    )),
                    target: None,
                });
                proposals.push(None);
                continue;
            };
            let name = external.metric.name.clone();
            let target = target_of(&external.target);
            let read = match scaled_object_of(&external.metric) {
                Some(so) => self
                    .values
                    .metric_values(namespace, &so, &name)
                    .await
                    .map(|values| values.iter().map(|v| v.value).sum::<f64>())
                    .map_err(|e| keda_cli::one_line(&e)),
                None => Err(format!(
                    "the metric's selector has no {SCALED_OBJECT_NAME_LABEL} label"
                )),
            };
            let (value, error, proposal) = match (read, target) {
                (Ok(value), Some(target)) => (
                    Some(value),
                    None,
                    Some(replicas_for_metric(
                        current, current, value, target, tolerance,
                    )),
                ),
                (Ok(value), None) => (
                    Some(value),
                    Some("the metric has no target".to_string()),
                    None,
                ),
                (Err(error), _) => (None, Some(error), None),
            };
            observations.push(MetricObservation {
                name,
                value,
                error,
                target,
            });
            proposals.push(proposal);
        }
        (observations, proposals)
    }
}

fn key(hpa: &HorizontalPodAutoscaler) -> String {
    format!("{}/{}", hpa.namespace().unwrap_or_default(), hpa.name_any())
}

fn scaled_object_of(metric: &MetricIdentifier) -> Option<String> {
    metric
        .selector
        .as_ref()?
        .match_labels
        .as_ref()?
        .get(SCALED_OBJECT_NAME_LABEL)
        .cloned()
}

fn target_of(target: &k8s_openapi::api::autoscaling::v2::MetricTarget) -> Option<MetricTarget> {
    let parse = |q: &Option<Quantity>| q.as_ref().and_then(|q| quantity_value(&q.0));
    match target.type_.as_str() {
        "AverageValue" => parse(&target.average_value).map(MetricTarget::AverageValue),
        "Value" => parse(&target.value).map(MetricTarget::Value),
        _ => None,
    }
}

/// `spec.behavior` with Kubernetes' defaults filled in (`GenerateHPAScaleUpRules` /
/// `GenerateHPAScaleDownRules`, and the controller's downscale window when the scale-down
/// window is unset).
pub fn behavior_of(behavior: &HorizontalPodAutoscalerBehavior, downscale_window: i32) -> Behavior {
    let mut down_default = Rules::default_down();
    down_default.stabilization_window_seconds = downscale_window;
    Behavior {
        up: rules_of(behavior.scale_up.as_ref(), Rules::default_up()),
        down: rules_of(behavior.scale_down.as_ref(), down_default),
    }
}

fn rules_of(rules: Option<&HPAScalingRules>, default: Rules) -> Rules {
    let Some(rules) = rules else { return default };
    Rules {
        stabilization_window_seconds: rules
            .stabilization_window_seconds
            .unwrap_or(default.stabilization_window_seconds),
        select: match rules.select_policy.as_deref() {
            Some("Min") => Select::Min,
            Some("Disabled") => Select::Disabled,
            _ => Select::Max,
        },
        policies: match &rules.policies {
            Some(policies) => policies
                .iter()
                .map(|p| Policy {
                    kind: if p.type_ == "Pods" {
                        PolicyKind::Pods
                    } else {
                        PolicyKind::Percent
                    },
                    value: p.value,
                    period_seconds: p.period_seconds,
                })
                .collect(),
            None => default.policies,
        },
        tolerance: rules.tolerance.as_ref().and_then(|q| quantity_value(&q.0)),
    }
}

fn quantity(value: f64) -> Quantity {
    // Milli-units, as the metrics API reports fractional values.
    let milli = keda_api::num::f64_to_i64_saturating((value * 1000.0).round());
    if milli % 1000 == 0 {
        Quantity(format!("{}", milli / 1000))
    } else {
        Quantity(format!("{milli}m"))
    }
}

fn condition(
    type_: &str,
    ok: bool,
    reason: &str,
    message: String,
    now: Timestamp,
) -> HorizontalPodAutoscalerCondition {
    HorizontalPodAutoscalerCondition {
        type_: type_.to_string(),
        status: if ok { "True" } else { "False" }.to_string(),
        reason: Some(reason.to_string()),
        message: Some(message),
        last_transition_time: Some(Time(now)),
    }
}

fn status_of(
    hpa: &HorizontalPodAutoscaler,
    outcome: &super::algorithm::Outcome,
    current: i32,
    metrics: &[MetricObservation],
    rescaled: bool,
    now: Timestamp,
) -> HorizontalPodAutoscalerStatus {
    let previous = hpa.status.clone().unwrap_or_default();
    let reason = outcome.reason;
    let scaling_active = match reason {
        Reason::ScalingDisabled => condition(
            "ScalingActive",
            false,
            "ScalingDisabled",
            "scaling is disabled since the replica count of the target is zero".to_string(),
            now,
        ),
        Reason::MetricsUnavailable => condition(
            "ScalingActive",
            false,
            "FailedGetExternalMetric",
            metrics
                .iter()
                .find_map(|m| m.error.clone())
                .unwrap_or_else(|| "no metric could be read".to_string()),
            now,
        ),
        _ => condition(
            "ScalingActive",
            true,
            "ValidMetricFound",
            "the HPA was able to successfully calculate a replica count from external metrics"
                .to_string(),
            now,
        ),
    };
    let limited = matches!(
        reason,
        Reason::ScaleUpLimit
            | Reason::ScaleDownLimit
            | Reason::TooManyReplicas
            | Reason::TooFewReplicas
    );
    let conditions = vec![
        condition(
            "AbleToScale",
            true,
            if rescaled {
                "SucceededRescale"
            } else {
                "ReadyForNewScale"
            },
            "recommended size matches current size".to_string(),
            now,
        ),
        scaling_active,
        condition(
            "ScalingLimited",
            limited,
            reason.as_str(),
            format!("the desired count is {}", outcome.desired),
            now,
        ),
    ];
    let conditions = conditions
        .into_iter()
        .map(|mut c| {
            // A condition keeps its transition time while its status stays.
            if let Some(old) = previous
                .conditions
                .iter()
                .flatten()
                .find(|o| o.type_ == c.type_ && o.status == c.status)
            {
                c.last_transition_time = old.last_transition_time.clone();
            }
            c
        })
        .collect();
    HorizontalPodAutoscalerStatus {
        current_replicas: Some(current),
        desired_replicas: outcome.desired,
        current_metrics: Some(
            metrics
                .iter()
                .filter(|m| m.target.is_some())
                .map(|m| MetricStatus {
                    type_: "External".to_string(),
                    external: Some(ExternalMetricStatus {
                        metric: MetricIdentifier {
                            name: m.name.clone(),
                            selector: None,
                        },
                        current: MetricValueStatus {
                            value: m.value.map(quantity),
                            average_value: match (m.value, m.target) {
                                (Some(v), Some(MetricTarget::AverageValue(_))) if current > 0 => {
                                    Some(quantity(v / f64::from(current)))
                                }
                                _ => None,
                            },
                            average_utilization: None,
                        },
                    }),
                    ..MetricStatus::default()
                })
                .collect(),
        ),
        last_scale_time: if rescaled {
            Some(Time(now))
        } else {
            previous.last_scale_time
        },
        observed_generation: hpa.metadata.generation,
        conditions: Some(conditions),
    }
}

fn status_differs(
    old: Option<&HorizontalPodAutoscalerStatus>,
    new: &HorizontalPodAutoscalerStatus,
) -> bool {
    old != Some(new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::autoscaling::v2::HPAScalingPolicy;

    #[test]
    fn unset_behavior_fields_get_kubernetes_defaults() {
        // Only scale-down policies given: the window is the controller's, the policy select Max,
        // and scale-up is Kubernetes' default rules.
        let given = HorizontalPodAutoscalerBehavior {
            scale_down: Some(HPAScalingRules {
                policies: Some(vec![HPAScalingPolicy {
                    type_: "Pods".into(),
                    value: 2,
                    period_seconds: 30,
                }]),
                ..HPAScalingRules::default()
            }),
            scale_up: None,
        };
        let behavior = behavior_of(&given, 120);
        assert_eq!(behavior.up, Rules::default_up());
        assert_eq!(behavior.down.stabilization_window_seconds, 120);
        assert_eq!(behavior.down.select, Select::Max);
        assert_eq!(
            behavior.down.policies,
            vec![Policy {
                kind: PolicyKind::Pods,
                value: 2,
                period_seconds: 30,
            }]
        );
    }

    #[test]
    fn select_policy_window_and_tolerance_are_read() {
        let given = HorizontalPodAutoscalerBehavior {
            scale_up: Some(HPAScalingRules {
                select_policy: Some("Disabled".into()),
                stabilization_window_seconds: Some(60),
                tolerance: Some(Quantity("50m".into())),
                policies: None,
            }),
            scale_down: Some(HPAScalingRules {
                select_policy: Some("Min".into()),
                ..HPAScalingRules::default()
            }),
        };
        let behavior = behavior_of(&given, 300);
        assert_eq!(behavior.up.select, Select::Disabled);
        assert_eq!(behavior.up.stabilization_window_seconds, 60);
        assert_eq!(behavior.up.tolerance, Some(0.05));
        assert_eq!(behavior.up.policies, Rules::default_up().policies);
        assert_eq!(behavior.down.select, Select::Min);
        assert_eq!(behavior.down.policies, Rules::default_down().policies);
    }

    #[test]
    fn metric_quantities_are_whole_or_milli() {
        assert_eq!(quantity(20.0).0, "20");
        assert_eq!(quantity(0.324).0, "324m");
        assert_eq!(quantity(f64::NAN).0, "0");
    }
}
