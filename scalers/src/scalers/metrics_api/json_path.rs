//! The part of GJSON's path syntax (github.com/tidwall/gjson, which KEDA's `metrics-api` uses for
//! `format: json`) that can select one number:
//!
//! | syntax | meaning |
//! |---|---|
//! | `a.b.c` | key `b` of the object at `a`, ... |
//! | `a.0.b` | element 0 of the array at `a` (on an object, `0` is a key) |
//! | `a.#` | the number of elements of the array at `a` (last component only) |
//! | `a.#(name=="w").tasks` | the first element of `a` matching the query; operators `==`, `!=`, `<`, `<=`, `>`, `>=`, `%` (pattern with `*` and `?`), `!%`; values `"string"`, numbers, `true`, `false`; `#(key)` matches elements that have `key`; `#(=="x")` compares the element itself |
//! | `fav\.movie` | a `.` (or any character) escaped with `\` is part of the key |
//!
//! Syntax that selects several values (`a.#.b`, `#(...)#`) or that GJSON offers beyond this
//! (wildcards `*` `?` in keys, `@` modifiers, `|` pipes, `[...]`/`{...}` multipaths, `..`) is
//! rejected when the trigger is built, with a message saying so.

use serde_json::Value;

/// A parsed path.
#[derive(Clone, Debug, PartialEq)]
pub struct JsonPath {
    components: Vec<Component>,
}

#[derive(Clone, Debug, PartialEq)]
enum Component {
    /// An object key, or an array index when the key is a number and the value an array.
    Key(String),
    /// `#`: the length of an array.
    Count,
    /// `#(...)`: the first matching element.
    Query(Query),
}

#[derive(Clone, Debug, PartialEq)]
struct Query {
    /// The path inside each element (empty: the element itself).
    path: Vec<Component>,
    /// The comparison; `None` tests that `path` exists.
    compare: Option<(Op, Literal)>,
    /// The query as written, for messages.
    text: String,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Like,
    NotLike,
}

#[derive(Clone, Debug, PartialEq)]
enum Literal {
    String(String),
    Number(f64),
    Bool(bool),
}

impl JsonPath {
    /// Parses `path`.
    ///
    /// # Errors
    /// Syntax outside the supported subset, or malformed (an empty component, an unbalanced
    /// query); the message says which.
    pub fn parse(path: &str) -> Result<Self, String> {
        if path.trim().is_empty() {
            return Err("the path is empty".into());
        }
        if path.starts_with("..") {
            return Err("JSON-lines paths (`..`) are not supported".into());
        }
        let components = parse_components(path)?;
        if let Some(pos) = components.iter().position(|c| *c == Component::Count)
            && pos + 1 != components.len()
        {
            return Err(
                "`#` followed by a path selects one value per array element; it must select one number (use an index like `0` or a query like `#(name==\"x\")`)"
                    .into(),
            );
        }
        Ok(Self { components })
    }

    /// The value `self` selects in `root`: a JSON value, or the length of an array for `#`.
    ///
    /// # Errors
    /// A component does not resolve; the message names the component and where it failed.
    pub fn resolve(&self, root: &Value) -> Result<Value, String> {
        let mut current = root;
        let mut walked = String::new();
        for component in &self.components {
            let at = if walked.is_empty() {
                "the top level".to_string()
            } else {
                format!("\"{walked}\"")
            };
            match component {
                Component::Key(key) => {
                    current = step(current, key).ok_or_else(|| match current {
                        Value::Object(_) => format!("key \"{key}\" not found at {at}"),
                        Value::Array(items) => match key.parse::<usize>() {
                            Ok(_) => format!(
                                "index {key} is out of range: the array at {at} has {} elements",
                                items.len()
                            ),
                            Err(_) => format!("{at} is an array; \"{key}\" is not an index"),
                        },
                        other => {
                            format!("{at} is {}, which has no key \"{key}\"", type_name(other))
                        }
                    })?;
                }
                Component::Count => {
                    return match current {
                        Value::Array(items) => Ok(Value::from(items.len())),
                        other => Err(format!(
                            "`#` counts the elements of an array, but {at} is {}",
                            type_name(other)
                        )),
                    };
                }
                Component::Query(query) => {
                    let Value::Array(items) = current else {
                        return Err(format!(
                            "the query #({}) needs an array, but {at} is {}",
                            query.text,
                            type_name(current)
                        ));
                    };
                    current = items
                        .iter()
                        .find(|item| query.matches(item))
                        .ok_or_else(|| {
                            format!("no element of the array at {at} matches #({})", query.text)
                        })?;
                }
            }
            if !walked.is_empty() {
                walked.push('.');
            }
            walked.push_str(&component.to_string());
        }
        Ok(current.clone())
    }
}

impl std::fmt::Display for Component {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Key(key) => f.write_str(&key.replace('.', "\\.")),
            Self::Count => f.write_str("#"),
            Self::Query(q) => write!(f, "#({})", q.text),
        }
    }
}

/// `key` of an object, or element `key` of an array.
fn step<'a>(value: &'a Value, key: &str) -> Option<&'a Value> {
    match value {
        Value::Object(map) => map.get(key),
        Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    }
}

/// `a number`, `a string`, ... for messages.
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Splits at unescaped dots outside queries and parses each component.
fn parse_components(path: &str) -> Result<Vec<Component>, String> {
    let mut components = Vec::new();
    let mut chars = path.chars().peekable();
    while chars.peek().is_some() {
        let mut key = String::new();
        let mut escaped_any = false;
        // A query component: `#(` ... `)` with nested parentheses and quoted strings.
        if chars.peek() == Some(&'#') {
            chars.next();
            match chars.peek() {
                Some('(') => {
                    chars.next();
                    let text = take_query(&mut chars)?;
                    if chars.peek() == Some(&'#') {
                        return Err(format!(
                            "#({text})# selects every matching element; it must select one number (drop the last `#` to take the first match)"
                        ));
                    }
                    components.push(Component::Query(Query::parse(&text)?));
                    expect_separator(&mut chars)?;
                    continue;
                }
                None | Some('.') => {
                    components.push(Component::Count);
                    expect_separator(&mut chars)?;
                    continue;
                }
                Some(_) => key.push('#'),
            }
        }
        while let Some(&c) = chars.peek() {
            match c {
                '\\' => {
                    chars.next();
                    let escaped = chars
                        .next()
                        .ok_or("the path ends with a lone `\\`".to_string())?;
                    key.push(escaped);
                    escaped_any = true;
                }
                '.' => break,
                '*' | '?' => {
                    return Err(format!(
                        "wildcards (`{c}`) are not supported; escape it as `\\{c}` if it is part of a key"
                    ));
                }
                '|' => return Err("pipes (`|`) are not supported".into()),
                _ => {
                    key.push(c);
                    chars.next();
                }
            }
        }
        if key.is_empty() && !escaped_any {
            return Err(
                "the path has an empty component (two dots in a row, or a dot at either end)"
                    .into(),
            );
        }
        if !escaped_any {
            if key.starts_with('@') {
                return Err(format!("modifiers (`{key}`) are not supported"));
            }
            if key.starts_with('[') || key.starts_with('{') {
                return Err("multipaths (`[...]`, `{...}`) are not supported".into());
            }
        }
        components.push(Component::Key(key));
        expect_separator(&mut chars)?;
    }
    Ok(components)
}

/// After a component: the end, or a dot followed by another component.
fn expect_separator(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Result<(), String> {
    match chars.next() {
        None => Ok(()),
        Some('.') if chars.peek().is_some() => Ok(()),
        Some('.') => Err("the path ends with a dot".into()),
        Some(c) => Err(format!("unexpected `{c}` after a component")),
    }
}

/// The text of a query up to its closing parenthesis (consumed).
fn take_query(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Result<String, String> {
    let mut text = String::new();
    let mut depth = 0usize;
    let mut in_string = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' if in_string => {
                text.push(c);
                if let Some(next) = chars.next() {
                    text.push(next);
                }
                continue;
            }
            '"' => in_string = !in_string,
            '(' if !in_string => depth += 1,
            ')' if !in_string => {
                if depth == 0 {
                    return Ok(text);
                }
                depth -= 1;
            }
            _ => {}
        }
        text.push(c);
    }
    Err("a query `#(` is not closed with `)`".into())
}

impl Query {
    fn parse(text: &str) -> Result<Self, String> {
        const OPS: [(&str, Op); 8] = [
            ("==", Op::Eq),
            ("!=", Op::Ne),
            ("<=", Op::Le),
            (">=", Op::Ge),
            ("!%", Op::NotLike),
            ("<", Op::Lt),
            (">", Op::Gt),
            ("%", Op::Like),
        ];
        // The operator is the first one outside a quoted string.
        let mut in_string = false;
        let mut split = None;
        let bytes: Vec<(usize, char)> = text.char_indices().collect();
        'scan: for (i, (at, c)) in bytes.iter().enumerate() {
            if *c == '"' && (i == 0 || bytes[i - 1].1 != '\\') {
                in_string = !in_string;
            }
            if in_string || *c == '\\' {
                continue;
            }
            for (name, op) in OPS {
                if text[*at..].starts_with(name) {
                    // `=` alone is GJSON's alias of `==`; `!` starts `!=` or `!%`.
                    split = Some((*at, name.len(), op));
                    break 'scan;
                }
            }
            if *c == '=' {
                split = Some((*at, 1, Op::Eq));
                break;
            }
        }
        let (path_text, compare) = match split {
            None => (text.trim(), None),
            Some((at, len, op)) => {
                let literal = Literal::parse(text[at + len..].trim())
                    .map_err(|e| format!("in the query #({text}): {e}"))?;
                (text[..at].trim(), Some((op, literal)))
            }
        };
        let path = if path_text.is_empty() {
            if compare.is_none() {
                return Err("the query #() is empty".into());
            }
            Vec::new()
        } else {
            let nested =
                parse_components(path_text).map_err(|e| format!("in the query #({text}): {e}"))?;
            if nested.contains(&Component::Count) {
                return Err(format!(
                    "in the query #({text}): `#` is not supported inside a query"
                ));
            }
            nested
        };
        Ok(Self {
            path,
            compare,
            text: text.to_string(),
        })
    }

    fn matches(&self, item: &Value) -> bool {
        let mut value = item;
        for component in &self.path {
            let next = match component {
                Component::Key(key) => step(value, key),
                Component::Query(q) => match value {
                    Value::Array(items) => items.iter().find(|i| q.matches(i)),
                    _ => None,
                },
                Component::Count => None,
            };
            match next {
                Some(v) => value = v,
                None => return false,
            }
        }
        let Some((op, literal)) = &self.compare else {
            return true;
        };
        match (literal, value) {
            (Literal::String(want), Value::String(have)) => match op {
                Op::Like => like(have, want),
                Op::NotLike => !like(have, want),
                _ => compare(*op, have.as_str().cmp(want.as_str())),
            },
            (Literal::Number(want), Value::Number(have)) => have
                .as_f64()
                .and_then(|have| have.partial_cmp(want))
                .is_some_and(|ordering| compare(*op, ordering)),
            (Literal::Bool(want), Value::Bool(have)) => match op {
                Op::Eq => have == want,
                Op::Ne => have != want,
                _ => false,
            },
            _ => false,
        }
    }
}

fn compare(op: Op, ordering: std::cmp::Ordering) -> bool {
    use std::cmp::Ordering::*;
    match op {
        Op::Eq => ordering == Equal,
        Op::Ne => ordering != Equal,
        Op::Lt => ordering == Less,
        Op::Le => ordering != Greater,
        Op::Gt => ordering == Greater,
        Op::Ge => ordering != Less,
        Op::Like | Op::NotLike => false,
    }
}

impl Literal {
    fn parse(text: &str) -> Result<Self, String> {
        if let Some(inner) = text.strip_prefix('"') {
            let inner = inner
                .strip_suffix('"')
                .ok_or("a string value is not closed with `\"`")?;
            let mut value = String::new();
            let mut chars = inner.chars();
            while let Some(c) = chars.next() {
                if c == '\\' {
                    value.extend(chars.next());
                } else {
                    value.push(c);
                }
            }
            return Ok(Self::String(value));
        }
        match text {
            "true" => Ok(Self::Bool(true)),
            "false" => Ok(Self::Bool(false)),
            _ => text
                .parse::<f64>()
                .ok()
                .filter(|n| n.is_finite())
                .map(Self::Number)
                .ok_or_else(|| {
                    format!("`{text}` is not a value; write a \"string\", a number, true or false")
                }),
        }
    }
}

/// GJSON's `%`: `*` matches any run of characters, `?` any one character.
fn like(text: &str, pattern: &str) -> bool {
    let text: Vec<char> = text.chars().collect();
    let pattern: Vec<char> = pattern.chars().collect();
    // Iterative matching with backtracking to the last `*`.
    let (mut t, mut p) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == '?' || pattern[p] == text[t]) {
            t += 1;
            p += 1;
        } else if p < pattern.len() && pattern[p] == '*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((star_p, star_t)) = star {
            p = star_p + 1;
            t = star_t + 1;
            star = Some((star_p, star_t + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = r#"{
        "components": [{"id": "82328e93e", "tasks": 32, "str": "64", "k": "1k", "wrong": "NaN"}],
        "count": 2.43,
        "workers": [
            {"name": "alpha", "queue": {"depth": 3}, "busy": true},
            {"name": "beta", "queue": {"depth": 9}, "busy": false},
            {"name": "gamma", "queue": {"depth": 5}, "busy": true}
        ],
        "fav.movie": 7,
        "tags": ["a", "bb", "ccc"],
        "0": {"x": 1}
    }"#;

    fn get(path: &str) -> Result<Value, String> {
        let doc: Value = serde_json::from_str(DOC).unwrap();
        JsonPath::parse(path)?.resolve(&doc)
    }

    #[test]
    fn paths_from_keda_docs_and_tests_select_their_values() {
        // (path, value)
        let rows = [
            ("count", serde_json::json!(2.43)),
            ("components.0.tasks", serde_json::json!(32)),
            ("components.0.str", serde_json::json!("64")),
            ("components.#", serde_json::json!(1)),
            ("workers.#", serde_json::json!(3)),
            ("workers.1.queue.depth", serde_json::json!(9)),
            (
                r#"workers.#(name=="gamma").queue.depth"#,
                serde_json::json!(5),
            ),
            (
                r#"workers.#(name="beta").queue.depth"#,
                serde_json::json!(9),
            ),
            ("workers.#(queue.depth>4).name", serde_json::json!("beta")),
            ("workers.#(queue.depth<=3).name", serde_json::json!("alpha")),
            ("workers.#(busy==false).name", serde_json::json!("beta")),
            (r#"workers.#(name%"g*").queue.depth"#, serde_json::json!(5)),
            (r#"workers.#(name!%"a*").name"#, serde_json::json!("beta")),
            ("workers.#(busy).name", serde_json::json!("alpha")),
            (r#"tags.#(=="bb")"#, serde_json::json!("bb")),
            (r#"tags.#(%"c?c")"#, serde_json::json!("ccc")),
            (r"fav\.movie", serde_json::json!(7)),
            ("0.x", serde_json::json!(1)),
        ];
        for (path, value) in rows {
            assert_eq!(get(path), Ok(value), "{path}");
        }
    }

    #[test]
    fn paths_that_do_not_resolve_say_where() {
        // (path, error)
        let rows = [
            ("missing", "key \"missing\" not found at the top level"),
            (
                "workers.7.name",
                "index 7 is out of range: the array at \"workers\" has 3 elements",
            ),
            (
                "workers.name",
                "\"workers\" is an array; \"name\" is not an index",
            ),
            (
                "count.value",
                "\"count\" is a number, which has no key \"value\"",
            ),
            (
                "workers.0.queue.size",
                "key \"size\" not found at \"workers.0.queue\"",
            ),
            (
                "count.#",
                "`#` counts the elements of an array, but \"count\" is a number",
            ),
            (
                r#"workers.#(name=="delta").queue"#,
                "no element of the array at \"workers\" matches #(name==\"delta\")",
            ),
            (
                "count.#(a==1)",
                "the query #(a==1) needs an array, but \"count\" is a number",
            ),
        ];
        for (path, error) in rows {
            assert_eq!(get(path), Err(error.to_string()), "{path}");
        }
    }

    #[test]
    fn syntax_outside_the_subset_is_rejected_when_parsed() {
        // (path, error)
        let rows = [
            ("", "the path is empty"),
            (
                "a..b",
                "the path has an empty component (two dots in a row, or a dot at either end)",
            ),
            ("a.", "the path ends with a dot"),
            (
                "a.*.b",
                "wildcards (`*`) are not supported; escape it as `\\*` if it is part of a key",
            ),
            (
                "a.b?",
                "wildcards (`?`) are not supported; escape it as `\\?` if it is part of a key",
            ),
            ("a|b", "pipes (`|`) are not supported"),
            ("a.@reverse", "modifiers (`@reverse`) are not supported"),
            ("[a,b]", "multipaths (`[...]`, `{...}`) are not supported"),
            ("..a", "JSON-lines paths (`..`) are not supported"),
            ("a.#(b==1", "a query `#(` is not closed with `)`"),
            (
                "a.#(b==1)#",
                "#(b==1)# selects every matching element; it must select one number (drop the last `#` to take the first match)",
            ),
            (
                "a.#.b",
                "`#` followed by a path selects one value per array element; it must select one number (use an index like `0` or a query like `#(name==\"x\")`)",
            ),
            (
                "a.#(b==x)",
                "in the query #(b==x): `x` is not a value; write a \"string\", a number, true or false",
            ),
            ("a.#()", "the query #() is empty"),
            ("a\\", "the path ends with a lone `\\`"),
        ];
        for (path, error) in rows {
            assert_eq!(
                JsonPath::parse(path).map(|_| ()),
                Err(error.to_string()),
                "{path}"
            );
        }
    }

    #[test]
    fn like_matches_gjson_patterns() {
        for (text, pattern, matches) in [
            ("alpha", "a*", true),
            ("alpha", "*ha", true),
            ("alpha", "a?pha", true),
            ("alpha", "b*", false),
            ("", "*", true),
            ("abc", "a*c*", true),
            ("abc", "a*d", false),
        ] {
            assert_eq!(like(text, pattern), matches, "{text} % {pattern}");
        }
    }
}
