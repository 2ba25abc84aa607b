//! The process itself: settings from flags and environment ([`config`]), Lease leader
//! election ([`leader`]), the task wiring of the binary ([`run`]), and telemetry (KEDA's
//! Prometheus metrics, OTLP export, logging: [`telemetry`]).

pub mod config;
pub mod leader;
pub mod run;
pub mod shards;
pub mod telemetry;
