//! keda-rs admission webhooks: KEDA's `keda-admission-webhooks` (KEDA-CONTRACT 1.11).
//!
//! A TLS server ([`start`]) answers AdmissionReview v1 requests on KEDA's validation paths
//! ([`app`]) with KEDA's rules ([`rules`]): the per-object rules of
//! [`keda_api::validation`], and the cross-object ones (another ScaledObject or an HPA on the
//! same workload, resource requests for cpu/memory triggers) answered from watch caches
//! ([`cache`]), never from a LIST per request. Its serving certificate comes from files or from
//! Secret `keda-rs-webhook-certs` ([`certs`]); its metrics carry KEDA's names ([`metrics`]).

pub mod app;
pub mod cache;
pub mod certs;
pub mod config;
pub mod keda_flags;
pub mod metrics;
pub mod rules;
pub mod start;

pub use config::Args;
pub use start::{StartError, run};
