//! keda-rs operator.
//!
//! Pure logic, no IO and no clock reads: `decision` (the ScaledObject 0 <-> 1 decision),
//! `fallback`, `formula` (`scalingModifiers`) and `job_decision` (how many Jobs a ScaledJob
//! creates). Against the cluster: `resolve` (a trigger's `*FromEnv` values and its
//! TriggerAuthentication parameters, from watch caches, with rebuild signals when they change).

pub mod decision;
pub mod fallback;
pub mod formula;
pub mod job_decision;
pub mod resolve;
