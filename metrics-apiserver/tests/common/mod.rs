//! A whole metrics path in one process: the operator's metric service (over an in-memory
//! `MetricValues`), the metrics-apiserver in front of it, memkube answering the
//! SubjectAccessReviews, and a TLS client playing the kube-apiserver aggregator. Every
//! certificate is generated here.

#![allow(dead_code)] // Each test binary uses a different part of the harness.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::authorization::v1::SubjectAccessReviewStatus;
use keda_api::external_metrics::metric_names_match;
use keda_metrics_apiserver::app::AppState;
use keda_metrics_apiserver::authn::{Authenticator, RequestHeaderConfig};
use keda_metrics_apiserver::authz::{CacheTtl, CachedAuthorizer, SubjectAccessReviewer};
use keda_metrics_apiserver::metrics::Metrics;
use keda_metrics_apiserver::operator_client::{
    OperatorClient, OperatorClientConfig, client_tls_config,
};
use keda_metrics_apiserver::start::secure_server;
use keda_metrics_apiserver::tls::secure_port_config;
use keda_operator::metrics_service::{
    MetricValues, MetricsError, MetricsService, MetricsServiceOptions, server_config,
};
use keda_scalers::{Clock, MetricValue};
use keda_tls::pki::{CertificateAuthority, PemPair};
use keda_tls::{CertStore, ServerCaVerifier, certificates, certified_key};
use memkube::MemKube;
use rustls::RootCertStore;
use rustls_pki_types::ServerName;
use tokio_util::sync::CancellationToken;

/// The common name the front proxy's certificate must carry.
pub const FRONT_PROXY_CN: &str = "front-proxy-client";
/// The user the HPA controller calls as; memkube allows it.
pub const HPA_USER: &str = "system:serviceaccount:kube-system:horizontal-pod-autoscaler";
/// A user memkube denies.
pub const DENIED_USER: &str = "mallory";
/// The time every value is stamped with.
pub const NOW: &str = "2026-03-04T05:06:07Z";

/// The certificates of a test.
pub struct Pki {
    pub serving_ca: CertificateAuthority,
    pub front_proxy_ca: CertificateAuthority,
    pub other_ca: CertificateAuthority,
    pub operator_ca: CertificateAuthority,
    pub front_proxy: PemPair,
}

impl Pki {
    pub fn new() -> Self {
        let front_proxy_ca = CertificateAuthority::new("front-proxy-ca").expect("CA");
        let front_proxy = front_proxy_ca
            .issue_client(FRONT_PROXY_CN)
            .expect("front-proxy client certificate");
        Self {
            serving_ca: CertificateAuthority::new("serving-ca").expect("CA"),
            front_proxy_ca,
            other_ca: CertificateAuthority::new("other-ca").expect("CA"),
            operator_ca: CertificateAuthority::new("keda-rs-operator-ca").expect("CA"),
            front_proxy,
        }
    }
}

/// An in-memory `MetricValues`: values by (namespace, ScaledObject), metric names matched
/// case-insensitively as the operator does.
#[derive(Default)]
pub struct Table {
    values: Mutex<HashMap<(String, String), Vec<MetricValue>>>,
    pub unavailable: AtomicBool,
}

impl Table {
    pub fn set(&self, namespace: &str, scaled_object: &str, values: Vec<MetricValue>) {
        self.values
            .lock()
            .expect("lock")
            .insert((namespace.into(), scaled_object.into()), values);
    }
}

#[async_trait]
impl MetricValues for Table {
    async fn metric_values(
        &self,
        namespace: &str,
        scaled_object: &str,
        metric_name: &str,
    ) -> Result<Vec<MetricValue>, MetricsError> {
        if self.unavailable.load(Ordering::SeqCst) {
            return Err(MetricsError::Unavailable {
                reason: "this operator replica is not the leader".into(),
            });
        }
        let values = self.values.lock().expect("lock");
        let all = values
            .get(&(namespace.to_string(), scaled_object.to_string()))
            .ok_or_else(|| MetricsError::ScaledObjectNotFound {
                namespace: namespace.into(),
                name: scaled_object.into(),
            })?;
        let found: Vec<MetricValue> = all
            .iter()
            .filter(|v| metric_names_match(metric_name, &v.name))
            .cloned()
            .collect();
        if found.is_empty() {
            return Err(MetricsError::MetricNotFound {
                namespace: namespace.into(),
                name: scaled_object.into(),
                metric: metric_name.into(),
            });
        }
        Ok(found)
    }
}

/// The running stack.
pub struct Stack {
    pub pki: Pki,
    pub secure: SocketAddr,
    pub operator: SocketAddr,
    pub kube: MemKube,
    pub authenticator: Arc<Authenticator>,
    pub metrics: Arc<Metrics>,
    cancel: CancellationToken,
    server: actix_web::dev::ServerHandle,
}

impl Drop for Stack {
    fn drop(&mut self) {
        self.cancel.cancel();
        let server = self.server.clone();
        tokio::spawn(async move { server.stop(false).await });
    }
}

/// Starts the operator's metric service over `values`.
pub async fn start_operator(
    pki: &Pki,
    values: Arc<dyn MetricValues>,
    cancel: CancellationToken,
) -> SocketAddr {
    let server = pki
        .operator_ca
        .issue_server("keda-operator", &["localhost", "127.0.0.1"])
        .expect("operator serving certificate");
    let tls = server_config(
        server.cert.as_bytes(),
        server.key.as_bytes(),
        pki.operator_ca.cert_pem().as_bytes(),
    )
    .expect("operator TLS configuration");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let options = MetricsServiceOptions {
        clock: Clock::fixed(NOW.parse().expect("timestamp")),
        ..MetricsServiceOptions::default()
    };
    tokio::spawn(MetricsService::new(values, options).serve(listener, Arc::new(tls), cancel));
    address
}

/// A client of the operator at `address`, presenting a certificate of the operator CA.
pub fn operator_client(pki: &Pki, address: SocketAddr) -> Arc<OperatorClient> {
    let client = pki
        .operator_ca
        .issue_client("keda-metrics-apiserver")
        .expect("client certificate");
    let store = Arc::new(CertStore::new(
        certified_key(client.cert.as_bytes(), client.key.as_bytes(), "client").expect("loads"),
    ));
    let operator_ca =
        ServerCaVerifier::from_pem(pki.operator_ca.cert_pem().as_bytes(), "operator CA")
            .expect("operator CA");
    let tls = client_tls_config(Arc::new(operator_ca), store).expect("client TLS configuration");
    Arc::new(OperatorClient::new(OperatorClientConfig {
        address: address.to_string(),
        server_name: ServerName::try_from("localhost").expect("name"),
        tls: Arc::new(tls),
        connect_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(3),
    }))
}

/// Starts the whole stack over `values`, with the SubjectAccessReview policy of memkube
/// allowing everyone but [`DENIED_USER`].
pub async fn start(values: Arc<dyn MetricValues>) -> Stack {
    let pki = Pki::new();
    let cancel = CancellationToken::new();
    let operator = start_operator(&pki, values, cancel.clone()).await;
    start_with(pki, operator, cancel).await
}

/// Starts the metrics-apiserver in front of the operator at `operator`.
pub async fn start_with(pki: Pki, operator: SocketAddr, cancel: CancellationToken) -> Stack {
    let kube = MemKube::new();
    kube.set_access_policy(|spec| SubjectAccessReviewStatus {
        allowed: spec.user.as_deref() != Some(DENIED_USER),
        denied: Some(spec.user.as_deref() == Some(DENIED_USER)),
        reason: Some("test policy".into()),
        ..SubjectAccessReviewStatus::default()
    });
    let authenticator = Arc::new(Authenticator::with(
        RequestHeaderConfig::new(
            pki.front_proxy_ca.cert_pem().as_bytes(),
            "front-proxy CA",
            vec![FRONT_PROXY_CN.into()],
            vec![],
            vec![],
            vec![],
        )
        .expect("request-header settings"),
    ));
    let authorizer = Arc::new(CachedAuthorizer::new(
        Arc::new(SubjectAccessReviewer::new(kube.client())),
        CacheTtl::default(),
    ));
    let client = operator_client(&pki, operator);
    client.keep_warm(cancel.clone());
    let metrics = Arc::new(Metrics::new());
    let state = AppState {
        authenticator: Arc::clone(&authenticator),
        authorizer,
        source: client,
        metrics: Arc::clone(&metrics),
    };
    let serving = pki
        .serving_ca
        .issue_server("keda-metrics-apiserver", &["localhost", "127.0.0.1"])
        .expect("serving certificate");
    let store = Arc::new(CertStore::new(
        certified_key(serving.cert.as_bytes(), serving.key.as_bytes(), "serving").expect("loads"),
    ));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let secure = listener.local_addr().expect("address");
    let server = secure_server(
        state,
        listener,
        secure_port_config(store, &Default::default()).expect("TLS configuration"),
        1,
    )
    .expect("server");
    let handle = server.handle();
    tokio::spawn(server);
    Stack {
        pki,
        secure,
        operator,
        kube,
        authenticator,
        metrics,
        cancel,
        server: handle,
    }
}

/// An answer.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

/// A GET on the secure port over TLS (trusting the serving CA), presenting `client` if given,
/// with `headers`.
pub async fn get(
    stack: &Stack,
    path: &str,
    client: Option<&PemPair>,
    headers: &[(&str, &str)],
) -> Answer {
    let mut roots = RootCertStore::empty();
    for ca in certificates(stack.pki.serving_ca.cert_pem().as_bytes(), "serving CA").expect("CA") {
        roots.add(ca).expect("root");
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots);
    let config = match client {
        Some(pair) => builder
            .with_client_auth_cert(
                certificates(pair.cert.as_bytes(), "client").expect("cert"),
                <rustls_pki_types::PrivateKeyDer<'static> as rustls_pki_types::pem::PemObject>::from_pem_slice(
                    pair.key.as_bytes(),
                )
                .expect("key"),
            )
            .expect("client auth"),
        None => builder.with_no_client_auth(),
    };
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(stack.secure)
        .await
        .expect("connect");
    let tls = connector
        .connect(ServerName::try_from("localhost").expect("name"), tcp)
        .await
        .expect("TLS handshake");
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .expect("HTTP handshake");
    tokio::spawn(connection);
    let mut request = http::Request::get(path).header("host", "localhost");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = tokio::time::timeout(
        Duration::from_secs(10),
        sender.send_request(request.body(Empty::<Bytes>::new()).expect("request")),
    )
    .await
    .expect("an answer within 10 s")
    .expect("a response");
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    Answer {
        status,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// The path of `metric` of ScaledObject `so` in `namespace`.
pub fn metric_path(namespace: &str, metric: &str, so: &str) -> String {
    format!(
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{metric}?labelSelector=scaledobject.keda.sh%2Fname%3D{so}"
    )
}

/// The headers the aggregator sends for the HPA controller.
pub fn as_hpa() -> Vec<(&'static str, &'static str)> {
    vec![
        ("X-Remote-User", HPA_USER),
        ("X-Remote-Group", "system:serviceaccounts"),
        ("X-Remote-Group", "system:authenticated"),
    ]
}
