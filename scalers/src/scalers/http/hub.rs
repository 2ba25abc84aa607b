//! The operator side of the report protocol: a transport-agnostic hub that sums what every
//! activator replica reports, keeps the stable and panic windows per target, and tells the push
//! scalers when a target must wake.
//!
//! The operator mounts [`serve_reports`] at [`super::protocol::REPORT_PATH`] on its server; the
//! `http` scalers read the same hub (found in the operator's [`ClientPools`], see
//! [`ActivatorHub::shared`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::{Buf, Bytes, BytesMut};
use http::{Method, Request, Response, StatusCode};
use http_body::Body;
use http_body_util::{BodyExt, Full};
use tokio::sync::watch;

use super::protocol::{REPLICA_TTL_SECONDS, Report, TargetKey, TargetSample};
use super::window::{Autoscaler, Observation, WindowSettings};
use crate::context::Clock;
use crate::pool::{ClientPools, Lease};

/// Longest accepted report line; a longer one is dropped (and counted as rejected).
const MAX_LINE: usize = 4 << 20;

/// What a target's metric is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ScalingMetric {
    /// Average concurrent requests, against this many per pod.
    Concurrency(f64),
    /// Requests per second, against this many per pod.
    RequestRate(f64),
}

impl ScalingMetric {
    /// The per-pod target.
    pub fn target(self) -> f64 {
        match self {
            Self::Concurrency(t) | Self::RequestRate(t) => t,
        }
    }
}

impl Default for ScalingMetric {
    fn default() -> Self {
        Self::Concurrency(100.0)
    }
}

/// How a target is scaled: the metric and its windows.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TargetSettings {
    /// Concurrency or request rate, and the per-pod target.
    pub metric: ScalingMetric,
    /// Stable/panic windows and threshold.
    pub windows: WindowSettings,
}

/// What the push scaler watches: a wake counter and the current activity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Activity {
    /// Incremented by every `wake` line.
    pub wakes: u64,
    /// Any held or in-flight request on any live replica, or serve mode (see
    /// [`SERVE_DRAIN_SECONDS`]).
    pub active: bool,
}

#[derive(Clone, Copy, Debug, Default)]
struct ReplicaView {
    last_seen: u64,
    held: u32,
    in_flight: u32,
    ready: u32,
}

/// Seconds a target stays active after the last report of a replica that saw a managed
/// Service lead to its pods (serve mode): the dataplane's propagation of the flip back to the
/// activators, and requests sent to the pods meanwhile, finish before a scale to zero.
pub const SERVE_DRAIN_SECONDS: u64 = 10;

struct TargetState {
    settings: TargetSettings,
    scalers: usize,
    autoscaler: Autoscaler,
    replicas: HashMap<String, ReplicaView>,
    /// Until when (exclusive, Unix seconds) the target counts as active because a replica
    /// reported it served directly by its pods.
    serving_until: u64,
    activity: watch::Sender<Activity>,
}

impl TargetState {
    fn new(settings: TargetSettings) -> Self {
        Self {
            autoscaler: Autoscaler::new(settings.windows, settings.metric.target()),
            settings,
            scalers: 0,
            replicas: HashMap::new(),
            serving_until: 0,
            activity: watch::channel(Activity::default()).0,
        }
    }

    fn live(&self, now: u64) -> impl Iterator<Item = &ReplicaView> {
        self.replicas
            .values()
            .filter(move |r| r.last_seen + REPLICA_TTL_SECONDS >= now)
    }

    /// Any held or in-flight request on a live replica, or a managed Service that led to the
    /// pods within [`SERVE_DRAIN_SECONDS`]: the operator never scales a target to zero while
    /// clients may reach its pods without the activators.
    fn active(&self, now: u64) -> bool {
        now < self.serving_until || self.live(now).any(|r| r.held > 0 || r.in_flight > 0)
    }

    fn ready(&self, now: u64) -> u32 {
        self.live(now).map(|r| r.ready).max().unwrap_or(0)
    }

    fn publish(&self, now: u64, woke: bool) {
        let active = self.active(now);
        self.activity.send_if_modified(|a| {
            let changed = woke || a.active != active;
            a.wakes += u64::from(woke);
            a.active = active;
            changed
        });
    }
}

#[derive(Default)]
struct HubState {
    targets: HashMap<TargetKey, TargetState>,
}

/// Aggregates reports of all activator replicas. Cheap to clone; clones share state.
#[derive(Clone)]
pub struct ActivatorHub {
    state: Arc<Mutex<HubState>>,
    clock: Clock,
}

impl std::fmt::Debug for ActivatorHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActivatorHub")
            .field("targets", &self.lock().targets.len())
            .finish()
    }
}

/// The pool key under which the operator's one hub lives in its [`ClientPools`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HubKey;

impl ActivatorHub {
    /// An empty hub reading time from `clock`.
    pub fn new(clock: Clock) -> Self {
        Self {
            state: Arc::default(),
            clock,
        }
    }

    /// The process's hub, kept in `pools` so the report endpoint and every `http` scaler share
    /// it. The hub lives while any lease does: the operator holds one for as long as it serves
    /// the report endpoint.
    pub async fn shared(pools: &ClientPools, clock: &Clock) -> Lease<HubKey, ActivatorHub> {
        let pool = pools.pool::<HubKey, ActivatorHub>();
        let clock = clock.clone();
        let lease = pool
            .get_or_connect(HubKey, || async move {
                Ok::<_, std::convert::Infallible>(ActivatorHub::new(clock))
            })
            .await;
        match lease {
            Ok(lease) => lease,
            Err(never) => match never {},
        }
    }

    fn lock(&self) -> MutexGuard<'_, HubState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn now(&self) -> u64 {
        u64::try_from(self.clock.now().as_second()).unwrap_or(0)
    }

    /// Sets how `key` is scaled and counts one scaler using it (called when a scaler is
    /// built; pair with [`ActivatorHub::release`]). Changed settings restart the windows.
    pub fn configure(&self, key: &TargetKey, settings: TargetSettings) {
        let mut state = self.lock();
        let target = state
            .targets
            .entry(key.clone())
            .or_insert_with(|| TargetState::new(settings));
        target.scalers += 1;
        if target.settings != settings {
            target.settings = settings;
            target.autoscaler = Autoscaler::new(settings.windows, settings.metric.target());
        }
    }

    /// One scaler of `key` is gone; the last one forgets the target. A rebuilt scaler
    /// configures before the old one is closed, so the windows survive a rebuild.
    pub fn release(&self, key: &TargetKey) {
        let mut state = self.lock();
        if let Some(target) = state.targets.get_mut(key) {
            target.scalers = target.scalers.saturating_sub(1);
            if target.scalers == 0 {
                state.targets.remove(key);
            }
        }
    }

    /// Watches the activity of `key`, creating the target with default settings if needed.
    pub fn subscribe(&self, key: &TargetKey) -> watch::Receiver<Activity> {
        let mut state = self.lock();
        state
            .targets
            .entry(key.clone())
            .or_insert_with(|| TargetState::new(TargetSettings::default()))
            .activity
            .subscribe()
    }

    /// Applies one report line.
    pub fn apply(&self, report: &Report) {
        let now = self.now();
        let mut state = self.lock();
        match report {
            Report::Wake { replica, target } => {
                let t = state
                    .targets
                    .entry(target.clone())
                    .or_insert_with(|| TargetState::new(TargetSettings::default()));
                // A wake-up means the replica holds a request and sees no ready pod. Count it
                // so at once: the scale loop the wake-up triggers reads `active` right away,
                // and would otherwise find the target idle until the replica's next
                // per-second sample (up to a second of cold start). That sample replaces
                // this view.
                let view = t.replicas.entry(replica.clone()).or_default();
                view.last_seen = now;
                view.held = view.held.max(1);
                view.ready = 0;
                t.publish(now, true);
            }
            Report::Sample {
                replica,
                second,
                targets,
            } => {
                for sample in targets {
                    let t = state
                        .targets
                        .entry(sample.target.clone())
                        .or_insert_with(|| TargetState::new(TargetSettings::default()));
                    record(t, replica, *second, sample, now);
                }
                for t in state.targets.values_mut() {
                    t.replicas
                        .retain(|_, r| r.last_seen + REPLICA_TTL_SECONDS >= now);
                }
            }
            Report::Bye { replica } => {
                for t in state.targets.values_mut() {
                    if t.replicas.remove(replica).is_some() {
                        t.publish(now, false);
                    }
                }
            }
        }
    }

    /// Drops every count of `replica` (its stream ended).
    pub fn forget_replica(&self, replica: &str) {
        self.apply(&Report::Bye {
            replica: replica.to_string(),
        });
    }

    /// The windows of `key` evaluated now, and whether it is active (any held or in-flight
    /// request on a live replica). `None` for an unknown target.
    pub fn observe(&self, key: &TargetKey) -> Option<(Observation, bool)> {
        let now = self.now();
        let mut state = self.lock();
        let t = state.targets.get_mut(key)?;
        let ready = t.ready(now);
        let observation = t.autoscaler.observe(now, ready);
        Some((observation, t.active(now)))
    }

    /// Sum of held requests of `key` over live replicas.
    pub fn held(&self, key: &TargetKey) -> u32 {
        let now = self.now();
        let state = self.lock();
        state
            .targets
            .get(key)
            .map_or(0, |t| t.live(now).map(|r| r.held).sum())
    }
}

fn record(t: &mut TargetState, replica: &str, second: u64, sample: &TargetSample, now: u64) {
    let value = match t.settings.metric {
        ScalingMetric::Concurrency(_) => sample.concurrency,
        ScalingMetric::RequestRate(_) => sample.requests,
    };
    t.autoscaler.record(second, value);
    t.replicas.insert(
        replica.to_string(),
        ReplicaView {
            last_seen: now,
            held: sample.held,
            in_flight: sample.in_flight,
            ready: sample.ready,
        },
    );
    if sample.serving {
        t.serving_until = t.serving_until.max(now.saturating_add(SERVE_DRAIN_SECONDS));
    }
    // Evaluated on every sample, as Knative's decider ticks, so panic mode starts and is
    // extended even when nobody asks for the metric.
    let ready = t.ready(now);
    t.autoscaler.observe(now, ready);
    t.publish(now, sample.held > 0 && sample.ready == 0);
}

/// Serves one activator's report stream: applies each line to `hub` as it arrives and answers
/// when the body ends, with the number of lines applied and rejected. Mount it at
/// [`super::protocol::REPORT_PATH`]; any method but `POST` gets 405.
///
/// When the stream ends (the replica drained, or the connection broke) the counts of the
/// replicas that sent on it are dropped; a replica that reconnects reports again within a
/// second.
pub async fn serve_reports<B>(hub: &ActivatorHub, request: Request<B>) -> Response<Full<Bytes>>
where
    B: Body<Data = Bytes>,
{
    if request.method() != Method::POST {
        return respond(
            StatusCode::METHOD_NOT_ALLOWED,
            "{\"error\":\"report streams are POSTed\"}".to_string(),
        );
    }
    let mut body = std::pin::pin!(request.into_body());
    let mut buffer = BytesMut::new();
    let (mut applied, mut rejected) = (0u64, 0u64);
    let mut replicas: Vec<String> = Vec::new();
    let mut broken = false;
    loop {
        let frame = match body.frame().await {
            Some(Ok(frame)) => frame,
            Some(Err(_)) => {
                broken = true;
                break;
            }
            None => break,
        };
        let Ok(mut data) = frame.into_data() else {
            continue;
        };
        while data.has_remaining() {
            let chunk = data.chunk();
            let n = chunk.len();
            buffer.extend_from_slice(chunk);
            data.advance(n);
        }
        while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            let line = buffer.split_to(end + 1);
            let line = &line[..end];
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<Report>(line) {
                Ok(report) => {
                    if !replicas.iter().any(|r| r == report.replica()) {
                        replicas.push(report.replica().to_string());
                    }
                    hub.apply(&report);
                    applied += 1;
                }
                Err(_) => rejected += 1,
            }
        }
        if buffer.len() > MAX_LINE {
            buffer.clear();
            rejected += 1;
        }
    }
    for replica in &replicas {
        hub.forget_replica(replica);
    }
    let status = if broken {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    respond(
        status,
        format!("{{\"applied\":{applied},\"rejected\":{rejected}}}"),
    )
}

fn respond(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicI64, Ordering};

    use super::*;

    fn clock() -> (Clock, Arc<AtomicI64>) {
        let now = Arc::new(AtomicI64::new(1_000));
        let read = Arc::clone(&now);
        let clock = Clock::from_fn(move || {
            jiff::Timestamp::from_second(read.load(Ordering::SeqCst)).unwrap_or_default()
        });
        (clock, now)
    }

    fn sample(replica: &str, second: u64, concurrency: f64, held: u32, ready: u32) -> Report {
        Report::Sample {
            replica: replica.into(),
            second,
            targets: vec![TargetSample {
                target: key(),
                concurrency,
                requests: concurrency * 2.0,
                held,
                in_flight: 0,
                ready,
                serving: false,
            }],
        }
    }

    fn key() -> TargetKey {
        TargetKey::new("ns", "web", 0)
    }

    #[test]
    fn samples_from_several_replicas_are_summed() {
        let (clock, _now) = clock();
        let hub = ActivatorHub::new(clock);
        hub.configure(&key(), TargetSettings::default());
        hub.apply(&sample("a", 1_000, 3.0, 0, 1));
        hub.apply(&sample("b", 1_000, 4.0, 0, 1));
        let (o, _) = hub.observe(&key()).unwrap();
        assert_eq!(o.stable, 7.0);
    }

    #[test]
    fn request_rate_targets_read_the_request_counts() {
        let (clock, _now) = clock();
        let hub = ActivatorHub::new(clock);
        let settings = TargetSettings {
            metric: ScalingMetric::RequestRate(10.0),
            ..TargetSettings::default()
        };
        hub.configure(&key(), settings);
        hub.apply(&sample("a", 1_000, 3.0, 0, 1));
        assert_eq!(hub.observe(&key()).unwrap().0.stable, 6.0);
    }

    #[test]
    fn a_wake_line_bumps_the_wake_counter_at_once() {
        let (clock, _now) = clock();
        let hub = ActivatorHub::new(clock);
        let rx = hub.subscribe(&key());
        hub.apply(&Report::Wake {
            replica: "a".into(),
            target: key(),
        });
        assert!(rx.has_changed().unwrap());
        assert_eq!(rx.borrow().wakes, 1);
    }

    #[test]
    fn a_wake_line_makes_the_target_active_before_any_sample() {
        let (clock, now) = clock();
        let hub = ActivatorHub::new(clock);
        let rx = hub.subscribe(&key());
        hub.apply(&Report::Wake {
            replica: "a".into(),
            target: key(),
        });
        assert!(rx.borrow().active);
        assert!(hub.observe(&key()).unwrap().1);
        assert_eq!(hub.held(&key()), 1);
        // The replica's next sample is the truth again: here the request has been answered.
        hub.apply(&sample("a", 1_000, 0.0, 0, 1));
        assert!(!hub.observe(&key()).unwrap().1);
        // A wake without any sample after it expires like any other view.
        hub.apply(&Report::Wake {
            replica: "b".into(),
            target: key(),
        });
        now.store(
            1_000 + i64::try_from(REPLICA_TTL_SECONDS).unwrap() + 1,
            Ordering::SeqCst,
        );
        assert!(!hub.observe(&key()).unwrap().1);
    }

    #[test]
    fn held_requests_make_the_target_active_until_the_replica_expires() {
        let (clock, now) = clock();
        let hub = ActivatorHub::new(clock);
        hub.apply(&sample("a", 1_000, 1.0, 2, 0));
        assert!(hub.observe(&key()).unwrap().1);
        assert_eq!(hub.held(&key()), 2);
        now.store(
            1_000 + i64::try_from(REPLICA_TTL_SECONDS).unwrap() + 1,
            Ordering::SeqCst,
        );
        assert!(
            !hub.observe(&key()).unwrap().1,
            "stale replica still counted"
        );
        assert_eq!(hub.held(&key()), 0);
    }

    #[test]
    fn bye_drops_the_replicas_counts_immediately() {
        let (clock, _now) = clock();
        let hub = ActivatorHub::new(clock);
        let rx = hub.subscribe(&key());
        hub.apply(&sample("a", 1_000, 1.0, 1, 0));
        assert!(rx.borrow().active);
        hub.forget_replica("a");
        assert!(!rx.borrow().active);
        assert!(!hub.observe(&key()).unwrap().1);
    }

    #[tokio::test]
    async fn the_handler_applies_lines_split_across_frames() {
        let (clock, _now) = clock();
        let hub = ActivatorHub::new(clock);
        let rx = hub.subscribe(&key());
        let line = Report::Wake {
            replica: "a".into(),
            target: key(),
        }
        .to_line();
        let (first, second) = line.split_at(10);
        let frames: Vec<Result<http_body::Frame<Bytes>, std::convert::Infallible>> = vec![
            Ok(http_body::Frame::data(Bytes::copy_from_slice(first))),
            Ok(http_body::Frame::data(Bytes::copy_from_slice(second))),
            Ok(http_body::Frame::data(Bytes::from_static(b"not json\n"))),
        ];
        let body = http_body_util::StreamBody::new(futures::stream::iter(frames));
        let request = Request::post("/activator/v1/reports").body(body).unwrap();
        let response = serve_reports(&hub, request).await;
        assert_eq!(response.status(), StatusCode::OK);
        let text = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&text[..], b"{\"applied\":1,\"rejected\":1}");
        assert_eq!(rx.borrow().wakes, 1);
    }

    #[tokio::test]
    async fn only_post_is_accepted() {
        let (clock, _now) = clock();
        let hub = ActivatorHub::new(clock);
        let request = Request::get("/activator/v1/reports")
            .body(Full::new(Bytes::new()))
            .unwrap();
        assert_eq!(
            serve_reports(&hub, request).await.status(),
            StatusCode::METHOD_NOT_ALLOWED
        );
    }

    #[test]
    fn a_target_served_by_its_pods_stays_active_until_the_flip_back_has_drained() {
        let (clock, now) = clock();
        let hub = ActivatorHub::new(clock);
        hub.configure(&key(), TargetSettings::default());
        let serving = |second: u64, serving: bool| Report::Sample {
            replica: "a".into(),
            second,
            targets: vec![TargetSample {
                target: key(),
                concurrency: 0.0,
                requests: 0.0,
                held: 0,
                in_flight: 0,
                ready: 2,
                serving,
            }],
        };
        hub.apply(&serving(1_000, false));
        assert!(!hub.observe(&key()).unwrap().1, "idle in proxy mode");
        hub.apply(&serving(1_000, true));
        assert!(
            hub.observe(&key()).unwrap().1,
            "serve mode: clients may bypass us"
        );
        // The flip back to proxy: still active for the drain, whoever reports.
        now.store(1_001, Ordering::SeqCst);
        hub.apply(&serving(1_001, false));
        assert!(hub.observe(&key()).unwrap().1);
        let drain = i64::try_from(SERVE_DRAIN_SECONDS).unwrap();
        now.store(1_000 + drain - 1, Ordering::SeqCst);
        assert!(hub.observe(&key()).unwrap().1);
        now.store(1_000 + drain, Ordering::SeqCst);
        hub.apply(&serving(1_000 + SERVE_DRAIN_SECONDS, false));
        assert!(
            !hub.observe(&key()).unwrap().1,
            "drained: may scale to zero"
        );
        // An old activator's line without the field reads as proxy.
        let old = r#"{"type":"sample","replica":"b","second":1,"targets":[{"target":{"namespace":"ns","name":"web","trigger":0},"concurrency":0.0,"requests":0.0,"held":0,"inFlight":0,"ready":1}]}"#;
        let report: Report = serde_json::from_str(old).unwrap();
        let Report::Sample { targets, .. } = report else {
            panic!("a sample")
        };
        assert!(!targets[0].serving);
    }
}
