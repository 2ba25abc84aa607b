//! The `keda-rs` command line.
//!
//! - [`dev`]: `keda-rs dev [FILES...]`: an in-memory Kubernetes API, the operator, an HPA and
//!   the live view on loopback, no cluster needed.
//! - [`hpa`]: the HorizontalPodAutoscaler algorithm and controller `dev` runs.
//! - [`explain`]: `keda-rs explain so/NAME`: one ScaledObject's live state, asked of the
//!   operator's explain endpoint (`keda_operator::explain`).
//! - [`cli`]: the subcommands' flags and their wiring.

pub mod cli;
pub mod dev;
pub mod explain;
pub mod hpa;
pub mod simulate;
