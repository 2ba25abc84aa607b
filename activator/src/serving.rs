//! Proxy and serve modes at run time (issue 28): the task that follows the opted-in Services
//! ([`crate::serve`]), decides each target's mode and writes its EndpointSlices.
//!
//! Every replica watches the managed slices and reports, per target, whether one of them leads
//! to the pods (`serving` in its samples): the operator keeps such a target active, so it is
//! never scaled to zero while clients may bypass the activators. One replica writes: the one
//! whose pod IP is the lowest among the ready endpoints of the activators' own Service (a
//! replica that is not ready, or has no `POD_IP`, never writes). The writer also scrapes the
//! pods' in-flight gauge (`podConcurrencyMetric`) once a second, so the concurrency the
//! operator scales on does not vanish when traffic bypasses the activators; a target without
//! that gauge, or whose pods cannot be scraped, stays in proxy mode.
//!
//! A target leaves serve mode when it has had fewer than `leave_ready` ready pods, or no
//! request (its own or the pods' gauge) for `idle`; a scale to zero then waits for the
//! operator's cooldown, which counts from the flip back plus [`SERVE_DRAIN_SECONDS`].
//!
//! [`SERVE_DRAIN_SECONDS`]: keda_scalers::scalers::http::hub::SERVE_DRAIN_SECONDS

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use keda_scalers::scalers::http::PodMetric;
use keda_scalers::scalers::http::protocol::TargetKey;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::serve::{
    self, HttpTarget, MODE_ANNOTATION, Managed, Mode, ModeState, SERVE_MANAGER, SERVES_ANNOTATION,
    ServePolicy,
};
use crate::targets::Targets;
use crate::watch::{MANAGED_BY_LABEL, SERVICE_NAME_LABEL, is_ready};

/// The largest answer read from a pod's metrics endpoint.
pub const MAX_SCRAPE_BYTES: usize = 256 * 1024;

/// What the serve-mode task needs.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// Only Services and slices of this namespace; `None` = all namespaces.
    pub namespace: Option<String>,
    /// The activators' own Service (`namespace`, `name`): its ready endpoints are the
    /// addresses of proxy mode.
    pub self_service: (String, String),
    /// This replica's pod IP: the writer is the replica with the lowest.
    pub pod_ip: Option<IpAddr>,
    /// The port the activators' proxy listens on (every replica the same).
    pub proxy_port: u16,
    /// When to flip.
    pub policy: ServePolicy,
    /// How long without a request before a serving target goes back to proxy.
    pub idle: Duration,
    /// How long one scrape of one pod may take.
    pub scrape_timeout: Duration,
}

/// Why the serve-mode task stopped before it was asked to.
#[derive(Debug, thiserror::Error)]
pub enum ServeRunError {
    /// The watch streams ended (they retry their errors and should not end).
    #[error("the Service and EndpointSlice watches of serve mode ended")]
    Ended,
}

/// Why a scrape of one pod gave no value. Never carries what the pod sent.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScrapeError {
    #[error("no connection within the timeout")]
    Timeout,
    #[error("connection failed")]
    Connect,
    #[error("the answer is not HTTP or its status is not 200")]
    Status,
    #[error("the answer is larger than {MAX_SCRAPE_BYTES} bytes")]
    TooLarge,
    #[error("the answer has no sample of the gauge")]
    NoGauge,
}

/// Runs until `cancel`: watches the opted-in Services, the managed slices and the activators'
/// own Service, and once a second updates every target's reported mode and, on the writer,
/// the slices and the pods' gauge. Nothing is decided before `routes_ready` (the routes watch
/// has applied its first full lists): a restarted writer must not lead clients to activators
/// that do not know the routes yet, nor judge targets it has not loaded.
///
/// # Errors
/// [`ServeRunError::Ended`]: the watch streams ended before `cancel`.
pub async fn run(
    client: Client,
    config: ServeConfig,
    targets: Arc<Targets>,
    routes_ready: crate::server::Readiness,
    cancel: CancellationToken,
) -> Result<(), ServeRunError> {
    let (services_api, managed_api): (Api<Service>, Api<EndpointSlice>) = match &config.namespace {
        Some(ns) => (
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client.clone(), ns),
        ),
        None => (Api::all(client.clone()), Api::all(client.clone())),
    };
    let own_api: Api<EndpointSlice> = Api::namespaced(client.clone(), &config.self_service.0);
    let (services, services_writer) = reflector::store::<Service>();
    let (managed, managed_writer) = reflector::store::<EndpointSlice>();
    let (own, own_writer) = reflector::store::<EndpointSlice>();
    // Every Service of the cluster is listed (an annotation cannot be selected on): keep only
    // what the decision reads.
    let service_events = reflector::reflector(
        services_writer,
        watcher(services_api, watcher::Config::default())
            .default_backoff()
            .modify(|svc: &mut Service| {
                svc.metadata.managed_fields = None;
                svc.status = None;
                if let Some(annotations) = svc.metadata.annotations.as_mut() {
                    annotations.retain(|k, _| k == SERVES_ANNOTATION);
                }
                svc.metadata.labels = None;
            }),
    )
    .map_ok(|_| ())
    .boxed();
    let managed_events = reflector::reflector(
        managed_writer,
        watcher(
            managed_api,
            watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}={SERVE_MANAGER}")),
        )
        .default_backoff(),
    )
    .map_ok(|_| ())
    .boxed();
    let own_events = reflector::reflector(
        own_writer,
        watcher(
            own_api,
            watcher::Config::default()
                .labels(&format!("{SERVICE_NAME_LABEL}={}", config.self_service.1)),
        )
        .default_backoff(),
    )
    .map_ok(|_| ())
    .boxed();
    let mut events = futures::stream::select_all([service_events, managed_events, own_events]);
    if config.pod_ip.is_none() {
        tracing::warn!("no POD_IP: this replica reports serve mode but never writes slices");
    }
    let mut runner = Runner::new(client, config, targets);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = cancel.cancelled() => return Ok(()),
            event = events.next() => match event {
                Some(Ok(())) => {}
                Some(Err(error)) => tracing::warn!(%error, "serve-mode watch failed; retrying"),
                None => return Err(ServeRunError::Ended),
            },
            _ = tick.tick() => {
                if routes_ready.get() && is_ready(&services) && is_ready(&managed) && is_ready(&own) {
                    runner.step(&services, &managed, &own, Instant::now()).await;
                }
            }
        }
    }
}

/// The state kept between steps.
struct Runner {
    client: Client,
    config: ServeConfig,
    targets: Arc<Targets>,
    modes: HashMap<(String, String), ModeState>,
    last_busy: HashMap<TargetKey, Instant>,
    reported: HashSet<String>,
}

impl Runner {
    fn new(client: Client, config: ServeConfig, targets: Arc<Targets>) -> Self {
        Self {
            client,
            config,
            targets,
            modes: HashMap::new(),
            last_busy: HashMap::new(),
            reported: HashSet::new(),
        }
    }

    /// Logs each distinct problem once, until it is gone.
    fn report(&mut self, now_problems: HashSet<String>) {
        for problem in now_problems.difference(&self.reported) {
            tracing::warn!(problem = %problem, "serve mode");
        }
        self.reported = now_problems;
    }

    async fn step(
        &mut self,
        services: &Store<Service>,
        slices: &Store<EndpointSlice>,
        own: &Store<EndpointSlice>,
        now: Instant,
    ) {
        let opted_in: Vec<Service> = services
            .state()
            .iter()
            .filter(|s| s.annotations().contains_key(SERVES_ANNOTATION))
            .map(|s| (**s).clone())
            .collect();
        let all = self.targets.all();
        let http_targets: Vec<HttpTarget> = all
            .iter()
            .map(|(_, c)| HttpTarget {
                key: c.key.clone(),
                backing_service: c.trigger.service.clone(),
            })
            .collect();
        let (managed, errors) = serve::managed_services(&opted_in, &http_targets);
        let mut problems: HashSet<String> = errors.iter().map(ToString::to_string).collect();
        let slices = slices.state();

        // Every replica: report what the slices say.
        for (target, config) in &all {
            let serving = managed.iter().any(|m| {
                m.target == config.key
                    && slices_of(&slices, m).any(|s| {
                        s.annotations().get(MODE_ANNOTATION).map(String::as_str) == Some("serve")
                    })
            });
            target.set_serving(serving);
        }

        let activators = activator_ips(own, &self.config.self_service.1);
        let writer = self
            .config
            .pod_ip
            .is_some_and(|ip| activators.first() == Some(&ip));
        if !writer {
            for (target, _) in &all {
                target.set_pod_in_flight(None);
            }
            self.modes.clear();
            self.report(problems);
            return;
        }

        // The writer: scrape the gauges of the targets a managed Service serves.
        let scrapes = futures::future::join_all(all.iter().map(|(target, config)| {
            let metric = config
                .trigger
                .pod_metric
                .clone()
                .filter(|_| managed.iter().any(|m| m.target == config.key));
            let pods = target.ready_addrs();
            let timeout = self.config.scrape_timeout;
            async move {
                match metric {
                    Some(metric) if !pods.is_empty() => {
                        Some(scrape_pods(&pods, &metric, timeout).await)
                    }
                    _ => None,
                }
            }
        }))
        .await;
        let mut capable: HashSet<TargetKey> = HashSet::new();
        for ((target, config), scraped) in all.iter().zip(scrapes) {
            match scraped {
                Some(Ok(sum)) => {
                    target.set_pod_in_flight(Some(sum));
                    capable.insert(config.key.clone());
                }
                Some(Err(error)) => {
                    target.set_pod_in_flight(None);
                    problems.insert(format!(
                        "{}: the pods' gauge {} cannot be read ({error}); proxy mode only",
                        config.key,
                        config
                            .trigger
                            .pod_metric
                            .as_ref()
                            .map_or("", |m| m.name.as_str()),
                    ));
                }
                None => target.set_pod_in_flight(None),
            }
        }

        let proxy_addrs: Vec<SocketAddr> = activators
            .iter()
            .map(|ip| SocketAddr::new(*ip, self.config.proxy_port))
            .collect();
        let mut alive = HashSet::new();
        for m in &managed {
            let id = (m.namespace.clone(), m.service.clone());
            alive.insert(id.clone());
            let Some(target) = self.targets.get(&m.target) else {
                continue;
            };
            if target.busy() {
                self.last_busy.insert(m.target.clone(), now);
            }
            let last_busy = *self.last_busy.entry(m.target.clone()).or_insert(now);
            let idle = now.saturating_duration_since(last_busy) >= self.config.idle;
            let ready = target.ready_addrs();
            let state = self.modes.entry(id).or_default();
            let before = state.mode();
            let force_proxy = idle || !capable.contains(&m.target);
            let mode = state.step(&self.config.policy, ready.len(), force_proxy, now);
            if mode != before {
                tracing::info!(
                    service = %format!("{}/{}", m.namespace, m.service),
                    target = %m.target,
                    mode = mode.as_str(),
                    ready = ready.len(),
                    "serve mode flip"
                );
            }
            let addrs = match mode {
                Mode::Proxy => &proxy_addrs,
                Mode::Serve => &ready,
            };
            let desired = match serve::desired_slices(m, mode, addrs) {
                Ok(desired) => desired,
                Err(error) => {
                    problems.insert(format!("{}/{}: {error}", m.namespace, m.service));
                    continue;
                }
            };
            if mode == Mode::Serve {
                // Reported from the moment the slices are written, before the watch shows them.
                target.set_serving(true);
            }
            let current: Vec<&EndpointSlice> = slices_of(&slices, m).collect();
            if !same_slices(&current, &desired)
                && let Err(error) = serve::write_slices(&self.client, m, &desired).await
            {
                problems.insert(format!(
                    "{}/{}: writing its EndpointSlices failed: {error}",
                    m.namespace, m.service
                ));
            }
        }
        self.modes.retain(|id, _| alive.contains(id));
        self.last_busy
            .retain(|key, _| managed.iter().any(|m| &m.target == key));
        // Slices of a Service that is gone or no longer opts in: removed, so no stale endpoint
        // stays behind. (A Service that still opts in but is refused, or whose ScaledObject is
        // not loaded, keeps its slices: they are not ours to empty on a guess.)
        let opted: HashSet<(String, String)> = opted_in
            .iter()
            .filter_map(|s| Some((s.namespace()?, s.name_any())))
            .collect();
        for slice in slices.iter() {
            let (Some(ns), Some(service)) = (
                slice.namespace(),
                slice.labels().get(SERVICE_NAME_LABEL).cloned(),
            ) else {
                continue;
            };
            let id = (ns.clone(), service.clone());
            if alive.contains(&id) || opted.contains(&id) {
                continue;
            }
            let api: Api<EndpointSlice> = Api::namespaced(self.client.clone(), &ns);
            match api.delete(&slice.name_any(), &Default::default()).await {
                Ok(_) => {
                    tracing::info!(service = %format!("{ns}/{service}"), "managed slice removed")
                }
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(error) => {
                    problems.insert(format!(
                        "{ns}/{service}: removing a stale slice failed: {error}"
                    ));
                }
            }
        }
        self.report(problems);
    }
}

/// The managed slices of `m` in `slices`.
fn slices_of<'a>(
    slices: &'a [Arc<EndpointSlice>],
    m: &'a Managed,
) -> impl Iterator<Item = &'a EndpointSlice> {
    slices
        .iter()
        .filter(move |s| {
            s.namespace().as_deref() == Some(m.namespace.as_str())
                && s.labels().get(SERVICE_NAME_LABEL) == Some(&m.service)
        })
        .map(AsRef::as_ref)
}

/// Whether `current` already says what `desired` says (names, families, addresses, ports,
/// mode).
fn same_slices(current: &[&EndpointSlice], desired: &[EndpointSlice]) -> bool {
    /// Name, address type, addresses, ports (as text) and mode.
    type Key<'a> = (
        Option<&'a str>,
        &'a str,
        Vec<&'a [String]>,
        Option<String>,
        Option<&'a str>,
    );
    fn key(s: &EndpointSlice) -> Key<'_> {
        (
            s.metadata.name.as_deref(),
            s.address_type.as_str(),
            s.endpoints.iter().map(|e| e.addresses.as_slice()).collect(),
            s.ports.as_ref().map(|p| format!("{p:?}")),
            s.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(MODE_ANNOTATION))
                .map(String::as_str),
        )
    }
    let mut a: Vec<_> = current.iter().map(|s| key(s)).collect();
    let mut b: Vec<_> = desired.iter().map(key).collect();
    a.sort();
    b.sort();
    a == b
}

/// The ready activators' pod IPs, sorted.
fn activator_ips(own: &Store<EndpointSlice>, service: &str) -> Vec<IpAddr> {
    let mut ips: Vec<IpAddr> = own
        .state()
        .iter()
        .filter(|s| s.labels().get(SERVICE_NAME_LABEL).map(String::as_str) == Some(service))
        .flat_map(|s| s.endpoints.clone())
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true))
        .filter_map(|e| e.addresses.first().and_then(|a| a.parse().ok()))
        .filter(|ip| serve::endpoint_address_ok(*ip))
        .collect();
    ips.sort_unstable();
    ips.dedup();
    ips
}

/// The gauge summed over `pods` (each at the gauge's port, else its own). Pods that cannot be
/// scraped count as zero as long as one can; none: the first error.
pub async fn scrape_pods(
    pods: &[SocketAddr],
    metric: &PodMetric,
    timeout: Duration,
) -> Result<u32, ScrapeError> {
    let results = futures::future::join_all(pods.iter().map(|pod| {
        let addr = SocketAddr::new(pod.ip(), metric.port.unwrap_or(pod.port()));
        scrape(addr, metric, timeout)
    }))
    .await;
    let mut sum = 0.0f64;
    let mut first_error = None;
    let mut any = false;
    for result in results {
        match result {
            Ok(value) => {
                sum += value;
                any = true;
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if !any {
        return Err(first_error.unwrap_or(ScrapeError::NoGauge));
    }
    // Non-negative and finite by `gauge_sum`, clamped to the range of u32.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let count = sum.round().clamp(0.0, f64::from(u32::MAX)) as u32;
    Ok(count)
}

/// One scrape of one pod: `GET path` over HTTP/1.0 (so the answer is never chunked), at most
/// [`MAX_SCRAPE_BYTES`], within `timeout` in all.
pub async fn scrape(
    addr: SocketAddr,
    metric: &PodMetric,
    timeout: Duration,
) -> Result<f64, ScrapeError> {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|_| ScrapeError::Connect)?;
        let request = format!(
            "GET {} HTTP/1.0\r\nHost: {addr}\r\nAccept: text/plain\r\nUser-Agent: keda-rs-activator\r\n\r\n",
            metric.path
        );
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|_| ScrapeError::Connect)?;
        let mut answer = Vec::with_capacity(4096);
        let mut limited = (&mut stream).take(MAX_SCRAPE_BYTES as u64 + 1);
        limited
            .read_to_end(&mut answer)
            .await
            .map_err(|_| ScrapeError::Connect)?;
        if answer.len() > MAX_SCRAPE_BYTES {
            return Err(ScrapeError::TooLarge);
        }
        Ok(answer)
    };
    let answer = tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| ScrapeError::Timeout)??;
    parse_answer(&answer, &metric.name)
}

/// The gauge's value in a raw HTTP/1.x answer: status 200, not chunked, the body in
/// Prometheus' text format.
pub fn parse_answer(answer: &[u8], name: &str) -> Result<f64, ScrapeError> {
    let head_end = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or(ScrapeError::Status)?;
    let head = std::str::from_utf8(&answer[..head_end]).map_err(|_| ScrapeError::Status)?;
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or_default();
    let mut parts = status.split(' ');
    let version = parts.next().unwrap_or_default();
    if !version.starts_with("HTTP/1.") || parts.next() != Some("200") {
        return Err(ScrapeError::Status);
    }
    let chunked = lines.any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("transfer-encoding")
                && v.to_ascii_lowercase().contains("chunked")
        })
    });
    if chunked {
        return Err(ScrapeError::Status);
    }
    let body = String::from_utf8_lossy(&answer[head_end + 4..]);
    gauge_sum(&body, name).ok_or(ScrapeError::NoGauge)
}

/// The sum of every sample of gauge `name` in Prometheus' text format (all label sets), or
/// `None` when it has none. Negative, NaN and infinite samples are skipped.
pub fn gauge_sum(text: &str, name: &str) -> Option<f64> {
    let mut sum = 0.0f64;
    let mut found = false;
    for line in text.lines() {
        let line = line.trim_start();
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        let rest = if let Some(labels) = rest.strip_prefix('{') {
            match end_of_labels(labels) {
                Some(end) => &labels[end + 1..],
                None => continue,
            }
        } else if rest.starts_with([' ', '\t']) {
            rest
        } else {
            // Another metric whose name starts with this one.
            continue;
        };
        let Some(value) = rest.split_whitespace().next() else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        found = true;
        if value.is_finite() && value >= 0.0 {
            sum += value;
        }
    }
    (found && sum.is_finite()).then_some(sum)
}

/// The index of the `}` closing a label set (quoted values may hold `}` and escapes).
fn end_of_labels(labels: &str) -> Option<usize> {
    let mut quoted = false;
    let mut escaped = false;
    for (i, c) in labels.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '}' if !quoted => return Some(i),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gauge_is_summed_over_its_label_sets_only() {
        let text = "# HELP inflight requests\n# TYPE inflight gauge\n\
                    inflight{path=\"/a}\\\"x\"} 3\n\
                    inflight{path=\"/b\"} 2 1700000000000\n\
                    inflight_total 40\n\
                    inflight 1\n\
                    inflight{bad} NaN\n\
                    inflight -5\n";
        assert_eq!(gauge_sum(text, "inflight"), Some(6.0));
        assert_eq!(gauge_sum(text, "absent"), None);
        assert_eq!(gauge_sum("inflight_total 4\n", "inflight"), None);
        assert_eq!(gauge_sum("inflight{a=\"unterminated 4\n", "inflight"), None);
    }

    #[test]
    fn answers_other_than_a_plain_200_are_refused() {
        let ok = b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\ng 2\n";
        assert_eq!(parse_answer(ok, "g"), Ok(2.0));
        let teapot = b"HTTP/1.1 418 I'm a teapot\r\n\r\ng 2\n";
        assert_eq!(parse_answer(teapot, "g"), Err(ScrapeError::Status));
        let chunked =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\ng 2\n\r\n0\r\n\r\n";
        assert_eq!(parse_answer(chunked, "g"), Err(ScrapeError::Status));
        assert_eq!(parse_answer(b"garbage", "g"), Err(ScrapeError::Status));
        let missing = b"HTTP/1.0 200 OK\r\n\r\nother 1\n";
        assert_eq!(parse_answer(missing, "g"), Err(ScrapeError::NoGauge));
    }
}
