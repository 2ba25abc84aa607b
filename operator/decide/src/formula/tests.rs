use keda_api::ScaleTrigger;

use super::*;
use crate::fallback::{FallbackBehavior, FallbackSpec, MetricTargetType};

/// A table row: formula result, fallback, target, expected composite value.
type CompositeCase<'a> = (Option<f64>, Option<&'a FallbackSpec>, f64, Option<f64>);

fn trigger(type_: &str, name: &str) -> ScaleTrigger {
    ScaleTrigger {
        type_: type_.into(),
        name: name.into(),
        metadata: Default::default(),
        ..ScaleTrigger::default()
    }
}

#[test]
fn scaling_modifiers_blocks_are_checked_field_by_field() {
    let triggers = [trigger("redis", "queue")];
    let spec = |formula, target, activation_target, metric_type| ScalingModifiersSpec {
        formula,
        target,
        activation_target,
        metric_type,
    };
    let ok = compile_scaling_modifiers(spec("queue / 2", "5", "", ""), &triggers).expect("valid");
    assert_eq!(
        (ok.target, ok.activation_target, ok.metric_type),
        (5.0, 0.0, MetricTargetType::AverageValue)
    );
    let ok =
        compile_scaling_modifiers(spec("queue", "0.5", "2.5", "Value"), &triggers).expect("valid");
    assert_eq!(
        (ok.target, ok.activation_target, ok.metric_type),
        (0.5, 2.5, MetricTargetType::Value)
    );
    // (spec, expected error)
    #[rustfmt::skip]
    let cases = [
        // The formula is required once the block is set.
        (spec("", "5", "", ""), "spec.advanced.scalingModifiers.formula: required when scalingModifiers is set"),
        // A formula needs a target.
        (spec("queue", "", "", ""), "spec.advanced.scalingModifiers.target: required with a formula"),
        // The target must be a number > 0.
        (spec("queue", "0", "", ""), "spec.advanced.scalingModifiers.target: \"0\" is not a number greater than 0"),
        (spec("queue", "five", "", ""), "spec.advanced.scalingModifiers.target: \"five\" is not a number greater than 0"),
        // The activation target must be a number.
        (spec("queue", "5", "x", ""), "spec.advanced.scalingModifiers.activationTarget: \"x\" is not a number"),
        // Utilization is for cpu/memory, never for the composite metric.
        (spec("queue", "5", "", "Utilization"), "spec.advanced.scalingModifiers.metricType: \"Utilization\" is not allowed; use AverageValue or Value"),
        // Formula errors pass through with their own field and position.
        (spec("qeue", "5", "", ""), "spec.advanced.scalingModifiers.formula: unknown trigger name \"qeue\" at column 1; known triggers: queue"),
    ];
    for (s, message) in cases {
        let err = compile_scaling_modifiers(s, &triggers).unwrap_err();
        assert_eq!(err.to_string(), message, "{s:?}");
    }
}

#[test]
fn composite_values_are_clamped_and_nil_means_no_value_unless_fallback_supplies_one() {
    let modifiers_fallback = FallbackSpec {
        failure_threshold: 3,
        replicas: 7,
        behavior: FallbackBehavior::ScalingModifiers,
    };
    let static_fallback = FallbackSpec {
        behavior: FallbackBehavior::Static,
        ..modifiers_fallback
    };
    // (formula result, fallback, target, composite value)
    #[rustfmt::skip]
    let cases: [CompositeCase; 8] = [
        // A positive value passes, truncated to milli-units.
        (Some(2.34567), None, 1.0, Some(2.345)),
        // Negative values clamp to 0.
        (Some(-3.0), None, 1.0, Some(0.0)),
        // NaN and infinity clamp to 0.
        (Some(f64::NAN), None, 1.0, Some(0.0)),
        (Some(f64::INFINITY), None, 1.0, Some(0.0)),
        // nil without fallback: no value.
        (None, None, 2.0, None),
        // nil with a static fallback: no value (static works per metric, not here).
        (None, Some(&static_fallback), 2.0, None),
        // KEDA's evaluator: nil with behavior scalingModifiers is replicas x target = 7 x 2.
        (None, Some(&modifiers_fallback), 2.0, Some(14.0)),
        // A value wins over the fallback.
        (Some(3.0), Some(&modifiers_fallback), 2.0, Some(3.0)),
    ];
    for (result, fallback, target, expected) in cases {
        assert_eq!(
            composite_value(result, fallback, target),
            expected,
            "{result:?}"
        );
    }
}

#[test]
fn composite_activity_is_value_above_activation_target_without_errors() {
    // (composite value, activationTarget, any trigger error, active)
    #[rustfmt::skip]
    let cases = [
        // Default activation target 0: any positive value activates.
        (Some(0.001), 0.0, false, true),
        // Strictly above: equal is not active.
        (Some(0.0), 0.0, false, false),
        (Some(5.0), 5.0, false, false),
        (Some(5.1), 5.0, false, true),
        // No value is not active.
        (None, 0.0, false, false),
        // Any trigger error resets the activity, as KEDA does.
        (Some(10.0), 0.0, true, false),
    ];
    for (value, activation, error, active) in cases {
        assert_eq!(
            composite_is_active(value, activation, error),
            active,
            "{value:?} > {activation} with error={error}"
        );
    }
    assert_eq!(COMPOSITE_METRIC_NAME, "composite-metric");
    assert_eq!(MODIFIERS_TRIGGER, "ModifiersTrigger");
}
