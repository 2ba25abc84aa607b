//! The client side of HTTP/1.1 for the common request, served without hyper's server.
//!
//! Most requests a proxy sees are HTTP/1.1 without a body, on a kept-alive connection. For
//! those, this module does what nginx does: it parses the head off the socket (`httparse`,
//! hyper's parser), routes and admits the request as [`Proxy::handle`] does (holding it while
//! no pod has room, answering 404, 503 and 504), writes the pod's request head straight from
//! the client's header lines, and writes the pod's response to the client as it reads it
//! ([`crate::wire`]), all from the task serving the connection. There is no request or
//! response object for the client's side, no header map, no second state machine. Errors are
//! answered from [`crate::error::ProxyError::to_response`], as on hyper's path.
//!
//! The first request that is anything else hands the connection, with the bytes read so far,
//! to hyper's server for the rest of its life ([`serve`] returns it): HTTP/2, HTTP/1.0,
//! requests with a body, upgrades, `Expect`, unusual request targets, a head this module will
//! not parse. Those keep their one implementation in [`Proxy::handle`].

use std::future::{Future, poll_fn};
use std::io::{self, IoSlice, Write as _};
use std::mem::MaybeUninit;
use std::pin::{Pin, pin};
use std::task::{Context, Poll, ready};
use std::time::{Duration, SystemTime};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http::header::{self, HeaderMap};
use http::{Method, StatusCode, Version};
use hyper::body::Body;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;

use crate::limits::Limits;
use crate::metrics::SharedMetrics;
use crate::proxy::{self, Peer, Proxy, ProxyBody};
use crate::target::{Admission, Charge};
use crate::upstream::{AppProtocol, Connection};
use crate::{edge, wire};

/// The pod's answer to a fast-path request: on a wire connection (plaintext HTTP/1.1 pods),
/// on the pod's HTTP/2 connection, or on a hyper client connection over TLS (HTTP/1.1 pods
/// over TLS), given back once the answer has been read.
enum Answer {
    Wire(http::Response<crate::wire::WireBody>),
    H2(http::Response<hyper::body::Incoming>),
    Tls(http::Response<hyper::body::Incoming>, Connection),
}

/// Most header fields in a request head this path parses (hyper's default too).
const MAX_HEADERS: usize = 100;
/// Longest request head this path waits for; a longer one goes to hyper, which answers it.
const MAX_HEAD: usize = 64 * 1024;
/// Bytes reserved for each read from the client.
const READ_CHUNK: usize = 8 * 1024;
/// Response bytes gathered before they are written, when more are at hand.
const WRITE_AT: usize = 64 * 1024;

/// A client's connection as this module reads it: [`edge::Stream`] in the proxy; an in-memory
/// stream in the fuzzer (`fuzz/`), which drives [`serve`] without sockets.
pub trait ClientStream: AsyncRead + AsyncWrite + Unpin {
    /// Reads into the spare room of `buf`; `Ok(0)` is the end of the stream.
    fn poll_read_buf(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut impl BufMut,
    ) -> Poll<io::Result<usize>>;
}

impl ClientStream for edge::Stream {
    fn poll_read_buf(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut impl BufMut,
    ) -> Poll<io::Result<usize>> {
        edge::Stream::poll_read_buf(self, cx, buf)
    }
}

/// A connection this module hands to hyper: the bytes it read and did not serve, then the
/// socket.
#[derive(Debug)]
pub struct Rewound<S = edge::Stream> {
    prefix: Bytes,
    io: S,
}

/// Serves `stream` until the client closes it, the connection fails, or `shutdown` finds it
/// between requests; or until a request this path does not serve, when the connection is
/// returned for hyper's server.
pub async fn serve<S: ClientStream>(
    stream: S,
    proxy: &Proxy,
    peer: &Peer,
    shutdown: &CancellationToken,
) -> Option<Rewound<S>> {
    let limits = *proxy.limits();
    let mut conn = Conn {
        io: stream,
        buf: BytesMut::with_capacity(READ_CHUNK),
        out: Vec::with_capacity(READ_CHUNK),
        // The first head is due within the header read timeout of the connection's start.
        deadline: Box::pin(tokio::time::sleep(limits.header_read_timeout)),
        limits,
        metrics: proxy.metrics(),
    };
    let mut head = Vec::with_capacity(1024);
    let mut stopping = pin!(shutdown.cancelled());
    // Whether the deadline is the idle one, for the next request's first byte.
    let mut idle = false;
    loop {
        // A complete request head, routed and admitted, or hyper's turn.
        let (method, close, started, admitted) = loop {
            match parse(&conn.buf, peer, &mut head) {
                Parsed::Request(request) => {
                    let started = Instant::now();
                    // Held, the request keeps the pod's head and what its client sent after
                    // it.
                    let held_bytes = head.len() + conn.buf.len().saturating_sub(request.len);
                    let admitted = proxy.admit(request.host, request.path, || held_bytes);
                    let Request {
                        len, method, close, ..
                    } = request;
                    conn.buf.advance(len);
                    break (method, close, started, admitted);
                }
                Parsed::HandOver => return Some(conn.rewound()),
                Parsed::Partial if conn.buf.len() >= MAX_HEAD => return Some(conn.rewound()),
                Parsed::Partial => {}
            }
            // Between requests a drain closes the connection; a request begun is served.
            let read = if conn.buf.is_empty() {
                tokio::select! {
                    biased;
                    () = &mut stopping => return None,
                    read = conn.read_by_deadline() => read,
                }
            } else {
                if idle {
                    // The next request has begun: its head is due within the header read
                    // timeout.
                    conn.arm(limits.header_read_timeout);
                    idle = false;
                }
                conn.read_by_deadline().await
            };
            match read {
                Ok(n) if n > 0 => {}
                Err(error) if error.kind() == io::ErrorKind::TimedOut => {
                    let timeouts = if idle {
                        &conn.metrics.idle_timeouts
                    } else {
                        &conn.metrics.header_read_timeouts
                    };
                    timeouts.inc();
                    return conn.close().await;
                }
                _ => return None,
            }
        };
        let admitted = match admitted {
            Ok((target, Admission::Ready(lease))) => Ok((target, lease)),
            // Held until a pod has room; a client that leaves gives up its place. What it
            // sends meanwhile is counted with the request's memory.
            Ok((target, Admission::Held(mut held))) => {
                let mut charge = held.take_charge();
                let watched = conn
                    .unless_client_leaves(held.wait(), Some((&mut charge, head.len())))
                    .await;
                drop(charge);
                match watched {
                    None => return None,
                    Some(lease) => lease.map(|lease| (target, lease)),
                }
            }
            Err(error) => Err(error),
        };
        let answered = match admitted {
            Ok((target, lease)) => {
                let pod = lease.addr();
                let timeout = lease.response_timeout();
                let upstream = lease.upstream();
                let exchange = tokio::time::timeout(timeout, async {
                    // A plaintext HTTP/1.1 pod gets the head as it is; an HTTP/2 pod the same
                    // head as an HTTP/2 request; an HTTP/1.1 pod over TLS as a request on
                    // hyper's client.
                    let protocol = upstream.protocol();
                    if protocol == AppProtocol::Http1 {
                        upstream.send_head(&head, &method).await.map(Answer::Wire)
                    } else if protocol.is_http2() {
                        upstream.send_head_h2(&head).await.map(Answer::H2)
                    } else {
                        upstream
                            .send_head_tls(&head)
                            .await
                            .map(|(response, connection)| Answer::Tls(response, connection))
                    }
                });
                match conn.unless_client_leaves(exchange, None).await {
                    // The client went away: dropping the exchange closes the pod's connection
                    // (the request is cancelled) and the lease frees the slot.
                    None => return None,
                    Some(Ok(Ok(response))) => {
                        proxy::answered(&target, started);
                        Ok((response, lease))
                    }
                    Some(Ok(Err(error))) => Err(proxy::upstream(&target, pod, error)),
                    // The exchange is dropped: its connection closes, and the slot is freed
                    // with the lease below.
                    Some(Err(_)) => Err(proxy::response_timeout(&target, timeout)),
                }
            }
            Err(error) => Err(error),
        };
        // A drain that began meanwhile ends the connection after this answer.
        let close = close || shutdown.is_cancelled();
        conn.out.clear();
        let sent = match answered {
            Ok((response, lease)) => {
                let (parts, body) = match response {
                    Answer::Wire(response) => {
                        let (parts, body) = proxy::for_client(response, Version::HTTP_11);
                        (
                            parts,
                            ProxyBody::wire(body, lease, limits.upstream_idle_timeout),
                        )
                    }
                    Answer::H2(response) => {
                        let (parts, body) = proxy::for_client(response, Version::HTTP_11);
                        (
                            parts,
                            ProxyBody::upstream_h2(body, lease, limits.upstream_idle_timeout),
                        )
                    }
                    Answer::Tls(response, connection) => {
                        let (parts, body) = proxy::for_client(response, Version::HTTP_11);
                        (
                            parts,
                            ProxyBody::upstream(
                                body,
                                lease,
                                connection,
                                limits.upstream_idle_timeout,
                            ),
                        )
                    }
                };
                let framing = Framing::of(&method, parts.status, &parts.headers);
                encode_response_head(&parts.headers, parts.status, framing, close, &mut conn.out);
                conn.send_body(body, framing).await
            }
            Err(error) => {
                let (parts, body) = error.to_response().into_parts();
                let framing = Framing::Length(body.len());
                encode_response_head(&parts.headers, parts.status, framing, close, &mut conn.out);
                if method != Method::HEAD {
                    conn.out.extend_from_slice(&body);
                }
                conn.write_out().await.is_ok()
            }
        };
        if !sent || close {
            return conn.close().await;
        }
        // Until the next request's first byte: the idle timeout (a later deadline than the
        // one set, so usually no more than a store).
        conn.arm(limits.idle_timeout);
        idle = true;
    }
}

/// A parsed request head this path can serve.
#[derive(Debug)]
pub struct Request<'a> {
    /// Length of the head in the buffer.
    pub len: usize,
    /// The method.
    pub method: Method,
    /// The `Host` field.
    pub host: &'a str,
    /// The request target's path, without the query.
    pub path: &'a str,
    /// The client asked to close the connection after this request.
    pub close: bool,
}

/// What [`parse`] makes of the front of the client's buffer.
#[derive(Debug)]
pub enum Parsed<'a> {
    /// The head is not complete yet.
    Partial,
    /// Not a request for this path (see the module documentation).
    HandOver,
    /// A request this path serves.
    Request(Request<'a>),
}

/// Parses the request head at the front of `buf` and, for a request this path serves, writes
/// the pod's request head into `out`: the client's header lines as they came, without the
/// hop-by-hop ones, with `X-Forwarded-For` (the client's address appended to any value
/// there from a trusted proxy), `X-Forwarded-Host` and `X-Forwarded-Proto` as
/// [`crate::proxy`] sets them (a peer that is not a trusted proxy has its own dropped, and
/// `Forwarded` too).
///
/// Public for the fuzzer (`fuzz/`), which checks the pod's head against the client's.
pub fn parse<'a>(buf: &'a [u8], peer: &Peer, out: &mut Vec<u8>) -> Parsed<'a> {
    if buf.is_empty() {
        return Parsed::Partial;
    }
    let mut fields = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut []);
    let len = match request.parse_with_uninit_headers(buf, &mut fields) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Parsed::Partial,
        // Not HTTP/1.x (HTTP/2's preface), too many fields, or invalid: hyper answers.
        Err(_) => return Parsed::HandOver,
    };
    let (Some(method), Some(target), Some(1)) = (request.method, request.path, request.version)
    else {
        return Parsed::HandOver;
    };
    if !is_simple_origin_form(target) || method == "CONNECT" {
        return Parsed::HandOver;
    }
    let Ok(method) = Method::from_bytes(method.as_bytes()) else {
        return Parsed::HandOver;
    };
    // First pass: is it a request for this path, and which fields are hop-by-hop?
    let mut host = None;
    let mut close = false;
    let mut named_in_connection = false;
    for field in request.headers.iter() {
        let name = field.name;
        if name.eq_ignore_ascii_case("host") {
            if host.is_some() {
                return Parsed::HandOver;
            }
            host = Some(field.value);
        } else if name.eq_ignore_ascii_case("content-length") {
            if field.value != b"0" {
                return Parsed::HandOver;
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding")
            || name.eq_ignore_ascii_case("upgrade")
            || name.eq_ignore_ascii_case("expect")
        {
            return Parsed::HandOver;
        } else if name.eq_ignore_ascii_case("connection") {
            for token in wire::list_items(field.value) {
                if token.eq_ignore_ascii_case(b"close") {
                    close = true;
                } else if token.eq_ignore_ascii_case(b"upgrade") {
                    return Parsed::HandOver;
                } else if !token.eq_ignore_ascii_case(b"keep-alive") {
                    named_in_connection = true;
                }
            }
        }
    }
    let Some(Ok(host)) = host.map(std::str::from_utf8) else {
        return Parsed::HandOver;
    };
    // Second pass: the pod's head, without hop-by-hop fields (`Upgrade` and
    // `Transfer-Encoding` never get here: such requests are handed over).
    let client_ip = peer.forwarded_for().as_bytes();
    out.clear();
    out.extend_from_slice(method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let (mut forwarded_for, mut forwarded_host, mut forwarded_proto) = (false, false, false);
    let trusted = peer.is_trusted();
    for field in request.headers.iter() {
        let name = field.name;
        if proxy::HOP_BY_HOP
            .iter()
            .any(|h| name.eq_ignore_ascii_case(h.as_str()))
            || (named_in_connection && is_named_in_connection(request.headers, name))
            // Only a trusted proxy may say who the client is (`crate::trust`).
            || (!trusted
                && proxy::FORWARDING
                    .iter()
                    .any(|h| name.eq_ignore_ascii_case(h.as_str())))
        {
            continue;
        }
        if name.eq_ignore_ascii_case("x-forwarded-for") {
            if forwarded_for {
                // Joined into the first one, as the header-map path does.
                continue;
            }
            forwarded_for = true;
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            let values = request
                .headers
                .iter()
                .filter(|f| f.name.eq_ignore_ascii_case("x-forwarded-for"))
                .map(|f| f.value);
            proxy::forwarded_for_chain(values, client_ip, out);
            out.extend_from_slice(b"\r\n");
            continue;
        }
        forwarded_host |= name.eq_ignore_ascii_case("x-forwarded-host");
        forwarded_proto |= name.eq_ignore_ascii_case("x-forwarded-proto");
        line(out, name.as_bytes(), &[field.value]);
    }
    if !forwarded_for {
        line(out, b"x-forwarded-for", &[client_ip]);
    }
    if !forwarded_host {
        line(out, b"x-forwarded-host", &[host.as_bytes()]);
    }
    if !forwarded_proto {
        line(out, b"x-forwarded-proto", &[b"http"]);
    }
    out.extend_from_slice(b"\r\n");
    let path = target.split_once('?').map_or(target, |(path, _)| path);
    Parsed::Request(Request {
        len,
        method,
        host,
        path,
        close,
    })
}

/// An origin-form target (`/path?query`) of characters that need no further checking: RFC
/// 3986's unreserved and sub-delims, `:@/?%`. Anything else goes to hyper's stricter parse.
fn is_simple_origin_form(target: &str) -> bool {
    target.starts_with('/')
        && target.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b'-' | b'.'
                        | b'_'
                        | b'~'
                        | b'!'
                        | b'$'
                        | b'&'
                        | b'\''
                        | b'('
                        | b')'
                        | b'*'
                        | b'+'
                        | b','
                        | b';'
                        | b'='
                        | b':'
                        | b'@'
                        | b'/'
                        | b'?'
                        | b'%'
                )
        })
}

fn is_named_in_connection(fields: &[httparse::Header<'_>], name: &str) -> bool {
    fields
        .iter()
        .filter(|f| f.name.eq_ignore_ascii_case("connection"))
        .flat_map(|f| wire::list_items(f.value))
        .any(|t| t.eq_ignore_ascii_case(name.as_bytes()))
}

fn line(out: &mut Vec<u8>, name: &[u8], value: &[&[u8]]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    for part in value {
        out.extend_from_slice(part);
    }
    out.extend_from_slice(b"\r\n");
}

/// How a response body is delimited for the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Framing {
    /// No body: HEAD, 1xx, 204, 304 (their `Content-Length`, if any, is passed on as is).
    None,
    /// The pod's `Content-Length`, passed on.
    Passed,
    /// A length this module adds.
    Length(usize),
    /// Chunked: the pod's body was chunked (re-chunked here, trailers passed on) or ends
    /// when the pod closes.
    Chunked,
}

impl Framing {
    fn of(method: &Method, status: StatusCode, headers: &HeaderMap) -> Self {
        if method == Method::HEAD
            || status.is_informational()
            || status == StatusCode::NO_CONTENT
            || status == StatusCode::NOT_MODIFIED
        {
            Self::None
        } else if headers.contains_key(header::CONTENT_LENGTH) {
            Self::Passed
        } else {
            Self::Chunked
        }
    }
}

/// Writes the response head for the client: the status line, `headers` (hop-by-hop ones
/// already removed), `Date` when the pod sent none (RFC 9110 6.6.1, as hyper's server does),
/// the framing, and `Connection: close` when the connection ends after this response.
fn encode_response_head(
    headers: &HeaderMap,
    status: StatusCode,
    framing: Framing,
    close: bool,
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in headers {
        line(out, name.as_str().as_bytes(), &[value.as_bytes()]);
    }
    if !headers.contains_key(header::DATE) {
        line(
            out,
            b"date",
            &[httpdate::fmt_http_date(SystemTime::now()).as_bytes()],
        );
    }
    match framing {
        Framing::None | Framing::Passed => {}
        Framing::Length(n) => {
            // Writing to a Vec cannot fail.
            let _ = write!(out, "content-length: {n}\r\n");
        }
        Framing::Chunked => line(out, b"transfer-encoding", &[b"chunked"]),
    }
    if close {
        line(out, b"connection", &[b"close"]);
    }
    out.extend_from_slice(b"\r\n");
}

/// The client's connection while this path serves it.
struct Conn<'a, S> {
    io: S,
    /// Read from the client, not served yet.
    buf: BytesMut,
    /// To write to the client.
    out: Vec<u8>,
    /// The client's one timer: for the request head being read, for the next request's first
    /// byte, or for a write that makes no progress, whichever is being waited for.
    deadline: Pin<Box<Sleep>>,
    limits: Limits,
    metrics: &'a SharedMetrics,
}

impl<S: ClientStream> Conn<'_, S> {
    /// Sets the deadline to `after` from now.
    fn arm(&mut self, after: Duration) {
        self.deadline.as_mut().reset(Instant::now() + after);
    }

    /// Reads more from the client; `TimedOut` once the deadline passes.
    async fn read_by_deadline(&mut self) -> io::Result<usize> {
        self.buf.reserve(READ_CHUNK);
        let Self {
            io, buf, deadline, ..
        } = self;
        poll_fn(|cx| {
            if let Poll::Ready(read) = io.poll_read_buf(cx, buf) {
                return Poll::Ready(read);
            }
            ready!(deadline.as_mut().poll(cx));
            Poll::Ready(Err(io::ErrorKind::TimedOut.into()))
        })
        .await
    }

    async fn write_out(&mut self) -> io::Result<()> {
        self.write_all_three(&[], &[]).await
    }

    /// Ends the connection after what was written: a FIN, so a response in flight is not cut
    /// off by a reset.
    async fn close(mut self) -> Option<Rewound<S>> {
        let _ = self.io.shutdown().await;
        None
    }

    fn rewound(self) -> Rewound<S> {
        Rewound {
            prefix: self.buf.freeze(),
            io: self.io,
        }
    }

    /// Runs `work` while watching the client: `None` if it closes its end (or its connection
    /// fails) first. Bytes it sends meanwhile (a pipelined request) are kept, up to
    /// [`MAX_HEAD`]; past that the client is no longer watched. For a held request, `held`
    /// is its charge and the length of the pod's head: what is kept is counted, and the
    /// client is no longer watched once its target's limit is reached.
    async fn unless_client_leaves<F: Future>(
        &mut self,
        work: F,
        mut held: Option<(&mut Charge, usize)>,
    ) -> Option<F::Output> {
        let mut work = pin!(work);
        poll_fn(|cx| {
            if let Poll::Ready(output) = work.as_mut().poll(cx) {
                return Poll::Ready(Some(output));
            }
            while self.buf.len() < MAX_HEAD {
                // What a read may add is counted before it.
                let room = match held.as_mut() {
                    Some((charge, head)) => charge.keep(*head + self.buf.len(), READ_CHUNK),
                    None => READ_CHUNK,
                };
                if room == 0 {
                    break;
                }
                self.buf.reserve(room);
                match self.io.poll_read_buf(cx, &mut (&mut self.buf).limit(room)) {
                    Poll::Ready(Ok(0) | Err(_)) => return Poll::Ready(None),
                    Poll::Ready(Ok(_)) => {}
                    Poll::Pending => break,
                }
            }
            if let Some((charge, head)) = held.as_mut() {
                // Then only what was read.
                charge.keep(*head + self.buf.len(), 0);
            }
            Poll::Pending
        })
        .await
    }

    /// Writes the head in `out` and `body` framed as `framing`; whether the connection can
    /// take another request.
    async fn send_body(&mut self, mut body: ProxyBody, framing: Framing) -> bool {
        let mut trailers_sent = false;
        loop {
            // Frames at hand go out together; before waiting for the pod, what is gathered is
            // written, so a slow body streams.
            let frame = match poll_now(&mut body) {
                Some(frame) => frame,
                None => {
                    if !self.out.is_empty() && self.write_out().await.is_err() {
                        return false;
                    }
                    match self.unless_client_leaves(next_frame(&mut body), None).await {
                        Some(frame) => frame,
                        None => return false,
                    }
                }
            };
            let data = match frame {
                None => break,
                // The pod broke off: the client cannot be told with a status any more; it
                // gets what came and a closed connection.
                Some(Err(_)) => {
                    let _ = self.write_out().await;
                    return false;
                }
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => data,
                    Err(frame) => {
                        if let (Ok(trailers), Framing::Chunked) = (frame.into_trailers(), framing) {
                            self.out.extend_from_slice(b"0\r\n");
                            for (name, value) in &trailers {
                                line(&mut self.out, name.as_str().as_bytes(), &[value.as_bytes()]);
                            }
                            self.out.extend_from_slice(b"\r\n");
                            trailers_sent = true;
                        }
                        continue;
                    }
                },
            };
            if data.is_empty() || framing == Framing::None {
                continue;
            }
            if framing == Framing::Chunked {
                // Writing to a Vec cannot fail.
                let _ = write!(self.out, "{:x}\r\n", data.len());
            }
            if self.out.len() + data.len() > WRITE_AT {
                // Large: written from where it is, not copied.
                let chunked = framing == Framing::Chunked;
                let tail: &[u8] = if chunked { b"\r\n" } else { b"" };
                if self.write_all_three(&data, tail).await.is_err() {
                    return false;
                }
            } else {
                self.out.extend_from_slice(&data);
                if framing == Framing::Chunked {
                    self.out.extend_from_slice(b"\r\n");
                }
            }
        }
        if framing == Framing::Chunked && !trailers_sent {
            self.out.extend_from_slice(b"0\r\n\r\n");
        }
        self.write_out().await.is_ok()
    }

    /// Writes `out` (then cleared), then `data`, then `tail`, in as few system calls as the
    /// socket takes. A write that makes no progress for the write timeout fails with
    /// `TimedOut` (counted).
    async fn write_all_three(&mut self, data: &[u8], tail: &[u8]) -> io::Result<()> {
        let Self {
            io,
            out,
            deadline,
            limits,
            metrics,
            ..
        } = self;
        let mut parts = [&out[..], data, tail];
        while parts.iter().any(|p| !p.is_empty()) {
            // Armed when the client stops taking bytes; progress disarms it.
            let mut armed = false;
            let mut n = poll_fn(|cx| {
                let slices = parts.map(IoSlice::new);
                if let Poll::Ready(written) = Pin::new(&mut *io).poll_write_vectored(cx, &slices) {
                    return Poll::Ready(written);
                }
                if !armed {
                    deadline
                        .as_mut()
                        .reset(Instant::now() + limits.write_timeout);
                    armed = true;
                }
                ready!(deadline.as_mut().poll(cx));
                metrics.write_timeouts.inc();
                Poll::Ready(Err(io::ErrorKind::TimedOut.into()))
            })
            .await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            for part in &mut parts {
                let k = n.min(part.len());
                *part = &part[k..];
                n -= k;
            }
        }
        out.clear();
        Ok(())
    }
}

type Polled = Option<Result<hyper::body::Frame<Bytes>, proxy::BodyError>>;

/// The next frame if the body has one at hand.
fn poll_now(body: &mut ProxyBody) -> Option<Polled> {
    let mut cx = Context::from_waker(std::task::Waker::noop());
    match Pin::new(body).poll_frame(&mut cx) {
        Poll::Ready(frame) => Some(frame),
        Poll::Pending => None,
    }
}

async fn next_frame(body: &mut ProxyBody) -> Polled {
    poll_fn(|cx| Pin::new(&mut *body).poll_frame(cx)).await
}

impl<S> Rewound<S> {
    /// Whether the connection starts with HTTP/2's preface (h2c with prior knowledge).
    pub fn is_http2(&self) -> bool {
        self.prefix.starts_with(b"PRI * HTTP/2.0")
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewound<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.prefix.is_empty() {
            let n = self.prefix.len().min(buf.remaining());
            buf.put_slice(&self.prefix[..n]);
            self.prefix.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewound<S> {
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
mod tests;
