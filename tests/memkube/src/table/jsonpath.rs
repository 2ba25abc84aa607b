//! The JSONPath of `additionalPrinterColumns`, as the API server evaluates it (client-go's
//! `util/jsonpath` with missing keys allowed): `.a.b`, `['a']`, `[*]`, `.*`, `[n]`, `[-n]`,
//! `[a:b:c]`, `..name`, unions `['a','b']` / `[0,2]`, and filters `[?(@.type=="Ready")]` with
//! `==`, `!=`, `<`, `<=`, `>`, `>=` or a bare `@.field` (it exists).
//!
//! A path that does not parse yields nothing, as a column whose path fails yields an empty cell.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    /// `..name`: the field at any depth.
    Recursive(String),
    Wildcard,
    Index(i64),
    Slice(Option<i64>, Option<i64>, Option<i64>),
    Union(Vec<Key>),
    Filter(Box<Filter>),
}

#[derive(Debug, Clone, PartialEq)]
enum Key {
    Field(String),
    Index(i64),
}

#[derive(Debug, Clone, PartialEq)]
enum Operand {
    Path(Vec<Step>),
    Literal(Value),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, PartialEq)]
struct Filter {
    left: Operand,
    /// `None`: `[?(@.field)]`, the field exists.
    compare: Option<(Op, Operand)>,
}

/// A parsed path.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct JsonPath {
    steps: Vec<Step>,
}

/// Why a path does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParseError(pub String);

impl JsonPath {
    /// Parses `.status.conditions[?(@.type=="Ready")].status` (with or without the `{}` the
    /// API server wraps a column's path in).
    pub(crate) fn parse(path: &str) -> Result<Self, ParseError> {
        let trimmed = path.trim();
        let inner = trimmed
            .strip_prefix('{')
            .and_then(|p| p.strip_suffix('}'))
            .unwrap_or(trimmed);
        let mut parser = Parser {
            src: inner.as_bytes(),
            pos: 0,
        };
        let steps = parser.steps(false)?;
        if parser.pos != parser.src.len() {
            return Err(parser.error("unexpected character"));
        }
        Ok(Self { steps })
    }

    /// Every value the path selects in `root`, in document order.
    pub(crate) fn find<'v>(&self, root: &'v Value) -> Vec<&'v Value> {
        eval(&self.steps, vec![root])
    }
}

struct Parser<'s> {
    src: &'s [u8],
    pos: usize,
}

impl Parser<'_> {
    fn error(&self, what: &str) -> ParseError {
        ParseError(format!(
            "{what} at character {} of {:?}",
            self.pos,
            String::from_utf8_lossy(self.src)
        ))
    }

    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    fn eat(&mut self, byte: u8) -> bool {
        if self.peek() == Some(byte) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn skip_spaces(&mut self) {
        while self.peek() == Some(b' ') {
            self.pos += 1;
        }
    }

    /// Steps until the end, or, inside a filter, until an operator or `)`.
    fn steps(&mut self, in_filter: bool) -> Result<Vec<Step>, ParseError> {
        let mut steps = Vec::new();
        loop {
            match self.peek() {
                None => break,
                Some(b')' | b' ' | b'=' | b'!' | b'<' | b'>') if in_filter => break,
                Some(b'.') => {
                    self.pos += 1;
                    if self.eat(b'.') {
                        if self.peek() == Some(b'[') {
                            return Err(self.error("`..[` is not supported"));
                        }
                        steps.push(Step::Recursive(self.name()?));
                    } else if self.eat(b'*') {
                        steps.push(Step::Wildcard);
                    } else if self.peek().is_none() || self.peek() == Some(b'[') {
                        // `.` alone (or `.[0]`) is the current node.
                    } else {
                        steps.push(Step::Field(self.name()?));
                    }
                }
                Some(b'[') => {
                    self.pos += 1;
                    steps.push(self.bracket()?);
                    if !self.eat(b']') {
                        return Err(self.error("expected `]`"));
                    }
                }
                Some(_) if steps.is_empty() && !in_filter => {
                    // A path without a leading dot (`spec.replicas`) reads from the root too.
                    steps.push(Step::Field(self.name()?));
                }
                Some(_) => return Err(self.error("unexpected character")),
            }
        }
        Ok(steps)
    }

    fn name(&mut self) -> Result<String, ParseError> {
        let start = self.pos;
        while let Some(b) = self.peek() {
            if matches!(
                b,
                b'.' | b'[' | b']' | b')' | b' ' | b'=' | b'!' | b'<' | b'>' | b'{' | b'}'
            ) {
                break;
            }
            self.pos += 1;
        }
        if start == self.pos {
            return Err(self.error("expected a field name"));
        }
        Ok(String::from_utf8_lossy(&self.src[start..self.pos]).into_owned())
    }

    fn quoted(&mut self) -> Result<String, ParseError> {
        let Some(quote) = self.peek().filter(|q| *q == b'\'' || *q == b'"') else {
            return Err(self.error("expected a quoted string"));
        };
        self.pos += 1;
        let start = self.pos;
        while let Some(b) = self.peek() {
            if b == quote {
                let text = String::from_utf8_lossy(&self.src[start..self.pos]).into_owned();
                self.pos += 1;
                return Ok(text);
            }
            self.pos += 1;
        }
        Err(self.error("unterminated string"))
    }

    fn int(&mut self) -> Result<Option<i64>, ParseError> {
        self.skip_spaces();
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.pos += 1;
        }
        if start == self.pos {
            return Ok(None);
        }
        std::str::from_utf8(&self.src[start..self.pos])
            .ok()
            .and_then(|s| s.parse().ok())
            .map(Some)
            .ok_or_else(|| self.error("expected an integer"))
    }

    fn bracket(&mut self) -> Result<Step, ParseError> {
        self.skip_spaces();
        match self.peek() {
            Some(b'*') => {
                self.pos += 1;
                self.skip_spaces();
                Ok(Step::Wildcard)
            }
            Some(b'?') => {
                self.pos += 1;
                if !self.eat(b'(') {
                    return Err(self.error("expected `(` after `?`"));
                }
                let filter = self.filter()?;
                if !self.eat(b')') {
                    return Err(self.error("expected `)`"));
                }
                Ok(Step::Filter(Box::new(filter)))
            }
            Some(b'\'' | b'"') => {
                let mut keys = vec![Key::Field(self.quoted()?)];
                self.skip_spaces();
                while self.eat(b',') {
                    self.skip_spaces();
                    keys.push(Key::Field(self.quoted()?));
                    self.skip_spaces();
                }
                Ok(match keys.as_slice() {
                    [Key::Field(one)] => Step::Field(one.clone()),
                    _ => Step::Union(keys),
                })
            }
            _ => {
                let first = self.int()?;
                self.skip_spaces();
                if self.peek() == Some(b':') {
                    self.pos += 1;
                    let end = self.int()?;
                    self.skip_spaces();
                    let step = if self.eat(b':') { self.int()? } else { None };
                    self.skip_spaces();
                    return Ok(Step::Slice(first, end, step));
                }
                let Some(first) = first else {
                    return Err(self.error("expected an index, a slice, `*`, a key or a filter"));
                };
                let mut keys = vec![Key::Index(first)];
                while self.eat(b',') {
                    let next = self.int()?.ok_or_else(|| self.error("expected an index"))?;
                    keys.push(Key::Index(next));
                    self.skip_spaces();
                }
                Ok(match keys.as_slice() {
                    [Key::Index(one)] => Step::Index(*one),
                    _ => Step::Union(keys),
                })
            }
        }
    }

    fn operand(&mut self) -> Result<Operand, ParseError> {
        self.skip_spaces();
        match self.peek() {
            Some(b'@') => {
                self.pos += 1;
                Ok(Operand::Path(self.steps(true)?))
            }
            Some(b'\'' | b'"') => Ok(Operand::Literal(Value::String(self.quoted()?))),
            _ => {
                let start = self.pos;
                while self
                    .peek()
                    .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+'))
                {
                    self.pos += 1;
                }
                let text = std::str::from_utf8(&self.src[start..self.pos]).unwrap_or_default();
                match text {
                    "true" => Ok(Operand::Literal(Value::Bool(true))),
                    "false" => Ok(Operand::Literal(Value::Bool(false))),
                    _ => text
                        .parse::<f64>()
                        .ok()
                        .and_then(serde_json::Number::from_f64)
                        .map(|n| Operand::Literal(Value::Number(n)))
                        .ok_or_else(|| self.error("expected `@`, a string or a number")),
                }
            }
        }
    }

    fn filter(&mut self) -> Result<Filter, ParseError> {
        let left = self.operand()?;
        self.skip_spaces();
        let op = if self.src[self.pos..].starts_with(b"==") {
            Some((Op::Eq, 2))
        } else if self.src[self.pos..].starts_with(b"!=") {
            Some((Op::Ne, 2))
        } else if self.src[self.pos..].starts_with(b"<=") {
            Some((Op::Le, 2))
        } else if self.src[self.pos..].starts_with(b">=") {
            Some((Op::Ge, 2))
        } else if self.src[self.pos..].starts_with(b"<") {
            Some((Op::Lt, 1))
        } else if self.src[self.pos..].starts_with(b">") {
            Some((Op::Gt, 1))
        } else {
            None
        };
        let compare = match op {
            Some((op, len)) => {
                self.pos += len;
                let right = self.operand()?;
                self.skip_spaces();
                Some((op, right))
            }
            None => None,
        };
        Ok(Filter { left, compare })
    }
}

fn index(len: usize, i: i64) -> Option<usize> {
    let len = i64::try_from(len).ok()?;
    let i = if i < 0 { len + i } else { i };
    (0..len)
        .contains(&i)
        .then(|| usize::try_from(i).ok())
        .flatten()
}

fn eval<'v>(steps: &[Step], mut current: Vec<&'v Value>) -> Vec<&'v Value> {
    for step in steps {
        let mut next = Vec::new();
        for value in current {
            apply(step, value, &mut next);
        }
        current = next;
    }
    current
}

fn apply<'v>(step: &Step, value: &'v Value, out: &mut Vec<&'v Value>) {
    match step {
        Step::Field(name) => {
            if let Some(v) = value.as_object().and_then(|m| m.get(name)) {
                out.push(v);
            }
        }
        Step::Recursive(name) => recursive(name, value, out),
        Step::Wildcard => match value {
            Value::Array(items) => out.extend(items.iter()),
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.extend(keys.into_iter().filter_map(|k| map.get(k)));
            }
            _ => {}
        },
        Step::Index(i) => {
            if let Some(v) = value
                .as_array()
                .and_then(|a| index(a.len(), *i).and_then(|i| a.get(i)))
            {
                out.push(v);
            }
        }
        Step::Slice(start, end, step) => {
            if let Some(items) = value.as_array() {
                let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
                let clamp = |i: i64| if i < 0 { (len + i).max(0) } else { i.min(len) };
                let (from, to) = (clamp(start.unwrap_or(0)), clamp(end.unwrap_or(len)));
                let by = step.unwrap_or(1).max(1);
                let mut i = from;
                while i < to {
                    if let Some(v) = usize::try_from(i).ok().and_then(|i| items.get(i)) {
                        out.push(v);
                    }
                    i = i.saturating_add(by);
                }
            }
        }
        Step::Union(keys) => {
            for key in keys {
                let step = match key {
                    Key::Field(name) => Step::Field(name.clone()),
                    Key::Index(i) => Step::Index(*i),
                };
                apply(&step, value, out);
            }
        }
        Step::Filter(filter) => {
            if let Some(items) = value.as_array() {
                out.extend(items.iter().filter(|item| passes(filter, item)));
            }
        }
    }
}

fn recursive<'v>(name: &str, value: &'v Value, out: &mut Vec<&'v Value>) {
    match value {
        Value::Object(map) => {
            if let Some(v) = map.get(name) {
                out.push(v);
            }
            for v in map.values() {
                recursive(name, v, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| recursive(name, v, out)),
        _ => {}
    }
}

fn operand<'v>(operand: &'v Operand, item: &'v Value) -> Option<&'v Value> {
    match operand {
        Operand::Path(steps) => eval(steps, vec![item]).into_iter().next(),
        Operand::Literal(v) => Some(v),
    }
}

fn passes(filter: &Filter, item: &Value) -> bool {
    let Some(left) = operand(&filter.left, item) else {
        return false;
    };
    let Some((op, right)) = &filter.compare else {
        return true;
    };
    let Some(right) = operand(right, item) else {
        return false;
    };
    let ordering = match (left, right) {
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        (Value::Number(a), Value::Number(b)) => a
            .as_f64()
            .zip(b.as_f64())
            .and_then(|(a, b)| a.partial_cmp(&b)),
        (Value::Bool(a), Value::Bool(b)) => Some(a.cmp(b)),
        _ => None,
    };
    let Some(ordering) = ordering else {
        return false;
    };
    match op {
        Op::Eq => ordering.is_eq(),
        Op::Ne => ordering.is_ne(),
        Op::Lt => ordering.is_lt(),
        Op::Le => ordering.is_le(),
        Op::Gt => ordering.is_gt(),
        Op::Ge => ordering.is_ge(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn find(path: &str, doc: &Value) -> Vec<Value> {
        JsonPath::parse(path)
            .unwrap_or_else(|e| panic!("{path}: {e:?}"))
            .find(doc)
            .into_iter()
            .cloned()
            .collect()
    }

    #[test]
    fn the_paths_of_keda_s_printer_columns_select_what_the_api_server_selects() {
        let doc = json!({
            "metadata": {"creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {
                "scaleTargetRef": {"name": "web"},
                "secretTargetRef": [{"name": "a"}, {"name": "b"}],
                "minReplicaCount": 0,
            },
            "status": {"conditions": [
                {"type": "Active", "status": "False"},
                {"type": "Ready", "status": "True"},
            ]},
        });
        assert_eq!(find(".spec.scaleTargetRef.name", &doc), vec![json!("web")]);
        assert_eq!(find(".spec.minReplicaCount", &doc), vec![json!(0)]);
        assert_eq!(
            find(r#".status.conditions[?(@.type=="Ready")].status"#, &doc),
            vec![json!("True")]
        );
        assert_eq!(
            find(".spec.secretTargetRef[*].name", &doc),
            vec![json!("a"), json!("b")]
        );
        assert!(find(".spec.hashiCorpVault.address", &doc).is_empty());
        assert!(find(r#".status.conditions[?(@.type=="Paused")].status"#, &doc).is_empty());
        assert_eq!(find("{.metadata.creationTimestamp}", &doc).len(), 1);
    }

    #[test]
    fn indexes_slices_unions_wildcards_and_recursion() {
        let doc = json!({"a": [{"n": 1}, {"n": 2}, {"n": 3}], "m": {"y": 2, "x": 1}});
        assert_eq!(find(".a[0].n", &doc), vec![json!(1)]);
        assert_eq!(find(".a[-1].n", &doc), vec![json!(3)]);
        assert!(find(".a[7].n", &doc).is_empty());
        assert_eq!(find(".a[0:2].n", &doc), vec![json!(1), json!(2)]);
        assert_eq!(find(".a[0,2].n", &doc), vec![json!(1), json!(3)]);
        assert_eq!(find("['m']['x']", &doc), vec![json!(1)]);
        assert_eq!(find(".m.*", &doc), vec![json!(1), json!(2)]);
        assert_eq!(find("..n", &doc), vec![json!(1), json!(2), json!(3)]);
        assert_eq!(find(".a[?(@.n>1)].n", &doc), vec![json!(2), json!(3)]);
        assert_eq!(find(".a[?(@.n != 2)].n", &doc), vec![json!(1), json!(3)]);
        assert_eq!(find(".a[?(@.n)].n", &doc).len(), 3);
    }

    #[test]
    fn malformed_paths_do_not_parse() {
        for bad in [".a[", ".a[?(@.b==)]", ".a['x", ".a]"] {
            assert!(JsonPath::parse(bad).is_err(), "{bad} parsed");
        }
    }
}
