//! Every registered trigger type's connect-time path: `Registry::build` from fuzzed metadata,
//! auth params, resolved env and trigger flags (the text form of `scaler_metadata`,
//! `keda_rs_fuzz::context_from_text`), then the built scaler's metric specs, one query and its
//! close. The registry is walked, so a new scaler is covered as soon as it is registered.
//!
//! The network is fake: the target runs in a network namespace of its own
//! (`keda_rs_fuzz::isolate_network`) where only loopback exists, and on loopback the usual
//! ports of the sources (Redis, PostgreSQL, MySQL, RabbitMQ, Kafka, NATS, etcd, beanstalkd,
//! HTTP, gRPC) accept every connection, answer with bytes the input chooses and close. Names
//! other than `localhost` do not resolve.
//!
//! Input: the trigger's text, then optionally a NUL byte and what every fake server answers.
//!
//! Checks beyond "no panic": the build, the query and the close together finish within
//! `LIMIT` (a build or query that waits on a server that closed, or on a name that does not
//! resolve, is a hang), and libFuzzer's memory limits (`-rss_limit_mb`, `-malloc_limit_mb`)
//! bound what they allocate.
#![no_main]

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use keda_scalers::ProcessEnv;
use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::runtime::Runtime;

/// The longest the build, the query and the close of one input may take together.
const LIMIT: Duration = Duration::from_secs(8);

/// Loopback ports the fake servers listen on: the sources' defaults and a few common ones.
const PORTS: &[u16] = &[
    80, 443, 2379, 3306, 4222, 5432, 5672, 6379, 8080, 8161, 8222, 8443, 9090, 9092, 11300, 15672,
    26379, 50051,
];

struct World {
    runtime: Runtime,
    answer: Arc<Mutex<Vec<u8>>>,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        let answer = Arc::new(Mutex::new(Vec::new()));
        runtime.block_on(async {
            for port in PORTS {
                let listener = TcpListener::bind(("127.0.0.1", *port))
                    .await
                    .unwrap_or_else(|e| panic!("fake server on port {port}: {e}"));
                let answer = Arc::clone(&answer);
                tokio::spawn(async move {
                    loop {
                        let Ok((mut stream, _)) = listener.accept().await else {
                            continue;
                        };
                        let answer = answer.lock().expect("the answer").clone();
                        tokio::spawn(async move {
                            // Read what the client says first (briefly), answer, close.
                            let mut buffer = [0u8; 4096];
                            let _ = tokio::time::timeout(
                                Duration::from_millis(20),
                                stream.read(&mut buffer),
                            )
                            .await;
                            let _ = stream.write_all(&answer).await;
                            let _ = stream.shutdown().await;
                            let _ = tokio::time::timeout(
                                Duration::from_millis(200),
                                stream.read(&mut buffer),
                            )
                            .await;
                        });
                    }
                });
            }
        });
        World { runtime, answer }
    })
}

fuzz_target!(
    init: {
        keda_rs_fuzz::isolate_network();
        let _ = world();
    },
    |data: &[u8]| {
    let (text, answer) = match data.iter().position(|b| *b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let mut ctx = keda_rs_fuzz::context_from_text(&String::from_utf8_lossy(text));
    // Nothing of the fuzzing machine's own environment (cloud credentials, KUBERNETES_*).
    ctx.process_env = ProcessEnv::from_pairs(&[]);
    ctx.global_http_timeout = Duration::from_millis(1000);
    let trigger_type = ctx.trigger_type.clone();
    let world = world();
    *world.answer.lock().expect("the answer") = answer.to_vec();
    let work = async move {
        let built = match keda_rs_fuzz::registry().build(ctx).await {
            Ok(built) => built,
            Err(error) => {
                assert!(!error.to_string().is_empty(), "an empty error");
                return;
            }
        };
        let scaler = built.scaler();
        let specs = scaler.metric_specs();
        query(scaler, &specs).await;
        scaler.close().await;
    };
    let finished = world
        .runtime
        .block_on(async move { tokio::time::timeout(LIMIT, work).await });
    assert!(
        finished.is_ok(),
        "building, querying and closing a {trigger_type:?} scaler took more than {LIMIT:?} \
         against servers that answer at once and close"
    );
});

/// One query of the first metric (its name as the HPA would ask for it).
async fn query(
    scaler: &dyn keda_scalers::Scaler,
    specs: &[k8s_openapi::api::autoscaling::v2::MetricSpec],
) {
    let name = specs
        .first()
        .and_then(|spec| spec.external.as_ref())
        .map_or_else(String::new, |external| external.metric.name.clone());
    if let Err(error) = scaler.metrics_and_activity(&name).await {
        assert!(!error.to_string().is_empty(), "an empty error");
    }
}
