//! A loopback fake whose answers carry response headers (rate limits, `ETag`, `Set-Cookie`),
//! which `common/http.rs`'s `TestServer` does not send. Requests are recorded.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use http::{HeaderMap, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;

/// A request as the fake saw it.
#[derive(Clone, Debug)]
pub struct Request {
    /// `GET`, `POST`, ...
    pub method: String,
    /// Path and query.
    pub uri: String,
    /// The request headers.
    pub headers: HeaderMap,
    /// The body, as text (lossy).
    pub body: String,
}

impl Request {
    /// Header `name` as text.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }

    /// The decoded query parameter `name`.
    pub fn query(&self, name: &str) -> Option<String> {
        let url = url::Url::parse(&format!("http://x{}", self.uri)).ok()?;
        url.query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    }

    /// The path, without the query.
    pub fn path(&self) -> &str {
        self.uri.split('?').next().unwrap_or_default()
    }
}

/// Status, headers, body (sent as JSON).
pub type Answer = (StatusCode, Vec<(&'static str, String)>, String);

/// The fake: answers with `handler`, records every request; stops when dropped.
pub struct Fake {
    /// Where it listens.
    pub addr: SocketAddr,
    requests: Arc<Mutex<Vec<Request>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Fake {
    /// A fake on a free loopback port.
    pub async fn start(handler: impl Fn(&Request) -> Answer + Send + Sync + 'static) -> Self {
        let handler = Arc::new(handler);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let task = {
            let requests = requests.clone();
            tokio::spawn(async move {
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        continue;
                    };
                    let handler = handler.clone();
                    let requests = requests.clone();
                    tokio::spawn(async move {
                        let service = service_fn(move |request: hyper::Request<Incoming>| {
                            let handler = handler.clone();
                            let requests = requests.clone();
                            async move {
                                let (parts, body) = request.into_parts();
                                let body = body
                                    .collect()
                                    .await
                                    .map(|b| b.to_bytes())
                                    .unwrap_or_default();
                                let seen = Request {
                                    method: parts.method.to_string(),
                                    uri: parts
                                        .uri
                                        .path_and_query()
                                        .map(|p| p.to_string())
                                        .unwrap_or_default(),
                                    headers: parts.headers,
                                    body: String::from_utf8_lossy(&body).into_owned(),
                                };
                                requests.lock().expect("requests").push(seen.clone());
                                let (status, headers, body) = handler(&seen);
                                let mut response = hyper::Response::builder()
                                    .status(status)
                                    .header("content-type", "application/json; charset=utf-8");
                                for (name, value) in headers {
                                    response = response.header(name, value);
                                }
                                Ok::<_, Infallible>(
                                    response
                                        .body(Full::new(Bytes::from(body)))
                                        .expect("response"),
                                )
                            }
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
            })
        };
        Self {
            addr,
            requests,
            task,
        }
    }

    /// `http://127.0.0.1:port`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The requests so far.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().expect("requests").clone()
    }
}
