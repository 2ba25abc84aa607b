//! A TCP stream that learns a socket is drained from a short read, as nginx does.
//!
//! tokio's sockets are registered edge-triggered, and a tokio `TcpStream` forgets that a
//! socket is readable only when a read fails with `WouldBlock`: after each message that fits
//! in one read, the next read is a system call that finds nothing. On a proxy that is two
//! wasted calls per request (the client's side and the pod's), a few percent of its CPU.
//! A read that returns less than the room it was given has emptied the socket's receive
//! queue; [`Stream`] then clears tokio's readiness, so the next read waits for the next edge,
//! which any data arriving after that read raises.
//!
//! That is exact only when no readiness can be recorded between the read and the clear: on a
//! current-thread runtime (the proxy threads', [`crate::server::spawn_proxy_threads`]) the
//! I/O driver runs only between task polls, so it holds. On a multi-threaded runtime another
//! worker may record an edge in between, and clearing it would lose it; there the stream
//! reads as tokio does.

use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::BufMut;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;
use tokio::runtime::{Handle, RuntimeFlavor};

/// A TCP stream that skips the empty read after a short one (see the module documentation).
#[derive(Debug)]
pub struct Stream {
    io: TcpStream,
    /// Whether this stream's runtime is current-thread, where clearing after a short read
    /// cannot lose an edge.
    clear_on_short_read: bool,
}

impl Stream {
    /// Wraps an accepted or connected stream, with `TCP_NODELAY` (small answers go out at
    /// once, not after a delayed ACK).
    ///
    /// # Errors
    /// `TCP_NODELAY` cannot be set.
    pub fn new(io: TcpStream) -> io::Result<Self> {
        io.set_nodelay(true)?;
        let clear_on_short_read = Handle::try_current()
            .is_ok_and(|handle| handle.runtime_flavor() == RuntimeFlavor::CurrentThread);
        Ok(Self {
            io,
            clear_on_short_read,
        })
    }

    /// Connects to `addr`.
    ///
    /// # Errors
    /// The connection cannot be made.
    pub async fn connect(addr: SocketAddr) -> io::Result<Self> {
        Self::new(TcpStream::connect(addr).await?)
    }

    /// Reads into the spare room of `buf`; `Ok(0)` is the end of the stream.
    pub fn poll_read_buf(
        &self,
        cx: &mut Context<'_>,
        buf: &mut impl BufMut,
    ) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.io.poll_read_ready(cx))?;
            let offered = buf.chunk_mut().len();
            match self.io.try_read_buf(buf) {
                Ok(n) => {
                    if self.clear_on_short_read && n > 0 && n < offered {
                        // The receive queue is empty now. The closure "finds" it so: tokio
                        // clears readiness on its `WouldBlock`.
                        let _ = self.io.try_io(Interest::READABLE, || {
                            Err::<(), _>(io::ErrorKind::WouldBlock.into())
                        });
                    }
                    return Poll::Ready(Ok(n));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    /// Whether the peer has sent something (data or the end of the stream) since the last
    /// read emptied the socket; without a system call when tokio has seen no edge since. For
    /// a kept-alive idle connection, anything at all means it cannot take the next request.
    /// What it finds may be consumed: a stream it says `true` for is for dropping.
    pub fn has_unread(&self) -> bool {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        if self.io.poll_read_ready(&mut cx).is_pending() {
            return false;
        }
        // Readiness may be left from a read that filled its buffer exactly: look.
        let mut byte = [0u8; 1];
        match self.io.try_read(&mut byte) {
            Err(e) => e.kind() != io::ErrorKind::WouldBlock,
            Ok(_) => true,
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        ready!(self.poll_read_buf(cx, buf))?;
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, data)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    async fn pair() -> (Stream, tokio::net::TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (ours, theirs) = tokio::join!(Stream::connect(addr), listener.accept());
        (ours.unwrap(), theirs.unwrap().0)
    }

    /// Data that arrives right after a short read cleared readiness is still read: the new
    /// edge wakes the reader.
    #[tokio::test]
    async fn every_byte_is_read_across_short_reads() {
        every_byte_is_read(true).await;
    }

    /// The same on a multi-threaded runtime, where the peer writes from another thread
    /// while this one reads (and the stream reads as tokio does).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_byte_is_read_on_a_multi_threaded_runtime() {
        every_byte_is_read(false).await;
    }

    async fn every_byte_is_read(clears: bool) {
        let (mut ours, mut theirs) = pair().await;
        assert_eq!(ours.clear_on_short_read, clears);
        let writer = tokio::spawn(async move {
            for i in 0..2_000u32 {
                theirs.write_all(&i.to_be_bytes()).await.unwrap();
                if i % 7 == 0 {
                    tokio::task::yield_now().await;
                }
            }
            theirs
        });
        let mut all = Vec::new();
        let mut buf = [0u8; 4096];
        tokio::time::timeout(Duration::from_secs(10), async {
            while all.len() < 8_000 {
                let n = ours.read(&mut buf).await.unwrap();
                assert!(n > 0, "end of stream after {} bytes", all.len());
                all.extend_from_slice(&buf[..n]);
            }
        })
        .await
        .expect("a byte was missed: the reader waits for an edge that already came");
        let expected: Vec<u8> = (0..2_000u32).flat_map(u32::to_be_bytes).collect();
        assert_eq!(all, expected);
        let mut theirs = writer.await.unwrap();
        // Writes and shutdown reach the peer.
        ours.write_all(b"bye").await.unwrap();
        ours.shutdown().await.unwrap();
        let mut rest = Vec::new();
        theirs.read_to_end(&mut rest).await.unwrap();
        assert_eq!(rest, b"bye");
    }

    #[tokio::test]
    async fn a_short_read_clears_readiness_so_the_next_read_waits_for_an_edge() {
        let (ours, mut theirs) = pair().await;
        theirs.write_all(b"abc").await.unwrap();
        let mut buf = Vec::with_capacity(4096);
        let n = std::future::poll_fn(|cx| ours.poll_read_buf(cx, &mut buf))
            .await
            .unwrap();
        assert_eq!(&buf[..n], b"abc");
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(
            ours.io.poll_read_ready(&mut cx).is_pending(),
            "readiness is still set: the next read would be a system call that finds nothing"
        );
    }

    #[tokio::test]
    async fn has_unread_sees_data_and_the_end_of_the_stream_but_not_old_readiness() {
        let (ours, mut theirs) = pair().await;
        let eventually = |want: bool| {
            let ours = &ours;
            async move {
                for _ in 0..500 {
                    if ours.has_unread() == want {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                panic!("has_unread never became {want}");
            }
        };
        assert!(!ours.has_unread());
        theirs.write_all(b"x").await.unwrap();
        eventually(true).await;
        // Read exactly one byte: the buffer is full, so readiness stays set, but the socket
        // is empty.
        theirs.write_all(b"y").await.unwrap();
        let mut one = [0u8; 1];
        let mut slice = &mut one[..];
        std::future::poll_fn(|cx| ours.poll_read_buf(cx, &mut slice))
            .await
            .unwrap();
        assert_eq!(one, *b"y");
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(ours.io.poll_read_ready(&mut cx).is_ready());
        assert!(!ours.has_unread());
        drop(theirs);
        eventually(true).await;
    }
}
