//! Evaluates a compiled formula tree over trigger values.

use super::parser::{BinaryOp, Function, Node, NodeKind, UnaryOp};
use super::{ErrorKind, Position};

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    Number(f64),
    Bool(bool),
    Nil,
    Array(Vec<Value>),
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

struct Env<'a> {
    values: &'a [Option<f64>],
    /// The current element of each enclosing predicate, innermost last.
    elements: Vec<Value>,
}

pub(crate) fn evaluate(root: &Node, values: &[Option<f64>]) -> Result<Value> {
    let mut env = Env {
        values,
        elements: Vec::new(),
    };
    env.eval(root)
}

impl Env<'_> {
    fn eval(&mut self, node: &Node) -> Result<Value> {
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
            NodeKind::Array(items) => items
                .iter()
                .map(|item| self.eval(item))
                .collect::<Result<Vec<_>>>()
                .map(Value::Array),
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
            BinaryOp::Eq => return Ok(Value::Bool(l == r)),
            BinaryOp::Ne => return Ok(Value::Bool(l != r)),
            BinaryOp::In => {
                return match r {
                    Value::Array(items) => Ok(Value::Bool(items.contains(&l))),
                    r => Err(mismatch(&l, &r)),
                };
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

    fn array_arg(&mut self, function: Function, node: &Node, pos: Position) -> Result<Vec<Value>> {
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

    fn numbers(function: Function, items: &[Value], pos: Position) -> Result<Vec<f64>> {
        items
            .iter()
            .map(|v| match v {
                Value::Number(n) => Ok(*n),
                v => Err(invalid(
                    pos,
                    format!(
                        "{}() needs numbers, found {}",
                        function.name(),
                        v.type_name()
                    ),
                )),
            })
            .collect()
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
                let mut all = Vec::new();
                for arg in args {
                    match self.eval(arg)? {
                        Value::Array(items) => all.extend(Self::numbers(function, &items, pos)?),
                        Value::Number(n) => all.push(n),
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
                let pick = if function == Function::Max {
                    f64::max
                } else {
                    f64::min
                };
                all.into_iter()
                    .reduce(pick)
                    .map(Value::Number)
                    .ok_or_else(|| invalid(pos, format!("{}() of an empty array", function.name())))
            }
            Function::Sum => {
                let items = self.array_arg(function, first, pos)?;
                Ok(Value::Number(
                    Self::numbers(function, &items, pos)?.iter().sum(),
                ))
            }
            Function::Mean | Function::Avg => {
                let items = self.array_arg(function, first, pos)?;
                let ns = Self::numbers(function, &items, pos)?;
                // expr-lang's mean of an empty array is 0.
                Ok(Value::Number(if ns.is_empty() {
                    0.0
                } else {
                    ns.iter().sum::<f64>() / ns.len() as f64
                }))
            }
            Function::Median => {
                let items = self.array_arg(function, first, pos)?;
                let mut ns = Self::numbers(function, &items, pos)?;
                ns.sort_by(f64::total_cmp);
                let n = ns.len();
                Ok(Value::Number(match n {
                    0 => 0.0,
                    _ if n % 2 == 1 => ns[n / 2],
                    _ => (ns[n / 2 - 1] + ns[n / 2]) / 2.0,
                }))
            }
            Function::Len => Ok(Value::Number(
                self.array_arg(function, first, pos)?.len() as f64
            )),
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
                let mut mapped = Vec::with_capacity(items.len());
                let mut matched = Vec::new();
                for item in items {
                    let result = match predicate {
                        Some(p) => self.with_element(item.clone(), p)?,
                        // count(array) without a predicate counts the `true` elements.
                        None => item.clone(),
                    };
                    if function == Function::Map {
                        mapped.push(result);
                        continue;
                    }
                    match result {
                        Value::Bool(true) => matched.push(item),
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
                    Function::Map => Value::Array(mapped),
                    Function::Filter => Value::Array(matched),
                    Function::Count => Value::Number(matched.len() as f64),
                    Function::Any => Value::Bool(!matched.is_empty()),
                    Function::One => Value::Bool(matched.len() == 1),
                    Function::None => Value::Bool(matched.is_empty()),
                    // all: every element matched.
                    _ => Value::Bool(matched.len() == len),
                })
            }
        }
    }
}
