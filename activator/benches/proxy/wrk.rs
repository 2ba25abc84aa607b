//! Running wrk and reading its report.

use std::net::SocketAddr;
use std::path::Path;

use anyhow::{Context, bail};

/// What one wrk run measured.
#[derive(Clone, Copy, Debug)]
pub struct WrkReport {
    pub requests: u64,
    pub per_second: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    /// Non-2xx/3xx answers plus socket errors.
    pub errors: u64,
}

/// `wrk -t1 -c<connections> -d<seconds>s --latency` against `http://<addr>/` with `Host: <host>`
/// (HTTP/1.1, keep-alive).
/// Runs in the network namespace `netns` when given (through `nsenter`).
pub fn run(
    wrk: &Path,
    netns: Option<&Path>,
    addr: SocketAddr,
    host: &str,
    connections: u32,
    seconds: u64,
) -> anyhow::Result<WrkReport> {
    let output = crate::procs::command_in(netns, wrk)
        .args([
            "-t1".to_string(),
            format!("-c{connections}"),
            format!("-d{seconds}s"),
            "--latency".to_string(),
            "-H".to_string(),
            format!("Host: {host}"),
            format!("http://{addr}/"),
        ])
        .output()
        .with_context(|| format!("running {}", wrk.display()))?;
    let text = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        bail!(
            "wrk failed ({}): {text}{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    parse(&text).with_context(|| format!("reading wrk's report:\n{text}"))
}

/// Reads `Requests/sec`, the request count, the 50% and 99% latencies and the errors.
pub fn parse(text: &str) -> anyhow::Result<WrkReport> {
    let mut report = WrkReport {
        requests: 0,
        per_second: f64::NAN,
        p50_us: f64::NAN,
        p99_us: f64::NAN,
        errors: 0,
    };
    for line in text.lines().map(str::trim) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["Requests/sec:", value] => report.per_second = value.parse()?,
            ["50%", value] => report.p50_us = micros(value)?,
            ["99%", value] => report.p99_us = micros(value)?,
            [count, "requests", "in", ..] => report.requests = count.parse()?,
            ["Non-2xx", "or", "3xx", "responses:", n] => report.errors += n.parse::<u64>()?,
            ["Socket", "errors:", rest @ ..] => {
                // "connect 0, read 0, write 0, timeout 0"
                for n in rest.iter().skip(1).step_by(2) {
                    report.errors += n.trim_end_matches(',').parse::<u64>()?;
                }
            }
            _ => {}
        }
    }
    if report.per_second.is_nan() || report.p50_us.is_nan() || report.p99_us.is_nan() {
        bail!("no throughput or latency distribution in the report");
    }
    Ok(report)
}

/// `123.45us`, `1.20ms`, `2.00s` -> microseconds.
fn micros(value: &str) -> anyhow::Result<f64> {
    let (number, scale) = if let Some(n) = value.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = value.strip_suffix("ms") {
        (n, 1e3)
    } else if let Some(n) = value.strip_suffix('s') {
        (n, 1e6)
    } else {
        bail!("{value:?} is not a duration")
    };
    Ok(number.parse::<f64>()? * scale)
}
