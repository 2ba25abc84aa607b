//! Kept-alive HTTP/1.1 connections to one pod.
//!
//! Each ready pod of a target has one [`Upstream`]: a stack of idle connections (the most
//! recently used on top, so a small working set stays warm) and the code to open new ones.
//! A request takes an idle connection or opens one; the connection goes back on the stack when
//! its response has been read to the end ([`Upstream::put_back`]). A connection whose exchange
//! did not complete (client gone, error) is dropped, which closes it: HTTP/1.1 cannot abandon
//! one request and keep the connection. Each connection is driven by its own task.
//!
//! This replaces hyper-util's general-purpose pooled client on the request path: the pod is
//! already chosen when a request gets here, so there is no pool key to hash, no URI to rebuild,
//! and the request goes out in origin form as the client sent it.
//!
//! Idle connections are kept per proxy thread ([`set_proxy_thread`]): a connection's task runs
//! on the thread that opened it, so a request reuses only connections of its own thread and
//! never waits for another thread to be scheduled.

use std::cell::Cell;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::time::Instant;

use crate::edge;

/// How long connecting to a pod may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// An idle connection older than this is closed instead of reused.
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// Most idle connections kept per pod; more are closed when they come back.
const MAX_IDLE: usize = 1024;
/// Longest wait for a connection whose response is done to take requests again.
pub const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a request could not be forwarded to the pod.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// The TCP connection could not be made.
    #[error("connecting failed: {0}")]
    Connect(#[source] std::io::Error),
    /// The TCP connection was not made within the connect timeout.
    #[error("connecting timed out after {0:?}")]
    ConnectTimeout(Duration),
    /// The HTTP exchange failed (refused, reset, cut short, malformed).
    #[error(transparent)]
    Http(#[from] hyper::Error),
}

thread_local! {
    static PROXY_THREAD: Cell<usize> = const { Cell::new(0) };
}

/// Marks the current thread as proxy thread `index` (0, 1, ...): connections it opens are
/// reused by it only. Threads never marked share index 0.
pub fn set_proxy_thread(index: usize) {
    PROXY_THREAD.with(|t| t.set(index));
}

fn proxy_thread() -> usize {
    PROXY_THREAD.with(Cell::get)
}

struct Idle {
    sender: SendRequest<Incoming>,
    since: Instant,
}

/// The connections to one pod.
pub struct Upstream {
    addr: SocketAddr,
    /// Idle connections, one stack per proxy thread.
    idle: Mutex<Vec<Vec<Idle>>>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Upstream {
    /// No connection yet to `addr`.
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// The pod's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Vec<Idle>>> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Idle connections kept now, all threads together.
    pub fn idle(&self) -> usize {
        self.lock().iter().map(Vec::len).sum()
    }

    /// This thread's most recently used idle connection that is still open and not too old.
    fn take_idle(&self) -> Option<SendRequest<Incoming>> {
        let now = Instant::now();
        let mut stacks = self.lock();
        let idle = stacks.get_mut(proxy_thread())?;
        while let Some(candidate) = idle.pop() {
            if !candidate.sender.is_closed()
                && now.saturating_duration_since(candidate.since) < IDLE_TIMEOUT
            {
                return Some(candidate.sender);
            }
        }
        None
    }

    /// Gives back the connection of an exchange whose response was read to the end: at once
    /// when it can take the next request (the usual case: hyper readies it as it reads the
    /// end of the response), else once it can (a pod that answered before it had read the
    /// whole request body), for at most [`READY_TIMEOUT`].
    pub fn put_back(self: &Arc<Self>, mut sender: SendRequest<Incoming>) {
        if sender.is_ready() {
            self.keep(sender);
        } else if !sender.is_closed() {
            let this = Arc::clone(self);
            tokio::spawn(async move {
                if let Ok(Ok(())) = tokio::time::timeout(READY_TIMEOUT, sender.ready()).await {
                    this.keep(sender);
                }
            });
        }
    }

    fn keep(&self, sender: SendRequest<Incoming>) {
        let thread = proxy_thread();
        let mut stacks = self.lock();
        if stacks.len() <= thread {
            stacks.resize_with(thread + 1, Vec::new);
        }
        let idle = &mut stacks[thread];
        if idle.len() < MAX_IDLE {
            idle.push(Idle {
                sender,
                since: Instant::now(),
            });
        }
    }

    async fn connect(&self) -> Result<SendRequest<Incoming>, UpstreamError> {
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, edge::Stream::connect(self.addr))
            .await
            .map_err(|_| UpstreamError::ConnectTimeout(CONNECT_TIMEOUT))?
            .map_err(UpstreamError::Connect)?;
        let (sender, connection) = http1::Builder::new()
            .handshake(TokioIo::new(stream))
            .await?;
        tokio::spawn(async move {
            // Ends when the pod or the last sender closes the connection; an error here has
            // already been returned to the request that saw it.
            let _ = connection.with_upgrades().await;
        });
        Ok(sender)
    }

    /// Sends `request` (origin form, with its `Host` header) on an idle connection, or on a
    /// new one; a request an idle connection could not take because it was closing is sent
    /// again on a new connection. Returns the response head and the connection, to
    /// [`put_back`](Self::put_back) once the response body has been read to the end (or to
    /// drop otherwise, which closes it).
    ///
    /// # Errors
    /// [`UpstreamError`]: the pod cannot be reached or the exchange failed.
    pub async fn send(
        &self,
        mut request: Request<Incoming>,
    ) -> Result<(Response<Incoming>, SendRequest<Incoming>), UpstreamError> {
        if let Some(mut sender) = self.take_idle()
            && sender.ready().await.is_ok()
        {
            match sender.try_send_request(request).await {
                Ok(response) => return Ok((response, sender)),
                Err(mut failed) => match failed.take_message() {
                    // Never written: the pod closed the idle connection meanwhile.
                    Some(unsent) => request = unsent,
                    None => return Err(failed.into_error().into()),
                },
            }
        }
        let mut sender = self.connect().await?;
        let response = sender.send_request(request).await?;
        Ok((response, sender))
    }
}
