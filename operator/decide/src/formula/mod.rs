//! `spec.advanced.scalingModifiers`: the formula that combines trigger values into one
//! composite metric, and what the operator does with its result.
//!
//! The formula language, its limits and budgets, and the admission check live in
//! [`keda_api::formula`] (re-exported here), so the validation of a ScaledObject, the operator
//! and an admission webhook compile formulas with one implementation. This module adds the
//! rest of the `scalingModifiers` block: [`compile_scaling_modifiers`] validates it as KEDA's
//! webhook does, and [`composite_value`] and [`composite_is_active`] turn a result into the
//! composite metric and its activity.

mod composite;

pub use composite::{
    COMPOSITE_METRIC_NAME, CompiledModifiers, MODIFIERS_TRIGGER, ModifiersError,
    ScalingModifiersSpec, compile_scaling_modifiers, composite_is_active, composite_value,
};
pub use keda_api::formula::{
    Budget, Cost, ErrorKind, Formula, FormulaError, Position, formula_trigger_names,
    validate_formula,
};

#[cfg(test)]
mod tests;
