//! An in-memory Kubernetes API server for keda-rs tests.
//!
//! It speaks the Kubernetes REST protocol so the real [`kube::Client`], `kube::Api`,
//! `kube::runtime::watcher` and `kube::runtime::Controller` run against it unchanged, either
//! in process through a [`tower::Service`] ([`MemKube::client`]) or over plain HTTP on a
//! loopback port ([`MemKube::serve_loopback`]) for multi-process tests.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{Api, PostParams};
//! use memkube::{FailureRule, MemKube, Verb};
//!
//! let server = MemKube::new();
//! server.load_crds_from_dir("config/crd")?;
//! let api: Api<ConfigMap> = Api::default_namespaced(server.client());
//! server.inject_failure(FailureRule::new(503).verb(Verb::Create).resource("configmaps").times(1));
//! assert!(api.create(&PostParams::default(), &ConfigMap::default()).await.is_err());
//! assert_eq!(server.request_counts().get(Verb::Create, "configmaps"), 1);
//!
//! let loopback = server.serve_loopback().await?;
//! let over_tcp = loopback.client()?;
//! # let _ = over_tcp;
//! # Ok(())
//! # }
//! ```
//!
//! # Model
//!
//! One store of JSON objects keyed by group/resource, namespace and name; one cluster-wide,
//! monotonically increasing resourceVersion; a bounded history of changes per resource for
//! resuming watches (older than the window: `410 Gone`, as an ERROR watch event like the real
//! server). The state sits behind one `std::sync::Mutex` that is never held across an
//! `.await`; each watch runs in its own task fed by an unbounded channel, and each change is
//! serialized once for all watchers that see it unchanged.
//!
//! # Differences from a real API server
//!
//! There is no schema validation, defaulting (except `spec.replicas: 1` on workloads) or
//! pruning; no admission, RBAC or authentication; server-side apply is approximated as a
//! merge patch that records the field manager in `managedFields` (no field ownership, no
//! conflicts; `force` is accepted); strategic merge patch is approximated as a merge patch
//! (lists replaced, no directives); no controllers or kubelet run; garbage collection is
//! synchronous; there is no version conversion; paginated lists are not snapshots; discovery
//! is legacy (unaggregated) only, with no OpenAPI document; `dryRun` is refused. The
//! crate's `README.md` lists every known difference.

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
mod table;
mod token;
mod view;
mod watch;

pub use error::ApiError;
pub use faults::{FailureRule, RequestCounts, Verb, WriteRecord};
pub use server::{AccessPolicy, Error, MemKube, MemKubeBuilder, TokenPolicy};
pub use service::{Loopback, MemKubeService, ResponseBody};
pub use token::IssuedToken;
