//! keda-rs operator: the ScaledObject scale decision, fallback and `scalingModifiers` formulas
//! (pure: no IO, no clock reads), and the operations side: settings, leader election, metrics,
//! probes and the process wiring of the `keda-operator` binary.

pub mod admin;
pub mod config;
pub mod decision;
pub mod fallback;
pub mod formula;
pub mod leader;
pub mod run;
pub mod telemetry;
