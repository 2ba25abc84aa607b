//! Defence in depth: a panic in the work of one object stays with that object.
//!
//! Nothing reachable from user input should panic, but a scaler (built-in or custom) or the
//! operator itself may have a bug. Every boundary where the work of one object runs (a
//! reconcile, a scale or job loop's poll, a scaler's factory, metric read or push task, one
//! metric read of the metric service) runs it through [`catch_panic`]: the panic becomes an
//! [`InternalError`] that names the object and, where known, the trigger; the caller marks the
//! object `Ready=False` with reason [`INTERNAL_ERROR`] and counts it in
//! `keda_internal_panics_total` ([`crate::shared::recording::internal_panic`]). The process, the
//! controller and every other object's loop keep running; a loop whose poll panicked keeps its
//! schedule, and its next good poll makes the object Ready again.
//!
//! Catching needs unwinding: no build profile of the workspace may set `panic = "abort"`
//! (`Cargo.toml` says so where the release profile is defined).
//!
//! The futures and closures are wrapped in [`AssertUnwindSafe`]: what they share with other
//! work is behind mutexes that every user recovers after a panic
//! ([`crate::shared::loop_registry::lock`]), tokio mutexes (never poisoned) or atomics, and each update
//! through them is a single assignment, so no half-done state is observed afterwards.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;

pub use keda_api::condition::reason::INTERNAL_ERROR;

/// The longest panic message kept in a condition, an error or a log line (in characters).
pub const MAX_PANIC_MESSAGE: usize = 300;

/// Where a panic was caught: the `component` label of `keda_internal_panics_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Component {
    /// A ScaledObject or ScaledJob reconcile (the operator's own code).
    Reconcile,
    /// One poll of a scale loop or job loop (the operator's own code).
    ScaleLoop,
    /// A scaler: its factory, a metric read, its push task or `close`.
    Scaler,
    /// One metric read of the metric service, outside the scaler itself.
    MetricService,
}

impl Component {
    /// The label value: `reconcile`, `scale_loop`, `scaler`, `metric_service`.
    pub fn as_str(self) -> &'static str {
        match self {
            Component::Reconcile => "reconcile",
            Component::ScaleLoop => "scale_loop",
            Component::Scaler => "scaler",
            Component::MetricService => "metric_service",
        }
    }
}

/// A caught panic: its message, trimmed to [`MAX_PANIC_MESSAGE`] characters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Panic {
    message: String,
}

impl Panic {
    /// The panic of `payload` (what `catch_unwind` returns): its `&str` or `String` message,
    /// trimmed; any other payload reads as "a non-text panic payload".
    pub fn from_payload(payload: &(dyn Any + Send)) -> Panic {
        let text = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("a non-text panic payload");
        Panic {
            message: trim_message(text),
        }
    }

    /// The trimmed message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// This panic, caught by `component` while doing `during` (what was being done, naming
    /// the object: `reconciling ScaledObject team/orders`).
    pub fn during(self, component: Component, during: impl Into<String>) -> InternalError {
        InternalError {
            component,
            during: during.into(),
            trigger: None,
            message: self.message,
        }
    }

    /// This panic, caught in the scaler of `trigger` while doing `during`.
    pub fn in_scaler(self, during: impl Into<String>, trigger: TriggerRef<'_>) -> InternalError {
        InternalError {
            trigger: Some(format!(
                "trigger {} ({})",
                trigger.index, trigger.trigger_type
            )),
            ..self.during(Component::Scaler, during)
        }
    }
}

impl std::fmt::Display for Panic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// The trigger a panic happened in: `spec.triggers[index]` of type `trigger_type`.
#[derive(Clone, Copy, Debug)]
pub struct TriggerRef<'a> {
    /// Position in `spec.triggers`.
    pub index: usize,
    /// `triggers[].type`.
    pub trigger_type: &'a str,
}

/// A panic caught while doing something for one object: what lands in `Ready=False
/// InternalError`, the event and the log.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "internal error while {during}{}: the operator caught a panic ({message}); the object is retried, and this is a bug to report with the operator's log",
    trigger.as_deref().map(|t| format!(", in {t}")).unwrap_or_default()
)]
pub struct InternalError {
    /// Where the panic was caught.
    pub component: Component,
    /// What was being done, naming the object: `reconciling ScaledObject team/orders`.
    pub during: String,
    /// `trigger 0 (redis)` when the panic happened in a scaler.
    pub trigger: Option<String>,
    /// The panic's message, trimmed.
    pub message: String,
}

/// Runs `work`, turning a panic inside it into `Err` instead of unwinding into the caller.
///
/// # Errors
/// The [`Panic`] when `work` panicked.
pub async fn catch_panic<F: Future>(work: F) -> Result<F::Output, Panic> {
    AssertUnwindSafe(work)
        .catch_unwind()
        .await
        .map_err(|payload| Panic::from_payload(payload.as_ref()))
}

/// [`catch_panic`] for synchronous work (a scaler's `metric_specs`).
///
/// # Errors
/// The [`Panic`] when `work` panicked.
pub fn catch_panic_sync<T>(work: impl FnOnce() -> T) -> Result<T, Panic> {
    std::panic::catch_unwind(AssertUnwindSafe(work))
        .map_err(|payload| Panic::from_payload(payload.as_ref()))
}

/// `text` without surrounding whitespace, cut at [`MAX_PANIC_MESSAGE`] characters (marked with
/// `...`).
fn trim_message(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(MAX_PANIC_MESSAGE) {
        None => text.to_string(),
        Some((cut, _)) => format!("{}...", &text[..cut]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panicking_future_becomes_an_error_with_its_message() {
        let caught = catch_panic(async {
            if std::hint::black_box(true) {
                panic!("boom in {}", "a scaler");
            }
            1
        })
        .await;
        assert_eq!(
            caught.map_err(|p| p.message().to_string()),
            Err("boom in a scaler".into())
        );
        assert_eq!(catch_panic(async { 7 }).await, Ok(7));
    }

    #[test]
    fn synchronous_work_is_caught_too() {
        let caught = catch_panic_sync(|| -> u8 { std::panic::panic_any(42_u32) });
        assert_eq!(
            caught.map_err(|p| p.message().to_string()),
            Err("a non-text panic payload".into())
        );
    }

    #[test]
    fn no_build_profile_aborts_on_panic() {
        let manifest = include_str!("../../../Cargo.toml");
        let aborting: Vec<&str> = manifest
            .lines()
            .filter(|l| {
                let l = l.split('#').next().unwrap_or_default().replace(' ', "");
                l.starts_with("panic=") && l.contains("abort")
            })
            .collect();
        assert!(
            aborting.is_empty(),
            "catching panics needs unwinding: {aborting:?}"
        );
    }

    #[test]
    fn long_messages_are_trimmed_on_a_character_boundary() {
        let long = format!("  {}  ", "é".repeat(MAX_PANIC_MESSAGE + 50));
        let panic = Panic::from_payload(&long);
        assert_eq!(panic.message().chars().count(), MAX_PANIC_MESSAGE + 3);
        assert!(panic.message().starts_with('é') && panic.message().ends_with("..."));
        let short = Panic::from_payload(&"  short\n");
        assert_eq!(short.message(), "short");
    }

    #[test]
    fn the_error_names_what_was_done_and_the_trigger() {
        let panic = Panic::from_payload(&"index out of bounds");
        let error = panic.in_scaler(
            "reading metric s0-q of ScaledObject team/orders",
            TriggerRef {
                index: 0,
                trigger_type: "queue",
            },
        );
        assert_eq!(error.component, Component::Scaler);
        assert_eq!(
            error.to_string(),
            "internal error while reading metric s0-q of ScaledObject team/orders, in trigger 0 \
             (queue): the operator caught a panic (index out of bounds); the object is retried, \
             and this is a bug to report with the operator's log"
        );
    }
}
