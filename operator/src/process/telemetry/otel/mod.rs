//! OpenTelemetry metrics over OTLP: KEDA's `--enable-opentelemetry-metrics` with the `OTEL_*`
//! variables of the OpenTelemetry Go exporter KEDA uses (`otlpmetrichttp`, or `otlpmetricgrpc`
//! when `OTEL_EXPORTER_OTLP_PROTOCOL=grpc`), sending KEDA's OTel instruments
//! (`pkg/metricscollector/opentelemetry.go`: names, descriptions, units, attribute names and
//! value types).
//!
//! The exported state is the Prometheus registry's ([`Metrics`]): every export reads its
//! OpenMetrics text and translates each KEDA family to KEDA's OTel instrument(s), so the two
//! exports always agree and nothing records twice. Series that KEDA's OTel collector has no
//! instrument for (the Kubernetes client's and the metric service's) are not sent, as in KEDA.
//!
//! The OTLP messages come from the vendored OpenTelemetry protos (`operator/proto`), generated
//! at build time.
//!
//! Files: `settings.rs` (flag and `OTEL_*` variables), `exposition.rs` (the registry's text read
//! back), `instruments.rs` (KEDA's instruments and the translation), `export.rs` (sending).

/// The OTLP protos (`opentelemetry.proto.*`), generated at build time (`operator/build.rs`).
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod proto {
    pub mod common {
        pub mod v1 {
            tonic::include_proto!("opentelemetry.proto.common.v1");
        }
    }
    pub mod resource {
        pub mod v1 {
            tonic::include_proto!("opentelemetry.proto.resource.v1");
        }
    }
    pub mod metrics {
        pub mod v1 {
            tonic::include_proto!("opentelemetry.proto.metrics.v1");
        }
    }
    pub mod collector {
        pub mod metrics {
            pub mod v1 {
                tonic::include_proto!("opentelemetry.proto.collector.metrics.v1");
            }
        }
    }
}

mod export;
mod exposition;
mod instruments;
mod settings;

pub use export::{Exporter, OtlpError, run};
pub use instruments::{Translator, export_request};
pub use settings::{OtlpProtocol, OtlpSettings, SCOPE_NAME, Temporality};

#[cfg(test)]
mod tests;
