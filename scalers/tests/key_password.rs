//! `keyPassword`: TLS client keys encrypted as PKCS#8 (PBES2), as `openssl pkcs8 -topk8 -v2
//! aes-256-cbc` writes them, decrypted by the `redis` and `rabbitmq` scalers.
//!
//! - `redis`: a Redis of the test's own (Debian's `redis-server`, built with TLS) on a free
//!   loopback port, TLS only, requiring a client certificate of a CA generated at test time
//!   (rcgen); the list is filled with `redis-cli --tls`.
//! - `rabbitmq` (HTTP protocol): an HTTPS server of the test's own that requires a client
//!   certificate and answers `GET /api/queues/<vhost>/<queue>` as the management API does (the
//!   shared RabbitMQ's management API is plain HTTP; its AMQPS listener is used by
//!   `rabbitmq_auth.rs`).

#[allow(dead_code)]
mod common;
#[allow(dead_code)]
#[path = "common/http.rs"]
mod http_server;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::{Setup, conformance};
use http::StatusCode;
use http_server::{TestCa, TestServer};
use keda_scalers::{Registry, ScalerContext};
use rcgen::ExtendedKeyUsagePurpose;

const KEY_PASSWORD: &str = "open-sesame-7";

/// `key` (PEM) encrypted by the `openssl` command line with `password`.
fn openssl_encrypt(key: &str, password: &str) -> String {
    let dir = std::env::temp_dir().join(common::unique("key-password"));
    std::fs::create_dir_all(&dir).expect("dir");
    let input = dir.join("plain.pem");
    std::fs::write(&input, key).expect("key");
    let output = std::process::Command::new("openssl")
        .args(["pkcs8", "-topk8", "-v2", "aes-256-cbc", "-passout"])
        .arg(format!("pass:{password}"))
        .arg("-in")
        .arg(&input)
        .output()
        .expect("the openssl command line (Debian package openssl) is installed");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let pem = String::from_utf8(output.stdout).expect("PEM");
    assert!(pem.contains("BEGIN ENCRYPTED PRIVATE KEY"), "{pem}");
    pem
}

/// A Redis of the test's own: TLS only, client certificates of `ca` required. Killed on drop.
struct TlsRedis {
    port: u16,
    dir: PathBuf,
    child: std::process::Child,
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl TlsRedis {
    /// Starts it, or skips (fails under `CI=true`) without `redis-server`.
    async fn start_or_skip(test: &str, ca: &TestCa) -> Option<Self> {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            listener.local_addr().expect("addr").port()
        };
        let dir = std::env::temp_dir().join(common::unique("tls-redis"));
        std::fs::create_dir_all(&dir).expect("dir");
        let (cert, key) = ca.issue(&["127.0.0.1"], ExtendedKeyUsagePurpose::ServerAuth);
        for (name, content) in [
            ("ca.pem", ca.pem()),
            ("server.pem", cert),
            ("server.key", key),
        ] {
            std::fs::write(dir.join(name), content).expect("file");
        }
        let started = std::process::Command::new("redis-server")
            .args([
                "--port",
                "0",
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--tls-port")
            .arg(port.to_string())
            .arg("--tls-cert-file")
            .arg(dir.join("server.pem"))
            .arg("--tls-key-file")
            .arg(dir.join("server.key"))
            .arg("--tls-ca-cert-file")
            .arg(dir.join("ca.pem"))
            .args(["--tls-auth-clients", "yes", "--dir"])
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let attempt = async {
            let child = started.map_err(|e| format!("redis-server: {e}"))?;
            let server = Self { port, dir, child };
            for _ in 0..100 {
                if tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .is_ok()
                {
                    return Ok(server);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(format!("redis-server did not listen on {port}"))
        };
        common::service_or_skip(test, "redis-server with TLS", attempt).await
    }

    fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `redis-cli --tls` with a client certificate, as a user would fill the list.
    fn cli(&self, dir: &Path, args: &[&str]) {
        let output = std::process::Command::new("redis-cli")
            .args(["--tls", "-h", "127.0.0.1", "-p", &self.port.to_string()])
            .arg("--cacert")
            .arg(dir.join("ca.pem"))
            .arg("--cert")
            .arg(dir.join("client.pem"))
            .arg("--key")
            .arg(dir.join("client.key"))
            .args(args)
            .output()
            .expect("redis-cli");
        assert!(
            output.status.success() && !String::from_utf8_lossy(&output.stdout).contains("ERR"),
            "redis-cli {args:?}: {} {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[tokio::test]
async fn redis_reads_a_tls_server_with_a_client_key_encrypted_under_key_password() {
    let test = "redis_reads_a_tls_server_with_a_client_key_encrypted_under_key_password";
    let ca = TestCa::new("keda-rs test Redis CA");
    let Some(redis) = TlsRedis::start_or_skip(test, &ca).await else {
        return;
    };
    let (client_cert, client_key) = ca.client("keda-rs");
    std::fs::write(redis.dir.join("client.pem"), &client_cert).expect("file");
    std::fs::write(redis.dir.join("client.key"), &client_key).expect("file");
    let list = common::unique("key-password-list");
    redis.cli(&redis.dir, &["RPUSH", &list, "a", "b", "c"]);

    let encrypted = openssl_encrypt(&client_key, KEY_PASSWORD);
    let address = redis.address();
    let metadata = [
        ("address", address.as_str()),
        ("enableTLS", "true"),
        ("listName", list.as_str()),
        ("listLength", "5"),
    ];
    let ca_pem = ca.pem();
    let h = conformance(
        "redis",
        Setup {
            metadata: &metadata,
            auth: &[
                ("ca", &ca_pem),
                ("cert", &client_cert),
                ("key", &encrypted),
                ("keyPassword", KEY_PASSWORD),
            ],
            ..Setup::default()
        },
    )
    .await;
    h.expect(3.0, true).await;
    h.close().await;

    // A wrong keyPassword: the trigger is not built, and the message names the parameters,
    // not the values.
    let mut ctx = ScalerContext {
        trigger_type: "redis".into(),
        scalable_name: "so".into(),
        scalable_namespace: "default".into(),
        ..ScalerContext::default()
    };
    for (k, v) in metadata {
        ctx.metadata.insert(k.into(), v.into());
    }
    for (k, v) in [
        ("ca", ca_pem.as_str()),
        ("cert", client_cert.as_str()),
        ("key", encrypted.as_str()),
        ("keyPassword", "not-the-password"),
    ] {
        ctx.auth_params.insert(k.into(), v.into());
    }
    let err = match Registry::builtin().build(ctx).await {
        Ok(_) => panic!("a wrong keyPassword must not build"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains(
            "parameter \"key\" could not be decrypted with parameter \"keyPassword\": wrong password"
        ),
        "{err}"
    );
    assert!(
        !err.contains("not-the-password") && !err.contains("PRIVATE KEY"),
        "{err}"
    );
}

#[tokio::test]
async fn rabbitmq_over_https_presents_a_client_key_encrypted_under_key_password() {
    let ca = TestCa::new("keda-rs test RabbitMQ management CA");
    // Requires a client certificate of `ca`: a request only gets through with the decrypted key.
    let server = TestServer::start_tls(
        http_server::handler(|request| {
            if request.uri.starts_with("/api/queues/%2F/jobs") {
                (
                    StatusCode::OK,
                    "application/json",
                    r#"{"messages": 7, "messages_ready": 7, "message_stats": {}}"#.into(),
                )
            } else {
                (StatusCode::NOT_FOUND, "text/plain", "not found".into())
            }
        }),
        ca.server_config(true),
    )
    .await;
    let (client_cert, client_key) = ca.client("keda-rs");
    let encrypted = openssl_encrypt(&client_key, KEY_PASSWORD);
    let host = server.url("/").replace("https://", "https://guest:guest@");
    let ca_pem = ca.pem();
    let h = conformance(
        "rabbitmq",
        Setup {
            metadata: &[
                ("host", host.as_str()),
                ("protocol", "http"),
                ("queueName", "jobs"),
                ("mode", "QueueLength"),
                ("value", "5"),
                ("vhostName", "/"),
            ],
            auth: &[
                ("tls", "enable"),
                ("ca", &ca_pem),
                ("cert", &client_cert),
                ("key", &encrypted),
                ("keyPassword", KEY_PASSWORD),
            ],
            ..Setup::default()
        },
    )
    .await;
    h.expect(7.0, true).await;
    h.close().await;
    assert!(server.connections() >= 1);
}
