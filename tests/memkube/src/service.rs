//! Serving: the in-process `tower::Service` for `kube::Client`, and a loopback HTTP listener.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::StreamExt;
use http::{Request, Response, header};
use http_body_util::{BodyExt, Full, StreamBody, combinators::UnsyncBoxBody};
use hyper::body::{Body, Frame};
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

use crate::error::ApiError;
use crate::handler::Reply;
use crate::server::Inner;

/// The response body of every reply: a full JSON document or a watch stream.
pub type ResponseBody = UnsyncBoxBody<Bytes, Infallible>;

/// The API server as a `tower::Service`; `kube::Client::new(service, "default")` uses it.
#[derive(Clone)]
pub struct MemKubeService {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for MemKubeService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemKubeService").finish_non_exhaustive()
    }
}

impl MemKubeService {
    pub(crate) fn new(inner: Arc<Inner>) -> Self {
        Self { inner }
    }
}

impl<B> tower::Service<Request<B>> for MemKubeService
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: std::fmt::Display,
{
    type Response = Response<ResponseBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let inner = self.inner.clone();
        Box::pin(async move { Ok(serve(&inner, request).await) })
    }
}

async fn serve<B>(inner: &Inner, request: Request<B>) -> Response<ResponseBody>
where
    B: Body<Data = Bytes>,
    B::Error: std::fmt::Display,
{
    let (parts, body) = request.into_parts();
    let reply = match body.collect().await {
        Ok(collected) => inner.handle(
            &parts.method,
            &parts.uri,
            &parts.headers,
            collected.to_bytes(),
        ),
        Err(error) => {
            ApiError::bad_request(format!("cannot read the request body: {error}")).into()
        }
    };
    into_response(reply)
}

fn into_response(reply: Reply) -> Response<ResponseBody> {
    let (code, body) = match reply {
        Reply::Json(code, value) => (
            code,
            Full::new(Bytes::from(serde_json::to_vec(&value).unwrap_or_default())).boxed_unsync(),
        ),
        Reply::Watch(frames) => {
            let stream = futures::stream::unfold(frames, |mut frames| async move {
                frames.recv().await.map(|frame| (frame, frames))
            })
            .map(|frame| Ok::<_, Infallible>(Frame::data(frame)));
            (200, StreamBody::new(stream).boxed_unsync())
        }
    };
    let mut response = Response::new(body);
    *response.status_mut() =
        http::StatusCode::from_u16(code).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

/// A loopback listener serving the API over plain HTTP; stops (with its connections) on drop.
#[derive(Debug)]
pub struct Loopback {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for Loopback {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Loopback {
    pub(crate) async fn start(inner: Arc<Inner>) -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            // Owned by this task: aborting the task drops the set, which aborts every connection.
            let mut connections = JoinSet::new();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let inner = inner.clone();
                let service = hyper::service::service_fn(move |request| {
                    let inner = inner.clone();
                    async move { Ok::<_, Infallible>(serve(&inner, request).await) }
                });
                connections.spawn(async move {
                    let builder = hyper_util::server::conn::auto::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    );
                    // A client hanging up mid-watch is normal; nothing to report.
                    let _ = builder
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
                while connections.try_join_next().is_some() {}
            }
        });
        Ok(Self { addr, task })
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A `kube::Config` for this server, default namespace `default`.
    pub fn config(&self) -> kube::Config {
        let uri = self.url().parse().unwrap_or_default();
        kube::Config::new(uri)
    }

    /// A `kube::Client` talking to this server over TCP.
    ///
    /// # Errors
    /// When kube cannot build its HTTP stack.
    pub fn client(&self) -> Result<kube::Client, kube::Error> {
        kube::Client::try_from(self.config())
    }

    /// A kubeconfig document pointing at this server (context `memkube`, namespace `default`).
    pub fn kubeconfig_yaml(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: memkube\n  cluster:\n    server: {}\ncontexts:\n- name: memkube\n  context:\n    cluster: memkube\n    user: memkube\n    namespace: default\ncurrent-context: memkube\nusers:\n- name: memkube\n  user: {{}}\n",
            self.url()
        )
    }

    /// Writes [`kubeconfig_yaml`](Self::kubeconfig_yaml) to `path`, for child processes
    /// (`KUBECONFIG=<path>`).
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn write_kubeconfig(&self, path: impl AsRef<std::path::Path>) -> std::io::Result<()> {
        std::fs::write(path, self.kubeconfig_yaml())
    }
}
