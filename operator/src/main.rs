//! `keda-operator`: the keda-rs operator binary. It only wires the library together; see
//! `docs/operations.md` for flags, environment variables, ports and leader election.

use std::process::ExitCode;
use std::sync::Arc;

use keda_operator::config::{
    ClusterError, ConfigError, ProcessEnv, Settings, build_client, check_reachable, infer_config,
};
use keda_operator::run::{LeaderTask, RunError, Runtime, run};
use keda_operator::telemetry::{LoggingError, Metrics, init_logging};
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Why the binary exits with an error; printed as one line on standard error.
#[derive(Debug, thiserror::Error)]
enum MainError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Logging(#[from] LoggingError),
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error(transparent)]
    Run(#[from] RunError),
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("cannot listen for SIGTERM: {0}")]
    Signal(#[source] std::io::Error),
}

fn main() -> ExitCode {
    let settings = match Settings::from_process() {
        Ok(settings) => settings,
        // --help, --version and flag errors print clap's text and exit 0 or 2.
        Err(ConfigError::Flags(error)) => error.exit(),
        Err(error) => return fail(&error.into()),
    };
    match start(&settings) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(&error),
    }
}

fn fail(error: &MainError) -> ExitCode {
    let text = error.to_string();
    eprintln!(
        "keda-operator: {}",
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    );
    ExitCode::FAILURE
}

fn start(settings: &Settings) -> Result<(), MainError> {
    init_logging(settings.log_format, &settings.log_filter)?;
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(MainError::Runtime)?
        .block_on(operate(settings))
}

async fn operate(settings: &Settings) -> Result<(), MainError> {
    let config = infer_config(&ProcessEnv).await?;
    let url = config.cluster_url.to_string();
    let client = build_client(config, settings.kube_api_qps, settings.kube_api_burst)?;
    check_reachable(&client, &url).await?;
    info!(
        api_server = %url,
        watch_namespaces = ?settings.watch_namespaces,
        qps = settings.kube_api_qps,
        burst = settings.kube_api_burst,
        version = env!("CARGO_PKG_VERSION"),
        "keda-operator starting"
    );

    let shutdown = CancellationToken::new();
    watch_signals(shutdown.clone())?;

    let runtime = Runtime::new(client, Metrics::new());
    // Leader-only components. The ScaledObject controller and its scale loops are added here
    // as they land (one line each).
    let tasks: Vec<Arc<dyn LeaderTask>> = vec![keda_operator::scaled_job::leader_task(
        settings,
        runtime.client.clone(),
    )];
    run(settings, runtime, tasks, shutdown).await?;
    Ok(())
}

/// Cancels `shutdown` on the first SIGTERM or SIGINT; a second one exits at once.
fn watch_signals(shutdown: CancellationToken) -> Result<(), MainError> {
    let mut terminate = signal(SignalKind::terminate()).map_err(MainError::Signal)?;
    let mut interrupt = signal(SignalKind::interrupt()).map_err(MainError::Signal)?;
    tokio::spawn(async move {
        tokio::select! {
            _ = terminate.recv() => info!(signal = "SIGTERM", "shutting down"),
            _ = interrupt.recv() => info!(signal = "SIGINT", "shutting down"),
        }
        shutdown.cancel();
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
        warn!("second signal: exiting without finishing the shutdown");
        std::process::exit(1);
    });
    Ok(())
}
