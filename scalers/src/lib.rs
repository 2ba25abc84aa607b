//! keda-rs scalers: the extension point (traits, context, typed metadata, registry, shared
//! clients) and the built-in scalers.
//!
//! A trigger becomes a scaler like this: the operator fills a [`ScalerContext`] from the
//! trigger (metadata, resolved env, auth params) and asks the [`Registry`] to build it; the
//! factory of the trigger type parses the metadata with a [`metadata::MetadataParser`] into a
//! typed config, leases a shared client from [`pool::ClientPools`] if it needs one, and
//! returns a [`BuiltScaler`]. See `docs/writing-a-scaler.md` for a complete custom scaler.

pub mod answers;
pub mod authentication;
pub mod aws;
pub mod azure;
pub mod client_policy;
pub mod cluster;
pub mod context;
pub mod error;
pub mod files;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod gcp;
pub mod http_client;
pub mod http_servers;
pub mod metadata;
pub mod metric;
pub mod oauth2;
pub mod openstack;
pub mod pool;
pub mod pooled;
pub mod registry;
pub mod remote;
pub mod request_metrics;
pub mod rest;
pub mod scaler;
pub mod scalers;
pub mod secret;
pub mod tls;
pub mod wake;

pub use context::{Clock, OperatorIdentityGrant, ProcessEnv, ScalableKind, ScalerContext};
pub use error::{MetadataError, MetadataErrorKind, ScalerError, Source, TriggerId};
pub use metadata::{MetadataParser, Param};
pub use registry::{Registry, ScalerFactory};
pub use scaler::{BuiltScaler, MetricValue, MetricsAndActivity, PushScaler, Scaler};
pub use secret::Secret;
pub use wake::{Wake, WakeSender};

/// `docs/writing-a-scaler.md`, included so its example is compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../docs/writing-a-scaler.md")]
pub struct WritingAScalerGuide;
