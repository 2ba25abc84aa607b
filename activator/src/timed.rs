//! The client's connection on hyper's path, with the deadlines of the front path
//! ([`crate::limits`]).
//!
//! hyper's own header read timeout runs from the moment it waits for a head, idle time
//! included, so it cannot tell a slow head from a quiet kept-alive connection. Here the
//! connection's reads and writes are watched instead, and the requests hyper hands to the
//! service are counted ([`Activity`]):
//!
//! - HTTP/1: with no request open, a read that finds nothing waits until the idle deadline
//!   (from the end of the last answer) or, once bytes of a head have come, the header read
//!   deadline (from its first byte); then the read fails, which ends hyper's connection.
//! - HTTP/2: with no stream open, the idle deadline runs from the end of the last answer;
//!   frames (pings, settings) do not move it, so a connection that opens no stream is closed.
//! - A write that makes no progress fails at the write deadline, on both, and on an upgraded
//!   connection, whose reads are otherwise not timed (a WebSocket may be quiet for long).

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

use crate::limits::Limits;
use crate::metrics::SharedMetrics;

/// What hyper is doing with a connection's requests, as the service sees it.
#[derive(Debug, Default)]
pub struct Activity {
    /// Requests handed to the service whose answers are not done.
    open: AtomicUsize,
    /// Answers done, ever: a change means the connection went quiet since the reader looked.
    done: AtomicU64,
    /// The connection was upgraded (101): no more HTTP on it.
    upgraded: AtomicBool,
}

impl Activity {
    /// A request was handed to the service: until the returned guard (kept by its answer's
    /// body) is dropped, the connection is busy.
    pub fn begin(self: &Arc<Self>) -> Busy {
        self.open.fetch_add(1, Ordering::Relaxed);
        Busy(Arc::clone(self))
    }

    /// The connection's answer switched protocols.
    pub fn upgraded(&self) {
        self.upgraded.store(true, Ordering::Relaxed);
    }
}

/// One open request of a connection ([`Activity::begin`]).
#[derive(Debug)]
pub struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.done.fetch_add(1, Ordering::Relaxed);
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// An answer's body, keeping its request's [`Busy`] until it is dropped (hyper drops it once
/// written, or when the connection ends).
pub struct Tracked<B> {
    body: B,
    _busy: Busy,
}

impl<B> Tracked<B> {
    /// `body`, for the request `busy` stands for.
    pub fn new(body: B, busy: Busy) -> Self {
        Self { body, _busy: busy }
    }
}

impl<B: Body<Data = Bytes> + Unpin> Body for Tracked<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// What the read deadline is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Waiting {
    /// The rest of a request head (HTTP/1).
    Head,
    /// The next request.
    Idle,
}

/// A client connection served by hyper, with its deadlines (see the module documentation).
pub struct Timed<IO> {
    io: IO,
    activity: Arc<Activity>,
    limits: Limits,
    metrics: SharedMetrics,
    http2: bool,
    waiting: Waiting,
    /// [`Activity::done`] when the reader last looked.
    done_seen: u64,
    read_deadline: Pin<Box<Sleep>>,
    /// Set while a write makes no progress.
    write_deadline: Option<Pin<Box<Sleep>>>,
    write_armed: bool,
}

impl<IO> Timed<IO> {
    /// `io`, whose (HTTP/1) first head is due within the header read timeout from now, or
    /// (`http2`) whose first stream is due within the idle timeout.
    pub fn new(
        io: IO,
        activity: Arc<Activity>,
        limits: Limits,
        metrics: SharedMetrics,
        http2: bool,
    ) -> Self {
        let (waiting, first) = if http2 {
            (Waiting::Idle, limits.idle_timeout)
        } else {
            (Waiting::Head, limits.header_read_timeout)
        };
        Self {
            io,
            activity,
            limits,
            metrics,
            http2,
            waiting,
            done_seen: 0,
            read_deadline: Box::pin(tokio::time::sleep(first)),
            write_deadline: None,
            write_armed: false,
        }
    }

    /// A write that returned `polled`: pending writes wait until the write deadline.
    fn timed_write<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.write_armed = false;
            return polled;
        }
        let at = Instant::now() + self.limits.write_timeout;
        let deadline = self
            .write_deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
        if !self.write_armed {
            deadline.as_mut().reset(at);
            self.write_armed = true;
        }
        ready!(deadline.as_mut().poll(cx));
        self.metrics.write_timeouts.inc();
        Poll::Ready(Err(io::ErrorKind::TimedOut.into()))
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Timed<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.io).poll_read(cx, buf);
        if this.activity.upgraded.load(Ordering::Relaxed) {
            return polled;
        }
        let busy = this.activity.open.load(Ordering::Relaxed) > 0;
        if !busy {
            let done = this.activity.done.load(Ordering::Relaxed);
            if done != this.done_seen {
                // Answers ended since the last look: the connection is idle from now.
                this.done_seen = done;
                this.waiting = Waiting::Idle;
                let at = Instant::now() + this.limits.idle_timeout;
                this.read_deadline.as_mut().reset(at);
            }
        }
        if polled.is_ready() {
            let got_bytes = matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before;
            if got_bytes && !busy && !this.http2 && this.waiting == Waiting::Idle {
                // The first bytes of the next head.
                this.waiting = Waiting::Head;
                let at = Instant::now() + this.limits.header_read_timeout;
                this.read_deadline.as_mut().reset(at);
            }
            return polled;
        }
        if busy {
            return Poll::Pending;
        }
        ready!(this.read_deadline.as_mut().poll(cx));
        let timeouts = match this.waiting {
            Waiting::Head => &this.metrics.header_read_timeouts,
            Waiting::Idle => &this.metrics.idle_timeouts,
        };
        timeouts.inc();
        Poll::Ready(Err(io::ErrorKind::TimedOut.into()))
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Timed<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write(cx, data);
        self.timed_write(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.timed_write(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.io).poll_flush(cx);
        self.timed_write(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// When a connection last moved a byte, either way ([`Quiet`]).
#[derive(Debug)]
pub struct LastMoved {
    base: Instant,
    /// Milliseconds from `base`.
    at: AtomicU64,
}

impl LastMoved {
    fn now() -> Self {
        Self {
            base: Instant::now(),
            at: AtomicU64::new(0),
        }
    }

    fn touch(&self) {
        let ms = u64::try_from(self.base.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.at.store(ms, Ordering::Relaxed);
    }

    fn last(&self) -> Instant {
        self.base + std::time::Duration::from_millis(self.at.load(Ordering::Relaxed))
    }
}

/// A stream that records when it last read or wrote a byte: wrapped around the pod's end of
/// an upgraded connection, it sees both directions.
#[derive(Debug)]
pub struct Quiet<IO> {
    io: IO,
    moved: Arc<LastMoved>,
}

impl<IO> Quiet<IO> {
    /// Wraps `io`; it counts as having moved now.
    pub fn new(io: IO) -> Self {
        Self {
            io,
            moved: Arc::new(LastMoved::now()),
        }
    }

    /// When it last moved a byte, for [`quiet_for`].
    pub fn seen(&self) -> Arc<LastMoved> {
        Arc::clone(&self.moved)
    }
}

/// Returns once `moved` has recorded nothing for `idle`.
pub async fn quiet_for(moved: &LastMoved, idle: std::time::Duration) {
    loop {
        let deadline = moved.last() + idle;
        if Instant::now() >= deadline {
            return;
        }
        tokio::time::sleep_until(deadline).await;
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Quiet<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.moved.touch();
        }
        polled
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Quiet<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.moved.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.moved.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
