//! `spec.advanced.scalingModifiers.formula`: the expression that combines trigger values into
//! one composite metric, and the limits it is held to.
//!
//! KEDA evaluates the formula with expr-lang (`pkg/scaling/modifiers/formula.go`), compiled once
//! per scalers cache and validated by the admission webhook
//! (`ValidateAndCompileScalingModifiers` in `apis/keda/v1alpha1/scaledobject_webhook.go`). This
//! module implements the subset of expr-lang that KEDA's documentation and examples use, with
//! expr-lang's precedence and meaning:
//!
//! * number literals (`3`, `0.5`, `.5`, `1_000`, `2e3`, `0x1F`), `true`, `false`, `nil`;
//! * trigger names (`triggers[].name`) as variables: a number, or `nil` when the trigger's metric
//!   is failing under fallback behavior `scalingModifiers`;
//! * `+ - * / % ** ^`, unary `-` and `+`, `== != < <= > >=`, `&& || !` and `and or not`, `in`,
//!   the ternary `a ? b : c`, nil-coalescing `a ?? b`, parentheses, arrays `[a, b]`, `//` and
//!   `/* */` comments;
//! * functions `max`, `min` (of numbers or arrays), `abs`, `ceil`, `floor`, `round`, `float`,
//!   `int`, `sum`, `mean` (alias `avg`), `median`, `len`, `count`, and predicate functions
//!   `filter`, `map`, `count`, `all`, `any`, `none`, `one` whose predicate uses `#` for the
//!   current element (`filter([a, b], # > 1)`, or in braces, `count([a, b], {# > 1})`).
//!
//! Precedence, loosest first (expr-lang's `parser/operator`): ternary; `||`; `&&`;
//! comparisons and `in`; `+ -`; `* / %`; unary `! not`; unary `- +`; `** ^` (right
//! associative); `??`. So `a ?? 0 + 1` is `(a ?? 0) + 1` and `-2 ** 2` is `-4`.
//!
//! Values are numbers (f64), booleans, nil and arrays. `==` and `!=` compare any two values
//! (values of different types are unequal, so `x == nil` tests for nil). `/` always divides as
//! floats (`x / 0` is infinite, as in expr-lang); `%` needs whole numbers and a non-zero
//! divisor. Arithmetic and ordering on `nil` or on booleans are errors, which is why a formula
//! over triggers that may be `nil` uses `??`.
//!
//! # Limits and budgets
//!
//! A formula is user input that the operator evaluates on every poll, so it is held to limits
//! (the spirit of expr-lang's `MaxNodes` and `MemoryBudget`, which KEDA relies on):
//!
//! * at most [`MAX_SOURCE_BYTES`] bytes of source, at most [`MAX_ITEMS`] elements in one array
//!   literal or arguments in one call, and at most [`MAX_DEPTH`] levels of nesting, both of the
//!   expression and of arrays inside arrays; checked while parsing;
//! * a step budget ([`STEP_BUDGET`]) and a memory budget ([`MEMORY_BUDGET`], in array elements
//!   allocated, each array counting one more for itself). A step is the evaluation of one node of the formula or one element visited by a
//!   function, `in` or `==`. Trigger values are numbers, so every array comes from the formula's
//!   own literals and the work is bounded by its text: [`Formula::compile`] computes the worst
//!   case over all trigger values and branches ([`Formula::worst_case`]) and refuses a formula
//!   whose worst case is over either budget, so nested `map`/`count` over array literals are
//!   rejected before they ever run. Evaluation counts what it uses as well and stops with an
//!   error at either budget, as a second line of defence.
//!
//! [`Formula::compile`] parses once and resolves every name against the declared triggers: an
//! unknown name is an error that names it and lists the known ones. [`Formula::evaluate`] then
//! runs as often as needed. Every error names the field, the position and what is wrong, e.g.
//! `spec.advanced.scalingModifiers.formula: unknown trigger name "qeue" at column 1; known
//! triggers: queue, lag`. The result must be a number or `nil`; KEDA wraps every formula in
//! `float(...)`, so a boolean result is an error there too.
//!
//! [`validate_formula`] is the admission check (KEDA's webhook): compile against the object's
//! triggers and run once with -1 for every trigger. It is pure, so the validation of a
//! ScaledObject ([`crate::validation::validate_scaled_object_reconcile`]), the operator and an admission
//! webhook all call the same function.

mod cost;
mod eval;
mod lexer;
mod parser;

use std::fmt;

use crate::trigger::ScaleTrigger;

pub use cost::Cost;

/// Longest formula, in bytes of source.
pub const MAX_SOURCE_BYTES: usize = 4096;
/// Most elements in one array literal, and most arguments in one function call.
pub const MAX_ITEMS: usize = 256;
/// How deep a formula may nest, and how deep arrays may nest inside arrays. Parsing and
/// evaluation recurse over both, and a formula is user input: without a bound, `((((...` or
/// `a+a+a+...` thousands deep would overflow the operator's stack.
pub const MAX_DEPTH: usize = 200;
/// Most steps one evaluation may take (see the module documentation).
pub const STEP_BUDGET: u64 = 100_000;
/// Most array elements one evaluation may allocate, counted cumulatively; an array counts its
/// elements plus one (for the array itself). An element takes 16 bytes.
pub const MEMORY_BUDGET: u64 = 10_000;

/// The value the admission check feeds every trigger when it test-runs a formula (KEDA's
/// webhook does the same).
pub const DUMMY_VALUE: f64 = -1.0;

/// Where something is in the formula: 1-based line and column (in characters).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    /// Line, from 1.
    pub line: u32,
    /// Column, from 1.
    pub column: u32,
}

/// One of the two evaluation budgets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Budget {
    /// [`STEP_BUDGET`].
    Steps,
    /// [`MEMORY_BUDGET`].
    Memory,
}

impl Budget {
    /// The limit.
    pub fn limit(self) -> u64 {
        match self {
            Budget::Steps => STEP_BUDGET,
            Budget::Memory => MEMORY_BUDGET,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Budget::Steps => "step budget",
            Budget::Memory => "memory budget",
        }
    }

    fn unit(self) -> &'static str {
        match self {
            Budget::Steps => "steps",
            Budget::Memory => "array elements",
        }
    }
}

/// What is wrong with a formula.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The formula is empty.
    Empty,
    /// The text is not a formula: a token where it cannot be.
    Syntax(String),
    /// A name that is not one of the triggers the formula may use.
    UnknownTrigger {
        /// The name as written.
        name: String,
        /// The names the formula may use.
        known: Vec<String>,
    },
    /// A call to a function this language does not have.
    UnknownFunction {
        /// The name as written.
        name: String,
    },
    /// A function called with the wrong number of arguments.
    WrongArgumentCount {
        /// The function.
        function: &'static str,
        /// What it takes, e.g. "1" or "at least 1".
        expected: &'static str,
        /// How many it got.
        found: usize,
    },
    /// `#` outside the predicate of `filter`, `map`, `count`, `all`, `any`, `none`, `one`.
    PlaceholderOutsidePredicate,
    /// An operation on values it does not apply to, e.g. `nil + 1`.
    InvalidOperation(String),
    /// The formula evaluated to something that is not a number or nil.
    NotANumber {
        /// What it evaluated to: "bool" or "array".
        found: &'static str,
    },
    /// The source is longer than [`MAX_SOURCE_BYTES`].
    TooLong {
        /// Its length in bytes.
        bytes: usize,
    },
    /// An array literal or a call with more than [`MAX_ITEMS`] elements or arguments.
    TooManyItems {
        /// "an array literal" or "a function call".
        what: &'static str,
    },
    /// The expression nests deeper than [`MAX_DEPTH`].
    TooDeep,
    /// Arrays nest inside arrays deeper than [`MAX_DEPTH`].
    ArraysTooDeep,
    /// The worst case of the formula is over a budget: refused when compiling.
    OverBudget {
        /// Which budget.
        budget: Budget,
        /// The worst case (saturated at `u64::MAX`).
        needed: u64,
    },
    /// An evaluation used up a budget and was stopped.
    BudgetExhausted {
        /// Which budget.
        budget: Budget,
    },
}

/// A formula that does not compile or cannot be evaluated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FormulaError {
    /// What is wrong.
    pub kind: ErrorKind,
    /// Where, when it is about one place.
    pub position: Option<Position>,
    /// The formula spans lines, so positions name the line too.
    multiline: bool,
}

impl FormulaError {
    pub(crate) fn at(kind: ErrorKind, position: Position, source: &str) -> FormulaError {
        FormulaError {
            kind,
            position: Some(position),
            multiline: source.contains('\n'),
        }
    }

    pub(crate) fn whole(kind: ErrorKind) -> FormulaError {
        FormulaError {
            kind,
            position: None,
            multiline: false,
        }
    }

    /// Whether this is one of the limits or budgets of the module documentation, rather than
    /// a formula that is wrong.
    pub fn is_limit(&self) -> bool {
        matches!(
            self.kind,
            ErrorKind::TooLong { .. }
                | ErrorKind::TooManyItems { .. }
                | ErrorKind::TooDeep
                | ErrorKind::ArraysTooDeep
                | ErrorKind::OverBudget { .. }
                | ErrorKind::BudgetExhausted { .. }
        )
    }
}

/// Predicates multiply the work: said with every budget error.
const BUDGET_HINT: &str = "; map, filter, count, all, any, none and one run their predicate \
                           once per element, so nesting them over arrays multiplies the work";

impl fmt::Display for FormulaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("spec.advanced.scalingModifiers.formula: ")?;
        match &self.kind {
            ErrorKind::Empty => f.write_str("the formula is empty")?,
            ErrorKind::Syntax(what) | ErrorKind::InvalidOperation(what) => f.write_str(what)?,
            ErrorKind::UnknownTrigger { name, .. } => write!(f, "unknown trigger name {name:?}")?,
            ErrorKind::UnknownFunction { name } => write!(f, "unknown function {name:?}")?,
            ErrorKind::WrongArgumentCount {
                function,
                expected,
                found,
            } => write!(
                f,
                "{function}() takes {expected} argument(s), found {found}"
            )?,
            ErrorKind::PlaceholderOutsidePredicate => f.write_str(
                "`#` is only meaningful inside the predicate of filter, map, count, all, any, \
                 none or one",
            )?,
            ErrorKind::NotANumber { found } => {
                let article = if found.starts_with('a') { "an" } else { "a" };
                write!(
                    f,
                    "the formula must evaluate to a number (or nil), but it evaluates to \
                     {article} {found}"
                )?
            }
            ErrorKind::TooLong { bytes } => write!(
                f,
                "the formula is {bytes} bytes long, over the limit of {MAX_SOURCE_BYTES} bytes"
            )?,
            ErrorKind::TooManyItems { what } => {
                write!(f, "{what} has more than {MAX_ITEMS} elements, the limit")?
            }
            ErrorKind::TooDeep => write!(
                f,
                "the formula nests more than {MAX_DEPTH} levels deep, the limit"
            )?,
            ErrorKind::ArraysTooDeep => write!(
                f,
                "arrays nest inside arrays more than {MAX_DEPTH} levels deep, the limit"
            )?,
            ErrorKind::OverBudget { budget, needed } => {
                let needed = if *needed == u64::MAX {
                    format!("more than {}", u64::MAX - 1)
                } else {
                    format!("up to {needed}")
                };
                write!(
                    f,
                    "evaluating the formula may take {needed} {}, over the {} of {} {}",
                    budget.unit(),
                    budget.describe(),
                    budget.limit(),
                    budget.unit()
                )?
            }
            ErrorKind::BudgetExhausted { budget } => write!(
                f,
                "evaluation stopped: it used up the {} of {} {}",
                budget.describe(),
                budget.limit(),
                budget.unit()
            )?,
        }
        if let Some(p) = self.position {
            if self.multiline {
                write!(f, " at line {}, column {}", p.line, p.column)?;
            } else {
                write!(f, " at column {}", p.column)?;
            }
        }
        match &self.kind {
            ErrorKind::UnknownTrigger { known, .. } if known.is_empty() => f.write_str(
                "; no trigger can be used: name the triggers (triggers[].name) the formula reads",
            ),
            ErrorKind::UnknownTrigger { known, .. } => {
                write!(f, "; known triggers: {}", known.join(", "))
            }
            ErrorKind::UnknownFunction { .. } => write!(
                f,
                "; known functions: {}",
                parser::Function::ALL
                    .iter()
                    .map(|func| func.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            ErrorKind::InvalidOperation(what) if what.contains("nil") => f.write_str(
                "; a trigger is nil while its metric fails under fallback behavior \
                 scalingModifiers: give it a default with `??`",
            ),
            ErrorKind::OverBudget { .. } | ErrorKind::BudgetExhausted { .. } => {
                f.write_str(BUDGET_HINT)
            }
            _ => Ok(()),
        }
    }
}

impl std::error::Error for FormulaError {}

/// A compiled formula: parsed once, its names resolved, its worst case within the budgets;
/// evaluate it as often as needed.
#[derive(Clone, Debug, PartialEq)]
pub struct Formula {
    source: String,
    triggers: Vec<String>,
    root: parser::Node,
    worst_case: Cost,
}

impl Formula {
    /// Parses `source`, resolves every name against `triggers` (the trigger names the formula
    /// may read, see [`formula_trigger_names`]) and checks its worst case against the budgets.
    ///
    /// # Errors
    /// When the formula is empty, is not valid syntax, names an unknown trigger or function,
    /// calls a function with the wrong number of arguments, uses `#` outside a predicate, or
    /// is over a limit or budget (see the module documentation).
    pub fn compile<S: AsRef<str>>(source: &str, triggers: &[S]) -> Result<Formula, FormulaError> {
        if source.len() > MAX_SOURCE_BYTES {
            return Err(FormulaError::whole(ErrorKind::TooLong {
                bytes: source.len(),
            }));
        }
        let triggers: Vec<String> = triggers.iter().map(|t| t.as_ref().to_string()).collect();
        let tokens = lexer::tokenize(source)?;
        let root = parser::parse(source, &tokens, &triggers)?;
        let worst_case = cost::worst_case(&root, source)?;
        for (budget, needed) in [
            (Budget::Steps, worst_case.steps),
            (Budget::Memory, worst_case.cells),
        ] {
            if needed > budget.limit() {
                return Err(FormulaError::whole(ErrorKind::OverBudget {
                    budget,
                    needed,
                }));
            }
        }
        Ok(Formula {
            source: source.to_string(),
            triggers,
            root,
            worst_case,
        })
    }

    /// The formula as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The trigger names, in the order [`Formula::evaluate`] takes their values.
    pub fn trigger_names(&self) -> &[String] {
        &self.triggers
    }

    /// The most any evaluation of this formula can use, over all trigger values and branches:
    /// within [`STEP_BUDGET`] and [`MEMORY_BUDGET`], or it would not have compiled.
    pub fn worst_case(&self) -> Cost {
        self.worst_case
    }

    /// Evaluates the formula. `values[i]` is the value of `trigger_names()[i]`: `Some(number)`,
    /// or `None` for `nil`; a missing entry is `nil` too (as a missing key in KEDA's map).
    ///
    /// Returns `Some(number)`, or `None` when the formula evaluates to `nil`.
    ///
    /// # Errors
    /// When an operation does not apply to its values (e.g. `nil + 1`, `true * 2`, `5 % 0`),
    /// the result is a boolean or an array, or a budget is used up.
    pub fn evaluate(&self, values: &[Option<f64>]) -> Result<Option<f64>, FormulaError> {
        self.evaluate_with_usage(values).0
    }

    /// [`Formula::evaluate`], and what the evaluation used (never more than
    /// [`Formula::worst_case`]; the fuzzer checks that).
    pub fn evaluate_with_usage(
        &self,
        values: &[Option<f64>],
    ) -> (Result<Option<f64>, FormulaError>, Cost) {
        let (value, used) = eval::evaluate(&self.root, values);
        let multiline = self.source.contains('\n');
        let result = match value {
            Err(e) => Err(FormulaError {
                kind: e.kind,
                position: Some(e.position),
                multiline,
            }),
            Ok(eval::Value::Number(n)) => Ok(Some(n)),
            Ok(eval::Value::Nil) => Ok(None),
            Ok(other) => Err(FormulaError::whole(ErrorKind::NotANumber {
                found: other.type_name(),
            })),
        };
        (result, used)
    }
}

/// Trigger names a formula may read: named triggers that are not `cpu` or `memory` (those are
/// resource metrics the operator never reads), in trigger order.
pub fn formula_trigger_names(triggers: &[ScaleTrigger]) -> Vec<&str> {
    triggers
        .iter()
        .filter(|t| !t.name.is_empty() && t.type_ != "cpu" && t.type_ != "memory")
        .map(|t| t.name.as_str())
        .collect()
}

/// The admission check of a formula, as KEDA's webhook does it
/// (`validateScalingModifiersFormula`): compiles `formula` against the object's triggers, under
/// the limits and budgets of this module, and test-runs it with [`DUMMY_VALUE`] for every
/// trigger. Pure and bounded by the budgets, so an admission webhook may call it as is.
///
/// # Errors
/// Any compile error (unknown name, syntax, a limit or budget, ...), or an evaluation error with
/// the dummy values (e.g. a boolean result).
pub fn validate_formula(formula: &str, triggers: &[ScaleTrigger]) -> Result<Formula, FormulaError> {
    let compiled = Formula::compile(formula, &formula_trigger_names(triggers))?;
    let dummies = vec![Some(DUMMY_VALUE); compiled.trigger_names().len()];
    compiled.evaluate(&dummies)?;
    Ok(compiled)
}

#[cfg(test)]
mod tests;
