//! What happens to a ScaledObject: the controller reconciles it (finalizer, label, scale
//! target, HPA, status), a scale loop per object polls its triggers, applies
//! [`keda_decide::scale`] (pause, activation, cooldown, fallback) and writes `/scale`.
//!
//! - [`controller`]: the reconcile and the entry point
//!   [`controller::run_scaled_object_controller`].
//! - [`target`]: the scale target resolved, its replicas from a watch cache, the `/scale` write.
//! - [`hpa`]: the HPA KEDA would write, and who owns an existing one.
//! - [`settings`]: the decision's settings and fallback read from the object.
//! - [`scale_loop`]: one task per object: poll, decide, write, status.
//! - [`snapshot`]: what one poll saw and decided, as plain data the explain endpoint reads.
//! - [`routes`]: which `http` routes the activator refuses.
//! - [`name_label`]: the `scaledobject.keda.sh/name` label as the watch cache keeps it.

pub mod controller;
pub mod hpa;
pub mod metric_map;
pub(crate) mod name_label;
pub mod routes;
pub mod scale_loop;
pub mod settings;
pub mod snapshot;
pub mod target;
