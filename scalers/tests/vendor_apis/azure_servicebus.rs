//! `azure-servicebus` against a fake of the Service Bus management REST API, following
//! Microsoft's references:
//! - "Service Bus access control with Shared Access Signatures"
//!   <https://learn.microsoft.com/azure/service-bus-messaging/service-bus-sas>: the
//!   `Authorization: SharedAccessSignature sr=&sig=&se=&skn=` token, whose `sig` is the base64
//!   HMAC-SHA256, keyed with the policy's key, of `<URL-encoded sr>\n<se>`; the token is
//!   refused (401) when expired, signed with another key, named for an unknown policy, or
//!   scoped (`sr`) to a URI that is not a prefix of the resource asked for;
//! - "Get Entity" <https://learn.microsoft.com/rest/api/servicebus/get-entity> and the
//!   `QueueDescription` / `SubscriptionDescription` schemas: an ATOM `<entry>` whose content
//!   holds `CountDetails` (`ActiveMessageCount`, `DeadLetterMessageCount`, ...); an entity
//!   that does not exist answers 200 with the empty feed titled `Publicly Listed Services`;
//! - listing ("Enumeration": `GET /$Resources/Queues`, `GET /<topic>/Subscriptions` with
//!   `$skip` and `$top`, at most 100 entries a page) as an ATOM `<feed>`;
//! - errors as `<Error><Code>...</Code><Detail>...</Detail></Error>` (401, 404 for a topic
//!   that does not exist, 429 when throttled).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use hmac::{Hmac, Mac};
use http::StatusCode;
use keda_scalers::http_client::VendorEndpoints;
use sha2::Sha256;

use crate::common::{Harness, Setup, conformance};
use crate::http_server::{Recorded, TestServer, handler};

const HOST: &str = "keda-test.servicebus.windows.net";
const RULE: &str = "RootManageSharedAccessKey";
const KEY: &str = "TESTKEY+rOIG1CMSQ0dNVXyJXVqGrL1wJrtDAM0D4=";

fn connection_string(rule: &str, key: &str) -> String {
    format!("Endpoint=sb://{HOST}/;SharedAccessKeyName={rule};SharedAccessKey={key}")
}

#[derive(Default)]
struct Namespace {
    /// Queue name -> (active, dead-lettered).
    queues: BTreeMap<String, (i64, i64)>,
    /// Topic -> subscription -> active.
    topics: BTreeMap<String, BTreeMap<String, i64>>,
    /// Answer 429 to everything.
    throttled: bool,
}

type Shared = Arc<Mutex<Namespace>>;

fn error(status: StatusCode, detail: &str) -> crate::http_server::Answer {
    (
        status,
        "application/xml; charset=utf-8",
        format!(
            "<Error><Code>{}</Code><Detail>{detail} SECRET-TEXT TrackingId:1</Detail></Error>",
            status.as_u16()
        ),
    )
}

fn percent_decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

/// Checks the request's token as Service Bus does; `None` when it is valid.
fn refuse(r: &Recorded) -> Option<crate::http_server::Answer> {
    let unauthorized = |why: &str| Some(error(StatusCode::UNAUTHORIZED, why));
    let Some(token) = r
        .header("authorization")
        .and_then(|h| h.strip_prefix("SharedAccessSignature ").map(str::to_string))
    else {
        return unauthorized("MissingToken: the request has no SharedAccessSignature.");
    };
    let mut fields = BTreeMap::new();
    for pair in token.split('&') {
        let Some((k, v)) = pair.split_once('=') else {
            return unauthorized("MalformedToken");
        };
        fields.insert(k.to_string(), v.to_string());
    }
    let (Some(sr), Some(sig), Some(se), Some(skn)) = (
        fields.get("sr"),
        fields.get("sig"),
        fields.get("se"),
        fields.get("skn"),
    ) else {
        return unauthorized("MalformedToken: sr, sig, se and skn are required.");
    };
    if skn != RULE {
        return unauthorized("InvalidSignature: the policy does not exist.");
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    if se.parse::<u64>().map_or(true, |expiry| expiry <= now) {
        return unauthorized("ExpiredToken: the token is expired.");
    }
    let mut mac = Hmac::<Sha256>::new_from_slice(KEY.as_bytes()).expect("hmac key");
    mac.update(format!("{sr}\n{se}").as_bytes());
    let expected = base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
    if percent_decode(sig) != expected {
        return unauthorized("InvalidSignature: the token has an invalid signature.");
    }
    let resource = format!("https://{HOST}{}", r.uri).to_lowercase();
    if !resource.starts_with(&percent_decode(sr).to_lowercase()) {
        return unauthorized("InvalidAudience: the token is not valid for this resource.");
    }
    None
}

fn description(kind: &str, name: &str, active: i64, dead: i64) -> String {
    format!(
        r#"<entry xmlns="http://www.w3.org/2005/Atom"><id>https://{HOST}/{name}?api-version=2021-05</id><title type="text">{name}</title><published>2026-11-20T10:00:00Z</published><updated>2026-11-20T10:00:00Z</updated><author><name>keda-test</name></author><link rel="self" href="https://{HOST}/{name}?api-version=2021-05"/><content type="application/xml"><{kind} xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance"><LockDuration>PT1M</LockDuration><MessageCount>{}</MessageCount><CountDetails xmlns:d2p1="http://schemas.microsoft.com/netservices/2011/06/servicebus"><d2p1:ActiveMessageCount>{active}</d2p1:ActiveMessageCount><d2p1:DeadLetterMessageCount>{dead}</d2p1:DeadLetterMessageCount><d2p1:ScheduledMessageCount>0</d2p1:ScheduledMessageCount><d2p1:TransferMessageCount>0</d2p1:TransferMessageCount><d2p1:TransferDeadLetterMessageCount>0</d2p1:TransferDeadLetterMessageCount></CountDetails><Status>Active</Status></{kind}></content></entry>"#,
        active + dead
    )
}

fn feed(title: &str, entries: &[String]) -> String {
    format!(
        r#"<feed xmlns="http://www.w3.org/2005/Atom"><title type="text">{title}</title><id>https://{HOST}/$Resources/Queues</id><updated>2026-11-20T10:00:00Z</updated>{}</feed>"#,
        entries.concat()
    )
}

const EMPTY_FEED: &str = r#"<feed xmlns="http://www.w3.org/2005/Atom"><title type="text">Publicly Listed Services</title><subtitle type="text">This is the list of publicly-listed services currently available.</subtitle><id>uuid:0</id><updated>2026-11-20T10:00:00Z</updated><generator>Service Bus 1.1</generator></feed>"#;

/// One page (`$skip`, `$top` at most 100) of `entries`.
fn page(r: &Recorded, title: &str, entries: Vec<String>) -> crate::http_server::Answer {
    let skip: usize = r.query("$skip").and_then(|s| s.parse().ok()).unwrap_or(0);
    let top: usize = r
        .query("$top")
        .and_then(|s| s.parse().ok())
        .unwrap_or(100)
        .min(100);
    let shown: Vec<String> = entries.into_iter().skip(skip).take(top).collect();
    (
        StatusCode::OK,
        "application/atom+xml;type=feed;charset=utf-8",
        feed(title, &shown),
    )
}

fn service_bus(state: Shared) -> crate::http_server::Handler {
    handler(move |r: &Recorded| {
        if let Some(refused) = refuse(r) {
            return refused;
        }
        let ns = state.lock().expect("namespace");
        if ns.throttled {
            return error(StatusCode::TOO_MANY_REQUESTS, "SubCode=50004 throttled.");
        }
        if r.method != "GET" || r.query("api-version").as_deref() != Some("2021-05") {
            return error(StatusCode::BAD_REQUEST, "api-version is required.");
        }
        let path = r.uri.split('?').next().unwrap_or_default();
        let segments: Vec<String> = path
            .trim_start_matches('/')
            .split('/')
            .map(percent_decode)
            .collect();
        let atom = "application/atom+xml;type=entry;charset=utf-8";
        match segments.iter().map(String::as_str).collect::<Vec<_>>()[..] {
            ["$Resources", "Queues"] => {
                let entries = ns
                    .queues
                    .iter()
                    .map(|(name, (active, dead))| {
                        description("QueueDescription", name, *active, *dead)
                    })
                    .collect();
                page(r, "Queues", entries)
            }
            [topic, "Subscriptions"] => match ns.topics.get(topic) {
                None => error(
                    StatusCode::NOT_FOUND,
                    "The messaging entity could not be found.",
                ),
                Some(subs) => {
                    let entries = subs
                        .iter()
                        .map(|(name, active)| {
                            description("SubscriptionDescription", name, *active, 0)
                        })
                        .collect();
                    page(r, "Subscriptions", entries)
                }
            },
            [topic, "Subscriptions", sub] => {
                match ns.topics.get(topic).and_then(|subs| subs.get(sub)) {
                    Some(active) => (
                        StatusCode::OK,
                        atom,
                        description("SubscriptionDescription", sub, *active, 0),
                    ),
                    None => (StatusCode::OK, atom, EMPTY_FEED.into()),
                }
            }
            [queue] => match ns.queues.get(queue) {
                Some((active, dead)) => (
                    StatusCode::OK,
                    atom,
                    description("QueueDescription", queue, *active, *dead),
                ),
                None => (StatusCode::OK, atom, EMPTY_FEED.into()),
            },
            _ => (StatusCode::OK, atom, EMPTY_FEED.into()),
        }
    })
}

async fn harness(server: &TestServer, metadata: &[(&str, &str)], connection: &str) -> Harness {
    let fake = url::Url::parse(&server.url("/")).expect("fake URL");
    conformance(
        "azure-servicebus",
        Setup {
            metadata,
            auth: &[("connection", connection)],
            vendor_endpoints: VendorEndpoints::default().with(HOST, fake),
            ..Setup::default()
        },
    )
    .await
}

fn namespace() -> Shared {
    let mut ns = Namespace::default();
    ns.queues.insert("orders".into(), (7, 4));
    let mut subs = BTreeMap::new();
    subs.insert("billing".into(), 3);
    subs.insert("audit".into(), 11);
    ns.topics.insert("events".into(), subs);
    Arc::new(Mutex::new(ns))
}

#[tokio::test]
async fn active_messages_of_a_queue_and_of_a_subscription_with_a_signed_token() {
    let state = namespace();
    let server = TestServer::start(service_bus(state.clone())).await;
    let cs = connection_string(RULE, KEY);
    let h = harness(&server, &[], &cs).await;
    assert_eq!(h.metric_name, "s0-azure-servicebus-orders");
    // 7 active (the 4 dead-lettered do not count), above activationMessageCount 2.
    h.expect(7.0, true).await;
    let request = server.last_request();
    assert!(
        request.uri.starts_with("/orders?api-version=2021-05"),
        "{}",
        request.uri
    );
    state
        .lock()
        .expect("fake state")
        .queues
        .insert("orders".into(), (2, 0));
    h.expect(2.0, false).await;
    h.close().await;

    let sub = harness(
        &server,
        &[
            ("queueName", ""),
            ("topicName", "events"),
            ("subscriptionName", "billing"),
        ],
        &cs,
    )
    .await;
    assert_eq!(sub.metric_name, "s0-azure-servicebus-events");
    sub.expect(3.0, true).await;
    assert!(
        server
            .last_request()
            .uri
            .starts_with("/events/Subscriptions/billing?"),
        "{}",
        server.last_request().uri
    );
    sub.close().await;
}

#[tokio::test]
async fn a_ready_signature_in_the_connection_string_is_sent_as_it_is() {
    let server = TestServer::start(service_bus(namespace())).await;
    // A namespace-wide token made by the test itself, as a portal-issued SAS would be.
    let audience = format!("https%3a%2f%2f{HOST}%2f");
    let expiry = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
        + 3600;
    let mut mac = Hmac::<Sha256>::new_from_slice(KEY.as_bytes()).expect("hmac key");
    mac.update(format!("{audience}\n{expiry}").as_bytes());
    let sig = base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
    let sig: String =
        percent_encoding::utf8_percent_encode(&sig, percent_encoding::NON_ALPHANUMERIC).to_string();
    let cs = format!(
        "Endpoint=sb://{HOST}/;SharedAccessSignature=SharedAccessSignature sr={audience}&sig={sig}&se={expiry}&skn={RULE}"
    );
    let h = harness(&server, &[], &cs).await;
    h.expect(7.0, true).await;
    h.close().await;
}

#[tokio::test]
async fn regexes_list_every_page_and_combine_whole_name_matches() {
    let state = namespace();
    {
        let mut ns = state.lock().expect("fake state");
        for i in 0..150 {
            ns.queues.insert(format!("jobs-{i:03}"), (i % 10, 1));
        }
        // Matches `jobs-.*` only in part: not counted.
        ns.queues.insert("xjobs-1".into(), (1000, 0));
        ns.queues.insert("jobs-1-archive".into(), (0, 0));
    }
    let server = TestServer::start(service_bus(state.clone())).await;
    let cs = connection_string(RULE, KEY);
    // Sum over 0..150 of i % 10 = 15 * 45 = 675 ("jobs-1-archive" matches too, with 0).
    let sum = harness(
        &server,
        &[("queueName", "jobs-.*"), ("useRegex", "true")],
        &cs,
    )
    .await;
    assert_eq!(sum.metric_name, "s0-azure-servicebus-queue-regex");
    sum.expect(675.0, true).await;
    let pages: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.uri.starts_with("/$Resources/Queues"))
        .map(|r| r.query("$skip").unwrap_or_default())
        .collect();
    assert_eq!(pages, ["0", "100"]);
    sum.close().await;
    let max = harness(
        &server,
        &[
            ("queueName", "jobs-[0-9]+"),
            ("useRegex", "true"),
            ("operation", "max"),
        ],
        &cs,
    )
    .await;
    max.expect(9.0, true).await;
    max.close().await;
    // 675 / 150 = 4 (integer division).
    let avg = harness(
        &server,
        &[
            ("queueName", "jobs-[0-9]+"),
            ("useRegex", "true"),
            ("operation", "avg"),
        ],
        &cs,
    )
    .await;
    avg.expect(4.0, true).await;
    avg.close().await;
    let subs = harness(
        &server,
        &[
            ("queueName", ""),
            ("topicName", "events"),
            ("subscriptionName", "a.*|billing"),
            ("useRegex", "true"),
        ],
        &cs,
    )
    .await;
    assert_eq!(subs.metric_name, "s0-azure-servicebus-topic-regex");
    subs.expect(14.0, true).await;
    subs.close().await;
}

#[tokio::test]
async fn missing_entities_refused_keys_and_throttling_are_named_without_service_bus_text() {
    let state = namespace();
    let server = TestServer::start(service_bus(state.clone())).await;
    let cs = connection_string(RULE, KEY);
    let h = harness(&server, &[("queueName", "nope")], &cs).await;
    let text = h.expect_error().await.to_string();
    assert!(text.contains("queue nope doesn't exist"), "{text}");
    h.close().await;
    let h = harness(
        &server,
        &[
            ("queueName", ""),
            ("topicName", "events"),
            ("subscriptionName", "gone"),
        ],
        &cs,
    )
    .await;
    let text = h.expect_error().await.to_string();
    assert!(
        text.contains("subscription gone doesn't exist in topic events"),
        "{text}"
    );
    h.close().await;
    let h = harness(
        &server,
        &[
            ("queueName", ""),
            ("topicName", "nosuchtopic"),
            ("subscriptionName", ".*"),
            ("useRegex", "true"),
        ],
        &cs,
    )
    .await;
    let text = h.expect_error().await.to_string();
    assert!(text.contains("404") && text.contains("topicName"), "{text}");
    h.close().await;

    for (rule, key) in [
        (RULE, "V3JvbmdLZXlXcm9uZ0tleVdyb25nS2V5"),
        ("SendOnly", KEY),
    ] {
        let h = harness(&server, &[], &connection_string(rule, key)).await;
        let text = h.expect_error().await.to_string();
        assert!(
            text.contains("401") && text.contains("SharedAccessKey"),
            "{text}"
        );
        assert!(
            !text.contains("SECRET-TEXT") && !text.contains(key),
            "{text}"
        );
        h.close().await;
    }

    let h = harness(&server, &[], &cs).await;
    state.lock().expect("fake state").throttled = true;
    let text = h.expect_error().await.to_string();
    assert!(text.contains("429") && text.contains("throttled"), "{text}");
    assert!(!text.contains("SECRET-TEXT"), "{text}");
    h.close().await;

    // An unusable connection string: the trigger builds, and every read names the parameter.
    let h = harness(
        &server,
        &[],
        "Endpoint=sb://x/;SharedAccessKey=s3cret-value",
    )
    .await;
    let text = h.expect_error().await.to_string();
    assert!(text.contains("parameter \"connection\""), "{text}");
    assert!(!text.contains("s3cret-value"), "{text}");
    // No client was leased: closing releases nothing and reads keep naming the parameter.
    h.built.scaler().close().await;
    assert!(
        h.expect_error()
            .await
            .to_string()
            .contains("parameter \"connection\"")
    );
}
