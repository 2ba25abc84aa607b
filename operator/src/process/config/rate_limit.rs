//! Client-side rate limiting of Kubernetes API requests (`--kube-api-qps`,
//! `--kube-api-burst`), as client-go's token bucket does: kube 5 has no limiter of its own.
//!
//! [`RateLimitLayer`] wraps the client's tower stack (`ClientBuilder::with_layer`). Each request
//! takes a token; the bucket holds at most `burst` tokens and refills at `qps` per second. A
//! request without a token reserves the next one and waits for it in `poll_ready`, so requests
//! are admitted in order, like client-go's limiter `Wait`. Watches take one token when they
//! start, not per event. With [`RateLimitLayer::recording`], every request's wait is recorded
//! ([`Metrics::rate_limiter_wait`]), so throttling shows on `/metrics`.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};
use tower::{Layer, Service};

use crate::process::telemetry::Metrics;

/// A token bucket: `burst` tokens at most, refilled at `qps` per second. Uses tokio's clock,
/// so tests can pause time.
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    state: Mutex<BucketState>,
}

#[derive(Debug)]
struct BucketState {
    /// May go negative: tokens reserved by requests still waiting.
    tokens: f64,
    refilled_at: Instant,
}

impl TokenBucket {
    /// A full bucket; `None` when `qps` is not positive (no limit). A burst of 0 counts as 1.
    pub fn new(qps: f32, burst: u32) -> Option<Self> {
        let qps = f64::from(qps);
        if !(qps.is_finite() && qps > 0.0) {
            return None;
        }
        let burst = f64::from(burst.max(1));
        Some(Self {
            qps,
            burst,
            state: Mutex::new(BucketState {
                tokens: burst,
                refilled_at: Instant::now(),
            }),
        })
    }

    /// Adds the tokens earned since the last refill, up to the burst.
    fn refill(&self, state: &mut BucketState) {
        let now = Instant::now();
        let elapsed = now
            .saturating_duration_since(state.refilled_at)
            .as_secs_f64();
        state.tokens = (state.tokens + elapsed * self.qps).min(self.burst);
        state.refilled_at = now;
    }

    /// Takes a token if one is there now. Otherwise takes nothing and returns how long until
    /// one will be (what a `Retry-After` says): for callers that refuse work rather than queue
    /// it, so a flood of them never builds a queue.
    ///
    /// # Errors
    /// The wait until the next token, when there is none now.
    pub fn try_take(&self) -> Result<(), Duration> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        self.refill(&mut state);
        if state.tokens >= 1.0 {
            state.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::try_from_secs_f64((1.0 - state.tokens) / self.qps)
                .unwrap_or(Duration::MAX))
        }
    }

    /// Takes a token, or reserves the next free one: returns how long the caller must wait
    /// before sending (zero when a token was available).
    pub fn reserve(&self) -> Duration {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        self.refill(&mut state);
        state.tokens -= 1.0;
        if state.tokens >= 0.0 {
            Duration::ZERO
        } else {
            // `qps` is at least MIN_QPS and the debt at most the waiting requests, so this is
            // far below Duration::MAX; saturate rather than panic if it ever is not.
            Duration::try_from_secs_f64(-state.tokens / self.qps).unwrap_or(Duration::MAX)
        }
    }
}

/// Applies a shared [`TokenBucket`] to every request of the wrapped service.
#[derive(Debug, Clone)]
pub struct RateLimitLayer {
    bucket: Arc<TokenBucket>,
    metrics: Option<Metrics>,
}

impl RateLimitLayer {
    pub fn new(bucket: TokenBucket) -> Self {
        Self {
            bucket: Arc::new(bucket),
            metrics: None,
        }
    }

    /// Records how long each request waited for its token into `metrics`.
    #[must_use]
    pub fn recording(mut self, metrics: Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit {
            inner,
            bucket: self.bucket.clone(),
            permit: Permit::None,
            metrics: self.metrics.clone(),
        }
    }
}

enum Permit {
    None,
    /// Waiting for a reserved token since the instant.
    Waiting(Pin<Box<Sleep>>, Instant),
    /// A token is held; the request waited this long for it.
    Granted(Duration),
}

/// The service [`RateLimitLayer`] builds.
pub struct RateLimit<S> {
    inner: S,
    bucket: Arc<TokenBucket>,
    permit: Permit,
    metrics: Option<Metrics>,
}

impl<S> std::fmt::Debug for RateLimit<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimit")
            .field("bucket", &self.bucket)
            .finish_non_exhaustive()
    }
}

impl<S, B> Service<http::Request<B>> for RateLimit<S>
where
    S: Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        loop {
            match &mut self.permit {
                Permit::None => {
                    let wait = self.bucket.reserve();
                    self.permit = if wait.is_zero() {
                        Permit::Granted(Duration::ZERO)
                    } else {
                        Permit::Waiting(Box::pin(tokio::time::sleep(wait)), Instant::now())
                    };
                }
                Permit::Waiting(sleep, since) => {
                    if sleep.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    self.permit = Permit::Granted(since.elapsed());
                }
                Permit::Granted(_) => return self.inner.poll_ready(cx),
            }
        }
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        // The token taken in `poll_ready` is spent by this request.
        let permit = std::mem::replace(&mut self.permit, Permit::None);
        if let (Some(metrics), Permit::Granted(waited)) = (&self.metrics, permit) {
            metrics.rate_limiter_wait(request.method().as_str(), waited);
        }
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_full_bucket_admits_the_burst_then_one_request_per_refill() {
        let bucket = TokenBucket::new(10.0, 3).expect("limited");
        let waits: Vec<Duration> = (0..5).map(|_| bucket.reserve()).collect();
        assert_eq!(
            waits,
            [
                Duration::ZERO,
                Duration::ZERO,
                Duration::ZERO,
                Duration::from_millis(100),
                Duration::from_millis(200),
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn tokens_refill_over_time_up_to_the_burst() {
        let bucket = TokenBucket::new(2.0, 2).expect("limited");
        bucket.reserve();
        bucket.reserve();
        tokio::time::advance(Duration::from_secs(10)).await;
        // Ten seconds refill far more than two tokens, but the bucket holds only two.
        assert_eq!(bucket.reserve(), Duration::ZERO);
        assert_eq!(bucket.reserve(), Duration::ZERO);
        assert_eq!(bucket.reserve(), Duration::from_millis(500));
    }

    #[tokio::test(start_paused = true)]
    async fn try_take_refuses_without_queueing_and_says_when_to_come_back() {
        let bucket = TokenBucket::new(5.0, 2).expect("limited");
        assert_eq!(bucket.try_take(), Ok(()));
        assert_eq!(bucket.try_take(), Ok(()));
        // Empty: refused with the time to the next token, and refusals reserve nothing.
        for _ in 0..1000 {
            assert_eq!(bucket.try_take(), Err(Duration::from_millis(200)));
        }
        tokio::time::advance(Duration::from_millis(150)).await;
        let wait = bucket.try_take().expect_err("not yet");
        assert!(
            wait.abs_diff(Duration::from_millis(50)) < Duration::from_micros(1),
            "{wait:?}"
        );
        tokio::time::advance(Duration::from_millis(50)).await;
        assert_eq!(bucket.try_take(), Ok(()));
    }

    #[test]
    fn a_non_positive_qps_means_no_limit() {
        assert!(TokenBucket::new(0.0, 30).is_none());
        assert!(TokenBucket::new(-1.0, 30).is_none());
        assert!(TokenBucket::new(f32::NAN, 30).is_none());
    }
}
