//! `keda-operator`: the keda-rs operator binary. It only wires the library together; see
//! `docs/operations.md` for flags, environment variables, ports and leader election.

use std::process::ExitCode;
use std::sync::Arc;

use keda_operator::cloud_events::{
    self, CloudEventInput, CloudEvents, EmitterConfig, EmitterMetrics,
};
use keda_operator::cluster_view::KubeClusterView;
use keda_operator::config::{
    ClusterError, ConfigError, ProcessEnv, Settings, build_client, check_reachable, infer_config,
};
use keda_operator::explain::auth::KubeAuthorizer;
use keda_operator::explain::server::ExplainService;
use keda_operator::leader::LeaseConfig;
use keda_operator::metrics_service::{
    CurrentLoops, MetricsService, MetricsServiceOptions, serve_on, serve_with_secrets,
};
use keda_operator::run::{FnTask, LeaderTask, RunError, Runtime, TaskError, run};
use keda_operator::shards::Membership;
use keda_operator::telemetry::{LoggingError, Metrics, init_logging, otel};
use keda_operator::{ControllerConfig, ScaledObjectController};
use keda_scalers::Clock;
use keda_scalers::cluster::ClusterHandle;
use keda_scalers::pool::ClientPools;
use keda_scalers::scalers::http::hub::ActivatorHub;
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

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
    #[error(transparent)]
    Controller(#[from] keda_operator::Error),
}

fn main() -> ExitCode {
    let settings = match Settings::from_process() {
        Ok(settings) => settings,
        // --help and --version print clap's text and exit 0; a bad flag is one line, exit 2.
        Err(ConfigError::Flags(error)) => keda_cli::exit_on_flag_error("keda-operator", &error),
        Err(error) => return fail(&error.into()),
    };
    match start(&settings) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(&error),
    }
}

fn fail(error: &MainError) -> ExitCode {
    keda_cli::fail("keda-operator", error)
}

fn start(settings: &Settings) -> Result<(), MainError> {
    init_logging(
        settings.log_format,
        settings.keda.log_time_encoding,
        &settings.log_filter,
    )?;
    for warning in &settings.keda.warnings {
        warn!("{warning}");
    }
    keda_tls::policy::install_service_policy(settings.keda.service_tls.clone());
    // --ca-dir: every scaler trusts these CAs too.
    let ca = keda_scalers::client_policy::read_ca_dirs(&settings.keda.ca_dirs);
    for skipped in &ca.skipped {
        warn!("--ca-dir: {skipped}");
    }
    keda_scalers::client_policy::install(keda_scalers::client_policy::ClientPolicy {
        extra_roots: ca.certs,
        ..settings.keda.client_policy.clone()
    });
    // reqwest-based scalers build rustls clients from the process-wide provider: ring, never
    // aws-lc. An error only means a provider is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(MainError::Runtime)?
        .block_on(operate(settings))
}

async fn operate(settings: &Settings) -> Result<(), MainError> {
    let config = match &settings.keda.kubeconfig {
        Some(path) => {
            keda_cli::cluster::config_from_kubeconfig(path, "named by --kubeconfig").await?
        }
        None => infer_config(&ProcessEnv).await?,
    };
    let url = config.cluster_url.to_string();
    let metrics = Metrics::new();
    if settings.high_cardinality_metrics_labels {
        metrics.enable_high_cardinality_labels();
    }
    // Four clients, four budgets, so no kind of work can starve another:
    // - Events, with a token bucket of their own, as client-go's event broadcaster (and so KEDA)
    //   has: they never make a scaling write wait;
    // - the Lease, sized from the retry period: nothing can delay a renewal;
    // - the explain endpoint, whose every review is admitted by its own non-blocking budget
    //   (--explain-kube-api-qps/-burst) first, so it needs no limiter here: a flood of
    //   explain requests is refused with 429, never queued in front of scaling;
    // - the controllers, scale loops and everything else (--kube-api-qps/-burst).
    let events_client = build_client(
        config.clone(),
        settings.kube_api_qps,
        settings.kube_api_burst,
        &metrics,
    )?;
    let (lease_qps, lease_burst) = settings
        .leader_election
        .as_ref()
        .or(settings.shards.as_ref().map(|s| &s.lease))
        .map_or((1.0, 1), LeaseConfig::client_budget);
    let lease_client = build_client(config.clone(), lease_qps, lease_burst, &metrics)?;
    let explain_client = build_client(config.clone(), 0.0, 0, &metrics)?;
    let client = build_client(
        config,
        settings.kube_api_qps,
        settings.kube_api_burst,
        &metrics,
    )?;
    check_reachable(&client, &url).await?;
    info!(
        api_server = %url,
        watch_namespaces = ?settings.watch_namespaces,
        qps = settings.kube_api_qps,
        burst = settings.kube_api_burst,
        http_hosts = %settings.http_host_policy.summary(),
        version = env!("CARGO_PKG_VERSION"),
        "keda-operator starting"
    );

    let shutdown = CancellationToken::new();
    watch_signals(shutdown.clone())?;
    // --enable-opentelemetry-metrics: the same series over OTLP, from every replica as the
    // Prometheus endpoint serves them (a follower has only keda.build.info).
    let otel = settings
        .keda
        .opentelemetry
        .clone()
        .and_then(|otlp| match otel::Exporter::new(otlp) {
            Ok(exporter) => Some(exporter),
            Err(e) => {
                error!(error = %e, "OpenTelemetry metrics are not exported");
                None
            }
        })
        .map(|exporter| tokio::spawn(otel::run(metrics.clone(), exporter, shutdown.clone())));

    // --shards=auto: the membership (its own client: the Lease's) decides what this replica
    // owns; the controllers, loops and services ask it before every write.
    let membership = match &settings.shards {
        Some(shards) => Some(
            Membership::new(lease_client.clone(), shards.clone())
                .map_err(RunError::from)?
                .with_metrics(metrics.clone()),
        ),
        None => None,
    };
    let pools =
        ClientPools::new().with_answer_bytes_per_namespace(settings.answer_bytes_per_namespace);
    let mut controller = ControllerConfig {
        events_client: Some(events_client),
        shards: membership
            .as_ref()
            .map(Membership::shards)
            .unwrap_or_default(),
        ..ControllerConfig::from_settings(settings, metrics.clone(), pools.clone())
    };
    // One pod and one EndpointSlice watch for both controllers, started on first use.
    controller.env.cluster = ClusterHandle::new(Arc::new(KubeClusterView::new(
        client.clone(),
        settings.watch_namespaces.clone(),
    )));
    // The reconcilers' events also go to the CloudEventSources, through the emitter task.
    let (cloud_events, cloud_event_input) = CloudEvents::channel();
    controller.cloud_events = cloud_events;
    let loops = CurrentLoops::default();
    // Both controllers share the client pools, the metrics and the resolver's scope.
    let scaled_jobs = keda_operator::scaled_job::leader_task(client.clone(), controller.clone());
    let auth_events = trigger_authentication_events(client.clone(), controller.clone());
    let mut tasks: Vec<Arc<dyn LeaderTask>> = vec![
        scaled_object_controller(client.clone(), controller, loops.clone()),
        auth_events,
        scaled_jobs,
        cloud_event_emitter(
            client.clone(),
            settings,
            cloud_event_input,
            EmitterMetrics::registered(&metrics),
        ),
    ];
    if let Some(addr) = settings.explain_addr {
        let authorizer =
            KubeAuthorizer::with_budget(explain_client, settings.explain_review_budget);
        tasks.push(explain_endpoint(addr, Arc::new(authorizer), loops.clone()));
    }
    if let Some(addr) = settings.metrics_service_addr {
        tasks.push(metric_service(
            addr,
            settings,
            client.clone(),
            (loops, pools),
            metrics.clone(),
        ));
    }
    let runtime = Runtime {
        membership,
        ..Runtime::new(lease_client, metrics)
    };
    let result = run(settings, runtime, tasks, shutdown.clone()).await;
    if let Some(otel) = otel {
        // The last export, bounded by OTEL_METRIC_EXPORT_TIMEOUT and 5 s.
        shutdown.cancel();
        let _ = otel.await;
    }
    result?;
    Ok(())
}

/// The ScaledObject controller and its scale loops, publishing the loops for the metric
/// service while they run.
fn scaled_object_controller(
    client: kube::Client,
    config: ControllerConfig,
    loops: CurrentLoops,
) -> Arc<dyn LeaderTask> {
    Arc::new(FnTask::new("scaledobject-controller", move |cancel| {
        let controller = ScaledObjectController::new(client.clone(), config.clone());
        let loops = loops.clone();
        async move {
            loops.set(Some(controller.loops()));
            let result = controller.run(cancel).await;
            loops.set(None);
            result.map_err(|e| Box::new(e) as TaskError)
        }
    }))
}

/// KEDA's TriggerAuthentication and ClusterTriggerAuthentication Events (Added, Updated,
/// Deleted), as its controllers of those kinds publish them while leading.
fn trigger_authentication_events(
    client: kube::Client,
    config: ControllerConfig,
) -> Arc<dyn LeaderTask> {
    Arc::new(FnTask::new("triggerauthentication-events", move |cancel| {
        let run = keda_operator::auth_events::run(client.clone(), config.clone(), cancel);
        async move {
            run.await;
            Ok(())
        }
    }))
}

/// The CloudEventSources' emitter: sends the events the controllers hand it.
fn cloud_event_emitter(
    client: kube::Client,
    settings: &Settings,
    input: CloudEventInput,
    metrics: EmitterMetrics,
) -> Arc<dyn LeaderTask> {
    let config = EmitterConfig {
        cluster_name: settings.k8s_cluster_name.clone(),
        scope: settings.watch_namespaces.clone(),
        ..EmitterConfig::new(&settings.pod_namespace)
    };
    Arc::new(FnTask::new("cloudevent-emitter", move |cancel| {
        let run = cloud_events::run(
            client.clone(),
            config.clone(),
            input.clone(),
            metrics.clone(),
            cancel,
        );
        async move { run.await.map_err(|e| Box::new(e) as TaskError) }
    }))
}

/// The metric service on `addr` (mutual TLS), answering from the current scale loops and
/// accepting the activators' report streams for the `http` scalers. Its certificates come
/// from the files of the `--metrics-service-*-file` flags, or, when none of them exists, from
/// keda-rs' Secrets in the operator's namespace, which it creates and renews.
fn metric_service(
    addr: std::net::SocketAddr,
    settings: &Settings,
    client: kube::Client,
    (loops, pools): (CurrentLoops, ClientPools),
    metrics: Metrics,
) -> Arc<dyn LeaderTask> {
    let files = settings.metrics_service_tls.clone();
    let namespace = settings.pod_namespace.clone();
    let reload_interval = settings.cert_reload_interval;
    Arc::new(FnTask::new("metric-service", move |cancel| {
        let files = files.clone();
        let loops = loops.clone();
        let pools = pools.clone();
        let metrics = metrics.clone();
        let issuer = keda_tls::Issuer::new(client.clone(), &namespace);
        async move {
            let hub = ActivatorHub::shared(&pools, &Clock::system()).await;
            let service = MetricsService::new(Arc::new(loops), MetricsServiceOptions::default())
                .with_reports(hub)
                .with_metrics(metrics);
            let served = if files.none_exist() {
                serve_with_secrets(addr, issuer, reload_interval, service, cancel).await
            } else {
                serve_on(addr, &files, reload_interval, service, cancel).await
            };
            served.map_err(|e| Box::new(e) as TaskError)
        }
    }))
}

/// The explain endpoint on `addr`: one object's live state from the current scale loops, for
/// callers whose token the API server accepts and who may `get` the object (`authorizer`,
/// which keeps what it learnt across leaderships). A port that cannot be bound turns the
/// endpoint off with one warning: explaining must never stop scaling.
fn explain_endpoint(
    addr: std::net::SocketAddr,
    authorizer: Arc<KubeAuthorizer>,
    loops: CurrentLoops,
) -> Arc<dyn LeaderTask> {
    Arc::new(FnTask::new("explain-endpoint", move |cancel| {
        let service = ExplainService::new(Arc::new(loops.clone()), authorizer.clone());
        async move {
            match keda_operator::explain::server::bind(addr).await {
                Ok(listener) => service.serve(listener, cancel).await,
                Err(error) => {
                    warn!(%error, "the explain endpoint is off");
                    cancel.cancelled().await;
                }
            }
            Ok(())
        }
    }))
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
