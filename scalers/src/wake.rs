//! Wake-ups: how a scaler whose source can notify tells the operator "something arrived, read
//! me now" without waiting for the next poll.
//!
//! A notification carries no value: the loop it wakes reads the real value through
//! [`crate::Scaler::metrics_and_activity`] and decides exactly as a poll would, only earlier.
//! Notifications are therefore allowed to be lost, duplicated or spurious: the polls go on at
//! `pollingInterval` whatever happens to the notification path, so a broken path degrades to
//! polling and never leaves an object stuck.
//!
//! A notification source (one subscription per server and credentials, shared by every trigger
//! on it) holds one [`WakeSender`] per thing it watches (a Redis key, a PostgreSQL channel) and
//! hands out [`Wake`] receivers. Bursts coalesce: however many notifications arrive while a
//! loop is busy, it is woken once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::{mpsc, watch};
use tokio_util::sync::{CancellationToken, DropGuard};

/// The sending side: the notification source calls [`wake`](Self::wake) on every notification.
#[derive(Clone, Debug)]
pub struct WakeSender {
    tx: Arc<watch::Sender<u64>>,
}

impl Default for WakeSender {
    fn default() -> Self {
        Self::new()
    }
}

impl WakeSender {
    /// A sender with no receiver yet.
    pub fn new() -> Self {
        Self {
            tx: Arc::new(watch::channel(0).0),
        }
    }

    /// Wakes every receiver once (coalesced with wakes they have not seen yet).
    pub fn wake(&self) {
        self.tx.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver that sees only wakes sent after this call.
    pub fn subscribe(&self) -> Wake {
        Wake {
            rx: vec![self.tx.subscribe()],
        }
    }

    /// How many receivers exist.
    pub fn receivers(&self) -> usize {
        self.tx.receiver_count()
    }
}

/// The receiving side, handed to the operator by [`crate::Scaler::wake`]. One trigger may
/// have several sources (a Redis stream: keyspace notifications and `XREAD BLOCK`):
/// [`Wake::merge`] joins them.
#[derive(Clone)]
pub struct Wake {
    rx: Vec<watch::Receiver<u64>>,
}

impl std::fmt::Debug for Wake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wake").finish_non_exhaustive()
    }
}

impl Wake {
    /// Waits for the next wake. `false` when the source is gone for good (the scaler was
    /// closed): the caller stops waiting on it and keeps polling.
    ///
    /// Cancellation-safe.
    pub async fn woken(&mut self) -> bool {
        loop {
            let (woken, index) = if let [rx] = self.rx.as_mut_slice() {
                // The usual case, one source: no boxed futures.
                (rx.changed().await.is_ok(), 0)
            } else if self.rx.is_empty() {
                return false;
            } else {
                let waits = self.rx.iter_mut().map(|rx| Box::pin(rx.changed()));
                let (result, index, _rest) = futures::future::select_all(waits).await;
                (result.is_ok(), index)
            };
            if woken {
                return true;
            }
            // That source is gone; the others may still wake.
            self.rx.swap_remove(index);
        }
    }

    /// The wake-ups of both: woken when either is; gone when both are.
    #[must_use]
    pub fn merge(mut self, other: Wake) -> Wake {
        self.rx.extend(other.rx);
        self
    }

    /// [`merge`](Self::merge) of whichever of `a` and `b` exist.
    pub fn either(a: Option<Wake>, b: Option<Wake>) -> Option<Wake> {
        match (a, b) {
            (Some(a), Some(b)) => Some(a.merge(b)),
            (a, b) => a.or(b),
        }
    }
}

/// The named things one notification connection watches (Redis channels, PostgreSQL
/// `LISTEN` channels), each with its [`WakeSender`] and the count of triggers using it. Cheap
/// to clone; clones share. The connection's task reads it to (re)subscribe and to wake; the
/// triggers register and unregister.
#[derive(Clone, Default)]
pub struct WakeChannels(Arc<Mutex<HashMap<String, (WakeSender, usize)>>>);

impl WakeChannels {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, (WakeSender, usize)>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One more trigger uses `name`: its receiver.
    pub fn register(&self, name: &str) -> Wake {
        let mut channels = self.lock();
        let (sender, users) = channels
            .entry(name.to_string())
            .or_insert_with(|| (WakeSender::new(), 0));
        *users += 1;
        sender.subscribe()
    }

    /// One trigger less uses `name`; `true` when it was the last (stop watching it).
    pub fn unregister(&self, name: &str) -> bool {
        let mut channels = self.lock();
        match channels.get_mut(name) {
            Some((_, users)) if *users > 1 => {
                *users -= 1;
                false
            }
            Some(_) => {
                channels.remove(name);
                true
            }
            None => false,
        }
    }

    /// Whether any trigger uses `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.lock().contains_key(name)
    }

    /// Every name in use.
    pub fn names(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    /// Wakes the triggers of `name`, if any.
    pub fn wake(&self, name: &str) {
        if let Some((sender, _)) = self.lock().get(name) {
            sender.wake();
        }
    }

    /// Wakes every trigger (after a reconnect: something may have arrived meanwhile).
    pub fn wake_all(&self) {
        for (sender, _) in self.lock().values() {
            sender.wake();
        }
    }
}

/// What a notification source's connection task is told: start or stop watching a name.
#[derive(Debug, PartialEq, Eq)]
pub enum Watch {
    /// A trigger registered the name (sent for every registration; the task may already
    /// watch it).
    Add(String),
    /// The last trigger of the name is gone (the task checks [`WakeChannels::contains`], as
    /// one may have registered again meanwhile).
    Remove(String),
}

/// One shared notification connection (a Redis subscription, a PostgreSQL listener): its
/// channels, the commands to its background task, and the task's stop (when the last lease of
/// the source goes, the source is dropped and the task stops).
pub struct WakeSource {
    channels: WakeChannels,
    commands: mpsc::UnboundedSender<Watch>,
    _stop: DropGuard,
}

impl WakeSource {
    /// Spawns `task` with the channels, the command queue and the stop token. The task
    /// (re)subscribes to [`WakeChannels::names`] whenever it (re)connects and follows the
    /// commands while connected.
    pub fn start<F, Fut>(task: F) -> Self
    where
        F: FnOnce(WakeChannels, mpsc::UnboundedReceiver<Watch>, CancellationToken) -> Fut,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let channels = WakeChannels::default();
        let (commands, rx) = mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        tokio::spawn(task(channels.clone(), rx, stop.clone()));
        Self {
            channels,
            commands,
            _stop: stop.drop_guard(),
        }
    }

    /// One more trigger watches `name`: its receiver.
    pub fn register(&self, name: &str) -> Wake {
        let wake = self.channels.register(name);
        // The task subscribes to every registered name when it (re)connects; this covers a
        // name registered while it is connected. The task lives as long as this source, so the
        // send cannot fail while a registration holds the source.
        let _ = self.commands.send(Watch::Add(name.to_string()));
        wake
    }

    /// One trigger of `name` is gone; the last one stops the watch.
    pub fn unregister(&self, name: &str) {
        if self.channels.unregister(name) {
            let _ = self.commands.send(Watch::Remove(name.to_string()));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn wakes_coalesce_and_end_with_the_source() {
        let tx = WakeSender::new();
        let mut rx = tx.subscribe();
        tx.wake();
        tx.wake();
        assert!(rx.woken().await);
        // The two wakes came as one.
        let again = tokio::time::timeout(Duration::from_millis(50), rx.woken()).await;
        assert!(again.is_err(), "a second wake was seen for one burst");
        tx.wake();
        assert!(rx.woken().await);
        drop(tx);
        assert!(!rx.woken().await);
    }

    #[tokio::test]
    async fn a_merged_wake_fires_for_either_source_and_ends_with_both() {
        let (a, b) = (WakeSender::new(), WakeSender::new());
        let mut both = a.subscribe().merge(b.subscribe());
        b.wake();
        assert!(both.woken().await);
        drop(b);
        a.wake();
        assert!(both.woken().await, "a still wakes after b is gone");
        drop(a);
        assert!(!both.woken().await);
        assert!(Wake::either(None, None).is_none());
    }

    #[tokio::test]
    async fn channels_count_their_users_and_wake_by_name() {
        let channels = WakeChannels::default();
        let mut a1 = channels.register("a");
        let _a2 = channels.register("a");
        let mut b = channels.register("b");
        let mut names = channels.names();
        names.sort();
        assert_eq!(names, ["a", "b"]);
        channels.wake("a");
        assert!(a1.woken().await);
        let quiet = tokio::time::timeout(Duration::from_millis(50), b.woken()).await;
        assert!(quiet.is_err(), "b was woken by a's notification");
        channels.wake_all();
        assert!(b.woken().await);
        assert!(!channels.unregister("a"), "a has another user");
        assert!(channels.unregister("a"), "the last user of a");
        assert!(!channels.contains("a"));
        assert!(!channels.unregister("a"));
    }
}
