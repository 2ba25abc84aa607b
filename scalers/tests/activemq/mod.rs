//! `activemq` against the ActiveMQ broker of scripts/services.sh: Jolokia on
//! 127.0.0.1:8161/api/jolokia (admin/admin, ActiveMQ's policy: an Origin header is required),
//! STOMP on 127.0.0.1:61613 for sending. Built from the documented example through the
//! registry; every test uses its own queue.

use keda_scalers::{Registry, ScalerContext};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{Setup, conformance, service_or_skip, unique};

const ENDPOINT: &str = "127.0.0.1:8161";
const STOMP: &str = "127.0.0.1:61613";
const CREDENTIALS: [(&str, &str); 2] = [("username", "admin"), ("password", "admin")];

/// Reads one STOMP frame (up to its NUL).
async fn frame(stream: &mut TcpStream) -> String {
    let mut frame = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        stream.read_exact(&mut byte).await.expect("a STOMP frame");
        if byte[0] == 0 {
            return String::from_utf8_lossy(&frame).into_owned();
        }
        frame.push(byte[0]);
    }
}

/// Sends `count` messages to `queue` over STOMP, each acknowledged by a receipt.
async fn send(queue: &str, count: usize) {
    let mut stream = TcpStream::connect(STOMP).await.expect("STOMP");
    stream
        .write_all(b"CONNECT\naccept-version:1.2\nhost:localhost\n\n\0")
        .await
        .expect("connect frame");
    let connected = frame(&mut stream).await;
    assert!(connected.starts_with("CONNECTED"), "{connected}");
    for i in 0..count {
        stream
            .write_all(
                format!("SEND\ndestination:/queue/{queue}\nreceipt:{i}\n\njob {i}\0").as_bytes(),
            )
            .await
            .expect("send frame");
        let receipt = frame(&mut stream).await;
        assert!(receipt.trim_start().starts_with("RECEIPT"), "{receipt}");
    }
    stream
        .write_all(b"DISCONNECT\n\n\0")
        .await
        .expect("disconnect");
}

async fn broker_or_skip(test: &str) -> bool {
    service_or_skip(test, &format!("ActiveMQ (Jolokia) at {ENDPOINT}"), async {
        TcpStream::connect(ENDPOINT).await.map(drop)
    })
    .await
    .is_some()
}

#[tokio::test]
async fn the_documented_example_reads_the_queue_size_through_jolokia() {
    let test = "the_documented_example_reads_the_queue_size_through_jolokia";
    if !broker_or_skip(test).await {
        return;
    }
    let queue = unique("amq");
    let harness = conformance(
        "activemq",
        Setup {
            metadata: &[
                ("managementEndpoint", ENDPOINT),
                ("destinationName", &queue),
                ("brokerName", "localhost"),
            ],
            auth: &CREDENTIALS,
            ..Setup::default()
        },
    )
    .await;
    // The queue does not exist until a message is sent: Jolokia answers status 404.
    let err = harness.expect_error().await.to_string();
    assert!(
        err.starts_with("trigger 0 (activemq): reading the size of queue")
            && err.contains("failed: ActiveMQ management endpoint response error code: 200 404"),
        "{err}"
    );
    assert!(
        err.contains("check \"destinationName\" and \"brokerName\""),
        "{err}"
    );
    send(&queue, 1).await;
    // The documented activationTargetQueueSize is 1: equal is inactive.
    harness.expect(1.0, false).await;
    send(&queue, 4).await;
    harness.expect(5.0, true).await;
    harness.close().await;
}

#[tokio::test]
async fn a_rest_api_template_names_the_queue_and_the_broker() {
    let test = "a_rest_api_template_names_the_queue_and_the_broker";
    if !broker_or_skip(test).await {
        return;
    }
    let queue = unique("amq-template");
    send(&queue, 3).await;
    let template = format!(
        "http://{ENDPOINT}/api/jolokia/read/org.apache.activemq:type=Broker,brokerName=localhost,destinationType=Queue,destinationName={queue}/QueueSize"
    );
    let harness = conformance(
        "activemq",
        Setup {
            metadata: &[
                ("restAPITemplate", &template),
                ("managementEndpoint", ""),
                ("destinationName", ""),
                ("brokerName", ""),
            ],
            auth: &CREDENTIALS,
            ..Setup::default()
        },
    )
    .await;
    assert_eq!(harness.metric_name, format!("s0-activemq-{queue}"));
    harness.expect(3.0, true).await;
    harness.close().await;
}

fn context(auth: &[(&str, &str)], extra: &[(&str, &str)]) -> ScalerContext {
    let mut metadata: Vec<(&str, &str)> = vec![
        ("managementEndpoint", ENDPOINT),
        ("destinationName", "any"),
        ("brokerName", "localhost"),
    ];
    metadata.extend_from_slice(extra);
    ScalerContext {
        metadata: metadata
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        auth_params: auth
            .iter()
            .map(|(k, v)| (k.to_string(), keda_scalers::Secret::new(*v)))
            .collect(),
        ..ScalerContext::new("activemq", 1)
    }
}

#[tokio::test]
async fn wrong_credentials_and_an_unreachable_endpoint_name_the_trigger_never_the_password() {
    let test = "wrong_credentials_and_an_unreachable_endpoint_name_the_trigger_never_the_password";
    if !broker_or_skip(test).await {
        return;
    }
    let registry = Registry::builtin();
    let wrong = registry
        .build(context(
            &[("username", "admin"), ("password", "n0t-the-pw")],
            &[],
        ))
        .await
        .expect("builds");
    let err = wrong
        .scaler()
        .metrics_and_activity("s1-activemq-any")
        .await
        .expect_err("refused");
    let message = keda_scalers::error::error_chain(&err);
    assert!(message.starts_with("trigger 1 (activemq): reading the size of queue \"any\" of broker \"localhost\" from http://127.0.0.1:8161/api/jolokia/read/"), "{message}");
    assert!(
        message.contains("(parameter \"managementEndpoint\")"),
        "{message}"
    );
    assert!(message.contains("HTTP 401"), "{message}");
    assert!(!message.contains("n0t-the-pw"), "{message}");

    let unreachable = registry
        .build(context(
            &CREDENTIALS,
            &[("managementEndpoint", "127.0.0.1:1")],
        ))
        .await
        .expect("builds");
    let err = unreachable
        .scaler()
        .metrics_and_activity("s1-activemq-any")
        .await
        .expect_err("nothing listens");
    let message = keda_scalers::error::error_chain(&err);
    assert!(
        message.starts_with("trigger 1 (activemq): reading the size of queue \"any\""),
        "{message}"
    );
    assert!(
        message.contains("http://127.0.0.1:1/api/jolokia"),
        "{message}"
    );
}
