//! How many bytes of answers the reads of one namespace may hold at once.
//!
//! Every answer is bounded (8 MiB an HTTP body, [`crate::http_client::MAX_BODY_BYTES`]), but a
//! read holds its answer while it arrives, and whoever writes a ScaledObject chooses the server
//! and, for some triggers, the timeout (up to an hour for `metrics-api`): a server of theirs that
//! sends 8 MiB slowly to each of a thousand triggers would make the operator hold 8 GiB. So the
//! operator runs each poll of an object, and each read the HPA's metric requests make, within
//! its namespace's [`Budget`] ([`Budget::within`]),
//! and the HTTP clients count every chunk of an answer against it as it arrives
//! ([`Reading::add`]). Past the budget the read fails at once ([`Exhausted`]); the reads of other
//! namespaces go on, so one namespace cannot stop another's scaling this way either. A read
//! outside any budget (a scaler's own tests, a tool that is not the operator) is not counted.
//!
//! The operator's limit is `--answer-bytes-per-namespace` (default
//! [`DEFAULT_ANSWER_BYTES_PER_NAMESPACE`], 64 MiB: eight whole answers at the body bound, read at
//! the same moment).

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The bytes of answers one namespace's reads may hold at once, unless the operator is told
/// otherwise (64 MiB).
pub const DEFAULT_ANSWER_BYTES_PER_NAMESPACE: usize = 64 << 20;

tokio::task_local! {
    static CURRENT: Budget;
}

/// The budgets of every namespace, made on first use and gone when no read holds one. Cheap to
/// clone; clones share the budgets.
#[derive(Clone)]
pub struct AnswerBudgets {
    limit: usize,
    namespaces: Arc<Mutex<Namespaces>>,
}

#[derive(Default)]
struct Namespaces {
    budgets: HashMap<String, Weak<Semaphore>>,
    /// When the map reaches this many entries, the entries no read holds are dropped.
    sweep_at: usize,
}

impl Default for AnswerBudgets {
    fn default() -> Self {
        Self::new(DEFAULT_ANSWER_BYTES_PER_NAMESPACE)
    }
}

impl fmt::Debug for AnswerBudgets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AnswerBudgets({} bytes a namespace)", self.limit)
    }
}

impl AnswerBudgets {
    /// Budgets of `limit` bytes a namespace (at least one byte; above [`Semaphore::MAX_PERMITS`]
    /// reads as that).
    pub fn new(limit: usize) -> Self {
        Self {
            limit: limit.clamp(1, Semaphore::MAX_PERMITS),
            namespaces: Arc::default(),
        }
    }

    /// The bytes a namespace may hold.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// `namespace`'s budget: the one its other reads hold now, or a full one.
    pub fn budget(&self, namespace: &str) -> Budget {
        let mut namespaces = self
            .namespaces
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(bytes) = namespaces.budgets.get(namespace).and_then(Weak::upgrade) {
            return Budget {
                bytes,
                limit: self.limit,
            };
        }
        if namespaces.budgets.len() >= namespaces.sweep_at {
            namespaces.budgets.retain(|_, held| held.strong_count() > 0);
            namespaces.sweep_at = (namespaces.budgets.len() * 2).max(64);
        }
        let bytes = Arc::new(Semaphore::new(self.limit));
        namespaces
            .budgets
            .insert(namespace.to_string(), Arc::downgrade(&bytes));
        Budget {
            bytes,
            limit: self.limit,
        }
    }
}

/// One namespace's budget of answer bytes.
#[derive(Clone)]
pub struct Budget {
    bytes: Arc<Semaphore>,
    limit: usize,
}

impl fmt::Debug for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Budget({} of {} bytes free)",
            self.available(),
            self.limit
        )
    }
}

impl Budget {
    /// Runs `read` with every answer it reads counted against this budget (on the task that
    /// runs `read`; a task it spawns is not counted).
    pub async fn within<F: Future>(self, read: F) -> F::Output {
        CURRENT.scope(self, read).await
    }

    /// The bytes not held now.
    pub fn available(&self) -> usize {
        self.bytes.available_permits()
    }
}

/// The reads of a namespace hold as many bytes of answers as they may; this read is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the answers being read for this namespace would hold more than {limit} bytes (the operator's --answer-bytes-per-namespace); this answer is refused"
)]
pub struct Exhausted {
    /// The namespace's limit.
    pub limit: usize,
}

/// The bytes one answer holds so far, counted against the budget of the task reading it and
/// given back when the reading is dropped.
#[derive(Default)]
pub struct Reading {
    held: Option<OwnedSemaphorePermit>,
}

impl Reading {
    /// A reading that holds nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts `bytes` more of the answer.
    ///
    /// # Errors
    /// They do not fit in what is left of the namespace's budget.
    pub fn add(&mut self, bytes: usize) -> Result<(), Exhausted> {
        let Ok(taken) = CURRENT.try_with(|budget| {
            let exhausted = Exhausted {
                limit: budget.limit,
            };
            let count = u32::try_from(bytes).map_err(|_| exhausted)?;
            budget
                .bytes
                .clone()
                .try_acquire_many_owned(count)
                .map_err(|_| exhausted)
        }) else {
            // Not within a budget: not counted.
            return Ok(());
        };
        let permit = taken?;
        match &mut self.held {
            Some(held) => held.merge(permit),
            None => self.held = Some(permit),
        }
        Ok(())
    }

    /// The bytes this reading holds of its budget.
    pub fn held(&self) -> usize {
        self.held
            .as_ref()
            .map_or(0, OwnedSemaphorePermit::num_permits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_namespace_holds_at_most_its_limit_and_gets_it_back() {
        let budgets = AnswerBudgets::new(100);
        let budget = budgets.budget("a");
        budget
            .clone()
            .within(async {
                let mut first = Reading::new();
                first.add(60).expect("within");
                let mut second = Reading::new();
                assert_eq!(second.add(41), Err(Exhausted { limit: 100 }));
                second.add(40).expect("the rest");
                assert_eq!(second.add(1), Err(Exhausted { limit: 100 }));
                assert_eq!((first.held(), second.held()), (60, 40));
                // Another namespace has its own.
                budgets
                    .budget("b")
                    .within(async {
                        let mut other = Reading::new();
                        other.add(100).expect("b's own budget");
                    })
                    .await;
                drop(first);
                let mut third = Reading::new();
                third.add(60).expect("given back");
            })
            .await;
        assert_eq!(budget.available(), 100);
    }

    #[tokio::test]
    async fn reads_of_one_namespace_share_its_budget_across_tasks() {
        let budgets = AnswerBudgets::new(100);
        let (held_tx, held_rx) = tokio::sync::oneshot::channel();
        let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
        let holder = tokio::spawn(budgets.budget("a").within(async move {
            let mut reading = Reading::new();
            reading.add(90).expect("within");
            held_tx.send(()).expect("the test waits");
            done_rx.await.ok();
            drop(reading);
        }));
        held_rx.await.expect("held");
        let refused = budgets
            .budget("a")
            .within(async { Reading::new().add(20) })
            .await;
        assert_eq!(refused, Err(Exhausted { limit: 100 }));
        done_tx.send(()).expect("the holder waits");
        holder.await.expect("the holder ends");
        let taken = budgets
            .budget("a")
            .within(async { Reading::new().add(100) })
            .await;
        assert_eq!(taken, Ok(()));
    }

    #[tokio::test]
    async fn reads_outside_a_budget_are_not_counted() {
        let mut reading = Reading::new();
        reading.add(usize::MAX).expect("not counted");
        assert_eq!(reading.held(), 0);
    }

    #[test]
    fn budgets_no_read_holds_are_dropped() {
        let budgets = AnswerBudgets::new(10);
        for i in 0..1_000 {
            drop(budgets.budget(&format!("ns-{i}")));
        }
        let entries = budgets
            .namespaces
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .budgets
            .len();
        assert!(entries <= 128, "{entries}");
        assert_eq!(AnswerBudgets::new(0).limit(), 1);
        assert_eq!(
            AnswerBudgets::new(usize::MAX).limit(),
            Semaphore::MAX_PERMITS
        );
    }

    #[test]
    fn exhausted_says_what_to_change() {
        assert_eq!(
            Exhausted { limit: 64 << 20 }.to_string(),
            "the answers being read for this namespace would hold more than 67108864 bytes (the operator's --answer-bytes-per-namespace); this answer is refused"
        );
    }
}
