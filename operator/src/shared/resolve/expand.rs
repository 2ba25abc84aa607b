//! Kubernetes' `$(VAR)` expansion of `env[].value`, as the kubelet does it
//! (`k8s.io/kubernetes/third_party/forked/golang/expansion`).
//!
//! - `$(NAME)` becomes the value of `NAME` when it is defined, and stays as written otherwise;
//! - `$$` is an escaped `$`, so `$$(NAME)` is the literal `$(NAME)`;
//! - a `$` followed by anything else, a trailing `$` and an unclosed `$(` stay as written.

/// Expands `$(NAME)` references in `input` with `lookup`.
pub(crate) fn expand<'a>(input: &str, lookup: impl Fn(&str) -> Option<&'a str>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(inner) = after.strip_prefix('(') {
            match inner.find(')') {
                Some(close) => {
                    let name = &inner[..close];
                    match lookup(name) {
                        Some(value) => out.push_str(value),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &inner[close + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = inner;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<&'static str> {
        match name {
            "HOST" => Some("redis"),
            "PORT" => Some("6379"),
            "EMPTY" => Some(""),
            _ => None,
        }
    }

    #[test]
    fn references_expand_like_the_kubelet() {
        let cases = [
            // plain text is unchanged
            ("plain", "plain"),
            // defined references are replaced, several per value
            ("$(HOST):$(PORT)", "redis:6379"),
            // a defined but empty variable expands to nothing
            ("a$(EMPTY)b", "ab"),
            // undefined references stay as written
            ("$(MISSING)-$(HOST)", "$(MISSING)-redis"),
            // $$ escapes a dollar, so $$(HOST) is literal
            ("$$(HOST)", "$(HOST)"),
            ("cost: $$5", "cost: $5"),
            // a dollar before anything else stays
            ("$HOST", "$HOST"),
            // a trailing dollar stays
            ("end$", "end$"),
            // an unclosed reference stays, and later text is still scanned
            ("$(HOST", "$(HOST"),
            ("$($(HOST)", "$($(HOST)"),
            // an empty name is looked up (and not found)
            ("$()", "$()"),
            // non-ASCII text around references survives
            ("é$(HOST)ü", "éredisü"),
        ];
        for (input, want) in cases {
            assert_eq!(expand(input, env), want, "{input:?}");
        }
    }
}
