//! `format: prometheus`: the value of one series of a Prometheus text exposition (what a
//! `/metrics` endpoint serves), chosen by a PromQL series selector in `valueLocation`:
//! `name`, `name{label="value",other!="x"}` or `{__name__="name",...}`.
//!
//! The first series in the text whose name is the selector's and whose labels satisfy every
//! matcher gives the value. `=` and `!=` compare as PromQL does (a missing label is the empty
//! string); regex matchers (`=~`, `!~`) are rejected when the trigger is built. Series are
//! matched by their own name, so `http_request_duration_seconds_sum` and
//! `rpc_duration_seconds{quantile="0.99"}` can be selected (KEDA's parser only returns counters,
//! gauges and untyped series).

/// A parsed series selector.
#[derive(Clone, Debug, PartialEq)]
pub struct Selector {
    name: String,
    matchers: Vec<Matcher>,
}

#[derive(Clone, Debug, PartialEq)]
struct Matcher {
    label: String,
    equal: bool,
    value: String,
}

impl Selector {
    /// Parses `text`.
    ///
    /// # Errors
    /// Not a series selector, a regex matcher, or no metric name.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut input = Cursor::new(text);
        input.skip_space();
        let mut name = input.take_name(true);
        let mut matchers = Vec::new();
        input.skip_space();
        if input.eat('{') {
            loop {
                input.skip_space();
                if input.eat('}') {
                    break;
                }
                let label = input.take_name(false);
                if label.is_empty() {
                    return Err(format!("expected a label name at {}", input.position()));
                }
                input.skip_space();
                let equal = if input.eat_str("!=") {
                    false
                } else if input.eat_str("=~") || input.eat_str("!~") {
                    return Err(format!(
                        "regex matchers (=~, !~) are not supported; match label \"{label}\" with = or !="
                    ));
                } else if input.eat('=') {
                    true
                } else {
                    return Err(format!("expected =, != after label \"{label}\""));
                };
                input.skip_space();
                let value = input.take_quoted()?;
                if label == "__name__" && equal {
                    if !name.is_empty() && name != value {
                        return Err(format!(
                            "the selector names two metrics, \"{name}\" and \"{value}\""
                        ));
                    }
                    name = value;
                } else {
                    matchers.push(Matcher {
                        label,
                        equal,
                        value,
                    });
                }
                input.skip_space();
                if input.eat('}') {
                    break;
                }
                if !input.eat(',') {
                    return Err(format!("expected , or }} at {}", input.position()));
                }
            }
        }
        input.skip_space();
        if !input.at_end() {
            return Err(format!(
                "unexpected text at {}: a series selector is name{{label=\"value\",...}}",
                input.position()
            ));
        }
        if name.is_empty() {
            return Err("the selector has no metric name".into());
        }
        Ok(Self { name, matchers })
    }

    /// The value of the first matching series of `text`.
    ///
    /// # Errors
    /// The text is not the exposition format (the message gives the line), or no series
    /// matches.
    pub fn value(&self, text: &str) -> Result<f64, String> {
        // The whole text must parse, as for KEDA's parser, not just the part before a match.
        let mut found = None;
        let mut name_seen = false;
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let sample = parse_sample(line).map_err(|e| {
                format!(
                    "the response is not Prometheus text format: line {}: {e}",
                    number + 1
                )
            })?;
            if sample.name == self.name {
                name_seen = true;
                if found.is_none() && self.matches(&sample.labels) {
                    found = Some(sample.value);
                }
            }
        }
        found.ok_or_else(|| {
            if name_seen {
                format!("no series of \"{}\" has the selected labels", self.name)
            } else {
                format!("metric \"{}\" not found", self.name)
            }
        })
    }

    fn matches(&self, labels: &[(String, String)]) -> bool {
        self.matchers.iter().all(|m| {
            let value = labels
                .iter()
                .find(|(k, _)| *k == m.label)
                .map_or("", |(_, v)| v.as_str());
            (value == m.value) == m.equal
        })
    }
}

struct Sample {
    name: String,
    labels: Vec<(String, String)>,
    value: f64,
}

fn parse_sample(line: &str) -> Result<Sample, String> {
    let mut input = Cursor::new(line);
    let name = input.take_name(true);
    if name.is_empty() {
        return Err("expected a metric name".into());
    }
    let mut labels = Vec::new();
    if input.eat('{') {
        loop {
            input.skip_space();
            if input.eat('}') {
                break;
            }
            let label = input.take_name(false);
            if label.is_empty() {
                return Err("expected a label name".into());
            }
            input.skip_space();
            if !input.eat('=') {
                // The label's name is the server's text: not quoted.
                return Err("expected = after a label name".into());
            }
            input.skip_space();
            let value = input.take_quoted()?;
            labels.push((label, value));
            input.skip_space();
            if input.eat('}') {
                break;
            }
            if !input.eat(',') {
                return Err("expected , or } in the labels".into());
            }
        }
    }
    if !input.skip_space() {
        return Err("expected a space before the value".into());
    }
    let rest = input.rest();
    let value_text = rest.split_whitespace().next().unwrap_or("");
    let value =
        parse_value(value_text).ok_or_else(|| "the sample's value is not a number".to_string())?;
    Ok(Sample {
        name,
        labels,
        value,
    })
}

/// A sample value: a decimal or exponent float, `NaN`, `+Inf`, `-Inf` (Go's `ParseFloat`).
fn parse_value(text: &str) -> Option<f64> {
    match text {
        "" => None,
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => text.parse().ok(),
    }
}

/// A position in a line.
struct Cursor<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Cursor<'a> {
    fn new(text: &'a str) -> Self {
        Self { text, at: 0 }
    }

    fn rest(&self) -> &'a str {
        &self.text[self.at..]
    }

    fn at_end(&self) -> bool {
        self.at >= self.text.len()
    }

    fn position(&self) -> String {
        format!("\"{}\"", self.rest())
    }

    /// Skips spaces and tabs; whether there were any.
    fn skip_space(&mut self) -> bool {
        let start = self.at;
        while self.rest().starts_with([' ', '\t']) {
            self.at += 1;
        }
        self.at > start
    }

    fn eat(&mut self, c: char) -> bool {
        if self.rest().starts_with(c) {
            self.at += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn eat_str(&mut self, s: &str) -> bool {
        if self.rest().starts_with(s) {
            self.at += s.len();
            true
        } else {
            false
        }
    }

    /// A metric name (`[a-zA-Z_:][a-zA-Z0-9_:]*`) or, without colons, a label name.
    fn take_name(&mut self, colons: bool) -> String {
        let name: String = self
            .rest()
            .chars()
            .enumerate()
            .take_while(|(i, c)| {
                c.is_ascii_alphabetic()
                    || *c == '_'
                    || (colons && *c == ':')
                    || (*i > 0 && c.is_ascii_digit())
            })
            .map(|(_, c)| c)
            .collect();
        self.at += name.len();
        name
    }

    /// A double-quoted string (PromQL also takes single quotes and backticks) with `\\`, `\"`
    /// and `\n` escapes.
    fn take_quoted(&mut self) -> Result<String, String> {
        let quote = match self.rest().chars().next() {
            Some(q @ ('"' | '\'' | '`')) => q,
            _ => return Err(format!("expected a quoted value at {}", self.position())),
        };
        self.at += 1;
        let mut value = String::new();
        let mut chars = self.rest().char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' if quote != '`' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, other)) => value.push(other),
                    None => break,
                },
                c if c == quote => {
                    self.at += i + 1;
                    return Ok(value);
                }
                c => value.push(c),
            }
        }
        Err("a quoted value is not closed".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// KEDA's test input, leading tabs and a missing final newline included.
    const TEXT: &str = "# HELP backend_queue_size Total number of items
\t# TYPE backend_queue_size counter
\tbackend_queue_size{queueName=\"zero\"} 0
\tbackend_queue_size{queueName=\"one\"} 1
\tbackend_queue_size{queueName=\"two\", instance=\"random\"} 2
\tbackend_queue_size{queueName=\"two\", instance=\"zero\"} 20
\t# HELP random_metric Random metric generate to include noise
\t# TYPE random_metric counter
\trandom_metric 10
rpc_seconds{quantile=\"0.99\",path=\"a\\\"b\"} 0.25 1700000000000
rpc_seconds_sum 17.5
weird_value NaN";

    fn value(selector: &str) -> Result<f64, String> {
        Selector::parse(selector)?.value(TEXT)
    }

    #[test]
    fn selectors_from_keda_tests_and_beyond_pick_their_series() {
        // (selector, value)
        let rows = [
            ("random_metric", 10.0),
            (r#"backend_queue_size{queueName="one"}"#, 1.0),
            (r#"backend_queue_size{queueName="two"}"#, 2.0),
            (
                r#"backend_queue_size{queueName="two", instance="zero"}"#,
                20.0,
            ),
            (
                r#"backend_queue_size{queueName="two",instance!="random"}"#,
                20.0,
            ),
            (r#"{__name__="backend_queue_size", queueName='one'}"#, 1.0),
            (r#"backend_queue_size{instance=""}"#, 0.0),
            (r#"rpc_seconds{quantile="0.99"}"#, 0.25),
            (r#"rpc_seconds{path="a\"b"}"#, 0.25),
            ("rpc_seconds_sum", 17.5),
            (" random_metric{} ", 10.0),
        ];
        for (selector, expected) in rows {
            assert_eq!(value(selector), Ok(expected), "{selector}");
        }
        assert!(value("weird_value").is_ok_and(f64::is_nan));
    }

    #[test]
    fn missing_series_and_bad_selectors_are_explained() {
        // (selector, error)
        let rows = [
            (
                r#"backend_queue_size{invalid="test"}"#,
                "no series of \"backend_queue_size\" has the selected labels",
            ),
            ("nope", "metric \"nope\" not found"),
            (
                r#"backend_queue_size{invalid=test}"#,
                "expected a quoted value at \"test}\"",
            ),
            (
                r#"a{b=~"x.*"}"#,
                "regex matchers (=~, !~) are not supported; match label \"b\" with = or !=",
            ),
            (r#"{job="x"}"#, "the selector has no metric name"),
            (
                "a b",
                "unexpected text at \"b\": a series selector is name{label=\"value\",...}",
            ),
            (r#"a{b="c""#, "expected , or } at \"\""),
            (
                r#"a{__name__="b"}"#,
                "the selector names two metrics, \"a\" and \"b\"",
            ),
        ];
        for (selector, error) in rows {
            assert_eq!(value(selector), Err(error.to_string()), "{selector}");
        }
    }

    #[test]
    fn text_that_is_not_the_exposition_format_names_the_line() {
        let selector = Selector::parse("a").unwrap();
        assert_eq!(
            selector.value("a 1\n{\"json\": true}\n"),
            Err(
                "the response is not Prometheus text format: line 2: expected a metric name".into()
            )
        );
        assert_eq!(
            selector.value("a{x=\"1\"} many"),
            Err(
                "the response is not Prometheus text format: line 1: the sample's value is not a number"
                    .into()
            )
        );
        assert_eq!(selector.value("a 1\r\n"), Ok(1.0));
    }
}
