//! Work on this crate has not started yet; see the open issues.
