//! Polls 1,000 redis triggers on one Redis, 1,000 kafka triggers on one Kafka-protocol broker
//! and 1,000 prometheus triggers on one Prometheus, built through the registry, and shows that
//! they share clients: the mean cost per poll, the server-side (Redis `CLIENT LIST`) or
//! process-side (pooled clients, TCP connections to the server, threads, RSS) client counts,
//! and the same numbers for a baseline measured in the same run where every trigger has its
//! own client, as in KEDA.
//!
//! Needs Redis on 127.0.0.1:6379 and a Kafka-protocol broker on 127.0.0.1:9092
//! (`scripts/services.sh`), and the `prometheus` binary: the bench runs its own Prometheus on a
//! free loopback port with `--web.max-connections=4096`, because the baseline's 1,000 clients
//! keep 1,000 connections open and Prometheus' default limit of 512 makes the 513th trigger's
//! poll hang until it times out. Not part of `cargo test`; run it with
//!
//! ```sh
//! cargo bench -p keda-scalers --bench shared_clients --profile dev
//! ```
//!
//! `KEDA_RS_BENCH_TRIGGERS` changes the number of triggers (default 1000);
//! `KEDA_RS_BENCH_SOURCES` picks the sources, a comma-separated list of `redis`, `kafka` and
//! `prometheus` (default all three), or `loki`: 1,000 `loki` triggers on one fake Loki (a child
//! process of the bench answering Loki's documented instant-query shape) share one pool
//! (issue 24), beside one client per trigger.

use std::sync::Arc;
use std::time::{Duration, Instant};

use keda_scalers::http_client::{HttpClient, HttpClientKey};
use keda_scalers::pool::ClientPools;
use keda_scalers::scalers::kafka::client::{ClusterSettings, GroupKey, GroupReader, KafkaCluster};
use keda_scalers::{BuiltScaler, Registry, ScalerContext};
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;

const REDIS: &str = "127.0.0.1:6379";
const KAFKA: &str = "127.0.0.1:9092";
/// Databases used only by this bench, so the server's count of clients on them is ours.
const SHARED_DB: &str = "11";
const BASELINE_DB: &str = "12";
/// Kafka topics the triggers spread over.
const TOPICS: usize = 10;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn context(trigger_type: &str, metadata: &[(&str, &str)], pools: &ClientPools) -> ScalerContext {
    ScalerContext {
        metadata: metadata
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        clients: pools.clone(),
        scalable_name: "bench".into(),
        scalable_namespace: "default".into(),
        // Builds and polls in a loaded run may take longer than KEDA's 3 s default.
        global_http_timeout: Duration::from_secs(10),
        ..ScalerContext::new(trigger_type, 0)
    }
}

/// Polls every scaler once, one after the other, and returns the mean wall time per poll.
async fn poll_sequentially(scalers: &[(BuiltScaler, String)]) -> Result<Duration, BoxError> {
    let started = Instant::now();
    for (scaler, metric) in scalers {
        scaler.scaler().metrics_and_activity(metric).await?;
    }
    Ok(started.elapsed() / u32::try_from(scalers.len().max(1))?)
}

/// Polls every scaler once, all at the same time, and returns the wall time of the round.
async fn poll_concurrently(
    scalers: Vec<(BuiltScaler, String)>,
) -> Result<(Duration, Vec<(BuiltScaler, String)>), BoxError> {
    let scalers: Vec<Arc<(BuiltScaler, String)>> = scalers.into_iter().map(Arc::new).collect();
    let started = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for s in &scalers {
        let s = Arc::clone(s);
        set.spawn(async move { s.0.scaler().metrics_and_activity(&s.1).await.map(|_| ()) });
    }
    while let Some(joined) = set.join_next().await {
        joined??;
    }
    let elapsed = started.elapsed();
    let scalers = scalers
        .into_iter()
        .map(|s| Arc::try_unwrap(s).map_err(|_| "a poll task still holds a scaler"))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((elapsed, scalers))
}

async fn close_all(scalers: Vec<(BuiltScaler, String)>) {
    for (scaler, _) in &scalers {
        scaler.scaler().close().await;
    }
}

/// Redis clients connected to database `db`, as the server counts them.
async fn redis_clients_on(
    r: &mut redis::aio::MultiplexedConnection,
    db: &str,
) -> Result<usize, BoxError> {
    let list: String = redis::cmd("CLIENT").arg("LIST").query_async(r).await?;
    Ok(list
        .lines()
        .filter(|l| l.split(' ').any(|f| f == format!("db={db}")))
        .count())
}

/// Waits until `count` stops changing (closed sockets are noticed asynchronously), at most 5 s.
async fn settled<F, Fut>(mut count: F) -> Result<usize, BoxError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<usize, BoxError>>,
{
    let mut last = count().await?;
    for _ in 0..25 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = count().await?;
        if now == last {
            return Ok(now);
        }
        last = now;
    }
    Ok(last)
}

/// The socket inodes this process holds (from the links in /proc/self/fd).
fn own_socket_inodes() -> std::collections::HashSet<String> {
    std::fs::read_dir("/proc/self/fd")
        .map(|dir| {
            dir.filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
                .filter_map(|target| {
                    let target = target.to_string_lossy().into_owned();
                    let inode = target.strip_prefix("socket:[")?.strip_suffix(']')?;
                    Some(inode.to_string())
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The local ports of this process's ESTABLISHED TCP connections to `port`. /proc/net/tcp{,6}
/// lists the whole network namespace (other processes' connections to the same server too), so
/// only sockets whose inode this process holds are counted.
fn tcp_local_ports_to(port: u16) -> std::collections::HashSet<String> {
    let wanted = format!("{port:04X}");
    let own = own_socket_inodes();
    ["/proc/self/net/tcp", "/proc/self/net/tcp6"]
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .flat_map(|text| {
            text.lines()
                .skip(1)
                .filter_map(|line| {
                    let fields: Vec<&str> = line.split_whitespace().collect();
                    let established = fields.len() > 9
                        && fields[3] == "01"
                        && fields[2].rsplit(':').next() == Some(wanted.as_str())
                        && own.contains(fields[9]);
                    established.then(|| fields[1].to_string())
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// ESTABLISHED TCP connections of this process to `port`.
fn tcp_connections_to(port: u16) -> usize {
    tcp_local_ports_to(port).len()
}

/// A field of /proc/self/status, e.g. `Threads` or `VmRSS` (kB).
fn proc_status(field: &str) -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(&format!("{field}:")))
                .map(|l| l[field.len() + 1..].trim().to_string())
        })
        .unwrap_or_default()
}

struct Round {
    label: String,
    mean_poll: Duration,
    concurrent_round: Duration,
    clients: String,
    connections: usize,
    threads: String,
    rss: String,
}

fn print(rounds: &[Round]) {
    println!(
        "| scenario | mean per poll (sequential) | round of all polls (concurrent) | clients | TCP connections | threads | RSS |"
    );
    println!("|---|---|---|---|---|---|---|");
    for r in rounds {
        println!(
            "| {} | {:.3} ms | {:.1} ms | {} | {} | {} | {} |",
            r.label,
            r.mean_poll.as_secs_f64() * 1e3,
            r.concurrent_round.as_secs_f64() * 1e3,
            r.clients,
            r.connections,
            r.threads,
            r.rss
        );
    }
}

fn ratio(baseline: Duration, shared: Duration) -> f64 {
    baseline.as_secs_f64() / shared.as_secs_f64().max(f64::MIN_POSITIVE)
}

async fn redis_round(n: usize, label: &str, db: &str, separate: bool) -> Result<Round, BoxError> {
    let registry = Registry::builtin();
    let mut probe = redis::Client::open(format!("redis://{REDIS}/"))?
        .get_multiplexed_async_connection()
        .await?;
    let shared_pools = ClientPools::new();
    let mut scalers = Vec::with_capacity(n);
    for i in 0..n {
        let pools = if separate {
            ClientPools::new()
        } else {
            shared_pools.clone()
        };
        let list = format!("keda-rs-bench-{i}");
        let ctx = context(
            "redis",
            &[
                ("address", REDIS),
                ("listName", &list),
                ("databaseIndex", db),
            ],
            &pools,
        );
        scalers.push((registry.build(ctx).await?, format!("s0-redis-{list}")));
    }
    let mean_poll = poll_sequentially(&scalers).await?;
    let (concurrent_round, scalers) = poll_concurrently(scalers).await?;
    let server = redis_clients_on(&mut probe, db).await?;
    let round = Round {
        label: label.to_string(),
        mean_poll,
        concurrent_round,
        clients: format!("{server} (Redis CLIENT LIST on db {db})"),
        connections: tcp_connections_to(6379).saturating_sub(1), // minus the probe
        threads: proc_status("Threads"),
        rss: proc_status("VmRSS"),
    };
    close_all(scalers).await;
    let after = settled(|| {
        let mut probe = probe.clone();
        async move { redis_clients_on(&mut probe, db).await }
    })
    .await?;
    println!("{label}: {server} Redis clients while polling, {after} after close");
    Ok(round)
}

async fn create_topics(topics: &[String]) -> Result<(), BoxError> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", KAFKA)
        .create()?;
    let new: Vec<NewTopic<'_>> = topics
        .iter()
        .map(|t| NewTopic::new(t, 1, TopicReplication::Fixed(1)))
        .collect();
    for result in admin.create_topics(&new, &AdminOptions::new()).await? {
        result.map_err(|(topic, e)| format!("creating {topic}: {e}"))?;
    }
    Ok(())
}

/// How the kafka triggers choose their consumer group.
#[derive(Clone, Copy)]
enum Groups {
    /// One group per topic (each trigger watches its topic's group).
    PerTopic,
    /// A group per trigger: the most readers keda-rs can need.
    PerTrigger,
}

async fn kafka_round(
    n: usize,
    label: &str,
    run: &str,
    groups: Groups,
    separate: bool,
) -> Result<Round, BoxError> {
    let registry = Registry::builtin();
    let shared_pools = ClientPools::new();
    let mut all_pools = Vec::new();
    let mut scalers = Vec::with_capacity(n);
    for i in 0..n {
        let pools = if separate {
            let p = ClientPools::new();
            all_pools.push(p.clone());
            p
        } else {
            shared_pools.clone()
        };
        let topic = format!("keda-rs-bench-{run}-{}", i % TOPICS);
        let group = match groups {
            Groups::PerTopic => format!("{topic}-workers"),
            Groups::PerTrigger => format!("{topic}-workers-{i}"),
        };
        let ctx = context(
            "kafka",
            &[
                ("bootstrapServers", KAFKA),
                ("consumerGroup", &group),
                ("topic", &topic),
            ],
            &pools,
        );
        scalers.push((registry.build(ctx).await?, format!("s0-kafka-{topic}")));
    }
    if !separate {
        all_pools.push(shared_pools);
    }
    let mean_poll = poll_sequentially(&scalers).await?;
    let (concurrent_round, scalers) = poll_concurrently(scalers).await?;
    let clusters: usize = all_pools
        .iter()
        .map(|p| p.pool::<ClusterSettings, KafkaCluster>().len())
        .sum();
    let readers: usize = all_pools
        .iter()
        .map(|p| p.pool::<GroupKey, GroupReader>().len())
        .sum();
    let round = Round {
        label: label.to_string(),
        mean_poll,
        concurrent_round,
        clients: format!("{clusters} cluster clients + {readers} group readers"),
        connections: tcp_connections_to(9092),
        threads: proc_status("Threads"),
        rss: proc_status("VmRSS"),
    };
    close_all(scalers).await;
    drop(all_pools);
    let after = settled(|| async { Ok(tcp_connections_to(9092)) }).await?;
    println!(
        "{label}: {} connections to {KAFKA} while polling, {after} after close",
        round.connections
    );
    Ok(round)
}

/// What the prometheus rounds measure beyond [`Round`]: connections opened in each polling
/// interval (every trigger polled once, one after the other), and the poll cost of each.
struct Intervals {
    first_mean: Duration,
    second_mean: Duration,
    opened_first: usize,
    opened_second: usize,
}

/// A Prometheus of the bench's own, scraping itself, stopped when dropped.
struct OwnPrometheus {
    port: u16,
    dir: std::path::PathBuf,
    _child: tokio::process::Child,
}

impl Drop for OwnPrometheus {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn start_prometheus() -> Result<OwnPrometheus, BoxError> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let dir = std::env::temp_dir().join(format!("keda-rs-bench-prometheus-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: prometheus\n    \
             static_configs:\n      - targets: [\"127.0.0.1:{port}\"]\n"
        ),
    )?;
    let child = tokio::process::Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--web.max-connections=4096")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("starting the prometheus binary: {e}"))?;
    let instance = OwnPrometheus {
        port,
        dir,
        _child: child,
    };
    // Ready once its own `up` series has a sample.
    let client = keda_scalers::http_client::reqwest_client(
        &keda_scalers::tls::TlsSettings::default(),
        Duration::from_secs(2),
    )?;
    let url = format!("http://127.0.0.1:{port}/api/v1/query?query=up");
    for _ in 0..100 {
        if let Ok(answer) = client.get(&url).send().await
            && answer.text().await.is_ok_and(|t| t.contains("\"up\""))
        {
            return Ok(instance);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err("the bench's Prometheus did not become ready in 10 s".into())
}

/// The HTTP API a round's triggers read.
#[derive(Clone, Copy)]
enum HttpSource {
    /// `prometheus` on the bench's own Prometheus.
    Prometheus,
    /// `loki` on the fake Loki (`fake_loki`), a child process of the bench.
    Loki,
}

async fn prometheus_round(
    prometheus_port: u16,
    n: usize,
    label: &str,
    separate: bool,
) -> Result<(Round, Intervals), BoxError> {
    http_round(HttpSource::Prometheus, prometheus_port, n, label, separate).await
}

async fn http_round(
    source: HttpSource,
    port: u16,
    n: usize,
    label: &str,
    separate: bool,
) -> Result<(Round, Intervals), BoxError> {
    let registry = Registry::builtin();
    let shared_pools = ClientPools::new();
    let mut all_pools = Vec::new();
    let mut scalers = Vec::with_capacity(n);
    let server = format!("http://127.0.0.1:{port}");
    for i in 0..n {
        let pools = if separate {
            let p = ClientPools::new();
            all_pools.push(p.clone());
            p
        } else {
            shared_pools.clone()
        };
        let (trigger_type, query) = match source {
            // A query per trigger over a real series (Prometheus scrapes itself).
            HttpSource::Prometheus => {
                ("prometheus", format!("sum(up{{job=\"prometheus\"}}) * {i}"))
            }
            // A LogQL metric query per trigger; the fake answers each with one sample.
            HttpSource::Loki => (
                "loki",
                format!("sum(rate({{app=\"api\",trigger=\"{i}\"}}[1m]))"),
            ),
        };
        let ctx = context(
            trigger_type,
            &[
                ("serverAddress", server.as_str()),
                ("query", query.as_str()),
                ("threshold", "10"),
            ],
            &pools,
        );
        scalers.push((registry.build(ctx).await?, format!("s0-{trigger_type}")));
    }
    if !separate {
        all_pools.push(shared_pools);
    }
    // Building connects nothing; the first interval opens what the clients need, the second
    // reuses it (keep-alive outlives a polling interval).
    let before = tcp_local_ports_to(port);
    let first_mean = poll_sequentially(&scalers).await?;
    let after_first = tcp_local_ports_to(port);
    let second_mean = poll_sequentially(&scalers).await?;
    let after_second = tcp_local_ports_to(port);
    let intervals = Intervals {
        first_mean,
        second_mean,
        opened_first: after_first.difference(&before).count(),
        opened_second: after_second.difference(&after_first).count(),
    };
    let (concurrent_round, scalers) = poll_concurrently(scalers).await?;
    let clients: usize = all_pools
        .iter()
        .map(|p| p.pool::<HttpClientKey, HttpClient>().len())
        .sum();
    let round = Round {
        label: label.to_string(),
        mean_poll: second_mean,
        concurrent_round,
        clients: format!("{clients} HTTP clients"),
        connections: tcp_connections_to(port),
        threads: proc_status("Threads"),
        rss: proc_status("VmRSS"),
    };
    close_all(scalers).await;
    drop(all_pools);
    let after = settled(|| async { Ok(tcp_connections_to(port)) }).await?;
    println!(
        "{label}: connections opened in the first polling interval {}, in the second {}; \
         open after a burst of all polls at once {}; {after} after close",
        intervals.opened_first, intervals.opened_second, round.connections
    );
    Ok((round, intervals))
}

/// The documented answer of Loki's instant query API
/// (<https://grafana.com/docs/loki/latest/reference/loki-http-api/#query-logs-at-a-single-point-in-time>):
/// a vector of one sample.
const LOKI_VECTOR: &str = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000.5,"3"]}],"stats":{}}}"#;

/// Set in the environment of the child process that serves the fake Loki.
const FAKE_LOKI_ENV: &str = "KEDA_RS_BENCH_FAKE_LOKI";

/// The fake Loki's process: this bench run again with [`FAKE_LOKI_ENV`], so its connections'
/// memory is not in the bench's RSS. Serves HTTP/1.1 with keep-alive on a free loopback port
/// (printed on stdout), answers `GET /loki/api/v1/query?query=...` with [`LOKI_VECTOR`] and
/// anything else with 404, until its stdin closes.
async fn serve_fake_loki() -> Result<(), BoxError> {
    use http_body_util::Full;
    use hyper::body::Bytes;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("{}", listener.local_addr()?.port());
    tokio::spawn(async {
        // The bench closes our stdin when it is done (or dies).
        let mut sink = Vec::new();
        let _ = tokio::io::AsyncReadExt::read_to_end(&mut tokio::io::stdin(), &mut sink).await;
        std::process::exit(0);
    });
    loop {
        let (stream, _) = listener.accept().await?;
        tokio::spawn(async move {
            let service = hyper::service::service_fn(
                |request: hyper::Request<hyper::body::Incoming>| async move {
                    let found = request.uri().path() == "/loki/api/v1/query"
                        && request
                            .uri()
                            .query()
                            .is_some_and(|q| q.starts_with("query="));
                    let (status, body) = if found {
                        (http::StatusCode::OK, LOKI_VECTOR)
                    } else {
                        (http::StatusCode::NOT_FOUND, "404 page not found")
                    };
                    hyper::Response::builder()
                        .status(status)
                        .header("content-type", "application/json")
                        .body(Full::new(Bytes::from_static(body.as_bytes())))
                },
            );
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The fake Loki child process, stopped when dropped.
struct FakeLoki {
    port: u16,
    _child: tokio::process::Child,
}

async fn start_fake_loki() -> Result<FakeLoki, BoxError> {
    let mut child = tokio::process::Command::new(std::env::current_exe()?)
        .env(FAKE_LOKI_ENV, "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?;
    let stdout = child.stdout.take().ok_or("the fake Loki has no stdout")?;
    let mut line = String::new();
    tokio::io::AsyncBufReadExt::read_line(&mut tokio::io::BufReader::new(stdout), &mut line)
        .await?;
    let port = line
        .trim()
        .parse()
        .map_err(|_| "the fake Loki did not print its port")?;
    Ok(FakeLoki {
        port,
        _child: child,
    })
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    if std::env::var_os(FAKE_LOKI_ENV).is_some() {
        return serve_fake_loki().await;
    }
    let n: usize = std::env::var("KEDA_RS_BENCH_TRIGGERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    println!("{n} triggers per scenario; debug or release as built\n");
    let sources = std::env::var("KEDA_RS_BENCH_SOURCES")
        .unwrap_or_else(|_| "redis,kafka,prometheus".to_string());
    let wanted = |source: &str| sources.split(',').any(|s| s.trim() == source);
    let mut rounds = Vec::new();
    let mut ratios = Vec::new();

    if wanted("redis") {
        let shared = redis_round(
            n,
            &format!("redis, {n} triggers, shared pool"),
            SHARED_DB,
            false,
        )
        .await?;
        let baseline = redis_round(
            n,
            &format!("redis, {n} triggers, one client each (baseline)"),
            BASELINE_DB,
            true,
        )
        .await?;
        ratios.push(format!(
            "redis: baseline/shared mean poll cost = {:.2}x; connections {} vs {}",
            ratio(baseline.mean_poll, shared.mean_poll),
            baseline.connections,
            shared.connections
        ));
        rounds.extend([shared, baseline]);
    }

    if wanted("kafka") {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_nanos();
        let run = format!("{}x{nanos}", std::process::id());
        let topics: Vec<String> = (0..TOPICS)
            .map(|i| format!("keda-rs-bench-{run}-{i}"))
            .collect();
        create_topics(&topics).await?;
        let shared = kafka_round(
            n,
            &format!("kafka, {n} triggers, {TOPICS} groups, shared pool"),
            &run,
            Groups::PerTopic,
            false,
        )
        .await?;
        let per_group = kafka_round(
            n,
            &format!("kafka, {n} triggers, {n} groups, shared pool"),
            &run,
            Groups::PerTrigger,
            false,
        )
        .await?;
        let baseline = kafka_round(
            n,
            &format!("kafka, {n} triggers, {n} groups, one client each (baseline)"),
            &run,
            Groups::PerTrigger,
            true,
        )
        .await?;
        ratios.push(format!(
            "kafka ({TOPICS} groups): baseline/shared mean poll cost = {:.2}x; connections {} vs {}",
            ratio(baseline.mean_poll, shared.mean_poll),
            baseline.connections,
            shared.connections
        ));
        ratios.push(format!(
            "kafka ({n} groups): baseline/shared mean poll cost = {:.2}x; connections {} vs {}",
            ratio(baseline.mean_poll, per_group.mean_poll),
            baseline.connections,
            per_group.connections
        ));
        rounds.extend([shared, per_group, baseline]);
    }

    if wanted("prometheus") {
        let prometheus = start_prometheus().await?;
        // A first pass warms Prometheus' query path, so neither measured round pays for it.
        prometheus_round(
            prometheus.port,
            n,
            "prometheus warm-up (not measured)",
            false,
        )
        .await?;
        let (shared, shared_intervals) = prometheus_round(
            prometheus.port,
            n,
            &format!("prometheus, {n} triggers, one server, shared pool"),
            false,
        )
        .await?;
        let (baseline, baseline_intervals) = prometheus_round(
            prometheus.port,
            n,
            &format!("prometheus, {n} triggers, one server, one client each (baseline)"),
            true,
        )
        .await?;
        ratios.push(format!(
            "prometheus: connections opened per polling interval {} then {} (shared) vs {} then {} \
             (baseline); open after a burst {} vs {}",
            shared_intervals.opened_first,
            shared_intervals.opened_second,
            baseline_intervals.opened_first,
            baseline_intervals.opened_second,
            shared.connections,
            baseline.connections
        ));
        ratios.push(format!(
            "prometheus: baseline/shared mean poll cost = {:.2}x in the first interval \
             ({:.3} vs {:.3} ms), {:.2}x in the next ({:.3} vs {:.3} ms); a burst of all polls \
             {:.2}x; RSS {} vs {}",
            ratio(baseline_intervals.first_mean, shared_intervals.first_mean),
            baseline_intervals.first_mean.as_secs_f64() * 1e3,
            shared_intervals.first_mean.as_secs_f64() * 1e3,
            ratio(baseline_intervals.second_mean, shared_intervals.second_mean),
            baseline_intervals.second_mean.as_secs_f64() * 1e3,
            shared_intervals.second_mean.as_secs_f64() * 1e3,
            ratio(baseline.concurrent_round, shared.concurrent_round),
            baseline.rss,
            shared.rss
        ));
        rounds.extend([shared, baseline]);
    }

    if wanted("loki") {
        let loki = start_fake_loki().await?;
        let (shared, shared_intervals) = http_round(
            HttpSource::Loki,
            loki.port,
            n,
            &format!("loki, {n} triggers, one fake server, shared pool"),
            false,
        )
        .await?;
        let (baseline, baseline_intervals) = http_round(
            HttpSource::Loki,
            loki.port,
            n,
            &format!("loki, {n} triggers, one fake server, one client each (baseline)"),
            true,
        )
        .await?;
        ratios.push(format!(
            "loki: connections opened per polling interval {} then {} (shared) vs {} then {} \
             (baseline); open after a burst {} vs {}; RSS {} vs {}",
            shared_intervals.opened_first,
            shared_intervals.opened_second,
            baseline_intervals.opened_first,
            baseline_intervals.opened_second,
            shared.connections,
            baseline.connections,
            shared.rss,
            baseline.rss
        ));
        rounds.extend([shared, baseline]);
    }

    println!();
    print(&rounds);
    println!();
    for line in ratios {
        println!("{line}");
    }
    Ok(())
}
