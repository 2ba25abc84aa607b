//! `listenChannel`: the early wake-up of the `postgresql` trigger ([`crate::wake`]), an
//! additive keda-rs metadata key (KEDA's YAML, without it, is unchanged and polled only).
//!
//! The application sends `NOTIFY <channel>` (or `pg_notify('<channel>', ...)`) when it adds
//! work; the trigger's loop is woken and runs its `query` at once. One listening connection per
//! connection string (server and credentials), however many triggers listen on it: each
//! channel is `LISTEN`ed once (reference-counted). A lost connection is re-established with
//! backoff; after a reconnect every registered trigger is woken once (a `NOTIFY` sent while it
//! was down is lost). Throughout, the trigger is polled at `pollingInterval` as always.

use std::time::Duration;

use futures::StreamExt;
use tokio::sync::mpsc;
use tokio::time::timeout;
use tokio_postgres::AsyncMessage;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::super::sql::CONNECT_TIMEOUT;
use super::PgSettings;
use crate::context::ScalerContext;
use crate::metadata::Param;
use crate::pool::Lease;
use crate::secret::Secret;
use crate::wake::{Wake, WakeChannels, WakeSource, Watch};

/// `listenChannel`: the channel to `LISTEN` on (keda-rs only).
pub const LISTEN_CHANNEL: Param = Param::optional("listenChannel");
/// PostgreSQL's identifier limit (`NAMEDATALEN - 1`).
pub const MAX_CHANNEL_BYTES: usize = 63;
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);
const PING_EVERY: Duration = Duration::from_secs(15);
const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Notifications waiting for the task: beyond this they are dropped (each one only wakes, and
/// a pending wake-up already stands for them).
const PENDING: usize = 1024;

/// The pool key: the connection string (server and credentials).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ListenerKey(Secret);

/// The shared listening connection of one connection string.
type Listener = WakeSource;

fn start_listener(settings: &PgSettings) -> Listener {
    let settings = settings.clone();
    WakeSource::start(move |channels, commands, stop| run(settings, channels, commands, stop))
}

/// One trigger's registration; dropping it unregisters.
pub struct Registration {
    lease: Lease<ListenerKey, Listener>,
    channel: String,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.lease.unregister(&self.channel);
    }
}

/// Registers `channel` on the shared listening connection of `settings`.
pub async fn register(
    ctx: &ScalerContext,
    settings: &PgSettings,
    channel: &str,
) -> (Wake, Registration) {
    let pool = ctx.clients.pool::<ListenerKey, Listener>();
    let lease = pool
        .get_or_connect(ListenerKey(settings.info.clone()), || async {
            Ok::<_, std::convert::Infallible>(start_listener(settings))
        })
        .await
        .unwrap_or_else(|never| match never {});
    let wake = lease.register(channel);
    (
        wake,
        Registration {
            lease,
            channel: channel.to_string(),
        },
    )
}

/// `channel` as a quoted SQL identifier.
fn quoted(channel: &str) -> String {
    format!("\"{}\"", channel.replace('"', "\"\""))
}

/// Whether `channel` can be a `LISTEN` channel: 1 to 63 bytes, no NUL.
pub fn valid_channel(channel: &str) -> bool {
    !channel.is_empty() && channel.len() <= MAX_CHANNEL_BYTES && !channel.contains('\0')
}

async fn run(
    settings: PgSettings,
    channels: WakeChannels,
    mut commands: mpsc::UnboundedReceiver<Watch>,
    stop: CancellationToken,
) {
    let mut backoff = MIN_BACKOFF;
    let mut reconnect = false;
    loop {
        let ended = tokio::select! {
            () = stop.cancelled() => return,
            ended = session(&settings, &channels, &mut commands, reconnect) => ended,
        };
        match ended {
            None => return,
            Some(listened) => {
                if listened {
                    reconnect = true;
                    backoff = MIN_BACKOFF;
                }
            }
        }
        debug!(
            ?backoff,
            "postgresql listening connection lost; polling until it is back"
        );
        let wait = backoff;
        backoff = (backoff * 2).min(MAX_BACKOFF);
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// One listening connection, until it is lost (`Some(whether it had listened)`) or every
/// registration is gone (`None`).
async fn session(
    settings: &PgSettings,
    channels: &WakeChannels,
    commands: &mut mpsc::UnboundedReceiver<Watch>,
    reconnect: bool,
) -> Option<bool> {
    let Ok(tls) = settings.tls().await else {
        return Some(false);
    };
    let Ok(Ok((client, mut connection))) =
        timeout(CONNECT_TIMEOUT, settings.config.connect(tls)).await
    else {
        return Some(false);
    };
    let (tx, mut notifications) = mpsc::channel::<String>(PENDING);
    let driver = tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(Ok(message)) = messages.next().await {
            if let AsyncMessage::Notification(n) = message {
                let _ = tx.try_send(n.channel().to_string());
            }
        }
    });
    let _driver = AbortOnDrop(driver);
    let names: Vec<String> = channels.names();
    let listen: String = names
        .iter()
        .map(|n| format!("LISTEN {};", quoted(n)))
        .collect();
    if !names.is_empty()
        && !matches!(
            timeout(RESPONSE_TIMEOUT, client.batch_execute(&listen)).await,
            Ok(Ok(()))
        )
    {
        return Some(false);
    }
    if reconnect {
        channels.wake_all();
    }
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.reset();
    loop {
        let sql = tokio::select! {
            command = commands.recv() => match command {
                None => return None,
                Some(Watch::Add(name)) => format!("LISTEN {};", quoted(&name)),
                Some(Watch::Remove(name)) if channels.contains(&name) => continue,
                Some(Watch::Remove(name)) => format!("UNLISTEN {};", quoted(&name)),
            },
            notification = notifications.recv() => {
                let Some(name) = notification else { return Some(true) };
                channels.wake(&name);
                continue;
            }
            _ = ping.tick() => "SELECT 1".to_string(),
        };
        if !matches!(
            timeout(RESPONSE_TIMEOUT, client.batch_execute(&sql)).await,
            Ok(Ok(()))
        ) {
            return Some(true);
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
    fn channels_are_quoted_identifiers_of_at_most_63_bytes() {
        assert_eq!(quoted("jobs"), "\"jobs\"");
        assert_eq!(quoted("a\"b"), "\"a\"\"b\"");
        assert!(valid_channel("jobs"));
        assert!(!valid_channel(""));
        assert!(!valid_channel("a\0b"));
        assert!(valid_channel(&"x".repeat(63)));
        assert!(!valid_channel(&"x".repeat(64)));
    }
}
