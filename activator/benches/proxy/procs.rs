//! The child processes of the bench (backend, activator, nginx) and what `/proc` says about
//! them.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// When set, the bench binary runs as the backend instead (it re-executes itself so the
/// backend's CPU is not the bench's, nor the proxy's).
pub const BACKEND_ENV: &str = "KEDA_RS_ACTBENCH_BACKEND";

/// The body every backend answers: 100 bytes.
pub const BODY: &[u8; 100] = b"{\"service\":\"actbench\",\"status\":\"ok\",\"note\":\"a small answer of exactly one hundred bytes..........\"}\n";

/// A child process, stopped when dropped: SIGTERM, then SIGKILL after `grace`.
pub struct Proc {
    pub name: &'static str,
    child: Child,
    grace: Duration,
}

impl Proc {
    pub fn new(name: &'static str, child: Child, grace: Duration) -> Self {
        Self { name, child, grace }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Fails when the process has exited.
    pub fn check_running(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!("{} exited: {status}", self.name);
        }
        Ok(())
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + self.grace;
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `name` on `PATH` or in the sbin directories (nginx lives in `/usr/sbin`).
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// A port free on loopback now (bound, then released for the child to bind).
pub fn free_port() -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").context("binding a free loopback port")?;
    Ok(listener.local_addr()?)
}

/// Waits until `addr` accepts connections, failing after `timeout` or when `proc` exits.
pub fn wait_listening(proc: &mut Proc, addr: SocketAddr, timeout: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        proc.check_running()?;
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{} does not listen on {addr} after {timeout:?}", proc.name);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One HTTP/1.1 GET with `Connection: close`; the status and body.
pub fn http_get(addr: SocketAddr, host: &str, path: &str) -> anyhow::Result<(u16, Vec<u8>)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let head_end = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .context("no end of the response head")?;
    let status = std::str::from_utf8(&response[..head_end])?
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("no status in the response")?;
    Ok((status, response[head_end + 4..].to_vec()))
}

/// The backend: a single-threaded hyper HTTP/1.1 server answering [`BODY`] to everything,
/// with keep-alive. Prints its address on the first line of standard output and exits when
/// standard input closes (so it never outlives the bench).
pub fn run_backend() -> std::process::ExitCode {
    use std::convert::Infallible;

    use bytes::Bytes;
    use http_body_util::Full;
    use hyper::service::service_fn;
    use hyper_util::rt::TokioIo;

    std::thread::spawn(|| {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
        std::process::exit(0);
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("backend runtime");
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("backend bind");
        let addr = listener.local_addr().expect("backend address");
        println!("{addr}");
        let _ = std::io::stdout().flush();
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let service = service_fn(|_request| async {
                    Ok::<_, Infallible>(http::Response::new(Full::new(Bytes::from_static(BODY))))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}

/// Starts the backend (this binary again, in backend mode) and returns its address.
pub fn spawn_backend() -> anyhow::Result<(Proc, SocketAddr)> {
    let exe = std::env::current_exe().context("locating the bench binary")?;
    start_backend(Command::new(exe))
}

/// Starts a backend in a network namespace of its own, with only its loopback up: the "pod"
/// whose network namespace queue-proxy joins, as the queue-proxy and user containers of a
/// Knative pod share one. Its address is on that namespace's loopback; the namespace is
/// `/proc/<pid>/ns/net` and lives as long as the backend. Needs `unshare` (util-linux) and
/// the right to create a network namespace (root, or CAP_SYS_ADMIN).
pub fn spawn_pod_backend() -> anyhow::Result<(Proc, SocketAddr, PathBuf)> {
    let exe = std::env::current_exe().context("locating the bench binary")?;
    let unshare = find_program("unshare").context("unshare (util-linux) is not installed")?;
    let mut command = Command::new(unshare);
    command
        .args([
            "--net",
            "--",
            "sh",
            "-c",
            "ip link set lo up && exec \"$0\"",
        ])
        .arg(exe);
    let (proc, addr) = start_backend(command).context(
        "starting the backend in a network namespace of its own (unshare --net; needs root)",
    )?;
    let netns = PathBuf::from(format!("/proc/{}/ns/net", proc.pid()));
    Ok((proc, addr, netns))
}

/// `program` run in the network namespace `netns` (through `nsenter`, which executes it in
/// place: the process's pid is the program's), or as is without one.
pub fn command_in(netns: Option<&Path>, program: &Path) -> Command {
    match netns {
        Some(netns) => {
            let mut command = Command::new(find_program("nsenter").unwrap_or("nsenter".into()));
            command
                .arg(format!("--net={}", netns.display()))
                .arg(program);
            command
        }
        None => Command::new(program),
    }
}

/// When set (`<address> <host> <path>`), the bench binary makes one [`http_get`] and prints the
/// status on the first line and the body after it (run in a network namespace by
/// [`http_get_in`]).
pub const GET_ENV: &str = "KEDA_RS_ACTBENCH_GET";

/// [`http_get`] from inside the network namespace `netns` (this binary again, in GET mode,
/// under `nsenter`); from here without one.
pub fn http_get_in(
    netns: Option<&Path>,
    addr: SocketAddr,
    host: &str,
    path: &str,
) -> anyhow::Result<(u16, Vec<u8>)> {
    let Some(netns) = netns else {
        return http_get(addr, host, path);
    };
    let exe = std::env::current_exe().context("locating the bench binary")?;
    let output = command_in(Some(netns), &exe)
        .env(GET_ENV, format!("{addr} {host} {path}"))
        .stdin(Stdio::null())
        .output()
        .context("running a GET in the pod's network namespace")?;
    if !output.status.success() {
        bail!(
            "GET {addr}{path} in {}: {}",
            netns.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let newline = output
        .stdout
        .iter()
        .position(|b| *b == b'\n')
        .context("no status line")?;
    let status = std::str::from_utf8(&output.stdout[..newline])?
        .trim()
        .parse()?;
    Ok((status, output.stdout[newline + 1..].to_vec()))
}

/// The GET mode of the bench binary (see [`GET_ENV`]).
pub fn run_get(spec: &str) -> std::process::ExitCode {
    let mut words = spec.split(' ');
    let (Some(addr), Some(host), Some(path)) = (
        words.next().and_then(|a| a.parse().ok()),
        words.next(),
        words.next(),
    ) else {
        eprintln!("{GET_ENV} must be `<address> <host> <path>`, not {spec:?}");
        return std::process::ExitCode::FAILURE;
    };
    match http_get(addr, host, path) {
        Ok((status, body)) => {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{status}");
            let _ = out.write_all(&body);
            let _ = out.flush();
            std::process::ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("{error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn start_backend(mut command: Command) -> anyhow::Result<(Proc, SocketAddr)> {
    let mut child = command
        .env(BACKEND_ENV, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting the backend")?;
    let stdout = child.stdout.take().context("backend stdout")?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let addr = line
        .trim()
        .parse()
        .with_context(|| format!("the backend printed {line:?} instead of its address"))?;
    Ok((
        Proc {
            name: "backend",
            child,
            grace: Duration::from_secs(1),
        },
        addr,
    ))
}

/// Where the activator child finds the cluster and the operator.
pub struct ActivatorSetup<'a> {
    pub binary: &'a Path,
    /// The pod name it reports as.
    pub replica: &'a str,
    pub kubeconfig: &'a Path,
    pub listen: SocketAddr,
    pub admin: SocketAddr,
    pub operator_url: &'a str,
    pub pki_dir: &'a Path,
    pub namespace: &'a str,
    pub workers: usize,
    pub log: &'a Path,
}

/// Starts the release `keda-activator` binary and waits until `/readyz` answers 200 (its
/// watches have synced).
pub fn spawn_activator(setup: &ActivatorSetup<'_>) -> anyhow::Result<Proc> {
    let log = std::fs::File::create(setup.log)
        .with_context(|| format!("creating {}", setup.log.display()))?;
    let child = Command::new(setup.binary)
        .args([
            "--listen",
            &setup.listen.to_string(),
            "--admin-listen",
            &setup.admin.to_string(),
            "--operator-url",
            setup.operator_url,
            "--watch-namespace",
            setup.namespace,
            "--drain-delay",
            "0s",
            "--drain-timeout",
            "2s",
        ])
        .arg("--operator-ca-file")
        .arg(setup.pki_dir.join("ca.crt"))
        .arg("--operator-client-cert-file")
        .arg(setup.pki_dir.join("tls.crt"))
        .arg("--operator-client-key-file")
        .arg(setup.pki_dir.join("tls.key"))
        .env_clear()
        .env("KUBECONFIG", setup.kubeconfig)
        .env("POD_NAME", setup.replica)
        .env("POD_NAMESPACE", "keda")
        .env("RUST_LOG", "warn")
        .env("KEDA_ACTIVATOR_PROXY_THREADS", setup.workers.to_string())
        // The bench's ScaledObjects claim any host they like (no host policy); a variable, so
        // builds from before the flag existed start too.
        .env("KEDA_HTTP_ANY_HOST", "true")
        // Builds from before the proxy threads ran the proxy on tokio's worker threads.
        .env("TOKIO_WORKER_THREADS", setup.workers.to_string())
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .with_context(|| format!("starting {}", setup.binary.display()))?;
    let mut proc = Proc {
        name: "keda-activator",
        child,
        grace: Duration::from_secs(5),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        proc.check_running()
            .with_context(|| format!("see {}", setup.log.display()))?;
        if let Ok((200, _)) = http_get(setup.admin, "localhost", "/readyz") {
            return Ok(proc);
        }
        if Instant::now() > deadline {
            bail!(
                "the activator is not ready after 30 s; see {}",
                setup.log.display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts nginx as a keep-alive reverse proxy from `listen` to `backend` with `workers`
/// worker processes, its files in `dir`.
pub fn spawn_nginx(
    nginx: &Path,
    dir: &Path,
    listen: SocketAddr,
    backend: SocketAddr,
    workers: usize,
) -> anyhow::Result<Proc> {
    let d = dir.display();
    // The same work as the activator: HTTP/1.1 with a pool of kept-alive upstream
    // connections, the X-Forwarded-* headers set, no access log (the activator logs no
    // request either).
    let config = format!(
        "daemon off;
master_process on;
worker_processes {workers};
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    upstream backend {{
        server {backend};
        keepalive 128;
    }}
    server {{
        listen {listen};
        location / {{
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Host $host;
            proxy_set_header X-Forwarded-Proto $scheme;
        }}
    }}
}}
"
    );
    let conf = dir.join("nginx.conf");
    std::fs::write(&conf, config).with_context(|| format!("writing {}", conf.display()))?;
    let child = Command::new(nginx)
        .arg("-p")
        .arg(dir)
        .arg("-c")
        .arg(&conf)
        .arg("-e")
        .arg(dir.join("error.log"))
        .stdin(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", nginx.display()))?;
    let mut proc = Proc {
        name: "nginx",
        child,
        grace: Duration::from_secs(5),
    };
    wait_listening(&mut proc, listen, Duration::from_secs(10))
        .with_context(|| format!("see {d}/error.log"))?;
    Ok(proc)
}

/// The pid and every descendant's pid (nginx: the master and its workers).
pub fn family(pid: u32) -> Vec<u32> {
    let mut all = vec![pid];
    let mut i = 0;
    while i < all.len() {
        let parent = all[i];
        if let Ok(entries) = std::fs::read_dir("/proc") {
            for entry in entries.flatten() {
                let Some(child) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
                    continue;
                };
                if stat_fields(child).and_then(|f| f.get(1).and_then(|p| p.parse().ok()))
                    == Some(parent)
                {
                    all.push(child);
                }
            }
        }
        i += 1;
    }
    all
}

/// The fields of `/proc/<pid>/stat` after the command name (state is field 0).
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// CPU time of processes, in clock ticks.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuTicks {
    /// In user space (`utime`).
    pub user: u64,
    /// In the kernel on their behalf (`stime`).
    pub system: u64,
}

impl CpuTicks {
    /// User + system.
    pub fn total(self) -> u64 {
        self.user + self.system
    }
}

/// CPU time of `pids` (`utime` and `stime` of `/proc/<pid>/stat`, all threads included).
pub fn cpu_ticks(pids: &[u32]) -> CpuTicks {
    pids.iter()
        .filter_map(|pid| {
            let f = stat_fields(*pid)?;
            Some(CpuTicks {
                user: f.get(11)?.parse().ok()?,
                system: f.get(12)?.parse().ok()?,
            })
        })
        .fold(CpuTicks::default(), |sum, t| CpuTicks {
            user: sum.user + t.user,
            system: sum.system + t.system,
        })
}

/// Resident set size of `pids` (`VmRSS` of `/proc/<pid>/status`), in KiB.
pub fn rss_kib(pids: &[u32]) -> u64 {
    pids.iter()
        .filter_map(|pid| {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))?
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 on Linux when that fails).
pub fn ticks_per_second() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// `/proc/loadavg`'s three load averages.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}
