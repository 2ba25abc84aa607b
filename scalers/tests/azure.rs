//! The azure-queue, azure-blob and azure-eventhub (its checkpoints) scalers against Azurite
//! (`scripts/services.sh` runs it on 127.0.0.1: blob 10000, queue 10001), built from their
//! documented examples through the registry. Azurite checks every Shared Key signature, so
//! these tests also check keda-rs' signing, and a wrong account key is refused as Azure
//! refuses it. azure-eventhub's partition information comes from a fake (`azure/eventhub.rs`).

#[allow(dead_code)]
#[path = "common/azurite.rs"]
mod azurite;
#[allow(dead_code)]
mod common;
#[allow(dead_code)]
#[path = "common/http.rs"]
mod http_server;

#[path = "azure/eventhub.rs"]
mod eventhub;

use common::{Harness, Setup, conformance, unique};
use keda_scalers::azure::{StorageClient, StorageClientKey};
use keda_scalers::{Registry, ScalerContext, ScalerError, Secret};

/// Another valid base64 key for the development account: Azurite refuses its signatures.
const WRONG_KEY: &str = "d3Jvbmcta2V5LW9mLWtlZGEtcnMtdGVzdHMtd3Jvbmcta2V5LW9mLWtlZGEtcnM=";

async fn harness(trigger_type: &str, connection: &str, changes: &[(&str, &str)]) -> Harness {
    conformance(
        trigger_type,
        Setup {
            metadata: changes,
            auth: &[("connection", connection)],
            ..Setup::default()
        },
    )
    .await
}

/// A name Azure accepts for a queue or a container: lower case letters, digits and single
/// hyphens, at most 63 characters.
fn storage_name(prefix: &str) -> String {
    let name = unique(prefix);
    assert!(name.len() <= 63, "{name}");
    name
}

#[tokio::test]
async fn queue_length_counts_all_or_visible_messages_and_activates_above_the_threshold() {
    if azurite::shared_or_skip("azure_queue_values")
        .await
        .is_none()
    {
        return;
    }
    let queue = storage_name("q");
    azurite::create_queue(&queue).await;
    // The documented example: queueLength 10, activationQueueLength 1, visibleonly.
    let visible = harness("azure-queue", azurite::DEV, &[("queueName", &queue)]).await;
    assert_eq!(visible.metric_name, format!("s0-azure-queue-{queue}"));
    let all = harness(
        "azure-queue",
        azurite::DEV,
        &[("queueName", &queue), ("queueLengthStrategy", "all")],
    )
    .await;
    visible.expect(0.0, false).await;
    all.expect(0.0, false).await;
    azurite::put_messages(&queue, 1).await;
    // Equal to the activation threshold: not active.
    visible.expect(1.0, false).await;
    azurite::put_messages(&queue, 2).await;
    visible.expect(3.0, true).await;
    // Received messages are invisible: counted by `all` only.
    azurite::receive(&queue, 2).await;
    visible.expect(1.0, false).await;
    all.expect(3.0, true).await;
    // 32 visible messages or more: visibleonly falls back to the approximate count, invisible
    // messages included, as KEDA does.
    azurite::put_messages(&queue, 31).await;
    visible.expect(34.0, true).await;
    all.expect(34.0, true).await;
    azurite::receive(&queue, 1).await;
    visible.expect(31.0, true).await;
    visible.close().await;
    all.close().await;
}

#[tokio::test]
async fn blob_count_follows_prefix_delimiter_recursive_and_glob_pattern() {
    if azurite::shared_or_skip("azure_blob_values").await.is_none() {
        return;
    }
    let container = storage_name("c");
    azurite::create_container(&container).await;
    let names: Vec<String> = [
        "incoming/a.csv",
        "incoming/b.json",
        "incoming/sub/c.csv",
        "incoming/sub/deep/d.csv",
        "incomingx/e.csv",
        "other/f.csv",
        "top.csv",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    azurite::put_blobs(&container, &names).await;
    let count = async |changes: &[(&str, &str)]| {
        let mut metadata = vec![("blobContainerName", container.as_str())];
        metadata.extend_from_slice(changes);
        harness("azure-blob", azurite::DEV, &metadata).await
    };
    // The documented example: blobPrefix incoming (listed as incoming/), blobCount 10,
    // activationBlobCount 2: the blobs directly in incoming/.
    let example = count(&[]).await;
    assert_eq!(example.metric_name, format!("s0-azure-blob-{container}"));
    example.expect(2.0, false).await;
    // recursive: no delimiter, and none appended to the prefix: incomingx/ counts too.
    count(&[("recursive", "true")])
        .await
        .expect(5.0, true)
        .await;
    // No prefix: the top level only.
    count(&[("blobPrefix", "")]).await.expect(1.0, false).await;
    // Another delimiter: "incoming" + "-" matches nothing.
    count(&[("blobDelimiter", "-")])
        .await
        .expect(0.0, false)
        .await;
    // A glob lists flat under the prefix (incoming/), and * crosses /.
    count(&[("globPattern", "*.csv")])
        .await
        .expect(3.0, true)
        .await;
    count(&[("globPattern", "*.csv"), ("blobPrefix", "")])
        .await
        .expect(6.0, true)
        .await;
    count(&[("globPattern", "incoming/{a,b}.*"), ("blobPrefix", "")])
        .await
        .expect(2.0, false)
        .await;
    example.close().await;
}

#[tokio::test]
async fn a_listing_longer_than_one_page_is_counted_across_pages() {
    if azurite::shared_or_skip("azure_blob_pages").await.is_none() {
        return;
    }
    let container = storage_name("pages");
    azurite::create_container(&container).await;
    let n = keda_scalers::scalers::azure_blob::PAGE_SIZE + 3;
    let names: Vec<String> = (0..n).map(|i| format!("incoming/{i:05}")).collect();
    azurite::put_blobs(&container, &names).await;
    harness(
        "azure-blob",
        azurite::DEV,
        &[("blobContainerName", &container)],
    )
    .await
    .expect(n as f64, true)
    .await;
}

/// The error of the first poll of `trigger_type` with `connection` and `changes`.
async fn poll_error(trigger_type: &str, connection: &str, changes: &[(&str, &str)]) -> String {
    harness(trigger_type, connection, changes)
        .await
        .expect_error()
        .await
        .to_string()
}

#[tokio::test]
async fn a_wrong_account_key_is_refused_and_named_without_the_key() {
    if azurite::shared_or_skip("azure_wrong_key").await.is_none() {
        return;
    }
    let queue = storage_name("wrongkey");
    azurite::create_queue(&queue).await;
    let container = storage_name("wrongkey");
    azurite::create_container(&container).await;
    let connection = format!(
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={WRONG_KEY};\
         QueueEndpoint={};BlobEndpoint={}",
        azurite::QUEUE,
        azurite::BLOB
    );
    let err = poll_error("azure-queue", &connection, &[("queueName", &queue)]).await;
    // Azurite's queue service writes its message without the space Azure has after "request.".
    assert_eq!(
        err,
        format!(
            "trigger 0 (azure-queue): Peek Messages of queue \"{queue}\" (queueName) at {}/ (connection) failed: \
             answered HTTP 403 Forbidden (AuthenticationFailed); check the account name and key (or shared \
             access signature) of the trigger's connection string",
            azurite::QUEUE
        )
    );
    let err = poll_error(
        "azure-blob",
        &connection,
        &[("blobContainerName", &container)],
    )
    .await;
    assert!(
        err.starts_with(&format!(
            "trigger 0 (azure-blob): List Blobs of container \"{container}\" (blobContainerName) at {}/ (connection) failed: answered HTTP 403 Forbidden (",
            azurite::BLOB
        )),
        "{err}"
    );
    assert!(err.contains("check the account name and key"), "{err}");
    assert!(!err.contains(WRONG_KEY), "{err}");
}

#[tokio::test]
async fn a_missing_queue_or_container_is_an_error_naming_it() {
    if azurite::shared_or_skip("azure_missing").await.is_none() {
        return;
    }
    let queue = storage_name("nosuchqueue");
    let err = poll_error(
        "azure-queue",
        azurite::DEV,
        &[("queueName", &queue), ("queueLengthStrategy", "all")],
    )
    .await;
    assert_eq!(
        err,
        format!(
            "trigger 0 (azure-queue): Get Queue Metadata of queue \"{queue}\" (queueName) at {}/ (connection) failed: \
             answered HTTP 404 Not Found (QueueNotFound)",
            azurite::QUEUE
        )
    );
    let container = storage_name("nosuchcontainer");
    let err = poll_error(
        "azure-blob",
        azurite::DEV,
        &[("blobContainerName", &container)],
    )
    .await;
    assert_eq!(
        err,
        format!(
            "trigger 0 (azure-blob): List Blobs of container \"{container}\" (blobContainerName) at {}/ (connection) failed: \
             answered HTTP 404 Not Found (ContainerNotFound)",
            azurite::BLOB
        )
    );
}

#[tokio::test]
async fn an_unreachable_endpoint_is_an_error_naming_it() {
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let connection = format!(
        "AccountName=devstoreaccount1;AccountKey={WRONG_KEY};QueueEndpoint=http://127.0.0.1:{port}/devstoreaccount1"
    );
    let err = poll_error("azure-queue", &connection, &[]).await;
    assert!(
        err.starts_with(&format!(
            "trigger 0 (azure-queue): Peek Messages of queue \"orders\" (queueName) at http://127.0.0.1:{port}/devstoreaccount1/ (connection) failed: "
        )),
        "{err}"
    );
    assert!(err.contains("onnect"), "{err}");
    assert!(!err.contains(WRONG_KEY), "{err}");
}

#[tokio::test]
async fn triggers_with_the_same_endpoint_and_credentials_share_one_client() {
    let registry = Registry::builtin();
    let ctx = |trigger_type: &str, index: usize, connection: &str| {
        let mut ctx = ScalerContext::new(trigger_type, index);
        for (k, v) in [("queueName", "jobs"), ("blobContainerName", "jobs")] {
            ctx.metadata.insert(k.into(), v.into());
        }
        ctx.auth_params
            .insert("connection".into(), Secret::new(connection));
        ctx
    };
    let first = ctx("azure-queue", 0, azurite::DEV);
    let pools = first.clients.clone();
    let with_pools = |c: ScalerContext| ScalerContext {
        clients: pools.clone(),
        ..c
    };
    let a = registry.build(first).await.expect("a");
    let b = registry
        .build(with_pools(ctx(
            "azure-queue",
            1,
            "UseDevelopmentStorage=true;",
        )))
        .await
        .expect("b");
    let other_key = format!(
        "AccountName=devstoreaccount1;AccountKey={WRONG_KEY};QueueEndpoint={}",
        azurite::QUEUE
    );
    let c = registry
        .build(with_pools(ctx("azure-queue", 2, &other_key)))
        .await
        .expect("c");
    let d = registry
        .build(with_pools(ctx("azure-blob", 3, azurite::DEV)))
        .await
        .expect("d");
    let pool = pools.pool::<StorageClientKey, StorageClient>();
    // a and b share the queue endpoint's client; c has another key; d is the blob endpoint.
    assert_eq!(pool.len(), 3);
    for scaler in [&a, &b, &c, &d] {
        scaler.scaler().close().await;
    }
    assert!(pool.is_empty());
}

#[test]
fn every_documented_example_parses_with_its_defaults_documented() {
    let registry = Registry::builtin();
    for trigger_type in ["azure-blob", "azure-queue"] {
        common::assert_defaults_documented(&registry, trigger_type);
        let examples = common::documented_examples(trigger_type);
        assert!(examples.len() >= 2, "{trigger_type}");
        for (trigger, index, auth) in examples {
            let mut ctx = ScalerContext::from_trigger(&trigger, index);
            for param in auth {
                ctx.auth_params.insert(param, Secret::new(azurite::DEV));
            }
            ctx.resolved_env
                .insert("STORAGE_CONNECTION_STRING".into(), azurite::DEV.into());
            let checked = registry.check(&ctx).expect("a parse-only check");
            assert!(
                checked.is_ok(),
                "docs/scalers/{trigger_type}.md: {checked:?}"
            );
        }
    }
}

#[tokio::test]
async fn a_connection_string_that_cannot_be_used_fails_the_build_naming_the_parameter() {
    let registry = Registry::builtin();
    let mut ctx = ScalerContext::new("azure-queue", 0);
    ctx.metadata.insert("queueName".into(), "jobs".into());
    ctx.auth_params.insert(
        "connection".into(),
        Secret::new("AccountName=acct;AccountKey=s3cret-not-base64!"),
    );
    let err = match registry.build(ctx).await {
        Ok(_) => panic!("built"),
        Err(e) => e,
    };
    assert!(matches!(err, ScalerError::Metadata(_)), "{err}");
    assert_eq!(
        err.to_string(),
        "trigger 0 (azure-queue): parameter \"connection\": the storage connection string cannot be used: AccountKey is not a base64 account key"
    );
}

/// An account SAS of the development account for blob and queue, read and list, signed as
/// Microsoft's "Create an account SAS" page says (version 2019-12-12, before encryption scopes),
/// with `signature` replacing the real one when given.
fn account_sas(signature: Option<&str>) -> String {
    use keda_scalers::azure::{DEV_ACCOUNT, DEV_ACCOUNT_KEY, shared_key};
    let (permissions, services, types, expiry, protocol, version) = (
        "rl",
        "bq",
        "sco",
        "2099-01-01T00:00:00Z",
        "https,http",
        "2019-12-12",
    );
    let to_sign = format!(
        "{DEV_ACCOUNT}\n{permissions}\n{services}\n{types}\n\n{expiry}\n\n{protocol}\n{version}\n"
    );
    let key = shared_key::decode_key(DEV_ACCOUNT_KEY).expect("key");
    let sig = signature.map_or_else(|| shared_key::signature(&key, &to_sign), str::to_string);
    let encode = |v: &str| url::form_urlencoded::byte_serialize(v.as_bytes()).collect::<String>();
    format!(
        "sv={version}&ss={services}&srt={types}&sp={permissions}&se={}&spr={}&sig={}",
        encode(expiry),
        encode(protocol),
        encode(&sig)
    )
}

#[tokio::test]
async fn a_shared_access_signature_is_sent_instead_of_a_key() {
    if azurite::shared_or_skip("azure_sas").await.is_none() {
        return;
    }
    let queue = storage_name("sas");
    azurite::create_queue(&queue).await;
    azurite::put_messages(&queue, 2).await;
    let connection = |sas: &str| {
        format!(
            "QueueEndpoint={};BlobEndpoint={};SharedAccessSignature={sas}",
            azurite::QUEUE,
            azurite::BLOB
        )
    };
    let sas = account_sas(None);
    let h = harness("azure-queue", &connection(&sas), &[("queueName", &queue)]).await;
    h.expect(2.0, true).await;
    h.close().await;
    let all = harness(
        "azure-queue",
        &connection(&sas),
        &[("queueName", &queue), ("queueLengthStrategy", "all")],
    )
    .await;
    all.expect(2.0, true).await;
    // A signature Azurite did not make is refused, and not shown.
    let forged = "Zm9yZ2VkLXNpZ25hdHVyZS1vZi1rZWRhLXJzLXRlc3Q=";
    let err = poll_error(
        "azure-queue",
        &connection(&account_sas(Some(forged))),
        &[("queueName", &queue)],
    )
    .await;
    assert!(
        err.starts_with(&format!(
            "trigger 0 (azure-queue): Peek Messages of queue \"{queue}\" (queueName) at {}/ (connection) failed: answered HTTP 403 Forbidden (",
            azurite::QUEUE
        )),
        "{err}"
    );
    assert!(err.contains("check the account name and key"), "{err}");
    assert!(!err.contains("Zm9yZ2Vk"), "{err}");
}
