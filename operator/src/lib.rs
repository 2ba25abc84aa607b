//! keda-rs operator: the ScaledObject controller and its scale loops, over the pure scale
//! decision, fallback and `scalingModifiers` formulas.
//!
//! - [`controller`]: reconcile (finalizer, label, target, HPA, status) and the entry point
//!   [`controller::run_scaled_object_controller`].
//! - [`scale_loop`]: one task per object polling its scalers and applying [`decision`].
//! - [`decision`], [`fallback`], [`formula`]: pure, no IO, no clock reads.

pub mod controller;
pub mod decision;
pub mod error;
pub mod events;
pub mod fallback;
pub mod formula;
pub mod hpa;
pub mod recording;
pub mod scale_loop;
pub mod scalers;
pub mod settings;
pub mod status;
pub mod target;

pub use controller::{ControllerConfig, ScaledObjectController, run_scaled_object_controller};
pub use error::Error;
pub use scale_loop::{ManualTicks, MetricQueryError, ScaleLoops};
pub use scalers::{ScalerEnv, scalers_for};
