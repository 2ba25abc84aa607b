//! OAuth 2.0 client credentials grant (RFC 6749 section 4.4) for the management API, as KEDA's
//! `rabbitmq` scaler does it with `golang.org/x/oauth2/clientcredentials`: the token is
//! requested from `oauthTokenURI` with `clientID` and `clientSecret`, cached, and requested
//! again shortly before it expires; every management API request carries it as
//! `Authorization: Bearer <token>`.
//!
//! What follows Go's library:
//! - the form: `grant_type=client_credentials`, `scope` (the scopes joined by spaces) when there
//!   are scopes, then `endpointParams` (`tokenUrlParams`), which may replace `grant_type` but
//!   not `scope`;
//! - the client authentication is probed as Go's `AuthStyleAutoDetect` does: first HTTP Basic
//!   (`client_id` and `client_secret` form-encoded), and when that request fails, the two in the
//!   form body; the style that worked is kept for later requests;
//! - the answer may be JSON or form-encoded (`application/x-www-form-urlencoded` or
//!   `text/plain`); `expires_in` absent or 0 means the token does not expire; a token is
//!   renewed when it has less than 10 s left (Go's `expiryDelta`);
//! - the header is `<token_type> <access_token>`, `bearer` (any case) or no type giving `Bearer`.
//!
//! One [`TokenSource`] per (token URL, client, scopes, parameters) is shared by every trigger
//! that uses it, so triggers of one client ask for one token. Concurrent callers wait for one
//! request. A token the broker refuses (401) is dropped, so the next poll asks for a new one.

use std::time::Duration;

use tokio::time::Instant;

use crate::secret::Secret;

/// A token is renewed when it expires within this (Go's `oauth2` `defaultExpiryDelta`).
pub const EXPIRY_DELTA: Duration = Duration::from_secs(10);
/// The most of a token endpoint's answer that is read (Go reads at most 1 MiB).
pub const MAX_TOKEN_RESPONSE: usize = 1 << 20;
/// How much of a refusal's body an error quotes.
const QUOTED_BODY: usize = 300;

/// What a token source is shared by: the client and what it asks for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OAuth2Settings {
    /// `oauthTokenURI`: the token endpoint, an http(s) URL.
    pub token_url: url::Url,
    /// `clientID`.
    pub client_id: String,
    /// `clientSecret`.
    pub client_secret: Secret,
    /// `scopes` (comma-separated in the parameter).
    pub scopes: Vec<String>,
    /// `endpointParams`: extra form fields of the token request, in order.
    pub endpoint_params: Vec<(String, Secret)>,
}

/// How the client authenticates to the token endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AuthStyle {
    /// Not known yet: try the header, then the form.
    Probe,
    /// HTTP Basic with the form-encoded id and secret.
    Header,
    /// `client_id` and `client_secret` in the form.
    Form,
}

/// An access token and when it expires.
#[derive(Clone, Debug)]
pub struct Token {
    /// The `Authorization` header value, `Bearer <access_token>`.
    header: Secret,
    /// `None`: does not expire.
    expires_at: Option<Instant>,
}

impl Token {
    /// The `Authorization` header value.
    pub fn header_value(&self) -> &str {
        self.header.expose()
    }

    /// Usable at `now`: it does not expire within [`EXPIRY_DELTA`] of `now`.
    pub fn fresh_at(&self, now: Instant) -> bool {
        self.expires_at
            .is_none_or(|at| now.checked_add(EXPIRY_DELTA).is_some_and(|soon| soon < at))
    }
}

/// Why no token could be had. Messages name the parameters to check and never contain the
/// client secret or a token.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The endpoint could not be reached or did not answer in time.
    #[error("OAuth2 token request to {url} (parameter \"oauthTokenURI\") failed: {reason}")]
    Request {
        /// The token URL without credentials or query.
        url: String,
        /// What happened.
        reason: String,
    },
    /// The endpoint refused the client.
    #[error(
        "OAuth2 token request to {url} was refused: {status}{body}; check parameters \"clientID\" and \"clientSecret\" (TriggerAuthentication spec.oauth2){scopes}"
    )]
    Refused {
        /// The token URL without credentials or query.
        url: String,
        /// The HTTP status.
        status: reqwest::StatusCode,
        /// `: <what it said>`, or empty.
        body: String,
        /// A hint on scopes, when some were asked for.
        scopes: String,
    },
    /// The endpoint answered 2xx, but not with a token.
    #[error(
        "OAuth2 token endpoint {url} (parameter \"oauthTokenURI\") gave no usable token: {reason}"
    )]
    Answer {
        /// The token URL without credentials or query.
        url: String,
        /// What was wrong.
        reason: String,
    },
}

/// Cached client credentials tokens of one [`OAuth2Settings`].
pub struct TokenSource {
    settings: OAuth2Settings,
    state: tokio::sync::Mutex<State>,
}

struct State {
    token: Option<Token>,
    style: AuthStyle,
}

impl TokenSource {
    /// A source without a token yet.
    pub fn new(settings: OAuth2Settings) -> Self {
        Self {
            settings,
            state: tokio::sync::Mutex::new(State {
                token: None,
                style: AuthStyle::Probe,
            }),
        }
    }

    /// The cached token while it is fresh, else a new one from the endpoint (asked with
    /// `client`). Concurrent callers wait for one request.
    ///
    /// # Errors
    /// The endpoint cannot be reached, refuses the client, or answers without a token.
    pub async fn token(&self, client: &reqwest::Client) -> Result<Token, TokenError> {
        // Held across the request so concurrent callers share one.
        let mut state = self.state.lock().await;
        if let Some(token) = state.token.as_ref().filter(|t| t.fresh_at(Instant::now())) {
            return Ok(token.clone());
        }
        state.token = None;
        let (token, style) = match state.style {
            AuthStyle::Probe => match self.request(client, AuthStyle::Header).await {
                Ok(token) => (token, AuthStyle::Header),
                // As Go: any failure of the header style tries the form style once.
                Err(_) => (
                    self.request(client, AuthStyle::Form).await?,
                    AuthStyle::Form,
                ),
            },
            style => (self.request(client, style).await?, style),
        };
        state.style = style;
        state.token = Some(token.clone());
        Ok(token)
    }

    /// Forgets `token` if it is the cached one (the broker refused it), so the next call asks
    /// for a new one.
    pub async fn refused(&self, token: &Token) {
        let mut state = self.state.lock().await;
        if state
            .token
            .as_ref()
            .is_some_and(|t| t.header.expose() == token.header.expose())
        {
            state.token = None;
        }
    }

    fn shown_url(&self) -> String {
        crate::http_client::describe_url(&self.settings.token_url)
    }

    async fn request(
        &self,
        client: &reqwest::Client,
        style: AuthStyle,
    ) -> Result<Token, TokenError> {
        let s = &self.settings;
        let body = form(s, style);
        let mut request = client
            .post(s.token_url.clone())
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header(reqwest::header::ACCEPT, "application/json")
            .body(body);
        if style == AuthStyle::Header {
            // RFC 6749 2.3.1: id and secret form-encoded before the Basic encoding (Go does it
            // with `url.QueryEscape`).
            request = request.basic_auth(
                form_encode(&s.client_id),
                Some(form_encode(s.client_secret.expose())),
            );
        }
        let secrets = [s.client_secret.expose()];
        let scrub = |text: &str| super::url::anonymize(text, &secrets);
        let sent_at = Instant::now();
        // Not counted in keda_scaler_http_*: KEDA's token requests go through Go's default
        // client, outside the scalers' metrics round tripper.
        let response = request.send().await.map_err(|e| TokenError::Request {
            url: self.shown_url(),
            reason: scrub(&crate::error::error_chain(&e.without_url())),
        })?;
        let status = response.status();
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        let bytes = read_capped(response)
            .await
            .map_err(|reason| TokenError::Request {
                url: self.shown_url(),
                reason: scrub(&reason),
            })?;
        let text = String::from_utf8_lossy(&bytes);
        if !status.is_success() {
            let quoted: String = text.trim().chars().take(QUOTED_BODY).collect();
            return Err(TokenError::Refused {
                url: self.shown_url(),
                status,
                body: if quoted.is_empty() {
                    String::new()
                } else {
                    format!(": {}", scrub(&quoted))
                },
                scopes: if s.scopes.is_empty() {
                    String::new()
                } else {
                    " and that the client may ask for \"scopes\"".to_string()
                },
            });
        }
        let answer = parse_answer(&text, &content_type).map_err(|reason| TokenError::Answer {
            url: self.shown_url(),
            reason,
        })?;
        Ok(answer.into_token(sent_at))
    }
}

/// The token request's form for `style`.
fn form(settings: &OAuth2Settings, style: AuthStyle) -> String {
    let mut fields: Vec<(String, String)> =
        vec![("grant_type".to_string(), "client_credentials".to_string())];
    if !settings.scopes.is_empty() {
        fields.push(("scope".to_string(), settings.scopes.join(" ")));
    }
    for (key, value) in &settings.endpoint_params {
        // Go lets `endpointParams` replace `grant_type` only; `scope` is refused when parsing.
        fields.retain(|(k, _)| k != key || k == "scope");
        fields.push((key.clone(), value.expose().to_string()));
    }
    if style == AuthStyle::Form {
        fields.push(("client_id".to_string(), settings.client_id.clone()));
        if !settings.client_secret.expose().is_empty() {
            fields.push((
                "client_secret".to_string(),
                settings.client_secret.expose().to_string(),
            ));
        }
    }
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields)
        .finish()
}

/// Go's `url.QueryEscape`.
fn form_encode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

async fn read_capped(mut response: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| crate::error::error_chain(&e.without_url()))?
    {
        let room = MAX_TOKEN_RESPONSE.saturating_sub(body.len());
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= MAX_TOKEN_RESPONSE {
            break;
        }
    }
    Ok(body)
}

/// A token endpoint's answer.
#[derive(Debug, PartialEq)]
pub struct TokenAnswer {
    /// `access_token`.
    pub access_token: Secret,
    /// `token_type`.
    pub token_type: String,
    /// `expires_in`, seconds; `None` or 0: no expiry.
    pub expires_in: Option<u64>,
}

impl TokenAnswer {
    /// The token, expiring `expires_in` after `sent_at` (when the request was sent: the
    /// endpoint counted from about then).
    pub fn into_token(self, sent_at: Instant) -> Token {
        // Go's `Token.Type()`.
        let kind = match self.token_type.to_ascii_lowercase().as_str() {
            "" | "bearer" => "Bearer".to_string(),
            "mac" => "MAC".to_string(),
            "basic" => "Basic".to_string(),
            _ => self.token_type,
        };
        Token {
            header: Secret::new(format!("{kind} {}", self.access_token.expose())),
            expires_at: self
                .expires_in
                .filter(|s| *s > 0)
                .and_then(|s| sent_at.checked_add(Duration::from_secs(s))),
        }
    }
}

/// Parses the body of a 2xx answer: form-encoded when the content type says so (as Go), JSON
/// otherwise.
///
/// # Errors
/// Not JSON (or form), or no `access_token`; the message never contains the body.
pub fn parse_answer(body: &str, content_type: &str) -> Result<TokenAnswer, String> {
    let media = content_type.split(';').next().unwrap_or("").trim();
    let (access_token, token_type, expires_in) =
        if media == "application/x-www-form-urlencoded" || media == "text/plain" {
            let mut access_token = None;
            let mut token_type = String::new();
            let mut expires_in = None;
            for (key, value) in url::form_urlencoded::parse(body.as_bytes()) {
                match key.as_ref() {
                    "access_token" => access_token = Some(value.into_owned()),
                    "token_type" => token_type = value.into_owned(),
                    // Go reads it as a number and ignores what is not one.
                    "expires_in" => expires_in = value.trim().parse::<u64>().ok(),
                    _ => {}
                }
            }
            (access_token, token_type, expires_in)
        } else {
            let value: serde_json::Value = serde_json::from_str(body).map_err(|e| {
                format!(
                    "the answer is not JSON (line {}, column {})",
                    e.line(),
                    e.column()
                )
            })?;
            let expires_in = match &value["expires_in"] {
                // A negative or fractional number is taken as no expiry; a token the broker
                // then refuses is dropped and asked for again.
                serde_json::Value::Number(n) => n.as_u64(),
                // Some servers send it as a string; Go accepts that too.
                serde_json::Value::String(s) => s.trim().parse::<u64>().ok(),
                _ => None,
            };
            (
                value["access_token"].as_str().map(str::to_string),
                value["token_type"].as_str().unwrap_or("").to_string(),
                expires_in,
            )
        };
    let access_token = access_token
        .filter(|t| !t.is_empty())
        .ok_or_else(|| "the answer has no access_token".to_string())?;
    Ok(TokenAnswer {
        access_token: Secret::new(access_token),
        token_type,
        expires_in,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(scopes: &[&str], params: &[(&str, &str)]) -> OAuth2Settings {
        OAuth2Settings {
            token_url: url::Url::parse("https://idp.example/token").unwrap(),
            client_id: "keda client".to_string(),
            client_secret: Secret::new("s3cr&t"),
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            endpoint_params: params
                .iter()
                .map(|(k, v)| (k.to_string(), Secret::new(*v)))
                .collect(),
        }
    }

    #[test]
    fn the_form_follows_go_s_client_credentials_config() {
        // (scopes, endpoint params, style, expected body)
        type Row<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], AuthStyle, &'a str);
        let rows: &[Row<'_>] = &[
            (&[], &[], AuthStyle::Header, "grant_type=client_credentials"),
            (
                &["read:*/*", "tag:monitoring"],
                &[],
                AuthStyle::Header,
                "grant_type=client_credentials&scope=read%3A*%2F*+tag%3Amonitoring",
            ),
            (
                &[],
                &[("audience", "rabbit mq"), ("grant_type", "custom")],
                AuthStyle::Header,
                "audience=rabbit+mq&grant_type=custom",
            ),
            (
                &[],
                &[],
                AuthStyle::Form,
                "grant_type=client_credentials&client_id=keda+client&client_secret=s3cr%26t",
            ),
        ];
        for (scopes, params, style, expected) in rows {
            assert_eq!(
                form(&settings(scopes, params), *style),
                *expected,
                "{scopes:?} {params:?} {style:?}"
            );
        }
    }

    #[test]
    fn answers_are_json_or_form_with_go_s_token_types() {
        let now = Instant::now();
        // (body, content type, header, expires in seconds)
        let rows = [
            (
                r#"{"access_token":"abc","token_type":"bearer","expires_in":3600}"#,
                "application/json; charset=utf-8",
                "Bearer abc",
                Some(3600),
            ),
            (
                r#"{"access_token":"abc","expires_in":"60"}"#,
                "application/json",
                "Bearer abc",
                Some(60),
            ),
            (
                r#"{"access_token":"abc","token_type":"mac"}"#,
                "",
                "MAC abc",
                None,
            ),
            (
                "access_token=a%2Bb&token_type=Bearer&expires_in=5",
                "application/x-www-form-urlencoded",
                "Bearer a+b",
                Some(5),
            ),
            (
                r#"{"access_token":"abc","token_type":"DPoP","expires_in":0}"#,
                "application/json",
                "DPoP abc",
                None,
            ),
        ];
        for (body, content_type, header, expires) in rows {
            let token = parse_answer(body, content_type)
                .unwrap_or_else(|e| panic!("{body}: {e}"))
                .into_token(now);
            assert_eq!(token.header_value(), header, "{body}");
            assert_eq!(
                token.expires_at,
                expires.map(|s| now + Duration::from_secs(s)),
                "{body}"
            );
        }
        for (body, content_type) in [
            ("{}", "application/json"),
            (r#"{"access_token":""}"#, "application/json"),
            ("<html>sekret</html>", "text/html"),
            ("token_type=bearer", "text/plain"),
        ] {
            let err = parse_answer(body, content_type).unwrap_err();
            assert!(!err.contains("sekret"), "{err}");
        }
    }

    #[test]
    fn tokens_are_renewed_ten_seconds_before_they_expire() {
        let sent = Instant::now();
        let token = TokenAnswer {
            access_token: Secret::new("t"),
            token_type: String::new(),
            expires_in: Some(60),
        }
        .into_token(sent);
        assert!(token.fresh_at(sent));
        assert!(token.fresh_at(sent + Duration::from_secs(49)));
        // 10 s or less left: renewed.
        assert!(!token.fresh_at(sent + Duration::from_secs(50)));
        assert!(!token.fresh_at(sent + Duration::from_secs(61)));
        let forever = TokenAnswer {
            access_token: Secret::new("t"),
            token_type: String::new(),
            expires_in: None,
        }
        .into_token(sent);
        assert!(forever.fresh_at(sent + Duration::from_secs(10 * 365 * 86_400)));
    }
}
