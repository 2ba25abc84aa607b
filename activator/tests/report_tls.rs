//! The report stream to the operator over mutual TLS: the activator presents its client
//! certificate, verifies the operator's, and its wake-up lines arrive.

use std::sync::Arc;
use std::time::Duration;

use keda_activator::metrics::Metrics;
use keda_activator::report::{self, ReporterConfig, client_tls};
use keda_activator::targets::Targets;
use keda_scalers::scalers::http::protocol::{REPORT_PATH, TargetKey};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    CertifiedIssuer::self_signed(params, KeyPair::generate().expect("key")).expect("CA")
}

fn issue(
    ca: &CertifiedIssuer<'static, KeyPair>,
    hosts: &[&str],
    usage: ExtendedKeyUsagePurpose,
) -> (String, String) {
    let mut params =
        CertificateParams::new(hosts.iter().map(|h| h.to_string()).collect::<Vec<_>>())
            .expect("params");
    params.extended_key_usages = vec![usage];
    let key = KeyPair::generate().expect("key");
    let cert = params.signed_by(&key, ca).expect("signed");
    (cert.pem(), key.serialize_pem())
}

#[tokio::test]
async fn wake_ups_reach_the_operator_over_mutual_tls() {
    let ca = ca("keda-rs-ca");
    let ca_pem = ca.as_ref().pem();
    let (server_cert, server_key) = issue(&ca, &["localhost"], ExtendedKeyUsagePurpose::ServerAuth);
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).expect("CA"))
        .expect("root");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .expect("verifier");
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![CertificateDer::from_pem_slice(server_cert.as_bytes()).expect("cert")],
            PrivateKeyDer::from_pem_slice(server_key.as_bytes()).expect("key"),
        )
        .expect("server config");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (received_tx, mut received) = mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
        let (tcp, _) = listener.accept().await.expect("accept");
        let mut tls = acceptor.accept(tcp).await.expect("mutual TLS handshake");
        let mut buffer = [0_u8; 4096];
        while let Ok(n) = tls.read(&mut buffer).await {
            if n == 0 {
                break;
            }
            let _ = received_tx.send(String::from_utf8_lossy(&buffer[..n]).into_owned());
        }
    });

    let (client_cert, client_key) = issue(&ca, &[], ExtendedKeyUsagePurpose::ClientAuth);
    let tls = client_tls(
        ca_pem.as_bytes(),
        client_cert.as_bytes(),
        client_key.as_bytes(),
    )
    .expect("client TLS");
    let (wake_tx, wake_rx) = mpsc::channel(16);
    let (unused_tx, _unused_rx) = mpsc::channel(16);
    let targets = Targets::new(unused_tx, Arc::new(Metrics::new()));
    let stop = CancellationToken::new();
    tokio::spawn(report::run(
        ReporterConfig {
            url: format!("https://localhost:{port}{REPORT_PATH}")
                .parse()
                .expect("url"),
            tls: Some(Arc::new(tls)),
            replica: "activator-0".into(),
            idle_after: Duration::from_secs(120),
        },
        targets,
        wake_rx,
        stop.clone(),
    ));
    wake_tx
        .send(TargetKey::new("apps", "web", 0))
        .await
        .expect("wake");
    let seen = tokio::time::timeout(Duration::from_secs(10), async {
        let mut all = String::new();
        while let Some(chunk) = received.recv().await {
            all.push_str(&chunk);
            if all.contains(r#""type":"wake""#) {
                return all;
            }
        }
        all
    })
    .await
    .expect("the wake-up arrives in time");
    assert!(
        seen.starts_with(&format!("POST {REPORT_PATH} HTTP/1.1")),
        "{seen}"
    );
    assert!(seen.contains(r#""replica":"activator-0""#), "{seen}");
    stop.cancel();
}
