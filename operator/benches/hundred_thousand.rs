//! Issue 25's scale bench: the real `keda-operator` binary against the in-memory API server,
//! served on loopback and reached through the real kube client, with a small and a large
//! population of ScaledObjects and ScaledJobs, one after the other in the same run.
//!
//! ```text
//! cargo bench -p keda-operator --bench hundred_thousand -- [--objects 100000] [--jobs 10000]
//!     [--small 10000] [--steady-secs 90] [--reads 5000] [--kube-api-qps 2000]
//!     [--kube-api-burst 4000] [--max-reconciles 40]
//! ```
//!
//! Each population is seeded into a fresh memkube before the operator starts, as the API
//! server holds them when an operator restarts or a new leader takes over: the operator lists
//! them, creates their HPAs and polls them. The ScaledObjects are spread over 10 namespaces and
//! mix three trigger types whose sources are local: `redis` (a list on the local Redis; every
//! 100th holds items, so its Deployment goes 0 -> 1), `metrics-api` (an HTTP server in this
//! process, which counts the requests it gets each second) and `cron` (no I/O). Every
//! ScaledJob has a `redis` trigger on an empty list. `pollingInterval: 30` everywhere.
//!
//! For each population it prints:
//! - the operator's RSS (idle, peak, steady) and CPU (user + system, in steady state);
//! - the time from the operator's start until every HPA exists and every active target is at 1;
//! - the per-second spread of the polls that reach the metrics-api source in the first 60 s
//!   after the operator's start (goal: no second above 1/pollingInterval of those objects);
//! - client-side throttling (`rest_client_rate_limiter_*`) in steady state;
//! - API requests by verb and resource per minute in steady state (goal: no writes);
//! - scale-loop tick lag p50/p99 (`keda_internal_scale_loop_latency_seconds`);
//! - the HPA's reads through the metrics-apiserver (in process, as the aggregator sends them,
//!   over one kept-alive TLS connection per reader): p50/p99 over `--reads` reads of random
//!   objects (goal: p99 <= 5 ms), by event source, and the SubjectAccessReviews they cost;
//!   then the same reads through a second metrics-apiserver that asks about each metric
//!   (`--authorization-namespace-wide=false`, KEDA's way) beside them.
//!
//! memkube and the metrics-apiserver run in this process; the operator's RSS and CPU are its
//! own process's. `OPBENCH_OPERATOR_LOG` sets the operator's `RUST_LOG` (default `warn`);
//! `OPBENCH_OPERATOR_WRAPPER=heaptrack` starts it under that program (for the itemized memory
//! in docs/benchmarks.md; RSS and CPU are then the wrapper's).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use keda_tls::pki::{CertificateAuthority, PemPair};
use memkube::MemKube;
use redis::AsyncCommands;
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

#[path = "../tests/common/binary.rs"]
mod binary;

#[path = "../tests/common/aggregator.rs"]
mod aggregator;

#[allow(dead_code)]
#[path = "../tests/common/source.rs"]
mod source;

mod common;

use binary::{BINARY, Cluster};
use common::{ms, percentile, rss_mib, samples, throttled};
use source::Source;

const POLLING_SECS: u64 = 30;
const NAMESPACES: usize = 10;
const CERTS_NAMESPACE: &str = "keda";
const ACTIVE_EVERY: usize = 100;
const ACTIVE_ITEMS: i64 = 10;
/// The metrics-api source's path every `metrics-api` trigger asks.
const LOAD: &str = "load";

struct Args {
    objects: usize,
    jobs: usize,
    small: usize,
    steady: Duration,
    reads: usize,
    qps: String,
    burst: String,
    /// `KEDA_SCALEDOBJECT_CTRL_MAX_RECONCILES` (KEDA's default is 5: the ramp of 100,000
    /// objects would take hours at 5 reconciles at once).
    reconciles: String,
}

impl Args {
    fn parse() -> anyhow::Result<Self> {
        let mut args = Args {
            objects: 100_000,
            jobs: 10_000,
            small: 10_000,
            steady: Duration::from_secs(90),
            reads: 5_000,
            qps: "2000".into(),
            burst: "4000".into(),
            reconciles: "40".into(),
        };
        let mut it = std::env::args().skip(1);
        while let Some(arg) = it.next() {
            let mut value = || {
                it.next()
                    .ok_or_else(|| anyhow::anyhow!("{arg} needs a value"))
            };
            match arg.as_str() {
                // cargo bench passes --bench to harness = false benches.
                "--bench" => {}
                "--objects" => args.objects = value()?.parse()?,
                "--jobs" => args.jobs = value()?.parse()?,
                "--small" => args.small = value()?.parse()?,
                "--steady-secs" => {
                    args.steady = Duration::from_secs(value()?.parse::<u64>()?.max(POLLING_SECS));
                }
                "--reads" => args.reads = value()?.parse::<usize>()?.max(1),
                "--kube-api-qps" => args.qps = value()?,
                "--kube-api-burst" => args.burst = value()?,
                "--max-reconciles" => args.reconciles = value()?,
                other => anyhow::bail!(
                    "unknown argument {other}; expected --objects, --jobs, --small, --steady-secs, --reads, --kube-api-qps, --kube-api-burst, --max-reconciles"
                ),
            }
        }
        anyhow::ensure!(args.objects > 0, "--objects must be above 0");
        Ok(args)
    }
}

/// One population: `objects` ScaledObjects and `jobs` ScaledJobs.
#[derive(Clone, Copy)]
struct Population {
    objects: usize,
    jobs: usize,
}

/// What one population's run measured.
struct Report {
    population: Population,
    idle_rss: f64,
    peak_rss: f64,
    steady_rss: f64,
    cpu_cores: f64,
    all_hpas: Duration,
    all_active: Duration,
    metrics_api_objects: usize,
    max_polls_per_second: u64,
    first_window_polls: u64,
    throttled: f64,
    /// Failed scaler reads (`keda_scaler_detail_errors_total`) during the steady window: each
    /// can flip a status condition, so they explain status writes there.
    scaler_errors: f64,
    requests_per_minute: BTreeMap<String, f64>,
    writes_per_minute: f64,
    lag_p50: f64,
    lag_p99: f64,
    lag_samples: usize,
    read_p50: f64,
    read_p99: f64,
    read_errors: usize,
    /// p50 and p99 of the reads by event source, and how many.
    reads_by_source: Vec<(&'static str, f64, f64, usize)>,
    /// SubjectAccessReviews the metrics-apiserver sent during the reads.
    reviews: u64,
    /// p50 and p99 of the same reads through a metrics-apiserver that asks about each
    /// metric (`--authorization-namespace-wide=false`, KEDA's way), and its reviews.
    per_metric_p50: f64,
    per_metric_p99: f64,
    per_metric_reviews: u64,
}

fn free_addr() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], aggregator::free_port()))
}

/// User + system CPU seconds `pid` has used (`/proc/<pid>/stat` fields 14 and 15, in clock
/// ticks of 1/100 s, the value Linux reports on every architecture it runs on here).
fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name (field 2) may hold spaces; the fields after it follow the last ')'.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): utime is field 14, stime field 15.
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

fn namespace(i: usize) -> String {
    format!("bench-{}", i % NAMESPACES)
}

fn list_name(run: u32, i: usize) -> String {
    format!("keda-rs-scale-{run}-{i}")
}

/// ScaledObject `so-<i>`: redis, metrics-api or cron by `i % 3`.
fn scaled_object(run: u32, i: usize, metrics_api: &str) -> serde_json::Value {
    let trigger = match i % 3 {
        0 => serde_json::json!({
            "type": "redis",
            "metadata": {
                "address": "127.0.0.1:6379",
                "listName": list_name(run, i),
                "listLength": "5"
            }
        }),
        1 => serde_json::json!({
            "type": "metrics-api",
            "metadata": {
                "url": metrics_api,
                "valueLocation": "value",
                "targetValue": "10"
            }
        }),
        // The first of January only: never active in the bench.
        _ => serde_json::json!({
            "type": "cron",
            "metadata": {
                "timezone": "Etc/UTC",
                "start": "0 0 1 1 *",
                "end": "0 1 1 1 *",
                "desiredReplicas": "2"
            }
        }),
    };
    serde_json::json!({
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": { "name": format!("so-{i}"), "namespace": namespace(i) },
        "spec": {
            "scaleTargetRef": { "name": format!("worker-{i}") },
            "pollingInterval": POLLING_SECS,
            "minReplicaCount": 0,
            "maxReplicaCount": 10,
            "triggers": [trigger]
        }
    })
}

fn scaled_job(run: u32, i: usize) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledJob",
        "metadata": { "name": format!("sj-{i}"), "namespace": namespace(i) },
        "spec": {
            "pollingInterval": POLLING_SECS,
            "maxReplicaCount": 10,
            "jobTargetRef": {
                "template": {
                    "spec": {
                        "containers": [{ "name": "worker", "image": "busybox" }],
                        "restartPolicy": "Never"
                    }
                }
            },
            "triggers": [{
                "type": "redis",
                "metadata": {
                    "address": "127.0.0.1:6379",
                    "listName": format!("keda-rs-scale-job-{run}-{i}"),
                    "listLength": "1"
                }
            }]
        }
    })
}

/// A plain HTTP/1.1 GET of `/metrics` on the operator.
async fn scrape(addr: SocketAddr) -> anyhow::Result<String> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let request = http::Request::get("/metrics")
        .header("host", addr.to_string())
        .body(Empty::<Bytes>::new())?;
    let response = sender.send_request(request).await?;
    anyhow::ensure!(
        response.status() == 200,
        "/metrics answered {}",
        response.status()
    );
    let body = response.into_body().collect().await?.to_bytes();
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// The operator process, killed when dropped.
struct Operator {
    child: Child,
    metrics: SocketAddr,
    probes: SocketAddr,
    metric_service: SocketAddr,
}

impl Operator {
    fn start(cluster: &Cluster, args: &Args) -> anyhow::Result<Self> {
        let (metrics, probes, metric_service) = (free_addr(), free_addr(), free_addr());
        // `OPBENCH_OPERATOR_WRAPPER=heaptrack` runs the operator under a heap profiler (its
        // RSS and CPU figures are then the wrapper's, not the operator's).
        let mut command = match std::env::var("OPBENCH_OPERATOR_WRAPPER") {
            Ok(wrapper) if !wrapper.is_empty() => {
                let mut command = Command::new(wrapper);
                command.arg(BINARY);
                command
            }
            _ => Command::new(BINARY),
        };
        let child = command
            .args([
                "--metrics-bind-address",
                &metrics.to_string(),
                "--health-probe-bind-address",
                &probes.to_string(),
                "--metrics-service-bind-address",
                &metric_service.to_string(),
                "--kube-api-qps",
                &args.qps,
                "--kube-api-burst",
                &args.burst,
            ])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", cluster.dir.path())
            .env("KUBECONFIG", &cluster.kubeconfig)
            .env("POD_NAMESPACE", CERTS_NAMESPACE)
            .env("KEDA_SCALEDOBJECT_CTRL_MAX_RECONCILES", &args.reconciles)
            .env(
                "RUST_LOG",
                std::env::var("OPBENCH_OPERATOR_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit())
            // Its own process group, so that stopping it also stops the operator a wrapper
            // (heaptrack) started as its own child.
            .process_group(0)
            .kill_on_drop(true)
            .spawn()?;
        Ok(Operator {
            child,
            metrics,
            probes,
            metric_service,
        })
    }

    fn pid(&self) -> anyhow::Result<u32> {
        self.child
            .id()
            .ok_or_else(|| anyhow::anyhow!("keda-operator has exited"))
    }

    fn check_running(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            anyhow::bail!("keda-operator exited: {status}");
        }
        Ok(())
    }

    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let since = Instant::now();
        loop {
            self.check_running()?;
            if binary::get(self.probes, "/readyz").await.0 == 200 {
                return Ok(());
            }
            anyhow::ensure!(
                since.elapsed() < Duration::from_secs(120),
                "the operator is not ready after 120 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// SIGTERM to its process group (a wrapper's child too), then SIGKILL if it has not
    /// exited 20 s later.
    async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", "--", &format!("-{pid}")])
                .status();
        }
        if tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

/// Counts the metrics-api source's requests each second, from now until `cancel`.
fn count_per_second(
    source: Arc<Source>,
    cancel: CancellationToken,
) -> tokio::task::JoinHandle<Vec<u64>> {
    tokio::spawn(async move {
        let mut per_second = Vec::new();
        let mut last = source.requests(LOAD);
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.tick().await;
        loop {
            tokio::select! {
                () = cancel.cancelled() => return per_second,
                _ = tick.tick() => {
                    let now = source.requests(LOAD);
                    per_second.push(now.saturating_sub(last));
                    last = now;
                }
            }
        }
    })
}

/// The external metric the HPA of `hpa` asks for, as the aggregator's path.
fn metric_path(hpa: &serde_json::Value) -> Option<String> {
    let namespace = hpa["metadata"]["namespace"].as_str()?;
    let metric = &hpa["spec"]["metrics"][0]["external"]["metric"];
    let name = metric["name"].as_str()?;
    let owner = metric["selector"]["matchLabels"]["scaledobject.keda.sh/name"].as_str()?;
    Some(format!(
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{name}?labelSelector=scaledobject.keda.sh%2Fname%3D{owner}"
    ))
}

/// The event source a read's metric comes from, by its name (`s0-redis-...`, `s0-cron-...`,
/// else the metrics-api source in this process).
fn source_of(path: &str) -> &'static str {
    if path.contains("-redis-") {
        "redis"
    } else if path.contains("-cron-") {
        "cron"
    } else {
        "metrics-api"
    }
}

/// Reads' latencies (seconds, sorted) by event source.
type BySource = BTreeMap<&'static str, Vec<f64>>;

/// `reads` GETs of `paths` (round robin from a per-reader offset) by 4 readers, each on its own
/// kept-alive TLS connection to the metrics-apiserver as the aggregator holds one: the latency
/// of every read, the same by event source, and how many did not answer 200.
async fn hpa_reads(
    address: SocketAddr,
    serving: &CertificateAuthority,
    client: &PemPair,
    paths: Arc<Vec<String>>,
    reads: usize,
) -> anyhow::Result<(Vec<f64>, BySource, usize)> {
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(rustls_pki_types::CertificateDer::from_pem_slice(
        serving.cert_pem().as_bytes(),
    )?)?;
    let config = Arc::new(
        rustls::ClientConfig::builder_with_provider(keda_tls::provider())
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_client_auth_cert(
                keda_tls::certificates(client.cert.as_bytes(), "client")?,
                rustls_pki_types::PrivateKeyDer::from_pem_slice(client.key.as_bytes())?,
            )?,
    );
    const READERS: usize = 4;
    let mut tasks = Vec::new();
    for reader in 0..READERS {
        let config = config.clone();
        let paths = paths.clone();
        let count = reads / READERS + usize::from(reader < reads % READERS);
        tasks.push(tokio::spawn(async move {
            let tcp = tokio::net::TcpStream::connect(address).await?;
            let tls = tokio_rustls::TlsConnector::from(config)
                .connect(rustls_pki_types::ServerName::try_from("localhost")?, tcp)
                .await?;
            let (mut sender, connection) =
                hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
            tokio::spawn(connection);
            let mut latencies = Vec::with_capacity(count);
            let mut errors = 0;
            let step = paths.len() / READERS + 1;
            for n in 0..count {
                let path = &paths[(reader * step + n * 7919) % paths.len()];
                let request = http::Request::get(path.as_str())
                    .header("host", "localhost")
                    .header(
                        "x-remote-user",
                        "system:serviceaccount:kube-system:horizontal-pod-autoscaler",
                    )
                    .header("x-remote-group", "system:serviceaccounts")
                    .body(Empty::<Bytes>::new())?;
                let sent = Instant::now();
                let response = sender.send_request(request).await?;
                let ok = response.status() == 200;
                response.into_body().collect().await?;
                latencies.push((sent.elapsed().as_secs_f64(), source_of(path)));
                errors += usize::from(!ok);
            }
            anyhow::Ok((latencies, errors))
        }));
    }
    let mut all = Vec::with_capacity(reads);
    let mut by_source = BySource::new();
    let mut errors = 0;
    for task in tasks {
        let (latencies, e) = task.await??;
        for (latency, source) in latencies {
            all.push(latency);
            by_source.entry(source).or_default().push(latency);
        }
        errors += e;
    }
    all.sort_by(f64::total_cmp);
    for latencies in by_source.values_mut() {
        latencies.sort_by(f64::total_cmp);
    }
    Ok((all, by_source, errors))
}

async fn run_population(
    args: &Args,
    population: Population,
    redis: &mut redis::aio::MultiplexedConnection,
) -> anyhow::Result<Report> {
    let run = std::process::id();
    let source = Arc::new(Source::start().await);
    source.set(LOAD, 0.0);
    let load_url = source.url(LOAD);

    let active: Vec<usize> = (0..population.objects).step_by(3 * ACTIVE_EVERY).collect();
    for &i in &active {
        let items: Vec<i64> = (0..ACTIVE_ITEMS).collect();
        let _: i64 = redis.rpush(list_name(run, i), items).await?;
    }

    let server = MemKube::builder()
        .bookmark_interval(Duration::from_secs(60))
        .build();
    server.load_crds_from_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../config/crd"))?;
    server.create_namespace(CERTS_NAMESPACE)?;
    for n in 0..NAMESPACES {
        server.create_namespace(&namespace(n))?;
    }
    let seeding = Instant::now();
    for i in 0..population.objects {
        server.seed(&common::deployment(&format!("worker-{i}"), &namespace(i)))?;
        server.seed(&scaled_object(run, i, &load_url))?;
    }
    for i in 0..population.jobs {
        server.seed(&scaled_job(run, i))?;
    }
    println!(
        "seeded {} ScaledObjects, their Deployments and {} ScaledJobs in {:.1} s",
        population.objects,
        population.jobs,
        seeding.elapsed().as_secs_f64()
    );
    let cluster = Cluster::serve(server, &format!("scale-{}", population.objects)).await;

    let started = Instant::now();
    let counting = CancellationToken::new();
    let per_second = count_per_second(source.clone(), counting.clone());
    let mut operator = Operator::start(&cluster, args)?;
    operator.wait_ready().await?;
    let pid = operator.pid()?;
    let (idle_rss, _) = rss_mib(pid);
    println!(
        "keda-operator ready after {:.1} s, RSS {idle_rss:.1} MiB",
        started.elapsed().as_secs_f64()
    );

    let mut peak_rss: f64 = 0.0;
    let mut all_hpas = None;
    let mut all_active = None;
    let mut last_report = Instant::now();
    let active_names: std::collections::HashSet<String> =
        active.iter().map(|i| format!("worker-{i}")).collect();
    while all_hpas.is_none() || all_active.is_none() {
        operator.check_running()?;
        let (rss, _) = rss_mib(pid);
        peak_rss = peak_rss.max(rss);
        let hpas = cluster
            .server
            .objects("autoscaling/v2", "HorizontalPodAutoscaler")?
            .len();
        if all_hpas.is_none() && hpas >= population.objects {
            all_hpas = Some(started.elapsed());
        }
        let scaled = cluster
            .server
            .objects("apps/v1", "Deployment")?
            .iter()
            .filter(|d| {
                d["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| active_names.contains(n))
                    && d["spec"]["replicas"].as_i64() == Some(1)
            })
            .count();
        if all_active.is_none() && scaled >= active.len() {
            all_active = Some(started.elapsed());
        }
        if last_report.elapsed() >= Duration::from_secs(30) {
            println!(
                "  ... {:.0} s: {hpas} HPAs, {scaled}/{} active targets at 1, RSS {rss:.1} MiB",
                started.elapsed().as_secs_f64(),
                active.len()
            );
            last_report = Instant::now();
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(1800),
            "not every HPA exists or not every active target is at 1 after 30 min ({hpas} HPAs, {scaled}/{} active)",
            active.len()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let all_hpas = all_hpas.unwrap_or_default();
    let all_active = all_active.unwrap_or_default();

    // Settle one polling interval after the ramp, so every loop has polled and written its
    // status, then the steady window.
    tokio::time::sleep(Duration::from_secs(POLLING_SECS + 5)).await;
    let before = scrape(operator.metrics).await?;
    cluster.server.reset_request_counts();
    let cpu_before = cpu_secs(pid);
    let steady_start = Instant::now();
    let mut lags = Vec::new();
    let mut steady_rss: f64 = 0.0;
    let mut next_scrape = steady_start + Duration::from_secs(POLLING_SECS);
    while steady_start.elapsed() < args.steady {
        operator.check_running()?;
        steady_rss = steady_rss.max(rss_mib(pid).0);
        if Instant::now() >= next_scrape {
            let text = scrape(operator.metrics).await?;
            lags.extend(samples(&text, "keda_internal_scale_loop_latency_seconds"));
            next_scrape += Duration::from_secs(POLLING_SECS);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let window = steady_start.elapsed().as_secs_f64();
    let cpu_cores = (cpu_secs(pid) - cpu_before) / window;
    let counts = cluster.server.request_counts();
    let after = scrape(operator.metrics).await?;
    // Every loop's latest lag at the end of the window too.
    lags.extend(samples(&after, "keda_internal_scale_loop_latency_seconds"));
    let throttled = throttled(&after) - throttled(&before);
    let scaler_errors = samples(&after, "keda_scaler_detail_errors_total").sum::<f64>()
        - samples(&before, "keda_scaler_detail_errors_total").sum::<f64>();
    let (_, hwm) = rss_mib(pid);
    peak_rss = peak_rss.max(hwm);
    counting.cancel();
    let per_second = per_second.await?;
    lags.sort_by(f64::total_cmp);

    let per_minute = 60.0 / window;
    let mut requests_per_minute: BTreeMap<String, f64> = BTreeMap::new();
    let mut writes = 0u64;
    for (verb, resource, n) in counts.iter() {
        *requests_per_minute
            .entry(format!("{verb:?} {resource}"))
            .or_default() += n as f64 * per_minute;
        if !matches!(
            verb,
            memkube::Verb::Get | memkube::Verb::List | memkube::Verb::Watch
        ) {
            writes += n;
        }
    }

    // The HPA's reads through the metrics-apiserver.
    let paths: Vec<String> = cluster
        .server
        .objects("autoscaling/v2", "HorizontalPodAutoscaler")?
        .iter()
        .filter_map(|hpa| metric_path(hpa))
        .collect();
    anyhow::ensure!(!paths.is_empty(), "no HPA names an external metric");
    let serving = CertificateAuthority::new("bench-serving-ca")?;
    let front_proxy = CertificateAuthority::new("bench-front-proxy-ca")?;
    let proxy_client = front_proxy.issue_client("front-proxy-client")?;
    let cancel = CancellationToken::new();
    let paths = Arc::new(paths);
    let read_as = async |extra: &[&str]| -> anyhow::Result<_> {
        let apiserver = aggregator::start_metrics_apiserver_with(
            &cluster,
            operator.metric_service,
            &serving,
            &front_proxy,
            CERTS_NAMESPACE,
            extra,
            cancel.clone(),
        )
        .secure;
        // Warm: the metrics-apiserver reads its certificates from the operator's Secret.
        let warm = Instant::now();
        loop {
            let answer =
                aggregator::get_as_hpa(apiserver, &serving, &proxy_client, &paths[0]).await;
            if matches!(answer, Some((200, _))) {
                break;
            }
            anyhow::ensure!(
                warm.elapsed() < Duration::from_secs(60),
                "the metrics-apiserver serves no metric after 60 s: {answer:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        cluster.server.reset_request_counts();
        let (reads, by_source, errors) = hpa_reads(
            apiserver,
            &serving,
            &proxy_client,
            paths.clone(),
            args.reads,
        )
        .await?;
        let reviews = reviews(&cluster.server.request_counts());
        anyhow::Ok((reads, by_source, errors, reviews))
    };
    let (reads, by_source, read_errors, reviews) = read_as(&[]).await?;
    // The same reads through a metrics-apiserver that asks about each metric, as KEDA's
    // adapter does.
    let (per_metric, _, _, per_metric_reviews) =
        read_as(&["--authorization-namespace-wide=false"]).await?;
    cancel.cancel();
    operator.stop().await;

    for &i in &active {
        let _: i64 = redis.del(list_name(run, i)).await?;
    }
    // The first 60 s after the operator's start: its first polls of every object.
    let first_window: Vec<u64> = per_second.iter().copied().take(60).collect();
    Ok(Report {
        population,
        idle_rss,
        peak_rss,
        steady_rss,
        cpu_cores,
        all_hpas,
        all_active,
        metrics_api_objects: (population.objects + 1) / 3,
        max_polls_per_second: first_window.iter().copied().max().unwrap_or(0),
        first_window_polls: first_window.iter().sum(),
        throttled,
        scaler_errors,
        requests_per_minute,
        writes_per_minute: writes as f64 * per_minute,
        lag_p50: percentile(&lags, 50.0),
        lag_p99: percentile(&lags, 99.0),
        lag_samples: lags.len(),
        read_p50: percentile(&reads, 50.0),
        read_p99: percentile(&reads, 99.0),
        read_errors,
        reads_by_source: by_source
            .iter()
            .map(|(source, l)| (*source, percentile(l, 50.0), percentile(l, 99.0), l.len()))
            .collect(),
        reviews,
        per_metric_p50: percentile(&per_metric, 50.0),
        per_metric_p99: percentile(&per_metric, 99.0),
        per_metric_reviews,
    })
}

fn print(report: &Report, args: &Args) {
    let p = report.population;
    println!();
    println!(
        "## {} ScaledObjects (redis / metrics-api / cron) and {} ScaledJobs, pollingInterval {POLLING_SECS}",
        p.objects, p.jobs
    );
    println!(
        "client limits: --kube-api-qps {} --kube-api-burst {}, KEDA_SCALEDOBJECT_CTRL_MAX_RECONCILES={}",
        args.qps, args.burst, args.reconciles
    );
    println!(
        "RSS: idle {:.1} MiB, peak {:.1} MiB, steady {:.1} MiB (goal at 100,000: <= 1536 MiB); {:.0} bytes per object in steady state",
        report.idle_rss,
        report.peak_rss,
        report.steady_rss,
        (report.steady_rss - report.idle_rss) * 1024.0 * 1024.0 / (p.objects + p.jobs) as f64
    );
    println!(
        "CPU in steady state: {:.3} cores (goal <= 1)",
        report.cpu_cores
    );
    println!(
        "from the operator's start: every HPA {:.1} s, every active target at 1 replica {:.1} s",
        report.all_hpas.as_secs_f64(),
        report.all_active.as_secs_f64()
    );
    let bound = report.metrics_api_objects as f64 / POLLING_SECS as f64;
    println!(
        "poll spread, first 60 s: {} metrics-api polls, at most {} in one second (the {} metrics-api objects / {POLLING_SECS} s = {bound:.0} per second)",
        report.first_window_polls, report.max_polls_per_second, report.metrics_api_objects
    );
    println!(
        "steady state: throttled requests {:.0} (goal 0), writes {:.1}/min (goal 0), failed scaler reads {:.0}",
        report.throttled, report.writes_per_minute, report.scaler_errors
    );
    for (kind, n) in &report.requests_per_minute {
        println!("  {kind}: {n:.1}/min");
    }
    println!(
        "tick lag: p50 {} p99 {} ({} samples; goal p99 <= 100 ms)",
        ms(report.lag_p50),
        ms(report.lag_p99),
        report.lag_samples
    );
    println!(
        "HPA reads through the metrics-apiserver: p50 {} p99 {} ({} reads, {} not 200; goal p99 <= 5 ms)",
        ms(report.read_p50),
        ms(report.read_p99),
        args.reads,
        report.read_errors
    );
    for (source, p50, p99, n) in &report.reads_by_source {
        println!("  {source}: p50 {} p99 {} ({n} reads)", ms(*p50), ms(*p99));
    }
    println!(
        "  SubjectAccessReviews sent for them: {}; the same reads asking about each metric (--authorization-namespace-wide=false, as KEDA): p50 {} p99 {}, {} reviews",
        report.reviews,
        ms(report.per_metric_p50),
        ms(report.per_metric_p99),
        report.per_metric_reviews
    );
}

/// SubjectAccessReviews among `counts`.
fn reviews(counts: &memkube::RequestCounts) -> u64 {
    counts.get(memkube::Verb::Create, "subjectaccessreviews")
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = Args::parse()?;
    let client = redis::Client::open("redis://127.0.0.1:6379/")?;
    let mut redis = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "this bench needs Redis on 127.0.0.1:6379 (scripts/services.sh starts it): {e}"
            )
        })?;
    let mut reports = Vec::new();
    let small = Population {
        objects: args.small.min(args.objects),
        jobs: args.jobs * args.small.min(args.objects) / args.objects,
    };
    let large = Population {
        objects: args.objects,
        jobs: args.jobs,
    };
    for population in [small, large] {
        if reports
            .iter()
            .any(|r: &Report| r.population.objects == population.objects)
        {
            continue;
        }
        let report = run_population(&args, population, &mut redis).await?;
        print(&report, &args);
        reports.push(report);
    }
    if let [small, large] = reports.as_slice() {
        let objects = (large.population.objects + large.population.jobs)
            .saturating_sub(small.population.objects + small.population.jobs);
        println!();
        println!(
            "large / small: RSS {:.2}x, CPU {:.2}x, tick lag p99 {:.2}x, read p99 {:.2}x; steady RSS per added object {:.0} bytes",
            large.steady_rss / small.steady_rss,
            large.cpu_cores / small.cpu_cores,
            large.lag_p99 / small.lag_p99,
            large.read_p99 / small.read_p99,
            (large.steady_rss - small.steady_rss) * 1024.0 * 1024.0 / objects.max(1) as f64
        );
    }
    Ok(())
}
