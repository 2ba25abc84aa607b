//! Issue 16: the `rabbitmq` trigger's OAuth2 (client credentials, management API) and SASL
//! EXTERNAL (AMQPS with a client certificate) against the real RabbitMQ on 127.0.0.1, which
//! `scripts/services.sh` sets up with:
//! - the OAuth 2 backend (`rabbitmq_auth_backend_oauth2`) after the internal one, resource
//!   server id `keda_rs`, checking HS256 tokens signed with `/etc/rabbitmq/keda-rs/oauth2-hs256.key`;
//! - an AMQPS listener on 5671 (server certificate of `/etc/rabbitmq/keda-rs/ca.pem`, client
//!   certificates of that CA verified when given) with `rabbitmq_auth_mechanism_ssl`: EXTERNAL
//!   logs in as the user named by the certificate's CN.
//!
//! The OAuth 2 token endpoint is the test's own, on loopback: it checks the client id and
//! secret of a client credentials grant, counts requests, and issues JWTs the broker accepts (or,
//! for one test, signed with another key, which the broker refuses). Client certificates are
//! issued at test time from the services CA (rcgen), with the CN of a user the test creates.

#[allow(dead_code)]
#[path = "common/amqp.rs"]
mod amqp;
#[allow(dead_code)]
mod common;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use amqp::AmqpBroker;
use hmac::{Hmac, Mac};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use keda_scalers::pool::ClientPools;
use keda_scalers::{Registry, ScalerContext, ScalerError, Secret};
use serde_json::{Value, json};
use sha2::Sha256;

const MANAGEMENT: &str = "http://127.0.0.1:15672";
const AMQPS_ADDRESS: &str = "127.0.0.1:5671";
const CLIENT_ID: &str = "keda-rs-client";
const CLIENT_SECRET: &str = "client-s3cret-never-shown";
/// What the broker's OAuth 2 backend needs in a token: the audience, and scopes prefixed with
/// it (read on every vhost, and a tag that lets the user in to the management API).
const RESOURCE_SERVER: &str = "keda_rs";
const SCOPES: &str = "keda_rs.read:*/*,keda_rs.tag:monitoring";
/// Longer than the management API's statistics interval (5 s), with margin.
const STATS_TIMEOUT: Duration = Duration::from_secs(30);

/// `/etc/rabbitmq/keda-rs`, made by `scripts/services.sh`.
fn auth_dir() -> PathBuf {
    PathBuf::from("/etc/rabbitmq/keda-rs")
}

/// The broker's TLS and OAuth 2 material, or `None` (fails under `CI=true`) without it.
struct Material {
    ca_pem: String,
    ca_key: String,
    signing_key: Vec<u8>,
}

async fn material_or_skip(test: &str) -> Option<Material> {
    let attempt = async {
        let read = |name: &str| {
            std::fs::read_to_string(auth_dir().join(name))
                .map_err(|e| format!("{}: {e}", auth_dir().join(name).display()))
        };
        let material = Material {
            ca_pem: read("ca.pem")?,
            ca_key: read("ca.key")?,
            signing_key: read("oauth2-hs256.key")?.into_bytes(),
        };
        tokio::net::TcpStream::connect(AMQPS_ADDRESS)
            .await
            .map_err(|e| format!("no AMQPS listener on {AMQPS_ADDRESS}: {e}"))?;
        Ok::<_, String>(material)
    };
    common::service_or_skip(
        test,
        "RabbitMQ with AMQPS and OAuth 2 (scripts/services.sh)",
        attempt,
    )
    .await
}

// ---------------------------------------------------------------------------------------------
// Base64 and JWTs (HS256), enough for the token endpoint.

fn base64(bytes: &[u8], url_safe: bool) -> String {
    let alphabet: &[u8; 64] = if url_safe {
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    } else {
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    };
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..=chunk.len() {
            out.push(char::from(alphabet[((n >> (18 - 6 * i)) & 63) as usize]));
        }
        if !url_safe {
            out.push_str(&"=".repeat(3 - chunk.len()));
        }
    }
    out
}

/// A JWT the broker's OAuth 2 backend reads: audience `keda_rs`, `scopes`, expiring in
/// `lifetime`, signed with `key` (HS256).
fn jwt(key: &[u8], subject: &str, scopes: &[String], lifetime: Duration) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let header = json!({"alg": "HS256", "typ": "JWT", "kid": "keda-rs"});
    let claims = json!({
        "sub": subject,
        "client_id": subject,
        "aud": [RESOURCE_SERVER],
        "scope": scopes,
        "iat": now,
        "exp": now + lifetime.as_secs(),
    });
    let signed = format!(
        "{}.{}",
        base64(header.to_string().as_bytes(), true),
        base64(claims.to_string().as_bytes(), true)
    );
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC key");
    mac.update(signed.as_bytes());
    format!("{signed}.{}", base64(&mac.finalize().into_bytes(), true))
}

// ---------------------------------------------------------------------------------------------
// The token endpoint.

/// How the endpoint issues tokens.
#[derive(Clone)]
struct Issuer {
    /// The key tokens are signed with (the broker's, or another one).
    key: Vec<u8>,
    /// `expires_in` of the answers.
    expires_in: u64,
}

/// An OAuth 2 token endpoint (client credentials grant) on a free loopback port.
struct TokenEndpoint {
    url: String,
    /// Token requests received, granted or not.
    requests: Arc<AtomicUsize>,
    /// The form of the last request, client credentials removed.
    last_form: Arc<Mutex<BTreeMap<String, String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TokenEndpoint {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TokenEndpoint {
    async fn start(issuer: Issuer) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!(
            "http://{}/oauth/token",
            listener.local_addr().expect("addr")
        );
        let requests = Arc::new(AtomicUsize::new(0));
        let last_form = Arc::new(Mutex::new(BTreeMap::new()));
        let task = {
            let (requests, last_form) = (Arc::clone(&requests), Arc::clone(&last_form));
            tokio::spawn(async move {
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        continue;
                    };
                    let (issuer, requests, last_form) = (
                        issuer.clone(),
                        Arc::clone(&requests),
                        Arc::clone(&last_form),
                    );
                    tokio::spawn(async move {
                        let service = service_fn(move |request: hyper::Request<Incoming>| {
                            let (issuer, requests, last_form) = (
                                issuer.clone(),
                                Arc::clone(&requests),
                                Arc::clone(&last_form),
                            );
                            async move {
                                requests.fetch_add(1, Ordering::SeqCst);
                                let (status, body) = grant(&issuer, request, &last_form).await;
                                let response = hyper::Response::builder()
                                    .status(status)
                                    .header("content-type", "application/json")
                                    .body(Full::new(Bytes::from(body.to_string())))
                                    .expect("response");
                                Ok::<_, Infallible>(response)
                            }
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
            })
        };
        Self {
            url,
            requests,
            last_form,
            task,
        }
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    fn last_form(&self) -> BTreeMap<String, String> {
        self.last_form.lock().expect("form").clone()
    }
}

/// Answers one token request: RFC 6749 client credentials, the client authenticated by HTTP
/// Basic (form-encoded id and secret) or by `client_id` and `client_secret` in the form.
async fn grant(
    issuer: &Issuer,
    request: hyper::Request<Incoming>,
    last_form: &Mutex<BTreeMap<String, String>>,
) -> (hyper::StatusCode, Value) {
    let basic = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let form_type = request
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    let body = request
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let mut form: BTreeMap<String, String> = url::form_urlencoded::parse(&body)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let from_form = (form.remove("client_id"), form.remove("client_secret"));
    *last_form.lock().expect("form") = form.clone();
    if !form_type {
        return (
            hyper::StatusCode::BAD_REQUEST,
            json!({"error": "invalid_request"}),
        );
    }
    let encode =
        |s: &str| -> String { url::form_urlencoded::byte_serialize(s.as_bytes()).collect() };
    let expected_basic = format!(
        "Basic {}",
        base64(
            format!("{}:{}", encode(CLIENT_ID), encode(CLIENT_SECRET)).as_bytes(),
            false
        )
    );
    let authenticated = basic.as_deref() == Some(expected_basic.as_str())
        || (from_form.0.as_deref() == Some(CLIENT_ID)
            && from_form.1.as_deref() == Some(CLIENT_SECRET));
    if !authenticated {
        return (
            hyper::StatusCode::UNAUTHORIZED,
            json!({"error": "invalid_client", "error_description": "Bad client credentials"}),
        );
    }
    if form.get("grant_type").map(String::as_str) != Some("client_credentials") {
        return (
            hyper::StatusCode::BAD_REQUEST,
            json!({"error": "unsupported_grant_type"}),
        );
    }
    let scopes: Vec<String> = form
        .get("scope")
        .map(|s| s.split(' ').map(str::to_string).collect())
        .unwrap_or_default();
    let token = jwt(
        &issuer.key,
        CLIENT_ID,
        &scopes,
        Duration::from_secs(issuer.expires_in.max(60)),
    );
    (
        hyper::StatusCode::OK,
        json!({"access_token": token, "token_type": "bearer", "expires_in": issuer.expires_in}),
    )
}

// ---------------------------------------------------------------------------------------------
// The broker side: queues through AMQP (guest), users and connections through the management
// API (guest).

fn management_client() -> reqwest::Client {
    keda_scalers::http_client::reqwest_client(
        &keda_scalers::tls::TlsSettings::default(),
        Duration::from_secs(10),
    )
    .expect("client")
}

async fn management(method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
    let mut request = management_client()
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

/// A user without a password, allowed everything on `/`: one EXTERNAL logs in as.
async fn create_certificate_user(name: &str) {
    management(
        reqwest::Method::PUT,
        &format!("/api/users/{name}"),
        Some(json!({"password_hash": "", "tags": ""})),
    )
    .await;
    management(
        reqwest::Method::PUT,
        &format!("/api/permissions/%2F/{name}"),
        Some(json!({"configure": ".*", "write": ".*", "read": ".*"})),
    )
    .await;
}

async fn delete_user(name: &str) {
    management(reqwest::Method::DELETE, &format!("/api/users/{name}"), None).await;
}

/// (user, auth_mechanism) of the broker's connections named `keda-rs` (the scalers').
async fn scaler_connections() -> Vec<(String, String)> {
    let list = management(reqwest::Method::GET, "/api/connections", None).await;
    list.as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["client_properties"]["connection_name"].as_str() == Some("keda-rs"))
        .map(|c| {
            (
                c["user"].as_str().unwrap_or_default().to_string(),
                c["auth_mechanism"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// A client certificate and key (PEM) of the services CA with `common_name` as subject CN.
fn client_certificate(material: &Material, common_name: &str) -> (String, String) {
    let ca_key = rcgen::KeyPair::from_pem(&material.ca_key).expect("CA key");
    let issuer = rcgen::Issuer::from_ca_cert_pem(&material.ca_pem, ca_key).expect("CA");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, common_name);
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = params.signed_by(&key, &issuer).expect("signed");
    (cert.pem(), key.serialize_pem())
}

// ---------------------------------------------------------------------------------------------
// Building triggers.

/// A `rabbitmq` trigger context with `metadata` and `auth` (TriggerAuthentication
/// parameters), sharing `clients`.
fn context(
    clients: &ClientPools,
    metadata: &[(&str, &str)],
    auth: &[(&str, &str)],
) -> ScalerContext {
    ScalerContext {
        metadata: metadata
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        auth_params: auth
            .iter()
            .map(|(k, v)| (k.to_string(), Secret::new(*v)))
            .collect(),
        clients: clients.clone(),
        scalable_name: "consumer".into(),
        scalable_namespace: "default".into(),
        ..ScalerContext::new("rabbitmq", 0)
    }
}

/// The OAuth2 parameters `spec.oauth2` gives (`clientSecret` = `secret`).
fn oauth_auth<'a>(endpoint: &'a TokenEndpoint, secret: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("oauthTokenURI", endpoint.url.as_str()),
        ("clientID", CLIENT_ID),
        ("clientSecret", secret),
        ("scopes", SCOPES),
        ("endpointParams", "audience=keda_rs"),
    ]
}

struct Built {
    scaler: keda_scalers::BuiltScaler,
    metric: String,
}

async fn build(ctx: ScalerContext) -> Result<Built, ScalerError> {
    let scaler = Registry::builtin().build(ctx).await?;
    let metric = scaler.scaler().metric_specs()[0]
        .external
        .as_ref()
        .expect("external")
        .metric
        .name
        .clone();
    Ok(Built { scaler, metric })
}

impl Built {
    async fn read(&self) -> Result<f64, ScalerError> {
        let report = self
            .scaler
            .scaler()
            .metrics_and_activity(&self.metric)
            .await?;
        Ok(report.values[0].value)
    }

    /// Polls until the value is `expected` (the management API's counters lag).
    async fn eventually(&self, expected: f64) {
        let mut last = None;
        let reached = tokio::time::timeout(STATS_TIMEOUT, async {
            loop {
                match self.read().await {
                    Ok(v) if v == expected => return,
                    other => last = Some(format!("{other:?}")),
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        })
        .await;
        assert!(
            reached.is_ok(),
            "expected {expected} within {STATS_TIMEOUT:?}, last {last:?}"
        );
    }

    async fn close(self) {
        self.scaler.scaler().close().await;
    }
}

fn oauth_metadata(queue: &str) -> Vec<(&str, &str)> {
    vec![
        ("host", "http://127.0.0.1:15672/"),
        ("queueName", queue),
        ("mode", "QueueLength"),
        ("value", "5"),
    ]
}

// ---------------------------------------------------------------------------------------------
// OAuth2.

#[tokio::test]
async fn oauth2_reads_the_queue_length_through_the_management_api_with_one_cached_token() {
    let Some(material) = material_or_skip("rabbitmq oauth2 queue length").await else {
        return;
    };
    let Some(broker) = AmqpBroker::connect_or_skip("rabbitmq oauth2 queue length", "/").await
    else {
        return;
    };
    let queue = common::unique("rmq-oauth");
    broker.declare(&queue).await;
    broker.publish(&queue, 3).await;
    let endpoint = TokenEndpoint::start(Issuer {
        key: material.signing_key.clone(),
        expires_in: 3600,
    })
    .await;
    let clients = ClientPools::new();
    let auth = oauth_auth(&endpoint, CLIENT_SECRET);
    let first = build(context(&clients, &oauth_metadata(&queue), &auth))
        .await
        .expect("builds");
    // Built without asking for a token, as KEDA.
    assert_eq!(endpoint.requests(), 0);
    first.eventually(3.0).await;
    // The grant as Go's clientcredentials sends it: scopes space-joined, the extra parameters.
    let form = endpoint.last_form();
    assert_eq!(form["grant_type"], "client_credentials");
    assert_eq!(form["scope"], "keda_rs.read:*/* keda_rs.tag:monitoring");
    assert_eq!(form["audience"], "keda_rs");

    // A second trigger of the same client shares the token; polls reuse it.
    let second = build(context(&clients, &oauth_metadata(&queue), &auth))
        .await
        .expect("builds");
    for _ in 0..5 {
        assert_eq!(first.read().await.expect("read"), 3.0);
        assert_eq!(second.read().await.expect("read"), 3.0);
    }
    assert_eq!(
        endpoint.requests(),
        1,
        "one token for every poll of both triggers"
    );

    // The management API's answer is what the broker counts: take one message.
    broker.take(&queue, 1).await;
    second.eventually(2.0).await;
    assert_eq!(endpoint.requests(), 1);

    broker.delete(&queue).await;
    first.close().await;
    second.close().await;
    broker.close().await;
}

#[tokio::test]
async fn a_token_about_to_expire_is_renewed_before_the_next_request() {
    let Some(material) = material_or_skip("rabbitmq oauth2 renewal").await else {
        return;
    };
    let Some(broker) = AmqpBroker::connect_or_skip("rabbitmq oauth2 renewal", "/").await else {
        return;
    };
    let queue = common::unique("rmq-oauth-renew");
    broker.declare(&queue).await;
    // Tokens valid for 5 s have less than the 10 s margin left as soon as they arrive: every
    // request asks for a new one (the JWT itself is valid for a minute, so the broker takes it).
    let endpoint = TokenEndpoint::start(Issuer {
        key: material.signing_key.clone(),
        expires_in: 5,
    })
    .await;
    let built = build(context(
        &ClientPools::new(),
        &oauth_metadata(&queue),
        &oauth_auth(&endpoint, CLIENT_SECRET),
    ))
    .await
    .expect("builds");
    for polls in 1..=3 {
        assert_eq!(built.read().await.expect("read"), 0.0);
        assert_eq!(endpoint.requests(), polls);
    }
    broker.delete(&queue).await;
    built.close().await;
    broker.close().await;
}

#[tokio::test]
async fn a_wrong_client_secret_is_an_error_naming_the_parameters_without_the_secret() {
    let Some(material) = material_or_skip("rabbitmq oauth2 wrong secret").await else {
        return;
    };
    let endpoint = TokenEndpoint::start(Issuer {
        key: material.signing_key.clone(),
        expires_in: 3600,
    })
    .await;
    let wrong = "wrong-s3cret-never-shown";
    let built = build(context(
        &ClientPools::new(),
        &oauth_metadata("any-queue"),
        &oauth_auth(&endpoint, wrong),
    ))
    .await
    .expect("builds: the token is asked for at the first poll");
    let err = built.read().await.expect_err("refused client").to_string();
    assert!(err.starts_with("trigger 0 (rabbitmq): "), "{err}");
    assert!(
        err.contains(&format!(
            "OAuth2 token request to {} was refused: 401 Unauthorized",
            endpoint.url
        )),
        "{err}"
    );
    assert!(
        err.contains(r#"check parameters "clientID" and "clientSecret""#),
        "{err}"
    );
    assert!(!err.contains(wrong), "{err}");
    // Go's auto-detection: HTTP Basic first, then the credentials in the form.
    assert_eq!(endpoint.requests(), 2);
    built.close().await;
}

#[tokio::test]
async fn a_token_the_broker_refuses_is_a_clear_error_and_is_not_reused() {
    let Some(_material) = material_or_skip("rabbitmq oauth2 refused token").await else {
        return;
    };
    let endpoint = TokenEndpoint::start(Issuer {
        key: b"not-the-key-the-broker-trusts".to_vec(),
        expires_in: 3600,
    })
    .await;
    let built = build(context(
        &ClientPools::new(),
        &oauth_metadata("any-queue"),
        &oauth_auth(&endpoint, CLIENT_SECRET),
    ))
    .await
    .expect("builds");
    let err = built.read().await.expect_err("refused token").to_string();
    assert!(err.starts_with("trigger 0 (rabbitmq): "), "{err}");
    assert!(err.contains("401 Unauthorized"), "{err}");
    assert!(
        err.contains(r#"the broker refused the OAuth2 access token from "oauthTokenURI""#),
        "{err}"
    );
    assert!(!err.contains("eyJ"), "no token in the message: {err}");
    assert!(!err.contains(CLIENT_SECRET), "{err}");
    assert_eq!(endpoint.requests(), 1);
    // The refused token is dropped: the next poll asks for a new one.
    built.read().await.expect_err("refused again");
    assert_eq!(endpoint.requests(), 2);
    built.close().await;
}

#[tokio::test]
async fn oauth2_with_the_amqp_protocol_is_refused_when_parsing() {
    let ctx = context(
        &ClientPools::new(),
        &[("host", "amqp://127.0.0.1:5672/"), ("queueName", "q")],
        &[
            ("oauthTokenURI", "http://127.0.0.1:1/token"),
            ("clientID", CLIENT_ID),
            ("clientSecret", CLIENT_SECRET),
        ],
    );
    let err = Registry::builtin()
        .check(&ctx)
        .expect("a parse-only check")
        .expect_err("amqp with oauth2");
    let err = err.to_string();
    assert!(
        err.starts_with(
            r#"trigger 0 (rabbitmq): parameter "oauthTokenURI": OAuth2 authentication is only supported with HTTP protocol, not AMQP"#
        ),
        "{err}"
    );
    assert!(!err.contains(CLIENT_SECRET), "{err}");
}

// ---------------------------------------------------------------------------------------------
// SASL EXTERNAL.

fn external_auth<'a>(
    material: &'a Material,
    cert: &'a str,
    key: &'a str,
) -> Vec<(&'a str, &'a str)> {
    vec![
        ("tls", "enable"),
        ("ca", material.ca_pem.as_str()),
        ("cert", cert),
        ("key", key),
    ]
}

#[tokio::test]
async fn sasl_external_reads_the_queue_as_the_user_the_certificate_names() {
    let Some(material) = material_or_skip("rabbitmq sasl external").await else {
        return;
    };
    let Some(broker) = AmqpBroker::connect_or_skip("rabbitmq sasl external", "/").await else {
        return;
    };
    let user = common::unique("rmq-cert-user");
    create_certificate_user(&user).await;
    let queue = common::unique("rmq-external");
    broker.declare(&queue).await;
    broker.publish(&queue, 4).await;
    let (cert, key) = client_certificate(&material, &user);

    // No credentials anywhere and a client certificate: EXTERNAL. And KEDA's explicit form,
    // `auth_mechanism=external` in the URL (amqp091-go's query parameter).
    for host in [
        "amqps://127.0.0.1:5671/",
        "amqps://127.0.0.1:5671/?auth_mechanism=external",
    ] {
        let built = build(context(
            &ClientPools::new(),
            &[("host", host), ("queueName", queue.as_str())],
            &external_auth(&material, &cert, &key),
        ))
        .await
        .unwrap_or_else(|e| panic!("{host}: {e}"));
        assert_eq!(built.read().await.expect("read"), 4.0, "{host}");
        // The broker logged the connection in as the certificate's user, with EXTERNAL (the
        // management API lists connections on its statistics interval).
        let wanted = (user.clone(), "EXTERNAL".to_string());
        let mut connections = Vec::new();
        let _ = tokio::time::timeout(STATS_TIMEOUT, async {
            loop {
                connections = scaler_connections().await;
                if connections.contains(&wanted) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        })
        .await;
        assert!(connections.contains(&wanted), "{host}: {connections:?}");
        built.close().await;
    }

    broker.delete(&queue).await;
    delete_user(&user).await;
    broker.close().await;
}

#[tokio::test]
async fn a_certificate_of_an_unknown_user_is_refused_with_a_clear_error() {
    let Some(material) = material_or_skip("rabbitmq sasl external unknown user").await else {
        return;
    };
    let user = common::unique("rmq-no-such-user");
    let (cert, key) = client_certificate(&material, &user);
    let err = match build(context(
        &ClientPools::new(),
        &[("host", "amqps://127.0.0.1:5671/"), ("queueName", "q")],
        &external_auth(&material, &cert, &key),
    ))
    .await
    {
        Ok(_) => panic!("an unknown user logged in"),
        Err(e) => e.to_string(),
    };
    assert!(err.starts_with("trigger 0 (rabbitmq): "), "{err}");
    assert!(
        err.contains(r#"the broker refused the SASL EXTERNAL login with the client certificate (parameters "cert" and "key")"#),
        "{err}"
    );
    assert!(err.contains("ACCESS-REFUSED"), "{err}");
    assert!(!err.contains("PRIVATE KEY"), "{err}");
}
