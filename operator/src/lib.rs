//! keda-rs operator: the ScaledObject scale decision, fallback, `scalingModifiers` formulas and
//! the ScaledJob job-count decision.
//!
//! Everything here is pure: no IO, no clock reads. The controllers and scale loops that feed
//! these functions live beside them as they land.

pub mod decision;
pub mod fallback;
pub mod formula;
pub mod job_decision;
