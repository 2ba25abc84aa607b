//! The scaler traits: what every trigger type implements.

use async_trait::async_trait;
use k8s_openapi::api::autoscaling::v2::MetricSpec;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::error::ScalerError;
use crate::metric::metric_value_quantity;

/// One metric value read from the source.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricValue {
    /// The metric name the HPA asked for (`s0-redis-jobs`).
    pub name: String,
    /// The value. Negative, NaN and infinite values are reported to the HPA as 0.
    pub value: f64,
}

impl MetricValue {
    /// A value for `name`.
    pub fn new(name: impl Into<String>, value: f64) -> Self {
        Self {
            name: name.into(),
            value,
        }
    }

    /// The value as KEDA reports it to the HPA: a milli-precision quantity (`1500m`, `3`),
    /// `0` for negative, NaN or infinite values.
    pub fn quantity(&self) -> Quantity {
        metric_value_quantity(self.value)
    }
}

/// The answer of [`Scaler::metrics_and_activity`].
#[derive(Clone, Debug, PartialEq)]
pub struct MetricsAndActivity {
    /// The values for the asked metric (usually one; empty for cpu/memory).
    pub values: Vec<MetricValue>,
    /// Whether the source is active: its value is strictly above the activation threshold.
    /// Only the operator's 0 <-> 1 (and idle <-> min) decision uses this; the HPA uses the
    /// values.
    pub active: bool,
}

impl MetricsAndActivity {
    /// One value, active iff `value > activation_threshold` (KEDA's rule: a value equal to the
    /// threshold is inactive).
    pub fn single(name: impl Into<String>, value: f64, activation_threshold: f64) -> Self {
        Self {
            values: vec![MetricValue::new(name, value)],
            active: value > activation_threshold,
        }
    }
}

/// A pull scaler: the operator asks it for its metric specs once per reconcile and for values
/// on every poll and every HPA request.
///
/// Implementations are shared: the operator may call `metrics_and_activity` concurrently from
/// the scale loop and the metric service, so it takes `&self`.
#[async_trait]
pub trait Scaler: Send + Sync {
    /// The HPA metric specs of this trigger: `External` metrics named `s<index>-...` (see
    /// [`crate::ScalerContext::metric_name`]) with an `AverageValue` or `Value` target, or
    /// `Resource`/`ContainerResource` metrics for cpu and memory. Pure; never does IO.
    fn metric_specs(&self) -> Vec<MetricSpec>;

    /// Reads the current value of `metric_name` from the source and whether the source is
    /// active.
    ///
    /// May block on the network; a caller that gives up simply drops the future, so
    /// implementations must be cancellation-safe (no state half-updated across an `.await`).
    /// Implementations should bound their own waits (the context's HTTP timeout for HTTP
    /// sources).
    ///
    /// # Errors
    /// The source cannot be reached or answers something unusable; `metric_name` is not one of
    /// this scaler's metrics; the scaler is closed.
    async fn metrics_and_activity(
        &self,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError>;

    /// Releases what the scaler holds (its share of a pooled client). Idempotent; afterwards
    /// `metrics_and_activity` fails with [`ScalerError::Closed`]. Dropping the scaler releases
    /// the same resources, so calling `close` is a courtesy that makes the moment explicit.
    /// Must not block on the network for long: the operator calls it when it replaces scalers.
    async fn close(&self);

    /// Where the source tells us early that something may have arrived, if it can
    /// ([`crate::wake`]): each wake makes the owning loop read
    /// [`metrics_and_activity`](Self::metrics_and_activity) at once instead of at its next
    /// poll. `None` (the default): polled only. Called once per loop start; never blocks.
    fn wake(&self) -> Option<crate::wake::Wake> {
        None
    }

    /// Whether the operator may poll this source sooner than `pollingInterval` for a while
    /// after it turned active again or a value rose towards activation (adaptive polling,
    /// within the operator's documented bounds). `true` only for sources that cannot notify
    /// and are cheap to read (a self-hosted server, not a billed or rate-limited cloud API).
    /// Default: `false`.
    fn adaptive_polling(&self) -> bool {
        false
    }
}

/// A scaler that can also tell the operator at once when its source becomes active, instead of
/// waiting for the next poll (KEDA's `PushScaler`).
#[async_trait]
pub trait PushScaler: Scaler {
    /// Watches the source and sends `true` on `activity` whenever it becomes active (and may
    /// send `false` when it becomes inactive; the operator still deactivates only through
    /// polling, as KEDA does).
    ///
    /// Contract:
    /// - `run` is the only writer of `activity`; the operator owns the receiver.
    /// - It returns when `cancel` is cancelled (promptly: it must not wait on the network
    ///   without also selecting on `cancel`), or when the receiver is gone (a send fails).
    ///   Returning drops the sender, which closes the channel; the operator sees `None`.
    /// - Connection failures are retried inside `run` with backoff; they are not returned.
    /// - `run` is called at most once at a time per scaler.
    async fn run(&self, cancel: CancellationToken, activity: mpsc::Sender<bool>);
}

/// What a factory builds: a pull scaler, or a push scaler (which is also a pull scaler).
pub enum BuiltScaler {
    /// Polled only.
    Pull(Box<dyn Scaler>),
    /// Polled, and `run` by the operator.
    Push(Box<dyn PushScaler>),
}

impl BuiltScaler {
    /// The pull side, which every scaler has.
    pub fn scaler(&self) -> &dyn Scaler {
        match self {
            Self::Pull(s) => s.as_ref(),
            Self::Push(s) => s.as_ref(),
        }
    }

    /// The push side, if any.
    pub fn push(&self) -> Option<&dyn PushScaler> {
        match self {
            Self::Pull(_) => None,
            Self::Push(s) => Some(s.as_ref()),
        }
    }
}

impl std::fmt::Debug for BuiltScaler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Pull(_) => f.write_str("BuiltScaler::Pull"),
            Self::Push(_) => f.write_str("BuiltScaler::Push"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_equal_to_the_threshold_is_inactive() {
        assert!(!MetricsAndActivity::single("m", 3.0, 3.0).active);
        assert!(MetricsAndActivity::single("m", 3.5, 3.0).active);
        assert!(!MetricsAndActivity::single("m", 0.0, 0.0).active);
    }

    #[test]
    fn metric_values_are_milli_quantities() {
        assert_eq!(MetricValue::new("m", 2.5).quantity().0, "2500m");
        assert_eq!(MetricValue::new("m", -2.5).quantity().0, "0");
    }
}
