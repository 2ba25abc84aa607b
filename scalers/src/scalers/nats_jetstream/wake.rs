//! The early wake-up of the `nats-jetstream` trigger ([`crate::wake`]): a core NATS
//! subscription to the subjects of each watched stream, so that a publish wakes the owning
//! loops, which then read the consumer's lag from the monitoring endpoint as a poll does.
//!
//! # One connection per server
//!
//! KEDA's trigger names only the monitoring endpoint. The client port is the one the server
//! reports in its own `/varz` (`port`), on the endpoint's host; the connection presents no
//! credentials (the trigger carries none). So there is one subscription connection per
//! monitoring endpoint, shared by every `nats-jetstream` trigger on it; each watched stream
//! (account and name, reference-counted) is resolved to its subjects through `/jsz`
//! (`config.subjects`; one request per account for the streams registered together) and each
//! subject is subscribed once.
//!
//! # Bounded traffic
//!
//! Every subscription is one-shot (`SUB <subject> <sid>` then `UNSUB <sid> 1`): the server
//! delivers at most one message and drops the subscription. That message wakes the stream's
//! triggers; [`HOLD`] later the subject is subscribed again and the triggers are woken once more
//! (a message that arrived during the hold, or one the first read missed because JetStream had
//! not stored it yet, is read then). A subject whose message comes again within one hold of its
//! re-arming (a busy stream) is held twice as long each time, up to [`MAX_HOLD`]; a quiet one
//! goes back to [`HOLD`]. So a busy stream costs at most one delivered message and two wakes per
//! subject per [`MAX_HOLD`], whatever its rate, and a woken loop honours a wake only while its
//! object is inactive. Payloads are never looked at: each is skipped, and one larger than the
//! server's `max_payload` (at most [`MAX_PAYLOAD`]) or a control line longer than
//! [`MAX_LINE`] ends the connection.
//!
//! # When it does not wake
//!
//! A server that requires authentication or TLS on its client port (`INFO`): no connection is
//! held and the server is asked again every [`RECHECK`]. A stream the endpoint's `/jsz` does not
//! show, or without subjects (a mirror, a sourced stream): its triggers poll, and it is looked
//! up again every [`RECHECK`]. The unauthenticated connection lands in the server's default
//! account (`$G` without accounts, or `no_auth_user`'s): a stream of another account is
//! subscribed in the wrong account and never wakes. A lost connection is re-established with
//! backoff and every registered trigger is woken once after the reconnect. Throughout, the loops
//! poll at `pollingInterval` as always.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use http::HeaderMap;
use serde::Deserialize;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc;
use tokio::time::{Instant, timeout};
use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::monitoring::{Endpoint, Jsz, Target, Varz};
use crate::authentication::HttpAuth;
use crate::context::ScalerContext;
use crate::http_client::{self, HttpClient, HttpClientKey};
use crate::pool::Lease;
use crate::wake::{Wake, WakeChannels, WakeSource, Watch};

/// How often a server that refuses the unauthenticated connection, and a stream that could not
/// be resolved to subjects, are looked at again.
pub const RECHECK: Duration = Duration::from_secs(30);
/// How long a subject stays unsubscribed after its message woke the triggers.
pub const HOLD: Duration = Duration::from_millis(250);
/// The longest hold: a stream that delivers again at once after each re-arm has its hold doubled
/// up to this.
pub const MAX_HOLD: Duration = Duration::from_secs(4);
/// The longest control line read (`INFO` of a large cluster included).
pub const MAX_LINE: usize = 64 * 1024;
/// The largest message accepted (NATS's own upper bound of `max_payload`).
pub const MAX_PAYLOAD: usize = 64 * 1024 * 1024;
/// `max_payload` when the server's `INFO` does not say (NATS's default).
const DEFAULT_MAX_PAYLOAD: usize = 1024 * 1024;
/// At most this many subjects of one stream are subscribed.
pub const MAX_SUBJECTS: usize = 256;
/// The longest subject subscribed.
const MAX_SUBJECT_BYTES: usize = 1024;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the connection is pinged (a half-open connection is noticed within two of these).
const PING_EVERY: Duration = Duration::from_secs(15);
const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Events of the reader waiting for the session.
const PENDING: usize = 64;
/// What separates the parts of a watched stream's name in [`WakeChannels`].
const SEP: char = '\u{1f}';

/// The pool key: the monitoring endpoint (which names the server; no credentials are used).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct WakeKey {
    endpoint: Endpoint,
    timeout: Duration,
}

/// One trigger's registration; dropping it unregisters (and stops the connection when it was
/// the last).
pub struct Registration {
    lease: Lease<WakeKey, WakeSource>,
    name: String,
    wake: Wake,
}

impl Registration {
    /// The trigger's wake-ups.
    pub fn wake(&self) -> Wake {
        self.wake.clone()
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.lease.unregister(&self.name);
    }
}

/// Registers the stream of `target` on the shared subscription connection of `endpoint`.
/// Only spawns the connection's task: never waits for the server. `None` when the HTTP client
/// of the endpoint cannot be built (every poll reports that error).
pub async fn register(
    ctx: &ScalerContext,
    endpoint: &Endpoint,
    target: &Target,
    timeout: Duration,
) -> Option<Registration> {
    let key = WakeKey {
        endpoint: endpoint.clone(),
        timeout,
    };
    let varz = endpoint.varz().ok()?;
    let http_key = HttpClientKey {
        origin: http_client::origin(&varz),
        auth: HttpAuth::default(),
        timeout,
    };
    let lease = ctx
        .clients
        .pool::<WakeKey, WakeSource>()
        .get_or_connect(key.clone(), || async {
            // The task holds the HTTP client itself, not a lease: the pool counts the scalers'
            // leases only.
            let http = crate::pool::Held::new(http_client::lease(ctx, http_key).await?).client();
            let endpoint = key.endpoint.clone();
            Ok::<_, crate::error::ScalerError>(WakeSource::start(
                move |channels, commands, stop| run(http, endpoint, channels, commands, stop),
            ))
        })
        .await
        .ok()?;
    let name = stream_name(target);
    let wake = lease.register(&name);
    Some(Registration { lease, name, wake })
}

/// The name a stream is watched under: its account (name and id) and its name.
fn stream_name(target: &Target) -> String {
    format!(
        "{}{SEP}{}{SEP}{}",
        target.account, target.account_id, target.stream
    )
}

/// The stream of a watched name (its consumer is not needed).
fn target_of(name: &str) -> Option<Target> {
    let mut parts = name.splitn(3, SEP);
    Some(Target {
        account: parts.next()?.to_string(),
        account_id: parts.next()?.to_string(),
        stream: parts.next()?.to_string(),
        consumer: String::new(),
    })
}

/// Whether `subject` can go into a `SUB` line: 1 to 1024 bytes, no whitespace or control
/// character (a subject comes from the server's answer: it must not add a command).
pub fn valid_subject(subject: &str) -> bool {
    !subject.is_empty()
        && subject.len() <= MAX_SUBJECT_BYTES
        && !subject.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// The parts of the server's `INFO` used here.
#[derive(Debug, Default, Deserialize, PartialEq)]
pub struct Info {
    /// The client port wants credentials.
    #[serde(default)]
    pub auth_required: bool,
    /// The client port wants TLS.
    #[serde(default)]
    pub tls_required: bool,
    /// The largest message the server accepts.
    #[serde(default)]
    pub max_payload: Option<u64>,
}

impl Info {
    /// The largest message to skip: the server's `max_payload`, within [`MAX_PAYLOAD`].
    pub fn payload_limit(&self) -> usize {
        self.max_payload
            .map_or(DEFAULT_MAX_PAYLOAD, |m| {
                usize::try_from(m).unwrap_or(MAX_PAYLOAD)
            })
            .min(MAX_PAYLOAD)
    }
}

/// One operation the server sent (its control line).
#[derive(Debug, PartialEq, Eq)]
pub enum Op {
    /// `INFO {...}`: the JSON.
    Info(String),
    /// `MSG` or `HMSG`: the subscription and the bytes that follow (headers and payload).
    Msg {
        /// The subscription id.
        sid: u64,
        /// The bytes to skip, before the final CRLF.
        size: usize,
    },
    /// `PING`.
    Ping,
    /// `PONG`.
    Pong,
    /// `+OK`.
    Ok,
    /// `-ERR ...` (never shown anywhere: it is the server's text).
    Err,
}

/// Why a control line is refused (the connection ends).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    /// Not an operation of the NATS protocol, or malformed.
    #[error("malformed control line")]
    Malformed,
    /// A message larger than the server's `max_payload`.
    #[error("a message of {0} bytes is larger than max_payload")]
    TooLarge(usize),
}

/// Parses one control line (without its CRLF). Messages larger than `max_payload` are refused.
///
/// # Errors
/// See [`ProtocolError`].
pub fn parse_op(line: &str, max_payload: usize) -> Result<Op, ProtocolError> {
    let (verb, rest) = line.split_once([' ', '\t']).unwrap_or((line, ""));
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    let number = |s: &str| s.parse::<usize>().map_err(|_| ProtocolError::Malformed);
    let sid = |s: &str| s.parse::<u64>().map_err(|_| ProtocolError::Malformed);
    let size = match verb.to_ascii_uppercase().as_str() {
        "INFO" => return Ok(Op::Info(rest.trim().to_string())),
        "PING" => return Ok(Op::Ping),
        "PONG" => return Ok(Op::Pong),
        "+OK" => return Ok(Op::Ok),
        "-ERR" => return Ok(Op::Err),
        // MSG <subject> <sid> [reply-to] <#bytes>
        "MSG" if matches!(fields.len(), 3 | 4) => {
            (sid(fields[1])?, number(fields[fields.len() - 1])?)
        }
        // HMSG <subject> <sid> [reply-to] <#header bytes> <#total bytes>
        "HMSG" if matches!(fields.len(), 4 | 5) => {
            let headers = number(fields[fields.len() - 2])?;
            let total = number(fields[fields.len() - 1])?;
            if headers > total {
                return Err(ProtocolError::Malformed);
            }
            (sid(fields[1])?, total)
        }
        _ => return Err(ProtocolError::Malformed),
    };
    let (sid, size) = size;
    if size > max_payload {
        return Err(ProtocolError::TooLarge(size));
    }
    Ok(Op::Msg { sid, size })
}

/// Reads one line, without its line end; `None` at the end of the stream.
///
/// # Errors
/// The read fails, or the line is longer than [`MAX_LINE`] or not UTF-8.
pub async fn read_line<R: AsyncBufRead + Unpin>(reader: &mut R) -> std::io::Result<Option<String>> {
    let mut line = Vec::new();
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(None);
        }
        let (taken, done) = match available.iter().position(|&b| b == b'\n') {
            Some(end) => (end + 1, true),
            None => (available.len(), false),
        };
        line.extend_from_slice(&available[..taken]);
        reader.consume(taken);
        if line.len() > MAX_LINE + 2 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "control line too long",
            ));
        }
        if done {
            while matches!(line.last(), Some(b'\n' | b'\r')) {
                line.pop();
            }
            return String::from_utf8(line)
                .map(Some)
                .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8"));
        }
    }
}

/// What the reader of a connection passes on.
#[derive(Debug)]
enum Event {
    Msg(u64),
    Ping,
    Pong,
}

/// Reads the server's operations until the connection ends or misbehaves, skipping every
/// message's bytes.
async fn read_loop(
    mut reader: BufReader<OwnedReadHalf>,
    max_payload: usize,
    events: mpsc::Sender<Event>,
) {
    loop {
        let Ok(Some(line)) = read_line(&mut reader).await else {
            return;
        };
        let event = match parse_op(&line, max_payload) {
            Ok(Op::Msg { sid, size }) => {
                let want = size as u64 + 2;
                let skipped =
                    tokio::io::copy(&mut (&mut reader).take(want), &mut tokio::io::sink()).await;
                if !matches!(skipped, Ok(n) if n == want) {
                    return;
                }
                Event::Msg(sid)
            }
            Ok(Op::Ping) => Event::Ping,
            Ok(Op::Pong) => Event::Pong,
            Ok(Op::Info(_) | Op::Ok) => continue,
            // The server's error text is not kept: the connection is re-established.
            Ok(Op::Err) | Err(_) => return,
        };
        if events.send(event).await.is_err() {
            return;
        }
    }
}

enum Ended {
    /// The client port wants credentials or TLS.
    Refused,
    /// The connection failed or was lost; `subscribed` says whether it had subscribed.
    Lost { subscribed: bool },
    /// Every registration is gone.
    Closed,
}

async fn run(
    http: Option<std::sync::Arc<HttpClient>>,
    endpoint: Endpoint,
    channels: WakeChannels,
    mut commands: mpsc::UnboundedReceiver<Watch>,
    stop: CancellationToken,
) {
    let Some(http) = http else {
        return;
    };
    let mut backoff = MIN_BACKOFF;
    let mut reconnect = false;
    loop {
        let ended = tokio::select! {
            () = stop.cancelled() => return,
            ended = session(&http, &endpoint, &channels, &mut commands, reconnect) => ended,
        };
        let wait = match ended {
            Ended::Closed => return,
            Ended::Refused => {
                debug!(
                    endpoint = endpoint.base(),
                    "nats client port wants credentials or TLS; polling only"
                );
                RECHECK
            }
            Ended::Lost { subscribed } => {
                if subscribed {
                    reconnect = true;
                    backoff = MIN_BACKOFF;
                }
                debug!(
                    endpoint = endpoint.base(),
                    ?backoff,
                    "nats subscription connection lost; polling until it is back"
                );
                let wait = backoff;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                wait
            }
        };
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// GETs `url` and decodes its JSON; `None` on any failure (the poll reports the endpoint's
/// errors; this path only degrades to polling).
async fn get_json<T: serde::de::DeserializeOwned>(http: &HttpClient, url: url::Url) -> Option<T> {
    let body = http.get(url, &HeaderMap::new()).await.ok()?;
    crate::remote::from_json(&body).ok()
}

/// The subjects of the streams of `names`, one `/jsz` per account. A name whose stream is not
/// found (or has no usable subject) is absent.
async fn resolve(
    http: &HttpClient,
    endpoint: &Endpoint,
    names: &[String],
) -> HashMap<String, Vec<String>> {
    let mut by_account: HashMap<String, Vec<(&String, Target)>> = HashMap::new();
    for name in names {
        if let Some(target) = target_of(name) {
            by_account
                .entry(target.account_id.clone())
                .or_default()
                .push((name, target));
        }
    }
    let mut out = HashMap::new();
    for (account_id, targets) in by_account {
        let Ok(url) = endpoint.jsz(&account_id) else {
            continue;
        };
        let Some(jsz) = get_json::<Jsz>(http, url).await else {
            continue;
        };
        for (name, target) in targets {
            let Some(stream) = target.stream(&jsz) else {
                continue;
            };
            let subjects: Vec<String> = stream
                .config
                .subjects
                .iter()
                .filter(|s| valid_subject(s))
                .take(MAX_SUBJECTS)
                .cloned()
                .collect();
            if !subjects.is_empty() {
                out.insert(name.clone(), subjects);
            }
        }
    }
    out
}

/// The subscriptions of one connection.
#[derive(Default)]
struct Subscriptions {
    /// The subjects of each resolved stream.
    subjects: HashMap<String, Vec<String>>,
    /// Watched streams not resolved (looked up again every [`RECHECK`]).
    unresolved: HashSet<String>,
    /// Armed one-shot subscriptions: their stream and subject.
    sids: HashMap<u64, (String, String)>,
    /// Subjects held after a message, with when they are armed again.
    held: Vec<(Instant, String, String)>,
    /// The hold of each (stream, subject) last held, and when it was armed again.
    holds: HashMap<(String, String), (Duration, Instant)>,
    next_sid: u64,
}

impl Subscriptions {
    /// The commands that arm a one-shot subscription to `subject` for `name`.
    fn arm(&mut self, name: &str, subject: &str, out: &mut String) {
        self.next_sid += 1;
        let sid = self.next_sid;
        self.sids
            .insert(sid, (name.to_string(), subject.to_string()));
        out.push_str(&format!("SUB {subject} {sid}\r\nUNSUB {sid} 1\r\n"));
    }

    /// Adds what `resolve` found for `names`, and the commands that subscribe to it.
    fn add(&mut self, names: &[String], mut found: HashMap<String, Vec<String>>, out: &mut String) {
        for name in names {
            match found.remove(name) {
                Some(subjects) => {
                    self.unresolved.remove(name);
                    for subject in &subjects {
                        self.arm(name, subject, out);
                    }
                    self.subjects.insert(name.clone(), subjects);
                }
                None => {
                    self.unresolved.insert(name.clone());
                }
            }
        }
    }

    /// Forgets `name`, and the commands that unsubscribe from its subjects.
    fn remove(&mut self, name: &str, out: &mut String) {
        self.subjects.remove(name);
        self.unresolved.remove(name);
        let sids: Vec<u64> = self
            .sids
            .iter()
            .filter(|(_, (n, _))| n == name)
            .map(|(sid, _)| *sid)
            .collect();
        for sid in sids {
            self.sids.remove(&sid);
            out.push_str(&format!("UNSUB {sid}\r\n"));
        }
        self.holds.retain(|(n, _), _| n != name);
        // Held subjects of `name` are dropped when their time comes (`rearm`).
    }

    /// A message for `sid` arrived (its subscription is spent): the stream to wake. The subject
    /// is held for [`HOLD`]; when the message came within one hold of the subject being armed
    /// again (a busy stream), for twice the last hold, up to [`MAX_HOLD`].
    fn delivered(&mut self, sid: u64, now: Instant) -> Option<String> {
        let (name, subject) = self.sids.remove(&sid)?;
        let key = (name.clone(), subject.clone());
        let hold = match self.holds.get(&key) {
            Some((last, armed)) if now.saturating_duration_since(*armed) < *last => {
                (*last * 2).min(MAX_HOLD)
            }
            _ => HOLD,
        };
        self.holds.insert(key, (hold, now));
        self.held.push((now + hold, name.clone(), subject));
        Some(name)
    }

    /// When the next held subject is due.
    fn next_rearm(&self) -> Option<Instant> {
        self.held.iter().map(|(at, _, _)| *at).min()
    }

    /// Arms the held subjects due at `now` again: the streams to wake.
    fn rearm(&mut self, now: Instant, out: &mut String) -> Vec<String> {
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|(at, _, _)| *at <= now);
        self.held = later;
        let mut woken = Vec::new();
        for (_, name, subject) in due {
            if self
                .subjects
                .get(&name)
                .is_some_and(|s| s.contains(&subject))
            {
                self.arm(&name, &subject, out);
                if let Some((_, armed)) = self.holds.get_mut(&(name.clone(), subject)) {
                    *armed = now;
                }
                if !woken.contains(&name) {
                    woken.push(name);
                }
            }
        }
        woken
    }
}

async fn send(write: &mut OwnedWriteHalf, commands: &str) -> bool {
    if commands.is_empty() {
        return true;
    }
    matches!(
        timeout(RESPONSE_TIMEOUT, write.write_all(commands.as_bytes())).await,
        Ok(Ok(()))
    )
}

/// Connects to the client port and completes the handshake: the reader half positioned after
/// the first `PONG`, the writer, and the server's `max_payload`.
async fn connect(
    http: &HttpClient,
    endpoint: &Endpoint,
) -> Result<(BufReader<OwnedReadHalf>, OwnedWriteHalf, usize), Ended> {
    let lost = Ended::Lost { subscribed: false };
    let varz_url = endpoint.varz().map_err(|_| Ended::Closed)?;
    let Some(varz) = get_json::<Varz>(http, varz_url).await else {
        return Err(lost);
    };
    if varz.port == 0 {
        return Err(lost);
    }
    let Ok(Ok(tcp)) = timeout(
        CONNECT_TIMEOUT,
        TcpStream::connect((endpoint.host(), varz.port)),
    )
    .await
    else {
        return Err(lost);
    };
    let _ = tcp.set_nodelay(true);
    let (read, mut write) = tcp.into_split();
    let mut reader = BufReader::new(read);
    let Ok(Ok(Some(line))) = timeout(RESPONSE_TIMEOUT, read_line(&mut reader)).await else {
        return Err(lost);
    };
    let Ok(Op::Info(json)) = parse_op(&line, 0) else {
        return Err(lost);
    };
    let Ok(info) = crate::remote::from_json::<Info>(json.as_bytes()) else {
        return Err(lost);
    };
    if info.auth_required || info.tls_required {
        return Err(Ended::Refused);
    }
    let hello = format!(
        "CONNECT {{\"verbose\":false,\"pedantic\":false,\"headers\":true,\"no_responders\":false,\"lang\":\"rust\",\"version\":\"{}\",\"name\":\"keda-rs-wake\",\"protocol\":1}}\r\nPING\r\n",
        env!("CARGO_PKG_VERSION")
    );
    if !send(&mut write, &hello).await {
        return Err(lost);
    }
    let handshake = async {
        loop {
            match read_line(&mut reader).await {
                Ok(Some(line)) => match parse_op(&line, 0) {
                    Ok(Op::Pong) => return true,
                    Ok(Op::Info(_) | Op::Ok) => {}
                    _ => return false,
                },
                _ => return false,
            }
        }
    };
    if !matches!(timeout(RESPONSE_TIMEOUT, handshake).await, Ok(true)) {
        return Err(lost);
    }
    Ok((reader, write, info.payload_limit()))
}

/// One subscription connection, until it ends.
async fn session(
    http: &HttpClient,
    endpoint: &Endpoint,
    channels: &WakeChannels,
    commands: &mut mpsc::UnboundedReceiver<Watch>,
    reconnect: bool,
) -> Ended {
    let (reader, mut write, max_payload) = match connect(http, endpoint).await {
        Ok(connected) => connected,
        Err(ended) => return ended,
    };
    let (events_tx, mut events) = mpsc::channel(PENDING);
    let _reader = AbortOnDrop(tokio::spawn(read_loop(reader, max_payload, events_tx)));
    let mut subs = Subscriptions::default();
    let mut out = String::new();
    let names = channels.names();
    let found = resolve(http, endpoint, &names).await;
    subs.add(&names, found, &mut out);
    let lost = Ended::Lost { subscribed: true };
    if !send(&mut write, &std::mem::take(&mut out)).await {
        return lost;
    }
    if reconnect {
        // Something may have arrived while the connection was down.
        channels.wake_all();
    }
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.reset();
    let mut recheck = tokio::time::interval(RECHECK);
    recheck.reset();
    let mut unanswered_pings = 0u32;
    loop {
        let rearm_at = subs
            .next_rearm()
            .unwrap_or_else(|| Instant::now() + RECHECK);
        tokio::select! {
            command = commands.recv() => match command {
                None => return Ended::Closed,
                Some(Watch::Add(name)) => {
                    // Many triggers register together (an operator start): resolve them in one
                    // `/jsz` per account, not one per trigger.
                    let mut names = vec![name];
                    while let Ok(command) = commands.try_recv() {
                        match command {
                            Watch::Add(name) => names.push(name),
                            Watch::Remove(name) if channels.contains(&name) => {}
                            Watch::Remove(name) => {
                                names.retain(|n| *n != name);
                                subs.remove(&name, &mut out);
                            }
                        }
                    }
                    names.sort();
                    names.dedup();
                    names.retain(|n| !subs.subjects.contains_key(n));
                    if !names.is_empty() {
                        let found = resolve(http, endpoint, &names).await;
                        subs.add(&names, found, &mut out);
                    }
                }
                // Registered again meanwhile: stay subscribed.
                Some(Watch::Remove(name)) if channels.contains(&name) => {}
                Some(Watch::Remove(name)) => subs.remove(&name, &mut out),
            },
            event = events.recv() => match event {
                None => return lost,
                Some(Event::Msg(sid)) => {
                    if let Some(name) = subs.delivered(sid, Instant::now()) {
                        channels.wake(&name);
                    }
                }
                Some(Event::Ping) => out.push_str("PONG\r\n"),
                Some(Event::Pong) => unanswered_pings = 0,
            },
            () = tokio::time::sleep_until(rearm_at), if subs.next_rearm().is_some() => {
                for name in subs.rearm(Instant::now(), &mut out) {
                    channels.wake(&name);
                }
            }
            _ = ping.tick() => {
                if unanswered_pings > 0 {
                    return lost;
                }
                unanswered_pings += 1;
                out.push_str("PING\r\n");
            }
            _ = recheck.tick() => {
                let names: Vec<String> = subs.unresolved.iter().cloned().collect();
                if !names.is_empty() {
                    let found = resolve(http, endpoint, &names).await;
                    subs.add(&names, found, &mut out);
                }
            }
        }
        if !send(&mut write, &std::mem::take(&mut out)).await {
            return lost;
        }
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_lines_parse_and_messages_are_capped_by_max_payload() {
        let rows = [
            // (line, max payload, expected)
            ("PING", 10, Ok(Op::Ping)),
            ("PONG", 10, Ok(Op::Pong)),
            ("+OK", 10, Ok(Op::Ok)),
            ("-ERR 'Unknown Protocol Operation'", 10, Ok(Op::Err)),
            ("INFO {\"a\":1}", 10, Ok(Op::Info("{\"a\":1}".into()))),
            ("MSG orders.new 7 5", 10, Ok(Op::Msg { sid: 7, size: 5 })),
            (
                "msg orders.new 7 _INBOX.x 5",
                10,
                Ok(Op::Msg { sid: 7, size: 5 }),
            ),
            (
                "HMSG orders.new 3 12 20",
                20,
                Ok(Op::Msg { sid: 3, size: 20 }),
            ),
            (
                "HMSG orders.new 3 r 12 20",
                20,
                Ok(Op::Msg { sid: 3, size: 20 }),
            ),
            // Larger than max_payload: the connection ends.
            ("MSG orders.new 7 11", 10, Err(ProtocolError::TooLarge(11))),
            (
                "HMSG orders.new 3 12 21",
                20,
                Err(ProtocolError::TooLarge(21)),
            ),
            // Headers longer than the whole.
            (
                "HMSG orders.new 3 21 20",
                100,
                Err(ProtocolError::Malformed),
            ),
            ("MSG orders.new x 5", 10, Err(ProtocolError::Malformed)),
            ("MSG orders.new 7 -5", 10, Err(ProtocolError::Malformed)),
            (
                "MSG orders.new 7 99999999999999999999999",
                usize::MAX,
                Err(ProtocolError::Malformed),
            ),
            ("MSG 7", 10, Err(ProtocolError::Malformed)),
            ("PUB x 1", 10, Err(ProtocolError::Malformed)),
            ("", 10, Err(ProtocolError::Malformed)),
        ];
        for (line, max, expected) in rows {
            assert_eq!(parse_op(line, max), expected, "{line}");
        }
    }

    #[tokio::test]
    async fn lines_are_bounded_and_split_at_crlf() {
        let mut ok = &b"PING\r\nMSG a 1 3\r\nabc\r\n"[..];
        assert_eq!(
            read_line(&mut ok).await.expect("read").as_deref(),
            Some("PING")
        );
        assert_eq!(
            read_line(&mut ok).await.expect("read").as_deref(),
            Some("MSG a 1 3")
        );
        let long = format!("INFO {}\r\n", "x".repeat(MAX_LINE + 10));
        let mut long = long.as_bytes();
        assert!(read_line(&mut long).await.is_err(), "a line above MAX_LINE");
        let mut empty = &b""[..];
        assert_eq!(read_line(&mut empty).await.expect("read"), None);
    }

    /// Whatever the server sends, parsing answers (no panic), and a message is never larger
    /// than the limit.
    #[tokio::test]
    async fn arbitrary_bytes_never_panic_and_never_pass_the_payload_limit() {
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            state >> 33
        };
        let words = [
            "MSG",
            "HMSG",
            "INFO",
            "PING",
            "PONG",
            "+OK",
            "-ERR",
            "a.b",
            "7",
            "0",
            "-1",
            "18446744073709551616",
            " ",
            "\t",
            "\r\n",
            "\n",
            "{",
            "}",
            "\u{0}",
            "é",
        ];
        for _ in 0..20_000 {
            let mut bytes = Vec::new();
            for _ in 0..(next() % 12) {
                let w = words[usize::try_from(next() % words.len() as u64).unwrap_or(0)];
                bytes.extend_from_slice(w.as_bytes());
                if next() % 3 == 0 {
                    bytes.push(u8::try_from(next() % 256).unwrap_or(0));
                }
            }
            let text = String::from_utf8_lossy(&bytes);
            if let Ok(Op::Msg { size, .. }) = parse_op(&text, 1000) {
                assert!(size <= 1000, "{text:?}");
            }
            let mut reader = &bytes[..];
            while let Ok(Some(_)) = read_line(&mut reader).await {}
        }
    }

    #[test]
    fn subjects_from_the_server_cannot_add_a_command() {
        assert!(valid_subject("orders.>"));
        assert!(valid_subject("orders.*.new"));
        assert!(!valid_subject(""));
        assert!(!valid_subject("a b"));
        assert!(!valid_subject("a\r\nPUB x 1"));
        assert!(!valid_subject(&"x".repeat(MAX_SUBJECT_BYTES + 1)));
    }

    #[test]
    fn info_gives_the_payload_limit_within_bounds() {
        let info: Info =
            serde_json::from_str(r#"{"max_payload":1048576,"auth_required":true}"#).expect("info");
        assert!(info.auth_required);
        assert_eq!(info.payload_limit(), 1_048_576);
        let huge: Info =
            serde_json::from_str(r#"{"max_payload":18446744073709551615}"#).expect("info");
        assert_eq!(huge.payload_limit(), MAX_PAYLOAD);
        assert_eq!(Info::default().payload_limit(), DEFAULT_MAX_PAYLOAD);
    }

    #[test]
    fn stream_names_round_trip() {
        let target = Target {
            account: "$G".into(),
            account_id: "ACC".into(),
            stream: "orders".into(),
            consumer: "workers".into(),
        };
        let back = target_of(&stream_name(&target)).expect("parts");
        assert_eq!(
            (back.account, back.account_id, back.stream),
            ("$G".to_string(), "ACC".to_string(), "orders".to_string())
        );
    }

    #[test]
    fn a_delivered_subject_is_held_then_armed_again_and_woken() {
        let mut subs = Subscriptions::default();
        let mut out = String::new();
        let names = vec!["s".to_string(), "gone".to_string()];
        let found = HashMap::from([("s".to_string(), vec!["orders.>".to_string()])]);
        subs.add(&names, found, &mut out);
        assert_eq!(out, "SUB orders.> 1\r\nUNSUB 1 1\r\n");
        assert!(subs.unresolved.contains("gone"));
        let now = Instant::now();
        assert_eq!(subs.delivered(1, now).as_deref(), Some("s"));
        assert_eq!(subs.delivered(1, now), None, "a spent subscription");
        assert_eq!(subs.next_rearm(), Some(now + HOLD));
        out.clear();
        assert!(
            subs.rearm(now + HOLD / 2, &mut out).is_empty(),
            "still held"
        );
        assert_eq!(subs.rearm(now + HOLD, &mut out), ["s"]);
        assert_eq!(out, "SUB orders.> 2\r\nUNSUB 2 1\r\n");
        out.clear();
        subs.remove("s", &mut out);
        assert_eq!(out, "UNSUB 2\r\n");
        assert!(subs.sids.is_empty());
    }

    #[test]
    fn a_busy_subject_is_held_longer_each_time_up_to_the_maximum_and_a_quiet_one_is_not() {
        let mut subs = Subscriptions::default();
        let mut out = String::new();
        let names = vec!["s".to_string()];
        subs.add(
            &names,
            HashMap::from([("s".to_string(), vec!["orders.>".to_string()])]),
            &mut out,
        );
        let mut now = Instant::now();
        let mut sid = 1;
        let mut holds = Vec::new();
        // A message right after every re-arm: 250 ms, 500 ms, 1 s, 2 s, 4 s, 4 s.
        for _ in 0..6 {
            assert_eq!(subs.delivered(sid, now).as_deref(), Some("s"));
            let due = subs.next_rearm().expect("held");
            holds.push(due - now);
            now = due;
            assert_eq!(subs.rearm(now, &mut out), ["s"]);
            sid += 1;
        }
        let ms = |n| Duration::from_millis(n);
        assert_eq!(
            holds,
            [ms(250), ms(500), ms(1000), ms(2000), ms(4000), ms(4000)]
        );
        // Quiet for longer than the last hold: back to HOLD.
        now += ms(5000);
        subs.delivered(sid, now);
        assert_eq!(subs.next_rearm(), Some(now + HOLD));
    }
}
