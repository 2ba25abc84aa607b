//! The Prometheus registry's text, read back: the samples every export translates.

/// One sample line: the series name, its labels, its value.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Sample {
    pub(super) name: String,
    pub(super) labels: Vec<(String, String)>,
    pub(super) value: f64,
    /// The value as written, for integer-valued instruments.
    pub(super) raw: String,
}

/// One family: `# TYPE` name and type, and its samples.
#[derive(Debug, Clone, PartialEq, Default)]
pub(super) struct Family {
    pub(super) name: String,
    pub(super) kind: String,
    pub(super) samples: Vec<Sample>,
}

/// Parses the OpenMetrics text [`Metrics::encode`] writes. Lines it cannot read are skipped.
pub(super) fn parse_exposition(text: &str) -> Vec<Family> {
    let mut families: Vec<Family> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "unknown"));
            families.push(Family {
                name: name.to_string(),
                kind: kind.trim().to_string(),
                samples: Vec::new(),
            });
            continue;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let Some(sample) = parse_sample(line) else {
            continue;
        };
        if let Some(family) = families.last_mut()
            && sample.name.starts_with(family.name.as_str())
        {
            family.samples.push(sample);
        }
    }
    families
}

/// `name{a="x",b="y"} value` or `name value`, label values unescaped (`\\`, `\"`, `\n`).
pub(super) fn parse_sample(line: &str) -> Option<Sample> {
    let name_end = line.find(['{', ' '])?;
    let name = &line[..name_end];
    let mut labels = Vec::new();
    let mut rest = &line[name_end..];
    if let Some(inner) = rest.strip_prefix('{') {
        let mut chars = inner.char_indices().peekable();
        let end = loop {
            // Skip separators.
            while let Some((_, c)) = chars.peek() {
                if *c == ',' || *c == ' ' {
                    chars.next();
                } else {
                    break;
                }
            }
            let (start, c) = chars.next()?;
            if c == '}' {
                break start + 1;
            }
            let mut key = String::from(c);
            loop {
                let (_, c) = chars.next()?;
                if c == '=' {
                    break;
                }
                key.push(c);
            }
            if chars.next()?.1 != '"' {
                return None;
            }
            let mut value = String::new();
            loop {
                let (_, c) = chars.next()?;
                match c {
                    '"' => break,
                    '\\' => match chars.next()?.1 {
                        'n' => value.push('\n'),
                        other => value.push(other),
                    },
                    other => value.push(other),
                }
            }
            labels.push((key, value));
        };
        rest = &inner[end..];
    }
    let raw = rest.split_whitespace().next()?.to_string();
    let value = match raw.as_str() {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        other => other.parse().ok()?,
    };
    Some(Sample {
        name: name.to_string(),
        labels,
        value,
        raw,
    })
}
