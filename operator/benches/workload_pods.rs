//! Issue 18's `kubernetes-workload` bench: 1,000 triggers over 10,000 pods in the in-memory API
//! server, served over a loopback port (real HTTP and JSON, as from a real API server).
//!
//! ```text
//! nice -n 19 cargo bench -p keda-operator --bench workload_pods --profile dev -- \
//!     [--triggers N] [--pods P] [--namespaces K] [--intervals I]
//! ```
//!
//! Two scenarios, measured in the same run, each building N triggers through
//! `Registry::builtin()` and polling every trigger once per "polling interval" (one after the
//! other, so the mean poll cost is the cost of one poll):
//!
//! - shared: every trigger reads the operator's [`KubeClusterView`] (one pod watch);
//! - baseline: every trigger LISTs its namespace's pods with its selector on every poll, paged
//!   by 200, as KEDA's scaler does (`podListPageSize`), through one shared client, as KEDA's
//!   controller-runtime client is shared.
//!
//! For each it prints API requests per interval (by verb, counted by the API server), the mean
//! poll cost, the process's RSS after the scenario (and its growth during it), and the ratios
//! of the baseline to the shared view. The shared scenario also runs with a tenth of the
//! triggers, to show that its requests per interval do not depend on the trigger count.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use keda_operator::cluster_view::{KubeClusterView, UNFINISHED_PODS};
use keda_operator::resolve::WatchScope;
use keda_scalers::cluster::{
    ClusterHandle, ClusterView, ClusterViewError, LabelSelector, PodCount, SliceSummary,
};
use keda_scalers::{BuiltScaler, Registry, ScalerContext};
use kube::api::{Api, ListParams};
use memkube::{MemKube, Verb};
use serde_json::json;

struct Args {
    triggers: usize,
    pods: usize,
    namespaces: usize,
    intervals: usize,
}

impl Args {
    fn parse() -> anyhow::Result<Self> {
        let mut args = Args {
            triggers: 1_000,
            pods: 10_000,
            namespaces: 10,
            intervals: 3,
        };
        let mut it = std::env::args().skip(1);
        while let Some(arg) = it.next() {
            let mut value = || -> anyhow::Result<usize> {
                let v = it
                    .next()
                    .ok_or_else(|| anyhow::anyhow!("{arg} needs a value"))?;
                Ok(v.parse::<usize>()?.max(1))
            };
            match arg.as_str() {
                // cargo bench passes --bench to harness = false benches.
                "--bench" => {}
                "--triggers" => args.triggers = value()?,
                "--pods" => args.pods = value()?,
                "--namespaces" => args.namespaces = value()?,
                "--intervals" => args.intervals = value()?,
                other => anyhow::bail!(
                    "unknown argument {other}; expected --triggers, --pods, --namespaces, --intervals"
                ),
            }
        }
        anyhow::ensure!(
            args.triggers <= 100_000 && args.pods <= 200_000,
            "at most 100,000 triggers and 200,000 pods: the machine is shared"
        );
        Ok(args)
    }
}

/// The baseline: a LIST of the namespace's pods with the trigger's selector on every poll.
struct ListPerPoll {
    client: kube::Client,
}

#[async_trait]
impl ClusterView for ListPerPoll {
    async fn count_pods(
        &self,
        namespace: &str,
        selector: &LabelSelector,
    ) -> Result<PodCount, ClusterViewError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let mut params = ListParams::default()
            .labels(selector.as_str())
            .fields(UNFINISHED_PODS)
            .limit(200);
        let mut count = PodCount::default();
        let mut nodes = std::collections::HashSet::new();
        loop {
            let page = api
                .list(&params)
                .await
                .map_err(|e| ClusterViewError::NotSynced {
                    resource: "pods".into(),
                    namespace: Some(namespace.into()),
                    waited: Duration::ZERO,
                    last_error: Some(e.to_string()),
                })?;
            for pod in &page.items {
                count.pods += 1;
                if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
                    nodes.insert(node);
                }
            }
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => break,
            }
        }
        count.nodes = nodes.len();
        Ok(count)
    }

    async fn service_slices(
        &self,
        _namespace: &str,
        _service: &str,
    ) -> Result<Vec<SliceSummary>, ClusterViewError> {
        Ok(Vec::new())
    }
}

fn rss_kb() -> u64 {
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

fn namespace(i: usize) -> String {
    format!("bench-{i}")
}

/// Pods `0..pods`, spread over `namespaces`, labelled `app=app-<j>` with 10 pods per app, on
/// 50 nodes.
fn seed_pods(server: &MemKube, pods: usize, namespaces: usize) -> anyhow::Result<()> {
    for ns in 0..namespaces {
        server.create_namespace(&namespace(ns))?;
    }
    for i in 0..pods {
        let ns = i % namespaces;
        let app = (i / namespaces) / 10;
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": format!("pod-{i}"),
                "namespace": namespace(ns),
                "labels": { "app": format!("app-{app}"), "team": "bench", "pod-template-hash": "5d8f7c9b4" }
            },
            "spec": {
                "nodeName": format!("node-{}", i % 50),
                "containers": [{ "name": "app", "image": "registry.k8s.io/pause:3.9" }]
            },
            "status": { "phase": if i % 20 == 0 { "Succeeded" } else { "Running" } }
        }))?;
        server.seed(&pod)?;
    }
    Ok(())
}

/// Trigger `t`: namespace `t % namespaces`, selector `app=app-<t / namespaces>` (10 pods, one
/// of which may be finished).
async fn build_triggers(
    triggers: usize,
    namespaces: usize,
    cluster: &ClusterHandle,
) -> anyhow::Result<Vec<(BuiltScaler, String)>> {
    let registry = Registry::builtin();
    let mut built = Vec::with_capacity(triggers);
    for t in 0..triggers {
        let ns = namespace(t % namespaces);
        let ctx = ScalerContext {
            scalable_name: format!("so-{t}"),
            scalable_namespace: ns.clone(),
            metadata: [
                (
                    "podSelector".to_string(),
                    format!("app=app-{}", t / namespaces),
                ),
                ("value".to_string(), "5".to_string()),
            ]
            .into(),
            cluster: cluster.clone(),
            ..ScalerContext::new("kubernetes-workload", 0)
        };
        built.push((registry.build(ctx).await?, format!("s0-workload-{ns}")));
    }
    Ok(built)
}

struct Measured {
    name: String,
    first_round: Duration,
    mean_poll: Duration,
    requests_per_interval: f64,
    lists_per_interval: f64,
    startup_requests: u64,
    rss_after_kb: u64,
    rss_growth_kb: i64,
}

async fn run_scenario(
    name: &str,
    server: &MemKube,
    cluster: &ClusterHandle,
    args: &Args,
    triggers: usize,
) -> anyhow::Result<Measured> {
    let rss_before = rss_kb();
    server.reset_request_counts();
    let scalers = build_triggers(triggers, args.namespaces, cluster).await?;
    // The first round: the shared view starts its watch and waits for its first list here.
    let started = Instant::now();
    let mut total_pods = 0.0;
    for (scaler, metric) in &scalers {
        total_pods += scaler.scaler().metrics_and_activity(metric).await?.values[0].value;
    }
    let first_round = started.elapsed();
    let startup_requests = server.request_counts().total();
    server.reset_request_counts();
    let started = Instant::now();
    for _ in 0..args.intervals {
        let mut round = 0.0;
        for (scaler, metric) in &scalers {
            round += scaler.scaler().metrics_and_activity(metric).await?.values[0].value;
        }
        anyhow::ensure!(
            round == total_pods,
            "{name}: a round counted {round} pods, the first {total_pods}"
        );
    }
    let polls = u32::try_from(args.intervals * triggers)?;
    let mean_poll = started.elapsed() / polls.max(1);
    let counts = server.request_counts();
    let intervals = args.intervals as f64;
    let measured = Measured {
        name: format!("{name} ({triggers} triggers)"),
        first_round,
        mean_poll,
        requests_per_interval: counts.total() as f64 / intervals,
        lists_per_interval: counts.get(Verb::List, "pods") as f64 / intervals,
        startup_requests,
        rss_after_kb: rss_kb(),
        rss_growth_kb: i64::try_from(rss_kb())? - i64::try_from(rss_before)?,
    };
    println!(
        "{:<32} counted {total_pods} pods per round; requests by verb over {} intervals: {}",
        measured.name,
        args.intervals,
        counts
            .iter()
            .map(|(verb, resource, n)| format!("{verb:?} {resource}={n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for (scaler, _) in &scalers {
        scaler.scaler().close().await;
    }
    Ok(measured)
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse()?;
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(bench(args))
}

async fn bench(args: Args) -> anyhow::Result<()> {
    let server = MemKube::new();
    let seeding = Instant::now();
    seed_pods(&server, args.pods, args.namespaces)?;
    let loopback = server.serve_loopback().await?;
    let client = loopback.client()?;
    println!(
        "seeded {} pods in {} namespaces in {:.1} s; RSS {} MB",
        args.pods,
        args.namespaces,
        seeding.elapsed().as_secs_f64(),
        rss_kb() / 1024
    );

    // Shared views of their own, so the small run's watch does not serve the big one.
    let small = (args.triggers / 10).max(1);
    let small_view = ClusterHandle::new(Arc::new(KubeClusterView::new(
        client.clone(),
        WatchScope::All,
    )));
    let shared_small = run_scenario("shared watch", &server, &small_view, &args, small).await?;
    drop(small_view);
    let view = ClusterHandle::new(Arc::new(KubeClusterView::new(
        client.clone(),
        WatchScope::All,
    )));
    let shared = run_scenario("shared watch", &server, &view, &args, args.triggers).await?;
    drop(view);
    let list_view = ClusterHandle::new(Arc::new(ListPerPoll {
        client: client.clone(),
    }));
    let baseline = run_scenario(
        "LIST per poll (baseline)",
        &server,
        &list_view,
        &args,
        args.triggers,
    )
    .await?;

    println!();
    println!(
        "| scenario | API requests per interval | pod LISTs per interval | requests at start | mean poll | first round | RSS after | RSS growth |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for m in [&shared_small, &shared, &baseline] {
        println!(
            "| {} | {:.0} | {:.0} | {} | {:.3} ms | {:.0} ms | {} MB | {:+} MB |",
            m.name,
            m.requests_per_interval,
            m.lists_per_interval,
            m.startup_requests,
            m.mean_poll.as_secs_f64() * 1e3,
            m.first_round.as_secs_f64() * 1e3,
            m.rss_after_kb / 1024,
            m.rss_growth_kb / 1024,
        );
    }
    println!();
    println!(
        "requests per interval: baseline {:.0}, shared {:.0} ({} triggers) and {:.0} ({} triggers): {}",
        baseline.requests_per_interval,
        shared.requests_per_interval,
        args.triggers,
        shared_small.requests_per_interval,
        small,
        if shared.requests_per_interval == shared_small.requests_per_interval {
            "independent of the trigger count"
        } else {
            "DEPENDS on the trigger count"
        }
    );
    println!(
        "mean poll: baseline / shared = {:.0}x",
        baseline.mean_poll.as_secs_f64() / shared.mean_poll.as_secs_f64().max(1e-9)
    );
    println!(
        "RSS growth during the scenario: baseline {:+} MB, shared {:+} MB",
        baseline.rss_growth_kb / 1024,
        shared.rss_growth_kb / 1024
    );
    anyhow::ensure!(
        shared.lists_per_interval == 0.0,
        "the shared view listed pods in steady state"
    );
    Ok(())
}
