//! `boundServiceAccountToken`: a token of a ServiceAccount, requested through the TokenRequest
//! API (`POST serviceaccounts/{name}/token`), as KEDA's `GenerateBoundServiceAccountToken` does.

use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Client;
use kube::api::{Api, PostParams};

use super::error::TokenProblem;

/// How long one TokenRequest may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The shortest time between two token refreshes of one object.
const MIN_REFRESH: Duration = Duration::from_secs(60);

/// A token and how long it may be used before the scalers holding it are rebuilt.
pub(super) struct BoundToken {
    /// The token.
    pub(super) value: String,
    /// Four fifths of the lifetime the API server granted.
    pub(super) refresh_after: Duration,
}

/// Requests a token of ServiceAccount `namespace/name` valid for `expiry`, for `audiences`
/// (none: the API server's own audience).
pub(super) async fn request(
    client: &Client,
    namespace: &str,
    name: &str,
    expiry: Duration,
    audiences: &[&str],
) -> Result<BoundToken, TokenProblem> {
    let account = || format!("{namespace}/{name}");
    if name.trim().is_empty() {
        return Err(TokenProblem::NoServiceAccountName);
    }
    let request = TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(i64::try_from(expiry.as_secs()).unwrap_or(i64::MAX)),
            audiences: audiences.iter().map(|a| a.to_string()).collect(),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let answer = tokio::time::timeout(
        REQUEST_TIMEOUT,
        api.create_token_request(name, &PostParams::default(), &request),
    )
    .await
    .map_err(|_| TokenProblem::Timeout {
        account: account(),
        waited: REQUEST_TIMEOUT,
    })?
    .map_err(|e| match e {
        kube::Error::Api(status) if status.code == 404 => {
            TokenProblem::NotFound { account: account() }
        }
        kube::Error::Api(status) if status.code == 403 => {
            TokenProblem::Forbidden { account: account() }
        }
        kube::Error::Api(status) => TokenProblem::Refused {
            account: account(),
            message: status.message,
        },
        other => TokenProblem::Request {
            account: account(),
            message: other.to_string(),
        },
    })?;
    let value = answer
        .status
        .map(|s| s.token)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| TokenProblem::Empty { account: account() })?;
    // The API server may grant less than asked (`--service-account-max-token-expiration`).
    let granted = answer
        .spec
        .expiration_seconds
        .and_then(|s| u64::try_from(s).ok())
        .map_or(expiry, Duration::from_secs)
        .min(expiry);
    Ok(BoundToken {
        value,
        // Never sooner than a minute, whatever was granted: no rebuild storm.
        refresh_after: (granted / 5 * 4).max(MIN_REFRESH),
    })
}
