//! Issue 26: the `nats-jetstream` trigger's early wake-ups, against real NATS servers of the
//! tests' own (`nats-server -js` on free loopback ports, so a kill or an auth setting touches
//! nobody else): one subscription connection for every trigger on a server, a wake on publish
//! after which the read finds the message (activation without a poll tick), polling only where
//! the client port wants credentials, and a subscription that comes back after the server was
//! killed and started again (polls fail meanwhile, nothing is stuck).

#[allow(dead_code)]
#[path = "nats_jetstream/client.rs"]
mod client;
#[allow(dead_code)]
mod common;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use client::NatsClient;
use common::{service_or_skip, unique};
use keda_scalers::pool::ClientPools;
use keda_scalers::{BuiltScaler, Registry, ScalerContext, Wake};
use serde_json::Value;

/// A free loopback port.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

async fn get(url: &str) -> Result<Value, String> {
    let tls = keda_scalers::tls::TlsSettings::default()
        .client_config()
        .map_err(|e| e.to_string())?;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .tls_backend_preconfigured(tls)
        .build()
        .map_err(|e| e.to_string())?;
    let response = http.get(url).send().await.map_err(|e| e.to_string())?;
    response.json().await.map_err(|e| e.to_string())
}

/// A JetStream server of one test's own, killed when dropped.
struct OwnNats {
    child: Option<tokio::process::Child>,
    dir: PathBuf,
    client_port: u16,
    monitoring_port: u16,
    extra: Vec<String>,
}

impl OwnNats {
    async fn start_or_skip(test: &str, extra: &[&str]) -> Option<Self> {
        let mut nats = Self {
            child: None,
            dir: std::env::temp_dir().join(unique("nats-wake")),
            client_port: free_port(),
            monitoring_port: free_port(),
            extra: extra.iter().map(ToString::to_string).collect(),
        };
        let started = nats.start().await;
        service_or_skip(test, "nats-server", async { started.map(|()| nats) }).await
    }

    /// Starts the server (again: same ports, same store) and waits until it answers.
    async fn start(&mut self) -> Result<(), String> {
        let child = tokio::process::Command::new("nats-server")
            .args(["-a", "127.0.0.1", "-p", &self.client_port.to_string()])
            .args(["-m", &self.monitoring_port.to_string(), "-js", "-sd"])
            .arg(&self.dir)
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("starting nats-server: {e}"))?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(2);
        while get(&self.url("/varz")).await.is_err() {
            if Instant::now() > deadline {
                return Err("nats-server did not answer within 2 s".into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().await.expect("kill nats-server");
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.monitoring_port)
    }

    fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.monitoring_port)
    }

    async fn client(&self, user: Option<(&str, &str)>) -> NatsClient {
        NatsClient::connect_as(&format!("127.0.0.1:{}", self.client_port), user)
            .await
            .expect("connect to nats")
    }

    /// The client connections named `keda-rs-wake` (the subscription connections) and their
    /// subscription counts.
    async fn wake_connections(&self) -> Vec<u64> {
        let connz = get(&self.url("/connz")).await.expect("connz");
        connz["connections"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["name"] == "keda-rs-wake")
            .map(|c| c["subscriptions"].as_u64().unwrap_or(0))
            .collect()
    }

    /// [`wake_connections`](Self::wake_connections) once it has `n` connections (at most 5 s).
    async fn wake_connections_become(&self, n: usize) -> Vec<u64> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let connections = self.wake_connections().await;
            if connections.len() == n || Instant::now() > deadline {
                return connections;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for OwnNats {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.start_kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn scaler(pools: &ClientPools, endpoint: &str, stream: &str) -> BuiltScaler {
    let mut ctx = ScalerContext::new("nats-jetstream", 0);
    for (k, v) in [
        ("natsServerMonitoringEndpoint", endpoint),
        ("account", "$G"),
        ("stream", stream),
        ("consumer", "workers"),
    ] {
        ctx.metadata.insert(k.to_string(), v.to_string());
    }
    ctx.clients = pools.clone();
    Registry::builtin()
        .build(ctx)
        .await
        .expect("the trigger builds")
}

/// The lag and activity the trigger reads now.
async fn read(scaler: &BuiltScaler, stream: &str) -> (f64, bool) {
    let report = scaler
        .scaler()
        .metrics_and_activity(&format!("s0-nats-jetstream-{stream}"))
        .await
        .expect("the read succeeds");
    (report.values[0].value, report.active)
}

/// Whether `wake` fires within `within`.
async fn woken(wake: &mut Wake, within: Duration) -> bool {
    matches!(tokio::time::timeout(within, wake.woken()).await, Ok(true))
}

#[tokio::test]
async fn a_publish_wakes_every_trigger_of_the_stream_over_one_connection_and_the_read_finds_it() {
    let test = "nats wake: publish";
    let Some(server) = OwnNats::start_or_skip(test, &[]).await else {
        return;
    };
    let mut nats = server.client(None).await;
    let (a, b) = (unique("wa"), unique("wb"));
    for stream in [&a, &b] {
        nats.create_stream(stream, 1).await.expect("stream");
        nats.create_consumer(stream, "workers", 1)
            .await
            .expect("consumer");
    }
    let pools = ClientPools::new();
    let mut on_a = Vec::new();
    for _ in 0..50 {
        on_a.push(scaler(&pools, &server.endpoint(), &a).await);
    }
    let on_b = scaler(&pools, &server.endpoint(), &b).await;
    // One connection; one subscription per stream subject (`<stream>.>`), not per trigger.
    assert_eq!(server.wake_connections_become(1).await, [2]);
    let mut wakes: Vec<Wake> = on_a
        .iter()
        .map(|s| s.scaler().wake().expect("nats-jetstream wakes"))
        .collect();
    let mut wake_b = on_b.scaler().wake().expect("nats-jetstream wakes");
    assert_eq!(read(&on_a[0], &a).await, (0.0, false));

    let published = Instant::now();
    nats.publish(&a, 1).await.expect("publish");
    for wake in &mut wakes {
        assert!(woken(wake, Duration::from_secs(1)).await, "a trigger of a");
    }
    let latency = published.elapsed();
    // Read on the wake, as the loop does: the message is there, no poll tick needed.
    assert_eq!(read(&on_a[0], &a).await, (1.0, true));
    assert!(
        latency < Duration::from_millis(500),
        "woken after {latency:?}"
    );
    assert!(
        !woken(&mut wake_b, Duration::from_millis(100)).await,
        "b was woken by a's publish"
    );

    // A burst costs at most one message per subject per hold, and the hold ends in a wake.
    for wake in &mut wakes {
        let _ = woken(wake, Duration::from_millis(400)).await;
    }
    nats.publish(&a, 20).await.expect("publish");
    assert!(woken(&mut wakes[0], Duration::from_secs(1)).await);
    assert!(
        woken(&mut wakes[0], Duration::from_secs(1)).await,
        "re-armed"
    );

    // The last registration gone: the connection closes.
    drop(wakes);
    drop(wake_b);
    for s in on_a.into_iter().chain([on_b]) {
        s.scaler().close().await;
    }
    assert_eq!(server.wake_connections_become(0).await, Vec::<u64>::new());
}

#[tokio::test]
async fn a_server_that_wants_credentials_is_polled_only() {
    let test = "nats wake: auth";
    let Some(server) =
        OwnNats::start_or_skip(test, &["--user", "app", "--pass", "s3cret-app"]).await
    else {
        return;
    };
    let mut nats = server.client(Some(("app", "s3cret-app"))).await;
    let stream = unique("wauth");
    nats.create_stream(&stream, 1).await.expect("stream");
    nats.create_consumer(&stream, "workers", 1)
        .await
        .expect("consumer");
    let pools = ClientPools::new();
    let s = scaler(&pools, &server.endpoint(), &stream).await;
    let mut wake = s.scaler().wake().expect("registered all the same");
    nats.publish(&stream, 2).await.expect("publish");
    assert!(
        !woken(&mut wake, Duration::from_millis(500)).await,
        "no subscription without credentials"
    );
    assert!(server.wake_connections().await.is_empty());
    // The poll reads the monitoring endpoint as always.
    assert_eq!(read(&s, &stream).await, (2.0, true));
    s.scaler().close().await;
}

#[tokio::test]
async fn after_the_server_restarts_the_subscription_comes_back_and_wakes_once() {
    let test = "nats wake: restart";
    let Some(mut server) = OwnNats::start_or_skip(test, &[]).await else {
        return;
    };
    let mut nats = server.client(None).await;
    let stream = unique("wrestart");
    nats.create_stream(&stream, 1).await.expect("stream");
    nats.create_consumer(&stream, "workers", 1)
        .await
        .expect("consumer");
    let pools = ClientPools::new();
    let s = scaler(&pools, &server.endpoint(), &stream).await;
    let mut wake = s.scaler().wake().expect("nats-jetstream wakes");
    assert_eq!(server.wake_connections_become(1).await, [1]);

    server.kill().await;
    drop(nats);
    // Down: the read fails (and says so), the wake-ups neither fire nor end.
    let down = s
        .scaler()
        .metrics_and_activity(&format!("s0-nats-jetstream-{stream}"))
        .await
        .expect_err("the server is down");
    assert!(down.to_string().contains("connection refused"), "{down}");
    assert!(!woken(&mut wake, Duration::from_millis(300)).await);

    server.start().await.expect("restart");
    // Reconnected (backoff from 100 ms): every trigger is woken once, as something may have
    // arrived meanwhile.
    assert!(
        woken(&mut wake, Duration::from_secs(5)).await,
        "woken after the reconnect"
    );
    assert_eq!(server.wake_connections_become(1).await, [1]);
    let mut nats = server.client(None).await;
    nats.publish(&stream, 1).await.expect("publish");
    assert!(
        woken(&mut wake, Duration::from_secs(1)).await,
        "a publish wakes again"
    );
    assert_eq!(read(&s, &stream).await, (1.0, true));
    s.scaler().close().await;
}
