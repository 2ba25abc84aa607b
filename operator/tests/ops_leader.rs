//! Leader election against the in-memory API server, on virtual time: the election's
//! durations are client-go's defaults (15 s lease, 10 s renew deadline, 2 s retry) and tokio's
//! paused clock advances whenever every task waits, so these tests take milliseconds.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use keda_operator::leader::{
    DEFAULT_LEASE_DURATION, DEFAULT_RETRY_PERIOD, LeaderElector, LeaseConfig, Role,
    run_while_leader,
};
use kube::api::{Api, PostParams};
use memkube::MemKube;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout};
use tokio_util::sync::CancellationToken;

const LEASE: &str = "operator.keda.sh";
const NAMESPACE: &str = "keda";

struct Candidate {
    role: watch::Receiver<Role>,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

fn server() -> MemKube {
    let server = MemKube::new();
    server.create_namespace(NAMESPACE).expect("namespace");
    server
}

fn start(server: &MemKube, identity: &str) -> Candidate {
    let elector = LeaderElector::new(
        server.client(),
        LeaseConfig::new(LEASE, NAMESPACE, identity),
    )
    .expect("valid config");
    let role = elector.subscribe();
    let stop = CancellationToken::new();
    let task = tokio::spawn(elector.run(stop.clone()));
    Candidate { role, stop, task }
}

fn leases(server: &MemKube) -> Api<Lease> {
    Api::namespaced(server.client(), NAMESPACE)
}

async fn lease(server: &MemKube) -> Lease {
    leases(server).get(LEASE).await.expect("the lease exists")
}

async fn holder(server: &MemKube) -> Option<String> {
    lease(server).await.spec.and_then(|s| s.holder_identity)
}

/// Whether `role` reaches `wanted` within `within` (virtual time).
async fn reaches(role: &mut watch::Receiver<Role>, wanted: Role, within: Duration) -> bool {
    timeout(within, role.wait_for(|r| *r == wanted))
        .await
        .is_ok_and(|r| r.is_ok())
}

#[tokio::test(start_paused = true)]
async fn a_single_candidate_creates_the_lease_and_leads() {
    let server = server();
    let mut a = start(&server, "operator-a");
    assert!(reaches(&mut a.role, Role::Leader, Duration::from_secs(1)).await);
    let lease = lease(&server).await;
    let spec = lease.spec.expect("spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("operator-a"));
    assert_eq!(spec.lease_duration_seconds, Some(15));
    assert_eq!(spec.lease_transitions, Some(0));
    assert!(spec.acquire_time.is_some() && spec.renew_time.is_some());
}

#[tokio::test(start_paused = true)]
async fn of_two_candidates_started_together_exactly_one_leads_and_the_other_stays_standby() {
    let server = server();
    let mut a = start(&server, "operator-a");
    let mut b = start(&server, "operator-b");
    // Both settle within one retry period.
    assert!(
        timeout(
            Duration::from_secs(3),
            a.role.wait_for(|r| *r != Role::Unknown)
        )
        .await
        .is_ok()
    );
    assert!(
        timeout(
            Duration::from_secs(3),
            b.role.wait_for(|r| *r != Role::Unknown)
        )
        .await
        .is_ok()
    );
    // A minute of renewals later, the roles have not moved.
    tokio::time::sleep(Duration::from_secs(60)).await;
    let roles = (*a.role.borrow(), *b.role.borrow());
    assert!(
        roles == (Role::Leader, Role::Standby) || roles == (Role::Standby, Role::Leader),
        "{roles:?}"
    );
    let leader = if roles.0 == Role::Leader {
        "operator-a"
    } else {
        "operator-b"
    };
    assert_eq!(holder(&server).await.as_deref(), Some(leader));
}

#[tokio::test(start_paused = true)]
async fn a_leader_that_stops_releases_the_lease_and_the_standby_leads_at_its_next_retry() {
    let server = server();
    let mut a = start(&server, "operator-a");
    assert!(reaches(&mut a.role, Role::Leader, Duration::from_secs(1)).await);
    let mut b = start(&server, "operator-b");
    assert!(reaches(&mut b.role, Role::Standby, Duration::from_secs(1)).await);
    tokio::time::sleep(Duration::from_secs(30)).await;

    let stopped_at = Instant::now();
    a.stop.cancel();
    a.task.await.expect("the elector ends after stop");
    assert_eq!(*a.role.borrow(), Role::Standby);
    assert!(
        reaches(
            &mut b.role,
            Role::Leader,
            DEFAULT_RETRY_PERIOD + Duration::from_millis(100)
        )
        .await,
        "the standby must take over within one retry period of a release"
    );
    assert!(stopped_at.elapsed() < DEFAULT_LEASE_DURATION);
    let spec = lease(&server).await.spec.expect("spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("operator-b"));
    assert_eq!(spec.lease_transitions, Some(1));
}

#[tokio::test(start_paused = true)]
async fn after_a_crash_the_standby_takes_over_once_the_lease_expires_and_not_before() {
    let server = server();
    let mut a = start(&server, "operator-a");
    assert!(reaches(&mut a.role, Role::Leader, Duration::from_secs(1)).await);
    let mut b = start(&server, "operator-b");
    assert!(reaches(&mut b.role, Role::Standby, Duration::from_secs(1)).await);

    // Crash right after a renewal: no release, the Lease still names operator-a.
    let before = lease(&server).await.metadata.resource_version;
    let renewed = async {
        loop {
            tokio::time::sleep(Duration::from_millis(10)).await;
            if lease(&server).await.metadata.resource_version != before {
                break;
            }
        }
    };
    timeout(Duration::from_secs(5), renewed)
        .await
        .expect("the leader renews");
    a.task.abort();
    let crashed_at = Instant::now();

    let almost = DEFAULT_LEASE_DURATION - Duration::from_millis(100);
    assert!(
        !reaches(&mut b.role, Role::Leader, almost).await,
        "the standby took over before the lease duration"
    );
    assert_eq!(holder(&server).await.as_deref(), Some("operator-a"));
    // Expired: taken at the standby's next retry after expiry (plus the retry it took to see the
    // last renewal).
    assert!(
        reaches(
            &mut b.role,
            Role::Leader,
            2 * DEFAULT_RETRY_PERIOD + Duration::from_millis(200)
        )
        .await,
        "the standby did not take over an expired lease"
    );
    assert!(crashed_at.elapsed() >= DEFAULT_LEASE_DURATION);
    assert_eq!(holder(&server).await.as_deref(), Some("operator-b"));
}

#[tokio::test(start_paused = true)]
async fn losing_the_lease_to_another_holder_cancels_leader_only_work() {
    let server = server();
    let a = start(&server, "operator-a");
    let starts = Arc::new(AtomicUsize::new(0));
    let (cancelled_tx, mut cancelled_rx) = tokio::sync::mpsc::unbounded_channel();
    let shutdown = CancellationToken::new();
    let runner = {
        let starts = starts.clone();
        let role = a.role.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(run_while_leader(
            role,
            shutdown,
            move |cancel: CancellationToken| {
                starts.fetch_add(1, Ordering::SeqCst);
                let cancelled_tx = cancelled_tx.clone();
                async move {
                    cancel.cancelled().await;
                    let _ = cancelled_tx.send(Instant::now());
                    Ok::<(), std::convert::Infallible>(())
                }
            },
        ))
    };
    let mut role = a.role.clone();
    assert!(reaches(&mut role, Role::Leader, Duration::from_secs(1)).await);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        starts.load(Ordering::SeqCst),
        1,
        "work starts once per leadership"
    );

    // Someone else writes itself into the Lease (a split-brain repair, an admin, another
    // operator with the same id).
    let mut stolen = lease(&server).await;
    if let Some(spec) = stolen.spec.as_mut() {
        spec.holder_identity = Some("intruder".into());
    }
    leases(&server)
        .replace(LEASE, &PostParams::default(), &stolen)
        .await
        .expect("overwrite");
    let overwritten_at = Instant::now();

    let cancelled_at = timeout(
        DEFAULT_RETRY_PERIOD + Duration::from_secs(1),
        cancelled_rx.recv(),
    )
    .await
    .expect("leader-only work is cancelled")
    .expect("a cancellation time");
    assert!(cancelled_at - overwritten_at <= DEFAULT_RETRY_PERIOD + Duration::from_millis(100));
    assert_eq!(*a.role.borrow(), Role::Standby);
    assert_eq!(holder(&server).await.as_deref(), Some("intruder"));

    shutdown.cancel();
    runner.await.expect("runner ends").expect("no error");
    a.stop.cancel();
}

#[tokio::test(start_paused = true)]
async fn leader_only_work_restarts_when_leadership_is_regained() {
    let server = server();
    let mut a = start(&server, "operator-a");
    let starts = Arc::new(AtomicUsize::new(0));
    let shutdown = CancellationToken::new();
    let runner = {
        let starts = starts.clone();
        tokio::spawn(run_while_leader(
            a.role.clone(),
            shutdown.clone(),
            move |cancel: CancellationToken| {
                starts.fetch_add(1, Ordering::SeqCst);
                async move {
                    cancel.cancelled().await;
                    Ok::<(), std::convert::Infallible>(())
                }
            },
        ))
    };
    assert!(reaches(&mut a.role, Role::Leader, Duration::from_secs(1)).await);

    // Taken by an intruder that then stops renewing: operator-a steps down, waits for the
    // intruder's lease to expire, and leads again.
    let mut stolen = lease(&server).await;
    if let Some(spec) = stolen.spec.as_mut() {
        spec.holder_identity = Some("intruder".into());
    }
    leases(&server)
        .replace(LEASE, &PostParams::default(), &stolen)
        .await
        .expect("overwrite");
    assert!(reaches(&mut a.role, Role::Standby, Duration::from_secs(3)).await);
    assert!(reaches(&mut a.role, Role::Leader, Duration::from_secs(20)).await);
    tokio::task::yield_now().await;
    timeout(Duration::from_secs(1), async {
        while starts.load(Ordering::SeqCst) < 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the work starts again under the new leadership");

    shutdown.cancel();
    runner.await.expect("runner ends").expect("no error");
    a.stop.cancel();
}

#[tokio::test(start_paused = true)]
async fn leader_only_work_that_fails_ends_the_runner_with_its_error() {
    let server = server();
    let a = start(&server, "operator-a");
    let result = timeout(
        Duration::from_secs(5),
        run_while_leader(a.role.clone(), CancellationToken::new(), |_cancel| async {
            Err::<(), &str>("the controller could not start")
        }),
    )
    .await
    .expect("the runner returns");
    assert_eq!(result, Err("the controller could not start"));
    a.stop.cancel();
}

#[tokio::test(start_paused = true)]
async fn a_leader_that_cannot_reach_the_api_server_steps_down_within_the_renew_deadline() {
    let server = server();
    let mut a = start(&server, "operator-a");
    assert!(reaches(&mut a.role, Role::Leader, Duration::from_secs(1)).await);
    server.inject_failure(memkube::FailureRule::new(500).resource("leases"));
    let failing_since = Instant::now();
    assert!(reaches(&mut a.role, Role::Standby, Duration::from_secs(15)).await);
    let stepped_down_after = failing_since.elapsed();
    // The last renewal was at most one retry period before the failures began.
    assert!(
        stepped_down_after
            <= keda_operator::leader::DEFAULT_RENEW_DEADLINE + Duration::from_millis(100),
        "{stepped_down_after:?}"
    );
    assert!(
        stepped_down_after < DEFAULT_LEASE_DURATION,
        "the leader must stop before a standby could take over"
    );
    a.stop.cancel();
}
