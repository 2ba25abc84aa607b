//! Parses tokens into a tree with expr-lang's precedence, resolving trigger names and
//! functions as it goes, so evaluation never looks a name up.

use super::lexer::{Tok, Token};
use super::{ErrorKind, FormulaError, MAX_DEPTH, MAX_ITEMS, Position};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UnaryOp {
    Neg,
    Plus,
    Not,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BinaryOp {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Pow,
    Coalesce,
}

impl BinaryOp {
    /// expr-lang's precedence and whether the operator is right associative.
    fn of(tok: &Tok) -> Option<(BinaryOp, u16, bool)> {
        Some(match tok {
            Tok::Or => (BinaryOp::Or, 10, false),
            Tok::And => (BinaryOp::And, 15, false),
            Tok::EqEq => (BinaryOp::Eq, 20, false),
            Tok::NotEq => (BinaryOp::Ne, 20, false),
            Tok::Lt => (BinaryOp::Lt, 20, false),
            Tok::Le => (BinaryOp::Le, 20, false),
            Tok::Gt => (BinaryOp::Gt, 20, false),
            Tok::Ge => (BinaryOp::Ge, 20, false),
            Tok::In => (BinaryOp::In, 20, false),
            Tok::Plus => (BinaryOp::Add, 30, false),
            Tok::Minus => (BinaryOp::Sub, 30, false),
            Tok::Star => (BinaryOp::Mul, 60, false),
            Tok::Slash => (BinaryOp::Div, 60, false),
            Tok::Percent => (BinaryOp::Mod, 60, false),
            Tok::Pow => (BinaryOp::Pow, 100, true),
            Tok::QuestionQuestion => (BinaryOp::Coalesce, 500, false),
            _ => return None,
        })
    }

    pub(crate) fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Or => "||",
            BinaryOp::And => "&&",
            BinaryOp::Eq => "==",
            BinaryOp::Ne => "!=",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
            BinaryOp::In => "in",
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Mod => "%",
            BinaryOp::Pow => "**",
            BinaryOp::Coalesce => "??",
        }
    }
}

/// The functions a formula may call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Function {
    Abs,
    Ceil,
    Floor,
    Round,
    Float,
    Int,
    Max,
    Min,
    Sum,
    Mean,
    Avg,
    Median,
    Len,
    Count,
    Filter,
    Map,
    All,
    Any,
    None,
    One,
}

impl Function {
    pub(crate) const ALL: [Function; 20] = [
        Function::Abs,
        Function::All,
        Function::Any,
        Function::Avg,
        Function::Ceil,
        Function::Count,
        Function::Filter,
        Function::Float,
        Function::Floor,
        Function::Int,
        Function::Len,
        Function::Map,
        Function::Max,
        Function::Mean,
        Function::Median,
        Function::Min,
        Function::None,
        Function::One,
        Function::Round,
        Function::Sum,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Function::Abs => "abs",
            Function::Ceil => "ceil",
            Function::Floor => "floor",
            Function::Round => "round",
            Function::Float => "float",
            Function::Int => "int",
            Function::Max => "max",
            Function::Min => "min",
            Function::Sum => "sum",
            Function::Mean => "mean",
            Function::Avg => "avg",
            Function::Median => "median",
            Function::Len => "len",
            Function::Count => "count",
            Function::Filter => "filter",
            Function::Map => "map",
            Function::All => "all",
            Function::Any => "any",
            Function::None => "none",
            Function::One => "one",
        }
    }

    fn by_name(name: &str) -> Option<Function> {
        Function::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Argument counts: (min, max, as written in errors).
    fn arity(self) -> (usize, usize, &'static str) {
        match self {
            Function::Max | Function::Min => (1, usize::MAX, "at least 1"),
            Function::Count => (1, 2, "1 or 2"),
            Function::Filter
            | Function::Map
            | Function::All
            | Function::Any
            | Function::None
            | Function::One => (2, 2, "2"),
            _ => (1, 1, "1"),
        }
    }

    /// Whether the second argument is a predicate over `#`.
    pub(crate) fn takes_predicate(self) -> bool {
        matches!(
            self,
            Function::Count
                | Function::Filter
                | Function::Map
                | Function::All
                | Function::Any
                | Function::None
                | Function::One
        )
    }
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum NodeKind {
    Number(f64),
    Bool(bool),
    Nil,
    /// Index into the trigger names.
    Trigger(usize),
    /// `#`, the current element of the innermost predicate.
    Element,
    Array(Vec<Node>),
    Unary(UnaryOp, Box<Node>),
    Binary(BinaryOp, Box<Node>, Box<Node>),
    Conditional(Box<Node>, Box<Node>, Box<Node>),
    Call(Function, Vec<Node>),
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Node {
    pub(crate) kind: NodeKind,
    pub(crate) pos: Position,
    /// Height of the tree under this node (a leaf is 1).
    depth: usize,
}

impl NodeKind {
    fn children(&self) -> Vec<&Node> {
        match self {
            NodeKind::Number(_)
            | NodeKind::Bool(_)
            | NodeKind::Nil
            | NodeKind::Trigger(_)
            | NodeKind::Element => Vec::new(),
            NodeKind::Array(items) | NodeKind::Call(_, items) => items.iter().collect(),
            NodeKind::Unary(_, a) => vec![a],
            NodeKind::Binary(_, a, b) => vec![a, b],
            NodeKind::Conditional(a, b, c) => vec![a, b, c],
        }
    }
}

struct Parser<'a> {
    source: &'a str,
    tokens: &'a [Token],
    at: usize,
    triggers: &'a [String],
    /// How many predicates enclose the current point (`#` needs at least one).
    predicate_depth: usize,
    /// How many `expression` calls are active.
    nesting: usize,
}

/// Parses a whole formula.
pub(crate) fn parse(
    source: &str,
    tokens: &[Token],
    triggers: &[String],
) -> Result<Node, FormulaError> {
    let mut p = Parser {
        source,
        tokens,
        at: 0,
        triggers,
        predicate_depth: 0,
        nesting: 0,
    };
    if p.peek().tok == Tok::Eof {
        return Err(FormulaError {
            kind: ErrorKind::Empty,
            position: None,
            multiline: false,
        });
    }
    let node = p.expression(0)?;
    let next = p.peek();
    if next.tok != Tok::Eof {
        return Err(p.unexpected(next, "an operator or the end of the formula"));
    }
    Ok(node)
}

impl<'a> Parser<'a> {
    fn peek(&self) -> &'a Token {
        // The token list always ends with Eof, and `at` never moves past it.
        &self.tokens[self.at.min(self.tokens.len() - 1)]
    }

    fn next(&mut self) -> &'a Token {
        let t = self.peek();
        if t.tok != Tok::Eof {
            self.at += 1;
        }
        t
    }

    fn error(&self, kind: ErrorKind, pos: Position) -> FormulaError {
        FormulaError::at(kind, pos, self.source)
    }

    fn unexpected(&self, found: &Token, expected: &str) -> FormulaError {
        self.error(
            ErrorKind::Syntax(format!(
                "expected {expected}, found {}",
                found.tok.describe()
            )),
            found.pos,
        )
    }

    fn expect(&mut self, tok: Tok, what: &str) -> Result<&'a Token, FormulaError> {
        let t = self.peek();
        if t.tok == tok {
            Ok(self.next())
        } else {
            Err(self.unexpected(t, what))
        }
    }

    /// Precedence climbing as expr-lang's `parseExpression`: binary operators at or above
    /// `min`, then, at the top level, a ternary.
    fn expression(&mut self, min: u16) -> Result<Node, FormulaError> {
        self.nesting += 1;
        let result = if self.nesting > MAX_DEPTH {
            Err(self.too_deep(self.peek().pos))
        } else {
            self.binary_and_ternary(min)
        };
        self.nesting -= 1;
        result
    }

    fn too_deep(&self, pos: Position) -> FormulaError {
        self.error(ErrorKind::TooDeep, pos)
    }

    /// Builds a node, refusing trees deeper than [`MAX_DEPTH`].
    fn node(&self, kind: NodeKind, pos: Position) -> Result<Node, FormulaError> {
        let depth = 1 + kind.children().iter().map(|c| c.depth).max().unwrap_or(0);
        if depth > MAX_DEPTH {
            return Err(self.too_deep(pos));
        }
        Ok(Node { kind, pos, depth })
    }

    fn binary_and_ternary(&mut self, min: u16) -> Result<Node, FormulaError> {
        let mut left = self.unary()?;
        while let Some((op, prec, right_assoc)) = BinaryOp::of(&self.peek().tok) {
            if prec < min {
                break;
            }
            let pos = self.next().pos;
            let right = self.expression(if right_assoc { prec } else { prec + 1 })?;
            left = self.node(NodeKind::Binary(op, Box::new(left), Box::new(right)), pos)?;
        }
        if min == 0 && self.peek().tok == Tok::Question {
            let pos = self.next().pos;
            let then = self.expression(0)?;
            self.expect(Tok::Colon, "`:` of the ternary `cond ? a : b`")?;
            let otherwise = self.expression(0)?;
            left = self.node(
                NodeKind::Conditional(Box::new(left), Box::new(then), Box::new(otherwise)),
                pos,
            )?;
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Node, FormulaError> {
        let (op, prec) = match self.peek().tok {
            Tok::Not => (UnaryOp::Not, 50),
            Tok::Minus => (UnaryOp::Neg, 90),
            Tok::Plus => (UnaryOp::Plus, 90),
            _ => return self.primary(),
        };
        let pos = self.next().pos;
        let operand = self.expression(prec)?;
        self.node(NodeKind::Unary(op, Box::new(operand)), pos)
    }

    fn primary(&mut self) -> Result<Node, FormulaError> {
        let t = self.next();
        let pos = t.pos;
        let kind = match &t.tok {
            Tok::Number(n) => NodeKind::Number(*n),
            Tok::True => NodeKind::Bool(true),
            Tok::False => NodeKind::Bool(false),
            Tok::Nil => NodeKind::Nil,
            Tok::Hash => {
                if self.predicate_depth == 0 {
                    return Err(self.error(ErrorKind::PlaceholderOutsidePredicate, pos));
                }
                NodeKind::Element
            }
            Tok::LParen => {
                let inner = self.expression(0)?;
                self.expect(Tok::RParen, "`)`")?;
                return Ok(inner);
            }
            Tok::LBracket => NodeKind::Array(self.list(Tok::RBracket, "`,` or `]`", pos)?),
            Tok::Ident(name) if self.peek().tok == Tok::LParen => {
                self.next();
                return self.call(name, pos);
            }
            Tok::Ident(name) => match self.triggers.iter().position(|t| t == name) {
                Some(index) => NodeKind::Trigger(index),
                None => {
                    return Err(self.error(
                        ErrorKind::UnknownTrigger {
                            name: name.clone(),
                            known: self.triggers.to_vec(),
                        },
                        pos,
                    ));
                }
            },
            _ => return Err(self.unexpected(t, "a number, a trigger name, `(` or `[`")),
        };
        self.node(kind, pos)
    }

    /// Comma-separated expressions up to `close` (a trailing comma is allowed, as in expr), at
    /// most [`MAX_ITEMS`] of them.
    fn list(
        &mut self,
        close: Tok,
        expected: &str,
        pos: Position,
    ) -> Result<Vec<Node>, FormulaError> {
        let mut items = Vec::new();
        loop {
            if self.peek().tok == close {
                self.next();
                return Ok(items);
            }
            self.check_items(&items, "an array literal", pos)?;
            items.push(self.expression(0)?);
            let t = self.next();
            if t.tok == close {
                return Ok(items);
            }
            if t.tok != Tok::Comma {
                return Err(self.unexpected(t, expected));
            }
        }
    }

    fn call(&mut self, name: &str, pos: Position) -> Result<Node, FormulaError> {
        let Some(function) = Function::by_name(name) else {
            return Err(self.error(
                ErrorKind::UnknownFunction {
                    name: name.to_string(),
                },
                pos,
            ));
        };
        let mut args = Vec::new();
        if self.peek().tok == Tok::RParen {
            self.next();
        } else {
            loop {
                self.check_items(&args, "a function call", pos)?;
                let is_predicate = function.takes_predicate() && args.len() == 1;
                args.push(if is_predicate {
                    self.predicate()?
                } else {
                    self.expression(0)?
                });
                let t = self.next();
                match t.tok {
                    Tok::RParen => break,
                    Tok::Comma if self.peek().tok == Tok::RParen => {
                        self.next();
                        break;
                    }
                    Tok::Comma => {}
                    _ => return Err(self.unexpected(t, "`,` or `)`")),
                }
            }
        }
        let (min, max, expected) = function.arity();
        if args.len() < min || args.len() > max {
            return Err(self.error(
                ErrorKind::WrongArgumentCount {
                    function: function.name(),
                    expected,
                    found: args.len(),
                },
                pos,
            ));
        }
        self.node(NodeKind::Call(function, args), pos)
    }

    /// Refuses a next element once `items` holds [`MAX_ITEMS`].
    fn check_items(
        &self,
        items: &[Node],
        what: &'static str,
        pos: Position,
    ) -> Result<(), FormulaError> {
        if items.len() >= MAX_ITEMS {
            return Err(self.error(ErrorKind::TooManyItems { what }, pos));
        }
        Ok(())
    }

    /// A predicate: an expression over `#`, optionally in braces.
    fn predicate(&mut self) -> Result<Node, FormulaError> {
        self.predicate_depth += 1;
        let braced = self.peek().tok == Tok::LBrace;
        if braced {
            self.next();
        }
        let body = self.expression(0);
        self.predicate_depth -= 1;
        let body = body?;
        if braced {
            self.expect(Tok::RBrace, "`}` closing the predicate")?;
        }
        Ok(body)
    }
}
