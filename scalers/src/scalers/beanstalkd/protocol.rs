//! A client for the one beanstalkd command the scaler needs, `stats-tube`, over beanstalkd's
//! text protocol (`doc/protocol.txt` in beanstalkd's sources): a command line ending in
//! `\r\n`; the answer `OK <bytes>\r\n<YAML dictionary>\r\n`, or `NOT_FOUND\r\n` for a tube that
//! does not exist (a tube exists while a job is in it or a client uses or watches it), or an
//! error line.
//!
//! One connection per server, shared by every trigger on it. Commands on it take turns; a
//! command that fails, times out or is abandoned by its caller drops the connection (the
//! reply may still be in flight, so the connection cannot be trusted), and the next command
//! connects again.

use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufStream};
use tokio::net::TcpStream;

/// The longest answer line read (`OK <bytes>` or an error word).
const MAX_LINE: u64 = 256;
/// The largest stats body read; a `stats-tube` answer is about 300 bytes.
const MAX_BODY: usize = 64 * 1024;

/// The protocol's error words ([`BeanstalkdError::Server`]), shown; anything else the server
/// says is not.
const SERVER_ERRORS: &[&str] = &[
    "OUT_OF_MEMORY",
    "INTERNAL_ERROR",
    "BAD_FORMAT",
    "UNKNOWN_COMMAND",
    "NOT_FOUND",
    "DRAINING",
    "EXPECTED_CRLF",
    "JOB_TOO_BIG",
    "DEADLINE_SOON",
    "TIMED_OUT",
    "NOT_IGNORED",
];

impl crate::remote::Classify for BeanstalkdError {
    fn classify(&self) -> crate::remote::Failure {
        use crate::remote::Failure;
        match self {
            Self::Io(e) => e.classify(),
            Self::Server(line) => Failure::server(
                "beanstalkd",
                line.split_whitespace().next(),
                SERVER_ERRORS,
                line,
            ),
            Self::Protocol(text) => {
                Failure::answer("beanstalkd answered outside the protocol", text.as_bytes())
            }
            other => Failure::local(other.to_string()),
        }
    }
}

/// What went wrong talking to beanstalkd.
#[derive(Debug, thiserror::Error)]
pub enum BeanstalkdError {
    /// No TCP connection within the timeout, or it was refused.
    #[error("connecting failed: {0}")]
    Connect(String),
    /// No connection within the timeout.
    #[error("no connection within {} ms", .0.as_millis())]
    ConnectTimeout(Duration),
    /// Reading or writing failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// No answer within the timeout.
    #[error("no answer within {} ms", .0.as_millis())]
    Timeout(Duration),
    /// The server answered an error (`BAD_FORMAT`, `OUT_OF_MEMORY`, ...).
    #[error("the server answered {0}")]
    Server(String),
    /// The answer is not in the protocol's form.
    #[error("unexpected answer: {0}")]
    Protocol(String),
}

/// The counters of one tube that the scaler reads (beanstalkd's names).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TubeStats {
    /// `current-jobs-ready`.
    pub ready: i64,
    /// `current-jobs-reserved`.
    pub reserved: i64,
    /// `current-jobs-delayed`.
    pub delayed: i64,
    /// `current-jobs-urgent`.
    pub urgent: i64,
    /// `current-jobs-buried`.
    pub buried: i64,
    /// `total-jobs`.
    pub total: i64,
}

impl TubeStats {
    /// Parses the YAML dictionary of `stats-tube` (`key: value` lines after `---`). Counters
    /// absent from the answer count as 0, as KEDA's weak decoding has them.
    ///
    /// # Errors
    /// A counter that is not an integer.
    pub fn parse(body: &str) -> Result<Self, BeanstalkdError> {
        let mut stats = Self::default();
        for line in body.lines() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let slot = match key.trim() {
                "current-jobs-ready" => &mut stats.ready,
                "current-jobs-reserved" => &mut stats.reserved,
                "current-jobs-delayed" => &mut stats.delayed,
                "current-jobs-urgent" => &mut stats.urgent,
                "current-jobs-buried" => &mut stats.buried,
                "total-jobs" => &mut stats.total,
                _ => continue,
            };
            *slot = value.trim().parse().map_err(|_| {
                BeanstalkdError::Protocol(format!("\"{}\" is not a number", key.trim()))
            })?;
        }
        Ok(stats)
    }
}

/// The pooled client of one server.
#[derive(Debug)]
pub struct BeanstalkdClient {
    server: String,
    connect_timeout: Duration,
    response_timeout: Duration,
    connection: tokio::sync::Mutex<Option<BufStream<TcpStream>>>,
}

impl BeanstalkdClient {
    /// Connects to `server` (`host:port`) within `connect_timeout`; commands wait at most
    /// `response_timeout` for their answer.
    ///
    /// # Errors
    /// The connection cannot be opened in time.
    pub async fn connect(
        server: &str,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> Result<Self, BeanstalkdError> {
        let client = Self {
            server: server.to_string(),
            connect_timeout,
            response_timeout,
            connection: tokio::sync::Mutex::new(None),
        };
        let stream = client.open().await?;
        *client.connection.lock().await = Some(stream);
        Ok(client)
    }

    async fn open(&self) -> Result<BufStream<TcpStream>, BeanstalkdError> {
        let tcp = tokio::time::timeout(self.connect_timeout, TcpStream::connect(&self.server))
            .await
            .map_err(|_| BeanstalkdError::ConnectTimeout(self.connect_timeout))?
            .map_err(|e| BeanstalkdError::Connect(e.to_string()))?;
        tcp.set_nodelay(true)?;
        Ok(BufStream::new(tcp))
    }

    /// `stats-tube <tube>`: the tube's counters, or `None` when the tube does not exist.
    /// `tube` must be a valid tube name (the caller checks it), so it cannot inject a command.
    ///
    /// # Errors
    /// The connection fails or times out, or the server answers an error.
    pub async fn stats_tube(&self, tube: &str) -> Result<Option<TubeStats>, BeanstalkdError> {
        // Commands take turns on the connection. It is taken out while in use and put back only
        // after a complete answer: if this future is dropped half-way, the connection goes with
        // it instead of leaving a stale answer for the next command.
        let mut slot = self.connection.lock().await;
        let mut stream = match slot.take() {
            Some(stream) => stream,
            None => self.open().await?,
        };
        let answer = tokio::time::timeout(self.response_timeout, request(&mut stream, tube)).await;
        match answer {
            Ok(Ok(stats)) => {
                *slot = Some(stream);
                Ok(stats)
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Err(BeanstalkdError::Timeout(self.response_timeout)),
        }
    }
}

async fn request(
    stream: &mut BufStream<TcpStream>,
    tube: &str,
) -> Result<Option<TubeStats>, BeanstalkdError> {
    stream
        .write_all(format!("stats-tube {tube}\r\n").as_bytes())
        .await?;
    stream.flush().await?;
    let mut line = String::new();
    let read = (&mut *stream).take(MAX_LINE).read_line(&mut line).await?;
    if read == 0 {
        return Err(BeanstalkdError::Protocol(
            "the server closed the connection".to_string(),
        ));
    }
    let Some(line) = line.strip_suffix("\r\n") else {
        return Err(BeanstalkdError::Protocol(
            "an answer line without \\r\\n".to_string(),
        ));
    };
    if line == "NOT_FOUND" {
        return Ok(None);
    }
    let Some(size) = line.strip_prefix("OK ") else {
        return Err(BeanstalkdError::Server(line.chars().take(64).collect()));
    };
    let size: usize = size
        .parse()
        .ok()
        .filter(|n| *n <= MAX_BODY)
        .ok_or_else(|| BeanstalkdError::Protocol(format!("bad size in \"{line}\"")))?;
    let mut body = vec![0; size + 2];
    stream.read_exact(&mut body).await?;
    if !body.ends_with(b"\r\n") {
        return Err(BeanstalkdError::Protocol(
            "the stats do not end in \\r\\n".to_string(),
        ));
    }
    body.truncate(size);
    let body = String::from_utf8(body)
        .map_err(|_| BeanstalkdError::Protocol("the stats are not UTF-8".to_string()))?;
    TubeStats::parse(&body).map(Some)
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    use super::*;

    const STATS: &str = "OK 40\r\n---\ncurrent-jobs-ready: 4\ntotal-jobs: 9\n\r\n";

    /// A server that answers each connection's first `stats-tube` with `answers[i]` (the i-th
    /// connection), then closes it; `None` never answers.
    async fn scripted(
        answers: Vec<Option<&'static str>>,
    ) -> (String, tokio::task::JoinHandle<usize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let task = tokio::spawn(async move {
            let mut served = 0;
            for answer in answers {
                let (socket, _) = listener.accept().await.unwrap();
                served += 1;
                // Each connection is served on its own, so one that never answers does not
                // hold up the next.
                tokio::spawn(async move {
                    let mut socket = BufStream::new(socket);
                    let mut line = String::new();
                    socket.read_line(&mut line).await.unwrap();
                    assert!(line.starts_with("stats-tube "), "{line}");
                    match answer {
                        Some(text) => {
                            socket.write_all(text.as_bytes()).await.unwrap();
                            socket.flush().await.unwrap();
                        }
                        None => tokio::time::sleep(Duration::from_secs(3600)).await,
                    }
                });
            }
            served
        });
        (address, task)
    }

    #[tokio::test]
    async fn a_broken_connection_is_replaced_by_the_next_command() {
        let (address, server) = scripted(vec![Some(STATS), Some("NOT_FOUND\r\n")]).await;
        let client =
            BeanstalkdClient::connect(&address, Duration::from_secs(1), Duration::from_secs(1))
                .await
                .unwrap();
        let stats = client.stats_tube("jobs").await.unwrap().unwrap();
        assert_eq!((stats.ready, stats.total), (4, 9));
        // The server closed that connection after answering: the next command fails on it...
        let err = client.stats_tube("jobs").await.unwrap_err();
        assert!(
            matches!(err, BeanstalkdError::Protocol(_) | BeanstalkdError::Io(_)),
            "{err}"
        );
        // ...and the one after that connects again.
        assert_eq!(client.stats_tube("jobs").await.unwrap(), None);
        assert_eq!(server.await.unwrap(), 2);
    }

    #[tokio::test]
    async fn an_answer_that_does_not_come_times_out_and_an_error_line_is_reported() {
        let (address, _server) = scripted(vec![None, Some("BAD_FORMAT\r\n")]).await;
        let client =
            BeanstalkdClient::connect(&address, Duration::from_secs(1), Duration::from_millis(200))
                .await
                .unwrap();
        let err = client.stats_tube("jobs").await.unwrap_err();
        assert_eq!(err.to_string(), "no answer within 200 ms");
        let err = client.stats_tube("jobs").await.unwrap_err();
        assert_eq!(err.to_string(), "the server answered BAD_FORMAT");
    }

    #[test]
    fn stats_are_read_from_the_yaml_dictionary() {
        let body = "---\nname: jobs\ncurrent-jobs-urgent: 1\ncurrent-jobs-ready: 3\n\
                    current-jobs-reserved: 2\ncurrent-jobs-delayed: 5\ncurrent-jobs-buried: 4\n\
                    total-jobs: 20\ncurrent-using: 1\npause: 0\n";
        assert_eq!(
            TubeStats::parse(body).unwrap(),
            TubeStats {
                ready: 3,
                reserved: 2,
                delayed: 5,
                urgent: 1,
                buried: 4,
                total: 20,
            }
        );
        assert_eq!(TubeStats::parse("---\n").unwrap(), TubeStats::default());
        assert!(TubeStats::parse("current-jobs-ready: x\n").is_err());
    }
}
