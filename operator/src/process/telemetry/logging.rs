//! Structured logs through `tracing`: human-readable text or one JSON object per line. Shared
//! by every keda-rs binary, so it lives in `keda-cli`.

pub use keda_cli::logging::{LogFormat, LoggingError, TimeEncoding, init_logging};
