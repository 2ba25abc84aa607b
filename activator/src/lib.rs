//! keda-rs activator: the HTTP path of scale-from-zero.
//!
//! A proxy in front of HTTP workloads configured by ScaledObject triggers of type `http`: it
//! serves the common HTTP/1.1 request itself and the rest with hyper ([`front`], [`server`]),
//! routes by host and path prefix ([`route`]), forwards to the least-loaded ready pod within
//! `containerConcurrency` ([`balance`], [`target`]) over kept-alive connections
//! ([`upstream`], [`wire`]), holds requests in a bounded queue while no pod is ready and wakes the
//! operator at once ([`report`]), measures per-second concurrency and rate ([`stats`]) for the
//! operator's `http` scaler, and answers errors in one place ([`error`]). Its background tasks
//! (the watches, the report stream) are restarted when they fail ([`supervise`]).

pub mod anchor;
pub mod balance;
pub mod edge;
pub mod error;
pub mod front;
pub mod limits;
pub mod metrics;
pub mod proxy;
pub mod report;
pub mod route;
pub mod serve;
pub mod server;
pub mod serving;
pub mod spread;
pub mod stats;
pub mod supervise;
pub mod target;
pub mod targets;
pub mod timed;
pub mod trust;
pub mod upstream;
pub mod watch;
pub mod wire;
