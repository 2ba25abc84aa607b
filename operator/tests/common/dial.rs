//! `dial`: a custom scaler (registered as docs/writing-a-scaler.md shows) whose value the test
//! sets, and which fails or panics on demand. No event source behind it: reads are instant, so
//! tests with paused time can use it.
//!
//! ```yaml
//! triggers:
//!   - type: dial
//!     metadata: { dial: orders }   # value > 0: active; the HPA target is 5
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::autoscaling::v2::MetricSpec;
use keda_scalers::metric::{external_metric_spec, metric_target};
use keda_scalers::{
    BuiltScaler, MetricsAndActivity, PushScaler, Registry, Scaler, ScalerContext, ScalerError,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The trigger type.
pub const DIAL: &str = "dial";

/// What one dial does.
#[derive(Clone, Debug, Default)]
struct Dial {
    value: f64,
    panic_on_build: bool,
    panic_on_read: bool,
    panic_in_push: bool,
    fail_on_read: bool,
    reads: u64,
    /// The tokio tasks that read it (each once).
    readers: Vec<tokio::task::Id>,
}

/// The dials of one test, shared by every scaler the registry builds. Cheap to clone.
#[derive(Clone, Default)]
pub struct Dials(Arc<Mutex<HashMap<String, Dial>>>);

impl Dials {
    pub fn new() -> Self {
        Self::default()
    }

    fn with<T>(&self, name: &str, f: impl FnOnce(&mut Dial) -> T) -> T {
        let mut dials = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        f(dials.entry(name.to_string()).or_default())
    }

    /// The value the dial reads (active when above 0).
    pub fn set(&self, name: &str, value: f64) {
        self.with(name, |d| d.value = value);
    }

    /// Whether building a scaler of this dial panics.
    pub fn panic_on_build(&self, name: &str, on: bool) {
        self.with(name, |d| d.panic_on_build = on);
    }

    /// Whether reading this dial panics.
    pub fn panic_on_read(&self, name: &str, on: bool) {
        self.with(name, |d| d.panic_on_read = on);
    }

    /// Whether a scaler of this dial built from now on is a push scaler whose `run` panics.
    pub fn panic_in_push(&self, name: &str, on: bool) {
        self.with(name, |d| d.panic_in_push = on);
    }

    /// Whether reading this dial fails with an error.
    pub fn fail_on_read(&self, name: &str, on: bool) {
        self.with(name, |d| d.fail_on_read = on);
    }

    /// How many reads of this dial were made.
    pub fn reads(&self, name: &str) -> u64 {
        self.with(name, |d| d.reads)
    }

    /// The tokio tasks that read this dial so far (a scale loop reads in its own task).
    pub fn readers(&self, name: &str) -> Vec<tokio::task::Id> {
        self.with(name, |d| d.readers.clone())
    }

    /// The built-in registry plus `dial`.
    pub fn registry(&self) -> Registry {
        let mut registry = Registry::builtin();
        self.register_as(&mut registry, DIAL);
        registry
    }

    /// Registers these dials in `registry` as trigger type `trigger_type` too (to the
    /// operator, another kind of event source).
    pub fn register_as(&self, registry: &mut Registry, trigger_type: &str) {
        let dials = self.clone();
        registry.register(trigger_type, move |ctx: ScalerContext| {
            let dials = dials.clone();
            async move { dials.build(&ctx) }
        });
    }

    fn build(&self, ctx: &ScalerContext) -> Result<BuiltScaler, ScalerError> {
        let name = ctx
            .metadata
            .get("dial")
            .cloned()
            .ok_or_else(|| ScalerError::Unexpected {
                trigger: ctx.trigger_id(),
                message: "metadata.dial is required".to_string(),
            })?;
        if self.with(&name, |d| d.panic_on_build) {
            panic!("dial {name}: the factory was told to panic");
        }
        let push = self.with(&name, |d| d.panic_in_push);
        let scaler = DialScaler {
            metric: ctx.metric_name(&format!("dial-{name}")),
            dials: self.clone(),
            trigger: ctx.trigger_id(),
            name,
        };
        Ok(if push {
            BuiltScaler::Push(Box::new(scaler))
        } else {
            BuiltScaler::Pull(Box::new(scaler))
        })
    }
}

struct DialScaler {
    dials: Dials,
    name: String,
    metric: String,
    trigger: keda_scalers::TriggerId,
}

#[async_trait]
impl Scaler for DialScaler {
    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.metric.clone(),
            metric_target(keda_scalers::metric::MetricTargetType::AverageValue, 5),
        )]
    }

    async fn metrics_and_activity(&self, name: &str) -> Result<MetricsAndActivity, ScalerError> {
        let dial = self.dials.with(&self.name, |d| {
            d.reads += 1;
            if let Some(task) = tokio::task::try_id()
                && !d.readers.contains(&task)
            {
                d.readers.push(task);
            }
            d.clone()
        });
        if dial.panic_on_read {
            panic!("dial {}: the read was told to panic", self.name);
        }
        if dial.fail_on_read {
            return Err(ScalerError::Unexpected {
                trigger: self.trigger.clone(),
                message: format!("dial {} is down", self.name),
            });
        }
        Ok(MetricsAndActivity::single(name, dial.value, 0.0))
    }

    async fn close(&self) {}
}

#[async_trait]
impl PushScaler for DialScaler {
    async fn run(&self, _cancel: CancellationToken, _activity: mpsc::Sender<bool>) {
        panic!("dial {}: the push task was told to panic", self.name);
    }
}
