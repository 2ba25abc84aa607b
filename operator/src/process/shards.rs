//! Shard membership (`--shards=auto`): this replica's own `coordination.k8s.io/v1` Lease,
//! renewed as leader election renews its Lease, and the view of the live members that
//! [`crate::shared::ownership::Shards`] answers from.
//!
//! # A round, every retry period
//! 1. Renew this replica's Lease (`keda-rs-operator-shard-<identity>`, labelled
//!    [`LEASE_LABEL`], holder = identity, `leaseDurationSeconds`, the metric service address in
//!    [`keda_api::shards::ADDRESS_ANNOTATION`]); create it when absent. The write carries the
//!    resourceVersion last written, so a conflicting writer makes it fail (and the next round
//!    reads again).
//! 2. List the shard Leases; the live ones ([`LiveLeases`]) are the members of the ring.
//!
//! The whole round is bounded by the renew deadline. The view is *fresh* until the start of the
//! last successful round plus the renew deadline: from then on this replica writes nothing,
//! which is before any other replica can see its Lease expire (a lease duration after it last
//! saw it change, and it changed no earlier than that round's start).
//!
//! A replica whose view was not fresh when a round succeeds (at start, or after a fence) holds
//! back for the renew deadline plus one retry period before it takes any object: every replica
//! that owned one of them meanwhile has either run a round that lists the new Lease (and let
//! the objects go) or fenced itself.
//!
//! On shutdown (after the work stopped) the Lease is deleted, so the others take its objects at
//! their next round instead of after the lease duration. Leases nobody renewed for
//! [`STALE_AFTER_LEASES`] lease durations (replicas that died, pods that were replaced) are
//! deleted by any member, with their resourceVersion as a precondition.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use keda_api::shards::{ADDRESS_ANNOTATION, LEASE_LABEL, LeaseRecord, LiveLeases, Ring};
use kube::api::{Api, DeleteParams, ListParams, PostParams, Preconditions};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::process::leader::{LeaderError, LeaseConfig};
use crate::process::telemetry::Metrics;
use crate::shared::ownership::{ShardView, Shards};

/// A Lease unchanged for this many lease durations is garbage.
pub const STALE_AFTER_LEASES: u32 = 20;

/// How long deleting the Lease may take at shutdown.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

/// This replica's shard Lease and the address it advertises.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardConfig {
    /// Name ([`keda_api::shards::lease_name`] of the identity), namespace (`POD_NAMESPACE`),
    /// identity (`POD_NAME`) and the leader election durations.
    pub lease: LeaseConfig,
    /// `host:port` of this replica's metric service (`--shard-address`); `None`: the
    /// metrics-apiserver cannot route to it (it uses its `--metrics-service-address`).
    pub address: Option<String>,
}

impl ShardConfig {
    /// The hold after (re)joining: the renew deadline and one retry period.
    pub fn hold(&self) -> Duration {
        self.lease.renew_deadline + self.lease.retry_period
    }
}

/// The membership task. Build it, hand [`shards`](Self::shards) to the controllers, then
/// [`run`](Self::run) it.
pub struct Membership {
    api: Api<Lease>,
    config: ShardConfig,
    view: watch::Sender<ShardView>,
    live: LiveLeases,
    /// The Lease as last written by this replica.
    own: Option<Lease>,
    /// Whether the subscribers were last told this replica may write.
    told_writing: bool,
    metrics: Option<Metrics>,
}

impl std::fmt::Debug for Membership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Membership")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Membership {
    /// The membership of `config.lease.identity`, through `client` (give it a client of its own,
    /// with [`LeaseConfig::client_budget`], as leader election has).
    ///
    /// # Errors
    /// [`LeaderError::Config`] when the durations are inconsistent.
    pub fn new(client: kube::Client, config: ShardConfig) -> Result<Membership, LeaderError> {
        config.lease.validate()?;
        let (view, _) = watch::channel(ShardView {
            hold: config.hold(),
            ..ShardView::unknown(config.lease.identity.clone())
        });
        Ok(Membership {
            api: Api::namespaced(client, &config.lease.namespace),
            config,
            view,
            live: LiveLeases::default(),
            own: None,
            told_writing: false,
            metrics: None,
        })
    }

    /// Records the shard series (`keda_rs_shard_*`) into `metrics`.
    #[must_use]
    pub fn with_metrics(mut self, metrics: Metrics) -> Membership {
        self.metrics = Some(metrics);
        self
    }

    /// The ownership handle for the controllers, loops and services.
    pub fn shards(&self) -> Shards {
        Shards::Leased(self.view.subscribe())
    }

    /// Runs rounds until `stop`, then deletes this replica's Lease. Cancel `stop` only after
    /// the work that writes has stopped.
    pub async fn run(mut self, stop: CancellationToken) {
        let lease = format!("{}/{}", self.config.lease.namespace, self.config.lease.name);
        let stale_after = self.config.lease.lease_duration * STALE_AFTER_LEASES;
        let mut fresh_until: Option<Instant> = None;
        let mut hold_until = Instant::now();
        loop {
            let started = Instant::now();
            let round = tokio::select! {
                () = stop.cancelled() => break,
                round = tokio::time::timeout(self.config.lease.renew_deadline, self.round()) => round,
            };
            match round {
                Ok(Ok(records)) => {
                    let was_fresh = fresh_until.is_some_and(|until| started < until);
                    if !was_fresh {
                        hold_until = Instant::now() + self.config.hold();
                        info!(%lease, identity = %self.config.lease.identity, hold = ?self.config.hold(), "shards: joined; taking objects after the hold");
                    }
                    fresh_until = Some(started + self.config.lease.renew_deadline);
                    let (members, stale) =
                        self.live
                            .observe(&records, Instant::now().into_std(), stale_after);
                    for garbage in stale {
                        self.delete_stale(&garbage).await;
                    }
                    self.publish(members, fresh_until, hold_until);
                }
                Ok(Err(error)) => {
                    warn!(%lease, %error, "shards: cannot renew the shard lease or list the members");
                    self.refresh(fresh_until, hold_until);
                }
                Err(_) => {
                    warn!(%lease, deadline = ?self.config.lease.renew_deadline, "shards: no round within the renew deadline");
                    self.refresh(fresh_until, hold_until);
                }
            }
            if fresh_until.is_some_and(|until| Instant::now() >= until)
                && self.view.borrow().fresh_until.is_some()
            {
                warn!(%lease, "shards: not renewed within the renew deadline; writing nothing until the lease is renewed");
            }
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(self.config.lease.retry_period) => {}
            }
        }
        self.view.send_modify(|view| view.fresh_until = None);
        self.release(&lease).await;
    }

    /// Publishes a new view; subscribers are woken only when what this replica may do changed
    /// since they were last told (the members, or whether it may write: a fence, the end of
    /// the hold).
    fn publish(
        &mut self,
        members: Vec<keda_api::shards::Member>,
        fresh_until: Option<Instant>,
        hold_until: Instant,
    ) {
        let now = Instant::now();
        let count = members.len();
        let told_writing = self.told_writing;
        let mut writing = false;
        self.view.send_if_modified(|view| {
            let moved = view.members != members;
            if moved {
                view.ring = Arc::new(Ring::new(members.iter().map(|m| m.identity.clone())));
                view.members = members;
            }
            view.fresh_until = fresh_until;
            view.hold_until = hold_until;
            writing = view.may_write(now);
            let changed = moved || writing != told_writing;
            if changed {
                info!(members = ?view.members.iter().map(|m| m.identity.as_str()).collect::<Vec<_>>(), writing, "shards: membership changed");
            }
            changed
        });
        self.told_writing = writing;
        if let Some(metrics) = &self.metrics {
            metrics.set_shard_state(&self.config.lease.identity, count, writing);
        }
    }

    /// Re-evaluates the current view after a failed round (a fence wakes the subscribers).
    fn refresh(&mut self, fresh_until: Option<Instant>, hold_until: Instant) {
        let members = self.view.borrow().members.clone();
        self.publish(members, fresh_until, hold_until);
    }

    /// One round: renew (or create) this replica's Lease, then list the shard Leases.
    async fn round(&mut self) -> Result<Vec<LeaseRecord>, LeaderError> {
        self.renew().await?;
        let listed = self
            .api
            .list(&ListParams::default().labels(&format!("{LEASE_LABEL}=true")))
            .await
            .map_err(|source| LeaderError::Get {
                namespace: self.config.lease.namespace.clone(),
                name: format!("(shard leases, label {LEASE_LABEL})"),
                source,
            })?;
        Ok(listed
            .items
            .iter()
            .map(|l| LeaseRecord::from_lease(l, self.config.lease.lease_duration))
            .collect())
    }

    fn desired(&self, base: Option<Lease>) -> Lease {
        let wall = MicroTime(jiff::Timestamp::now());
        let mut lease = base.unwrap_or_else(|| Lease {
            metadata: ObjectMeta {
                name: Some(self.config.lease.name.clone()),
                namespace: Some(self.config.lease.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: None,
        });
        lease
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(LEASE_LABEL.to_string(), "true".to_string());
        let annotations = lease.metadata.annotations.get_or_insert_with(BTreeMap::new);
        match &self.config.address {
            Some(address) => {
                annotations.insert(ADDRESS_ANNOTATION.to_string(), address.clone());
            }
            None => {
                annotations.remove(ADDRESS_ANNOTATION);
            }
        }
        let spec = lease.spec.take().unwrap_or_default();
        let mine = spec.holder_identity.as_deref() == Some(self.config.lease.identity.as_str());
        let seconds =
            i32::try_from(self.config.lease.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX);
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(self.config.lease.identity.clone()),
            lease_duration_seconds: Some(seconds),
            acquire_time: if mine {
                spec.acquire_time.clone()
            } else {
                Some(wall.clone())
            },
            renew_time: Some(wall),
            ..spec
        });
        lease
    }

    async fn renew(&mut self) -> Result<(), LeaderError> {
        let write_error = |source| LeaderError::Write {
            namespace: self.config.lease.namespace.clone(),
            name: self.config.lease.name.clone(),
            source,
        };
        let current = match self.own.take() {
            Some(own) => Some(own),
            None => self
                .api
                .get_opt(&self.config.lease.name)
                .await
                .map_err(|source| LeaderError::Get {
                    namespace: self.config.lease.namespace.clone(),
                    name: self.config.lease.name.clone(),
                    source,
                })?,
        };
        let written = match current {
            None => {
                self.api
                    .create(&PostParams::default(), &self.desired(None))
                    .await
            }
            Some(current) => {
                self.api
                    .replace(
                        &self.config.lease.name,
                        &PostParams::default(),
                        &self.desired(Some(current)),
                    )
                    .await
            }
        };
        // On any failure the next round reads the Lease again.
        let written = written.map_err(write_error)?;
        debug!(lease = %self.config.lease.name, "shards: lease renewed");
        self.own = Some(written);
        Ok(())
    }

    async fn delete_stale(&self, lease: &LeaseRecord) {
        if lease.name == self.config.lease.name {
            return;
        }
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: lease.resource_version.clone(),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        match self.api.delete(&lease.name, &params).await {
            Ok(_) => info!(lease = %lease.name, "shards: deleted a shard lease nobody renewed"),
            Err(error) => debug!(lease = %lease.name, %error, "shards: stale lease not deleted"),
        }
    }

    /// Deletes this replica's Lease (the work has stopped): the others take its objects at
    /// their next round.
    async fn release(&self, lease: &str) {
        let params = DeleteParams {
            preconditions: self.own.as_ref().map(|own| Preconditions {
                resource_version: own.metadata.resource_version.clone(),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        match tokio::time::timeout(
            RELEASE_TIMEOUT,
            self.api.delete(&self.config.lease.name, &params),
        )
        .await
        {
            Ok(Ok(_)) => info!(%lease, "shards: lease released"),
            Ok(Err(error)) => {
                warn!(%lease, %error, "shards: cannot release the lease; the others take over when it expires");
            }
            Err(_) => {
                warn!(%lease, timeout = ?RELEASE_TIMEOUT, "shards: releasing the lease timed out; the others take over when it expires");
            }
        }
    }
}
