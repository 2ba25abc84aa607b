//! Azurite, Microsoft's Azure Storage emulator, for the azure-* scaler tests: the shared server
//! `scripts/services.sh` runs on 127.0.0.1 (blob 10000, queue 10001). It checks the Shared Key
//! signature of every request of its account `devstoreaccount1`.
//!
//! The tests drive Azurite through keda-rs' own storage client (`keda_scalers::azure`), so the
//! requests that set up a queue or a container are signed the same way as the scaler's.

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http::Method;
use keda_scalers::Clock;
use keda_scalers::azure::{Service, StorageClient, StorageClientKey, parse_connection_string};

/// The connection string of Azurite's development account.
pub const DEV: &str = "UseDevelopmentStorage=true";
/// The blob endpoint.
pub const BLOB: &str = "http://127.0.0.1:10000/devstoreaccount1";
/// The queue endpoint.
pub const QUEUE: &str = "http://127.0.0.1:10001/devstoreaccount1";

/// Checks that Azurite answers on both ports, or skips (fails under `CI=true`).
pub async fn shared_or_skip(test: &str) -> Option<()> {
    let attempt = async {
        for port in [10000, 10001] {
            drop(tokio::net::TcpStream::connect(("127.0.0.1", port)).await?);
        }
        Ok::<_, std::io::Error>(())
    };
    crate::common::service_or_skip(test, "Azurite on 127.0.0.1:10000 and :10001", attempt).await
}

/// A client of `service` with the development account.
pub fn client(service: Service) -> StorageClient {
    let (endpoint, credential) = parse_connection_string(DEV, service).expect("dev account");
    StorageClient::new(StorageClientKey {
        endpoint,
        credential,
        timeout: Duration::from_secs(10),
    })
    .expect("client")
}

async fn send(
    client: &StorageClient,
    method: Method,
    segments: &[&str],
    query: &[(&str, &str)],
    headers: &[(&str, &str)],
    body: &'static [u8],
) -> keda_scalers::azure::client::Answer {
    client
        .send(
            method.clone(),
            segments,
            query,
            headers,
            Bytes::from_static(body),
            &Clock::system(),
        )
        .await
        .unwrap_or_else(|e| panic!("{method} {segments:?} {query:?}: {e}"))
}

/// Creates queue `name`.
pub async fn create_queue(name: &str) {
    send(&client(Service::Queue), Method::PUT, &[name], &[], &[], b"").await;
}

/// Puts `n` messages on queue `name`.
pub async fn put_messages(name: &str, n: usize) {
    let queue = client(Service::Queue);
    for _ in 0..n {
        send(
            &queue,
            Method::POST,
            &[name, "messages"],
            &[],
            &[("content-type", "application/xml")],
            b"<QueueMessage><MessageText>a2VkYS1ycw==</MessageText></QueueMessage>",
        )
        .await;
    }
}

/// Receives `n` messages of queue `name`, which makes them invisible for 10 minutes.
pub async fn receive(name: &str, n: usize) {
    let n = n.to_string();
    send(
        &client(Service::Queue),
        Method::GET,
        &[name, "messages"],
        &[("numofmessages", n.as_str()), ("visibilitytimeout", "600")],
        &[],
        b"",
    )
    .await;
}

/// Creates container `name`.
pub async fn create_container(name: &str) {
    send(
        &client(Service::Blob),
        Method::PUT,
        &[name],
        &[("restype", "container")],
        &[],
        b"",
    )
    .await;
}

/// Puts an empty block blob for each of `names` (which may contain `/`) in `container`, 16 at a
/// time.
pub async fn put_blobs(container: &str, names: &[String]) {
    let blob = client(Service::Blob);
    futures::stream::iter(names)
        .for_each_concurrent(16, |name| {
            let segments: Vec<&str> = std::iter::once(container).chain(name.split('/')).collect();
            let blob = &blob;
            async move {
                send(
                    blob,
                    Method::PUT,
                    &segments,
                    &[],
                    &[("x-ms-blob-type", "BlockBlob")],
                    b"",
                )
                .await;
            }
        })
        .await;
}

/// Puts block blob `name` (which may contain `/`) in `container` with `body` and `metadata`
/// (`x-ms-meta-<key>` headers).
pub async fn put_blob(container: &str, name: &str, body: &[u8], metadata: &[(&str, &str)]) {
    let segments: Vec<&str> = std::iter::once(container).chain(name.split('/')).collect();
    let headers: Vec<(String, String)> =
        std::iter::once(("x-ms-blob-type".to_string(), "BlockBlob".to_string()))
            .chain(
                metadata
                    .iter()
                    .map(|(k, v)| (format!("x-ms-meta-{k}"), v.to_string())),
            )
            .collect();
    let headers: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    client(Service::Blob)
        .send(
            Method::PUT,
            &segments,
            &[],
            &headers,
            Bytes::copy_from_slice(body),
            &Clock::system(),
        )
        .await
        .unwrap_or_else(|e| panic!("PUT blob {container}/{name}: {e}"));
}

/// Creates container `name` unless it exists (a container shared by runs, such as Azure
/// Functions' `azure-webjobs-eventhub`).
pub async fn ensure_container(name: &str) {
    match client(Service::Blob)
        .send(
            Method::PUT,
            &[name],
            &[("restype", "container")],
            &[],
            Bytes::new(),
            &Clock::system(),
        )
        .await
    {
        Ok(_) => {}
        Err(e) if e.code() == Some("ContainerAlreadyExists") => {}
        Err(e) => panic!("PUT container {name}: {e}"),
    }
}
