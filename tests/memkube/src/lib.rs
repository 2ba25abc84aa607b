//! In-memory Kubernetes API server for keda-rs tests (placeholder docs, expanded below).

mod discovery;
mod error;
mod faults;
mod handler;
mod patch;
mod registry;
mod scale;
mod selector;
mod server;
mod service;
mod store;
mod view;
mod watch;

pub use error::ApiError;
pub use faults::{FailureRule, RequestCounts, Verb};
pub use server::{AccessPolicy, Error, MemKube, MemKubeBuilder};
pub use service::{Loopback, MemKubeService, ResponseBody};
