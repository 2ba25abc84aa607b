//! What an event source said, in a form that is safe to show.
//!
//! A trigger's address is chosen by whoever writes the ScaledObject, and the operator asks it
//! from its own network position: a tenant can point `metrics-api`, `prometheus`, `postgresql`
//! or any other scaler at a cloud metadata endpoint or an in-cluster service. Anything the
//! answer contains (a response body, the string found at `valueLocation`, a PostgreSQL
//! `ERROR: ...` message, a Redis `ERR ...` reply, a gRPC status message, an AWS error message)
//! would then reach the tenant through `KEDAScalerFailed` Events, the `Ready` condition and
//! `explain`. So [`ScalerError::Connect`](crate::ScalerError::Connect) and
//! [`ScalerError::Query`](crate::ScalerError::Query) carry a [`Failure`], not an arbitrary
//! error: its `Display` shows only the [`Kind`] of failure (connection refused, timed out, TLS,
//! HTTP status code and the answer's size, a server error *code* from a fixed vocabulary, what
//! was wrong with the answer in our own words), never text the server chose.
//!
//! The raw text (the library's error chain, the start of the body) is kept for operators of
//! keda-rs, truncated to [`RAW_LOG_BYTES`] bytes: the operator logs it at `debug` level on
//! target `keda_scalers::remote` ([`Failure::log_raw`], [`crate::ScalerError::log_raw`]) when
//! it reports the error; it is never part of `Display` or `Debug`.
//!
//! Library errors become kinds through [`Classify`]; an error type nobody classified shows as
//! [`Kind::Other`] (its text only at debug level), so a new scaler cannot echo an answer by
//! accident.

use std::error::Error as StdError;
use std::fmt;
use std::io;

/// The most bytes of an answer or library error kept and logged at debug level.
pub const RAW_LOG_BYTES: usize = 256;

/// A failure of talking to an event source: the kind of failure, safe to show, and what the
/// source said, logged at debug level only.
#[derive(Clone)]
pub struct Failure {
    // Boxed: a ScalerError (and the operator's error around it) stays small.
    kind: Box<Kind>,
    raw: Option<String>,
}

/// The kind of a [`Failure`]: every field is a number, a fixed word, or text written by
/// keda-rs from the trigger's own metadata; none holds text of the answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The connection was refused.
    Refused,
    /// No answer (or no connection) within the time allowed.
    TimedOut,
    /// The host name does not resolve.
    Unresolved,
    /// The connection closed or was reset before the answer was complete.
    Closed,
    /// Another I/O error, by kind.
    Io(io::ErrorKind),
    /// The TLS handshake failed; the text is rustls' own (built from its enums, not from the
    /// peer's bytes).
    Tls(String),
    /// The server refused the credentials.
    Auth,
    /// An HTTP answer with a status other than 2xx.
    Status {
        /// The status code.
        code: u16,
        /// The length of the body.
        bytes: usize,
        /// The body's media type when it is a well-known one.
        content_type: Option<&'static str>,
    },
    /// The server answered an error: the system and the error's code, when the code is one
    /// of a fixed vocabulary (SQLSTATE, MySQL error number, Redis error kind, gRPC status,
    /// AMQP reply code, Kafka error code, a known cloud error code).
    Server {
        /// e.g. `PostgreSQL`.
        system: &'static str,
        /// The code, if it can be shown.
        code: Option<String>,
    },
    /// The answer is not what the scaler can use; the text says why in keda-rs' words (never
    /// quoting the answer), e.g. `valueLocation "a.b" is a string, not a number`.
    Answer(String),
    /// A failure on keda-rs' side (a limit, a timeout it set, a configuration problem); the
    /// text is keda-rs' own.
    Local(String),
    /// A failure of `system` that could not be classified; its text is at debug level.
    Other {
        /// e.g. `HTTP client`.
        system: &'static str,
    },
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Kind::Refused => f.write_str("connection refused"),
            Kind::TimedOut => f.write_str("timed out"),
            Kind::Unresolved => f.write_str("the host name does not resolve"),
            Kind::Closed => f.write_str("the connection was closed"),
            Kind::Io(kind) => write!(f, "I/O error ({kind})"),
            Kind::Tls(text) => write!(f, "TLS: {text}"),
            Kind::Auth => f.write_str("the server refused the credentials"),
            Kind::Status {
                code,
                bytes,
                content_type,
            } => {
                let reason = http::StatusCode::from_u16(*code)
                    .ok()
                    .and_then(|s| s.canonical_reason())
                    .map(|r| format!(" {r}"))
                    .unwrap_or_default();
                write!(f, "answered HTTP {code}{reason} ({bytes} bytes")?;
                if let Some(t) = content_type {
                    write!(f, " of {t}")?;
                }
                f.write_str(")")?;
                if *code == 401 || *code == 403 {
                    f.write_str("; check the trigger's authModes and its credentials")?;
                }
                Ok(())
            }
            Kind::Server { system, code } => match code {
                Some(code) => write!(f, "{system} answered error {code}"),
                None => write!(f, "{system} answered an error"),
            },
            Kind::Answer(text) | Kind::Local(text) => f.write_str(text),
            Kind::Other { system } => write!(f, "{system} error"),
        }
    }
}

impl Failure {
    /// A failure of `kind`; `raw` (what the source said, a library's error chain) is logged
    /// at debug level, truncated, and kept out of `Display`.
    pub fn new(kind: Kind, raw: Option<String>) -> Self {
        Self {
            kind: Box::new(kind),
            raw: raw.map(|r| truncate(&r)),
        }
    }

    /// Logs the raw text at debug level (target `keda_scalers::remote`), with `context` (the
    /// error's own message): what an operator of keda-rs may read, never a tenant.
    pub fn log_raw(&self, context: &dyn fmt::Display) {
        if let Some(raw) = &self.raw {
            tracing::debug!(target: "keda_scalers::remote", error = %context, raw = %raw, "what the event source said");
        }
    }

    /// This failure with its raw text passed through `scrub` (which removes credentials).
    #[must_use]
    pub fn scrub_raw(self, scrub: impl Fn(&str) -> String) -> Self {
        Self {
            kind: self.kind,
            raw: self.raw.map(|r| scrub(&r)),
        }
    }

    /// A failure of keda-rs' own: `text` must not contain anything an event source sent.
    pub fn local(text: impl Into<String>) -> Self {
        Self::new(Kind::Local(text.into()), None)
    }

    /// An answer the scaler cannot use: `why` in keda-rs' words (never quoting the answer),
    /// `answer` the start of it (debug level only).
    pub fn answer(why: impl Into<String>, answer: &[u8]) -> Self {
        let raw = (!answer.is_empty()).then(|| String::from_utf8_lossy(answer).into_owned());
        Self::new(Kind::Answer(why.into()), raw)
    }

    /// An HTTP answer with a non-2xx status, its body at debug level.
    pub fn status(code: u16, content_type: Option<&str>, body: &[u8]) -> Self {
        let raw = (!body.is_empty()).then(|| String::from_utf8_lossy(body).into_owned());
        Self::new(
            Kind::Status {
                code,
                bytes: body.len(),
                content_type: content_type.and_then(known_media_type),
            },
            raw,
        )
    }

    /// A server's error answer with a `code` shown only when it is one of `vocabulary`
    /// (compared ASCII case-insensitively) and `message` at debug level.
    pub fn server(
        system: &'static str,
        code: Option<&str>,
        vocabulary: &[&str],
        message: &str,
    ) -> Self {
        let raw = format!("{}: {message}", code.unwrap_or("no code"));
        let code = code.and_then(|c| {
            vocabulary
                .iter()
                .find(|v| v.eq_ignore_ascii_case(c))
                .map(|v| (*v).to_string())
        });
        Self::new(Kind::Server { system, code }, Some(raw))
    }

    /// The kind, safe to show.
    pub fn kind(&self) -> &Kind {
        &self.kind
    }

    /// What the source said, truncated to [`RAW_LOG_BYTES`]: for debug-level logs only.
    pub fn raw(&self) -> Option<&str> {
        self.raw.as_deref()
    }

    /// The failure of any error: the first error of its source chain that [`classify_dyn`]
    /// knows decides the kind; [`Kind::Other`] of `system` if none does. The whole chain is
    /// the raw text.
    pub fn of(system: &'static str, error: &(dyn StdError + 'static)) -> Self {
        Self::of_scrubbed(system, error, str::to_string)
    }

    /// [`Failure::of`], the raw text passed through `scrub` (which removes credentials).
    pub fn of_scrubbed(
        system: &'static str,
        error: &(dyn StdError + 'static),
        scrub: impl Fn(&str) -> String,
    ) -> Self {
        let raw = Some(scrub(&crate::error::error_chain(error)));
        let mut current = Some(error);
        while let Some(e) = current {
            if let Some(kind) = classify_dyn(e) {
                return Self::new(kind, raw);
            }
            current = e.source();
        }
        Self::new(Kind::Other { system }, raw)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.kind.fmt(f)
    }
}

impl fmt::Debug for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The raw text stays out of Debug too: errors are logged with `{:?}` at info level.
        f.debug_struct("Failure")
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl StdError for Failure {}

/// Errors that know their [`Failure`]: each scaler's error types and the client libraries'.
pub trait Classify {
    /// The failure, safe to show.
    fn classify(&self) -> Failure;
}

impl Classify for io::Error {
    fn classify(&self) -> Failure {
        Failure::of("I/O", self)
    }
}

impl Classify for reqwest::Error {
    fn classify(&self) -> Failure {
        Failure::of("HTTP client", self)
    }
}

impl Classify for tokio_postgres::Error {
    fn classify(&self) -> Failure {
        Failure::of("PostgreSQL", self)
    }
}

impl Classify for mysql_async::Error {
    fn classify(&self) -> Failure {
        Failure::of("MySQL", self)
    }
}

impl Classify for redis::RedisError {
    fn classify(&self) -> Failure {
        Failure::of("Redis", self)
    }
}

impl Classify for lapin::Error {
    fn classify(&self) -> Failure {
        Failure::of("AMQP", self)
    }
}

impl Classify for rdkafka::error::KafkaError {
    fn classify(&self) -> Failure {
        Failure::of("Kafka", self)
    }
}

impl Classify for tonic::Status {
    fn classify(&self) -> Failure {
        Failure::of("gRPC", self)
    }
}

/// The kind of `error` alone (not its sources), when it is a type this module knows.
fn classify_dyn(error: &(dyn StdError + 'static)) -> Option<Kind> {
    if let Some(f) = error.downcast_ref::<Failure>() {
        return Some(f.kind().clone());
    }
    if let Some(e) = error.downcast_ref::<io::Error>() {
        // A custom io::Error wraps another error (rustls, a timeout): that one says more.
        if let Some(inner) = e.get_ref()
            && let Some(kind) = classify_dyn(inner)
        {
            return Some(kind);
        }
        return Some(io_kind(e.kind()));
    }
    if let Some(e) = error.downcast_ref::<serde_json::Error>() {
        return Some(Kind::Answer(format!("the answer is {}", json_error(e))));
    }
    if let Some(e) = error.downcast_ref::<rustls::Error>() {
        return Some(Kind::Tls(e.to_string()));
    }
    if let Some(e) = error.downcast_ref::<reqwest::Error>() {
        if e.is_timeout() {
            return Some(Kind::TimedOut);
        }
        // Otherwise a source (io::Error, rustls) says more; a bare reqwest error is "other".
        return None;
    }
    if let Some(e) = error.downcast_ref::<tokio_postgres::Error>() {
        if let Some(code) = e.code() {
            let code = code.code();
            let shown = (code.len() == 5
                && code
                    .bytes()
                    .all(|b| b.is_ascii_digit() || b.is_ascii_uppercase()))
            .then(|| format!("SQLSTATE {code}"));
            return Some(match code {
                "28P01" | "28000" => Kind::Auth,
                _ => Kind::Server {
                    system: "PostgreSQL",
                    code: shown,
                },
            });
        }
        if e.is_closed() {
            return Some(Kind::Closed);
        }
        return None;
    }
    if let Some(e) = error.downcast_ref::<tokio_postgres::error::DbError>() {
        return Some(Kind::Server {
            system: "PostgreSQL",
            code: Some(format!("SQLSTATE {}", e.code().code())).filter(|c| {
                c[9..]
                    .bytes()
                    .all(|b| b.is_ascii_digit() || b.is_ascii_uppercase())
            }),
        });
    }
    if let Some(e) = error.downcast_ref::<mysql_async::Error>() {
        return match e {
            mysql_async::Error::Server(s) => Some(match s.code {
                1045 | 1044 | 1698 => Kind::Auth,
                code => Kind::Server {
                    system: "MySQL",
                    code: Some(format!("{code}")),
                },
            }),
            mysql_async::Error::Driver(mysql_async::DriverError::NoClientSslFlagFromServer) => {
                Some(Kind::Tls("the server does not offer SSL/TLS".into()))
            }
            mysql_async::Error::Driver(_) => Some(Kind::Other {
                system: "MySQL driver",
            }),
            _ => None,
        };
    }
    if let Some(e) = error.downcast_ref::<redis::RedisError>() {
        if e.is_timeout() {
            return Some(Kind::TimedOut);
        }
        if e.is_connection_refusal() {
            return Some(Kind::Refused);
        }
        if e.is_connection_dropped() {
            return Some(Kind::Closed);
        }
        return Some(match e.kind() {
            redis::ErrorKind::Io => return None,
            redis::ErrorKind::AuthenticationFailed => Kind::Auth,
            redis::ErrorKind::Server(kind) => Kind::Server {
                system: "Redis",
                code: Some(format!("{kind:?}")),
            },
            // A reply of an extension: its code is the server's word.
            redis::ErrorKind::Extension => Kind::Server {
                system: "Redis",
                code: None,
            },
            redis::ErrorKind::Parse | redis::ErrorKind::UnexpectedReturnType => {
                Kind::Answer("Redis answered something the client cannot read".into())
            }
            other => Kind::Other {
                system: redis_kind(&other),
            },
        });
    }
    if let Some(e) = error.downcast_ref::<lapin::Error>() {
        return match e.kind() {
            lapin::ErrorKind::ProtocolError(amqp) => Some(Kind::Server {
                system: "the AMQP broker",
                code: Some(format!("{} {}", amqp.get_id(), amqp.kind())),
            }),
            lapin::ErrorKind::IOError(io) => classify_dyn(io.as_ref()),
            lapin::ErrorKind::ParsingError(_) => Some(Kind::Answer(
                "the AMQP broker sent a frame that does not parse".into(),
            )),
            lapin::ErrorKind::MissingHeartbeatError => Some(Kind::Closed),
            lapin::ErrorKind::InvalidConnectionState(_)
            | lapin::ErrorKind::InvalidChannelState(..) => Some(Kind::Closed),
            _ => None,
        };
    }
    if let Some(e) = error.downcast_ref::<rdkafka::error::KafkaError>() {
        return Some(match e.rdkafka_error_code() {
            Some(code) => Kind::Server {
                system: "Kafka",
                code: Some(format!("{code:?}")),
            },
            None => Kind::Other { system: "Kafka" },
        });
    }
    if let Some(e) = error.downcast_ref::<tonic::Status>() {
        return Some(match e.code() {
            tonic::Code::Unauthenticated | tonic::Code::PermissionDenied => Kind::Auth,
            tonic::Code::DeadlineExceeded => Kind::TimedOut,
            code => Kind::Server {
                system: "the gRPC server",
                code: Some(format!("{code:?}")),
            },
        });
    }
    None
}

fn redis_kind(kind: &redis::ErrorKind) -> &'static str {
    match kind {
        redis::ErrorKind::InvalidClientConfig => "Redis client configuration",
        redis::ErrorKind::Client => "Redis client",
        _ => "Redis",
    }
}

fn io_kind(kind: io::ErrorKind) -> Kind {
    match kind {
        io::ErrorKind::ConnectionRefused => Kind::Refused,
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => Kind::TimedOut,
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe
        | io::ErrorKind::UnexpectedEof
        | io::ErrorKind::NotConnected => Kind::Closed,
        other => Kind::Io(other),
    }
}

/// `media` (a Content-Type value) as one of the well-known media types, or `None`: a header
/// value is the server's text, so only a fixed vocabulary is shown.
pub fn known_media_type(media: &str) -> Option<&'static str> {
    const KNOWN: &[&str] = &[
        "application/json",
        "application/xml",
        "application/yaml",
        "application/x-yaml",
        "application/octet-stream",
        "application/problem+json",
        "application/grpc",
        "text/plain",
        "text/html",
        "text/xml",
        "text/yaml",
    ];
    let essence = media.split(';').next().unwrap_or_default().trim();
    KNOWN
        .iter()
        .find(|k| k.eq_ignore_ascii_case(essence))
        .copied()
}

/// Why `error` (decoding an answer) failed, without the text serde quotes from the answer:
/// `not valid JSON (line 1, column 7)` or `not of the expected shape (line 1, column 7)`; a
/// limit of keda-rs' own ([`AtMost`]) says which: `an array of more than 10000 elements (line 1,
/// column 30007)`.
pub fn json_error(error: &impl JsonFailure) -> String {
    error.shown()
}

/// A JSON decoding error, as [`json_error`] shows it.
pub trait JsonFailure {
    /// What went wrong, in keda-rs' words.
    fn shown(&self) -> String;
}

impl JsonFailure for serde_json::Error {
    fn shown(&self) -> String {
        decode_error(self)
    }
}

impl JsonFailure for JsonError {
    fn shown(&self) -> String {
        self.to_string()
    }
}

fn decode_error(error: &serde_json::Error) -> String {
    use serde_json::error::Category;
    let (line, column) = (error.line(), error.column());
    match error.classify() {
        Category::Syntax | Category::Eof | Category::Io => {
            format!("not valid JSON (line {line}, column {column})")
        }
        Category::Data => match over_limit(error) {
            Some(limit) => format!("{OVER_LIMIT}{limit} elements (line {line}, column {column})"),
            None => format!("not of the expected shape (line {line}, column {column})"),
        },
    }
}

/// The limit in an error of [`AtMost`]'s, which is all digits; `None` for any other error.
fn over_limit(error: &serde_json::Error) -> Option<String> {
    let text = error.to_string();
    // serde_json appends " at line L column C" to the message.
    let limit = text.strip_prefix(OVER_LIMIT)?.split(" at line").next()?;
    (!limit.is_empty() && limit.bytes().all(|b| b.is_ascii_digit())).then(|| limit.to_string())
}

/// The start of [`AtMost`]'s error: written by keda-rs (the rest is the limit), so
/// [`json_error`] shows it.
const OVER_LIMIT: &str = "an array of more than ";

/// A JSON array of at most `MAX` elements. Read element by element, and an element past `MAX`
/// is an error before it is made, so an answer cannot make a parse allocate for more than
/// `MAX`, however small each element is in the answer (`[{},{},...]`: an 8 MiB answer holds 2.8
/// million, each of which would become a whole value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AtMost<T, const MAX: usize>(pub Vec<T>);

impl<'de, T: serde::Deserialize<'de>, const MAX: usize> serde::Deserialize<'de> for AtMost<T, MAX> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Elements<T, const MAX: usize>(std::marker::PhantomData<T>);

        impl<'de, T: serde::Deserialize<'de>, const MAX: usize> serde::de::Visitor<'de>
            for Elements<T, MAX>
        {
            type Value = AtMost<T, MAX>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "an array of at most {MAX} elements")
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Self::Value, A::Error> {
                let mut items = Vec::new();
                while items.len() < MAX {
                    match seq.next_element()? {
                        Some(item) => items.push(item),
                        None => return Ok(AtMost(items)),
                    }
                }
                if seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
                    return Err(serde::de::Error::custom(format_args!("{OVER_LIMIT}{MAX}")));
                }
                Ok(AtMost(items))
            }
        }

        deserializer.deserialize_seq(Elements(std::marker::PhantomData))
    }
}

/// A JSON array of which only the first element is made; the others are checked to be JSON and
/// dropped as they are read, so their number costs no memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct First<T>(pub Option<T>);

impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for First<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Elements<T>(std::marker::PhantomData<T>);

        impl<'de, T: serde::Deserialize<'de>> serde::de::Visitor<'de> for Elements<T> {
            type Value = First<T>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array")
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Self::Value, A::Error> {
                let first = seq.next_element()?;
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(First(first))
            }
        }

        deserializer.deserialize_seq(Elements(std::marker::PhantomData))
    }
}

/// The most values an answer is decoded into: JSON and YAML values, XML nodes (1,048,576, an
/// eighth of [`MAX_BODY_BYTES`](crate::http_client::MAX_BODY_BYTES)). An answer is bounded in
/// bytes, but a decoded value takes far more memory than its text: `[[],[],...]` is 3 bytes an
/// element in the answer and at least 32 in a `serde_json::Value` tree (64 with the array's
/// growth), so an 8 MiB answer of tiny values would cost about 180 MiB to decode, and whoever
/// writes a trigger chooses the server. An answer of real values (numbers, names, timestamps)
/// averages well over 8 bytes a value, so only an answer that holds next to nothing but
/// structure is refused below the byte limit; the largest tree decoded is then about 64 MiB.
pub const MAX_ANSWER_VALUES: usize = 1 << 20;

/// Where an answer passed [`MAX_ANSWER_VALUES`] (1-based line and column); it shows as `a
/// document of more than 1048576 values (line 1, column 3145730)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooManyValues {
    /// The line of the value past the limit.
    pub line: usize,
    /// Its column, in bytes.
    pub column: usize,
}

impl fmt::Display for TooManyValues {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a document of more than {MAX_ANSWER_VALUES} values (line {}, column {})",
            self.line, self.column
        )
    }
}

impl TooManyValues {
    fn at(text: &[u8], offset: usize) -> Self {
        let before = text.get(..offset).unwrap_or(text);
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |newline| newline + 1);
        Self {
            line: before.iter().filter(|&&b| b == b'\n').count() + 1,
            column: offset - line_start + 1,
        }
    }
}

/// Whether the JSON text `body` holds more than `max` values, and where, read before decoding
/// it: an array or object counts once, and each element or member after its first once more
/// (the `[`, `{` and `,` outside strings). Invalid JSON is counted as far as it goes; the decoder
/// says what is wrong with it.
fn json_past(body: &[u8], max: usize) -> Option<TooManyValues> {
    let mut values = 1usize;
    let (mut in_string, mut escaped) = (false, false);
    for (offset, &byte) in body.iter().enumerate() {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' | b',' => {
                values += 1;
                if values > max {
                    return Some(TooManyValues::at(body, offset));
                }
            }
            _ => {}
        }
    }
    None
}

/// Whether the YAML text `body` holds more than [`MAX_ANSWER_VALUES`] values, and where (the
/// position is the parser's, when it has one). The values are counted as a decoder would make
/// them, by reading the document once without keeping anything: an alias (`*a`) counts every
/// value of the node it repeats, each time, so `b: [*a, *a, ...]` over a large `&a` is refused
/// before it is made (the parser's own guard counts repetitions, not what they repeat). Text that
/// is not YAML is not refused here: decoding it says what is wrong.
pub fn yaml_past_limit(body: &[u8]) -> Option<TooManyValues> {
    use serde::de::DeserializeSeed;
    let left = std::cell::Cell::new(MAX_ANSWER_VALUES);
    let counted = Nodes(&left).deserialize(serde_yaml::Deserializer::from_slice(body));
    match counted {
        Err(error) if left.get() == 0 => {
            let (line, column) = error
                .location()
                .map_or((0, 0), |at| (at.line(), at.column()));
            Some(TooManyValues { line, column })
        }
        _ => None,
    }
}

/// Reads one value, counting it and every value in it against `left`, and keeps nothing.
struct Nodes<'a>(&'a std::cell::Cell<usize>);

impl Nodes<'_> {
    fn take<E: serde::de::Error>(&self) -> Result<(), E> {
        match self.0.get().checked_sub(1) {
            Some(left) => {
                self.0.set(left);
                Ok(())
            }
            None => Err(E::custom(format_args!(
                "more than {MAX_ANSWER_VALUES} values"
            ))),
        }
    }

    fn again(&self) -> Self {
        Nodes(self.0)
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for Nodes<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Nodes<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any value")
    }

    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
        self.take()
    }

    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<(), E> {
        self.take()
    }

    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<(), E> {
        self.take()
    }

    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<(), E> {
        self.take()
    }

    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<(), E> {
        self.take()
    }

    fn visit_bytes<E: serde::de::Error>(self, _: &[u8]) -> Result<(), E> {
        self.take()
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<(), E> {
        self.take()
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        self.take()
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        self.take()?;
        serde::de::DeserializeSeed::deserialize(self, deserializer)
    }

    fn visit_newtype_struct<D: serde::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<(), D::Error> {
        self.take()?;
        serde::de::DeserializeSeed::deserialize(self, deserializer)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.take()?;
        while seq.next_element_seed(self.again())?.is_some() {}
        Ok(())
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.take()?;
        while map.next_key_seed(self.again())?.is_some() {
            map.next_value_seed(self.again())?;
        }
        Ok(())
    }

    fn visit_enum<A: serde::de::EnumAccess<'de>>(self, data: A) -> Result<(), A::Error> {
        use serde::de::VariantAccess;
        // A tagged value (`!tag value`): the tag, then the value.
        let ((), variant) = data.variant_seed(self.again())?;
        variant.newtype_variant_seed(self)
    }
}

/// Why a JSON answer could not be decoded by [`from_json`]. Its `Display` (and `Debug`) is in
/// keda-rs' words ([`json_error`]'s, or [`TooManyValues`]'); the decoder's own text, which
/// quotes the answer, is never shown.
pub enum JsonError {
    /// The decoder refused the answer.
    Decode(serde_json::Error),
    /// The answer holds more than [`MAX_ANSWER_VALUES`] values; nothing was decoded.
    TooMany(TooManyValues),
}

impl JsonError {
    /// The line where decoding stopped (1-based).
    pub fn line(&self) -> usize {
        match self {
            Self::Decode(error) => error.line(),
            Self::TooMany(at) => at.line,
        }
    }

    /// The column where decoding stopped (1-based, in bytes).
    pub fn column(&self) -> usize {
        match self {
            Self::Decode(error) => error.column(),
            Self::TooMany(at) => at.column,
        }
    }
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Decode(error) => f.write_str(&decode_error(error)),
            Self::TooMany(at) => at.fmt(f),
        }
    }
}

impl fmt::Debug for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JsonError({self})")
    }
}

impl StdError for JsonError {}

/// Decodes the JSON answer `body` as `T`, after checking that it holds at most
/// [`MAX_ANSWER_VALUES`] values: every JSON answer of an event source is decoded here, so none can
/// make a decode allocate many times its own size.
///
/// # Errors
/// The answer holds too many values, or does not decode as `T`.
pub fn from_json<'a, T: serde::Deserialize<'a>>(body: &'a [u8]) -> Result<T, JsonError> {
    if let Some(at) = json_past(body, MAX_ANSWER_VALUES) {
        return Err(JsonError::TooMany(at));
    }
    serde_json::from_slice(body).map_err(JsonError::Decode)
}

/// Parses the XML answer `text` with at most [`MAX_ANSWER_VALUES`] nodes; past them the parse
/// stops, and [`xml_error`] says `an XML document of more than 1048576 nodes`.
///
/// # Errors
/// The answer is not XML, or holds too many nodes.
pub fn xml(text: &str) -> Result<roxmltree::Document<'_>, roxmltree::Error> {
    roxmltree::Document::parse_with_options(
        text,
        roxmltree::ParsingOptions {
            nodes_limit: u32::try_from(MAX_ANSWER_VALUES).unwrap_or(u32::MAX),
            ..roxmltree::ParsingOptions::default()
        },
    )
}

/// Why an XML answer did not parse, in keda-rs' words: `invalid XML (at 3:7)` or `an XML
/// document of more than 1048576 nodes`; roxmltree's own text can quote the answer (an entity's
/// name).
pub fn xml_error(error: &roxmltree::Error) -> String {
    match error {
        roxmltree::Error::NodesLimitReached => {
            format!("an XML document of more than {MAX_ANSWER_VALUES} nodes")
        }
        other => format!("invalid XML (at {})", other.pos()),
    }
}

/// What a JSON value is, in words: `a string`, `an object`, ...
pub fn json_type(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// The first [`RAW_LOG_BYTES`] bytes of `text` (on a character boundary), trimmed.
pub fn truncate(text: &str) -> String {
    let text = text.trim();
    if text.len() <= RAW_LOG_BYTES {
        return text.to_string();
    }
    let mut end = RAW_LOG_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_keeps_up_to_its_bound_and_refuses_more_in_its_own_words() {
        let parse = |text: &str| serde_json::from_str::<AtMost<u32, 3>>(text);
        assert_eq!(parse("[]").expect("empty").0, Vec::<u32>::new());
        assert_eq!(parse("[1, 2, 3]").expect("three").0, vec![1, 2, 3]);
        let error = parse("[1, 2, 3, 4]").expect_err("four");
        assert!(
            json_error(&error).starts_with("an array of more than 3 elements (line 1, column "),
            "{}",
            json_error(&error)
        );
        // An answer's own text is never shown, even in an array.
        let error = parse(r#"["do not show this"]"#).expect_err("a string");
        let shown = json_error(&error);
        assert!(
            shown.starts_with("not of the expected shape (line 1, column "),
            "{shown}"
        );
        assert!(!shown.contains("show this"), "{shown}");
    }

    #[test]
    fn at_most_stops_reading_a_long_array_of_tiny_elements_at_its_bound() {
        let mut text = String::from("[");
        for _ in 0..200_000 {
            text.push_str("{},");
        }
        text.push_str("{}]");
        type Maps = AtMost<serde_json::Map<String, serde_json::Value>, 10>;
        let error = serde_json::from_str::<Maps>(&text).expect_err("too many");
        assert!(
            json_error(&error).starts_with("an array of more than 10 elements"),
            "{}",
            json_error(&error)
        );
        // The error comes at the 11th element, not at the end of the answer.
        assert!(error.column() < 40, "column {}", error.column());
    }

    #[test]
    fn first_makes_only_the_first_element() {
        let parse = |text: &str| serde_json::from_str::<First<u32>>(text);
        assert_eq!(parse("[]").expect("empty").0, None);
        assert_eq!(
            parse(r#"[7, {"a": [1, 2]}, "x", null, [[]]]"#)
                .expect("first and others")
                .0,
            Some(7)
        );
        // The others must still be JSON.
        assert!(parse("[7, {]").is_err());
        // The first must be of the type.
        assert!(parse(r#"["7"]"#).is_err());
    }

    const MARKER: &str = "SECRET-MARKER-7f3a";

    #[test]
    fn statuses_show_code_size_and_known_media_only() {
        let body = format!("<html>{MARKER}</html>");
        let f = Failure::status(403, Some("text/html; charset=utf-8"), body.as_bytes());
        assert_eq!(
            f.to_string(),
            format!(
                "answered HTTP 403 Forbidden ({} bytes of text/html); check the trigger's authModes and its credentials",
                body.len()
            )
        );
        assert!(f.raw().unwrap().contains(MARKER));
        let f = Failure::status(500, Some(&format!("text/{MARKER}")), b"");
        assert_eq!(
            f.to_string(),
            "answered HTTP 500 Internal Server Error (0 bytes)"
        );
        assert!(!format!("{f:?}").contains(MARKER));
    }

    #[test]
    fn server_codes_come_from_a_vocabulary() {
        let f = Failure::server("AWS", Some(MARKER), &["AccessDenied"], MARKER);
        assert_eq!(f.to_string(), "AWS answered an error");
        let f = Failure::server("AWS", Some("accessdenied"), &["AccessDenied"], MARKER);
        assert_eq!(f.to_string(), "AWS answered error AccessDenied");
        assert!(!format!("{f:?}").contains(MARKER));
    }

    #[test]
    fn unknown_errors_show_only_their_system() {
        let e: Box<dyn StdError + Send + Sync> = MARKER.into();
        let f = Failure::of("HTTP client", e.as_ref());
        assert_eq!(f.to_string(), "HTTP client error");
        assert_eq!(f.raw(), Some(MARKER));
        let e = io::Error::new(io::ErrorKind::ConnectionRefused, MARKER);
        assert_eq!(e.classify().to_string(), "connection refused");
        let e = io::Error::other(MARKER);
        assert_eq!(e.classify().to_string(), "I/O error (other error)");
    }

    #[test]
    fn values_are_counted_outside_strings_only() {
        // 1 for the document, 1 for the array, 1 for each comma.
        assert_eq!(json_past(b"[1,2,3]", 4), None);
        assert_eq!(
            json_past(b"[1,2,3]", 3),
            Some(TooManyValues { line: 1, column: 5 })
        );
        // Brackets, braces and commas in strings (and escaped quotes) are text, not values.
        assert_eq!(json_past(br#"{"a,[{":"\"[,{\\"}"#, 2), None);
        assert_eq!(
            json_past(br#"{"a,[{":"\"[,{\\",}"#, 2).map(|at| at.column),
            Some(18)
        );
        // Lines and columns are 1-based, columns in bytes.
        assert_eq!(
            json_past(b"[\n  1,\n  2\n]", 2),
            Some(TooManyValues { line: 2, column: 4 })
        );
    }

    #[test]
    fn an_answer_of_tiny_values_is_refused_before_it_is_decoded() {
        // `[[],[],...]`: two values an element.
        let dense = |elements: usize| {
            let mut text = b"[".to_vec();
            for _ in 0..elements {
                text.extend_from_slice(b"[],");
            }
            text.extend_from_slice(b"[]]");
            text
        };
        let within = dense(MAX_ANSWER_VALUES / 2 - 2);
        let value: serde_json::Value = from_json(&within).expect("within the limit");
        assert_eq!(
            value.as_array().map(Vec::len),
            Some(MAX_ANSWER_VALUES / 2 - 1)
        );
        let past = dense(MAX_ANSWER_VALUES / 2);
        let error = from_json::<serde_json::Value>(&past).expect_err("past the limit");
        assert!(matches!(error, JsonError::TooMany(_)), "{error}");
        assert_eq!(
            error.to_string(),
            format!(
                "a document of more than 1048576 values (line 1, column {})",
                error.column()
            )
        );
        assert_eq!(json_error(&error), error.to_string());
        // Typed decodes are bounded the same way.
        assert!(matches!(
            from_json::<Vec<Vec<u8>>>(&past),
            Err(JsonError::TooMany(_))
        ));
    }

    #[test]
    fn an_answer_of_real_values_as_large_as_the_client_reads_is_decoded() {
        // 8-digit numbers: the densest real answer, 9 bytes a value.
        let mut text = b"[".to_vec();
        while text.len() + 9 < crate::http_client::MAX_BODY_BYTES {
            text.extend_from_slice(b"12345678,");
        }
        text.extend_from_slice(b"1]");
        let numbers: Vec<u32> = from_json(&text).expect("a full answer of numbers");
        assert!(numbers.len() > 900_000, "{}", numbers.len());
    }

    #[test]
    fn json_errors_never_show_the_answer() {
        let error = from_json::<u32>(format!("\"{MARKER}\"").as_bytes()).expect_err("a string");
        assert!(
            error
                .to_string()
                .starts_with("not of the expected shape (line 1, column "),
            "{error}"
        );
        assert!(!format!("{error:?}").contains(MARKER));
        let error =
            from_json::<serde_json::Value>(format!("[{MARKER}]").as_bytes()).expect_err("not JSON");
        assert_eq!(error.to_string(), "not valid JSON (line 1, column 2)");
        assert_eq!((error.line(), error.column()), (1, 2));
    }

    #[test]
    fn yaml_answers_are_counted_as_they_would_be_decoded_aliases_included() {
        assert_eq!(yaml_past_limit(b"a:\n  - 1\n  - 2\n"), None);
        // Dates, times and URLs are single values.
        let dates = "- 2026-11-30T01:00:00Z http://a.example:80/x\n".repeat(10_000);
        assert_eq!(yaml_past_limit(dates.as_bytes()), None);
        // Not YAML: left to the decoder.
        assert_eq!(yaml_past_limit(b"a: [1, 2"), None);
        let items = "- 0\n".repeat(MAX_ANSWER_VALUES);
        let at = yaml_past_limit(items.as_bytes()).expect("past the limit");
        assert!(at.line >= MAX_ANSWER_VALUES - 1, "{at}");
        assert_eq!(
            at.to_string(),
            format!(
                "a document of more than 1048576 values (line {}, column {})",
                at.line, at.column
            )
        );
        // 1,000 values repeated by 2,000 aliases: 2 million values from 11 KB of text.
        let bomb = format!(
            "a: &a [{}0]\nb: [{}*a]\n",
            "0,".repeat(999),
            "*a,".repeat(1_999)
        );
        assert!(bomb.len() < 12_000, "{}", bomb.len());
        assert!(yaml_past_limit(bomb.as_bytes()).is_some());
        // The same aliases over a small node are fine.
        let few = format!("a: &a [0]\nb: [{}*a]\n", "*a,".repeat(1_999));
        assert_eq!(yaml_past_limit(few.as_bytes()), None);
    }

    #[test]
    fn xml_answers_stop_at_the_node_limit() {
        let doc = |nodes: usize| format!("<a>{}</a>", "<b/>".repeat(nodes));
        let within = doc(MAX_ANSWER_VALUES - 2);
        let parsed = xml(&within).expect("within the limit");
        assert_eq!(
            parsed.root_element().children().count(),
            MAX_ANSWER_VALUES - 2
        );
        let past = doc(MAX_ANSWER_VALUES);
        let error = xml(&past).expect_err("past the limit");
        assert_eq!(
            xml_error(&error),
            "an XML document of more than 1048576 nodes"
        );
        let error = xml(&format!("<a>&{MARKER};</a>")).expect_err("an unknown entity");
        assert!(
            xml_error(&error).starts_with("invalid XML (at 1:"),
            "{}",
            xml_error(&error)
        );
        assert!(!xml_error(&error).contains(MARKER));
    }

    #[test]
    fn raw_text_is_truncated() {
        let long = "é".repeat(300);
        let t = truncate(&long);
        assert!(t.len() <= RAW_LOG_BYTES + 3);
        assert!(t.ends_with("..."));
    }
}
