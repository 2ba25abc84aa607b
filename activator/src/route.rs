//! The routing table: host and path prefix -> target. Immutable once built; the watcher builds
//! a new one on every change and swaps it in atomically, so the request path reads it without
//! locks.
//!
//! Matching: the host (without port, case-insensitive) picks a level: an exact host first,
//! then wildcards from the most specific (`*.a.example.com` before `*.example.com`), then the
//! catch-all (`*` or no hosts). Within a level the longest matching path prefix wins; a level
//! without a matching prefix falls through to the next. Prefixes match whole path segments:
//! `/api` matches `/api` and `/api/x`, not `/apix`.

use std::collections::HashMap;
use std::sync::Arc;

// Segment-wise prefix matching: the same function the ownership rule compares claims with.
use keda_scalers::scalers::http::claims::prefix_matches;

/// One host's routes, longest prefix first.
#[derive(Debug)]
struct Routes<T> {
    by_prefix: Vec<(String, Arc<T>)>,
}

impl<T> Default for Routes<T> {
    fn default() -> Self {
        Self {
            by_prefix: Vec::new(),
        }
    }
}

impl<T> Routes<T> {
    fn find(&self, path: &str) -> Option<&Arc<T>> {
        self.by_prefix
            .iter()
            .find(|(prefix, _)| prefix_matches(prefix, path))
            .map(|(_, t)| t)
    }

    fn sort(&mut self) {
        // Longest first; equal prefixes keep insertion order (the builder sorts its input).
        self.by_prefix
            .sort_by_key(|(prefix, _)| std::cmp::Reverse(prefix.len()));
    }
}

/// Host + path prefix -> target `T`.
#[derive(Debug)]
pub struct RouteTable<T> {
    exact: HashMap<String, Routes<T>>,
    /// Suffixes including the leading dot (`.example.com`), most specific first.
    wildcard: Vec<(String, Routes<T>)>,
    any: Routes<T>,
}

impl<T> Default for RouteTable<T> {
    fn default() -> Self {
        Self {
            exact: HashMap::new(),
            wildcard: Vec::new(),
            any: Routes::default(),
        }
    }
}

/// One route to add to a [`RouteTable`].
#[derive(Clone, Debug)]
pub struct RouteSpec<T> {
    /// Hosts: exact, `*.suffix` or `*`; empty = any host.
    pub hosts: Vec<String>,
    /// Path prefixes, each starting with `/`.
    pub path_prefixes: Vec<String>,
    /// Where matching requests go.
    pub target: Arc<T>,
}

impl<T> RouteTable<T> {
    /// Builds a table. When two routes claim the same host and prefix, the first one wins
    /// (callers pass them in a stable order, e.g. sorted by ScaledObject). Routes of different
    /// namespaces never meet here: the watcher drops the ScaledObjects whose routes
    /// [`keda_scalers::scalers::http::claims::resolve`] refuses.
    pub fn build(specs: impl IntoIterator<Item = RouteSpec<T>>) -> Self {
        let mut table = Self::default();
        let mut wildcard: HashMap<String, Routes<T>> = HashMap::new();
        for spec in specs {
            let hosts = if spec.hosts.is_empty() {
                vec!["*".to_string()]
            } else {
                spec.hosts
            };
            for host in hosts {
                let host = host.to_ascii_lowercase();
                let routes = if host == "*" {
                    &mut table.any
                } else if let Some(suffix) = host.strip_prefix('*') {
                    wildcard.entry(suffix.to_string()).or_default()
                } else {
                    table.exact.entry(host).or_default()
                };
                for prefix in &spec.path_prefixes {
                    if !routes.by_prefix.iter().any(|(p, _)| p == prefix) {
                        routes
                            .by_prefix
                            .push((prefix.clone(), Arc::clone(&spec.target)));
                    }
                }
            }
        }
        table.exact.values_mut().for_each(Routes::sort);
        table.any.sort();
        let mut wildcard: Vec<(String, Routes<T>)> = wildcard.into_iter().collect();
        wildcard.iter_mut().for_each(|(_, r)| r.sort());
        wildcard.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        table.wildcard = wildcard;
        table
    }

    /// The target for `host` (a Host header or URI authority; a port is ignored) and `path`.
    pub fn lookup(&self, host: &str, path: &str) -> Option<&Arc<T>> {
        let host = strip_port(host);
        let lowered;
        let host = if host.bytes().any(|b| b.is_ascii_uppercase()) {
            lowered = host.to_ascii_lowercase();
            lowered.as_str()
        } else {
            host
        };
        if let Some(t) = self.exact.get(host).and_then(|r| r.find(path)) {
            return Some(t);
        }
        for (suffix, routes) in &self.wildcard {
            // `*.example.com` matches `a.example.com` and `a.b.example.com`, not `example.com`.
            if host.len() > suffix.len()
                && host.ends_with(suffix.as_str())
                && let Some(t) = routes.find(path)
            {
                return Some(t);
            }
        }
        self.any.find(path)
    }

    /// Whether the table has no route at all.
    pub fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.wildcard.is_empty() && self.any.by_prefix.is_empty()
    }
}

fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        // An IPv6 literal: keep up to the closing bracket.
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    host.rsplit_once(':').map_or(host, |(h, port)| {
        if port.bytes().all(|b| b.is_ascii_digit()) {
            h
        } else {
            host
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(hosts: &[&str], prefixes: &[&str], target: &'static str) -> RouteSpec<&'static str> {
        RouteSpec {
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            path_prefixes: prefixes.iter().map(|p| p.to_string()).collect(),
            target: Arc::new(target),
        }
    }

    #[test]
    fn lookups_follow_host_then_longest_prefix() {
        let table = RouteTable::build([
            spec(&["shop.example.com"], &["/"], "shop"),
            spec(&["shop.example.com"], &["/api"], "shop-api"),
            spec(&["*.example.com"], &["/"], "wild"),
            spec(&["*.eu.example.com"], &["/"], "wild-eu"),
            spec(&["*"], &["/"], "any"),
            spec(&[], &["/health"], "any-health"),
            spec(&["static.example.com"], &["/assets"], "assets"),
        ]);
        // (host, path, expected target)
        let cases = [
            // Exact host, longest prefix.
            ("shop.example.com", "/api/orders", Some("shop-api")),
            ("shop.example.com", "/api", Some("shop-api")),
            // Prefixes match whole segments.
            ("shop.example.com", "/apix", Some("shop")),
            // Port and case are ignored.
            ("SHOP.example.com:8080", "/", Some("shop")),
            // Wildcards: the most specific suffix first.
            ("a.example.com", "/", Some("wild")),
            ("a.eu.example.com", "/", Some("wild-eu")),
            ("a.b.example.com", "/x", Some("wild")),
            // The bare domain is not matched by its wildcard.
            ("example.com", "/", Some("any")),
            // Catch-all, longest prefix.
            ("other.org", "/health/live", Some("any-health")),
            ("other.org", "/", Some("any")),
            // An exact host without a matching prefix falls through to lower levels.
            ("static.example.com", "/index.html", Some("wild")),
            ("static.example.com", "/assets/app.js", Some("assets")),
            // IPv6 literal with port.
            ("[::1]:80", "/", Some("any")),
        ];
        for (host, path, expected) in cases {
            assert_eq!(
                table.lookup(host, path).map(|t| **t),
                expected,
                "{host} {path}"
            );
        }
    }

    #[test]
    fn no_catch_all_means_no_route_for_unknown_hosts() {
        let table = RouteTable::build([spec(&["a.example.com"], &["/"], "a")]);
        assert_eq!(table.lookup("b.example.com", "/"), None);
        assert_eq!(table.lookup("a.example.com", "/").map(|t| **t), Some("a"));
        assert!(RouteTable::<&str>::build([]).is_empty());
    }

    #[test]
    fn the_first_route_claiming_a_host_and_prefix_wins() {
        let table = RouteTable::build([
            spec(&["a.example.com"], &["/"], "first"),
            spec(&["a.example.com"], &["/"], "second"),
        ]);
        assert_eq!(
            table.lookup("a.example.com", "/").map(|t| **t),
            Some("first")
        );
    }
}
