//! keda-rs custom resource types (`keda.sh/v1alpha1`), their defaults, pure validation and
//! KEDA's metric naming. No IO lives here.

pub mod trigger;

pub use trigger::{AuthenticationKind, AuthenticationRef, ScaleTrigger};
