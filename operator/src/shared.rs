//! What ScaledObjects and ScaledJobs share: the controller shell and the loop machinery, the
//! scalers built from resolved triggers, status and Events, and the watches every part reads.
//!
//! - [`reconciler`]: the controller shell both kinds' controllers are (watch, finalizer,
//!   isolation, retries).
//! - [`loops`], [`loop_registry`]: one loop machinery (registry, schedule, ticks, push scalers).
//! - [`resolve`]: a trigger's `*FromEnv` values and TriggerAuthentication parameters.
//! - [`scalers`]: the scalers of an object, built from its resolved triggers.
//! - [`status`], [`events`], [`auth_events`], [`auth_status`]: conditions and Events.
//! - [`unexpected_params`]: KEDA's `KEDA_CHECK_UNEXPECTED_SCALERS_PARAMS` Events.
//! - [`isolation`]: a panic in one object's work fails that object only.
//! - [`recording`]: the per-scaler Prometheus series.
//! - [`watch`], [`cluster_view`]: watch caches, and the shared pod and EndpointSlice view.
//! - [`error`]: the operator's error type and its condition reasons.

pub mod auth_events;
pub(crate) mod auth_status;
pub mod cluster_view;
pub mod error;
pub mod events;
pub mod isolation;
pub(crate) mod loop_registry;
pub mod loops;
pub mod ownership;
pub(crate) mod reconciler;
pub mod recording;
pub mod resolve;
pub mod scalers;
pub mod status;
pub mod unexpected_params;
pub mod watch;
