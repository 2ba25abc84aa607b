//! The worst case of a formula, computed from its tree before it ever runs.
//!
//! Trigger values are numbers, so every array a formula handles is built by the formula
//! itself: a literal, `map` or `filter`. Its length is therefore bounded by the text: a literal
//! has as many elements as it lists, `map` as many as its input, `filter` at most as many. From
//! those bounds ([`Shape`]) follow bounds on everything [`super::eval`] counts, node by node,
//! taking the larger branch of `? :` and both sides of `??`, `&&` and `||`. The sums and
//! products saturate, so a formula whose worst case overflows `u64` is simply over budget.

use super::parser::{BinaryOp, Function, Node, NodeKind};
use super::{ErrorKind, FormulaError, MAX_DEPTH};

/// What an evaluation uses: steps and allocated array elements (see the module documentation
/// of [`crate::formula`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cost {
    /// Nodes evaluated and elements visited.
    pub steps: u64,
    /// Array elements allocated, cumulatively, plus one per array.
    pub cells: u64,
}

/// What a value may be: a scalar, or possibly an array.
#[derive(Clone, Debug)]
enum Shape {
    /// A number, bool or nil.
    Scalar,
    /// A scalar or an array of at most `len` elements, each of shape `elem`.
    Array {
        len: u64,
        elem: Box<Shape>,
        /// How many values `==` may compare in a value of this shape: 1 + len x elem's.
        size: u64,
        /// How deep arrays nest in it, 1 for an array of scalars.
        depth: usize,
    },
}

impl Shape {
    fn array(len: u64, elem: Shape) -> Option<Shape> {
        let depth = elem.depth() + 1;
        if depth > MAX_DEPTH {
            return None;
        }
        Some(Shape::Array {
            len,
            size: len.saturating_mul(elem.size()).saturating_add(1),
            elem: Box::new(elem),
            depth,
        })
    }

    fn len(&self) -> u64 {
        match self {
            Shape::Scalar => 0,
            Shape::Array { len, .. } => *len,
        }
    }

    fn elem(&self) -> Shape {
        match self {
            Shape::Scalar => Shape::Scalar,
            Shape::Array { elem, .. } => (**elem).clone(),
        }
    }

    fn size(&self) -> u64 {
        match self {
            Shape::Scalar => 1,
            Shape::Array { size, .. } => *size,
        }
    }

    fn depth(&self) -> usize {
        match self {
            Shape::Scalar => 0,
            Shape::Array { depth, .. } => *depth,
        }
    }

    /// A shape either value fits. Its depth is the larger of the two, so it stays within
    /// [`MAX_DEPTH`].
    fn join(&self, other: &Shape) -> Shape {
        match (self, other) {
            (Shape::Scalar, s) | (s, Shape::Scalar) => s.clone(),
            (
                Shape::Array {
                    len: a, elem: x, ..
                },
                Shape::Array {
                    len: b, elem: y, ..
                },
            ) => {
                let elem = x.join(y);
                let depth = elem.depth() + 1;
                Shape::Array {
                    len: (*a).max(*b),
                    size: (*a).max(*b).saturating_mul(elem.size()).saturating_add(1),
                    elem: Box::new(elem),
                    depth,
                }
            }
        }
    }
}

/// The worst case of one node.
struct Estimate {
    cost: Cost,
    shape: Shape,
}

impl Estimate {
    fn scalar(steps: u64, cells: u64) -> Estimate {
        Estimate {
            cost: Cost { steps, cells },
            shape: Shape::Scalar,
        }
    }
}

fn add(a: Cost, b: Cost) -> Cost {
    Cost {
        steps: a.steps.saturating_add(b.steps),
        cells: a.cells.saturating_add(b.cells),
    }
}

fn max(a: Cost, b: Cost) -> Cost {
    Cost {
        steps: a.steps.max(b.steps),
        cells: a.cells.max(b.cells),
    }
}

fn times(a: Cost, n: u64) -> Cost {
    Cost {
        steps: a.steps.saturating_mul(n),
        cells: a.cells.saturating_mul(n),
    }
}

/// The most any evaluation of `root` can use.
///
/// # Errors
/// [`ErrorKind::ArraysTooDeep`] when arrays may nest deeper than [`MAX_DEPTH`].
pub(crate) fn worst_case(root: &Node, source: &str) -> Result<Cost, FormulaError> {
    let mut estimator = Estimator {
        source,
        elements: Vec::new(),
    };
    Ok(estimator.node(root)?.cost)
}

struct Estimator<'a> {
    source: &'a str,
    /// The element shape of each enclosing predicate, innermost last.
    elements: Vec<Shape>,
}

impl Estimator<'_> {
    fn array(&self, len: u64, elem: Shape, node: &Node) -> Result<Shape, FormulaError> {
        Shape::array(len, elem)
            .ok_or_else(|| FormulaError::at(ErrorKind::ArraysTooDeep, node.pos, self.source))
    }

    fn node(&mut self, node: &Node) -> Result<Estimate, FormulaError> {
        // Every node is one step.
        let one = Cost { steps: 1, cells: 0 };
        let estimate = match &node.kind {
            NodeKind::Number(_) | NodeKind::Bool(_) | NodeKind::Nil | NodeKind::Trigger(_) => {
                Estimate::scalar(1, 0)
            }
            NodeKind::Element => Estimate {
                cost: one,
                shape: self.elements.last().cloned().unwrap_or(Shape::Scalar),
            },
            NodeKind::Array(items) => {
                let len = u64::try_from(items.len()).unwrap_or(u64::MAX);
                let mut cost = Cost {
                    steps: 1,
                    cells: len.saturating_add(1),
                };
                let mut elem: Option<Shape> = None;
                for item in items {
                    let e = self.node(item)?;
                    cost = add(cost, e.cost);
                    elem = Some(match elem {
                        None => e.shape,
                        Some(s) => s.join(&e.shape),
                    });
                }
                Estimate {
                    cost,
                    shape: self.array(len, elem.unwrap_or(Shape::Scalar), node)?,
                }
            }
            NodeKind::Unary(_, operand) => Estimate {
                cost: add(one, self.node(operand)?.cost),
                shape: Shape::Scalar,
            },
            NodeKind::Binary(op, left, right) => {
                let l = self.node(left)?;
                let r = self.node(right)?;
                let cost = add(one, add(l.cost, r.cost));
                let compared = match op {
                    BinaryOp::Eq | BinaryOp::Ne => l.shape.size().min(r.shape.size()),
                    BinaryOp::In => r
                        .shape
                        .len()
                        .saturating_mul(l.shape.size().min(r.shape.elem().size())),
                    _ => 0,
                };
                let shape = match op {
                    BinaryOp::Coalesce => l.shape.join(&r.shape),
                    _ => Shape::Scalar,
                };
                Estimate {
                    cost: add(
                        cost,
                        Cost {
                            steps: compared,
                            cells: 0,
                        },
                    ),
                    shape,
                }
            }
            NodeKind::Conditional(cond, then, otherwise) => {
                let c = self.node(cond)?;
                let t = self.node(then)?;
                let o = self.node(otherwise)?;
                Estimate {
                    cost: add(one, add(c.cost, max(t.cost, o.cost))),
                    shape: t.shape.join(&o.shape),
                }
            }
            NodeKind::Call(function, args) => self.call(*function, args, node)?,
        };
        Ok(estimate)
    }

    fn call(
        &mut self,
        function: Function,
        args: &[Node],
        node: &Node,
    ) -> Result<Estimate, FormulaError> {
        let one = Cost { steps: 1, cells: 0 };
        let Some(first) = args.first() else {
            // The parser refuses calls without arguments.
            return Ok(Estimate::scalar(1, 0));
        };
        if function.takes_predicate() {
            let input = self.node(first)?;
            let len = input.shape.len();
            let predicate = match args.get(1) {
                Some(p) => {
                    self.elements.push(input.shape.elem());
                    let estimate = self.node(p);
                    self.elements.pop();
                    Some(estimate?)
                }
                None => None,
            };
            let per_element = add(one, predicate.as_ref().map_or(Cost::default(), |p| p.cost));
            let mut cost = add(one, add(input.cost, times(per_element, len)));
            let shape = match function {
                Function::Map => {
                    cost.cells = cost.cells.saturating_add(len).saturating_add(1);
                    let elem = predicate.map_or(Shape::Scalar, |p| p.shape);
                    self.array(len, elem, node)?
                }
                Function::Filter => {
                    cost.cells = cost.cells.saturating_add(len).saturating_add(1);
                    input.shape
                }
                _ => Shape::Scalar,
            };
            return Ok(Estimate { cost, shape });
        }
        let mut cost = one;
        for arg in args {
            let a = self.node(arg)?;
            cost = add(cost, a.cost);
            let len = a.shape.len();
            match function {
                Function::Max | Function::Min | Function::Sum | Function::Mean | Function::Avg => {
                    cost.steps = cost.steps.saturating_add(len)
                }
                Function::Median => {
                    cost.steps = cost.steps.saturating_add(len);
                    cost.cells = cost.cells.saturating_add(len).saturating_add(1);
                }
                _ => {}
            }
        }
        Ok(Estimate {
            cost,
            shape: Shape::Scalar,
        })
    }
}
