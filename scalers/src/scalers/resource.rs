//! `cpu` and `memory`: no external metric; the HPA reads the pods' usage from metrics.k8s.io.
//! The scaler only contributes a `Resource` (or `ContainerResource`) metric spec, and always
//! reports active, as KEDA does.

use async_trait::async_trait;
use k8s_openapi::api::autoscaling::v2::{
    ContainerResourceMetricSource, MetricSpec, MetricTarget, ResourceMetricSource,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::context::ScalerContext;
use crate::error::{MetadataErrorKind, ScalerError};
use crate::metadata::Param;
use crate::scaler::{BuiltScaler, MetricsAndActivity, Scaler};

const VALUE: Param = Param::required("value");
const CONTAINER_NAME: Param = Param::optional("containerName");
const LEGACY_TYPE: Param = Param::deprecated(
    "type",
    "set the trigger's metricType (Utilization or AverageValue) instead of metadata.type",
);

/// The parameters of `cpu` and `memory`.
pub const PARAMS: &[Param] = &[VALUE, CONTAINER_NAME, LEGACY_TYPE];

/// The resource a trigger scales on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResourceName {
    /// `cpu`.
    Cpu,
    /// `memory`.
    Memory,
}

impl ResourceName {
    fn as_str(self) -> &'static str {
        match self {
            Self::Cpu => "cpu",
            Self::Memory => "memory",
        }
    }
}

/// The parsed target of a resource trigger.
#[derive(Clone, Debug, PartialEq)]
pub enum ResourceTarget {
    /// `metricType: Utilization`: percent of the requests.
    Utilization(i32),
    /// `metricType: AverageValue`: a quantity per pod, e.g. `500m`, `1Gi`.
    AverageValue(Quantity),
}

/// A `cpu` or `memory` trigger.
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceScaler {
    resource: ResourceName,
    target: ResourceTarget,
    container: Option<String>,
}

impl ResourceScaler {
    /// Parses a `cpu`/`memory` trigger.
    ///
    /// # Errors
    /// `metricType` missing or not Utilization/AverageValue; `value` missing or not an integer
    /// percent / a quantity; the removed metadata `type` present.
    pub fn parse(ctx: &ScalerContext, resource: ResourceName) -> Result<Self, ScalerError> {
        Ok(ctx.parse(|p| {
            p.get_opt::<String>(&LEGACY_TYPE)?;
            let container = p.get_opt::<String>(&CONTAINER_NAME)?;
            let metric_type = ctx.metric_type.as_deref().map(str::trim).unwrap_or("");
            let found = p.find(&VALUE)?.ok_or_else(|| {
                p.error(MetadataErrorKind::Missing {
                    param: VALUE.name.to_string(),
                })
            })?;
            let target = match metric_type {
                "Utilization" => ResourceTarget::Utilization(p.parse(&VALUE, found)?),
                "AverageValue" => {
                    if !is_quantity(found.value) {
                        return Err(p.invalid(&VALUE, found, "a valid quantity (e.g. 500m, 1Gi)"));
                    }
                    ResourceTarget::AverageValue(Quantity(found.value.to_string()))
                }
                "" => {
                    return Err(p.rule(
                        "the trigger's metricType is required: Utilization or AverageValue",
                    ));
                }
                other => {
                    return Err(p.rule(format!(
                        "metricType \"{other}\" is not supported; use Utilization or AverageValue"
                    )));
                }
            };
            Ok(Self {
                resource,
                target,
                container,
            })
        })?)
    }
}

/// Whether `s` is a Kubernetes quantity: a decimal number with an optional SI (`m`, `k`, `M`,
/// ...), binary (`Ki`, `Mi`, ...) or exponent (`e3`) suffix.
pub fn is_quantity(s: &str) -> bool {
    crate::metric::parse_quantity(s).is_some()
}

#[async_trait]
impl Scaler for ResourceScaler {
    fn metric_specs(&self) -> Vec<MetricSpec> {
        let target = match &self.target {
            ResourceTarget::Utilization(percent) => MetricTarget {
                type_: "Utilization".to_string(),
                average_utilization: Some(*percent),
                ..MetricTarget::default()
            },
            ResourceTarget::AverageValue(q) => MetricTarget {
                type_: "AverageValue".to_string(),
                average_value: Some(q.clone()),
                ..MetricTarget::default()
            },
        };
        let name = self.resource.as_str().to_string();
        let spec = match &self.container {
            Some(container) => MetricSpec {
                type_: "ContainerResource".to_string(),
                container_resource: Some(ContainerResourceMetricSource {
                    container: container.clone(),
                    name,
                    target,
                }),
                ..MetricSpec::default()
            },
            None => MetricSpec {
                type_: "Resource".to_string(),
                resource: Some(ResourceMetricSource { name, target }),
                ..MetricSpec::default()
            },
        };
        vec![spec]
    }

    /// Always active with no values: the HPA reads resource metrics itself.
    async fn metrics_and_activity(&self, _: &str) -> Result<MetricsAndActivity, ScalerError> {
        Ok(MetricsAndActivity {
            values: Vec::new(),
            active: true,
        })
    }

    async fn close(&self) {}
}

/// Factory of `cpu`.
///
/// # Errors
/// See [`ResourceScaler::parse`].
pub async fn build_cpu(ctx: ScalerContext) -> Result<BuiltScaler, ScalerError> {
    Ok(BuiltScaler::Pull(Box::new(ResourceScaler::parse(
        &ctx,
        ResourceName::Cpu,
    )?)))
}

/// Factory of `memory`.
///
/// # Errors
/// See [`ResourceScaler::parse`].
pub async fn build_memory(ctx: ScalerContext) -> Result<BuiltScaler, ScalerError> {
    Ok(BuiltScaler::Pull(Box::new(ResourceScaler::parse(
        &ctx,
        ResourceName::Memory,
    )?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(metric_type: Option<&str>, metadata: &[(&str, &str)]) -> ScalerContext {
        ScalerContext {
            metric_type: metric_type.map(str::to_string),
            metadata: metadata
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..ScalerContext::new("cpu", 1)
        }
    }

    #[test]
    fn parse_table() {
        // (metricType, metadata, Ok(target, container) or Err(message))
        type Expected = Result<(ResourceTarget, Option<&'static str>), &'static str>;
        type Row = (
            Option<&'static str>,
            Vec<(&'static str, &'static str)>,
            Expected,
        );
        let rows: Vec<Row> = vec![
            (
                Some("Utilization"),
                vec![("value", "60")],
                Ok((ResourceTarget::Utilization(60), None)),
            ),
            (
                Some("AverageValue"),
                vec![("value", "500m"), ("containerName", "app")],
                Ok((
                    ResourceTarget::AverageValue(Quantity("500m".into())),
                    Some("app"),
                )),
            ),
            (
                Some("Utilization"),
                vec![("value", "6.5")],
                Err(r#"trigger 1 (cpu): parameter "value": "6.5" is not a valid integer"#),
            ),
            (
                Some("AverageValue"),
                vec![("value", "lots")],
                Err(
                    r#"trigger 1 (cpu): parameter "value": "lots" is not a valid quantity (e.g. 500m, 1Gi)"#,
                ),
            ),
            (
                None,
                vec![("value", "60")],
                Err(
                    "trigger 1 (cpu): the trigger's metricType is required: Utilization or AverageValue",
                ),
            ),
            (
                Some("Value"),
                vec![("value", "60")],
                Err(
                    r#"trigger 1 (cpu): metricType "Value" is not supported; use Utilization or AverageValue"#,
                ),
            ),
            (
                Some("Utilization"),
                vec![("type", "Utilization"), ("value", "60")],
                Err(
                    r#"trigger 1 (cpu): parameter "type" is no longer supported: set the trigger's metricType (Utilization or AverageValue) instead of metadata.type"#,
                ),
            ),
            (
                Some("Utilization"),
                vec![],
                Err(r#"trigger 1 (cpu): missing required parameter "value""#),
            ),
        ];
        for (i, (metric_type, metadata, expected)) in rows.into_iter().enumerate() {
            let got = ResourceScaler::parse(&ctx(metric_type, &metadata), ResourceName::Cpu)
                .map(|s| (s.target, s.container))
                .map_err(|e| e.to_string());
            let expected = expected
                .map(|(t, c)| (t, c.map(str::to_string)))
                .map_err(str::to_string);
            assert_eq!(got, expected, "row {i}");
        }
    }

    #[test]
    fn quantities() {
        for ok in [
            "1", "500m", "1Gi", "0.5", ".5", "1e3", "+2k", "1.5Mi", "12E",
        ] {
            assert!(is_quantity(ok), "{ok}");
        }
        for bad in ["", "m", "1.2.3", "1Gb", "abc", "1e", "--1", "1 Gi"] {
            assert!(!is_quantity(bad), "{bad}");
        }
    }

    #[tokio::test]
    async fn container_name_gives_a_container_resource_metric() {
        let s = ResourceScaler::parse(
            &ctx(
                Some("Utilization"),
                &[("value", "50"), ("containerName", "app")],
            ),
            ResourceName::Memory,
        )
        .unwrap();
        let spec = &s.metric_specs()[0];
        assert_eq!(spec.type_, "ContainerResource");
        let cr = spec.container_resource.as_ref().unwrap();
        assert_eq!((cr.name.as_str(), cr.container.as_str()), ("memory", "app"));
        assert_eq!(cr.target.average_utilization, Some(50));
        let r = s.metrics_and_activity("").await.unwrap();
        assert!(r.active && r.values.is_empty());
    }
}
