//! What the signed REST clients of the cloud scalers ([`crate::aws::client`],
//! [`crate::azure::client`]) share: the turn among a client's requests in flight, sending,
//! reading a bounded answer, and the errors of those steps. Each client keeps what differs per
//! service: signing, where the error code of an answer is, and which codes mean wrong
//! credentials.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};

use crate::http_client::{HttpClientError, MAX_BODY_BYTES, MAX_IN_FLIGHT, reqwest_client, scrub};
use crate::remote::{Classify, Failure, Kind};
use crate::tls::TlsSettings;

/// Why a request failed in a step every service shares. Never contains a secret the caller
/// named, nor text the service sent ([`crate::remote`]): an error answer shows its status and
/// its code only when the code is one of the service's known codes.
#[derive(Debug, thiserror::Error)]
pub enum RestError {
    /// The request could not be sent (unreachable endpoint, TLS, ...).
    #[error("{0}")]
    Send(Failure),
    /// No complete answer within the timeout.
    #[error("no answer within the timeout of {} ms", .0.as_millis())]
    TimedOut(Duration),
    /// The service answered an error.
    #[error("answered HTTP {status} ({}){hint}", shown.unwrap_or("an error code that is not shown"))]
    Service {
        /// The status.
        status: StatusCode,
        /// The service's error code as sent, or `unknown`: for decisions, never for messages.
        code: String,
        /// `code` when it is one of the service's known codes ([`ErrorStyle::codes`]).
        shown: Option<&'static str>,
        /// The service's message, shortened: debug-level logs only.
        message: String,
        /// What to check when `code` means the credentials were refused, or empty.
        hint: &'static str,
    },
    /// The body could not be read, or is larger than [`MAX_BODY_BYTES`].
    #[error("reading the response failed: {0}")]
    Body(Failure),
    /// All [`MAX_IN_FLIGHT`] requests of the client stayed busy for the whole timeout.
    #[error(
        "the {MAX_IN_FLIGHT} requests this client may have in flight were all busy for longer than the timeout ({0:?})"
    )]
    Busy(Duration),
}

impl Classify for RestError {
    fn classify(&self) -> Failure {
        match self {
            Self::Send(f) | Self::Body(f) => f.clone(),
            Self::Service { code, message, .. } => Failure::new(
                Kind::Local(self.to_string()),
                Some(format!("{code}: {message}")),
            ),
            other => Failure::local(other.to_string()),
        }
    }
}

/// A 2xx answer.
#[derive(Debug)]
pub struct Answer {
    /// The status.
    pub status: StatusCode,
    /// The headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
}

/// How a service's error answers read: the code and message of an answer's headers and body,
/// and the hint for a code that means wrong credentials.
pub struct ErrorStyle {
    /// The code (if any) and the message of an error answer.
    pub details: fn(&HeaderMap, &[u8]) -> (Option<String>, String),
    /// The hint for a code, or empty.
    pub hint: fn(&str) -> &'static str,
    /// The service's error codes that may be shown (a code is the service's text: one outside
    /// this vocabulary is logged at debug level only). A code matches after any `prefix#`.
    pub codes: &'static [&'static str],
}

impl ErrorStyle {
    /// `code` as one of [`ErrorStyle::codes`].
    pub fn shown(&self, code: &str) -> Option<&'static str> {
        let bare = code.rsplit('#').next().unwrap_or(code);
        self.codes.iter().find(|c| **c == bare).copied()
    }
}

/// A reqwest client and the limit of its requests in flight.
#[derive(Debug)]
pub struct RestClient {
    http: reqwest::Client,
    in_flight: tokio::sync::Semaphore,
    timeout: Duration,
}

impl RestClient {
    /// A client whose requests time out after `timeout`. Does not connect.
    ///
    /// # Errors
    /// reqwest refuses the configuration.
    pub fn new(timeout: Duration) -> Result<Self, HttpClientError> {
        Ok(Self {
            http: reqwest_client(&TlsSettings::default(), timeout)?,
            in_flight: tokio::sync::Semaphore::new(MAX_IN_FLIGHT),
            timeout,
        })
    }

    /// The client to build requests with.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// Sends `request` when a turn comes and returns a 2xx answer; an error answer becomes
    /// [`RestError::Service`] as `style` reads it. `secrets` are replaced by `***` in every
    /// message.
    ///
    /// # Errors
    /// No turn came within the timeout, sending fails or times out, the body cannot be read or
    /// is larger than [`MAX_BODY_BYTES`], the service answers an error status.
    pub async fn send(
        &self,
        request: reqwest::RequestBuilder,
        secrets: &[&str],
        style: &ErrorStyle,
    ) -> Result<Answer, RestError> {
        let timeout = self.timeout;
        // The permit is held until the body is read: the connection is busy until then.
        let _turn = tokio::time::timeout(timeout, self.in_flight.acquire())
            .await
            .ok()
            .and_then(Result::ok)
            .ok_or(RestError::Busy(timeout))?;
        let scrub = |text: String| scrub(text, secrets);
        let mut response = request.send().await.map_err(|e| {
            if e.is_timeout() {
                RestError::TimedOut(timeout)
            } else {
                RestError::Send(e.without_url().classify())
            }
        })?;
        let status = response.status();
        let mut body = Vec::new();
        let mut reading = crate::answers::Reading::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if body.len().saturating_add(chunk.len()) > MAX_BODY_BYTES {
                        return Err(RestError::Body(Failure::local(format!(
                            "the response is larger than {MAX_BODY_BYTES} bytes"
                        ))));
                    }
                    reading
                        .add(chunk.len())
                        .map_err(|e| RestError::Body(Failure::local(e.to_string())))?;
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) if e.is_timeout() => return Err(RestError::TimedOut(timeout)),
                Err(e) => return Err(RestError::Body(e.without_url().classify())),
            }
        }
        if !status.is_success() {
            let (code, message) = (style.details)(response.headers(), &body);
            let code = scrub(code.unwrap_or_else(|| "unknown".into()));
            return Err(RestError::Service {
                status,
                hint: (style.hint)(&code),
                shown: style.shown(&code),
                code,
                message: scrub(message),
            });
        }
        Ok(Answer {
            status,
            headers: response.headers().clone(),
            body: Bytes::from(body),
        })
    }
}
