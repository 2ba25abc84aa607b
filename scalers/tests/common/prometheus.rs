//! Prometheus for the tests: the shared instance `scripts/services.sh` runs on
//! 127.0.0.1:9090, and instances of the tests' own (the `prometheus` binary on a free loopback
//! port, with a web config for basic auth and TLS, scraping a target the test serves), stopped
//! when dropped.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

/// The shared instance.
pub const PROMETHEUS: &str = "http://127.0.0.1:9090";

/// The bcrypt hash (cost 4) of [`BASIC_PASSWORD`] for Prometheus' `basic_auth_users`, made with
/// `python3 -c "import crypt; print(crypt.crypt(pw, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16)))"`.
/// The password only guards a throwaway test instance on loopback.
pub const BASIC_PASSWORD_HASH: &str =
    "$2b$04$KU0ADclf5O.ZRbQ4lpZPuOfaIuDB7GSE41s6njGJ63hdSG/r5erxa";
/// The user of the own instances' basic auth.
pub const BASIC_USER: &str = "keda";
/// Its password.
pub const BASIC_PASSWORD: &str = "keda-rs-test-password";

/// Checks that the shared instance answers, or skips (fails under `CI=true`).
pub async fn shared_or_skip(test: &str) -> Option<()> {
    let attempt = async {
        let stream = tokio::net::TcpStream::connect("127.0.0.1:9090").await?;
        drop(stream);
        Ok::<_, std::io::Error>(())
    };
    crate::common::service_or_skip(test, &format!("Prometheus at {PROMETHEUS}"), attempt).await
}

/// An instance of the test's own.
pub struct OwnPrometheus {
    /// Its port on 127.0.0.1.
    pub port: u16,
    dir: PathBuf,
    child: tokio::process::Child,
}

impl Drop for OwnPrometheus {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What the own instance is configured with.
#[derive(Default)]
pub struct Options<'a> {
    /// The web config file (`--web.config.file`), YAML, with `{dir}` replaced by the instance's
    /// directory.
    pub web_config: Option<&'a str>,
    /// Files to write into the instance's directory first (certificates).
    pub files: &'a [(&'a str, &'a str)],
    /// A target to scrape every 500 ms (`host:port`, plain HTTP, path `/metrics`).
    pub scrape: Option<String>,
}

/// Starts an instance, or skips (fails under `CI=true`) when there is no `prometheus` binary.
/// `ready` is asked (with the test's own client) until the instance answers.
pub async fn own_or_skip<F, Fut>(
    test: &str,
    options: Options<'_>,
    ready: F,
) -> Option<OwnPrometheus>
where
    F: Fn(u16) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let dir = std::env::temp_dir().join(crate::common::unique("prometheus"));
    std::fs::create_dir_all(&dir).expect("dir");
    for (name, content) in options.files {
        std::fs::write(dir.join(name), content).expect("file");
    }
    let mut config =
        "global:\n  scrape_interval: 500ms\n  evaluation_interval: 500ms\n".to_string();
    if let Some(target) = &options.scrape {
        config.push_str(&format!(
            "scrape_configs:\n  - job_name: test\n    scrape_interval: 500ms\n    static_configs:\n      - targets: [\"{target}\"]\n"
        ));
    }
    std::fs::write(dir.join("prometheus.yml"), config).expect("config");
    let mut command = tokio::process::Command::new("prometheus");
    command
        .arg(format!(
            "--config.file={}",
            dir.join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::from(
            std::fs::File::create(dir.join("prometheus.log")).expect("log"),
        ))
        .kill_on_drop(true);
    if let Some(web) = options.web_config {
        let web = web.replace("{dir}", &dir.display().to_string());
        std::fs::write(dir.join("web.yml"), web).expect("web config");
        command.arg(format!(
            "--web.config.file={}",
            dir.join("web.yml").display()
        ));
    }
    let child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            return crate::common::service_or_skip(
                test,
                "the prometheus binary (apt-get install prometheus)",
                async { Err::<OwnPrometheus, _>(e) },
            )
            .await;
        }
    };
    let instance = OwnPrometheus { port, dir, child };
    let started = tokio::time::Instant::now();
    while started.elapsed() < Duration::from_secs(20) {
        if ready(port).await {
            return Some(instance);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log = std::fs::read_to_string(instance.dir.join("prometheus.log")).unwrap_or_default();
    panic!("{test}: our own Prometheus on port {port} did not become ready:\n{log}");
}
