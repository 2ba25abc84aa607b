//! The activator side of the report protocol: one long-lived streaming request to the
//! operator carrying wake-ups the moment they happen and a sample of every recently active
//! target each second (see `keda_scalers::scalers::http::protocol`).

use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Uri, header};
use hyper::body::{Body, Frame, SizeHint};
use hyper_util::rt::TokioIo;
use keda_scalers::scalers::http::protocol::{Report, TargetKey};
use keda_tls::{CertStore, ServerCaVerifier};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::targets::Targets;

/// Where and as whom to report.
#[derive(Clone, Debug)]
pub struct ReporterConfig {
    /// The operator's report endpoint, `https://host:port/activator/v1/reports` (the operator's
    /// metric service port, mutual TLS) or `http://` for a plain local run.
    pub url: Uri,
    /// The TLS client configuration for an `https` URL ([`client_tls`]).
    pub tls: Option<Arc<rustls::ClientConfig>>,
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
    #[error("the operator answered the report stream with {status}{hint}")]
    Answered {
        status: http::StatusCode,
        /// What to fix, when the status says.
        hint: &'static str,
    },
    #[error(
        "the report URL is https but no TLS files were given (--operator-ca-file, --operator-client-cert-file, --operator-client-key-file)"
    )]
    NoTls,
    #[error("the report URL's host is not a TLS server name: {0}")]
    ServerName(String),
}

/// Why the report client's TLS configuration cannot be built; names the flag to fix.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The operator's CA bundle is unusable.
    #[error("--operator-ca-file: {0}")]
    OperatorCa(#[source] keda_tls::TlsError),
    /// The client certificate or its key is unusable, or they do not match.
    #[error("--operator-client-cert-file / --operator-client-key-file: {0}")]
    ClientCert(#[source] keda_tls::TlsError),
    /// rustls refused the configuration.
    #[error("the report client's TLS configuration is invalid: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The files of the report client's mutual TLS (the `keda-rs-activator-certs` Secret's
/// `ca.crt`, `tls.crt`, `tls.key`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// The CA the operator's serving certificate must chain to (`--operator-ca-file`).
    pub operator_ca: PathBuf,
    /// The client certificate chain (`--operator-client-cert-file`).
    pub cert: PathBuf,
    /// Its private key (`--operator-client-key-file`).
    pub key: PathBuf,
}

impl TlsFiles {
    /// Whether none of the three files exists: then the certificate comes from the
    /// `keda-rs-activator-certs` Secret. When only some exist, loading them names the missing one.
    pub fn none_exist(&self) -> bool {
        [&self.operator_ca, &self.cert, &self.key]
            .iter()
            .all(|path| !path.exists())
    }
}

/// The report client's mutual TLS (ring provider): the operator's certificate must chain to the
/// CA of `operator_ca`; this replica presents the certificate of `client_cert`. Both are read
/// per connection, so reloading them ([`client_tls_from_files`]) reaches the next connection.
/// HTTP/1.1 only, as the report stream is one chunked request.
///
/// # Errors
/// [`TlsError::Rustls`] (does not happen with the ring provider).
pub fn client_tls(
    operator_ca: Arc<ServerCaVerifier>,
    client_cert: Arc<CertStore>,
) -> Result<rustls::ClientConfig, TlsError> {
    let mut config = keda_tls::mutual_tls_client_config(operator_ca, client_cert)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Reads `files` into a [`client_tls`] configuration and, until `cancel`, checks them for
/// changes every `reload_interval`: a changed CA or client certificate is used by the next
/// connection to the operator; a changed file that does not load is logged and the previous
/// one stays in use.
///
/// # Errors
/// [`TlsError`] naming the flag of the file that is not usable.
///
/// # Panics
/// Outside a tokio runtime.
pub fn client_tls_from_files(
    files: &TlsFiles,
    reload_interval: Duration,
    cancel: &CancellationToken,
) -> Result<rustls::ClientConfig, TlsError> {
    let operator_ca =
        Arc::new(ServerCaVerifier::from_file(&files.operator_ca).map_err(TlsError::OperatorCa)?);
    let client_cert =
        Arc::new(CertStore::from_files(&files.cert, &files.key).map_err(TlsError::ClientCert)?);
    operator_ca.reload_on_change(files.operator_ca.clone(), reload_interval, cancel.clone());
    client_cert.reload_on_change(
        files.cert.clone(),
        files.key.clone(),
        reload_interval,
        cancel.clone(),
    );
    client_tls(operator_ca, client_cert)
}

/// A byte stream to the operator, plain or TLS.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

/// The receiver of wake-ups, shared so that a report task started again after a failure
/// ([`crate::supervise`]) takes over the same channel.
pub type WakeReceiver = Arc<tokio::sync::Mutex<mpsc::Receiver<TargetKey>>>;

/// The [`WakeReceiver`] of `receiver`.
pub fn wake_receiver(receiver: mpsc::Receiver<TargetKey>) -> WakeReceiver {
    Arc::new(tokio::sync::Mutex::new(receiver))
}

/// Runs until `cancel`: connects, streams, reconnects with backoff (100 ms doubling to 5 s).
/// Wake-ups that arrive while disconnected are not lost: the next sample carries the held
/// count with no ready pod, which wakes the operator too. Takes `wake` for as long as it
/// runs (a tokio mutex: a run that panicked gives it back as it unwinds).
pub async fn run(
    config: ReporterConfig,
    targets: Arc<Targets>,
    wake: WakeReceiver,
    cancel: CancellationToken,
) {
    let mut wake = wake.lock().await;
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
    let default_port = if config.url.scheme_str() == Some("https") {
        443
    } else {
        80
    };
    let port = authority.port_u16().unwrap_or(default_port);
    let tcp = TcpStream::connect((authority.host(), port))
        .await
        .map_err(StreamError::Connect)?;
    let _ = tcp.set_nodelay(true);
    let io: Box<dyn Io> = if config.url.scheme_str() == Some("https") {
        let tls = config.tls.clone().ok_or(StreamError::NoTls)?;
        let name = rustls_pki_types::ServerName::try_from(authority.host().to_string())
            .map_err(|e| StreamError::ServerName(e.to_string()))?;
        let stream = tokio_rustls::TlsConnector::from(tls)
            .connect(name, tcp)
            .await
            .map_err(StreamError::Connect)?;
        Box::new(stream)
    } else {
        Box::new(tcp)
    };
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
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
                    Ok(response) if !response.status().is_success() => {
                        let status = response.status();
                        let hint = if status == http::StatusCode::FORBIDDEN {
                            " (the client certificate must be the activators' identity, common name keda-activator)"
                        } else {
                            ""
                        };
                        Err(StreamError::Answered { status, hint })
                    }
                    Ok(_) => Err(StreamError::Closed),
                    Err(e) => Err(StreamError::Http(e)),
                };
            }
        }
    };
    connection.abort();
    result
}
