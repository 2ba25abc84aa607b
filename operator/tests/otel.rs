//! `--enable-opentelemetry-metrics` (issue 29, row 13): the real `keda-operator` binary exports
//! the series of its Prometheus endpoint over OTLP with KEDA's OpenTelemetry names and
//! attributes (`pkg/metricscollector/opentelemetry.go`), to a real OTLP receiver:
//! `scripts/otlp_receiver.py`, which decodes each request with the OpenTelemetry project's own
//! generated protobuf classes (PyPI `opentelemetry-proto`; `scripts/services.sh` installs it),
//! so a wrongly encoded request is refused there and these tests fail. Without the flag nothing
//! is sent, whatever the `OTEL_*` variables say.
//!
//! The receiver needs `python3` with `opentelemetry-proto` (and `grpcio` for the gRPC test):
//! missing, the tests are skipped with a message, and fail under `CI=true`.

mod common;
mod scenarios;

#[allow(dead_code)]
#[path = "../../scalers/tests/common/mod.rs"]
mod redis_common;

use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use common::binary::{Cluster, Operator, create_deployment, eventually, get};
use common::metrics_api::MetricsApi;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use keda_api::ScaledObject;
use kube::api::{Api, PostParams};
use memkube::MemKube;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const RECEIVER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/otlp_receiver.py");

/// The receiver process and every request it recorded.
struct Receiver {
    _child: Child,
    http_port: u16,
    grpc_port: Option<u16>,
    records: Arc<Mutex<Vec<Value>>>,
}

impl Receiver {
    /// Starts the receiver on free loopback ports (gRPC too with `grpc`), or `None` (skip)
    /// when python3 cannot import what it needs; under `CI=true` that fails the test.
    async fn start(test: &str, grpc: bool) -> Option<Receiver> {
        let imports = if grpc {
            "import opentelemetry.proto.collector.metrics.v1.metrics_service_pb2_grpc, grpc"
        } else {
            "import opentelemetry.proto.collector.metrics.v1.metrics_service_pb2"
        };
        let usable = std::process::Command::new("python3")
            .args(["-c", imports])
            .output()
            .is_ok_and(|o| o.status.success());
        if !usable {
            let what = if grpc {
                "python3 with the PyPI packages opentelemetry-proto and grpcio"
            } else {
                "python3 with the PyPI package opentelemetry-proto"
            };
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{test}: the OTLP receiver needs {what} (scripts/services.sh installs them)"
            );
            eprintln!("SKIP {test}: the OTLP receiver needs {what} (scripts/services.sh)");
            return None;
        }
        let mut command = Command::new("python3");
        command.args([RECEIVER, "--port", "0"]);
        if grpc {
            command.args(["--grpc-port", "0"]);
        }
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("the receiver starts");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("the receiver announces its ports")
            .expect("read")
            .expect("a first line");
        let listening: Value = serde_json::from_str(&first).expect("JSON");
        let port = |key: &str| listening[key].as_u64().and_then(|p| u16::try_from(p).ok());
        let http_port = port("listening").expect("HTTP port");
        let grpc_port = port("grpc");
        let records = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&records);
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(record) = serde_json::from_str::<Value>(&line) {
                    if record.get("error").is_some() {
                        println!("[receiver] REFUSED {line}");
                    }
                    sink.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(record);
                }
            }
        });
        Some(Receiver {
            _child: child,
            http_port,
            grpc_port,
            records,
        })
    }

    fn records(&self) -> Vec<Value> {
        self.records
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Requests refused as undecodable (none may be).
    fn refused(&self) -> Vec<Value> {
        self.records()
            .into_iter()
            .filter(|r| r.get("error").is_some())
            .collect()
    }

    /// The metrics of the last accepted request.
    fn last_metrics(&self) -> Vec<Value> {
        self.records()
            .iter()
            .rev()
            .find(|r| r.get("request").is_some())
            .map(metrics_of)
            .unwrap_or_default()
    }
}

/// Every metric of one recorded request (all resources and scopes).
fn metrics_of(record: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    for rm in record["request"]["resourceMetrics"]
        .as_array()
        .into_iter()
        .flatten()
    {
        for sm in rm["scopeMetrics"].as_array().into_iter().flatten() {
            assert_eq!(sm["scope"]["name"], "keda-open-telemetry-metrics");
            out.extend(sm["metrics"].as_array().into_iter().flatten().cloned());
        }
    }
    out
}

fn metric<'a>(metrics: &'a [Value], name: &str) -> Option<&'a Value> {
    metrics.iter().find(|m| m["name"] == name)
}

/// A data point's attributes as `key=value` strings, sorted.
fn attributes(point: &Value) -> Vec<String> {
    let mut out: Vec<String> = point["attributes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|kv| {
            let v = &kv["value"];
            let value = v["stringValue"]
                .as_str()
                .map(str::to_string)
                .or_else(|| v["boolValue"].as_bool().map(|b| b.to_string()))
                .unwrap_or_else(|| v.to_string());
            format!("{}={value}", kv["key"].as_str().unwrap_or_default())
        })
        .collect();
    out.sort();
    out
}

fn points<'a>(metric: &'a Value, data: &str) -> Vec<&'a Value> {
    metric[data]["dataPoints"]
        .as_array()
        .into_iter()
        .flatten()
        .collect()
}

/// The labels and value of the first Prometheus series `name{...}` in `text`.
fn prometheus_series(text: &str, name: &str) -> Option<(Vec<(String, String)>, f64)> {
    let line = text.lines().find(|l| l.starts_with(&format!("{name}{{")))?;
    let (labels, value) = line[name.len() + 1..].rsplit_once("} ")?;
    let labels = labels
        .split("\",")
        .filter_map(|kv| {
            let (k, v) = kv.split_once("=\"")?;
            Some((k.to_string(), v.trim_end_matches('"').to_string()))
        })
        .collect();
    Some((labels, value.trim().parse().ok()?))
}

/// memkube with KEDA's CRDs, Deployment `apps/worker` at 1, and a ScaledObject on it whose
/// `metrics-api` trigger reads `api` every second.
async fn cluster_with_scaled_object(test: &str, api: &MetricsApi) -> Cluster {
    let server = MemKube::new();
    server.create_namespace("keda").expect("namespace");
    server.create_namespace("apps").expect("namespace");
    server
        .load_crds_from_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../config/crd"))
        .expect("CRDs load");
    let cluster = Cluster::serve(server, test).await;
    let client = cluster.server.client();
    create_deployment(&client, "apps", "worker", 1).await;
    let so: ScaledObject = serde_yaml::from_str(&format!(
        r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {{ name: worker, namespace: apps }}
spec:
  scaleTargetRef: {{ name: worker }}
  pollingInterval: 1
  triggers:
    - type: metrics-api
      metadata:
        url: {url}
        valueLocation: queue.depth
        targetValue: "5"
"#,
        url = api.url()
    ))
    .expect("ScaledObject");
    Api::<ScaledObject>::namespaced(client, "apps")
        .create(&PostParams::default(), &so)
        .await
        .expect("create ScaledObject");
    cluster
}

async fn start_operator(
    cluster: &Cluster,
    pod: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Operator {
    let mut all_env = vec![("POD_NAME", pod), ("POD_NAMESPACE", "keda")];
    all_env.extend_from_slice(env);
    let mut all_args = vec![
        "--metrics-service-bind-address",
        "0",
        "--explain-bind-address",
        "0",
    ];
    all_args.extend_from_slice(args);
    let operator = Operator::start(cluster, pod, &all_args, &all_env).await;
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(cluster.server.client(), "apps");
    eventually(
        "the HPA keda-hpa-worker exists",
        Duration::from_secs(20),
        || async { matches!(hpas.get_opt("keda-hpa-worker").await, Ok(Some(_))) },
    )
    .await;
    operator
}

/// The per-scaler series of one ScaledObject as KEDA's OTel collector names them: what the
/// Prometheus endpoint says, with `scaledObject`, `scalerIndex` (not `triggerIndex`) and no
/// `type`.
fn scaler_attributes(prom: &[(String, String)]) -> Vec<String> {
    let label = |k: &str| {
        prom.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let mut out = vec![
        format!("metric={}", label("metric")),
        format!("namespace={}", label("namespace")),
        format!("scaledObject={}", label("scaledObject")),
        format!("scaler={}", label("scaler")),
        format!("scalerIndex={}", label("triggerIndex")),
    ];
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_flag_exports_kedas_otel_series_over_otlp_http_to_a_real_receiver() {
    let test = "otel-http";
    let Some(receiver) = Receiver::start(test, false).await else {
        return;
    };
    let api = MetricsApi::start(7.0).await;
    let cluster = cluster_with_scaled_object(test, &api).await;
    let endpoint = format!("http://127.0.0.1:{}", receiver.http_port);
    let mut operator = start_operator(
        &cluster,
        "operator-otel",
        &["--enable-opentelemetry-metrics=true"],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_METRIC_EXPORT_INTERVAL", "300"),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=team%20a"),
            ("OTEL_SERVICE_NAME", "keda-operator"),
        ],
    )
    .await;

    // The scale loop's value reaches the receiver as keda.scaler.metrics.value.
    eventually(
        "the receiver gets keda.scaler.metrics.value = 7",
        Duration::from_secs(30),
        || async {
            metric(&receiver.last_metrics(), "keda.scaler.metrics.value").is_some_and(|m| {
                points(m, "gauge")
                    .iter()
                    .any(|p| p["asDouble"].as_f64() == Some(7.0))
            })
        },
    )
    .await;
    assert_eq!(
        receiver.refused(),
        Vec::<Value>::new(),
        "undecodable requests"
    );

    let records = receiver.records();
    let record = records
        .iter()
        .rev()
        .find(|r| r.get("request").is_some())
        .expect("a request");
    assert_eq!(record["path"], "/v1/metrics");
    assert_eq!(record["encoding"], "gzip");
    assert_eq!(record["headers"]["x-tenant"], "team a");
    assert_eq!(record["headers"]["content-type"], "application/x-protobuf");
    let resource = attributes(&record["request"]["resourceMetrics"][0]["resource"]);
    assert!(
        resource.contains(&"service.name=keda-operator".to_string()),
        "{resource:?}"
    );

    // The same series as the Prometheus endpoint, under KEDA's OTel names and attributes.
    let (status, text) = get(operator.metrics, "/metrics").await;
    assert_eq!(status, 200);
    let (prom_labels, prom_value) =
        prometheus_series(&text, "keda_scaler_metrics_value").expect("Prometheus series");
    assert_eq!(prom_value, 7.0);
    let expected = scaler_attributes(&prom_labels);
    assert!(expected.contains(&"namespace=apps".to_string()));
    assert!(expected.contains(&"scaledObject=worker".to_string()));
    assert!(expected.contains(&"scalerIndex=0".to_string()));
    assert!(expected.contains(&"metric=s0-metric-api-queue-depth".to_string()));

    let metrics = metrics_of(record);
    let value = metric(&metrics, "keda.scaler.metrics.value").expect("value");
    assert_eq!(
        value["description"],
        "The current value for each scaler's metric that would be used by the HPA in computing the target average"
    );
    let value_points = points(value, "gauge");
    assert_eq!(attributes(value_points[0]), expected);

    let active = metric(&metrics, "keda.scaler.active").expect("active");
    assert_eq!(attributes(points(active, "gauge")[0]), expected);
    assert_eq!(points(active, "gauge")[0]["asDouble"].as_f64(), Some(1.0));

    let latency = metric(&metrics, "keda.scaler.metrics.latency.seconds").expect("latency");
    assert_eq!(latency["unit"], "s");
    assert_eq!(attributes(points(latency, "gauge")[0]), expected);
    assert!(metric(&metrics, "keda.scaler.metrics.latency").is_some());

    let build = metric(&metrics, "keda.build.info").expect("build info");
    let build_point = points(build, "gauge")[0];
    assert_eq!(build_point["asInt"], "1");
    assert!(
        attributes(build_point)
            .iter()
            .any(|a| a.starts_with("version=")),
        "{build_point}"
    );

    let triggers = metric(&metrics, "keda.trigger.registered.count").expect("triggers");
    assert_eq!(
        triggers["sum"]["isMonotonic"],
        Value::Null,
        "an up-down counter"
    );
    assert_eq!(
        triggers["sum"]["aggregationTemporality"],
        "AGGREGATION_TEMPORALITY_CUMULATIVE"
    );
    let trigger_point = points(triggers, "sum")[0];
    assert_eq!(
        attributes(trigger_point),
        vec!["type=metrics-api".to_string()]
    );
    assert_eq!(trigger_point["asInt"], "1");

    let resources = metric(&metrics, "keda.resource.registered.count").expect("resources");
    assert!(
        points(resources, "sum")
            .iter()
            .any(|p| attributes(p) == ["namespace=apps", "type=scaled_object"]),
        "{resources}"
    );

    let requests = metric(&metrics, "keda.scaler.http.requests.count").expect("http requests");
    assert_eq!(requests["sum"]["isMonotonic"], true);
    let request_point = points(requests, "sum")[0];
    assert!(
        attributes(request_point).contains(&"status_code=200".to_string()),
        "{request_point}"
    );
    assert!(request_point["asInt"].as_str().is_some_and(|n| n != "0"));

    // Nothing else than KEDA's OTel instruments (no client or metric service series).
    for m in &metrics {
        let name = m["name"].as_str().unwrap_or_default();
        assert!(name.starts_with("keda."), "{name}");
    }

    // A new value is exported at the next interval.
    api.set(3.0);
    eventually(
        "the receiver gets keda.scaler.metrics.value = 3",
        Duration::from_secs(30),
        || async {
            metric(&receiver.last_metrics(), "keda.scaler.metrics.value").is_some_and(|m| {
                points(m, "gauge")
                    .iter()
                    .any(|p| p["asDouble"].as_f64() == Some(3.0))
            })
        },
    )
    .await;
    assert!(operator.terminate().await.success());
    assert_eq!(
        receiver.refused(),
        Vec::<Value>::new(),
        "undecodable requests"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_flag_nothing_is_sent_whatever_otel_variables_say() {
    let test = "otel-off";
    let Some(receiver) = Receiver::start(test, false).await else {
        return;
    };
    let api = MetricsApi::start(7.0).await;
    let cluster = cluster_with_scaled_object(test, &api).await;
    let endpoint = format!("http://127.0.0.1:{}", receiver.http_port);
    let mut operator = start_operator(
        &cluster,
        "operator-no-otel",
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_METRIC_EXPORT_INTERVAL", "100"),
        ],
    )
    .await;
    // The loop runs (its value is on /metrics) for many export intervals.
    eventually("the scale loop read 7", Duration::from_secs(20), || async {
        let (_, text) = get(operator.metrics, "/metrics").await;
        prometheus_series(&text, "keda_scaler_metrics_value").is_some_and(|(_, v)| v == 7.0)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(operator.terminate().await.success());
    assert_eq!(receiver.records(), Vec::<Value>::new());
    assert!(operator.logged("exporting OpenTelemetry").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn otlp_grpc_as_keda_selects_it_with_otel_exporter_otlp_protocol() {
    let test = "otel-grpc";
    let Some(receiver) = Receiver::start(test, true).await else {
        return;
    };
    let grpc_port = receiver.grpc_port.expect("gRPC port");
    let api = MetricsApi::start(4.0).await;
    let cluster = cluster_with_scaled_object(test, &api).await;
    let endpoint = format!("http://127.0.0.1:{grpc_port}");
    let mut operator = start_operator(
        &cluster,
        "operator-otel-grpc",
        &["--enable-opentelemetry-metrics"],
        &[
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=b"),
            ("OTEL_METRIC_EXPORT_INTERVAL", "300"),
        ],
    )
    .await;
    eventually(
        "the receiver gets keda.scaler.metrics.value = 4 over gRPC",
        Duration::from_secs(30),
        || async {
            metric(&receiver.last_metrics(), "keda.scaler.metrics.value").is_some_and(|m| {
                points(m, "gauge")
                    .iter()
                    .any(|p| p["asDouble"].as_f64() == Some(4.0))
            })
        },
    )
    .await;
    let records = receiver.records();
    let last = records.last().expect("a record");
    assert_eq!(last["transport"], "grpc");
    assert_eq!(last["headers"]["x-tenant"], "b");
    assert!(operator.terminate().await.success());
}
