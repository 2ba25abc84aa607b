//! `run` in process: leader-only components start under leadership, stop at shutdown, and a
//! failing component stops the operator; readiness follows the election.

use std::sync::Arc;
use std::time::Duration;

use keda_operator::config::{MapEnv, Settings};
use keda_operator::run::{FnTask, LeaderTask, RunError, Runtime, TaskError, run};
use keda_operator::telemetry::Metrics;
use memkube::MemKube;
use tokio::sync::mpsc;
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;

/// No listeners (ports are covered by the binary test), the given extra flags.
fn settings(extra: &[&str], env: &MapEnv) -> Settings {
    let mut argv = vec![
        "keda-operator",
        "--metrics-bind-address=0",
        "--health-probe-bind-address=0",
    ];
    argv.extend_from_slice(extra);
    Settings::from_sources(argv, env).expect("settings")
}

/// A component that reports when it starts and when it is cancelled.
fn recorder(events: mpsc::UnboundedSender<&'static str>) -> Arc<dyn LeaderTask> {
    Arc::new(FnTask::new("recorder", move |cancel: CancellationToken| {
        let events = events.clone();
        async move {
            let _ = events.send("started");
            cancel.cancelled().await;
            let _ = events.send("cancelled");
            Ok::<(), TaskError>(())
        }
    }))
}

async fn next(events: &mut mpsc::UnboundedReceiver<&'static str>) -> &'static str {
    timeout(Duration::from_secs(10), events.recv())
        .await
        .expect("an event in time")
        .expect("the channel is open")
}

async fn ready(readiness: &keda_operator::admin::Readiness) {
    let opened = timeout(Duration::from_secs(10), async {
        while !readiness.pending().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(
        opened.is_ok(),
        "still waiting for {:?}",
        readiness.pending()
    );
}

#[tokio::test]
async fn without_leader_election_components_start_at_once_and_stop_at_shutdown() {
    let server = MemKube::new();
    let runtime = Runtime::new(server.client(), Metrics::new());
    let readiness = runtime.readiness.clone();
    let (tx, mut events) = mpsc::unbounded_channel();
    let shutdown = CancellationToken::new();
    let operator = tokio::spawn({
        let shutdown = shutdown.clone();
        async move {
            let settings = settings(&[], &MapEnv::default());
            run(&settings, runtime, vec![recorder(tx)], shutdown).await
        }
    });
    assert_eq!(next(&mut events).await, "started");
    ready(&readiness).await;
    shutdown.cancel();
    assert_eq!(next(&mut events).await, "cancelled");
    let result = timeout(Duration::from_secs(10), operator)
        .await
        .expect("run returns")
        .expect("no panic");
    assert!(result.is_ok(), "{result:?}");
}

#[tokio::test]
async fn with_leader_election_components_start_once_the_lease_is_won_and_it_is_released_at_shutdown()
 {
    let server = MemKube::new();
    server.create_namespace("keda").expect("namespace");
    let runtime = Runtime::new(server.client(), Metrics::new());
    let readiness = runtime.readiness.clone();
    let (tx, mut events) = mpsc::unbounded_channel();
    let shutdown = CancellationToken::new();
    let env = MapEnv::new(&[("POD_NAME", "operator-a")]);
    let operator = tokio::spawn({
        let shutdown = shutdown.clone();
        async move {
            let settings = settings(&["--leader-elect"], &env);
            run(&settings, runtime, vec![recorder(tx)], shutdown).await
        }
    });
    assert_eq!(next(&mut events).await, "started");
    ready(&readiness).await;
    let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
        kube::Api::namespaced(server.client(), "keda");
    let holder = |lease: k8s_openapi::api::coordination::v1::Lease| {
        lease.spec.and_then(|s| s.holder_identity)
    };
    assert_eq!(
        holder(leases.get("operator.keda.sh").await.expect("lease")).as_deref(),
        Some("operator-a")
    );

    shutdown.cancel();
    assert_eq!(next(&mut events).await, "cancelled");
    let result = timeout(Duration::from_secs(10), operator)
        .await
        .expect("run returns")
        .expect("no panic");
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(
        holder(leases.get("operator.keda.sh").await.expect("lease")),
        None
    );
}

#[tokio::test]
async fn a_failing_component_stops_the_others_and_the_operator_with_its_name() {
    let server = MemKube::new();
    let runtime = Runtime::new(server.client(), Metrics::new());
    let (tx, mut events) = mpsc::unbounded_channel();
    let failing: Arc<dyn LeaderTask> = Arc::new(FnTask::new(
        "scaledobject-controller",
        |_cancel: CancellationToken| async {
            tokio::task::yield_now().await;
            Err::<(), TaskError>("the CRDs are not installed".into())
        },
    ));
    let settings = settings(&[], &MapEnv::default());
    let result = timeout(
        Duration::from_secs(10),
        run(
            &settings,
            runtime,
            vec![recorder(tx), failing],
            CancellationToken::new(),
        ),
    )
    .await
    .expect("run returns without a shutdown");
    assert_eq!(next(&mut events).await, "started");
    assert_eq!(next(&mut events).await, "cancelled");
    let error = result.expect_err("the component failed");
    assert!(matches!(error, RunError::Task { .. }));
    assert_eq!(
        error.to_string(),
        "leader-only component scaledobject-controller failed: the CRDs are not installed"
    );
}
