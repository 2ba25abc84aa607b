//! `--syscalls`: the system calls and context switches of each proxy per proxied request,
//! counted, not timed (issue 28).
//!
//! While wrk drives a target exactly as in the throughput part, `perf stat` counts the
//! syscall tracepoints (`syscalls:sys_enter_*`, `raw_syscalls:sys_enter` for the total) and
//! the context switches of the proxy's processes (all their threads; nginx's master and
//! workers), and reads that came back empty (`sys_exit_*` with `ret == -11`, `EAGAIN`). Each
//! count is divided by wrk's request count. Context switches are also split into voluntary
//! ones (the thread went to sleep: a wake-up per sleep) and involuntary ones (preempted), from
//! `/proc/<pid>/task/*/status` before and after; and the busiest thread's share of the reads
//! shows how evenly the proxy's threads (nginx's workers) share the connections. The data
//! calls (reads and writes) per request do not depend on the machine's speed; `epoll_wait`
//! and context switches do (how many events one wake-up finds), so those are only comparable
//! between proxies in the same run, on an optimized build.

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

/// Rows after [`EVENTS`]: from `/proc/<pid>/task/*/status`, and the split between threads.
const MORE: [&str; 3] = [
    "of which voluntary (sleeps)",
    "of which involuntary (preempted)",
    "busiest thread's share of the reads",
];

/// The row of all system calls.
const TOTAL: usize = EVENTS.len() - 2;

/// Per request, one value per row of [`EVENTS`] and [`MORE`].
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
                target.name, counts.requests, counts.per_request[TOTAL]
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
    let names = EVENTS.iter().map(|(name, _)| *name).chain(MORE);
    for (row, name) in names.enumerate() {
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
    command
        .args(["stat", "-x", ",", "--no-big-num", "--per-thread", "-o"])
        .arg(out);
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
    let switches_before = switches(&target.pids);
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
    let switches_after = switches(&target.pids);
    let report = report?;
    if report.errors > 0 {
        bail!("{} answered {} errors", target.name, report.errors);
    }
    let text = std::fs::read_to_string(out)
        .with_context(|| format!("reading perf's report {} ({status})", out.display()))?;
    let values = parse(&text)?;
    let requests = report.requests.max(1) as f64;
    let total = |event: &str| -> u64 { values.values().filter_map(|v| v.get(event)).sum() };
    let mut per_request: Vec<f64> = EVENTS
        .iter()
        .map(|(_, args)| {
            let sum: u64 = args
                .chunks(2)
                .filter(|pair| pair[0] == "-e")
                .map(|pair| total(pair[1]))
                .sum();
            sum as f64 / requests
        })
        .collect();
    per_request.push(switches_after.0.saturating_sub(switches_before.0) as f64 / requests);
    per_request.push(switches_after.1.saturating_sub(switches_before.1) as f64 / requests);
    let reads = |thread: &std::collections::HashMap<String, u64>| -> u64 {
        ["syscalls:sys_enter_read", "syscalls:sys_enter_recvfrom"]
            .iter()
            .filter_map(|e| thread.get(*e))
            .sum()
    };
    let all_reads: u64 = values.values().map(reads).sum();
    let busiest = values.values().map(reads).max().unwrap_or(0);
    per_request.push(busiest as f64 / all_reads.max(1) as f64);
    Ok(Counts {
        requests: report.requests,
        per_request,
    })
}

type PerThread = std::collections::HashMap<String, std::collections::HashMap<String, u64>>;

/// `perf stat -x , --per-thread` output: `thread,value,unit,event,...` per line, values by
/// thread and event; `<not counted>` and `<not supported>` are 0. Comment lines start with
/// `#`.
fn parse(text: &str) -> anyhow::Result<PerThread> {
    let mut values = PerThread::new();
    for line in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let fields: Vec<&str> = line.split(',').collect();
        let (Some(thread), Some(value), Some(event)) =
            (fields.first(), fields.get(1), fields.get(3))
        else {
            continue;
        };
        let value = value.trim().parse::<u64>().unwrap_or(0);
        *values
            .entry(thread.trim().to_string())
            .or_default()
            .entry(event.trim().to_string())
            .or_insert(0) += value;
    }
    if values.is_empty() {
        bail!("perf stat reported nothing:\n{text}");
    }
    Ok(values)
}

/// Voluntary and involuntary context switches of every thread of `pids`
/// (`/proc/<pid>/task/*/status`).
fn switches(pids: &[u32]) -> (u64, u64) {
    let mut sum = (0, 0);
    for pid in pids {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let Ok(status) = std::fs::read_to_string(task.path().join("status")) else {
                continue;
            };
            for line in status.lines() {
                let number = |rest: &str| rest.trim().parse::<u64>().unwrap_or(0);
                if let Some(rest) = line.strip_prefix("voluntary_ctxt_switches:") {
                    sum.0 += number(rest);
                } else if let Some(rest) = line.strip_prefix("nonvoluntary_ctxt_switches:") {
                    sum.1 += number(rest);
                }
            }
        }
    }
    sum
}
