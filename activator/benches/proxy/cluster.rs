//! The cluster side of the bench, in this process: memkube served on loopback (with a stamp
//! of every `/scale` write and EndpointSlice create, taken when memkube has committed it), the
//! operator's ScaledObject controller with its scale loops, and its metric service accepting
//! the activator's report stream over mutual TLS.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use http::{Method, Request};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use keda_api::ScaledObject;
use keda_operator::metrics_service::{
    CurrentLoops, MetricsService, MetricsServiceOptions, server_config,
};
use keda_operator::{ControllerConfig, ScaleLoops, ScaledObjectController, ScalerEnv};
use keda_scalers::Clock;
use keda_scalers::pool::ClientPools;
use keda_scalers::scalers::http::hub::ActivatorHub;
use keda_scalers::scalers::http::protocol::REPORT_PATH;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use memkube::{MemKube, MemKubeService};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub const NAMESPACE: &str = "bench";
pub const NAME: &str = "web";
pub const HOST: &str = "bench.example.com";
/// The per-pod limit the trigger sets: above 64 connections, so the limit is checked on every
/// request without ever making one wait.
pub const CONTAINER_CONCURRENCY: u32 = 100;

/// A write the API server committed, and when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Write {
    /// `PATCH`/`PUT .../deployments/<name>/scale`.
    Scale,
    /// `POST .../endpointslices`.
    SliceCreated,
}

/// memkube, the operator, and the files the activator needs to reach them.
pub struct Cluster {
    _kube: MemKube,
    pub client: kube::Client,
    pub writes: mpsc::UnboundedReceiver<(Write, Instant)>,
    pub loops: ScaleLoops,
    pub operator_url: String,
    stop: CancellationToken,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn classify(method: &Method, path: &str) -> Option<Write> {
    if (method == Method::PATCH || method == Method::PUT)
        && path.contains("/deployments/")
        && path.ends_with("/scale")
    {
        Some(Write::Scale)
    } else if method == Method::POST && path.ends_with("/endpointslices") {
        Some(Write::SliceCreated)
    } else {
        None
    }
}

/// Serves memkube's API on `listener` like `memkube::Loopback`, and sends a stamp for each
/// successful write of interest the moment memkube has answered it (the write is committed and
/// its watch events are queued).
async fn serve_api(
    listener: TcpListener,
    service: MemKubeService,
    writes: mpsc::UnboundedSender<(Write, Instant)>,
    stop: CancellationToken,
) {
    loop {
        let stream = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => continue,
            },
        };
        let _ = stream.set_nodelay(true);
        let service = service.clone();
        let writes = writes.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let handler = hyper::service::service_fn(move |request: Request<Incoming>| {
                let kind = classify(request.method(), request.uri().path());
                let service = service.clone();
                let writes = writes.clone();
                async move {
                    let response = tower::ServiceExt::oneshot(service, request).await?;
                    if let Some(kind) = kind
                        && response.status().is_success()
                    {
                        let _ = writes.send((kind, Instant::now()));
                    }
                    Ok::<_, Infallible>(response)
                }
            });
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            tokio::select! {
                () = stop.cancelled() => {}
                _ = builder.serve_connection(TokioIo::new(stream), handler) => {}
            }
        });
    }
}

/// A CA, the operator's serving certificate (for 127.0.0.1) and the activator's client
/// certificate, written to `dir` as `ca.crt`, `tls.crt` and `tls.key` (the client's files, as
/// the activator mounts them); returns the operator's rustls configuration.
fn pki(dir: &Path) -> anyhow::Result<rustls::ServerConfig> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "actbench-ca");
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate()?)?;
    let issue =
        |common_name: &str, names: Vec<String>, usage| -> anyhow::Result<(String, String)> {
            let mut params = CertificateParams::new(names)?;
            params
                .distinguished_name
                .push(DnType::CommonName, common_name);
            params.extended_key_usages = vec![usage];
            let key = KeyPair::generate()?;
            let cert = params.signed_by(&key, &ca)?;
            Ok((cert.pem(), key.serialize_pem()))
        };
    let (server_cert, server_key) = issue(
        keda_tls::Identity::Operator.common_name(),
        vec!["127.0.0.1".into(), "localhost".into()],
        ExtendedKeyUsagePurpose::ServerAuth,
    )?;
    // The operator accepts reports only from the activators' identity.
    let (client_cert, client_key) = issue(
        keda_tls::Identity::Activator.common_name(),
        Vec::new(),
        ExtendedKeyUsagePurpose::ClientAuth,
    )?;
    let ca_pem = ca.as_ref().pem();
    std::fs::write(dir.join("ca.crt"), &ca_pem)?;
    std::fs::write(dir.join("tls.crt"), client_cert)?;
    std::fs::write(dir.join("tls.key"), client_key)?;
    Ok(server_config(
        server_cert.as_bytes(),
        server_key.as_bytes(),
        ca_pem.as_bytes(),
    )?)
}

impl Cluster {
    /// Starts memkube with the CRDs, namespace `bench`, Deployment `web` at 0 replicas and
    /// ScaledObject `web` with an `http` trigger (host [`HOST`], Service `web` port `http`,
    /// `containerConcurrency` [`CONTAINER_CONCURRENCY`]); the operator's controller and metric
    /// service; writes the kubeconfig and TLS files to `dir`.
    pub async fn start(dir: &Path) -> anyhow::Result<Self> {
        let stop = CancellationToken::new();
        let kube = MemKube::new();
        let crds = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/crd");
        kube.load_crds_from_dir(crds).context("loading the CRDs")?;
        kube.create_namespace(NAMESPACE)?;
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let api_addr = listener.local_addr()?;
        let (writes_tx, writes) = mpsc::unbounded_channel();
        tokio::spawn(serve_api(listener, kube.service(), writes_tx, stop.clone()));
        std::fs::write(
            dir.join("kubeconfig"),
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: bench\n  cluster:\n    server: http://{api_addr}\ncontexts:\n- name: bench\n  context:\n    cluster: bench\n    user: bench\ncurrent-context: bench\nusers:\n- name: bench\n  user: {{}}\n"
            ),
        )?;
        // The operator talks to the API server over TCP, as in a cluster.
        let client =
            kube::Client::try_from(kube::Config::new(format!("http://{api_addr}").parse()?))?;

        let deployment: Deployment = serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": NAME, "namespace": NAMESPACE},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": NAME}},
                "template": {"metadata": {"labels": {"app": NAME}},
                             "spec": {"containers": [{"name": NAME, "image": NAME}]}}
            }
        }))?;
        Api::<Deployment>::namespaced(client.clone(), NAMESPACE)
            .create(&PostParams::default(), &deployment)
            .await
            .context("creating the Deployment")?;
        let so: ScaledObject = serde_json::from_value(json!({
            "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "metadata": {"name": NAME, "namespace": NAMESPACE},
            "spec": {
                "scaleTargetRef": {"name": NAME},
                "minReplicaCount": 0,
                "maxReplicaCount": 10,
                "triggers": [{"type": "http", "metadata": {
                    "hosts": HOST, "service": NAME, "port": "http",
                    "targetConcurrency": "10",
                    "containerConcurrency": CONTAINER_CONCURRENCY.to_string(),
                    "holdTimeout": "30s"
                }}]
            }
        }))?;
        Api::<ScaledObject>::namespaced(client.clone(), NAMESPACE)
            .create(&PostParams::default(), &so)
            .await
            .context("creating the ScaledObject")?;

        // The operator: controller and scale loops, and the metric service sharing the client
        // pools (so the report endpoint feeds the hub the http scaler reads), as the binary
        // wires them.
        let pools = ClientPools::new();
        let config = ControllerConfig {
            env: ScalerEnv {
                pools: pools.clone(),
                ..ScalerEnv::default()
            },
            watch_scope: keda_operator::resolve::WatchScope::Namespaces(vec![NAMESPACE.into()]),
            ..ControllerConfig::default()
        };
        let controller = ScaledObjectController::new(client.clone(), config);
        let loops = controller.loops();
        let current = CurrentLoops::default();
        current.set(Some(loops.clone()));
        tokio::spawn(controller.run(stop.clone()));
        let tls = pki(dir)?;
        let hub = ActivatorHub::shared(&pools, &Clock::system()).await;
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let operator_addr: SocketAddr = listener.local_addr()?;
        tokio::spawn(
            MetricsService::new(Arc::new(current), MetricsServiceOptions::default())
                .with_reports(hub)
                .serve(listener, Arc::new(tls), stop.clone()),
        );
        let cluster = Self {
            _kube: kube,
            client,
            writes,
            loops,
            operator_url: format!("https://{operator_addr}{REPORT_PATH}"),
            stop,
        };
        let started = Instant::now();
        while !cluster.loops.is_running(NAMESPACE, NAME).await {
            if started.elapsed() > Duration::from_secs(30) {
                bail!("the operator started no scale loop for {NAMESPACE}/{NAME} in 30 s");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(cluster)
    }

    fn deployments(&self) -> Api<Deployment> {
        Api::namespaced(self.client.clone(), NAMESPACE)
    }

    /// Writes the Deployment's `/scale`.
    pub async fn set_replicas(&self, replicas: i32) -> anyhow::Result<()> {
        self.deployments()
            .patch_scale(
                NAME,
                &PatchParams::default(),
                &Patch::Merge(&json!({"spec": {"replicas": replicas}})),
            )
            .await
            .with_context(|| format!("scaling {NAMESPACE}/{NAME} to {replicas}"))?;
        Ok(())
    }

    /// Creates the Service's EndpointSlice with one ready endpoint, `pod`.
    pub async fn publish_endpoint(&self, pod: SocketAddr) -> anyhow::Result<()> {
        let slice: EndpointSlice = serde_json::from_value(json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            // As the EndpointSlice controller writes it: the activator takes endpoints only
            // from its slices, pods of the Service's namespace (docs/http.md).
            "metadata": {"name": format!("{NAME}-1"), "namespace": NAMESPACE,
                         "labels": {"kubernetes.io/service-name": NAME,
                                    "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": pod.port(), "protocol": "TCP"}],
            "endpoints": [{"addresses": [pod.ip().to_string()], "conditions": {"ready": true},
                           "targetRef": {"kind": "Pod", "namespace": NAMESPACE,
                                         "name": format!("{NAME}-pod-{}", pod.port())}}]
        }))?;
        Api::<EndpointSlice>::namespaced(self.client.clone(), NAMESPACE)
            .create(&PostParams::default(), &slice)
            .await
            .context("creating the EndpointSlice")?;
        Ok(())
    }

    /// Deletes the EndpointSlice (the pod is gone); nothing when there is none.
    pub async fn remove_endpoint(&self) -> anyhow::Result<()> {
        let slices = Api::<EndpointSlice>::namespaced(self.client.clone(), NAMESPACE);
        match slices
            .delete(&format!("{NAME}-1"), &DeleteParams::default())
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(e) => Err(e).context("deleting the EndpointSlice"),
        }
    }

    /// Forgets the write stamps received so far.
    pub fn drain_writes(&mut self) {
        while self.writes.try_recv().is_ok() {}
    }

    /// The next stamp of `kind`, waiting at most `timeout`.
    pub async fn next_write(&mut self, kind: Write, timeout: Duration) -> Option<Instant> {
        let deadline = Instant::now() + timeout;
        loop {
            match tokio::time::timeout_at(deadline, self.writes.recv()).await {
                Ok(Some((k, at))) if k == kind => return Some(at),
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => return None,
            }
        }
    }
}
