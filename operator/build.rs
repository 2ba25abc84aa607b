//! Records the compiler version for `keda_build_info`'s `goversion` label, and generates the
//! OTLP metrics messages and gRPC client from the vendored OpenTelemetry protos (`proto/`) with
//! a pure-Rust protobuf compiler (protox), so building needs no system `protoc`.

use std::error::Error;
use std::process::Command;

fn main() -> Result<(), Box<dyn Error>> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let version = Command::new(&rustc)
        .arg("--version")
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "rustc".to_string());
    println!("cargo:rustc-env=KEDA_RS_RUSTC_VERSION={version}");
    println!("cargo:rerun-if-env-changed=RUSTC");
    println!("cargo:rerun-if-changed=build.rs");

    let service = "proto/opentelemetry/proto/collector/metrics/v1/metrics_service.proto";
    println!("cargo:rerun-if-changed=proto");
    let descriptors = protox::compile([service], ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(false)
        // No `connect(uri)` helpers: the channel is built with our own TLS (telemetry/otel.rs).
        .build_transport(false)
        .compile_fds(descriptors)?;
    Ok(())
}
