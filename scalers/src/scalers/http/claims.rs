//! Who may route a host and path prefix through the activator: the one rule that the
//! activator (which routes) and the operator (which reports in the ScaledObject's status)
//! both apply to the same ScaledObjects, so they always agree.
//!
//! - A ScaledObject **claims** every host + path prefix of its `http` triggers (no `hosts`
//!   means the catch-all `*`).
//! - Two claims **overlap** when some request could match both: their hosts overlap (equal;
//!   a wildcard `*.example.com` and a host or wildcard below `example.com`; `*` and anything)
//!   and their prefixes overlap (one is the other, or a whole-segment prefix of it: `/` and
//!   `/login`, `/api` and `/api/v2`, not `/api` and `/apix`).
//! - The claims are taken **oldest first**: `metadata.creationTimestamp`, then namespace, then
//!   name (a deterministic tie-break, the same on every replica). A ScaledObject whose claim
//!   overlaps one already taken by **another namespace** is refused as a whole: none of its
//!   routes is routed, and it takes nothing, so the next claim is compared with the routed
//!   ones only. Claims of one namespace never refuse each other (the routing order decides
//!   between them, as before).
//! - With a [`HostPolicy`], a ScaledObject claiming a host its namespace may not claim, or
//!   one the policy lists for another namespace by name (a **reservation**), is refused the
//!   same way, before any overlap is looked at.
//!
//! When the owner of a route goes away, the next resolution finds the next-oldest claim free
//! of overlaps and routes it, unless the policy reserves the host for the owner's namespace:
//! then no other namespace can take it, and the owner finds it again when it comes back.
//! [`resolve`] is pure (the same ScaledObjects and policy give the same verdicts, in any
//! order): callers pass every ScaledObject they see.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt;

use jiff::Timestamp;
use keda_api::ScaledObject;

use super::HttpTrigger;
use crate::context::ScalerContext;

/// The `Ready=False` reason (and Event reason) of a ScaledObject whose route overlaps one
/// another namespace claimed first.
pub const REASON_ROUTE_CONFLICT: &str = "HTTPRouteConflict";
/// The `Ready=False` reason (and Event reason) of a ScaledObject claiming a host the host
/// policy does not allow its namespace.
pub const REASON_HOST_NOT_ALLOWED: &str = "HTTPHostNotAllowed";
/// The `Ready=False` reason (and Event reason) of a ScaledObject claiming a host that the
/// host policy lists for another namespace by name.
pub const REASON_HOST_RESERVED: &str = "HTTPHostReserved";

/// Whether path prefix `prefix` matches `path` on whole segments: `/api` matches `/api` and
/// `/api/x`, not `/apix`; a prefix ending in `/` matches everything below it.
#[inline]
pub fn prefix_matches(prefix: &str, path: &str) -> bool {
    if !path.starts_with(prefix) {
        return false;
    }
    prefix.ends_with('/') || path.len() == prefix.len() || path.as_bytes()[prefix.len()] == b'/'
}

/// Whether some request path matches both prefixes.
pub fn prefixes_overlap(a: &str, b: &str) -> bool {
    prefix_matches(a, b) || prefix_matches(b, a)
}

/// Whether some request host matches both host patterns (`*`, `*.suffix` or an exact host,
/// lowercase).
pub fn hosts_overlap(a: &str, b: &str) -> bool {
    if a == "*" || b == "*" || a == b {
        return true;
    }
    match (a.strip_prefix("*."), b.strip_prefix("*.")) {
        // Two wildcards: one's domain is the other's or below it.
        (Some(x), Some(y)) => is_below_or_same(x, y) || is_below_or_same(y, x),
        // A wildcard covers hosts strictly below its domain.
        (Some(domain), None) => is_strictly_below(b, domain),
        (None, Some(domain)) => is_strictly_below(a, domain),
        (None, None) => false,
    }
}

fn is_strictly_below(host: &str, domain: &str) -> bool {
    host.len() > domain.len()
        && host.ends_with(domain)
        && host.as_bytes()[host.len() - domain.len() - 1] == b'.'
}

fn is_below_or_same(host: &str, domain: &str) -> bool {
    host == domain || is_strictly_below(host, domain)
}

/// One host + path prefix of one `http` trigger.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Route {
    /// `*`, `*.suffix` or an exact host, lowercase.
    pub host: String,
    /// A path prefix starting with `/`.
    pub prefix: String,
    /// The index of the trigger in `spec.triggers`.
    pub trigger_index: usize,
}

impl Route {
    /// Whether some request could match both routes.
    pub fn overlaps(&self, other: &Route) -> bool {
        hosts_overlap(&self.host, &other.host) && prefixes_overlap(&self.prefix, &other.prefix)
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.host, self.prefix)
    }
}

/// What one ScaledObject claims.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    /// The ScaledObject's namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its `metadata.creationTimestamp`; `None` sorts after every timestamp.
    pub created: Option<Timestamp>,
    /// Every host + path prefix of its `http` triggers.
    pub routes: Vec<Route>,
}

impl Claim {
    /// The claim of ScaledObject `namespace/name` created at `created`, from its parsed `http`
    /// triggers (index in `spec.triggers`, trigger). An empty `hosts` claims `*`.
    pub fn from_triggers<'a>(
        namespace: impl Into<String>,
        name: impl Into<String>,
        created: Option<Timestamp>,
        triggers: impl IntoIterator<Item = (usize, &'a HttpTrigger)>,
    ) -> Self {
        let mut routes = Vec::new();
        for (trigger_index, trigger) in triggers {
            let any = ["*".to_string()];
            let hosts: &[String] = if trigger.hosts.is_empty() {
                &any
            } else {
                &trigger.hosts
            };
            for host in hosts {
                for prefix in &trigger.path_prefixes {
                    routes.push(Route {
                        host: host.to_ascii_lowercase(),
                        prefix: prefix.clone(),
                        trigger_index,
                    });
                }
            }
        }
        Self {
            namespace: namespace.into(),
            name: name.into(),
            created,
            routes,
        }
    }

    /// The claim of `so`: its `http` triggers that parse (one that does not routes nothing
    /// and is reported as a trigger error); `None` when it has none.
    pub fn of(so: &ScaledObject) -> Option<Self> {
        let namespace = so.metadata.namespace.clone().unwrap_or_default();
        let name = so.metadata.name.clone().unwrap_or_default();
        let triggers: Vec<(usize, HttpTrigger)> = so
            .spec
            .triggers
            .iter()
            .enumerate()
            .filter(|(_, t)| t.type_ == "http")
            .filter_map(|(index, trigger)| {
                let ctx = ScalerContext {
                    scalable_name: name.clone(),
                    scalable_namespace: namespace.clone(),
                    ..ScalerContext::from_trigger(trigger, index)
                };
                HttpTrigger::parse(&ctx).ok().map(|t| (index, t))
            })
            .collect();
        if triggers.is_empty() {
            return None;
        }
        Some(Self::from_triggers(
            namespace,
            name,
            so.metadata.creation_timestamp.as_ref().map(|t| t.0),
            triggers.iter().map(|(i, t)| (*i, t)),
        ))
    }

    fn order_key(&self) -> (bool, Option<Timestamp>, &str, &str) {
        (
            self.created.is_none(),
            self.created,
            &self.namespace,
            &self.name,
        )
    }
}

/// Why a ScaledObject's routes are not routed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// A route overlaps one that an older ScaledObject of another namespace claimed.
    Conflict {
        /// The refused route.
        route: Route,
        /// The owner's namespace.
        owner_namespace: String,
        /// The owner's name.
        owner_name: String,
        /// The owner's route it overlaps.
        owner_route: Route,
    },
    /// The host policy does not let the namespace claim this route's host.
    NotAllowed {
        /// The refused route.
        route: Route,
        /// The ScaledObject's namespace.
        namespace: String,
    },
    /// The host policy lets the namespace claim this route's host only through a pattern
    /// broader than (or the same as, through `"*"`) one it lists for another namespace.
    Reserved {
        /// The refused route.
        route: Route,
        /// The ScaledObject's namespace.
        namespace: String,
        /// The namespace whose policy entry lists `pattern`.
        owner_namespace: String,
        /// The pattern of the owner's entry that the route's host overlaps.
        pattern: String,
    },
}

impl Refusal {
    /// The condition and Event reason: [`REASON_ROUTE_CONFLICT`], [`REASON_HOST_NOT_ALLOWED`]
    /// or [`REASON_HOST_RESERVED`].
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::Conflict { .. } => REASON_ROUTE_CONFLICT,
            Refusal::NotAllowed { .. } => REASON_HOST_NOT_ALLOWED,
            Refusal::Reserved { .. } => REASON_HOST_RESERVED,
        }
    }

    /// The refused route.
    pub fn route(&self) -> &Route {
        match self {
            Refusal::Conflict { route, .. }
            | Refusal::NotAllowed { route, .. }
            | Refusal::Reserved { route, .. } => route,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Conflict {
                route,
                owner_namespace,
                owner_name,
                owner_route,
            } => write!(
                f,
                "spec.triggers[{}] (http): route {route} overlaps route {owner_route} of \
                 ScaledObject {owner_namespace}/{owner_name}, which claimed it first from \
                 another namespace; the activator routes none of this ScaledObject's hosts",
                route.trigger_index
            ),
            Refusal::NotAllowed { route, namespace } => write!(
                f,
                "spec.triggers[{}] (http): host {:?} is not allowed for namespace {namespace:?} \
                 by the activator's host policy; the activator routes none of this \
                 ScaledObject's hosts (the cluster administrator grants hosts to namespaces in \
                 the --http-host-policy file)",
                route.trigger_index, route.host
            ),
            Refusal::Reserved {
                route,
                namespace,
                owner_namespace,
                pattern,
            } => write!(
                f,
                "spec.triggers[{}] (http): host {:?} is reserved for namespace \
                 {owner_namespace:?} by the activator's host policy (its entry lists {pattern:?}, \
                 the entry of namespace {namespace:?} does not); the activator routes none of \
                 this ScaledObject's hosts",
                route.trigger_index, route.host
            ),
        }
    }
}

/// The outcome of [`resolve`]: which ScaledObjects are refused, and why.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdicts {
    refused: HashMap<(String, String), Refusal>,
}

impl Verdicts {
    /// Why ScaledObject `namespace/name` is refused; `None` when its routes are routed (or it
    /// claims nothing).
    pub fn refusal(&self, namespace: &str, name: &str) -> Option<&Refusal> {
        self.refused.get(&(namespace.to_string(), name.to_string()))
    }

    /// Every refused ScaledObject (`namespace`, `name`) with its refusal.
    pub fn refused(&self) -> impl Iterator<Item = (&(String, String), &Refusal)> {
        self.refused.iter()
    }

    /// The ScaledObjects (`namespace`, `name`) whose verdict differs between `self` and
    /// `other`: refused in one only, or refused for another reason.
    pub fn changed(&self, other: &Verdicts) -> Vec<(String, String)> {
        let mut changed: Vec<(String, String)> = self
            .refused
            .iter()
            .filter(|(key, refusal)| other.refused.get(*key) != Some(*refusal))
            .map(|(key, _)| key.clone())
            .collect();
        changed.extend(
            other
                .refused
                .keys()
                .filter(|key| !self.refused.contains_key(*key))
                .cloned(),
        );
        changed.sort();
        changed
    }
}

/// The routes taken so far, indexed by host so that a claim is compared only with the routes
/// whose hosts could overlap its own.
#[derive(Default)]
struct Taken {
    /// Host pattern -> (route, index of the owning claim).
    by_host: HashMap<String, Vec<(Route, usize)>>,
    /// Domain -> host patterns strictly below it (`a.example.com` and `*.a.example.com` are
    /// below `example.com` and `com`).
    below: HashMap<String, HashSet<String>>,
}

impl Taken {
    fn insert(&mut self, route: &Route, owner: usize) {
        let name = route.host.strip_prefix("*.").unwrap_or(&route.host);
        if route.host != "*" {
            let mut rest = name;
            while let Some((_, parent)) = rest.split_once('.') {
                self.below
                    .entry(parent.to_string())
                    .or_default()
                    .insert(route.host.clone());
                rest = parent;
            }
        }
        self.by_host
            .entry(route.host.clone())
            .or_default()
            .push((route.clone(), owner));
    }

    /// The oldest taken route of a claim other than those of `namespace` that overlaps `route`.
    fn oldest_overlap<'a>(
        &'a self,
        route: &Route,
        claims: &[Claim],
        namespace: &str,
    ) -> Option<&'a (Route, usize)> {
        if route.host == "*" {
            return self.oldest_among(
                self.by_host.keys().map(String::as_str),
                route,
                claims,
                namespace,
            );
        }
        let name = route.host.strip_prefix("*.").unwrap_or(&route.host);
        // The catch-all, the same host, and the wildcards above it.
        let mut hosts = vec!["*".to_string(), route.host.clone()];
        let mut rest = name;
        while let Some((_, parent)) = rest.split_once('.') {
            hosts.push(format!("*.{parent}"));
            rest = parent;
        }
        // A wildcard also covers every host and wildcard below its domain.
        let below = route
            .host
            .starts_with("*.")
            .then(|| self.below.get(name))
            .flatten()
            .into_iter()
            .flatten()
            .map(String::as_str);
        self.oldest_among(
            hosts.iter().map(String::as_str).chain(below),
            route,
            claims,
            namespace,
        )
    }

    fn oldest_among<'a, 'h>(
        &'a self,
        hosts: impl Iterator<Item = &'h str>,
        route: &Route,
        claims: &[Claim],
        namespace: &str,
    ) -> Option<&'a (Route, usize)> {
        hosts
            .filter_map(|host| self.by_host.get(host))
            .flatten()
            .filter(|(taken, owner)| claims[*owner].namespace != namespace && taken.overlaps(route))
            .min_by_key(|(_, owner)| *owner)
    }
}

/// Decides which claims are routed: oldest first, a claim overlapping a routed claim of another
/// namespace, or outside `policy`, is refused as a whole (see the module documentation).
pub fn resolve(claims: impl IntoIterator<Item = Claim>, policy: &HostPolicy) -> Verdicts {
    let mut claims: Vec<Claim> = claims.into_iter().collect();
    claims.sort_by(|a, b| a.order_key().cmp(&b.order_key()));
    let mut taken = Taken::default();
    let mut refused = HashMap::new();
    for (index, claim) in claims.iter().enumerate() {
        let refusal = claim
            .routes
            .iter()
            .find_map(|route| {
                policy
                    .check(&claim.namespace, &route.host)
                    .err()
                    .map(|denial| denial.refusal(route, &claim.namespace))
            })
            .or_else(|| {
                claim.routes.iter().find_map(|route| {
                    taken.oldest_overlap(route, &claims, &claim.namespace).map(
                        |(owner_route, owner)| Refusal::Conflict {
                            route: route.clone(),
                            owner_namespace: claims[*owner].namespace.clone(),
                            owner_name: claims[*owner].name.clone(),
                            owner_route: owner_route.clone(),
                        },
                    )
                })
            });
        match refusal {
            Some(refusal) => {
                refused.insert((claim.namespace.clone(), claim.name.clone()), refusal);
            }
            None => {
                for route in &claim.routes {
                    taken.insert(route, index);
                }
            }
        }
    }
    Verdicts { refused }
}

/// Which hosts each namespace may claim, and which are bound to one namespace.
///
/// Read from YAML (a ConfigMap mounted into the operator and the activator alike): a map from
/// namespace to the host patterns it may claim; the key `"*"` gives the patterns of every
/// namespace not listed, and without it an unlisted namespace may claim no host (`{}` allows
/// nothing at all).
///
/// ```yaml
/// shop: [shop.example.com, "*.shop.example.com"]
/// blog: [blog.example.com]
/// "*": ["*.apps.example.com"]
/// ```
///
/// A pattern `h` allows the host `h`; `*.d` allows every host and wildcard below `d` and
/// `*.d` itself; `*` allows everything, the catch-all included (a trigger without `hosts`
/// claims `*`, so only a namespace allowed `*` may leave `hosts` out).
///
/// **Reservations.** A pattern listed under a namespace's name is that namespace's (and of
/// every other namespace listing the very same pattern): another namespace may not claim a
/// host overlapping it when its own best grant for that host is broader (`*.example.com`
/// against a listed `shop.example.com`), or is the same pattern reached only through `"*"`.
/// So a listed host can never be claimed by another namespace, whether or not its owner has a
/// ScaledObject at the moment, and whatever the creation times: an owner deleted and created
/// again finds its host where it left it. The most specific grant wins; namespaces listing
/// the same pattern share it (and the oldest claim decides between them).
///
/// [`HostPolicy::default`] (and [`HostPolicy::allow_all`]) is no policy at all: every
/// namespace may claim every host, and the oldest claim wins. The binaries do not default to
/// it: they need `--http-host-policy FILE` or the explicit `--http-any-host`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostPolicy {
    /// `None`: no policy, everything allowed.
    rules: Option<PolicyRules>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct PolicyRules {
    namespaces: BTreeMap<String, Vec<String>>,
    others: Vec<String>,
    /// Each pattern listed under a namespace's name -> the namespaces listing it.
    listed: HashMap<String, BTreeSet<String>>,
    /// Domain -> the listed patterns strictly below it (`a.example.com` and
    /// `*.a.example.com` are below `example.com` and `com`).
    below: HashMap<String, BTreeSet<String>>,
}

/// Why the host policy refuses a host to a namespace ([`HostPolicy::check`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Denial {
    /// No pattern of the namespace's entry (or of `"*"` for an unlisted one) allows the host.
    NotAllowed,
    /// Another namespace's entry lists `pattern`, which the host overlaps, and the namespace
    /// may claim the host only through a broader pattern (or through `"*"`).
    Reserved {
        /// The namespace whose entry lists `pattern` (the first in name order, if several).
        owner_namespace: String,
        /// The listed pattern.
        pattern: String,
    },
}

impl Denial {
    /// The [`Refusal`] of `route` of a ScaledObject of `namespace`.
    fn refusal(self, route: &Route, namespace: &str) -> Refusal {
        match self {
            Denial::NotAllowed => Refusal::NotAllowed {
                route: route.clone(),
                namespace: namespace.to_string(),
            },
            Denial::Reserved {
                owner_namespace,
                pattern,
            } => Refusal::Reserved {
                route: route.clone(),
                namespace: namespace.to_string(),
                owner_namespace,
                pattern,
            },
        }
    }
}

/// A host policy that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum HostPolicyError {
    /// Not a YAML map from namespace to a list of strings.
    #[error("the host policy is not a map from namespace to a list of host patterns: {0}")]
    Format(#[source] serde_yaml::Error),
    /// A pattern is not a host, `*.` followed by a host, or `*`.
    #[error(
        "the host policy entry of {namespace:?}: {pattern:?} is not a host name, \"*.\" followed \
         by a host name, or \"*\""
    )]
    Pattern {
        /// The entry's namespace (or `*`).
        namespace: String,
        /// The bad pattern.
        pattern: String,
    },
}

impl HostPolicy {
    /// No policy: every namespace may claim every host (the oldest claim wins), as with
    /// KEDA's HTTP add-on, which has no host ownership at all.
    pub fn allow_all() -> Self {
        Self::default()
    }

    /// A policy that allows no namespace any host: the policy `{}`.
    pub fn deny_all() -> Self {
        Self {
            rules: Some(PolicyRules::default()),
        }
    }

    /// A policy from its YAML text (see the type's documentation). An empty document (or
    /// one of comments only) is `{}`: nothing is allowed.
    ///
    /// # Errors
    /// Not a map from namespace to a list of strings; a pattern that is not a host name,
    /// `*.` + host name, or `*`.
    pub fn from_yaml(text: &str) -> Result<Self, HostPolicyError> {
        let raw: Option<BTreeMap<String, Vec<String>>> =
            serde_yaml::from_str(text).map_err(HostPolicyError::Format)?;
        let mut rules = PolicyRules::default();
        for (namespace, patterns) in raw.unwrap_or_default() {
            let patterns: Vec<String> = patterns
                .into_iter()
                .map(|p| p.trim().to_ascii_lowercase())
                .collect();
            if let Some(bad) = patterns.iter().find(|p| !super::host_ok(p)) {
                return Err(HostPolicyError::Pattern {
                    namespace,
                    pattern: bad.clone(),
                });
            }
            if namespace == "*" {
                rules.others = patterns;
                continue;
            }
            for pattern in &patterns {
                rules
                    .listed
                    .entry(pattern.clone())
                    .or_default()
                    .insert(namespace.clone());
                if pattern != "*" {
                    for domain in ancestors(pattern.strip_prefix("*.").unwrap_or(pattern)) {
                        rules
                            .below
                            .entry(domain.to_string())
                            .or_default()
                            .insert(pattern.clone());
                    }
                }
            }
            rules.namespaces.insert(namespace, patterns);
        }
        Ok(Self { rules: Some(rules) })
    }

    /// One line for the start-up log: `any host (no policy)`, `no host (empty policy)`, or
    /// how many namespaces the policy lists and whether it has a `"*"` entry.
    pub fn summary(&self) -> String {
        match &self.rules {
            None => "any host (no policy)".to_string(),
            Some(r) if r.namespaces.is_empty() && r.others.is_empty() => {
                "no host (empty policy)".to_string()
            }
            Some(r) => format!(
                "{} namespaces listed, {}",
                r.namespaces.len(),
                if r.others.is_empty() {
                    "no others"
                } else {
                    "others by the \"*\" entry"
                }
            ),
        }
    }

    /// Whether `namespace` may claim `host` (`*`, `*.suffix` or exact, lowercase): allowed by
    /// its patterns and reserved for no other namespace.
    pub fn allows(&self, namespace: &str, host: &str) -> bool {
        self.check(namespace, host).is_ok()
    }

    /// Whether `namespace` may claim `host` (`*`, `*.suffix` or exact, lowercase), and if not,
    /// why.
    ///
    /// # Errors
    /// [`Denial::NotAllowed`]: no pattern of the namespace allows the host;
    /// [`Denial::Reserved`]: another namespace's entry lists a pattern the host overlaps that
    /// is at least as specific as the namespace's best grant (see the type's documentation).
    pub fn check(&self, namespace: &str, host: &str) -> Result<(), Denial> {
        let Some(rules) = &self.rules else {
            return Ok(());
        };
        let entry = rules.namespaces.get(namespace);
        let grant = entry
            .unwrap_or(&rules.others)
            .iter()
            .filter(|pattern| pattern_allows(pattern, host))
            .max_by_key(|pattern| specificity(pattern))
            .ok_or(Denial::NotAllowed)?;
        let lists = |pattern: &str| entry.is_some_and(|own| own.iter().any(|p| p == pattern));
        let mut candidates: Vec<&String> = rules
            .listed_overlapping(host)
            .filter(|pattern| pattern_allows(grant, pattern) && !lists(pattern))
            .collect();
        candidates.sort();
        for pattern in candidates {
            if let Some(owner) = rules.listed[pattern].iter().find(|ns| *ns != namespace) {
                return Err(Denial::Reserved {
                    owner_namespace: owner.clone(),
                    pattern: pattern.clone(),
                });
            }
        }
        Ok(())
    }
}

impl PolicyRules {
    /// The patterns listed under some namespace's name that overlap `host`.
    fn listed_overlapping<'a>(&'a self, host: &'a str) -> impl Iterator<Item = &'a String> {
        let candidates: Vec<&String> = if host == "*" {
            self.listed.keys().collect()
        } else {
            let name = host.strip_prefix("*.").unwrap_or(host);
            // The catch-all, the same pattern, and the wildcards above the host.
            let mut above = vec!["*".to_string(), host.to_string()];
            above.extend(ancestors(name).map(|domain| format!("*.{domain}")));
            let above = above
                .into_iter()
                .filter_map(|pattern| self.listed.get_key_value(&pattern).map(|(k, _)| k));
            // A wildcard also overlaps every host and wildcard below its domain.
            let below = host
                .starts_with("*.")
                .then(|| self.below.get(name))
                .flatten()
                .into_iter()
                .flatten();
            above.chain(below).collect()
        };
        candidates
            .into_iter()
            .filter(move |pattern| hosts_overlap(pattern, host))
    }
}

/// The domains strictly above `name`: `a.example.com` -> `example.com`, `com`.
fn ancestors(name: &str) -> impl Iterator<Item = &str> {
    std::iter::successors(name.split_once('.').map(|(_, parent)| parent), |rest| {
        rest.split_once('.').map(|(_, parent)| parent)
    })
}

/// How narrow a pattern is, for patterns that cover one another: `*` < `*.com` <
/// `*.example.com` < any host.
fn specificity(pattern: &str) -> (bool, usize) {
    match pattern.strip_prefix("*.") {
        _ if pattern == "*" => (false, 0),
        Some(domain) => (false, 1 + domain.split('.').count()),
        None => (true, 0),
    }
}

fn pattern_allows(pattern: &str, host: &str) -> bool {
    if pattern == "*" || pattern == host {
        return true;
    }
    match pattern.strip_prefix("*.") {
        Some(domain) => {
            let name = host.strip_prefix("*.").unwrap_or(host);
            host != "*" && is_strictly_below(name, domain)
        }
        None => false,
    }
}

#[cfg(test)]
mod tests;
