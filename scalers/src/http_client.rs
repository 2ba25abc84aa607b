//! A pooled HTTP client for HTTP-based scalers: one client (one connection pool) per server,
//! credentials and timeout, however many triggers use it, leased from the shared
//! [`ClientPools`](crate::pool::ClientPools). The client applies the trigger's
//! [`HttpAuth`] to every request and reads bounded response bodies.

use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use http::header::{HeaderMap, HeaderName, HeaderValue};

use crate::authentication::HttpAuth;
use crate::context::ScalerContext;
use crate::error::{MetadataError, MetadataErrorKind, ScalerError};
use crate::pool::Lease;
use crate::remote::{Classify, Failure, Kind};
use crate::tls::{TlsError, TlsSettings};

/// The most requests one pooled client has in flight at once, and so about the most connections
/// it keeps to its server (one or two more may open for a moment, see [`reqwest_client`]; at
/// most this many stay idle): a burst of polls (every object's first poll after the operator starts)
/// queues here instead of opening a connection per trigger. Below Prometheus' default
/// `--query.max-concurrency` (20), so one operator cannot fill a server's query slots alone.
pub const MAX_IN_FLIGHT: usize = 16;

/// The largest response body read (8 MiB): a metrics endpoint answering more is an error, not
/// an out-of-memory operator.
pub const MAX_BODY_BYTES: usize = 8 << 20;

/// What a pooled client is shared by: the server (`scheme://host:port`), the credentials and TLS
/// settings, and the timeout. Triggers that agree on all three share one client and its
/// keep-alive connections.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HttpClientKey {
    /// `scheme://host:port` of the server.
    pub origin: String,
    /// Authentication and TLS.
    pub auth: HttpAuth,
    /// Timeout of a whole request, body included.
    pub timeout: Duration,
}

/// Why an HTTP client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum HttpClientError {
    /// Bad TLS material.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// reqwest refused the configuration.
    #[error("building the HTTP client failed: {0}")]
    Build(String),
}

impl Classify for HttpClientError {
    fn classify(&self) -> Failure {
        // Local: TLS material and configuration.
        Failure::local(self.to_string())
    }
}

/// A reqwest client with `tls` (rustls on ring, never aws-lc) and a request `timeout`.
///
/// # Errors
/// The TLS material is invalid, or reqwest refuses the configuration.
pub fn reqwest_client(
    tls: &TlsSettings,
    timeout: Duration,
) -> Result<reqwest::Client, HttpClientError> {
    let policy = crate::client_policy::current();
    // KEDA_HTTP_DISABLE_KEEP_ALIVE: no connection is kept for the next request.
    let idle = if policy.disable_keep_alive {
        0
    } else {
        policy.max_idle_per_host.min(MAX_IN_FLIGHT)
    };
    reqwest::Client::builder()
        .timeout(timeout)
        // Connections opened beyond the in-flight limit (a connection is handed back to the
        // pool a moment after its response ends, so a request starting then may open another)
        // are closed instead of kept idle.
        .pool_max_idle_per_host(idle)
        .pool_idle_timeout(policy.idle_timeout)
        .tls_backend_preconfigured(tls.client_config()?)
        .build()
        .map_err(|e| HttpClientError::Build(e.without_url().to_string()))
}

/// Why a GET failed. Messages never contain the URL's query or credentials, nor anything the
/// server sent ([`crate::remote`]): a status shows its code and the body's size.
#[derive(Debug, thiserror::Error)]
pub enum HttpGetError {
    /// The request could not be sent or timed out.
    #[error("{0}")]
    Send(Failure),
    /// The server answered with a status other than 2xx.
    #[error("{}", self.classify())]
    Status {
        /// The status.
        status: StatusCode,
        /// The answer's `Content-Type`, as sent.
        content_type: Option<String>,
        /// The body (at most [`MAX_BODY_BYTES`]): for debug-level logs and for parsing a
        /// known error form, never for messages.
        body: Bytes,
    },
    /// No complete answer within the client's timeout.
    #[error("no answer within the timeout of {} ms", .0.as_millis())]
    TimedOut(Duration),
    /// The body could not be read.
    #[error("reading the response failed: {0}")]
    Body(Failure),
    /// The body is larger than [`MAX_BODY_BYTES`].
    #[error("the response is larger than {MAX_BODY_BYTES} bytes")]
    TooLarge,
    /// All [`MAX_IN_FLIGHT`] requests to the server stayed busy for the whole timeout.
    #[error(
        "the {MAX_IN_FLIGHT} requests this client may have in flight to the server were all busy for longer than the timeout ({0:?})"
    )]
    Busy(Duration),
    /// The namespace's reads would hold more answer bytes than its budget
    /// ([`crate::answers`]).
    #[error(transparent)]
    Budget(#[from] crate::answers::Exhausted),
}

impl Classify for HttpGetError {
    fn classify(&self) -> Failure {
        match self {
            Self::Send(f) | Self::Body(f) => f.clone(),
            Self::Status {
                status,
                content_type,
                body,
            } => Failure::status(status.as_u16(), content_type.as_deref(), body),
            other => Failure::new(Kind::Local(other.to_string()), None),
        }
    }
}

/// A pooled client and the authentication it applies.
#[derive(Debug)]
pub struct HttpClient {
    client: reqwest::Client,
    auth: HttpAuth,
    in_flight: tokio::sync::Semaphore,
    timeout: Duration,
}

impl HttpClient {
    /// Builds the client of `key`.
    ///
    /// # Errors
    /// See [`reqwest_client`].
    pub fn new(key: &HttpClientKey) -> Result<Self, HttpClientError> {
        Ok(Self {
            client: reqwest_client(&key.auth.tls, key.timeout)?,
            auth: key.auth.clone(),
            in_flight: tokio::sync::Semaphore::new(MAX_IN_FLIGHT),
            timeout: key.timeout,
        })
    }

    /// GETs `url` with the client's authentication and `headers` (added after the
    /// authentication headers), and returns the body of a 2xx answer.
    ///
    /// At most [`MAX_IN_FLIGHT`] requests run at once; more wait for a turn, at most the
    /// timeout.
    ///
    /// # Errors
    /// The request fails or times out, the status is not 2xx, the body cannot be read or is
    /// larger than [`MAX_BODY_BYTES`], no turn came within the timeout.
    pub async fn get(&self, url: url::Url, headers: &HeaderMap) -> Result<Bytes, HttpGetError> {
        self.send(http::Method::GET, url, headers, None).await
    }

    /// POSTs `body` to `url` with the client's authentication and `headers` (a query API that
    /// takes its query in the body: InfluxDB's `/api/v2/query`, Elasticsearch's `_search`), and
    /// returns the body of a 2xx answer. Bounded as [`HttpClient::get`].
    ///
    /// # Errors
    /// As [`HttpClient::get`].
    pub async fn post(
        &self,
        url: url::Url,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<Bytes, HttpGetError> {
        self.send(http::Method::POST, url, headers, Some(body))
            .await
    }

    async fn send(
        &self,
        method: http::Method,
        url: url::Url,
        headers: &HeaderMap,
        body: Option<Bytes>,
    ) -> Result<Bytes, HttpGetError> {
        let answer = self.exchange(method, url, headers, body).await?;
        if !answer.status.is_success() {
            let content_type = answer.content_type();
            return Err(HttpGetError::Status {
                status: answer.status,
                content_type,
                body: answer.body,
            });
        }
        Ok(answer.body)
    }

    /// Sends one request as [`HttpClient::get`] and [`HttpClient::post`] do (same
    /// authentication, turn, timeout and body bound) and returns the answer whatever its
    /// status, with its headers: for APIs whose headers say how to go on (GitHub's rate limit,
    /// `ETag`, `304 Not Modified`).
    ///
    /// # Errors
    /// As [`HttpClient::get`], except that a status other than 2xx is an answer, not an error.
    pub async fn exchange(
        &self,
        method: http::Method,
        mut url: url::Url,
        headers: &HeaderMap,
        body: Option<Bytes>,
    ) -> Result<HttpAnswer, HttpGetError> {
        // The permit is held until the body is read: the connection is busy until then.
        let _turn = tokio::time::timeout(self.timeout, self.in_flight.acquire())
            .await
            .ok()
            .and_then(Result::ok)
            .ok_or(HttpGetError::Busy(self.timeout))?;
        self.auth.apply_to_url(&mut url);
        let mut request = self.auth.apply(self.client.request(method, url));
        for (name, value) in headers {
            request = request.header(name, value);
        }
        if let Some(body) = body {
            request = request.body(body);
        }
        let mut response = crate::request_metrics::send(request).await.map_err(|e| {
            if e.is_timeout() {
                HttpGetError::TimedOut(self.timeout)
            } else {
                HttpGetError::Send(e.without_url().classify())
            }
        })?;
        let status = response.status();
        let response_headers = response.headers().clone();
        let mut body = Vec::new();
        let mut reading = crate::answers::Reading::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if body.len().saturating_add(chunk.len()) > MAX_BODY_BYTES {
                        return Err(HttpGetError::TooLarge);
                    }
                    reading.add(chunk.len())?;
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) if status.is_success() && e.is_timeout() => {
                    return Err(HttpGetError::TimedOut(self.timeout));
                }
                Err(e) if status.is_success() => {
                    return Err(HttpGetError::Body(e.without_url().classify()));
                }
                // The status is what matters; a broken error body is not worth reporting.
                Err(_) => break,
            }
        }
        Ok(HttpAnswer {
            status,
            headers: response_headers,
            body: Bytes::from(body),
        })
    }
}

/// An answer of [`HttpClient::exchange`], whatever its status.
#[derive(Clone, Debug)]
pub struct HttpAnswer {
    /// The status.
    pub status: StatusCode,
    /// The response headers.
    pub headers: HeaderMap,
    /// The body (at most [`MAX_BODY_BYTES`]).
    pub body: Bytes,
}

impl HttpAnswer {
    /// The `Content-Type`, as sent.
    pub fn content_type(&self) -> Option<String> {
        self.header(http::header::CONTENT_TYPE.as_str())
    }

    /// Header `name` as text, when it is valid text.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }

    /// A non-2xx answer as the error [`HttpClient::get`] would have returned.
    pub fn into_status_error(self) -> HttpGetError {
        let content_type = self.content_type();
        HttpGetError::Status {
            status: self.status,
            content_type,
            body: self.body,
        }
    }
}

/// `text` with every secret replaced by `***`. Secrets shorter than 4 characters are left
/// alone: replacing every `t` of a message would destroy it, and such a secret protects nothing.
pub(crate) fn scrub(mut text: String, secrets: &[&str]) -> String {
    for secret in secrets.iter().filter(|s| s.chars().count() >= 4) {
        text = text.replace(secret, "***");
    }
    text
}

/// `scheme://host[:port]/path` of `url`: what messages show of a URL (no credentials, no
/// query).
pub fn describe_url(url: &url::Url) -> String {
    let mut shown = format!("{}://{}", url.scheme(), url.host_str().unwrap_or_default());
    if let Some(port) = url.port() {
        shown.push_str(&format!(":{port}"));
    }
    shown.push_str(url.path());
    shown
}

/// Replacements for the fixed hosts of vendor APIs, by host name: a trigger type whose API
/// lives at a fixed host (Datadog's `api.<site>`) builds its URL there and passes it through
/// [`VendorEndpoints::redirect`]. Only the process sets them ([`ScalerContext`]'s
/// `vendor_endpoints`), so a namespace cannot move a vendor's host; tests point them at their
/// fake servers on loopback.
#[derive(Clone, Debug, Default)]
pub struct VendorEndpoints(std::sync::Arc<std::collections::BTreeMap<String, url::Url>>);

impl VendorEndpoints {
    /// Requests to `host` go to `base`'s scheme, host and port instead (the path is kept).
    #[must_use]
    pub fn with(mut self, host: &str, base: url::Url) -> Self {
        std::sync::Arc::make_mut(&mut self.0).insert(host.to_ascii_lowercase(), base);
        self
    }

    /// `url` at its replacement host when one is set for its host, else unchanged.
    pub fn redirect(&self, mut url: url::Url) -> url::Url {
        let Some(base) = url
            .host_str()
            .and_then(|h| self.0.get(&h.to_ascii_lowercase()))
        else {
            return url;
        };
        // Both are http(s) URLs with a host, so these cannot fail; on failure the URL keeps
        // the vendor's host (never a half-changed one).
        let original = url.clone();
        if url.set_scheme(base.scheme()).is_err()
            || url.set_host(base.host_str()).is_err()
            || url.set_port(base.port()).is_err()
        {
            return original;
        }
        url
    }
}

/// The host (and port) of a URL template as written, without user information: Go's
/// `url.URL.Host`, which KEDA's ActiveMQ and Artemis scalers take as the management endpoint.
/// Empty without `://`.
pub fn written_host(template: &str) -> String {
    let Some((_, rest)) = template.split_once("://") else {
        return String::new();
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host)
        .to_string()
}

/// `scheme://host:port` of `url` (the port made explicit), for a pool key.
pub fn origin(url: &url::Url) -> String {
    format!(
        "{}://{}:{}",
        url.scheme(),
        url.host_str().unwrap_or_default(),
        url.port_or_known_default().unwrap_or(0)
    )
}

/// Parses `param`'s value as an `http://` or `https://` URL.
///
/// # Errors
/// Not a URL, or another scheme; the message names `param` and shows the value without its
/// credentials.
pub fn parse_http_url(
    p: &crate::metadata::MetadataParser<'_>,
    param: &crate::metadata::Param,
    value: &str,
) -> Result<url::Url, MetadataError> {
    let url = url::Url::parse(value).map_err(|e| {
        p.rule(format!(
            "parameter \"{}\" is not a valid URL ({e}); write it as http://host:port/path",
            param.name
        ))
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(p.rule(format!(
            "parameter \"{}\" must be an http:// or https:// URL, not {}:",
            param.name,
            url.scheme()
        )));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(p.rule(format!(
            "parameter \"{}\" has no host; write it as http://host:port/path",
            param.name
        )));
    }
    Ok(url)
}

/// A lease on the pooled client of `key`, building it if no trigger holds one.
///
/// # Errors
/// The TLS material of the trigger's authentication is invalid (named by parameter).
pub async fn lease(
    ctx: &ScalerContext,
    key: HttpClientKey,
) -> Result<Lease<HttpClientKey, HttpClient>, ScalerError> {
    ctx.clients
        .pool::<HttpClientKey, HttpClient>()
        .get_or_connect(key.clone(), || async { HttpClient::new(&key) })
        .await
        .map_err(|e| {
            ScalerError::Metadata(MetadataError {
                trigger: ctx.trigger_id(),
                kind: MetadataErrorKind::Rule(e.to_string()),
            })
        })
}

/// Headers as given, checked: `(name, value)` pairs that are not valid HTTP come back as an
/// error naming `param`.
///
/// # Errors
/// A name or value is not valid in an HTTP header.
pub fn header_map<'a>(
    p: &crate::metadata::MetadataParser<'_>,
    param: &crate::metadata::Param,
    pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<HeaderMap, MetadataError> {
    let mut headers = HeaderMap::new();
    for (name, value) in pairs {
        let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            p.rule(format!(
                "parameter \"{}\": \"{name}\" is not a valid HTTP header name",
                param.name
            ))
        })?;
        let value = HeaderValue::from_str(value).map_err(|_| {
            p.rule(format!(
                "parameter \"{}\": the value of header \"{name}\" is not valid in HTTP",
                param.name
            ))
        })?;
        headers.append(header, value);
    }
    Ok(headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_shown_without_credentials_or_query() {
        let url = url::Url::parse("https://u:p@h.example:8443/a/b?api_key=s3cret").unwrap();
        assert_eq!(describe_url(&url), "https://h.example:8443/a/b");
        assert_eq!(origin(&url), "https://h.example:8443");
        let url = url::Url::parse("http://prometheus.monitoring/").unwrap();
        assert_eq!(origin(&url), "http://prometheus.monitoring:80");
    }

    #[test]
    fn status_errors_show_code_and_size_not_the_body_and_hint_at_credentials() {
        let err = HttpGetError::Status {
            status: StatusCode::UNAUTHORIZED,
            content_type: Some("text/plain".into()),
            body: Bytes::from_static(b"Unauthorized"),
        };
        assert_eq!(
            err.to_string(),
            "answered HTTP 401 Unauthorized (12 bytes of text/plain); check the trigger's authModes and its credentials"
        );
        let err = HttpGetError::Status {
            status: StatusCode::NOT_FOUND,
            content_type: None,
            body: Bytes::new(),
        };
        assert_eq!(err.to_string(), "answered HTTP 404 Not Found (0 bytes)");
        assert_eq!(scrub("a s3cret b".into(), &["s3cret", ""]), "a *** b");
        assert_eq!(scrub("a test".into(), &["t"]), "a test");
    }
}
