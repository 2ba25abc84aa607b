//! Polls 1,000 redis triggers on one Redis and 1,000 kafka triggers on one Kafka-protocol
//! broker, built through the registry, and shows that they share clients: the mean cost per
//! poll, the server-side (Redis `CLIENT LIST`) or process-side (pooled clients, TCP connections
//! to the broker, threads, RSS) client counts, and the same numbers for a baseline measured in
//! the same run where every trigger has its own client, as in KEDA.
//!
//! Needs Redis on 127.0.0.1:6379 and a Kafka-protocol broker on 127.0.0.1:9092
//! (`scripts/services.sh`). Not part of `cargo test`; run it with
//!
//! ```sh
//! cargo bench -p keda-scalers --bench shared_clients --profile dev
//! ```
//!
//! `KEDA_RS_BENCH_TRIGGERS` changes the number of triggers (default 1000).

use std::sync::Arc;
use std::time::{Duration, Instant};

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

/// ESTABLISHED TCP connections of this process to `port` (from /proc/self/net/tcp{,6}).
fn tcp_connections_to(port: u16) -> usize {
    let wanted = format!("{port:04X}");
    ["/proc/self/net/tcp", "/proc/self/net/tcp6"]
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .map(|text| {
            text.lines()
                .skip(1)
                .filter(|line| {
                    let fields: Vec<&str> = line.split_whitespace().collect();
                    fields.len() > 3
                        && fields[3] == "01"
                        && fields[2].rsplit(':').next() == Some(wanted.as_str())
                })
                .count()
        })
        .sum()
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

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let n: usize = std::env::var("KEDA_RS_BENCH_TRIGGERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    println!("{n} triggers per scenario; debug or release as built\n");

    let redis_shared = redis_round(
        n,
        &format!("redis, {n} triggers, shared pool"),
        SHARED_DB,
        false,
    )
    .await?;
    let redis_baseline = redis_round(
        n,
        &format!("redis, {n} triggers, one client each (baseline)"),
        BASELINE_DB,
        true,
    )
    .await?;

    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_nanos();
    let run = format!("{}x{nanos}", std::process::id());
    let topics: Vec<String> = (0..TOPICS)
        .map(|i| format!("keda-rs-bench-{run}-{i}"))
        .collect();
    create_topics(&topics).await?;
    let kafka_shared = kafka_round(
        n,
        &format!("kafka, {n} triggers, {TOPICS} groups, shared pool"),
        &run,
        Groups::PerTopic,
        false,
    )
    .await?;
    let kafka_per_group = kafka_round(
        n,
        &format!("kafka, {n} triggers, {n} groups, shared pool"),
        &run,
        Groups::PerTrigger,
        false,
    )
    .await?;
    let kafka_baseline = kafka_round(
        n,
        &format!("kafka, {n} triggers, {n} groups, one client each (baseline)"),
        &run,
        Groups::PerTrigger,
        true,
    )
    .await?;

    println!();
    let rounds = [
        redis_shared,
        redis_baseline,
        kafka_shared,
        kafka_per_group,
        kafka_baseline,
    ];
    print(&rounds);
    println!();
    println!(
        "redis: baseline/shared mean poll cost = {:.2}x; connections {} vs {}",
        ratio(rounds[1].mean_poll, rounds[0].mean_poll),
        rounds[1].connections,
        rounds[0].connections
    );
    println!(
        "kafka ({TOPICS} groups): baseline/shared mean poll cost = {:.2}x; connections {} vs {}",
        ratio(rounds[4].mean_poll, rounds[2].mean_poll),
        rounds[4].connections,
        rounds[2].connections
    );
    println!(
        "kafka ({n} groups): baseline/shared mean poll cost = {:.2}x; connections {} vs {}",
        ratio(rounds[4].mean_poll, rounds[3].mean_poll),
        rounds[4].connections,
        rounds[3].connections
    );
    Ok(())
}
