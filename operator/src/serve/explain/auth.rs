//! Who may read an object's explanation: the bearer of a token the API server accepts
//! (`TokenReview`) for a user allowed to `get` that object (`SubjectAccessReview`), the pattern
//! of kube-rbac-proxy and controller-runtime's secure metrics. The explanation shows no more
//! than the object, its status and its Events do, so `get` on the object is the permission.
//!
//! The port is reachable by anyone who can reach the pod, so each request's cost to the API
//! server is bounded ([`KubeAuthorizer`]):
//! - answers are remembered ([`super::review_cache`]), keyed by a SHA-256 digest of the token
//!   (never the token): an accepted token for [`USER_TTL`], a refused one for
//!   [`REJECTED_TTL`], an access decision for [`ALLOWED_TTL`] or [`DENIED_TTL`]; a repeated
//!   made-up token is refused from memory;
//! - what is not remembered spends the review budget ([`ReviewBudget`], one token per review)
//!   on a client of the endpoint's own. An empty budget refuses at once with
//!   [`Refusal::Busy`] (`429 Too Many Requests` and `Retry-After`) instead of queueing: a flood
//!   costs the API server at most the budget, and never the controllers' or the Lease's
//!   budget, which are other clients.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};
use tracing::debug;

use super::review_cache::{Digest, TtlCache, digest};
use crate::process::config::TokenBucket;

/// How long an accepted token is remembered: a revoked token still reads explanations this
/// long (the API server's own token cache keeps one for 2 minutes by default).
pub const USER_TTL: Duration = Duration::from_secs(60);
/// How long a refused token is remembered.
pub const REJECTED_TTL: Duration = Duration::from_secs(10);
/// How long an allowed `get` is remembered.
pub const ALLOWED_TTL: Duration = Duration::from_secs(60);
/// How long a denied `get` is remembered.
pub const DENIED_TTL: Duration = Duration::from_secs(10);
/// Accepted tokens remembered at most.
pub const MAX_USERS: usize = 1024;
/// Refused tokens remembered at most (apart from the accepted ones, so a flood of made-up
/// tokens never pushes a real user out).
pub const MAX_REJECTED: usize = 4096;
/// Access decisions remembered at most.
pub const MAX_DECISIONS: usize = 4096;

/// The review budget's defaults (`--explain-kube-api-qps`, `--explain-kube-api-burst`).
pub const DEFAULT_REVIEW_QPS: f32 = 5.0;
/// See [`DEFAULT_REVIEW_QPS`].
pub const DEFAULT_REVIEW_BURST: u32 = 10;

/// The object a request wants to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access<'a> {
    /// `scaledobjects` or `scaledjobs`.
    pub resource: &'a str,
    /// Its namespace.
    pub namespace: &'a str,
    /// Its name.
    pub name: &'a str,
}

/// Why a request is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No token, or one the API server does not accept: 401.
    #[error("unauthenticated: {0}")]
    Unauthenticated(String),
    /// The user may not `get` the object: 403.
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// The API server could not be asked: 503.
    #[error("cannot check the caller: {0}")]
    Unavailable(String),
    /// The review budget is spent: 429 with `Retry-After`.
    #[error(
        "too many explain requests to check: try again in {}s",
        retry_after_seconds(*retry_after)
    )]
    Busy {
        /// When the budget has room again.
        retry_after: Duration,
    },
}

/// Whole seconds for `Retry-After`: rounded up, at least 1.
pub fn retry_after_seconds(wait: Duration) -> u64 {
    let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    seconds.max(1)
}

/// Decides whether the bearer of `token` may read `access`.
#[async_trait]
pub trait Authorizer: Send + Sync {
    /// `Ok` when allowed.
    ///
    /// # Errors
    /// The [`Refusal`] to answer with.
    async fn authorize(&self, token: &str, access: Access<'_>) -> Result<(), Refusal>;
}

/// How many reviews the endpoint may send: `qps` per second, `burst` at once.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReviewBudget {
    /// Reviews per second (positive).
    pub qps: f32,
    /// Reviews at once.
    pub burst: u32,
}

impl Default for ReviewBudget {
    fn default() -> Self {
        ReviewBudget {
            qps: DEFAULT_REVIEW_QPS,
            burst: DEFAULT_REVIEW_BURST,
        }
    }
}

/// What the API server said, remembered.
#[derive(Debug)]
struct Memory {
    users: TtlCache<UserInfo>,
    rejected: TtlCache<()>,
    decisions: TtlCache<bool>,
}

/// [`Authorizer`] through the API server: a `TokenReview` of the token, then a
/// `SubjectAccessReview` of `get` on the object for the user it names, both remembered and
/// both within the [`ReviewBudget`].
pub struct KubeAuthorizer {
    client: Client,
    /// `None` only if even the default QPS made no bucket: then every review is refused.
    budget: Option<TokenBucket>,
    memory: Mutex<Memory>,
}

impl std::fmt::Debug for KubeAuthorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeAuthorizer")
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

/// The message of a token the API server does not accept. What the API server said about it
/// is not repeated to the caller (it goes to the debug log).
const NOT_ACCEPTED: &str = "the API server does not accept the bearer token";

impl KubeAuthorizer {
    /// Reviews through `client` within the default [`ReviewBudget`]. `client` should be the
    /// endpoint's own (the operator's service account needs `create` on `tokenreviews` and
    /// `subjectaccessreviews`: `config/rbac/operator.yaml`).
    pub fn new(client: Client) -> Self {
        Self::with_budget(client, ReviewBudget::default())
    }

    /// Reviews through `client` within `budget`. Every request `client` sends for this
    /// authorizer is admitted by the budget first, so the client needs no limiter of its own;
    /// a non-positive `qps` counts as the default.
    pub fn with_budget(client: Client, budget: ReviewBudget) -> Self {
        KubeAuthorizer {
            client,
            budget: TokenBucket::new(budget.qps, budget.burst)
                .or_else(|| TokenBucket::new(DEFAULT_REVIEW_QPS, budget.burst)),
            memory: Mutex::new(Memory {
                users: TtlCache::new(MAX_USERS),
                rejected: TtlCache::new(MAX_REJECTED),
                decisions: TtlCache::new(MAX_DECISIONS),
            }),
        }
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, Memory> {
        self.memory.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One review's worth of the budget, or [`Refusal::Busy`].
    fn spend(&self) -> Result<(), Refusal> {
        let Some(budget) = &self.budget else {
            return Err(Refusal::Busy {
                retry_after: Duration::from_secs(1),
            });
        };
        budget
            .try_take()
            .map_err(|retry_after| Refusal::Busy { retry_after })
    }

    /// The user `token` belongs to: remembered, or from a `TokenReview`.
    async fn user(&self, key: &Digest, token: &str) -> Result<UserInfo, Refusal> {
        {
            let mut memory = self.memory();
            if let Some(user) = memory.users.get(key) {
                return Ok(user);
            }
            if memory.rejected.get(key).is_some() {
                return Err(Refusal::Unauthenticated(NOT_ACCEPTED.to_string()));
            }
        }
        self.spend()?;
        let reviews: Api<TokenReview> = Api::all(self.client.clone());
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                ..TokenReviewSpec::default()
            },
            ..TokenReview::default()
        };
        let reviewed = reviews
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| {
                debug!(error = %e, "explain: the TokenReview failed");
                Refusal::Unavailable("the API server did not answer the TokenReview".to_string())
            })?;
        let status = reviewed.status.unwrap_or_default();
        match status.user.filter(|_| status.authenticated == Some(true)) {
            Some(user) => {
                self.memory().users.insert(*key, user.clone(), USER_TTL);
                Ok(user)
            }
            None => {
                debug!(error = ?status.error, "explain: the API server does not accept a token");
                self.memory().rejected.insert(*key, (), REJECTED_TTL);
                Err(Refusal::Unauthenticated(NOT_ACCEPTED.to_string()))
            }
        }
    }

    /// Whether `user` may `get` `access`: remembered, or from a `SubjectAccessReview`.
    async fn allowed(
        &self,
        key: &Digest,
        user: UserInfo,
        access: Access<'_>,
    ) -> Result<bool, Refusal> {
        let decision_key = digest(&[
            key,
            access.resource.as_bytes(),
            access.namespace.as_bytes(),
            access.name.as_bytes(),
        ]);
        if let Some(allowed) = self.memory().decisions.get(&decision_key) {
            return Ok(allowed);
        }
        self.spend()?;
        let sars: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let sar = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                groups: user.groups,
                uid: user.uid,
                extra: user.extra,
                resource_attributes: Some(ResourceAttributes {
                    group: Some("keda.sh".to_string()),
                    resource: Some(access.resource.to_string()),
                    verb: Some("get".to_string()),
                    namespace: Some(access.namespace.to_string()),
                    name: Some(access.name.to_string()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let decided = sars
            .create(&PostParams::default(), &sar)
            .await
            .map_err(|e| {
                debug!(error = %e, "explain: the SubjectAccessReview failed");
                Refusal::Unavailable(
                    "the API server did not answer the SubjectAccessReview".to_string(),
                )
            })?;
        let allowed = decided.status.is_some_and(|s| s.allowed);
        let ttl = if allowed { ALLOWED_TTL } else { DENIED_TTL };
        self.memory().decisions.insert(decision_key, allowed, ttl);
        Ok(allowed)
    }
}

#[async_trait]
impl Authorizer for KubeAuthorizer {
    async fn authorize(&self, token: &str, access: Access<'_>) -> Result<(), Refusal> {
        let key = digest(&[token.as_bytes()]);
        let user = self.user(&key, token).await?;
        let username = user.username.clone().unwrap_or_default();
        if self.allowed(&key, user, access).await? {
            Ok(())
        } else {
            Err(Refusal::Forbidden(format!(
                "user {username:?} cannot get {}.keda.sh {}/{}",
                access.resource, access.namespace, access.name
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::authentication::v1::TokenReviewStatus;
    use memkube::{MemKube, Verb};

    const OBJECT: Access<'static> = Access {
        resource: "scaledobjects",
        namespace: "team",
        name: "orders",
    };

    /// memkube accepting `alice-token` only.
    fn server() -> MemKube {
        let server = MemKube::new();
        server.set_token_policy(|spec| match spec.token.as_deref() {
            Some("alice-token") => TokenReviewStatus {
                authenticated: Some(true),
                user: Some(UserInfo {
                    username: Some("alice".to_string()),
                    ..UserInfo::default()
                }),
                ..TokenReviewStatus::default()
            },
            _ => TokenReviewStatus {
                authenticated: Some(false),
                error: Some("memkube: unknown token (a remote server's words)".to_string()),
                ..TokenReviewStatus::default()
            },
        });
        server
    }

    fn reviews(server: &MemKube) -> (u64, u64) {
        let counts = server.request_counts();
        (
            counts.get(Verb::Create, "tokenreviews"),
            counts.get(Verb::Create, "subjectaccessreviews"),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn a_repeated_made_up_token_is_reviewed_once_until_its_refusal_expires() {
        let server = server();
        let authorizer = KubeAuthorizer::new(server.client());
        for _ in 0..100 {
            assert_eq!(
                authorizer.authorize("made-up", OBJECT).await,
                Err(Refusal::Unauthenticated(NOT_ACCEPTED.to_string())),
                "refused, without the API server's words"
            );
        }
        assert_eq!(reviews(&server), (1, 0));
        tokio::time::advance(REJECTED_TTL).await;
        assert!(authorizer.authorize("made-up", OBJECT).await.is_err());
        assert_eq!(reviews(&server), (2, 0), "reviewed again once forgotten");
    }

    #[tokio::test(start_paused = true)]
    async fn past_the_budget_unknown_tokens_are_refused_busy_without_a_review() {
        let server = server();
        let authorizer =
            KubeAuthorizer::with_budget(server.client(), ReviewBudget { qps: 2.0, burst: 3 });
        let mut busy = 0;
        for n in 0..500 {
            match authorizer.authorize(&format!("made-up-{n}"), OBJECT).await {
                Err(Refusal::Unauthenticated(_)) => {}
                Err(Refusal::Busy { retry_after }) => {
                    assert!(retry_after <= Duration::from_millis(500), "{retry_after:?}");
                    busy += 1;
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(reviews(&server), (3, 0), "the burst, and not one more");
        assert_eq!(busy, 497);
        // The budget refills at its rate; a token refused before is refused from memory.
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(matches!(
            authorizer.authorize("made-up-0", OBJECT).await,
            Err(Refusal::Unauthenticated(_))
        ));
        for n in 500..510 {
            let _ = authorizer.authorize(&format!("made-up-{n}"), OBJECT).await;
        }
        assert_eq!(
            reviews(&server),
            (5, 0),
            "two more after a second at 2 per second"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_accepted_user_and_the_access_decision_are_remembered() {
        let server = server();
        server.set_access_policy(|spec| {
            k8s_openapi::api::authorization::v1::SubjectAccessReviewStatus {
                allowed: spec.user.as_deref() == Some("alice")
                    && spec
                        .resource_attributes
                        .as_ref()
                        .and_then(|a| a.name.as_deref())
                        == Some("orders"),
                ..Default::default()
            }
        });
        let authorizer = KubeAuthorizer::new(server.client());
        for _ in 0..50 {
            assert_eq!(authorizer.authorize("alice-token", OBJECT).await, Ok(()));
        }
        assert_eq!(reviews(&server), (1, 1));
        let other = Access {
            name: "payments",
            ..OBJECT
        };
        for _ in 0..50 {
            assert!(matches!(
                authorizer.authorize("alice-token", other).await,
                Err(Refusal::Forbidden(_))
            ));
        }
        assert_eq!(
            reviews(&server),
            (1, 2),
            "one more decision, the user remembered"
        );
        tokio::time::advance(ALLOWED_TTL).await;
        assert_eq!(authorizer.authorize("alice-token", OBJECT).await, Ok(()));
        assert_eq!(reviews(&server), (2, 3), "both asked again once forgotten");
    }

    #[test]
    fn retry_after_is_whole_seconds_rounded_up_and_at_least_one() {
        for (wait, seconds) in [(0, 1), (1, 1), (200, 1), (1000, 1), (1001, 2), (2500, 3)] {
            assert_eq!(
                retry_after_seconds(Duration::from_millis(wait)),
                seconds,
                "{wait} ms"
            );
        }
    }
}
