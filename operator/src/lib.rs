//! keda-rs operator: the ScaledObject and ScaledJob controllers and their loops, over the pure
//! decisions of [`keda_decide`], plus what the `keda-operator` binary serves and runs.
//!
//! The folders say the parts (docs/design.md draws the map):
//!
//! - [`scaled_object`]: what happens to a ScaledObject: controller, scale target, HPA, scale
//!   loop, the poll snapshot.
//! - [`scaled_job`]: what happens to a ScaledJob: controller, job loop, the Jobs.
//! - [`shared`]: what both share: controller shell, loop machinery, trigger resolution,
//!   scalers, status and Events, panic isolation, watches.
//! - [`serve`]: what the operator serves: metric values, explain, admin, CloudEvents.
//! - [`process`]: the process: settings, leader election, run, telemetry.
//! - The pure decisions live in the `keda-decide` crate (`operator/decide`): [`keda_decide::scale`],
//!   [`keda_decide::fallback`], [`keda_decide::formula`], [`keda_decide::job`] (how many Jobs a
//!   ScaledJob creates): no IO, no clock reads, no cluster client.
//!
//! Every module is also reachable at the crate root (`keda_operator::resolve`,
//! `crate::scale_loop`, ...): the paths from before the folders, which the tests, `keda-rs`
//! and the code inside this crate use.

pub mod process;
pub mod scaled_job;
pub mod scaled_object;
pub mod serve;
pub mod shared;

// The flat paths of before the folders (`keda_operator::hpa`, ...), for the binary, the tests and
// the benches; inside the crate every path names its folder.
pub use process::{config, leader, run, shards, telemetry};
pub use scaled_object::{controller, hpa, routes, scale_loop, settings, snapshot, target};
pub use serve::{admin, cloud_events, explain, metrics_service};
pub use shared::{
    auth_events, cluster_view, error, events, isolation, loops, ownership, recording, resolve,
    scalers, status, unexpected_params, watch,
};

pub use controller::{ControllerConfig, ScaledObjectController, run_scaled_object_controller};
pub use error::Error;
pub use loops::ManualTicks;
pub use scale_loop::{MetricQueryError, ScaleLoops};
pub use scalers::{ScalerEnv, scalers_for};
