//! The client side of the explain endpoint, for `keda-rs explain`.
//!
//! In a cluster the operator is reached through the API server's service proxy
//! (`/api/v1/namespaces/{ns}/services/{service}:{port}/proxy/explain/v1/...`) with the user's
//! own kubeconfig: the API server authenticates the user and checks `get` on `services/proxy`;
//! the user's bearer token travels in [`PROXIED_TOKEN_HEADER`] (the API server drops
//! `Authorization` once it has used it) and the operator checks it again, with a `get` on the
//! object itself. Next to the operator (a port-forward, a local run) the endpoint is asked
//! directly over HTTP with `Authorization: Bearer`.

use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode, header};
use http_body_util::{BodyExt as _, Empty, Full};
use kube::client::ConfigExt as _;
use tower::{Layer as _, Service as _, ServiceExt as _};

use super::Explanation;
use super::server::{ObjectKind, PATH_PREFIX, PROXIED_TOKEN_HEADER};

/// How long one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// How many times a `503` (a standby replica, an operator starting) or a `429` (the
/// operator's review budget is spent) is retried.
const ATTEMPTS: u32 = 4;

/// The longest `Retry-After` of a `429` that is waited for; a longer one fails at once.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(5);

/// Where the explain endpoint is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// Through the API server's service proxy.
    ServiceProxy {
        /// The operator's namespace.
        namespace: String,
        /// Its Service.
        service: String,
        /// The Service port's name or number.
        port: String,
    },
    /// Directly, `http://host:port`.
    Direct(String),
}

/// Why `keda-rs explain` got no explanation. Each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The kubeconfig user has no bearer token to send.
    #[error(
        "the kubeconfig user authenticates without a bearer token (a client certificate?): the operator needs one to check who asks; pass --token (for example from `kubectl create token <service-account>`)"
    )]
    NoToken,
    /// The kubeconfig's credentials could not be read.
    #[error("cannot read the kubeconfig user's token: {0}")]
    Token(String),
    /// `--operator-url` is not `http://host:port`.
    #[error("--operator-url {0:?} is not http://HOST:PORT")]
    BadUrl(String),
    /// The request could not be sent or answered.
    #[error("cannot reach the explain endpoint at {at}: {reason}")]
    Unreachable {
        /// Where.
        at: String,
        /// Why.
        reason: String,
    },
    /// The API server has no such Service port.
    #[error(
        "the API server found no operator at {at} ({message}): is keda-rs installed there? See --operator-namespace and --operator-service"
    )]
    NoOperator {
        /// Where.
        at: String,
        /// The API server's message.
        message: String,
    },
    /// The API server refused the proxy request.
    #[error(
        "the API server refused to proxy to {at} ({message}): explain needs `get` on services/proxy of the operator's Service"
    )]
    ProxyRefused {
        /// Where.
        at: String,
        /// The API server's message.
        message: String,
    },
    /// The operator answered with an error.
    #[error("the operator answered {status}: {message}")]
    Refused {
        /// The status.
        status: u16,
        /// Its message.
        message: String,
        /// Its `Retry-After`, in whole seconds, when it had one.
        retry_after: Option<u64>,
    },
    /// The answer is not an explanation.
    #[error("the operator's answer is not an explanation: {0}")]
    Decode(String),
}

/// The bearer token the kubeconfig's user sends (a static token, a token file, or the output
/// of an exec plugin); `None` for client-certificate users.
///
/// # Errors
/// [`FetchError::Token`] when the credentials cannot be read (an exec plugin fails).
pub async fn kubeconfig_token(config: &kube::Config) -> Result<Option<String>, FetchError> {
    let layer = config
        .auth_layer()
        .map_err(|e| FetchError::Token(e.to_string()))?;
    let Some(layer) = layer else {
        return Ok(None);
    };
    // kube's own authentication layer writes the header; a service that only reads it back.
    let capture = tower::service_fn(|request: Request<Empty<Bytes>>| async move {
        Ok::<_, tower::BoxError>(http::Response::new(
            request
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
        ))
    });
    let mut service = layer.layer(capture);
    let request = Request::get("/")
        .body(Empty::<Bytes>::new())
        .map_err(|e| FetchError::Token(e.to_string()))?;
    let header = service
        .ready()
        .await
        .map_err(|e| FetchError::Token(e.to_string()))?
        .call(request)
        .await
        .map_err(|e| FetchError::Token(e.to_string()))?
        .into_body();
    Ok(header.and_then(|h| {
        let (scheme, token) = h.split_once(' ')?;
        scheme
            .eq_ignore_ascii_case("bearer")
            .then(|| token.trim().to_string())
    }))
}

/// The endpoint's path for one object.
pub fn object_path(kind: ObjectKind, namespace: &str, name: &str) -> String {
    format!("{PATH_PREFIX}{namespace}/{}/{name}", kind.resource())
}

/// The API server path that proxies `path` to the endpoint.
pub fn proxy_path(namespace: &str, service: &str, port: &str, path: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/services/{service}:{port}/proxy{path}")
}

/// Asks `endpoint` for the explanation of one object with `token`; `client` (the user's
/// kubeconfig) is used for [`Endpoint::ServiceProxy`]. A `503` is retried a few times, as the
/// Service may route to a standby replica, and so is a `429` after its `Retry-After` (up to
/// [`MAX_RETRY_AFTER`]).
///
/// # Errors
/// See [`FetchError`].
pub async fn fetch(
    client: Option<&kube::Client>,
    endpoint: &Endpoint,
    token: &str,
    kind: ObjectKind,
    namespace: &str,
    name: &str,
) -> Result<Explanation, FetchError> {
    let path = object_path(kind, namespace, name);
    let mut attempt = 1;
    loop {
        let answer = match (endpoint, client) {
            (Endpoint::Direct(url), _) => direct(url, &path, token).await,
            (
                Endpoint::ServiceProxy {
                    namespace: ns,
                    service,
                    port,
                },
                Some(client),
            ) => proxied(client, &proxy_path(ns, service, port, &path), token).await,
            (Endpoint::ServiceProxy { .. }, None) => Err(FetchError::Unreachable {
                at: path.clone(),
                reason: "no Kubernetes client".to_string(),
            }),
        };
        let pause = match &answer {
            Err(FetchError::Refused { status: 503, .. }) => Some(Duration::from_millis(500)),
            Err(FetchError::Refused {
                status: 429,
                retry_after,
                ..
            }) => Some(Duration::from_secs(retry_after.unwrap_or(1)))
                .filter(|wait| *wait <= MAX_RETRY_AFTER),
            _ => None,
        };
        match pause {
            Some(pause) if attempt < ATTEMPTS => {
                attempt += 1;
                tokio::time::sleep(pause).await;
            }
            _ => return answer,
        }
    }
}

/// `Retry-After` in whole seconds (the operator never sends the date form).
fn retry_after(headers: &http::HeaderMap) -> Option<u64> {
    headers
        .get(header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn decode(
    at: &str,
    (status, headers): (StatusCode, &http::HeaderMap),
    body: &[u8],
    proxied: bool,
) -> Result<Explanation, FetchError> {
    if status.is_success() {
        return serde_json::from_slice(body).map_err(|e| FetchError::Decode(e.to_string()));
    }
    let value: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    // The operator's errors are `{"error": ...}`; the API server's are Status objects.
    if let Some(message) = value.get("error").and_then(|m| m.as_str()) {
        return Err(FetchError::Refused {
            status: status.as_u16(),
            message: message.to_string(),
            retry_after: retry_after(headers),
        });
    }
    let message = value.get("message").and_then(|m| m.as_str()).map_or_else(
        || String::from_utf8_lossy(body).trim().to_string(),
        str::to_string,
    );
    let at = at.to_string();
    match status {
        StatusCode::NOT_FOUND if proxied => Err(FetchError::NoOperator { at, message }),
        StatusCode::FORBIDDEN | StatusCode::UNAUTHORIZED if proxied => {
            Err(FetchError::ProxyRefused { at, message })
        }
        _ => Err(FetchError::Refused {
            status: status.as_u16(),
            message,
            retry_after: retry_after(headers),
        }),
    }
}

async fn proxied(
    client: &kube::Client,
    path: &str,
    token: &str,
) -> Result<Explanation, FetchError> {
    let request = Request::get(path)
        .header(PROXIED_TOKEN_HEADER, format!("Bearer {token}"))
        .body(Vec::new())
        .map_err(|e| FetchError::Unreachable {
            at: path.to_string(),
            reason: e.to_string(),
        })?;
    let unreachable = |reason: String| FetchError::Unreachable {
        at: path.to_string(),
        reason,
    };
    let response = tokio::time::timeout(REQUEST_TIMEOUT, client.send(request.map(Into::into)))
        .await
        .map_err(|_| unreachable(format!("no answer within {REQUEST_TIMEOUT:?}")))?
        .map_err(|e| unreachable(e.to_string()))?;
    let status = response.status();
    let headers = response.headers().clone();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| unreachable(e.to_string()))?
        .to_bytes();
    decode(path, (status, &headers), &body, true)
}

async fn direct(url: &str, path: &str, token: &str) -> Result<Explanation, FetchError> {
    let uri: http::Uri = url
        .parse()
        .map_err(|_| FetchError::BadUrl(url.to_string()))?;
    if uri.scheme_str() != Some("http") {
        return Err(FetchError::BadUrl(url.to_string()));
    }
    let authority = uri
        .authority()
        .ok_or_else(|| FetchError::BadUrl(url.to_string()))?
        .clone();
    let at = format!("{url}{path}");
    let unreachable = |reason: String| FetchError::Unreachable {
        at: at.clone(),
        reason,
    };
    let exchange = async {
        let port = authority.port_u16().unwrap_or(80);
        let stream = tokio::net::TcpStream::connect((authority.host(), port))
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .map_err(|e| unreachable(e.to_string()))?;
        tokio::spawn(connection);
        let request = Request::get(path)
            .header(header::HOST, authority.as_str())
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .body(Full::new(Bytes::new()))
            .map_err(|e| unreachable(e.to_string()))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let status = response.status();
        let headers = response.headers().clone();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| unreachable(e.to_string()))?
            .to_bytes();
        Ok::<_, FetchError>((status, headers, body))
    };
    let (status, headers, body) = tokio::time::timeout(REQUEST_TIMEOUT, exchange)
        .await
        .map_err(|_| unreachable(format!("no answer within {REQUEST_TIMEOUT:?}")))??;
    decode(&at, (status, &headers), &body, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_proxy_path_names_the_service_port_and_the_object() {
        let path = object_path(ObjectKind::ScaledObject, "team", "orders");
        assert_eq!(path, "/explain/v1/namespaces/team/scaledobjects/orders");
        assert_eq!(
            proxy_path("keda", "keda-operator", "explain", &path),
            "/api/v1/namespaces/keda/services/keda-operator:explain/proxy/explain/v1/namespaces/team/scaledobjects/orders"
        );
    }

    #[test]
    fn an_api_server_404_through_the_proxy_names_the_install() {
        let body = br#"{"kind":"Status","message":"services \"keda-operator\" not found"}"#;
        let error = decode(
            "/api/x",
            (StatusCode::NOT_FOUND, &http::HeaderMap::new()),
            body,
            true,
        )
        .expect_err("404");
        assert!(matches!(error, FetchError::NoOperator { .. }), "{error}");
        assert!(
            error.to_string().contains("--operator-namespace"),
            "{error}"
        );
    }

    #[test]
    fn an_operator_error_is_passed_on() {
        let body = br#"{"error":"forbidden: user \"mallory\" cannot get"}"#;
        let error = decode(
            "/x",
            (StatusCode::FORBIDDEN, &http::HeaderMap::new()),
            body,
            true,
        )
        .expect_err("403");
        assert!(
            matches!(error, FetchError::Refused { status: 403, .. }),
            "{error}"
        );
    }

    #[test]
    fn a_429_keeps_its_retry_after() {
        let mut headers = http::HeaderMap::new();
        headers.insert(header::RETRY_AFTER, http::HeaderValue::from_static("2"));
        let body = br#"{"error":"too many explain requests to check: try again in 2s"}"#;
        let error =
            decode("/x", (StatusCode::TOO_MANY_REQUESTS, &headers), body, false).expect_err("429");
        assert!(
            matches!(
                error,
                FetchError::Refused {
                    status: 429,
                    retry_after: Some(2),
                    ..
                }
            ),
            "{error:?}"
        );
    }

    #[tokio::test]
    async fn a_static_kubeconfig_token_is_read_and_a_certificate_user_has_none() {
        let mut config = kube::Config::new("https://127.0.0.1:6443".parse().expect("url"));
        config.auth_info.token = Some("s3cret".to_string().into());
        assert_eq!(
            kubeconfig_token(&config).await.expect("token").as_deref(),
            Some("s3cret")
        );
        let bare = kube::Config::new("https://127.0.0.1:6443".parse().expect("url"));
        assert_eq!(kubeconfig_token(&bare).await.expect("none"), None);
    }
}
