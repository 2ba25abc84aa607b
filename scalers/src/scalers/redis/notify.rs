//! Keyspace notifications: the early wake-up of the Redis list and stream scalers
//! ([`crate::wake`]).
//!
//! One subscription connection per server and credentials (the pool key is the connection
//! settings without the database, as Pub/Sub is not per database), however many triggers watch
//! keys on it: each trigger registers the channel `__keyspace@<db>__:<key>` of its key, the
//! connection subscribes to each channel once (reference-counted) and wakes the triggers of a
//! channel on each message. Exact `SUBSCRIBE`, never a pattern: a key with glob characters
//! matches only itself, and the server sends only the watched keys' events.
//!
//! The server's `notify-keyspace-events` is read (`CONFIG GET`), never changed. Without keyspace
//! events (`K` and one of `A`, `l`, `t`) no subscription connection is held and the setting is
//! read again every [`RECHECK`]. Where `CONFIG GET` is refused (a managed Redis that renames
//! `CONFIG`), the connection subscribes anyway: a server that does not notify costs one idle
//! connection. A lost connection is re-established with backoff; after a reconnect every
//! registered trigger is woken once (something may have arrived unseen). Meanwhile, and
//! whenever notifications are off, the loops poll at `pollingInterval` as always.
//!
//! Only standalone servers notify here: a cluster notifies per node and a sentinel's master
//! moves; both poll.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use redis::Client;
use tokio::sync::mpsc;
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::connection::{CONNECT_TIMEOUT, RESPONSE_TIMEOUT, RedisSettings, Topology};
use crate::context::ScalerContext;
use crate::pool::Lease;
use crate::wake::{Wake, WakeChannels, WakeSource, Watch};

/// How often a server without keyspace notifications is asked again.
pub const RECHECK: Duration = Duration::from_secs(30);
/// How often the subscription connection is pinged (a half-open connection is noticed within
/// this plus the response timeout).
const PING_EVERY: Duration = Duration::from_secs(15);
const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// The pool key: a server and credentials (the database is not part of it).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct SubscriberKey(RedisSettings);

/// The shared subscription of one server: a background task, stopped when the last
/// registration goes.
type Subscriber = WakeSource;

fn start_subscriber(settings: &RedisSettings) -> redis::RedisResult<Subscriber> {
    let client = settings.standalone_client()?;
    Ok(WakeSource::start(move |channels, commands, stop| {
        run(client, channels, commands, stop)
    }))
}

/// One trigger's registration: its key's channel on the shared subscription. Dropping it
/// unregisters (and releases the subscription when it was the last).
pub struct Registration {
    lease: Lease<SubscriberKey, Subscriber>,
    channel: String,
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
        self.lease.unregister(&self.channel);
    }
}

/// Registers `key` (in the settings' database) for keyspace notifications on the shared
/// subscription of the server. `None` where the topology does not notify here (cluster,
/// sentinel) or the client cannot be built (the poll reports that error).
pub async fn register(
    ctx: &ScalerContext,
    settings: &RedisSettings,
    key: &str,
) -> Option<Registration> {
    if settings.topology != Topology::Standalone {
        return None;
    }
    let pool_key = SubscriberKey(RedisSettings {
        database: 0,
        ..settings.clone()
    });
    let pool = ctx.clients.pool::<SubscriberKey, Subscriber>();
    // Starting only spawns the task: building a scaler never waits for the subscription.
    let lease = pool
        .get_or_connect(pool_key.clone(), || async { start_subscriber(&pool_key.0) })
        .await
        .ok()?;
    let channel = format!("__keyspace@{}__:{key}", settings.database);
    let wake = lease.register(&channel);
    Some(Registration {
        lease,
        channel,
        wake,
    })
}

/// The wake-ups of a scaler's registration, while it holds one.
pub(super) fn wake_of(held: &Mutex<Option<Registration>>) -> Option<Wake> {
    held.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .map(Registration::wake)
}

/// Drops a scaler's registration (its `close`).
pub(super) fn release(held: &Mutex<Option<Registration>>) {
    let registration = held.lock().unwrap_or_else(PoisonError::into_inner).take();
    drop(registration);
}

/// What `notify-keyspace-events` says.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Notifications {
    On,
    Off,
    /// `CONFIG GET` refused or unreadable.
    Unknown,
}

/// Whether `flags` (the value of `notify-keyspace-events`) sends the keyspace events of lists,
/// sets, hashes, sorted sets or streams.
pub(super) fn keyspace_events_on(flags: &str) -> bool {
    flags.contains('K')
        && flags
            .chars()
            .any(|c| matches!(c, 'A' | 'l' | 't' | 's' | 'h' | 'z'))
}

async fn detect(client: &Client) -> Notifications {
    let read = async {
        let mut c = client.get_multiplexed_async_connection().await?;
        redis::cmd("CONFIG")
            .arg("GET")
            .arg("notify-keyspace-events")
            .query_async::<Vec<String>>(&mut c)
            .await
    };
    match timeout(CONNECT_TIMEOUT + RESPONSE_TIMEOUT, read).await {
        Ok(Ok(reply)) => match reply.get(1) {
            Some(flags) if keyspace_events_on(flags) => Notifications::On,
            Some(_) => Notifications::Off,
            None => Notifications::Unknown,
        },
        _ => Notifications::Unknown,
    }
}

enum Ended {
    /// The server sends no keyspace events.
    Off,
    /// The connection failed or was lost; `subscribed` says whether it had subscribed.
    Lost { subscribed: bool },
    /// Every registration is gone.
    Closed,
}

async fn run(
    client: Client,
    channels: WakeChannels,
    mut commands: mpsc::UnboundedReceiver<Watch>,
    stop: CancellationToken,
) {
    let mut backoff = MIN_BACKOFF;
    let mut reconnect = false;
    loop {
        let ended = tokio::select! {
            () = stop.cancelled() => return,
            ended = session(&client, &channels, &mut commands, reconnect) => ended,
        };
        let wait = match ended {
            Ended::Closed => return,
            Ended::Off => {
                debug!("redis keyspace notifications are off; polling only");
                RECHECK
            }
            Ended::Lost { subscribed } => {
                if subscribed {
                    reconnect = true;
                    backoff = MIN_BACKOFF;
                }
                debug!(
                    ?backoff,
                    "redis keyspace subscription lost; polling until it is back"
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

/// One subscription connection, until it ends.
async fn session(
    client: &Client,
    channels: &WakeChannels,
    commands: &mut mpsc::UnboundedReceiver<Watch>,
    reconnect: bool,
) -> Ended {
    if detect(client).await == Notifications::Off {
        return Ended::Off;
    }
    let lost = Ended::Lost { subscribed: false };
    let Ok(Ok(pubsub)) = timeout(CONNECT_TIMEOUT, client.get_async_pubsub()).await else {
        return lost;
    };
    let (mut sink, mut stream) = pubsub.split();
    let names: Vec<String> = channels.names();
    if !names.is_empty()
        && !matches!(
            timeout(RESPONSE_TIMEOUT, sink.subscribe(&names)).await,
            Ok(Ok(()))
        )
    {
        return lost;
    }
    if reconnect {
        // Something may have arrived while the connection was down.
        channels.wake_all();
    }
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.reset();
    let lost = Ended::Lost { subscribed: true };
    loop {
        tokio::select! {
            command = commands.recv() => {
                let done = match command {
                    None => return Ended::Closed,
                    Some(Watch::Add(name)) => {
                        timeout(RESPONSE_TIMEOUT, sink.subscribe(&name)).await
                    }
                    // Registered again meanwhile: stay subscribed.
                    Some(Watch::Remove(name)) if channels.contains(&name) => continue,
                    Some(Watch::Remove(name)) => {
                        timeout(RESPONSE_TIMEOUT, sink.unsubscribe(&name)).await
                    }
                };
                if !matches!(done, Ok(Ok(()))) {
                    return lost;
                }
            }
            message = stream.next() => {
                let Some(message) = message else { return lost };
                // Only the channel name is looked at (it is one we subscribed to); the
                // event itself is not needed: the woken loop reads the real value.
                channels.wake(message.get_channel_name());
            }
            _ = ping.tick() => {
                if !matches!(timeout(RESPONSE_TIMEOUT, sink.ping::<redis::Value>()).await, Ok(Ok(_))) {
                    return lost;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyspace_events_need_k_and_a_class_of_ours() {
        assert!(keyspace_events_on("Kl"));
        assert!(keyspace_events_on("KA"));
        assert!(keyspace_events_on("Kt"));
        assert!(keyspace_events_on("AKE"));
        assert!(!keyspace_events_on(""));
        assert!(!keyspace_events_on("El"));
        assert!(!keyspace_events_on("Kx"));
        assert!(!keyspace_events_on("Kg$"));
    }
}
