//! Issue 26's bench: 0 -> 1 latency from an event to the `/scale` write, with the source's
//! notifications on and off, in one run.
//!
//! ```text
//! nice -n 19 cargo bench -p keda-operator --bench wake_latency --profile dev -- \
//!     [--events 100] [--interval 30]
//! ```
//!
//! One in-process operator (the real controller and scale loops, real `pollingInterval` ticks)
//! over the in-memory API server, against real servers: two Redis servers of the bench's own
//! (`notify-keyspace-events Klt` and off) and the PostgreSQL of `scripts/services.sh` on
//! 127.0.0.1:5432. For each source (`LPUSH` on a `redis` list, `XADD` on a `redis-streams`
//! stream, `INSERT` + `NOTIFY` on a `postgresql` trigger with `listenChannel`) and each mode
//! (notifications on, off: the Redis server without keyspace events, the PostgreSQL trigger
//! without `listenChannel`; for `XADD` "off" is the blocking `XREAD` path that wakes
//! `redis-streams` where the server has no keyspace events). NATS JetStream: two `nats-server
//! -js` of the bench's own, "on" without authentication (the core NATS subscription wakes),
//! "off" with a password on its client port (the wake connection is refused: polled only); a
//! publish acknowledged by JetStream on a stream per object. Kafka: the broker of
//! `scripts/services.sh` on 127.0.0.1:9092, a topic and group per object; "on" is the trigger
//! with `topic` (the cluster client's end-offset refresh wakes), "off" the same group without
//! `topic` (the group's committed topics, polled only); a produce of one message. It creates `--events` ScaledObjects at zero, each on a key (table
//! rows) of its own, all polled every `--interval` seconds; then it sends one event per object,
//! spread evenly over one interval (so the events fall at every phase of the poll ticks), and
//! times each from the event's command returning to the watch showing the Deployment at 1
//! replica (the `/scale` write). It prints p50, p99 and max per source and mode, and the
//! ratio of the off p50 to the on p50.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use keda_api::ScaledObject;
use keda_operator::resolve::WatchScope;
use keda_operator::scalers::ScalerEnv;
use keda_operator::{ControllerConfig, ScaledObjectController};
use keda_scalers::Registry;
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use memkube::MemKube;
use tokio_util::sync::CancellationToken;

#[allow(dead_code)]
#[path = "../../scalers/tests/nats_jetstream/client.rs"]
mod nats_client;

const NS: &str = "bench";
const PG: &str = "host=127.0.0.1 port=5432 user=postgres dbname=test";
const KAFKA: &str = "127.0.0.1:9092";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Source {
    Lpush,
    Xadd,
    Notify,
    Publish,
    Produce,
}

impl Source {
    const ALL: [Source; 5] = [
        Source::Lpush,
        Source::Xadd,
        Source::Notify,
        Source::Publish,
        Source::Produce,
    ];

    fn label(self) -> &'static str {
        match self {
            Source::Lpush => "redis LPUSH",
            Source::Xadd => "redis-streams XADD",
            Source::Notify => "postgresql INSERT + NOTIFY",
            Source::Publish => "nats-jetstream publish",
            Source::Produce => "kafka produce",
        }
    }

    fn short(self) -> &'static str {
        match self {
            Source::Lpush => "l",
            Source::Xadd => "x",
            Source::Notify => "p",
            Source::Publish => "n",
            Source::Produce => "k",
        }
    }
}

struct Args {
    events: usize,
    interval: u64,
}

fn args() -> anyhow::Result<Args> {
    let mut a = Args {
        events: 100,
        interval: 30,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        if arg == "--bench" {
            continue;
        }
        let value = it
            .next()
            .ok_or_else(|| anyhow::anyhow!("{arg} needs a value"))?;
        match arg.as_str() {
            "--events" => a.events = value.parse::<usize>()?.max(1),
            "--interval" => a.interval = value.parse::<u64>()?.max(1),
            other => anyhow::bail!("unknown argument {other}"),
        }
    }
    Ok(a)
}

/// A redis-server of the bench's own with `flags`; killed when dropped.
async fn redis_server(
    flags: &str,
) -> anyhow::Result<(
    tokio::process::Child,
    String,
    redis::aio::MultiplexedConnection,
)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let child = tokio::process::Command::new("redis-server")
        .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
        .args(["--save", "", "--appendonly", "no"])
        .args(["--notify-keyspace-events", flags])
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let address = format!("127.0.0.1:{port}");
    let client = redis::Client::open(format!("redis://{address}/"))?;
    let started = Instant::now();
    loop {
        match client.get_multiplexed_async_connection().await {
            Ok(c) => return Ok((child, address, c)),
            Err(e) if started.elapsed() > Duration::from_secs(5) => return Err(e.into()),
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// A `nats-server -js` of the bench's own (`extra`: its arguments, e.g. a password), killed
/// when dropped: the process, its monitoring endpoint and a connection (as `user`).
async fn nats_server(
    extra: &[&str],
    user: Option<(&str, &str)>,
) -> anyhow::Result<(tokio::process::Child, String, nats_client::NatsClient)> {
    let free = || -> anyhow::Result<u16> {
        Ok(std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port())
    };
    let (port, monitoring) = (free()?, free()?);
    let dir = std::env::temp_dir().join(format!("wake-bench-nats-{}-{port}", std::process::id()));
    let child = tokio::process::Command::new("nats-server")
        .args(["-a", "127.0.0.1", "-p", &port.to_string()])
        .args(["-m", &monitoring.to_string(), "-js", "-sd"])
        .arg(&dir)
        .args(extra)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let started = Instant::now();
    loop {
        match nats_client::NatsClient::connect_as(&format!("127.0.0.1:{port}"), user).await {
            Ok(c) => return Ok((child, format!("127.0.0.1:{monitoring}"), c)),
            Err(e) if started.elapsed() > Duration::from_secs(5) => {
                anyhow::bail!("nats-server: {e}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// Creates `topics` (one partition each) on the broker.
async fn kafka_topics(topics: &[String]) -> anyhow::Result<()> {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    let admin: AdminClient<rdkafka::client::DefaultClientContext> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", KAFKA)
        .create()?;
    let new: Vec<NewTopic<'_>> = topics
        .iter()
        .map(|t| NewTopic::new(t, 1, TopicReplication::Fixed(1)))
        .collect();
    for result in admin
        .create_topics(
            &new,
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(10))),
        )
        .await?
    {
        result.map_err(|(topic, e)| anyhow::anyhow!("creating topic {topic}: {e}"))?;
    }
    Ok(())
}

/// Commits offset 0 of `topic`'s partition 0 for `group` (OffsetCommit without joining).
async fn kafka_commit_zero(group: String, topic: String) -> anyhow::Result<()> {
    use rdkafka::consumer::Consumer;
    tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
        let consumer: rdkafka::consumer::BaseConsumer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", KAFKA)
            .set("group.id", &group)
            .set("enable.auto.commit", "false")
            .create()?;
        let mut tpl = rdkafka::TopicPartitionList::new();
        tpl.add_partition_offset(&topic, 0, rdkafka::Offset::Offset(0))?;
        consumer.commit(&tpl, rdkafka::consumer::CommitMode::Sync)?;
        Ok(())
    })
    .await?
}

fn deployment(name: &str) -> anyhow::Result<Deployment> {
    Ok(serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": name, "namespace": NS },
        "spec": {
            "replicas": 0,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": { "containers": [{ "name": "app", "image": "registry.k8s.io/pause:3.9" }] }
            }
        }
    }))?)
}

fn object(name: &str, interval: u64, trigger: &str) -> anyhow::Result<ScaledObject> {
    let yaml = format!(
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata:\n  name: {name}\n  \
         namespace: {NS}\nspec:\n  scaleTargetRef:\n    name: {name}\n  pollingInterval: {interval}\n  \
         minReplicaCount: 0\n  maxReplicaCount: 10\n  triggers:\n    - {trigger}\n"
    );
    Ok(serde_yaml::from_str(&yaml)?)
}

/// The `permille`th per-mille of `sorted` (nearest rank).
fn percentile(sorted: &[Duration], permille: usize) -> Duration {
    let rank = (sorted.len() * permille)
        .div_ceil(1000)
        .clamp(1, sorted.len());
    sorted[rank - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = args()?;
    let (_on_server, on_address, on_redis) = redis_server("Klt").await?;
    let (_off_server, off_address, off_redis) = redis_server("").await?;
    let (pg, pg_connection) = tokio_postgres::connect(PG, tokio_postgres::NoTls)
        .await
        .map_err(|e| anyhow::anyhow!("PostgreSQL at 127.0.0.1:5432 (scripts/services.sh): {e}"))?;
    tokio::spawn(pg_connection);
    let table = format!("wake_bench_{}", std::process::id());
    pg.batch_execute(&format!("CREATE TABLE {table} (obj text)"))
        .await?;
    let nats_password = format!("bench-{}", std::process::id());
    let (_nats_on, nats_on_monitoring, nats_on) = nats_server(&[], None).await?;
    let (_nats_off, nats_off_monitoring, nats_off) = nats_server(
        &["--user", "bench", "--pass", &nats_password],
        Some(("bench", &nats_password)),
    )
    .await?;
    let nats_on = Arc::new(tokio::sync::Mutex::new(nats_on));
    let nats_off = Arc::new(tokio::sync::Mutex::new(nats_off));
    let producer: rdkafka::producer::FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", KAFKA)
        // One message per produce request: tansu's high watermark after a batch is wrong.
        .set("linger.ms", "0")
        .set("batch.num.messages", "1")
        .set("max.in.flight.requests.per.connection", "1")
        .create()?;
    let run_id = std::process::id();
    let kafka_names: Vec<String> = [true, false]
        .iter()
        .flat_map(|on| {
            (0..a.events).map(move |i| {
                format!(
                    "wake-bench-{run_id}-k-{}-{i}",
                    if *on { "on" } else { "off" }
                )
            })
        })
        .collect();
    kafka_topics(&kafka_names).await?;
    for name in kafka_names.iter().filter(|n| n.contains("-k-off-")) {
        kafka_commit_zero(name.clone(), name.clone()).await?;
    }

    let server = MemKube::new();
    server.load_crds_from_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../config/crd"))?;
    server.create_namespace(NS)?;
    let client = server.client();
    let config = ControllerConfig {
        env: ScalerEnv {
            registry: Arc::new(Registry::builtin()),
            ..ScalerEnv::default()
        },
        watch_scope: WatchScope::Namespaces(vec![NS.to_string()]),
        ..ControllerConfig::default()
    };
    let controller = ScaledObjectController::new(client.clone(), config);
    let shutdown = CancellationToken::new();
    let token = shutdown.clone();
    let operator = tokio::spawn(async move {
        let _ = controller.run(token).await;
    });

    // When each Deployment was first seen at 1 replica.
    let scaled: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    {
        let scaled = scaled.clone();
        let stream = watcher(deployments.clone(), watcher::Config::default());
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                let Ok(watcher::Event::Apply(d) | watcher::Event::InitApply(d)) = event else {
                    continue;
                };
                if d.spec.as_ref().and_then(|s| s.replicas) == Some(1) {
                    let name = d.metadata.name.unwrap_or_default();
                    scaled
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .entry(name)
                        .or_insert_with(Instant::now);
                }
            }
        });
    }

    let objects: Api<ScaledObject> = Api::namespaced(client.clone(), NS);
    let mut runs = Vec::new();
    for source in Source::ALL {
        for on in [true, false] {
            for i in 0..a.events {
                let name = format!("{}-{}-{i}", source.short(), if on { "on" } else { "off" });
                let key = format!("{name}-key");
                let address = if on { &on_address } else { &off_address };
                let trigger = match source {
                    Source::Lpush => format!(
                        "type: redis\n      metadata:\n        address: {address}\n        \
                         listName: {key}\n        listLength: \"5\""
                    ),
                    Source::Xadd => format!(
                        "type: redis-streams\n      metadata:\n        address: {address}\n        \
                         stream: {key}\n        streamLength: \"5\""
                    ),
                    Source::Publish => {
                        let (nats, monitoring) = if on {
                            (&nats_on, &nats_on_monitoring)
                        } else {
                            (&nats_off, &nats_off_monitoring)
                        };
                        let mut nats = nats.lock().await;
                        nats.create_stream(&key, 1)
                            .await
                            .map_err(|e| anyhow::anyhow!("{e}"))?;
                        nats.create_consumer(&key, "workers", 1)
                            .await
                            .map_err(|e| anyhow::anyhow!("{e}"))?;
                        format!(
                            "type: nats-jetstream\n      metadata:\n        \
                             natsServerMonitoringEndpoint: \"{monitoring}\"\n        \
                             account: $G\n        stream: {key}\n        consumer: workers"
                        )
                    }
                    Source::Produce => {
                        // Topic and group of the same name; "off" has no topic.
                        let kafka_name = format!(
                            "wake-bench-{run_id}-k-{}-{i}",
                            if on { "on" } else { "off" }
                        );
                        let topic = if on {
                            format!(
                                "\n        topic: {kafka_name}\n        offsetResetPolicy: earliest"
                            )
                        } else {
                            String::new()
                        };
                        format!(
                            "type: kafka\n      metadata:\n        bootstrapServers: {KAFKA}\n        \
                             consumerGroup: {kafka_name}{topic}"
                        )
                    }
                    Source::Notify => {
                        let listen = if on {
                            format!("\n        listenChannel: {key}")
                        } else {
                            String::new()
                        };
                        format!(
                            "type: postgresql\n      metadata:\n        host: 127.0.0.1\n        \
                             port: \"5432\"\n        userName: postgres\n        dbName: test\n        \
                             sslmode: disable\n        targetQueryValue: \"1\"\n        \
                             query: SELECT COUNT(*) FROM {table} WHERE obj = '{key}'{listen}"
                        )
                    }
                };
                deployments
                    .create(&PostParams::default(), &deployment(&name)?)
                    .await?;
                objects
                    .create(
                        &PostParams::default(),
                        &object(&name, a.interval, &trigger)?,
                    )
                    .await?;
                runs.push((source, on, i, name, key));
            }
        }
    }
    // Every loop has polled once and the subscriptions are up.
    tokio::time::sleep(Duration::from_secs(5)).await;
    eprintln!(
        "{} ScaledObjects ready; sending events over {} s",
        runs.len(),
        a.interval
    );

    let start = Instant::now();
    let spread = Duration::from_secs(a.interval);
    let mut sends = Vec::new();
    for (source, on, i, name, key) in runs.iter().cloned() {
        let at = start + spread * u32::try_from(i)? / u32::try_from(a.events)?;
        let mut redis = if on {
            on_redis.clone()
        } else {
            off_redis.clone()
        };
        let pg = &pg;
        let table = &table;
        let nats = if on {
            nats_on.clone()
        } else {
            nats_off.clone()
        };
        let producer = &producer;
        let kafka_name = format!(
            "wake-bench-{run_id}-k-{}-{i}",
            if on { "on" } else { "off" }
        );
        sends.push(async move {
            tokio::time::sleep_until(at.into()).await;
            match source {
                Source::Lpush => {
                    let _: () = redis::cmd("LPUSH")
                        .arg(&key)
                        .arg("job")
                        .query_async(&mut redis)
                        .await?;
                }
                Source::Xadd => {
                    let _: String = redis::cmd("XADD")
                        .arg(&key)
                        .arg("*")
                        .arg("job")
                        .arg("1")
                        .query_async(&mut redis)
                        .await?;
                }
                Source::Publish => {
                    // Acknowledged by JetStream: stored when this returns.
                    nats.lock()
                        .await
                        .publish(&key, 1)
                        .await
                        .map_err(|e| anyhow::anyhow!("{e}"))?;
                }
                Source::Produce => {
                    producer
                        .send(
                            rdkafka::producer::FutureRecord::<(), _>::to(&kafka_name)
                                .partition(0)
                                .payload("job"),
                            Duration::from_secs(5),
                        )
                        .await
                        .map_err(|(e, _)| e)?;
                }
                Source::Notify => {
                    pg.batch_execute(&format!(
                        "INSERT INTO {table} VALUES ('{key}'); NOTIFY \"{key}\";"
                    ))
                    .await?;
                }
            }
            Ok::<_, anyhow::Error>((source, on, name, Instant::now()))
        });
    }
    let sent: Vec<_> = futures::future::join_all(sends)
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    // The last event may wait a whole interval for its poll.
    let deadline = Instant::now() + spread + Duration::from_secs(10);
    while Instant::now() < deadline {
        let done = scaled
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len();
        if done >= sent.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let scaled = scaled
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();

    println!(
        "wake_latency: {} events per source and mode, pollingInterval {} s",
        a.events, a.interval
    );
    println!("| source | notifications | p50 | p99 | max | not scaled | p50 off / p50 on |");
    println!("|---|---|---|---|---|---|---|");
    for source in Source::ALL {
        let mut p50s = [Duration::ZERO; 2];
        for (slot, on) in [(0, true), (1, false)] {
            let mut latencies: Vec<Duration> = sent
                .iter()
                .filter(|(s, o, _, _)| *s == source && *o == on)
                .filter_map(|(_, _, name, at)| {
                    scaled.get(name).map(|t| t.saturating_duration_since(*at))
                })
                .collect();
            latencies.sort();
            let missing = a.events - latencies.len();
            if latencies.is_empty() {
                println!(
                    "| {} | {} | – | – | – | {missing} | |",
                    source.label(),
                    if on { "on" } else { "off" }
                );
                continue;
            }
            p50s[slot] = percentile(&latencies, 500);
            let ratio = if on {
                String::new()
            } else if p50s[0] > Duration::ZERO {
                format!("{:.0}x", p50s[1].as_secs_f64() / p50s[0].as_secs_f64())
            } else {
                String::new()
            };
            println!(
                "| {} | {} | {} | {} | {} | {missing} | {ratio} |",
                source.label(),
                if on { "on" } else { "off" },
                ms(p50s[slot]),
                ms(percentile(&latencies, 990)),
                ms(*latencies.last().unwrap_or(&Duration::ZERO)),
            );
        }
    }
    shutdown.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(10), operator).await;
    pg.batch_execute(&format!("DROP TABLE {table}")).await?;
    Ok(())
}
