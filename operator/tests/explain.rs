//! `keda-rs explain` end to end on the operator side: the operator runs on memkube with the
//! `dial` custom scaler, its explain endpoint listens on loopback behind the API server's
//! TokenReview and SubjectAccessReview, and the CLI's client asks it.
//!
//! The text and the JSON of five objects (active, idle in cooldown, paused, failing, in
//! fallback) are compared with the files under `tests/explain/`, exactly. After a deliberate
//! change of the output, rewrite them with `KEDA_RS_UPDATE_SNAPSHOTS=1 cargo test -p
//! keda-operator --test explain` and review the diff. Timestamps in the JSON are written
//! relative to the answer's `now` (`<now-48s>`), so the files do not depend on the day.

mod common;
mod scenarios;

#[allow(dead_code)]
#[path = "../../scalers/tests/common/mod.rs"]
mod redis_common;

use std::path::PathBuf;
use std::sync::Arc;

use common::dial::Dials;
use jiff::Timestamp;
use k8s_openapi::api::authentication::v1::{TokenReviewStatus, UserInfo};
use k8s_openapi::api::authorization::v1::SubjectAccessReviewStatus;
use keda_api::ScaledObject;
use keda_operator::explain::auth::KubeAuthorizer;
use keda_operator::explain::client::{Endpoint, FetchError, fetch};
use keda_operator::explain::server::{ExplainService, ObjectKind};
use keda_operator::explain::{Explanation, ObjectState, render};
use memkube::MemKube;
use scenarios::{Operator, World, eventually};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

const NS: &str = "team";
const ALICE: &str = "alice-token";
const MALLORY: &str = "mallory-token";

fn init_logging() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .try_init();
}

/// The operator on memkube and its explain endpoint.
struct Setup {
    _server: MemKube,
    w: World,
    op: Operator,
    dials: Dials,
    url: String,
    stop: CancellationToken,
}

impl Setup {
    async fn explain(&self, token: &str, name: &str) -> Result<Explanation, FetchError> {
        fetch(
            None,
            &Endpoint::Direct(self.url.clone()),
            token,
            ObjectKind::ScaledObject,
            NS,
            name,
        )
        .await
    }

    async fn stop(self) {
        self.stop.cancel();
        self.op.stop().await;
    }
}

/// memkube knows two tokens: alice's, who may `get` ScaledObjects in [`NS`], and mallory's,
/// who may not. The World needs Redis (the scenarios harness holds a connection): without it
/// the test skips, as the other operator tests do.
async fn setup(test: &str) -> Option<Setup> {
    init_logging();
    let redis = redis_common::redis_or_skip(test).await?;
    let server = MemKube::new();
    server
        .load_crds_from_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../config/crd"))
        .expect("CRDs load");
    server.create_namespace(NS).expect("namespace");
    server.set_token_policy(|spec| {
        let user = match spec.token.as_deref() {
            Some(ALICE) => "alice",
            Some(MALLORY) => "mallory",
            _ => {
                return TokenReviewStatus {
                    authenticated: Some(false),
                    error: Some("invalid bearer token".to_string()),
                    ..Default::default()
                };
            }
        };
        TokenReviewStatus {
            authenticated: Some(true),
            user: Some(UserInfo {
                username: Some(user.to_string()),
                groups: Some(vec!["system:authenticated".to_string()]),
                ..Default::default()
            }),
            ..Default::default()
        }
    });
    server.set_access_policy(|spec| {
        let attributes = spec.resource_attributes.clone().unwrap_or_default();
        let allowed = spec.user.as_deref() == Some("alice")
            && attributes.verb.as_deref() == Some("get")
            && attributes.group.as_deref() == Some("keda.sh")
            && attributes.resource.as_deref() == Some("scaledobjects")
            && attributes.namespace.as_deref() == Some(NS);
        SubjectAccessReviewStatus {
            allowed,
            ..Default::default()
        }
    });
    let dials = Dials::new();
    let w = World {
        registry: Arc::new(dials.registry()),
        ..World::new(server.client(), NS, redis)
    };
    let op = w.start_operator();
    let service = ExplainService::new(
        Arc::new(op.loops.clone()),
        Arc::new(KubeAuthorizer::new(server.client())),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let stop = CancellationToken::new();
    tokio::spawn(service.serve(listener, stop.clone()));
    Some(Setup {
        _server: server,
        w,
        op,
        dials,
        url,
        stop,
    })
}

/// A ScaledObject on Deployment `name` with one `dial` trigger (target 5, AverageValue) and
/// `extra` spec lines.
fn dial_object(name: &str, extra: &str) -> String {
    format!(
        r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: {name}
spec:
  scaleTargetRef:
    name: {name}
  pollingInterval: 30
  cooldownPeriod: 300
  maxReplicaCount: 10
{extra}
  triggers:
    - type: dial
      name: {name}-dial
      metadata:
        dial: {name}
"#
    )
}

/// Replaces every timestamp in `value` with its distance to `now` (`<now>`, `<now-48s>`).
fn relative_times(value: &mut Value, now: Timestamp) {
    match value {
        Value::String(s) => {
            if let Ok(t) = s.parse::<Timestamp>() {
                let seconds = now.duration_since(t).as_secs();
                *s = if seconds == 0 {
                    "<now>".to_string()
                } else {
                    format!("<now-{seconds}s>")
                };
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| relative_times(v, now)),
        Value::Object(map) => map.values_mut().for_each(|v| relative_times(v, now)),
        _ => {}
    }
}

fn snapshot_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/explain")
}

/// Compares `actual` with the file `name`, or writes it with `KEDA_RS_UPDATE_SNAPSHOTS=1`.
fn assert_snapshot(name: &str, actual: &str) {
    let path = snapshot_dir().join(name);
    if std::env::var_os("KEDA_RS_UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(snapshot_dir()).expect("snapshot dir");
        std::fs::write(&path, actual).expect("write snapshot");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; write it with KEDA_RS_UPDATE_SNAPSHOTS=1",
            path.display()
        )
    });
    pretty_assertions::assert_str_eq!(expected, actual, "{}", path.display());
}

/// Both outputs of `name` against its snapshots.
fn assert_outputs(name: &str, e: &Explanation) {
    assert_snapshot(&format!("{name}.txt"), &render::text(e));
    let mut json = serde_json::to_value(e).expect("json");
    relative_times(&mut json, e.now);
    let mut text = serde_json::to_string_pretty(&json).expect("json");
    text.push('\n');
    assert_snapshot(&format!("{name}.json"), &text);
    // The JSON reads back into the same document: scripts and the CLI agree on the fields.
    let back: Explanation =
        serde_json::from_value(serde_json::to_value(e).expect("json")).expect("reads back");
    assert_eq!(&back, e);
}

async fn poll_all(s: &Setup, objects: &[&ScaledObject], secs: i64) {
    let before: Vec<u64> = objects.iter().map(|so| s.w.polls(&s.op, so)).collect();
    s.w.clock.advance(secs);
    s.w.ticks.tick();
    for (so, n) in objects.iter().zip(before) {
        s.w.polls_reach(&s.op, so, n + 1).await;
    }
}

/// Five objects, each in one of the states `explain` must make plain: active, idle with the
/// cooldown running, paused, failing without a fallback, and served from fallback.
#[tokio::test]
async fn explain_shows_active_idle_paused_failing_and_fallback_objects() {
    let Some(s) = setup("explain_shows_active_idle_paused_failing_and_fallback_objects").await
    else {
        return;
    };
    let w = &s.w;
    // busy: 12 against a target of 5 -> active, the HPA computes ceil(12 / 5) = 3.
    s.dials.set("busy", 12.0);
    w.deployment("busy", 1).await;
    let busy = w.create(&dial_object("busy", "")).await;
    // quiet: active at first, then 0: idle, cooling down.
    s.dials.set("quiet", 3.0);
    w.deployment("quiet", 2).await;
    let quiet = w.create(&dial_object("quiet", "")).await;
    // held: paused at 2 replicas after its first polls.
    s.dials.set("held", 4.0);
    w.deployment("held", 1).await;
    let held = w.create(&dial_object("held", "")).await;
    // broken: its source is down and there is no fallback.
    s.dials.fail_on_read("broken", true);
    w.deployment("broken", 1).await;
    let broken = w.create(&dial_object("broken", "")).await;
    // degraded: its source is down; after more than 2 failures the fallback serves 4 replicas.
    s.dials.fail_on_read("degraded", true);
    w.deployment("degraded", 2).await;
    let degraded = w
        .create(&dial_object(
            "degraded",
            "  fallback:\n    failureThreshold: 2\n    replicas: 4",
        ))
        .await;

    let all = [&busy, &quiet, &held, &broken, &degraded];
    for so in all {
        w.polls_reach(&s.op, so, 1).await;
    }
    s.dials.set("quiet", 0.0);
    poll_all(&s, &all, 48).await;

    w.annotate("held", "autoscaling.keda.sh/paused-replicas", Some("2"))
        .await;
    eventually("held is paused", || async {
        let e = s.explain(ALICE, "held").await.ok()?;
        (e.state == ObjectState::Paused && !s.op.loops.is_running(NS, "held").await).then_some(())
    })
    .await;
    // One more poll at the same time: degraded's third failure passes the threshold.
    poll_all(&s, &[&busy, &quiet, &broken, &degraded], 0).await;

    let expected = [
        ("busy", ObjectState::Active),
        ("quiet", ObjectState::Cooldown),
        ("held", ObjectState::Paused),
        ("broken", ObjectState::Failing),
        ("degraded", ObjectState::Fallback),
    ];
    for (name, state) in expected {
        let e = s.explain(ALICE, name).await.expect("explanation");
        assert_eq!(e.state, state, "{name}: {}", e.reason);
        assert_outputs(name, &e);
    }
    let quiet = s.explain(ALICE, "quiet").await.expect("quiet");
    assert_eq!(
        quiet.reason,
        "idle: all triggers inactive, cooldown 4m12s left before scale to 0"
    );
    assert_eq!(quiet.cooldown.remaining_seconds, Some(252));
    s.stop().await;
}

/// Without a token, with one the API server does not accept, or as a user who may not `get`
/// the object, the endpoint refuses, and says nothing about whether the object exists.
#[tokio::test]
async fn explain_refuses_callers_who_may_not_get_the_object() {
    let Some(s) = setup("explain_refuses_callers_who_may_not_get_the_object").await else {
        return;
    };
    s.dials.set("app", 1.0);
    s.w.deployment("app", 1).await;
    let app = s.w.create(&dial_object("app", "")).await;
    s.w.polls_reach(&s.op, &app, 1).await;

    let status = |r: Result<Explanation, FetchError>| match r {
        Ok(_) => 200,
        Err(FetchError::Refused { status, .. }) => status,
        Err(other) => panic!("unexpected failure: {other}"),
    };
    assert_eq!(status(s.explain("", "app").await), 401, "no token");
    assert_eq!(
        status(s.explain("forged", "app").await),
        401,
        "unknown token"
    );
    assert_eq!(status(s.explain(MALLORY, "app").await), 403, "not allowed");
    assert_eq!(
        status(s.explain(MALLORY, "no-such-object").await),
        403,
        "a refused caller cannot probe for objects"
    );
    assert_eq!(status(s.explain(ALICE, "no-such-object").await), 404);
    let e = s.explain(ALICE, "app").await.expect("alice may");
    assert_eq!(e.state, ObjectState::Active, "{}", e.reason);
    s.stop().await;
}

/// What every hostile answer of [`hostile_metrics_api`] carries.
const MARKER: &str = "SECRET-MARKER-7f3a";

/// A metrics API on loopback that answers what an internal endpoint holds (issue 30, finding
/// 5): `/forbidden` a `403` whose body and media type carry [`MARKER`], `/string` a `200` whose
/// value at `v` is the marker. Returns its base URL; the server lives as long as the runtime.
async fn hostile_metrics_api() -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&head);
                let path = head.split_whitespace().nth(1).unwrap_or_default();
                let (status, media, body) = if path.starts_with("/forbidden") {
                    (
                        "403 Forbidden",
                        format!("text/{MARKER}"),
                        format!("<html>token={MARKER}</html>"),
                    )
                } else if path.starts_with("/string") {
                    (
                        "200 OK",
                        "application/json".to_string(),
                        format!(r#"{{"v": "{MARKER}"}}"#),
                    )
                } else {
                    ("404 Not Found", "text/plain".to_string(), String::new())
                };
                let answer = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: {media}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(answer.as_bytes()).await;
                let _ = conn.shutdown().await;
            });
        }
    });
    base
}

/// A ScaledObject `name` with one `metrics-api` trigger (named `name`-source) on `url`, reading
/// `valueLocation` `v`.
fn metrics_api_object(name: &str, url: &str) -> String {
    format!(
        r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: {name}
spec:
  scaleTargetRef:
    name: {name}
  pollingInterval: 30
  cooldownPeriod: 300
  maxReplicaCount: 10
  triggers:
    - type: metrics-api
      name: {name}-source
      metadata:
        url: {url}
        valueLocation: v
        targetValue: "5"
"#
    )
}

/// The notes of the Events on `name` with `reason`.
async fn event_notes(w: &World, name: &str, reason: &str) -> Vec<String> {
    let api: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(w.client.clone(), NS);
    api.list(&Default::default())
        .await
        .expect("list Events")
        .items
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                && e.reason.as_deref() == Some(reason)
        })
        .map(|e| e.note.unwrap_or_default())
        .collect()
}

/// Issue 30, finding 5, through the operator: a tenant's `metrics-api` trigger points at an
/// endpoint whose answer is a secret, (a) in a `403` body and media type, (b) as the string at
/// `valueLocation`. The secret is in no Event of the object (any reason), no status condition
/// and no explain answer (text and JSON); the `KEDAScalerFailed` Event, the explain answer and
/// the trigger's last error still name the trigger and the kind of failure. The scalers' own
/// test (`scalers/tests/hostile.rs` `metrics_api_never_quotes_the_answer`) checks the error's
/// messages; this one checks the paths from the error to what the tenant reads.
#[tokio::test]
async fn a_hostile_metrics_api_is_quoted_in_no_event_condition_or_explain_answer() {
    let Some(s) =
        setup("a_hostile_metrics_api_is_quoted_in_no_event_condition_or_explain_answer").await
    else {
        return;
    };
    let w = &s.w;
    let base = hostile_metrics_api().await;
    // (failure name, url, what the message says instead of the answer)
    let cases = [
        ("forbidden", format!("{base}/forbidden"), "403 Forbidden"),
        ("stringly", format!("{base}/string"), "a string"),
    ];
    let mut objects = Vec::new();
    for (name, url, _) in &cases {
        w.deployment(name, 1).await;
        objects.push(w.create(&metrics_api_object(name, url)).await);
    }
    for so in &objects {
        w.polls_reach(&s.op, so, 1).await;
    }
    // A second poll, so whatever repeats (Event series, conditions) has been written again.
    poll_all(&s, &objects.iter().collect::<Vec<_>>(), 30).await;

    for (name, _, kind) in &cases {
        let notes = eventually(&format!("a KEDAScalerFailed Event on {name}"), || async {
            let notes = event_notes(w, name, "KEDAScalerFailed").await;
            (!notes.is_empty()).then_some(notes)
        })
        .await;
        for note in &notes {
            assert!(
                note.contains("metrics-api") && note.contains(kind),
                "{name}: the Event names the trigger and the kind of failure: {note}"
            );
        }
        // Every Event about the object, whatever its reason.
        let api: kube::Api<k8s_openapi::api::events::v1::Event> =
            kube::Api::namespaced(w.client.clone(), NS);
        for e in api.list(&Default::default()).await.expect("Events").items {
            if e.regarding.as_ref().and_then(|r| r.name.as_deref()) != Some(*name) {
                continue;
            }
            let text = format!("{:?} {:?}", e.note, e.series);
            assert!(
                !text.contains(MARKER),
                "{name}: an Event quotes the source: {text}"
            );
        }
        // Every status condition (and the rest of the status).
        let so = w.get(name).await;
        let status = serde_json::to_string(&so.status).expect("status");
        assert!(
            !status.contains(MARKER),
            "{name}: the status quotes the source: {status}"
        );
        // explain, as text and as JSON.
        let e = s.explain(ALICE, name).await.expect("explanation");
        assert_eq!(e.state, ObjectState::Failing, "{name}: {}", e.reason);
        let text = render::text(&e);
        let json = serde_json::to_string(&e).expect("json");
        for shown in [&text, &json] {
            assert!(
                !shown.contains(MARKER),
                "{name}: explain quotes the source: {shown}"
            );
        }
        assert!(
            text.contains(&format!("{name}-source")) && text.contains(kind),
            "{name}: explain names the trigger and the kind of failure: {text}"
        );
    }
    s.stop().await;
}
