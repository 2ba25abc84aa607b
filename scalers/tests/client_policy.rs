//! The process-wide client policy of the scalers (KEDA's `--ca-dir`,
//! `KEDA_HTTP_MIN_TLS_VERSION`, `KEDA_HTTP_TLS_CIPHER_LIST`) against real TLS servers on
//! loopback whose certificates are generated at test time.

#[allow(dead_code)]
#[path = "common/http.rs"]
mod http_server;

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use http_server::{TestCa, TestServer};
use keda_scalers::client_policy::{self, ClientPolicy};
use keda_scalers::http_client::reqwest_client;
use keda_scalers::tls::TlsSettings;
use rcgen::ExtendedKeyUsagePurpose;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

fn ok() -> http_server::Handler {
    http_server::handler(|_| (StatusCode::OK, "text/plain", "ok".to_string()))
}

/// A server of `ca`'s certificate speaking only `versions`, with only `suites` (rustls names)
/// when given.
fn server_config(
    ca: &TestCa,
    versions: &[&'static rustls::SupportedProtocolVersion],
    suites: Option<&[&str]>,
) -> Arc<rustls::ServerConfig> {
    let (cert, key) = ca.issue(
        &["127.0.0.1", "localhost"],
        ExtendedKeyUsagePurpose::ServerAuth,
    );
    let mut provider = rustls::crypto::ring::default_provider();
    if let Some(suites) = suites {
        provider
            .cipher_suites
            .retain(|s| suites.contains(&format!("{:?}", s.suite()).as_str()));
    }
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(versions)
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from_pem_slice(cert.as_bytes()).expect("cert")],
            PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("key"),
        )
        .expect("server config");
    Arc::new(config)
}

async fn get(client: &reqwest::Client, server: &TestServer) -> Result<u16, String> {
    client
        .get(server.url("/"))
        .send()
        .await
        .map(|r| r.status().as_u16())
        .map_err(|e| format!("{e:?}"))
}

fn policy_client(policy: &ClientPolicy) -> reqwest::Client {
    let tls = TlsSettings::default()
        .client_config_with(policy)
        .expect("client config");
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .timeout(Duration::from_secs(5))
        .build()
        .expect("client")
}

#[tokio::test]
async fn a_scaler_trusts_a_ca_found_only_in_a_ca_dir_once_the_policy_is_installed() {
    let ca = TestCa::new("ca-dir-only");
    let server = TestServer::start_tls(ok(), ca.server_config(false)).await;
    let settings = TlsSettings::default();
    let before = reqwest_client(&settings, Duration::from_secs(5)).expect("client");
    let refused = get(&before, &server)
        .await
        .expect_err("an unknown CA is refused");
    assert!(refused.contains("UnknownIssuer"), "{refused}");

    let dir = std::env::temp_dir().join(format!("keda-rs-ca-dir-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("company-ca.crt"), ca.pem()).expect("ca file");
    std::fs::write(dir.join("README"), "not a certificate").expect("other file");
    let found = client_policy::read_ca_dirs(&[dir.clone(), dir.join("missing")]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(found.certs.len(), 1);
    assert_eq!(found.skipped.len(), 1, "{:?}", found.skipped);
    assert!(client_policy::install(ClientPolicy {
        extra_roots: found.certs,
        ..ClientPolicy::default()
    }));
    let after = reqwest_client(&settings, Duration::from_secs(5)).expect("client");
    assert_eq!(get(&after, &server).await, Ok(200));
}

#[tokio::test]
async fn a_minimum_of_tls13_refuses_a_server_that_speaks_only_tls12() {
    let ca = TestCa::new("tls12-only");
    let server =
        TestServer::start_tls(ok(), server_config(&ca, &[&rustls::version::TLS12], None)).await;
    let trusted = |tls: keda_tls::TlsPolicy| ClientPolicy {
        extra_roots: vec![CertificateDer::from_pem_slice(ca.pem().as_bytes()).expect("ca")],
        tls,
        ..ClientPolicy::default()
    };
    let default = trusted(keda_tls::TlsPolicy::default());
    assert_eq!(get(&policy_client(&default), &server).await, Ok(200));
    let tls13 = keda_tls::TlsPolicy::parse("KEDA_HTTP_MIN_TLS_VERSION", Some("TLS13"), "L", None)
        .expect("policy");
    let refused = get(&policy_client(&trusted(tls13)), &server).await;
    assert!(refused.is_err(), "{refused:?}");
}

#[tokio::test]
async fn a_cipher_list_limits_the_tls12_suites_offered() {
    let ca = TestCa::new("one-suite");
    let server = TestServer::start_tls(
        ok(),
        server_config(
            &ca,
            &[&rustls::version::TLS12],
            Some(&["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"]),
        ),
    )
    .await;
    let with = |list: &str| ClientPolicy {
        extra_roots: vec![CertificateDer::from_pem_slice(ca.pem().as_bytes()).expect("ca")],
        tls: keda_tls::TlsPolicy::parse("V", None, "KEDA_HTTP_TLS_CIPHER_LIST", Some(list))
            .expect("policy"),
        ..ClientPolicy::default()
    };
    let refused = get(
        &policy_client(&with("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256")),
        &server,
    )
    .await;
    assert!(refused.is_err(), "{refused:?}");
    assert_eq!(
        get(
            &policy_client(&with(
                "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256:TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"
            )),
            &server
        )
        .await,
        Ok(200)
    );
}
