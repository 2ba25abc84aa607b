//! Helpers of the operator's tests beyond the scenarios harness.

#![allow(dead_code)]

pub mod dial;
pub mod metrics_api;
pub mod source;
