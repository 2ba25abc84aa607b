//! The activator's front path (`keda_activator::server::serve_connection`: `front::serve`,
//! then hyper's server for what it hands over) driven in memory: the client is an in-memory
//! stream, the pod a real server on loopback that answers each request with bytes the input
//! chooses and closes.
//!
//! Input: one byte for the client's read size (1 to 256 bytes per read), two bytes (little
//! endian) for the length of the pod's answer, the pod's answer, then the client's bytes.
//! Routes: `ready.test` and `api.test/v1` lead to the pod; `held.test` to a target without a
//! ready pod (requests are held, 1 ms hold timeout, queue depth 2); other hosts to nothing.
//! After the client's bytes the stream stays open while the proxy works (the pod has a request
//! or the runtime has work), then ends.
#![no_main]

use std::collections::BTreeMap;
use std::io;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::BufMut;
use keda_activator::front::ClientStream;
use keda_activator::limits::Limits;
use keda_activator::metrics::Metrics;
use keda_activator::proxy::{Peer, Proxy};
use keda_activator::server;
use keda_activator::targets::{TargetConfig, Targets};
use keda_scalers::ScalerContext;
use keda_scalers::scalers::http::HttpTrigger;
use keda_scalers::scalers::http::protocol::TargetKey;
use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpListener;
use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;

/// Most bytes the client keeps of what it is sent.
const KEEP: usize = 1 << 20;

/// The client's end, in memory.
struct Client {
    input: Vec<u8>,
    at: usize,
    read_size: usize,
    /// The end of the stream was given (after the input, once the proxy is idle).
    eof: Arc<Shared>,
    written: Vec<u8>,
}

#[derive(Default)]
struct Shared {
    ended: std::sync::atomic::AtomicBool,
    waiting: Mutex<Option<Waker>>,
    /// The proxy let go of the client's stream (see [`Recorder`]'s `Drop`).
    dropped: std::sync::atomic::AtomicBool,
}

impl Shared {
    /// Ends the client's stream: its next read gets the end.
    fn end(&self) {
        self.ended.store(true, Ordering::SeqCst);
        if let Some(waker) = self.waiting.lock().expect("not poisoned").take() {
            waker.wake();
        }
    }
}

impl Client {
    fn exhausted(&self) -> bool {
        self.at >= self.input.len()
    }

    fn next(&mut self, cx: &mut Context<'_>, room: usize) -> Poll<io::Result<&[u8]>> {
        if self.exhausted() {
            if self.eof.ended.load(Ordering::SeqCst) {
                return Poll::Ready(Ok(&[]));
            }
            *self.eof.waiting.lock().expect("not poisoned") = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let n = self.read_size.min(room).min(self.input.len() - self.at);
        let chunk = &self.input[self.at..self.at + n];
        self.at += n;
        Poll::Ready(Ok(chunk))
    }
}

impl ClientStream for Client {
    fn poll_read_buf(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut impl BufMut,
    ) -> Poll<io::Result<usize>> {
        let room = buf.remaining_mut();
        if room == 0 {
            return Poll::Ready(Ok(0));
        }
        let chunk = match self.next(cx, room) {
            Poll::Ready(Ok(chunk)) => chunk.to_vec(),
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        };
        buf.put_slice(&chunk);
        Poll::Ready(Ok(chunk.len()))
    }
}

impl AsyncRead for Client {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let room = buf.remaining();
        if room == 0 {
            return Poll::Ready(Ok(()));
        }
        match self.next(cx, room) {
            Poll::Ready(Ok(chunk)) => {
                let chunk = chunk.to_vec();
                buf.put_slice(&chunk);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncWrite for Client {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let keep = data.len().min(KEEP.saturating_sub(self.written.len()));
        self.written.extend_from_slice(&data[..keep]);
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// The pod: what it answers and how many requests it has open (a connection counts from the
/// first byte of a request to the end of the answer: a connection the proxy's pool opened and
/// has not used yet is not a request, and may stay idle for the pool's idle timeout, across
/// inputs).
struct Pod {
    answer: Mutex<Vec<u8>>,
    open: AtomicUsize,
}

struct World {
    runtime: Runtime,
    proxy: Arc<Proxy>,
    pod: Arc<Pod>,
    _targets: Arc<Targets>,
}

fn config(name: &str, metadata: &[(&str, &str)]) -> TargetConfig {
    let metadata: BTreeMap<String, String> = metadata
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let ctx = ScalerContext {
        scalable_name: name.into(),
        scalable_namespace: "shop".into(),
        metadata,
        ..ScalerContext::new("http", 0)
    };
    TargetConfig {
        key: TargetKey::new("shop", name, 0),
        trigger: HttpTrigger::parse(&ctx).expect("a valid trigger"),
    }
}

async fn serve_pod(listener: TcpListener, pod: Arc<Pod>) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            continue;
        };
        let pod = Arc::clone(&pod);
        tokio::spawn(async move {
            // The request head, then the answer, then the end.
            let mut head = Vec::new();
            let mut buf = [0u8; 4096];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 1 << 16 {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if head.is_empty() {
                            pod.open.fetch_add(1, Ordering::SeqCst);
                        }
                        head.extend_from_slice(&buf[..n]);
                    }
                }
            }
            let answer = pod.answer.lock().expect("not poisoned").clone();
            let _ = stream.write_all(&answer).await;
            let _ = stream.shutdown().await;
            if !head.is_empty() {
                pod.open.fetch_sub(1, Ordering::SeqCst);
            }
        });
    }
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        // The activator runs under a Rust `main`, which ignores SIGPIPE (a write to a closed
        // socket is an error, not the end of the process); libFuzzer's `main` does not.
        // SAFETY: setting a signal's disposition to "ignore", before any thread is started.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let pod = Arc::new(Pod {
            answer: Mutex::new(Vec::new()),
            open: AtomicUsize::new(0),
        });
        let (proxy, targets) = runtime.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
            let pod_addr = listener.local_addr().expect("an address");
            tokio::spawn(serve_pod(listener, Arc::clone(&pod)));
            let metrics = Arc::new(Metrics::new());
            let (wake, mut woken) = tokio::sync::mpsc::channel(1024);
            tokio::spawn(async move { while woken.recv().await.is_some() {} });
            let targets = Targets::with_held_memory(wake, Arc::clone(&metrics), 64 << 10);
            let ready = config(
                "ready",
                &[
                    ("service", "ready"),
                    ("hosts", "ready.test"),
                    ("responseHeaderTimeout", "2s"),
                ],
            );
            let api = config(
                "api",
                &[
                    ("service", "api"),
                    ("hosts", "api.test"),
                    ("pathPrefixes", "/v1"),
                    ("containerConcurrency", "1"),
                ],
            );
            let held = config(
                "held",
                &[
                    ("service", "held"),
                    ("hosts", "held.test"),
                    ("holdTimeout", "1ms"),
                    ("queueDepth", "2"),
                ],
            );
            let keys = [ready.key.clone(), api.key.clone()];
            targets.apply(vec![ready, api, held]);
            for key in &keys {
                targets.set_ready(key, vec![pod_addr]);
            }
            let limits = Limits {
                header_read_timeout: Duration::from_secs(2),
                idle_timeout: Duration::from_secs(2),
                write_timeout: Duration::from_secs(2),
                ..Limits::default()
            };
            let proxy = Arc::new(Proxy::with_limits(targets.routes(), metrics, limits));
            (proxy, targets)
        });
        World {
            runtime,
            proxy,
            pod,
            _targets: targets,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let [read_size, a, b, rest @ ..] = data else {
        return;
    };
    let answer_len = usize::from(u16::from_le_bytes([*a, *b])).min(rest.len());
    let (answer, input) = rest.split_at(answer_len);
    let world = world();
    *world.pod.answer.lock().expect("not poisoned") = answer.to_vec();
    let shared = Arc::new(Shared::default());
    let client = Client {
        input: input.to_vec(),
        at: 0,
        read_size: usize::from(*read_size) + 1,
        eof: Arc::clone(&shared),
        written: Vec::new(),
    };
    // The written bytes are read back through this handle once the connection is served.
    let written = Arc::new(Mutex::new(Vec::new()));
    let out = Arc::clone(&written);
    let proxy = Arc::clone(&world.proxy);
    let pod = Arc::clone(&world.pod);
    world.runtime.block_on(async move {
        let builder = server::hyper_builder();
        let shutdown = CancellationToken::new();
        let peer = Peer::new(([192, 0, 2, 7], 40000).into());
        let recorder = Recorder {
            client: Some(client),
            out,
        };
        let mut serving = pin!(server::serve_connection(
            recorder, proxy, peer, &builder, &shutdown
        ));
        // Once the client's bytes are read, the stream ends when the proxy has been idle for
        // a while: the pod has no request open, and the runtime ran a few rounds (its I/O
        // driver is polled at least every 61 task polls).
        let mut idle_rounds = 0u32;
        let mut rounds = 0u64;
        loop {
            tokio::select! {
                biased;
                () = &mut serving => break,
                () = tokio::task::yield_now() => {}
            }
            rounds += 1;
            if pod.open.load(Ordering::SeqCst) == 0 {
                idle_rounds += 1;
            } else {
                idle_rounds = 0;
            }
            let waiting = shared.waiting.lock().expect("not poisoned").is_some();
            if (waiting && idle_rounds >= 200) || rounds >= 2_000_000 {
                shared.end();
            }
            if !waiting {
                idle_rounds = idle_rounds.min(1);
            }
        }
        // An upgraded connection (a pod's `101 Switching Protocols`) outlives
        // `serve_connection`: a tunnel task holds the client's stream, and the target's
        // concurrency slot, until both ends are done. The client ends its stream, as a client
        // that has read everything does, and the tunnel is given the time to finish; left
        // waiting, it would hold `api.test`'s only slot into the next inputs, each of whose
        // requests there would then wait out the hold timeout.
        shared.end();
        let mut rounds = 0u64;
        while !shared.dropped.load(Ordering::SeqCst) && rounds < 2_000_000 {
            tokio::task::yield_now().await;
            rounds += 1;
        }
    });
    let written = written.lock().expect("not poisoned");
    // What the client got is HTTP/1.x (hyper answers an HTTP/1.0 request in kind), or HTTP/2
    // after h2c's preface.
    assert!(
        written.is_empty()
            || written.starts_with(b"HTTP/1.1 ")
            || written.starts_with(b"HTTP/1.0 ")
            || input.starts_with(b"PRI * HTTP/2.0"),
        "the client got {:?}",
        String::from_utf8_lossy(&written[..written.len().min(200)])
    );
});

/// The client, recording what it was sent when it is dropped (hyper takes the stream by value).
struct Recorder {
    client: Option<Client>,
    out: Arc<Mutex<Vec<u8>>>,
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            *self.out.lock().expect("not poisoned") = client.written;
            client.eof.dropped.store(true, Ordering::SeqCst);
        }
    }
}

impl Recorder {
    fn client(&mut self) -> &mut Client {
        self.client.as_mut().expect("present until dropped")
    }
}

impl ClientStream for Recorder {
    fn poll_read_buf(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut impl BufMut,
    ) -> Poll<io::Result<usize>> {
        self.client().poll_read_buf(cx, buf)
    }
}

impl AsyncRead for Recorder {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(self.client()).poll_read(cx, buf)
    }
}

impl AsyncWrite for Recorder {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(self.client()).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(self.client()).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(self.client()).poll_shutdown(cx)
    }
}
