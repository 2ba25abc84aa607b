//! GitHub App authentication as KEDA gets it from `ghinstallation`: a JWT (RS256, signed with
//! the App's private key, `iss` the application id, issued 30 s in the past, valid 2 minutes)
//! sent as `Authorization: Bearer` to `POST <githubApiURL>/app/installations/<id>/access_tokens`,
//! whose answer's `token` then goes with every request as `Authorization: token <token>` until
//! a minute before its `expires_at`.

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::{RSA_PKCS1_SHA256, RsaKeyPair};

use crate::secret::Secret;

/// An App's ids and private key.
#[derive(Clone)]
pub struct AppCredentials {
    /// `applicationID`: the JWT's issuer.
    pub application_id: i64,
    /// `installationID`: whose token is asked.
    pub installation_id: i64,
    key: Arc<RsaKeyPair>,
}

impl std::fmt::Debug for AppCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppCredentials")
            .field("application_id", &self.application_id)
            .field("installation_id", &self.installation_id)
            .finish_non_exhaustive()
    }
}

impl AppCredentials {
    /// The App of `application_id` and `installation_id` with the PEM private key `key`
    /// (`RSA PRIVATE KEY`, as GitHub hands it out, or `PRIVATE KEY`, PKCS #8).
    ///
    /// # Errors
    /// `key` is not a PEM RSA private key that can sign (the message never shows it).
    pub fn new(application_id: i64, installation_id: i64, key: &Secret) -> Result<Self, String> {
        let pem = pem::parse(key.expose().trim().as_bytes())
            .map_err(|_| "is not a PEM private key".to_string())?;
        let pair = match pem.tag() {
            "RSA PRIVATE KEY" => RsaKeyPair::from_der(pem.contents()),
            "PRIVATE KEY" => RsaKeyPair::from_pkcs8(pem.contents()),
            _ => {
                return Err(
                    "is not an RSA private key (a PEM \"RSA PRIVATE KEY\" or \"PRIVATE KEY\")"
                        .to_string(),
                );
            }
        }
        .map_err(|e| format!("is not a usable RSA private key ({e})"))?;
        Ok(Self {
            application_id,
            installation_id,
            key: Arc::new(pair),
        })
    }

    /// The App's JWT at `now`.
    ///
    /// # Errors
    /// Signing failed.
    pub fn jwt(&self, now: jiff::Timestamp) -> Result<String, String> {
        let issued = now.as_second().saturating_sub(30);
        let expires = issued.saturating_add(120);
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"RS256","typ":"JWT"}"#);
        let claims = serde_json::json!({
            "iss": self.application_id.to_string(),
            "exp": expires,
            "iat": issued,
        });
        let claims = URL_SAFE_NO_PAD.encode(claims.to_string());
        let signing_input = format!("{header}.{claims}");
        let mut signature = vec![0; self.key.public().modulus_len()];
        self.key
            .sign(
                &RSA_PKCS1_SHA256,
                &ring::rand::SystemRandom::new(),
                signing_input.as_bytes(),
                &mut signature,
            )
            .map_err(|_| "signing the GitHub App JWT failed".to_string())?;
        Ok(format!(
            "{signing_input}.{}",
            URL_SAFE_NO_PAD.encode(signature)
        ))
    }
}

/// The `token` and `expires_at` of an installation access token answer (`201 {"token":
/// "ghs_...", "expires_at": "2016-07-11T22:14:10Z", ...}`).
///
/// # Errors
/// Not the documented shape. Messages never quote the answer.
pub fn installation_token(body: &[u8]) -> Result<(Secret, jiff::Timestamp), String> {
    #[derive(serde::Deserialize)]
    struct Answer {
        token: String,
        expires_at: String,
    }
    let answer: Answer = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the GitHub answer is not an installation token: {}",
            crate::remote::json_error(&e)
        )
    })?;
    if answer.token.is_empty() {
        return Err("the GitHub installation token is empty".into());
    }
    let expires: jiff::Timestamp = answer
        .expires_at
        .parse()
        .map_err(|_| "the installation token's expires_at is not an RFC 3339 time".to_string())?;
    Ok((Secret::new(answer.token), expires))
}
