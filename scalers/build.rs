//! Generates the Rust types, client and service trait of KEDA's `externalscaler.proto` (and of
//! etcd's v3 API and the PredictKube engine's call) with a pure-Rust protobuf compiler (protox),
//! so building needs no system `protoc`.

use std::error::Error;

fn main() -> Result<(), Box<dyn Error>> {
    let proto = "proto/externalscaler.proto";
    println!("cargo:rerun-if-changed={proto}");
    let etcd = "proto/etcd.proto";
    println!("cargo:rerun-if-changed={etcd}");
    let predictkube = "proto/predictkube.proto";
    println!("cargo:rerun-if-changed={predictkube}");
    println!("cargo:rerun-if-changed=build.rs");
    let descriptors = protox::compile([proto], ["proto"])?;
    tonic_prost_build::configure()
        // The server side is generated too: tests (and users writing an external scaler in
        // Rust) implement `external_scaler_server::ExternalScaler`. It needs no extra
        // dependency; serving it is up to the user.
        .build_client(true)
        .build_server(true)
        // No `connect(uri)` helpers: channels are built by the scaler with our own TLS.
        .build_transport(false)
        // StreamMetricSpec is optional for servers: a server that does not implement it
        // answers Unimplemented, as Go's generated `Unimplemented...Server` does.
        .generate_default_stubs(true)
        .compile_fds(descriptors)?;

    // etcd's v3 API, client side only: the `etcd` scaler reads a key and watches it.
    let descriptors = protox::compile([etcd], ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(false)
        .build_transport(false)
        .compile_fds(descriptors)?;

    // The PredictKube ML engine's one call (the `predictkube` scaler). The server side is for
    // the tests' fake engine.
    let descriptors = protox::compile([predictkube], ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .build_transport(false)
        .compile_fds(descriptors)?;
    Ok(())
}
