//! The operator's metric service: statuses and bodies for every outcome, and mutual TLS.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use http::{Method, StatusCode};
use http_body_util::BodyExt;
use keda_api::external_metrics::{
    MetricValuesResponse, ServiceError, ServiceErrorReason, metric_names_match, metric_values_path,
};
use keda_operator::metrics_service::{
    MetricServiceTls, MetricValues, MetricsError, MetricsService, MetricsServiceOptions,
    StartError, TlsFiles, server_config,
};
use keda_scalers::{Clock, MetricValue, ScalerError, TriggerId};
use keda_tls::Identity;
use keda_tls::pki::CertificateAuthority;
use rcgen::ExtendedKeyUsagePurpose;
use tokio_util::sync::CancellationToken;

/// One ScaledObject `apps/worker` with metric `s0-redis-Jobs` = 7.25; `apps/broken` whose
/// scaler fails; `apps/slow` that never answers.
struct Fixed;

#[async_trait]
impl MetricValues for Fixed {
    async fn metric_values(
        &self,
        namespace: &str,
        scaled_object: &str,
        metric_name: &str,
    ) -> Result<Vec<MetricValue>, MetricsError> {
        match (namespace, scaled_object) {
            ("apps", "worker") if metric_names_match(metric_name, "s0-redis-Jobs") => {
                Ok(vec![MetricValue::new("s0-redis-Jobs", 7.25)])
            }
            ("apps", "worker") => Err(MetricsError::MetricNotFound {
                namespace: namespace.into(),
                name: scaled_object.into(),
                metric: metric_name.into(),
            }),
            ("apps", "broken") => Err(MetricsError::ScalerFailed {
                namespace: namespace.into(),
                name: scaled_object.into(),
                metric: metric_name.into(),
                source: ScalerError::Closed {
                    trigger: TriggerId {
                        index: 0,
                        trigger_type: "redis".into(),
                    },
                },
            }),
            ("apps", "slow") => std::future::pending().await,
            ("standby", _) => Err(MetricsError::Unavailable {
                reason: "not the leader".into(),
            }),
            _ => Err(MetricsError::ScaledObjectNotFound {
                namespace: namespace.into(),
                name: scaled_object.into(),
            }),
        }
    }
}

fn service() -> MetricsService {
    MetricsService::new(
        Arc::new(Fixed),
        MetricsServiceOptions {
            request_timeout: Duration::from_millis(200),
            clock: Clock::fixed("2026-01-02T03:04:05Z".parse().expect("timestamp")),
            ..MetricsServiceOptions::default()
        },
    )
}

async fn ask(namespace: &str, name: &str, metric: &str) -> (StatusCode, Vec<u8>) {
    let response = service()
        .respond(&Method::GET, &metric_values_path(namespace, name, metric))
        .await;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (status, body.to_vec())
}

#[tokio::test]
async fn values_are_answered_as_milli_quantities_with_a_timestamp() {
    let (status, body) = ask("apps", "worker", "s0-redis-jobs").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        String::from_utf8_lossy(&body),
        r#"{"items":[{"metricName":"s0-redis-Jobs","metricLabels":{},"timestamp":"2026-01-02T03:04:05Z","value":"7250m"}]}"#
    );
    let parsed: MetricValuesResponse = serde_json::from_slice(&body).expect("protocol");
    assert_eq!(parsed.items.len(), 1);
}

/// Issue 16: every metric read counts as KEDA's metric service counts its gRPC `GetMetrics`
/// calls (`keda_internal_metricsservice_grpc_server_*`): started, messages received and sent,
/// handled by code (`OK`, or `Unknown` for an error) and timed. Requests that are no metric read
/// (`/healthz`, an unknown path) are not calls.
#[tokio::test]
async fn metric_reads_are_counted_as_keda_s_grpc_server_calls() {
    let metrics = keda_operator::telemetry::Metrics::new();
    let service = service().with_metrics(metrics.clone());
    for (namespace, name) in [("apps", "worker"), ("apps", "worker"), ("apps", "broken")] {
        service
            .respond(
                &Method::GET,
                &metric_values_path(namespace, name, "s0-redis-jobs"),
            )
            .await;
    }
    service.respond(&Method::GET, "/healthz").await;
    service.respond(&Method::GET, "/nowhere").await;
    let text = metrics.encode();
    let method = r#"grpc_type="unary",grpc_service="api.MetricsService",grpc_method="GetMetrics""#;
    let value = |series: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{series} ")))
            .map(str::to_string)
    };
    let total = |name: &str| {
        value(&format!(
            "keda_internal_metricsservice_grpc_server_{name}{{{method}}}"
        ))
    };
    assert_eq!(total("started_total").as_deref(), Some("3"), "{text}");
    assert_eq!(total("msg_received_total").as_deref(), Some("3"), "{text}");
    assert_eq!(total("msg_sent_total").as_deref(), Some("3"), "{text}");
    assert_eq!(
        total("handling_seconds_count").as_deref(),
        Some("3"),
        "{text}"
    );
    let handled = |code: &str| {
        value(&format!(
            r#"keda_internal_metricsservice_grpc_server_handled_total{{{method},grpc_code="{code}"}}"#
        ))
    };
    assert_eq!(handled("OK").as_deref(), Some("2"), "{text}");
    assert_eq!(handled("Unknown").as_deref(), Some("1"), "{text}");
}

#[tokio::test]
async fn each_failure_has_its_status_and_reason() {
    for (namespace, name, metric, status, reason, mentions) in [
        (
            "apps",
            "nobody",
            "m",
            404,
            ServiceErrorReason::ScaledObjectNotFound,
            "apps/nobody",
        ),
        (
            "apps",
            "worker",
            "s1-other",
            404,
            ServiceErrorReason::MetricNotFound,
            "s1-other",
        ),
        (
            "standby",
            "worker",
            "m",
            503,
            ServiceErrorReason::Unavailable,
            "not the leader",
        ),
        (
            "apps",
            "broken",
            "m",
            500,
            ServiceErrorReason::ScalerFailed,
            "apps/broken",
        ),
        // The in-memory source never answers: bounded by the request timeout.
        (
            "apps",
            "slow",
            "m",
            504,
            ServiceErrorReason::Timeout,
            "took longer than",
        ),
    ] {
        let (got, body) = ask(namespace, name, metric).await;
        assert_eq!(got.as_u16(), status, "{namespace}/{name}");
        let error: ServiceError = serde_json::from_slice(&body).expect("a ServiceError");
        assert_eq!(error.reason, reason, "{namespace}/{name}");
        assert!(error.message.contains(mentions), "{}", error.message);
    }
}

#[tokio::test]
async fn other_paths_and_methods_are_refused() {
    let service = service();
    let response = service.respond(&Method::GET, "/v1/other").await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let response = service
        .respond(&Method::POST, &metric_values_path("apps", "worker", "m"))
        .await;
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
}

/// A CA of the test, issuing with keda-rs' own CA code.
struct Pki {
    ca: CertificateAuthority,
}

impl Pki {
    fn new(name: &str) -> Self {
        Self {
            ca: CertificateAuthority::new(name).expect("CA"),
        }
    }

    fn pem(&self) -> String {
        self.ca.cert_pem()
    }

    /// A certificate and key for `hosts` with `usage`, of no keda-rs identity.
    fn issue(&self, hosts: &[&str], usage: ExtendedKeyUsagePurpose) -> (String, String) {
        self.issue_as("test", hosts, usage)
    }

    /// A client certificate and key of `identity`, as the operator issues it.
    fn identity(&self, identity: Identity) -> (String, String) {
        self.issue_as(
            identity.common_name(),
            &[],
            ExtendedKeyUsagePurpose::ClientAuth,
        )
    }

    fn issue_as(
        &self,
        common_name: &str,
        hosts: &[&str],
        usage: ExtendedKeyUsagePurpose,
    ) -> (String, String) {
        let pair = self
            .ca
            .issue(common_name, hosts, &[usage], jiff::Timestamp::now())
            .expect("certificate");
        (pair.cert, pair.key)
    }
}

/// A client configuration trusting the CAs of `trusted` and presenting `client`. It keeps
/// rustls' default session cache, so it resumes a session whenever a server allows it.
fn client_config(trusted: &[&Pki], client: Option<(String, String)>) -> Arc<rustls::ClientConfig> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let mut roots = rustls::RootCertStore::empty();
    for ca in trusted {
        roots
            .add(CertificateDer::from_pem_slice(ca.pem().as_bytes()).expect("CA"))
            .expect("root");
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots);
    let config = match client {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_slice(cert.as_bytes()).expect("cert")],
                PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("key"),
            )
            .expect("client auth"),
        None => builder.with_no_client_auth(),
    };
    Arc::new(config)
}

/// Connects with `config` and asks for `/healthz`: `Ok` when it is answered.
async fn handshake_with(
    address: std::net::SocketAddr,
    config: &Arc<rustls::ClientConfig>,
) -> Result<(), std::io::Error> {
    use rustls_pki_types::ServerName;
    let exchange = async {
        let tcp = tokio::net::TcpStream::connect(address).await?;
        let mut tls = tokio_rustls::TlsConnector::from(Arc::clone(config))
            .connect(ServerName::try_from("localhost").expect("name"), tcp)
            .await?;
        // TLS 1.3 reports a refused client certificate on the first read.
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        tls.write_all(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\n\r\n")
            .await?;
        let mut buffer = [0_u8; 64];
        let read = tls.read(&mut buffer).await?;
        if buffer[..read].starts_with(b"HTTP/1.1 200") {
            Ok(())
        } else {
            Err(std::io::Error::other(
                String::from_utf8_lossy(&buffer[..read]).into_owned(),
            ))
        }
    };
    tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .expect("the exchange ends in time")
}

async fn handshake(
    address: std::net::SocketAddr,
    ca: &Pki,
    client: Option<(String, String)>,
) -> Result<(), std::io::Error> {
    handshake_with(address, &client_config(&[ca], client)).await
}

#[tokio::test]
async fn only_clients_with_a_certificate_of_the_client_ca_are_served() {
    let pki = Pki::new("operator-ca");
    let stranger = Pki::new("stranger-ca");
    let (cert, key) = pki.issue(&["localhost"], ExtendedKeyUsagePurpose::ServerAuth);
    let tls = server_config(cert.as_bytes(), key.as_bytes(), pki.pem().as_bytes())
        .expect("TLS configuration");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let cancel = CancellationToken::new();
    tokio::spawn(service().serve(listener, Arc::new(tls), cancel.clone()));

    let good = pki.issue(&[], ExtendedKeyUsagePurpose::ClientAuth);
    let bad = stranger.issue(&[], ExtendedKeyUsagePurpose::ClientAuth);
    let bounded = |f| tokio::time::timeout(Duration::from_secs(10), f);
    assert!(
        bounded(handshake(address, &pki, Some(good)))
            .await
            .expect("in time")
            .is_ok()
    );
    assert!(
        bounded(handshake(address, &pki, None))
            .await
            .expect("in time")
            .is_err()
    );
    assert!(
        bounded(handshake(address, &pki, Some(bad)))
            .await
            .expect("in time")
            .is_err()
    );
    cancel.cancel();
}

#[test]
fn a_client_ca_file_without_certificates_is_refused_naming_it() {
    let pki = Pki::new("operator-ca");
    let (cert, key) = pki.issue(&["localhost"], ExtendedKeyUsagePurpose::ServerAuth);
    let error = server_config(cert.as_bytes(), key.as_bytes(), b"").expect_err("no CA");
    assert!(error.to_string().contains("client CA"), "{error}");
}

#[tokio::test]
async fn activator_reports_posted_over_mutual_tls_reach_the_hub_of_the_http_scalers() {
    use keda_scalers::pool::ClientPools;
    use keda_scalers::scalers::http::hub::ActivatorHub;
    use keda_scalers::scalers::http::protocol::{REPORT_PATH, Report, TargetKey};
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let pki = Pki::new("operator-ca");
    let (cert, key) = pki.issue(&["localhost"], ExtendedKeyUsagePurpose::ServerAuth);
    let tls = server_config(cert.as_bytes(), key.as_bytes(), pki.pem().as_bytes())
        .expect("TLS configuration");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let pools = ClientPools::new();
    let clock = Clock::system();
    // The hub the http scalers lease from the same pools.
    let hub = ActivatorHub::shared(&pools, &clock).await;
    let served = ActivatorHub::shared(&pools, &clock).await;
    let cancel = CancellationToken::new();
    tokio::spawn(
        service()
            .with_reports(served)
            .serve(listener, Arc::new(tls), cancel.clone()),
    );
    let target = TargetKey::new("apps", "web", 0);
    let mut activity = hub.subscribe(&target);

    let (client_cert, client_key) = pki.identity(Identity::Activator);
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(pki.pem().as_bytes()).expect("CA"))
        .expect("root");
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_client_auth_cert(
        vec![CertificateDer::from_pem_slice(client_cert.as_bytes()).expect("cert")],
        PrivateKeyDer::from_pem_slice(client_key.as_bytes()).expect("key"),
    )
    .expect("client auth");
    let exchange = async {
        let tcp = tokio::net::TcpStream::connect(address)
            .await
            .expect("connect");
        let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(ServerName::try_from("localhost").expect("name"), tcp)
            .await
            .expect("handshake");
        let line = Report::Wake {
            replica: "activator-0".into(),
            target: target.clone(),
        }
        .to_line();
        let head = format!(
            "POST {REPORT_PATH} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/x-ndjson\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            line.len()
        );
        tls.write_all(head.as_bytes()).await.expect("head");
        tls.write_all(&line).await.expect("body");
        let mut response = Vec::new();
        let _ = tls.read_to_end(&mut response).await;
        String::from_utf8_lossy(&response).into_owned()
    };
    let response = tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .expect("answered in time");
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(
        response.contains(r#"{"applied":1,"rejected":0}"#),
        "{response}"
    );
    tokio::time::timeout(Duration::from_secs(10), activity.wait_for(|a| a.wakes >= 1))
        .await
        .expect("the wake-up reaches the hub in time")
        .expect("hub alive");
    cancel.cancel();
}

/// `tls.crt` / `tls.key` for `localhost` and `ca.crt`, all of `pki`, as `keda-rs-certs` lays
/// them out.
fn write_files(files: &TlsFiles, pki: &Pki) {
    let (cert, key) = pki.issue(&["localhost"], ExtendedKeyUsagePurpose::ServerAuth);
    std::fs::write(&files.cert, cert).expect("write cert");
    std::fs::write(&files.key, key).expect("write key");
    std::fs::write(&files.client_ca, pki.pem()).expect("write CA");
}

fn temp_files(name: &str) -> TlsFiles {
    let dir = std::env::temp_dir().join(format!("keda-operator-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    TlsFiles {
        cert: dir.join("tls.crt"),
        key: dir.join("tls.key"),
        client_ca: dir.join("ca.crt"),
    }
}

#[tokio::test]
async fn rotated_certificate_and_client_ca_files_are_used_after_the_next_poll() {
    let files = temp_files("rotation");
    let (old, new) = (Pki::new("old-ca"), Pki::new("new-ca"));
    write_files(&files, &old);
    let tls = MetricServiceTls::from_files(&files)
        .await
        .expect("the files load");
    let cancel = CancellationToken::new();
    // A short poll so the test runs in well under a second.
    tls.reload_on_change(&files, Duration::from_millis(20), cancel.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(service().serve(
        listener,
        Arc::new(tls.server_config().expect("TLS configuration")),
        cancel.clone(),
    ));

    let old_client = client_config(
        &[&old],
        Some(old.issue(&[], ExtendedKeyUsagePurpose::ClientAuth)),
    );
    let new_client = client_config(
        &[&new],
        Some(new.issue(&[], ExtendedKeyUsagePurpose::ClientAuth)),
    );
    // Accepts either serving certificate, so only the operator's verdict on its (old)
    // certificate decides; it connects before the rotation, so it would resume a session if
    // the operator offered one.
    let old_cert_client = client_config(
        &[&old, &new],
        Some(old.issue(&[], ExtendedKeyUsagePurpose::ClientAuth)),
    );
    handshake_with(address, &old_client)
        .await
        .expect("old client before the rotation");
    handshake_with(address, &old_cert_client)
        .await
        .expect("old certificate before the rotation");
    handshake_with(address, &old_cert_client)
        .await
        .expect("old certificate before the rotation, again");
    assert!(handshake_with(address, &new_client).await.is_err());

    // Rotation to a new CA: serving certificate, key and client CA replaced.
    write_files(&files, &new);
    tokio::time::timeout(Duration::from_secs(10), async {
        while handshake_with(address, &new_client).await.is_err() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("a client of the new CA is served after the next poll");
    assert!(handshake_with(address, &old_client).await.is_err());
    assert!(
        handshake_with(address, &old_cert_client).await.is_err(),
        "a client certificate of the old CA is refused"
    );

    // Broken replacements: the new certificate and CA stay in use.
    std::fs::write(&files.cert, "garbage").expect("write");
    std::fs::write(&files.client_ca, "garbage").expect("write");
    tokio::time::sleep(Duration::from_millis(200)).await;
    handshake_with(address, &new_client)
        .await
        .expect("served with the previous certificate and CA");
    assert!(handshake_with(address, &old_cert_client).await.is_err());

    cancel.cancel();
    if let Some(dir) = files.cert.parent() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[tokio::test]
async fn unusable_files_stop_the_start_naming_the_flag() {
    let files = temp_files("unusable");
    let pki = Pki::new("ca");
    write_files(&files, &pki);
    std::fs::write(&files.client_ca, "no certificate here").expect("write");
    let error = MetricServiceTls::from_files(&files)
        .await
        .expect_err("no CA");
    assert!(
        error.to_string().starts_with(&format!(
            "the metric service's client CA is not usable: --metrics-service-client-ca-file {} holds no PEM certificate",
            files.client_ca.display()
        )),
        "{error}"
    );
    let (_, other_key) = pki.issue(&["localhost"], ExtendedKeyUsagePurpose::ServerAuth);
    std::fs::write(&files.key, other_key).expect("write");
    let error = MetricServiceTls::from_files(&files)
        .await
        .expect_err("mismatched key");
    assert!(
        error.to_string().starts_with(
            "the metric service's serving certificate is not usable: --metrics-service-cert-file "
        ),
        "{error}"
    );
    std::fs::remove_file(&files.cert).expect("remove");
    let error = MetricServiceTls::from_files(&files)
        .await
        .expect_err("no certificate");
    assert!(matches!(error, StartError::Read { .. }), "{error}");
    assert!(
        error.to_string().starts_with(
            "cannot read the metric service's serving certificate (--metrics-service-cert-file) "
        ),
        "{error}"
    );
    if let Some(dir) = files.cert.parent() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Sends `request` (a whole HTTP/1.1 request with `connection: close`) over mutual TLS with
/// `config` and returns the whole answer.
async fn exchange(
    address: std::net::SocketAddr,
    config: &Arc<rustls::ClientConfig>,
    request: &[u8],
) -> String {
    use rustls_pki_types::ServerName;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let exchange = async {
        let tcp = tokio::net::TcpStream::connect(address)
            .await
            .expect("connect");
        let mut tls = tokio_rustls::TlsConnector::from(Arc::clone(config))
            .connect(ServerName::try_from("localhost").expect("name"), tcp)
            .await
            .expect("handshake");
        tls.write_all(request).await.expect("request");
        let mut response = Vec::new();
        let _ = tls.read_to_end(&mut response).await;
        String::from_utf8_lossy(&response).into_owned()
    };
    tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .expect("answered in time")
}

/// A `tracing` writer into a shared buffer, to check what the service logs.
#[derive(Clone, Default)]
struct Logs(Arc<std::sync::Mutex<Vec<u8>>>);

impl Logs {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("lock")).into_owned()
    }
}

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn metric_reads_are_for_the_metrics_apiserver_and_reports_for_the_activators_only() {
    use keda_scalers::pool::ClientPools;
    use keda_scalers::scalers::http::hub::ActivatorHub;
    use keda_scalers::scalers::http::protocol::{REPORT_PATH, Report, TargetKey};

    let logs = Logs::default();
    let writer = logs.clone();
    let _logging = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish(),
    );
    let pki = Pki::new("keda-rs-ca");
    let (cert, key) = pki.issue_as(
        Identity::Operator.common_name(),
        &["localhost"],
        ExtendedKeyUsagePurpose::ServerAuth,
    );
    let tls = server_config(cert.as_bytes(), key.as_bytes(), pki.pem().as_bytes())
        .expect("TLS configuration");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let hub = ActivatorHub::shared(&ClientPools::new(), &Clock::system()).await;
    let cancel = CancellationToken::new();
    tokio::spawn(
        service()
            .with_reports(hub)
            .serve(listener, Arc::new(tls), cancel.clone()),
    );

    let metrics_apiserver = client_config(&[&pki], Some(pki.identity(Identity::MetricsApiserver)));
    let activator = client_config(&[&pki], Some(pki.identity(Identity::Activator)));
    // A client certificate of the same CA under the operator's own name, and one of no
    // keda-rs identity: neither may do anything but /healthz.
    let operator = client_config(&[&pki], Some(pki.identity(Identity::Operator)));
    let stranger = client_config(
        &[&pki],
        Some(pki.issue_as("someone", &[], ExtendedKeyUsagePurpose::ClientAuth)),
    );

    let read = format!(
        "GET {} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n",
        metric_values_path("apps", "worker", "s0-redis-jobs")
    );
    let line = Report::Wake {
        replica: "activator-0".into(),
        target: TargetKey::new("apps", "web", 0),
    }
    .to_line();
    let mut report = format!(
        "POST {REPORT_PATH} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/x-ndjson\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        line.len()
    )
    .into_bytes();
    report.extend_from_slice(&line);

    let answer = exchange(address, &metrics_apiserver, read.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("7250m"), "{answer}");
    let answer = exchange(address, &activator, &report).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    for (who, config, request) in [
        ("keda-activator", &activator, read.as_bytes()),
        ("keda-operator", &operator, read.as_bytes()),
        ("someone", &stranger, read.as_bytes()),
        (
            "keda-metrics-apiserver",
            &metrics_apiserver,
            report.as_slice(),
        ),
        ("keda-operator", &operator, report.as_slice()),
    ] {
        let answer = exchange(address, config, request).await;
        assert!(answer.starts_with("HTTP/1.1 403"), "{who}: {answer}");
        let body = answer
            .split_once("\r\n\r\n")
            .map(|(_, b)| b)
            .unwrap_or_default();
        let error: ServiceError = serde_json::from_str(body).expect("a ServiceError");
        assert_eq!(error.reason, ServiceErrorReason::Forbidden, "{who}");
        assert!(
            error
                .message
                .starts_with(&format!("the client certificate \"{who}\" may not use ")),
            "{}",
            error.message
        );
    }
    let logged = logs.text();
    let refusals: Vec<&str> = logged
        .lines()
        .filter(|l| l.contains("refused a client certificate not allowed on this endpoint"))
        .collect();
    assert_eq!(refusals.len(), 5, "{logged}");
    assert!(refusals[0].contains("WARN"), "{logged}");
    assert!(
        refusals[0].contains("common_name=keda-activator")
            && refusals[0].contains("allowed=keda-metrics-apiserver"),
        "{logged}"
    );
    // Every client of the CA may ask whether the service is up.
    for config in [&metrics_apiserver, &activator, &operator, &stranger] {
        handshake_with(address, config).await.expect("/healthz");
    }
    cancel.cancel();
}
