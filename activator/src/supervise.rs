//! Defence in depth for the background tasks: a task that fails is started again, and
//! `/healthz` says so when it keeps failing.
//!
//! The watches (and the report stream) run on the main runtime, apart from the proxy threads.
//! Nothing the cluster sends should make them panic, but a bug may; a task that panicked used
//! to end silently, leaving the proxy with the routes and endpoints of that moment, deaf to
//! every later change, while `/healthz` said ok. Under [`supervise`], a task that panics,
//! returns an error, or ends without being asked to is logged, counted in
//! `keda_activator_task_failures_total{task}`, and started again after a backoff: 100 ms,
//! doubling up to 10 s, back to 100 ms after a run of [`SETTLE`] without failing. The routes
//! already known keep serving meanwhile (`/readyz` is not changed: a fresh watch lists
//! everything again and replaces them).
//!
//! [`Health`] decides `/healthz`: a task is *failing* from a failure until it has then run
//! [`SETTLE`] without failing again; `/healthz` answers 503, naming the task and its last
//! failure, once a task has been failing for longer than the grace period
//! ([`UNHEALTHY_AFTER`] in the binary). A single failure that the restart cures never fails
//! the probe; a task that fails again on every start does, and the kubelet's liveness probe
//! then restarts the process.

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt::{Display, Write as _};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::metrics::SharedMetrics;

/// How long a restarted task must run without failing to count as recovered (and to reset
/// the backoff).
pub const SETTLE: Duration = Duration::from_secs(10);
/// The first wait before a restart.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// The longest wait before a restart.
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// How long a task may be failing before `/healthz` fails: with the backoff above, at least
/// six starts have failed by then.
pub const UNHEALTHY_AFTER: Duration = Duration::from_secs(30);
/// The longest failure message kept (in characters).
const MAX_MESSAGE: usize = 300;

/// The health of the supervised tasks, for `/healthz`.
#[derive(Debug)]
pub struct Health {
    grace: Duration,
    tasks: Mutex<BTreeMap<&'static str, TaskHealth>>,
}

#[derive(Clone, Debug, Default)]
struct TaskHealth {
    /// Since when the task has been failing (the first failure after it last settled).
    failing_since: Option<Instant>,
    /// What its last failure was.
    last_failure: String,
}

impl Health {
    /// Health that fails once a task has been failing for longer than `grace`.
    pub fn new(grace: Duration) -> Arc<Self> {
        Arc::new(Self {
            grace,
            tasks: Mutex::new(BTreeMap::new()),
        })
    }

    // Every update is one assignment, so a panic elsewhere cannot leave a half-done state.
    fn tasks(&self) -> MutexGuard<'_, BTreeMap<&'static str, TaskHealth>> {
        self.tasks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn failed(&self, task: &'static str, message: String) {
        let mut tasks = self.tasks();
        let health = tasks.entry(task).or_default();
        health.failing_since.get_or_insert_with(Instant::now);
        health.last_failure = message;
    }

    fn settled(&self, task: &'static str) {
        if let Some(health) = self.tasks().get_mut(task) {
            health.failing_since = None;
        }
    }

    /// Whether `task` is failing now (failed and not yet settled), however briefly.
    pub fn is_failing(&self, task: &str) -> bool {
        self.tasks()
            .get(task)
            .is_some_and(|h| h.failing_since.is_some())
    }

    /// `Ok` while no task has been failing for longer than the grace period; else one line
    /// per such task: its name, for how long, and its last failure.
    ///
    /// # Errors
    /// The description of the unhealthy tasks.
    pub fn check(&self) -> Result<(), String> {
        let now = Instant::now();
        let mut report = String::new();
        for (task, health) in self.tasks().iter() {
            let Some(since) = health.failing_since else {
                continue;
            };
            let failing = now.saturating_duration_since(since);
            if failing > self.grace {
                // Writing to a String cannot fail.
                let _ = writeln!(
                    report,
                    "task {task} failing for {}s, restarting; last failure: {}",
                    failing.as_secs(),
                    health.last_failure
                );
            }
        }
        if report.is_empty() {
            Ok(())
        } else {
            Err(report)
        }
    }
}

/// Runs the task `start` makes until `cancel`, starting it again after each failure.
///
/// `start` is called for each run; its future is spawned on the current runtime (so a panic
/// in it is caught by the runtime and seen here). The task is expected to return `Ok(())`
/// when `cancel` fires and not before: a panic, an `Err`, or an `Ok` before `cancel` is a
/// failure. Failures are logged, counted in `keda_activator_task_failures_total{task}`,
/// reported to `health`, and followed by a restart after the backoff (see the module
/// documentation). Returns once `cancel` has fired and the task has returned.
pub async fn supervise<F, Fut, E>(
    task: &'static str,
    health: Arc<Health>,
    metrics: SharedMetrics,
    cancel: CancellationToken,
    mut start: F,
) where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: Display + Send + 'static,
{
    let failures = metrics.task_failures(task);
    let failing = metrics.task_failing(task);
    let mut backoff = FIRST_BACKOFF;
    loop {
        let started = Instant::now();
        let mut run = tokio::spawn(start());
        let settle = tokio::time::sleep(SETTLE);
        tokio::pin!(settle);
        let mut settled = false;
        let outcome = loop {
            tokio::select! {
                biased;
                outcome = &mut run => break outcome,
                () = &mut settle, if !settled => {
                    settled = true;
                    health.settled(task);
                    failing.set(0);
                }
            }
        };
        if cancel.is_cancelled() {
            return;
        }
        let message = match outcome {
            Ok(Ok(())) => "ended without being asked to".to_string(),
            Ok(Err(error)) => trim(&error.to_string()),
            Err(join) => match join.try_into_panic() {
                Ok(payload) => format!("panicked: {}", panic_message(payload.as_ref())),
                // The runtime is shutting down.
                Err(_) => return,
            },
        };
        tracing::error!(task, error = %message, ?backoff, "background task failed; restarting it");
        failures.inc();
        failing.set(1);
        health.failed(task, message);
        if started.elapsed() >= SETTLE {
            backoff = FIRST_BACKOFF;
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// The text of a panic payload (`&str` or `String`), trimmed.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    let text = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a non-text panic payload");
    trim(text)
}

fn trim(text: &str) -> String {
    match text.char_indices().nth(MAX_MESSAGE) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::metrics::Metrics;

    type Run = std::pin::Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

    /// A task that fails as `fail(run)` says on its first runs, then runs until cancelled;
    /// the number of runs started.
    fn task(
        cancel: CancellationToken,
        fail: impl Fn(usize) -> Option<Result<(), String>> + Send + Sync + 'static,
    ) -> (impl FnMut() -> Run, Arc<AtomicUsize>) {
        let runs = Arc::new(AtomicUsize::new(0));
        let fail = Arc::new(fail);
        let counted = Arc::clone(&runs);
        let start = move || {
            let run = counted.fetch_add(1, Ordering::SeqCst);
            let (fail, cancel) = (Arc::clone(&fail), cancel.clone());
            Box::pin(async move {
                // Each run does some work first, as a watch lists.
                tokio::time::sleep(Duration::from_millis(10)).await;
                if let Some(outcome) = fail(run) {
                    return outcome;
                }
                cancel.cancelled().await;
                Ok(())
            }) as Run
        };
        (start, runs)
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_that_panics_is_restarted_and_health_recovers_once_it_settles() {
        let cancel = CancellationToken::new();
        let health = Health::new(Duration::from_secs(30));
        let metrics = Arc::new(Metrics::new());
        let (start, runs) = task(cancel.clone(), |run| {
            (run == 0).then(|| panic!("a bug in the watch"))
        });
        let supervisor = tokio::spawn(supervise(
            "watch",
            Arc::clone(&health),
            Arc::clone(&metrics),
            cancel.clone(),
            start,
        ));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(health.is_failing("watch"));
        // One failure the restart cures does not fail the probe.
        assert_eq!(health.check(), Ok(()));
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 2, "restarted after 100 ms");
        tokio::time::sleep(SETTLE).await;
        assert!(!health.is_failing("watch"));
        let text = metrics.encode();
        assert!(
            text.contains("keda_activator_task_failures_total{task=\"watch\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("keda_activator_task_failing{task=\"watch\"} 0"),
            "{text}"
        );
        cancel.cancel();
        supervisor.await.unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_that_keeps_failing_backs_off_and_fails_healthz_after_the_grace_period() {
        let cancel = CancellationToken::new();
        let health = Health::new(Duration::from_secs(30));
        let metrics = Arc::new(Metrics::new());
        // Errors on every run, then a panic, then an early end: all failures.
        let (start, runs) = task(cancel.clone(), |run| match run % 3 {
            0 => Some(Err(format!("lost the API server ({run})"))),
            1 => panic!("index out of bounds ({run})"),
            _ => Some(Ok(())),
        });
        let supervisor = tokio::spawn(supervise(
            "watch",
            Arc::clone(&health),
            Arc::clone(&metrics),
            cancel.clone(),
            start,
        ));
        // Starts at 0, then after backoffs of 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 10, 10 s (and
        // 10 ms of work per run).
        tokio::time::sleep(Duration::from_secs(29)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 9);
        assert_eq!(health.check(), Ok(()), "within the grace period");
        tokio::time::sleep(Duration::from_secs(3)).await;
        let report = health.check().unwrap_err();
        assert!(report.starts_with("task watch failing for 31s"), "{report}");
        assert!(
            report.contains("last failure: ended without being asked to"),
            "{report}"
        );
        assert!(
            metrics
                .encode()
                .contains("keda_activator_task_failing{task=\"watch\"} 1")
        );
        cancel.cancel();
        supervisor.await.unwrap();
    }

    #[test]
    fn long_failure_messages_are_trimmed() {
        let long = "é".repeat(1000);
        assert_eq!(trim(&long).chars().count(), MAX_MESSAGE + 3);
        assert_eq!(panic_message(&7_u32), "a non-text panic payload");
    }
}
