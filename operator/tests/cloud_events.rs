//! CloudEventSource and ClusterCloudEventSource (issue 16): the operator's events sent as
//! CloudEvents to HTTP sinks the tests run on loopback, against memkube.

mod common;
mod scenarios;

#[allow(dead_code)]
#[path = "../../scalers/tests/common/mod.rs"]
mod redis_common;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::world::{NS, becomes_ready, dial_object, dial_world, not_ready};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use keda_api::ScaledObject;
use keda_api::cloud_event_source::{CloudEventSource, ClusterCloudEventSource};
use keda_operator::cloud_events::{self, CloudEvents, EmitterConfig, EmitterMetrics};
use kube::api::{Api, PostParams};
use scenarios::{World, eventually};
use tokio_util::sync::CancellationToken;

/// One request a sink received: its `ce-*` and content-type headers and its body.
#[derive(Clone, Debug)]
struct Received {
    headers: Vec<(String, String)>,
    body: serde_json::Value,
}

impl Received {
    fn header(&self, name: &str) -> &str {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map_or("", |(_, v)| v.as_str())
    }
}

/// A CloudEvents sink on loopback that records every request and answers `status`.
struct Sink {
    addr: SocketAddr,
    received: Arc<Mutex<Vec<Received>>>,
    status: Arc<AtomicU16>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Sink {
    async fn start() -> Sink {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let received = Arc::new(Mutex::new(Vec::new()));
        let status = Arc::new(AtomicU16::new(202));
        let task = {
            let (received, status) = (received.clone(), status.clone());
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let (received, status) = (received.clone(), status.clone());
                    let service =
                        service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                            let (received, status) = (received.clone(), status.clone());
                            async move {
                                let headers = request
                                    .headers()
                                    .iter()
                                    .filter(|(n, _)| {
                                        n.as_str().starts_with("ce-")
                                            || n.as_str() == "content-type"
                                    })
                                    .map(|(n, v)| {
                                        (n.to_string(), v.to_str().unwrap_or_default().to_string())
                                    })
                                    .collect();
                                let bytes = request
                                    .into_body()
                                    .collect()
                                    .await
                                    .map(|b| b.to_bytes())
                                    .unwrap_or_default();
                                let body = serde_json::from_slice(&bytes)
                                    .unwrap_or(serde_json::Value::Null);
                                received
                                    .lock()
                                    .expect("lock")
                                    .push(Received { headers, body });
                                let mut answer = hyper::Response::new(Full::new(Bytes::new()));
                                *answer.status_mut() =
                                    hyper::StatusCode::from_u16(status.load(Ordering::SeqCst))
                                        .expect("status");
                                Ok::<_, Infallible>(answer)
                            }
                        });
                    tokio::spawn(
                        hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service),
                    );
                }
            })
        };
        Sink {
            addr,
            received,
            status,
            task,
        }
    }

    fn uri(&self) -> String {
        format!("http://{}/events", self.addr)
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().expect("lock").clone()
    }

    /// The requests of type `event_type`.
    fn of_type(&self, event_type: &str) -> Vec<Received> {
        self.received()
            .into_iter()
            .filter(|r| r.header("ce-type") == event_type)
            .collect()
    }
}

/// The emitter, as the operator's leader runs it, for the namespaces `namespaces`; stopped when
/// the token is cancelled.
fn start_emitter(
    w: &World,
    namespaces: &[&str],
    input: cloud_events::CloudEventInput,
) -> CancellationToken {
    let config = EmitterConfig {
        scope: keda_operator::config::WatchScope::Namespaces(
            namespaces.iter().map(|n| n.to_string()).collect(),
        ),
        send_timeout: Duration::from_secs(2),
        first_retry: Duration::from_millis(20),
        ..EmitterConfig::new("keda")
    };
    let stop = CancellationToken::new();
    tokio::spawn(cloud_events::run(
        w.client.clone(),
        config,
        input,
        EmitterMetrics::registered(&w.metrics),
        stop.clone(),
    ));
    stop
}

async fn create<K>(api: &Api<K>, yaml: &str) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let object: K = serde_yaml::from_str(yaml).expect("object parses");
    api.create(&PostParams::default(), &object)
        .await
        .expect("create")
}

/// The `Active` condition of a source: (status, reason, message).
async fn active(api: &Api<CloudEventSource>, name: &str) -> Option<(String, String, String)> {
    let source = api.get(name).await.ok()?;
    let conditions = source.status?.conditions;
    let c = conditions.into_iter().find(|c| c.type_ == "Active")?;
    Some((
        c.status,
        c.reason.unwrap_or_default(),
        c.message.unwrap_or_default(),
    ))
}

async fn becomes_active(api: &Api<CloudEventSource>, name: &str, status: &str) -> (String, String) {
    let (_, reason, message) = eventually(&format!("Active={status} on {name}"), || async {
        active(api, name).await.filter(|(s, _, _)| s == status)
    })
    .await;
    (reason, message)
}

/// A ScaledObject `name` in [`NS`], as the reconciler would publish an event on it.
fn object(name: &str) -> ScaledObject {
    let so: ScaledObject = serde_yaml::from_str(&dial_object(name, 3)).expect("parses");
    ScaledObject {
        metadata: kube::api::ObjectMeta {
            namespace: Some(NS.to_string()),
            ..so.metadata
        },
        ..so
    }
}

fn source_yaml(name: &str, namespace: &str, uri: &str, extra: &str) -> String {
    format!(
        "apiVersion: eventing.keda.sh/v1alpha1
kind: CloudEventSource
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  destination:
    http:
      uri: {uri}
{extra}"
    )
}

/// The operator's ScaledObject events reach the sources that cover the object's namespace and
/// accept the type, with KEDA's attributes (binary content mode): a namespace's source gets its
/// own namespace's events only; a ClusterCloudEventSource every namespace's, filtered by its
/// `includedEventTypes`.
#[tokio::test]
async fn scaled_object_events_reach_the_matching_sources_with_keda_s_attributes() {
    let Some((server, w, _dials)) = dial_world("cloud-events-attributes").await else {
        return;
    };
    server.create_namespace("other").expect("namespace");
    let (handle, input) = CloudEvents::channel();
    let w = World {
        cloud_events: handle,
        ..w
    };
    let team_sink = Sink::start().await;
    let other_sink = Sink::start().await;
    let cluster_sink = Sink::start().await;
    let team_sources: Api<CloudEventSource> = Api::namespaced(w.client.clone(), NS);
    let other_sources: Api<CloudEventSource> = Api::namespaced(w.client.clone(), "other");
    create(
        &team_sources,
        &source_yaml("team-events", NS, &team_sink.uri(), "  clusterName: prod\n"),
    )
    .await;
    create(
        &other_sources,
        &source_yaml("other-events", "other", &other_sink.uri(), ""),
    )
    .await;
    let clusters: Api<ClusterCloudEventSource> = Api::all(w.client.clone());
    create(
        &clusters,
        &format!(
            "apiVersion: eventing.keda.sh/v1alpha1
kind: ClusterCloudEventSource
metadata: {{name: failures}}
spec:
  destination: {{http: {{uri: '{}'}}}}
  eventSubscription:
    includedEventTypes: [keda.scaledobject.failed.v1]
",
            cluster_sink.uri()
        ),
    )
    .await;
    let stop = start_emitter(&w, &[NS, "other"], input);
    let (reason, message) = becomes_active(&team_sources, "team-events", "True").await;
    assert_eq!(reason, "CloudEventSourceActive");
    assert_eq!(
        message,
        "Is configured to send events to the configured destination"
    );

    w.deployment("web", 0).await;
    let op = w.start_operator();
    w.create(&dial_object("web", 3)).await;
    becomes_ready(&w, "web").await;
    let ready = eventually("keda.scaledobject.ready.v1 at the team's sink", || async {
        team_sink
            .of_type("keda.scaledobject.ready.v1")
            .into_iter()
            .next()
    })
    .await;
    assert_eq!(ready.header("ce-specversion"), "1.0");
    assert_eq!(ready.header("ce-source"), "/prod/keda/keda");
    assert_eq!(ready.header("ce-subject"), "/prod/team/scaledobject/web");
    assert_eq!(ready.header("content-type"), "application/json");
    assert!(!ready.header("ce-id").is_empty(), "{ready:?}");
    assert!(
        ready.header("ce-time").parse::<jiff::Timestamp>().is_ok(),
        "{ready:?}"
    );
    assert_eq!(ready.body["reason"], "ScaledObjectReady");
    assert!(
        ready.body["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{ready:?}"
    );

    // An object that fails its checks: KEDA's failed type, to the team's source and to the
    // cluster source that only takes that type (with the default cluster name).
    let broken: ScaledObject = w
        .create(
            "apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: broken}
spec:
  scaleTargetRef: {name: web}
  minReplicaCount: 5
  maxReplicaCount: 2
  triggers: [{type: dial, metadata: {dial: broken}}]
",
        )
        .await;
    assert_eq!(broken.metadata.name.as_deref(), Some("broken"));
    not_ready(&w, "broken").await;
    let failed = eventually(
        "keda.scaledobject.failed.v1 at the cluster sink",
        || async {
            cluster_sink
                .of_type("keda.scaledobject.failed.v1")
                .into_iter()
                .next()
        },
    )
    .await;
    assert_eq!(
        failed.header("ce-subject"),
        "/kubernetes-default/team/scaledobject/broken"
    );
    assert_eq!(failed.header("ce-source"), "/kubernetes-default/keda/keda");
    assert_eq!(failed.body["reason"], "ScaledObjectCheckFailed");
    eventually("keda.scaledobject.failed.v1 at the team's sink", || async {
        (!team_sink.of_type("keda.scaledobject.failed.v1").is_empty()).then_some(())
    })
    .await;

    // Nothing of another type reached the cluster source, nothing of namespace `team` the
    // other namespace's source.
    assert!(
        cluster_sink
            .received()
            .iter()
            .all(|r| r.header("ce-type") == "keda.scaledobject.failed.v1"),
        "{:?}",
        cluster_sink.received()
    );
    assert!(
        other_sink.received().is_empty(),
        "{:?}",
        other_sink.received()
    );
    let metrics = w.metrics.encode();
    assert!(
        metrics.contains(
            r#"keda_cloudeventsource_events_emitted_total{namespace="team",cloudeventsource="team-events",eventsink="http",state="emitted"}"#
        ),
        "{metrics}"
    );
    op.stop().await;
    stop.cancel();
}

/// A sink that refuses every try of an event makes its source `Active=False` with KEDA's
/// reason after 5 tries of that event (one CloudEvent id); the first event it accepts again
/// makes it `Active=True`.
#[tokio::test]
async fn a_sink_that_refuses_an_event_five_times_makes_its_source_inactive_until_it_accepts() {
    let Some((_server, w, _dials)) = dial_world("cloud-events-failing").await else {
        return;
    };
    let (handle, input) = CloudEvents::channel();
    let sink = Sink::start().await;
    sink.status.store(500, Ordering::SeqCst);
    let sources: Api<CloudEventSource> = Api::namespaced(w.client.clone(), NS);
    create(&sources, &source_yaml("events", NS, &sink.uri(), "")).await;
    let stop = start_emitter(&w, &[NS], input);
    becomes_active(&sources, "events", "True").await;

    let so = object("web");
    handle.emit(
        &so,
        "ScaledObjectReady",
        "ScaledObject is ready for scaling",
    );
    let (reason, message) = becomes_active(&sources, "events", "False").await;
    assert_eq!(reason, "CloudEventSourceFailed");
    assert_eq!(
        message,
        "Failed to send events to the configured destination"
    );
    let tries = sink.received();
    assert_eq!(tries.len(), 5, "{tries:?}");
    assert!(
        tries
            .iter()
            .all(|t| t.header("ce-id") == tries[0].header("ce-id")),
        "the tries of one event share its id: {tries:?}"
    );
    assert!(
        w.metrics.encode().contains(
            r#"keda_cloudeventsource_events_emitted_total{namespace="team",cloudeventsource="events",eventsink="http",state="failed"} 5"#
        ),
        "{}",
        w.metrics.encode()
    );

    // A reason KEDA does not send as a CloudEvent is not sent.
    handle.emit(&so, "KEDAScalersStarted", "Started scalers watch");
    sink.status.store(204, Ordering::SeqCst);
    handle.emit(&so, "ScaledObjectPaused", "ScaledObject is paused");
    becomes_active(&sources, "events", "True").await;
    let after: Vec<String> = sink.received()[5..]
        .iter()
        .map(|r| r.header("ce-type").to_string())
        .collect();
    assert_eq!(after, vec!["keda.scaledobject.paused.v1".to_string()]);

    // Failing again, then edited (a new generation, as after fixing the URI): Active again at
    // once, without waiting for an event.
    sink.status.store(503, Ordering::SeqCst);
    handle.emit(&so, "ScaledObjectUnpaused", "ScaledObject is unpaused");
    becomes_active(&sources, "events", "False").await;
    let mut edited = sources.get("events").await.expect("get");
    edited.spec.cluster_name = "prod".to_string();
    sources
        .replace("events", &PostParams::default(), &edited)
        .await
        .expect("replace");
    becomes_active(&sources, "events", "True").await;
    stop.cancel();
}

/// A source keda-rs cannot send with is `Active=False` with a message naming the field, and is
/// sent nothing: both subscription lists (KEDA's admission message), Azure Event Grid.
#[tokio::test]
async fn a_source_that_cannot_be_used_says_why_in_its_active_condition() {
    let Some((_server, w, _dials)) = dial_world("cloud-events-invalid").await else {
        return;
    };
    let (handle, input) = CloudEvents::channel();
    let sink = Sink::start().await;
    let sources: Api<CloudEventSource> = Api::namespaced(w.client.clone(), NS);
    create(
        &sources,
        &source_yaml(
            "both",
            NS,
            &sink.uri(),
            "  eventSubscription:
    includedEventTypes: [keda.scaledobject.ready.v1]
    excludedEventTypes: [keda.scaledobject.failed.v1]
",
        ),
    )
    .await;
    create(
        &sources,
        &format!(
            "apiVersion: eventing.keda.sh/v1alpha1
kind: CloudEventSource
metadata: {{name: grid, namespace: {NS}}}
spec:
  destination:
    azureEventGridTopic: {{endpoint: 'https://topic.westeurope-1.eventgrid.azure.net/api/events'}}
"
        ),
    )
    .await;
    let stop = start_emitter(&w, &[NS], input);
    let (reason, message) = becomes_active(&sources, "both", "False").await;
    assert_eq!(reason, "CloudEventSourceInvalid");
    assert_eq!(
        message,
        "setting included types and excluded types at the same time is not supported"
    );
    let (reason, message) = becomes_active(&sources, "grid", "False").await;
    assert_eq!(reason, "CloudEventSourceInvalid");
    assert!(
        message
            .starts_with("spec.destination.azureEventGridTopic: Azure Event Grid is not supported"),
        "{message}"
    );
    let good_sink = Sink::start().await;
    create(&sources, &source_yaml("good", NS, &good_sink.uri(), "")).await;
    becomes_active(&sources, "good", "True").await;
    handle.emit(&object("web"), "ScaledObjectReady", "ready");
    // The event is given to every source at once: when the valid one has it, the others
    // were passed over.
    eventually("the event at the valid source's sink", || async {
        (!good_sink.received().is_empty()).then_some(())
    })
    .await;
    assert!(sink.received().is_empty(), "{:?}", sink.received());
    stop.cancel();
}

/// `keda_resource_registered_total{type="cloudevent_source"}` (issue 29, row 7): KEDA's
/// CloudEventSource and ClusterCloudEventSource controllers count each source in its namespace
/// (a cluster source in `default`) and stop counting it when it is deleted.
#[tokio::test]
async fn cloud_event_sources_are_counted_in_keda_resource_registered_total() {
    let Some((_server, w, _dials)) = dial_world("cloud-events-registered").await else {
        return;
    };
    let (_handle, input) = CloudEvents::channel();
    let stop = start_emitter(&w, &[NS], input);
    let sink = Sink::start().await;
    let sources: Api<CloudEventSource> = Api::namespaced(w.client.clone(), NS);
    create(&sources, &source_yaml("counted", NS, &sink.uri(), "")).await;
    let clusters: Api<ClusterCloudEventSource> = Api::all(w.client.clone());
    create(
        &clusters,
        &format!(
            "apiVersion: eventing.keda.sh/v1alpha1
kind: ClusterCloudEventSource
metadata: {{name: counted-cluster}}
spec:
  destination: {{http: {{uri: '{}'}}}}
",
            sink.uri()
        ),
    )
    .await;
    let count = |ns: &'static str| {
        let text = w.metrics.encode();
        text.lines()
            .find(|l| {
                l.starts_with("keda_resource_registered_total{")
                    && l.contains("type=\"cloudevent_source\"")
                    && l.contains(&format!("namespace=\"{ns}\""))
            })
            .and_then(|l| l.rsplit(' ').next()?.parse::<i64>().ok())
    };
    eventually("both sources counted", || async {
        (count(NS) == Some(1) && count("default") == Some(1)).then_some(())
    })
    .await;
    sources
        .delete("counted", &Default::default())
        .await
        .expect("delete");
    eventually("the deleted source no longer counted", || async {
        (count(NS) == Some(0)).then_some(())
    })
    .await;
    assert_eq!(count("default"), Some(1));
    stop.cancel();
}
