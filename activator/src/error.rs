//! Why a request was not forwarded, and the one place those reasons become HTTP responses.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use serde::Serialize;

/// A request the activator answered itself.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// No route matched the host and path.
    #[error("no route matched host \"{host}\" and path \"{path}\"")]
    NoRoute {
        /// The request's host.
        host: String,
        /// The request's path.
        path: String,
    },
    /// The target's hold queue on this replica is full.
    #[error("{target}: the queue of requests waiting for a ready pod is full ({depth} requests)")]
    QueueFull {
        /// `namespace/name` of the ScaledObject.
        target: String,
        /// The queue depth.
        depth: usize,
    },
    /// Holding this request would take the target's held requests past their memory limit.
    #[error(
        "{target}: the requests waiting for a ready pod hold {limit} bytes, the limit of \
         --held-request-memory"
    )]
    HeldMemoryFull {
        /// `namespace/name` of the ScaledObject.
        target: String,
        /// The limit in bytes.
        limit: usize,
    },
    /// No pod became ready (or free) in time.
    #[error("{target}: no ready pod within the hold timeout of {}", humantime(*timeout))]
    HoldTimeout {
        /// `namespace/name` of the ScaledObject.
        target: String,
        /// The hold timeout.
        timeout: Duration,
    },
    /// The pod sent no response head in time.
    #[error(
        "{target}: the pod sent no response head within the responseHeaderTimeout of {}",
        humantime(*timeout)
    )]
    ResponseTimeout {
        /// `namespace/name` of the ScaledObject.
        target: String,
        /// The timeout.
        timeout: Duration,
    },
    /// The pod failed: connection refused or reset, or the response was cut.
    #[error("{target}: forwarding to pod {pod} failed: {source}")]
    Upstream {
        /// `namespace/name` of the ScaledObject.
        target: String,
        /// The pod's address.
        pod: std::net::SocketAddr,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The activator is shutting down.
    #[error("the activator is shutting down")]
    Draining,
}

fn humantime(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

#[derive(Serialize)]
struct Body<'a> {
    error: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<&'a str>,
    message: String,
}

impl ProxyError {
    /// The status the client gets.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::NoRoute { .. } => StatusCode::NOT_FOUND,
            Self::QueueFull { .. } | Self::HeldMemoryFull { .. } | Self::Draining => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Self::HoldTimeout { .. } | Self::ResponseTimeout { .. } => StatusCode::GATEWAY_TIMEOUT,
            Self::Upstream { .. } => StatusCode::BAD_GATEWAY,
        }
    }

    /// A short reason, also used as a metric label.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NoRoute { .. } => "no_route",
            Self::QueueFull { .. } => "queue_full",
            Self::HeldMemoryFull { .. } => "held_memory_full",
            Self::HoldTimeout { .. } => "hold_timeout",
            Self::ResponseTimeout { .. } => "response_timeout",
            Self::Upstream { .. } => "upstream_error",
            Self::Draining => "draining",
        }
    }

    fn target(&self) -> Option<&str> {
        match self {
            Self::QueueFull { target, .. }
            | Self::HeldMemoryFull { target, .. }
            | Self::HoldTimeout { target, .. }
            | Self::ResponseTimeout { target, .. }
            | Self::Upstream { target, .. } => Some(target),
            Self::NoRoute { .. } | Self::Draining => None,
        }
    }

    /// What the client is told: the error's message, except that a pod's failure is not
    /// described beyond its target. The pod's address and the cause are internals (the
    /// cluster's pod network), for the activator's log only.
    fn public_message(&self) -> String {
        match self {
            Self::Upstream { target, .. } => format!("{target}: forwarding to a pod failed"),
            _ => self.to_string(),
        }
    }

    /// The response: the status and a JSON body naming the target and the reason. A pod's
    /// failure is summarized, never echoed with its address or cause.
    pub fn to_response(&self) -> Response<Bytes> {
        let body = Body {
            error: self.reason(),
            target: self.target(),
            message: self.public_message(),
        };
        let json = serde_json::to_vec(&body).unwrap_or_default();
        let mut response = Response::new(Bytes::from(json));
        *response.status_mut() = self.status();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if matches!(
            self,
            Self::QueueFull { .. } | Self::HeldMemoryFull { .. } | Self::Draining
        ) {
            headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_maps_to_its_status_with_a_json_body() {
        // (error, status, body must contain)
        let cases = [
            (
                ProxyError::NoRoute {
                    host: "x.example.com".into(),
                    path: "/a".into(),
                },
                404,
                "no route matched host \\\"x.example.com\\\"",
            ),
            (
                ProxyError::QueueFull {
                    target: "shop/web".into(),
                    depth: 3,
                },
                503,
                "\"target\":\"shop/web\"",
            ),
            (
                ProxyError::HoldTimeout {
                    target: "shop/web".into(),
                    timeout: Duration::from_millis(1500),
                },
                504,
                "hold timeout of 1500ms",
            ),
            (
                ProxyError::Upstream {
                    target: "shop/web".into(),
                    pod: "10.0.0.1:80".parse().unwrap(),
                    source: "connection reset".into(),
                },
                502,
                "\"message\":\"shop/web: forwarding to a pod failed\"",
            ),
            (
                ProxyError::HeldMemoryFull {
                    target: "shop/web".into(),
                    limit: 1024,
                },
                503,
                "\"error\":\"held_memory_full\"",
            ),
            (
                ProxyError::ResponseTimeout {
                    target: "shop/web".into(),
                    timeout: Duration::from_secs(2),
                },
                504,
                "no response head within the responseHeaderTimeout of 2s",
            ),
            (ProxyError::Draining, 503, "shutting down"),
        ];
        for (error, status, needle) in cases {
            let response = error.to_response();
            assert_eq!(response.status().as_u16(), status, "{error}");
            assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
            let body = std::str::from_utf8(response.body()).unwrap();
            assert!(body.contains(needle), "{body}");
            // The pod network stays inside: no pod address, no cause.
            assert!(
                !body.contains("10.0.0.1") && !body.contains("reset"),
                "{body}"
            );
            serde_json::from_str::<serde_json::Value>(body).unwrap();
        }
    }
}
