//! Prints the Secrets holding the certificates of the mutual TLS between the keda-rs operator's
//! metric service, the metrics-apiserver and the activators: a fresh CA and one certificate per
//! identity, each in its own `kubernetes.io/tls` Secret (see `docs/operations.md`,
//! Certificates). The operator creates the same Secrets by itself when they do not exist; this
//! command is for installs that keep them in git or create them before the operator runs.
//!
//! ```text
//! keda-rs-certs --namespace keda | kubectl apply -f -
//! ```

use std::process::ExitCode;

use clap::Parser;

/// Generates the Secrets keda-rs-certs (CA and the operator's serving certificate),
/// keda-rs-metrics-apiserver-certs and keda-rs-activator-certs, as one JSON List for
/// `kubectl apply -f -`.
#[derive(Parser)]
#[command(name = "keda-rs-certs", version, about)]
struct Args {
    /// The namespace keda-rs is installed in: where the Secrets go, and the namespace of the
    /// Service names the certificates carry.
    #[arg(long, default_value = "keda")]
    namespace: String,
}

fn main() -> ExitCode {
    let args: Args = keda_cli::parse_flags("keda-rs-certs");
    let secrets = match keda_tls::secrets::fresh_secrets(&args.namespace, jiff::Timestamp::now()) {
        Ok(secrets) => secrets,
        Err(error) => return keda_cli::fail("keda-rs-certs", &error),
    };
    let list = serde_json::json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": secrets,
    });
    match serde_json::to_string_pretty(&list) {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(error) => keda_cli::fail("keda-rs-certs", &error),
    }
}
