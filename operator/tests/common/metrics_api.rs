//! A metrics API for `metrics-api` triggers: one path of a [`Source`] whose JSON answer the
//! test sets, which counts the requests it gets, and which can go down (its listener and every
//! open connection closed, so clients get "connection refused") and come back on the same port.

use super::source::{Outage, Source};

/// The path the answer is served at.
const PATH: &str = "stats";

/// The server. Dropping it stops it.
pub struct MetricsApi {
    source: Source,
}

impl MetricsApi {
    /// Starts on a free loopback port, answering `{"queue":{"depth":<value>}}`.
    pub async fn start(value: f64) -> Self {
        let server = MetricsApi {
            source: Source::start().await,
        };
        server.set(value);
        server
    }

    /// `http://127.0.0.1:<port>/stats`; the value is at `queue.depth`.
    pub fn url(&self) -> String {
        self.source.url(PATH)
    }

    /// Sets the value the next answers carry.
    pub fn set(&self, value: f64) {
        self.set_body(&format!(
            r#"{{"queue":{{"depth":{value}}},"workers":["a","b"]}}"#
        ));
    }

    /// Sets the whole body the next answers carry.
    pub fn set_body(&self, body: &str) {
        self.source.set_body(PATH, body);
    }

    /// Requests so far.
    pub fn requests(&self) -> u64 {
        self.source.requests(PATH)
    }

    /// Goes down: the listener and every open connection are closed.
    pub fn stop(&self) {
        self.source.down(Outage::Refused);
    }

    /// Comes back on the same port.
    pub async fn restart(&self) {
        self.source.up().await;
    }
}
