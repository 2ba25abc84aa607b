//! `XREAD BLOCK` waits: the early wake-up of the Redis stream scalers where the server sends no
//! keyspace notifications ([`crate::wake`], [`super::notify`]).
//!
//! One blocking connection per server, credentials and database (a blocking read sees one
//! database), however many stream triggers use it: the connection sends
//! `XREAD COUNT 1 BLOCK 1000 STREAMS <every watched stream> <the last id seen of each>` in a
//! loop, and wakes the triggers of each stream the server answers for. So a server costs one
//! connection and, while idle, one `XREAD` a second ([`BLOCK`]); an answer costs one
//! `XREVRANGE <stream> + - COUNT 1` per answered stream, which moves its id to the stream's
//! newest entry (a burst of entries is one wake, not one round trip per entry). Both read at most
//! one entry per stream (`COUNT 1`): the only stream contents this path reads, never looked at.
//!
//! The ids are kept across reconnects, so an entry that arrived while the connection was down is
//! answered at once by the first `XREAD` after it (a precise catch-up). A trigger's stream is
//! watched from the newest entry at its build (read on the scaler's own connection), so an
//! entry added before the blocking connection takes the stream in (at most [`BLOCK`] later) is
//! still answered.
//!
//! The server's `notify-keyspace-events` is read when connecting and every [`RECHECK`]: where
//! it sends stream keyspace events the keyspace subscription wakes the triggers, and this
//! connection is closed until the setting is read again. A key of another type (a tenant's
//! stream trigger on a list) would make the server refuse the whole `XREAD`: such keys are left
//! out until the next recheck, and their triggers poll. At most [`MAX_STREAMS`] streams share
//! one `XREAD`; more poll. Cluster and sentinel streams poll.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::Client;
use redis::aio::MultiplexedConnection;
use tokio::sync::mpsc;
use tokio::time::{Instant, timeout};
use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::connection::{CONNECT_TIMEOUT, RESPONSE_TIMEOUT, RedisClient, RedisSettings, Topology};
use super::notify::{Notifications, RECHECK, keyspace_events_on};
use crate::context::ScalerContext;
use crate::pool::Lease;
use crate::wake::{Wake, WakeChannels, WakeSource, Watch};

/// How long one `XREAD` blocks: the idle cost (one command per this) and how long a newly
/// registered stream waits to join the read (nothing is missed meanwhile: it starts from the
/// id read at its build).
pub const BLOCK: Duration = Duration::from_secs(1);
/// At most this many streams share one blocking read; the rest poll.
pub const MAX_STREAMS: usize = 4096;
/// The blocking connection's name (`CLIENT SETNAME`), so operators can tell it in `CLIENT LIST`.
pub const CLIENT_NAME: &str = "keda-rs-xread";
const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// An id before every entry: a stream that is empty or does not exist yet is read from here.
const START: &str = "0-0";

/// The pool key: the settings with their database.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct BlockerKey(RedisSettings);

/// The shared blocking reader of one server and database.
struct Blocker {
    source: WakeSource,
    /// The newest id of a stream at a trigger's build, until the reader takes the stream in.
    start_ids: Arc<Mutex<HashMap<String, String>>>,
}

fn start_blocker(settings: &RedisSettings) -> redis::RedisResult<Blocker> {
    let client = settings.standalone_client()?;
    let start_ids = Arc::new(Mutex::new(HashMap::new()));
    let ids = Arc::clone(&start_ids);
    let source = WakeSource::start(move |channels, commands, stop| {
        run(client, channels, commands, stop, ids)
    });
    Ok(Blocker { source, start_ids })
}

/// One trigger's stream on the shared blocking reader. Dropping it unregisters (and stops the
/// reader when it was the last).
pub struct Registration {
    lease: Lease<BlockerKey, Blocker>,
    stream: String,
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
        self.lease.source.unregister(&self.stream);
    }
}

/// Registers `stream` on the shared blocking reader of the settings' server and database.
/// `client` is the scaler's own connection, used once for the stream's newest id. `None`
/// where the topology does not wake here (cluster, sentinel) or the client cannot be built.
pub async fn register(
    ctx: &ScalerContext,
    settings: &RedisSettings,
    stream: &str,
    client: Option<&RedisClient>,
) -> Option<Registration> {
    if settings.topology != Topology::Standalone {
        return None;
    }
    let key = BlockerKey(settings.clone());
    let pool = ctx.clients.pool::<BlockerKey, Blocker>();
    // Starting only spawns the task: building a scaler never waits for the blocking reader.
    let lease = pool
        .get_or_connect(key.clone(), || async { start_blocker(&key.0) })
        .await
        .ok()?;
    if let Some(client) = client {
        let mut cmd = redis::cmd("XREVRANGE");
        cmd.arg(stream).arg("+").arg("-").arg("COUNT").arg(1);
        // Unreadable now (the poll reports why): the reader reads the id itself.
        if let Ok(reply) = client.query::<redis::Value>(&cmd).await {
            lease
                .start_ids
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(stream.to_string())
                .or_insert_with(|| newest_id(&reply).unwrap_or_else(|| START.to_string()));
        }
    }
    let wake = lease.source.register(stream);
    Some(Registration {
        lease,
        stream: stream.to_string(),
        wake,
    })
}

/// The id of the first entry of an `XRANGE`/`XREVRANGE` reply.
fn newest_id(reply: &redis::Value) -> Option<String> {
    let redis::Value::Array(entries) = reply else {
        return None;
    };
    let redis::Value::Array(entry) = entries.first()? else {
        return None;
    };
    redis::from_redis_value_ref::<String>(entry.first()?).ok()
}

/// The streams an `XREAD` answered for, with the id of the (one) entry of each.
fn answered(reply: &redis::Value) -> Vec<(String, Option<String>)> {
    let pairs: Vec<(&redis::Value, &redis::Value)> = match reply {
        // RESP2: [[stream, entries], ...].
        redis::Value::Array(items) => items
            .iter()
            .filter_map(|item| match item {
                redis::Value::Array(pair) if pair.len() == 2 => Some((&pair[0], &pair[1])),
                _ => None,
            })
            .collect(),
        // RESP3: {stream: entries, ...}.
        redis::Value::Map(pairs) => pairs.iter().map(|(k, v)| (k, v)).collect(),
        _ => Vec::new(),
    };
    pairs
        .into_iter()
        .filter_map(|(key, entries)| {
            let key = redis::from_redis_value_ref::<String>(key).ok()?;
            Some((key, newest_id(entries)))
        })
        .collect()
}

enum Ended {
    /// The server sends stream keyspace events: the subscription wakes the triggers.
    Notifying,
    /// The connection failed or was lost; `read` says whether it had read.
    Lost { read: bool },
    /// Every registration is gone.
    Closed,
}

async fn run(
    client: Client,
    channels: WakeChannels,
    mut commands: mpsc::UnboundedReceiver<Watch>,
    stop: CancellationToken,
    start_ids: Arc<Mutex<HashMap<String, String>>>,
) {
    // Kept across connections: the first read after a reconnect answers what came meanwhile.
    let mut ids: HashMap<String, String> = HashMap::new();
    let mut backoff = MIN_BACKOFF;
    loop {
        let mut reader = Reader {
            channels: &channels,
            commands: &mut commands,
            start_ids: &start_ids,
            ids: &mut ids,
        };
        let ended = tokio::select! {
            () = stop.cancelled() => return,
            ended = reader.session(&client) => ended,
        };
        let wait = match ended {
            Ended::Closed => return,
            Ended::Notifying => {
                debug!("redis keyspace notifications are on; no blocking stream reads");
                RECHECK
            }
            Ended::Lost { read } => {
                if read {
                    backoff = MIN_BACKOFF;
                }
                debug!(
                    ?backoff,
                    "redis blocking stream read lost; polling until it is back"
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

struct Reader<'a> {
    channels: &'a WakeChannels,
    commands: &'a mut mpsc::UnboundedReceiver<Watch>,
    start_ids: &'a Mutex<HashMap<String, String>>,
    ids: &'a mut HashMap<String, String>,
}

impl Reader<'_> {
    /// Follows the registrations' comings and goings; `false` when every registration is gone.
    fn follow_commands(&mut self) -> bool {
        loop {
            match self.commands.try_recv() {
                Ok(Watch::Add(_)) => {}
                Ok(Watch::Remove(name)) if !self.channels.contains(&name) => {
                    self.ids.remove(&name);
                    self.start_ids
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .remove(&name);
                }
                Ok(Watch::Remove(_)) => {}
                Err(mpsc::error::TryRecvError::Empty) => return true,
                Err(mpsc::error::TryRecvError::Disconnected) => return false,
            }
        }
    }

    /// One blocking connection, until it ends.
    async fn session(&mut self, client: &Client) -> Ended {
        let lost = Ended::Lost { read: false };
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(BLOCK + RESPONSE_TIMEOUT));
        let Ok(Ok(mut c)) = timeout(
            CONNECT_TIMEOUT,
            client.get_multiplexed_async_connection_with_config(&config),
        )
        .await
        else {
            return lost;
        };
        let mut setname = redis::cmd("CLIENT");
        setname.arg("SETNAME").arg(CLIENT_NAME);
        // A server that refuses names still reads.
        let _ = c.send_packed_command(&setname).await;
        let mut read = false;
        let mut checked: Option<Instant> = None;
        // Keys the server refused to read as streams, until the next recheck.
        let mut refused: HashSet<String> = HashSet::new();
        loop {
            if checked.is_none_or(|at| at.elapsed() >= RECHECK) {
                if notifications(&mut c).await == Notifications::On {
                    return Ended::Notifying;
                }
                checked = Some(Instant::now());
                refused.clear();
            }
            if !self.follow_commands() {
                return Ended::Closed;
            }
            let mut names: Vec<String> = self
                .channels
                .names()
                .into_iter()
                .filter(|n| !refused.contains(n))
                .collect();
            if names.is_empty() {
                // Nothing to read: wait for a registration (or the recheck).
                match timeout(RECHECK, self.commands.recv()).await {
                    Ok(None) => return Ended::Closed,
                    Ok(Some(Watch::Remove(name))) if !self.channels.contains(&name) => {
                        self.ids.remove(&name);
                    }
                    _ => {}
                }
                continue;
            }
            names.sort();
            names.truncate(MAX_STREAMS);
            for name in &names {
                if self.ids.contains_key(name) {
                    continue;
                }
                let start = self
                    .start_ids
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(name);
                let id = match start {
                    Some(id) => id,
                    None => match newest(&mut c, name).await {
                        Ok(id) => id.unwrap_or_else(|| START.to_string()),
                        Err(e) if wrong_type(&e) => {
                            refused.insert(name.clone());
                            continue;
                        }
                        Err(_) => return Ended::Lost { read },
                    },
                };
                self.ids.insert(name.clone(), id);
            }
            names.retain(|n| self.ids.contains_key(n));
            if names.is_empty() {
                continue;
            }
            let mut xread = redis::cmd("XREAD");
            #[allow(clippy::cast_possible_truncation, reason = "BLOCK is one second")]
            let block_ms = BLOCK.as_millis() as u64;
            xread
                .arg("COUNT")
                .arg(1)
                .arg("BLOCK")
                .arg(block_ms)
                .arg("STREAMS");
            for name in &names {
                xread.arg(name);
            }
            for name in &names {
                xread.arg(self.ids.get(name).map_or(START, String::as_str));
            }
            let reply = match timeout(
                BLOCK + RESPONSE_TIMEOUT,
                xread.query_async::<redis::Value>(&mut c),
            )
            .await
            {
                Ok(Ok(reply)) => reply,
                Ok(Err(e)) if wrong_type(&e) => {
                    // A key of another type: find it and leave it out, so the other streams
                    // still wake.
                    let before = refused.len();
                    for name in &names {
                        if !is_stream_or_missing(&mut c, name).await {
                            refused.insert(name.clone());
                            self.ids.remove(name);
                        }
                    }
                    if refused.len() == before {
                        return Ended::Lost { read };
                    }
                    continue;
                }
                _ => return Ended::Lost { read },
            };
            read = true;
            let answered = answered(&reply);
            for (name, entry) in &answered {
                // Skip the burst: from the stream's newest entry on, then wake (everything up
                // to that id is there for the woken poll to read).
                let id = match newest(&mut c, name).await {
                    Ok(Some(id)) => Some(id),
                    Ok(None) => entry.clone(),
                    Err(_) => return Ended::Lost { read },
                };
                if let Some(id) = id {
                    self.ids.insert(name.clone(), id);
                }
            }
            for (name, _) in &answered {
                self.channels.wake(name);
            }
        }
    }
}

/// The newest id of `stream` (`None`: empty or missing).
async fn newest(c: &mut MultiplexedConnection, stream: &str) -> redis::RedisResult<Option<String>> {
    let mut cmd = redis::cmd("XREVRANGE");
    cmd.arg(stream).arg("+").arg("-").arg("COUNT").arg(1);
    let reply: redis::Value = timeout(RESPONSE_TIMEOUT, cmd.query_async(c))
        .await
        .map_err(|_| redis::RedisError::from((redis::ErrorKind::Io, "XREVRANGE timed out")))??;
    Ok(newest_id(&reply))
}

/// The server refused a command on a key of another type.
fn wrong_type(e: &redis::RedisError) -> bool {
    e.code() == Some("WRONGTYPE")
}

async fn is_stream_or_missing(c: &mut MultiplexedConnection, key: &str) -> bool {
    let mut cmd = redis::cmd("TYPE");
    cmd.arg(key);
    match timeout(RESPONSE_TIMEOUT, cmd.query_async::<String>(c)).await {
        Ok(Ok(kind)) => kind == "stream" || kind == "none",
        _ => true,
    }
}

/// What the server's `notify-keyspace-events` says, read on this connection.
async fn notifications(c: &mut MultiplexedConnection) -> Notifications {
    let mut cmd = redis::cmd("CONFIG");
    cmd.arg("GET").arg("notify-keyspace-events");
    match timeout(RESPONSE_TIMEOUT, cmd.query_async::<Vec<String>>(c)).await {
        Ok(Ok(reply)) => match reply.get(1) {
            // Streams are `t` (or `A`).
            Some(flags)
                if keyspace_events_on(flags) && (flags.contains('t') || flags.contains('A')) =>
            {
                Notifications::On
            }
            Some(_) => Notifications::Off,
            None => Notifications::Unknown,
        },
        _ => Notifications::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use redis::Value;

    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    fn entry(id: &str) -> Value {
        Value::Array(vec![bulk(id), Value::Array(vec![bulk("f"), bulk("v")])])
    }

    #[test]
    fn answers_name_their_streams_and_entry_ids_in_both_protocols() {
        let resp2 = Value::Array(vec![
            Value::Array(vec![bulk("a"), Value::Array(vec![entry("1-0")])]),
            Value::Array(vec![bulk("b"), Value::Array(vec![entry("2-3")])]),
        ]);
        assert_eq!(
            answered(&resp2),
            [
                ("a".to_string(), Some("1-0".to_string())),
                ("b".to_string(), Some("2-3".to_string()))
            ]
        );
        let resp3 = Value::Map(vec![(bulk("c"), Value::Array(vec![entry("5-0")]))]);
        assert_eq!(
            answered(&resp3),
            [("c".to_string(), Some("5-0".to_string()))]
        );
        assert!(answered(&Value::Nil).is_empty(), "a timed-out read");
        assert_eq!(newest_id(&Value::Array(vec![])), None, "an empty stream");
    }
}
