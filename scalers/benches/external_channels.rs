//! 1,000 `external` triggers (1,000 ScaledObjects) on one external scaler server: the gRPC
//! connections the server holds, the mean cost of one poll (`GetMetrics` + `IsActive`) and the
//! process' RSS growth, with keda-rs' shared channel (one per address and TLS settings) and,
//! in the same run, with one channel per trigger (a baseline: what a client per scaler costs).
//! The server is the tests' own (`tests/common/external.rs`) on a loopback port, in process.
//! Not part of `cargo test`; run it with
//!
//! ```sh
//! nice -n 19 cargo bench -p keda-scalers --bench external_channels --profile dev
//! ```
//!
//! `KEDA_RS_BENCH_TRIGGERS` changes the number of triggers (default 1000).

#[path = "../tests/common/external.rs"]
mod external_server;

use std::time::{Duration, Instant};

use external_server::{ExternalServer, spec};
use keda_scalers::pool::ClientPools;
use keda_scalers::{BuiltScaler, Registry, ScalerContext};

/// Polls per trigger per phase.
const ROUNDS: usize = 3;

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

struct Phase {
    connections: usize,
    open: usize,
    mean_poll: Duration,
    rss_growth_kib: u64,
    build: Duration,
}

async fn phase(server: &ExternalServer, triggers: usize, shared: bool) -> Phase {
    let registry = Registry::builtin();
    let accepted_before = server.accepted();
    let rss_before = rss_kib();
    let shared_pools = ClientPools::new();
    let started = Instant::now();
    let mut scalers: Vec<BuiltScaler> = Vec::with_capacity(triggers);
    for i in 0..triggers {
        let pools = if shared {
            shared_pools.clone()
        } else {
            ClientPools::new()
        };
        let ctx = ScalerContext {
            scalable_name: format!("object-{i}"),
            scalable_namespace: "bench".into(),
            metadata: [
                ("scalerAddress".to_string(), server.address()),
                ("queueName".to_string(), format!("queue-{i}")),
            ]
            .into(),
            clients: pools,
            global_http_timeout: Duration::from_secs(10),
            ..ScalerContext::new("external", 0)
        };
        scalers.push(registry.build(ctx).await.expect("builds"));
    }
    let build = started.elapsed();
    let started = Instant::now();
    for _ in 0..ROUNDS {
        for s in &scalers {
            let read = s
                .scaler()
                .metrics_and_activity("s0-queue-depth")
                .await
                .expect("polls");
            assert_eq!(read.values[0].value, 7.0);
        }
    }
    let polls = u32::try_from(triggers * ROUNDS).unwrap_or(u32::MAX).max(1);
    let mean_poll = started.elapsed() / polls;
    let result = Phase {
        connections: server.accepted() - accepted_before,
        open: server.open_connections(),
        mean_poll,
        rss_growth_kib: rss_kib().saturating_sub(rss_before),
        build,
    };
    for s in &scalers {
        s.scaler().close().await;
    }
    drop(scalers);
    external_server::eventually_within("the connections to close", Duration::from_secs(60), || {
        server.open_connections() == 0
    })
    .await;
    result
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let triggers: usize = std::env::var("KEDA_RS_BENCH_TRIGGERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let server = ExternalServer::plain(vec![spec("queue-depth", 5)]).await;
    server.set_value("queue-depth", 7, 0.0);
    server.set_active(true);
    // Shared first: the baseline may reuse memory the shared phase freed, which can only
    // understate the baseline's growth, never flatter the shared channel.
    let shared = phase(&server, triggers, true).await;
    let baseline = phase(&server, triggers, false).await;
    println!("{triggers} external triggers on one external scaler server, {ROUNDS} polls each");
    println!(
        "| | gRPC connections (accepted / open while polling) | mean poll | build of all | RSS growth |"
    );
    println!("|---|---|---|---|---|");
    for (name, p) in [
        ("shared channel (keda-rs)", &shared),
        ("one channel per trigger", &baseline),
    ] {
        println!(
            "| {name} | {} / {} | {:.1} µs | {:.2} s | {:.1} MiB |",
            p.connections,
            p.open,
            p.mean_poll.as_secs_f64() * 1e6,
            p.build.as_secs_f64(),
            p.rss_growth_kib as f64 / 1024.0
        );
    }
    println!(
        "ratios (baseline / shared): connections {:.0}x, mean poll {:.2}x, RSS growth {:.1}x",
        baseline.connections as f64 / shared.connections.max(1) as f64,
        baseline.mean_poll.as_secs_f64() / shared.mean_poll.as_secs_f64().max(1e-9),
        baseline.rss_growth_kib as f64 / shared.rss_growth_kib.max(1) as f64
    );
}
