//! From a formula result to the composite metric and its activity, and the validation of the
//! whole `scalingModifiers` block.
//!
//! * [`compile_scaling_modifiers`] compiles the formula as the admission check does
//!   ([`validate_formula`]: every named trigger that is not `cpu` or `memory` may be used, the
//!   limits and budgets hold, and it evaluates with the dummy value -1 for all of them), and
//!   adds KEDA's checks of `target` (a number > 0, required with a formula),
//!   `activationTarget` (a number, default 0) and `metricType` (`AverageValue` or `Value`;
//!   `Utilization` is rejected).
//! * [`composite_value`] is what the HPA is served as `composite-metric`: the result clamped as
//!   KEDA's quantities are (negative, NaN and infinite values become 0, then milli-units), and a
//!   `nil` result means no value, unless fallback behavior `scalingModifiers` supplies
//!   `fallback.replicas x target` (KEDA's evaluator does the same for a nil result).
//! * [`composite_is_active`] is `getScaledObjectState`'s rule: with `scalingModifiers` the
//!   object is active iff the composite value is `> activationTarget`, whatever the triggers
//!   say, and never while a trigger failed (KEDA resets the activity on error).

use keda_api::ScaleTrigger;
use keda_api::formula::{Formula, FormulaError, validate_formula};

use crate::fallback::{FallbackBehavior, FallbackSpec, MetricTargetType};

/// The HPA metric name of the composite value.
pub const COMPOSITE_METRIC_NAME: &str = "composite-metric";
/// The name KEDA gives the composite trigger in activation events.
pub const MODIFIERS_TRIGGER: &str = "ModifiersTrigger";

/// `spec.advanced.scalingModifiers` as written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScalingModifiersSpec<'a> {
    /// `formula`.
    pub formula: &'a str,
    /// `target`.
    pub target: &'a str,
    /// `activationTarget` (empty: 0).
    pub activation_target: &'a str,
    /// `metricType` (empty: `AverageValue`).
    pub metric_type: &'a str,
}

/// A validated `scalingModifiers` block.
#[derive(Clone, Debug, PartialEq)]
pub struct CompiledModifiers {
    /// The compiled formula.
    pub formula: Formula,
    /// `target`, > 0.
    pub target: f64,
    /// `activationTarget`, default 0.
    pub activation_target: f64,
    /// `metricType` of the composite metric.
    pub metric_type: MetricTargetType,
}

/// A `scalingModifiers` block KEDA would reject.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ModifiersError {
    /// The block is set without a formula.
    #[error("spec.advanced.scalingModifiers.formula: required when scalingModifiers is set")]
    MissingFormula,
    /// A formula without a target.
    #[error("spec.advanced.scalingModifiers.target: required with a formula")]
    MissingTarget,
    /// The formula does not compile or does not run.
    #[error(transparent)]
    Formula(#[from] FormulaError),
    /// The target is not a number > 0.
    #[error("spec.advanced.scalingModifiers.target: {0:?} is not a number greater than 0")]
    InvalidTarget(String),
    /// The activation target is not a number.
    #[error("spec.advanced.scalingModifiers.activationTarget: {0:?} is not a number")]
    InvalidActivationTarget(String),
    /// The metric type is not `AverageValue` or `Value`.
    #[error(
        "spec.advanced.scalingModifiers.metricType: {0:?} is not allowed; use AverageValue or Value"
    )]
    InvalidMetricType(String),
}

/// Validates and compiles the `scalingModifiers` block as KEDA's webhook does.
///
/// # Errors
/// See [`ModifiersError`]: a missing formula or target, a formula that does not compile or
/// does not run with -1 for every trigger, a target that is not a number > 0, an activation
/// target that is not a number, or a metric type other than `AverageValue` / `Value`.
pub fn compile_scaling_modifiers(
    spec: ScalingModifiersSpec<'_>,
    triggers: &[ScaleTrigger],
) -> Result<CompiledModifiers, ModifiersError> {
    if spec.formula.trim().is_empty() {
        return Err(ModifiersError::MissingFormula);
    }
    if spec.target.trim().is_empty() {
        return Err(ModifiersError::MissingTarget);
    }
    let formula = validate_formula(spec.formula, triggers)?;
    let target = parse_number(spec.target)
        .filter(|t| *t > 0.0)
        .ok_or_else(|| ModifiersError::InvalidTarget(spec.target.to_string()))?;
    let activation_target = if spec.activation_target.trim().is_empty() {
        0.0
    } else {
        parse_number(spec.activation_target).ok_or_else(|| {
            ModifiersError::InvalidActivationTarget(spec.activation_target.to_string())
        })?
    };
    let metric_type = match spec.metric_type {
        "" | "AverageValue" => MetricTargetType::AverageValue,
        "Value" => MetricTargetType::Value,
        other => return Err(ModifiersError::InvalidMetricType(other.to_string())),
    };
    Ok(CompiledModifiers {
        formula,
        target,
        activation_target,
        metric_type,
    })
}

/// A finite number as Go's `strconv.ParseFloat` reads a target.
fn parse_number(s: &str) -> Option<f64> {
    s.trim().parse::<f64>().ok().filter(|n| n.is_finite())
}

/// The composite metric value from a formula result: clamped like every KEDA metric value
/// (negative, NaN and infinite -> 0, truncated to milli-units). A `nil` result is no value,
/// unless fallback behavior `scalingModifiers` is configured: then it is
/// `fallback.replicas x target`, which makes the HPA ask for `fallback.replicas`.
pub fn composite_value(
    result: Option<f64>,
    fallback: Option<&FallbackSpec>,
    target: f64,
) -> Option<f64> {
    match result {
        Some(v) => Some(clamp_metric(v)),
        None => fallback
            .filter(|f| {
                f.behavior == FallbackBehavior::ScalingModifiers && f.is_valid(Some(target))
            })
            .map(|f| clamp_metric(f64::from(f.replicas) * target)),
    }
}

fn clamp_metric(v: f64) -> f64 {
    if v.is_finite() && v > 0.0 {
        (v * 1000.0).trunc() / 1000.0
    } else {
        0.0
    }
}

/// Whether an object with `scalingModifiers` is active: its composite value is strictly above
/// `activationTarget` and no trigger failed. This replaces the per-trigger activity.
pub fn composite_is_active(value: Option<f64>, activation_target: f64, any_error: bool) -> bool {
    !any_error && value.is_some_and(|v| v > activation_target)
}
