//! The limits that keep one client from taking the proxy down: how long a client may take to
//! send a request head, to start its next request on a kept-alive connection, and to take
//! what is written to it, and how many client connections the process serves at once; and
//! how long a pod may stall a response it has begun.
//!
//! Both request paths enforce them: the front path ([`crate::front`]) with one timer per
//! connection, hyper's server with the same timer in [`crate::timed`]. The per-target limits
//! (held-request memory, the pod's response head) are in [`crate::target::TargetSettings`].

use std::time::Duration;

/// Default [`Limits::header_read_timeout`].
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Default [`Limits::idle_timeout`] (nginx's `keepalive_timeout`).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(75);
/// Default [`Limits::write_timeout`] (nginx's `send_timeout`).
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default [`Limits::upstream_idle_timeout`] (nginx's `proxy_read_timeout`).
pub const DEFAULT_UPSTREAM_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default [`Limits::memory_budget`]: fits the shipped 500Mi limit with room for the rest of
/// the process.
pub const DEFAULT_MEMORY_BUDGET: usize = 384 << 20;
/// What a client connection may make the proxy hold, counted against the memory budget when
/// it is accepted: the front path's head buffer (64 KiB and a read's room) and its write
/// buffer (64 KiB and a frame).
pub const CONNECTION_BYTES: usize = 160 << 10;
/// What a connection handed to hyper's server may hold besides: its read buffer (capped at
/// [`HYPER_MAX_BUF`]) and its write buffer.
pub const HTTP1_CONNECTION_BYTES: usize = 2 * HYPER_MAX_BUF;
/// What an HTTP/2 connection may hold besides: its receive window (the request bodies of all
/// its streams, held ones included), and the header blocks of its streams.
pub const HTTP2_CONNECTION_BYTES: usize = HTTP2_CONNECTION_WINDOW as usize
    + HTTP2_MAX_STREAMS as usize * HTTP2_MAX_HEADER_LIST as usize
    + 2 * HYPER_MAX_BUF;
/// hyper's read and write buffer cap (its default is ~400 KiB): a longer request head is
/// answered 431.
pub const HYPER_MAX_BUF: usize = 64 << 10;
/// HTTP/2: the connection's receive window.
pub const HTTP2_CONNECTION_WINDOW: u32 = 256 << 10;
/// HTTP/2: each stream's receive window.
pub const HTTP2_STREAM_WINDOW: u32 = 64 << 10;
/// HTTP/2: most streams open at once on a connection.
pub const HTTP2_MAX_STREAMS: u32 = 32;
/// HTTP/2: largest header block of a request.
pub const HTTP2_MAX_HEADER_LIST: u32 = 16 << 10;
/// Default [`Limits::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;
/// Most client connections `--max-connections` may allow.
pub const MAX_CONNECTIONS_BOUND: usize = 1_000_000;
/// Default `--max-pod-connections`: connections (requests in flight) one activator replica
/// opens to one pod when `containerConcurrency` allows more or is 0.
pub const DEFAULT_MAX_POD_CONNECTIONS: u32 = 100;
/// Most `--max-pod-connections` may allow.
pub const MAX_POD_CONNECTIONS_BOUND: u32 = 1_000_000;
/// Default limit of the memory held requests may keep, per target (32 MiB: 10,000 held
/// requests with 3 KiB heads).
pub const DEFAULT_HELD_MEMORY: usize = 32 * 1024 * 1024;

/// The client-side limits of the proxy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// From a connection's start, or from the first byte of a later request, until its head
    /// is complete; then the connection is closed without an answer.
    pub header_read_timeout: Duration,
    /// From the end of an answer until the first byte of the next request on a kept-alive
    /// connection (on HTTP/2: while no request is open); then the connection is closed.
    pub idle_timeout: Duration,
    /// Longest a write to the client may make no progress; then the connection is closed.
    pub write_timeout: Duration,
    /// Client connections served at once by the process; more wait in the listen backlog
    /// until one closes.
    pub max_connections: usize,
    /// Longest a pod may send nothing once its response head has come (between two reads of
    /// the body), and longest an upgraded connection may carry nothing either way; then the
    /// pod's connection and the client's are closed and the pod's slot is freed.
    pub upstream_idle_timeout: Duration,
    /// Bytes the process's client connections may hold together, each counted at its worst
    /// ([`CONNECTION_BYTES`], then [`HTTP1_CONNECTION_BYTES`] or [`HTTP2_CONNECTION_BYTES`]
    /// when hyper serves it): past it, connections wait in the listen backlog, and one that
    /// would need hyper's buffers is answered 503 and closed.
    pub memory_budget: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            write_timeout: DEFAULT_WRITE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            upstream_idle_timeout: DEFAULT_UPSTREAM_IDLE_TIMEOUT,
            memory_budget: DEFAULT_MEMORY_BUDGET,
        }
    }
}

/// Bounds of the client-side timeouts.
pub const TIMEOUT_BOUNDS: (Duration, Duration) =
    (Duration::from_millis(1), Duration::from_secs(3600));
/// Bounds of `--held-request-memory`, in bytes (4 KiB to 16 GiB).
pub const HELD_MEMORY_BOUNDS: (u64, u64) = (4 << 10, 16 << 30);

/// `timeout` (written `raw`) if it is within [`TIMEOUT_BOUNDS`].
///
/// # Errors
/// Out of bounds: the message names them.
pub fn parse_timeout(timeout: Duration, raw: &str) -> Result<Duration, String> {
    if (TIMEOUT_BOUNDS.0..=TIMEOUT_BOUNDS.1).contains(&timeout) {
        Ok(timeout)
    } else {
        Err(format!("\"{raw}\" is not between 1ms and 1h"))
    }
}

/// A `--max-connections` value: 1 to [`MAX_CONNECTIONS_BOUND`].
///
/// # Errors
/// Not a number in bounds.
pub fn parse_max_connections(raw: &str) -> Result<usize, String> {
    match raw.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_CONNECTIONS_BOUND).contains(&n) => Ok(n),
        _ => Err(format!(
            "\"{raw}\" is not a number of connections between 1 and {MAX_CONNECTIONS_BOUND}"
        )),
    }
}

/// A `--max-pod-connections` value: 0 (no limit) to [`MAX_POD_CONNECTIONS_BOUND`].
///
/// # Errors
/// Not a number in bounds.
pub fn parse_max_pod_connections(raw: &str) -> Result<u32, String> {
    match raw.trim().parse::<u32>() {
        Ok(n) if n <= MAX_POD_CONNECTIONS_BOUND => Ok(n),
        _ => Err(format!(
            "\"{raw}\" is not a number of connections between 0 (no limit) and {MAX_POD_CONNECTIONS_BOUND}"
        )),
    }
}

/// A size in bytes, plain or with a `Ki`, `Mi` or `Gi` suffix, within
/// [`HELD_MEMORY_BOUNDS`].
///
/// # Errors
/// Not such a size, or out of bounds.
pub fn parse_byte_size(raw: &str) -> Result<usize, String> {
    let raw = raw.trim();
    let (digits, unit) = match raw.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => raw.split_at(at),
        None => (raw, ""),
    };
    let unit: u64 = match unit {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        _ => {
            return Err(format!(
                "\"{raw}\" is not a size such as 32Mi, 512Ki or 1048576"
            ));
        }
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .filter(|bytes| (HELD_MEMORY_BOUNDS.0..=HELD_MEMORY_BOUNDS.1).contains(bytes))
        .and_then(|bytes| usize::try_from(bytes).ok())
        .ok_or_else(|| format!("\"{raw}\" is not a size between 4Ki and 16Gi"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_suffixes_within_their_bounds() {
        // (written, bytes; None: refused)
        let cases = [
            ("32Mi", Some(32 << 20)),
            ("512Ki", Some(512 << 10)),
            ("1Gi", Some(1 << 30)),
            ("4096", Some(4096)),
            // Below 4 KiB and above 16 GiB.
            ("4095", None),
            ("17Gi", None),
            // Overflowing u64 is an error, not a wrap.
            ("99999999999999999999Gi", None),
            ("18446744073709551615Gi", None),
            ("32MB", None),
            ("-1", None),
            ("", None),
        ];
        for (raw, bytes) in cases {
            assert_eq!(parse_byte_size(raw).ok(), bytes, "{raw}");
        }
    }

    #[test]
    fn timeouts_and_connection_counts_are_bounded() {
        assert!(parse_timeout(Duration::from_secs(10), "10s").is_ok());
        let error = parse_timeout(Duration::ZERO, "0s").unwrap_err();
        assert!(error.contains("between 1ms and 1h"), "{error}");
        assert!(parse_timeout(Duration::from_secs(3601), "3601s").is_err());
        assert_eq!(parse_max_connections("10000"), Ok(10_000));
        for raw in ["0", "1000001", "many", "-5"] {
            assert!(parse_max_connections(raw).is_err(), "{raw}");
        }
    }
}
