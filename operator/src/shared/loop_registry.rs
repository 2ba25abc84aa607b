//! The bookkeeping shared by the ScaledObject scale loops ([`crate::scaled_object::scale_loop`]) and the
//! ScaledJob job loops ([`crate::scaled_job`]): one running task per object UID with the
//! [`CancellationToken`] that stops it, the scalers it holds, and what it was started for; plus
//! what the operator remembers about each object across loop restarts.
//!
//! [`LoopRegistry::ensure`] is called by every reconcile: with the same key (and no pending
//! rebuild) it returns the running loop's scalers; otherwise it stops the old loop (cancel,
//! await, close its scalers so shared clients are released) and starts a fresh one.
//! [`LoopRegistry::rebuild`] marks a loop whose scalers' inputs changed (a rotated Secret): the
//! next `ensure` restarts it even though the object did not change.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::shared::scalers::ObjectScalers;

/// Locks a memory, recovering it after a panic elsewhere (every update is a plain assignment,
/// so a poisoned memory is still consistent).
pub(crate) fn lock<M>(m: &Mutex<M>) -> std::sync::MutexGuard<'_, M> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Called once for every loop that stops (pause, change, deletion, shutdown), after its task
/// ended and its scalers were closed: `(namespace, name, scalers)`.
pub(crate) type OnStop = Box<dyn Fn(&str, &str, &ObjectScalers) + Send + Sync>;

struct Entry<K> {
    key: K,
    /// `namespace/name`, shared with the index by name.
    names: Names,
    token: CancellationToken,
    task: JoinHandle<()>,
    scalers: Arc<ObjectScalers>,
    /// The inputs of its scalers changed: the next `ensure` rebuilds them.
    stale: bool,
}

/// An object's `namespace/name` in one allocation: a namespace has no `/` (it is a DNS
/// label), so the first `/` ends it.
#[derive(Clone, Debug)]
struct Names(Arc<str>);

impl Names {
    fn new(namespace: &str, name: &str) -> Self {
        Names(Arc::from(Self::key(namespace, name)))
    }

    /// The key [`Entries::by_name`] is searched with.
    fn key(namespace: &str, name: &str) -> String {
        format!("{namespace}/{name}")
    }

    fn namespace(&self) -> &str {
        self.0
            .split_once('/')
            .map_or("", |(namespace, _)| namespace)
    }

    fn name(&self) -> &str {
        self.0.split_once('/').map_or(&*self.0, |(_, name)| name)
    }
}

/// What a new loop gets from [`LoopRegistry::ensure`].
pub(crate) struct LoopStart<M> {
    /// The object's UID (the registry's own copy).
    pub uid: Arc<str>,
    /// Cancelled when the loop must stop.
    pub token: CancellationToken,
    /// The object's memory (survives loop restarts).
    pub memory: Arc<Mutex<M>>,
    /// The loop's scalers.
    pub scalers: Arc<ObjectScalers>,
}

/// The running loops by object UID, and the UID of each `namespace/name` (the metric service
/// finds a loop by name on every read the HPA sends: a scan of 100,000 entries under the lock
/// took 10 ms per read). A UID and a `namespace/name` are each one allocation, shared by the
/// entry, the index and the memories (100,000 objects kept seven copies of each string).
struct Entries<K> {
    by_uid: HashMap<Arc<str>, Entry<K>>,
    /// The UID of the loop last started for `namespace/name` (an object deleted and created
    /// again has a new UID; its old loop retires on its own).
    by_name: HashMap<Arc<str>, Arc<str>>,
}

impl<K> Default for Entries<K> {
    fn default() -> Self {
        Entries {
            by_uid: HashMap::new(),
            by_name: HashMap::new(),
        }
    }
}

impl<K> Entries<K> {
    fn insert(&mut self, uid: Arc<str>, entry: Entry<K>) {
        self.by_name.insert(entry.names.0.clone(), uid.clone());
        self.by_uid.insert(uid, entry);
    }

    fn remove(&mut self, uid: &str) -> Option<Entry<K>> {
        let entry = self.by_uid.remove(uid)?;
        if self
            .by_name
            .get(&*entry.names.0)
            .is_some_and(|u| &**u == uid)
        {
            self.by_name.remove(&*entry.names.0);
        }
        Some(entry)
    }

    fn named(&self, namespace: &str, name: &str) -> Option<(&Arc<str>, &Entry<K>)> {
        let uid = self.by_name.get(Names::key(namespace, name).as_str())?;
        self.by_uid.get_key_value(&**uid)
    }
}

/// Running loops keyed by object UID, each started for a key of type `K`, and per-object
/// memories of type `M`.
pub(crate) struct LoopRegistry<K, M> {
    entries: tokio::sync::Mutex<Entries<K>>,
    /// By UID (the same allocation as the entry's key once a loop started).
    memory: Mutex<HashMap<Arc<str>, Arc<Mutex<M>>>>,
    shutdown: CancellationToken,
    on_stop: OnStop,
}

impl<K: PartialEq + Clone, M: Default> LoopRegistry<K, M> {
    /// An empty registry; every loop token is a child of `shutdown`.
    pub(crate) fn new(shutdown: CancellationToken, on_stop: OnStop) -> Self {
        LoopRegistry {
            entries: tokio::sync::Mutex::default(),
            memory: Mutex::default(),
            shutdown,
            on_stop,
        }
    }

    /// The memory of `uid`, created empty on first use.
    pub(crate) fn memory(&self, uid: &str) -> Arc<Mutex<M>> {
        let mut memory = lock(&self.memory);
        if let Some(m) = memory.get(uid) {
            return m.clone();
        }
        memory.entry(Arc::from(uid)).or_default().clone()
    }

    /// [`memory`](Self::memory), keyed by this copy of the UID when it is created.
    fn memory_of(&self, uid: &Arc<str>) -> Arc<Mutex<M>> {
        lock(&self.memory).entry(uid.clone()).or_default().clone()
    }

    /// The shared copy of `uid`: the memory's key if there is one, else a new one.
    fn shared_uid(&self, uid: &str) -> Arc<str> {
        lock(&self.memory)
            .get_key_value(uid)
            .map_or_else(|| Arc::from(uid), |(k, _)| k.clone())
    }

    /// Makes sure a loop runs for object `uid` (`namespace/name`) started for `key`. Returns
    /// its scalers and whether it was (re)started. To start one, the old loop (if any) is
    /// stopped, `build` builds the scalers and `start` spawns the task.
    ///
    /// # Errors
    /// `build`'s error (the old loop is stopped all the same).
    pub(crate) async fn ensure<E, B, S>(
        &self,
        uid: &str,
        (namespace, name): (&str, &str),
        key: K,
        build: B,
        start: S,
    ) -> Result<(Arc<ObjectScalers>, bool), E>
    where
        B: AsyncFnOnce() -> Result<ObjectScalers, E>,
        S: FnOnce(LoopStart<M>) -> JoinHandle<()>,
    {
        let mut entries = self.entries.lock().await;
        if let Some(e) = entries.by_uid.get(uid)
            && e.key == key
            && !e.stale
            && !e.task.is_finished()
        {
            return Ok((e.scalers.clone(), false));
        }
        if let Some(old) = entries.remove(uid) {
            self.stop_entry(old).await;
        }
        let scalers = Arc::new(build().await?);
        let token = self.shutdown.child_token();
        let uid = self.shared_uid(uid);
        let task = start(LoopStart {
            uid: uid.clone(),
            token: token.clone(),
            memory: self.memory_of(&uid),
            scalers: scalers.clone(),
        });
        entries.insert(
            uid,
            Entry {
                key,
                names: Names::new(namespace, name),
                token,
                task,
                scalers: scalers.clone(),
                stale: false,
            },
        );
        Ok((scalers, true))
    }

    /// Marks the loop of `namespace/name` for a rebuild at the next [`ensure`](Self::ensure).
    /// The running loop keeps polling until then.
    pub(crate) async fn rebuild(&self, namespace: &str, name: &str) {
        let mut entries = self.entries.lock().await;
        let uid = entries
            .by_name
            .get(Names::key(namespace, name).as_str())
            .cloned();
        if let Some(e) = uid.and_then(|uid| entries.by_uid.get_mut(&*uid)) {
            e.stale = true;
        }
    }

    /// Stops the loop of `uid`, keeping its memory (pause); whether one ran.
    pub(crate) async fn stop(&self, uid: &str) -> bool {
        let entry = self.entries.lock().await.remove(uid);
        match entry {
            Some(e) => {
                self.stop_entry(e).await;
                true
            }
            None => false,
        }
    }

    /// Stops the loop of `uid` and forgets its memory (deletion); whether a loop ran.
    pub(crate) async fn forget(&self, uid: &str) -> bool {
        let stopped = self.stop(uid).await;
        lock(&self.memory).remove(uid);
        stopped
    }

    /// Stops every loop, then cancels the shutdown token (the caches of the owner).
    pub(crate) async fn stop_all(&self) {
        let all: Vec<Entry<K>> = {
            let mut entries = self.entries.lock().await;
            entries.by_name.clear();
            entries.by_uid.drain().map(|(_, e)| e).collect()
        };
        for e in all {
            self.stop_entry(e).await;
        }
        self.shutdown.cancel();
    }

    /// Whether a loop runs for `namespace/name`.
    pub(crate) async fn is_running(&self, namespace: &str, name: &str) -> bool {
        self.entries
            .lock()
            .await
            .named(namespace, name)
            .is_some_and(|(_, e)| !e.task.is_finished())
    }

    /// How many loops run.
    pub(crate) async fn len(&self) -> usize {
        self.entries.lock().await.by_uid.len()
    }

    /// The UID, scalers and key of the loop of `namespace/name`.
    pub(crate) async fn find(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<(String, Arc<ObjectScalers>, K)> {
        self.entries
            .lock()
            .await
            .named(namespace, name)
            .map(|(uid, e)| (uid.to_string(), e.scalers.clone(), e.key.clone()))
    }

    async fn stop_entry(&self, e: Entry<K>) {
        e.token.cancel();
        // A loop sees the cancellation at its next await; it never holds a lock across one.
        if let Err(err) = e.task.await
            && err.is_panic()
        {
            warn!(
                namespace = e.names.namespace(),
                name = e.names.name(),
                "loop panicked"
            );
        }
        e.scalers.close().await;
        (self.on_stop)(e.names.namespace(), e.names.name(), &e.scalers);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> LoopRegistry<u32, ()> {
        LoopRegistry::new(CancellationToken::new(), Box::new(|_, _, _| {}))
    }

    async fn start(r: &LoopRegistry<u32, ()>, uid: &str, name: &str, key: u32) {
        let (_, started) = r
            .ensure(
                uid,
                ("ns", name),
                key,
                async || {
                    Ok::<_, ()>(ObjectScalers {
                        triggers: Vec::new(),
                        modifiers: None,
                        answers: keda_scalers::answers::AnswerBudgets::default().budget("ns"),
                    })
                },
                |start| tokio::spawn(async move { start.token.cancelled().await }),
            )
            .await
            .expect("built");
        assert!(started);
    }

    #[tokio::test]
    async fn loops_are_found_by_name_and_a_recreated_object_s_loop_wins() {
        let r = registry();
        start(&r, "u1", "a", 1).await;
        start(&r, "u2", "b", 2).await;
        assert_eq!(
            r.find("ns", "a").await.map(|(uid, _, k)| (uid, k)),
            Some(("u1".into(), 1))
        );
        assert_eq!(
            r.find("ns", "b").await.map(|(uid, _, k)| (uid, k)),
            Some(("u2".into(), 2))
        );
        assert!(r.find("ns", "c").await.is_none());
        assert!(r.find("other", "a").await.is_none());
        // `a` deleted and created again (new UID) before its old loop retired.
        start(&r, "u3", "a", 3).await;
        assert_eq!(
            r.find("ns", "a").await.map(|(uid, _, _)| uid),
            Some("u3".into())
        );
        // The old loop stops: the name still leads to the new one.
        assert!(r.stop("u1").await);
        assert_eq!(
            r.find("ns", "a").await.map(|(uid, _, _)| uid),
            Some("u3".into())
        );
        assert!(r.is_running("ns", "a").await);
        assert!(r.forget("u3").await);
        assert!(r.find("ns", "a").await.is_none());
        assert!(!r.is_running("ns", "a").await);
        assert_eq!(r.len().await, 1);
        r.stop_all().await;
        assert!(r.find("ns", "b").await.is_none());
        assert_eq!(r.len().await, 0);
    }

    #[tokio::test]
    async fn a_loop_s_uid_and_names_are_one_allocation_each() {
        let r = registry();
        // A memory made before the loop (a metric read): its key is the copy shared.
        drop(r.memory("u1"));
        let mut task_uid = None;
        r.ensure(
            "u1",
            ("ns", "a"),
            1,
            async || {
                Ok::<_, ()>(ObjectScalers {
                    triggers: Vec::new(),
                    modifiers: None,
                    answers: keda_scalers::answers::AnswerBudgets::default().budget("ns"),
                })
            },
            |start| {
                task_uid = Some(start.uid.clone());
                tokio::spawn(async move { start.token.cancelled().await })
            },
        )
        .await
        .expect("built");
        {
            let entries = r.entries.lock().await;
            let (uid, entry) = entries.by_uid.get_key_value("u1").expect("entry");
            let memory = lock(&r.memory);
            let (memory_uid, _) = memory.get_key_value("u1").expect("memory");
            assert!(Arc::ptr_eq(uid, memory_uid), "the memory's UID");
            assert!(
                Arc::ptr_eq(uid, task_uid.as_ref().expect("started")),
                "the task's UID"
            );
            let (names, indexed_uid) = entries.by_name.get_key_value("ns/a").expect("index");
            assert!(Arc::ptr_eq(uid, indexed_uid), "the index's UID");
            assert!(Arc::ptr_eq(names, &entry.names.0), "the index's names");
            assert_eq!((entry.names.namespace(), entry.names.name()), ("ns", "a"));
        }
        r.stop_all().await;
    }
}
