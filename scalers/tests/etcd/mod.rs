//! `etcd` against real etcd servers: the one of scripts/services.sh on 127.0.0.1:2379, and,
//! for authentication, TLS and the watch's progress deadline, servers of the test's own (the same
//! `etcd` binary, on free loopback ports, data below `$KEDA_RS_SERVICES_DIR`, killed when the
//! test ends). Keys are written with `etcdctl`. Every test uses its own key.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use keda_scalers::{BuiltScaler, Registry, ScalerContext, ScalerError};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::common::{Setup, conformance, service_or_skip, unique};

const SHARED: &str = "127.0.0.1:2379";

/// Runs `etcdctl` against `endpoint` and returns its output.
async fn etcdctl(endpoint: &str, args: &[&str]) -> String {
    let output = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={endpoint}"))
        .args(args)
        .output()
        .await
        .expect("etcdctl runs (scripts/services.sh installs it)");
    assert!(
        output.status.success(),
        "etcdctl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The shared etcd, or a skip (a failure under CI=true) when it is not there.
async fn shared_or_skip(test: &str) -> Option<()> {
    service_or_skip(test, &format!("etcd at {SHARED}"), async {
        tokio::net::TcpStream::connect(SHARED).await.map(drop)
    })
    .await
}

/// An etcd of the test's own.
struct OwnEtcd {
    child: Child,
    endpoint: String,
    dir: PathBuf,
    /// `etcdctl` flags this server needs (its CA and a client certificate, with TLS).
    ctl_flags: Vec<String>,
}

impl OwnEtcd {
    /// Starts one on free loopback ports with `extra` flags, or skips (fails under CI=true)
    /// without the `etcd` binary.
    async fn start_or_skip(test: &str, extra: &[&str]) -> Option<Self> {
        Self::start_with(test, extra, None).await
    }

    /// Like [`OwnEtcd::start_or_skip`], serving clients over TLS with `certs` (CA, server
    /// certificate and key, client certificate and key, PEM) and requiring client
    /// certificates.
    async fn start_tls_or_skip(test: &str, certs: &TestCerts) -> Option<Self> {
        Self::start_with(test, &[], Some(certs)).await
    }

    async fn start_with(test: &str, extra: &[&str], tls: Option<&TestCerts>) -> Option<Self> {
        let free_port = || {
            std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .expect("a free port")
        };
        let (client, peer) = (free_port(), free_port());
        let root = std::env::var("KEDA_RS_SERVICES_DIR")
            .unwrap_or_else(|_| "/tmp/keda-rs-services".to_string());
        let dir = PathBuf::from(root).join(unique("etcd"));
        std::fs::create_dir_all(&dir).expect("the test's etcd directory");
        let endpoint = format!("127.0.0.1:{client}");
        let mut tls_flags = Vec::new();
        let mut ctl_flags = Vec::new();
        let scheme = match tls {
            Some(certs) => {
                let file = |name: &str, pem: &str| {
                    let path = dir.join(name);
                    std::fs::write(&path, pem).expect("a PEM file");
                    path.display().to_string()
                };
                let ca = file("ca.pem", &certs.ca);
                tls_flags = vec![
                    format!("--cert-file={}", file("server.pem", &certs.server_cert)),
                    format!("--key-file={}", file("server.key", &certs.server_key)),
                    format!("--trusted-ca-file={ca}"),
                    "--client-cert-auth".to_string(),
                ];
                ctl_flags = vec![
                    format!("--cacert={ca}"),
                    format!("--cert={}", file("client.pem", &certs.client_cert)),
                    format!("--key={}", file("client.key", &certs.client_key)),
                ];
                "https"
            }
            None => "http",
        };
        let spawned = Command::new("etcd")
            .arg("--name=test")
            .arg(format!("--data-dir={}", dir.join("data").display()))
            .arg(format!("--listen-client-urls={scheme}://{endpoint}"))
            .arg(format!("--advertise-client-urls={scheme}://{endpoint}"))
            .args(&tls_flags)
            .arg(format!("--listen-peer-urls=http://127.0.0.1:{peer}"))
            .arg(format!(
                "--initial-advertise-peer-urls=http://127.0.0.1:{peer}"
            ))
            .arg(format!("--initial-cluster=test=http://127.0.0.1:{peer}"))
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn();
        let child = service_or_skip(test, "the etcd binary", async { spawned }).await?;
        let own = Self {
            child,
            endpoint,
            dir,
            ctl_flags,
        };
        let ready = async {
            loop {
                if Command::new("etcdctl")
                    .env("ETCDCTL_API", "3")
                    .arg(format!("--endpoints={}", own.endpoint))
                    .args(&own.ctl_flags)
                    .args(["endpoint", "health"])
                    .output()
                    .await
                    .is_ok_and(|o| o.status.success())
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(20), ready)
            .await
            .expect("the test's etcd starts within 20 s");
        Some(own)
    }

    /// How many Watch streams the server has started (its `/metrics`).
    async fn watches_started(&self) -> u64 {
        let body = reqwest_get(&format!("http://{}/metrics", self.endpoint)).await;
        body.lines()
            .find(|l| {
                l.starts_with("grpc_server_started_total{grpc_method=\"Watch\",grpc_service=\"etcdserverpb.Watch\"")
            })
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .expect("etcd's /metrics counts Watch streams")
    }
}

impl Drop for OwnEtcd {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// TLS material for a test etcd, made at test time: a CA, a server certificate for 127.0.0.1,
/// a client certificate.
struct TestCerts {
    ca: String,
    server_cert: String,
    server_key: String,
    client_cert: String,
    client_key: String,
}

impl TestCerts {
    fn generate() -> Self {
        use rcgen::{
            BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose,
            IsCa, KeyPair,
        };
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("params");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "keda-rs test etcd CA");
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().expect("key")).expect("CA");
        let issue = |names: Vec<String>, usage: ExtendedKeyUsagePurpose| {
            let mut params = CertificateParams::new(names).expect("params");
            params.extended_key_usages = vec![usage];
            let key = KeyPair::generate().expect("key");
            let cert = params.signed_by(&key, &ca).expect("signed");
            (cert.pem(), key.serialize_pem())
        };
        let (server_cert, server_key) = issue(
            vec!["127.0.0.1".to_string()],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        let (client_cert, client_key) = issue(
            vec!["keda".to_string()],
            ExtendedKeyUsagePurpose::ClientAuth,
        );
        Self {
            ca: ca.as_ref().pem(),
            server_cert,
            server_key,
            client_cert,
            client_key,
        }
    }
}

/// A plain HTTP GET on loopback, by hand (the test needs no HTTP client for one request).
async fn reqwest_get(url: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").expect("http URL");
    let (authority, path) = rest.split_once('/').expect("a path");
    let mut tcp = tokio::net::TcpStream::connect(authority)
        .await
        .expect("connect");
    tcp.write_all(format!("GET /{path} HTTP/1.0\r\nHost: {authority}\r\n\r\n").as_bytes())
        .await
        .expect("write");
    let mut body = String::new();
    tcp.read_to_string(&mut body).await.expect("read");
    body
}

fn context(index: usize, metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> ScalerContext {
    ScalerContext {
        metadata: metadata
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        auth_params: auth
            .iter()
            .map(|(k, v)| (k.to_string(), keda_scalers::Secret::new(*v)))
            .collect(),
        ..ScalerContext::new("etcd", index)
    }
}

/// The next activity sent, within 10 s.
async fn next(rx: &mut mpsc::Receiver<bool>) -> bool {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("the change arrives")
        .expect("the channel is open")
}

async fn read(built: &BuiltScaler, metric: &str) -> Result<f64, ScalerError> {
    built
        .scaler()
        .metrics_and_activity(metric)
        .await
        .map(|r| r.values[0].value)
}

#[tokio::test]
async fn the_documented_example_reads_the_key_and_names_a_missing_one() {
    let test = "the_documented_example_reads_the_key_and_names_a_missing_one";
    if shared_or_skip(test).await.is_none() {
        return;
    }
    let key = format!("/keda-rs/{}", unique("read"));
    let harness = conformance(
        "etcd",
        Setup {
            metadata: &[("endpoints", SHARED), ("watchKey", &key)],
            ..Setup::default()
        },
    )
    .await;
    let err = harness.expect_error().await.to_string();
    assert_eq!(
        err,
        format!("trigger 0 (etcd): watchKey \"{key}\" doesn't exist")
    );
    etcdctl(SHARED, &["put", &key, "1"]).await;
    // The documented activationValue is 1: equal is inactive.
    harness.expect(1.0, false).await;
    etcdctl(SHARED, &["put", &key, "7.5"]).await;
    harness.expect(7.5, true).await;
    etcdctl(SHARED, &["put", &key, "lots"]).await;
    let err = harness.expect_error().await.to_string();
    // The value's length, never the value (issue 30, finding 5).
    assert!(err.contains("(4 bytes) is not a number"), "{err}");
    assert!(!err.contains("lots"), "{err}");
    etcdctl(SHARED, &["del", &key]).await;
    harness.close().await;
}

#[tokio::test]
async fn the_push_side_sends_the_activity_of_every_change_of_the_key() {
    let test = "the_push_side_sends_the_activity_of_every_change_of_the_key";
    if shared_or_skip(test).await.is_none() {
        return;
    }
    let key = format!("/keda-rs/{}", unique("watch"));
    let harness = conformance(
        "etcd",
        Setup {
            metadata: &[("endpoints", SHARED), ("watchKey", &key)],
            ..Setup::default()
        },
    )
    .await;
    let built = std::sync::Arc::new(harness.built);
    let cancel = CancellationToken::new();
    let (tx, mut rx) = mpsc::channel(16);
    let runner = {
        let built = std::sync::Arc::clone(&built);
        let cancel = cancel.clone();
        tokio::spawn(async move {
            let push = built.push().expect("etcd is a push scaler");
            push.run(cancel, tx).await;
        })
    };
    // The watch opens in the background: write until the first change arrives.
    let first = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            etcdctl(SHARED, &["put", &key, "5"]).await;
            if let Ok(Some(active)) =
                tokio::time::timeout(Duration::from_millis(500), rx.recv()).await
            {
                return active;
            }
        }
    })
    .await
    .expect("a change arrives while the watch is open");
    assert!(first, "5 is above the documented activationValue 1");
    while let Ok(Some(_)) = tokio::time::timeout(Duration::from_millis(300), rx.recv()).await {}
    etcdctl(SHARED, &["put", &key, "1"]).await;
    assert!(!next(&mut rx).await, "1 is not above 1");
    etcdctl(SHARED, &["put", &key, "not a number"]).await;
    assert!(
        !next(&mut rx).await,
        "a value that is not a number counts as 0"
    );
    etcdctl(SHARED, &["put", &key, "2"]).await;
    assert!(next(&mut rx).await);
    etcdctl(SHARED, &["del", &key]).await;
    assert!(!next(&mut rx).await, "a deleted key counts as 0");

    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(5), runner)
        .await
        .expect("run returns promptly when cancelled")
        .expect("run does not panic");
    assert_eq!(rx.recv().await, None, "run dropped its sender");
}

#[tokio::test]
async fn an_unreachable_endpoint_fails_the_read_naming_the_trigger_and_endpoints() {
    let built = Registry::builtin()
        .build(context(
            3,
            &[
                ("endpoints", "127.0.0.1:1"),
                ("watchKey", "k"),
                ("value", "1"),
            ],
            &[],
        ))
        .await
        .expect("builds without connecting");
    let err = read(&built, "s3-etcd-k")
        .await
        .expect_err("nothing listens");
    let message = keda_scalers::error::error_chain(&err);
    assert!(
        message.starts_with(
            "trigger 3 (etcd): reading key \"k\" from etcd at 127.0.0.1:1 (parameter \"endpoints\") failed: "
        ),
        "{message}"
    );
}

#[tokio::test]
async fn a_dead_endpoint_is_skipped_for_the_next_one() {
    let test = "a_dead_endpoint_is_skipped_for_the_next_one";
    if shared_or_skip(test).await.is_none() {
        return;
    }
    let key = format!("/keda-rs/{}", unique("failover"));
    etcdctl(SHARED, &["put", &key, "4"]).await;
    let built = Registry::builtin()
        .build(context(
            0,
            &[
                ("endpoints", &format!("127.0.0.1:1,http://{SHARED}")),
                ("watchKey", &key),
                ("value", "1"),
            ],
            &[],
        ))
        .await
        .expect("builds");
    let metric = format!("s0-etcd-{}", key.replace('/', "-"));
    assert_eq!(
        read(&built, &metric)
            .await
            .expect("read via the second endpoint"),
        4.0
    );
    // And again, now straight from the endpoint that answered.
    assert_eq!(read(&built, &metric).await.expect("read again"), 4.0);
    etcdctl(SHARED, &["del", &key]).await;
}

#[tokio::test]
async fn credentials_log_in_and_wrong_ones_name_username_and_password() {
    let test = "credentials_log_in_and_wrong_ones_name_username_and_password";
    let Some(etcd) = OwnEtcd::start_or_skip(test, &[]).await else {
        return;
    };
    let endpoint = etcd.endpoint.clone();
    etcdctl(&endpoint, &["user", "add", "root:r00t-pw"]).await;
    etcdctl(&endpoint, &["auth", "enable"]).await;
    etcdctl(&endpoint, &["--user=root:r00t-pw", "put", "/jobs", "6"]).await;
    let metadata = [
        ("endpoints", endpoint.as_str()),
        ("watchKey", "/jobs"),
        ("value", "2"),
    ];

    let good = Registry::builtin()
        .build(context(
            0,
            &metadata,
            &[("username", "root"), ("password", "r00t-pw")],
        ))
        .await
        .expect("builds");
    assert_eq!(read(&good, "s0-etcd--jobs").await.expect("logged in"), 6.0);

    let wrong = Registry::builtin()
        .build(context(
            0,
            &metadata,
            &[("username", "root"), ("password", "wr0ng-pw")],
        ))
        .await
        .expect("builds");
    let message = keda_scalers::error::error_chain(
        &read(&wrong, "s0-etcd--jobs").await.expect_err("refused"),
    );
    assert!(
        message.contains("logging in with the parameters \"username\" and \"password\" failed"),
        "{message}"
    );
    assert!(message.starts_with("trigger 0 (etcd): "), "{message}");
    assert!(!message.contains("wr0ng-pw"), "{message}");

    // Without credentials, etcd refuses the read; the error says so.
    let anonymous = Registry::builtin()
        .build(context(0, &metadata, &[]))
        .await
        .expect("builds");
    let message = keda_scalers::error::error_chain(
        &read(&anonymous, "s0-etcd--jobs")
            .await
            .expect_err("refused"),
    );
    assert!(
        message.contains("trigger 0 (etcd): reading key \"/jobs\""),
        "{message}"
    );
}

#[tokio::test]
async fn a_watch_that_hears_nothing_for_twice_the_progress_interval_is_reopened() {
    let test = "a_watch_that_hears_nothing_for_twice_the_progress_interval_is_reopened";
    // This etcd notifies progress every 10 minutes (its default), so a watch with
    // watchProgressNotifyInterval 1 hears nothing for 2 s and is reopened (after 2 s backoff).
    let Some(silent) = OwnEtcd::start_or_skip(test, &[]).await else {
        return;
    };
    // This one notifies every 300 ms: the watch stays open.
    let Some(chatty) = OwnEtcd::start_or_skip(
        test,
        &["--experimental-watch-progress-notify-interval=300ms"],
    )
    .await
    else {
        return;
    };
    let run = |endpoint: String| async move {
        let built = Registry::builtin()
            .build(context(
                0,
                &[
                    ("endpoints", &endpoint),
                    ("watchKey", "/quiet"),
                    ("value", "1"),
                    ("watchProgressNotifyInterval", "1"),
                ],
                &[],
            ))
            .await
            .expect("builds");
        let cancel = CancellationToken::new();
        let (tx, _rx) = mpsc::channel(4);
        let stop = cancel.clone();
        let runner = tokio::spawn(async move {
            if let Some(push) = built.push() {
                push.run(stop, tx).await;
            }
        });
        (cancel, runner)
    };
    let (stop_silent, silent_run) = run(silent.endpoint.clone()).await;
    let (stop_chatty, chatty_run) = run(chatty.endpoint.clone()).await;
    tokio::time::sleep(Duration::from_millis(7500)).await;
    let (reopened, kept) = (
        silent.watches_started().await,
        chatty.watches_started().await,
    );
    stop_silent.cancel();
    stop_chatty.cancel();
    let _ = tokio::join!(silent_run, chatty_run);
    // Silent: opened at 0 s, given up at 2 s, reopened at 4 s, given up at 6 s, ...
    assert!(
        reopened >= 2,
        "the silent watch was opened {reopened} times"
    );
    assert_eq!(kept, 1, "the notified watch was reopened");
}

#[tokio::test]
async fn tls_with_a_client_certificate_reads_the_key() {
    let test = "tls_with_a_client_certificate_reads_the_key";
    let certs = TestCerts::generate();
    let Some(etcd) = OwnEtcd::start_tls_or_skip(test, &certs).await else {
        return;
    };
    let mut put = etcd
        .ctl_flags
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>();
    put.extend(["put", "/secure", "3"]);
    etcdctl(&etcd.endpoint, &put).await;
    let metadata = [
        ("endpoints", etcd.endpoint.as_str()),
        ("watchKey", "/secure"),
        ("value", "1"),
    ];
    let built = Registry::builtin()
        .build(context(
            0,
            &metadata,
            &[
                ("tls", "enable"),
                ("ca", &certs.ca),
                ("cert", &certs.client_cert),
                ("key", &certs.client_key),
            ],
        ))
        .await
        .expect("builds");
    assert_eq!(
        read(&built, "s0-etcd--secure")
            .await
            .expect("read over TLS"),
        3.0
    );

    // Without a client certificate the server refuses the handshake.
    let anonymous = Registry::builtin()
        .build(context(
            0,
            &metadata,
            &[("tls", "enable"), ("ca", &certs.ca)],
        ))
        .await
        .expect("builds");
    let message = keda_scalers::error::error_chain(
        &read(&anonymous, "s0-etcd--secure")
            .await
            .expect_err("no client certificate"),
    );
    assert!(
        message.starts_with("trigger 0 (etcd): reading key \"/secure\""),
        "{message}"
    );

    // Without the CA, the server's certificate is not trusted.
    let untrusted = Registry::builtin()
        .build(context(
            0,
            &metadata,
            &[
                ("tls", "enable"),
                ("cert", &certs.client_cert),
                ("key", &certs.client_key),
            ],
        ))
        .await
        .expect("builds");
    assert!(read(&untrusted, "s0-etcd--secure").await.is_err());
}
