//! Turns cache changes into rebuild signals, without losing a change that lands while a
//! resolution is in flight.
//!
//! A resolution reads the caches first and records what it read when it ends. A change in
//! between would find no owner to notify, so every change made while any resolution is in
//! flight is remembered with a sequence number, and a resolution that ends after one of its
//! dependencies changed signals its own object at once.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use super::keys::{DepKey, ScalableRef};
use super::signal::{DepIndex, RebuildSignals, Subscribers};

#[derive(Default)]
struct State {
    deps: DepIndex,
    seq: u64,
    in_flight: usize,
    /// Sequence number of the last change of each dependency, kept while resolutions run.
    changed: HashMap<DepKey, u64>,
}

#[derive(Default)]
pub(crate) struct Notifier {
    state: Mutex<State>,
    subscribers: Subscribers,
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

    /// A resolution that started at `start` ends having read `deps`.
    pub(crate) fn end(&self, owner: &ScalableRef, start: u64, deps: HashSet<DepKey>) {
        let stale = {
            let mut state = self.lock();
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
        self.lock().deps.remove(owner);
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
        notifier.end(&so, start, HashSet::from([secret.clone()]));
        assert_eq!(signals.try_recv(), Some(so.clone()));

        // a resolution that started after the change is not stale
        let start = notifier.begin();
        notifier.end(&so, start, HashSet::from([secret.clone()]));
        assert!(signals.try_recv().is_none());

        // later changes reach the recorded owner, unrelated ones nobody
        notifier.changed(other);
        assert!(signals.try_recv().is_none());
        notifier.changed(secret);
        assert_eq!(signals.try_recv(), Some(so));
    }
}
