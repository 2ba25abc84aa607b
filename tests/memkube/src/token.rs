//! `serviceaccounts/{name}/token`: the TokenRequest subresource (`authentication.k8s.io/v1`).
//!
//! As on a real API server: `POST` only, the ServiceAccount must exist (else `404 NotFound`),
//! `spec.expirationSeconds` defaults to 3600 and must be at least 600, and the answer is the
//! request with `status.token` and `status.expirationTimestamp` filled in (`201 Created`).
//! The token has a JWT's shape, with the claims of a Kubernetes service account token (`iss`,
//! `sub`, `aud`, `exp`, `iat`, `nbf`, `kubernetes.io.namespace`,
//! `kubernetes.io.serviceaccount.{name,uid}`), but its signature is not one: programs that read
//! the claims unverified and ask the API server (a TokenReview) to vouch for the token, as
//! Vault's and OpenBao's `kubernetes` auth methods do, accept it. memkube's TokenReviews
//! authenticate the tokens it issued. Every issued token is recorded for tests
//! ([`crate::MemKube::issued_tokens`]).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use crate::error::ApiError;

/// The real API server's default `expirationSeconds`.
const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// The real API server's smallest `expirationSeconds`.
const MIN_EXPIRATION_SECONDS: i64 = 600;

/// The issuer of memkube's tokens, and their audience when none is asked for.
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// A token issued through `serviceaccounts/{name}/token`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IssuedToken {
    /// The ServiceAccount's namespace.
    pub namespace: String,
    /// The ServiceAccount's name.
    pub service_account: String,
    /// The ServiceAccount's uid.
    pub uid: String,
    /// `spec.expirationSeconds` as granted.
    pub expiration_seconds: i64,
    /// `spec.audiences` as requested.
    pub audiences: Vec<String>,
    /// The token.
    pub token: String,
}

/// Answers one TokenRequest for the existing ServiceAccount `namespace/name` (uid `uid`);
/// `sequence` makes the token unique.
pub(crate) fn issue(
    namespace: &str,
    name: &str,
    uid: &str,
    body: Value,
    sequence: usize,
) -> Result<(Value, IssuedToken), ApiError> {
    let spec = body.get("spec").cloned().unwrap_or_else(|| json!({}));
    let expiration_seconds = match spec.get("expirationSeconds") {
        None | Some(Value::Null) => DEFAULT_EXPIRATION_SECONDS,
        Some(v) => v.as_i64().ok_or_else(|| {
            ApiError::bad_request("spec.expirationSeconds: must be an integer".to_string())
        })?,
    };
    if expiration_seconds < MIN_EXPIRATION_SECONDS {
        return Err(ApiError::invalid(
            "authentication.k8s.io",
            "tokenrequests",
            name,
            format!(
                "TokenRequest.authentication.k8s.io \"{name}\" is invalid: spec.expirationSeconds: Invalid value: {expiration_seconds}: may not specify a duration less than 10 minutes"
            ),
        ));
    }
    let audiences: Vec<String> = spec
        .get("audiences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let now = jiff::Timestamp::now();
    let expires = now
        .checked_add(jiff::SignedDuration::from_secs(expiration_seconds))
        .map_err(|e| ApiError::bad_request(format!("spec.expirationSeconds: {e}")))?;
    let audience = if audiences.is_empty() {
        vec![ISSUER.to_string()]
    } else {
        audiences.clone()
    };
    let header = json!({"alg": "RS256", "kid": "memkube", "typ": "JWT"});
    let claims = json!({
        "iss": ISSUER,
        "sub": format!("system:serviceaccount:{namespace}:{name}"),
        "aud": audience,
        "iat": now.as_second(),
        "nbf": now.as_second(),
        "exp": expires.as_second(),
        "jti": format!("memkube-{sequence}"),
        "kubernetes.io": {
            "namespace": namespace,
            "serviceaccount": {"name": name, "uid": uid},
        },
    });
    let token = format!(
        "{}.{}.{}",
        base64url(header.to_string().as_bytes()),
        base64url(claims.to_string().as_bytes()),
        base64url(format!("memkube-unsigned-{sequence}").as_bytes()),
    );
    let expires = expires.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let mut spec = spec;
    if let Some(map) = spec.as_object_mut() {
        map.insert("expirationSeconds".into(), json!(expiration_seconds));
        map.insert("audiences".into(), json!(audiences));
    }
    let reply = json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
        "status": {"token": token, "expirationTimestamp": expires},
    });
    Ok((
        reply,
        IssuedToken {
            namespace: namespace.to_string(),
            service_account: name.to_string(),
            uid: uid.to_string(),
            expiration_seconds,
            audiences,
            token,
        },
    ))
}

/// The TokenReview answer for `token` if memkube issued it (and it has not expired), as the
/// real API server authenticates the tokens it issued: the service account's user name, uid
/// and groups, and the token's audiences. `None` for any other token.
pub(crate) fn review(issued: &[IssuedToken], token: &str, audiences: &[String]) -> Option<Value> {
    let found = issued.iter().find(|t| t.token == token)?;
    let token_audiences = if found.audiences.is_empty() {
        vec![ISSUER.to_string()]
    } else {
        found.audiences.clone()
    };
    if !audiences.is_empty() && !audiences.iter().any(|a| token_audiences.contains(a)) {
        return Some(json!({
            "authenticated": false,
            "error": "[invalid bearer token, token audiences is invalid for the target audiences]",
        }));
    }
    Some(json!({
        "authenticated": true,
        "user": {
            "username": format!("system:serviceaccount:{}:{}", found.namespace, found.service_account),
            "uid": found.uid,
            "groups": [
                "system:serviceaccounts",
                format!("system:serviceaccounts:{}", found.namespace),
                "system:authenticated",
            ],
        },
        "audiences": if audiences.is_empty() { token_audiences } else { audiences.to_vec() },
    }))
}

/// Unpadded base64url (RFC 4648 section 5), as JWTs use it.
fn base64url(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64url_is_unpadded_and_url_safe() {
        assert_eq!(base64url(b""), "");
        assert_eq!(base64url(b"f"), "Zg");
        assert_eq!(base64url(b"fo"), "Zm8");
        assert_eq!(base64url(b"foo"), "Zm9v");
        assert_eq!(base64url(b"foob"), "Zm9vYg");
        assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
    }
}
