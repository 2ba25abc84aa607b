//! A MariaDB of the test's own with TLS, which the shared instance (no TLS configured) cannot
//! test: `mariadb-install-db` and `mariadbd` of the Debian package, a temporary directory, a
//! free loopback port, a server certificate for 127.0.0.1 from a CA generated at test time
//! (rcgen); its root user has no password. Stopped (its process killed) when dropped.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};

use crate::common;

/// The running instance.
pub struct OwnMariaDb {
    /// Its port on 127.0.0.1.
    pub port: u16,
    dir: PathBuf,
    child: tokio::process::Child,
}

impl Drop for OwnMariaDb {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A CA and a server certificate for 127.0.0.1 signed by it: (CA, certificate, key), PEM.
fn certificates() -> (String, String, String) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "keda-rs test MariaDB CA");
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().expect("key")).expect("CA");
    let mut server = CertificateParams::new(vec!["127.0.0.1".to_string()]).expect("params");
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate().expect("key");
    let cert = server.signed_by(&key, &ca).expect("signed");
    (ca.as_ref().pem(), cert.pem(), key.serialize_pem())
}

fn missing(what: String) -> Result<OwnMariaDb, String> {
    Err(what)
}

impl OwnMariaDb {
    /// Starts an instance, or skips (fails under `CI=true`) without MariaDB's programs.
    pub async fn start_or_skip(test: &str) -> Option<Self> {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            listener.local_addr().expect("addr").port()
        };
        let dir = std::env::temp_dir().join(common::unique("mariadb"));
        std::fs::create_dir_all(&dir).expect("dir");
        let (ca, cert, key) = certificates();
        for (name, content) in [("ca.pem", ca), ("server.pem", cert), ("server.key", key)] {
            std::fs::write(dir.join(name), content).expect("file");
        }
        // Run as root (these machines), the server must be told to stay root; as anyone
        // else it runs as that user.
        let root = std::process::Command::new("id")
            .arg("-u")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
            .unwrap_or(false);
        let user: &[&str] = if root { &["--user=root"] } else { &[] };
        let install = tokio::process::Command::new("mariadb-install-db")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", dir.join("data").display()))
            .args(user)
            .args(["--auth-root-authentication-method=normal", "--skip-test-db"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await;
        if !matches!(install, Ok(status) if status.success()) {
            let _ = std::fs::remove_dir_all(&dir);
            return common::service_or_skip(test, "mariadb-install-db", async {
                missing(format!("mariadb-install-db: {install:?}"))
            })
            .await;
        }
        let path = |name: &str| dir.join(name).display().to_string();
        let child = tokio::process::Command::new("mariadbd")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", path("data")))
            .arg(format!("--port={port}"))
            .arg(format!("--socket={}", path("sock")))
            .arg(format!("--pid-file={}", path("pid")))
            .arg(format!("--ssl-ca={}", path("ca.pem")))
            .arg(format!("--ssl-cert={}", path("server.pem")))
            .arg(format!("--ssl-key={}", path("server.key")))
            .args(user)
            .args(["--bind-address=127.0.0.1", "--skip-log-bin"])
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                std::fs::File::create(dir.join("server.log")).expect("log"),
            ))
            .kill_on_drop(true)
            .spawn();
        let child = match child {
            Ok(child) => child,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return common::service_or_skip(test, "mariadbd", async {
                    missing(format!("mariadbd: {e}"))
                })
                .await;
            }
        };
        let instance = Self { port, dir, child };
        let started = tokio::time::Instant::now();
        while started.elapsed() < Duration::from_secs(30) {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return Some(instance);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let log = std::fs::read_to_string(instance.dir.join("server.log")).unwrap_or_default();
        panic!("{test}: our own MariaDB on port {port} did not start:\n{log}");
    }
}
