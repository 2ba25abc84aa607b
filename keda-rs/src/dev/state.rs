//! What the live view shows of each ScaledObject, gathered from the API (the object's status,
//! its HPA, its target's `/scale`), the HPA controller's last sync and the operator's metric
//! values.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use keda_api::ScaledObject;
use keda_api::condition::{CONDITION_ACTIVE, CONDITION_READY, STATUS_TRUE, find_condition};
use keda_operator::metrics_service::MetricValues;
use keda_operator::scale_loop::quantity_value;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use kube::{Client, ResourceExt};

use crate::hpa::Observations;

/// KEDA's default `cooldownPeriod`, in seconds.
const DEFAULT_COOLDOWN_SECS: i64 = 300;

/// One trigger of a ScaledObject as the view shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct TriggerView {
    /// `redis`, `rabbitmq`, ...
    pub trigger_type: String,
    /// The HPA metric name (`s0-redis-jobs`); `None` for cpu/memory.
    pub metric: Option<String>,
    /// The current value (what the HPA is served), or `None` when it cannot be read.
    pub value: Option<f64>,
    /// Why it cannot be read.
    pub error: Option<String>,
    /// The HPA target (`AverageValue`: per replica; `Value`: in total).
    pub target: Option<f64>,
    /// Whether the target is per replica (`AverageValue`).
    pub per_replica: bool,
    /// The activation threshold: the trigger's `activation*` metadata value (KEDA's default 0).
    pub activation: f64,
    /// The operator's verdict (`status.triggersActivity`).
    pub active: Option<bool>,
}

/// One ScaledObject as the view shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct ObjectView {
    pub namespace: String,
    pub name: String,
    /// `Deployment/worker`.
    pub target: String,
    pub triggers: Vec<TriggerView>,
    /// The `Ready` condition's status and message.
    pub ready: Option<(bool, String)>,
    /// The `Active` condition.
    pub active: bool,
    /// The target's `spec.replicas` (what the operator or the HPA last set).
    pub desired: Option<i32>,
    /// The target's `status.replicas`.
    pub current: Option<i32>,
    pub min: i32,
    pub max: i32,
    /// What the HPA decided last and why.
    pub hpa: Option<(i32, &'static str)>,
    /// Time left before an inactive object scales to its minimum.
    pub cooldown_left: Option<SignedDuration>,
    /// `autoscaling.keda.sh/paused*` annotations in force.
    pub paused: bool,
}

/// Gathers every ScaledObject's view.
pub async fn gather(
    client: &Client,
    values: &Arc<dyn MetricValues>,
    observations: &Observations,
    now: Timestamp,
) -> Vec<ObjectView> {
    let objects = match Api::<ScaledObject>::all(client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(list) => list.items,
        Err(_) => return Vec::new(),
    };
    let hpas: BTreeMap<(String, String), HorizontalPodAutoscaler> =
        match Api::<HorizontalPodAutoscaler>::all(client.clone())
            .list(&ListParams::default())
            .await
        {
            Ok(list) => list
                .items
                .into_iter()
                .map(|h| ((h.namespace().unwrap_or_default(), h.name_any()), h))
                .collect(),
            Err(_) => BTreeMap::new(),
        };
    let observed = observations.snapshot();
    let mut views = Vec::new();
    for so in &objects {
        views.push(view_of(client, values, so, &hpas, &observed, now).await);
    }
    views
}

async fn view_of(
    client: &Client,
    values: &Arc<dyn MetricValues>,
    so: &ScaledObject,
    hpas: &BTreeMap<(String, String), HorizontalPodAutoscaler>,
    observed: &BTreeMap<(String, String), crate::hpa::HpaObservation>,
    now: Timestamp,
) -> ObjectView {
    let namespace = so.namespace().unwrap_or_default();
    let name = so.name_any();
    let status = so.status.clone().unwrap_or_default();
    let conditions = status.conditions.clone().unwrap_or_default();
    let ready = find_condition(&conditions, CONDITION_READY).map(|c| {
        (
            c.status == STATUS_TRUE,
            c.message.clone().unwrap_or_default(),
        )
    });
    let active =
        find_condition(&conditions, CONDITION_ACTIVE).is_some_and(|c| c.status == STATUS_TRUE);
    let hpa_name = status
        .hpa_name
        .clone()
        .unwrap_or_else(|| format!("keda-hpa-{name}"));
    let hpa = hpas.get(&(namespace.clone(), hpa_name.clone()));
    let metric_names = status.external_metric_names.clone().unwrap_or_default();
    let mut triggers = Vec::new();
    for (index, trigger) in so.spec.triggers.iter().enumerate() {
        let prefix = format!("s{index}-");
        let metric = metric_names
            .iter()
            .find(|m| m.starts_with(&prefix))
            .cloned();
        // A read counts towards the fallback's failure threshold: with a fallback configured
        // the view does not read itself and shows what the HPA read last instead.
        let hpa_read = metric.as_ref().and_then(|m| {
            observed
                .get(&(namespace.clone(), hpa_name.clone()))
                .and_then(|o| o.metrics.iter().find(|x| &x.name == m))
                .map(|x| (x.value, x.error.clone()))
        });
        let (value, error) = match (&metric, so.spec.fallback.is_some()) {
            (Some(_), true) => hpa_read.unwrap_or((None, None)),
            (Some(m), false) => match values.metric_values(&namespace, &name, m).await {
                Ok(v) => (Some(v.iter().map(|v| v.value).sum::<f64>()), None),
                Err(e) => (None, Some(keda_cli::one_line(&e))),
            },
            (None, _) => (None, None),
        };
        let (target, per_replica) = metric
            .as_ref()
            .and_then(|m| hpa.and_then(|h| hpa_target(h, m)))
            .unwrap_or((None, true));
        let activation = trigger
            .metadata
            .iter()
            .find(|(k, _)| k.starts_with("activation"))
            .and_then(|(_, v)| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0);
        let active = metric.as_ref().and_then(|m| {
            status
                .triggers_activity
                .as_ref()
                .and_then(|a| a.get(m))
                .map(|a| a.is_active)
        });
        triggers.push(TriggerView {
            trigger_type: trigger.type_.clone(),
            metric,
            value,
            error,
            target,
            per_replica,
            activation,
            active,
        });
    }
    let target_ref = &so.spec.scale_target_ref;
    let kind = target_ref
        .kind
        .clone()
        .unwrap_or_else(|| "Deployment".to_string());
    let api_version = target_ref
        .api_version
        .clone()
        .unwrap_or_else(|| "apps/v1".to_string());
    let (desired, current) =
        replicas(client, &namespace, &api_version, &kind, &target_ref.name).await;
    let min = so.spec.min_replica_count.unwrap_or(0);
    let max = so.spec.max_replica_count.unwrap_or(100);
    let annotations = so.annotations();
    let paused = annotations.contains_key(keda_decide::scale::ANNOTATION_PAUSED_REPLICAS)
        || annotations
            .get("autoscaling.keda.sh/paused")
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let cooldown_left = match (active, current, status.last_active_time.as_ref()) {
        (false, Some(current), Some(last)) if current > min && !paused => {
            let cooldown = so
                .spec
                .cooldown_period
                .map_or(DEFAULT_COOLDOWN_SECS, i64::from);
            let ends = last.0.checked_add(SignedDuration::from_secs(cooldown)).ok();
            ends.map(|ends| ends.duration_since(now).max(SignedDuration::ZERO))
        }
        _ => None,
    };
    let hpa_decision = observed
        .get(&(namespace.clone(), hpa_name))
        .map(|o| (o.desired, o.reason.as_str()));
    ObjectView {
        namespace,
        name,
        target: format!("{kind}/{}", target_ref.name),
        triggers,
        ready,
        active,
        desired,
        current,
        min,
        max,
        hpa: hpa_decision,
        cooldown_left,
        paused,
    }
}

/// The HPA's target for `metric`: `(value, per replica)`.
fn hpa_target(hpa: &HorizontalPodAutoscaler, metric: &str) -> Option<(Option<f64>, bool)> {
    let external = hpa
        .spec
        .as_ref()?
        .metrics
        .iter()
        .flatten()
        .filter_map(|m| m.external.as_ref())
        .find(|e| e.metric.name == metric)?;
    let t = &external.target;
    let parse = |q: &Option<k8s_openapi::apimachinery::pkg::api::resource::Quantity>| {
        q.as_ref().and_then(|q| quantity_value(&q.0))
    };
    Some(if t.type_ == "Value" {
        (parse(&t.value), false)
    } else {
        (parse(&t.average_value), true)
    })
}

/// The target's `(spec.replicas, status.replicas)` from its `/scale`.
async fn replicas(
    client: &Client,
    namespace: &str,
    api_version: &str,
    kind: &str,
    name: &str,
) -> (Option<i32>, Option<i32>) {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let Ok((resource, _)) = kube::discovery::pinned_kind(client, &gvk).await else {
        return (None, None);
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    match api.get_scale(name).await {
        Ok(scale) => (
            scale.spec.and_then(|s| s.replicas),
            scale.status.map(|s| s.replicas),
        ),
        Err(_) => (None, None),
    }
}
