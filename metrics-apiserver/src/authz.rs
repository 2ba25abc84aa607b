//! Authorization by SubjectAccessReview, with decisions cached for a short time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use keda_api::external_metrics::{GROUP, VERSION};
use kube::api::PostParams;
use tokio::time::Instant;

use crate::authn::UserInfo;

/// The verb the HPA's read of an external metric is authorized as: `list`, as the API server
/// derives it from the path `namespaces/{ns}/{metric}` (a resource without a name) and as
/// KEDA's adapter asks; the HPA controller's own ClusterRole grants `list` on
/// `external.metrics.k8s.io`.
pub const VERB: &str = "list";

/// What is being asked: may `user` read metric `metric` in `namespace`?
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AccessRequest {
    /// The authenticated caller.
    pub user: UserInfo,
    /// The namespace of the request.
    pub namespace: String,
    /// The metric name (the resource of the review).
    pub metric: String,
}

/// A decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request is allowed.
    pub allowed: bool,
    /// The authorizer's reason, possibly empty.
    pub reason: String,
}

/// Why no decision could be made (the request is then answered 500, and nothing is cached).
#[derive(Debug, thiserror::Error)]
#[error("SubjectAccessReview for user {user:?} failed: {source}")]
pub struct AuthzError {
    /// The user under review.
    pub user: String,
    /// The cause.
    #[source]
    pub source: kube::Error,
}

/// Who decides.
#[async_trait]
pub trait AccessReviewer: Send + Sync + 'static {
    /// The decision for `request`.
    ///
    /// # Errors
    /// [`AuthzError`] when the decision could not be obtained.
    async fn review(&self, request: &AccessRequest) -> Result<Decision, AuthzError>;
}

/// Asks the API server with a `SubjectAccessReview` (verb `list`, group
/// `external.metrics.k8s.io`, resource = the metric, in the request's namespace). Needs the
/// `system:auth-delegator` ClusterRole.
#[derive(Clone)]
pub struct SubjectAccessReviewer {
    client: kube::Client,
}

impl SubjectAccessReviewer {
    /// A reviewer using `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

/// The SubjectAccessReview for `request`.
pub fn subject_access_review(request: &AccessRequest) -> SubjectAccessReview {
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(request.user.name.clone()),
            groups: Some(request.user.groups.clone()),
            extra: (!request.user.extra.is_empty()).then(|| request.user.extra.clone()),
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(request.namespace.clone()),
                verb: Some(VERB.to_string()),
                group: Some(GROUP.to_string()),
                version: Some(VERSION.to_string()),
                resource: Some(request.metric.clone()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    }
}

#[async_trait]
impl AccessReviewer for SubjectAccessReviewer {
    async fn review(&self, request: &AccessRequest) -> Result<Decision, AuthzError> {
        let api: kube::Api<SubjectAccessReview> = kube::Api::all(self.client.clone());
        let review = api
            .create(&PostParams::default(), &subject_access_review(request))
            .await
            .map_err(|source| AuthzError {
                user: request.user.name.clone(),
                source,
            })?;
        let status = review.status.unwrap_or_default();
        Ok(Decision {
            allowed: status.allowed && status.denied != Some(true),
            reason: status.reason.unwrap_or_default(),
        })
    }
}

/// How long decisions are kept (Kubernetes' delegated authorization defaults: 10 s each).
#[derive(Clone, Copy, Debug)]
pub struct CacheTtl {
    /// For allowed decisions.
    pub allowed: Duration,
    /// For denied decisions.
    pub denied: Duration,
}

impl Default for CacheTtl {
    fn default() -> Self {
        Self {
            allowed: Duration::from_secs(10),
            denied: Duration::from_secs(10),
        }
    }
}

/// The most decisions kept; past it, expired ones are dropped, then all.
const MAX_CACHED: usize = 10_000;

/// The resource a SubjectAccessReview names for every resource of the group.
const EVERY_RESOURCE: &str = "*";

/// A reviewer in front of which decisions are cached for their TTL. Failures are never cached.
pub struct CachedAuthorizer {
    reviewer: Arc<dyn AccessReviewer>,
    ttl: CacheTtl,
    namespace_wide: bool,
    cache: Mutex<HashMap<AccessRequest, (Decision, Instant)>>,
}

impl std::fmt::Debug for CachedAuthorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedAuthorizer")
            .field("ttl", &self.ttl)
            .field("namespace_wide", &self.namespace_wide)
            .finish_non_exhaustive()
    }
}

impl CachedAuthorizer {
    /// Caches the decisions of `reviewer` for `ttl`.
    pub fn new(reviewer: Arc<dyn AccessReviewer>, ttl: CacheTtl) -> Self {
        Self {
            reviewer,
            ttl,
            namespace_wide: false,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// First asks whether the user may `list` every resource of the group in the namespace
    /// (resource `*`), and asks about the one metric only when not.
    ///
    /// Each metric is its own resource, and the HPA reads each about every 15 s, longer than
    /// a decision is cached: asked metric by metric, every read costs a SubjectAccessReview
    /// (100,000 objects: ~6,700 a second against the API server). Asked once per user and
    /// namespace, it costs one per TTL. The answer is the same under RBAC and ABAC, where only
    /// a rule for every resource allows `*`, and that rule allows each one; it differs only
    /// under an authorization webhook that allows `*` yet denies one metric by name
    /// (`--authorization-namespace-wide=false` then).
    #[must_use]
    pub fn namespace_wide(mut self, on: bool) -> Self {
        self.namespace_wide = on;
        self
    }

    /// The decision for `request`, from the cache while it is fresh: allowed when the user may
    /// list every metric of the namespace ([`namespace_wide`](Self::namespace_wide)), else the
    /// decision about the metric itself.
    ///
    /// # Errors
    /// [`AuthzError`] from the reviewer.
    pub async fn authorize(&self, request: &AccessRequest) -> Result<Decision, AuthzError> {
        if self.namespace_wide && request.metric != EVERY_RESOURCE {
            let every = AccessRequest {
                user: request.user.clone(),
                namespace: request.namespace.clone(),
                metric: EVERY_RESOURCE.to_string(),
            };
            let decision = self.decide(&every).await?;
            if decision.allowed {
                return Ok(decision);
            }
        }
        self.decide(request).await
    }

    /// The reviewer's decision for `request`, cached for its TTL.
    async fn decide(&self, request: &AccessRequest) -> Result<Decision, AuthzError> {
        let now = Instant::now();
        if let Some(decision) = self.cached(request, now) {
            return Ok(decision);
        }
        let decision = self.reviewer.review(request).await?;
        let ttl = if decision.allowed {
            self.ttl.allowed
        } else {
            self.ttl.denied
        };
        if !ttl.is_zero() {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            if cache.len() >= MAX_CACHED {
                let now = Instant::now();
                cache.retain(|_, (_, expires)| *expires > now);
                if cache.len() >= MAX_CACHED {
                    cache.clear();
                }
            }
            cache.insert(request.clone(), (decision.clone(), Instant::now() + ttl));
        }
        Ok(decision)
    }

    fn cached(&self, request: &AccessRequest, now: Instant) -> Option<Decision> {
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .get(request)
            .filter(|(_, expires)| *expires > now)
            .map(|(decision, _)| decision.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counting {
        calls: AtomicUsize,
        allow: bool,
        fail: bool,
    }

    #[async_trait]
    impl AccessReviewer for Counting {
        async fn review(&self, request: &AccessRequest) -> Result<Decision, AuthzError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            if self.fail {
                return Err(AuthzError {
                    user: request.user.name.clone(),
                    source: kube::Error::Service(Box::new(std::io::Error::other("unreachable"))),
                });
            }
            Ok(Decision {
                allowed: self.allow,
                reason: String::new(),
            })
        }
    }

    fn request(user: &str) -> AccessRequest {
        AccessRequest {
            user: UserInfo {
                name: user.into(),
                groups: vec!["system:authenticated".into()],
                extra: BTreeMap::new(),
            },
            namespace: "apps".into(),
            metric: "s0-redis-jobs".into(),
        }
    }

    fn reviewer(allow: bool, fail: bool) -> Arc<Counting> {
        Arc::new(Counting {
            calls: AtomicUsize::new(0),
            allow,
            fail,
        })
    }

    #[tokio::test(start_paused = true)]
    async fn decisions_are_reused_until_their_ttl_expires() {
        let counting = reviewer(false, false);
        let authz = CachedAuthorizer::new(
            counting.clone(),
            CacheTtl {
                allowed: Duration::from_secs(10),
                denied: Duration::from_secs(5),
            },
        );
        assert!(
            !authz
                .authorize(&request("bob"))
                .await
                .expect("decision")
                .allowed
        );
        assert!(
            !authz
                .authorize(&request("bob"))
                .await
                .expect("decision")
                .allowed
        );
        assert_eq!(counting.calls.load(Ordering::SeqCst), 1);
        // Another user is another question.
        authz.authorize(&request("alice")).await.expect("decision");
        assert_eq!(counting.calls.load(Ordering::SeqCst), 2);
        tokio::time::advance(Duration::from_secs(6)).await;
        authz.authorize(&request("bob")).await.expect("decision");
        assert_eq!(counting.calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn failures_are_not_cached() {
        let counting = reviewer(true, true);
        let authz = CachedAuthorizer::new(counting.clone(), CacheTtl::default());
        assert!(authz.authorize(&request("bob")).await.is_err());
        assert!(authz.authorize(&request("bob")).await.is_err());
        assert_eq!(counting.calls.load(Ordering::SeqCst), 2);
    }

    /// Allows what `allows` allows, and records every request it was asked.
    struct Policy {
        allows: fn(&AccessRequest) -> bool,
        asked: Mutex<Vec<(String, String)>>,
    }

    #[async_trait]
    impl AccessReviewer for Policy {
        async fn review(&self, request: &AccessRequest) -> Result<Decision, AuthzError> {
            self.asked
                .lock()
                .expect("lock")
                .push((request.namespace.clone(), request.metric.clone()));
            Ok(Decision {
                allowed: (self.allows)(request),
                reason: format!("asked about {}", request.metric),
            })
        }
    }

    fn policy(allows: fn(&AccessRequest) -> bool) -> Arc<Policy> {
        Arc::new(Policy {
            allows,
            asked: Mutex::new(Vec::new()),
        })
    }

    fn read(namespace: &str, metric: &str) -> AccessRequest {
        AccessRequest {
            namespace: namespace.into(),
            metric: metric.into(),
            ..request("system:serviceaccount:kube-system:horizontal-pod-autoscaler")
        }
    }

    /// Whether `authz` allows the HPA's read of `metric` in `namespace`.
    async fn allows(authz: &CachedAuthorizer, namespace: &str, metric: &str) -> bool {
        authz
            .authorize(&read(namespace, metric))
            .await
            .expect("decision")
            .allowed
    }

    fn asked(policy: &Policy) -> Vec<(String, String)> {
        policy.asked.lock().expect("lock").clone()
    }

    fn pair(namespace: &str, metric: &str) -> (String, String) {
        (namespace.to_string(), metric.to_string())
    }

    #[tokio::test(start_paused = true)]
    async fn a_namespace_wide_grant_answers_every_metric_of_the_namespace_with_one_review() {
        let policy = policy(|r| r.metric == "*");
        let authz = CachedAuthorizer::new(policy.clone(), CacheTtl::default()).namespace_wide(true);
        for metric in ["s0-redis-a", "s0-redis-b", "s1-cron-c"] {
            assert!(allows(&authz, "apps", metric).await, "{metric}");
        }
        assert!(allows(&authz, "web", "s0-redis-a").await);
        assert_eq!(asked(&policy), vec![pair("apps", "*"), pair("web", "*")]);
        // The grant is asked again once its decision expires.
        tokio::time::advance(Duration::from_secs(11)).await;
        assert!(allows(&authz, "apps", "s0-redis-a").await);
        assert_eq!(asked(&policy).len(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_namespace_wide_grant_each_metric_is_asked_about() {
        let policy = policy(|r| r.metric == "s0-redis-a");
        let authz = CachedAuthorizer::new(policy.clone(), CacheTtl::default()).namespace_wide(true);
        assert!(allows(&authz, "apps", "s0-redis-a").await);
        let denied = authz
            .authorize(&read("apps", "s0-redis-b"))
            .await
            .expect("decision");
        assert!(!denied.allowed);
        // The refusal is the metric's own, not the namespace-wide question's.
        assert_eq!(denied.reason, "asked about s0-redis-b");
        assert_eq!(
            asked(&policy),
            vec![
                pair("apps", "*"),
                pair("apps", "s0-redis-a"),
                pair("apps", "s0-redis-b")
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn switched_off_only_the_metric_is_asked_about() {
        let policy = policy(|r| r.metric == "*");
        let authz =
            CachedAuthorizer::new(policy.clone(), CacheTtl::default()).namespace_wide(false);
        assert!(!allows(&authz, "apps", "s0-redis-a").await);
        assert_eq!(asked(&policy), vec![pair("apps", "s0-redis-a")]);
    }

    #[test]
    fn the_review_asks_for_list_on_the_metric_in_the_namespace() {
        let review = subject_access_review(&request("bob"));
        let attrs = review
            .spec
            .resource_attributes
            .expect("resource attributes");
        assert_eq!(review.spec.user.as_deref(), Some("bob"));
        assert_eq!(attrs.verb.as_deref(), Some("list"));
        assert_eq!(attrs.group.as_deref(), Some("external.metrics.k8s.io"));
        assert_eq!(attrs.resource.as_deref(), Some("s0-redis-jobs"));
        assert_eq!(attrs.namespace.as_deref(), Some("apps"));
    }
}
