//! What the operator benches share: `/proc` readings, Prometheus text samples, percentiles and
//! the Deployments they seed. Included by each bench as `mod common;`.

#![allow(dead_code)]

/// Values of the samples named exactly `name` (any labels).
pub fn samples<'a>(text: &'a str, name: &'a str) -> impl Iterator<Item = f64> + 'a {
    text.lines().filter_map(move |line| {
        let rest = line.strip_prefix(name)?;
        if !(rest.starts_with('{') || rest.starts_with(' ')) {
            return None;
        }
        rest.rsplit(' ').next()?.parse().ok()
    })
}

/// Requests the client held back to keep its rate limit, from the operator's `/metrics` text.
pub fn throttled(text: &str) -> f64 {
    samples(text, "rest_client_rate_limiter_throttled_requests_total").sum()
}

/// `VmRSS` and `VmHWM` of `pid`, in MiB.
pub fn rss_mib(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .map_or(0.0, |kib| kib / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The `p`th percentile (nearest rank) of `sorted`; NaN when empty.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = usize::try_from(keda_api::num::f64_to_u64_saturating(
        ((p / 100.0) * sorted.len() as f64).ceil(),
    ))
    .unwrap_or(usize::MAX);
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Seconds as milliseconds, two decimals.
pub fn ms(secs: f64) -> String {
    format!("{:.2} ms", secs * 1000.0)
}

/// Deployment `name` in `namespace` at 0 replicas, its pods labelled `app: <name>`.
pub fn deployment(name: &str, namespace: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": name, "namespace": namespace },
        "spec": {
            "replicas": 0,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": { "containers": [{ "name": "app", "image": "registry.k8s.io/pause:3.9" }] }
            }
        }
    })
}
