//! Microsoft Entra ID (Azure AD) tokens for the `azure-*` types that read an Azure REST API with
//! a service principal (`azure-monitor`, `azure-log-analytics`, `azure-app-insights`,
//! `azure-data-explorer`), as KEDA gets them through `azidentity.NewClientSecretCredential`: the
//! OAuth 2.0 client credentials grant of the Microsoft identity platform
//! (<https://learn.microsoft.com/en-us/entra/identity-platform/v2-oauth2-client-creds-grant-flow>):
//!
//! ```text
//! POST https://login.microsoftonline.com/<tenant>/oauth2/v2.0/token
//! Content-Type: application/x-www-form-urlencoded
//!
//! client_id=<id>&scope=<resource>/.default&client_secret=<secret>&grant_type=client_credentials
//! ```
//!
//! answered `{"token_type":"Bearer","expires_in":3599,"access_token":"..."}`. A pooled
//! [`AadClient`] (one per API server, tenant, client, secret, scope and timeout) keeps the token
//! until five minutes before it expires (azcore's bearer token policy refreshes then), sends
//! every API request with it, drops it when the API answers 401, and honours a 429's
//! `Retry-After` for every trigger sharing it.
//!
//! The authority is the cloud's (`https://login.microsoftonline.com/`,
//! `https://login.microsoftonline.us/`, `https://login.chinacloudapi.cn/`), or
//! `activeDirectoryEndpoint` with `cloud: Private`. Only the tenant's own client secret is sent
//! there, and only over `https`; tests move the hosts to their loopback fakes through the
//! process's [`VendorEndpoints`](crate::http_client::VendorEndpoints), never through a trigger.
//! A refused token request names the OAuth error code and the `AADSTS` number, never the
//! endpoint's description. `podIdentity` provider `azure-workload` would use the operator's own
//! federated identity: the operator refuses it before a scaler is built.

use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};

use crate::context::ScalerContext;
use crate::error::{MetadataError, MetadataErrorKind, ScalerError};
use crate::http_client::{HttpClient, HttpClientKey, HttpGetError, describe_url};
use crate::metadata::{MetadataParser, Param};
use crate::pool::Lease;
use crate::pooled::ReadCtx;
use crate::remote::{Classify, Failure, Kind};
use crate::secret::Secret;

/// The public cloud's authority.
pub const PUBLIC_AUTHORITY: &str = "https://login.microsoftonline.com/";
/// The most of a token answer read.
pub const MAX_TOKEN_ANSWER: usize = crate::oauth2::MAX_TOKEN_RESPONSE;
/// A token is renewed when it has less than this left (azcore's bearer token policy).
pub const REFRESH_BEFORE_SECONDS: i64 = 300;
/// The longest `Retry-After` honoured; a longer one is cut to this.
pub const MAX_RETRY_AFTER_SECONDS: i64 = 3600;

/// An Azure cloud KEDA knows by name (`AzureClouds`, compared case-insensitively), with the
/// endpoints the `azure-*` types use in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AzureCloud {
    /// KEDA's name.
    pub name: &'static str,
    /// Microsoft Entra ID's authority host.
    pub authority: &'static str,
    /// Azure Resource Manager (Azure Monitor metrics), audience and endpoint.
    pub resource_manager: &'static str,
    /// Log Analytics' query API, audience (the endpoint adds `/v1`).
    pub log_analytics: &'static str,
    /// Application Insights' API, audience and endpoint.
    pub app_insights: &'static str,
}

/// `AzurePublicCloud`.
pub const PUBLIC: AzureCloud = AzureCloud {
    name: "AzurePublicCloud",
    authority: PUBLIC_AUTHORITY,
    resource_manager: "https://management.azure.com",
    log_analytics: "https://api.loganalytics.io",
    app_insights: "https://api.applicationinsights.io",
};
/// `AzureUSGovernmentCloud`.
pub const US_GOVERNMENT: AzureCloud = AzureCloud {
    name: "AzureUSGovernmentCloud",
    authority: "https://login.microsoftonline.us/",
    resource_manager: "https://management.usgovcloudapi.net",
    log_analytics: "https://api.loganalytics.us",
    app_insights: "https://api.applicationinsights.us",
};
/// `AzureChinaCloud`.
pub const CHINA: AzureCloud = AzureCloud {
    name: "AzureChinaCloud",
    authority: "https://login.chinacloudapi.cn/",
    resource_manager: "https://management.chinacloudapi.cn",
    log_analytics: "https://api.loganalytics.azure.cn",
    app_insights: "https://api.applicationinsights.azure.cn",
};

/// A trigger's `cloud`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cloud {
    /// A cloud KEDA knows by name.
    Known(AzureCloud),
    /// `Private`: the endpoints come from the trigger's parameters.
    Private,
}

/// `cloud` as KEDA's `AzureClouds` lookup reads it: absent is the public cloud; `Private`
/// (any case); `AzurePublicCloud`, `AzureUSGovernmentCloud`, `AzureChinaCloud` (any case).
///
/// # Errors
/// Another name (KEDA's "there is no cloud environment matching the name").
pub fn parse_cloud(p: &MetadataParser<'_>, param: &Param) -> Result<Cloud, MetadataError> {
    let Some(found) = p.find(param)? else {
        return Ok(Cloud::Known(PUBLIC));
    };
    if found.value.eq_ignore_ascii_case("Private") {
        return Ok(Cloud::Private);
    }
    [PUBLIC, US_GOVERNMENT, CHINA]
        .into_iter()
        .find(|c| c.name.eq_ignore_ascii_case(found.value))
        .map(Cloud::Known)
        .ok_or_else(|| {
            p.invalid(
                param,
                found,
                "a known cloud: AzurePublicCloud, AzureUSGovernmentCloud, AzureChinaCloud or \
                 Private (there is no cloud environment matching that name)",
            )
        })
}

/// The API endpoint and the token authority of `azure-monitor` and `azure-log-analytics`, as
/// KEDA reads them: for a known `cloud`, `api` of it and its authority; with `cloud: Private`,
/// the `private_api` parameter (required then: KEDA's "<name> must be provided for Private cloud
/// type") and `active_directory` (default: the public authority). Both https.
///
/// # Errors
/// An unknown cloud; `Private` without `private_api`; a value that is not an https URL.
pub fn cloud_endpoints(
    p: &MetadataParser<'_>,
    cloud: &Param,
    api: fn(&AzureCloud) -> &'static str,
    private_api: &Param,
    active_directory: &Param,
) -> Result<(url::Url, url::Url), MetadataError> {
    match parse_cloud(p, cloud)? {
        Cloud::Known(known) => Ok((
            https_param(p, cloud, api(&known))?,
            https_param(p, cloud, known.authority)?,
        )),
        Cloud::Private => {
            let Some(endpoint) = p.get_opt::<String>(private_api)? else {
                return Err(p.rule(format!(
                    "{} must be provided for Private cloud type",
                    private_api.name
                )));
            };
            let api = https_param(p, private_api, &endpoint)?;
            let authority = match p.get_opt::<String>(active_directory)? {
                Some(text) => https_param(p, active_directory, &text)?,
                None => https_param(p, cloud, PUBLIC_AUTHORITY)?,
            };
            Ok((api, authority))
        }
    }
}

/// KEDA's `ParseActiveDirectoryEndpoint` (`azure-app-insights`, `azure-data-explorer`): the
/// cloud's authority, or with `cloud: Private` the `activeDirectoryEndpoint` parameter
/// (required then, https). Besides KEDA's three clouds, `AzureCloud` and `AzureUSGovernment`
/// are accepted, as in KEDA's environment table.
///
/// # Errors
/// An unknown cloud; `Private` without an https `activeDirectoryEndpoint`.
pub fn active_directory_endpoint(
    p: &MetadataParser<'_>,
    cloud: &Param,
    endpoint: &Param,
) -> Result<url::Url, MetadataError> {
    let Some(found) = p.find(cloud)? else {
        return https_url(p, endpoint, PUBLIC_AUTHORITY);
    };
    if found.value.eq_ignore_ascii_case("Private") {
        return match p.find(endpoint)? {
            Some(url) => https_param(p, endpoint, url.value),
            None => Err(p.rule(format!(
                "{} must be provided for Private cloud type",
                endpoint.name
            ))),
        };
    }
    let authority = match found.value.to_ascii_uppercase().as_str() {
        "AZURECLOUD" | "AZUREPUBLICCLOUD" => PUBLIC.authority,
        "AZUREUSGOVERNMENT" | "AZUREUSGOVERNMENTCLOUD" => US_GOVERNMENT.authority,
        "AZURECHINACLOUD" => CHINA.authority,
        _ => {
            return Err(p.invalid(
                cloud,
                found,
                "a known cloud: AzurePublicCloud, AzureUSGovernmentCloud, AzureChinaCloud or \
                 Private (invalid cloud environment)",
            ));
        }
    };
    https_url(p, endpoint, authority)
}

fn https_url(p: &MetadataParser<'_>, param: &Param, text: &str) -> Result<url::Url, MetadataError> {
    url::Url::parse(text).map_err(|e| p.rule(format!("{}: {e}", param.name)))
}

/// `text`, the value of `param`, as an `https://` URL with a host, without query or fragment:
/// a token or a client secret is never sent in clear text, and never to a URL with
/// credentials in it.
///
/// # Errors
/// Not such a URL, naming `param`.
pub fn https_param(
    p: &MetadataParser<'_>,
    param: &Param,
    text: &str,
) -> Result<url::Url, MetadataError> {
    url::Url::parse(text.trim())
        .ok()
        .filter(|u| {
            u.scheme() == "https"
                && u.host_str().is_some_and(|h| !h.is_empty())
                && u.username().is_empty()
                && u.password().is_none()
                && u.query().is_none()
                && u.fragment().is_none()
        })
        .ok_or_else(|| {
            p.rule(format!(
                "parameter \"{}\" must be an https:// URL with a host (no credentials, query or \
                 fragment)",
                param.name
            ))
        })
}

/// KEDA's `getScopedResource`: the audience without a trailing `/`, with `/.default` appended
/// unless it already ends in `.default`.
pub fn scope_of(audience: &str) -> String {
    let audience = audience.trim_end_matches('/');
    if audience.ends_with(".default") {
        audience.to_string()
    } else {
        format!("{audience}/.default")
    }
}

/// A service principal: tenant, application (client) id and client secret.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ClientSecret {
    /// The directory (tenant) id or domain.
    pub tenant_id: String,
    /// The application (client) id.
    pub client_id: String,
    /// The client secret.
    pub secret: Secret,
}

impl std::fmt::Debug for ClientSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientSecret")
            .field("tenant_id", &self.tenant_id)
            .field("client_id", &self.client_id)
            .finish_non_exhaustive()
    }
}

/// The names a trigger type gives the three credentials (`azure-monitor`'s
/// `activeDirectoryClientId` and `activeDirectoryClientPassword`, `azure-log-analytics`'
/// `clientId` and `clientSecret`), each with the type's lookup order.
pub struct CredentialParams {
    /// The tenant.
    pub tenant: Param,
    /// The application (client) id.
    pub client_id: Param,
    /// The client secret.
    pub secret: Param,
}

impl ClientSecret {
    /// The three credentials, checked in KEDA's order for the type (`order` lists the params
    /// in the order KEDA reports the first one missing).
    ///
    /// # Errors
    /// One is missing (naming it, and saying that `podIdentity` `azure-workload` is not
    /// supported by keda-rs), or the tenant is not a tenant id or domain.
    pub fn parse(
        p: &MetadataParser<'_>,
        params: &CredentialParams,
        order: &[&Param],
    ) -> Result<Self, MetadataError> {
        let tenant_id = p.get_opt::<String>(&params.tenant)?;
        let client_id = p.get_opt::<String>(&params.client_id)?;
        let secret = p.get_opt::<Secret>(&params.secret)?;
        for param in order {
            let present = if param.name == params.tenant.name {
                tenant_id.is_some()
            } else if param.name == params.client_id.name {
                client_id.is_some()
            } else {
                secret.is_some()
            };
            if !present {
                return Err(p.rule(format!(
                    "missing required parameter \"{}\": give the service principal's tenant, \
                     client id and client secret (podIdentity azure-workload is not supported \
                     by keda-rs)",
                    param.name
                )));
            }
        }
        let (Some(tenant_id), Some(client_id), Some(secret)) = (tenant_id, client_id, secret)
        else {
            return Err(p.rule("the service principal's credentials are incomplete"));
        };
        // azidentity's tenant check: the tenant goes into the token endpoint's path.
        if !tenant_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
        {
            return Err(p.rule(format!(
                "parameter \"{}\": a tenant id is a GUID or a domain name (letters, digits, \
                 '-' and '.')",
                params.tenant.name
            )));
        }
        Ok(Self {
            tenant_id,
            client_id,
            secret,
        })
    }
}

/// What Azure triggers share a client by: the API's server, the authority, the service
/// principal, the scope, TLS verification and the timeout.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AadKey {
    /// The API's base URL, after the process's vendor endpoints.
    pub api: url::Url,
    /// The authority (`https://login.microsoftonline.com/`), before the vendor endpoints.
    pub authority: url::Url,
    /// The service principal.
    pub credentials: ClientSecret,
    /// `<resource>/.default`.
    pub scope: String,
    /// `unsafeSsl` of the API's connections (the token endpoint's are always verified).
    pub insecure: bool,
    /// Timeout of one request.
    pub timeout: Duration,
}

impl AadKey {
    /// The token endpoint, `<authority>/<tenant>/oauth2/v2.0/token`.
    ///
    /// # Errors
    /// The authority cannot have a path (never for an https URL).
    pub fn token_url(&self) -> Result<url::Url, String> {
        let mut url = self.authority.clone();
        url.path_segments_mut()
            .map_err(|()| "the authority cannot have a path".to_string())?
            .pop_if_empty()
            .extend([
                self.credentials.tenant_id.as_str(),
                "oauth2",
                "v2.0",
                "token",
            ]);
        Ok(url)
    }
}

/// A cached access token.
struct CachedToken {
    header: HeaderValue,
    /// Unix seconds after which it is renewed.
    renew_at: i64,
}

/// A pooled Azure API client: the API's HTTP client, the token endpoint's, the service
/// principal's last token and the time before which the API asked not to be called.
pub struct AadClient {
    api: HttpClient,
    token_http: HttpClient,
    /// The token endpoint after the process's vendor endpoints.
    token_url: url::Url,
    /// The token endpoint as the trigger named it (for messages).
    token_url_shown: url::Url,
    credentials: ClientSecret,
    scope: String,
    token: tokio::sync::Mutex<Option<CachedToken>>,
    /// Unix seconds: a 429's `Retry-After`.
    throttled_until: std::sync::Mutex<Option<i64>>,
}

impl AadClient {
    /// GETs `url` (or POSTs `body` as JSON) with the service principal's token and `headers`;
    /// the body of a 2xx answer.
    ///
    /// # Errors
    /// [`ScalerError::Query`] naming `operation`: no token (the token request's failure, its
    /// OAuth code), throttled (a 429's `Retry-After` not yet over: no request is sent),
    /// unreachable, timed out, a non-2xx status (Azure's error code when it is a known one), a
    /// body over the bound.
    pub async fn call(
        &self,
        read: ReadCtx<'_>,
        operation: &str,
        url: url::Url,
        body: Option<Bytes>,
        headers: &HeaderMap,
    ) -> Result<Bytes, ScalerError> {
        let fail = |failure: Failure| ScalerError::Query {
            trigger: read.trigger.clone(),
            operation: operation.to_string(),
            source: failure,
        };
        let now = read.now().as_second();
        if let Some(until) = self.throttled_until()
            && now < until
        {
            return Err(fail(Failure::local(format!(
                "throttled: Azure answered HTTP 429 with Retry-After, no request before {}",
                jiff::Timestamp::from_second(until)
                    .map(|t| t.to_string())
                    .unwrap_or_else(|_| until.to_string())
            ))));
        }
        let token = self.token(read).await?;
        let mut all = HeaderMap::new();
        all.insert(AUTHORIZATION, token);
        all.insert(ACCEPT, HeaderValue::from_static("application/json"));
        for (name, value) in headers {
            all.insert(name, value.clone());
        }
        let method = if body.is_some() {
            all.insert(
                CONTENT_TYPE,
                HeaderValue::from_static("application/json; charset=utf-8"),
            );
            http::Method::POST
        } else {
            http::Method::GET
        };
        let answer = self
            .api
            .exchange(method, url, &all, body)
            .await
            .map_err(|e| fail(e.classify()))?;
        if answer.status.is_success() {
            return Ok(answer.body);
        }
        match answer.status.as_u16() {
            401 => {
                // A token the API refuses is not sent again.
                *self.token.lock().await = None;
            }
            429 => {
                let seconds = retry_after(&answer.headers).unwrap_or(0);
                if seconds > 0
                    && let Ok(mut until) = self.throttled_until.lock()
                {
                    *until = Some(now.saturating_add(seconds.min(MAX_RETRY_AFTER_SECONDS)));
                }
            }
            _ => {}
        }
        Err(fail(azure_failure(&answer.into_status_error())))
    }

    fn throttled_until(&self) -> Option<i64> {
        self.throttled_until.lock().ok().and_then(|t| *t)
    }

    /// The cached token while it has more than five minutes left, else a new one.
    async fn token(&self, read: ReadCtx<'_>) -> Result<HeaderValue, ScalerError> {
        let now = read.now().as_second();
        let mut cached = self.token.lock().await;
        if let Some(token) = cached.as_ref().filter(|t| now < t.renew_at) {
            return Ok(token.header.clone());
        }
        let operation = format!(
            "getting an access token for client {} from {}",
            self.credentials.client_id,
            describe_url(&self.token_url_shown)
        );
        let fail = |failure: Failure| ScalerError::Query {
            trigger: read.trigger.clone(),
            operation: operation.clone(),
            source: failure,
        };
        let form = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("client_id", &self.credentials.client_id)
            .append_pair("scope", &self.scope)
            .append_pair("client_secret", self.credentials.secret.expose())
            .append_pair("grant_type", "client_credentials")
            .finish();
        let mut headers = HeaderMap::new();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        let body = self
            .token_http
            .post(self.token_url.clone(), &headers, Bytes::from(form))
            .await
            .map_err(|e| fail(token_failure(&e)))?;
        if body.len() > MAX_TOKEN_ANSWER {
            return Err(fail(Failure::local(
                "the token answer is larger than 1 MiB",
            )));
        }
        let text = String::from_utf8_lossy(&body);
        // The answer's text may hold the token: never kept, even at debug level.
        let answer = crate::oauth2::parse_answer(&text, "application/json")
            .map_err(|why| fail(Failure::answer(why, &[])))?;
        let header = HeaderValue::from_str(&format!("Bearer {}", answer.access_token.expose()))
            .map_err(|_| {
                fail(Failure::answer(
                    "the access token is not valid in an HTTP header",
                    &[],
                ))
            })?;
        let lifetime = answer
            .expires_in
            .and_then(|s| i64::try_from(s).ok())
            .unwrap_or(3600);
        let renew_at = now.saturating_add(lifetime - REFRESH_BEFORE_SECONDS.min(lifetime / 2));
        *cached = Some(CachedToken {
            header: header.clone(),
            renew_at,
        });
        Ok(header)
    }
}

/// `Retry-After` in seconds (`x-ms-retry-after-ms` when that is all there is); HTTP dates are
/// not used by Azure's APIs here.
fn retry_after(headers: &HeaderMap) -> Option<i64> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(seconds) = text("retry-after").and_then(|s| s.trim().parse::<i64>().ok()) {
        return Some(seconds.max(0));
    }
    text("x-ms-retry-after-ms")
        .and_then(|s| s.trim().parse::<i64>().ok())
        .map(|ms| (ms.max(0) + 999) / 1000)
}

/// The error codes of Azure's REST APIs shown in messages (Azure Resource Manager, Azure
/// Monitor, Log Analytics, Application Insights and Kusto documented codes); any other code
/// stays at debug level.
pub const AZURE_ERROR_CODES: &[&str] = &[
    "AuthenticationFailed",
    "AuthorizationFailed",
    "BadArgumentError",
    "BadRequest",
    "ExpiredAuthenticationToken",
    "Forbidden",
    "General_BadRequest",
    "InsufficientAccessError",
    "InternalServerError",
    "InvalidAuthenticationToken",
    "InvalidAuthenticationTokenAudience",
    "InvalidSubscriptionId",
    "InvalidTokenError",
    "LimitExceeded",
    "NotFound",
    "PathNotFoundError",
    "ResourceGroupNotFound",
    "ResourceNotFound",
    "SemanticError",
    "ServiceUnavailable",
    "SubscriptionNotFound",
    "SyntaxError",
    "ThrottledError",
    "TooManyRequests",
    "Unauthorized",
    "WorkspaceNotFoundError",
];

/// A failed API call: Azure's JSON error (`{"error":{"code":..,"message":..}}`, the shape
/// every one of these APIs answers) names its code when it is a known one; anything else is
/// classified as usual (the status and the body's size).
pub fn azure_failure(e: &HttpGetError) -> Failure {
    if let HttpGetError::Status { status, body, .. } = e
        && let Some((code, message)) = azure_error(body)
    {
        let mut failure = Failure::server("Azure", Some(&code), AZURE_ERROR_CODES, &message);
        if let Kind::Server { code: None, .. } = failure.kind() {
            // An unknown code: the status says more than "an error".
            failure = Failure::new(
                Kind::Status {
                    code: status.as_u16(),
                    bytes: body.len(),
                    content_type: Some("application/json"),
                },
                failure.raw().map(str::to_string),
            );
        }
        return failure;
    }
    e.classify()
}

/// `error.code` and `error.message` of Azure's JSON error answer (Azure Resource Manager's
/// `{"error":{"code","message"}}`), or `code` and `message` of Azure Monitor metrics'
/// `ErrorResponse` (`{"code","message"}`).
pub fn azure_error(body: &[u8]) -> Option<(String, String)> {
    #[derive(serde::Deserialize)]
    struct Answer {
        #[serde(default)]
        error: Option<Inner>,
        #[serde(default)]
        code: Option<serde_json::Value>,
        #[serde(default)]
        message: Option<serde_json::Value>,
    }
    #[derive(serde::Deserialize)]
    struct Inner {
        #[serde(default)]
        code: String,
        #[serde(default)]
        message: String,
    }
    let answer: Answer = crate::remote::from_json(body).ok()?;
    let text = |v: Option<serde_json::Value>| match v {
        Some(serde_json::Value::String(s)) => s,
        _ => String::new(),
    };
    let (code, message) = match answer.error {
        Some(inner) => (inner.code, inner.message),
        None => (text(answer.code), text(answer.message)),
    };
    (!code.is_empty()).then_some((code, message))
}

/// A refused token request: Microsoft Entra ID's answer
/// (`{"error":"invalid_client","error_description":"AADSTS7000215: ...","error_codes":[7000215]}`)
/// named by its OAuth code (one of RFC 6749's) and its `AADSTS` number; the description stays
/// at debug level, without the request.
fn token_failure(e: &HttpGetError) -> Failure {
    if let HttpGetError::Status { body, status, .. } = e {
        #[derive(serde::Deserialize)]
        struct Answer {
            #[serde(default)]
            error: String,
            #[serde(default)]
            error_description: String,
            #[serde(default)]
            error_codes: Vec<serde_json::Value>,
        }
        if let Ok(answer) = crate::remote::from_json::<Answer>(body) {
            let oauth = crate::oauth2::OAUTH_ERROR_CODES
                .iter()
                .find(|c| c.eq_ignore_ascii_case(&answer.error))
                .copied();
            let number = answer
                .error_codes
                .first()
                .and_then(serde_json::Value::as_u64);
            let code = match (oauth, number) {
                (Some(oauth), Some(n)) => Some(format!("{oauth} (AADSTS{n})")),
                (Some(oauth), None) => Some(oauth.to_string()),
                (None, Some(n)) => Some(format!("AADSTS{n}")),
                (None, None) => None,
            };
            if code.is_some() {
                return Failure::new(
                    Kind::Server {
                        system: "Microsoft Entra ID",
                        code,
                    },
                    Some(format!("{}: {}", answer.error, answer.error_description)),
                );
            }
        }
        return Failure::status(status.as_u16(), None, body);
    }
    e.classify()
}

/// A lease on the pooled client of `key`, building it when no trigger holds one. Does not ask
/// for a token: the first read does.
///
/// # Errors
/// The client cannot be built (named by the trigger).
pub async fn lease(
    ctx: &ScalerContext,
    key: AadKey,
) -> Result<Lease<AadKey, AadClient>, ScalerError> {
    let trigger = ctx.trigger_id();
    let rule = |message: String| {
        ScalerError::Metadata(MetadataError {
            trigger: trigger.clone(),
            kind: MetadataErrorKind::Rule(message),
        })
    };
    let token_url_shown = key.token_url().map_err(&rule)?;
    let token_url = ctx.vendor_endpoints.redirect(token_url_shown.clone());
    ctx.clients
        .pool::<AadKey, AadClient>()
        .get_or_connect(key.clone(), || async move {
            let http = |origin: &url::Url, insecure: bool| {
                let mut auth = crate::authentication::HttpAuth::default();
                auth.tls.insecure = insecure;
                HttpClient::new(&HttpClientKey {
                    origin: crate::http_client::origin(origin),
                    auth,
                    timeout: key.timeout,
                })
            };
            Ok::<_, crate::http_client::HttpClientError>(AadClient {
                api: http(&key.api, key.insecure)?,
                token_http: http(&token_url, false)?,
                token_url,
                token_url_shown,
                credentials: key.credentials.clone(),
                scope: key.scope.clone(),
                token: tokio::sync::Mutex::new(None),
                throttled_until: std::sync::Mutex::new(None),
            })
        })
        .await
        .map_err(|e| rule(e.to_string()))
}

#[async_trait::async_trait]
impl crate::pooled::SharedClient for AadClient {
    type Key = AadKey;

    async fn lease(
        ctx: &ScalerContext,
        key: AadKey,
    ) -> Result<Lease<AadKey, AadClient>, ScalerError> {
        lease(ctx, key).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_are_keda_scoped_resources() {
        assert_eq!(
            scope_of("https://management.azure.com/"),
            "https://management.azure.com/.default"
        );
        assert_eq!(
            scope_of("https://api.loganalytics.io"),
            "https://api.loganalytics.io/.default"
        );
        assert_eq!(scope_of("https://x/.default"), "https://x/.default");
    }

    #[test]
    fn retry_after_is_read_in_seconds_or_from_the_ms_header() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("x-ms-retry-after-ms", HeaderValue::from_static("1500"));
        assert_eq!(retry_after(&h), Some(2));
        h.insert("retry-after", HeaderValue::from_static("30"));
        assert_eq!(retry_after(&h), Some(30));
    }

    #[test]
    fn refused_tokens_name_the_oauth_code_and_number_only() {
        let e = HttpGetError::Status {
            status: http::StatusCode::UNAUTHORIZED,
            content_type: Some("application/json".into()),
            body: Bytes::from_static(
                br#"{"error":"invalid_client","error_description":"AADSTS7000215: Invalid client secret s3cret provided.","error_codes":[7000215],"trace_id":"t"}"#,
            ),
        };
        let text = token_failure(&e).to_string();
        assert_eq!(
            text,
            "Microsoft Entra ID answered error invalid_client (AADSTS7000215)"
        );
        let e = HttpGetError::Status {
            status: http::StatusCode::BAD_GATEWAY,
            content_type: None,
            body: Bytes::from_static(b"<html>proxy s3cret</html>"),
        };
        let text = token_failure(&e).to_string();
        assert!(text.contains("502") && !text.contains("s3cret"), "{text}");
    }

    #[test]
    fn api_errors_name_known_codes_only() {
        let status = |body: &'static [u8]| HttpGetError::Status {
            status: http::StatusCode::NOT_FOUND,
            content_type: Some("application/json".into()),
            body: Bytes::from_static(body),
        };
        let known = azure_failure(&status(
            br#"{"error":{"code":"ResourceNotFound","message":"The Resource 'x/s3cret' was not found"}}"#,
        ))
        .to_string();
        assert_eq!(known, "Azure answered error ResourceNotFound");
        let unknown = azure_failure(&status(
            br#"{"error":{"code":"s3cret-code","message":"m"}}"#,
        ))
        .to_string();
        assert!(
            unknown.contains("404") && !unknown.contains("s3cret"),
            "{unknown}"
        );
    }
}
