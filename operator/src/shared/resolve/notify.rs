//! Turns cache changes into rebuild signals, without losing a change that lands while a
//! resolution is in flight.
//!
//! A resolution reads the caches first and records what it read when it ends. A change in
//! between would find no owner to notify, so every change made while any resolution is in
//! flight is remembered with a sequence number, and a resolution that ends after one of its
//! dependencies changed signals its own object at once.
//!
//! Some inputs expire instead of changing: a bound service account token
//! (`boundServiceAccountToken`) is valid for a limited time. A resolution that used one records
//! when its object must be rebuilt to get a fresh one ([`Notifier::end`]'s `refresh_at`), and
//! [`Notifier::run_refreshes`] signals the object then. Each object has at most one pending
//! refresh, replaced by its next resolution, so refreshes never multiply.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::keys::{DepKey, ScalableRef};
use super::signal::{DepIndex, RebuildSignals, Subscribers};

#[derive(Default)]
struct State {
    deps: DepIndex,
    seq: u64,
    in_flight: usize,
    /// Sequence number of the last change of each dependency, kept while resolutions run.
    changed: HashMap<DepKey, u64>,
    /// When each object must be rebuilt because an input of its last resolution expires.
    refresh: HashMap<ScalableRef, Instant>,
}

#[derive(Default)]
pub(crate) struct Notifier {
    state: Mutex<State>,
    subscribers: Subscribers,
    /// Wakes [`Notifier::run_refreshes`] when a refresh time was added or removed.
    refresh_changed: tokio::sync::Notify,
}

impl Notifier {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Each critical section leaves `State` consistent before anything can panic.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn subscribe(&self) -> RebuildSignals {
        self.subscribers.subscribe()
    }

    /// `dep` changed: signal every object that used it.
    pub(crate) fn changed(&self, dep: DepKey) {
        let owners = {
            let mut state = self.lock();
            state.seq += 1;
            let seq = state.seq;
            if state.in_flight > 0 {
                state.changed.insert(dep.clone(), seq);
            }
            state.deps.owners(&dep)
        };
        for owner in owners {
            tracing::debug!(scalable = %owner, "a dependency changed: scalers must be rebuilt");
            self.subscribers.send(&owner);
        }
    }

    /// A resolution starts; returns its start mark for [`Notifier::end`].
    pub(crate) fn begin(&self) -> u64 {
        let mut state = self.lock();
        state.in_flight += 1;
        state.seq
    }

    /// A resolution that started at `start` ends having read `deps`; when it used inputs that
    /// expire, `refresh_at` is when the object must be rebuilt (replacing any earlier refresh
    /// time of the object).
    pub(crate) fn end(
        &self,
        owner: &ScalableRef,
        start: u64,
        deps: HashSet<DepKey>,
        refresh_at: Option<Instant>,
    ) {
        let stale = {
            let mut state = self.lock();
            let refresh_changed = match refresh_at {
                Some(at) => {
                    state.refresh.insert(owner.clone(), at);
                    true
                }
                None => state.refresh.remove(owner).is_some(),
            };
            if refresh_changed {
                self.refresh_changed.notify_one();
            }
            let stale = deps
                .iter()
                .any(|d| state.changed.get(d).is_some_and(|seq| *seq > start));
            state.deps.replace(owner, deps);
            state.in_flight = state.in_flight.saturating_sub(1);
            if state.in_flight == 0 {
                state.changed.clear();
            }
            stale
        };
        if stale {
            tracing::debug!(scalable = %owner, "a dependency changed during resolution: scalers must be rebuilt");
            self.subscribers.send(owner);
        }
    }

    pub(crate) fn forget(&self, owner: &ScalableRef) {
        let mut state = self.lock();
        state.deps.remove(owner);
        if state.refresh.remove(owner).is_some() {
            self.refresh_changed.notify_one();
        }
    }

    /// Signals each object when its refresh time (see [`Notifier::end`]) comes, until `cancel`.
    pub(crate) async fn run_refreshes(&self, cancel: CancellationToken) {
        loop {
            let next = self.lock().refresh.values().min().copied();
            let due = async {
                match next {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = cancel.cancelled() => return,
                () = self.refresh_changed.notified() => continue,
                () = due => {}
            }
            let now = Instant::now();
            let owners: Vec<ScalableRef> = {
                let mut state = self.lock();
                let owners: Vec<ScalableRef> = state
                    .refresh
                    .iter()
                    .filter(|(_, at)| **at <= now)
                    .map(|(owner, _)| owner.clone())
                    .collect();
                for owner in &owners {
                    state.refresh.remove(owner);
                }
                owners
            };
            for owner in owners {
                tracing::debug!(scalable = %owner, "a bound service account token expires soon: scalers must be rebuilt");
                self.subscribers.send(&owner);
            }
        }
    }

    pub(crate) fn deps(&self, owner: &ScalableRef) -> Vec<DepKey> {
        self.lock().deps.deps(owner)
    }
}

#[cfg(test)]
mod tests {
    use super::super::keys::ObjKey;
    use super::*;
    use keda_scalers::ScalableKind;

    #[test]
    fn a_change_during_resolution_signals_the_object_when_it_ends() {
        let notifier = Notifier::default();
        let mut signals = notifier.subscribe();
        let so = ScalableRef::new(ScalableKind::ScaledObject, "ns", "a");
        let secret = DepKey::Secret(ObjKey::new("ns", "s"));
        let other = DepKey::Secret(ObjKey::new("ns", "other"));

        let start = notifier.begin();
        notifier.changed(secret.clone());
        notifier.changed(other.clone());
        assert!(signals.try_recv().is_none(), "nobody depended on it yet");
        notifier.end(&so, start, HashSet::from([secret.clone()]), None);
        assert_eq!(signals.try_recv(), Some(so.clone()));

        // a resolution that started after the change is not stale
        let start = notifier.begin();
        notifier.end(&so, start, HashSet::from([secret.clone()]), None);
        assert!(signals.try_recv().is_none());

        // later changes reach the recorded owner, unrelated ones nobody
        notifier.changed(other);
        assert!(signals.try_recv().is_none());
        notifier.changed(secret);
        assert_eq!(signals.try_recv(), Some(so));
    }
    #[tokio::test(start_paused = true)]
    async fn an_object_is_signalled_once_when_its_refresh_time_comes_and_a_new_resolution_replaces_it()
     {
        use std::sync::Arc;
        use std::time::Duration;

        let notifier = Arc::new(Notifier::default());
        let mut signals = notifier.subscribe();
        let cancel = CancellationToken::new();
        let task = tokio::spawn({
            let notifier = Arc::clone(&notifier);
            let cancel = cancel.clone();
            async move { notifier.run_refreshes(cancel).await }
        });
        let a = ScalableRef::new(ScalableKind::ScaledObject, "ns", "a");
        let b = ScalableRef::new(ScalableKind::ScaledObject, "ns", "b");
        let start = Instant::now();
        let at = |secs| Some(start + Duration::from_secs(secs));

        let mark = notifier.begin();
        notifier.end(&a, mark, HashSet::new(), at(100));
        let mark = notifier.begin();
        notifier.end(&b, mark, HashSet::new(), at(50));
        // a's next resolution moves its refresh later: only the latest time counts.
        let mark = notifier.begin();
        notifier.end(&a, mark, HashSet::new(), at(200));

        tokio::time::sleep(Duration::from_secs(49)).await;
        assert!(signals.try_recv().is_none(), "nothing is due yet");
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(signals.try_recv(), Some(b.clone()));
        tokio::time::sleep(Duration::from_secs(100)).await;
        assert!(
            signals.try_recv().is_none(),
            "a's earlier time was replaced"
        );
        tokio::time::sleep(Duration::from_secs(50)).await;
        assert_eq!(signals.try_recv(), Some(a.clone()));
        assert!(signals.try_recv().is_none(), "one signal per refresh");

        // A resolution without expiring inputs, or forgetting the object, clears its refresh.
        let mark = notifier.begin();
        notifier.end(&a, mark, HashSet::new(), at(400));
        let mark = notifier.begin();
        notifier.end(&a, mark, HashSet::new(), None);
        let mark = notifier.begin();
        notifier.end(&b, mark, HashSet::new(), at(400));
        notifier.forget(&b);
        tokio::time::sleep(Duration::from_secs(300)).await;
        assert!(signals.try_recv().is_none());

        cancel.cancel();
        task.await.expect("the refresh task ends on cancel");
    }
}
