//! HTTP/1.1 to a pod for requests without a body, driven by the request itself.
//!
//! hyper's client runs each connection as its own task: a request is handed to it over a
//! channel, and its response comes back over another, so every request costs two task
//! wake-ups on top of the two state machines (the client's side and the pod's). Most proxied
//! requests have no body (GET, HEAD, DELETE...), and for those the exchange is one write and
//! reads until the response ends: this module does exactly that from the request's own task,
//! as nginx does, and the response body is read from the socket as the client's connection
//! asks for it. Requests with a body and upgrades keep going through hyper's client
//! ([`crate::upstream`]), which streams a request body while the response arrives.
//!
//! Responses are parsed with `httparse` (hyper's own parser) and framed as RFC 9112 6.3 says:
//! no body for HEAD and 1xx/204/304, chunked when `Transfer-Encoding` ends with `chunked`, a
//! length from `Content-Length` (differing values are an error), else until the pod closes.
//! Interim 1xx answers are skipped. A connection is kept for the next request only when its
//! response was read to the end, was not close-delimited, and neither side asked to close.

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::request::Parts;
use http::{Method, Response, StatusCode, Version};
use hyper::body::{Body, Frame, SizeHint};
use tokio::io::AsyncWriteExt;

use crate::edge;

/// Most header fields in a response head or trailer section (hyper's default too).
const MAX_HEADERS: usize = 100;
/// Longest response head, and longest trailer section.
const MAX_HEAD: usize = 64 * 1024;
/// Longest chunk-size line (size and extensions).
const MAX_CHUNK_LINE: usize = 4 * 1024;
/// Bytes reserved for each read from the pod.
const READ_CHUNK: usize = 8 * 1024;

/// Why an exchange with a pod failed.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// Reading or writing the socket failed.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The pod closed the connection before the response was complete.
    #[error("the pod closed the connection {0}")]
    Closed(&'static str),
    /// The response is not valid HTTP/1.1.
    #[error("invalid response from the pod: {0}")]
    Invalid(String),
}

impl WireError {
    fn invalid(what: impl std::fmt::Display) -> Self {
        Self::Invalid(what.to_string())
    }

    /// The pod dropped the connection before answering anything: on a connection that had
    /// been idle, the pod most likely closed it just as the request went out.
    pub fn is_stale(&self) -> bool {
        match self {
            Self::Closed(_) => true,
            Self::Io(e) => matches!(
                e.kind(),
                io::ErrorKind::ConnectionReset
                    | io::ErrorKind::BrokenPipe
                    | io::ErrorKind::ConnectionAborted
            ),
            Self::Invalid(_) => false,
        }
    }
}

/// An open HTTP/1.1 connection to a pod with nothing in flight.
#[derive(Debug)]
pub struct Conn {
    io: edge::Stream,
    /// Bytes read but not consumed yet; empty between exchanges.
    buf: BytesMut,
}

impl Conn {
    /// Opens a connection.
    ///
    /// # Errors
    /// The connection cannot be made.
    pub async fn connect(addr: SocketAddr) -> io::Result<Self> {
        Ok(Self {
            io: edge::Stream::connect(addr).await?,
            buf: BytesMut::with_capacity(READ_CHUNK),
        })
    }

    /// Whether an idle connection can take a request: the pod has neither closed it nor sent
    /// anything unasked ([`edge::Stream::has_unread`]: usually no system call).
    pub fn is_usable(&self) -> bool {
        !self.io.has_unread()
    }

    /// Reads more from the pod into the buffer; `Ok(0)` is the end of the stream.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        self.buf.reserve(READ_CHUNK);
        self.io.poll_read_buf(cx, &mut self.buf)
    }

    /// Sends `head` (from [`encode_head`]) and reads the response head. The body is read
    /// through the returned response's [`WireBody`], which owns the connection.
    ///
    /// # Errors
    /// [`WireError`]: writing or reading failed, the pod closed the connection, or its answer
    /// is not HTTP/1.1.
    pub async fn exchange(
        mut self,
        head: &[u8],
        method: &Method,
    ) -> Result<Response<WireBody>, WireError> {
        self.io.write_all(head).await?;
        loop {
            if let Some(parsed) = parse_head(&mut self.buf)? {
                if parsed.status.is_informational() {
                    // 100 Continue, 103 Early Hints...: the final answer follows. 101 cannot
                    // answer a request that asked for no upgrade.
                    if parsed.status == StatusCode::SWITCHING_PROTOCOLS {
                        return Err(WireError::invalid("101 to a request without Upgrade"));
                    }
                    continue;
                }
                return parsed.into_response(self, method);
            }
            if self.buf.len() >= MAX_HEAD {
                return Err(WireError::invalid(format!(
                    "response head longer than {MAX_HEAD} bytes"
                )));
            }
            if poll_fn(|cx| self.poll_fill(cx)).await? == 0 {
                return Err(WireError::Closed("before answering"));
            }
        }
    }
}

/// Writes `parts` as an HTTP/1.1 request head (origin form: the caller has made the URI
/// so) into `out`.
pub fn encode_head(parts: &Parts, out: &mut Vec<u8>) {
    let target = parts
        .uri
        .path_and_query()
        .map_or("/", http::uri::PathAndQuery::as_str);
    out.reserve(64 + target.len() + parts.headers.len() * 32);
    out.extend_from_slice(parts.method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(if target.is_empty() { "/" } else { target }.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    for (name, value) in &parts.headers {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// A parsed response head.
struct Head {
    status: StatusCode,
    version: Version,
    headers: HeaderMap,
}

/// Parses a complete response head off the front of `buf`, or `None` if more is needed.
fn parse_head(buf: &mut BytesMut) -> Result<Option<Head>, WireError> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut fields);
    let len = match response.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(WireError::invalid(e)),
    };
    let status = response
        .code
        .and_then(|code| StatusCode::from_u16(code).ok())
        .ok_or_else(|| WireError::invalid("bad status code"))?;
    let version = if response.version == Some(0) {
        Version::HTTP_10
    } else {
        Version::HTTP_11
    };
    // Names now, values as ranges: once the head is split off the buffer, each value is a
    // slice of it, without a copy.
    let base = buf.as_ptr() as usize;
    let mut fields_at = Vec::with_capacity(response.headers.len());
    for field in response.headers.iter() {
        let name = HeaderName::from_bytes(field.name.as_bytes()).map_err(WireError::invalid)?;
        let start = field.value.as_ptr() as usize - base;
        fields_at.push((name, start, start + field.value.len()));
    }
    let head = buf.split_to(len).freeze();
    let mut headers = HeaderMap::with_capacity(fields_at.len());
    for (name, start, end) in fields_at {
        let value =
            HeaderValue::from_maybe_shared(head.slice(start..end)).map_err(WireError::invalid)?;
        headers.append(name, value);
    }
    Ok(Some(Head {
        status,
        version,
        headers,
    }))
}

impl Head {
    fn into_response(
        mut self,
        conn: Conn,
        method: &Method,
    ) -> Result<Response<WireBody>, WireError> {
        let framing = self.framing(method)?;
        if !matches!(framing, Framing::Length(_)) {
            // Transfer-Encoding overrides Content-Length, which a proxy must then drop (RFC
            // 9112 6.3): it does not describe the body the client will get.
            self.headers.remove(header::CONTENT_LENGTH);
        }
        let keep_alive = !matches!(framing, Framing::UntilClose)
            && match self.version {
                Version::HTTP_10 => has_token(&self.headers, "keep-alive"),
                _ => !has_token(&self.headers, "close"),
            };
        let mut response = Response::new(WireBody {
            conn: Some(conn),
            framing,
            keep_alive,
        });
        *response.status_mut() = self.status;
        *response.version_mut() = self.version;
        *response.headers_mut() = self.headers;
        Ok(response)
    }

    /// How the body is delimited (RFC 9112 6.3).
    fn framing(&self, method: &Method) -> Result<Framing, WireError> {
        if method == Method::HEAD
            || self.status.is_informational()
            || self.status == StatusCode::NO_CONTENT
            || self.status == StatusCode::NOT_MODIFIED
        {
            return Ok(Framing::Length(0));
        }
        if self.headers.contains_key(header::TRANSFER_ENCODING) {
            let last = header_items(&self.headers, header::TRANSFER_ENCODING).last();
            return Ok(match last {
                Some(coding) if coding.eq_ignore_ascii_case(b"chunked") => {
                    Framing::Chunked(Chunk::Size)
                }
                _ => Framing::UntilClose,
            });
        }
        let mut length = None;
        for value in self.headers.get_all(header::CONTENT_LENGTH) {
            for part in value.as_bytes().split(|&b| b == b',') {
                let parsed = std::str::from_utf8(part)
                    .ok()
                    .map(str::trim)
                    .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|s| s.parse::<u64>().ok())
                    .ok_or_else(|| WireError::invalid("bad Content-Length"))?;
                if length.is_some_and(|l| l != parsed) {
                    return Err(WireError::invalid("differing Content-Length values"));
                }
                length = Some(parsed);
            }
        }
        Ok(length.map_or(Framing::UntilClose, Framing::Length))
    }
}

/// The items of a comma-separated header value (RFC 9110 5.6.1), trimmed, empty ones skipped.
pub(crate) fn list_items(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(<[u8]>::trim_ascii)
        .filter(|item| !item.is_empty())
}

/// The items of every `header` field of `headers` (values that are not visible ASCII skipped).
pub(crate) fn header_items(headers: &HeaderMap, header: HeaderName) -> impl Iterator<Item = &[u8]> {
    headers
        .get_all(header)
        .into_iter()
        .filter(|v| v.to_str().is_ok())
        .flat_map(|v| list_items(v.as_bytes()))
}

/// Whether a `Connection` header lists `token`.
pub(crate) fn has_token(headers: &HeaderMap, token: &str) -> bool {
    header_items(headers, header::CONNECTION).any(|t| t.eq_ignore_ascii_case(token.as_bytes()))
}

/// How a response body ends.
#[derive(Debug)]
enum Framing {
    /// After this many more bytes.
    Length(u64),
    /// With the last chunk (and the trailer section after it).
    Chunked(Chunk),
    /// When the pod closes the connection.
    UntilClose,
}

/// Where in a chunked body the next byte belongs.
#[derive(Debug)]
enum Chunk {
    /// The chunk-size line.
    Size,
    /// This many more bytes of chunk data.
    Data(u64),
    /// The CRLF after chunk data.
    DataEnd,
    /// The trailer section after the last chunk.
    Trailers,
    /// All read.
    Done,
}

/// The body of a pod's response, read from the connection as it is polled. When it ends and
/// the connection can be kept, [`WireBody::into_idle`] returns it.
#[derive(Debug)]
pub struct WireBody {
    /// `None` once the body failed.
    conn: Option<Conn>,
    framing: Framing,
    keep_alive: bool,
}

impl WireBody {
    /// The connection, if the body was read to the end and the connection can take the next
    /// request.
    pub fn into_idle(mut self) -> Option<Conn> {
        if !self.is_end_stream() || !self.keep_alive {
            return None;
        }
        self.conn.take().filter(|conn| conn.buf.is_empty())
    }

    fn fail(&mut self, error: WireError) -> Poll<Option<Result<Frame<Bytes>, WireError>>> {
        self.conn = None;
        Poll::Ready(Some(Err(error)))
    }
}

impl Body for WireBody {
    type Data = Bytes;
    type Error = WireError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, WireError>>> {
        let this = self.get_mut();
        loop {
            let Some(conn) = this.conn.as_mut() else {
                return Poll::Ready(None);
            };
            let step = match &mut this.framing {
                Framing::Length(0) | Framing::Chunked(Chunk::Done) => return Poll::Ready(None),
                Framing::Length(left) => {
                    take_data(&mut conn.buf, left).map(|data| Some(Frame::data(data)))
                }
                Framing::UntilClose => {
                    (!conn.buf.is_empty()).then(|| Some(Frame::data(conn.buf.split().freeze())))
                }
                Framing::Chunked(state) => match decode_chunked(state, &mut conn.buf) {
                    Ok(step) => step,
                    Err(e) => return this.fail(e),
                },
            };
            match step {
                Some(Some(frame)) => return Poll::Ready(Some(Ok(frame))),
                // The state moved on (a chunk line or CRLF consumed): look again.
                Some(None) => continue,
                None => {}
            }
            // Nothing decodable in the buffer: read more.
            match ready!(conn.poll_fill(cx)) {
                Ok(0) => {
                    if matches!(this.framing, Framing::UntilClose) {
                        this.conn = None;
                        return Poll::Ready(None);
                    }
                    return this.fail(WireError::Closed("in the middle of the response body"));
                }
                Ok(_) => {}
                Err(e) => return this.fail(e.into()),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(
            self.framing,
            Framing::Length(0) | Framing::Chunked(Chunk::Done)
        )
    }

    fn size_hint(&self) -> SizeHint {
        match self.framing {
            Framing::Length(left) => SizeHint::with_exact(left),
            _ => SizeHint::default(),
        }
    }
}

/// Up to `left` bytes of data from the buffer, or `None` when it is empty.
fn take_data(buf: &mut BytesMut, left: &mut u64) -> Option<Bytes> {
    if buf.is_empty() {
        return None;
    }
    let n = usize::try_from(*left).unwrap_or(usize::MAX).min(buf.len());
    *left -= n as u64;
    Some(buf.split_to(n).freeze())
}

/// One step of chunked decoding from the buffer: `None` when more bytes are needed,
/// `Some(Some(frame))` for data or trailers, `Some(None)` when only the state moved on.
fn decode_chunked(
    state: &mut Chunk,
    buf: &mut BytesMut,
) -> Result<Option<Option<Frame<Bytes>>>, WireError> {
    match state {
        Chunk::Size => {
            let Some(end) = find_crlf(buf) else {
                return if buf.len() > MAX_CHUNK_LINE {
                    Err(WireError::invalid("chunk-size line too long"))
                } else {
                    Ok(None)
                };
            };
            let size = parse_chunk_size(&buf[..end])?;
            buf.advance(end + 2);
            *state = if size == 0 {
                Chunk::Trailers
            } else {
                Chunk::Data(size)
            };
            Ok(Some(None))
        }
        Chunk::Data(left) => {
            let data = take_data(buf, left);
            if *left == 0 {
                *state = Chunk::DataEnd;
            }
            Ok(data.map(|data| Some(Frame::data(data))))
        }
        Chunk::DataEnd => {
            if buf.len() < 2 {
                return Ok(None);
            }
            if &buf[..2] != b"\r\n" {
                return Err(WireError::invalid("chunk data not followed by CRLF"));
            }
            buf.advance(2);
            *state = Chunk::Size;
            Ok(Some(None))
        }
        Chunk::Trailers => {
            if buf.starts_with(b"\r\n") {
                buf.advance(2);
                *state = Chunk::Done;
                return Ok(Some(None));
            }
            let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
            match httparse::parse_headers(buf, &mut fields) {
                Ok(httparse::Status::Complete((len, fields))) => {
                    let mut trailers = HeaderMap::with_capacity(fields.len());
                    for field in fields.iter() {
                        let name = HeaderName::from_bytes(field.name.as_bytes())
                            .map_err(WireError::invalid)?;
                        let value =
                            HeaderValue::from_bytes(field.value).map_err(WireError::invalid)?;
                        trailers.append(name, value);
                    }
                    buf.advance(len);
                    *state = Chunk::Done;
                    Ok(Some(Some(Frame::trailers(trailers))))
                }
                Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => {
                    Err(WireError::invalid("trailer section too long"))
                }
                Ok(httparse::Status::Partial) => Ok(None),
                Err(e) => Err(WireError::invalid(e)),
            }
        }
        Chunk::Done => Ok(None),
    }
}

fn find_crlf(buf: &[u8]) -> Option<usize> {
    buf.windows(2).position(|w| w == b"\r\n")
}

/// The size of a chunk-size line (hex digits, then optional `;extensions`).
fn parse_chunk_size(line: &[u8]) -> Result<u64, WireError> {
    let digits = line
        .iter()
        .position(|&b| b == b';')
        .map_or(line, |semicolon| &line[..semicolon]);
    let digits = digits.trim_ascii();
    if digits.is_empty() || digits.len() > 16 {
        return Err(WireError::invalid("bad chunk size"));
    }
    digits.iter().try_fold(0u64, |size, &b| {
        let digit = (b as char)
            .to_digit(16)
            .ok_or_else(|| WireError::invalid("bad chunk size"))?;
        Ok(size << 4 | u64::from(digit))
    })
}

#[cfg(test)]
mod tests;
