//! Shared event-source clients: one client per (address, credentials, TLS settings), however
//! many triggers use it, with reference counts. The last user to go closes the client.
//!
//! KEDA builds one client per scaler, so 3,000 ScaledObjects on one Kafka cluster hold 3,000
//! clients; here they hold one.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::ops::Deref;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::OnceCell;

/// All pools of a process, one per (key type, client type), created on first use. Cheap to
/// clone; clones share the pools.
#[derive(Clone, Default)]
pub struct ClientPools {
    pools: Arc<Mutex<HashMap<TypeId, Box<dyn Any + Send + Sync>>>>,
    answers: crate::answers::AnswerBudgets,
}

impl ClientPools {
    /// Empty pools, with answer budgets of
    /// [`DEFAULT_ANSWER_BYTES_PER_NAMESPACE`](crate::answers::DEFAULT_ANSWER_BYTES_PER_NAMESPACE).
    pub fn new() -> Self {
        Self::default()
    }

    /// These pools with budgets of `bytes` of answers a namespace ([`crate::answers`]); set
    /// before the pools are cloned.
    #[must_use]
    pub fn with_answer_bytes_per_namespace(mut self, bytes: usize) -> Self {
        self.answers = crate::answers::AnswerBudgets::new(bytes);
        self
    }

    /// The budgets of answer bytes, one per namespace: the operator runs each poll of an object,
    /// and each read the HPA's metric requests make, within its namespace's
    /// ([`crate::answers::Budget::within`]).
    pub fn answer_budgets(&self) -> &crate::answers::AnswerBudgets {
        &self.answers
    }

    /// The pool of clients `C` keyed by `K`. Each scaler module defines its own key type, so
    /// pools of different sources never mix.
    pub fn pool<K, C>(&self) -> SharedPool<K, C>
    where
        K: Eq + Hash + Clone + Send + Sync + 'static,
        C: Send + Sync + 'static,
    {
        let mut pools = self.pools.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = pools
            .entry(TypeId::of::<SharedPool<K, C>>())
            .or_insert_with(|| Box::new(SharedPool::<K, C>::new()));
        match slot.downcast_ref::<SharedPool<K, C>>() {
            Some(pool) => pool.clone(),
            None => {
                // The map is keyed by the pool's own TypeId, so this cannot happen; recover by
                // replacing the slot rather than panicking.
                let pool = SharedPool::<K, C>::new();
                *slot = Box::new(pool.clone());
                pool
            }
        }
    }
}

impl fmt::Debug for ClientPools {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self
            .pools
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        f.debug_struct("ClientPools").field("pools", &n).finish()
    }
}

struct Entry<C> {
    client: Arc<OnceCell<Arc<C>>>,
    users: usize,
}

type Entries<K, C> = Arc<Mutex<HashMap<K, Entry<C>>>>;

/// Clients of one type keyed by their connection settings.
pub struct SharedPool<K, C> {
    entries: Entries<K, C>,
}

impl<K, C> Clone for SharedPool<K, C> {
    fn clone(&self) -> Self {
        Self {
            entries: Arc::clone(&self.entries),
        }
    }
}

impl<K, C> fmt::Debug for SharedPool<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedPool")
            .field("clients", &lock(&self.entries).len())
            .finish()
    }
}

fn lock<K, C>(entries: &Entries<K, C>) -> MutexGuard<'_, HashMap<K, Entry<C>>> {
    entries.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<K, C> SharedPool<K, C>
where
    K: Eq + Hash + Clone + Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    fn new() -> Self {
        Self {
            entries: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// A lease on the client for `key`, calling `connect` only if no client for `key` exists.
    /// Concurrent callers for the same key wait for one `connect`; callers for other keys do not
    /// wait. If `connect` fails, the error is returned and the next caller tries again.
    ///
    /// Cancellation-safe: dropping the future releases the reservation.
    ///
    /// # Errors
    /// Whatever `connect` returns.
    pub async fn get_or_connect<F, Fut, E>(&self, key: K, connect: F) -> Result<Lease<K, C>, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<C, E>>,
    {
        let (cell, reservation) = {
            let mut entries = lock(&self.entries);
            let entry = entries.entry(key.clone()).or_insert_with(|| Entry {
                client: Arc::new(OnceCell::new()),
                users: 0,
            });
            entry.users += 1;
            (
                Arc::clone(&entry.client),
                Reservation {
                    entries: Arc::clone(&self.entries),
                    key,
                },
            )
        };
        // The std mutex is not held here; the OnceCell serializes connects per key.
        let client = cell
            .get_or_try_init(|| async { connect().await.map(Arc::new) })
            .await?;
        Ok(Lease {
            client: Arc::clone(client),
            _reservation: reservation,
        })
    }

    /// How many leases exist for `key` (including callers still connecting).
    pub fn users(&self, key: &K) -> usize {
        lock(&self.entries).get(key).map_or(0, |e| e.users)
    }

    /// How many keys have a client or a connect in progress.
    pub fn len(&self) -> usize {
        lock(&self.entries).len()
    }

    /// Whether the pool holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Counts one user of a key; dropping it uncounts, and removes the entry (closing the client)
/// when it was the last.
struct Reservation<K: Eq + Hash, C> {
    entries: Entries<K, C>,
    key: K,
}

impl<K: Eq + Hash, C> Drop for Reservation<K, C> {
    fn drop(&mut self) {
        let removed = {
            let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
            match entries.get_mut(&self.key) {
                Some(entry) if entry.users > 1 => {
                    entry.users -= 1;
                    None
                }
                Some(_) => entries.remove(&self.key),
                None => None,
            }
        };
        // Dropped after the lock is released: closing a client may take a moment.
        drop(removed);
    }
}

/// A shared client. Dereferences to the client; dropping the last lease of a key closes the
/// client (drops the pool's last reference).
pub struct Lease<K: Eq + Hash, C> {
    // Field order matters: the client reference goes before the reservation, so the entry
    // removed by the reservation holds the last reference and the client closes with it.
    client: Arc<C>,
    _reservation: Reservation<K, C>,
}

impl<K: Eq + Hash, C> Deref for Lease<K, C> {
    type Target = C;
    fn deref(&self) -> &C {
        &self.client
    }
}

impl<K: Eq + Hash, C> fmt::Debug for Lease<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Lease")
    }
}

/// A scaler's lease, held until `close`: [`Held::client`] hands out the shared client for one
/// call without keeping a lock across it, and after [`Held::release`] it returns `None`, so
/// queries after `close` fail with [`crate::ScalerError::Closed`].
pub struct Held<K: Eq + Hash, C>(Mutex<Option<Lease<K, C>>>);

impl<K: Eq + Hash, C> Held<K, C> {
    /// Holds `lease`.
    pub fn new(lease: Lease<K, C>) -> Self {
        Self(Mutex::new(Some(lease)))
    }

    /// The shared client for one call, or `None` after [`Held::release`].
    pub fn client(&self) -> Option<Arc<C>> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|lease| Arc::clone(&lease.client))
    }

    /// Drops the lease (idempotent); the last lease of a key closes its client once the calls
    /// in flight have finished with it.
    pub fn release(&self) {
        let lease = self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
        drop(lease);
    }
}

impl<K: Eq + Hash, C> fmt::Debug for Held<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Held")
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    struct Client {
        closed: Arc<AtomicUsize>,
    }

    impl Drop for Client {
        fn drop(&mut self) {
            self.closed.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn users_of_one_key_share_one_client_closed_by_the_last() {
        let pools = ClientPools::new();
        let pool = pools.pool::<String, Client>();
        let connects = Arc::new(AtomicUsize::new(0));
        let closed = Arc::new(AtomicUsize::new(0));
        let connect = || {
            let connects = Arc::clone(&connects);
            let closed = Arc::clone(&closed);
            move || async move {
                connects.fetch_add(1, Ordering::SeqCst);
                Ok::<_, ()>(Client { closed })
            }
        };
        let a = pool
            .get_or_connect("x".to_string(), connect())
            .await
            .unwrap();
        let b = pools
            .pool::<String, Client>()
            .get_or_connect("x".to_string(), connect())
            .await
            .unwrap();
        let c = pool
            .get_or_connect("y".to_string(), connect())
            .await
            .unwrap();
        assert_eq!(connects.load(Ordering::SeqCst), 2);
        assert!(std::ptr::eq(&*a, &*b));
        assert_eq!(pool.users(&"x".to_string()), 2);
        assert_eq!(pool.len(), 2);

        drop(a);
        assert_eq!(closed.load(Ordering::SeqCst), 0);
        drop(b);
        assert_eq!(closed.load(Ordering::SeqCst), 1);
        assert_eq!(pool.len(), 1);
        drop(c);
        assert_eq!(closed.load(Ordering::SeqCst), 2);
        assert!(pool.is_empty());
    }

    #[tokio::test]
    async fn a_failed_connect_leaves_nothing_behind_and_is_retried() {
        let pool = ClientPools::new().pool::<u8, u8>();
        let err = pool
            .get_or_connect(1, || async { Err::<u8, _>("down") })
            .await;
        assert_eq!(err.err(), Some("down"));
        assert!(pool.is_empty());
        let ok = pool
            .get_or_connect(1, || async { Ok::<u8, ()>(7) })
            .await
            .unwrap();
        assert_eq!(*ok, 7);
    }

    #[tokio::test]
    async fn concurrent_callers_connect_once() {
        let pool = ClientPools::new().pool::<u8, usize>();
        let connects = Arc::new(AtomicUsize::new(0));
        let make = |connects: Arc<AtomicUsize>| {
            let pool = pool.clone();
            async move {
                pool.get_or_connect(1, || async move {
                    tokio::task::yield_now().await;
                    Ok::<_, ()>(connects.fetch_add(1, Ordering::SeqCst))
                })
                .await
            }
        };
        let (a, b) = tokio::join!(make(Arc::clone(&connects)), make(Arc::clone(&connects)));
        assert_eq!(connects.load(Ordering::SeqCst), 1);
        assert_eq!(*a.unwrap(), *b.unwrap());
    }

    #[tokio::test]
    async fn a_held_lease_hands_out_the_client_until_released() {
        let pool = ClientPools::new().pool::<u8, u8>();
        let lease = pool
            .get_or_connect(1, || async { Ok::<u8, ()>(7) })
            .await
            .unwrap();
        let held = Held::new(lease);
        let client = held.client().expect("held");
        assert_eq!(*client, 7);
        held.release();
        held.release();
        assert!(held.client().is_none());
        // The key is gone from the pool; the client lives until the last call drops it.
        assert!(pool.is_empty());
        assert_eq!(*client, 7);
    }

    #[test]
    fn pools_of_different_types_are_separate() {
        let pools = ClientPools::new();
        let _a = pools.pool::<u8, u8>();
        let _b = pools.pool::<u8, u16>();
        assert_eq!(format!("{pools:?}"), "ClientPools { pools: 2 }");
    }
}
