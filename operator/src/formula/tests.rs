use std::collections::BTreeMap;

use keda_api::ScaleTrigger;

use super::*;
use crate::fallback::{FallbackBehavior, FallbackSpec, MetricTargetType};

const NAMES: [&str; 3] = ["trig_one", "trig_two", "trig_three"];

/// A table row: formula, the three trigger values, the expected result.
type EvalCase = (&'static str, [Option<f64>; 3], Option<f64>);
/// A table row: formula result, fallback, target, expected composite value.
type CompositeCase<'a> = (Option<f64>, Option<&'a FallbackSpec>, f64, Option<f64>);

fn eval(formula: &str, values: [Option<f64>; 3]) -> Result<Option<f64>, FormulaError> {
    Formula::compile(formula, &NAMES)?.evaluate(&values)
}

#[test]
fn formulas_from_keda_docs_and_expr_lang_evaluate_like_expr_lang() {
    // (formula, trig_one, trig_two, trig_three, expected result)
    #[rustfmt::skip]
    let cases: &[EvalCase] = &[
        // KEDA docs: the sum of two triggers.
        ("trig_one + trig_two", [Some(2.0), Some(5.0), None], Some(7.0)),
        // KEDA docs: the average of two triggers; `/` divides as floats.
        ("(trig_one + trig_two)/2", [Some(2.0), Some(5.0), None], Some(3.5)),
        // KEDA docs: a condition picks a trigger.
        ("trig_one > 2 ? trig_one : trig_two", [Some(3.0), Some(5.0), None], Some(3.0)),
        ("trig_one > 2 ? trig_one : trig_two", [Some(2.0), Some(5.0), None], Some(5.0)),
        // KEDA docs: a condition picks a constant.
        ("trig_one < 2 ? trig_one + trig_two >= 2 ? 5 : 10 : 0", [Some(1.0), Some(1.0), None], Some(5.0)),
        // KEDA docs: count the triggers above 1 with a braced predicate.
        ("count([trig_one,trig_two,trig_three],{#>1}) > 1 ? 5 : 0", [Some(2.0), Some(3.0), Some(0.0)], Some(5.0)),
        ("count([trig_one,trig_two,trig_three],{#>1}) > 1 ? 5 : 0", [Some(2.0), Some(1.0), Some(0.0)], Some(0.0)),
        // Fallback behavior scalingModifiers: nil takes the default after `??`.
        ("trig_one ?? 5", [None, Some(1.0), None], Some(5.0)),
        ("trig_one ?? 5", [Some(2.0), Some(1.0), None], Some(2.0)),
        // `??` binds tighter than `+` (expr-lang precedence 500).
        ("trig_one ?? 0 + 1", [None, None, None], Some(1.0)),
        // Chained defaults; all nil gives nil, which is "no value".
        ("trig_one ?? trig_two", [None, None, None], None),
        ("trig_one ?? trig_two ?? 7", [None, None, None], Some(7.0)),
        // max/min of numbers and of arrays.
        ("max([trig_one, trig_two])", [Some(2.0), Some(5.0), None], Some(5.0)),
        ("max(trig_one, trig_two)", [Some(2.0), Some(5.0), None], Some(5.0)),
        ("min(trig_one, [trig_two, 1])", [Some(2.0), Some(5.0), None], Some(1.0)),
        // Aggregates over arrays.
        ("sum([trig_one, trig_two, trig_three])", [Some(1.0), Some(2.0), Some(3.0)], Some(6.0)),
        ("avg([trig_one, trig_two])", [Some(1.0), Some(2.0), None], Some(1.5)),
        ("mean([trig_one, trig_two, trig_three])", [Some(1.0), Some(2.0), Some(6.0)], Some(3.0)),
        ("median([trig_one, trig_two, trig_three])", [Some(9.0), Some(1.0), Some(2.0)], Some(2.0)),
        ("len([trig_one, trig_two])", [None, None, None], Some(2.0)),
        ("sum(filter([trig_one, trig_two, trig_three], # > 1))", [Some(1.0), Some(2.0), Some(3.0)], Some(5.0)),
        ("sum(map([trig_one, trig_two], # * 2))", [Some(1.0), Some(2.0), None], Some(6.0)),
        ("count([trig_one > 1, trig_two > 1])", [Some(2.0), Some(2.0), None], Some(2.0)),
        ("any([trig_one, trig_two], # > 4) ? 1 : 0", [Some(2.0), Some(5.0), None], Some(1.0)),
        ("all([trig_one, trig_two], # > 4) ? 1 : 0", [Some(2.0), Some(5.0), None], Some(0.0)),
        ("none([trig_one], # > 4) && one([trig_two], # > 4) ? 1 : 0", [Some(2.0), Some(5.0), None], Some(1.0)),
        // Nested predicates: `#` is the innermost element.
        ("count(map([1, 2], count([1, 2, 3], # > 1)), # == 2)", [None, None, None], Some(2.0)),
        // Number functions: round is half away from zero, int truncates.
        ("round(2.5) + round(-2.5) + ceil(1.2) + floor(1.8) + abs(-3)", [None, None, None], Some(6.0)),
        ("int(trig_one) + float(trig_two)", [Some(2.9), Some(0.5), None], Some(2.5)),
        // Arithmetic precedence: `**` is right associative and binds tighter than unary minus.
        ("-2 ** 2", [None, None, None], Some(-4.0)),
        ("2 ^ 3 ^ 2", [None, None, None], Some(512.0)),
        ("1 + 2 * 3 - 4 / 2", [None, None, None], Some(5.0)),
        // `%` is integer modulus; its sign follows the dividend as in Go.
        ("-7 % 3", [None, None, None], Some(-1.0)),
        // Boolean words and symbols; `!` binds looser than comparison operands.
        ("trig_one > 1 and not (trig_two > 1) || false ? 1 : 0", [Some(2.0), Some(0.0), None], Some(1.0)),
        ("!(trig_one == nil) ? 1 : 0", [Some(2.0), None, None], Some(1.0)),
        ("trig_two == nil ? -1 : trig_two", [None, None, None], Some(-1.0)),
        // `in` checks membership.
        ("trig_one in [1, 2] ? 10 : 20", [Some(2.0), None, None], Some(10.0)),
        // Comments and multi-line formulas (YAML block scalars) are fine.
        ("// queue plus lag\ntrig_one +\n  /* lag */ trig_two", [Some(1.0), Some(2.0), None], Some(3.0)),
        // Division by zero is infinite, as in expr-lang (the composite value clamps it).
        ("trig_one / trig_two", [Some(1.0), Some(0.0), None], Some(f64::INFINITY)),
        // A short-circuited side is not evaluated, so nil there is no error.
        ("false && trig_one > 1 ? 1 : 2", [None, None, None], Some(2.0)),
    ];
    for (formula, values, expected) in cases {
        assert_eq!(
            eval(formula, *values),
            Ok(*expected),
            "{formula} with {values:?}"
        );
    }
}

#[test]
fn errors_name_the_field_the_position_and_what_is_wrong() {
    // (formula, trig_one, expected message after the field prefix)
    #[rustfmt::skip]
    let cases: &[(&str, Option<f64>, &str)] = &[
        // A misspelt trigger name lists the known ones.
        ("qeue + 1", Some(1.0), "unknown trigger name \"qeue\" at column 1; known triggers: trig_one, trig_two, trig_three"),
        // An unknown function lists the known ones.
        ("sqrt(trig_one)", Some(1.0), "unknown function \"sqrt\" at column 1; known functions: abs, all, any, avg, ceil, count, filter, float, floor, int, len, map, max, mean, median, min, none, one, round, sum"),
        // Syntax: a missing operand.
        ("trig_one +", Some(1.0), "expected a number, a trigger name, `(` or `[`, found the end of the formula at column 11"),
        // Syntax: an unclosed parenthesis.
        ("(trig_one + 1", Some(1.0), "expected `)`, found the end of the formula at column 14"),
        // Syntax: two values without an operator.
        ("trig_one trig_two", Some(1.0), "expected an operator or the end of the formula, found name `trig_two` at column 10"),
        // Syntax: a ternary without its `:`.
        ("trig_one > 1 ? 2", Some(1.0), "expected `:` of the ternary `cond ? a : b`, found the end of the formula at column 17"),
        // Strings are not part of the language.
        ("trig_one + \"1\"", Some(1.0), "strings are not supported: a formula computes a number from trigger values at column 12"),
        // Wrong argument counts are caught at compile time.
        ("abs(1, 2)", Some(1.0), "abs() takes 1 argument(s), found 2 at column 1"),
        ("filter([1])", Some(1.0), "filter() takes 2 argument(s), found 1 at column 1"),
        // `#` outside a predicate.
        ("# + 1", Some(1.0), "`#` is only meaningful inside the predicate of filter, map, count, all, any, none or one at column 1"),
        // The empty formula.
        ("  ", Some(1.0), "the formula is empty"),
        // Arithmetic on nil suggests `??`.
        ("trig_one + 1", None, "cannot apply `+` to nil and number at column 10; a trigger is nil while its metric fails under fallback behavior scalingModifiers: give it a default with `??`"),
        // A number as a ternary condition.
        ("trig_one ? 1 : 2", Some(1.0), "the condition of `? :` must be a bool, found number at column 10"),
        // Bool arithmetic.
        ("(trig_one > 1) * 2", Some(1.0), "cannot apply `*` to bool and number at column 16"),
        // `%` by zero and on fractions.
        ("trig_one % 0", Some(1.0), "`%` by zero: 1 % 0 at column 10"),
        ("trig_one % 2", Some(1.5), "`%` needs whole numbers, found 1.5 % 2 at column 10"),
        // max of nothing.
        ("max([])", Some(1.0), "max() of an empty array at column 1"),
        // A bool result is not a metric value (KEDA wraps the formula in float()).
        ("trig_one > 1", Some(2.0), "the formula must evaluate to a number (or nil), but it evaluates to a bool"),
        // An array result neither.
        ("[trig_one]", Some(2.0), "the formula must evaluate to a number (or nil), but it evaluates to an array"),
        // Positions name the line in multi-line formulas.
        ("trig_one +\n  qeue", Some(1.0), "unknown trigger name \"qeue\" at line 2, column 3; known triggers: trig_one, trig_two, trig_three"),
    ];
    for (formula, one, message) in cases {
        let err = eval(formula, [*one, Some(1.0), Some(1.0)]).expect_err(formula);
        assert_eq!(
            err.to_string(),
            format!("spec.advanced.scalingModifiers.formula: {message}"),
            "{formula}"
        );
    }
}

#[test]
fn an_unknown_name_with_no_named_trigger_says_to_name_the_triggers() {
    let err = Formula::compile::<&str>("queue", &[]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "spec.advanced.scalingModifiers.formula: unknown trigger name \"queue\" at column 1; \
         no trigger can be used: name the triggers (triggers[].name) the formula reads"
    );
}

#[test]
fn a_compiled_formula_evaluates_many_times_and_missing_values_are_nil() {
    let f = Formula::compile("a * 2 ?? 1", &["a", "b"]).expect("compiles");
    assert_eq!(f.trigger_names(), ["a", "b"]);
    assert_eq!(f.source(), "a * 2 ?? 1");
    assert_eq!(f.evaluate(&[Some(3.0)]), Ok(Some(6.0)));
    assert_eq!(f.evaluate(&[Some(4.0), None]), Ok(Some(8.0)));
    // `??` binds tighter than `*`, so this is a * (2 ?? 1): nil a is an error.
    assert!(f.evaluate(&[]).is_err());
}

fn trigger(type_: &str, name: &str) -> ScaleTrigger {
    ScaleTrigger {
        type_: type_.into(),
        name: name.into(),
        metadata: BTreeMap::new(),
        ..ScaleTrigger::default()
    }
}

#[test]
fn validation_mirrors_the_keda_webhook() {
    let triggers = [
        trigger("redis", "queue"),
        trigger("kafka", "lag"),
        trigger("cpu", "cpu"),
        trigger("prometheus", ""),
    ];
    assert_eq!(formula_trigger_names(&triggers), ["queue", "lag"]);
    // Runs with -1 for every trigger.
    assert!(validate_formula("queue + lag", &triggers).is_ok());
    // cpu/memory triggers are not formula inputs, even when named.
    let err = validate_formula("queue + cpu", &triggers).unwrap_err();
    assert_eq!(
        err.to_string(),
        "spec.advanced.scalingModifiers.formula: unknown trigger name \"cpu\" at column 9; \
         known triggers: queue, lag"
    );
    // A formula that fails on the dummy values is rejected, as expr.Run fails in KEDA.
    assert!(validate_formula("queue % 0", &triggers).is_err());
    // A bool formula is rejected.
    assert!(validate_formula("queue > 0", &triggers).is_err());
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

#[test]
fn formulas_nested_beyond_the_limit_are_refused_instead_of_overflowing_the_stack() {
    let deep_parens = format!("{}1{}", "(".repeat(5000), ")".repeat(5000));
    let long_chain = vec!["trig_one"; 5000].join(" + ");
    let deep_unary = format!("{}1", "-".repeat(5000));
    for formula in [deep_parens, long_chain, deep_unary] {
        let err = Formula::compile(&formula, &NAMES).unwrap_err();
        assert!(
            err.to_string().contains("nests more than 200 levels deep"),
            "{err}"
        );
    }
    // Reasonable formulas are far from the limit.
    let ok = vec!["trig_one"; 150].join(" + ");
    assert_eq!(eval(&ok, [Some(1.0), None, None]), Ok(Some(150.0)));
}
