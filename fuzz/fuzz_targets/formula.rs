//! `scalingModifiers.formula`: the parser, the worst-case cost computed at compile time and the
//! evaluator with its step and memory budgets (`keda_api::formula`).
//!
//! The input is the formula, optionally followed by a NUL byte and trigger values (8 bytes
//! each, an `f64`; a shorter tail is `nil`). Every identifier in the formula is declared as a
//! trigger, then only half of them (unknown names). Each compiled formula is evaluated with
//! the admission check's dummy values, with every trigger `nil`, `0`, and with the input's
//! values. A budget overrun is any evaluation that uses more than the worst case computed at
//! compile time, a worst case over the budgets that compiled, or an evaluation stopped at a
//! budget (the worst case said it could not be reached): each panics with "budget overrun".
#![no_main]

use keda_api::formula::{DUMMY_VALUE, ErrorKind, Formula, MEMORY_BUDGET, STEP_BUDGET};
use libfuzzer_sys::fuzz_target;

fn identifiers(source: &str) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    let bytes = source.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_alphabetic() || bytes[i] == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let name = &source[start..i];
            if !names.contains(&name) {
                names.push(name);
            }
        } else {
            i += 1;
        }
    }
    names
}

fn evaluate(formula: &Formula, values: &[Option<f64>]) {
    let worst = formula.worst_case();
    let (result, used) = formula.evaluate_with_usage(values);
    assert!(
        used.steps <= worst.steps && used.cells <= worst.cells,
        "budget overrun: {:?} used {used:?}, worst case {worst:?}, values {values:?}",
        formula.source()
    );
    if let Err(error) = result {
        assert!(
            !matches!(error.kind, ErrorKind::BudgetExhausted { .. }),
            "budget overrun: {:?} stopped at a budget ({error}) within its worst case {worst:?}",
            formula.source()
        );
        assert!(!error.to_string().is_empty());
    }
}

fn run(source: &str, triggers: &[&str], values: &[Option<f64>]) {
    let formula = match Formula::compile(source, triggers) {
        Ok(formula) => formula,
        Err(error) => {
            assert!(!error.to_string().is_empty());
            return;
        }
    };
    let worst = formula.worst_case();
    assert!(
        worst.steps <= STEP_BUDGET && worst.cells <= MEMORY_BUDGET,
        "budget overrun: {source:?} compiled with a worst case {worst:?} over the budgets"
    );
    let n = formula.trigger_names().len();
    for fill in [Some(DUMMY_VALUE), None, Some(0.0)] {
        evaluate(&formula, &vec![fill; n]);
    }
    evaluate(&formula, values);
}

fuzz_target!(|data: &[u8]| {
    let (source, tail) = match data.iter().position(|b| *b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let Ok(source) = std::str::from_utf8(source) else {
        return;
    };
    let values: Vec<Option<f64>> = tail
        .chunks(8)
        .map(|chunk| <[u8; 8]>::try_from(chunk).ok().map(f64::from_le_bytes))
        .collect();
    let names = identifiers(source);
    run(source, &names, &values);
    run(source, &names[..names.len() / 2], &values);
});
