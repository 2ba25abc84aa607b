//! `beanstalkd` against the real beanstalkd on 127.0.0.1:11300 (scripts/services.sh), built
//! from its documented example through the registry. Every test uses its own tube.

use std::time::Duration;

use keda_scalers::scalers::beanstalkd::BeanstalkdKey;
use keda_scalers::scalers::beanstalkd::protocol::BeanstalkdClient;
use keda_scalers::{Registry, ScalerContext, ScalerError};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufStream};
use tokio::net::TcpStream;

use crate::common::{Setup, conformance, service_or_skip, unique};

const SERVER: &str = "127.0.0.1:11300";

/// The test's own producer/worker connection, speaking the protocol by hand.
struct Producer(BufStream<TcpStream>);

impl Producer {
    async fn connect_or_skip(test: &str, tube: &str) -> Option<Self> {
        let stream = service_or_skip(test, &format!("beanstalkd at {SERVER}"), async {
            TcpStream::connect(SERVER).await
        })
        .await?;
        let mut producer = Self(BufStream::new(stream));
        assert_eq!(
            producer.command(&format!("use {tube}"), None).await,
            format!("USING {tube}")
        );
        assert_eq!(
            producer.command(&format!("watch {tube}"), None).await,
            "WATCHING 2"
        );
        assert_eq!(producer.command("ignore default", None).await, "WATCHING 1");
        Some(producer)
    }

    async fn command(&mut self, line: &str, body: Option<&str>) -> String {
        self.0
            .write_all(format!("{line}\r\n").as_bytes())
            .await
            .expect("write");
        if let Some(body) = body {
            self.0
                .write_all(format!("{body}\r\n").as_bytes())
                .await
                .expect("write");
        }
        self.0.flush().await.expect("flush");
        let mut answer = String::new();
        self.0.read_line(&mut answer).await.expect("read");
        answer.trim_end().to_string()
    }

    /// Puts a job, delayed by `delay` seconds.
    async fn put(&mut self, delay: u32) {
        let answer = self
            .command(&format!("put 0 {delay} 60 3"), Some("job"))
            .await;
        assert!(answer.starts_with("INSERTED"), "{answer}");
    }

    /// Reserves a ready job (it stays reserved while this connection is open).
    async fn reserve(&mut self) {
        let answer = self.command("reserve-with-timeout 1", None).await;
        assert!(answer.starts_with("RESERVED"), "{answer}");
        let mut body = String::new();
        self.0.read_line(&mut body).await.expect("read");
    }
}

fn setup<'a>(metadata: &'a [(&'a str, &'a str)]) -> Setup<'a> {
    Setup {
        metadata,
        ..Setup::default()
    }
}

#[tokio::test]
async fn ready_and_reserved_jobs_count_and_delayed_ones_only_when_asked() {
    let test = "ready_and_reserved_jobs_count_and_delayed_ones_only_when_asked";
    let tube = unique("bs");
    let Some(mut producer) = Producer::connect_or_skip(test, &tube).await else {
        return;
    };
    // The documented example counts delayed jobs and is active above 1.
    let with_delayed =
        conformance("beanstalkd", setup(&[("server", SERVER), ("tube", &tube)])).await;
    let without_delayed = conformance(
        "beanstalkd",
        setup(&[
            ("server", SERVER),
            ("tube", &tube),
            ("includeDelayed", "false"),
        ]),
    )
    .await;
    assert_eq!(with_delayed.metric_name, format!("s0-beanstalkd-{}", tube));
    with_delayed.expect(0.0, false).await;

    producer.put(0).await;
    // One job is not above activationValue 1.
    with_delayed.expect(1.0, false).await;
    producer.put(0).await;
    producer.put(600).await;
    with_delayed.expect(3.0, true).await;
    without_delayed.expect(2.0, true).await;

    // A reserved job still counts (a worker is on it).
    producer.reserve().await;
    with_delayed.expect(3.0, true).await;
    without_delayed.expect(2.0, true).await;

    drop(producer);
    with_delayed.close().await;
    without_delayed.close().await;
}

#[tokio::test]
async fn a_tube_that_does_not_exist_has_no_jobs_as_in_keda() {
    let test = "a_tube_that_does_not_exist_has_no_jobs_as_in_keda";
    let probe = service_or_skip(test, &format!("beanstalkd at {SERVER}"), async {
        TcpStream::connect(SERVER).await
    })
    .await;
    if probe.is_none() {
        return;
    }
    let tube = unique("missing");
    let harness = conformance("beanstalkd", setup(&[("server", SERVER), ("tube", &tube)])).await;
    harness.expect(0.0, false).await;
    harness.close().await;
}

#[tokio::test]
async fn triggers_on_one_server_share_one_connection_closed_after_the_last() {
    let test = "triggers_on_one_server_share_one_connection_closed_after_the_last";
    let probe = service_or_skip(test, &format!("beanstalkd at {SERVER}"), async {
        TcpStream::connect(SERVER).await
    })
    .await;
    if probe.is_none() {
        return;
    }
    let registry = Registry::builtin();
    let first = ScalerContext::new("beanstalkd", 0);
    let context = |index: usize, tube: &str| ScalerContext {
        metadata: [("server", SERVER), ("tube", tube), ("value", "5")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        clients: first.clients.clone(),
        ..ScalerContext::new("beanstalkd", index)
    };
    let a = registry.build(context(0, "a")).await.expect("builds");
    let b = registry.build(context(1, "b")).await.expect("builds");
    let pool = first.clients.pool::<BeanstalkdKey, BeanstalkdClient>();
    let key = BeanstalkdKey {
        server: SERVER.to_string(),
        connect_timeout: Duration::from_millis(30),
    };
    assert_eq!((pool.len(), pool.users(&key)), (1, 2));
    // Both read through it, concurrently.
    let (ra, rb) = tokio::join!(
        a.scaler().metrics_and_activity("s0-beanstalkd-a"),
        b.scaler().metrics_and_activity("s1-beanstalkd-b")
    );
    ra.expect("a reads");
    rb.expect("b reads");
    a.scaler().close().await;
    assert_eq!(pool.users(&key), 1);
    b.scaler().close().await;
    assert!(pool.is_empty());
}

#[tokio::test]
async fn an_unreachable_server_fails_to_build_naming_the_trigger_and_server() {
    // Nothing listens on port 1 of loopback.
    let ctx = ScalerContext {
        metadata: [("server", "127.0.0.1:1"), ("tube", "t"), ("value", "5")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..ScalerContext::new("beanstalkd", 2)
    };
    let err = Registry::builtin().build(ctx).await.expect_err("no server");
    assert!(matches!(err, ScalerError::Connect { .. }), "{err}");
    let message = keda_scalers::error::error_chain(&err);
    assert!(
        message.starts_with(
            "trigger 2 (beanstalkd): connecting to beanstalkd at 127.0.0.1:1 (parameter \"server\") failed: "
        ),
        "{message}"
    );
}
