//! `kubernetes-resource`: scales on a number kept in one key of a ConfigMap or Secret of the
//! object's own namespace (KEDA's `kubernetes_resource_scaler.go`).
//!
//! The value is read from the operator's watch of that kind in that namespace
//! ([`crate::cluster::ClusterView::data`]), so a poll makes no API request; only the namespaces
//! whose triggers use it are watched. The key holds a number (`format: number`, read as Go's
//! `fmt.Sscanf` reads a leading `%f` or `%d`, or as a Kubernetes quantity with
//! `valueType: quantity`), or JSON or YAML with `valueLocation` pointing into it (the paths of
//! `metrics-api`). The key's content is never shown in a message: for a Secret it is a secret.

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::cluster::{ClusterView, DataKind, DataLookup};
use crate::context::ScalerContext;
use crate::error::{MetadataErrorKind, ScalerError, TriggerId};
use crate::metadata::Param;
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli, parse_quantity};
use crate::remote::Classify;
use crate::scaler::{BuiltScaler, MetricsAndActivity, Scaler};
use crate::scalers::metrics_api::format::{Format, ValueLocation};
use crate::scalers::metrics_api::json_path::type_name;

const RESOURCE_KIND: Param = Param::required("resourceKind").allowed(&["ConfigMap", "Secret"]);
const RESOURCE_NAME: Param = Param::required("resourceName");
const KEY: Param = Param::required("key");
const FORMAT: Param = Param::optional("format")
    .default("number")
    .allowed(&["number", "json", "yaml"]);
const VALUE_LOCATION: Param = Param::optional("valueLocation");
const VALUE_TYPE: Param = Param::optional("valueType")
    .default("float64")
    .allowed(&["float64", "int64", "quantity"]);
const TARGET_VALUE: Param = Param::optional("targetValue");
const ACTIVATION_TARGET_VALUE: Param = Param::optional("activationTargetValue").default("0");

/// The parameters of `kubernetes-resource`.
pub const PARAMS: &[Param] = &[
    RESOURCE_KIND,
    RESOURCE_NAME,
    KEY,
    FORMAT,
    VALUE_LOCATION,
    VALUE_TYPE,
    TARGET_VALUE,
    ACTIVATION_TARGET_VALUE,
];

/// `valueType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueType {
    /// A float; in JSON or YAML a number, or a string holding a quantity.
    Float64,
    /// An integer; in JSON or YAML a number only (truncated toward zero).
    Int64,
    /// A Kubernetes quantity (`1500m`, `2Ki`); in JSON or YAML also a number.
    Quantity,
}

/// Where the number is in the key.
#[derive(Clone, Debug, PartialEq)]
pub enum Reading {
    /// `format: number`.
    Number,
    /// `format: json` or `yaml` with its `valueLocation`.
    Document(ValueLocation),
}

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct KubernetesResourceConfig {
    /// `resourceKind`.
    pub kind: DataKind,
    /// `resourceName`.
    pub name: String,
    /// `key`.
    pub key: String,
    /// The object's namespace: the only one read.
    pub namespace: String,
    /// `format` and `valueLocation`.
    pub reading: Reading,
    /// `valueType`.
    pub value_type: ValueType,
    /// `targetValue` (0 when the trigger only feeds `scalingModifiers`).
    pub target: f64,
    /// `activationTargetValue`.
    pub activation: f64,
    /// `s<index>-<kind>-<resourceName>-<key>`, normalized.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
}

impl KubernetesResourceConfig {
    /// Parses the trigger with KEDA's rules.
    ///
    /// # Errors
    /// A required parameter missing, a value outside its allowed set, `targetValue` not above 0
    /// (unless the object uses `scalingModifiers`), `valueLocation` with `format: number`, or
    /// missing or invalid with `json`/`yaml`.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let kind = match p.get::<String>(&RESOURCE_KIND)?.as_str() {
                "Secret" => DataKind::Secret,
                _ => DataKind::ConfigMap,
            };
            let name: String = p.get(&RESOURCE_NAME)?;
            let key: String = p.get(&KEY)?;
            let format: String = p.get(&FORMAT)?;
            let location: Option<String> = p.get_opt(&VALUE_LOCATION)?;
            let reading = match (format.as_str(), location) {
                ("number", None) => Reading::Number,
                ("number", Some(_)) => {
                    return Err(p.rule("valueLocation is only supported with format json or yaml"));
                }
                (_, None) => {
                    return Err(p.rule(format!("valueLocation is required with format {format}")));
                }
                (f, Some(location)) => {
                    let format = if f == "json" {
                        Format::Json
                    } else {
                        Format::Yaml
                    };
                    let found = p.find(&VALUE_LOCATION)?.ok_or_else(|| {
                        p.error(MetadataErrorKind::Missing {
                            param: VALUE_LOCATION.name.to_string(),
                        })
                    })?;
                    Reading::Document(ValueLocation::parse(format, &location).map_err(|e| {
                        p.invalid(&VALUE_LOCATION, found, &format!("a path into the {f}: {e}"))
                    })?)
                }
            };
            let value_type = match p.get::<String>(&VALUE_TYPE)?.as_str() {
                "int64" => ValueType::Int64,
                "quantity" => ValueType::Quantity,
                _ => ValueType::Float64,
            };
            let target: f64 = p.get_opt(&TARGET_VALUE)?.unwrap_or(0.0);
            if (target.is_nan() || target <= 0.0) && !ctx.as_metric_source {
                return Err(match p.find(&TARGET_VALUE)? {
                    Some(found) => p.invalid(&TARGET_VALUE, found, "a number above 0"),
                    None => p.error(MetadataErrorKind::Missing {
                        param: TARGET_VALUE.name.to_string(),
                    }),
                });
            }
            Ok(Self {
                metric_name: ctx.metric_name(&format!(
                    "{}-{name}-{key}",
                    kind.as_str().to_ascii_lowercase()
                )),
                kind,
                name,
                key,
                namespace: ctx.scalable_namespace.clone(),
                reading,
                value_type,
                target,
                activation: p.get(&ACTIVATION_TARGET_VALUE)?,
                metric_type,
            })
        })?)
    }

    /// The number in `raw`, the key's content. Messages never quote `raw`.
    ///
    /// # Errors
    /// `raw` holds no number of the `valueType` where the trigger says.
    pub fn value(&self, raw: &[u8]) -> Result<f64, String> {
        match &self.reading {
            Reading::Number => {
                let text = std::str::from_utf8(raw)
                    .map_err(|_| "the value is not UTF-8 text".to_string())?;
                match self.value_type {
                    ValueType::Float64 => leading_float(text),
                    ValueType::Int64 => leading_int(text),
                    ValueType::Quantity => parse_quantity(text.trim()).ok_or_else(|| {
                        format!(
                            "the value ({} bytes) is not a Kubernetes quantity",
                            text.len()
                        )
                    }),
                }
            }
            Reading::Document(location) => {
                if self.value_type == ValueType::Int64 {
                    return integer_at(location, raw);
                }
                location.value(raw)
            }
        }
    }
}

/// Go's `fmt.Sscanf(text, "%f")`: leading white space skipped, then the longest prefix that is
/// a decimal float (sign, digits, point, exponent); what follows is ignored.
fn leading_float(text: &str) -> Result<f64, String> {
    let text = text.trim_start();
    let bytes = text.as_bytes();
    let mut end = 0;
    if end < bytes.len() && matches!(bytes[end], b'+' | b'-') {
        end += 1;
    }
    let digits_start = end;
    while end < bytes.len() && (bytes[end].is_ascii_digit() || bytes[end] == b'.') {
        end += 1;
    }
    if end > digits_start && end < bytes.len() && matches!(bytes[end], b'e' | b'E') {
        let mut exp = end + 1;
        if exp < bytes.len() && matches!(bytes[exp], b'+' | b'-') {
            exp += 1;
        }
        let exp_digits = exp;
        while exp < bytes.len() && bytes[exp].is_ascii_digit() {
            exp += 1;
        }
        if exp > exp_digits {
            end = exp;
        }
    }
    text[..end]
        .parse::<f64>()
        .map_err(|_| "the value does not start with a number".to_string())
}

/// Go's `fmt.Sscanf(text, "%d")`: leading white space skipped, then a signed decimal integer.
fn leading_int(text: &str) -> Result<f64, String> {
    let text = text.trim_start();
    let bytes = text.as_bytes();
    let mut end = usize::from(!bytes.is_empty() && matches!(bytes[0], b'+' | b'-'));
    let digits = end;
    while end < bytes.len() && bytes[end].is_ascii_digit() {
        end += 1;
    }
    if end == digits {
        return Err("the value does not start with an integer".into());
    }
    text[..end]
        .parse::<i64>()
        .map(|n| n as f64)
        .map_err(|_| "the value is an integer out of the int64 range".into())
}

/// With `valueType: int64` KEDA takes a JSON or YAML number only, truncated toward zero.
fn integer_at(location: &ValueLocation, raw: &[u8]) -> Result<f64, String> {
    let found = match location {
        ValueLocation::Json(path) => {
            let doc: serde_json::Value =
                crate::remote::from_json(raw).map_err(|e| format!("the value is {e}"))?;
            path.resolve(&doc)?
        }
        ValueLocation::Yaml(parts) => {
            if let Some(at) = crate::remote::yaml_past_limit(raw) {
                return Err(format!("the value is {at}"));
            }
            // The parser's own message quotes the text: only say that it is not YAML.
            let doc: serde_json::Value = serde_yaml::from_slice(raw)
                .map_err(|_| "the value is not valid YAML (with string keys)".to_string())?;
            walk(&doc, parts)?
        }
        other => return other.value(raw).map(f64::trunc),
    };
    match found {
        serde_json::Value::Number(n) => Ok(n.as_f64().unwrap_or(f64::NAN).trunc()),
        other => Err(format!(
            "valueLocation points to {}, not to a number (valueType int64)",
            type_name(&other)
        )),
    }
}

/// Follows a YAML dot path (mapping keys, sequence indexes).
fn walk(doc: &serde_json::Value, parts: &[String]) -> Result<serde_json::Value, String> {
    let mut current = doc;
    for (i, part) in parts.iter().enumerate() {
        let next = match current {
            serde_json::Value::Object(map) => map.get(part.as_str()),
            serde_json::Value::Array(items) => {
                part.parse::<usize>().ok().and_then(|n| items.get(n))
            }
            _ => None,
        };
        current = next
            .ok_or_else(|| format!("path \"{}\" not found in the YAML", parts[..=i].join(".")))?;
    }
    Ok(current.clone())
}

/// A `kubernetes-resource` scaler reading the operator's watch of the object's namespace.
pub struct KubernetesResourceScaler {
    config: KubernetesResourceConfig,
    trigger: TriggerId,
    cluster: Arc<dyn ClusterView>,
}

impl KubernetesResourceScaler {
    /// Parses the trigger and takes the context's cluster view. Does not read the cluster.
    ///
    /// # Errors
    /// Invalid metadata, or no cluster view in the context.
    pub fn build(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let config = KubernetesResourceConfig::parse(ctx)?;
        let cluster = ctx
            .cluster
            .view()
            .map_err(|e| ScalerError::Connect {
                trigger: ctx.trigger_id(),
                target: format!("the cluster's {}s", config.kind.as_str()),
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
    pub fn config(&self) -> &KubernetesResourceConfig {
        &self.config
    }

    /// The number in the key now.
    ///
    /// # Errors
    /// The watch has not listed in time; the object or key is missing; the key holds no number
    /// where the trigger says. Messages name the object and key, never the key's content.
    pub async fn value(&self) -> Result<f64, ScalerError> {
        let c = &self.config;
        let what = format!(
            "key \"{}\" of {} {}/{}",
            c.key,
            c.kind.as_str(),
            c.namespace,
            c.name
        );
        let found = self
            .cluster
            .data(c.kind, &c.namespace, &c.name, &c.key)
            .await
            .map_err(|e| ScalerError::Query {
                trigger: self.trigger.clone(),
                operation: format!("reading {what}"),
                source: e.classify(),
            })?;
        let unexpected = |message: String| ScalerError::Unexpected {
            trigger: self.trigger.clone(),
            message,
        };
        match found {
            DataLookup::NoObject => Err(unexpected(format!(
                "{} {}/{} (resourceName) does not exist",
                c.kind.as_str(),
                c.namespace,
                c.name
            ))),
            DataLookup::NoKey => Err(unexpected(format!(
                "key \"{}\" (key) not found in {} {}/{}",
                c.key,
                c.kind.as_str(),
                c.namespace,
                c.name
            ))),
            DataLookup::Value(raw) => c
                .value(&raw)
                .map_err(|why| unexpected(format!("{what}: {why}"))),
        }
    }
}

#[async_trait]
impl Scaler for KubernetesResourceScaler {
    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.config.metric_name.clone(),
            metric_target_milli(self.config.metric_type, self.config.target),
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
            self.config.activation,
        ))
    }

    async fn close(&self) {}
}

/// Factory of `kubernetes-resource`.
///
/// # Errors
/// See [`KubernetesResourceScaler::build`].
pub async fn build(ctx: ScalerContext) -> Result<BuiltScaler, ScalerError> {
    Ok(BuiltScaler::Pull(Box::new(
        KubernetesResourceScaler::build(&ctx)?,
    )))
}

#[cfg(test)]
mod tests;
