//! A HorizontalPodAutoscaler controller for `keda-rs dev`: Kubernetes' algorithm
//! ([`algorithm`], pure) and the loop that applies it to HPAs through the API ([`controller`]).

pub mod algorithm;
pub mod controller;

pub use controller::{HpaController, HpaObservation, HpaSettings, MetricObservation, Observations};
