//! `keda-rs dev`: keda-rs and a small Kubernetes in one process, on loopback, no cluster.
//!
//! What runs, in start order:
//! 1. memkube, the in-memory Kubernetes API server of `tests/memkube`, on `127.0.0.1:<free
//!    port>`, with keda-rs' CRDs installed.
//! 2. The workload stand-in ([`workloads`]): a Deployment's or StatefulSet's status follows the
//!    replicas its `/scale` is given, as if its pods started at once (no pods run).
//! 3. The operator's ScaledObject and ScaledJob controllers with their scale loops, as the
//!    `keda-operator` binary runs them (the library, in process).
//! 4. The activator with its report endpoint, and stand-in pods behind Services
//!    ([`http`]).
//! 5. The HPA controller ([`crate::hpa`]): Kubernetes' algorithm, reading each HPA's External
//!    metrics from the operator's scale loops in process (the call the operator's metric
//!    service answers the metrics-apiserver with: same values, fallback and
//!    `scalingModifiers`, without the TLS hops).
//! 6. The YAML files given, applied in order; then the kubeconfig is written to
//!    `<out>/kubeconfig` (for `kubectl` or any kube client) and its path printed.
//! 7. The live view ([`view`]), until Ctrl-C, `q`, or SIGTERM; then one chart per ScaledObject
//!    ([`chart`]).

pub mod apply;
pub mod chart;
pub mod http;
pub mod record;
pub mod state;
pub mod view;
pub mod workloads;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use keda_operator::metrics_service::{CurrentLoops, MetricValues};
use keda_operator::{ControllerConfig, ScaledObjectController, ScalerEnv};
use keda_scalers::pool::ClientPools;
use kube::Client;
use memkube::MemKube;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::hpa::{HpaController, HpaSettings};
use chart::Sample;
use state::ObjectView;

/// How `dev` runs.
#[derive(Clone, Debug)]
pub struct DevOptions {
    /// YAML files applied at start, in order.
    pub files: Vec<PathBuf>,
    /// Where the kubeconfig, the log and the charts are written.
    pub out_dir: PathBuf,
    /// The HPA controller's settings.
    pub hpa: HpaSettings,
    /// How often the view is refreshed (and the timeline sampled).
    pub refresh: Duration,
    /// Full-screen view (stdout is a terminal) or plain lines.
    pub tty: bool,
    /// Where the activator listens.
    pub activator_listen: std::net::SocketAddr,
    /// `--record FILE.csv`: where the session's values and replica timeline go ([`record`]).
    pub record: Option<PathBuf>,
}

/// What `dev` wrote when it stopped.
#[derive(Clone, Debug, Default)]
pub struct DevOutput {
    /// SVG and PNG chart per ScaledObject.
    pub charts: Vec<(PathBuf, PathBuf)>,
    /// With `--record`: the values and the replicas CSV per ScaledObject.
    pub records: Vec<(PathBuf, PathBuf)>,
}

/// Why `dev` stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum DevError {
    #[error("cannot create the output directory {path}: {source}")]
    OutDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot install the keda-rs CRDs into the in-memory API server: {0}")]
    Crds(#[source] memkube::Error),
    #[error("cannot listen on loopback for the in-memory API server: {0}")]
    Listen(#[source] std::io::Error),
    #[error("cannot write the kubeconfig {path}: {source}")]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Apply(#[from] apply::ApplyError),
    #[error(transparent)]
    Http(#[from] http::HttpError),
    #[error(transparent)]
    Chart(#[from] chart::ChartError),
    #[error("cannot write the record {path}: {source}")]
    Record {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write to standard output: {0}")]
    Stdout(#[source] std::io::Error),
}

/// The kubeconfig's file name inside the output directory.
pub const KUBECONFIG_FILE: &str = "kubeconfig";

/// Runs `dev` until `shutdown` is cancelled, then writes the charts (and the record); returns
/// their paths.
///
/// # Errors
/// See [`DevError`]: start-up failures, a file that cannot be applied, a chart that cannot be
/// written.
pub async fn run(options: DevOptions, shutdown: CancellationToken) -> Result<DevOutput, DevError> {
    std::fs::create_dir_all(&options.out_dir).map_err(|source| DevError::OutDir {
        path: options.out_dir.clone(),
        source,
    })?;
    // A kubeconfig of an earlier run names a server that is gone.
    let _ = std::fs::remove_file(options.out_dir.join(KUBECONFIG_FILE));
    let server = MemKube::new();
    for crd in keda_api::crd::all() {
        server.install_crd(&crd).map_err(DevError::Crds)?;
    }
    let loopback = server.serve_loopback().await.map_err(DevError::Listen)?;
    let client = server.client();
    let mut out = Output::new(options.tty);

    // Not a child of `shutdown`: the components keep running until the view has stopped
    // reading from them.
    let work = CancellationToken::new();
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(workloads::follow_replicas(client.clone(), work.clone()));
    tasks.spawn(http::follow_services(client.clone(), work.clone()));
    // The operator's `http` scalers and the report endpoint meet in these pools.
    let pools = ClientPools::new();
    let activator = http::start_activator(
        client.clone(),
        &pools,
        options.activator_listen,
        &work,
        &mut tasks,
    )
    .await?;
    let loops = start_operator(&client, pools, &work, &mut tasks);
    let values: Arc<dyn MetricValues> = Arc::new(loops);
    let hpa = HpaController::new(client.clone(), values.clone(), options.hpa);
    let observations = hpa.observations();
    tasks.spawn(hpa.run(work.clone()));

    // The files are applied before the kubeconfig is written: whoever waits for the file
    // finds the objects in.
    let mut applied_lines = Vec::new();
    for file in &options.files {
        for applied in apply::apply_file(&client, file).await? {
            info!(%applied, "applied");
            let line = format!("applied: {applied}");
            out.plain(&line)?;
            applied_lines.push(line);
        }
    }

    let kubeconfig = options.out_dir.join(KUBECONFIG_FILE);
    loopback
        .write_kubeconfig(&kubeconfig)
        .map_err(|source| DevError::Kubeconfig {
            path: kubeconfig.clone(),
            source,
        })?;
    let kubeconfig = std::fs::canonicalize(&kubeconfig).unwrap_or(kubeconfig);
    let mut header = vec![
        format!("keda-rs dev: API server {}", loopback.url()),
        format!("kubeconfig: {}", kubeconfig.display()),
        format!("  export KUBECONFIG={}", kubeconfig.display()),
        format!("activator: http://{activator}"),
        // dev is one person's sandbox: no host policy (docs/http.md#host-policy).
        "http hosts: any namespace may claim any host (no host policy, as --http-any-host)"
            .to_string(),
    ];
    for line in &header {
        out.plain(line)?;
    }
    header.extend(applied_lines);

    let mut recorder = options.record.clone().map(record::Recorder::new);
    let started = std::time::Instant::now();
    let mut timelines: BTreeMap<(String, String), Vec<Sample>> = BTreeMap::new();
    let mut ticks = tokio::time::interval(options.refresh);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = ticks.tick() => {}
        }
        let now = Timestamp::now();
        let views = state::gather(&client, &values, &observations, now).await;
        if let Some(recorder) = &mut recorder {
            recorder.sample(now, &views);
        }
        let t = started.elapsed().as_secs_f64();
        for v in &views {
            timelines
                .entry((v.namespace.clone(), v.name.clone()))
                .or_default()
                .push(sample_of(v, t));
        }
        out.show(&header, &views)?;
    }
    out.restore();
    work.cancel();
    while tasks.join_next().await.is_some() {}

    let mut charts = Vec::new();
    for ((namespace, name), samples) in &timelines {
        charts.push(chart::write_charts(
            &options.out_dir,
            namespace,
            name,
            samples,
        )?);
    }
    let records = match &recorder {
        Some(r) => r
            .write()
            .map_err(|(path, source)| DevError::Record { path, source })?,
        None => Vec::new(),
    };
    drop(loopback);
    Ok(DevOutput { charts, records })
}

/// Starts the ScaledObject and ScaledJob controllers; returns the scale loops the metric
/// values come from.
fn start_operator(
    client: &Client,
    pools: ClientPools,
    cancel: &CancellationToken,
    tasks: &mut tokio::task::JoinSet<()>,
) -> CurrentLoops {
    let config = ControllerConfig {
        env: ScalerEnv {
            pools,
            ..ScalerEnv::default()
        },
        retry_after_error: Duration::from_secs(2),
        // The activator's policy (`http::start_activator`): no host policy in dev.
        http_host_policy: keda_scalers::scalers::http::claims::HostPolicy::allow_all(),
        ..ControllerConfig::default()
    };
    let current = CurrentLoops::default();
    let controller = ScaledObjectController::new(client.clone(), config.clone());
    current.set(Some(controller.loops()));
    let token = cancel.clone();
    tasks.spawn(async move {
        if let Err(error) = controller.run(token).await {
            warn!(error = %keda_cli::one_line(&error), "the ScaledObject controller stopped");
        }
    });
    let jobs = keda_operator::scaled_job::leader_task(client.clone(), config);
    let token = cancel.clone();
    tasks.spawn(async move {
        if let Err(error) = jobs.run(token).await {
            warn!(error = %error, "the ScaledJob controller stopped");
        }
    });
    current
}

fn sample_of(v: &ObjectView, t: f64) -> Sample {
    let first = v.triggers.first();
    Sample {
        t,
        replicas: v.current.unwrap_or(0),
        value: first.and_then(|f| f.value),
        target: first.and_then(|f| f.target),
        activation: first.map_or(0.0, |f| f.activation),
    }
}

/// Where the view goes: plain lines (printed when an object's line changes) or a full-screen
/// frame.
struct Output {
    tty: bool,
    last: BTreeMap<(String, String), String>,
}

impl Output {
    fn new(tty: bool) -> Output {
        Output {
            tty,
            last: BTreeMap::new(),
        }
    }

    /// A start-up line (printed in both modes: the TTY frame repeats it in its header).
    fn plain(&mut self, line: &str) -> Result<(), DevError> {
        if self.tty {
            return Ok(());
        }
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{line}")
            .and_then(|()| stdout.flush())
            .map_err(DevError::Stdout)
    }

    fn show(&mut self, header: &[String], views: &[ObjectView]) -> Result<(), DevError> {
        let mut stdout = std::io::stdout().lock();
        if self.tty {
            return stdout
                .write_all(view::frame(header, views).as_bytes())
                .and_then(|()| stdout.flush())
                .map_err(DevError::Stdout);
        }
        for v in views {
            let line = view::plain_line(v);
            let key = (v.namespace.clone(), v.name.clone());
            if self.last.get(&key) != Some(&line) {
                let now = Timestamp::now().strftime("%H:%M:%S");
                writeln!(stdout, "{now} {line}").map_err(DevError::Stdout)?;
                self.last.insert(key, line);
            }
        }
        stdout.flush().map_err(DevError::Stdout)
    }

    fn restore(&mut self) {
        if self.tty {
            print!("\x1b[2J\x1b[H");
            let _ = std::io::stdout().flush();
        }
    }
}
