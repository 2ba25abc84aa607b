//! The OAuth 2.0 client credentials grant (RFC 6749 section 4.4) as KEDA gets it from
//! `golang.org/x/oauth2/clientcredentials`, shared by the `kafka` trigger (`sasl: oauthbearer`,
//! `saslTokenProvider: bearer`) and the `rabbitmq` trigger (management API bearer token).
//!
//! What follows Go's library:
//! - the form: `grant_type=client_credentials`, `scope` (the scopes joined by spaces) when there
//!   are scopes, then the endpoint parameters, which replace a field of the same name; the
//!   fields sorted by name (Go's `url.Values.Encode`);
//! - the client authentication is probed as Go's `AuthStyleAutoDetect` does: first HTTP Basic
//!   (`client_id` and `client_secret` form-encoded, RFC 6749 2.3.1), and when that request fails
//!   in any way, once more with the two in the form body (`client_secret` left out when empty);
//!   the style that worked is kept for later requests of the same [`TokenSource`];
//! - the answer (at most 1 MiB of it is read) may be JSON or form-encoded
//!   (`application/x-www-form-urlencoded` or `text/plain`); it must have an `access_token`;
//!   a JSON `expires_in` must be a whole number (a string holding one is accepted), a form one
//!   that is not a number is ignored; absent, 0 or negative means no expiry; more than
//!   2^31 - 1 s is taken as 2^31 - 1 s;
//! - a cached token is renewed when it has less than 10 s left (Go's `expiryDelta`).
//!
//! Errors carry what the scalers need to name their own parameters; they never contain the
//! client secret, an endpoint parameter's value or a token.

use std::time::Duration;

use tokio::time::Instant;

use crate::secret::Secret;

/// A cached token is renewed when it expires within this (Go's `oauth2` `defaultExpiryDelta`).
pub const EXPIRY_DELTA: Duration = Duration::from_secs(10);
/// The most of a token endpoint's answer that is read (Go reads at most 1 MiB, and parses that).
pub const MAX_TOKEN_RESPONSE: usize = 1 << 20;
/// The longest `expires_in` taken as is (Go caps it at `math.MaxInt32`).
const MAX_EXPIRES_IN: u64 = i32::MAX as u64;
/// How much of a refusal's body an error quotes.
const QUOTED_BODY: usize = 300;

/// A client credentials grant: what a [`TokenSource`] asks for, and what one is shared by.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClientCredentials {
    /// The token endpoint, an http(s) URL.
    pub token_url: url::Url,
    /// The client id.
    pub client_id: String,
    /// The client secret.
    pub client_secret: Secret,
    /// The scopes, sent space-separated as `scope` when there are any.
    pub scopes: Vec<String>,
    /// Extra form fields of the token request, in order (Go's `EndpointParams`).
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
    /// `access_token`.
    access_token: Secret,
    /// The `Authorization` header value, `<type> <access_token>`.
    header: Secret,
    /// `expires_in` as the endpoint gave it (positive seconds), `None`: does not expire.
    expires_in: Option<u64>,
    /// `None`: does not expire.
    expires_at: Option<Instant>,
}

impl Token {
    /// The access token.
    pub fn access_token(&self) -> &str {
        self.access_token.expose()
    }

    /// The `Authorization` header value: `Bearer <access_token>` for a bearer token (Go's
    /// `Token.Type()`: `bearer` in any case or no type is `Bearer`).
    pub fn header_value(&self) -> &str {
        self.header.expose()
    }

    /// The lifetime the endpoint gave (positive seconds), `None` when it gave none.
    pub fn expires_in(&self) -> Option<u64> {
        self.expires_in
    }

    /// Usable at `now`: it does not expire within [`EXPIRY_DELTA`] of `now`.
    pub fn fresh_at(&self, now: Instant) -> bool {
        self.expires_at
            .is_none_or(|at| now.checked_add(EXPIRY_DELTA).is_some_and(|soon| soon < at))
    }
}

/// Why no token could be had. Never contains the client secret, an endpoint parameter's value
/// or a token; the scalers word it with the names of their parameters.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The endpoint could not be reached or did not answer in time.
    #[error("the token request to {url} failed: {reason}")]
    Request {
        /// The token URL without credentials or query.
        url: String,
        /// What happened.
        reason: String,
    },
    /// The endpoint refused the request (not 2xx).
    #[error("the token request to {url} was refused: {status}{}", code.map(|c| format!(" ({c})")).unwrap_or_default())]
    Refused {
        /// The token URL without credentials or query.
        url: String,
        /// The HTTP status.
        status: reqwest::StatusCode,
        /// The OAuth `error` code of a JSON answer, when it is one of RFC 6749's
        /// ([`OAUTH_ERROR_CODES`]).
        code: Option<&'static str>,
        /// The start of the answer (secrets removed): debug-level logs only, never messages
        /// ([`crate::remote`]).
        body: String,
    },
    /// The endpoint answered 2xx, but not with a token.
    #[error("the token endpoint {url} gave no usable token: {reason}")]
    Answer {
        /// The token URL without credentials or query.
        url: String,
        /// What was wrong.
        reason: String,
    },
}

/// The `error` codes of RFC 6749 (section 5.2): shown; any other code is the server's text.
pub const OAUTH_ERROR_CODES: &[&str] = &[
    "invalid_request",
    "invalid_client",
    "invalid_grant",
    "unauthorized_client",
    "unsupported_grant_type",
    "invalid_scope",
    "access_denied",
    "server_error",
    "temporarily_unavailable",
];

/// Client credentials tokens of one [`ClientCredentials`]: the auth style that worked and the
/// last token. Concurrent callers wait for one request.
pub struct TokenSource {
    settings: ClientCredentials,
    state: tokio::sync::Mutex<State>,
}

struct State {
    token: Option<Token>,
    style: AuthStyle,
}

impl TokenSource {
    /// A source that has asked for nothing yet.
    pub fn new(settings: ClientCredentials) -> Self {
        Self {
            settings,
            state: tokio::sync::Mutex::new(State {
                token: None,
                style: AuthStyle::Probe,
            }),
        }
    }

    /// What it asks for.
    pub fn settings(&self) -> &ClientCredentials {
        &self.settings
    }

    /// The cached token while it is fresh, else a new one from the endpoint (asked with
    /// `client`), as Go's `ReuseTokenSource`.
    ///
    /// # Errors
    /// See [`TokenError`].
    pub async fn token(&self, client: &reqwest::Client) -> Result<Token, TokenError> {
        self.get(client, true).await
    }

    /// A new token from the endpoint, whatever is cached (for a caller that decides itself
    /// when to renew, like librdkafka's token refresh).
    ///
    /// # Errors
    /// See [`TokenError`].
    pub async fn new_token(&self, client: &reqwest::Client) -> Result<Token, TokenError> {
        self.get(client, false).await
    }

    async fn get(&self, client: &reqwest::Client, cached: bool) -> Result<Token, TokenError> {
        // Held across the request so concurrent callers share one.
        let mut state = self.state.lock().await;
        if cached && let Some(token) = state.token.as_ref().filter(|t| t.fresh_at(Instant::now())) {
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

    /// Forgets `token` if it is the cached one (its audience refused it), so the next call asks
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

    /// `text` without the client secret and the endpoint parameters' values.
    fn scrub(&self, text: &str) -> String {
        let s = &self.settings;
        std::iter::once(&s.client_secret)
            .chain(s.endpoint_params.iter().map(|(_, v)| v))
            .map(Secret::expose)
            .filter(|secret| secret.len() >= 3)
            .fold(text.to_string(), |acc, secret| acc.replace(secret, "***"))
    }

    async fn request(
        &self,
        client: &reqwest::Client,
        style: AuthStyle,
    ) -> Result<Token, TokenError> {
        let s = &self.settings;
        let mut request = client
            .post(s.token_url.clone())
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header(reqwest::header::ACCEPT, "application/json")
            .body(form(s, style));
        if style == AuthStyle::Header {
            // RFC 6749 2.3.1: id and secret form-encoded before the Basic encoding (Go does it
            // with `url.QueryEscape`).
            request = request.basic_auth(
                form_encode(&s.client_id),
                Some(form_encode(s.client_secret.expose())),
            );
        }
        let failed = |reason: String| TokenError::Request {
            url: self.shown_url(),
            reason: self.scrub(&reason),
        };
        let sent_at = Instant::now();
        // Not counted in keda_scaler_http_*: KEDA's token requests go through Go's default
        // client, outside the scalers' metrics round tripper.
        let response = request.send().await.map_err(|e| {
            use crate::remote::Classify;
            failed(e.without_url().classify().to_string())
        })?;
        let status = response.status();
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        let bytes = read_capped(response).await.map_err(failed)?;
        let text = String::from_utf8_lossy(&bytes);
        if !status.is_success() {
            let quoted: String = text.trim().chars().take(QUOTED_BODY).collect();
            return Err(TokenError::Refused {
                url: self.shown_url(),
                status,
                code: crate::remote::from_json::<serde_json::Value>(text.as_bytes())
                    .ok()
                    .and_then(|v| {
                        let code = v.get("error")?.as_str()?.to_string();
                        OAUTH_ERROR_CODES.iter().find(|c| **c == code).copied()
                    }),
                body: {
                    let body = self.scrub(&quoted);
                    tracing::debug!(target: "keda_scalers::remote", status = %status, body = %crate::remote::truncate(&body), "token endpoint refused the request");
                    body
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

/// The token request's form for `style`, as Go's `clientcredentials` and `newTokenRequest`
/// build it.
fn form(settings: &ClientCredentials, style: AuthStyle) -> String {
    let mut fields: Vec<(&str, &str)> = vec![("grant_type", "client_credentials")];
    let scope = settings.scopes.join(" ");
    if !settings.scopes.is_empty() {
        fields.push(("scope", &scope));
    }
    // An endpoint parameter replaces the field of its name (Go lets it replace `grant_type`;
    // `scope` with scopes is refused when the scaler parses its parameters).
    fields.retain(|(k, _)| !settings.endpoint_params.iter().any(|(p, _)| p == k));
    fields.extend(
        settings
            .endpoint_params
            .iter()
            .map(|(k, v)| (k.as_str(), v.expose())),
    );
    if style == AuthStyle::Form {
        // Go sets each (replacing a parameter of that name) only when it is not empty.
        if !settings.client_id.is_empty() {
            fields.retain(|(k, _)| *k != "client_id");
            fields.push(("client_id", &settings.client_id));
        }
        if !settings.client_secret.expose().is_empty() {
            fields.retain(|(k, _)| *k != "client_secret");
            fields.push(("client_secret", settings.client_secret.expose()));
        }
    }
    // Go's `url.Values.Encode`: sorted by name, the values of a name in order.
    fields.sort_by_key(|(k, _)| *k);
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields)
        .finish()
}

/// Go's `url.QueryEscape`.
fn form_encode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// The first [`MAX_TOKEN_RESPONSE`] bytes of the answer (Go's `io.LimitReader`).
async fn read_capped(mut response: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    let mut reading = crate::answers::Reading::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| {
        use crate::remote::Classify;
        e.without_url().classify().to_string()
    })? {
        let room = MAX_TOKEN_RESPONSE.saturating_sub(body.len());
        let kept = chunk.len().min(room);
        reading.add(kept).map_err(|e| e.to_string())?;
        body.extend_from_slice(&chunk[..kept]);
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
    /// `expires_in`, positive seconds, at most 2^31 - 1; `None`: no expiry.
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
            access_token: self.access_token,
            expires_in: self.expires_in,
            expires_at: self
                .expires_in
                .and_then(|s| sent_at.checked_add(Duration::from_secs(s))),
        }
    }
}

/// Parses the body of a 2xx answer: form-encoded when the content type says so (as Go), JSON
/// otherwise.
///
/// # Errors
/// Not JSON (or form), no `access_token`, or a JSON `expires_in` that is not a whole number;
/// the message never contains the body.
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
                    // Go reads it with `strconv.Atoi` and ignores what is not a number.
                    "expires_in" => expires_in = value.trim().parse::<i64>().ok(),
                    _ => {}
                }
            }
            (access_token, token_type, expires_in)
        } else {
            let value: serde_json::Value = crate::remote::from_json(body.as_bytes())
                .map_err(|e| format!("the answer is {e}"))?;
            // Go decodes it as a `json.Number` taken as an integer: a number or a string
            // holding one; anything else fails the answer.
            let expires_in = match &value["expires_in"] {
                serde_json::Value::Null => None,
                serde_json::Value::Number(n) => Some(n.as_i64()),
                serde_json::Value::String(s) => Some(s.trim().parse::<i64>().ok()),
                _ => Some(None),
            };
            let expires_in = match expires_in {
                None => None,
                Some(Some(seconds)) => Some(seconds),
                Some(None) => return Err("\"expires_in\" is not a whole number".to_string()),
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
        expires_in: expires_in
            .and_then(|s| u64::try_from(s).ok())
            .filter(|s| *s > 0)
            .map(|s| s.min(MAX_EXPIRES_IN)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(scopes: &[&str], params: &[(&str, &str)]) -> ClientCredentials {
        ClientCredentials {
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
    fn the_oauth2_form_follows_go_s_client_credentials_config() {
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
            // Parameters replace grant_type; the fields are sorted by name, repeated names
            // keep all their values.
            (
                &[],
                &[
                    ("grant_type", "custom"),
                    ("audience", "rabbit mq"),
                    ("a", "1"),
                    ("a", "2"),
                ],
                AuthStyle::Header,
                "a=1&a=2&audience=rabbit+mq&grant_type=custom",
            ),
            (
                &["x"],
                &[],
                AuthStyle::Form,
                "client_id=keda+client&client_secret=s3cr%26t&grant_type=client_credentials&scope=x",
            ),
        ];
        for (scopes, params, style, expected) in rows {
            assert_eq!(
                form(&settings(scopes, params), *style),
                *expected,
                "{scopes:?} {params:?} {style:?}"
            );
        }
        // An empty secret is not sent (Go's `newTokenRequest`).
        let mut no_secret = settings(&[], &[]);
        no_secret.client_secret = Secret::new("");
        assert_eq!(
            form(&no_secret, AuthStyle::Form),
            "client_id=keda+client&grant_type=client_credentials"
        );
    }

    #[test]
    fn oauth2_answers_are_json_or_form_with_go_s_token_types_and_expiry() {
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
                "access_token=abc&expires_in=soon",
                "text/plain; charset=utf-8",
                "Bearer abc",
                None,
            ),
            (
                r#"{"access_token":"abc","token_type":"DPoP","expires_in":0}"#,
                "application/json",
                "DPoP abc",
                None,
            ),
            (
                r#"{"access_token":"abc","expires_in":-5}"#,
                "application/json",
                "Bearer abc",
                None,
            ),
            (
                r#"{"access_token":"abc","expires_in":null}"#,
                "application/json",
                "Bearer abc",
                None,
            ),
            (
                r#"{"access_token":"abc","expires_in":99999999999}"#,
                "application/json",
                "Bearer abc",
                Some(2_147_483_647),
            ),
        ];
        for (body, content_type, header, expires) in rows {
            let token = parse_answer(body, content_type)
                .unwrap_or_else(|e| panic!("{body}: {e}"))
                .into_token(now);
            assert_eq!(token.header_value(), header, "{body}");
            assert_eq!(token.expires_in(), expires, "{body}");
            assert_eq!(
                token.expires_at,
                expires.map(|s| now + Duration::from_secs(s)),
                "{body}"
            );
        }
        assert_eq!(
            parse_answer("access_token=a%2Bb", "text/plain")
                .unwrap()
                .into_token(now)
                .access_token(),
            "a+b"
        );
        for (body, content_type) in [
            ("{}", "application/json"),
            (r#"{"access_token":""}"#, "application/json"),
            (
                r#"{"access_token":"sekret","expires_in":1.5}"#,
                "application/json",
            ),
            (
                r#"{"access_token":"sekret","expires_in":"soon"}"#,
                "application/json",
            ),
            (
                r#"{"access_token":"sekret","expires_in":true}"#,
                "application/json",
            ),
            ("<html>sekret</html>", "text/html"),
            ("token_type=bearer", "text/plain"),
        ] {
            let err = parse_answer(body, content_type).unwrap_err();
            assert!(!err.contains("sekret"), "{err}");
        }
    }

    #[test]
    fn oauth2_tokens_are_renewed_ten_seconds_before_they_expire() {
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
