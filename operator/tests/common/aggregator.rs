//! The metrics-apiserver in process beside the operator binary, and the requests the Kubernetes
//! aggregator sends it for the HPA.
//!
//! A test binary includes this file by path (`#[path = "common/aggregator.rs"] mod
//! aggregator;`) next to `common/binary.rs` (as `mod binary`).

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use keda_tls::pki::{CertificateAuthority, PemPair};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;

use crate::binary::Cluster;

/// A free loopback port (bound and released: the caller binds it again at once).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Where a metrics-apiserver started by [`start_metrics_apiserver`] answers.
pub struct MetricsApiserver {
    /// The secure port: the external metrics API, as the aggregator reaches it.
    pub secure: SocketAddr,
    /// The plain `--metrics-port`: its own Prometheus metrics.
    pub metrics: SocketAddr,
}

/// The metrics-apiserver, in process, started with no certificate files for the operator (so
/// it reads Secret keda-rs-metrics-apiserver-certs from namespace `certs_namespace`), a serving
/// certificate of `serving` and the front proxy CA `front_proxy`; it asks the operator's
/// metric service at `operator`.
pub fn start_metrics_apiserver(
    cluster: &Cluster,
    operator: SocketAddr,
    serving: &CertificateAuthority,
    front_proxy: &CertificateAuthority,
    certs_namespace: &str,
    cancel: CancellationToken,
) -> MetricsApiserver {
    start_metrics_apiserver_with(
        cluster,
        operator,
        serving,
        front_proxy,
        certs_namespace,
        &[],
        cancel,
    )
}

/// [`start_metrics_apiserver`] with `extra` arguments after the others.
pub fn start_metrics_apiserver_with(
    cluster: &Cluster,
    operator: SocketAddr,
    serving: &CertificateAuthority,
    front_proxy: &CertificateAuthority,
    certs_namespace: &str,
    extra: &[&str],
    cancel: CancellationToken,
) -> MetricsApiserver {
    let dir = cluster.dir.path();
    let pair = serving
        .issue_server("keda-metrics-apiserver", &["localhost"])
        .expect("serving certificate");
    std::fs::write(dir.join("serving.crt"), &pair.cert).expect("write");
    std::fs::write(dir.join("serving.key"), &pair.key).expect("write");
    std::fs::write(dir.join("front-proxy-ca.crt"), front_proxy.cert_pem()).expect("write");
    let secure_port = free_port();
    let metrics_port = free_port();
    let path = |name: &str| dir.join(name).display().to_string();
    let absent = |name: &str| dir.join("no-such-dir").join(name).display().to_string();
    let fixed = [
        "keda-metrics-apiserver".to_string(),
        "--bind-address=127.0.0.1".to_string(),
        format!("--secure-port={secure_port}"),
        format!("--metrics-port={metrics_port}"),
        format!("--tls-cert-file={}", path("serving.crt")),
        format!("--tls-private-key-file={}", path("serving.key")),
        format!(
            "--requestheader-client-ca-file={}",
            path("front-proxy-ca.crt")
        ),
        "--requestheader-allowed-names=front-proxy-client".to_string(),
        format!("--kubeconfig={}", cluster.kubeconfig.display()),
        format!("--metrics-service-address={operator}"),
        format!("--metrics-service-ca-file={}", absent("ca.crt")),
        format!("--metrics-service-client-cert-file={}", absent("tls.crt")),
        format!("--metrics-service-client-key-file={}", absent("tls.key")),
        format!("--certs-namespace={certs_namespace}"),
        "--cert-reload-interval=200ms".to_string(),
        "--workers=1".to_string(),
    ];
    let args = <keda_metrics_apiserver::Args as clap::Parser>::parse_from(
        fixed
            .into_iter()
            .chain(extra.iter().map(|arg| (*arg).to_string())),
    );
    tokio::spawn(async move {
        if let Err(error) = keda_metrics_apiserver::run(args, cancel).await {
            panic!("the metrics-apiserver stopped: {error}");
        }
    });
    MetricsApiserver {
        secure: SocketAddr::from(([127, 0, 0, 1], secure_port)),
        metrics: SocketAddr::from(([127, 0, 0, 1], metrics_port)),
    }
}

/// GET `path` on the metrics-apiserver as the aggregator does for the HPA: over TLS trusting
/// `serving`, presenting the front proxy's certificate `client`, with the user headers.
pub async fn get_as_hpa(
    address: SocketAddr,
    serving: &CertificateAuthority,
    client: &PemPair,
    path: &str,
) -> Option<(u16, String)> {
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(
            rustls_pki_types::CertificateDer::from_pem_slice(serving.cert_pem().as_bytes())
                .expect("CA"),
        )
        .expect("root");
    let config = rustls::ClientConfig::builder_with_provider(keda_tls::provider())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_client_auth_cert(
            keda_tls::certificates(client.cert.as_bytes(), "client").expect("cert"),
            rustls_pki_types::PrivateKeyDer::from_pem_slice(client.key.as_bytes()).expect("key"),
        )
        .expect("client auth");
    let tcp = tokio::net::TcpStream::connect(address).await.ok()?;
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(
            rustls_pki_types::ServerName::try_from("localhost").expect("name"),
            tcp,
        )
        .await
        .ok()?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nhost: localhost\r\nx-remote-user: system:serviceaccount:kube-system:horizontal-pod-autoscaler\r\nx-remote-group: system:serviceaccounts\r\nconnection: close\r\n\r\n"
    );
    tls.write_all(request.as_bytes()).await.ok()?;
    let mut response = Vec::new();
    let _ = timeout(Duration::from_secs(10), tls.read_to_end(&mut response)).await;
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())?;
    Some((status, body))
}
