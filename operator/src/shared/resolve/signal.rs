//! Who used what, and the "rebuild your scalers" signals that follow from a change.

use std::collections::{HashMap, HashSet};
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};

use tokio::sync::mpsc;

use super::keys::{DepKey, ScalableRef};

/// Which objects each scalable object's last resolution read, and the reverse index.
#[derive(Default)]
pub(crate) struct DepIndex {
    by_owner: HashMap<ScalableRef, HashSet<DepKey>>,
    by_dep: HashMap<DepKey, HashSet<ScalableRef>>,
}

impl DepIndex {
    /// Replaces what `owner` depends on.
    pub(crate) fn replace(&mut self, owner: &ScalableRef, deps: HashSet<DepKey>) {
        self.remove(owner);
        for dep in &deps {
            self.by_dep
                .entry(dep.clone())
                .or_default()
                .insert(owner.clone());
        }
        if !deps.is_empty() {
            self.by_owner.insert(owner.clone(), deps);
        }
    }

    /// Forgets `owner`.
    pub(crate) fn remove(&mut self, owner: &ScalableRef) {
        for dep in self.by_owner.remove(owner).unwrap_or_default() {
            if let Some(owners) = self.by_dep.get_mut(&dep) {
                owners.remove(owner);
                if owners.is_empty() {
                    self.by_dep.remove(&dep);
                }
            }
        }
    }

    /// The objects that depend on `dep`.
    pub(crate) fn owners(&self, dep: &DepKey) -> Vec<ScalableRef> {
        self.by_dep
            .get(dep)
            .map(|owners| owners.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// What `owner` depends on, for tests and diagnostics.
    pub(crate) fn deps(&self, owner: &ScalableRef) -> Vec<DepKey> {
        let mut deps: Vec<DepKey> = self
            .by_owner
            .get(owner)
            .map(|d| d.iter().cloned().collect())
            .unwrap_or_default();
        deps.sort();
        deps
    }
}

/// The subscribers of rebuild signals.
#[derive(Default)]
pub(crate) struct Subscribers(Mutex<Vec<mpsc::UnboundedSender<ScalableRef>>>);

impl Subscribers {
    pub(crate) fn subscribe(&self) -> RebuildSignals {
        let (tx, rx) = mpsc::unbounded_channel();
        self.lock().push(tx);
        RebuildSignals(rx)
    }

    /// Sends `owner` to every live subscriber, dropping those that went away.
    pub(crate) fn send(&self, owner: &ScalableRef) {
        self.lock().retain(|tx| tx.send(owner.clone()).is_ok());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<mpsc::UnboundedSender<ScalableRef>>> {
        // Every operation on the list is a push or a retain: it is consistent after a panic.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// "This object must rebuild its scalers": one item per scalable object whose Secret,
/// ConfigMap, (Cluster)TriggerAuthentication or scale-target pod template changed in content
/// since its last resolution. Unbounded, so a slow subscriber never loses a signal; the
/// volume is one item per affected object per change.
///
/// Use it as a `Stream` (e.g. `Controller::reconcile_on(signals.filter_map(...))`) or with
/// [`RebuildSignals::recv`]. It ends when the [`super::Resolver`] is dropped.
pub struct RebuildSignals(mpsc::UnboundedReceiver<ScalableRef>);

impl RebuildSignals {
    /// The next object to rebuild; `None` once the resolver is gone.
    pub async fn recv(&mut self) -> Option<ScalableRef> {
        self.0.recv().await
    }

    /// A signal that is already waiting, without blocking.
    pub fn try_recv(&mut self) -> Option<ScalableRef> {
        self.0.try_recv().ok()
    }
}

impl futures::Stream for RebuildSignals {
    type Item = ScalableRef;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ScalableRef>> {
        self.0.poll_recv(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::super::keys::ObjKey;
    use super::*;
    use keda_scalers::ScalableKind;

    #[test]
    fn replacing_dependencies_drops_the_old_ones() {
        let so = ScalableRef::new(ScalableKind::ScaledObject, "ns", "a");
        let old = DepKey::Secret(ObjKey::new("ns", "old"));
        let new = DepKey::Secret(ObjKey::new("ns", "new"));
        let mut index = DepIndex::default();
        index.replace(&so, HashSet::from([old.clone()]));
        assert_eq!(index.owners(&old), std::slice::from_ref(&so));
        index.replace(&so, HashSet::from([new.clone()]));
        assert!(index.owners(&old).is_empty());
        assert_eq!(index.owners(&new), std::slice::from_ref(&so));
        index.remove(&so);
        assert!(index.owners(&new).is_empty());
        assert!(index.deps(&so).is_empty());
    }
}
