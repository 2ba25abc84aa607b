//! What the `gcp-*` scalers share: KEDA's GCP credentials (`pkg/scalers/gcp/gcp_common.go`
//! `GetGCPAuthorization`), the service account's OAuth 2.0 token as Google's libraries get it
//! (the JWT bearer grant, RFC 7523, with an RS256-signed assertion: [`jwt`]), and a pooled
//! client that sends every API request with that token ([`GcpClient`]).
//!
//! Credentials, looked up in KEDA's order:
//! 1. the TriggerAuthentication parameter `GoogleApplicationCredentials` (the service account
//!    key JSON);
//! 2. `credentialsFromEnv`: a variable of the target's container holding the JSON;
//! 3. `credentialsFromEnvFile`: a variable of the target's container holding the path of a
//!    file with the JSON. KEDA reads that path on its own file system; keda-rs reads it only
//!    under the administrator's trigger file root ([`crate::files`]).
//!
//! `podIdentity` provider `gcp` (GKE workload identity) would use the operator's own identity
//! from the metadata server: the operator refuses it before a scaler is built.
//!
//! The token endpoint is the key's `token_uri` (Google's `https://oauth2.googleapis.com/token`
//! when absent). It is the tenant's own choice, and only the tenant's signed assertion is sent
//! there; it must be `https`. Tests move Google's hosts to their loopback fakes through the
//! process's [`VendorEndpoints`](crate::http_client::VendorEndpoints), never through the JSON.

pub mod jwt;
pub mod monitoring;

use std::time::Duration;

use bytes::Bytes;
use http::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};

use crate::context::ScalerContext;
use crate::error::{MetadataError, MetadataErrorKind, ScalerError, Source};
use crate::http_client::{HttpClient, HttpClientKey, HttpGetError, VendorEndpoints, describe_url};
use crate::metadata::{MetadataParser, Param};
use crate::pool::Lease;
use crate::pooled::ReadCtx;
use crate::remote::{Classify, Failure};
use crate::secret::Secret;

/// `GoogleApplicationCredentials`: the service account key JSON, from the TriggerAuthentication.
pub const APPLICATION_CREDENTIALS: Param = Param::optional("GoogleApplicationCredentials")
    .order(&[Source::Auth])
    .secret();
/// `credentialsFromEnv`: a container variable holding the JSON.
pub const CREDENTIALS: Param = Param::optional("credentials")
    .order(&[Source::Env])
    .secret();
/// `credentialsFromEnvFile`: names a container variable holding the path of the JSON file.
pub const CREDENTIALS_FROM_ENV_FILE: Param = Param::optional("credentialsFromEnvFile");

/// Google's token endpoint, where a key without `token_uri` gets its tokens.
pub const DEFAULT_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";
/// The scopes Cloud Monitoring's Go client asks for (`monitoring.DefaultAuthScopes`).
pub const MONITORING_SCOPES: &[&str] = &[
    "https://www.googleapis.com/auth/cloud-platform",
    "https://www.googleapis.com/auth/monitoring",
    "https://www.googleapis.com/auth/monitoring.read",
    "https://www.googleapis.com/auth/monitoring.write",
];
/// The most of a token answer read (Go's `oauth2` reads 1 MiB).
pub const MAX_TOKEN_ANSWER: usize = crate::oauth2::MAX_TOKEN_RESPONSE;
/// A token is renewed when it has less than this left (Go's `oauth2` expiry delta).
const EXPIRY_DELTA_SECONDS: i64 = 10;
/// The JWT bearer grant type.
const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// The gRPC canonical status names Google's JSON errors carry in `error.status`: shown; any
/// other text stays at debug level.
pub const GOOGLE_STATUSES: &[&str] = &[
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// Where a trigger's service account key comes from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum KeySource {
    /// The JSON itself (`GoogleApplicationCredentials` or `credentialsFromEnv`), and the
    /// parameter it came from.
    Json(Secret, &'static str),
    /// The path of a file with the JSON (`credentialsFromEnvFile`), read under the trigger file
    /// root when the client is built.
    File(String),
}

impl KeySource {
    /// KEDA's `GetGCPAuthorization`: `GoogleApplicationCredentials`, then `credentialsFromEnv`,
    /// then `credentialsFromEnvFile`.
    ///
    /// # Errors
    /// None of them is given (KEDA's "google application credentials not found").
    pub fn parse(p: &MetadataParser<'_>, ctx: &ScalerContext) -> Result<Self, MetadataError> {
        if let Some(json) = p.get_opt::<Secret>(&APPLICATION_CREDENTIALS)? {
            return Ok(Self::Json(json, APPLICATION_CREDENTIALS.name));
        }
        if let Some(json) = p.get_opt::<Secret>(&CREDENTIALS)? {
            return Ok(Self::Json(json, "credentialsFromEnv"));
        }
        if let Some(variable) = p.get_opt::<String>(&CREDENTIALS_FROM_ENV_FILE)? {
            return match ctx.resolved_env.get(&variable).map(|v| v.trim()) {
                Some(path) if !path.is_empty() => Ok(Self::File(path.to_string())),
                _ => Err(p.rule(format!(
                    "parameter \"credentialsFromEnvFile\": the target's container has no \
                     variable \"{variable}\" holding the path of the credentials file"
                ))),
            };
        }
        Err(p.rule(
            "google application credentials not found: give the service account key JSON as \
             the TriggerAuthentication parameter \"GoogleApplicationCredentials\", or name a \
             variable of the target's container holding it with \"credentialsFromEnv\" (or its \
             file with \"credentialsFromEnvFile\"); podIdentity gcp is not supported by keda-rs",
        ))
    }

    /// The parameter to name in errors about the key.
    pub fn param(&self) -> &'static str {
        match self {
            Self::Json(_, param) => param,
            Self::File(_) => CREDENTIALS_FROM_ENV_FILE.name,
        }
    }
}

/// A parsed service account key: who signs, with what, and where tokens come from.
pub struct ServiceAccount {
    /// `client_email`: the JWT's issuer.
    pub client_email: String,
    /// `private_key_id`: the JWT header's `kid` (left out when empty).
    pub private_key_id: String,
    /// `project_id` (may be empty).
    pub project_id: String,
    /// `token_uri`, https.
    pub token_uri: url::Url,
    key: ring::signature::RsaKeyPair,
}

impl std::fmt::Debug for ServiceAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccount")
            .field("client_email", &self.client_email)
            .field("project_id", &self.project_id)
            .field("token_uri", &describe_url(&self.token_uri))
            .finish_non_exhaustive()
    }
}

impl ServiceAccount {
    /// Reads a service account key JSON as Google's libraries do
    /// (`google.CredentialsFromJSONWithType(..., google.ServiceAccount)`): `type` must be
    /// `service_account`; `client_email` and `private_key` (PEM, PKCS#8 or PKCS#1 RSA) are
    /// needed; `token_uri` defaults to Google's.
    ///
    /// # Errors
    /// What is wrong, naming fields of the JSON, never their values.
    pub fn parse(json: &str) -> Result<Self, String> {
        #[derive(serde::Deserialize)]
        struct Raw {
            #[serde(default, rename = "type")]
            type_: String,
            #[serde(default)]
            project_id: String,
            #[serde(default)]
            private_key_id: String,
            #[serde(default)]
            private_key: String,
            #[serde(default)]
            client_email: String,
            #[serde(default)]
            token_uri: String,
        }
        let raw: Raw = serde_json::from_str(json).map_err(|e| {
            format!(
                "the service account key is not JSON: {}",
                crate::remote::json_error(&e)
            )
        })?;
        if raw.type_ != "service_account" {
            return Err(
                "the credentials are not a service account key (\"type\" must be \
                 \"service_account\")"
                    .into(),
            );
        }
        if raw.client_email.is_empty() {
            return Err("the service account key has no \"client_email\"".into());
        }
        let key = private_key(&raw.private_key)?;
        let token_uri = if raw.token_uri.trim().is_empty() {
            DEFAULT_TOKEN_URI
        } else {
            raw.token_uri.trim()
        };
        let token_uri = url::Url::parse(token_uri)
            .ok()
            .filter(|u| u.scheme() == "https" && u.host_str().is_some_and(|h| !h.is_empty()))
            .ok_or("the service account key's \"token_uri\" must be an https:// URL")?;
        Ok(Self {
            client_email: raw.client_email,
            private_key_id: raw.private_key_id,
            project_id: raw.project_id,
            token_uri,
            key,
        })
    }

    /// The signed assertion of the JWT bearer grant for `scopes` at `now` (Unix seconds).
    ///
    /// # Errors
    /// Signing failed.
    pub fn assertion(&self, scopes: &str, now: i64) -> Result<String, String> {
        jwt::assertion(
            &self.key,
            &jwt::Claims {
                key_id: &self.private_key_id,
                issuer: &self.client_email,
                scope: scopes,
                audience: self.token_uri.as_str(),
                now,
            },
        )
    }
}

/// The RSA key of a `private_key` PEM: PKCS#8 (`PRIVATE KEY`, what Google issues) or PKCS#1
/// (`RSA PRIVATE KEY`, which Go's library accepts too).
fn private_key(pem_text: &str) -> Result<ring::signature::RsaKeyPair, String> {
    let block = pem::parse(pem_text.trim())
        .map_err(|_| "the service account key's \"private_key\" is not a PEM block".to_string())?;
    let parsed = match block.tag() {
        "PRIVATE KEY" => ring::signature::RsaKeyPair::from_pkcs8(block.contents()),
        "RSA PRIVATE KEY" => ring::signature::RsaKeyPair::from_der(block.contents()),
        _ => {
            return Err(
                "the service account key's \"private_key\" is not an RSA private key PEM".into(),
            );
        }
    };
    parsed.map_err(|_| {
        "the service account key's \"private_key\" is not a usable RSA key (2048 to 8192 bits)"
            .into()
    })
}

/// What GCP triggers share a client by: the API's server, the key, the scopes and the timeout.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GcpKey {
    /// The API's base URL (`https://monitoring.googleapis.com/`), after the process's vendor
    /// endpoints.
    pub api: url::Url,
    /// The service account key.
    pub key: KeySource,
    /// The scopes, space-separated.
    pub scopes: String,
    /// Timeout of one request.
    pub timeout: Duration,
}

impl GcpKey {
    /// The key of a client of the API at `api` with `key`, asking for `scopes`, its requests
    /// bounded by the trigger's HTTP timeout.
    #[must_use]
    pub fn new(ctx: &ScalerContext, api: &url::Url, key: KeySource, scopes: &[&str]) -> Self {
        GcpKey {
            api: api.clone(),
            key,
            scopes: scopes.join(" "),
            timeout: ctx.global_http_timeout,
        }
    }
}

/// A cached access token.
struct CachedToken {
    header: HeaderValue,
    /// Unix seconds; `None`: no expiry given.
    expires_at: Option<i64>,
}

/// A pooled GCP API client: the API's HTTP client, the token endpoint's, the service account
/// and its last token.
pub struct GcpClient {
    api: HttpClient,
    token_http: HttpClient,
    account: ServiceAccount,
    /// The token endpoint after the process's vendor endpoints.
    token_url: url::Url,
    scopes: String,
    token: tokio::sync::Mutex<Option<CachedToken>>,
}

impl GcpClient {
    /// The service account.
    pub fn account(&self) -> &ServiceAccount {
        &self.account
    }

    /// GETs `url` (or POSTs `body` as JSON) with the service account's token; the body of a 2xx
    /// answer. A 401 drops the cached token, so the next read asks for a new one.
    ///
    /// # Errors
    /// [`ScalerError::Query`] naming `operation`: no token (the token request's failure),
    /// unreachable, timed out, a non-2xx status (Google's `error.status` when it is a canonical
    /// one), a body over the bound.
    pub async fn call(
        &self,
        read: ReadCtx<'_>,
        operation: &str,
        url: url::Url,
        body: Option<Bytes>,
    ) -> Result<Bytes, ScalerError> {
        match self.call_or_missing(read, operation, url, body).await? {
            Some(body) => Ok(body),
            None => Err(ScalerError::Query {
                trigger: read.trigger.clone(),
                operation: operation.to_string(),
                source: Failure::status(404, None, &[]),
            }),
        }
    }

    /// As [`GcpClient::call`], with a 404 answer as `None` (a bucket that does not exist).
    ///
    /// # Errors
    /// As [`GcpClient::call`], but for 404.
    pub async fn call_or_missing(
        &self,
        read: ReadCtx<'_>,
        operation: &str,
        url: url::Url,
        body: Option<Bytes>,
    ) -> Result<Option<Bytes>, ScalerError> {
        let token = self.token(read).await?;
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, token);
        let answer = match body {
            None => self.api.get(url, &headers).await,
            Some(body) => {
                headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                self.api.post(url, &headers, body).await
            }
        };
        match answer {
            Ok(body) => Ok(Some(body)),
            Err(HttpGetError::Status { status, .. }) if status.as_u16() == 404 => Ok(None),
            Err(e) => {
                if matches!(&e, HttpGetError::Status { status, .. } if status.as_u16() == 401) {
                    // A token the API refuses is not asked for again.
                    if let Ok(mut cached) = self.token.try_lock() {
                        *cached = None;
                    }
                }
                Err(ScalerError::Query {
                    trigger: read.trigger.clone(),
                    operation: operation.to_string(),
                    source: google_failure(&e),
                })
            }
        }
    }

    /// The cached token while it has more than 10 s left, else a new one.
    async fn token(&self, read: ReadCtx<'_>) -> Result<HeaderValue, ScalerError> {
        let now = read.now().as_second();
        let mut cached = self.token.lock().await;
        if let Some(token) = cached.as_ref().filter(|t| {
            t.expires_at
                .is_none_or(|at| now + EXPIRY_DELTA_SECONDS < at)
        }) {
            return Ok(token.header.clone());
        }
        let operation = format!(
            "getting an access token for {} from {}",
            self.account.client_email,
            describe_url(&self.account.token_uri)
        );
        let fail = |failure: Failure| ScalerError::Query {
            trigger: read.trigger.clone(),
            operation: operation.clone(),
            source: failure,
        };
        let assertion = self
            .account
            .assertion(&self.scopes, now)
            .map_err(|why| fail(Failure::local(why)))?;
        let form = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("grant_type", JWT_BEARER)
            .append_pair("assertion", &assertion)
            .finish();
        let mut headers = HeaderMap::new();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
        let body = self
            .token_http
            .post(self.token_url.clone(), &headers, Bytes::from(form))
            .await
            .map_err(|e| fail(oauth_failure(&e)))?;
        if body.len() > MAX_TOKEN_ANSWER {
            return Err(fail(Failure::answer(
                "the token answer is larger than 1 MiB",
                &[],
            )));
        }
        let text = String::from_utf8_lossy(&body);
        let answer = crate::oauth2::parse_answer(&text, "application/json")
            .map_err(|why| fail(Failure::answer(why, &body)))?;
        let header = HeaderValue::from_str(&format!("Bearer {}", answer.access_token.expose()))
            .map_err(|_| {
                fail(Failure::answer(
                    "the access token is not valid in an HTTP header",
                    &[],
                ))
            })?;
        let expires_at = answer
            .expires_in
            .and_then(|s| i64::try_from(s).ok())
            .map(|s| now.saturating_add(s));
        *cached = Some(CachedToken {
            header: header.clone(),
            expires_at,
        });
        Ok(header)
    }
}

/// A failed API call: Google's JSON error (`{"error":{"code":..,"message":..,"status":..}}`)
/// names its canonical status; anything else is classified as usual.
pub fn google_failure(e: &HttpGetError) -> Failure {
    if let HttpGetError::Status { body, .. } = e
        && let Some((status, message)) = google_error(body)
    {
        return Failure::server("Google Cloud", Some(&status), GOOGLE_STATUSES, &message);
    }
    e.classify()
}

/// `error.status` and `error.message` of Google's JSON error answer.
pub fn google_error(body: &[u8]) -> Option<(String, String)> {
    #[derive(serde::Deserialize)]
    struct Answer {
        error: Inner,
    }
    #[derive(serde::Deserialize)]
    struct Inner {
        #[serde(default)]
        status: String,
        #[serde(default)]
        message: String,
    }
    let answer: Answer = crate::remote::from_json(body).ok()?;
    (!answer.error.status.is_empty()).then_some((answer.error.status, answer.error.message))
}

/// A failed token request: the OAuth `error` code when it is one of RFC 6749's.
fn oauth_failure(e: &HttpGetError) -> Failure {
    if let HttpGetError::Status { body, .. } = e {
        #[derive(serde::Deserialize)]
        struct Answer {
            error: String,
            #[serde(default)]
            error_description: String,
        }
        if let Ok(answer) = crate::remote::from_json::<Answer>(body) {
            return Failure::server(
                "Google OAuth 2.0",
                Some(&answer.error),
                crate::oauth2::OAUTH_ERROR_CODES,
                &answer.error_description,
            );
        }
    }
    e.classify()
}

/// The base URL of a Google API host (`monitoring.googleapis.com`), moved by the process's
/// vendor endpoints.
///
/// # Errors
/// None in practice (a fixed host).
pub fn api_base(endpoints: &VendorEndpoints, host: &str) -> Result<url::Url, String> {
    url::Url::parse(&format!("https://{host}/"))
        .map(|u| endpoints.redirect(u))
        .map_err(|e| e.to_string())
}

/// A lease on the pooled client of `key`, building it (reading the key file, parsing the key)
/// when no trigger holds one. Does not ask for a token: the first read does.
///
/// # Errors
/// The key cannot be read or used: the message names its parameter and what is wrong, never
/// the key.
pub async fn lease(
    ctx: &ScalerContext,
    key: GcpKey,
) -> Result<Lease<GcpKey, GcpClient>, ScalerError> {
    let trigger = ctx.trigger_id();
    let rule = |message: String| {
        ScalerError::Metadata(MetadataError {
            trigger: trigger.clone(),
            kind: MetadataErrorKind::Rule(message),
        })
    };
    let param = key.key.param();
    let json = match &key.key {
        KeySource::Json(json, _) => json.clone(),
        KeySource::File(path) => Secret::new(
            ctx.trigger_files
                .read(path)
                .await
                .map_err(|e| rule(format!("parameter \"{param}\": {e}")))?,
        ),
    };
    let account = ServiceAccount::parse(json.expose())
        .map_err(|why| rule(format!("parameter \"{param}\": {why}")))?;
    let token_url = ctx.vendor_endpoints.redirect(account.token_uri.clone());
    ctx.clients
        .pool::<GcpKey, GcpClient>()
        .get_or_connect(key.clone(), || async move {
            let http = |origin: &url::Url| {
                HttpClient::new(&HttpClientKey {
                    origin: crate::http_client::origin(origin),
                    auth: crate::authentication::HttpAuth::default(),
                    timeout: key.timeout,
                })
            };
            Ok::<_, crate::http_client::HttpClientError>(GcpClient {
                api: http(&key.api)?,
                token_http: http(&token_url)?,
                account,
                token_url,
                scopes: key.scopes.clone(),
                token: tokio::sync::Mutex::new(None),
            })
        })
        .await
        .map_err(|e| rule(e.to_string()))
}

#[async_trait::async_trait]
impl crate::pooled::SharedClient for GcpClient {
    type Key = GcpKey;

    async fn lease(
        ctx: &ScalerContext,
        key: GcpKey,
    ) -> Result<Lease<GcpKey, GcpClient>, ScalerError> {
        lease(ctx, key).await
    }
}
