//! Prometheus metrics of the activator. Per-target handles are looked up once, when the target
//! is created, so the request path only touches atomics.

use std::sync::Arc;

use keda_scalers::scalers::http::protocol::TargetKey;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TargetLabels {
    namespace: String,
    scaledobject: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TaskLabels {
    task: String,
}

type HistogramFamily = Family<TargetLabels, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 0.5 ms .. ~16 s.
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

/// All metrics of the process.
pub struct Metrics {
    registry: Registry,
    requests: Family<TargetLabels, Counter>,
    held: Family<TargetLabels, Gauge>,
    held_total: Family<TargetLabels, Counter>,
    queue_overflows: Family<TargetLabels, Counter>,
    hold_timeouts: Family<TargetLabels, Counter>,
    upstream_errors: Family<TargetLabels, Counter>,
    upstream_aborts: Family<TargetLabels, Counter>,
    latency: HistogramFamily,
    response_timeouts: Family<TargetLabels, Counter>,
    held_memory_overflows: Family<TargetLabels, Counter>,
    held_bytes: Family<TargetLabels, Gauge>,
    serving: Family<TargetLabels, Gauge>,
    /// Requests no route matched.
    pub no_route: Counter,
    /// Client connections open now.
    pub connections: Gauge,
    /// Times a connection waited for a place under `--max-connections`.
    pub connection_limit_waits: Counter,
    /// Times accepting a connection waited for room in `--memory-budget`.
    pub memory_budget_waits: Counter,
    /// Connections answered 503 and closed because `--memory-budget` had no room for
    /// hyper's buffers.
    pub memory_budget_refusals: Counter,
    /// Connections closed because a request head took longer than `--header-read-timeout`.
    pub header_read_timeouts: Counter,
    /// Kept-alive connections closed after `--idle-timeout` without a request.
    pub idle_timeouts: Counter,
    /// Connections closed because a write to the client made no progress for
    /// `--write-timeout`.
    pub write_timeouts: Counter,
    task_failures: Family<TaskLabels, Counter>,
    task_failing: Family<TaskLabels, Gauge>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

/// The handles of one target.
#[derive(Clone, Debug)]
pub struct TargetMetrics {
    /// Requests routed to the target.
    pub requests: Counter,
    /// Requests held now.
    pub held: Gauge,
    /// Requests that were held.
    pub held_total: Counter,
    /// Requests refused with 503 because the queue was full.
    pub queue_overflows: Counter,
    /// Requests answered 504 after the hold timeout.
    pub hold_timeouts: Counter,
    /// Requests answered 502.
    pub upstream_errors: Counter,
    /// Responses the pod broke off after their head (the client got part of the body and a
    /// closed connection, or a reset HTTP/2 stream).
    pub upstream_aborts: Counter,
    /// Time from arrival to the response head, held time included.
    pub latency: Histogram,
    /// Requests answered 504 because the pod sent no response head in time.
    pub response_timeouts: Counter,
    /// Requests refused with 503 because the held requests' memory was at its limit.
    pub held_memory_overflows: Counter,
    /// Bytes held requests keep now.
    pub held_bytes: Gauge,
    /// 1 while a managed Service leads the target's clients straight to its pods (serve
    /// mode), as this replica sees it; else 0.
    pub serving: Gauge,
}

impl Default for TargetMetrics {
    /// Handles registered nowhere (for tests).
    fn default() -> Self {
        Self {
            requests: Counter::default(),
            held: Gauge::default(),
            held_total: Counter::default(),
            queue_overflows: Counter::default(),
            hold_timeouts: Counter::default(),
            upstream_errors: Counter::default(),
            upstream_aborts: Counter::default(),
            latency: latency_histogram(),
            response_timeouts: Counter::default(),
            held_memory_overflows: Counter::default(),
            held_bytes: Gauge::default(),
            serving: Gauge::default(),
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every metric under the `keda_activator` prefix.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("keda_activator");
        let requests = Family::default();
        let held = Family::default();
        let held_total = Family::default();
        let queue_overflows = Family::default();
        let hold_timeouts = Family::default();
        let upstream_errors = Family::default();
        let upstream_aborts = Family::default();
        let latency: HistogramFamily = Family::new_with_constructor(latency_histogram);
        let response_timeouts = Family::default();
        let held_memory_overflows = Family::default();
        let held_bytes = Family::default();
        let serving = Family::default();
        let no_route = Counter::default();
        let connections = Gauge::default();
        let connection_limit_waits = Counter::default();
        let memory_budget_waits = Counter::default();
        let memory_budget_refusals = Counter::default();
        let header_read_timeouts = Counter::default();
        let idle_timeouts = Counter::default();
        let write_timeouts = Counter::default();
        let task_failures = Family::default();
        let task_failing = Family::default();
        registry.register("requests", "Requests routed to a target", requests.clone());
        registry.register(
            "held_requests",
            "Requests waiting for a ready pod or a free slot",
            held.clone(),
        );
        registry.register(
            "requests_held",
            "Requests that waited for a ready pod or a free slot",
            held_total.clone(),
        );
        registry.register(
            "queue_overflows",
            "Requests refused with 503 because the hold queue was full",
            queue_overflows.clone(),
        );
        registry.register(
            "hold_timeouts",
            "Requests answered 504 because no pod was ready within holdTimeout",
            hold_timeouts.clone(),
        );
        registry.register(
            "upstream_errors",
            "Requests answered 502 because the pod failed",
            upstream_errors.clone(),
        );
        registry.register(
            "upstream_aborts",
            "Responses the pod broke off after their head (the client got part of the body)",
            upstream_aborts.clone(),
        );
        registry.register(
            "request_duration_seconds",
            "Time from arrival to the response head, held time included",
            latency.clone(),
        );
        registry.register(
            "response_timeouts",
            "Requests answered 504 because the pod sent no response head within responseHeaderTimeout",
            response_timeouts.clone(),
        );
        registry.register(
            "held_memory_overflows",
            "Requests refused with 503 because the held requests' memory was at --held-request-memory",
            held_memory_overflows.clone(),
        );
        registry.register(
            "held_request_bytes",
            "Bytes held requests keep (heads and what their clients sent after them)",
            held_bytes.clone(),
        );
        registry.register(
            "serving",
            "1 while a managed Service leads the target's clients straight to its pods (serve mode), else 0",
            serving.clone(),
        );
        registry.register(
            "no_route",
            "Requests answered 404 because no route matched",
            no_route.clone(),
        );
        registry.register(
            "connections",
            "Client connections open",
            connections.clone(),
        );
        registry.register(
            "connection_limit_waits",
            "Times accepting a connection waited because --max-connections were open",
            connection_limit_waits.clone(),
        );
        registry.register(
            "memory_budget_waits",
            "Times accepting a connection waited for room in --memory-budget",
            memory_budget_waits.clone(),
        );
        registry.register(
            "memory_budget_refusals",
            "Connections answered 503 because --memory-budget had no room for their buffers",
            memory_budget_refusals.clone(),
        );
        registry.register(
            "header_read_timeouts",
            "Connections closed because a request head was not complete within --header-read-timeout",
            header_read_timeouts.clone(),
        );
        registry.register(
            "idle_timeouts",
            "Kept-alive connections closed after --idle-timeout without a request",
            idle_timeouts.clone(),
        );
        registry.register(
            "write_timeouts",
            "Connections closed because a write to the client made no progress for --write-timeout",
            write_timeouts.clone(),
        );
        registry.register(
            "task_failures",
            "Times a background task (watch, report) panicked, failed or ended and was restarted",
            task_failures.clone(),
        );
        registry.register(
            "task_failing",
            "1 while a background task is failing (from a failure until it has run 10 s without one)",
            task_failing.clone(),
        );
        Self {
            registry,
            requests,
            held,
            held_total,
            queue_overflows,
            hold_timeouts,
            upstream_errors,
            upstream_aborts,
            latency,
            response_timeouts,
            held_memory_overflows,
            held_bytes,
            serving,
            no_route,
            connections,
            connection_limit_waits,
            memory_budget_waits,
            memory_budget_refusals,
            header_read_timeouts,
            idle_timeouts,
            write_timeouts,
            task_failures,
            task_failing,
        }
    }

    /// The failure counter of background task `task` ([`crate::supervise`]).
    pub fn task_failures(&self, task: &str) -> Counter {
        let labels = TaskLabels { task: task.into() };
        self.task_failures.get_or_create(&labels).clone()
    }

    /// The "failing now" gauge of background task `task` ([`crate::supervise`]).
    pub fn task_failing(&self, task: &str) -> Gauge {
        let labels = TaskLabels { task: task.into() };
        self.task_failing.get_or_create(&labels).clone()
    }

    /// The handles of `key`'s target.
    pub fn target(&self, key: &TargetKey) -> TargetMetrics {
        let labels = TargetLabels {
            namespace: key.namespace.clone(),
            scaledobject: key.name.clone(),
        };
        TargetMetrics {
            requests: self.requests.get_or_create(&labels).clone(),
            held: self.held.get_or_create(&labels).clone(),
            held_total: self.held_total.get_or_create(&labels).clone(),
            queue_overflows: self.queue_overflows.get_or_create(&labels).clone(),
            hold_timeouts: self.hold_timeouts.get_or_create(&labels).clone(),
            upstream_errors: self.upstream_errors.get_or_create(&labels).clone(),
            upstream_aborts: self.upstream_aborts.get_or_create(&labels).clone(),
            latency: self.latency.get_or_create(&labels).clone(),
            response_timeouts: self.response_timeouts.get_or_create(&labels).clone(),
            held_memory_overflows: self.held_memory_overflows.get_or_create(&labels).clone(),
            held_bytes: self.held_bytes.get_or_create(&labels).clone(),
            serving: self.serving.get_or_create(&labels).clone(),
        }
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// Shared metrics.
pub type SharedMetrics = Arc<Metrics>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_handles_feed_the_exposition() {
        let metrics = Metrics::new();
        let t = metrics.target(&TargetKey::new("shop", "web", 0));
        t.requests.inc();
        t.queue_overflows.inc();
        t.latency.observe(0.002);
        let text = metrics.encode();
        assert!(
            text.contains(
                "keda_activator_requests_total{namespace=\"shop\",scaledobject=\"web\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains("keda_activator_queue_overflows_total"),
            "{text}"
        );
        assert!(
            text.contains("keda_activator_request_duration_seconds_bucket"),
            "{text}"
        );
        assert!(text.contains("keda_activator_held_requests{"), "{text}");
    }
}
