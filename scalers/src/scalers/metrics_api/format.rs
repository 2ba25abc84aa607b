//! Reading the number `valueLocation` points to from a response in the trigger's `format`.
//!
//! - `json`: a GJSON path (see [`super::json_path`]);
//! - `yaml`: a dot path through mappings (keys) and sequences (indexes): `foo.0.bar`;
//! - `xml`: a dot path through elements starting with the root element: `stats.worker.tasks`;
//!   an index picks one of several same-named elements (`stats.worker.1.tasks`), and the last
//!   component may name an attribute (`stats.worker.tasks` for `<worker tasks="3"/>`);
//! - `prometheus`: a series selector (see [`super::exposition`]).
//!
//! The value must be a number, or a string holding a Kubernetes quantity (`"64"`, `"1500m"`,
//! `"2Ki"`), read as KEDA reads it (`resource.ParseQuantity(...).AsApproximateFloat64()`).

use serde_json::Value as Json;

use super::exposition::Selector;
use super::json_path::{JsonPath, type_name};
use crate::metric::parse_quantity;

/// The trigger's `format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// JSON with a GJSON path.
    Json,
    /// YAML with a dot path.
    Yaml,
    /// XML with a dot path.
    Xml,
    /// Prometheus text exposition with a series selector.
    Prometheus,
}

impl Format {
    /// The format named `name` (one of KEDA's `json`, `yaml`, `xml`, `prometheus`).
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "json" => Some(Self::Json),
            "yaml" => Some(Self::Yaml),
            "xml" => Some(Self::Xml),
            "prometheus" => Some(Self::Prometheus),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Json => "JSON",
            Self::Yaml => "YAML",
            Self::Xml => "XML",
            Self::Prometheus => "Prometheus text",
        }
    }
}

/// A parsed `valueLocation` for its format.
#[derive(Clone, Debug, PartialEq)]
pub enum ValueLocation {
    /// `format: json`.
    Json(JsonPath),
    /// `format: yaml`.
    Yaml(Vec<String>),
    /// `format: xml`.
    Xml(Vec<String>),
    /// `format: prometheus`.
    Prometheus(Selector),
}

impl ValueLocation {
    /// Parses `location` for `format`.
    ///
    /// # Errors
    /// The location is not valid for the format (the message says why).
    pub fn parse(format: Format, location: &str) -> Result<Self, String> {
        match format {
            Format::Json => JsonPath::parse(location).map(Self::Json),
            Format::Yaml => dot_path(location).map(Self::Yaml),
            Format::Xml => dot_path(location).map(Self::Xml),
            Format::Prometheus => Selector::parse(location).map(Self::Prometheus),
        }
    }

    /// The value in `body`.
    ///
    /// # Errors
    /// The body does not parse in the format, the location does not resolve, or it points to
    /// something that is neither a number nor a quantity string.
    pub fn value(&self, body: &[u8]) -> Result<f64, String> {
        match self {
            Self::Json(path) => {
                let doc: Json = crate::remote::from_json(body).map_err(|e| match e {
                    crate::remote::JsonError::TooMany(at) => format!("the response is {at}"),
                    e => not_format(
                        Format::Json,
                        &format_args!("line {}, column {}", e.line(), e.column()),
                    ),
                })?;
                match path.resolve(&doc)? {
                    Json::Number(n) => Ok(n.as_f64().unwrap_or(f64::NAN)),
                    Json::String(s) => quantity(&s),
                    other => Err(not_a_number(type_name(&other))),
                }
            }
            Self::Yaml(path) => {
                if let Some(at) = crate::remote::yaml_past_limit(body) {
                    return Err(format!("the response is {at}"));
                }
                let doc: serde_yaml::Value = serde_yaml::from_slice(body).map_err(|e| {
                    let at = e.location().map_or_else(
                        || "no position".to_string(),
                        |l| format!("line {}, column {}", l.line(), l.column()),
                    );
                    not_format(Format::Yaml, &at)
                })?;
                yaml_value(&doc, path)
            }
            Self::Xml(path) => {
                let text = std::str::from_utf8(body).map_err(|e| {
                    not_format(
                        Format::Xml,
                        &format_args!("not UTF-8 at byte {}", e.valid_up_to()),
                    )
                })?;
                let doc = crate::remote::xml(text).map_err(|e| match e {
                    roxmltree::Error::NodesLimitReached => {
                        format!("the response is {}", crate::remote::xml_error(&e))
                    }
                    e => not_format(Format::Xml, &format_args!("at {}", e.pos())),
                })?;
                xml_value(&doc, path)
            }
            Self::Prometheus(selector) => {
                let text = String::from_utf8_lossy(body);
                selector.value(&text)
            }
        }
    }
}

/// `where` is a position, never the parser's message: those quote the answer.
fn not_format(format: Format, at: &dyn std::fmt::Display) -> String {
    format!("the response is not valid {} ({at})", format.as_str())
}

fn not_a_number(what: &str) -> String {
    format!("it points to {what}, not to a number or a string holding a quantity")
}

/// A quantity string's value. The string is the server's text: the message gives its length,
/// never the string.
fn quantity(text: &str) -> Result<f64, String> {
    parse_quantity(text).ok_or_else(|| {
        format!(
            "it points to a string ({} bytes) that is not a number or a Kubernetes quantity",
            text.len()
        )
    })
}

fn dot_path(location: &str) -> Result<Vec<String>, String> {
    let parts: Vec<String> = location.split('.').map(str::to_string).collect();
    if parts.iter().any(String::is_empty) {
        return Err(
            "the path has an empty component (two dots in a row, or a dot at either end)".into(),
        );
    }
    Ok(parts)
}

fn walked(path: &[String], upto: usize) -> String {
    if upto == 0 {
        "the top level".into()
    } else {
        format!("\"{}\"", path[..upto].join("."))
    }
}

fn yaml_value(doc: &serde_yaml::Value, path: &[String]) -> Result<f64, String> {
    use serde_yaml::Value as Yaml;
    let mut current = doc;
    for (i, part) in path.iter().enumerate() {
        let at = walked(path, i);
        current = untag(current);
        current = match current {
            Yaml::Mapping(map) => map
                .iter()
                .find(|(k, _)| yaml_key(k).as_deref() == Some(part.as_str()))
                .map(|(_, v)| v)
                .ok_or_else(|| format!("key \"{part}\" not found at {at}"))?,
            Yaml::Sequence(items) => {
                let index: usize = part
                    .parse()
                    .map_err(|_| format!("{at} is a sequence; \"{part}\" is not an index"))?;
                items.get(index).ok_or_else(|| {
                    format!(
                        "index {index} is out of range: the sequence at {at} has {} elements",
                        items.len()
                    )
                })?
            }
            other => {
                return Err(format!(
                    "{at} is {}, which has no key \"{part}\"",
                    yaml_type(other)
                ));
            }
        };
    }
    match untag(current) {
        Yaml::Number(n) => Ok(n.as_f64().unwrap_or(f64::NAN)),
        Yaml::String(s) => quantity(s),
        other => Err(not_a_number(yaml_type(other))),
    }
}

fn untag(value: &serde_yaml::Value) -> &serde_yaml::Value {
    match value {
        serde_yaml::Value::Tagged(tagged) => untag(&tagged.value),
        other => other,
    }
}

fn yaml_key(key: &serde_yaml::Value) -> Option<String> {
    match untag(key) {
        serde_yaml::Value::String(s) => Some(s.clone()),
        serde_yaml::Value::Number(n) => Some(n.to_string()),
        serde_yaml::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn yaml_type(value: &serde_yaml::Value) -> &'static str {
    match value {
        serde_yaml::Value::Null => "null",
        serde_yaml::Value::Bool(_) => "a boolean",
        serde_yaml::Value::Number(_) => "a number",
        serde_yaml::Value::String(_) => "a string",
        serde_yaml::Value::Sequence(_) => "a sequence",
        serde_yaml::Value::Mapping(_) => "a mapping",
        serde_yaml::Value::Tagged(_) => "a tagged value",
    }
}

fn xml_value(doc: &roxmltree::Document<'_>, path: &[String]) -> Result<f64, String> {
    // The elements the path has selected so far: several when same-named siblings match.
    let mut selected: Vec<roxmltree::Node<'_, '_>> = vec![doc.root()];
    for (i, part) in path.iter().enumerate() {
        let at = walked(path, i);
        if let (Ok(index), true) = (part.parse::<usize>(), i > 0) {
            let count = selected.len();
            let node = selected.get(index).copied().ok_or_else(|| {
                format!("index {index} is out of range: {at} matches {count} elements")
            })?;
            selected = vec![node];
            continue;
        }
        let [parent] = selected.as_slice() else {
            return Err(format!(
                "{at} matches {} elements; add an index (\"{}.0.{part}\")",
                selected.len(),
                path[..i].join(".")
            ));
        };
        let children: Vec<_> = parent
            .children()
            .filter(|c| c.is_element() && c.tag_name().name() == part)
            .collect();
        if children.is_empty() {
            if i + 1 == path.len()
                && let Some(attribute) = parent.attribute(part.as_str())
            {
                return quantity(attribute.trim());
            }
            return Err(format!("no element or attribute \"{part}\" at {at}"));
        }
        selected = children;
    }
    let at = walked(path, path.len());
    let [element] = selected.as_slice() else {
        return Err(format!(
            "{at} matches {} elements; add an index (\"{}.0\")",
            selected.len(),
            path.join(".")
        ));
    };
    if element.children().any(|c| c.is_element()) {
        return Err(not_a_number("an element with child elements"));
    }
    let text: String = element
        .children()
        .filter_map(|c| c.text())
        .collect::<String>();
    quantity(text.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(format: Format, location: &str, body: &str) -> Result<f64, String> {
        ValueLocation::parse(format, location)?.value(body.as_bytes())
    }

    /// KEDA's test inputs.
    const JSON: &str = r#"{"components":[{"id": "82328e93e", "tasks": 32, "str": "64", "k":"1k","wrong":"NaN"}],"count":2.43}"#;
    const YAML: &str =
        "{components: [{id: 82328e93e, tasks: 32, str: '64', k: 1k, wrong: NaN}], count: 2.43}";

    #[test]
    fn keda_test_cases_read_the_same_values() {
        // (format, location, body, value)
        let rows = [
            (Format::Json, "count", JSON, 2.43),
            (Format::Json, "components.0.str", JSON, 64.0),
            (Format::Json, "components.0.tasks", JSON, 32.0),
            (Format::Json, "components.0.k", JSON, 1000.0),
            (Format::Yaml, "count", YAML, 2.43),
            (Format::Yaml, "components.0.str", YAML, 64.0),
            (Format::Yaml, "components.0.tasks", YAML, 32.0),
            (Format::Yaml, "components.0.k", YAML, 1000.0),
        ];
        for (format, location, body, expected) in rows {
            assert_eq!(
                value(format, location, body),
                Ok(expected),
                "{format:?} {location}"
            );
        }
        for format in [Format::Json, Format::Yaml] {
            let body = if format == Format::Json { JSON } else { YAML };
            assert_eq!(
                value(format, "components.0.wrong", body),
                Err(
                    "it points to a string (3 bytes) that is not a number or a Kubernetes quantity"
                        .into()
                ),
                "{format:?}"
            );
        }
    }

    #[test]
    fn xml_paths_walk_elements_indexes_and_attributes() {
        let body = r#"<?xml version="1.0"?>
            <stats xmlns="urn:x">
              <worker name="a"><tasks>3</tasks><memory>1500m</memory></worker>
              <worker name="b" load="2Ki"><tasks> 5 </tasks></worker>
              <total>8</total>
            </stats>"#;
        // (location, result)
        let rows: [(&str, Result<f64, &str>); 9] = [
            ("stats.total", Ok(8.0)),
            ("stats.worker.0.tasks", Ok(3.0)),
            ("stats.worker.1.tasks", Ok(5.0)),
            ("stats.worker.0.memory", Ok(1.5)),
            ("stats.worker.1.load", Ok(2048.0)),
            (
                "stats.worker.tasks",
                Err("\"stats.worker\" matches 2 elements; add an index (\"stats.worker.0.tasks\")"),
            ),
            (
                "stats.worker.2.tasks",
                Err("index 2 is out of range: \"stats.worker\" matches 2 elements"),
            ),
            (
                "stats.idle",
                Err("no element or attribute \"idle\" at \"stats\""),
            ),
            (
                "stats.worker.0",
                Err(
                    "it points to an element with child elements, not to a number or a string holding a quantity",
                ),
            ),
        ];
        for (location, expected) in rows {
            assert_eq!(
                value(Format::Xml, location, body),
                expected.map_err(str::to_string),
                "{location}"
            );
        }
    }

    #[test]
    fn unusable_values_and_bodies_are_explained() {
        // (format, location, body, error)
        let rows = [
            (
                Format::Json,
                "a",
                r#"{"a": true}"#,
                "it points to a boolean, not to a number or a string holding a quantity",
            ),
            (
                Format::Json,
                "a",
                r#"{"a": null}"#,
                "it points to null, not to a number or a string holding a quantity",
            ),
            (
                Format::Json,
                "a",
                r#"{"a": [1]}"#,
                "it points to an array, not to a number or a string holding a quantity",
            ),
            (
                Format::Json,
                "a.b",
                r#"{"a": {}}"#,
                "key \"b\" not found at \"a\"",
            ),
            (
                Format::Yaml,
                "a.b",
                "a: {c: 1}",
                "key \"b\" not found at \"a\"",
            ),
            (
                Format::Yaml,
                "a.3",
                "a: [1]",
                "index 3 is out of range: the sequence at \"a\" has 1 elements",
            ),
            (
                Format::Yaml,
                "a.b",
                "a: 1",
                "\"a\" is a number, which has no key \"b\"",
            ),
            (
                Format::Yaml,
                "a",
                "a: ~",
                "it points to null, not to a number or a string holding a quantity",
            ),
            (
                Format::Xml,
                "a",
                "<a>many</a>",
                "it points to a string (4 bytes) that is not a number or a Kubernetes quantity",
            ),
        ];
        for (format, location, body, error) in rows {
            assert_eq!(
                value(format, location, body),
                Err(error.to_string()),
                "{format:?} {location}"
            );
        }
        for (format, body) in [
            (Format::Json, "{not json"),
            (Format::Yaml, "a: [unclosed"),
            (Format::Xml, "<a><b></a>"),
        ] {
            let err = value(format, "a", body).expect_err(body);
            assert!(err.starts_with("the response is not valid "), "{err}");
        }
        assert_eq!(
            ValueLocation::parse(Format::Yaml, "a..b").map(|_| ()),
            Err(
                "the path has an empty component (two dots in a row, or a dot at either end)"
                    .into()
            )
        );
    }

    #[test]
    fn answers_of_more_values_than_the_bound_are_refused_in_every_format() {
        use crate::remote::MAX_ANSWER_VALUES;
        // Within 8 MiB, made of next to nothing but structure.
        let json = format!(
            r#"{{"a": 1, "b": [{}]}}"#,
            "[],".repeat(MAX_ANSWER_VALUES / 2)
        );
        let yaml = format!("a: 1\nb:\n{}", "- 0\n".repeat(MAX_ANSWER_VALUES));
        // 11 KB: 2,000 aliases of a 1,000-element node.
        let aliases = format!(
            "a: 1\nc: &c [{}0]\nb: [{}*c]\n",
            "0,".repeat(999),
            "*c,".repeat(1_999)
        );
        let xml = format!("<r><a>1</a>{}</r>", "<b/>".repeat(MAX_ANSWER_VALUES));
        for (format, body, error) in [
            (
                Format::Json,
                json,
                "the response is a document of more than 1048576 values (line 1, column ",
            ),
            (
                Format::Yaml,
                yaml,
                "the response is a document of more than 1048576 values (line ",
            ),
            (
                Format::Yaml,
                aliases,
                "the response is a document of more than 1048576 values (line ",
            ),
            (
                Format::Xml,
                xml,
                "the response is an XML document of more than 1048576 nodes",
            ),
        ] {
            assert!(body.len() < crate::http_client::MAX_BODY_BYTES);
            let found = value(format, "a", &body).expect_err("past the bound");
            assert!(found.starts_with(error), "{format:?}: {found}");
        }
        // The same location in a short answer of each format reads.
        assert_eq!(value(Format::Json, "a", r#"{"a": 1, "b": [[]]}"#), Ok(1.0));
        assert_eq!(value(Format::Yaml, "a", "a: 1\nb:\n- 0\n"), Ok(1.0));
        assert_eq!(value(Format::Xml, "r.a", "<r><a>1</a><b/></r>"), Ok(1.0));
    }

    #[test]
    fn yaml_keys_may_be_numbers_and_values_may_be_tagged() {
        assert_eq!(value(Format::Yaml, "10.x", "10: {x: 4}"), Ok(4.0));
        assert_eq!(value(Format::Yaml, "a", "a: !!str 12"), Ok(12.0));
        assert!(value(Format::Yaml, "a", "a: .nan").is_ok_and(f64::is_nan));
    }
}
