//! The `rabbitmq` scaler against the real RabbitMQ on 127.0.0.1 (AMQP 5672, management API
//! 15672, guest/guest), built from its documented example through the registry.
//!
//! Every test declares its own uniquely named queues (and vhost) and deletes them at the end.
//! The management API's counters lag the queues by up to its statistics interval (5 s), so
//! HTTP values are awaited with a bounded timeout instead of a fixed sleep.

#[allow(dead_code)]
#[path = "common/amqp.rs"]
mod amqp;
#[allow(dead_code)] // shared helpers; this binary does not use the Redis ones
mod common;

use std::time::Duration;

use amqp::AmqpBroker;
use common::{Harness, Setup, conformance, unique};
use keda_scalers::scalers::rabbitmq::amqp::{AmqpClient, AmqpKey, CONNECTION_NAME};
use keda_scalers::{MetricsAndActivity, Registry, ScalerContext, ScalerError};
use lapin::options::BasicGetOptions;
use serde_json::Value;

const MANAGEMENT: &str = "http://127.0.0.1:15672";
const AMQP_URL: &str = "amqp://guest:guest@127.0.0.1:5672/";
const HTTP_URL: &str = "http://guest:guest@127.0.0.1:15672/";
/// Longer than the management API's default statistics interval (5 s), with margin for a
/// loaded machine.
const STATS_TIMEOUT: Duration = Duration::from_secs(30);

/// The test's own AMQP connection (shared helper) and management API client.
struct Broker {
    amqp: AmqpBroker,
    http: reqwest::Client,
}

impl std::ops::Deref for Broker {
    type Target = AmqpBroker;

    fn deref(&self) -> &AmqpBroker {
        &self.amqp
    }
}

impl Broker {
    /// Connects to `vhost` (`/` by default), or skips (fails in CI) without a broker.
    async fn connect_or_skip(test: &str, vhost: &str) -> Option<Self> {
        let amqp = AmqpBroker::connect_or_skip(test, vhost).await?;
        // reqwest is built without a default crypto provider; hand it a ring configuration.
        let tls = keda_scalers::tls::TlsSettings::default()
            .client_config()
            .expect("TLS config");
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .tls_backend_preconfigured(tls)
            .build()
            .expect("http client");
        Some(Self { amqp, http })
    }

    async fn management(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut request = self
            .http
            .request(method.clone(), format!("{MANAGEMENT}{path}"))
            .basic_auth("guest", Some("guest"));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("management API");
        let status = response.status();
        assert!(status.is_success(), "{method} {path}: {status}");
        response.json().await.unwrap_or(Value::Null)
    }

    async fn create_vhost(&self, vhost: &str) {
        let escaped = keda_scalers::scalers::rabbitmq::url::query_escape(vhost);
        self.management(
            reqwest::Method::PUT,
            &format!("/api/vhosts/{escaped}"),
            None,
        )
        .await;
        self.management(
            reqwest::Method::PUT,
            &format!("/api/permissions/{escaped}/guest"),
            Some(serde_json::json!({"configure": ".*", "write": ".*", "read": ".*"})),
        )
        .await;
    }

    async fn delete_vhost(&self, vhost: &str) {
        let escaped = keda_scalers::scalers::rabbitmq::url::query_escape(vhost);
        self.management(
            reqwest::Method::DELETE,
            &format!("/api/vhosts/{escaped}"),
            None,
        )
        .await;
    }

    /// Names of the connections the broker lists on `vhost`.
    async fn connections_on(&self, vhost: &str) -> Vec<(String, String)> {
        let escaped = keda_scalers::scalers::rabbitmq::url::query_escape(vhost);
        let list = self
            .management(
                reqwest::Method::GET,
                &format!("/api/vhosts/{escaped}/connections"),
                None,
            )
            .await;
        list.as_array()
            .map(|items| {
                items
                    .iter()
                    .map(|c| {
                        (
                            c["name"].as_str().unwrap_or_default().to_string(),
                            c["client_properties"]["connection_name"]
                                .as_str()
                                .unwrap_or_default()
                                .to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Polls the management API until `vhost` has `expected` connections named
    /// [`CONNECTION_NAME`]; returns the last list.
    async fn await_our_connections(&self, vhost: &str, expected: usize) -> Vec<String> {
        let mut last = Vec::new();
        let _ = tokio::time::timeout(STATS_TIMEOUT, async {
            loop {
                last = self
                    .connections_on(vhost)
                    .await
                    .into_iter()
                    .filter(|(_, name)| name == CONNECTION_NAME)
                    .map(|(id, _)| id)
                    .collect();
                if last.len() == expected {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        })
        .await;
        last
    }

    async fn close(self) {
        self.amqp.close().await;
    }
}

/// The documented example, pointed at the local broker, reading `queue`, with `metadata`
/// overriding the example's.
async fn harness(host: &str, queue: &str, metadata: &[(&str, &str)]) -> Harness {
    let mut all = vec![("queueName", queue)];
    all.extend_from_slice(metadata);
    conformance(
        "rabbitmq",
        Setup {
            metadata: &all,
            auth: &[("host", host)],
            ..Setup::default()
        },
    )
    .await
}

/// An HTTP harness: the example with `protocol: http`.
async fn http_harness(queue: &str, metadata: &[(&str, &str)]) -> Harness {
    let mut all = vec![("protocol", "http")];
    all.extend_from_slice(metadata);
    harness(HTTP_URL, queue, &all).await
}

async fn report(h: &Harness) -> Result<MetricsAndActivity, ScalerError> {
    h.built.scaler().metrics_and_activity(&h.metric_name).await
}

/// Polls until the scaler reports exactly `value` and `active` (the management API's
/// counters lag), then asserts it once more through the conformance helper.
async fn eventually(h: &Harness, value: f64, active: bool) {
    let mut last = None;
    let reached = tokio::time::timeout(STATS_TIMEOUT, async {
        loop {
            match report(h).await {
                Ok(r)
                    if r.values.len() == 1 && r.values[0].value == value && r.active == active =>
                {
                    return;
                }
                other => last = Some(format!("{other:?}")),
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
    .await;
    assert!(
        reached.is_ok(),
        "{}: expected ({value}, {active}) within {STATS_TIMEOUT:?}, last {last:?}",
        h.metric_name
    );
    h.expect(value, active).await;
}

#[tokio::test]
async fn amqp_reports_ready_messages_with_the_activation_boundary() {
    let Some(broker) = Broker::connect_or_skip("rabbitmq amqp length", "/").await else {
        return;
    };
    let queue = unique("rmq-amqp");
    broker.declare(&queue).await;
    let h = harness(AMQP_URL, &queue, &[]).await;
    assert_eq!(h.metric_name, format!("s0-rabbitmq-{queue}"));
    let target = h.built.scaler().metric_specs()[0]
        .external
        .as_ref()
        .and_then(|e| e.target.average_value.clone())
        .expect("AverageValue target");
    assert_eq!(target.0, "10"); // the example's value
    // The example's activationValue is 2.
    h.expect(0.0, false).await;
    broker.publish(&queue, 2).await;
    h.expect(2.0, false).await; // equal to activationValue: inactive
    broker.publish(&queue, 1).await;
    h.expect(3.0, true).await;
    broker.delete(&queue).await;
    h.close().await;
    broker.close().await;
}

#[tokio::test]
async fn unacknowledged_messages_count_over_http_unless_excluded_and_never_over_amqp() {
    let Some(broker) = Broker::connect_or_skip("rabbitmq unacked", "/").await else {
        return;
    };
    let queue = unique("rmq-unacked");
    broker.declare(&queue).await;
    broker.publish(&queue, 5).await;
    // A second channel takes two deliveries and holds them unacknowledged.
    let consumer = broker.connection.create_channel().await.expect("channel");
    for _ in 0..2 {
        let got = consumer
            .basic_get(queue.as_str().into(), BasicGetOptions { no_ack: false })
            .await
            .expect("basic.get");
        assert!(got.is_some(), "a message to hold");
    }
    let all = http_harness(&queue, &[]).await;
    let ready = http_harness(&queue, &[("excludeUnacknowledged", "true")]).await;
    let amqp = harness(AMQP_URL, &queue, &[]).await;
    eventually(&all, 5.0, true).await; // 3 ready + 2 unacked
    eventually(&ready, 3.0, true).await;
    amqp.expect(3.0, true).await; // a passive declare counts ready messages only

    // Releasing the held deliveries makes them ready again.
    consumer.close(200, "OK".into()).await.expect("close");
    eventually(&ready, 5.0, true).await;
    amqp.expect(5.0, true).await;

    broker.delete(&queue).await;
    for h in [all, ready, amqp] {
        h.close().await;
    }
    broker.close().await;
}

#[tokio::test]
async fn regex_combines_matching_queues_by_sum_avg_and_max() {
    let Some(broker) = Broker::connect_or_skip("rabbitmq regex", "/").await else {
        return;
    };
    let prefix = unique("rmq-regex");
    let queues: Vec<String> = (0..3).map(|i| format!("{prefix}-q{i}")).collect();
    for (queue, n) in queues.iter().zip([1, 2, 6]) {
        broker.declare(queue).await;
        broker.publish(queue, n).await;
    }
    // A queue that does not match.
    let other = unique("rmq-other");
    broker.declare(&other).await;
    broker.publish(&other, 50).await;

    let regex = format!("^{prefix}-q.*$");
    // (operation, expected value): 1 + 2 + 6, (9 / 3), max
    for (operation, expected) in [("sum", 9.0), ("avg", 3.0), ("max", 6.0)] {
        let h = http_harness(
            &regex,
            &[
                ("useRegex", "true"),
                ("operation", operation),
                ("pageSize", "10"),
            ],
        )
        .await;
        eventually(&h, expected, true).await;
        h.close().await;
    }
    // No match: zero, inactive.
    let none = http_harness(&format!("^{prefix}-nothing$"), &[("useRegex", "true")]).await;
    none.expect(0.0, false).await;
    none.close().await;
    // More matches than one page holds: an error, as in KEDA.
    let paged = http_harness(&regex, &[("useRegex", "true"), ("pageSize", "1")]).await;
    let err = tokio::time::timeout(STATS_TIMEOUT, async {
        loop {
            if let Err(e) = report(&paged).await {
                return e;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
    .await
    .expect("an error for more than one page");
    assert!(
        err.to_string()
            .contains("regex matches more queues than can be recovered at once"),
        "{err}"
    );
    paged.close().await;

    for queue in queues.iter().chain([&other]) {
        broker.delete(queue).await;
    }
    broker.close().await;
}

#[tokio::test]
async fn a_vhost_is_read_over_both_protocols_through_one_shared_amqp_connection() {
    let Some(root) = Broker::connect_or_skip("rabbitmq vhost", "/").await else {
        return;
    };
    let vhost = unique("rmq-vhost");
    root.create_vhost(&vhost).await;
    let broker = Broker::connect_or_skip("rabbitmq vhost", &vhost)
        .await
        .expect("connect to the new vhost");
    let (a, b) = (unique("rmq-a"), unique("rmq-b"));
    broker.declare(&a).await;
    broker.declare(&b).await;
    broker.publish(&a, 3).await;
    broker.publish(&b, 4).await;

    // Two triggers with the same host and vhostName share one AMQP connection.
    let registry = Registry::builtin();
    let pools = keda_scalers::pool::ClientPools::new();
    let build = |queue: &str| {
        let mut ctx = ScalerContext::new("rabbitmq", 0);
        ctx.metadata = [
            ("host", AMQP_URL),
            ("queueName", queue),
            ("vhostName", vhost.as_str()),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        ctx.clients = pools.clone();
        registry.build(ctx)
    };
    let sa = build(&a).await.expect("a builds");
    let sb = build(&b).await.expect("b builds");
    assert_eq!(pools.pool::<AmqpKey, AmqpClient>().len(), 1);
    let value = |r: MetricsAndActivity| r.values[0].value;
    let ra = sa
        .scaler()
        .metrics_and_activity("s0-rabbitmq-a")
        .await
        .expect("a reads");
    let rb = sb
        .scaler()
        .metrics_and_activity("s0-rabbitmq-b")
        .await
        .expect("b reads");
    assert_eq!((value(ra), value(rb)), (3.0, 4.0));
    let ours = root.await_our_connections(&vhost, 1).await;
    assert_eq!(
        ours.len(),
        1,
        "one AMQP connection for two triggers: {ours:?}"
    );

    // The broker closes the connection: the next call opens a new one.
    let escaped_name =
        keda_scalers::scalers::rabbitmq::url::query_escape(&ours[0]).replace('+', "%20");
    root.management(
        reqwest::Method::DELETE,
        &format!("/api/connections/{escaped_name}"),
        None,
    )
    .await;
    let recovered = tokio::time::timeout(STATS_TIMEOUT, async {
        loop {
            if let Ok(r) = sa.scaler().metrics_and_activity("s0-rabbitmq-a").await {
                return r;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
    .await
    .expect("the connection is re-opened");
    assert_eq!(value(recovered), 3.0);
    let reopened = root.await_our_connections(&vhost, 1).await;
    assert_eq!(reopened.len(), 1, "{reopened:?}");
    assert_ne!(reopened, ours, "a new connection replaced the closed one");

    // The same vhost over the management API, named by vhostName.
    let http = http_harness(&b, &[("vhostName", vhost.as_str())]).await;
    eventually(&http, 4.0, true).await;
    http.close().await;

    // The last trigger to close closes the connection.
    sa.scaler().close().await;
    assert_eq!(pools.pool::<AmqpKey, AmqpClient>().len(), 1);
    sb.scaler().close().await;
    assert!(pools.pool::<AmqpKey, AmqpClient>().is_empty());
    assert_eq!(
        root.await_our_connections(&vhost, 0).await,
        Vec::<String>::new()
    );

    broker.delete(&a).await;
    broker.delete(&b).await;
    broker.close().await;
    root.delete_vhost(&vhost).await;
    root.close().await;
}

#[tokio::test]
async fn message_rate_is_a_rate_and_queued_messages_keep_the_trigger_active() {
    let Some(broker) = Broker::connect_or_skip("rabbitmq message rate", "/").await else {
        return;
    };
    let queue = unique("rmq-rate");
    broker.declare(&queue).await;
    let h = http_harness(
        &queue,
        &[
            ("mode", "MessageRate"),
            ("value", "5"),
            ("activationValue", "0"),
        ],
    )
    .await;
    let target = h.built.scaler().metric_specs()[0]
        .external
        .as_ref()
        .and_then(|e| e.target.average_value.clone())
        .expect("target");
    assert_eq!(target.0, "5");
    // A fresh, idle queue: no publish rate, no messages. Deterministic.
    h.expect(0.0, false).await;

    broker.publish(&queue, 3).await;
    // The rate itself depends on where the broker's sampling interval falls, so only its
    // bounds are deterministic: 3 messages over at least one second are at most 3/s. The
    // queued messages make the trigger active whatever the rate (KEDA's MessageRate rule).
    let r = tokio::time::timeout(STATS_TIMEOUT, async {
        loop {
            if let Ok(r) = report(&h).await
                && r.active
            {
                return r;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
    .await
    .expect("active once the management API counts the messages");
    let rate = r.values[0].value;
    assert!((0.0..=3.0).contains(&rate), "publish rate {rate}");

    broker.delete(&queue).await;
    h.close().await;
    broker.close().await;
}

#[tokio::test]
async fn a_missing_queue_is_an_error_and_the_next_query_still_works() {
    let Some(broker) = Broker::connect_or_skip("rabbitmq missing queue", "/").await else {
        return;
    };
    let missing = harness(AMQP_URL, &unique("rmq-missing"), &[]).await;
    let err = missing.expect_error().await;
    assert!(matches!(err, ScalerError::Query { .. }), "{err}");
    // The AMQP reply code, not the broker's text (issue 30, finding 5).
    assert!(
        err.to_string().contains("404 AMQP soft error: NOT-FOUND"),
        "{err}"
    );

    // The broker closed the channel of the failed declare; it must not be reused.
    let queue = unique("rmq-after-missing");
    broker.declare(&queue).await;
    broker.publish(&queue, 1).await;
    let present = harness(AMQP_URL, &queue, &[]).await;
    present.expect(1.0, false).await;
    missing.expect_error().await;
    present.expect(1.0, false).await;

    let http_missing = http_harness(&unique("rmq-missing"), &[]).await;
    let err = http_missing.expect_error().await;
    assert!(err.to_string().contains("404"), "{err}");

    broker.delete(&queue).await;
    for h in [missing, present, http_missing] {
        h.close().await;
    }
    broker.close().await;
}

#[tokio::test]
async fn broker_down_and_wrong_credentials_fail_without_the_password() {
    let Some(broker) = Broker::connect_or_skip("rabbitmq failures", "/").await else {
        return;
    };
    let registry = Registry::builtin();
    let build = |host: &str, protocol: &str| {
        registry.build(ScalerContext {
            metadata: [("host", host), ("queueName", "q"), ("protocol", protocol)]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..ScalerContext::new("rabbitmq", 0)
        })
    };

    // Nothing listens on port 1.
    let err = build("amqp://guest:hunter2-down@127.0.0.1:1/", "auto")
        .await
        .expect_err("broker down");
    let message = err.to_string();
    assert!(
        message.starts_with(
            "trigger 0 (rabbitmq): connecting to RabbitMQ AMQP at amqp://127.0.0.1:1 failed"
        ),
        "{message}"
    );
    assert!(!message.contains("hunter2"), "{message}");

    // The broker refuses the password.
    let err = build("amqp://guest:hunter2-wrong@127.0.0.1:5672/", "auto")
        .await
        .expect_err("wrong password");
    let message = err.to_string();
    assert!(matches!(err, ScalerError::Connect { .. }), "{message}");
    assert!(!message.contains("hunter2"), "{message}");

    // Over HTTP the client is built without a request; the query fails with 401.
    let built = build("http://guest:hunter2-wrong@127.0.0.1:15672/", "auto")
        .await
        .expect("an HTTP trigger builds without asking the broker");
    let err = built
        .scaler()
        .metrics_and_activity("s0-rabbitmq-q")
        .await
        .expect_err("wrong password");
    let message = err.to_string();
    assert!(message.contains("401"), "{message}");
    assert!(!message.contains("hunter2"), "{message}");
    built.scaler().close().await;

    // Management API down.
    let built = build("http://guest:hunter2-down@127.0.0.1:1/", "auto")
        .await
        .expect("builds");
    let err = built
        .scaler()
        .metrics_and_activity("s0-rabbitmq-q")
        .await
        .expect_err("down");
    let message = err.to_string();
    assert!(
        message.contains("at management API") || message.contains("RabbitMQ management API"),
        "{message}"
    );
    assert!(!message.contains("hunter2"), "{message}");
    broker.close().await;
}

/// The AMQP host is dialed as written. lapin's URI parser reads the host as a domain name only,
/// and takes `localhost` for an IPv6 address: `amqp://[::1]:5672` used to reach the broker on
/// 127.0.0.1 (and `amqp://[fd00::5]` would reach one on the operator's own host).
#[tokio::test]
async fn an_ip_address_host_is_dialed_as_written() {
    let Some(broker) = Broker::connect_or_skip("rabbitmq ip host", "/").await else {
        return;
    };
    let queue = unique("rmq-ip");
    broker.declare(&queue).await;
    let registry = Registry::builtin();
    let build = |host: &str| {
        registry.build(ScalerContext {
            metadata: [("host", host), ("queueName", queue.as_str())]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..ScalerContext::new("rabbitmq", 0)
        })
    };
    let built = build(AMQP_URL).await.expect("127.0.0.1 is the broker");
    built.scaler().close().await;
    // The broker listens on 127.0.0.1 only: nothing answers on [::1]:5672.
    let err = build("amqp://guest:guest@[::1]:5672/")
        .await
        .expect_err("nothing listens on [::1]:5672");
    assert!(
        err.to_string().starts_with(
            "trigger 0 (rabbitmq): connecting to RabbitMQ AMQP at amqp://[::1]:5672 failed"
        ),
        "{err}"
    );
    broker.delete(&queue).await;
    broker.close().await;
}
