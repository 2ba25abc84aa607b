//! A PostgreSQL of the test's own with password (SCRAM) authentication, which the shared
//! instance (trust on loopback) cannot test: `initdb` and `pg_ctl` of the Debian package, a
//! temporary directory, a free loopback port; run as user `postgres` when the tests run as root
//! (PostgreSQL refuses to run as root); stopped when dropped.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common;

/// The running instance.
pub struct OwnPostgres {
    /// Its port on 127.0.0.1.
    pub port: u16,
    dir: PathBuf,
    bin: PathBuf,
    as_postgres: bool,
}

impl Drop for OwnPostgres {
    fn drop(&mut self) {
        let data = self.dir.join("data");
        let _ = command(&self.bin, self.as_postgres, "pg_ctl")
            .arg("-D")
            .arg(&data)
            .args(["-m", "immediate", "-w", "stop"])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `program` of the PostgreSQL installation, as user `postgres` when `as_postgres`.
fn command(bin: &Path, as_postgres: bool, program: &str) -> Command {
    if as_postgres {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin.join(program));
        c
    } else {
        Command::new(bin.join(program))
    }
}

/// The newest `/usr/lib/postgresql/<version>/bin` that has `initdb`.
fn installation() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

fn run(mut c: Command, what: &str) -> Result<(), String> {
    let out = c.output().map_err(|e| format!("{what}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

impl OwnPostgres {
    /// Starts an instance whose superuser is `user` with `password`, or skips (fails under
    /// `CI=true`) when PostgreSQL is not installed.
    pub async fn start_or_skip(test: &str, user: &str, password: &str) -> Option<Self> {
        let user = user.to_string();
        let password = password.to_string();
        let started = tokio::task::spawn_blocking(move || Self::start(&user, &password))
            .await
            .expect("start task");
        common::service_or_skip(test, "PostgreSQL's initdb and pg_ctl", async { started }).await
    }

    fn start(user: &str, password: &str) -> Result<Self, String> {
        let bin = installation().ok_or("no /usr/lib/postgresql/<version>/bin/initdb")?;
        let root = Command::new("id")
            .arg("-u")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
            .unwrap_or(false);
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            listener.local_addr().expect("addr").port()
        };
        let dir = std::env::temp_dir().join(common::unique("postgres"));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let instance = Self {
            port,
            dir: dir.clone(),
            bin: bin.clone(),
            as_postgres: root,
        };
        std::fs::write(dir.join("pw"), password).map_err(|e| e.to_string())?;
        if root {
            let mut chown = Command::new("chown");
            chown.arg("-R").arg("postgres").arg(&dir);
            run(chown, "chown")?;
        }
        let mut initdb = command(&bin, root, "initdb");
        initdb
            .arg("-D")
            .arg(dir.join("data"))
            .args(["--auth=scram-sha-256", "-U", user])
            .arg(format!("--pwfile={}", dir.join("pw").display()));
        run(initdb, "initdb")?;
        let mut pg_ctl = command(&bin, root, "pg_ctl");
        pg_ctl
            .arg("-D")
            .arg(dir.join("data"))
            .arg("-l")
            .arg(dir.join("log"))
            .arg("-o")
            .arg(format!(
                "-p {port} -k {} -c listen_addresses=127.0.0.1",
                dir.display()
            ))
            .args(["-w", "-t", "30", "start"]);
        run(pg_ctl, "pg_ctl start")?;
        Ok(instance)
    }
}
