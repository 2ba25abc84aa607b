//! keda-rs metrics-apiserver: serves `external.metrics.k8s.io/v1beta1` to the HPA through the
//! kube-apiserver aggregator.
//!
//! A request goes through, in order: TLS (the secure port asks for a client certificate but
//! does not require one, [`tls::RequestClientCert`]), front-proxy authentication
//! ([`authn::Authenticator`], 401), a cached SubjectAccessReview ([`authz::CachedAuthorizer`],
//! 403), the ScaledObject named by the `labelSelector` ([`selector`], 400), and one call to the
//! operator's metric service over a warm HTTP/2 mutual-TLS connection
//! ([`operator_client::OperatorClient`], 404/503/504). Every failure is a Kubernetes `Status`
//! ([`error::ApiError`]). The server keeps no metric state.

pub mod app;
pub mod authn;
pub mod authz;
pub mod config;
pub mod discovery;
pub mod error;
pub mod keda_flags;
pub mod metrics;
pub mod operator_client;
pub mod selector;
pub mod shard_router;
pub mod start;
pub mod tls;

pub use config::Args;
pub use start::{StartError, run};
