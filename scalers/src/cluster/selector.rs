//! Kubernetes label selectors in their string form (`app=web,tier in (a,b),!canary`), parsed and
//! matched as apimachinery's `labels.Parse` does: `=`, `==`, `!=`, `in`, `notin`, `key`,
//! `!key`, `>` and `<` (integer values), keys and values checked against the label syntax.

use std::collections::BTreeMap;
use std::fmt;

/// One requirement of a selector.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Requirement {
    /// `key=value`, `key==value`, `key in (a,b)`: the key is present with one of the values.
    In(String, Vec<String>),
    /// `key!=value`, `key notin (a,b)`: the key is absent or has none of the values.
    NotIn(String, Vec<String>),
    /// `key`: present.
    Exists(String),
    /// `!key`: absent.
    DoesNotExist(String),
    /// `key>n`: present with an integer value above n.
    GreaterThan(String, i64),
    /// `key<n`: present with an integer value below n.
    LessThan(String, i64),
}

impl Requirement {
    fn matches(&self, labels: &dyn Labels) -> bool {
        match self {
            Self::In(key, values) => labels
                .get(key)
                .is_some_and(|v| values.iter().any(|x| x == v)),
            Self::NotIn(key, values) => labels
                .get(key)
                .is_none_or(|v| values.iter().all(|x| x != v)),
            Self::Exists(key) => labels.get(key).is_some(),
            Self::DoesNotExist(key) => labels.get(key).is_none(),
            Self::GreaterThan(key, n) => labels
                .get(key)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > *n),
            Self::LessThan(key, n) => labels
                .get(key)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < *n),
        }
    }
}

/// A set of labels a selector can be matched against.
pub trait Labels {
    /// The value of label `key`, if present.
    fn get(&self, key: &str) -> Option<&str>;
}

impl Labels for BTreeMap<String, String> {
    fn get(&self, key: &str) -> Option<&str> {
        BTreeMap::get(self, key).map(String::as_str)
    }
}

impl Labels for [(String, String)] {
    fn get(&self, key: &str) -> Option<&str> {
        self.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// A parsed label selector: every requirement must hold. The empty selector matches
/// everything.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
    text: String,
}

/// Why a selector string does not parse; the message says what is wrong and where.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SelectorError(String);

impl LabelSelector {
    /// Parses the string form of a label selector.
    ///
    /// # Errors
    /// A requirement that is not one of the forms above, a key or value that is not a valid
    /// label key or value, an empty `in`/`notin` set, a non-integer `>`/`<` value.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let mut lexer = Lexer::new(text);
        let mut requirements = Vec::new();
        if lexer.peek().is_none() {
            return Ok(Self {
                requirements,
                text: text.trim().to_string(),
            });
        }
        loop {
            requirements.push(requirement(&mut lexer)?);
            match lexer.next() {
                None => break,
                Some(Token::Comma) => {}
                Some(other) => {
                    return Err(SelectorError(format!(
                        "expected \",\" or the end after a requirement, found {other}"
                    )));
                }
            }
        }
        Ok(Self {
            requirements,
            text: text.trim().to_string(),
        })
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &(impl Labels + ?Sized)) -> bool {
        let labels: &dyn Labels = &LabelsRef(labels);
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// The selector as written (trimmed).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the selector has no requirement (matches everything).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

struct LabelsRef<'a, L: ?Sized>(&'a L);

impl<L: Labels + ?Sized> Labels for LabelsRef<'_, L> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key)
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Word(String),
    Comma,
    Open,
    Close,
    Not,
    Eq,
    DoubleEq,
    NotEq,
    Gt,
    Lt,
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Word(w) => write!(f, "\"{w}\""),
            Self::Comma => f.write_str("\",\""),
            Self::Open => f.write_str("\"(\""),
            Self::Close => f.write_str("\")\""),
            Self::Not => f.write_str("\"!\""),
            Self::Eq => f.write_str("\"=\""),
            Self::DoubleEq => f.write_str("\"==\""),
            Self::NotEq => f.write_str("\"!=\""),
            Self::Gt => f.write_str("\">\""),
            Self::Lt => f.write_str("\"<\""),
        }
    }
}

struct Lexer {
    tokens: std::vec::IntoIter<Token>,
    peeked: Option<Option<Token>>,
}

impl Lexer {
    fn new(text: &str) -> Self {
        let mut tokens = Vec::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            let token = match c {
                c if c.is_whitespace() => continue,
                ',' => Token::Comma,
                '(' => Token::Open,
                ')' => Token::Close,
                '>' => Token::Gt,
                '<' => Token::Lt,
                '!' if chars.peek() == Some(&'=') => {
                    chars.next();
                    Token::NotEq
                }
                '!' => Token::Not,
                '=' if chars.peek() == Some(&'=') => {
                    chars.next();
                    Token::DoubleEq
                }
                '=' => Token::Eq,
                c => {
                    let mut word = String::from(c);
                    while let Some(&n) = chars.peek() {
                        if n.is_whitespace() || ",()!=<>".contains(n) {
                            break;
                        }
                        word.push(n);
                        chars.next();
                    }
                    Token::Word(word)
                }
            };
            tokens.push(token);
        }
        Self {
            tokens: tokens.into_iter(),
            peeked: None,
        }
    }

    fn next(&mut self) -> Option<Token> {
        match self.peeked.take() {
            Some(token) => token,
            None => self.tokens.next(),
        }
    }

    fn peek(&mut self) -> Option<&Token> {
        if self.peeked.is_none() {
            self.peeked = Some(self.tokens.next());
        }
        self.peeked.as_ref().and_then(Option::as_ref)
    }
}

fn requirement(lexer: &mut Lexer) -> Result<Requirement, SelectorError> {
    let negated = lexer.peek() == Some(&Token::Not);
    if negated {
        lexer.next();
    }
    let key = match lexer.next() {
        Some(Token::Word(key)) => check_key(key)?,
        Some(other) => {
            return Err(SelectorError(format!(
                "expected a label key, found {other}"
            )));
        }
        None => return Err(SelectorError("expected a label key, found the end".into())),
    };
    if negated {
        return match lexer.peek() {
            None | Some(Token::Comma) => Ok(Requirement::DoesNotExist(key)),
            Some(other) => Err(SelectorError(format!(
                "\"!{key}\" must stand alone, found {other} after it"
            ))),
        };
    }
    let operator = match lexer.peek() {
        None | Some(Token::Comma) => return Ok(Requirement::Exists(key)),
        Some(_) => lexer.next(),
    };
    match operator {
        Some(Token::Eq | Token::DoubleEq) => Ok(Requirement::In(key, vec![value(lexer)?])),
        Some(Token::NotEq) => Ok(Requirement::NotIn(key, vec![value(lexer)?])),
        Some(Token::Gt) => Ok(Requirement::GreaterThan(
            key.clone(),
            integer(lexer, &key, ">")?,
        )),
        Some(Token::Lt) => Ok(Requirement::LessThan(
            key.clone(),
            integer(lexer, &key, "<")?,
        )),
        Some(Token::Word(word)) if word == "in" => {
            Ok(Requirement::In(key.clone(), set(lexer, &key)?))
        }
        Some(Token::Word(word)) if word == "notin" => {
            Ok(Requirement::NotIn(key.clone(), set(lexer, &key)?))
        }
        Some(other) => Err(SelectorError(format!(
            "expected an operator (=, ==, !=, in, notin, >, <) after key \"{key}\", found {other}"
        ))),
        None => Err(SelectorError(format!(
            "expected an operator after key \"{key}\""
        ))),
    }
}

/// A value after `=`, `==` or `!=`; may be empty (`key=`), as in apimachinery.
fn value(lexer: &mut Lexer) -> Result<String, SelectorError> {
    match lexer.peek() {
        None | Some(Token::Comma) => Ok(String::new()),
        Some(Token::Word(_)) => match lexer.next() {
            Some(Token::Word(v)) => check_value(v),
            _ => Ok(String::new()),
        },
        Some(other) => Err(SelectorError(format!(
            "expected a label value, found {other}"
        ))),
    }
}

fn integer(lexer: &mut Lexer, key: &str, op: &str) -> Result<i64, SelectorError> {
    match lexer.next() {
        Some(Token::Word(v)) => v.parse().map_err(|_| {
            SelectorError(format!(
                "\"{key}{op}{v}\": the value of {op} must be an integer"
            ))
        }),
        _ => Err(SelectorError(format!(
            "\"{key}{op}\": expected an integer after {op}"
        ))),
    }
}

fn set(lexer: &mut Lexer, key: &str) -> Result<Vec<String>, SelectorError> {
    if lexer.next() != Some(Token::Open) {
        return Err(SelectorError(format!(
            "expected \"(\" after the set operator of key \"{key}\""
        )));
    }
    let mut values = Vec::new();
    loop {
        match lexer.next() {
            Some(Token::Word(v)) => values.push(check_value(v)?),
            Some(Token::Close) if values.is_empty() => {
                return Err(SelectorError(format!(
                    "the set of values of key \"{key}\" is empty"
                )));
            }
            Some(Token::Close) => break,
            Some(Token::Comma) => continue,
            Some(other) => {
                return Err(SelectorError(format!(
                    "expected a value, \",\" or \")\" in the set of key \"{key}\", found {other}"
                )));
            }
            None => {
                return Err(SelectorError(format!(
                    "the set of values of key \"{key}\" is not closed with \")\""
                )));
            }
        }
        match lexer.peek() {
            Some(Token::Comma) => {
                lexer.next();
            }
            Some(Token::Close) => {}
            Some(other) => {
                return Err(SelectorError(format!(
                    "expected \",\" or \")\" in the set of key \"{key}\", found {other}"
                )));
            }
            None => {
                return Err(SelectorError(format!(
                    "the set of values of key \"{key}\" is not closed with \")\""
                )));
            }
        }
    }
    Ok(values)
}

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`, at most 63 characters, not empty.
fn is_label_name(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// A DNS-1123 subdomain: lower-case alphanumerics, `-` and `.`, at most 253 characters,
/// starting and ending alphanumeric.
fn is_dns_subdomain(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 253
        && s.split('.').all(|part| {
            let p = part.as_bytes();
            !p.is_empty()
                && (p[0].is_ascii_lowercase() || p[0].is_ascii_digit())
                && (p[p.len() - 1].is_ascii_lowercase() || p[p.len() - 1].is_ascii_digit())
                && p.iter()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        })
}

fn check_key(key: String) -> Result<String, SelectorError> {
    let valid = match key.split_once('/') {
        Some((prefix, name)) => is_dns_subdomain(prefix) && is_label_name(name),
        None => is_label_name(&key),
    };
    if valid {
        Ok(key)
    } else {
        Err(SelectorError(format!(
            "\"{key}\" is not a valid label key (an optional DNS subdomain prefix and \"/\", then \
             up to 63 alphanumerics, \"-\", \"_\" or \".\", starting and ending alphanumeric)"
        )))
    }
}

fn check_value(value: String) -> Result<String, SelectorError> {
    if value.is_empty() || is_label_name(&value) {
        Ok(value)
    } else {
        Err(SelectorError(format!(
            "\"{value}\" is not a valid label value (up to 63 alphanumerics, \"-\", \"_\" or \".\", \
             starting and ending alphanumeric)"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn every_operator_matches_as_apimachinery_does() {
        let web = labels(&[("app", "web"), ("tier", "front"), ("rank", "7")]);
        let batch = labels(&[("app", "batch"), ("canary", "")]);
        let none = labels(&[]);
        // (selector, matches web, matches batch, matches none)
        let rows = [
            ("app=web", true, false, false),
            ("app==web", true, false, false),
            ("app = web", true, false, false),
            ("app!=web", false, true, true), // absent key matches !=
            ("app in (web, batch)", true, true, false),
            ("app notin (web)", false, true, true), // absent key matches notin
            ("canary", false, true, false),
            ("!canary", true, false, true),
            ("rank>5", true, false, false),
            ("rank<5", false, false, false),
            ("rank<8,app=web", true, false, false),
            ("app=web,tier in (front,back),!canary", true, false, false),
            ("canary=", false, true, false), // empty value
            ("example.com/team=a", false, false, false),
            ("", true, true, true),
        ];
        for (text, w, b, n) in rows {
            let s = LabelSelector::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(
                (s.matches(&web), s.matches(&batch), s.matches(&none)),
                (w, b, n),
                "{text}"
            );
        }
    }

    #[test]
    fn malformed_selectors_say_what_is_wrong() {
        let rows = [
            (
                "app in (a",
                "the set of values of key \"app\" is not closed with \")\"",
            ),
            ("app in ()", "the set of values of key \"app\" is empty"),
            (
                "app in a",
                "expected \"(\" after the set operator of key \"app\"",
            ),
            ("app=web,", "expected a label key, found the end"),
            (
                "app=w b",
                "expected \",\" or the end after a requirement, found \"b\"",
            ),
            ("=web", "expected a label key, found \"=\""),
            ("app>x", "\"app>x\": the value of > must be an integer"),
            (
                "app is web",
                "expected an operator (=, ==, !=, in, notin, >, <) after key \"app\", found \"is\"",
            ),
            (
                "!app=web",
                "\"!app\" must stand alone, found \"=\" after it",
            ),
            ("-app=web", "\"-app\" is not a valid label key"),
            (
                "Example.com/app=web",
                "\"Example.com/app\" is not a valid label key",
            ),
            ("app=we$b", "\"we$b\" is not a valid label value"),
        ];
        for (text, expected) in rows {
            let err = LabelSelector::parse(text).expect_err(text).to_string();
            assert!(err.starts_with(expected), "{text}: {err}");
        }
    }

    #[test]
    fn a_63_character_value_is_valid_and_64_is_not() {
        let ok = format!("app={}", "a".repeat(63));
        assert!(LabelSelector::parse(&ok).is_ok());
        let long = format!("app={}", "a".repeat(64));
        assert!(LabelSelector::parse(&long).is_err());
    }
}
