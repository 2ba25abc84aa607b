//! Many routes at a fixed rate (issue 28): `--routes N` ScaledObjects, each with an `http`
//! trigger for its own host (`r<i>.bench.example.com`) and the same backend Service, and an
//! open-loop load of `--rate R` requests per second spread over them round robin, against the
//! activator and against the backend directly, in interleaved rounds. Latency is measured from
//! each request's scheduled send time (so a slow answer delays no later measurement: no
//! coordinated omission), over kept-alive connections. Printed per target: p50, p99 and the
//! maximum, errors, and the activator's p99 added over direct.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use keda_api::ScaledObject;
use kube::api::{Api, PostParams};
use serde_json::json;
use tokio::time::Instant;

use crate::cluster::{CONTAINER_CONCURRENCY, NAME, NAMESPACE};

/// The host of route `i`.
pub fn host(i: usize) -> String {
    format!("r{i}.bench.example.com")
}

/// Creates `n` ScaledObjects routing [`host`]`(i)` to the backend Service.
pub async fn create(client: &kube::Client, n: usize) -> anyhow::Result<()> {
    let api = Api::<ScaledObject>::namespaced(client.clone(), NAMESPACE);
    for i in 0..n {
        let so: ScaledObject = serde_json::from_value(json!({
            "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "metadata": {"name": format!("route-{i}"), "namespace": NAMESPACE},
            "spec": {
                "scaleTargetRef": {"name": NAME},
                "minReplicaCount": 0,
                "maxReplicaCount": 10,
                "triggers": [{"type": "http", "metadata": {
                    "hosts": host(i), "service": NAME, "port": "http",
                    "targetConcurrency": "10",
                    "containerConcurrency": CONTAINER_CONCURRENCY.to_string(),
                    "holdTimeout": "30s"
                }}]
            }
        }))?;
        api.create(&PostParams::default(), &so)
            .await
            .with_context(|| format!("creating route {i}"))?;
    }
    Ok(())
}

fn client() -> Client<HttpConnector, Empty<Bytes>> {
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(60))
        .build_http()
}

async fn get(
    client: &Client<HttpConnector, Empty<Bytes>>,
    addr: SocketAddr,
    host: &str,
) -> anyhow::Result<u16> {
    let request = http::Request::get(format!("http://{addr}/"))
        .header(http::header::HOST, host)
        .body(Empty::new())?;
    let response = client.request(request).await?;
    let status = response.status().as_u16();
    response.into_body().collect().await?;
    Ok(status)
}

/// Waits until every one of the `n` routes answers 200 through the activator at `addr`.
pub async fn wait_routed(addr: SocketAddr, n: usize) -> anyhow::Result<()> {
    let client = client();
    let deadline = Instant::now() + Duration::from_secs(60);
    for i in 0..n {
        loop {
            let answer = get(&client, addr, &host(i)).await;
            if matches!(answer, Ok(200)) {
                break;
            }
            if Instant::now() > deadline {
                anyhow::bail!(
                    "route {} is not answered 200 within 60 s (last: {answer:?})",
                    host(i)
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Ok(())
}

/// What one fixed-rate run saw.
pub struct Run {
    /// Latencies of the answered requests, sorted.
    pub latencies: Vec<Duration>,
    /// Requests that failed or were not answered 200.
    pub errors: usize,
}

impl Run {
    /// The `q` quantile (0 to 1) of the latencies.
    pub fn quantile(&self, q: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss
        )]
        let i = ((self.latencies.len() - 1) as f64 * q).round() as usize;
        self.latencies[i.min(self.latencies.len() - 1)]
    }
}

/// `rate` requests per second for `seconds` to `addr`, request `k` for [`host`]`(k % n)`.
pub async fn fixed_rate(addr: SocketAddr, n: usize, rate: u32, seconds: u64) -> Run {
    let client = client();
    let total = u64::from(rate) * seconds;
    let period = Duration::from_secs(1) / rate.max(1);
    let start = Instant::now() + Duration::from_millis(50);
    let results = Arc::new(std::sync::Mutex::new((Vec::new(), 0usize)));
    let mut tasks = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    for k in 0..total {
        let due = start + period * u32::try_from(k).unwrap_or(u32::MAX);
        tokio::time::sleep_until(due).await;
        let (client, results) = (client.clone(), Arc::clone(&results));
        let host = host(usize::try_from(k).unwrap_or(0) % n.max(1));
        tasks.push(tokio::spawn(async move {
            let answered =
                tokio::time::timeout(Duration::from_secs(10), get(&client, addr, &host)).await;
            let mut results = results
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match answered {
                Ok(Ok(200)) => results.0.push(due.elapsed()),
                _ => results.1 += 1,
            }
        }));
    }
    for task in tasks {
        let _ = task.await;
    }
    let (mut latencies, errors) = std::mem::take(
        &mut *results
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    latencies.sort();
    Run { latencies, errors }
}
