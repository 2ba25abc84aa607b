//! `kubectl get` against memkube prints what it prints against a real API server: memkube
//! answers kubectl's `Accept: application/json;as=Table;v=v1;g=meta.k8s.io,...` with a
//! `meta.k8s.io` Table, with keda-rs's CRDs' printer columns and the built-in kinds' columns.
//!
//! The requests are kubectl's own (its Accept header and `?limit=500`), in process and over a
//! loopback port; the last test runs the real `kubectl` when one is installed.

mod common;

use std::time::Duration;

use common::{Ctx, on_both_transports, within};
use memkube::MemKube;
use serde_json::{Value, json};

/// The Accept header `kubectl get` sends (kubectl 1.33).
const KUBECTL_ACCEPT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

fn crd_dir() -> String {
    format!("{}/../../config/crd", env!("CARGO_MANIFEST_DIR"))
}

fn hours_ago(hours: i64) -> String {
    let then = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(hours);
    then.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// What a cluster looks like after keda-rs scaled a Deployment, created two hours ago.
fn seed(server: &MemKube) {
    server
        .load_crds_from_dir(crd_dir())
        .expect("config/crd loads");
    let created = hours_ago(2);
    let objects = [
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "creationTimestamp": created},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "main", "image": "busybox"}]},
                },
            },
            "status": {"replicas": 3, "readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2},
        }),
        json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "keda-hpa-web", "namespace": "default", "creationTimestamp": created},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 1,
                "maxReplicas": 10,
                "metrics": [{"type": "External", "external": {
                    "metric": {"name": "s0-redis-jobs", "selector": {"matchLabels": {"scaledobject.keda.sh/name": "web"}}},
                    "target": {"type": "AverageValue", "averageValue": "5"},
                }}],
            },
            "status": {
                "currentReplicas": 3, "desiredReplicas": 4,
                "currentMetrics": [{"type": "External", "external": {
                    "metric": {"name": "s0-redis-jobs"}, "current": {"averageValue": "20"},
                }}],
            },
        }),
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-1", "namespace": "default", "creationTimestamp": created, "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "main", "image": "busybox"}], "nodeName": "node-1"},
            "status": {
                "phase": "Running", "podIPs": [{"ip": "10.0.0.7"}],
                "containerStatuses": [{"name": "main", "ready": true, "restartCount": 0, "state": {"running": {}}}],
            },
        }),
        json!({
            "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "metadata": {"name": "web", "namespace": "default", "creationTimestamp": created},
            "spec": {
                "scaleTargetRef": {"name": "web"},
                "minReplicaCount": 1,
                "maxReplicaCount": 10,
                "triggers": [{"type": "redis", "metadata": {"listName": "jobs"}, "authenticationRef": {"name": "redis-auth"}}],
            },
            "status": {
                "scaleTargetKind": "apps/v1.Deployment",
                "triggersTypes": "redis",
                "authenticationsTypes": "redis-auth",
                "conditions": [
                    {"type": "Ready", "status": "True"},
                    {"type": "Active", "status": "True"},
                    {"type": "Fallback", "status": "False"},
                ],
            },
        }),
        json!({
            "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledJob",
            "metadata": {"name": "worker", "namespace": "default", "creationTimestamp": created},
            "spec": {
                "jobTargetRef": {"template": {"spec": {"containers": [{"name": "w", "image": "busybox"}], "restartPolicy": "Never"}}},
                "maxReplicaCount": 5,
                "triggers": [{"type": "redis", "metadata": {"listName": "jobs"}}],
            },
            "status": {
                "triggersTypes": "redis",
                "conditions": [{"type": "Ready", "status": "True"}, {"type": "Active", "status": "False"}],
            },
        }),
        json!({
            "apiVersion": "keda.sh/v1alpha1", "kind": "TriggerAuthentication",
            "metadata": {"name": "redis-auth", "namespace": "default", "creationTimestamp": created},
            "spec": {
                "secretTargetRef": [
                    {"parameter": "password", "name": "redis-secret", "key": "password"},
                    {"parameter": "username", "name": "other-secret", "key": "user"},
                ],
                "env": [{"parameter": "host", "name": "REDIS_HOST"}],
            },
            "status": {"scaledobjects": "web"},
        }),
        json!({
            "apiVersion": "keda.sh/v1alpha1", "kind": "ClusterTriggerAuthentication",
            "metadata": {"name": "shared", "creationTimestamp": created},
            "spec": {
                "filePath": "redis.json",
                "hashiCorpVault": {"address": "https://vault:8200", "authentication": "token", "secrets": []},
            },
        }),
    ];
    for object in objects {
        server.seed(&object).expect("object seeds");
    }
}

async fn get(client: &kube::Client, uri: &str, accept: &str) -> Value {
    let request = http::Request::get(uri)
        .header(http::header::ACCEPT, accept)
        .body(Vec::new())
        .expect("request builds");
    let text = within(uri, client.request_text(request))
        .await
        .unwrap_or_else(|e| panic!("GET {uri}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("GET {uri} is not JSON ({e}): {text}"))
}

/// `(name, type, priority)` of each column.
fn columns(table: &Value) -> Vec<(String, String, i64)> {
    assert_eq!(table["kind"], "Table", "not a Table: {table}");
    table["columnDefinitions"]
        .as_array()
        .expect("columnDefinitions")
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap_or_default().to_string(),
                c["type"].as_str().unwrap_or_default().to_string(),
                c["priority"].as_i64().unwrap_or(0),
            )
        })
        .collect()
}

fn cols(spec: &[(&str, &str, i64)]) -> Vec<(String, String, i64)> {
    spec.iter()
        .map(|(n, t, p)| (n.to_string(), t.to_string(), *p))
        .collect()
}

fn cells(table: &Value, row: usize) -> Vec<Value> {
    table["rows"][row]["cells"]
        .as_array()
        .unwrap_or_else(|| panic!("no row {row} in {table}"))
        .clone()
}

#[tokio::test]
async fn custom_resources_are_tables_of_their_crd_s_printer_columns() {
    on_both_transports(
        |Ctx {
             server,
             client,
             transport,
         }| async move {
            seed(&server);
            let so = get(
                &client,
                "/apis/keda.sh/v1alpha1/namespaces/default/scaledobjects?limit=500",
                KUBECTL_ACCEPT,
            )
            .await;
            assert_eq!(so["apiVersion"], "meta.k8s.io/v1", "{transport}");
            assert_eq!(
                columns(&so),
                cols(&[
                    ("Name", "string", 0),
                    ("ScaleTargetKind", "string", 0),
                    ("ScaleTargetName", "string", 0),
                    ("Min", "integer", 0),
                    ("Max", "integer", 0),
                    ("Ready", "string", 0),
                    ("Active", "string", 0),
                    ("Fallback", "string", 0),
                    ("Paused", "string", 0),
                    ("Triggers", "string", 0),
                    ("Authentications", "string", 0),
                    ("Age", "date", 0),
                ]),
                "{transport}"
            );
            assert_eq!(
                cells(&so, 0),
                vec![
                    json!("web"),
                    json!("apps/v1.Deployment"),
                    json!("web"),
                    json!(1),
                    json!(10),
                    json!("True"),
                    json!("True"),
                    json!("False"),
                    Value::Null,
                    json!("redis"),
                    json!("redis-auth"),
                    json!("120m"),
                ],
                "{transport}"
            );
            // kubectl reads the namespace (for -A) and labels from the row's object.
            assert_eq!(so["rows"][0]["object"]["kind"], "PartialObjectMetadata");
            assert_eq!(so["rows"][0]["object"]["metadata"]["namespace"], "default");
            assert!(so["metadata"]["resourceVersion"].is_string());

            let sj = get(
                &client,
                "/apis/keda.sh/v1alpha1/namespaces/default/scaledjobs",
                KUBECTL_ACCEPT,
            )
            .await;
            assert_eq!(
                cells(&sj, 0),
                vec![
                    json!("worker"),
                    Value::Null,
                    json!(5),
                    json!("True"),
                    json!("False"),
                    Value::Null,
                    json!("redis"),
                    Value::Null,
                    json!("120m"),
                ]
            );

            // The first value a column's path selects, as the API server takes it: one Secret.
            let ta = get(
                &client,
                "/apis/keda.sh/v1alpha1/namespaces/default/triggerauthentications",
                KUBECTL_ACCEPT,
            )
            .await;
            assert_eq!(
                columns(&ta),
                cols(&[
                    ("Name", "string", 0),
                    ("PodIdentity", "string", 0),
                    ("Secret", "string", 0),
                    ("Env", "string", 0),
                    ("VaultAddress", "string", 0),
                    ("ScaledObjects", "string", 1),
                    ("ScaledJobs", "string", 1),
                ])
            );
            assert_eq!(
                cells(&ta, 0),
                vec![
                    json!("redis-auth"),
                    Value::Null,
                    json!("redis-secret"),
                    json!("REDIS_HOST"),
                    Value::Null,
                    json!("web"),
                    Value::Null
                ]
            );

            let cta = get(
                &client,
                "/apis/keda.sh/v1alpha1/clustertriggerauthentications/shared",
                KUBECTL_ACCEPT,
            )
            .await;
            assert_eq!(
                columns(&cta)
                    .iter()
                    .map(|c| c.0.as_str())
                    .collect::<Vec<_>>(),
                [
                    "Name",
                    "PodIdentity",
                    "Secret",
                    "Env",
                    "FilePath",
                    "VaultAddress",
                    "ScaledObjects",
                    "ScaledJobs"
                ]
            );
            assert_eq!(
                cells(&cta, 0)[4..6],
                [json!("redis.json"), json!("https://vault:8200")]
            );
        },
    )
    .await;
}

#[tokio::test]
async fn built_in_kinds_are_tables_of_kube_apiserver_s_columns() {
    on_both_transports(
        |Ctx {
             server,
             client,
             transport,
         }| async move {
            seed(&server);
            let deploy = get(
                &client,
                "/apis/apps/v1/namespaces/default/deployments?limit=500",
                KUBECTL_ACCEPT,
            )
            .await;
            assert_eq!(
                columns(&deploy),
                cols(&[
                    ("Name", "string", 0),
                    ("Ready", "string", 0),
                    ("Up-to-date", "string", 0),
                    ("Available", "string", 0),
                    ("Age", "string", 0),
                    ("Containers", "string", 1),
                    ("Images", "string", 1),
                    ("Selector", "string", 1),
                ]),
                "{transport}"
            );
            assert_eq!(
                cells(&deploy, 0),
                vec![
                    json!("web"),
                    json!("2/3"),
                    json!(3),
                    json!(2),
                    json!("120m"),
                    json!("main"),
                    json!("busybox"),
                    json!("app=web")
                ]
            );

            let hpa = get(
                &client,
                "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers",
                KUBECTL_ACCEPT,
            )
            .await;
            assert_eq!(
                columns(&hpa)
                    .iter()
                    .map(|c| c.0.as_str())
                    .collect::<Vec<_>>(),
                [
                    "Name",
                    "Reference",
                    "Targets",
                    "MinPods",
                    "MaxPods",
                    "Replicas",
                    "Age"
                ]
            );
            assert_eq!(
                cells(&hpa, 0),
                vec![
                    json!("keda-hpa-web"),
                    json!("Deployment/web"),
                    json!("20/5 (avg)"),
                    json!("1"),
                    json!(10),
                    json!(3),
                    json!("120m")
                ]
            );

            let pods = get(&client, "/api/v1/namespaces/default/pods", KUBECTL_ACCEPT).await;
            assert_eq!(
                columns(&pods)
                    .iter()
                    .map(|c| (c.0.as_str(), c.2))
                    .collect::<Vec<_>>(),
                [
                    ("Name", 0),
                    ("Ready", 0),
                    ("Status", 0),
                    ("Restarts", 0),
                    ("Age", 0),
                    ("IP", 1),
                    ("Node", 1),
                    ("Nominated Node", 1),
                    ("Readiness Gates", 1),
                ]
            );
            assert_eq!(
                cells(&pods, 0),
                vec![
                    json!("web-1"),
                    json!("1/1"),
                    json!("Running"),
                    json!("0"),
                    json!("120m"),
                    json!("10.0.0.7"),
                    json!("node-1"),
                    json!("<none>"),
                    json!("<none>")
                ]
            );

            // A kind without a printer of its own: NAME and CREATED AT.
            let crds = get(
                &client,
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                KUBECTL_ACCEPT,
            )
            .await;
            assert_eq!(
                columns(&crds),
                cols(&[("Name", "string", 0), ("Created At", "date", 0)])
            );
        },
    )
    .await;
}

#[tokio::test]
async fn the_table_version_and_the_row_object_follow_the_request() {
    on_both_transports(|Ctx { server, client, .. }| async move {
        seed(&server);
        let uri = "/apis/apps/v1/namespaces/default/deployments/web";
        let beta = get(
            &client,
            uri,
            "application/json;as=Table;v=v1beta1;g=meta.k8s.io",
        )
        .await;
        assert_eq!(beta["apiVersion"], "meta.k8s.io/v1beta1");
        assert_eq!(cells(&beta, 0)[0], "web");

        let none = get(
            &client,
            &format!("{uri}?includeObject=None"),
            KUBECTL_ACCEPT,
        )
        .await;
        assert!(none["rows"][0].get("object").is_none(), "{none}");
        let object = get(
            &client,
            &format!("{uri}?includeObject=Object"),
            KUBECTL_ACCEPT,
        )
        .await;
        assert_eq!(object["rows"][0]["object"]["kind"], "Deployment");

        // Plain JSON stays plain JSON; metadata-only views are unchanged.
        let plain = get(&client, uri, "application/json").await;
        assert_eq!(plain["kind"], "Deployment");
        let partial = get(
            &client,
            uri,
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        )
        .await;
        assert_eq!(partial["kind"], "PartialObjectMetadata");
    })
    .await;
}

#[tokio::test]
async fn a_table_watch_sends_one_row_per_event() {
    on_both_transports(
        |Ctx {
             server,
             client,
             transport,
         }| async move {
            seed(&server);
            let request = http::Request::get(
                "/apis/keda.sh/v1alpha1/namespaces/default/scaledobjects?watch=1&resourceVersion=0",
            )
            .header(http::header::ACCEPT, KUBECTL_ACCEPT)
            .body(Vec::new())
            .expect("request builds");
            let events = within("the watch opens", client.request_events::<Value>(request))
                .await
                .expect("watch");
            let mut events = std::pin::pin!(events);
            let event = within("a watch event", futures::StreamExt::next(&mut events))
                .await
                .expect("an event")
                .expect("a readable event");
            let kube::api::WatchEvent::Added(table) = event else {
                panic!("{transport}: not ADDED: {event:?}");
            };
            assert_eq!(table["kind"], "Table", "{transport}: {table}");
            assert_eq!(cells(&table, 0)[0], "web");
        },
    )
    .await;
}

#[tokio::test]
async fn a_crd_whose_printer_column_path_does_not_parse_is_refused() {
    let server = MemKube::new();
    let crd = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
    additionalPrinterColumns:
    - {name: Broken, type: string, jsonPath: ".spec.items[?(@.x=="}
"#;
    let error = server.load_crd_yaml(crd).expect_err("the CRD is refused");
    assert!(
        error
            .to_string()
            .contains("additionalPrinterColumns[0].jsonPath"),
        "{error}"
    );
}

/// `kubectl`, from `KUBECTL` or the PATH; `None` (the test skips) outside CI.
fn kubectl() -> Option<std::path::PathBuf> {
    let found = std::env::var_os("KUBECTL")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|dir| dir.join("kubectl"))
                    .find(|p| p.is_file())
            })
        });
    if found.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "kubectl is required in CI (install it, or set KUBECTL)"
        );
        eprintln!("skipped: no kubectl on PATH (set KUBECTL)");
    }
    found
}

/// The whitespace-separated words of the first line starting with `first`.
fn line_words(output: &str, first: &str) -> Vec<String> {
    output
        .lines()
        .find(|l| l.starts_with(first))
        .unwrap_or_else(|| panic!("no line starting with {first:?} in:\n{output}"))
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn kubectl_get_prints_the_columns_of_a_real_api_server() {
    let Some(kubectl) = kubectl() else {
        return;
    };
    let server = MemKube::new();
    seed(&server);
    let loopback = server.serve_loopback().await.expect("loopback");
    let dir = std::env::temp_dir().join(format!("memkube-kubectl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let kubeconfig = dir.join("kubeconfig");
    loopback.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let run = |args: &'static [&'static str]| {
        let mut command = tokio::process::Command::new(&kubectl);
        command
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(args)
            .env("HOME", &dir)
            .kill_on_drop(true);
        async move {
            let out = tokio::time::timeout(Duration::from_secs(60), command.output())
                .await
                .expect("kubectl finishes within 60 s")
                .expect("kubectl runs");
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(
                out.status.success(),
                "kubectl {args:?} failed: {}\n{stdout}",
                String::from_utf8_lossy(&out.stderr)
            );
            stdout
        }
    };
    let out = run(&["get", "so,sj,ta,cta,hpa,deploy,pods"]).await;
    let words = |first: &str| line_words(&out, first);
    let headers: Vec<Vec<String>> = out
        .lines()
        .filter(|l| l.starts_with("NAME "))
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect();
    let expect = |words: &[&str]| -> Vec<String> { words.iter().map(|w| w.to_string()).collect() };
    for header in [
        expect(&[
            "NAME",
            "SCALETARGETKIND",
            "SCALETARGETNAME",
            "MIN",
            "MAX",
            "READY",
            "ACTIVE",
            "FALLBACK",
            "PAUSED",
            "TRIGGERS",
            "AUTHENTICATIONS",
            "AGE",
        ]),
        expect(&[
            "NAME",
            "MIN",
            "MAX",
            "READY",
            "ACTIVE",
            "PAUSED",
            "TRIGGERS",
            "AUTHENTICATIONS",
            "AGE",
        ]),
        expect(&["NAME", "PODIDENTITY", "SECRET", "ENV", "VAULTADDRESS"]),
        expect(&[
            "NAME",
            "PODIDENTITY",
            "SECRET",
            "ENV",
            "FILEPATH",
            "VAULTADDRESS",
        ]),
        expect(&[
            "NAME",
            "REFERENCE",
            "TARGETS",
            "MINPODS",
            "MAXPODS",
            "REPLICAS",
            "AGE",
        ]),
        expect(&["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]),
        expect(&["NAME", "READY", "STATUS", "RESTARTS", "AGE"]),
    ] {
        assert!(headers.contains(&header), "no header {header:?} in:\n{out}");
    }
    assert_eq!(
        words("scaledobject.keda.sh/web"),
        expect(&[
            "scaledobject.keda.sh/web",
            "apps/v1.Deployment",
            "web",
            "1",
            "10",
            "True",
            "True",
            "False",
            "redis",
            "redis-auth",
            "120m"
        ])
    );
    assert_eq!(
        words("horizontalpodautoscaler.autoscaling/keda-hpa-web"),
        expect(&[
            "horizontalpodautoscaler.autoscaling/keda-hpa-web",
            "Deployment/web",
            "20/5",
            "(avg)",
            "1",
            "10",
            "3",
            "120m"
        ])
    );
    assert_eq!(
        words("deployment.apps/web"),
        expect(&["deployment.apps/web", "2/3", "3", "2", "120m"])
    );
    assert_eq!(
        words("pod/web-1"),
        expect(&["pod/web-1", "1/1", "Running", "0", "120m"])
    );

    // -o wide adds the priority-1 columns; -A the namespace from the rows' objects.
    let wide = run(&["get", "ta,deploy", "-o", "wide", "-A"]).await;
    let ta_header = wide
        .lines()
        .find(|l| l.contains("PODIDENTITY"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    assert_eq!(
        ta_header, "NAMESPACE NAME PODIDENTITY SECRET ENV VAULTADDRESS SCALEDOBJECTS SCALEDJOBS",
        "{wide}"
    );
    let deploy_header = wide
        .lines()
        .find(|l| l.contains("UP-TO-DATE"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    assert_eq!(
        deploy_header, "NAMESPACE NAME READY UP-TO-DATE AVAILABLE AGE CONTAINERS IMAGES SELECTOR",
        "{wide}"
    );
    assert_eq!(
        line_words(&wide, "default").first().map(String::as_str),
        Some("default")
    );

    // -w: the Table rows of the watch, under the same header.
    let mut watch = tokio::process::Command::new(&kubectl)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["get", "so", "-w"])
        .env("HOME", &dir)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("kubectl -w starts");
    let stdout = watch.stdout.take().expect("stdout");
    let seen = within("kubectl get -w prints the object", async {
        use tokio::io::AsyncBufReadExt;
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let mut seen = Vec::new();
        while let Some(line) = lines.next_line().await.expect("read") {
            let words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
            let done = words.first().is_some_and(|w| w == "web");
            seen.push(words);
            if done {
                break;
            }
        }
        seen
    })
    .await;
    assert_eq!(
        seen[0][..3],
        expect(&["NAME", "SCALETARGETKIND", "SCALETARGETNAME"])
    );
    assert_eq!(
        seen.last().cloned().unwrap_or_default(),
        expect(&[
            "web",
            "apps/v1.Deployment",
            "web",
            "1",
            "10",
            "True",
            "True",
            "False",
            "redis",
            "redis-auth",
            "120m"
        ])
    );
    drop(watch);
    std::fs::remove_dir_all(&dir).ok();
    drop(loopback);
}
