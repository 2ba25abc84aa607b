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

/// A reviewer in front of which decisions are cached for their TTL. Failures are never cached.
pub struct CachedAuthorizer {
    reviewer: Arc<dyn AccessReviewer>,
    ttl: CacheTtl,
    cache: Mutex<HashMap<AccessRequest, (Decision, Instant)>>,
}

impl std::fmt::Debug for CachedAuthorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedAuthorizer")
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl CachedAuthorizer {
    /// Caches the decisions of `reviewer` for `ttl`.
    pub fn new(reviewer: Arc<dyn AccessReviewer>, ttl: CacheTtl) -> Self {
        Self {
            reviewer,
            ttl,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The decision for `request`, from the cache while it is fresh.
    ///
    /// # Errors
    /// [`AuthzError`] from the reviewer.
    pub async fn authorize(&self, request: &AccessRequest) -> Result<Decision, AuthzError> {
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
