//! Evaluates a compiled formula tree over trigger values, counting steps and allocated array
//! elements against the budgets.
//!
//! What is counted here is what [`super::cost`] bounds statically, charge by charge: one step
//! per node evaluated; one step per element a function visits (`sum`, `mean`, `median`, `max`,
//! `min`, `count` without predicate) or a predicate runs for; one step per pair of values `==`,
//! `!=` and `in` compare; one memory unit per element of an array built (a literal, `map`,
//! `filter`, the sorted copy of `median`), plus one for the array itself. Arrays are shared, not copied, when a value is
//! reused (`#`, a predicate's element), so those cost nothing.

use std::rc::Rc;

use super::cost::Cost;
use super::parser::{BinaryOp, Function, Node, NodeKind, UnaryOp};
use super::{Budget, ErrorKind, Position};

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    Number(f64),
    Bool(bool),
    Nil,
    Array(Rc<Vec<Value>>),
}

impl Value {
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Value::Number(_) => "number",
            Value::Bool(_) => "bool",
            Value::Nil => "nil",
            Value::Array(_) => "array",
        }
    }
}

/// An evaluation error before the formula's source is attached.
pub(crate) struct EvalError {
    pub(crate) kind: ErrorKind,
    pub(crate) position: Position,
}

type Result<T> = std::result::Result<T, EvalError>;

fn invalid(position: Position, what: String) -> EvalError {
    EvalError {
        kind: ErrorKind::InvalidOperation(what),
        position,
    }
}

/// A count of elements as a formula value. Counts are bounded by the memory budget, far
/// below 2^32, so the conversion is exact.
fn count(n: usize) -> f64 {
    u32::try_from(n).map_or(f64::from(u32::MAX), f64::from)
}

fn as_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// The memory units of an array of `n` elements: one each, and one for the array.
fn allocation(n: usize) -> u64 {
    as_u64(n).saturating_add(1)
}

struct Env<'a> {
    values: &'a [Option<f64>],
    /// The current element of each enclosing predicate, innermost last.
    elements: Vec<Value>,
    used: Cost,
}

/// Evaluates `root`; the result and what it used.
pub(crate) fn evaluate(root: &Node, values: &[Option<f64>]) -> (Result<Value>, Cost) {
    let mut env = Env {
        values,
        elements: Vec::new(),
        used: Cost::default(),
    };
    let result = env.eval(root);
    (result, env.used)
}

impl Env<'_> {
    /// Counts `steps` and `cells`, failing once either budget is used up.
    fn charge(&mut self, steps: u64, cells: u64, position: Position) -> Result<()> {
        self.used.steps = self.used.steps.saturating_add(steps);
        self.used.cells = self.used.cells.saturating_add(cells);
        let exhausted = if self.used.steps > Budget::Steps.limit() {
            Budget::Steps
        } else if self.used.cells > Budget::Memory.limit() {
            Budget::Memory
        } else {
            return Ok(());
        };
        Err(EvalError {
            kind: ErrorKind::BudgetExhausted { budget: exhausted },
            position,
        })
    }

    fn eval(&mut self, node: &Node) -> Result<Value> {
        self.charge(1, 0, node.pos)?;
        match &node.kind {
            NodeKind::Number(n) => Ok(Value::Number(*n)),
            NodeKind::Bool(b) => Ok(Value::Bool(*b)),
            NodeKind::Nil => Ok(Value::Nil),
            NodeKind::Trigger(i) => Ok(match self.values.get(*i).copied().flatten() {
                Some(n) => Value::Number(n),
                None => Value::Nil,
            }),
            // The parser only accepts `#` inside a predicate, so an element is always there.
            NodeKind::Element => Ok(self.elements.last().cloned().unwrap_or(Value::Nil)),
            NodeKind::Array(items) => {
                self.charge(0, allocation(items.len()), node.pos)?;
                let mut array = Vec::with_capacity(items.len());
                for item in items {
                    array.push(self.eval(item)?);
                }
                Ok(Value::Array(Rc::new(array)))
            }
            NodeKind::Unary(op, operand) => {
                let v = self.eval(operand)?;
                match (op, v) {
                    (UnaryOp::Neg, Value::Number(n)) => Ok(Value::Number(-n)),
                    (UnaryOp::Plus, Value::Number(n)) => Ok(Value::Number(n)),
                    (UnaryOp::Not, Value::Bool(b)) => Ok(Value::Bool(!b)),
                    (op, v) => {
                        let symbol = match op {
                            UnaryOp::Neg => "-",
                            UnaryOp::Plus => "+",
                            UnaryOp::Not => "!",
                        };
                        Err(invalid(
                            node.pos,
                            format!("cannot apply `{symbol}` to {}", v.type_name()),
                        ))
                    }
                }
            }
            NodeKind::Binary(op, left, right) => self.binary(*op, left, right, node.pos),
            NodeKind::Conditional(cond, then, otherwise) => match self.eval(cond)? {
                Value::Bool(true) => self.eval(then),
                Value::Bool(false) => self.eval(otherwise),
                v => Err(invalid(
                    node.pos,
                    format!(
                        "the condition of `? :` must be a bool, found {}",
                        v.type_name()
                    ),
                )),
            },
            NodeKind::Call(function, args) => self.call(*function, args, node.pos),
        }
    }

    /// `a == b`: values of different types are unequal, arrays are equal element by element.
    /// One step per pair compared.
    fn equal(&mut self, a: &Value, b: &Value, pos: Position) -> Result<bool> {
        self.charge(1, 0, pos)?;
        Ok(match (a, b) {
            (Value::Array(x), Value::Array(y)) => {
                if x.len() != y.len() {
                    return Ok(false);
                }
                for (p, q) in x.iter().zip(y.iter()) {
                    if !self.equal(p, q, pos)? {
                        return Ok(false);
                    }
                }
                true
            }
            (Value::Number(x), Value::Number(y)) => x == y,
            (Value::Bool(x), Value::Bool(y)) => x == y,
            (Value::Nil, Value::Nil) => true,
            _ => false,
        })
    }

    fn binary(&mut self, op: BinaryOp, left: &Node, right: &Node, pos: Position) -> Result<Value> {
        // Short-circuit operators evaluate the right side only when needed, as expr-lang.
        match op {
            BinaryOp::Coalesce => {
                return match self.eval(left)? {
                    Value::Nil => self.eval(right),
                    v => Ok(v),
                };
            }
            BinaryOp::And | BinaryOp::Or => {
                let l = self.bool_operand(op, left, pos)?;
                if (op == BinaryOp::And && !l) || (op == BinaryOp::Or && l) {
                    return Ok(Value::Bool(l));
                }
                return self.bool_operand(op, right, pos).map(Value::Bool);
            }
            _ => {}
        }
        let l = self.eval(left)?;
        let r = self.eval(right)?;
        let mismatch = |l: &Value, r: &Value| {
            invalid(
                pos,
                format!(
                    "cannot apply `{}` to {} and {}",
                    op.symbol(),
                    l.type_name(),
                    r.type_name()
                ),
            )
        };
        match op {
            BinaryOp::Eq => return self.equal(&l, &r, pos).map(Value::Bool),
            BinaryOp::Ne => return self.equal(&l, &r, pos).map(|eq| Value::Bool(!eq)),
            BinaryOp::In => {
                let Value::Array(items) = &r else {
                    return Err(mismatch(&l, &r));
                };
                for item in items.iter() {
                    if self.equal(&l, item, pos)? {
                        return Ok(Value::Bool(true));
                    }
                }
                return Ok(Value::Bool(false));
            }
            _ => {}
        }
        let (Value::Number(a), Value::Number(b)) = (&l, &r) else {
            return Err(mismatch(&l, &r));
        };
        let (a, b) = (*a, *b);
        Ok(match op {
            BinaryOp::Lt => Value::Bool(a < b),
            BinaryOp::Le => Value::Bool(a <= b),
            BinaryOp::Gt => Value::Bool(a > b),
            BinaryOp::Ge => Value::Bool(a >= b),
            BinaryOp::Add => Value::Number(a + b),
            BinaryOp::Sub => Value::Number(a - b),
            BinaryOp::Mul => Value::Number(a * b),
            BinaryOp::Div => Value::Number(a / b),
            BinaryOp::Pow => Value::Number(a.powf(b)),
            BinaryOp::Mod => {
                // expr-lang's `%` is integer modulus (Go's: the sign follows the dividend).
                if a.fract() != 0.0 || b.fract() != 0.0 || !a.is_finite() || !b.is_finite() {
                    return Err(invalid(
                        pos,
                        format!("`%` needs whole numbers, found {a} % {b}"),
                    ));
                }
                if b == 0.0 {
                    return Err(invalid(pos, format!("`%` by zero: {a} % 0")));
                }
                Value::Number(a % b)
            }
            BinaryOp::Coalesce
            | BinaryOp::And
            | BinaryOp::Or
            | BinaryOp::Eq
            | BinaryOp::Ne
            | BinaryOp::In => return Err(mismatch(&l, &r)),
        })
    }

    fn bool_operand(&mut self, op: BinaryOp, node: &Node, pos: Position) -> Result<bool> {
        match self.eval(node)? {
            Value::Bool(b) => Ok(b),
            v => Err(invalid(
                pos,
                format!("`{}` needs bools, found {}", op.symbol(), v.type_name()),
            )),
        }
    }

    fn number_arg(&mut self, function: Function, node: &Node, pos: Position) -> Result<f64> {
        match self.eval(node)? {
            Value::Number(n) => Ok(n),
            v => Err(invalid(
                pos,
                format!(
                    "{}() needs a number, found {}",
                    function.name(),
                    v.type_name()
                ),
            )),
        }
    }

    fn array_arg(
        &mut self,
        function: Function,
        node: &Node,
        pos: Position,
    ) -> Result<Rc<Vec<Value>>> {
        match self.eval(node)? {
            Value::Array(items) => Ok(items),
            v => Err(invalid(
                pos,
                format!(
                    "{}() needs an array, found {}",
                    function.name(),
                    v.type_name()
                ),
            )),
        }
    }

    /// The numbers of `items`, one step each.
    fn numbers<'v>(
        &mut self,
        function: Function,
        items: &'v [Value],
        pos: Position,
    ) -> Result<impl Iterator<Item = f64> + use<'v>> {
        self.charge(as_u64(items.len()), 0, pos)?;
        if let Some(v) = items.iter().find(|v| !matches!(v, Value::Number(_))) {
            return Err(invalid(
                pos,
                format!(
                    "{}() needs numbers, found {}",
                    function.name(),
                    v.type_name()
                ),
            ));
        }
        Ok(items.iter().filter_map(|v| match v {
            Value::Number(n) => Some(*n),
            _ => None,
        }))
    }

    fn with_element(&mut self, element: Value, predicate: &Node) -> Result<Value> {
        self.elements.push(element);
        let v = self.eval(predicate);
        self.elements.pop();
        v
    }

    fn call(&mut self, function: Function, args: &[Node], pos: Position) -> Result<Value> {
        // The parser checked the argument counts, so `args[0]` (and `args[1]` for the
        // predicate functions) exist.
        let first = &args[0];
        let number = |f: fn(f64) -> f64, env: &mut Self| -> Result<Value> {
            env.number_arg(function, first, pos)
                .map(|n| Value::Number(f(n)))
        };
        match function {
            Function::Abs => number(f64::abs, self),
            Function::Ceil => number(f64::ceil, self),
            Function::Floor => number(f64::floor, self),
            // Half away from zero, as expr-lang's round.
            Function::Round => number(f64::round, self),
            Function::Float => number(|n| n, self),
            Function::Int => number(f64::trunc, self),
            Function::Max | Function::Min => {
                let pick = if function == Function::Max {
                    f64::max
                } else {
                    f64::min
                };
                let mut picked: Option<f64> = None;
                let mut take = |n: f64| picked = Some(picked.map_or(n, |p| pick(p, n)));
                for arg in args {
                    match self.eval(arg)? {
                        Value::Array(items) => {
                            self.numbers(function, &items, pos)?.for_each(&mut take)
                        }
                        Value::Number(n) => take(n),
                        v => {
                            return Err(invalid(
                                pos,
                                format!(
                                    "{}() needs numbers or arrays of numbers, found {}",
                                    function.name(),
                                    v.type_name()
                                ),
                            ));
                        }
                    }
                }
                picked
                    .map(Value::Number)
                    .ok_or_else(|| invalid(pos, format!("{}() of an empty array", function.name())))
            }
            Function::Sum => {
                let items = self.array_arg(function, first, pos)?;
                Ok(Value::Number(self.numbers(function, &items, pos)?.sum()))
            }
            Function::Mean | Function::Avg => {
                let items = self.array_arg(function, first, pos)?;
                let sum: f64 = self.numbers(function, &items, pos)?.sum();
                // expr-lang's mean of an empty array is 0.
                Ok(Value::Number(if items.is_empty() {
                    0.0
                } else {
                    sum / count(items.len())
                }))
            }
            Function::Median => {
                let items = self.array_arg(function, first, pos)?;
                self.charge(0, allocation(items.len()), pos)?;
                let mut ns: Vec<f64> = self.numbers(function, &items, pos)?.collect();
                ns.sort_by(f64::total_cmp);
                let n = ns.len();
                Ok(Value::Number(match n {
                    0 => 0.0,
                    _ if n % 2 == 1 => ns[n / 2],
                    _ => (ns[n / 2 - 1] + ns[n / 2]) / 2.0,
                }))
            }
            Function::Len => Ok(Value::Number(count(
                self.array_arg(function, first, pos)?.len(),
            ))),
            Function::Count
            | Function::Filter
            | Function::Map
            | Function::All
            | Function::Any
            | Function::None
            | Function::One => {
                let items = self.array_arg(function, first, pos)?;
                let predicate = args.get(1);
                let len = items.len();
                let builds = matches!(function, Function::Map | Function::Filter);
                let mut built = Vec::new();
                if builds {
                    self.charge(0, allocation(len), pos)?;
                    built.reserve_exact(len);
                }
                let mut matched = 0usize;
                for item in items.iter() {
                    self.charge(1, 0, pos)?;
                    let result = match predicate {
                        Some(p) => self.with_element(item.clone(), p)?,
                        // count(array) without a predicate counts the `true` elements.
                        None => item.clone(),
                    };
                    if function == Function::Map {
                        built.push(result);
                        continue;
                    }
                    match result {
                        Value::Bool(true) => {
                            matched += 1;
                            if function == Function::Filter {
                                built.push(item.clone());
                            }
                        }
                        Value::Bool(false) => {}
                        v => {
                            return Err(invalid(
                                pos,
                                format!(
                                    "the predicate of {}() must be a bool, found {}",
                                    function.name(),
                                    v.type_name()
                                ),
                            ));
                        }
                    }
                }
                Ok(match function {
                    Function::Map | Function::Filter => Value::Array(Rc::new(built)),
                    Function::Count => Value::Number(count(matched)),
                    Function::Any => Value::Bool(matched > 0),
                    Function::One => Value::Bool(matched == 1),
                    Function::None => Value::Bool(matched == 0),
                    // all: every element matched.
                    _ => Value::Bool(matched == len),
                })
            }
        }
    }
}
