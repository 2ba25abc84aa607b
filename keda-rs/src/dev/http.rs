//! The HTTP path of `dev`: the activator (the `keda-activator` library, in process) on
//! loopback, the operator's report endpoint it streams to, and stand-in pods for the Services
//! it routes to.
//!
//! - Reports: the operator's [`serve_reports`] on a plain-HTTP loopback listener, fed into the
//!   same [`ActivatorHub`] the operator's `http` scalers read (they find it in the shared client
//!   pools). On a cluster this is the metric service's mutual-TLS port.
//! - Stand-in pods ([`follow_services`]): there is no kubelet, so for every Service that selects
//!   a Deployment, `dev` runs one tiny HTTP server per replica of that Deployment on
//!   `127.0.0.1:<free port>` (it answers `200 hello from <deployment> (dev pod <n>)`), and
//!   publishes each as a ready endpoint in an EndpointSlice of the Service, as the
//!   EndpointSlice controller would. Scaling to 0 removes them, so the activator holds requests
//!   until the operator has scaled the Deployment up again.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use keda_activator::limits::Limits;
use keda_activator::metrics::Metrics;
use keda_activator::proxy::Proxy;
use keda_activator::report::{self, ReporterConfig};
use keda_activator::server::{self as activator_server, Readiness};
use keda_activator::targets::Targets;
use keda_activator::watch::{self, WatchConfig};
use keda_scalers::Clock;
use keda_scalers::pool::ClientPools;
use keda_scalers::scalers::http::claims::HostPolicy;
use keda_scalers::scalers::http::hub::{ActivatorHub, serve_reports};
use keda_scalers::scalers::http::protocol::REPORT_PATH;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, ResourceExt};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

/// The label an EndpointSlice names its Service with.
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// The label marking the EndpointSlices `dev` manages.
const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
const MANAGED_BY: &str = "keda-rs-dev";

/// How often Services and Deployments are checked for stand-in pods.
const PERIOD: Duration = Duration::from_millis(200);

/// Why the HTTP path could not start.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("cannot listen on {addr} for the activator: {source}")]
    Proxy {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot listen on loopback for the activator reports: {0}")]
    Reports(#[source] std::io::Error),
}

/// Starts the report endpoint and the activator; returns the activator's address. Everything
/// stops when `cancel` is cancelled (the proxy threads drain for at most a second).
///
/// # Errors
/// An address that cannot be bound.
pub async fn start_activator(
    client: Client,
    pools: &ClientPools,
    listen: SocketAddr,
    cancel: &CancellationToken,
    tasks: &mut tokio::task::JoinSet<()>,
) -> Result<SocketAddr, HttpError> {
    let hub = ActivatorHub::shared(pools, &Clock::system()).await;
    let reports = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(HttpError::Reports)?;
    let reports_addr = reports.local_addr().map_err(HttpError::Reports)?;
    let stop = cancel.clone();
    tasks.spawn(async move {
        let hub = Arc::new(hub);
        serve(
            reports,
            stop,
            move |request: Request<hyper::body::Incoming>| {
                let hub = Arc::clone(&hub);
                async move {
                    if request.uri().path() == REPORT_PATH {
                        serve_reports(&hub, request).await
                    } else {
                        text(404, "not found\n")
                    }
                }
            },
        )
        .await;
    });

    let metrics = Arc::new(Metrics::new());
    let (wake_tx, wake_rx) = tokio::sync::mpsc::channel(4096);
    let targets = Targets::new(wake_tx, Arc::clone(&metrics));
    let proxy = Arc::new(Proxy::with_limits(
        targets.routes(),
        Arc::clone(&metrics),
        Limits::default(),
    ));
    let listener = activator_server::bind(listen)
        .await
        .and_then(TcpListener::into_std)
        .map_err(|source| HttpError::Proxy {
            addr: listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| HttpError::Proxy {
        addr: listen,
        source,
    })?;
    let threads = activator_server::spawn_proxy_threads(
        listener,
        1,
        proxy,
        cancel.clone(),
        Duration::from_secs(1),
    )
    .map_err(|source| HttpError::Proxy {
        addr: listen,
        source,
    })?;
    tasks.spawn(async move {
        let _ = tokio::task::spawn_blocking(move || {
            for thread in threads {
                let _ = thread.join();
            }
        })
        .await;
    });

    let watch_config = WatchConfig {
        namespace: None,
        self_service: None,
        pod_ip: None,
        host_policy: HostPolicy::allow_all(),
    };
    let (watch_targets, stop) = (Arc::clone(&targets), cancel.clone());
    tasks.spawn(async move {
        // The watch ends only on cancel or a broken watch; a broken one is started again.
        while !stop.is_cancelled() {
            let run = watch::run(
                client.clone(),
                watch_config.clone(),
                Arc::clone(&watch_targets),
                Readiness::default(),
                stop.clone(),
            );
            if let Err(error) = run.await {
                warn!(error = %keda_cli::one_line(&error), "activator watch failed; restarting");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    });
    let report_config = ReporterConfig {
        url: format!("http://{reports_addr}{REPORT_PATH}")
            .parse()
            .unwrap_or_else(|_| http::Uri::from_static("http://127.0.0.1/")),
        tls: None,
        replica: "keda-activator".to_string(),
        idle_after: Duration::from_secs(3600),
    };
    let stop = cancel.clone();
    tasks.spawn(report::run(
        report_config,
        targets,
        report::wake_receiver(wake_rx),
        stop,
    ));
    Ok(addr)
}

fn text(status: u16, body: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = http::StatusCode::from_u16(status).unwrap_or_default();
    response
}

/// Serves HTTP/1.1 and HTTP/2 (prior knowledge) on `listener` with `handler` until `cancel`.
async fn serve<F, Fut>(listener: TcpListener, cancel: CancellationToken, handler: F)
where
    F: Fn(Request<hyper::body::Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    loop {
        let (tcp, _) = tokio::select! {
            () = cancel.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    debug!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let handler = handler.clone();
        let cancel = cancel.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let handler = handler.clone();
                async move { Ok::<_, Infallible>(handler(request).await) }
            });
            let builder = auto::Builder::new(TokioExecutor::new());
            let connection = builder.serve_connection(TokioIo::new(tcp), service);
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                () = cancel.cancelled() => {}
            }
        });
    }
}

/// One stand-in pod: its address and what stops it.
struct Pod {
    addr: SocketAddr,
    stop: CancellationToken,
}

impl Drop for Pod {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn start_pod(deployment: String, index: usize) -> std::io::Result<Pod> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let stop = CancellationToken::new();
    let body = Bytes::from(format!("hello from {deployment} (dev pod {index})\n"));
    tokio::spawn(serve(listener, stop.clone(), move |_request| {
        let body = body.clone();
        async move { Response::new(Full::new(body)) }
    }));
    Ok(Pod { addr, stop })
}

/// Keeps one stand-in pod per replica of every Deployment a Service selects, published in the
/// Service's EndpointSlices, until `cancel`.
pub async fn follow_services(client: Client, cancel: CancellationToken) {
    let mut pods: HashMap<(String, String), Vec<Pod>> = HashMap::new();
    let mut ticks = tokio::time::interval(PERIOD);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = ticks.tick() => {}
        }
        if let Err(error) = sync_services(&client, &mut pods).await {
            debug!(%error, "stand-in pods not synced");
        }
    }
}

/// What a Service needs: the Deployment it selects, its ready replicas, and the Service's
/// ports (name, protocol).
type Wanted = (String, usize, Vec<(Option<String>, String)>);

async fn sync_services(
    client: &Client,
    pods: &mut HashMap<(String, String), Vec<Pod>>,
) -> Result<(), kube::Error> {
    let services = Api::<Service>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let deployments = Api::<Deployment>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let mut wanted: BTreeMap<(String, String), Wanted> = BTreeMap::new();
    for service in &services {
        let namespace = service.namespace().unwrap_or_default();
        let Some(spec) = &service.spec else { continue };
        let Some(selector) = spec.selector.as_ref().filter(|s| !s.is_empty()) else {
            continue;
        };
        let selected = deployments.iter().find(|d| {
            d.namespace().as_deref() == Some(namespace.as_str())
                && d.spec
                    .as_ref()
                    .and_then(|s| s.template.metadata.as_ref())
                    .and_then(|m| m.labels.as_ref())
                    .is_some_and(|labels| selector.iter().all(|(k, v)| labels.get(k) == Some(v)))
        });
        let Some(deployment) = selected else { continue };
        let replicas = deployment
            .status
            .as_ref()
            .and_then(|s| s.ready_replicas)
            .unwrap_or(0);
        let ports = spec
            .ports
            .iter()
            .flatten()
            .map(|p| {
                (
                    p.name.clone(),
                    p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                )
            })
            .collect();
        wanted.insert(
            (namespace, service.name_any()),
            (
                deployment.name_any(),
                usize::try_from(replicas).unwrap_or(0),
                ports,
            ),
        );
    }
    pods.retain(|key, _| wanted.contains_key(key));
    for (key, (deployment, replicas, ports)) in &wanted {
        let running = pods.entry(key.clone()).or_default();
        running.truncate(*replicas);
        while running.len() < *replicas {
            match start_pod(deployment.clone(), running.len()).await {
                Ok(pod) => running.push(pod),
                Err(error) => {
                    warn!(%error, "cannot start a stand-in pod");
                    break;
                }
            }
        }
        publish(client, key, running, ports).await?;
    }
    Ok(())
}

/// One EndpointSlice per stand-in pod (`<service>-dev-<n>`); slices beyond the pods are
/// deleted.
async fn publish(
    client: &Client,
    (namespace, service): &(String, String),
    pods: &[Pod],
    ports: &[(Option<String>, String)],
) -> Result<(), kube::Error> {
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), namespace);
    let existing = api
        .list(&ListParams::default().labels(&format!(
            "{SERVICE_NAME_LABEL}={service},{MANAGED_BY_LABEL}={MANAGED_BY}"
        )))
        .await?
        .items;
    let mut keep = Vec::new();
    for (index, pod) in pods.iter().enumerate() {
        let name = format!("{service}-dev-{index}");
        let slice: EndpointSlice = serde_json::from_value(serde_json::json!({
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": { SERVICE_NAME_LABEL: service, MANAGED_BY_LABEL: MANAGED_BY },
            },
            "addressType": "IPv4",
            "endpoints": [{
                "addresses": [pod.addr.ip().to_string()],
                "conditions": { "ready": true, "serving": true, "terminating": false },
            }],
            "ports": ports.iter().map(|(port_name, protocol)| serde_json::json!({
                "name": port_name,
                "port": pod.addr.port(),
                "protocol": protocol,
            })).collect::<Vec<_>>(),
        }))
        .map_err(kube::Error::SerdeError)?;
        keep.push(name.clone());
        match existing.iter().find(|s| s.name_any() == name) {
            Some(current)
                if current.endpoints == slice.endpoints && current.ports == slice.ports => {}
            Some(current) => {
                let mut replaced = slice;
                replaced.metadata.resource_version = current.metadata.resource_version.clone();
                api.replace(&name, &PostParams::default(), &replaced)
                    .await?;
            }
            None => {
                api.create(&PostParams::default(), &slice).await?;
            }
        }
    }
    for slice in existing {
        if !keep.contains(&slice.name_any()) {
            api.delete(&slice.name_any(), &DeleteParams::default())
                .await?;
        }
    }
    Ok(())
}
