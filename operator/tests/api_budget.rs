//! Issue 30, finding 3: nothing a namespace or a network client does may spend the API budget
//! that scaling and the Lease renewals need. The real `keda-operator` binary runs against
//! memkube over loopback with leader election on and client-go's default Lease durations (15 s
//! lease, 10 s renew deadline, 2 s retry).
//!
//! - A flood of explain requests: with the default budget (20 qps, burst 30), 256 concurrent
//!   clients send explain requests with bearer tokens the API server does not know, as fast as
//!   they are answered, for 16 s. A redis ScaledObject whose list fills 5 s into the flood must
//!   still go 0 -> 1 within 10 s; the leader must keep and renew its Lease; the TokenReviews
//!   sent must be bounded by the explain budget and the review cache, not by the requests; and
//!   the endpoint keeps answering (401 or 429) instead of holding requests. Before the fix
//!   every request cost an uncached TokenReview through the one shared client and its 20 qps
//!   limiter, so ~256 reviews always waited in front of the controllers' writes and the Lease
//!   renewals: 10 s into the flood the leader stepped down ("no renewal within the renew
//!   deadline"), and every object stopped scaling until it led again.
//! - A storm of ScaledObjects that spends the controllers' budget must not delay the Lease
//!   renewals, which have a client and a budget of their own.
//! - A failing accept (no file descriptor left) must pause instead of spinning a core.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use binary::{Cluster, Operator, create_deployment, eventually};
use explain_flood::{Answers, explain, flood};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use keda_api::ScaledObject;
use kube::api::{Api, PostParams};
use memkube::{MemKube, Verb};
use redis::AsyncCommands;

#[allow(dead_code)]
#[path = "../../scalers/tests/common/mod.rs"]
mod redis_common;

#[path = "common/binary.rs"]
mod binary;

#[path = "common/explain_flood.rs"]
mod explain_flood;

const NAMESPACE: &str = "keda";
const APPS: &str = "apps";
const LEASE: &str = "operator.keda.sh";
/// Concurrent attackers, as in the issue.
const CLIENTS: usize = 256;
/// The object the attackers ask about.
const OBJECT: &str = "/explain/v1/namespaces/apps/scaledobjects/worker";
/// How long the flood lasts.
const FLOOD: Duration = Duration::from_secs(16);
/// When, into the flood, the list fills.
const FILL_AFTER: Duration = Duration::from_secs(5);
/// How long the 0 -> 1 may take once the list has filled.
const SCALE_DEADLINE: Duration = Duration::from_secs(10);
/// The explain endpoint's default review budget (`--explain-kube-api-qps`,
/// `--explain-kube-api-burst`).
const REVIEW_QPS: f64 = 5.0;
const REVIEW_BURST: f64 = 10.0;

async fn lease(leases: &Api<Lease>) -> Option<(String, jiff::Timestamp)> {
    let spec = leases.get_opt(LEASE).await.ok().flatten()?.spec?;
    Some((spec.holder_identity?, spec.renew_time?.0))
}

async fn replicas(deployments: &Api<Deployment>) -> i32 {
    deployments
        .get("worker")
        .await
        .ok()
        .and_then(|d| d.spec)
        .and_then(|s| s.replicas)
        .unwrap_or(-1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_unauthenticated_explain_requests_neither_delays_scaling_nor_loses_the_lease() {
    let Some(mut redis) = redis_common::redis_or_skip("a flood of explain requests").await else {
        return;
    };
    let server = MemKube::new();
    server.create_namespace(NAMESPACE).expect("namespace");
    server.create_namespace(APPS).expect("namespace");
    server
        .load_crds_from_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../config/crd"))
        .expect("CRDs load");
    let cluster = Cluster::serve(server, "explain-flood").await;
    let client = cluster.server.client();
    create_deployment(&client, APPS, "worker", 0).await;
    let list = redis_common::unique("explain-flood");
    let so: ScaledObject = serde_yaml::from_str(&format!(
        r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {{ name: worker, namespace: {APPS} }}
spec:
  scaleTargetRef: {{ name: worker }}
  pollingInterval: 1
  triggers:
    - type: redis
      metadata:
        address: {address}
        listName: {list}
        listLength: "5"
"#,
        address = redis_common::REDIS_ADDRESS
    ))
    .expect("ScaledObject");
    Api::<ScaledObject>::namespaced(client.clone(), APPS)
        .create(&PostParams::default(), &so)
        .await
        .expect("create ScaledObject");

    let mut operator = Operator::start(
        &cluster,
        "operator-a",
        &[
            "--leader-elect",
            "--metrics-service-bind-address",
            "0",
            "--explain-bind-address",
            "127.0.0.1:0",
        ],
        &[("POD_NAME", "operator-a"), ("POD_NAMESPACE", NAMESPACE)],
    )
    .await;
    let explain_addr = operator.address("explain endpoint listening", None).await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), APPS);
    eventually("operator-a leads", Duration::from_secs(20), || async {
        lease(&leases)
            .await
            .is_some_and(|(holder, _)| holder == "operator-a")
    })
    .await;
    let hpas: Api<k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler> =
        Api::namespaced(client.clone(), APPS);
    eventually("the HPA exists", Duration::from_secs(20), || async {
        matches!(hpas.get_opt("keda-hpa-worker").await, Ok(Some(_)))
    })
    .await;
    assert_eq!(replicas(&deployments).await, 0, "an empty list stays at 0");

    let reviews_before = cluster
        .server
        .request_counts()
        .get(Verb::Create, "tokenreviews");
    let stop = Arc::new(AtomicBool::new(false));
    let answers = Arc::new(Answers::default());
    let started = Instant::now();
    let attackers = flood(explain_addr, OBJECT, CLIENTS, stop.clone(), answers.clone());

    tokio::time::sleep(FILL_AFTER).await;
    let (_, renewed_before) = lease(&leases).await.expect("the Lease");
    let _: i64 = redis
        .rpush(&list, vec!["a", "b", "c"])
        .await
        .expect("RPUSH");
    let filled = Instant::now();
    let mut scaled_after = None;
    while filled.elapsed() < SCALE_DEADLINE {
        if replicas(&deployments).await == 1 {
            scaled_after = Some(filled.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The rest of the flood, for the Lease.
    if let Some(rest) = FLOOD.checked_sub(started.elapsed()) {
        tokio::time::sleep(rest).await;
    }
    let lease_at_end = lease(&leases).await;
    let reviews = cluster
        .server
        .request_counts()
        .get(Verb::Create, "tokenreviews")
        - reviews_before;
    let flood_seconds = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for attacker in attackers {
        let _ = attacker.await;
    }
    let answers = answers.get();
    println!(
        "flood of {flood_seconds:.1} s: answers by status {answers:?}, {reviews} TokenReviews, \
         0 -> 1 after {scaled_after:?}, Lease at the end {lease_at_end:?}"
    );

    assert!(
        scaled_after.is_some(),
        "the ScaledObject did not go 0 -> 1 within {SCALE_DEADLINE:?} of its list filling, \
         during the flood"
    );
    let (holder, renewed_at_end) = lease_at_end.expect("the Lease exists");
    assert_eq!(
        holder, "operator-a",
        "the leader lost its Lease during the flood"
    );
    assert!(
        renewed_at_end > renewed_before,
        "the Lease was not renewed during the flood (last renewal {renewed_at_end})"
    );
    assert!(
        operator
            .logged("leader election: leadership lost")
            .is_empty()
            && operator
                .logged("leader election: no renewal within")
                .is_empty(),
        "the leader stepped down during the flood"
    );
    // The budget: its burst, then its rate, over the flood (plus one second of slack).
    let bound = REVIEW_BURST + REVIEW_QPS * (flood_seconds + 1.0);
    assert!(
        f64::from(u32::try_from(reviews).unwrap_or(u32::MAX)) <= bound,
        "{reviews} TokenReviews in {flood_seconds:.1} s: more than the explain budget allows ({bound:.0})"
    );
    let answered: u64 = answers
        .iter()
        .filter(|(status, _)| matches!(status, 401 | 429))
        .map(|(_, n)| n)
        .sum();
    let total: u64 = answers.values().sum();
    assert!(
        answered * 10 >= total * 9 && answered >= 1000,
        "the endpoint held the flood instead of answering it: {answers:?}"
    );
    let status = operator.terminate().await;
    assert!(status.success(), "{status:?}");
    let _: i64 = redis.del(&list).await.expect("DEL");
}

/// 40 active ScaledObjects at once on an operator whose controllers may send 2 requests per
/// second: the reconciles, the scale writes and the status writes queue for minutes behind
/// the controllers' limiter, as a tenant's storm of objects does at 20 qps with more objects.
/// The Lease renewals, on their own client, never wait in that queue: the leader keeps leading.
/// Before the fix the renewals shared that limiter and the leader stepped down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_that_spends_the_controllers_budget_never_delays_a_lease_renewal() {
    const OBJECTS: usize = 40;
    let Some(mut redis) = redis_common::redis_or_skip("a storm of ScaledObjects").await else {
        return;
    };
    let server = MemKube::new();
    server.create_namespace(NAMESPACE).expect("namespace");
    server.create_namespace(APPS).expect("namespace");
    server
        .load_crds_from_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../config/crd"))
        .expect("CRDs load");
    let cluster = Cluster::serve(server, "lease-storm").await;
    let client = cluster.server.client();
    let list = redis_common::unique("lease-storm");
    let _: i64 = redis.rpush(&list, vec!["x"; 10]).await.expect("RPUSH");
    let objects: Api<ScaledObject> = Api::namespaced(client.clone(), APPS);
    for n in 0..OBJECTS {
        let name = format!("worker-{n}");
        create_deployment(&client, APPS, &name, 0).await;
        let so: ScaledObject = serde_yaml::from_str(&format!(
            r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {{ name: {name}, namespace: {APPS} }}
spec:
  scaleTargetRef: {{ name: {name} }}
  pollingInterval: 1
  triggers:
    - type: redis
      metadata:
        address: {address}
        listName: {list}
        listLength: "5"
"#,
            address = redis_common::REDIS_ADDRESS
        ))
        .expect("ScaledObject");
        objects
            .create(&PostParams::default(), &so)
            .await
            .expect("create ScaledObject");
    }
    let mut operator = Operator::start(
        &cluster,
        "operator-a",
        &[
            "--leader-elect",
            "--metrics-service-bind-address",
            "0",
            "--explain-bind-address",
            "0",
            "--kube-api-qps",
            "2",
            "--kube-api-burst",
            "2",
        ],
        &[("POD_NAME", "operator-a"), ("POD_NAMESPACE", NAMESPACE)],
    )
    .await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    eventually("operator-a leads", Duration::from_secs(20), || async {
        lease(&leases)
            .await
            .is_some_and(|(holder, _)| holder == "operator-a")
    })
    .await;
    // Two and a half renew deadlines of storm; every renewal is seen (at most one retry
    // period, 2 s, apart, with a second of slack).
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), APPS);
    let mut last_renewal = lease(&leases).await.expect("the Lease").1;
    let mut longest_gap = Duration::ZERO;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(25) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let (holder, renewed) = lease(&leases).await.expect("the Lease");
        assert_eq!(
            holder, "operator-a",
            "the leader lost its Lease in the storm"
        );
        let since = jiff::Timestamp::now().duration_since(last_renewal);
        longest_gap = longest_gap.max(Duration::try_from(since).unwrap_or_default());
        last_renewal = renewed;
    }
    let mut scaled = 0;
    for n in 0..OBJECTS {
        let replicas = deployments
            .get(&format!("worker-{n}"))
            .await
            .ok()
            .and_then(|d| d.spec)
            .and_then(|s| s.replicas);
        scaled += usize::from(replicas == Some(1));
    }
    println!(
        "after 25 s of storm: {scaled} of {OBJECTS} objects scaled 0 -> 1, longest time without \
         a renewal {longest_gap:?}"
    );
    assert!(
        operator
            .logged("leader election: leadership lost")
            .is_empty()
            && operator
                .logged("leader election: no renewal within")
                .is_empty(),
        "the leader stepped down in the storm"
    );
    assert!(
        longest_gap < Duration::from_secs(4),
        "{longest_gap:?} without a Lease renewal (the retry period is 2 s)"
    );
    let status = operator.terminate().await;
    assert!(status.success(), "{status:?}");
    let _: i64 = redis.del(&list).await.expect("DEL");
}

/// The process's CPU time so far (user + system), from `/proc/<pid>/stat`.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/<pid>/stat");
    // The fields after the command name (which is in parentheses and may hold spaces).
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // utime and stime are fields 14 and 15 of the file, 12 and 13 after the name.
    let ticks: u64 =
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    let per_second = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(100);
    Duration::from_millis(ticks * 1000 / per_second)
}

/// The soft limit of open files of process `pid`, from `/proc/<pid>/limits`.
fn soft_open_files_limit(pid: u32) -> String {
    let limits =
        std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("/proc/<pid>/limits");
    limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))
        .and_then(|rest| rest.split_whitespace().next())
        .expect("a Max open files line")
        .to_string()
}

/// Sets the soft limit of open files of process `pid` with util-linux's `prlimit`.
fn limit_open_files(pid: u32, soft: &str) {
    let status = std::process::Command::new("prlimit")
        .args(["--pid", &pid.to_string(), &format!("--nofile={soft}:")])
        .status()
        .expect("prlimit (util-linux) runs");
    assert!(status.success(), "prlimit --nofile={soft}: {status:?}");
}

/// An accept that fails (here: the process is out of file descriptors, EMFILE, as under a
/// connection flood) must pause before the next accept: retrying at once spins a core for as
/// long as the error lasts, which before the fix it did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_accept_pauses_instead_of_spinning_and_the_endpoint_recovers() {
    let server = MemKube::new();
    server.create_namespace(NAMESPACE).expect("namespace");
    server
        .load_crds_from_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../config/crd"))
        .expect("CRDs load");
    let cluster = Cluster::serve(server, "explain-emfile").await;
    let mut operator = Operator::start(
        &cluster,
        "operator-a",
        &[
            "--metrics-service-bind-address",
            "0",
            "--explain-bind-address",
            "127.0.0.1:0",
        ],
        &[("POD_NAMESPACE", NAMESPACE)],
    )
    .await;
    let explain_addr = operator.address("explain endpoint listening", None).await;
    let pid = operator.child.id().expect("running");
    // Settled: the controllers have listed and watch.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let original = soft_open_files_limit(pid);
    // A descriptor's number must be below the limit: at the lowest free number, none is left.
    let open: std::collections::BTreeSet<u64> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("/proc/<pid>/fd")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    let lowest_free = (0..).find(|fd| !open.contains(fd)).expect("a free number");
    limit_open_files(pid, &lowest_free.to_string());
    // A connection the kernel accepts for the listener, but the process cannot take.
    let waiting = tokio::spawn(explain(explain_addr, OBJECT, "made-up-token"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = cpu_time(pid);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let spent = cpu_time(pid) - before;
    limit_open_files(pid, &original);
    println!("CPU time over 3 s of failing accepts: {spent:?}");
    assert!(
        spent < Duration::from_millis(600),
        "the operator spent {spent:?} of CPU in 3 s of failing accepts: it retries without pausing"
    );
    // The error is gone: the waiting connection is served.
    let status = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the waiting connection is answered once descriptors are free")
        .expect("task");
    assert_eq!(status, 401, "an unknown token is refused");
    assert!(operator.is_running());
    let status = operator.terminate().await;
    assert!(status.success(), "{status:?}");
}

/// The explain endpoint in this process, with its shipped limits, reviewing against `server`.
async fn explain_endpoint_in_process(
    server: &MemKube,
) -> (std::net::SocketAddr, tokio_util::sync::CancellationToken) {
    use keda_operator::explain::auth::KubeAuthorizer;
    use keda_operator::explain::server::ExplainService;
    use keda_operator::metrics_service::CurrentLoops;
    let service = ExplainService::new(
        Arc::new(CurrentLoops::default()),
        Arc::new(KubeAuthorizer::new(server.client())),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let stop = tokio_util::sync::CancellationToken::new();
    tokio::spawn(service.serve(listener, stop.clone()));
    (addr, stop)
}

/// Whether the server closed `stream` (it reads end of file, or a reset).
async fn closed(stream: &mut tokio::net::TcpStream) -> bool {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 512];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return true,
            Ok(_) => {}
        }
    }
}

/// Slow clients: 64 connections (the cap) that never finish their request head. They are
/// closed after the 5 s header timeout, and meanwhile a 65th connection waits rather than
/// costing a task. Before the fix they stayed open for as long as the clients liked, and a
/// request head could be ~400 KiB (hyper's default); now 16 KiB at most (`431`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_closed_after_the_header_timeout_and_connections_are_capped() {
    use tokio::io::AsyncWriteExt;
    let server = MemKube::new();
    let (addr, stop) = explain_endpoint_in_process(&server).await;

    let mut slow = Vec::new();
    for _ in 0..64 {
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        stream
            .write_all(b"GET /explain/v1/namespaces/team/scaledobjects/x HTTP/1.1\r\nHost: x\r\n")
            .await
            .expect("a partial head");
        slow.push(stream);
    }
    let started = Instant::now();
    // The 65th: at the cap it is not served until a slot frees.
    let waiting = tokio::spawn(explain(addr, OBJECT, "made-up-token"));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        !waiting.is_finished(),
        "a 65th connection was served while 64 were open: no connection cap"
    );
    for stream in &mut slow {
        let in_time = tokio::time::timeout(Duration::from_secs(8), closed(stream)).await;
        assert!(
            in_time.is_ok(),
            "a connection that never finished its head was still open {:?} after it started",
            started.elapsed()
        );
    }
    assert!(
        started.elapsed() >= Duration::from_secs(4),
        "closed before the header timeout"
    );
    let status = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the waiting connection is served once slots free")
        .expect("task");
    assert_eq!(status, 401);

    // A head above 16 KiB is refused without reading on.
    let mut big = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let padding = "a".repeat(20 * 1024);
    big.write_all(
        format!(
            "GET {OBJECT} HTTP/1.1\r\nHost: x\r\nX-Padding: {padding}\r\nAuthorization: Bearer t\r\n\r\n"
        )
        .as_bytes(),
    )
    .await
    .expect("a large head");
    let mut head = [0u8; 12];
    tokio::io::AsyncReadExt::read_exact(&mut big, &mut head)
        .await
        .expect("an answer");
    assert_eq!(&head[9..12], b"431", "{}", String::from_utf8_lossy(&head));
    stop.cancel();
}
