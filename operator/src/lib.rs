//! keda-rs operator: the ScaledObject controller and its scale loops, over the pure scale
//! decision, fallback and `scalingModifiers` formulas of [`keda_decide`], plus the operations
//! side of the `keda-operator` binary.
//!
//! - [`controller`]: reconcile (finalizer, label, target, HPA, status) and the entry point
//!   [`controller::run_scaled_object_controller`].
//! - [`loops`]: the loop machinery both kinds share (registry, schedule, push scalers, panic
//!   isolation, start/stop bookkeeping), over a small trait for what differs per kind.
//! - [`scale_loop`]: one task per object polling its scalers and applying
//!   [`keda_decide::scale`]; it leaves a [`snapshot`] of each poll, which [`explain`] reads.
//! - [`scaled_job`]: the ScaledJob controller and its job loops, creating Jobs as
//!   [`keda_decide::job`] decides.
//! - [`resolve`]: a trigger's `*FromEnv` values and its TriggerAuthentication parameters, from
//!   watch caches, with rebuild signals when they change.
//! - [`cluster_view`]: the one shared pod and EndpointSlice watch every scaler reads
//!   (`kubernetes-workload`, `metrics-api` over a Service's endpoints).
//! - [`routes`]: which `http` routes the activator refuses (another namespace claimed them
//!   first, or the host policy forbids them), reported as `Ready=False` and a Warning Event.
//! - [`isolation`]: a panic in the work of one object becomes that object's `Ready=False
//!   InternalError`, never the end of the process or of another object's loop.
//! - The pure decisions live in the `keda-decide` crate (`operator/decide`): [`keda_decide::scale`],
//!   [`keda_decide::fallback`], [`keda_decide::formula`], [`keda_decide::job`] (how many Jobs a
//!   ScaledJob creates): no IO, no clock reads, no cluster client.
//! - Operations: [`config`] (flags, env, client), [`leader`] (Lease election), [`telemetry`]
//!   (KEDA's Prometheus metrics, logging), [`admin`] (probes and `/metrics`), [`run`] (the
//!   process wiring).

pub mod admin;
pub mod auth_events;
mod auth_status;
pub mod cloud_events;
pub mod cluster_view;
pub mod config;
pub mod controller;
pub mod error;
pub mod events;
pub mod explain;
pub mod hpa;
pub mod isolation;
pub mod leader;
mod loop_registry;
pub mod loops;
pub mod metrics_service;
mod reconciler;
pub mod recording;
pub mod resolve;
pub mod routes;
pub mod run;
pub mod scale_loop;
pub mod scaled_job;
pub mod scalers;
pub mod settings;
pub mod snapshot;
pub mod status;
pub mod target;
pub mod telemetry;
pub mod watch;

pub use controller::{ControllerConfig, ScaledObjectController, run_scaled_object_controller};
pub use error::Error;
pub use loops::ManualTicks;
pub use scale_loop::{MetricQueryError, ScaleLoops};
pub use scalers::{ScalerEnv, scalers_for};
