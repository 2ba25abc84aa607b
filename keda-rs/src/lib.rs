//! The `keda-rs` command line.
//!
//! - [`dev`]: `keda-rs dev [FILES...]`: an in-memory Kubernetes API, the operator, an HPA and
//!   the live view on loopback, no cluster needed.
//! - [`hpa`]: the HorizontalPodAutoscaler algorithm and controller `dev` runs.
//! - [`cli`]: the subcommands' flags and their wiring.

pub mod cli;
pub mod dev;
pub mod hpa;
