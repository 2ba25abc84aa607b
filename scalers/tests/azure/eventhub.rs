//! `azure-eventhub`: checkpoints in real blob storage (Azurite, which checks every Shared Key
//! signature), partition information from a fake of the Event Hubs REST API that follows
//! Microsoft's references: "Get Event Hub"
//! <https://learn.microsoft.com/rest/api/eventhub/get-event-hub> (an ATOM entry whose
//! `EventHubDescription` lists `PartitionIds`), "Get Partition"
//! <https://learn.microsoft.com/rest/api/eventhub/get-partition> (`PartitionDescription` with
//! `BeginSequenceNumber` and `EndSequenceNumber`, -1 for an empty partition), an unknown entity
//! answered with the empty feed `Publicly Listed Services`, and shared access signatures
//! <https://learn.microsoft.com/azure/event-hubs/authenticate-shared-access-signature> checked
//! as the service checks them (policy, expiry, HMAC-SHA256 of `<sr>\n<se>`, `sr` a prefix of
//! the resource).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use hmac::{Hmac, Mac};
use http::StatusCode;
use keda_scalers::http_client::VendorEndpoints;
use sha2::Sha256;

use crate::common::{Harness, Setup, conformance, unique};
use crate::http_server::{Recorded, TestServer, handler};
use crate::{azurite, storage_name};

const HOST: &str = "keda-hub.servicebus.windows.net";
const RULE: &str = "RootManageSharedAccessKey";
const KEY: &str = "EHKEY+rOIG1CMSQ0dNVXyJXVqGrL1wJrtDAM0D4=";

/// Partition ID -> (BeginSequenceNumber, EndSequenceNumber).
type Partitions = Arc<Mutex<BTreeMap<String, (i64, i64)>>>;

fn decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

fn authorized(r: &Recorded) -> bool {
    let Some(token) = r
        .header("authorization")
        .and_then(|h| h.strip_prefix("SharedAccessSignature ").map(str::to_string))
    else {
        return false;
    };
    let fields: BTreeMap<&str, &str> = token
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .collect();
    let (Some(sr), Some(sig), Some(se), Some(skn)) = (
        fields.get("sr"),
        fields.get("sig"),
        fields.get("se"),
        fields.get("skn"),
    ) else {
        return false;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let mut mac = Hmac::<Sha256>::new_from_slice(KEY.as_bytes()).expect("hmac key");
    mac.update(format!("{sr}\n{se}").as_bytes());
    let expected = base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
    *skn == RULE
        && se.parse::<u64>().is_ok_and(|e| e > now)
        && decode(sig) == expected
        && format!("https://{HOST}{}", r.uri)
            .to_lowercase()
            .starts_with(&decode(sr).to_lowercase())
}

fn entry(content: &str) -> String {
    format!(
        r#"<entry xmlns="http://www.w3.org/2005/Atom"><id>https://{HOST}/x</id><title type="text">x</title><updated>2026-11-20T10:00:00Z</updated><content type="application/xml">{content}</content></entry>"#
    )
}

const EMPTY_FEED: &str = r#"<feed xmlns="http://www.w3.org/2005/Atom"><title type="text">Publicly Listed Services</title><subtitle type="text">This is the list of publicly-listed services currently available.</subtitle><id>uuid:0</id><updated>2026-11-20T10:00:00Z</updated><generator>Service Bus 1.1</generator></feed>"#;

fn event_hubs(hub: String, partitions: Partitions) -> crate::http_server::Handler {
    handler(move |r: &Recorded| {
        if !authorized(r) {
            return (
                StatusCode::UNAUTHORIZED,
                "application/xml",
                "<Error><Code>401</Code><Detail>InvalidSignature SECRET-TEXT</Detail></Error>"
                    .into(),
            );
        }
        if r.query("api-version").as_deref() != Some("2014-01") {
            return (
                StatusCode::BAD_REQUEST,
                "application/xml",
                "<Error><Code>400</Code></Error>".into(),
            );
        }
        let path = r.uri.split('?').next().unwrap_or_default();
        let segments: Vec<String> = path
            .trim_start_matches('/')
            .split('/')
            .map(decode)
            .collect();
        let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
        let atom = "application/atom+xml;type=entry;charset=utf-8";
        let partitions = partitions.lock().expect("partitions");
        match segments[..] {
            [h] if h == hub => {
                let ids: String = partitions
                    .keys()
                    .map(|id| format!("<d2p1:string>{id}</d2p1:string>"))
                    .collect();
                (
                    StatusCode::OK,
                    atom,
                    entry(&format!(
                        r#"<EventHubDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance"><MessageRetentionInDays>1</MessageRetentionInDays><Status>Active</Status><PartitionCount>{}</PartitionCount><PartitionIds xmlns:d2p1="http://schemas.microsoft.com/2003/10/Serialization/Arrays">{ids}</PartitionIds></EventHubDescription>"#,
                        partitions.len()
                    )),
                )
            }
            [h, "consumergroups", "$Default", "partitions", id] if h == hub => {
                match partitions.get(id) {
                    Some((begin, end)) => (
                        StatusCode::OK,
                        atom,
                        entry(&format!(
                            r#"<PartitionDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance"><SizeInBytes>1024</SizeInBytes><BeginSequenceNumber>{begin}</BeginSequenceNumber><EndSequenceNumber>{end}</EndSequenceNumber><IncomingBytesPerSecond>0</IncomingBytesPerSecond><OutgoingBytesPerSecond>0</OutgoingBytesPerSecond><LastEnqueuedOffset>{}</LastEnqueuedOffset><LastEnqueuedTimeUtc>2026-11-20T10:00:00Z</LastEnqueuedTimeUtc></PartitionDescription>"#,
                            end * 100
                        )),
                    ),
                    None => (StatusCode::OK, atom, EMPTY_FEED.into()),
                }
            }
            _ => (StatusCode::OK, atom, EMPTY_FEED.into()),
        }
    })
}

struct Fixture {
    server: TestServer,
    hub: String,
    partitions: Partitions,
}

async fn fixture() -> Fixture {
    let hub = unique("hub");
    let partitions: Partitions = Arc::default();
    {
        let mut p = partitions.lock().expect("fake state");
        p.insert("0".into(), (0, 99));
        p.insert("1".into(), (0, 49));
    }
    let server = TestServer::start(event_hubs(hub.clone(), partitions.clone())).await;
    Fixture {
        server,
        hub,
        partitions,
    }
}

impl Fixture {
    async fn harness(&self, metadata: &[(&str, &str)], key: &str) -> Harness {
        let connection = format!(
            "Endpoint=sb://{HOST}/;SharedAccessKeyName={RULE};SharedAccessKey={key};EntityPath={}",
            self.hub
        );
        let fake = url::Url::parse(&self.server.url("/")).expect("fake URL");
        conformance(
            "azure-eventhub",
            Setup {
                metadata,
                auth: &[
                    ("connection", connection.as_str()),
                    ("storageConnection", azurite::DEV),
                ],
                vendor_endpoints: VendorEndpoints::default().with(HOST, fake),
                ..Setup::default()
            },
        )
        .await
    }
}

#[tokio::test]
async fn each_checkpoint_strategy_reads_its_blobs_and_the_lag_is_summed_as_keda_sums_it() {
    if azurite::shared_or_skip("azure_eventhub").await.is_none() {
        return;
    }
    let f = fixture().await;
    let container = storage_name("checkpoints");
    azurite::create_container(&container).await;
    let hub = f.hub.as_str();

    // goSdk (the documented example): partition 0 checkpointed at 89 -> 10; partition 1 has no
    // checkpoint -> all 50 events. Above activationUnprocessedEventThreshold 10.
    azurite::put_blob(
        &container,
        "0",
        br#"{"checkpoint":{"offset":"8900","sequenceNumber":89},"partitionId":"0"}"#,
        &[],
    )
    .await;
    let go = f
        .harness(&[("blobContainer", container.as_str())], KEY)
        .await;
    assert_eq!(go.metric_name, "s0-azure-eventhub-processors");
    go.expect(60.0, true).await;
    // No more than unprocessedEventThreshold per partition: 2 x 20.
    let capped = f
        .harness(
            &[
                ("blobContainer", container.as_str()),
                ("unprocessedEventThreshold", "20"),
            ],
            KEY,
        )
        .await;
    capped.expect(40.0, true).await;
    capped.close().await;
    // Partition 1 catches up to 59 events with a checkpoint at 49, partition 0 at 99: 0 + 10.
    azurite::put_blob(
        &container,
        "1",
        br#"{"checkpoint":{"sequenceNumber":49}}"#,
        &[],
    )
    .await;
    azurite::put_blob(
        &container,
        "0",
        br#"{"checkpoint":{"sequenceNumber":99}}"#,
        &[],
    )
    .await;
    f.partitions
        .lock()
        .expect("fake state")
        .insert("1".into(), (0, 59));
    go.expect(10.0, false).await;
    go.close().await;

    // blobMetadata: the sequence number is the blob's metadata, the group lower-cased.
    let meta = format!("{HOST}/{hub}/processors/checkpoint");
    azurite::put_blob(
        &container,
        &format!("{meta}/0"),
        b"",
        &[("sequencenumber", "95")],
    )
    .await;
    azurite::put_blob(
        &container,
        &format!("{meta}/1"),
        b"",
        &[("sequencenumber", "58")],
    )
    .await;
    let h = f
        .harness(
            &[
                ("blobContainer", container.as_str()),
                ("checkpointStrategy", "blobMetadata"),
                ("consumerGroup", "Processors"),
            ],
            KEY,
        )
        .await;
    assert_eq!(h.metric_name, "s0-azure-eventhub-Processors");
    h.expect(5.0, false).await;
    h.close().await;

    // dapr: dapr-<hub>-<group>-<partition>, the Go SDK's JSON.
    azurite::put_blob(
        &container,
        &format!("dapr-{hub}-processors-0"),
        br#"{"checkpoint":{"sequenceNumber":80}}"#,
        &[],
    )
    .await;
    let h = f
        .harness(
            &[
                ("blobContainer", container.as_str()),
                ("checkpointStrategy", "dapr"),
            ],
            KEY,
        )
        .await;
    // 19 + all 60 of partition 1 (no dapr blob).
    h.expect(79.0, true).await;
    h.close().await;

    // azureFunction: the fixed container, JSON SequenceNumber; the default without a
    // blobContainer.
    azurite::ensure_container("azure-webjobs-eventhub").await;
    azurite::put_blob(
        "azure-webjobs-eventhub",
        &format!("{HOST}/{hub}/processors/0"),
        br#"{"Offset":"9000","SequenceNumber":90,"PartitionId":"0"}"#,
        &[],
    )
    .await;
    let h = f
        .harness(&[("blobContainer", ""), ("checkpointStrategy", "")], KEY)
        .await;
    h.expect(69.0, true).await;
    h.close().await;

    // Another strategy value with a container: <group>/<partition>, the Python SDK's field.
    azurite::put_blob(
        &container,
        "processors/0",
        br#"{"partition_id":"0","sequence_number":97}"#,
        &[],
    )
    .await;
    azurite::put_blob(
        &container,
        "processors/1",
        br#"{"PartitionId":"1","SequenceNumber":57}"#,
        &[],
    )
    .await;
    let h = f
        .harness(
            &[
                ("blobContainer", container.as_str()),
                ("checkpointStrategy", ""),
            ],
            KEY,
        )
        .await;
    h.expect(4.0, false).await;
    h.close().await;

    // A container that does not exist: no checkpoints, every event counts (100 + 60).
    let h = f
        .harness(
            &[
                ("blobContainer", storage_name("absent").as_str()),
                ("unprocessedEventThreshold", "100"),
            ],
            KEY,
        )
        .await;
    h.expect(160.0, true).await;
    h.close().await;
}

#[tokio::test]
async fn refused_signatures_missing_hubs_and_bad_checkpoints_are_named() {
    if azurite::shared_or_skip("azure_eventhub_errors")
        .await
        .is_none()
    {
        return;
    }
    let f = fixture().await;
    let container = storage_name("checkpoints");
    azurite::create_container(&container).await;
    let wrong = f
        .harness(&[("blobContainer", container.as_str())], "V3JvbmdLZXk=")
        .await;
    let text = wrong.expect_error().await.to_string();
    assert!(
        text.contains("401") && text.contains("SharedAccessKey"),
        "{text}"
    );
    assert!(
        !text.contains("SECRET-TEXT") && !text.contains("V3JvbmdLZXk="),
        "{text}"
    );
    wrong.close().await;

    azurite::put_blob(&container, "0", b"not json", &[]).await;
    let h = f
        .harness(&[("blobContainer", container.as_str())], KEY)
        .await;
    let text = h.expect_error().await.to_string();
    assert!(
        text.contains("checkpoint \"0\"") && text.contains("not valid JSON"),
        "{text}"
    );
    // An empty partition is not read from storage: 0 for it.
    f.partitions
        .lock()
        .expect("fake state")
        .insert("0".into(), (0, -1));
    h.expect(50.0, true).await;
    h.close().await;

    let missing = Fixture {
        hub: "no-such-hub".into(),
        ..fixture().await
    };
    let h = missing
        .harness(&[("blobContainer", container.as_str())], KEY)
        .await;
    let text = h.expect_error().await.to_string();
    assert!(
        text.contains("event hub \"no-such-hub\" doesn't exist"),
        "{text}"
    );
    h.close().await;
}
