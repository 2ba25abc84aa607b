//! The activator's cost as a proxy, and its cold start (issue 8).
//!
//! Throughput: wrk (`-t1`, HTTP/1.1 keep-alive, `--latency`) drives, on loopback and with the
//! same settings, (1) a direct connection to a small backend (the limit), (2) the release
//! `keda-activator` binary in front of it, configured by a ScaledObject `http` trigger through
//! the in-memory API server, with request counting and a `containerConcurrency` limit on, and
//! (3) nginx as a reverse proxy with upstream keep-alive. Runs are interleaved (each round
//! goes through every connection count and every target, starting with a different target each
//! round) and repeated. The backend is this binary re-executed in backend mode (one thread,
//! ~100-byte answers), so its CPU is not counted as the proxy's. Per run: throughput, p50 and
//! p99 latency (wrk), the proxy's CPU time per request (utime + stime from `/proc/<pid>/stat`,
//! nginx's master and workers summed; utime alone is shown as its user-space part) and its
//! peak RSS (`VmRSS`, sampled every 100 ms); idle
//! RSS before and after the load. Printed: medians over the rounds, and ratios to direct and
//! to nginx taken round by round (the runs of a pair are back to back) and then their median,
//! so a change of the machine's load between rounds cancels out.
//!
//! Cold start: the operator's ScaledObject controller and metric service run in this process
//! (the real scale loop writes `/scale`; the activator reports to it over mutual TLS), the
//! Deployment is at 0 replicas and no endpoint is ready. One request is sent through the
//! activator; measured are (a) request sent -> `/scale` write committed by the API server and
//! (b) EndpointSlice create committed -> first response byte at the client. Both API-side
//! instants are stamped by the bench's own listener in front of memkube when memkube has
//! answered the write. Each round uses a fresh backend listener (a new pod address, so no
//! pooled connection helps).
//!
//! ```text
//! cargo bench -p keda-activator --bench proxy -- [--seconds 10] [--rounds 3]
//!     [--connections 8,64] [--workers 2] [--cold-starts 20] [--no-throughput] [--no-cold-start]
//!     [--compare <another keda-activator binary>] [--syscalls]
//! ```
//!
//! `--syscalls` adds a part: system calls and context switches per request of each proxy,
//! counted with `perf stat` while wrk runs (`syscalls.rs`); a debug build counts the same
//! calls (`cargo test -p keda-activator --bench proxy -- --syscalls --no-throughput ...`).
//!
//! `--workers` sets both the activator's proxy threads (`KEDA_ACTIVATOR_PROXY_THREADS`) and
//! nginx's `worker_processes`, so both proxies have the same core budget. `--compare <path>`
//! adds another `keda-activator` build as a fourth target, `baseline`, measured in the same
//! rounds (to compare a change with the build before it). Needs `wrk` and `nginx`
//! (`apt-get install nginx wrk`). Not part of `cargo test`.

mod cluster;
mod procs;
mod queue_proxy;
mod routes;
mod syscalls;
mod wrk;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use cluster::{Cluster, HOST, Write};
use procs::{ActivatorSetup, Proc};

const ACTIVATOR: &str = env!("CARGO_BIN_EXE_keda-activator");

struct Options {
    seconds: u64,
    rounds: u32,
    connections: Vec<u32>,
    workers: usize,
    cold_starts: u32,
    throughput: bool,
    cold_start: bool,
    compare: Option<PathBuf>,
    routes: usize,
    rate: u32,
    queue_proxy: QueueProxyChoice,
    syscalls: bool,
}

/// Whether Knative's queue-proxy is a target.
enum QueueProxyChoice {
    /// When `scripts/build-queue-proxy.sh` has built it at [`queue_proxy::default_path`].
    IfBuilt,
    /// `--queue-proxy <path>`: required.
    Binary(PathBuf),
    /// `--no-queue-proxy`.
    Off,
}

impl Options {
    fn parse(args: impl Iterator<Item = String>) -> anyhow::Result<Self> {
        let mut options = Self {
            seconds: 10,
            rounds: 3,
            connections: vec![8, 64],
            workers: 2,
            cold_starts: 20,
            throughput: true,
            cold_start: true,
            compare: None,
            routes: 200,
            rate: 1000,
            queue_proxy: QueueProxyChoice::IfBuilt,
            syscalls: false,
        };
        let mut args = args.peekable();
        while let Some(arg) = args.next() {
            let mut value =
                |name: &str| args.next().with_context(|| format!("{name} needs a value"));
            match arg.as_str() {
                // cargo bench passes --bench to harness = false targets.
                "--bench" => {}
                "--seconds" => options.seconds = value("--seconds")?.parse()?,
                "--rounds" => options.rounds = value("--rounds")?.parse()?,
                "--workers" => options.workers = value("--workers")?.parse()?,
                "--cold-starts" => options.cold_starts = value("--cold-starts")?.parse()?,
                "--connections" => {
                    options.connections = value("--connections")?
                        .split(',')
                        .map(str::parse)
                        .collect::<Result<_, _>>()?;
                }
                "--no-throughput" => options.throughput = false,
                "--no-cold-start" => options.cold_start = false,
                "--compare" => options.compare = Some(value("--compare")?.into()),
                "--routes" => options.routes = value("--routes")?.parse()?,
                "--rate" => options.rate = value("--rate")?.parse()?,
                "--queue-proxy" => {
                    options.queue_proxy = QueueProxyChoice::Binary(value("--queue-proxy")?.into());
                }
                "--no-queue-proxy" => options.queue_proxy = QueueProxyChoice::Off,
                "--syscalls" => options.syscalls = true,
                other => bail!(
                    "unknown argument {other:?}; expected --seconds N, --rounds N, --connections A,B, --workers N, --cold-starts N, --no-throughput, --no-cold-start, --compare PATH, --routes N (0: none), --rate R, --queue-proxy PATH, --no-queue-proxy, --syscalls"
                ),
            }
        }
        if options.workers == 0 || options.rounds == 0 || options.seconds == 0 {
            bail!("--workers, --rounds and --seconds must be at least 1");
        }
        Ok(options)
    }
}

fn main() -> ExitCode {
    if std::env::var_os(procs::BACKEND_ENV).is_some() {
        return procs::run_backend();
    }
    if let Ok(spec) = std::env::var(procs::GET_ENV) {
        return procs::run_get(&spec);
    }
    let result = Options::parse(std::env::args().skip(1)).and_then(|options| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?
            .block_on(run(options))
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("actbench: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// A scratch directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> anyhow::Result<Self> {
        let path = std::env::temp_dir().join(format!("keda-rs-actbench-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(path.join("nginx"))?;
        Ok(Self(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn run(options: Options) -> anyhow::Result<()> {
    let (Some(wrk), Some(nginx)) = (procs::find_program("wrk"), procs::find_program("nginx"))
    else {
        bail!(
            "this bench needs wrk and nginx on the PATH (or in /usr/sbin): apt-get install nginx wrk"
        );
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    println!("load average at start: {}", procs::load_average());
    let dir = TempDir::new()?;
    let mut cluster = Cluster::start(&dir.0).await?;
    let (backend, backend_addr) = procs::spawn_backend()?;
    let kubeconfig = dir.0.join("kubeconfig");
    let operator_url = cluster.operator_url.clone();
    let workers = options.workers;
    let log_of = |replica: &str| dir.0.join(format!("{replica}.log"));
    // An activator build on its own ports, reporting as `replica`.
    let spawn = |binary: &Path, replica: &str| -> anyhow::Result<(Proc, SocketAddr)> {
        let (listen, admin) = (procs::free_port()?, procs::free_port()?);
        let log = log_of(replica);
        let proc = tokio::task::block_in_place(|| {
            procs::spawn_activator(&ActivatorSetup {
                binary,
                replica,
                kubeconfig: &kubeconfig,
                listen,
                admin,
                operator_url: &operator_url,
                pki_dir: &dir.0,
                namespace: cluster::NAMESPACE,
                workers,
                log: &log,
            })
        })?;
        Ok((proc, listen))
    };
    let (activator, listen) = spawn(Path::new(ACTIVATOR), "activator-bench")?;
    let log = log_of("activator-bench");
    let baseline = match &options.compare {
        Some(binary) => {
            let (proc, listen) = spawn(binary, "activator-baseline")?;
            println!(
                "baseline {} at {listen} (pid {})",
                binary.display(),
                proc.pid()
            );
            Some((proc, listen))
        }
        None => None,
    };
    let nginx_addr = procs::free_port()?;
    let nginx = tokio::task::block_in_place(|| {
        procs::spawn_nginx(
            &nginx,
            &dir.0.join("nginx"),
            nginx_addr,
            backend_addr,
            workers,
        )
    })?;
    println!(
        "backend {backend_addr} (pid {}), activator {listen} (pid {}, {workers} proxy threads), nginx {nginx_addr} (pid {}, {workers} worker processes)",
        backend.pid(),
        activator.pid(),
        nginx.pid()
    );
    let queue_proxy = if options.throughput || options.syscalls {
        start_queue_proxy(&options.queue_proxy, workers, &dir.0)?
    } else {
        None
    };

    if options.cold_start {
        cold_starts(&mut cluster, listen, options.cold_starts).await?;
    }
    if options.throughput || options.syscalls {
        let mut targets = vec![
            Target {
                name: "direct",
                addr: backend_addr,
                pids: Vec::new(),
                backend: backend.pid(),
                netns: None,
            },
            Target {
                name: "activator",
                addr: listen,
                pids: vec![activator.pid()],
                backend: backend.pid(),
                netns: None,
            },
            Target {
                name: "nginx",
                addr: nginx_addr,
                pids: procs::family(nginx.pid()),
                backend: backend.pid(),
                netns: None,
            },
        ];
        if let Some(qp) = &queue_proxy {
            targets.push(Target {
                name: QUEUE_PROXY,
                addr: qp.addr,
                pids: vec![qp.proc.pid()],
                backend: qp.backend.pid(),
                netns: Some(qp.netns.clone()),
            });
        }
        if let Some((proc, addr)) = &baseline {
            targets.push(Target {
                name: "baseline",
                addr: *addr,
                pids: vec![proc.pid()],
                backend: backend.pid(),
                netns: None,
            });
        }
        cluster.set_replicas(1).await?;
        cluster.remove_endpoint().await?;
        cluster.publish_endpoint(backend_addr).await?;
        let probe = wait_answered(listen).await?;
        println!("the activator forwards to the backend ({probe} bytes answered)");
        if let Some((_, addr)) = &baseline {
            wait_answered(*addr).await?;
        }
        if options.throughput {
            tokio::task::block_in_place(|| throughput(&options, &wrk, &targets, &log))?;
        }
        if options.syscalls {
            let perf = procs::find_program("perf")
                .context("--syscalls needs perf: apt-get install linux-perf")?;
            let proxies: Vec<&Target> = targets.iter().filter(|t| !t.pids.is_empty()).collect();
            tokio::task::block_in_place(|| {
                syscalls::count(
                    &perf,
                    &wrk,
                    &proxies,
                    &options.connections,
                    options.seconds,
                    &dir.0,
                )
            })?;
        }
    }
    if options.routes > 0
        && let Err(error) = many_routes(&options, &cluster, listen, backend_addr).await
    {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let tail = &text[text.len().saturating_sub(4000)..];
        bail!("{error:#}\nthe activator's log ends with:\n{tail}");
    }
    println!("load average at end: {}", procs::load_average());
    drop(queue_proxy);
    drop(nginx);
    drop(baseline);
    drop(activator);
    drop(backend);
    Ok(())
}

/// `--routes` ScaledObjects at `--rate` requests per second: the activator against the backend
/// directly, `--rounds` rounds of `--seconds` each, alternating which goes first.
async fn many_routes(
    options: &Options,
    cluster: &Cluster,
    activator: SocketAddr,
    backend: SocketAddr,
) -> anyhow::Result<()> {
    cluster.set_replicas(1).await?;
    cluster.remove_endpoint().await?;
    cluster.publish_endpoint(backend).await?;
    routes::create(&cluster.client, options.routes).await?;
    routes::wait_routed(activator, options.routes).await?;
    println!(
        "{} routes routed; {} requests/s over them, {} rounds of {} s",
        options.routes, options.rate, options.rounds, options.seconds
    );
    let mut added = Vec::new();
    for round in 0..options.rounds {
        let order = if round % 2 == 0 {
            [("direct", backend), ("activator", activator)]
        } else {
            [("activator", activator), ("direct", backend)]
        };
        let mut p99 = BTreeMap::new();
        for (name, addr) in order {
            let run = routes::fixed_rate(addr, options.routes, options.rate, options.seconds).await;
            let (p50, q99, max) = (run.quantile(0.5), run.quantile(0.99), run.quantile(1.0));
            println!(
                "round {round} {name}: {} answered, {} errors, p50 {p50:?}, p99 {q99:?}, max {max:?}",
                run.latencies.len(),
                run.errors
            );
            p99.insert(name, q99);
        }
        added.push(p99["activator"].saturating_sub(p99["direct"]));
    }
    added.sort();
    let median_added = added[added.len() / 2];
    println!(
        "routes: activator p99 added over direct, per round {added:?}, median {median_added:?} (goal <= 5 ms)"
    );
    Ok(())
}

/// Starts Knative's queue-proxy when it is asked for or built; `None` (with a hint) when it is
/// not built at the default path.
fn start_queue_proxy(
    choice: &QueueProxyChoice,
    workers: usize,
    dir: &Path,
) -> anyhow::Result<Option<queue_proxy::QueueProxy>> {
    let binary = match choice {
        QueueProxyChoice::Off => return Ok(None),
        QueueProxyChoice::Binary(path) => path.clone(),
        QueueProxyChoice::IfBuilt => match queue_proxy::default_path() {
            Some(path) if path.is_file() => path,
            path => {
                println!(
                    "queue-proxy: not measured: no binary at {} (scripts/build-queue-proxy.sh builds Knative's queue-proxy there; --queue-proxy PATH names another)",
                    path.map_or_else(
                        || "<target dir>/queue-proxy/queue".into(),
                        |p| p.display().to_string()
                    )
                );
                return Ok(None);
            }
        },
    };
    let qp = tokio::task::block_in_place(|| {
        queue_proxy::spawn(
            &binary,
            workers,
            cluster::CONTAINER_CONCURRENCY,
            HOST,
            &dir.join("queue-proxy.log"),
        )
    })
    .with_context(|| {
        format!(
            "starting queue-proxy {} (--no-queue-proxy leaves it out)",
            binary.display()
        )
    })?;
    println!(
        "queue-proxy {} at {} in the network namespace {} (pid {}, GOMAXPROCS {workers}, containerConcurrency {}), its own backend (pid {})",
        binary.display(),
        qp.addr,
        qp.netns.display(),
        qp.proc.pid(),
        cluster::CONTAINER_CONCURRENCY,
        qp.backend.pid()
    );
    Ok(Some(qp))
}

/// Waits until a request through the activator gets the backend's answer.
async fn wait_answered(activator: SocketAddr) -> anyhow::Result<usize> {
    let started = Instant::now();
    loop {
        let answer =
            tokio::task::spawn_blocking(move || procs::http_get(activator, HOST, "/")).await?;
        match answer {
            Ok((200, body)) if body == procs::BODY => return Ok(body.len()),
            _ if started.elapsed() < Duration::from_secs(10) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => bail!("the activator does not forward to the backend: {other:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Cold start

/// One fresh "pod": a hyper server on a new loopback port, answering [`procs::BODY`].
async fn fresh_pod() -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    use hyper::service::service_fn;
    use hyper_util::rt::TokioIo;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let service = service_fn(|_request| async {
                    Ok::<_, std::convert::Infallible>(http::Response::new(
                        http_body_util::Full::new(bytes::Bytes::from_static(procs::BODY)),
                    ))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok((addr, task))
}

struct ColdStart {
    to_scale: Duration,
    ready_to_first_byte: Duration,
}

async fn cold_starts(cluster: &mut Cluster, activator: SocketAddr, n: u32) -> anyhow::Result<()> {
    println!("\ncold start: {n} rounds (Deployment at 0, no ready endpoint, one request)");
    let mut results = Vec::new();
    let mut failures = Vec::new();
    for round in 0..n {
        match cold_start(cluster, activator).await {
            Ok(r) => {
                println!(
                    "  round {round:>2}: request -> /scale write {:>8.3} ms, endpoint ready -> first byte {:>8.3} ms",
                    ms(r.to_scale),
                    ms(r.ready_to_first_byte)
                );
                results.push(r);
            }
            Err(e) => {
                println!("  round {round:>2}: failed: {e:#}");
                failures.push(e);
            }
        }
    }
    if results.is_empty() {
        bail!("no cold start succeeded");
    }
    let mut to_scale: Vec<f64> = results.iter().map(|r| ms(r.to_scale)).collect();
    let mut to_byte: Vec<f64> = results.iter().map(|r| ms(r.ready_to_first_byte)).collect();
    println!(
        "\n| cold start ({} of {n} rounds) | p50 | max | goal |",
        results.len()
    );
    println!("|---|---|---|---|");
    println!(
        "| first request sent -> /scale write | {:.2} ms | {:.2} ms | <= 10 ms |",
        median(&mut to_scale),
        max(&to_scale)
    );
    println!(
        "| EndpointSlice written -> first byte at the client | {:.2} ms | {:.2} ms | <= 5 ms |",
        median(&mut to_byte),
        max(&to_byte)
    );
    if !failures.is_empty() {
        println!("{} rounds failed (see above)", failures.len());
    }
    Ok(())
}

async fn cold_start(cluster: &mut Cluster, activator: SocketAddr) -> anyhow::Result<ColdStart> {
    // Back to zero: no replica, no endpoint. The pause lets the activator's watch drop the
    // endpoint and its per-second report show the target idle again, so the operator's loop
    // has nothing pending when the request arrives.
    cluster.remove_endpoint().await?;
    cluster.set_replicas(0).await?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (pod, pod_task) = fresh_pod().await?;
    let _stop_pod = AbortOnDrop(pod_task);
    let mut stream = tokio::net::TcpStream::connect(activator).await?;
    stream.set_nodelay(true)?;
    cluster.drain_writes();

    let sent = Instant::now();
    stream
        .write_all(format!("GET / HTTP/1.1\r\nHost: {HOST}\r\n\r\n").as_bytes())
        .await?;
    let mut first = [0u8; 1];
    let reader = tokio::spawn(async move {
        let read = stream.read(&mut first).await;
        let at = Instant::now();
        let mut rest = Vec::new();
        if matches!(read, Ok(1)) {
            let mut buffer = [0u8; 4096];
            // The head and the 100-byte body arrive together; read until both are in.
            while !rest.ends_with(procs::BODY) {
                match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buffer)).await {
                    Ok(Ok(n)) if n > 0 => rest.extend_from_slice(&buffer[..n]),
                    _ => break,
                }
            }
        }
        (read, at, first, rest)
    });
    let scaled = cluster
        .next_write(Write::Scale, Duration::from_secs(10))
        .await
        .context("the operator wrote no /scale within 10 s")?;
    if reader.is_finished() {
        bail!("the request was answered before any endpoint was ready");
    }
    cluster.publish_endpoint(pod).await?;
    let ready = cluster
        .next_write(Write::SliceCreated, Duration::from_secs(5))
        .await
        .context("no stamp of the EndpointSlice create")?;
    let (read, first_byte, first, rest) = tokio::time::timeout(Duration::from_secs(10), reader)
        .await
        .context("no answer within 10 s of the endpoint turning ready")??;
    read?;
    let head = String::from_utf8_lossy(&first).into_owned() + &String::from_utf8_lossy(&rest);
    if !head.starts_with("HTTP/1.1 200") || !rest.ends_with(procs::BODY) {
        bail!("unexpected answer: {head:?}");
    }
    if first_byte < ready {
        bail!("the first byte came before the endpoint was published");
    }
    Ok(ColdStart {
        to_scale: scaled.saturating_duration_since(sent),
        ready_to_first_byte: first_byte - ready,
    })
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

// ---------------------------------------------------------------------------------------------
// Throughput

/// The name of Knative's queue-proxy among the targets.
const QUEUE_PROXY: &str = "queue-proxy";

struct Target {
    name: &'static str,
    addr: SocketAddr,
    /// The proxy's processes (none for direct).
    pids: Vec<u32>,
    /// The backend behind it.
    backend: u32,
    /// The network namespace wrk runs in to reach it (queue-proxy's pod), if not this one.
    netns: Option<PathBuf>,
}

#[derive(Clone, Copy)]
struct Run {
    report: wrk::WrkReport,
    /// Proxy CPU per request, µs (NaN for direct).
    proxy_cpu_us: f64,
    /// The part of it in user space, µs (NaN for direct).
    proxy_user_us: f64,
    /// Backend CPU per request, µs.
    backend_cpu_us: f64,
    /// Peak RSS of the proxy during the run, KiB.
    peak_rss_kib: u64,
}

fn measure(wrk: &Path, target: &Target, connections: u32, seconds: u64) -> anyhow::Result<Run> {
    let backend = target.backend;
    let tick_us = 1e6 / procs::ticks_per_second();
    let stop = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(procs::rss_kib(&target.pids)));
    let sampler = {
        let (stop, peak, pids) = (Arc::clone(&stop), Arc::clone(&peak), target.pids.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(procs::rss_kib(&pids), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let proxy_before = procs::cpu_ticks(&target.pids);
    let backend_before = procs::cpu_ticks(&[backend]);
    let report = wrk::run(
        wrk,
        target.netns.as_deref(),
        target.addr,
        HOST,
        connections,
        seconds,
    );
    let proxy_after = procs::cpu_ticks(&target.pids);
    let backend_after = procs::cpu_ticks(&[backend]);
    stop.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    let report = report?;
    let requests = report.requests.max(1) as f64;
    let per_request = |ticks: u64| {
        if target.pids.is_empty() {
            f64::NAN
        } else {
            ticks as f64 * tick_us / requests
        }
    };
    Ok(Run {
        report,
        proxy_cpu_us: per_request(proxy_after.total() - proxy_before.total()),
        proxy_user_us: per_request(proxy_after.user - proxy_before.user),
        backend_cpu_us: (backend_after.total() - backend_before.total()) as f64 * tick_us
            / requests,
        peak_rss_kib: peak.load(Ordering::Relaxed),
    })
}

fn throughput(
    options: &Options,
    wrk: &Path,
    targets: &[Target],
    activator_log: &Path,
) -> anyhow::Result<()> {
    let idle_before: Vec<u64> = targets.iter().map(|t| procs::rss_kib(&t.pids)).collect();
    println!(
        "\nthroughput: wrk -t1 -c{{{}}} -d{}s --latency, {} rounds, interleaved",
        options
            .connections
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(","),
        options.seconds,
        options.rounds
    );
    // Warm-up: connections pooled, caches and allocators settled.
    for target in targets {
        measure(wrk, target, 64, 2).with_context(|| format!("warming up {}", target.name))?;
    }
    let mut runs: BTreeMap<(u32, &str), Vec<Run>> = BTreeMap::new();
    for round in 0..options.rounds as usize {
        for &connections in &options.connections {
            for k in 0..targets.len() {
                let target = &targets[(round + k) % targets.len()];
                let run = measure(wrk, target, connections, options.seconds)
                    .with_context(|| format!("{} at {connections} connections", target.name))?;
                println!(
                    "  round {round} c={connections:<3} {:<9} {:>9.0} req/s  p50 {:>7.3} ms  p99 {:>7.3} ms  proxy CPU {:>6.1} us/req (user {:>4.1})  backend CPU {:>5.1} us/req  peak RSS {:>6.1} MiB  errors {}",
                    target.name,
                    run.report.per_second,
                    run.report.p50_us / 1e3,
                    run.report.p99_us / 1e3,
                    run.proxy_cpu_us,
                    run.proxy_user_us,
                    run.backend_cpu_us,
                    run.peak_rss_kib as f64 / 1024.0,
                    run.report.errors
                );
                if run.report.errors > 0 {
                    bail!(
                        "{} answered {} errors; see {}",
                        target.name,
                        run.report.errors,
                        activator_log.display()
                    );
                }
                runs.entry((connections, target.name))
                    .or_default()
                    .push(run);
            }
        }
    }
    std::thread::sleep(Duration::from_secs(2));
    let idle_after: Vec<u64> = targets.iter().map(|t| procs::rss_kib(&t.pids)).collect();

    for &connections in &options.connections {
        let row = |name: &str| -> Summary {
            Summary::of(
                runs.get(&(connections, name))
                    .map_or(&[][..], Vec::as_slice),
            )
        };
        let (direct, activator, nginx) = (row("direct"), row("activator"), row("nginx"));
        println!(
            "\n{connections} connections: medians of {} rounds of {} s; ratios are the medians of the per-round ratios\n",
            options.rounds, options.seconds
        );
        println!(
            "| target | requests/s | p50 | p99 | proxy CPU per request | of which user space | backend CPU per request | proxy peak RSS |"
        );
        println!("|---|---|---|---|---|---|---|---|");
        let baseline = runs
            .contains_key(&(connections, "baseline"))
            .then(|| row("baseline"));
        let queue_proxy = runs
            .contains_key(&(connections, QUEUE_PROXY))
            .then(|| row(QUEUE_PROXY));
        let mut rows = vec![
            ("direct", &direct),
            ("activator", &activator),
            ("nginx", &nginx),
        ];
        if let Some(q) = &queue_proxy {
            rows.push((QUEUE_PROXY, q));
        }
        if let Some(b) = &baseline {
            rows.push(("baseline", b));
        }
        for (name, s) in rows {
            println!(
                "| {name} | {:.0} | {:.3} ms | {:.3} ms | {} | {} | {:.1} us | {} |",
                s.per_second,
                s.p50_us / 1e3,
                s.p99_us / 1e3,
                micros_or_dash(s.proxy_cpu_us),
                micros_or_dash(s.proxy_user_us),
                s.backend_cpu_us,
                if s.peak_rss_kib == 0 {
                    "-".to_string()
                } else {
                    format!("{:.1} MiB", s.peak_rss_kib as f64 / 1024.0)
                }
            );
        }
        // Ratios are taken round by round (the two runs of a pair ran minutes apart at most)
        // and then their median, so a change of the machine's load between rounds cancels.
        let ratio = |a: &str, b: &str, f: fn(&Run) -> f64| -> Option<f64> {
            let (ra, rb) = (runs.get(&(connections, a))?, runs.get(&(connections, b))?);
            let r = median(
                &mut ra
                    .iter()
                    .zip(rb)
                    .map(|(x, y)| f(x) / f(y))
                    .collect::<Vec<_>>(),
            );
            r.is_finite().then_some(r)
        };
        let paired = |a: &str, b: &str, f: fn(&Run) -> f64| -> String {
            ratio(a, b, f).map_or_else(String::new, |r| format!("{r:.2}x"))
        };
        // The run-to-run noise: the lowest and highest per-round ratio.
        let spread = |a: &str, b: &str, f: fn(&Run) -> f64| -> String {
            let (Some(ra), Some(rb)) = (runs.get(&(connections, a)), runs.get(&(connections, b)))
            else {
                return String::new();
            };
            let ratios: Vec<f64> = ra
                .iter()
                .zip(rb)
                .map(|(x, y)| f(x) / f(y))
                .filter(|r| r.is_finite())
                .collect();
            let low = ratios.iter().copied().fold(f64::INFINITY, f64::min);
            let high = ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            if ratios.is_empty() {
                String::new()
            } else {
                format!("{low:.2}-{high:.2}x")
            }
        };
        let mut pairs = vec![
            ("activator", "direct"),
            ("nginx", "direct"),
            ("activator", "nginx"),
        ];
        if queue_proxy.is_some() {
            pairs.insert(2, (QUEUE_PROXY, "direct"));
            pairs.push(("activator", QUEUE_PROXY));
            pairs.push(("nginx", QUEUE_PROXY));
        }
        if baseline.is_some() {
            pairs.push(("activator", "baseline"));
        }
        for (a, b) in &pairs {
            println!(
                "| {a} / {b} | {} | {} | {} | {} | {} | {} | {} |",
                paired(a, b, |r| r.report.per_second),
                paired(a, b, |r| r.report.p50_us),
                paired(a, b, |r| r.report.p99_us),
                paired(a, b, |r| r.proxy_cpu_us),
                paired(a, b, |r| r.proxy_user_us),
                paired(a, b, |r| r.backend_cpu_us),
                paired(a, b, |r| r.peak_rss_kib as f64),
            );
        }
        for (a, b) in pairs.iter().filter(|(_, b)| *b != "direct") {
            println!(
                "| {a} / {b}, lowest-highest round | {} | {} | {} | {} | {} | {} | {} |",
                spread(a, b, |r| r.report.per_second),
                spread(a, b, |r| r.report.p50_us),
                spread(a, b, |r| r.report.p99_us),
                spread(a, b, |r| r.proxy_cpu_us),
                spread(a, b, |r| r.proxy_user_us),
                spread(a, b, |r| r.backend_cpu_us),
                spread(a, b, |r| r.peak_rss_kib as f64),
            );
        }
        // Issue 28's goals for the activator, from the same ratios.
        let goal = |what: &str, value: Option<f64>, met: fn(f64) -> bool| match value {
            Some(v) => println!(
                "- {what}: {v:.2}x, {}",
                if met(v) { "met" } else { "not met" }
            ),
            None => println!("- {what}: not measured"),
        };
        println!("\nissue 28 goals at {connections} connections (medians of per-round ratios):");
        goal(
            "throughput >= 1.2x nginx",
            ratio("activator", "nginx", |r| r.report.per_second),
            |v| v >= 1.2,
        );
        goal(
            "CPU per request <= 0.8x nginx",
            ratio("activator", "nginx", |r| r.proxy_cpu_us),
            |v| v <= 0.8,
        );
        goal(
            "p99 <= nginx",
            ratio("activator", "nginx", |r| r.report.p99_us),
            |v| v <= 1.0,
        );
        goal(
            "throughput >= 4x queue-proxy",
            ratio("activator", QUEUE_PROXY, |r| r.report.per_second),
            |v| v >= 4.0,
        );
    }
    println!("\n| idle RSS | before the load | after the load |");
    println!("|---|---|---|");
    for (i, target) in targets.iter().enumerate().skip(1) {
        println!(
            "| {} | {:.1} MiB | {:.1} MiB |",
            target.name,
            idle_before[i] as f64 / 1024.0,
            idle_after[i] as f64 / 1024.0
        );
    }
    println!(
        "| activator / nginx | {:.2}x | {:.2}x |",
        idle_before[1] as f64 / idle_before[2] as f64,
        idle_after[1] as f64 / idle_after[2] as f64
    );
    Ok(())
}

/// Medians over rounds; the peak RSS is the maximum.
struct Summary {
    per_second: f64,
    p50_us: f64,
    p99_us: f64,
    proxy_cpu_us: f64,
    proxy_user_us: f64,
    backend_cpu_us: f64,
    peak_rss_kib: u64,
}

impl Summary {
    fn of(runs: &[Run]) -> Self {
        let pick = |f: fn(&Run) -> f64| median(&mut runs.iter().map(f).collect::<Vec<_>>());
        Self {
            per_second: pick(|r| r.report.per_second),
            p50_us: pick(|r| r.report.p50_us),
            p99_us: pick(|r| r.report.p99_us),
            proxy_cpu_us: pick(|r| r.proxy_cpu_us),
            proxy_user_us: pick(|r| r.proxy_user_us),
            backend_cpu_us: pick(|r| r.backend_cpu_us),
            peak_rss_kib: runs.iter().map(|r| r.peak_rss_kib).max().unwrap_or(0),
        }
    }
}

fn micros_or_dash(us: f64) -> String {
    if us.is_nan() {
        "-".to_string()
    } else {
        format!("{us:.1} us")
    }
}

fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

fn max(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::NAN, f64::max)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
