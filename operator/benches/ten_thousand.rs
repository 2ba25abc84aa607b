//! Issue 5's operator bench: the real `keda-operator` binary against the in-memory API server
//! with 10,000 ScaledObjects, each with a Redis trigger (`pollingInterval: 30`), on the local
//! Redis.
//!
//! ```text
//! cargo bench -p keda-operator --bench ten_thousand -- [--objects N] [--steady-secs S]
//!     [--active-every K] [--kube-api-qps Q] [--kube-api-burst B]
//! ```
//!
//! It reports:
//! - the operator's RSS: idle before any ScaledObject, peak, and in steady state;
//! - the time from the last create until every HPA exists (and until every active target is
//!   at 1 replica);
//! - client-side throttling (`rest_client_rate_limiter_*` from the operator's `/metrics`):
//!   during the ramp and in steady state;
//! - API requests per minute in steady state, by verb and resource, counted by the API server;
//! - scale-loop tick lag p50/p99 (`keda_internal_scale_loop_latency_seconds`, every loop's
//!   latest value, sampled once per polling interval), against a baseline measured in the same
//!   run after the operator stopped: the same number of bare tokio tasks, each polling the same
//!   Redis list on a `tokio::time::interval` of the same period.
//!
//! `OPBENCH_OPERATOR_LOG` sets the operator's `RUST_LOG` (default `warn`; its log goes to
//! stdout).
//!
//! Every `--active-every`th list (default 100th) holds items, so its Deployment must go 0 -> 1:
//! the ramp writes where something changes, and the steady state should write nothing.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use keda_api::ScaledObject;
use kube::api::{Api, PostParams};
use memkube::MemKube;
use redis::AsyncCommands;

mod common;

use common::{ms, percentile, rss_mib, samples, throttled};

const BINARY: &str = env!("CARGO_BIN_EXE_keda-operator");
const NAMESPACE: &str = "bench";
const POLLING_SECS: u64 = 30;
const ACTIVE_ITEMS: i64 = 10;

struct Args {
    objects: usize,
    steady: Duration,
    active_every: usize,
    qps: Option<String>,
    burst: Option<String>,
}

impl Args {
    fn parse() -> anyhow::Result<Self> {
        let mut args = Args {
            objects: 10_000,
            steady: Duration::from_secs(120),
            active_every: 100,
            qps: None,
            burst: None,
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
                "--steady-secs" => args.steady = Duration::from_secs(value()?.parse()?),
                "--active-every" => args.active_every = value()?.parse::<usize>()?.max(1),
                "--kube-api-qps" => args.qps = Some(value()?),
                "--kube-api-burst" => args.burst = Some(value()?),
                other => anyhow::bail!(
                    "unknown argument {other}; expected --objects, --steady-secs, --active-every, --kube-api-qps, --kube-api-burst"
                ),
            }
        }
        Ok(args)
    }
}

/// The operator process, killed when dropped.
struct Operator {
    child: Child,
    metrics: SocketAddr,
    probes: SocketAddr,
}

impl Drop for Operator {
    /// SIGTERM, as Kubernetes stops it; SIGKILL if it has not exited 20 s later.
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> anyhow::Result<SocketAddr> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?)
}

impl Operator {
    fn start(
        kubeconfig: &std::path::Path,
        home: &std::path::Path,
        args: &Args,
    ) -> anyhow::Result<Self> {
        let metrics = free_port()?;
        let probes = free_port()?;
        let mut cmd = Command::new(BINARY);
        cmd.args([
            "--metrics-bind-address",
            &metrics.to_string(),
            "--health-probe-bind-address",
            &probes.to_string(),
            "--metrics-service-bind-address",
            "0",
        ]);
        if let Some(qps) = &args.qps {
            cmd.args(["--kube-api-qps", qps]);
        }
        if let Some(burst) = &args.burst {
            cmd.args(["--kube-api-burst", burst]);
        }
        let child = cmd
            .env_clear()
            .env("HOME", home)
            .env("KUBECONFIG", kubeconfig)
            // The operator's own log, quiet unless asked for (it logs to stdout).
            .env(
                "RUST_LOG",
                std::env::var("OPBENCH_OPERATOR_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit())
            .spawn()?;
        Ok(Operator {
            child,
            metrics,
            probes,
        })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn check_running(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            anyhow::bail!("keda-operator exited: {status}");
        }
        Ok(())
    }
}

/// A plain HTTP/1.1 GET (blocking; called from `spawn_blocking`): status and body.
fn http_get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    Ok((status, body))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

async fn scrape(addr: SocketAddr) -> anyhow::Result<String> {
    let (status, body) = tokio::task::spawn_blocking(move || http_get(addr, "/metrics")).await??;
    anyhow::ensure!(status == 200, "/metrics answered {status}");
    Ok(body)
}

fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.2}x", a / b)
    } else {
        "n/a".into()
    }
}

fn list_name(run: u32, i: usize) -> String {
    format!("keda-rs-bench-{run}-{i}")
}

fn scaled_object(run: u32, i: usize) -> anyhow::Result<ScaledObject> {
    Ok(serde_json::from_value(serde_json::json!({
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": { "name": format!("so-{i}"), "namespace": NAMESPACE },
        "spec": {
            "scaleTargetRef": { "name": format!("worker-{i}") },
            "pollingInterval": POLLING_SECS,
            "minReplicaCount": 0,
            "maxReplicaCount": 10,
            "triggers": [{
                "type": "redis",
                "metadata": {
                    "address": "127.0.0.1:6379",
                    "listName": list_name(run, i),
                    "listLength": "5"
                }
            }]
        }
    }))?)
}

fn replicas(server: &MemKube, active: &[usize]) -> anyhow::Result<usize> {
    let names: std::collections::HashSet<String> =
        active.iter().map(|i| format!("worker-{i}")).collect();
    Ok(server
        .objects("apps/v1", "Deployment")?
        .iter()
        .filter(|d| {
            d["metadata"]["name"]
                .as_str()
                .is_some_and(|n| names.contains(n))
                && d["spec"]["replicas"].as_i64() == Some(1)
        })
        .count())
}

/// The lag of every tick of `objects` bare loops polling their list every `POLLING_SECS`,
/// their starts spread over `spread`, measured for `window`.
async fn baseline_lags(
    redis: redis::aio::MultiplexedConnection,
    run: u32,
    objects: usize,
    spread: Duration,
    window: Duration,
) -> Vec<f64> {
    let lags = Arc::new(Mutex::new(Vec::new()));
    let stop = Instant::now() + spread + window;
    let mut tasks = Vec::with_capacity(objects);
    for i in 0..objects {
        let mut redis = redis.clone();
        let lags = lags.clone();
        // `i < objects`, so the delay is below `spread`.
        let delay = spread * u32::try_from(i).unwrap_or(u32::MAX)
            / u32::try_from(objects).unwrap_or(u32::MAX).max(1);
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let mut interval = tokio::time::interval(Duration::from_secs(POLLING_SECS));
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let list = list_name(run, i);
            loop {
                let due = interval.tick().await;
                let lag = tokio::time::Instant::now().saturating_duration_since(due);
                if Instant::now() >= stop {
                    break;
                }
                let _: redis::RedisResult<i64> = redis.llen(&list).await;
                if let Ok(mut l) = lags.lock() {
                    l.push(lag.as_secs_f64());
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let mut lags = std::mem::take(&mut *lags.lock().unwrap_or_else(|e| e.into_inner()));
    lags.sort_by(f64::total_cmp);
    lags
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse()?;
    let run = std::process::id();
    let client = redis::Client::open("redis://127.0.0.1:6379/")?;
    let mut redis = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "this bench needs Redis on 127.0.0.1:6379 (scripts/services.sh starts it): {e}"
            )
        })?;
    let active: Vec<usize> = (0..args.objects).step_by(args.active_every).collect();
    for &i in &active {
        let items: Vec<i64> = (0..ACTIVE_ITEMS).collect();
        let _: i64 = redis.rpush(list_name(run, i), items).await?;
    }

    // The API server: a bookmark a minute, as a real one sends.
    let server = MemKube::builder()
        .bookmark_interval(Duration::from_secs(60))
        .build();
    server.load_crds_from_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../config/crd"))?;
    server.create_namespace(NAMESPACE)?;
    for i in 0..args.objects {
        server.seed(&common::deployment(&format!("worker-{i}"), NAMESPACE))?;
    }
    let loopback = server.serve_loopback().await?;
    let dir = std::env::temp_dir().join(format!("keda-rs-opbench-{run}"));
    std::fs::create_dir_all(&dir)?;
    let kubeconfig = dir.join("kubeconfig");
    loopback.write_kubeconfig(&kubeconfig)?;

    let mut operator = Operator::start(&kubeconfig, &dir, &args)?;
    let probes = operator.probes;
    let ready = Instant::now();
    loop {
        operator.check_running()?;
        let ok = tokio::task::spawn_blocking(move || http_get(probes, "/readyz"))
            .await?
            .is_ok_and(|(s, _)| s == 200);
        if ok {
            break;
        }
        anyhow::ensure!(
            ready.elapsed() < Duration::from_secs(60),
            "the operator is not ready after 60 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (idle_rss, _) = rss_mib(operator.pid());
    println!(
        "keda-operator ready with {} Deployments; idle RSS {idle_rss:.1} MiB",
        args.objects
    );

    // The ramp: every ScaledObject created through the API, 16 at a time.
    server.reset_request_counts();
    let api: Api<ScaledObject> = Api::namespaced(server.client(), NAMESPACE);
    let first_create = Instant::now();
    let created: Vec<anyhow::Result<()>> = stream::iter(0..args.objects)
        .map(|i| {
            let api = api.clone();
            async move {
                api.create(&PostParams::default(), &scaled_object(run, i)?)
                    .await?;
                Ok(())
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    for r in created {
        r?;
    }
    let last_create = Instant::now();
    println!(
        "created {} ScaledObjects in {:.1} s",
        args.objects,
        (last_create - first_create).as_secs_f64()
    );

    let mut peak_rss: f64 = 0.0;
    let mut all_hpas = None;
    let mut all_active = None;
    let mut last_report = Instant::now();
    while all_hpas.is_none() || all_active.is_none() {
        operator.check_running()?;
        let (rss, _) = rss_mib(operator.pid());
        peak_rss = peak_rss.max(rss);
        let hpas = server
            .objects("autoscaling/v2", "HorizontalPodAutoscaler")?
            .len();
        if all_hpas.is_none() && hpas >= args.objects {
            all_hpas = Some(last_create.elapsed());
        }
        let scaled = replicas(&server, &active)?;
        if all_active.is_none() && scaled >= active.len() {
            all_active = Some(last_create.elapsed());
        }
        if last_report.elapsed() >= Duration::from_secs(30) {
            println!(
                "  ... {:.0} s: {hpas} HPAs, {scaled}/{} active targets at 1, RSS {rss:.1} MiB",
                last_create.elapsed().as_secs_f64(),
                active.len()
            );
            last_report = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let all_hpas = all_hpas.unwrap_or_default();
    let all_active = all_active.unwrap_or_default();
    println!(
        "every HPA exists {:.1} s after the last create; every active target at 1 after {:.1} s",
        all_hpas.as_secs_f64(),
        all_active.as_secs_f64()
    );

    // Settle: one full polling interval, so every loop has polled and written its status.
    tokio::time::sleep(Duration::from_secs(POLLING_SECS + 5)).await;
    let ramp_metrics = scrape(operator.metrics).await?;
    let ramp_throttled = throttled(&ramp_metrics);
    let ramp_counts = server.request_counts();

    // Steady state.
    server.reset_request_counts();
    let steady_start = Instant::now();
    let mut lags = Vec::new();
    let mut steady_rss: f64 = 0.0;
    let mut next_scrape = steady_start + Duration::from_secs(POLLING_SECS);
    while steady_start.elapsed() < args.steady {
        operator.check_running()?;
        let (rss, _) = rss_mib(operator.pid());
        steady_rss = steady_rss.max(rss);
        if Instant::now() >= next_scrape {
            let text = scrape(operator.metrics).await?;
            lags.extend(samples(&text, "keda_internal_scale_loop_latency_seconds"));
            next_scrape += Duration::from_secs(POLLING_SECS);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let window = steady_start.elapsed();
    let counts = server.request_counts();
    let end_metrics = scrape(operator.metrics).await?;
    let steady_throttled = throttled(&end_metrics) - ramp_throttled;
    let (_, hwm) = rss_mib(operator.pid());
    peak_rss = peak_rss.max(hwm);
    lags.sort_by(f64::total_cmp);
    drop(operator);

    // The baseline, with the operator gone: bare loops on the same lists and the same period.
    let spread = (all_hpas + (last_create - first_create)).min(Duration::from_secs(POLLING_SECS));
    let base = baseline_lags(redis.clone(), run, args.objects, spread, args.steady).await;

    for &i in &active {
        let _: i64 = redis.del(list_name(run, i)).await?;
    }
    let _ = std::fs::remove_dir_all(&dir);

    // The bench's own creates are not the operator's.
    let per_object = |verb: memkube::Verb, resource: &str, n: u64| {
        let own = if matches!(verb, memkube::Verb::Create) && resource == "scaledobjects" {
            args.objects as u64
        } else {
            0
        };
        n.saturating_sub(own) as f64 / args.objects as f64
    };
    let per_minute = 60.0 / window.as_secs_f64();
    println!();
    println!(
        "## keda-operator, {} ScaledObjects (redis, pollingInterval {POLLING_SECS}), {} active",
        args.objects,
        active.len()
    );
    println!(
        "client limits: --kube-api-qps {} --kube-api-burst {}",
        args.qps.as_deref().unwrap_or("20 (default)"),
        args.burst.as_deref().unwrap_or("30 (default)")
    );
    println!(
        "RSS: idle {idle_rss:.1} MiB, peak {peak_rss:.1} MiB, steady {steady_rss:.1} MiB (goal <= 256 MiB)"
    );
    println!(
        "time from last create: every HPA {:.1} s, every active target at 1 replica {:.1} s",
        all_hpas.as_secs_f64(),
        all_active.as_secs_f64()
    );
    println!("operator's API requests per ScaledObject during the ramp:");
    let mut ramp_total = 0.0;
    for (verb, resource, n) in ramp_counts.iter() {
        let each = per_object(verb, resource, n);
        if each > 0.0 {
            ramp_total += each;
            println!("  {verb:?} {resource}: {each:.2}");
        }
    }
    println!("  total: {ramp_total:.2}");
    println!(
        "throttled requests: ramp {ramp_throttled:.0}, steady state {steady_throttled:.0} (goal 0)"
    );
    println!(
        "steady state over {:.0} s: {:.1} API requests/min",
        window.as_secs_f64(),
        counts.total() as f64 * per_minute
    );
    let mut by_kind: BTreeMap<String, u64> = BTreeMap::new();
    for (verb, resource, n) in counts.iter() {
        *by_kind.entry(format!("{verb:?} {resource}")).or_default() += n;
    }
    for (kind, n) in by_kind {
        println!("  {kind}: {:.1}/min", n as f64 * per_minute);
    }
    let (p50, p99) = (percentile(&lags, 50.0), percentile(&lags, 99.0));
    let (b50, b99) = (percentile(&base, 50.0), percentile(&base, 99.0));
    println!(
        "tick lag: p50 {} p99 {} max {} ({} samples; goal p99 <= 100 ms)",
        ms(p50),
        ms(p99),
        ms(lags.last().copied().unwrap_or(f64::NAN)),
        lags.len()
    );
    println!(
        "baseline (bare tokio loops, same lists): p50 {} p99 {} max {} ({} ticks)",
        ms(b50),
        ms(b99),
        ms(base.last().copied().unwrap_or(f64::NAN)),
        base.len()
    );
    println!(
        "ratio operator/baseline: p50 {} p99 {}",
        ratio(p50, b50),
        ratio(p99, b99)
    );
    Ok(())
}
