//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's semantics, so only
//! one operator replica runs the controllers and scale loops.
//!
//! # How it works
//! - A candidate reads the Lease. Absent: it creates it naming itself (a `409 AlreadyExists`
//!   means another candidate won). Held by someone else: it waits until the holder has not
//!   renewed for the lease's `leaseDurationSeconds`, then writes itself in. Every write carries
//!   the `resourceVersion` it read, so of two candidates writing at once one gets
//!   `409 Conflict` and stays standby.
//! - Expiry is measured on the candidate's own monotonic clock from the moment it last saw the
//!   Lease change (as client-go does), never by comparing `renewTime` with the local wall clock,
//!   so clock skew between nodes cannot cause two leaders.
//! - The leader renews every `retry_period`. When it cannot renew for `renew_deadline`
//!   (shorter than the lease duration), or finds the Lease taken over, it steps down at once:
//!   its leader-only work is cancelled before any standby may take the Lease.
//! - On shutdown the leader releases the Lease (empty holder), so a standby takes over at its
//!   next retry instead of after the lease duration.
//!
//! Leadership is published as a [`Role`] on a `tokio::sync::watch` channel;
//! [`run_while_leader`] starts work when leadership is gained and cancels it when it is lost.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// client-go's default lease duration (15 s).
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
/// client-go's default renew deadline (10 s).
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// client-go's default retry period (2 s).
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);

/// How long a release may take on shutdown before the process gives up on it.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

/// This process's part in the election.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The Lease has not been read yet (or could not be): leadership is not known.
    Unknown,
    /// This process holds the Lease and runs leader-only work.
    Leader,
    /// Another process holds the Lease, or none does and this one has not won it yet.
    Standby,
}

impl Role {
    pub fn is_leader(self) -> bool {
        self == Self::Leader
    }
}

/// Where the Lease is and who this candidate is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseConfig {
    /// The Lease's name (`--leader-election-id`, KEDA's `operator.keda.sh`).
    pub name: String,
    /// The Lease's namespace (`POD_NAMESPACE`).
    pub namespace: String,
    /// This candidate's holder identity (the pod name); must differ between replicas.
    pub identity: String,
    /// How long a standby waits after the last renewal it saw before taking over.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it steps down.
    pub renew_deadline: Duration,
    /// How often candidates try to acquire and the leader renews.
    pub retry_period: Duration,
}

impl LeaseConfig {
    /// A config with client-go's default durations.
    pub fn new(
        name: impl Into<String>,
        namespace: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            namespace: namespace.into(),
            identity: identity.into(),
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
        }
    }

    /// Checks what client-go checks: every duration positive, lease duration > renew deadline
    /// > retry period, and a non-empty name, namespace and identity.
    ///
    /// # Errors
    /// [`LeaderError::Config`] naming the setting to fix.
    pub fn validate(&self) -> Result<(), LeaderError> {
        let fail = |message: &str| Err(LeaderError::Config(message.to_string()));
        if self.name.is_empty() {
            return fail("the leader election id (--leader-election-id) is empty");
        }
        if self.namespace.is_empty() {
            return fail("the leader election namespace (POD_NAMESPACE) is empty");
        }
        if self.identity.is_empty() {
            return fail("the leader election identity (POD_NAME) is empty");
        }
        if self.retry_period.is_zero() {
            return fail("KEDA_OPERATOR_LEADER_ELECTION_RETRY_PERIOD must be greater than zero");
        }
        if self.renew_deadline <= self.retry_period {
            return fail(
                "KEDA_OPERATOR_LEADER_ELECTION_RENEW_DEADLINE must be greater than KEDA_OPERATOR_LEADER_ELECTION_RETRY_PERIOD",
            );
        }
        if self.lease_duration <= self.renew_deadline {
            return fail(
                "KEDA_OPERATOR_LEADER_ELECTION_LEASE_DURATION must be greater than KEDA_OPERATOR_LEADER_ELECTION_RENEW_DEADLINE",
            );
        }
        Ok(())
    }

    /// The QPS and burst of the Lease's own client. A round of the election is at most two
    /// requests (read, then write) per retry period; the budget allows two rounds per period
    /// (at least 1 request per second), so renewals never wait for it, while the client can
    /// never send more than that. Being a client of its own, nothing else (a reconcile storm,
    /// a flood of explain requests) can spend it: Lease renewals cannot be starved.
    pub fn client_budget(&self) -> (f32, u32) {
        let period = self.retry_period.as_secs_f32();
        let qps = if period > 0.0 { 4.0 / period } else { 1000.0 };
        (qps.clamp(1.0, 1000.0), 4)
    }

    fn lease_seconds(&self) -> i32 {
        let secs = self.lease_duration.as_secs_f64().ceil();
        i32::try_from(keda_api::num::f64_to_i64_saturating(secs))
            .unwrap_or(i32::MAX)
            .max(1)
    }
}

/// Leader election errors.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// The election settings are inconsistent.
    #[error("invalid leader election settings: {0}")]
    Config(String),
    /// Reading the Lease failed.
    #[error("cannot read Lease {namespace}/{name}: {source}")]
    Get {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    /// Writing the Lease failed for another reason than losing a race.
    #[error(
        "cannot write Lease {namespace}/{name} (check the operator's RBAC for coordination.k8s.io leases): {source}"
    )]
    Write {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    /// A Lease request did not finish in time.
    #[error("Lease {namespace}/{name}: the API server did not answer within {timeout:?}")]
    Timeout {
        namespace: String,
        name: String,
        timeout: Duration,
    },
}

/// The last version of the Lease this candidate saw, and when it first saw it.
#[derive(Debug, Clone)]
struct Observed {
    resource_version: Option<String>,
    at: Instant,
}

/// One candidate in the election. Build it, [`subscribe`](Self::subscribe) to its role, then
/// [`run`](Self::run) it.
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaseConfig,
    role: watch::Sender<Role>,
    observed: Option<Observed>,
}

impl std::fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector")
            .field("config", &self.config)
            .field("role", &*self.role.borrow())
            .finish_non_exhaustive()
    }
}

impl LeaderElector {
    /// A candidate for the Lease `config.namespace/config.name`, through `client`: give it a
    /// client of its own, with [`LeaseConfig::client_budget`], so no other work can delay the
    /// renewals (the operator binary does).
    ///
    /// # Errors
    /// [`LeaderError::Config`] when the settings are inconsistent.
    pub fn new(client: kube::Client, config: LeaseConfig) -> Result<Self, LeaderError> {
        config.validate()?;
        let (role, _) = watch::channel(Role::Unknown);
        Ok(Self {
            api: Api::namespaced(client, &config.namespace),
            config,
            role,
            observed: None,
        })
    }

    /// This candidate's role, updated as it changes.
    pub fn subscribe(&self) -> watch::Receiver<Role> {
        self.role.subscribe()
    }

    /// Takes part in the election until `stop` is cancelled, then releases the Lease if it
    /// holds it. Cancel `stop` only after leader-only work has stopped, so a standby cannot
    /// start while this process still works.
    pub async fn run(mut self, stop: CancellationToken) {
        let lease = format!("{}/{}", self.config.namespace, self.config.name);
        loop {
            // Standby: try to acquire every retry period.
            let acquired = tokio::select! {
                () = stop.cancelled() => break,
                result = self.try_acquire_or_renew() => result,
            };
            match acquired {
                Ok(true) => {}
                Ok(false) => {
                    if *self.role.borrow() != Role::Standby {
                        info!(%lease, identity = %self.config.identity, "leader election: another replica holds the lease; standing by");
                    }
                    self.set_role(Role::Standby);
                    tokio::select! {
                        () = stop.cancelled() => break,
                        () = tokio::time::sleep(self.config.retry_period) => continue,
                    }
                }
                Err(error) => {
                    warn!(%lease, error = %error, "leader election: cannot acquire the lease; retrying");
                    tokio::select! {
                        () = stop.cancelled() => break,
                        () = tokio::time::sleep(self.config.retry_period) => continue,
                    }
                }
            }

            info!(%lease, identity = %self.config.identity, "leader election: lease acquired, leading");
            self.set_role(Role::Leader);
            let stopped = self.lead(&stop, &lease).await;
            self.set_role(Role::Standby);
            if stopped {
                self.release(&lease).await;
                return;
            }
            warn!(%lease, "leader election: leadership lost, leader-only work stopped");
        }
        // Stopped while not leading: nothing to release.
        if self.role.borrow().is_leader() {
            self.set_role(Role::Standby);
        }
    }

    /// Renews while leading. Returns `true` when stopped, `false` when leadership was lost.
    async fn lead(&mut self, stop: &CancellationToken, lease: &str) -> bool {
        let mut last_renewal = Instant::now();
        loop {
            tokio::select! {
                () = stop.cancelled() => return true,
                () = tokio::time::sleep(self.config.retry_period) => {}
            }
            let deadline = last_renewal + self.config.renew_deadline;
            let attempt = tokio::select! {
                () = stop.cancelled() => return true,
                attempt = tokio::time::timeout_at(deadline, self.try_acquire_or_renew()) => attempt,
            };
            match attempt {
                Ok(Ok(true)) => {
                    debug!(%lease, "leader election: lease renewed");
                    last_renewal = Instant::now();
                }
                Ok(Ok(false)) => {
                    warn!(%lease, "leader election: another candidate holds the lease now");
                    return false;
                }
                Ok(Err(error)) => {
                    warn!(%lease, error = %error, "leader election: cannot renew the lease");
                    if Instant::now() >= deadline {
                        return false;
                    }
                }
                Err(_) => {
                    warn!(%lease, deadline = ?self.config.renew_deadline, "leader election: no renewal within the renew deadline");
                    return false;
                }
            }
        }
    }

    fn set_role(&self, role: Role) {
        self.role.send_if_modified(|current| {
            let changed = *current != role;
            *current = role;
            changed
        });
    }

    fn get_error(&self, source: kube::Error) -> LeaderError {
        LeaderError::Get {
            namespace: self.config.namespace.clone(),
            name: self.config.name.clone(),
            source,
        }
    }

    fn write_error(&self, source: kube::Error) -> LeaderError {
        LeaderError::Write {
            namespace: self.config.namespace.clone(),
            name: self.config.name.clone(),
            source,
        }
    }

    /// One round of client-go's `tryAcquireOrRenew`: `Ok(true)` when this candidate holds the
    /// Lease afterwards, `Ok(false)` when someone else does.
    async fn try_acquire_or_renew(&mut self) -> Result<bool, LeaderError> {
        let now = Instant::now();
        let wall = MicroTime(jiff::Timestamp::now());
        let Some(mut lease) = self
            .api
            .get_opt(&self.config.name)
            .await
            .map_err(|e| self.get_error(e))?
        else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.config.identity.clone()),
                    lease_duration_seconds: Some(self.config.lease_seconds()),
                    acquire_time: Some(wall.clone()),
                    renew_time: Some(wall),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observe(&created, now);
                    Ok(true)
                }
                Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
                Err(error) => Err(self.write_error(error)),
            };
        };

        let changed = self
            .observed
            .as_ref()
            .is_none_or(|observed| observed.resource_version != lease.metadata.resource_version);
        if changed {
            self.observe(&lease, now);
        }
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec
            .holder_identity
            .as_deref()
            .filter(|holder| !holder.is_empty());
        let held_by_me = holder == Some(self.config.identity.as_str());
        let duration = spec
            .lease_duration_seconds
            .filter(|secs| *secs > 0)
            .map(|secs| Duration::from_secs(secs.unsigned_abs().into()))
            .unwrap_or(self.config.lease_duration);
        let seen_at = self.observed.as_ref().map_or(now, |observed| observed.at);
        if holder.is_some() && !held_by_me && seen_at + duration > now {
            return Ok(false);
        }

        let transitions = spec.lease_transitions.unwrap_or(0);
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(self.config.lease_seconds()),
            acquire_time: if held_by_me {
                spec.acquire_time.or_else(|| Some(wall.clone()))
            } else {
                Some(wall.clone())
            },
            renew_time: Some(wall),
            lease_transitions: Some(if held_by_me {
                transitions
            } else {
                transitions.saturating_add(1)
            }),
            ..spec
        });
        // `replace` sends the resourceVersion read above: a concurrent writer makes it 409.
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(updated) => {
                self.observe(&updated, now);
                Ok(true)
            }
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(error) => Err(self.write_error(error)),
        }
    }

    fn observe(&mut self, lease: &Lease, at: Instant) {
        self.observed = Some(Observed {
            resource_version: lease.metadata.resource_version.clone(),
            at,
        });
    }

    /// Gives the Lease up so a standby takes over at once: empty holder, one-second duration.
    async fn release(&mut self, lease_name: &str) {
        let released = tokio::time::timeout(RELEASE_TIMEOUT, self.try_release()).await;
        match released {
            Ok(Ok(true)) => info!(lease = %lease_name, "leader election: lease released"),
            Ok(Ok(false)) => {
                debug!(lease = %lease_name, "leader election: lease held by another candidate; nothing to release")
            }
            Ok(Err(error)) => {
                warn!(lease = %lease_name, error = %error, "leader election: cannot release the lease; a standby takes over when it expires")
            }
            Err(_) => {
                warn!(lease = %lease_name, timeout = ?RELEASE_TIMEOUT, "leader election: releasing the lease timed out; a standby takes over when it expires")
            }
        }
    }

    async fn try_release(&mut self) -> Result<bool, LeaderError> {
        let Some(mut lease) = self
            .api
            .get_opt(&self.config.name)
            .await
            .map_err(|e| self.get_error(e))?
        else {
            return Ok(false);
        };
        let spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(false);
        }
        let wall = MicroTime(jiff::Timestamp::now());
        lease.spec = Some(LeaseSpec {
            holder_identity: None,
            lease_duration_seconds: Some(1),
            acquire_time: Some(wall.clone()),
            renew_time: Some(wall),
            ..spec
        });
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(error) => Err(self.write_error(error)),
        }
    }
}

/// A role channel for a process that does not take part in an election: always leader.
pub fn always_leader() -> watch::Receiver<Role> {
    let (sender, receiver) = watch::channel(Role::Leader);
    // The receiver keeps the last value after the sender is gone; `changed` then reports the
    // closed channel, which `run_while_leader` reads as "leadership ends only at shutdown".
    drop(sender);
    receiver
}

/// Runs leader-only work: calls `start` with a fresh child token of `shutdown` each time this
/// process becomes leader, cancels that token when leadership is lost or at shutdown, and waits
/// for the work to finish before waiting for leadership again.
///
/// Work that ends on its own with `Ok` while leading is not restarted until leadership is lost
/// and gained again. Returns `Ok` at shutdown, or the first error of the work (so the process
/// can exit and be restarted, as controller-runtime does when a runnable fails).
///
/// # Caveats
/// The work must stop promptly once its token is cancelled: until it does, this function does
/// not return and leadership cannot be regained. The leader steps down within the renew
/// deadline, so work that honours cancellation stops before a standby can take the Lease.
pub async fn run_while_leader<F, Fut, E>(
    mut role: watch::Receiver<Role>,
    shutdown: CancellationToken,
    mut start: F,
) -> Result<(), E>
where
    F: FnMut(CancellationToken) -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    // A closed channel with a leader value means "leader until shutdown" (`always_leader`).
    let closed_leader =
        |role: &watch::Receiver<Role>| role.has_changed().is_err() && role.borrow().is_leader();
    loop {
        let leading = tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            result = role.wait_for(|r| r.is_leader()) => result.is_ok(),
        };
        let leading = leading || closed_leader(&role);
        if !leading {
            // The election ended without leadership: nothing will ever start.
            shutdown.cancelled().await;
            return Ok(());
        }
        let cancel = shutdown.child_token();
        let work = start(cancel.clone());
        tokio::pin!(work);
        let lost = async {
            if closed_leader(&role) {
                std::future::pending::<()>().await;
            }
            // Err: the elector is gone, so leadership cannot be confirmed any more.
            let _ = role.wait_for(|r| !r.is_leader()).await;
        };
        tokio::pin!(lost);
        tokio::select! {
            result = &mut work => {
                result?;
                // Done while leading: wait for the end of this leadership before looping.
                tokio::select! {
                    () = shutdown.cancelled() => return Ok(()),
                    () = &mut lost => {}
                }
            }
            () = &mut lost => {
                cancel.cancel();
                let _ = work.await;
            }
            () = shutdown.cancelled() => {
                cancel.cancel();
                return work.await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lease_client_has_room_for_two_rounds_per_retry_period() {
        let budget = |retry_ms: u64| {
            LeaseConfig {
                retry_period: Duration::from_millis(retry_ms),
                ..LeaseConfig::new("l", "ns", "me")
            }
            .client_budget()
        };
        // client-go's default 2 s: 2 per second, 4 at once (one round is a GET and a PUT).
        assert_eq!(budget(2000), (2.0, 4));
        assert_eq!(budget(200), (20.0, 4));
        // At least one request per second; at most 1000.
        assert_eq!(budget(60_000), (1.0, 4));
        assert_eq!(budget(1), (1000.0, 4));
    }
}
