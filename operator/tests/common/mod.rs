//! Helpers of the operator's tests beyond the scenarios harness.
//!
//! `world` needs the test binary to declare `mod scenarios;` and `mod redis_common;` (the
//! scalers' `tests/common/mod.rs`); binaries without them include the single files they use by
//! path (`#[path = "common/dial.rs"]`, `#[path = "common/binary.rs"]`).

#![allow(dead_code)]

pub mod binary;
pub mod dial;
pub mod metrics_api;
pub mod source;
pub mod world;
