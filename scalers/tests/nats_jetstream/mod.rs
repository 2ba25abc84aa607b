//! The `nats-jetstream` scaler against real NATS servers: the standalone JetStream server that
//! `scripts/services.sh` runs (monitoring on 127.0.0.1:8222, or 8223 for its own instance
//! beside a machine server without monitoring), and a three-node JetStream cluster each
//! clustered test starts on 127.0.0.1-3 (every node on the same ports, as pods would be).
//!
//! Every test creates its own stream and consumer through the NATS protocol and deletes them
//! (or the whole cluster) at the end.

mod client;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use client::NatsClient;
use serde_json::{Value, json};

use crate::common::{self, Harness, Setup, conformance, unique};

/// The monitoring ports `scripts/services.sh` may have opened, in order.
const MONITORING_PORTS: [u16; 2] = [8222, 8223];

/// A plain HTTP client for the test's own monitoring requests.
fn http() -> reqwest::Client {
    let tls = keda_scalers::tls::TlsSettings::default()
        .client_config()
        .expect("TLS config");
    reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .tls_backend_preconfigured(tls)
        .build()
        .expect("http client")
}

async fn get(url: &str) -> Result<Value, String> {
    let response = http().get(url).send().await.map_err(|e| e.to_string())?;
    response.json().await.map_err(|e| e.to_string())
}

/// The local standalone server: its monitoring endpoint and a protocol connection.
struct Server {
    monitoring: String,
    nats: NatsClient,
}

impl Server {
    async fn connect_or_skip(test: &str) -> Option<Self> {
        let attempt = async {
            let mut last = String::new();
            for port in MONITORING_PORTS {
                let monitoring = format!("127.0.0.1:{port}");
                match get(&format!("http://{monitoring}/varz")).await {
                    Ok(varz) => {
                        let client_port = varz["port"].as_u64().ok_or("varz has no port")?;
                        let nats = NatsClient::connect(&format!("127.0.0.1:{client_port}")).await?;
                        return Ok(Self { monitoring, nats });
                    }
                    Err(e) => last = e,
                }
            }
            Err(last)
        };
        common::service_or_skip(
            test,
            "NATS with JetStream and monitoring on 127.0.0.1:8222 or :8223",
            attempt,
        )
        .await
    }
}

async fn scaler(endpoint: &str, stream: &str, consumer: &str) -> Harness {
    conformance(
        "nats-jetstream",
        Setup {
            metadata: &[
                ("natsServerMonitoringEndpoint", endpoint),
                ("stream", stream),
                ("consumer", consumer),
            ],
            auth: &[("account", "$G")],
            ..Setup::default()
        },
    )
    .await
}

#[tokio::test]
async fn lag_is_pending_plus_unacknowledged_messages_of_the_consumer() {
    let test = "lag_is_pending_plus_unacknowledged_messages_of_the_consumer";
    let Some(mut server) = Server::connect_or_skip(test).await else {
        return;
    };
    let stream = unique("js");
    let nats = &mut server.nats;
    nats.create_stream(&stream, 1).await.expect("stream");
    nats.create_consumer(&stream, "workers", 1)
        .await
        .expect("consumer");

    let h = scaler(&server.monitoring, &stream, "workers").await;
    assert_eq!(h.metric_name, format!("s0-nats-jetstream-{stream}"));
    // Documented example: activationLagThreshold 1.
    h.expect(0.0, false).await;
    nats.publish(&stream, 1).await.expect("publish");
    h.expect(1.0, false).await; // equal to the activation threshold: inactive
    nats.publish(&stream, 4).await.expect("publish");
    h.expect(5.0, true).await;

    // Two delivered but unacknowledged: still 3 pending + 2 ack pending.
    let delivered = nats.fetch(&stream, "workers", 2).await.expect("fetch");
    h.expect(5.0, true).await;
    nats.ack(&delivered[0]).await.expect("ack");
    h.expect(4.0, true).await;

    h.close().await;
    nats.delete_stream(&stream).await.expect("delete");
}

#[tokio::test]
async fn a_consumer_that_does_not_exist_yet_counts_the_whole_stream() {
    let test = "a_consumer_that_does_not_exist_yet_counts_the_whole_stream";
    let Some(mut server) = Server::connect_or_skip(test).await else {
        return;
    };
    let stream = unique("js");
    let nats = &mut server.nats;
    nats.create_stream(&stream, 1).await.expect("stream");
    nats.publish(&stream, 3).await.expect("publish");
    let h = scaler(&server.monitoring, &stream, "created-later").await;
    h.expect(3.0, true).await;
    h.close().await;
    nats.delete_stream(&stream).await.expect("delete");
}

#[tokio::test]
async fn a_missing_stream_and_an_unreachable_server_are_errors_that_name_the_trigger() {
    let test = "a_missing_stream_and_an_unreachable_server_are_errors_that_name_the_trigger";
    let Some(server) = Server::connect_or_skip(test).await else {
        return;
    };
    let h = scaler(&server.monitoring, "no-such-stream", "workers").await;
    let message = h.expect_error().await.to_string();
    assert_eq!(
        message,
        format!(
            "trigger 0 (nats-jetstream): stream \"no-such-stream\" (parameter \"stream\") was not found in account \"$G\" at http://{}",
            server.monitoring
        )
    );
    h.close().await;

    // Nothing listens on port 9 (discard) of loopback: refused at once.
    let started = Instant::now();
    let h = scaler("127.0.0.1:9", "orders", "workers").await;
    let message = h.expect_error().await.to_string();
    assert!(
        message.starts_with(
            "trigger 0 (nats-jetstream): reading consumer \"workers\" of stream \"orders\" from http://127.0.0.1:9 (parameter \"natsServerMonitoringEndpoint\") failed: connection refused"
        ),
        "{message}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    h.close().await;
}

/// A three-node JetStream cluster on 127.0.0.1, .2 and .3, every node with the same client,
/// monitoring and route ports, killed when dropped.
struct Cluster {
    nodes: Vec<tokio::process::Child>,
    dir: PathBuf,
    client_port: u16,
    monitoring_port: u16,
}

const CLUSTER_IPS: [&str; 3] = ["127.0.0.1", "127.0.0.2", "127.0.0.3"];

/// A port free on all three addresses.
fn free_port() -> u16 {
    loop {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = probe.local_addr().expect("addr").port();
        let others: Vec<_> = CLUSTER_IPS[1..]
            .iter()
            .filter_map(|ip| std::net::TcpListener::bind((*ip, port)).ok())
            .collect();
        if others.len() == 2 {
            return port;
        }
    }
}

impl Cluster {
    /// Starts the cluster and waits (at most 10 s) until it has a JetStream meta leader, or
    /// skips (fails in CI) without nats-server.
    async fn start_or_skip(test: &str) -> Option<Self> {
        let attempt = async {
            let dir = std::env::temp_dir().join(unique("nats-cluster"));
            let (client_port, monitoring_port, route_port) =
                (free_port(), free_port(), free_port());
            let routes: Vec<String> = CLUSTER_IPS
                .iter()
                .map(|ip| format!("nats://{ip}:{route_port}"))
                .collect();
            let mut cluster = Self {
                nodes: Vec::new(),
                dir: dir.clone(),
                client_port,
                monitoring_port,
            };
            for (i, ip) in CLUSTER_IPS.iter().enumerate() {
                let child = tokio::process::Command::new("nats-server")
                    .args(["-n", &format!("n{}", i + 1), "-a", ip])
                    .args(["-p", &client_port.to_string()])
                    .args(["-m", &monitoring_port.to_string()])
                    .args(["-js", "-sd"])
                    .arg(dir.join(format!("n{}", i + 1)))
                    .args(["--cluster_name", "keda-rs-test"])
                    .args(["--cluster", &format!("nats://{ip}:{route_port}")])
                    .args(["--routes", &routes.join(",")])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .kill_on_drop(true)
                    .spawn()
                    .map_err(|e| format!("starting nats-server: {e}"))?;
                cluster.nodes.push(child);
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let jsz = get(&cluster.monitoring(0, "/jsz"))
                    .await
                    .unwrap_or_default();
                if jsz["meta_cluster"]["leader"]
                    .as_str()
                    .is_some_and(|l| !l.is_empty())
                {
                    return Ok(cluster);
                }
                if Instant::now() > deadline {
                    return Err("the cluster elected no JetStream meta leader in 10 s".to_string());
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        // Longer than the common 3 s bound: a cluster needs a few seconds to elect a leader.
        let result = tokio::time::timeout(Duration::from_secs(15), attempt)
            .await
            .unwrap_or_else(|_| Err("timed out".to_string()));
        common::service_or_skip(test, "a local nats-server cluster", async { result }).await
    }

    fn monitoring(&self, node: usize, path: &str) -> String {
        format!(
            "http://{}:{}{path}",
            CLUSTER_IPS[node], self.monitoring_port
        )
    }

    fn endpoint(&self, node: usize) -> String {
        format!("{}:{}", CLUSTER_IPS[node], self.monitoring_port)
    }

    async fn client(&self) -> NatsClient {
        NatsClient::connect(&format!("{}:{}", CLUSTER_IPS[0], self.client_port))
            .await
            .expect("connect to the cluster")
    }

    /// How many `/jsz` requests each node has served.
    async fn jsz_requests(&self) -> Vec<u64> {
        let mut counts = Vec::new();
        for node in 0..CLUSTER_IPS.len() {
            let varz = get(&self.monitoring(node, "/varz")).await.expect("varz");
            counts.push(varz["http_req_stats"]["/jsz"].as_u64().unwrap_or(0));
        }
        counts
    }

    /// The node leading `consumer` of `stream` once one does (at most 10 s), with `old` not
    /// counting as an answer.
    async fn consumer_leader(&self, stream: &str, consumer: &str, old: Option<usize>) -> usize {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let url = self.monitoring(0, "/jsz?acc=%24G&consumers=true");
            let jsz = get(&url).await.unwrap_or_default();
            let leader = jsz["account_details"][0]["stream_detail"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|s| s["name"] == stream)
                .flat_map(|s| s["consumer_detail"].as_array().into_iter().flatten())
                .find(|c| c["name"] == consumer)
                .and_then(|c| c["cluster"]["leader"].as_str())
                .and_then(|name| name.strip_prefix('n'))
                .and_then(|n| n.parse::<usize>().ok())
                .map(|n| n - 1);
            if let Some(leader) = leader.filter(|l| Some(*l) != old) {
                return leader;
            }
            assert!(Instant::now() < deadline, "no consumer leader in 10 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            let _ = node.start_kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Counts of `/jsz` requests served since `before`.
fn served(before: &[u64], after: &[u64]) -> Vec<u64> {
    before.iter().zip(after).map(|(b, a)| a - b).collect()
}

#[tokio::test]
async fn in_a_cluster_the_consumer_leader_is_asked_and_found_again_after_it_changes() {
    let test = "in_a_cluster_the_consumer_leader_is_asked_and_found_again_after_it_changes";
    let Some(cluster) = Cluster::start_or_skip(test).await else {
        return;
    };
    let mut nats = cluster.client().await;
    let stream = unique("js");
    // The cluster may still be placing its first assets: retry briefly.
    let deadline = Instant::now() + Duration::from_secs(5);
    while let Err(e) = nats.create_stream(&stream, 3).await {
        assert!(Instant::now() < deadline, "stream: {e}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    nats.create_consumer(&stream, "workers", 3)
        .await
        .expect("consumer");
    nats.publish(&stream, 5).await.expect("publish");
    let leader = cluster.consumer_leader(&stream, "workers", None).await;

    // Configure a node that does not lead the consumer.
    let configured = (leader + 1) % 3;
    let h = scaler(&cluster.endpoint(configured), &stream, "workers").await;

    let before = cluster.jsz_requests().await;
    h.expect(5.0, true).await;
    let first = served(&before, &cluster.jsz_requests().await);
    assert!(first[configured] >= 1, "{first:?}");
    assert!(first[leader] >= 1, "the leader was not asked: {first:?}");

    // The leader is remembered: the next poll asks it alone.
    let before = cluster.jsz_requests().await;
    h.expect(5.0, true).await;
    let mut expected = vec![0, 0, 0];
    expected[leader] = 1;
    assert_eq!(served(&before, &cluster.jsz_requests().await), expected);

    // Another node takes over: the old leader's answer names it, and it is asked.
    nats.js(
        &format!("CONSUMER.LEADER.STEPDOWN.{stream}.workers"),
        json!({}),
    )
    .await
    .expect("step down");
    let new_leader = cluster
        .consumer_leader(&stream, "workers", Some(leader))
        .await;
    let before = cluster.jsz_requests().await;
    h.expect(5.0, true).await;
    let after_change = served(&before, &cluster.jsz_requests().await);
    assert!(after_change[new_leader] >= 1, "{after_change:?}");
    let before = cluster.jsz_requests().await;
    h.expect(5.0, true).await;
    let mut expected = vec![0, 0, 0];
    expected[new_leader] = 1;
    assert_eq!(served(&before, &cluster.jsz_requests().await), expected);

    // A consumer no node leads is an error naming the parameter.
    let missing = scaler(&cluster.endpoint(configured), &stream, "nobody").await;
    let message = missing.expect_error().await.to_string();
    assert_eq!(
        message,
        format!(
            "trigger 0 (nats-jetstream): no node of the JetStream cluster at http://{} leads consumer \"nobody\" (parameter \"consumer\") of stream \"{stream}\"",
            cluster.endpoint(configured)
        )
    );
    missing.close().await;
    h.close().await;
}
