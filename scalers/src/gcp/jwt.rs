//! The assertion of the JWT bearer grant (RFC 7523) as Go's `golang.org/x/oauth2/jwt` and
//! `jws` make it for a service account: header `{"alg":"RS256","typ":"JWT","kid":<key id>}`,
//! claims `iss` (the service account's email), `scope` (space-separated), `aud` (the token
//! URI), `iat` (now - 10 s, for clock skew) and `exp` (`iat` + 1 h); signed with
//! RSASSA-PKCS1-v1_5 SHA-256 (RFC 7518 3.3) by `ring`; each part base64url without padding.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// The claims of one assertion.
pub struct Claims<'a> {
    /// `kid` of the header (`private_key_id`; left out when empty).
    pub key_id: &'a str,
    /// `iss`: the service account's `client_email`.
    pub issuer: &'a str,
    /// `scope`: the scopes, space-separated.
    pub scope: &'a str,
    /// `aud`: the token URI.
    pub audience: &'a str,
    /// The time, Unix seconds.
    pub now: i64,
}

/// Go's `jws` backdates `iat` by this, for servers whose clocks run behind.
pub const IAT_SKEW_SECONDS: i64 = 10;
/// The assertion's lifetime (Go's `jws` default).
pub const LIFETIME_SECONDS: i64 = 3600;

/// `<header>.<claims>.<signature>`, signed with `key`.
///
/// # Errors
/// The key could not sign (ring's failure, no key material).
pub fn assertion(key: &ring::signature::RsaKeyPair, claims: &Claims<'_>) -> Result<String, String> {
    let mut header = serde_json::json!({"alg": "RS256", "typ": "JWT"});
    if !claims.key_id.is_empty() {
        header["kid"] = serde_json::Value::from(claims.key_id);
    }
    let iat = claims.now.saturating_sub(IAT_SKEW_SECONDS);
    let body = serde_json::json!({
        "iss": claims.issuer,
        "scope": claims.scope,
        "aud": claims.audience,
        "exp": iat.saturating_add(LIFETIME_SECONDS),
        "iat": iat,
    });
    let signing_input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(body.to_string())
    );
    let mut signature = vec![0u8; key.public().modulus_len()];
    key.sign(
        &ring::signature::RSA_PKCS1_SHA256,
        &ring::rand::SystemRandom::new(),
        signing_input.as_bytes(),
        &mut signature,
    )
    .map_err(|_| "signing the token request with the service account key failed".to_string())?;
    Ok(format!(
        "{signing_input}.{}",
        URL_SAFE_NO_PAD.encode(signature)
    ))
}
