//! The subcommands of `keda-rs`, their flags, and how each is started.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use keda_scalers::scalers::http::GoDuration;
use tokio_util::sync::CancellationToken;

use crate::dev::{DevError, DevOptions};
use crate::explain::{ExplainArgs, ExplainError};
use crate::hpa::HpaSettings;

/// The binary's name in messages.
pub const BINARY: &str = "keda-rs";

const ENV_HELP: &str = "\
Environment:
  RUST_LOG   Log filter of `dev`'s log file [default: info]

See docs/dev.md.";

/// `keda-rs`.
#[derive(Debug, clap::Parser)]
#[command(
    name = "keda-rs",
    version,
    about = "keda-rs: KEDA-compatible event-driven autoscaling",
    after_help = ENV_HELP
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Run keda-rs with an in-memory Kubernetes API, an HPA and a live view on loopback: no
    /// cluster needed. Applies the YAML files given (ScaledObjects, Deployments, ...).
    #[command(after_help = ENV_HELP)]
    Dev(DevArgs),
    /// Why a ScaledObject has the replicas it has: its triggers' values, targets and activity,
    /// fallback, pause, cooldown and what the HPA computes, from the operator's live state.
    Explain(ExplainArgs),
    /// Replay a metric history (CSV `time,trigger,value`, or Prometheus range queries) through
    /// the operator's scale decision and the HPA: replica timeline, figures, charts;
    /// `--compare` two versions. See docs/simulate.md.
    Simulate(SimulateArgs),
}

/// `keda-rs simulate` flags.
#[derive(Debug, clap::Args)]
pub struct SimulateArgs {
    /// YAML file with one or more ScaledObjects (multi-document).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The metric history: CSV with the header `time,trigger,value` (RFC 3339 time; trigger
    /// by name or index). With --prometheus, the history of the other triggers.
    #[arg(long, value_name = "CSV", required_unless_present = "prometheus")]
    pub values: Option<PathBuf>,
    /// Read the history of `prometheus` triggers from this Prometheus: each trigger's own
    /// query as a range query (/api/v1/query_range).
    #[arg(long, value_name = "URL")]
    pub prometheus: Option<String>,
    /// With --prometheus: how far back the history goes (s, m, h, d, w: 7d, 36h).
    #[arg(
        long,
        default_value = "7d",
        requires = "prometheus",
        value_parser = crate::simulate::prometheus::parse_span
    )]
    pub range: jiff::SignedDuration,
    /// With --prometheus: the time between two samples.
    #[arg(
        long,
        default_value = "30s",
        requires = "prometheus",
        value_parser = crate::simulate::prometheus::parse_span
    )]
    pub step: jiff::SignedDuration,
    /// With --prometheus: when the history ends (RFC 3339) [default: now].
    #[arg(long, value_name = "TIME", requires = "prometheus")]
    pub end: Option<jiff::Timestamp>,
    /// Another version of the objects (same namespace and name, or the only object of each
    /// file): both replay the same history; figures side by side, one chart with both
    /// timelines, the other version's `time,replicas` in `<namespace>-<name>.compare.csv`.
    #[arg(long, value_name = "OTHER.yaml")]
    pub compare: Option<PathBuf>,
    /// Where `<namespace>-<name>.csv`, `.svg` and `.png` are written.
    #[arg(long, default_value = "keda-rs-simulate")]
    pub out: PathBuf,
    /// The target's replica count when the history starts.
    #[arg(long, default_value_t = 0)]
    pub replicas: i32,
    /// The HPA's sync period (--horizontal-pod-autoscaler-sync-period).
    #[arg(long, default_value = "15s", value_parser = positive_duration)]
    pub hpa_sync_period: Duration,
    /// The HPA's tolerance (--horizontal-pod-autoscaler-tolerance).
    #[arg(long, default_value_t = 0.1, value_parser = tolerance)]
    pub hpa_tolerance: f64,
    /// The HPA's default scale-down stabilization window
    /// (--horizontal-pod-autoscaler-downscale-stabilization).
    #[arg(long, default_value = "5m", value_parser = duration)]
    pub hpa_downscale_stabilization: Duration,
}

/// `keda-rs dev` flags.
#[derive(Debug, clap::Args)]
pub struct DevArgs {
    /// YAML files to apply at start (multi-document; KEDA's YAML as it is).
    #[arg(value_name = "FILES")]
    pub files: Vec<PathBuf>,
    /// Where the kubeconfig, the log and the charts are written.
    #[arg(long, env = "KEDA_RS_DEV_OUT", default_value = "keda-rs-dev")]
    pub out: PathBuf,
    /// The HPA's sync period (kube-controller-manager's
    /// --horizontal-pod-autoscaler-sync-period).
    #[arg(long, default_value = "15s", value_parser = positive_duration)]
    pub hpa_sync_period: Duration,
    /// The HPA's tolerance (--horizontal-pod-autoscaler-tolerance).
    #[arg(long, default_value_t = 0.1, value_parser = tolerance)]
    pub hpa_tolerance: f64,
    /// The HPA's default scale-down stabilization window, used when an HPA's behavior sets none
    /// (--horizontal-pod-autoscaler-downscale-stabilization).
    #[arg(long, default_value = "5m", value_parser = duration)]
    pub hpa_downscale_stabilization: Duration,
    /// How often the view is refreshed and the timeline sampled.
    #[arg(long, default_value = "1s", value_parser = positive_duration)]
    pub refresh: Duration,
    /// Where the activator (the HTTP path of `http` triggers) listens.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub activator_listen: std::net::SocketAddr,
    /// Plain lines instead of the full-screen view, even on a terminal.
    #[arg(long)]
    pub plain: bool,
    /// Record the session for `keda-rs simulate`: the triggers' values (`time,trigger,value`)
    /// to FILE and the replica timeline (`time,replicas`) beside it, written at exit.
    #[arg(long, value_name = "FILE.csv")]
    pub record: Option<PathBuf>,
}

/// The longest duration a flag accepts.
const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);

fn duration(raw: &str) -> Result<Duration, String> {
    let d = GoDuration::parse(raw)
        .map(|d| d.0)
        .ok_or_else(|| format!("\"{raw}\" is not a duration such as 500ms, 5s or 1m"))?;
    if d > MAX_DURATION {
        return Err(format!("\"{raw}\" is longer than 24h"));
    }
    Ok(d)
}

fn positive_duration(raw: &str) -> Result<Duration, String> {
    match duration(raw)? {
        Duration::ZERO => Err(format!("\"{raw}\" is not more than zero")),
        positive => Ok(positive),
    }
}

fn tolerance(raw: &str) -> Result<f64, String> {
    match raw.trim().parse::<f64>() {
        Ok(t) if (0.0..=1.0).contains(&t) => Ok(t),
        _ => Err(format!("\"{raw}\" is not a number from 0 to 1")),
    }
}

/// Why a subcommand failed; printed as one line.
#[derive(Debug, thiserror::Error)]
enum CliError {
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("cannot create the --out directory {path}: {source}")]
    OutDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot open the log file {path}: {source}")]
    Log {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot listen for signals: {0}")]
    Signal(#[source] std::io::Error),
    #[error("cannot set up the terminal: {0}")]
    Terminal(#[source] std::io::Error),
    #[error("{0}")]
    Flag(String),
    #[error(transparent)]
    Dev(#[from] DevError),
    #[error(transparent)]
    Explain(#[from] ExplainError),
    #[error(transparent)]
    Simulate(#[from] crate::simulate::SimulateError),
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> ExitCode {
    let result = match cli.command {
        Command::Dev(args) => dev(args),
        Command::Explain(args) => explain(args),
        Command::Simulate(args) => simulate(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => keda_cli::fail(BINARY, &error),
    }
}

fn dev(args: DevArgs) -> Result<(), CliError> {
    let tty = !args.plain && std::io::stdout().is_terminal();
    std::fs::create_dir_all(&args.out).map_err(|source| CliError::OutDir {
        path: args.out.clone(),
        source,
    })?;
    let log_path = args.out.join("keda-rs-dev.log");
    let log = std::fs::File::create(&log_path).map_err(|source| CliError::Log {
        path: log_path.clone(),
        source,
    })?;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // The log goes to a file: the view owns the terminal.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(std::sync::Mutex::new(log))
        .try_init();
    // Scalers build rustls clients from the process-wide provider: ring, as the operator does.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let options = DevOptions {
        files: args.files,
        out_dir: args.out,
        hpa: HpaSettings {
            sync_period: args.hpa_sync_period,
            tolerance: args.hpa_tolerance,
            downscale_stabilization_seconds: i32::try_from(
                args.hpa_downscale_stabilization.as_secs(),
            )
            .unwrap_or(i32::MAX),
        },
        refresh: args.refresh,
        tty,
        activator_listen: args.activator_listen,
        record: args.record,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(CliError::Runtime)?;
    let charts = runtime.block_on(async move {
        let shutdown = CancellationToken::new();
        watch_signals(shutdown.clone())?;
        let terminal = if tty {
            Some(Terminal::enter(shutdown.clone()).map_err(CliError::Terminal)?)
        } else {
            read_quit_lines(shutdown.clone());
            None
        };
        let charts = crate::dev::run(options, shutdown).await;
        // The terminal is restored before anything more is printed.
        drop(terminal);
        Ok::<_, CliError>(charts?)
    })?;
    for (svg, png) in &charts.charts {
        println!("chart: {} {}", svg.display(), png.display());
    }
    for (values, replicas) in &charts.records {
        println!("record: {} {}", values.display(), replicas.display());
    }
    Ok(())
}

/// Where a run's histories come from: the CSV, Prometheus, or both.
struct Histories {
    csv: Option<(PathBuf, String)>,
    prometheus: Option<(
        crate::simulate::prometheus::RangeSpec,
        keda_scalers::http_client::HttpClient,
        tokio::runtime::Runtime,
    )>,
}

impl Histories {
    fn of(args: &SimulateArgs) -> Result<Histories, CliError> {
        use crate::simulate as sim;
        let csv = match &args.values {
            Some(path) => Some((path.clone(), sim::read_bounded(path)?)),
            None => None,
        };
        let prometheus = match &args.prometheus {
            None => None,
            Some(url) => {
                let spec = sim::prometheus::RangeSpec::ending(
                    url,
                    args.end.unwrap_or_else(jiff::Timestamp::now),
                    args.range,
                    args.step,
                )
                .map_err(CliError::Flag)?;
                // The scalers' HTTP client builds rustls from the process-wide provider.
                let _ = rustls::crypto::ring::default_provider().install_default();
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(CliError::Runtime)?;
                let client = runtime.block_on(async { sim::prometheus::client(&spec) })?;
                Some((spec, client, runtime))
            }
        };
        Ok(Histories { csv, prometheus })
    }

    /// The history of `object`; with --prometheus, also written to `<out>/<ns>-<name>.history.csv`.
    fn points(
        &self,
        object: &crate::simulate::SimObject,
        out: &std::path::Path,
    ) -> Result<Vec<crate::simulate::Point>, CliError> {
        use crate::simulate as sim;
        let mut points = match &self.csv {
            Some((path, text)) => sim::parse_csv(path, text, object)?,
            None => Vec::new(),
        };
        if let Some((spec, client, runtime)) = &self.prometheus {
            if self.csv.is_none()
                && let Some(t) = object.triggers.iter().find(|t| t.prometheus.is_none())
            {
                return Err(sim::SimulateError::NoHistory {
                    namespace: object.namespace.clone(),
                    name: object.name.clone(),
                    trigger: t.name.clone(),
                    kind: t.kind.clone(),
                }
                .into());
            }
            let fetched = runtime.block_on(sim::prometheus::fetch(object, spec, client))?;
            let path = sim::write_history(out, object, &fetched)?;
            println!("  history: {}", path.display());
            points.extend(fetched);
            points.sort_by_key(|p| p.time);
        }
        Ok(points)
    }
}

fn simulate(args: SimulateArgs) -> Result<(), CliError> {
    use crate::simulate as sim;
    let yaml = sim::read_bounded(&args.file)?;
    let objects = sim::parse_objects(&args.file, &yaml)?;
    let histories = Histories::of(&args)?;
    let hpa = HpaSettings {
        sync_period: args.hpa_sync_period,
        tolerance: args.hpa_tolerance,
        downscale_stabilization_seconds: i32::try_from(args.hpa_downscale_stabilization.as_secs())
            .unwrap_or(i32::MAX),
    };
    let run = |object: &sim::SimObject| {
        histories
            .points(object, &args.out)
            .map(|points| sim::simulate(object, &points, &hpa, args.replicas.max(0)))
    };
    let Some(other_path) = &args.compare else {
        for object in &objects {
            let timeline = run(object)?;
            print!("{}", sim::render_summary(object, &timeline));
            for path in sim::write_outputs(&args.out, object, &timeline)? {
                println!("  wrote {}", path.display());
            }
        }
        return Ok(());
    };
    let other_yaml = sim::read_bounded(other_path)?;
    let others = sim::parse_objects(other_path, &other_yaml)?;
    let name_of = |p: &std::path::Path| {
        p.file_name().map_or_else(
            || p.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    };
    let (mut first_name, mut other_name) = (name_of(&args.file), name_of(other_path));
    if first_name == other_name {
        // Two files of one name in different directories: the paths tell them apart.
        (first_name, other_name) = (
            args.file.display().to_string(),
            other_path.display().to_string(),
        );
    }
    for (a, b) in sim::pair_versions(objects, others, other_path)? {
        let (ta, tb) = (run(&a)?, run(&b)?);
        let first = sim::Version {
            name: &first_name,
            object: &a,
            timeline: &ta,
        };
        let second = sim::Version {
            name: &other_name,
            object: &b,
            timeline: &tb,
        };
        print!("{}", sim::render_compare(first, second));
        for path in sim::write_compare_outputs(&args.out, first, second)? {
            println!("  wrote {}", path.display());
        }
    }
    Ok(())
}

fn explain(args: ExplainArgs) -> Result<(), CliError> {
    // The kube client's rustls uses the process-wide provider: ring.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(CliError::Runtime)?;
    Ok(runtime.block_on(crate::explain::run(args))?)
}

/// SIGINT and SIGTERM stop `dev` (it then writes its charts); a second one exits at once.
fn watch_signals(shutdown: CancellationToken) -> Result<(), CliError> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate()).map_err(CliError::Signal)?;
    let mut interrupt = signal(SignalKind::interrupt()).map_err(CliError::Signal)?;
    tokio::spawn(async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
        shutdown.cancel();
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
        std::process::exit(130);
    });
    Ok(())
}

/// Without a terminal: a line `q` on standard input stops `dev`.
fn read_quit_lines(shutdown: CancellationToken) {
    std::thread::spawn(move || {
        let mut line = String::new();
        loop {
            line.clear();
            match std::io::stdin().read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) if line.trim() == "q" => {
                    shutdown.cancel();
                    return;
                }
                Ok(_) => {}
            }
        }
    });
}

/// The terminal in raw mode on the alternate screen while `dev` runs; restored on drop. A
/// thread reads keys: `q`, Esc or Ctrl-C stop `dev`.
struct Terminal;

impl Terminal {
    fn enter(shutdown: CancellationToken) -> std::io::Result<Terminal> {
        use crossterm::event::{self, Event, KeyCode, KeyModifiers};
        crossterm::terminal::enable_raw_mode()?;
        print!("\x1b[?1049h\x1b[?25l");
        std::thread::spawn(move || {
            while !shutdown.is_cancelled() {
                match event::poll(Duration::from_millis(100)) {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(_) => return,
                }
                let Ok(Event::Key(key)) = event::read() else {
                    continue;
                };
                let quit = matches!(key.code, KeyCode::Char('q') | KeyCode::Esc)
                    || (key.code == KeyCode::Char('c')
                        && key.modifiers.contains(KeyModifiers::CONTROL));
                if quit {
                    shutdown.cancel();
                    return;
                }
            }
        });
        Ok(Terminal)
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        print!("\x1b[?25h\x1b[?1049l");
        let _ = crossterm::terminal::disable_raw_mode();
        use std::io::Write;
        let _ = std::io::stdout().flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn dev_needs_no_flag() {
        let cli = Cli::try_parse_from(["keda-rs", "dev"]).expect("parses");
        let Command::Dev(args) = cli.command else {
            panic!("dev parses as dev");
        };
        assert!(args.files.is_empty());
        assert_eq!(args.hpa_sync_period, Duration::from_secs(15));
        assert_eq!(args.hpa_downscale_stabilization, Duration::from_secs(300));
    }

    #[test]
    fn simulate_needs_a_history_and_range_flags_need_prometheus() {
        let cli = Cli::try_parse_from(["keda-rs", "simulate", "so.yaml", "--values", "v.csv"])
            .expect("parses");
        let Command::Simulate(args) = cli.command else {
            panic!("simulate parses as simulate");
        };
        assert_eq!(args.range, jiff::SignedDuration::from_secs(7 * 86_400));
        assert_eq!(args.step, jiff::SignedDuration::from_secs(30));
        assert!(Cli::try_parse_from(["keda-rs", "simulate", "so.yaml"]).is_err());
        for flag in [
            ["--range", "1d"],
            ["--step", "1m"],
            ["--end", "2026-01-01T00:00:00Z"],
        ] {
            let mut argv = vec!["keda-rs", "simulate", "so.yaml", "--values", "v.csv"];
            argv.extend(flag);
            assert!(
                Cli::try_parse_from(&argv).is_err(),
                "{flag:?} without --prometheus"
            );
            argv.extend(["--prometheus", "http://127.0.0.1:9090"]);
            assert!(
                Cli::try_parse_from(&argv).is_ok(),
                "{flag:?} with --prometheus"
            );
        }
    }

    #[test]
    fn a_bad_duration_is_one_line_naming_the_flag() {
        let error = Cli::try_parse_from(["keda-rs", "dev", "--hpa-sync-period", "soon"])
            .expect_err("bad duration");
        let line = keda_cli::flag_error_line(BINARY, &error).expect("an error");
        assert!(line.contains("--hpa-sync-period"), "{line}");
        assert!(!line.contains('\n'), "{line}");
    }
}
