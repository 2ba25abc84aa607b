//! `--syscalls`: the system calls and context switches of each proxy per proxied request,
//! counted, not timed (issue 28).
//!
//! While wrk drives a target exactly as in the throughput part, `perf stat` counts the
//! syscall tracepoints (`syscalls:sys_enter_*`, `raw_syscalls:sys_enter` for the total) and
//! the context switches of the proxy's processes (all their threads; nginx's master and
//! workers), and reads that came back empty (`sys_exit_*` with `ret == -11`, `EAGAIN`). Each
//! count is divided by wrk's request count. The data calls (reads and writes) per request
//! do not depend on the machine's speed; `epoll_wait` and context switches do (how many
//! events one wake-up finds), so those are only comparable between proxies in the same run.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};

use crate::Target;
use crate::cluster::HOST;
use crate::wrk;

/// The counted events: the row's name, and `perf stat` arguments.
const EVENTS: &[(&str, &[&str])] = &[
    ("read", &["-e", "syscalls:sys_enter_read"]),
    ("recvfrom", &["-e", "syscalls:sys_enter_recvfrom"]),
    ("readv", &["-e", "syscalls:sys_enter_readv"]),
    ("recvmsg", &["-e", "syscalls:sys_enter_recvmsg"]),
    (
        "of which EAGAIN (read, recvfrom, readv)",
        &[
            "-e",
            "syscalls:sys_exit_read",
            "--filter",
            "ret == -11",
            "-e",
            "syscalls:sys_exit_recvfrom",
            "--filter",
            "ret == -11",
            "-e",
            "syscalls:sys_exit_readv",
            "--filter",
            "ret == -11",
        ],
    ),
    ("write", &["-e", "syscalls:sys_enter_write"]),
    ("sendto", &["-e", "syscalls:sys_enter_sendto"]),
    ("writev", &["-e", "syscalls:sys_enter_writev"]),
    ("sendmsg", &["-e", "syscalls:sys_enter_sendmsg"]),
    ("epoll_wait", &["-e", "syscalls:sys_enter_epoll_wait"]),
    ("epoll_pwait", &["-e", "syscalls:sys_enter_epoll_pwait"]),
    ("epoll_ctl", &["-e", "syscalls:sys_enter_epoll_ctl"]),
    ("futex", &["-e", "syscalls:sys_enter_futex"]),
    ("all system calls", &["-e", "raw_syscalls:sys_enter"]),
    ("context switches", &["-e", "context-switches"]),
];

/// Per request, one value per row of [`EVENTS`].
struct Counts {
    requests: u64,
    per_request: Vec<f64>,
}

/// Counts, for every target with processes of its own (not direct), at every connection
/// count, and prints one table.
pub fn count(
    perf: &Path,
    wrk_path: &Path,
    targets: &[&Target],
    connections: &[u32],
    seconds: u64,
    dir: &Path,
) -> anyhow::Result<()> {
    println!(
        "\nsystem calls per request: perf stat on the proxy's processes while wrk -t1 -c<n> -d{seconds}s runs"
    );
    for target in targets {
        // Warm-up: the proxy's connections to the backend are open and pooled.
        wrk::run(wrk_path, target.netns.as_deref(), target.addr, HOST, 64, 1)
            .with_context(|| format!("warming up {}", target.name))?;
    }
    let mut columns = Vec::new();
    for &n in connections {
        for target in targets {
            let out = dir.join(format!("perf-{}-{n}.csv", target.name));
            let counts = count_one(perf, wrk_path, target, n, seconds, &out)
                .with_context(|| format!("{} at {n} connections", target.name))?;
            println!(
                "  {} c={n}: {} requests, {:.2} system calls per request",
                target.name,
                counts.requests,
                counts.per_request[EVENTS.len() - 2]
            );
            columns.push((format!("{} c={n}", target.name), counts));
        }
    }
    println!();
    print!("| per request |");
    for (name, _) in &columns {
        print!(" {name} |");
    }
    println!();
    println!("|---|{}", "---|".repeat(columns.len()));
    for (row, (name, _)) in EVENTS.iter().enumerate() {
        if columns.iter().all(|(_, c)| c.per_request[row] < 0.005) {
            continue;
        }
        print!("| {name} |");
        for (_, counts) in &columns {
            print!(" {:.2} |", counts.per_request[row]);
        }
        println!();
    }
    Ok(())
}

fn count_one(
    perf: &Path,
    wrk_path: &Path,
    target: &Target,
    connections: u32,
    seconds: u64,
    out: &Path,
) -> anyhow::Result<Counts> {
    let pids = target
        .pids
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let mut command = Command::new(perf);
    command.args(["stat", "-x", ",", "--no-big-num", "-o"]).arg(out);
    for (_, args) in EVENTS {
        command.args(*args);
    }
    let mut child = command
        .args(["-p", &pids])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", perf.display()))?;
    // perf attaches to every thread before it counts; give it that moment.
    std::thread::sleep(Duration::from_millis(500));
    if let Some(status) = child.try_wait()? {
        let mut error = String::new();
        if let Some(mut stderr) = child.stderr.take() {
            let _ = stderr.read_to_string(&mut error);
        }
        bail!("perf stat exited ({status}): {}", error.trim());
    }
    let report = wrk::run(
        wrk_path,
        target.netns.as_deref(),
        target.addr,
        HOST,
        connections,
        seconds,
    );
    // SIGINT: perf stops counting and writes its report.
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let status = child.wait()?;
    let report = report?;
    if report.errors > 0 {
        bail!("{} answered {} errors", target.name, report.errors);
    }
    let text = std::fs::read_to_string(out)
        .with_context(|| format!("reading perf's report {} ({status})", out.display()))?;
    let values = parse(&text)?;
    let requests = report.requests.max(1);
    let per_request = EVENTS
        .iter()
        .map(|(_, args)| {
            let sum: u64 = args
                .chunks(2)
                .filter(|pair| pair[0] == "-e")
                .map(|pair| values.get(pair[1]).copied().unwrap_or(0))
                .sum();
            sum as f64 / requests as f64
        })
        .collect();
    Ok(Counts {
        requests: report.requests,
        per_request,
    })
}

/// `perf stat -x ,` output: `value,unit,event,...` per line; `<not counted>` and
/// `<not supported>` are 0. Comment lines start with `#`.
fn parse(text: &str) -> anyhow::Result<std::collections::HashMap<String, u64>> {
    let mut values = std::collections::HashMap::new();
    for line in text.lines().filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let fields: Vec<&str> = line.split(',').collect();
        let (Some(value), Some(event)) = (fields.first(), fields.get(2)) else {
            continue;
        };
        let value = value.trim().parse::<u64>().unwrap_or(0);
        *values.entry(event.trim().to_string()).or_insert(0) += value;
    }
    if values.is_empty() {
        bail!("perf stat reported nothing:\n{text}");
    }
    Ok(values)
}
