//! The report stream to the operator over mutual TLS: the activator presents its client
//! certificate, verifies the operator's, and its wake-up lines arrive; rotated files are used by
//! the next connection.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keda_activator::metrics::Metrics;
use keda_activator::report::{self, ReporterConfig, TlsFiles, client_tls, client_tls_from_files};
use keda_activator::targets::Targets;
use keda_scalers::scalers::http::protocol::{REPORT_PATH, TargetKey};
use keda_tls::{CertStore, ServerCaVerifier, certified_key};
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

/// An operator stand-in: serves a certificate of `ca` for `localhost` and requires client
/// certificates of `ca`.
fn operator_tls(ca: &CertifiedIssuer<'static, KeyPair>) -> Arc<rustls::ServerConfig> {
    let (server_cert, server_key) = issue(ca, &["localhost"], ExtendedKeyUsagePurpose::ServerAuth);
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca.as_ref().pem().as_bytes()).expect("CA"))
        .expect("root");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .expect("verifier");
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![CertificateDer::from_pem_slice(server_cert.as_bytes()).expect("cert")],
            PrivateKeyDer::from_pem_slice(server_key.as_bytes()).expect("key"),
        )
        .expect("server config");
    Arc::new(config)
}

/// What the operator stand-in saw: the bytes of each mutual-TLS connection, tagged with the name
/// of the configuration it was accepted under.
type Received = mpsc::UnboundedReceiver<(&'static str, String)>;

/// The operator stand-in's configuration in force, and the token that ends the connections
/// accepted under it.
type Current = Arc<Mutex<(&'static str, Arc<rustls::ServerConfig>, CancellationToken)>>;

/// Accepts connections on a loopback port under the configuration in `current`.
async fn operator(current: Current) -> (u16, Received) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (received_tx, received) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (name, config, ended) = current.lock().expect("lock").clone();
            let received_tx = received_tx.clone();
            tokio::spawn(async move {
                let acceptor = tokio_rustls::TlsAcceptor::from(config);
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut buffer = [0_u8; 4096];
                loop {
                    tokio::select! {
                        () = ended.cancelled() => return,
                        read = tls.read(&mut buffer) => match read {
                            Ok(n) if n > 0 => {
                                let text = String::from_utf8_lossy(&buffer[..n]).into_owned();
                                let _ = received_tx.send((name, text));
                            }
                            _ => return,
                        },
                    }
                }
            });
        }
    });
    (port, received)
}

/// Starts a reporter to `port` with `tls`.
fn reporter(
    port: u16,
    tls: rustls::ClientConfig,
    stop: &CancellationToken,
) -> mpsc::Sender<TargetKey> {
    let (wake_tx, wake_rx) = mpsc::channel(16);
    let (unused_tx, _unused_rx) = mpsc::channel(16);
    let targets = Targets::new(unused_tx, Arc::new(Metrics::new()));
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
        report::wake_receiver(wake_rx),
        stop.clone(),
    ));
    wake_tx
}

/// The text received on connections accepted under `config` until it contains `needle`.
async fn received_under(received: &mut Received, config: &str, needle: &str) -> String {
    let mut all = String::new();
    tokio::time::timeout(Duration::from_secs(10), async {
        while let Some((name, chunk)) = received.recv().await {
            if name == config {
                all.push_str(&chunk);
                if all.contains(needle) {
                    return;
                }
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{needle} received under {config} in time; got {all:?}"));
    all
}

#[tokio::test]
async fn wake_ups_reach_the_operator_over_mutual_tls() {
    let ca = ca("keda-rs-ca");
    let current: Current = Arc::new(Mutex::new((
        "only",
        operator_tls(&ca),
        CancellationToken::new(),
    )));
    let (port, mut received) = operator(current).await;

    let (client_cert, client_key) = issue(&ca, &[], ExtendedKeyUsagePurpose::ClientAuth);
    let tls = client_tls(
        Arc::new(ServerCaVerifier::from_pem(ca.as_ref().pem().as_bytes(), "CA").expect("CA")),
        Arc::new(CertStore::new(
            certified_key(client_cert.as_bytes(), client_key.as_bytes(), "client")
                .expect("client certificate"),
        )),
    )
    .expect("client TLS");
    let stop = CancellationToken::new();
    let wake = reporter(port, tls, &stop);
    wake.send(TargetKey::new("apps", "web", 0))
        .await
        .expect("wake");
    let seen = received_under(&mut received, "only", r#""type":"wake""#).await;
    assert!(
        seen.starts_with(&format!("POST {REPORT_PATH} HTTP/1.1")),
        "{seen}"
    );
    assert!(seen.contains(r#""replica":"activator-0""#), "{seen}");
    stop.cancel();
}

fn write_files(dir: &Path, ca: &CertifiedIssuer<'static, KeyPair>) {
    let (cert, key) = issue(ca, &[], ExtendedKeyUsagePurpose::ClientAuth);
    std::fs::write(dir.join("ca.crt"), ca.as_ref().pem()).expect("write CA");
    std::fs::write(dir.join("tls.crt"), cert).expect("write cert");
    std::fs::write(dir.join("tls.key"), key).expect("write key");
}

#[tokio::test]
async fn rotated_files_are_used_by_the_next_connection_and_broken_ones_are_not() {
    let dir = std::env::temp_dir().join(format!("keda-activator-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let files = TlsFiles {
        operator_ca: dir.join("ca.crt"),
        cert: dir.join("tls.crt"),
        key: dir.join("tls.key"),
    };
    let (old, new) = (ca("old-ca"), ca("new-ca"));
    write_files(&dir, &old);
    let ended = CancellationToken::new();
    let current: Current = Arc::new(Mutex::new(("old", operator_tls(&old), ended.clone())));
    let (port, mut received) = operator(Arc::clone(&current)).await;
    let stop = CancellationToken::new();
    // A short poll so the test runs in well under a second.
    let tls = client_tls_from_files(&files, Duration::from_millis(20), &stop).expect("files load");
    let _wake = reporter(port, tls, &stop);
    // Every connection starts with a sample at once.
    received_under(&mut received, "old", r#""type":"sample""#).await;

    // Rotation: the operator serves and trusts only the new CA, and the activator's files are
    // replaced with a certificate of the new CA; the open stream is closed, so the activator
    // reconnects (retrying until its next poll has loaded the new files).
    write_files(&dir, &new);
    let ended_new = CancellationToken::new();
    *current.lock().expect("lock") = ("new", operator_tls(&new), ended_new.clone());
    ended.cancel();
    received_under(&mut received, "new", r#""type":"sample""#).await;

    // Broken files: the activator keeps the new certificate and CA, so its next connection
    // still succeeds.
    std::fs::write(&files.operator_ca, "garbage").expect("write");
    std::fs::write(&files.cert, "garbage").expect("write");
    tokio::time::sleep(Duration::from_millis(200)).await;
    *current.lock().expect("lock") = ("new again", operator_tls(&new), CancellationToken::new());
    ended_new.cancel();
    received_under(&mut received, "new again", r#""type":"sample""#).await;

    stop.cancel();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unusable_files_are_refused_naming_the_flag() {
    let dir = std::env::temp_dir().join(format!("keda-activator-tls-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let files = TlsFiles {
        operator_ca: dir.join("ca.crt"),
        cert: dir.join("tls.crt"),
        key: dir.join("tls.key"),
    };
    write_files(&dir, &ca("ca"));
    std::fs::write(&files.key, "garbage").expect("write");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let stop = CancellationToken::new();
    let error = runtime
        .block_on(async { client_tls_from_files(&files, Duration::from_secs(10), &stop) })
        .expect_err("broken key");
    assert!(
        error
            .to_string()
            .starts_with("--operator-client-cert-file / --operator-client-key-file: "),
        "{error}"
    );
    std::fs::remove_file(&files.operator_ca).expect("remove");
    let error = runtime
        .block_on(async { client_tls_from_files(&files, Duration::from_secs(10), &stop) })
        .expect_err("no CA");
    assert!(
        error
            .to_string()
            .starts_with("--operator-ca-file: cannot read "),
        "{error}"
    );
    stop.cancel();
    let _ = std::fs::remove_dir_all(&dir);
}
