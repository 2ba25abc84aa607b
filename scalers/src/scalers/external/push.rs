//! `external-push`: the `external` scaler plus a `StreamIsActive` stream held open for as long
//! as the scale loop runs. Every answer the server streams is passed to the loop; a `true`
//! wakes it at once instead of waiting for the next poll. The stream is reopened after it ends
//! or fails, with KEDA's backoff: 2 s, doubling up to 1 minute.

use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::autoscaling::v2::MetricSpec;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::ExternalScaler;
use crate::error::ScalerError;
use crate::scaler::{MetricsAndActivity, PushScaler, Scaler};

/// The first wait before reopening the stream.
pub const FIRST_RETRY: Duration = Duration::from_secs(2);
/// The longest wait before reopening the stream.
pub const MAX_RETRY: Duration = Duration::from_secs(60);

/// KEDA's `StreamIsActive` retry delays: 2 s, 4 s, 8 s, ... capped at 1 minute; back to 2 s
/// after a stream that worked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self { next: FIRST_RETRY }
    }
}

impl Backoff {
    /// The wait before the next attempt; the one after it is twice as long, up to the cap.
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = self.next.saturating_mul(2).min(MAX_RETRY);
        delay
    }

    /// Starts over at 2 s.
    pub fn reset(&mut self) {
        self.next = FIRST_RETRY;
    }
}

/// How one stream ended.
#[derive(Debug)]
enum StreamEnd {
    /// The loop is gone (the receiver was dropped) or `cancel` fired: stop for good.
    Stop,
    /// The server ended the stream cleanly, or it broke after delivering answers: retry, with
    /// the backoff started over.
    Worked(Option<String>),
    /// The stream could not be opened or failed before delivering anything: retry, with the
    /// backoff growing.
    Failed(String),
}

/// An `external-push` scaler.
pub struct ExternalPushScaler {
    inner: ExternalScaler,
}

impl ExternalPushScaler {
    /// Wraps a built `external` scaler.
    pub fn new(inner: ExternalScaler) -> Self {
        Self { inner }
    }

    /// Holds one stream open, passing every answer on.
    async fn stream_once(
        &self,
        cancel: &CancellationToken,
        activity: &mpsc::Sender<bool>,
    ) -> StreamEnd {
        let opened = tokio::select! {
            () = cancel.cancelled() => return StreamEnd::Stop,
            opened = self.inner.stream_is_active() => opened,
        };
        let mut stream = match opened {
            Ok(stream) => stream,
            Err(ScalerError::Closed { .. }) => return StreamEnd::Stop,
            Err(e) => return StreamEnd::Failed(e.to_string()),
        };
        let mut delivered = false;
        loop {
            let message = tokio::select! {
                () = cancel.cancelled() => return StreamEnd::Stop,
                message = stream.message() => message,
            };
            match message {
                Ok(Some(answer)) => {
                    delivered = true;
                    tracing::debug!(
                        trigger = %self.inner.trigger(),
                        active = answer.result,
                        "StreamIsActive answer"
                    );
                    let sent = tokio::select! {
                        () = cancel.cancelled() => return StreamEnd::Stop,
                        sent = activity.send(answer.result) => sent,
                    };
                    if sent.is_err() {
                        return StreamEnd::Stop;
                    }
                }
                Ok(None) => return StreamEnd::Worked(None),
                Err(status) => {
                    let error = super::GrpcError { status }.to_string();
                    return if delivered {
                        StreamEnd::Worked(Some(error))
                    } else {
                        StreamEnd::Failed(error)
                    };
                }
            }
        }
    }
}

#[async_trait]
impl Scaler for ExternalPushScaler {
    fn metric_specs(&self) -> Vec<MetricSpec> {
        self.inner.metric_specs()
    }

    async fn metrics_and_activity(
        &self,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        self.inner.metrics_and_activity(metric_name).await
    }

    async fn close(&self) {
        self.inner.close().await;
    }
}

#[async_trait]
impl PushScaler for ExternalPushScaler {
    /// Holds `StreamIsActive` open and sends every answer on `activity`; reopens it after it
    /// ends or fails, waiting [`Backoff`] first. Returns when `cancel` fires, the receiver is
    /// gone, or the scaler is closed.
    async fn run(&self, cancel: CancellationToken, activity: mpsc::Sender<bool>) {
        let mut backoff = Backoff::default();
        let address = &self.inner.config().channel.address;
        loop {
            match self.stream_once(&cancel, &activity).await {
                StreamEnd::Stop => return,
                StreamEnd::Worked(error) => {
                    backoff.reset();
                    tracing::info!(
                        trigger = %self.inner.trigger(),
                        %address,
                        error = error.as_deref().unwrap_or("none"),
                        "StreamIsActive ended; reopening"
                    );
                }
                StreamEnd::Failed(error) => {
                    tracing::warn!(
                        trigger = %self.inner.trigger(),
                        %address,
                        error,
                        "StreamIsActive failed; retrying with backoff"
                    );
                }
            }
            let delay = backoff.next_delay();
            tracing::debug!(trigger = %self.inner.trigger(), ?delay, "StreamIsActive retry backoff");
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(delay) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_from_two_seconds_to_one_minute_and_starts_over() {
        let mut b = Backoff::default();
        let delays: Vec<u64> = (0..8).map(|_| b.next_delay().as_secs()).collect();
        assert_eq!(delays, [2, 4, 8, 16, 32, 60, 60, 60]);
        b.reset();
        assert_eq!(b.next_delay(), FIRST_RETRY);
    }
}
