//! `spec.advanced.scalingModifiers.formula`: the expression that combines trigger values into
//! one composite metric.
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
//! (values of different types are unequal, so `x == nil` tests for nil). `/` always divides as floats (`x / 0` is
//! infinite, as in expr-lang); `%` needs whole numbers and a non-zero divisor. Arithmetic and
//! ordering on `nil` or on booleans are errors, which is why a formula over triggers that may
//! be `nil` uses `??`.
//!
//! [`Formula::compile`] parses once and resolves every name against the declared triggers: an
//! unknown name is an error that names it and lists the known ones. [`Formula::evaluate`] then
//! runs as often as needed. Every error names the field, the position and what is wrong, e.g.
//! `spec.advanced.scalingModifiers.formula: unknown trigger name "qeue" at column 1; known
//! triggers: queue, lag`. The result must be a number or `nil`; KEDA wraps every formula in
//! `float(...)`, so a boolean result is an error there too.
//!
//! [`composite_value`] and [`composite_is_active`] turn the result into the composite metric and
//! its activity; [`compile_scaling_modifiers`] validates the whole `scalingModifiers` block as
//! KEDA's webhook does.

mod composite;
mod eval;
mod lexer;
mod parser;

use std::fmt;

pub use composite::{
    COMPOSITE_METRIC_NAME, CompiledModifiers, MODIFIERS_TRIGGER, ModifiersError,
    ScalingModifiersSpec, compile_scaling_modifiers, composite_is_active, composite_value,
    formula_trigger_names, validate_formula,
};

/// Where something is in the formula: 1-based line and column (in characters).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    /// Line, from 1.
    pub line: u32,
    /// Column, from 1.
    pub column: u32,
}

/// What is wrong with a formula.
#[derive(Clone, Debug, PartialEq)]
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
}

/// A formula that does not compile or cannot be evaluated.
#[derive(Clone, Debug, PartialEq)]
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
}

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
            _ => Ok(()),
        }
    }
}

impl std::error::Error for FormulaError {}

/// A compiled formula: parsed once, its names resolved; evaluate it as often as needed.
#[derive(Clone, Debug, PartialEq)]
pub struct Formula {
    source: String,
    triggers: Vec<String>,
    root: parser::Node,
}

impl Formula {
    /// Parses `source` and resolves every name against `triggers`, the trigger names the
    /// formula may read (see [`formula_trigger_names`]).
    ///
    /// # Errors
    /// When the formula is empty, is not valid syntax, names an unknown trigger or function,
    /// calls a function with the wrong number of arguments, or uses `#` outside a predicate.
    pub fn compile<S: AsRef<str>>(source: &str, triggers: &[S]) -> Result<Formula, FormulaError> {
        let triggers: Vec<String> = triggers.iter().map(|t| t.as_ref().to_string()).collect();
        let tokens = lexer::tokenize(source)?;
        let root = parser::parse(source, &tokens, &triggers)?;
        Ok(Formula {
            source: source.to_string(),
            triggers,
            root,
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

    /// Evaluates the formula. `values[i]` is the value of `trigger_names()[i]`: `Some(number)`,
    /// or `None` for `nil`; a missing entry is `nil` too (as a missing key in KEDA's map).
    ///
    /// Returns `Some(number)`, or `None` when the formula evaluates to `nil`.
    ///
    /// # Errors
    /// When an operation does not apply to its values (e.g. `nil + 1`, `true * 2`, `5 % 0`),
    /// or the result is a boolean or an array.
    pub fn evaluate(&self, values: &[Option<f64>]) -> Result<Option<f64>, FormulaError> {
        let value = eval::evaluate(&self.root, values).map_err(|e| FormulaError {
            kind: e.kind,
            position: Some(e.position),
            multiline: self.source.contains('\n'),
        })?;
        match value {
            eval::Value::Number(n) => Ok(Some(n)),
            eval::Value::Nil => Ok(None),
            other => Err(FormulaError {
                kind: ErrorKind::NotANumber {
                    found: other.type_name(),
                },
                position: None,
                multiline: false,
            }),
        }
    }
}

#[cfg(test)]
mod tests;
