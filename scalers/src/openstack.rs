//! What the `openstack-*` scalers share: KEDA's OpenStack credentials and the Keystone v3 token
//! they are exchanged for (`POST <authURL>/v3/auth/tokens`, the token in the answer's
//! `X-Subject-Token` header, its expiry and service catalog in the body), cached in a pooled
//! client ([`KeystoneClient`]) that sends every API request with it as `X-Auth-Token`.
//!
//! Two methods, as KEDA's `openstack-swift` (gophercloud's `AuthOptions`) and
//! `openstack-metric` (`pkg/scalers/openstack/keystone_authentication.go`) send them:
//! - `password`: `{"auth":{"identity":{"methods":["password"],"password":{"user":{"id":
//!   <userID>,"password":<password>}}},"scope":{"project":{"id":<projectID>}}}}` (no `scope`
//!   without a `projectID`);
//! - `application_credential`: `{"auth":{"identity":{"methods":["application_credential"],
//!   "application_credential":{"id":<appCredentialID>,"secret":<appCredentialSecret>}}}}`.
//!
//! The token is reused until 60 s before its `expires_at`; an API answering `401` drops it and
//! the request is sent once more with a new one (what gophercloud's reauthentication does).
//! Every trigger with the same `authURL`, credentials and timeout shares one client and one
//! token. The token answer is bounded ([`MAX_TOKEN_ANSWER`]), and no message shows the token,
//! the password, the secret or anything Keystone or the API said.

use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use http::{Method, StatusCode};

use crate::authentication::HttpAuth;
use crate::context::ScalerContext;
use crate::error::{MetadataError, MetadataErrorKind, ScalerError};
use crate::http_client::{HttpAnswer, HttpClient, HttpClientKey, describe_url, parse_http_url};
use crate::metadata::{AUTH, MetadataParser, Param};
use crate::pool::Lease;
use crate::pooled::ReadCtx;
use crate::remote::{Classify, Failure};
use crate::secret::Secret;

/// `authURL`: Keystone's identity endpoint (`http://keystone:5000/v3`, or its base URL).
pub const AUTH_URL: Param = Param::required("authURL").order(AUTH);
/// `userID` of the password method.
pub const USER_ID: Param = Param::optional("userID").order(AUTH);
/// `password` of the password method.
pub const PASSWORD: Param = Param::optional("password").order(AUTH).secret();
/// `projectID`: the project the password method's token is scoped to.
pub const PROJECT_ID: Param = Param::optional("projectID").order(AUTH);
/// `appCredentialID` of the application credential method.
pub const APP_CREDENTIAL_ID: Param = Param::optional("appCredentialID").order(AUTH);
/// `appCredentialSecret` of the application credential method.
pub const APP_CREDENTIAL_SECRET: Param =
    Param::optional("appCredentialSecret").order(AUTH).secret();

/// The largest token answer read (its service catalog included): 2 MiB.
pub const MAX_TOKEN_ANSWER: usize = 2 << 20;

/// A token is renewed this many seconds before it expires.
const EXPIRY_MARGIN_SECONDS: i64 = 60;

/// How a trigger authenticates to Keystone.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Credentials {
    /// The `password` method, scoped to `project_id` when it is not empty.
    Password {
        /// `userID`.
        user_id: String,
        /// `password`.
        password: Secret,
        /// `projectID` (may be empty: no scope).
        project_id: String,
    },
    /// The `application_credential` method.
    AppCredential {
        /// `appCredentialID`.
        id: String,
        /// `appCredentialSecret`.
        secret: Secret,
    },
}

impl Credentials {
    /// Reads the credentials as KEDA's `openstack-swift` validates them: `userID` needs
    /// `password` (and `projectID` when `require_project`); otherwise `appCredentialID` needs
    /// `appCredentialSecret`; one of the two methods is needed.
    ///
    /// # Errors
    /// A method's parameter is missing, or neither method is given; the message names them.
    pub fn parse(p: &MetadataParser<'_>, require_project: bool) -> Result<Self, MetadataError> {
        if let Some(user_id) = p.get_opt::<String>(&USER_ID)? {
            let password: Secret = p.get_opt(&PASSWORD)?.ok_or_else(|| {
                p.rule("parameter \"password\" must be specified when using \"userID\"")
            })?;
            let project_id: Option<String> = p.get_opt(&PROJECT_ID)?;
            if require_project && project_id.is_none() {
                return Err(
                    p.rule("parameter \"projectID\" must be specified when using \"userID\"")
                );
            }
            return Ok(Self::Password {
                user_id,
                password,
                project_id: project_id.unwrap_or_default(),
            });
        }
        if let Some(id) = p.get_opt::<String>(&APP_CREDENTIAL_ID)? {
            let secret: Secret = p.get_opt(&APP_CREDENTIAL_SECRET)?.ok_or_else(|| {
                p.rule(
                    "parameter \"appCredentialSecret\" must be specified when using \"appCredentialID\"",
                )
            })?;
            return Ok(Self::AppCredential { id, secret });
        }
        Err(p.rule(
            "either parameter \"userID\" (with \"password\") or \"appCredentialID\" (with \
             \"appCredentialSecret\") must be given in the TriggerAuthentication",
        ))
    }

    /// The body of the token request.
    pub fn token_request(&self) -> String {
        match self {
            Self::Password {
                user_id,
                password,
                project_id,
            } => {
                let mut auth = serde_json::json!({
                    "identity": {
                        "methods": ["password"],
                        "password": {"user": {"id": user_id, "password": password.expose()}},
                    }
                });
                if !project_id.is_empty() {
                    auth["scope"] = serde_json::json!({"project": {"id": project_id}});
                }
                serde_json::json!({ "auth": auth }).to_string()
            }
            Self::AppCredential { id, secret } => serde_json::json!({
                "auth": {
                    "identity": {
                        "methods": ["application_credential"],
                        "application_credential": {"id": id, "secret": secret.expose()},
                    }
                }
            })
            .to_string(),
        }
    }

    /// Who asks, for messages: the user or application credential ID, never a secret.
    pub fn who(&self) -> String {
        match self {
            Self::Password { user_id, .. } => format!("user {user_id}"),
            Self::AppCredential { id, .. } => format!("application credential {id}"),
        }
    }
}

/// Keystone's token URL of `authURL`: `<authURL>/auth/tokens` when its path ends with `/v3`
/// (gophercloud's identity endpoint), `<authURL>/v3/auth/tokens` otherwise (KEDA's
/// `openstack-metric`).
///
/// # Errors
/// `authURL` is not an http(s) URL; the message names it.
pub fn tokens_url(p: &MetadataParser<'_>, auth_url: &str) -> Result<url::Url, MetadataError> {
    let mut url = parse_http_url(p, &AUTH_URL, auth_url.trim())?;
    url.set_query(None);
    url.set_fragment(None);
    let ends_with_v3 = url.path().trim_end_matches('/').ends_with("/v3");
    if let Ok(mut path) = url.path_segments_mut() {
        path.pop_if_empty();
        if !ends_with_v3 {
            path.push("v3");
        }
        path.extend(["auth", "tokens"]);
    }
    Ok(url)
}

/// What OpenStack triggers share a client by: Keystone's token URL, the credentials and the
/// timeout.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KeystoneKey {
    /// `POST` here for a token.
    pub tokens_url: url::Url,
    /// The credentials.
    pub credentials: Credentials,
    /// Timeout of one request.
    pub timeout: Duration,
}

/// One entry of the token's service catalog.
#[derive(Clone, Debug, Default, serde::Deserialize)]
pub struct CatalogService {
    /// `object-store`, `metric`, ...
    #[serde(default, rename = "type")]
    pub type_: String,
    /// `swift`, `gnocchi`, ...
    #[serde(default)]
    pub name: String,
    /// The service's endpoints.
    #[serde(default)]
    pub endpoints: Vec<CatalogEndpoint>,
}

/// One endpoint of a catalog entry.
#[derive(Clone, Debug, Default, serde::Deserialize)]
pub struct CatalogEndpoint {
    /// `public`, `internal` or `admin`.
    #[serde(default)]
    pub interface: String,
    /// The region's name.
    #[serde(default)]
    pub region: String,
    /// The region's ID.
    #[serde(default)]
    pub region_id: String,
    /// The endpoint's URL.
    #[serde(default)]
    pub url: String,
}

/// The body of Keystone's token answer: `{"token": {"expires_at": "...", "catalog": [...]}}`.
/// Returns the expiry (Unix seconds, when given) and the catalog (empty when absent).
///
/// # Errors
/// Not that shape, or an `expires_at` that is not a time. Messages never quote the answer.
pub fn token_answer(body: &[u8]) -> Result<(Option<i64>, Vec<CatalogService>), String> {
    #[derive(serde::Deserialize)]
    struct Answer {
        token: Token,
    }
    #[derive(serde::Deserialize)]
    struct Token {
        #[serde(default)]
        expires_at: Option<String>,
        #[serde(default)]
        catalog: Option<Vec<CatalogService>>,
    }
    let answer: Answer = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the Keystone token answer is not a token: {}",
            crate::remote::json_error(&e)
        )
    })?;
    let expires_at = match answer.token.expires_at {
        None => None,
        Some(text) => Some(
            text.parse::<jiff::Timestamp>()
                .map_err(|_| "the Keystone token's \"expires_at\" is not a time".to_string())?
                .as_second(),
        ),
    };
    Ok((expires_at, answer.token.catalog.unwrap_or_default()))
}

/// gophercloud's `V3EndpointURL`: the first `public` endpoint of a service of `service_type`
/// in `region` (its name or ID; any region when empty), with a trailing `/`.
///
/// # Errors
/// No such endpoint, or its URL is not an http(s) URL.
pub fn catalog_endpoint(
    catalog: &[CatalogService],
    service_type: &str,
    region: &str,
) -> Result<url::Url, String> {
    let endpoint = catalog
        .iter()
        .filter(|s| s.type_ == service_type)
        .flat_map(|s| &s.endpoints)
        .find(|e| {
            e.interface == "public"
                && (region.is_empty() || e.region == region || e.region_id == region)
        })
        .ok_or_else(|| {
            if region.is_empty() {
                format!("the token's service catalog has no public {service_type} endpoint")
            } else {
                format!(
                    "the token's service catalog has no public {service_type} endpoint in region {region} (parameter \"regionName\")"
                )
            }
        })?;
    with_trailing_slash(&endpoint.url).ok_or_else(|| {
        format!("the public {service_type} endpoint of the token's service catalog is not an http(s) URL")
    })
}

/// `text` as an http(s) URL whose path ends with `/` (gophercloud's `NormalizeURL`).
pub fn with_trailing_slash(text: &str) -> Option<url::Url> {
    let mut url = url::Url::parse(text.trim()).ok()?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
        return None;
    }
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    Some(url)
}

/// A cached token.
struct CachedToken {
    header: HeaderValue,
    /// Unix seconds; `None`: no expiry given.
    expires_at: Option<i64>,
    catalog: std::sync::Arc<Vec<CatalogService>>,
}

/// A pooled OpenStack client: one HTTP client for Keystone and the APIs, the credentials and
/// the last token.
pub struct KeystoneClient {
    http: HttpClient,
    key: KeystoneKey,
    token: tokio::sync::Mutex<Option<CachedToken>>,
}

impl KeystoneClient {
    /// Sends `method` to the URL `target` makes of the token's catalog, with `X-Auth-Token`,
    /// and returns a 2xx answer. A `401` drops the token and the request is sent once more
    /// with a new one.
    ///
    /// # Errors
    /// [`ScalerError::Query`] naming `operation`: no token (the token request's failure),
    /// no URL (`target`'s reason), unreachable, timed out, a non-2xx status, a body over the
    /// bound.
    pub async fn call(
        &self,
        read: ReadCtx<'_>,
        operation: &str,
        method: Method,
        target: impl Fn(&[CatalogService]) -> Result<url::Url, String> + Send + Sync,
    ) -> Result<HttpAnswer, ScalerError> {
        let fail = |failure: Failure| ScalerError::Query {
            trigger: read.trigger.clone(),
            operation: operation.to_string(),
            source: failure,
        };
        for attempt in 0..2 {
            let (token, catalog) = self.token(read).await?;
            let url = target(&catalog).map_err(|why| fail(Failure::local(why)))?;
            let mut headers = HeaderMap::new();
            headers.insert("x-auth-token", token);
            let answer = self
                .http
                .exchange(method.clone(), url, &headers, None)
                .await
                .map_err(|e| fail(e.classify()))?;
            if answer.status == StatusCode::UNAUTHORIZED && attempt == 0 {
                *self.token.lock().await = None;
                continue;
            }
            if !answer.status.is_success() {
                return Err(fail(answer.into_status_error().classify()));
            }
            return Ok(answer);
        }
        Err(fail(Failure::status(401, None, &[])))
    }

    /// The cached token while it has more than a minute left, else a new one.
    async fn token(
        &self,
        read: ReadCtx<'_>,
    ) -> Result<(HeaderValue, std::sync::Arc<Vec<CatalogService>>), ScalerError> {
        let now = read.now().as_second();
        let mut cached = self.token.lock().await;
        if let Some(token) = cached.as_ref().filter(|t| {
            t.expires_at
                .is_none_or(|at| now.saturating_add(EXPIRY_MARGIN_SECONDS) < at)
        }) {
            return Ok((token.header.clone(), token.catalog.clone()));
        }
        let operation = format!(
            "getting a Keystone token for {} from {}",
            self.key.credentials.who(),
            describe_url(&self.key.tokens_url)
        );
        let fail = |failure: Failure| ScalerError::Query {
            trigger: read.trigger.clone(),
            operation: operation.clone(),
            source: failure,
        };
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let answer = self
            .http
            .exchange(
                Method::POST,
                self.key.tokens_url.clone(),
                &headers,
                Some(Bytes::from(self.key.credentials.token_request())),
            )
            .await
            .map_err(|e| fail(e.classify()))?;
        if !answer.status.is_success() {
            return Err(fail(answer.into_status_error().classify()));
        }
        if answer.body.len() > MAX_TOKEN_ANSWER {
            return Err(fail(Failure::answer(
                format!("the token answer is larger than {MAX_TOKEN_ANSWER} bytes"),
                &[],
            )));
        }
        let header = answer
            .headers
            .get("x-subject-token")
            .filter(|v| !v.is_empty())
            .cloned()
            .ok_or_else(|| {
                fail(Failure::answer(
                    "the token answer has no X-Subject-Token header",
                    &[],
                ))
            })?;
        let (expires_at, catalog) =
            token_answer(&answer.body).map_err(|why| fail(Failure::answer(why, &[])))?;
        let catalog = std::sync::Arc::new(catalog);
        *cached = Some(CachedToken {
            header: header.clone(),
            expires_at,
            catalog: catalog.clone(),
        });
        Ok((header, catalog))
    }
}

/// A lease on the pooled client of `key`, building it when no trigger holds one. Does not ask
/// for a token: the first read does.
///
/// # Errors
/// The HTTP client cannot be built.
pub async fn lease(
    ctx: &ScalerContext,
    key: KeystoneKey,
) -> Result<Lease<KeystoneKey, KeystoneClient>, ScalerError> {
    let trigger = ctx.trigger_id();
    ctx.clients
        .pool::<KeystoneKey, KeystoneClient>()
        .get_or_connect(key.clone(), || async move {
            let http = HttpClient::new(&HttpClientKey {
                origin: crate::http_client::origin(&key.tokens_url),
                auth: HttpAuth::default(),
                timeout: key.timeout,
            })?;
            Ok::<_, crate::http_client::HttpClientError>(KeystoneClient {
                http,
                key,
                token: tokio::sync::Mutex::new(None),
            })
        })
        .await
        .map_err(|e| {
            ScalerError::Metadata(MetadataError {
                trigger,
                kind: MetadataErrorKind::Rule(e.to_string()),
            })
        })
}

/// The request timeout of KEDA's `timeout` parameter (seconds): that many seconds when
/// positive (at most an hour), the operator's HTTP timeout otherwise.
pub fn timeout(ctx: &ScalerContext, seconds: i64) -> Duration {
    if seconds > 0 {
        Duration::from_secs(seconds.unsigned_abs().min(3600))
    } else {
        ctx.global_http_timeout
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::test_context;

    fn parse(auth: &[(&str, &str)], project: bool) -> Result<(url::Url, Credentials), String> {
        let ctx = test_context("openstack-swift", 0, &[], &[], auth);
        ctx.parse(|p| {
            let url: String = p.get(&AUTH_URL)?;
            Ok((tokens_url(p, &url)?, Credentials::parse(p, project)?))
        })
        .map_err(|e| e.to_string())
    }

    #[test]
    fn credentials_follow_keda_s_rules() {
        let (url, c) = parse(
            &[
                ("authURL", "http://keystone:5000/v3/"),
                ("userID", "u1"),
                ("password", "pw-s3cret"),
                ("projectID", "p1"),
            ],
            true,
        )
        .unwrap();
        assert_eq!(url.as_str(), "http://keystone:5000/v3/auth/tokens");
        assert_eq!(
            c.token_request(),
            r#"{"auth":{"identity":{"methods":["password"],"password":{"user":{"id":"u1","password":"pw-s3cret"}}},"scope":{"project":{"id":"p1"}}}}"#
        );
        let (url, c) = parse(
            &[
                ("authURL", "https://keystone.example/identity"),
                ("appCredentialID", "a1"),
                ("appCredentialSecret", "as3cret"),
            ],
            true,
        )
        .unwrap();
        assert_eq!(
            url.as_str(),
            "https://keystone.example/identity/v3/auth/tokens"
        );
        assert_eq!(
            c.token_request(),
            r#"{"auth":{"identity":{"application_credential":{"id":"a1","secret":"as3cret"},"methods":["application_credential"]}}}"#
        );
        let err = |auth: &[(&str, &str)]| parse(auth, true).unwrap_err();
        assert!(err(&[("userID", "u")]).contains("\"authURL\""));
        let base = ("authURL", "http://k:5000");
        assert!(err(&[base, ("userID", "u")]).contains("\"password\""));
        assert!(err(&[base, ("userID", "u"), ("password", "p")]).contains("\"projectID\""));
        assert!(parse(&[base, ("userID", "u"), ("password", "p")], false).is_ok());
        assert!(err(&[base, ("appCredentialID", "a")]).contains("\"appCredentialSecret\""));
        assert!(err(&[base]).contains("\"userID\""));
        assert!(err(&[("authURL", "keystone:5000"), ("userID", "u")]).contains("\"authURL\""));
    }

    #[test]
    fn the_catalog_gives_the_first_public_endpoint_of_the_region() {
        let body = br#"{"token":{"expires_at":"2026-01-01T13:00:00.000000Z","catalog":[
            {"type":"identity","name":"keystone","endpoints":[{"interface":"public","region":"R1","url":"http://k:5000/v3"}]},
            {"type":"object-store","name":"swift","endpoints":[
                {"interface":"internal","region":"R1","region_id":"R1","url":"http://internal:8080/v1/AUTH_p"},
                {"interface":"public","region":"R1","region_id":"R1","url":"http://r1:8080/v1/AUTH_p"},
                {"interface":"public","region":"R2","region_id":"r2-id","url":"http://r2:8080/v1/AUTH_p"}]}]}}"#;
        let (expires, catalog) = token_answer(body).unwrap();
        assert_eq!(expires, Some(1_767_272_400));
        let at = |region| catalog_endpoint(&catalog, "object-store", region);
        assert_eq!(at("").unwrap().as_str(), "http://r1:8080/v1/AUTH_p/");
        assert_eq!(at("r2-id").unwrap().as_str(), "http://r2:8080/v1/AUTH_p/");
        assert!(at("R3").unwrap_err().contains("regionName"));
        assert!(catalog_endpoint(&catalog, "metric", "").is_err());
        assert_eq!(token_answer(br#"{"token":{}}"#).unwrap().1.len(), 0);
        for bad in [
            &b"[]"[..],
            b"{}",
            br#"{"token":{"expires_at":"SECRETSECRET"}}"#,
        ] {
            let e = token_answer(bad).unwrap_err();
            assert!(!e.contains("SECRETSECRET"), "{e}");
        }
    }
}
