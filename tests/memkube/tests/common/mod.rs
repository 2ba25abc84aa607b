//! Runs one scenario against the server in process and again over a loopback port.

use std::future::Future;
use std::time::Duration;

use memkube::{Loopback, MemKube};

/// Upper bound for anything a test awaits; a hang fails the test instead of blocking CI.
pub const WAIT: Duration = Duration::from_secs(20);

/// One scenario's world: a fresh server and a real `kube::Client` for it.
pub struct Ctx {
    pub server: MemKube,
    pub client: kube::Client,
    pub transport: &'static str,
}

/// Runs `scenario` twice, each time with a fresh server: through the in-process
/// `tower::Service`, then over HTTP on a loopback port.
pub async fn on_both_transports<F, Fut>(scenario: F)
where
    F: Fn(Ctx) -> Fut,
    Fut: Future<Output = ()>,
{
    let server = MemKube::new();
    let client = server.client();
    scenario(Ctx {
        server,
        client,
        transport: "in-process",
    })
    .await;

    let server = MemKube::new();
    let loopback = server.serve_loopback().await.expect("loopback port binds");
    let client = loopback
        .client()
        .expect("kube client for the loopback port builds");
    // Held here, not in `Ctx`: an `async move` block captures only the fields it uses, so a
    // listener stored in `Ctx` would be dropped as soon as the scenario starts.
    scenario(Ctx {
        server,
        client,
        transport: "loopback",
    })
    .await;
    drop::<Loopback>(loopback);
}

/// Awaits `future`, failing the test after [`WAIT`].
pub async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, future)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}
