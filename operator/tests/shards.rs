//! Shards that need no configuration (issue 25), on memkube served over loopback: real
//! `keda-operator` processes with `--shards=auto` (short leases: 7 s duration, 5 s renew
//! deadline, 1 s retry; shorter ones make a loaded 2-core machine miss renew deadlines), and
//! two real `keda-metrics-apiserver` processes with `--operator-shards` reading the same
//! Leases.
//!
//! Every operator has its own kubeconfig whose bearer token names it, and memkube logs every
//! write with its token: so each `/scale` write is known by its writer. A writer of the test
//! sets every target back to 0 replicas all the time, so the owner of each (active) object
//! writes `/scale` 0 -> 1 at nearly every poll: two replicas writing for one object would show.
//!
//! Every object's metric is read through both metrics-apiservers over HTTPS as the
//! kube-apiserver aggregator sends the HPA's reads: verb `list` on
//! `/apis/external.metrics.k8s.io/v1beta1/namespaces/<ns>/<metric>?labelSelector=...`, with the
//! front proxy's client certificate and the HPA controller's identity in the request headers,
//! which memkube's SubjectAccessReview policy allows (and nothing else). Their
//! `--metrics-service-address`, asked when no replica can answer, is a port where nothing
//! listens: every answer comes through the routing. Two readers (one per metrics-apiserver)
//! keep reading every object while a replica joins and while one is killed.

#[path = "common/binary.rs"]
mod binary;

#[path = "common/aggregator.rs"]
mod aggregator;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use aggregator::{free_port, get_as_hpa};
use binary::{Cluster, Process, create_deployment, metrics_apiserver_command};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authorization::v1::SubjectAccessReviewStatus;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Pod;
use keda_api::ScaledObject;
use keda_api::shards::Ring;
use keda_tls::pki::{CertificateAuthority, PemPair};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use memkube::{MemKube, WriteRecord};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const NS: &str = "apps";
const OPERATOR_NS: &str = "keda";
const OBJECTS: usize = 40;
/// The HPA controller's identity, as the aggregator names it in `X-Remote-User`.
const HPA_USER: &str = "system:serviceaccount:kube-system:horizontal-pod-autoscaler";
/// The common name of the aggregator's client certificate.
const FRONT_PROXY_CN: &str = "front-proxy-client";

fn name(i: usize) -> String {
    format!("worker-{i:02}")
}

/// The certificates: the operators serve the metric service with one of `operator_ca`, the
/// metrics-apiservers present a client certificate of it; they serve the secure port with one
/// of `serving_ca`, and trust the aggregator's client certificate `front_proxy` of
/// `front_proxy_ca`.
struct Pki {
    operator_ca: CertificateAuthority,
    serving_ca: CertificateAuthority,
    front_proxy_ca: CertificateAuthority,
    front_proxy: PemPair,
}

impl Pki {
    fn new() -> Pki {
        let front_proxy_ca = CertificateAuthority::new("front-proxy-ca").expect("CA");
        Pki {
            operator_ca: CertificateAuthority::new("operator-ca").expect("CA"),
            serving_ca: CertificateAuthority::new("serving-ca").expect("CA"),
            front_proxy: front_proxy_ca
                .issue_client(FRONT_PROXY_CN)
                .expect("front proxy certificate"),
            front_proxy_ca,
        }
    }

    /// Writes every file the processes read into `dir`.
    fn write(&self, dir: &Path) {
        let write = |file: &str, text: &str| std::fs::write(dir.join(file), text).expect("write");
        let operator = self
            .operator_ca
            .issue_server("keda-operator", &["localhost", "127.0.0.1"])
            .expect("server certificate");
        write("tls.crt", &operator.cert);
        write("tls.key", &operator.key);
        write("ca.crt", &self.operator_ca.cert_pem());
        let client = self
            .operator_ca
            .issue_client("keda-metrics-apiserver")
            .expect("client certificate");
        write("client.crt", &client.cert);
        write("client.key", &client.key);
        let serving = self
            .serving_ca
            .issue_server("keda-metrics-apiserver", &["localhost"])
            .expect("serving certificate");
        write("serving.crt", &serving.cert);
        write("serving.key", &serving.key);
        write("front-proxy-ca.crt", &self.front_proxy_ca.cert_pem());
    }
}

struct Replica {
    process: Process,
}

/// Starts operator `pod` with shards on, its metric service on a free port.
fn start_operator(cluster: &Cluster, pod: &str, certs: &Path) -> Replica {
    let kubeconfig = cluster.dir.path().join(format!("kubeconfig-{pod}"));
    let yaml = std::fs::read_to_string(&cluster.kubeconfig)
        .expect("kubeconfig")
        .replace("user: {}", &format!("user: {{ token: {pod} }}"));
    std::fs::write(&kubeconfig, yaml).expect("write kubeconfig");
    let address = format!("127.0.0.1:{}", free_port());
    let file = |f: &str| certs.join(f).display().to_string();
    let process = Process::start(
        cluster,
        pod,
        &[
            "--shards=auto",
            "--metrics-service-bind-address",
            &address,
            "--metrics-service-cert-file",
            &file("tls.crt"),
            "--metrics-service-key-file",
            &file("tls.key"),
            "--metrics-service-client-ca-file",
            &file("ca.crt"),
            "--explain-bind-address",
            "0",
        ],
        &[
            ("KUBECONFIG", &kubeconfig.display().to_string()),
            ("POD_NAME", pod),
            ("POD_NAMESPACE", OPERATOR_NS),
            ("KEDA_OPERATOR_LEADER_ELECTION_LEASE_DURATION", "7s"),
            ("KEDA_OPERATOR_LEADER_ELECTION_RENEW_DEADLINE", "5s"),
            ("KEDA_OPERATOR_LEADER_ELECTION_RETRY_PERIOD", "1s"),
        ],
    );
    Replica { process }
}

/// One `keda-metrics-apiserver` process and its secure port.
struct MetricsApiserver {
    process: Process,
    secure: SocketAddr,
}

/// Starts metrics-apiserver `label` with `--operator-shards`: the operator's shard Leases in
/// [`OPERATOR_NS`], the certificates of [`Pki::write`] in `certs`, and `unreachable` as
/// `--metrics-service-address`.
async fn start_metrics_apiserver(
    cluster: &Cluster,
    label: &str,
    certs: &Path,
    unreachable: &str,
) -> MetricsApiserver {
    let secure = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let file = |f: &str| certs.join(f).display().to_string();
    let args = [
        "--bind-address=127.0.0.1".to_string(),
        format!("--secure-port={}", secure.port()),
        format!("--metrics-port={}", free_port()),
        format!("--tls-cert-file={}", file("serving.crt")),
        format!("--tls-private-key-file={}", file("serving.key")),
        format!(
            "--requestheader-client-ca-file={}",
            file("front-proxy-ca.crt")
        ),
        format!("--requestheader-allowed-names={FRONT_PROXY_CN}"),
        format!("--kubeconfig={}", cluster.kubeconfig.display()),
        "--operator-shards".to_string(),
        format!("--certs-namespace={OPERATOR_NS}"),
        format!("--metrics-service-address={unreachable}"),
        "--metrics-service-server-name=localhost".to_string(),
        format!("--metrics-service-ca-file={}", file("ca.crt")),
        format!("--metrics-service-client-cert-file={}", file("client.crt")),
        format!("--metrics-service-client-key-file={}", file("client.key")),
        "--workers=2".to_string(),
        "--log-format=json".to_string(),
    ];
    let process = Process::spawn(metrics_apiserver_command(cluster, &args), label);
    let deadline = Instant::now() + Duration::from_secs(30);
    while process.logged("metrics-apiserver serving").is_empty() {
        assert!(
            Instant::now() < deadline,
            "{label} does not serve within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    MetricsApiserver { process, secure }
}

/// What one read of one object's metric through a metrics-apiserver got.
#[derive(Clone, Debug, PartialEq)]
enum Answer {
    /// 200 with the object's value.
    Served,
    /// 200 with something else: the HPA would act on a wrong value.
    Wrong(String),
    /// An error status (the HPA keeps the replicas and reports `FailedGetExternalMetric`), or
    /// no answer (0).
    Failed(u16, String),
}

#[derive(Clone, Debug)]
struct Read {
    at: Instant,
    apiserver: usize,
    object: usize,
    answer: Answer,
}

/// Reads object `i`'s metric `metric` through the metrics-apiserver at `address` as the
/// aggregator does for the HPA.
async fn read(address: SocketAddr, pki: &Pki, i: usize, metric: &str) -> Answer {
    let path = format!(
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/{NS}/{metric}?labelSelector=scaledobject.keda.sh%2Fname%3D{}",
        name(i)
    );
    let Some((status, body)) = get_as_hpa(address, &pki.serving_ca, &pki.front_proxy, &path).await
    else {
        return Answer::Failed(0, String::new());
    };
    if status != 200 {
        return Answer::Failed(status, body);
    }
    let list: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    let items = list["items"].as_array().cloned().unwrap_or_default();
    if list["kind"] == "ExternalMetricValueList"
        && items.len() == 1
        && items[0]["value"] == "1"
        && items[0]["metricName"]
            .as_str()
            .is_some_and(|m| m.eq_ignore_ascii_case(metric))
    {
        Answer::Served
    } else {
        Answer::Wrong(body)
    }
}

/// One read of every object through `apiserver`.
async fn read_all(address: SocketAddr, pki: &Pki, metrics: &[String]) -> Vec<(usize, Answer)> {
    let mut answers = Vec::new();
    for (i, metric) in metrics.iter().enumerate() {
        answers.push((i, read(address, pki, i, metric).await));
    }
    answers
}

/// `/scale` writes of the operators, by object.
fn scale_writes(server: &MemKube) -> BTreeMap<String, Vec<WriteRecord>> {
    let mut by_object: BTreeMap<String, Vec<WriteRecord>> = BTreeMap::new();
    for w in server.writes() {
        if w.resource == "deployments/scale" && w.writer.starts_with("op-") {
            by_object
                .entry(w.name.clone().unwrap_or_default())
                .or_default()
                .push(w);
        }
    }
    by_object
}

/// The writers of `object`'s `/scale` writes after `since`.
fn writers_since(server: &MemKube, object: &str, since: Instant) -> BTreeSet<String> {
    scale_writes(server)
        .remove(object)
        .unwrap_or_default()
        .into_iter()
        .filter(|w| w.at >= since)
        .map(|w| w.writer)
        .collect()
}

async fn wait_until(what: &str, within: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !check() {
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every object is written for only by `ring`'s owner during `window` from now.
async fn each_object_owned_by_one(server: &MemKube, ring: &Ring, window: Duration) {
    let from = Instant::now();
    tokio::time::sleep(window).await;
    for i in 0..OBJECTS {
        let object = name(i);
        let writers = writers_since(server, &object, from);
        let owner = ring.owner(NS, &object).expect("an owner").to_string();
        assert_eq!(
            writers,
            BTreeSet::from([owner]),
            "{object}: /scale writers in the last {window:?}"
        );
    }
}

/// The reads of `reads` in `[from, to)`.
fn reads_between(reads: &Mutex<Vec<Read>>, from: Instant, to: Instant) -> Vec<Read> {
    reads
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter(|r| r.at >= from && r.at < to)
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_operators_share_the_objects_a_fourth_takes_a_quarter_and_a_killed_one_s_resume_within_15_s()
 {
    let server = MemKube::new();
    server
        .load_crds_from_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../config/crd"))
        .expect("CRDs");
    server.create_namespace(NS).expect("namespace");
    server.create_namespace(OPERATOR_NS).expect("namespace");
    server.record_writes();
    // The metrics-apiservers authorize each read with a SubjectAccessReview: only the HPA
    // controller's `list` of external metrics is allowed, as its ClusterRole does.
    server.set_access_policy(|spec| {
        let attrs = spec.resource_attributes.clone().unwrap_or_default();
        SubjectAccessReviewStatus {
            allowed: spec.user.as_deref() == Some(HPA_USER)
                && attrs.verb.as_deref() == Some("list")
                && attrs.group.as_deref() == Some("external.metrics.k8s.io")
                && attrs.namespace.as_deref() == Some(NS),
            ..SubjectAccessReviewStatus::default()
        }
    });
    let client = server.client();
    let cluster = Cluster::serve(server.clone(), "shards").await;
    let certs = cluster.dir.path().join("certs");
    std::fs::create_dir_all(&certs).expect("certs dir");
    let pki = Arc::new(Pki::new());
    pki.write(&certs);

    // One running pod that every object's kubernetes-workload trigger counts: all are active.
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "load", "namespace": NS, "labels": { "load": "on" } },
        "spec": { "containers": [{ "name": "app", "image": "registry.k8s.io/pause:3.9" }] }
    }))
    .expect("pod");
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("pod");
    pods.patch_status(
        "load",
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": { "phase": "Running" } })),
    )
    .await
    .expect("pod status");
    let objects: Api<ScaledObject> = Api::namespaced(client.clone(), NS);
    for i in 0..OBJECTS {
        create_deployment(&client, NS, &name(i), 0).await;
        let so: ScaledObject = serde_json::from_value(json!({
            "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "metadata": { "name": name(i), "namespace": NS },
            "spec": {
                "scaleTargetRef": { "name": name(i) },
                "pollingInterval": 1,
                "cooldownPeriod": 300,
                "maxReplicaCount": 10,
                "triggers": [{ "type": "kubernetes-workload",
                               "metadata": { "podSelector": "load=on", "value": "1" } }]
            }
        }))
        .expect("ScaledObject");
        objects
            .create(&PostParams::default(), &so)
            .await
            .expect("create ScaledObject");
    }

    // The test's own writer puts every target back to 0 all the time.
    let stop = CancellationToken::new();
    {
        let client = client.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let deployments: Api<Deployment> = Api::namespaced(client, NS);
            while !stop.is_cancelled() {
                for i in 0..OBJECTS {
                    let _ = deployments
                        .patch_scale(
                            &name(i),
                            &PatchParams::default(),
                            &Patch::Merge(json!({ "spec": { "replicas": 0 } })),
                        )
                        .await;
                }
                tokio::time::sleep(Duration::from_millis(1000)).await;
            }
        });
    }

    let mut replicas: BTreeMap<&str, Replica> = BTreeMap::new();
    for pod in ["op-a", "op-b", "op-c"] {
        replicas.insert(pod, start_operator(&cluster, pod, &certs));
    }
    // The two metrics-apiservers start beside the operators, as in a cluster.
    let unreachable = format!("127.0.0.1:{}", free_port());
    let mut apiservers = Vec::new();
    for label in ["mas-1", "mas-2"] {
        apiservers.push(start_metrics_apiserver(&cluster, label, &certs, &unreachable).await);
    }
    let three = Ring::new(["op-a", "op-b", "op-c"]);
    let counts = |ring: &Ring| {
        let mut c: BTreeMap<String, usize> = BTreeMap::new();
        for i in 0..OBJECTS {
            *c.entry(ring.owner(NS, &name(i)).expect("owner").to_string())
                .or_default() += 1;
        }
        c
    };
    println!("three replicas own {:?}", counts(&three));
    assert_eq!(counts(&three).len(), 3, "every replica owns some objects");

    let started = Instant::now();
    wait_until(
        "every object is scaled by its owner",
        Duration::from_secs(60),
        || {
            (0..OBJECTS).all(|i| {
                let object = name(i);
                writers_since(&server, &object, started)
                    .contains(three.owner(NS, &object).expect("owner"))
            })
        },
    )
    .await;
    each_object_owned_by_one(&server, &three, Duration::from_secs(4)).await;

    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(client.clone(), NS);
    let mut metrics = Vec::new();
    for i in 0..OBJECTS {
        let hpa = hpas
            .get(&format!("keda-hpa-{}", name(i)))
            .await
            .expect("the owner created the HPA");
        let metric = hpa.spec.expect("spec").metrics.expect("metrics")[0]
            .external
            .as_ref()
            .expect("external")
            .metric
            .name
            .clone();
        metrics.push(metric);
    }
    let metrics = Arc::new(metrics);
    // Every object's metric is served through both metrics-apiservers (the first reads of a
    // replica start its pod cache: they are given 30 s).
    let deadline = Instant::now() + Duration::from_secs(30);
    for apiserver in &apiservers {
        loop {
            let failed: Vec<_> = read_all(apiserver.secure, &pki, &metrics)
                .await
                .into_iter()
                .filter(|(_, answer)| *answer != Answer::Served)
                .collect();
            if failed.is_empty() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "metric reads failed: {failed:#?}"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    // From now on, both metrics-apiservers are read all the time, every object in turn.
    let reads: Arc<Mutex<Vec<Read>>> = Arc::default();
    let reading = Arc::new(AtomicBool::new(true));
    let readers: Vec<_> = apiservers
        .iter()
        .enumerate()
        .map(|(n, apiserver)| {
            let (address, pki, metrics) = (apiserver.secure, pki.clone(), metrics.clone());
            let (reads, reading) = (reads.clone(), reading.clone());
            tokio::spawn(async move {
                while reading.load(Ordering::SeqCst) {
                    for (i, metric) in metrics.iter().enumerate() {
                        let answer = read(address, &pki, i, metric).await;
                        reads
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .push(Read {
                                at: Instant::now(),
                                apiserver: n,
                                object: i,
                                answer,
                            });
                    }
                }
            })
        })
        .collect();

    // A fourth replica joins: about a quarter of the objects move to it, and only to it; both
    // metrics-apiservers answer every read through the move.
    let joined_at = Instant::now();
    replicas.insert("op-d", start_operator(&cluster, "op-d", &certs));
    let four = Ring::new(["op-a", "op-b", "op-c", "op-d"]);
    let moving: Vec<String> = (0..OBJECTS)
        .map(name)
        .filter(|o| four.owner(NS, o) == Some("op-d"))
        .collect();
    println!("four replicas own {:?}", counts(&four));
    for i in 0..OBJECTS {
        let object = name(i);
        let (before, after) = (three.owner(NS, &object), four.owner(NS, &object));
        assert!(
            before == after || after == Some("op-d"),
            "{object} moved between old replicas"
        );
    }
    assert!(
        (OBJECTS / 8..=OBJECTS / 2).contains(&moving.len()),
        "{} of {OBJECTS} move to the fourth replica",
        moving.len()
    );
    wait_until(
        "the fourth replica scales its objects",
        Duration::from_secs(30),
        || {
            moving
                .iter()
                .all(|o| writers_since(&server, o, joined_at).contains("op-d"))
        },
    )
    .await;
    println!(
        "the fourth replica took its objects {:?} after it started",
        joined_at.elapsed()
    );
    each_object_owned_by_one(&server, &four, Duration::from_secs(4)).await;
    let during_join = reads_between(&reads, joined_at, Instant::now());
    for n in 0..apiservers.len() {
        let served = during_join
            .iter()
            .filter(|r| r.apiserver == n && r.answer == Answer::Served)
            .count();
        println!("metrics-apiserver {n} served {served} reads while the fourth replica joined");
        assert!(
            served >= 2 * OBJECTS,
            "metrics-apiserver {n} read every object at least twice through the move ({served} reads)"
        );
    }
    let failed: Vec<&Read> = during_join
        .iter()
        .filter(|r| r.answer != Answer::Served)
        .collect();
    assert!(
        failed.is_empty(),
        "metric reads failed while objects moved: {failed:#?}"
    );

    // SIGKILL: op-b's objects are taken by the others, each within 15 s.
    let orphans: Vec<usize> = (0..OBJECTS)
        .filter(|i| four.owner(NS, &name(*i)) == Some("op-b"))
        .collect();
    assert!(!orphans.is_empty());
    let victim = replicas.get_mut("op-b").expect("op-b");
    victim.process.kill().await;
    let killed_at = Instant::now();
    let survivors = Ring::new(["op-a", "op-c", "op-d"]);
    wait_until(
        "the killed replica's objects resume elsewhere",
        Duration::from_secs(15),
        || {
            orphans.iter().all(|i| {
                let o = name(*i);
                writers_since(&server, &o, killed_at)
                    .contains(survivors.owner(NS, &o).expect("owner"))
            })
        },
    )
    .await;
    let resumed = killed_at.elapsed();
    println!("the killed replica's objects resumed within {resumed:?}");
    each_object_owned_by_one(&server, &survivors, Duration::from_secs(3)).await;
    // Both metrics-apiservers read every object once more after that.
    let round = Instant::now();
    wait_until(
        "both metrics-apiservers read every object after the kill",
        Duration::from_secs(30),
        || {
            let after = reads_between(&reads, round, Instant::now());
            (0..apiservers.len()).all(|n| {
                (0..OBJECTS).all(|i| after.iter().any(|r| r.apiserver == n && r.object == i))
            })
        },
    )
    .await;
    let since_kill = reads_between(&reads, killed_at, Instant::now());
    // The other objects were answered throughout. The killed replica's were answered again
    // within 15 s, and never failed once answered again; until then (no replica runs their
    // loops) the reads failed with a status, never a wrong value.
    for r in &since_kill {
        assert!(
            orphans.contains(&r.object) || r.answer == Answer::Served,
            "{} (not the killed replica's) was not served after the kill: {r:?}",
            name(r.object)
        );
    }
    for i in &orphans {
        let object: Vec<&Read> = since_kill.iter().filter(|r| r.object == *i).collect();
        let back = object
            .iter()
            .find(|r| r.answer == Answer::Served)
            .unwrap_or_else(|| panic!("{} is never served after the kill", name(*i)));
        let gap = back.at.duration_since(killed_at);
        assert!(
            gap <= Duration::from_secs(15),
            "{} was served again {gap:?} after the kill",
            name(*i)
        );
        let failed_after: Vec<&&Read> = object
            .iter()
            .filter(|r| r.at > back.at && r.answer != Answer::Served)
            .collect();
        assert!(
            failed_after.is_empty(),
            "{}: reads failed after it was served again: {failed_after:#?}",
            name(*i)
        );
    }
    // Those failures say the owner is unavailable (503: it cannot be reached) or, between the
    // Lease's expiry and the new owner's loop, that no replica has the object (404).
    let mut statuses: BTreeMap<u16, usize> = BTreeMap::new();
    for r in &since_kill {
        if let Answer::Failed(status, _) = &r.answer {
            *statuses.entry(*status).or_default() += 1;
        }
    }
    println!("failed reads of the killed replica's objects, by status: {statuses:?}");
    assert!(
        statuses.keys().all(|s| [404, 503].contains(s)),
        "reads of the killed replica's objects failed with {statuses:?}"
    );
    let wrong: Vec<Read> = reads
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter(|r| matches!(r.answer, Answer::Wrong(_)))
        .cloned()
        .collect();
    assert!(wrong.is_empty(), "wrong values were served: {wrong:#?}");
    reading.store(false, Ordering::SeqCst);
    for reader in readers {
        reader.await.expect("reader");
    }

    // One metrics-apiserver is killed: the other serves every object alone.
    apiservers[0].process.kill().await;
    let answers = read_all(apiservers[1].secure, &pki, &metrics).await;
    assert!(
        answers.iter().all(|(_, a)| *a == Answer::Served),
        "the remaining metrics-apiserver failed reads: {answers:#?}"
    );

    // Over the whole run, no object ever saw /scale writes from two replicas at once: its
    // writers follow each other (a, then b), never alternate (a, b, a).
    for (object, writes) in scale_writes(&server) {
        let mut runs: Vec<&str> = Vec::new();
        for w in &writes {
            if runs.last() != Some(&w.writer.as_str()) {
                runs.push(&w.writer);
            }
        }
        let distinct: BTreeSet<&str> = runs.iter().copied().collect();
        assert_eq!(
            runs.len(),
            distinct.len(),
            "{object}: writers alternated: {runs:?}"
        );
    }
    stop.cancel();
    for (_, mut replica) in replicas {
        if replica.process.is_running() {
            replica.process.terminate().await;
        }
    }
}
