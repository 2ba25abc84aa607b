use super::*;
use crate::ScaleTrigger;

const NAMES: [&str; 3] = ["trig_one", "trig_two", "trig_three"];

/// A table row: formula, the three trigger values, the expected result.
type EvalCase = (&'static str, [Option<f64>; 3], Option<f64>);

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
        metadata: Default::default(),
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
fn formulas_nested_beyond_the_limit_are_refused_instead_of_overflowing_the_stack() {
    // Each within the source length limit, so nesting is what is refused.
    let deep_parens = format!("{}1{}", "(".repeat(2000), ")".repeat(2000));
    let long_chain = vec!["1"; 2000].join("+");
    let deep_unary = format!("{}1", "-".repeat(4000));
    for formula in [deep_parens, long_chain, deep_unary] {
        let err = Formula::compile(&formula, &NAMES).unwrap_err();
        assert_eq!(err.kind, ErrorKind::TooDeep, "{err}");
        assert!(
            err.to_string()
                .contains("the formula nests more than 200 levels deep, the limit"),
            "{err}"
        );
    }
    // Reasonable formulas are far from the limit.
    let ok = vec!["trig_one"; 150].join(" + ");
    assert_eq!(eval(&ok, [Some(1.0), None, None]), Ok(Some(150.0)));
}

/// An array literal of `n` ones: `[1,1,...]`.
fn ones(n: usize) -> String {
    format!("[{}]", vec!["1"; n].join(","))
}

#[test]
fn the_formula_bomb_is_refused_when_compiled_naming_the_field_and_the_budget() {
    let a = ones(250);
    // (formula of about 1.5 KB, the budget its worst case is over)
    let cases = [
        // Nested map over array literals: 15.6 million array elements if it ran.
        (
            format!("count(map({a}, map({a}, map({a}, #))), true)"),
            Budget::Steps,
        ),
        // Nested count: 15.6 million predicate runs, little memory per run.
        (
            format!("count({a}, count({a}, count({a}, # > 0) > 0) > 0)"),
            Budget::Steps,
        ),
        // 63,000 steps, within the step budget, but 63,000 array elements.
        (format!("len(map({a}, {a}))"), Budget::Memory),
    ];
    for (formula, budget) in cases {
        assert!(formula.len() < MAX_SOURCE_BYTES, "{}", formula.len());
        let err = Formula::compile(&formula, &NAMES).unwrap_err();
        assert!(
            matches!(err.kind, ErrorKind::OverBudget { budget: b, needed } if b == budget && needed > budget.limit()),
            "{err}"
        );
        assert!(err.is_limit());
        // The admission check refuses it the same way, before anything runs.
        let triggers = [trigger("redis", "trig_one")];
        assert_eq!(validate_formula(&formula, &triggers).unwrap_err(), err);
    }
    let err = Formula::compile(&format!("len(map({a}, {a}))"), &NAMES).unwrap_err();
    assert_eq!(
        err.to_string(),
        "spec.advanced.scalingModifiers.formula: evaluating the formula may take up to 63252 \
         array elements, over the memory budget of 10000 array elements; map, filter, count, \
         all, any, none and one run their predicate once per element, so nesting them over \
         arrays multiplies the work"
    );
    // Far beyond u64: still a clean error.
    let huge = format!(
        "count(map({a}, map({a}, map({a}, map({a}, map({a}, map({a}, map({a}, map({a}, #)))))))), true)"
    );
    let err = Formula::compile(&huge, &NAMES).unwrap_err();
    assert!(
        err.to_string()
            .contains("may take more than 18446744073709551614 steps"),
        "{err}"
    );
}

#[test]
fn limits_on_source_length_array_literals_arguments_and_array_nesting_name_the_limit() {
    let long = format!("trig_one + {}", "0".repeat(MAX_SOURCE_BYTES));
    let items = format!("sum({})", ones(MAX_ITEMS + 1));
    let args = format!("max({})", vec!["1"; MAX_ITEMS + 1].join(","));
    // Each map wraps the previous array in ten more levels: 250 levels after 25 maps.
    let mut nested = "[1]".to_string();
    for _ in 0..25 {
        nested = format!("map({nested}, [[[[[[[[[[#]]]]]]]]]])");
    }
    let nested = format!("len({nested})");
    // (formula, expected message after the field prefix)
    let cases = [
        (
            long.as_str(),
            "the formula is 4107 bytes long, over the limit of 4096 bytes",
        ),
        (
            items.as_str(),
            "an array literal has more than 256 elements, the limit at column 5",
        ),
        (
            args.as_str(),
            "a function call has more than 256 elements, the limit at column 1",
        ),
        (
            nested.as_str(),
            "arrays nest inside arrays more than 200 levels deep, the limit at column 25",
        ),
    ];
    for (formula, message) in cases {
        let err = Formula::compile(formula, &NAMES).unwrap_err();
        assert!(err.is_limit(), "{err}");
        assert_eq!(
            err.to_string(),
            format!("spec.advanced.scalingModifiers.formula: {message}")
        );
    }
    // At the limits themselves, formulas compile.
    let at_limit = format!(
        "sum({}) + max({})",
        ones(MAX_ITEMS),
        vec!["1"; MAX_ITEMS].join(",")
    );
    assert_eq!(eval(&at_limit, [None, None, None]), Ok(Some(257.0)));
}

/// `#` added up `n` times (a power of two) as a balanced tree: shallow, long.
fn balanced_sum(n: usize) -> String {
    if n == 1 {
        "#".to_string()
    } else {
        format!("({}+{})", balanced_sum(n / 2), balanced_sum(n / 2))
    }
}

#[test]
fn evaluation_stops_at_the_step_and_memory_budgets_even_without_the_compile_check() {
    // The tree of a bomb, parsed without the worst-case check `compile` makes: evaluation is
    // the second line of defence and stops at the budget.
    let a = ones(250);
    // A long predicate over one array: 255,750 steps, one array.
    let long_predicate = balanced_sum(512);
    for (formula, budget) in [
        (format!("count({a}, {long_predicate} > 0)"), Budget::Steps),
        (format!("len(map({a}, {a}))"), Budget::Memory),
    ] {
        let tokens = lexer::tokenize(&formula).expect("tokenizes");
        let root = parser::parse(&formula, &tokens, &[]).expect("parses");
        let (result, used) = eval::evaluate(&root, &[]);
        let err = result.expect_err("stopped");
        assert_eq!(err.kind, ErrorKind::BudgetExhausted { budget });
        // It stopped at the first charge over the budget.
        let over = match budget {
            Budget::Steps => used.steps,
            Budget::Memory => used.cells,
        };
        assert!(
            over > budget.limit() && over <= budget.limit() + 251,
            "{used:?}"
        );
        let message = FormulaError::whole(err.kind).to_string();
        assert!(
            message.starts_with(
                "spec.advanced.scalingModifiers.formula: evaluation stopped: it used up the"
            ),
            "{message}"
        );
    }
}

#[test]
fn formulas_from_the_docs_are_far_within_the_budgets_and_use_at_most_their_worst_case() {
    // (formula over trig_one, trig_two, trig_three)
    let formulas = [
        "trig_one + trig_two",
        "(trig_one + trig_two)/2",
        "trig_one > 2 ? trig_one : trig_two",
        "trig_one < 2 ? trig_one + trig_two >= 2 ? 5 : 10 : 0",
        "count([trig_one,trig_two,trig_three],{#>1}) > 1 ? 5 : 0",
        "trig_one ?? trig_two ?? 7",
        "max([trig_one, trig_two]) + min(trig_one, [trig_two, 1]) + abs(trig_three)",
        "median(map([trig_one, trig_two, trig_three], # * 2)) + sum(filter([trig_one, trig_two], # > 1))",
        "trig_one in [1, 2] || [trig_one, [trig_two]] == [1, [2]] ? 1 : 0",
    ];
    let value_sets = [
        [Some(1.0), Some(2.0), Some(3.0)],
        [Some(-1.0), Some(-1.0), Some(-1.0)],
        [Some(5.0), Some(0.5), Some(0.0)],
    ];
    for formula in formulas {
        let compiled = Formula::compile(formula, &NAMES).expect(formula);
        let worst = compiled.worst_case();
        assert!(
            worst.steps <= 100 && worst.cells <= 20,
            "{formula}: {worst:?}"
        );
        for values in value_sets {
            let (result, used) = compiled.evaluate_with_usage(&values);
            assert!(result.is_ok(), "{formula}: {result:?}");
            assert!(
                used.steps <= worst.steps && used.cells <= worst.cells,
                "{formula} with {values:?}: used {used:?}, worst case {worst:?}"
            );
        }
    }
}
