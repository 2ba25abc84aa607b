//! Shards that need no configuration (issue 25), on memkube served over loopback: real
//! `keda-operator` processes with `--shards=auto` (short leases: 7 s duration, 5 s renew
//! deadline, 1 s retry; shorter ones make a loaded 2-core machine miss renew deadlines), and two metrics-apiserver routers (`ShardRouter`, the code
//! `--operator-shards` runs) reading the same Leases.
//!
//! Every operator has its own kubeconfig whose bearer token names it, and memkube logs every
//! write with its token: so each `/scale` write is known by its writer. A writer of the test
//! sets every target back to 0 replicas all the time, so the owner of each (active) object
//! writes `/scale` 0 -> 1 at nearly every poll: two replicas writing for one object would show.

#[path = "common/binary.rs"]
mod binary;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use binary::{Cluster, Process, create_deployment};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Pod;
use keda_api::ScaledObject;
use keda_api::shards::Ring;
use keda_metrics_apiserver::operator_client::{
    MetricSource, OperatorClient, OperatorClientConfig, client_tls_config,
};
use keda_metrics_apiserver::shard_router::{ShardRouter, ShardRouterConfig};
use keda_tls::pki::CertificateAuthority;
use keda_tls::{CertStore, ServerCaVerifier, certified_key};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use memkube::{MemKube, WriteRecord};
use rustls_pki_types::ServerName;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const NS: &str = "apps";
const OPERATOR_NS: &str = "keda";
const OBJECTS: usize = 40;

fn name(i: usize) -> String {
    format!("worker-{i:02}")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// The certificates: the operators serve the metric service with one, the routers present a
/// client certificate of the same CA.
struct Pki {
    ca: CertificateAuthority,
}

impl Pki {
    fn write(&self, dir: &Path) {
        let server = self
            .ca
            .issue_server("keda-operator", &["localhost", "127.0.0.1"])
            .expect("server certificate");
        std::fs::write(dir.join("tls.crt"), &server.cert).expect("write");
        std::fs::write(dir.join("tls.key"), &server.key).expect("write");
        std::fs::write(dir.join("ca.crt"), self.ca.cert_pem()).expect("write");
    }

    fn client_config(&self, address: SocketAddr) -> OperatorClientConfig {
        let client = self
            .ca
            .issue_client("keda-metrics-apiserver")
            .expect("client certificate");
        let store = Arc::new(CertStore::new(
            certified_key(client.cert.as_bytes(), client.key.as_bytes(), "client").expect("key"),
        ));
        let ca =
            ServerCaVerifier::from_pem(self.ca.cert_pem().as_bytes(), "operator CA").expect("CA");
        OperatorClientConfig {
            address: address.to_string(),
            server_name: ServerName::try_from("localhost").expect("name"),
            tls: Arc::new(client_tls_config(Arc::new(ca), store).expect("TLS")),
            connect_timeout: Duration::from_secs(1),
            request_timeout: Duration::from_secs(3),
        }
    }
}

struct Replica {
    process: Process,
    address: SocketAddr,
}

/// Starts operator `pod` with shards on, its metric service on a free port.
fn start_operator(cluster: &Cluster, pod: &str, certs: &Path) -> Replica {
    let kubeconfig = cluster.dir.path().join(format!("kubeconfig-{pod}"));
    let yaml = std::fs::read_to_string(&cluster.kubeconfig)
        .expect("kubeconfig")
        .replace("user: {}", &format!("user: {{ token: {pod} }}"));
    std::fs::write(&kubeconfig, yaml).expect("write kubeconfig");
    let address: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().expect("addr");
    let file = |f: &str| certs.join(f).display().to_string();
    let process = Process::start(
        cluster,
        pod,
        &[
            "--shards=auto",
            "--metrics-service-bind-address",
            &address.to_string(),
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
    Replica { process, address }
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
    let client = server.client();
    let cluster = Cluster::serve(server.clone(), "shards").await;
    let certs = cluster.dir.path().join("certs");
    std::fs::create_dir_all(&certs).expect("certs dir");
    let pki = Pki {
        ca: CertificateAuthority::new("operator-ca").expect("CA"),
    };
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

    // Two metrics-apiserver routers over the same Leases.
    let fallback = Arc::new(OperatorClient::new(
        pki.client_config(replicas["op-a"].address),
    ));
    let routers: Vec<Arc<ShardRouter>> = (0..2)
        .map(|_| {
            let router = Arc::new(ShardRouter::new(
                client.clone(),
                ShardRouterConfig {
                    namespace: OPERATOR_NS.to_string(),
                    retry_period: Duration::from_millis(500),
                    lease_duration: Duration::from_secs(7),
                },
                pki.client_config(replicas["op-a"].address),
                fallback.clone(),
            ));
            router.follow(stop.clone());
            router
        })
        .collect();
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(client.clone(), NS);
    let mut metric_names = Vec::new();
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
        metric_names.push(metric);
    }
    let metric_names = Arc::new(metric_names);
    let read_all = |router: Arc<ShardRouter>, metric_names: Arc<Vec<String>>| async move {
        let mut failed = Vec::new();
        for (i, metric) in metric_names.iter().enumerate() {
            match router.metric_values(NS, &name(i), metric).await {
                Ok(values) if values.len() == 1 && values[0].value.0 == "1" => {}
                other => failed.push(format!("{}: {other:?}", name(i))),
            }
        }
        failed
    };
    // Every object's metric is served through both routers (the first reads of a replica
    // start its pod cache: they are given 30 s).
    let deadline = Instant::now() + Duration::from_secs(30);
    for router in &routers {
        loop {
            let failed = read_all(router.clone(), metric_names.clone()).await;
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

    // A fourth replica joins: about a quarter of the objects move to it, and only to it; the
    // routers answer every read through the move.
    let reading = Arc::new(AtomicBool::new(true));
    let read_errors = Arc::new(AtomicUsize::new(0));
    let read_rounds = Arc::new(AtomicUsize::new(0));
    let readers: Vec<_> = routers
        .iter()
        .map(|router| {
            let (router, names) = (router.clone(), metric_names.clone());
            let (reading, errors, rounds) =
                (reading.clone(), read_errors.clone(), read_rounds.clone());
            tokio::spawn(async move {
                while reading.load(Ordering::SeqCst) {
                    let failed = read_all(router.clone(), names.clone()).await;
                    if !failed.is_empty() {
                        println!("reads failed during the move: {failed:?}");
                    }
                    errors.fetch_add(failed.len(), Ordering::SeqCst);
                    rounds.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        })
        .collect();
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
    reading.store(false, Ordering::SeqCst);
    for reader in readers {
        reader.await.expect("reader");
    }
    assert!(
        read_rounds.load(Ordering::SeqCst) >= 4,
        "the routers read through the move"
    );
    assert_eq!(
        read_errors.load(Ordering::SeqCst),
        0,
        "a metric read failed while objects moved"
    );

    // SIGKILL: op-b's objects are taken by the others, each within 15 s.
    let orphans: Vec<String> = (0..OBJECTS)
        .map(name)
        .filter(|o| four.owner(NS, o) == Some("op-b"))
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
            orphans.iter().all(|o| {
                writers_since(&server, o, killed_at)
                    .contains(survivors.owner(NS, o).expect("owner"))
            })
        },
    )
    .await;
    println!(
        "the killed replica's objects resumed within {:?}",
        killed_at.elapsed()
    );
    each_object_owned_by_one(&server, &survivors, Duration::from_secs(3)).await;
    for router in &routers {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let failed = read_all(router.clone(), metric_names.clone()).await;
        assert!(
            failed.is_empty(),
            "metric reads failed after the kill: {failed:#?}"
        );
    }

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
