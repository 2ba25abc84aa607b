//! What the operator serves: the metric values the HPA reads ([`metrics_service`]),
//! `keda-rs explain` ([`explain`]), probes and `/metrics` ([`admin`]), and CloudEvents to the
//! sinks of CloudEventSources ([`cloud_events`]).

pub mod admin;
pub mod cloud_events;
pub mod explain;
pub mod metrics_service;
