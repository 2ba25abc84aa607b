//! keda-rs operator: the ScaledObject scale decision, fallback and `scalingModifiers` formulas.
//!
//! Everything here is pure: no IO, no clock reads. The controllers and scale loops that feed
//! these functions live beside them as they land.

pub mod decision;
pub mod fallback;
pub mod formula;
pub mod metrics_service;
