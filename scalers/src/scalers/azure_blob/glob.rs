//! `globPattern`: the glob syntax of `github.com/gobwas/glob` as KEDA compiles it (no
//! separators, so `*` also matches `/`): `*` any run of characters, `?` one character,
//! `[abc]` / `[a-z]` a class, `[!abc]` a negated class, `{a,b}` alternatives (each a pattern),
//! `\` escapes the next character.
//!
//! Matching keeps the set of reachable positions in the name, so it takes at most
//! (pattern length x name length) steps whatever the pattern: no backtracking blow-up.

/// The longest pattern accepted, in characters.
pub const MAX_PATTERN_CHARS: usize = 1024;
/// The deepest nesting of `{...}` accepted.
pub const MAX_DEPTH: usize = 8;

#[derive(Clone, Debug, PartialEq)]
enum Node {
    Char(char),
    AnyRun,
    AnyOne,
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
    Alt(Vec<Vec<Node>>),
}

/// A compiled pattern.
#[derive(Clone, Debug, PartialEq)]
pub struct Glob(Vec<Node>);

impl Glob {
    /// Compiles `pattern`.
    ///
    /// # Errors
    /// Longer than [`MAX_PATTERN_CHARS`], nested deeper than [`MAX_DEPTH`], an unclosed `[` or
    /// `{`, an empty class, a range whose ends are reversed, or a trailing `\`.
    pub fn compile(pattern: &str) -> Result<Self, String> {
        let chars: Vec<char> = pattern.chars().collect();
        if chars.len() > MAX_PATTERN_CHARS {
            return Err(format!("it is longer than {MAX_PATTERN_CHARS} characters"));
        }
        let mut pos = 0;
        let nodes = parse_seq(&chars, &mut pos, 0)?;
        if pos != chars.len() {
            // parse_seq at depth 0 stops only at the end.
            return Err(format!("unexpected '{}' at position {pos}", chars[pos]));
        }
        Ok(Self(nodes))
    }

    /// Whether `name` matches the whole pattern.
    pub fn matches(&self, name: &str) -> bool {
        let text: Vec<char> = name.chars().collect();
        let mut start = vec![false; text.len() + 1];
        start[0] = true;
        run(&self.0, &text, start)[text.len()]
    }
}

/// Parses until the end, or (inside braces) until an unescaped `,` or `}`.
fn parse_seq(chars: &[char], pos: &mut usize, depth: usize) -> Result<Vec<Node>, String> {
    let mut nodes = Vec::new();
    while let Some(&c) = chars.get(*pos) {
        match c {
            ',' | '}' if depth > 0 => return Ok(nodes),
            '*' => {
                *pos += 1;
                if nodes.last() != Some(&Node::AnyRun) {
                    nodes.push(Node::AnyRun);
                }
            }
            '?' => {
                *pos += 1;
                nodes.push(Node::AnyOne);
            }
            '\\' => {
                let escaped = chars
                    .get(*pos + 1)
                    .ok_or_else(|| "it ends with an unescaped '\\'".to_string())?;
                nodes.push(Node::Char(*escaped));
                *pos += 2;
            }
            '[' => nodes.push(parse_class(chars, pos)?),
            '{' => {
                if depth >= MAX_DEPTH {
                    return Err(format!("'{{' is nested deeper than {MAX_DEPTH} levels"));
                }
                let open = *pos;
                *pos += 1;
                let mut alternatives = Vec::new();
                loop {
                    alternatives.push(parse_seq(chars, pos, depth + 1)?);
                    match chars.get(*pos) {
                        Some(',') => *pos += 1,
                        Some('}') => {
                            *pos += 1;
                            break;
                        }
                        _ => return Err(format!("the '{{' at position {open} is not closed")),
                    }
                }
                nodes.push(Node::Alt(alternatives));
            }
            other => {
                *pos += 1;
                nodes.push(Node::Char(other));
            }
        }
    }
    Ok(nodes)
}

fn parse_class(chars: &[char], pos: &mut usize) -> Result<Node, String> {
    let open = *pos;
    *pos += 1;
    let negated = chars.get(*pos) == Some(&'!');
    if negated {
        *pos += 1;
    }
    let mut ranges = Vec::new();
    loop {
        let Some(&c) = chars.get(*pos) else {
            return Err(format!("the '[' at position {open} is not closed"));
        };
        if c == ']' {
            *pos += 1;
            break;
        }
        let lo = if c == '\\' {
            *pos += 1;
            *chars
                .get(*pos)
                .ok_or_else(|| format!("the '[' at position {open} is not closed"))?
        } else {
            c
        };
        *pos += 1;
        if chars.get(*pos) == Some(&'-') && chars.get(*pos + 1).is_some_and(|c| *c != ']') {
            let hi = chars[*pos + 1];
            if hi < lo {
                return Err(format!(
                    "the range {lo}-{hi} in the class at position {open} is reversed"
                ));
            }
            ranges.push((lo, hi));
            *pos += 2;
        } else {
            ranges.push((lo, lo));
        }
    }
    if ranges.is_empty() {
        return Err(format!("the class at position {open} is empty"));
    }
    Ok(Node::Class { negated, ranges })
}

/// The positions reachable after `nodes` from the positions set in `from`.
fn run(nodes: &[Node], text: &[char], mut from: Vec<bool>) -> Vec<bool> {
    for node in nodes {
        let mut next = vec![false; text.len() + 1];
        match node {
            Node::AnyRun => {
                if let Some(first) = from.iter().position(|r| *r) {
                    next[first..].iter_mut().for_each(|r| *r = true);
                }
            }
            Node::Alt(alternatives) => {
                for alternative in alternatives {
                    let reached = run(alternative, text, from.clone());
                    for (n, r) in next.iter_mut().zip(reached) {
                        *n |= r;
                    }
                }
            }
            single => {
                for (i, c) in text.iter().enumerate() {
                    if from[i] && matches_one(single, *c) {
                        next[i + 1] = true;
                    }
                }
            }
        }
        from = next;
        if !from.iter().any(|r| *r) {
            break;
        }
    }
    from
}

fn matches_one(node: &Node, c: char) -> bool {
    match node {
        Node::Char(x) => *x == c,
        Node::AnyOne => true,
        Node::Class { negated, ranges } => {
            ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&c)) != *negated
        }
        Node::AnyRun | Node::Alt(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_as_gobwas_glob_without_separators() {
        // (pattern, name, matches)
        let rows = [
            ("*.csv", "data.csv", true),
            ("*.csv", "in/box/data.csv", true), // no separators: * crosses /
            ("*.csv", "data.csv.bak", false),
            ("in/*", "in/a/b", true),
            ("in/?.txt", "in/a.txt", true),
            ("in/?.txt", "in/ab.txt", false),
            ("[ab]*", "apple", true),
            ("[ab]*", "cherry", false),
            ("[!ab]*", "cherry", true),
            ("[a-c]x", "bx", true),
            ("[a-c]x", "dx", false),
            ("*.{csv,json}", "x.json", true),
            ("*.{csv,json}", "x.xml", false),
            ("{in,out}/{*.csv,[0-9]?}", "out/7a", true),
            ("{in,out}/{*.csv,[0-9]?}", "out/a7", false),
            ("a\\*", "a*", true),
            ("a\\*", "ab", false),
            ("**", "", true),
            ("", "", true),
            ("", "x", false),
            ("é?", "éü", true),
        ];
        for (pattern, name, expected) in rows {
            let glob = Glob::compile(pattern).unwrap_or_else(|e| panic!("{pattern}: {e}"));
            assert_eq!(glob.matches(name), expected, "{pattern} on {name}");
        }
    }

    #[test]
    fn bad_patterns_say_why() {
        let rows = [
            ("[abc", "the '[' at position 0 is not closed"),
            ("x{a,b", "the '{' at position 1 is not closed"),
            ("a\\", "it ends with an unescaped '\\'"),
            ("[]", "the class at position 0 is empty"),
            (
                "[z-a]",
                "the range z-a in the class at position 0 is reversed",
            ),
        ];
        for (pattern, why) in rows {
            assert_eq!(Glob::compile(pattern).unwrap_err(), why, "{pattern}");
        }
        assert!(Glob::compile(&"a".repeat(MAX_PATTERN_CHARS + 1)).is_err());
        let deep = format!(
            "{}x{}",
            "{".repeat(MAX_DEPTH + 1),
            "}".repeat(MAX_DEPTH + 1)
        );
        assert!(Glob::compile(&deep).unwrap_err().contains("nested deeper"));
    }

    #[test]
    fn many_stars_on_a_long_name_stay_fast() {
        let glob = Glob::compile(&"*a".repeat(100)).unwrap();
        let name = "a".repeat(99) + &"b".repeat(900);
        let started = std::time::Instant::now();
        assert!(!glob.matches(&name));
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }
}
