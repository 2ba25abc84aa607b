//! Who may read an object's explanation: the bearer of a token the API server accepts
//! (`TokenReview`) for a user allowed to `get` that object (`SubjectAccessReview`), the pattern
//! of kube-rbac-proxy and controller-runtime's secure metrics. The explanation shows no more
//! than the object, its status and its Events do, so `get` on the object is the permission.

use async_trait::async_trait;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};

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

/// [`Authorizer`] through the API server: a `TokenReview` of the token, then a
/// `SubjectAccessReview` of `get` on the object for the user it names.
#[derive(Clone)]
pub struct KubeAuthorizer {
    client: Client,
}

impl KubeAuthorizer {
    /// Reviews through `client` (the operator's service account needs `create` on
    /// `tokenreviews` and `subjectaccessreviews`: `config/rbac/operator.yaml`).
    pub fn new(client: Client) -> Self {
        KubeAuthorizer { client }
    }
}

#[async_trait]
impl Authorizer for KubeAuthorizer {
    async fn authorize(&self, token: &str, access: Access<'_>) -> Result<(), Refusal> {
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
            .map_err(|e| Refusal::Unavailable(format!("TokenReview failed: {e}")))?;
        let status = reviewed.status.unwrap_or_default();
        let user = status.user.filter(|_| status.authenticated == Some(true));
        let Some(user) = user else {
            return Err(Refusal::Unauthenticated(status.error.unwrap_or_else(
                || "the API server does not accept the token".to_string(),
            )));
        };
        let username = user.username.clone().unwrap_or_default();
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
            .map_err(|e| Refusal::Unavailable(format!("SubjectAccessReview failed: {e}")))?;
        let status = decided.status.unwrap_or_default();
        if status.allowed {
            Ok(())
        } else {
            Err(Refusal::Forbidden(format!(
                "user {username:?} cannot get {}.keda.sh {}/{}",
                access.resource, access.namespace, access.name
            )))
        }
    }
}
