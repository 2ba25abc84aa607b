//! Error injection and request counting, for reliability tests and benchmarks.

use std::collections::BTreeMap;

/// The verb of a resource request, as Kubernetes names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
    DeleteCollection,
}

/// Who a request is for: the key that failure rules match and request counts group by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequestInfo {
    pub verb: Verb,
    /// The plural, with `/status` or `/scale` for subresources: `deployments/scale`.
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

/// One write request as the server received it, with who sent it: kept by
/// [`MemKube::record_writes`](crate::MemKube::record_writes), as an audit log keeps the user of
/// each request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteRecord {
    /// Create, update, patch, delete.
    pub verb: Verb,
    /// The plural, with `/status` or `/scale` for subresources: `deployments/scale`.
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    /// Who sent it: the bearer token of the request (memkube authenticates nobody, so the token
    /// names the client as a test chose it), else its `User-Agent`, else empty.
    pub writer: String,
    /// When the server received it.
    pub at: std::time::Instant,
}

/// Makes matching requests fail with `code` (answered as a `Status` with the matching reason).
///
/// Every set field must match; an unset field matches anything. `resource` matches the plural
/// (`deployments`, which includes its subresources) or one subresource (`deployments/scale`).
///
/// ```
/// use memkube::{FailureRule, Verb};
/// // The next two updates of any Deployment fail with 500.
/// let rule = FailureRule::new(500).verb(Verb::Update).resource("deployments").times(2);
/// # let _ = rule;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureRule {
    verb: Option<Verb>,
    resource: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    code: u16,
    message: Option<String>,
    times: Option<u32>,
}

impl FailureRule {
    /// A rule that fails every request, forever, with `code`, until narrowed.
    pub fn new(code: u16) -> Self {
        Self {
            verb: None,
            resource: None,
            namespace: None,
            name: None,
            code,
            message: None,
            times: None,
        }
    }

    /// Only requests with this verb.
    pub fn verb(mut self, verb: Verb) -> Self {
        self.verb = Some(verb);
        self
    }

    /// Only requests for this resource (`deployments`) or subresource (`deployments/scale`).
    pub fn resource(mut self, resource: impl Into<String>) -> Self {
        self.resource = Some(resource.into());
        self
    }

    /// Only requests in this namespace.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Only requests for the object with this name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The `Status.message` of the injected error.
    pub fn message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }

    /// Fail only the next `times` matching requests (default: all of them until cleared).
    pub fn times(mut self, times: u32) -> Self {
        self.times = Some(times);
        self
    }

    fn matches(&self, req: &RequestInfo) -> bool {
        let base = req.resource.split('/').next().unwrap_or_default();
        self.verb.is_none_or(|v| v == req.verb)
            && self
                .resource
                .as_deref()
                .is_none_or(|r| r == req.resource || r == base)
            && self
                .namespace
                .as_deref()
                .is_none_or(|ns| req.namespace.as_deref() == Some(ns))
            && self
                .name
                .as_deref()
                .is_none_or(|n| req.name.as_deref() == Some(n))
    }
}

/// The installed failure rules.
#[derive(Debug, Default)]
pub(crate) struct Faults(Vec<FailureRule>);

impl Faults {
    pub(crate) fn add(&mut self, rule: FailureRule) {
        self.0.push(rule);
    }

    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }

    /// The injected error for this request, if a rule matches; uses up one of its `times`.
    pub(crate) fn check(&mut self, req: &RequestInfo) -> Option<crate::ApiError> {
        let index = self.0.iter().position(|rule| rule.matches(req))?;
        let rule = &mut self.0[index];
        let message = rule
            .message
            .clone()
            .unwrap_or_else(|| format!("injected failure for {:?} {}", req.verb, req.resource));
        let error = crate::ApiError::from_code(rule.code, message);
        if let Some(times) = rule.times.as_mut() {
            *times = times.saturating_sub(1);
            if *times == 0 {
                self.0.remove(index);
            }
        }
        Some(error)
    }
}

/// Requests served, by verb and resource (`deployments`, `deployments/scale`). Discovery
/// requests are not counted; requests failed by injection are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestCounts(pub(crate) BTreeMap<(Verb, String), u64>);

impl RequestCounts {
    pub(crate) fn record(&mut self, req: &RequestInfo) {
        *self.0.entry((req.verb, req.resource.clone())).or_default() += 1;
    }

    /// Requests with this verb for this resource (or subresource, `deployments/scale`).
    pub fn get(&self, verb: Verb, resource: &str) -> u64 {
        self.0
            .get(&(verb, resource.to_string()))
            .copied()
            .unwrap_or_default()
    }

    /// Requests with this verb, for any resource.
    pub fn verb_total(&self, verb: Verb) -> u64 {
        self.0
            .iter()
            .filter(|((v, _), _)| *v == verb)
            .map(|(_, n)| n)
            .sum()
    }

    /// All counted requests.
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// Every (verb, resource) pair with its count, sorted.
    pub fn iter(&self) -> impl Iterator<Item = (Verb, &str, u64)> {
        self.0
            .iter()
            .map(|((verb, resource), n)| (*verb, resource.as_str(), *n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(verb: Verb, resource: &str, name: &str) -> RequestInfo {
        RequestInfo {
            verb,
            resource: resource.to_string(),
            namespace: Some("ns".to_string()),
            name: Some(name.to_string()),
        }
    }

    #[test]
    fn rules_fail_only_matching_requests_the_given_number_of_times() {
        let mut faults = Faults::default();
        faults.add(
            FailureRule::new(503)
                .verb(Verb::Update)
                .resource("deployments")
                .name("a")
                .times(2),
        );
        assert!(faults.check(&req(Verb::Get, "deployments", "a")).is_none());
        assert!(
            faults
                .check(&req(Verb::Update, "deployments", "b"))
                .is_none()
        );
        assert_eq!(
            faults
                .check(&req(Verb::Update, "deployments/scale", "a"))
                .map(|e| e.code),
            Some(503)
        );
        assert_eq!(
            faults
                .check(&req(Verb::Update, "deployments", "a"))
                .map(|e| e.reason),
            Some("ServiceUnavailable".to_string())
        );
        assert!(
            faults
                .check(&req(Verb::Update, "deployments", "a"))
                .is_none()
        );
    }
}
