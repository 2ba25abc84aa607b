//! The keda-rs metrics-apiserver binary: flags in, servers out. See `--help`.

use std::process::ExitCode;

use keda_metrics_apiserver::{Args, run};
use tokio_util::sync::CancellationToken;

const BINARY: &str = "keda-metrics-apiserver";

/// A start-up failure (a bad flag, no cluster, an unusable file) is one line on standard error
/// naming the flag or what to fix; exit code 2 for flags, 1 otherwise.
#[tokio::main]
async fn main() -> ExitCode {
    let (args, warnings): (Args, _) = keda_cli::keda_flags::parse_keda_flags(
        BINARY,
        &keda_metrics_apiserver::keda_flags::table(),
    );
    let filter =
        keda_cli::logging::effective_filter(std::env::var("RUST_LOG").ok(), &args.log_level);
    if let Err(error) =
        keda_cli::logging::init_logging(args.log_format, args.log_time_encoding, &filter)
    {
        return keda_cli::fail(BINARY, &error);
    }
    for warning in &warnings {
        tracing::warn!("{warning}");
    }
    // kube's client and ours both use rustls on ring; make it the process default too.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    tokio::spawn(async move {
        keda_cli::shutdown_signal().await;
        stop.cancel();
    });
    match run(args, cancel).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => keda_cli::fail(BINARY, &error),
    }
}
