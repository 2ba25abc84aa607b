//! The operator process: admin endpoints on every replica, leader election, and the
//! leader-only components (controllers, scale loops, the metric service) started under
//! leadership and stopped when it is lost or at shutdown.
//!
//! Components are values implementing [`LeaderTask`], so a new one is plugged in by adding
//! it to the list `main` passes to [`run`].
//!
//! Shutdown order (SIGTERM/SIGINT cancel the `shutdown` token): leader-only work is cancelled
//! and awaited, then the Lease is released (a standby takes over at its next retry), then the
//! admin listeners stop, so probes and `/metrics` answer until the very end.

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

use crate::process::config::Settings;
use crate::process::leader::{self, LeaderElector, LeaderError, Role};
use crate::process::telemetry::Metrics;
use crate::serve::admin::{self, AdminError, Endpoints, Readiness};

/// The error a leader-only component ends with.
pub type TaskError = Box<dyn std::error::Error + Send + Sync>;

/// A component that runs only on the leader.
///
/// [`run`](Self::run) is called each time this replica becomes leader; the returned future must
/// stop promptly once `cancel` is cancelled (leadership lost, or shutdown) and may be started
/// again later. Returning `Err` stops the whole operator with that error, so Kubernetes restarts
/// it (controller-runtime does the same when a runnable fails).
pub trait LeaderTask: Send + Sync {
    /// A short name for logs and errors (`scaledobject-controller`).
    fn name(&self) -> &str;

    /// Starts the work; it runs until `cancel` fires or it fails.
    fn run(&self, cancel: CancellationToken) -> BoxFuture<'static, Result<(), TaskError>>;
}

/// A [`LeaderTask`] from a name and a function.
pub struct FnTask<F> {
    name: String,
    start: F,
}

impl<F> std::fmt::Debug for FnTask<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnTask")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl<F, Fut> FnTask<F>
where
    F: Fn(CancellationToken) -> Fut + Send + Sync,
    Fut: Future<Output = Result<(), TaskError>> + Send + 'static,
{
    /// `start` is called with the leadership's cancellation token each time leadership begins.
    pub fn new(name: impl Into<String>, start: F) -> Self {
        Self {
            name: name.into(),
            start,
        }
    }
}

impl<F, Fut> LeaderTask for FnTask<F>
where
    F: Fn(CancellationToken) -> Fut + Send + Sync,
    Fut: Future<Output = Result<(), TaskError>> + Send + 'static,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn run(&self, cancel: CancellationToken) -> BoxFuture<'static, Result<(), TaskError>> {
        Box::pin((self.start)(cancel))
    }
}

/// Why the operator stopped other than by a shutdown signal.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Admin(#[from] AdminError),
    #[error(transparent)]
    LeaderElection(#[from] LeaderError),
    #[error("leader-only component {name} failed: {source}")]
    Task {
        name: String,
        #[source]
        source: TaskError,
    },
    #[error("leader-only component {name} panicked")]
    TaskPanicked { name: String },
}

/// What [`run`] needs besides the component list.
pub struct Runtime {
    /// The leader election's client: its own, with its own budget
    /// ([`crate::process::leader::LeaseConfig::client_budget`]), never the controllers', so no other
    /// work can starve the Lease renewals.
    pub lease_client: kube::Client,
    pub metrics: Metrics,
    /// `/readyz`'s gates; components may register their own (for example "caches synced").
    pub readiness: Readiness,
    /// `--shards=auto`: this replica's shard membership, run instead of leader election (every
    /// replica runs the components; each writes only for the objects it owns).
    pub membership: Option<crate::process::shards::Membership>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("metrics", &self.metrics)
            .field("readiness", &self.readiness)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// `lease_client` is the leader election's own client ([`Runtime::lease_client`]).
    pub fn new(lease_client: kube::Client, metrics: Metrics) -> Self {
        Self {
            lease_client,
            metrics,
            readiness: Readiness::new(),
            membership: None,
        }
    }
}

/// Runs the operator until `shutdown` is cancelled or a component fails.
///
/// # Errors
/// An admin address that cannot be bound, inconsistent leader election settings, or the first
/// failure of a leader-only component.
pub async fn run(
    settings: &Settings,
    runtime: Runtime,
    tasks: Vec<Arc<dyn LeaderTask>>,
    shutdown: CancellationToken,
) -> Result<(), RunError> {
    let Runtime {
        lease_client,
        metrics,
        readiness,
        membership,
    } = runtime;
    let election_gate = readiness.gate("leader-election");

    // Bind first: a port in use fails the start before anything else happens.
    let probes = match settings.probe_addr {
        Some(addr) => Some(admin::bind(addr, "--health-probe-bind-address").await?),
        None => None,
    };
    let scrape = match settings.metrics_addr {
        Some(addr) => Some(admin::bind(addr, "--metrics-bind-address").await?),
        None => None,
    };
    let elector = match &settings.leader_election {
        Some(lease) => Some(LeaderElector::new(lease_client, lease.clone())?),
        None => None,
    };

    let admin_stop = CancellationToken::new();
    let mut admin_servers = JoinSet::new();
    if let Some(listener) = probes {
        admin_servers.spawn(admin::serve(
            listener,
            Endpoints::Probes(readiness.clone()),
            admin_stop.clone(),
        ));
    }
    if let Some(listener) = scrape {
        admin_servers.spawn(admin::serve(
            listener,
            Endpoints::Metrics(metrics),
            admin_stop.clone(),
        ));
    }

    let election_stop = CancellationToken::new();
    let (role, election) = match (elector, membership) {
        (_, Some(membership)) => {
            info!("shards are on (--shards=auto): this replica works on the objects it owns");
            let stop = election_stop.clone();
            (
                leader::always_leader(),
                Some(tokio::spawn(membership.run(stop))),
            )
        }
        (Some(elector), None) => {
            let role = elector.subscribe();
            let stop = election_stop.clone();
            (role, Some(tokio::spawn(elector.run(stop))))
        }
        (None, None) => {
            info!("leader election is off (--leader-elect=false): this replica leads");
            (leader::always_leader(), None)
        }
    };
    tokio::spawn(open_when_known(role.clone(), election_gate));

    let result =
        leader::run_while_leader(role, shutdown.clone(), |cancel| run_tasks(&tasks, cancel)).await;
    if let Err(error) = &result {
        error!(error = %error, "stopping the operator");
    }

    // Order matters: the work is stopped (above), then the Lease is released, then the
    // endpoints go away.
    election_stop.cancel();
    if let Some(election) = election {
        let _ = election.await;
    }
    admin_stop.cancel();
    while admin_servers.join_next().await.is_some() {}
    info!("operator stopped");
    result
}

/// Opens the readiness gate once this replica knows whether it leads.
async fn open_when_known(mut role: watch::Receiver<Role>, gate: admin::ReadyGate) {
    if role.wait_for(|r| *r != Role::Unknown).await.is_ok() || *role.borrow() != Role::Unknown {
        gate.open();
    }
}

/// Starts every component under one leadership; the first failure cancels the others.
fn run_tasks(
    tasks: &[Arc<dyn LeaderTask>],
    cancel: CancellationToken,
) -> impl Future<Output = Result<(), RunError>> + use<> {
    let started: Vec<(String, BoxFuture<'static, Result<(), TaskError>>)> = tasks
        .iter()
        .map(|task| (task.name().to_string(), task.run(cancel.clone())))
        .collect();
    async move {
        if started.is_empty() {
            info!("leading; no leader-only components are registered");
            return Ok(());
        }
        info!(
            components = started.len(),
            "leading: starting leader-only components"
        );
        let mut running = JoinSet::new();
        let mut names = std::collections::HashMap::new();
        for (name, work) in started {
            let id = running.spawn(work).id();
            names.insert(id, name);
        }
        let mut outcome = Ok(());
        while let Some(joined) = running.join_next_with_id().await {
            let failure = match joined {
                Ok((_, Ok(()))) => None,
                Ok((id, Err(source))) => Some(RunError::Task {
                    name: names.get(&id).cloned().unwrap_or_default(),
                    source,
                }),
                Err(join_error) => Some(RunError::TaskPanicked {
                    name: names.get(&join_error.id()).cloned().unwrap_or_default(),
                }),
            };
            if let Some(failure) = failure
                && outcome.is_ok()
            {
                cancel.cancel();
                outcome = Err(failure);
            }
        }
        info!("leader-only components stopped");
        outcome
    }
}
