//! KEDA's `KEDA_HTTP_DISABLE_KEEP_ALIVE` (issue 29, row 8) against a real HTTP/1.1 server on
//! loopback that counts the TCP connections it accepts: by default the scalers' shared HTTP
//! client reuses its connection for the next request; with the process-wide policy's
//! `disable_keep_alive` (what the operator sets from the variable) every request opens a new
//! one. One test in its own binary: the policy is installed once per process.

#[allow(dead_code)]
#[path = "common/http.rs"]
mod http_server;

use std::time::Duration;

use http::StatusCode;
use http_server::TestServer;
use keda_scalers::client_policy::{self, ClientPolicy};
use keda_scalers::http_client::reqwest_client;
use keda_scalers::tls::TlsSettings;

/// Requests sent one after the other, each answer read to its end.
const REQUESTS: usize = 5;

/// Sends [`REQUESTS`] GETs in a row with `client` to a fresh server; the connections it
/// accepted.
async fn connections_for(client: &reqwest::Client) -> usize {
    let server = TestServer::start(http_server::handler(|_| {
        (StatusCode::OK, "text/plain", "ok".to_string())
    }))
    .await;
    for _ in 0..REQUESTS {
        let answer = client
            .get(server.url("/"))
            .send()
            .await
            .expect("the server answers");
        assert_eq!(answer.status(), StatusCode::OK);
        assert_eq!(answer.text().await.expect("the body"), "ok");
    }
    server.connections()
}

#[tokio::test]
async fn keep_alive_is_on_by_default_and_off_under_keda_http_disable_keep_alive() {
    let settings = TlsSettings::default();
    let default = reqwest_client(&settings, Duration::from_secs(5)).expect("client");
    let reused = connections_for(&default).await;
    // A connection goes back to the pool a moment after its answer ends, so a request may
    // now and then open another; never one per request in a row of five.
    assert!(
        (1..REQUESTS).contains(&reused),
        "{reused} connections for {REQUESTS} requests: the default client kept none"
    );

    assert!(client_policy::install(ClientPolicy {
        disable_keep_alive: true,
        ..ClientPolicy::default()
    }));
    let no_keep_alive = reqwest_client(&settings, Duration::from_secs(5)).expect("client");
    assert_eq!(
        connections_for(&no_keep_alive).await,
        REQUESTS,
        "with KEDA_HTTP_DISABLE_KEEP_ALIVE every request opens its own connection"
    );
}
