//! A pooled Azure Storage client: one per (service endpoint, credential, timeout), however many
//! triggers use it, leased from the shared [`ClientPools`](crate::pool::ClientPools). It signs
//! each request with the account key ([`super::shared_key`]) or appends the connection
//! string's shared access signature, and reads bounded answers.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method};

use super::shared_key;
use crate::context::{Clock, ScalerContext};
use crate::error::{ScalerError, TriggerId};
use crate::http_client::describe_url;
use crate::pool::Lease;
pub use crate::rest::Answer;
use crate::rest::{ErrorStyle, RestClient, RestError};
use crate::secret::Secret;

/// The REST API version sent as `x-ms-version` (supported by Azure Storage and Azurite).
pub const API_VERSION: &str = "2021-12-02";

/// How requests are authorized.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Credential {
    /// Shared Key with the account's key.
    SharedKey {
        /// The account name (it signs, and is not secret).
        account: String,
        /// The key as written (base64).
        key: Secret,
        /// The decoded key.
        decoded: Vec<u8>,
    },
    /// A shared access signature: query parameters appended to every request.
    Sas(Secret),
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::SharedKey { account, .. } => f
                .debug_struct("SharedKey")
                .field("account", account)
                .finish_non_exhaustive(),
            Self::Sas(_) => f.write_str("Sas(<redacted>)"),
        }
    }
}

impl Credential {
    /// The secrets that must never appear in a message.
    fn secrets(&self) -> Vec<&str> {
        match self {
            Self::SharedKey { key, .. } => vec![key.expose()],
            Self::Sas(sas) => {
                let mut secrets = vec![sas.expose()];
                // The signature alone, as a server may quote it decoded or not.
                secrets.extend(
                    sas.expose()
                        .split('&')
                        .filter_map(|kv| kv.strip_prefix("sig=")),
                );
                secrets
            }
        }
    }
}

/// What a pooled client is shared by.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StorageClientKey {
    /// The service root, ending in `/`.
    pub endpoint: url::Url,
    /// The credential.
    pub credential: Credential,
    /// Timeout of one request.
    pub timeout: Duration,
}

/// Why a request failed. Never contains an account key or a signature.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// Sending, reading the answer, or an error answer (Azure's error code, such as
    /// `QueueNotFound` or `AuthenticationFailed`, and the first line of its message).
    #[error(transparent)]
    Rest(#[from] RestError),
    /// The request could not be formed.
    #[error("{0}")]
    Request(String),
}

impl crate::remote::Classify for StorageError {
    fn classify(&self) -> crate::remote::Failure {
        match self {
            Self::Rest(e) => e.classify(),
            Self::Request(text) => crate::remote::Failure::local(text.clone()),
        }
    }
}

impl StorageError {
    /// Azure's error code, for a service error.
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Rest(RestError::Service { code, .. }) => Some(code),
            _ => None,
        }
    }
}

/// Azure's codes for credentials it does not accept.
fn credentials_hint(code: &str) -> &'static str {
    const CODES: &[&str] = &[
        "AuthenticationFailed",
        "AuthorizationFailure",
        "AuthorizationPermissionMismatch",
        "AuthorizationResourceTypeMismatch",
        "InvalidAuthenticationInfo",
        "NoAuthenticationInformation",
    ];
    if CODES.contains(&code) {
        "; check the account name and key (or shared access signature) of the trigger's \
         connection string"
    } else {
        ""
    }
}

/// How Azure Storage's error answers read: the code of the `x-ms-error-code` header, else the
/// body's.
const ERRORS: ErrorStyle = ErrorStyle {
    details: |headers: &HeaderMap, body: &[u8]| {
        let header_code = headers
            .get("x-ms-error-code")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let (code, message) = error_details(body);
        (header_code.or(code), message)
    },
    hint: credentials_hint,
    codes: &[
        "AuthenticationFailed",
        "AuthorizationFailure",
        "AuthorizationPermissionMismatch",
        "AuthorizationResourceTypeMismatch",
        "AuthorizationSourceIPMismatch",
        "AuthorizationProtocolMismatch",
        "InsufficientAccountPermissions",
        "InvalidAuthenticationInfo",
        "NoAuthenticationInformation",
        "AccountIsDisabled",
        "QueueNotFound",
        "ContainerNotFound",
        "ResourceNotFound",
        "InvalidQueryParameterValue",
        "InvalidHeaderValue",
        "InvalidResourceName",
        "InvalidUri",
        "OutOfRangeInput",
        "OutOfRangeQueryParameterValue",
        "ServerBusy",
        "InternalError",
        "OperationTimedOut",
    ],
};

/// Why a client could not be built.
#[derive(Debug, thiserror::Error)]
#[error("building the Azure Storage client failed: {0}")]
pub struct BuildError(String);

/// A pooled client. See the module docs.
pub struct StorageClient {
    rest: RestClient,
    key: StorageClientKey,
}

impl std::fmt::Debug for StorageClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StorageClient")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

/// Characters escaped in query values: everything but RFC 3986's unreserved characters, so
/// that the server decodes exactly what was signed (`+` and spaces included).
const QUERY_VALUE: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

impl StorageClient {
    /// The client of `key`. Does not connect.
    ///
    /// # Errors
    /// reqwest refuses the configuration.
    pub fn new(key: StorageClientKey) -> Result<Self, BuildError> {
        let rest = RestClient::new(key.timeout).map_err(|e| BuildError(e.to_string()))?;
        Ok(Self { rest, key })
    }

    /// The key the client was built for.
    pub fn key(&self) -> &StorageClientKey {
        &self.key
    }

    /// The URL of `segments` (each percent-encoded as one path segment) below the service root,
    /// with `query`.
    ///
    /// # Errors
    /// The endpoint cannot take a path (never for one built by [`super::StorageSettings`]).
    pub fn url(&self, segments: &[&str], query: &[(&str, &str)]) -> Result<url::Url, StorageError> {
        let mut url = self.key.endpoint.clone();
        {
            let mut path = url.path_segments_mut().map_err(|()| {
                StorageError::Request(format!(
                    "the endpoint {} cannot take a path",
                    describe_url(&self.key.endpoint)
                ))
            })?;
            path.pop_if_empty();
            path.extend(segments);
        }
        let mut parts: Vec<String> = query
            .iter()
            .map(|(k, v)| {
                format!(
                    "{k}={}",
                    percent_encoding::utf8_percent_encode(v, QUERY_VALUE)
                )
            })
            .collect();
        if let Credential::Sas(sas) = &self.key.credential {
            parts.push(sas.expose().to_string());
        }
        url.set_query((!parts.is_empty()).then(|| parts.join("&")).as_deref());
        Ok(url)
    }

    /// Sends `method` to `segments` below the service root with `query`, extra `headers` and
    /// `body`, authorized with the client's credential, and returns a 2xx answer.
    ///
    /// # Errors
    /// Sending fails or times out, Azure answers an error status, the body cannot be read or is
    /// larger than [`MAX_BODY_BYTES`](crate::http_client::MAX_BODY_BYTES), no turn came within
    /// the timeout.
    pub async fn send(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, &str)],
        headers: &[(&str, &str)],
        body: Bytes,
        clock: &Clock,
    ) -> Result<Answer, StorageError> {
        let url = self.url(segments, query)?;
        let date = clock
            .now()
            .strftime("%a, %d %b %Y %H:%M:%S GMT")
            .to_string();
        let length = body.len().to_string();
        let mut all: Vec<(&str, &str)> = vec![
            ("x-ms-date", date.as_str()),
            ("x-ms-version", API_VERSION),
            ("content-length", length.as_str()),
        ];
        all.extend_from_slice(headers);
        let authorization = match &self.key.credential {
            Credential::SharedKey {
                account, decoded, ..
            } => Some(shared_key::authorization(
                account,
                decoded,
                method.as_str(),
                &all,
                &url,
            )),
            Credential::Sas(_) => None,
        };
        let mut request = self.rest.http().request(method, url).body(body);
        for (name, value) in &all {
            request = request.header(*name, *value);
        }
        if let Some(authorization) = authorization {
            request = request.header("authorization", authorization);
        }
        Ok(self
            .rest
            .send(request, &self.key.credential.secrets(), &ERRORS)
            .await?)
    }
}

/// The `<Code>` and the first line of the `<Message>` of an Azure Storage error body.
pub fn error_details(body: &[u8]) -> (Option<String>, String) {
    let text = String::from_utf8_lossy(body);
    let Ok(doc) = crate::remote::xml(text.trim()) else {
        return (None, text.trim().chars().take(300).collect());
    };
    let find = |name: &str| {
        doc.descendants()
            .find(|n| n.has_tag_name(name))
            .and_then(|n| n.text())
            .map(|t| t.trim().to_string())
    };
    let message = find("Message").unwrap_or_default();
    // Azure appends `RequestId:...` and `Time:...` lines: noise in a condition message.
    let first = message.lines().next().unwrap_or_default();
    (find("Code"), first.chars().take(300).collect())
}

/// The error of a read's `action` of `what` (a queue or a container, with its parameter)
/// through `client`: `<action> of <what> at <endpoint> (connection)`.
pub fn query_error(
    client: &StorageClient,
    trigger: &TriggerId,
    action: &str,
    what: &str,
    e: &StorageError,
) -> ScalerError {
    use crate::remote::Classify;
    ScalerError::Query {
        trigger: trigger.clone(),
        operation: format!(
            "{action} of {what} at {} (connection)",
            describe_url(&client.key().endpoint)
        ),
        source: e.classify(),
    }
}

/// A lease on the pooled client of `key`, building it if no trigger holds one. Does not
/// connect: a wrong endpoint or key shows at the first call.
///
/// # Errors
/// The HTTP client cannot be built.
pub async fn lease(
    ctx: &ScalerContext,
    key: StorageClientKey,
) -> Result<Lease<StorageClientKey, StorageClient>, ScalerError> {
    let target = format!("Azure Storage at {}", describe_url(&key.endpoint));
    ctx.clients
        .pool::<StorageClientKey, StorageClient>()
        .get_or_connect(key.clone(), || async move { StorageClient::new(key) })
        .await
        .map_err(|e| ScalerError::Connect {
            trigger: ctx.trigger_id(),
            target,
            source: crate::remote::Failure::local(e.to_string()),
        })
}

#[async_trait::async_trait]
impl crate::pooled::SharedClient for StorageClient {
    type Key = StorageClientKey;

    async fn lease(
        ctx: &ScalerContext,
        key: StorageClientKey,
    ) -> Result<Lease<StorageClientKey, StorageClient>, ScalerError> {
        lease(ctx, key).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(credential: Credential) -> StorageClient {
        StorageClient::new(StorageClientKey {
            endpoint: url::Url::parse("http://127.0.0.1:10000/devstoreaccount1/").unwrap(),
            credential,
            timeout: Duration::from_secs(1),
        })
        .unwrap()
    }

    #[test]
    fn urls_encode_segments_and_query_values_and_carry_the_sas() {
        let c = client(Credential::SharedKey {
            account: "devstoreaccount1".into(),
            key: Secret::new("AAEC"),
            decoded: vec![0, 1, 2],
        });
        let url = c
            .url(
                &["jobs"],
                &[("restype", "container"), ("prefix", "in box/+x")],
            )
            .unwrap();
        assert_eq!(
            url.as_str(),
            "http://127.0.0.1:10000/devstoreaccount1/jobs?restype=container&prefix=in%20box%2F%2Bx"
        );
        let c = client(Credential::Sas(Secret::new("sv=1&sig=abc%2B")));
        let url = c.url(&["q", "messages"], &[("peekonly", "true")]).unwrap();
        assert_eq!(
            url.as_str(),
            "http://127.0.0.1:10000/devstoreaccount1/q/messages?peekonly=true&sv=1&sig=abc%2B"
        );
        assert_eq!(format!("{:?}", c.key().credential), "Sas(<redacted>)");
    }

    #[test]
    fn error_bodies_give_code_and_the_first_line_of_the_message() {
        let body = b"<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>QueueNotFound</Code>\
            <Message>The specified queue does not exist.\nRequestId:1\nTime:2026</Message></Error>";
        let (code, message) = error_details(body);
        assert_eq!(code.as_deref(), Some("QueueNotFound"));
        assert_eq!(message, "The specified queue does not exist.");
        let err = StorageError::from(RestError::Service {
            status: http::StatusCode::FORBIDDEN,
            code: "AuthenticationFailed".into(),
            shown: ERRORS.shown("AuthenticationFailed"),
            message: "Server failed to authenticate the request.".into(),
            hint: credentials_hint("AuthenticationFailed"),
        });
        assert_eq!(
            err.to_string(),
            "answered HTTP 403 Forbidden (AuthenticationFailed); \
             check the account name and key (or shared access signature) of the trigger's connection string"
        );
    }
}
