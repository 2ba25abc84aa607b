//! keda-rs pure decisions: what the operator must write, computed from what it observed.
//!
//! Nothing in this crate does IO, reads the clock or talks to a cluster: the operator's loops
//! (the ScaledObject scale loops and the ScaledJob job loops) observe, call these
//! functions and apply the result; a simulation can call them with made-up observations.
//!
//! - [`scale`]: the ScaledObject decision (KEDA's `RequestScale`), with the pause annotations
//!   and the cooldown arithmetic.
//! - [`job`]: how many Jobs a ScaledJob creates, and which finished Jobs it deletes.
//! - [`fallback`]: the `fallback` replicas and the synthetic metric the HPA is served.
//! - [`formula`]: `scalingModifiers`, the composite metric and its activity.

pub mod fallback;
pub mod formula;
pub mod job;
pub mod scale;
