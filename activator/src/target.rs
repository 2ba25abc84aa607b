//! One routed target on this activator replica: its pods, the per-pod in-flight counts, the
//! bounded FIFO of requests held while no pod has room, and its statistics.
//!
//! All state sits behind one short `std` mutex that is never held across an `.await`: a
//! request takes a slot (or a place in the queue) under the lock and awaits outside it. A
//! finishing request hands its slot straight to the oldest held request, so held requests are
//! forwarded in arrival order.
//!
//! Held requests are bounded twice: by count (`queueDepth`) and by the memory they keep (their
//! heads and what their clients send after them, [`Charge`]), so a target's queue cannot grow
//! past `--held-request-memory` whatever its clients send.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use keda_scalers::scalers::http::protocol::{TargetKey, TargetSample};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::balance::{PodSlot, Replicas, assign, pick};
use crate::error::ProxyError;
use crate::metrics::TargetMetrics;
use crate::stats::Meter;
use crate::upstream::{AppProtocol, NoPodTls, PodTls, Upstream};

/// The per-target settings from the `http` trigger.
#[derive(Clone, Debug, PartialEq)]
pub struct TargetSettings {
    /// Per-pod limit (0 = none), before the split across activator replicas.
    pub container_concurrency: u32,
    /// Longest wait for a slot.
    pub hold_timeout: Duration,
    /// Most requests waiting at once.
    pub queue_depth: usize,
    /// Longest wait for the pod's response head once a request is sent.
    pub response_timeout: Duration,
    /// Most bytes the held requests may keep together ([`Charge`]).
    pub held_memory: usize,
    /// Most connections (requests in flight) to one pod from this replica, whatever
    /// `container_concurrency` says; 0: no limit.
    pub max_pod_connections: u32,
}

impl TargetSettings {
    /// The per-pod limit used: `container_concurrency`, within `max_pod_connections`.
    fn pod_limit(&self) -> u32 {
        match (self.container_concurrency, self.max_pod_connections) {
            (cc, 0) => cc,
            (0, cap) => cap,
            (cc, cap) => cc.min(cap),
        }
    }
}

/// The hold queue: the held requests' ids in arrival order, and their senders by id. A request
/// that leaves (timeout, client gone) removes its sender by id, O(1); its id stays in `order`
/// until dispatch passes it, or until ids of gone requests are more than half of `order`, when
/// one pass drops them all (so each leaving request costs O(1) amortized, never a scan of the
/// queue under the target's lock: a mass hold timeout at `queueDepth` 1,000,000 stays linear).
#[derive(Default)]
struct Queue {
    order: VecDeque<u64>,
    waiters: HashMap<u64, oneshot::Sender<Arc<Upstream>>>,
    /// Entries of `order` looked at and senders added or removed: the test of the cost.
    steps: u64,
}

impl Queue {
    fn len(&self) -> usize {
        self.waiters.len()
    }

    fn is_empty(&self) -> bool {
        self.waiters.is_empty()
    }

    fn push_back(&mut self, id: u64, tx: oneshot::Sender<Arc<Upstream>>) {
        self.steps += 1;
        self.order.push_back(id);
        self.waiters.insert(id, tx);
    }

    /// The oldest request still waiting.
    fn pop_front(&mut self) -> Option<oneshot::Sender<Arc<Upstream>>> {
        while let Some(id) = self.order.pop_front() {
            self.steps += 1;
            if let Some(tx) = self.waiters.remove(&id) {
                return Some(tx);
            }
        }
        None
    }

    /// Removes request `id` if it still waits.
    fn remove(&mut self, id: u64) {
        self.steps += 1;
        if self.waiters.remove(&id).is_some()
            && self.order.len() > 2 * self.waiters.len() + COMPACT_SLACK
        {
            self.steps += self.order.len() as u64;
            let waiters = &self.waiters;
            self.order.retain(|id| waiters.contains_key(id));
        }
    }
}

/// Ids of gone requests [`Queue::order`] may keep beyond as many as it has live ones.
const COMPACT_SLACK: usize = 64;

struct State {
    settings: TargetSettings,
    ready: Vec<SocketAddr>,
    replicas: Replicas,
    pods: Vec<PodSlot>,
    /// The connections of `pods[i]`, at the same index.
    upstreams: Vec<Arc<Upstream>>,
    cursor: usize,
    queue: Queue,
    next_id: u64,
    meter: Meter,
    last_active: Option<Instant>,
    /// What the held requests' [`Charge`]s add up to.
    held_bytes: usize,
    /// Serve mode as this replica sees the managed Service's slices (`crate::serving`).
    serving: bool,
    /// The pods' own in-flight gauge, summed, while this replica scrapes it (serve mode).
    pod_in_flight: Option<u32>,
    /// How the pods are spoken to (the Service port's `appProtocol`).
    protocol: AppProtocol,
    /// How a TLS pod's certificate is checked, or why it cannot be.
    tls: Result<PodTls, NoPodTls>,
}

impl State {
    /// Hands free slots to held requests, oldest first.
    fn dispatch(&mut self) {
        while !self.queue.is_empty() {
            let Some(i) = pick(&self.pods, self.cursor) else {
                return;
            };
            let Some(tx) = self.queue.pop_front() else {
                return;
            };
            self.pods[i].in_flight += 1;
            if tx.send(Arc::clone(&self.upstreams[i])).is_err() {
                // The request gave up at this very moment: the slot stays free.
                self.pods[i].in_flight -= 1;
            } else {
                self.cursor = i + 1;
            }
        }
    }

    fn release(&mut self, addr: SocketAddr) {
        if let Some(pod) = self.pods.iter_mut().find(|p| p.addr == addr) {
            pod.in_flight = pod.in_flight.saturating_sub(1);
        }
        self.dispatch();
    }

    fn rebuild_pods(&mut self) {
        let assigned = assign(&self.ready, self.settings.pod_limit(), self.replicas);
        let max_idle = self.settings.max_pod_connections;
        let old = std::mem::take(&mut self.pods);
        let old_upstreams = std::mem::take(&mut self.upstreams);
        self.pods = assigned
            .iter()
            .map(|&(addr, capacity)| PodSlot {
                addr,
                capacity,
                // Requests still running on a pod that stays keep counting against it.
                in_flight: old
                    .iter()
                    .find(|p| p.addr == addr)
                    .map_or(0, |p| p.in_flight),
            })
            .collect();
        // A pod that stays keeps its idle connections (unless the protocol or what its TLS
        // verifies changed: a renamed Service's pods must prove the new name); a removed pod's
        // close with it.
        let protocol = self.protocol;
        let tls = self.tls.clone();
        self.upstreams = assigned
            .iter()
            .map(|&(addr, _)| {
                old_upstreams
                    .iter()
                    .find(|u| {
                        u.addr() == addr
                            && u.protocol() == protocol
                            && PodTls::same(u.tls_or_why(), tls.as_ref())
                    })
                    .map_or_else(
                        || {
                            Arc::new(
                                Upstream::with_max_idle(addr, max_idle)
                                    .with_protocol(protocol)
                                    .with_tls(tls.clone()),
                            )
                        },
                        Arc::clone,
                    )
            })
            .collect();
        self.dispatch();
    }
}

/// A routed target.
pub struct Target {
    key: TargetKey,
    label: String,
    state: Mutex<State>,
    wake: mpsc::Sender<TargetKey>,
    metrics: TargetMetrics,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target").field("key", &self.key).finish()
    }
}

/// How a request got its slot.
pub enum Admission {
    /// A pod had room at once.
    Ready(Lease),
    /// The request waits in the queue.
    Held(Held),
}

/// A slot on one pod, released when dropped (when the response body is done, or the client
/// went away).
pub struct Lease {
    target: Arc<Target>,
    upstream: Arc<Upstream>,
    response_timeout: Duration,
}

impl Lease {
    /// The pod to forward to.
    pub fn addr(&self) -> SocketAddr {
        self.upstream.addr()
    }

    /// The pod's connections.
    pub fn upstream(&self) -> &Arc<Upstream> {
        &self.upstream
    }

    /// The target.
    pub fn target(&self) -> &Arc<Target> {
        &self.target
    }

    /// How long the pod may take to send its response head (`responseHeaderTimeout`).
    pub fn response_timeout(&self) -> Duration {
        self.response_timeout
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let now = Instant::now();
        let mut state = self.target.lock();
        state.release(self.upstream.addr());
        state.meter.finished(now);
    }
}

/// Bytes a held request keeps, counted against its target's `held_memory` until dropped.
pub struct Charge {
    target: Arc<Target>,
    bytes: usize,
}

impl Charge {
    /// The bytes counted now.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Counts `kept` bytes (what the request holds now, whatever the limit), and reserves up
    /// to `more` on top as far as the target's limit allows; returns the bytes reserved.
    pub fn keep(&mut self, kept: usize, more: usize) -> usize {
        let mut state = self.target.lock();
        let others = state.held_bytes.saturating_sub(self.bytes);
        let room = state
            .settings
            .held_memory
            .saturating_sub(others.saturating_add(kept));
        let reserved = more.min(room);
        let bytes = kept.saturating_add(reserved);
        state.held_bytes = others.saturating_add(bytes);
        drop(state);
        self.target.metrics.held_bytes.inc_by(gauge(bytes));
        self.target.metrics.held_bytes.dec_by(gauge(self.bytes));
        self.bytes = bytes;
        reserved
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.keep(0, 0);
        }
    }
}

/// A byte count as a gauge value.
fn gauge(bytes: usize) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

/// A place in the hold queue. Dropping it (timeout, client gone) leaves the queue.
pub struct Held {
    target: Arc<Target>,
    id: u64,
    rx: oneshot::Receiver<Arc<Upstream>>,
    done: bool,
    /// The memory the request keeps while it waits.
    charge: Charge,
}

impl Held {
    /// The request's [`Charge`], for a caller that keeps reading from its client while it
    /// waits and counts what it reads; the caller drops it when the wait is over.
    pub fn take_charge(&mut self) -> Charge {
        std::mem::replace(
            &mut self.charge,
            Charge {
                target: Arc::clone(&self.target),
                bytes: 0,
            },
        )
    }

    /// Waits for a slot until the target's hold timeout.
    ///
    /// # Errors
    /// [`ProxyError::HoldTimeout`].
    pub async fn wait(mut self) -> Result<Lease, ProxyError> {
        let timeout = self.target.lock().settings.hold_timeout;
        match tokio::time::timeout(timeout, &mut self.rx).await {
            Ok(Ok(upstream)) => {
                self.done = true;
                self.target.metrics.held.dec();
                let response_timeout = self.target.lock().settings.response_timeout;
                Ok(Lease {
                    target: Arc::clone(&self.target),
                    upstream,
                    response_timeout,
                })
            }
            // The sender is dropped only when the target is removed; report it as a timeout
            // after the wait so the client sees the same answer.
            Ok(Err(_)) | Err(_) => {
                self.target.metrics.hold_timeouts.inc();
                Err(ProxyError::HoldTimeout {
                    target: self.target.label.clone(),
                    timeout,
                })
            }
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.target.metrics.held.dec();
        let now = Instant::now();
        let mut state = self.target.lock();
        state.queue.remove(self.id);
        state.meter.finished(now);
        // A slot may have been handed over just before we gave up: give it back.
        if let Ok(upstream) = self.rx.try_recv() {
            state.release(upstream.addr());
        }
    }
}

impl Target {
    /// A target without pods. `wake` receives the key when a request is held while no pod
    /// is ready.
    pub fn new(
        key: TargetKey,
        settings: TargetSettings,
        wake: mpsc::Sender<TargetKey>,
        metrics: TargetMetrics,
    ) -> Arc<Self> {
        Arc::new(Self {
            label: format!("{}/{}", key.namespace, key.name),
            key,
            state: Mutex::new(State {
                settings,
                ready: Vec::new(),
                replicas: Replicas::default(),
                pods: Vec::new(),
                upstreams: Vec::new(),
                cursor: 0,
                queue: Queue::default(),
                next_id: 0,
                meter: Meter::new(Instant::now()),
                last_active: None,
                held_bytes: 0,
                serving: false,
                pod_in_flight: None,
                protocol: AppProtocol::Http1,
                tls: Err(NoPodTls::NotTls),
            }),
            wake,
            metrics,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The target's key.
    pub fn key(&self) -> &TargetKey {
        &self.key
    }

    /// `namespace/name`, for errors and logs.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Its metrics.
    pub fn metrics(&self) -> &TargetMetrics {
        &self.metrics
    }

    /// Takes a slot on the least-loaded pod with room, or a place in the queue for a request
    /// that keeps `held_bytes()` bytes while it waits (called only if it must wait).
    ///
    /// # Errors
    /// [`ProxyError::QueueFull`] when the queue is at `queueDepth`,
    /// [`ProxyError::HeldMemoryFull`] when the held requests' bytes would pass `held_memory`.
    pub fn admit(
        self: &Arc<Self>,
        held_bytes: impl FnOnce() -> usize,
    ) -> Result<Admission, ProxyError> {
        let now = Instant::now();
        let mut state = self.lock();
        state.meter.arrived(now);
        state.last_active = Some(now);
        if state.queue.is_empty()
            && let Some(i) = pick(&state.pods, state.cursor)
        {
            state.pods[i].in_flight += 1;
            state.cursor = i + 1;
            return Ok(Admission::Ready(Lease {
                target: Arc::clone(self),
                upstream: Arc::clone(&state.upstreams[i]),
                response_timeout: state.settings.response_timeout,
            }));
        }
        if state.queue.len() >= state.settings.queue_depth {
            state.meter.finished(now);
            let depth = state.settings.queue_depth;
            drop(state);
            self.metrics.queue_overflows.inc();
            return Err(ProxyError::QueueFull {
                target: self.label.clone(),
                depth,
            });
        }
        let bytes = held_bytes();
        if state.held_bytes.saturating_add(bytes) > state.settings.held_memory {
            state.meter.finished(now);
            let limit = state.settings.held_memory;
            drop(state);
            self.metrics.held_memory_overflows.inc();
            return Err(ProxyError::HeldMemoryFull {
                target: self.label.clone(),
                limit,
            });
        }
        state.held_bytes += bytes;
        let (tx, rx) = oneshot::channel();
        let id = state.next_id;
        state.next_id += 1;
        let first_without_pods = state.queue.is_empty() && state.ready.is_empty();
        state.queue.push_back(id, tx);
        drop(state);
        self.metrics.held.inc();
        self.metrics.held_total.inc();
        self.metrics.held_bytes.inc_by(gauge(bytes));
        if first_without_pods {
            // Never blocks: if the reporter is behind, the next per-second sample (held > 0,
            // ready == 0) wakes the operator anyway.
            let _ = self.wake.try_send(self.key.clone());
        }
        Ok(Admission::Held(Held {
            target: Arc::clone(self),
            id,
            rx,
            done: false,
            charge: Charge {
                target: Arc::clone(self),
                bytes,
            },
        }))
    }

    /// Replaces the ready endpoints (from EndpointSlices) and forwards held requests that now
    /// have room.
    pub fn set_ready(&self, mut ready: Vec<SocketAddr>) {
        ready.sort_unstable();
        ready.dedup();
        let mut state = self.lock();
        if state.ready != ready {
            state.ready = ready;
            state.rebuild_pods();
        }
    }

    /// Sets how the pods are spoken to (and how a TLS pod is checked); a change replaces
    /// every pod's connections.
    pub fn set_protocol(&self, protocol: AppProtocol, tls: Result<PodTls, NoPodTls>) {
        let mut state = self.lock();
        if state.protocol != protocol || !PodTls::same(state.tls.as_ref(), tls.as_ref()) {
            state.protocol = protocol;
            state.tls = tls;
            state.rebuild_pods();
        }
    }

    /// Updates this replica's place among the activators (for the capacity split).
    pub fn set_replicas(&self, replicas: Replicas) {
        let mut state = self.lock();
        if state.replicas != replicas {
            state.replicas = replicas;
            state.rebuild_pods();
        }
    }

    /// Updates the settings from a changed trigger.
    pub fn set_settings(&self, settings: TargetSettings) {
        let mut state = self.lock();
        if state.settings != settings {
            let limit_changed = state.settings.pod_limit() != settings.pod_limit();
            state.settings = settings;
            if limit_changed {
                state.rebuild_pods();
            }
        }
    }

    /// Requests held now.
    pub fn held(&self) -> usize {
        self.lock().queue.len()
    }

    /// Ready endpoints known.
    pub fn ready(&self) -> usize {
        self.lock().ready.len()
    }

    /// The ready endpoints known, sorted.
    pub fn ready_addrs(&self) -> Vec<SocketAddr> {
        self.lock().ready.clone()
    }

    /// Whether any request is held or forwarded here, or the pods' gauge says they serve one.
    pub fn busy(&self) -> bool {
        let state = self.lock();
        !state.queue.is_empty()
            || state.pods.iter().any(|p| p.in_flight > 0)
            || state.pod_in_flight.is_some_and(|n| n > 0)
    }

    /// Sets serve mode as seen on the managed Service's slices (reported to the operator).
    pub fn set_serving(&self, serving: bool) {
        self.lock().serving = serving;
        self.metrics.serving.set(i64::from(serving));
    }

    /// Sets the pods' in-flight gauge as last scraped (`None`: not scraped by this replica).
    /// In a sample the target's concurrency and in-flight count are the larger of this
    /// replica's own and the pods' (which include the requests this replica forwards).
    pub fn set_pod_in_flight(&self, in_flight: Option<u32>) {
        self.lock().pod_in_flight = in_flight;
    }

    /// This second's statistics for the report, or `None` when the target has been idle for
    /// longer than `idle_after` (so idle targets cost nothing on the wire).
    pub fn sample(&self, now: Instant, idle_after: Duration) -> Option<TargetSample> {
        let mut state = self.lock();
        let sample = state.meter.take(now);
        // Counts on the wire are u32; queueDepth (at most 1,000,000) keeps them far below.
        let held = u32::try_from(state.queue.len()).unwrap_or(u32::MAX);
        let own = state.pods.iter().map(|p| p.in_flight).sum::<u32>();
        let pods = state.pod_in_flight.unwrap_or(0);
        let in_flight = own.max(pods);
        if held > 0 || in_flight > 0 {
            state.last_active = Some(now);
        }
        // A target in serve mode is reported every second: the operator keeps it active.
        let recent = state.serving
            || state
                .last_active
                .is_some_and(|t| now.saturating_duration_since(t) <= idle_after);
        recent.then(|| TargetSample {
            target: self.key.clone(),
            concurrency: sample.concurrency.max(f64::from(pods)),
            requests: sample.requests as f64,
            held,
            in_flight,
            ready: u32::try_from(state.ready.len()).unwrap_or(u32::MAX),
            serving: state.serving,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(cc: u32, depth: usize, hold: Duration) -> (Arc<Target>, mpsc::Receiver<TargetKey>) {
        let (tx, rx) = mpsc::channel(8);
        let t = Target::new(
            TargetKey::new("ns", "web", 0),
            TargetSettings {
                container_concurrency: cc,
                hold_timeout: hold,
                queue_depth: depth,
                response_timeout: Duration::from_secs(60),
                held_memory: 10_000,
                max_pod_connections: 0,
            },
            tx,
            TargetMetrics::default(),
        );
        (t, rx)
    }

    fn addr(last: u8) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, last], 80))
    }

    fn held(a: Admission) -> Held {
        match a {
            Admission::Held(h) => h,
            Admission::Ready(_) => panic!("expected to be held"),
        }
    }

    fn ready(a: Admission) -> Lease {
        match a {
            Admission::Ready(l) => l,
            Admission::Held(_) => panic!("expected a slot"),
        }
    }

    fn pod_tls(name: &str) -> PodTls {
        let config = rustls::ClientConfig::builder_with_provider(keda_tls::provider())
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        PodTls {
            config: Arc::new(config),
            server_name: rustls_pki_types::ServerName::try_from(name.to_string())
                .expect("a DNS name"),
        }
    }

    /// A pod that stays behind a renamed Service is spoken to with the new name: its upstream
    /// (and idle connections verified for the old name) is not reused.
    #[tokio::test]
    async fn a_pod_that_stays_gets_a_new_upstream_when_its_tls_changes() {
        let (t, _wake) = target(0, 10, Duration::from_secs(30));
        t.set_ready(vec![addr(1)]);
        let name = |lease: &Lease| {
            lease
                .upstream()
                .tls()
                .map(|tls| tls.server_name.to_str().into_owned())
        };
        t.set_protocol(AppProtocol::Https, Ok(pod_tls("web.ns.svc")));
        let lease = ready(t.admit(|| 0).expect("admitted"));
        assert_eq!(name(&lease).as_deref(), Some("web.ns.svc"));
        drop(lease);
        t.set_protocol(AppProtocol::Https, Ok(pod_tls("shop.ns.svc")));
        let lease = ready(t.admit(|| 0).expect("admitted"));
        assert_eq!(name(&lease).as_deref(), Some("shop.ns.svc"));
    }

    #[tokio::test(start_paused = true)]
    async fn held_requests_are_forwarded_in_arrival_order_when_a_pod_turns_ready() {
        let (t, mut wake) = target(1, 10, Duration::from_secs(30));
        let first = held(t.admit(|| 0).unwrap());
        let second = held(t.admit(|| 0).unwrap());
        // Only the first held request wakes the operator.
        assert_eq!(wake.try_recv().unwrap(), TargetKey::new("ns", "web", 0));
        assert!(wake.try_recv().is_err());
        let second = tokio::spawn(second.wait());
        tokio::task::yield_now().await;
        t.set_ready(vec![addr(1)]);
        // Capacity 1: the first gets the slot, the second keeps waiting.
        let lease = first.wait().await.unwrap();
        assert_eq!(lease.addr(), addr(1));
        assert!(!second.is_finished());
        assert_eq!(t.held(), 1);
        drop(lease);
        let lease = second.await.unwrap().unwrap();
        assert_eq!(lease.addr(), addr(1));
        assert_eq!(t.held(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_queue_rejects_and_a_held_request_times_out() {
        let (t, _wake) = target(0, 2, Duration::from_secs(3));
        let a = held(t.admit(|| 0).unwrap());
        let _b = held(t.admit(|| 0).unwrap());
        let err = t.admit(|| 0).err().unwrap();
        assert!(
            matches!(err, ProxyError::QueueFull { depth: 2, .. }),
            "{err}"
        );
        let started = Instant::now();
        let err = a.wait().await.err().unwrap();
        assert!(matches!(err, ProxyError::HoldTimeout { .. }), "{err}");
        assert_eq!(started.elapsed(), Duration::from_secs(3));
        // The timed-out request left the queue: there is room again.
        assert_eq!(t.held(), 1);
        assert!(matches!(t.admit(|| 0).unwrap(), Admission::Held(_)));
    }

    #[tokio::test(start_paused = true)]
    async fn held_requests_keep_at_most_the_held_memory_limit() {
        // A limit of 10,000 bytes.
        let (t, _wake) = target(0, 100, Duration::from_secs(30));
        // Requests that get a slot at once are not held and keep nothing.
        let a = held(t.admit(|| 6_000).unwrap());
        let err = t.admit(|| 4_001).err().unwrap();
        assert!(
            matches!(err, ProxyError::HeldMemoryFull { limit: 10_000, .. }),
            "{err}"
        );
        assert_eq!(t.metrics().held_memory_overflows.get(), 1);
        let mut b = held(t.admit(|| 4_000).unwrap());
        assert_eq!(t.metrics().held_bytes.get(), 10_000);
        // A held request that reads more reserves only what is left under the limit, and
        // counts what it keeps even past it.
        let mut charge = b.take_charge();
        assert_eq!(charge.keep(4_000, 100), 0);
        assert_eq!(charge.keep(1_000, 8_192), 3_000);
        assert_eq!(charge.bytes(), 4_000);
        assert_eq!(charge.keep(1_000, 0), 0);
        assert!(
            t.admit(|| 3_000)
                .is_ok_and(|a| matches!(a, Admission::Held(_)))
        );
        assert_eq!(charge.keep(5_000, 0), 0);
        assert_eq!(t.metrics().held_bytes.get(), 11_000);
        // Leaving the queue gives the bytes back.
        drop((a, b, charge));
        assert_eq!(t.metrics().held_bytes.get(), 0);
        let _c = held(t.admit(|| 10_000).unwrap());
    }

    #[tokio::test(start_paused = true)]
    async fn container_concurrency_limits_each_pod_and_picks_the_least_loaded() {
        let (t, _wake) = target(2, 10, Duration::from_secs(30));
        t.set_ready(vec![addr(1), addr(2)]);
        let leases: Vec<Lease> = (0..4).map(|_| ready(t.admit(|| 0).unwrap())).collect();
        let on = |a| leases.iter().filter(|l| l.addr() == a).count();
        assert_eq!((on(addr(1)), on(addr(2))), (2, 2));
        // Both pods are full: the fifth waits.
        let fifth = held(t.admit(|| 0).unwrap());
        drop(leases);
        assert!(fifth.wait().await.is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_that_gives_up_frees_its_place_and_its_slot() {
        let (t, _wake) = target(1, 10, Duration::from_secs(30));
        let gone = held(t.admit(|| 0).unwrap());
        let next = held(t.admit(|| 0).unwrap());
        t.set_ready(vec![addr(1)]);
        // The slot went to `gone`, which is dropped without taking it: it passes to `next`.
        drop(gone);
        let lease = next.wait().await.unwrap();
        assert_eq!(lease.addr(), addr(1));
        assert_eq!(t.held(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_mass_hold_timeout_costs_a_constant_amount_of_work_per_request() {
        // queueDepth's bound is 1,000,000: a target whose pods never come holds that many
        // requests, and they all time out together. Each leaving request must cost O(1)
        // queue work, not a scan of the whole queue under the target's lock (quadratic).
        const HELD: usize = 20_000;
        let (t, _wake) = target(1, HELD, Duration::from_secs(30));
        let mut held_requests: Vec<Held> =
            (0..HELD).map(|_| held(t.admit(|| 0).unwrap())).collect();
        // Most time out, in arrival order and out of it, interleaved with new arrivals that
        // take the freed places.
        let late = held_requests.split_off(HELD / 2);
        drop(late);
        for (i, h) in held_requests.drain(..).enumerate() {
            drop(h);
            if i % 4 == 0 {
                std::mem::forget(held(t.admit(|| 0).unwrap()));
            }
        }
        assert_eq!(t.held(), HELD / 8);
        let steps = t.lock().queue.steps;
        assert!(
            steps <= 8 * HELD as u64,
            "{steps} queue steps for {HELD} leaving requests"
        );
        // The survivors are still served in arrival order.
        t.set_ready(vec![addr(1)]);
        assert_eq!(t.held(), HELD / 8 - 1);
    }

    #[tokio::test(start_paused = true)]
    async fn samples_report_activity_then_go_quiet() {
        let (t, _wake) = target(0, 10, Duration::from_secs(30));
        t.set_ready(vec![addr(1)]);
        let lease = ready(t.admit(|| 0).unwrap());
        tokio::time::advance(Duration::from_secs(1)).await;
        let s = t.sample(Instant::now(), Duration::from_secs(5)).unwrap();
        assert_eq!((s.in_flight, s.held, s.ready, s.requests), (1, 0, 1, 1.0));
        assert!((s.concurrency - 1.0).abs() < 1e-9);
        drop(lease);
        tokio::time::advance(Duration::from_secs(5)).await;
        assert!(t.sample(Instant::now(), Duration::from_secs(5)).is_some());
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(t.sample(Instant::now(), Duration::from_secs(5)).is_none());
    }
}
