//! The activator side of the report protocol: one long-lived streaming request to the
//! operator carrying wake-ups the moment they happen and a sample of every recently active
//! target each second (see `keda_scalers::scalers::http::protocol`).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Uri, header};
use hyper::body::{Body, Frame, SizeHint};
use hyper_util::rt::TokioIo;
use keda_scalers::scalers::http::protocol::{Report, TargetKey};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::targets::Targets;

/// Where and as whom to report.
#[derive(Clone, Debug)]
pub struct ReporterConfig {
    /// The operator's report endpoint, `http://host:port/activator/v1/reports`.
    pub url: Uri,
    /// This replica's name (its pod name).
    pub replica: String,
    /// A target idle for longer than this is left out of samples.
    pub idle_after: Duration,
}

/// A request body fed from a channel: each line is sent as its own chunk, at once.
struct LineBody(mpsc::Receiver<Bytes>);

impl Body for LineBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.get_mut()
            .0
            .poll_recv(cx)
            .map(|line| line.map(|l| Ok(Frame::data(l))))
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

/// Why one report stream ended.
#[derive(Debug, thiserror::Error)]
enum StreamError {
    #[error("the report URL has no host")]
    NoHost,
    #[error("connecting to the operator failed: {0}")]
    Connect(#[source] std::io::Error),
    #[error("the report stream failed: {0}")]
    Http(#[source] hyper::Error),
    #[error("the operator closed the report stream")]
    Closed,
}

/// Runs until `cancel`: connects, streams, reconnects with backoff (100 ms doubling to 5 s).
/// Wake-ups that arrive while disconnected are not lost: the next sample carries the held
/// count with no ready pod, which wakes the operator too.
pub async fn run(
    config: ReporterConfig,
    targets: Arc<Targets>,
    mut wake: mpsc::Receiver<TargetKey>,
    cancel: CancellationToken,
) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let started = Instant::now();
        let result = stream(&config, &targets, &mut wake, &cancel).await;
        if cancel.is_cancelled() {
            return;
        }
        if let Err(error) = result {
            tracing::warn!(%error, url = %config.url, "report stream ended; reconnecting");
        }
        if started.elapsed() > Duration::from_secs(10) {
            backoff = Duration::from_millis(100);
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

async fn stream(
    config: &ReporterConfig,
    targets: &Targets,
    wake: &mut mpsc::Receiver<TargetKey>,
    cancel: &CancellationToken,
) -> Result<(), StreamError> {
    let authority = config.url.authority().ok_or(StreamError::NoHost)?.clone();
    let port = authority.port_u16().unwrap_or(80);
    let tcp = TcpStream::connect((authority.host(), port))
        .await
        .map_err(StreamError::Connect)?;
    let _ = tcp.set_nodelay(true);
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .map_err(StreamError::Http)?;
    let connection = tokio::spawn(connection);
    let (lines, rx) = mpsc::channel::<Bytes>(256);
    let path = config
        .url
        .path_and_query()
        .map_or("/", |pq| pq.as_str())
        .to_string();
    let request = Request::post(path)
        .header(header::HOST, authority.as_str())
        .header(header::CONTENT_TYPE, "application/x-ndjson")
        .body(LineBody(rx))
        .map_err(|_| StreamError::NoHost)?;
    let mut response = std::pin::pin!(sender.send_request(request));
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let result = loop {
        tokio::select! {
            () = cancel.cancelled() => {
                let bye = Report::Bye { replica: config.replica.clone() };
                let _ = lines.send(bye.to_line()).await;
                drop(lines);
                let _ = tokio::time::timeout(Duration::from_secs(2), &mut response).await;
                break Ok(());
            }
            Some(target) = wake.recv() => {
                let line = Report::Wake { replica: config.replica.clone(), target }.to_line();
                if lines.send(line).await.is_err() {
                    break Err(StreamError::Closed);
                }
            }
            _ = tick.tick() => {
                let second = u64::try_from(jiff::Timestamp::now().as_second()).unwrap_or(0);
                let now = Instant::now();
                let samples: Vec<_> = targets
                    .all()
                    .into_iter()
                    .filter_map(|(t, _)| t.sample(now, config.idle_after))
                    .collect();
                let line = Report::Sample { replica: config.replica.clone(), second, targets: samples }.to_line();
                if lines.send(line).await.is_err() {
                    break Err(StreamError::Closed);
                }
            }
            answered = &mut response => {
                break match answered {
                    Ok(_) => Err(StreamError::Closed),
                    Err(e) => Err(StreamError::Http(e)),
                };
            }
        }
    };
    connection.abort();
    result
}
