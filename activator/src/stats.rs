//! Per-target request statistics on one activator replica: the time-weighted average
//! concurrency and the number of requests, per reporting period (one second). Time is passed
//! in, so tests use virtual time.

use tokio::time::Instant;

/// Integrates concurrency over time.
#[derive(Clone, Debug)]
pub struct Meter {
    current: u32,
    area: f64,
    last_change: Instant,
    period_start: Instant,
    requests: u64,
}

/// One period's figures.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// Time-weighted average concurrency over the period.
    pub concurrency: f64,
    /// Requests that arrived in the period.
    pub requests: u64,
}

impl Meter {
    /// A meter at zero starting at `now`.
    pub fn new(now: Instant) -> Self {
        Self {
            current: 0,
            area: 0.0,
            last_change: now,
            period_start: now,
            requests: 0,
        }
    }

    fn advance(&mut self, now: Instant) {
        let dt = now
            .saturating_duration_since(self.last_change)
            .as_secs_f64();
        self.area += f64::from(self.current) * dt;
        self.last_change = now;
    }

    /// A request arrived (it counts until [`Meter::finished`]).
    pub fn arrived(&mut self, now: Instant) {
        self.advance(now);
        self.current += 1;
        self.requests += 1;
    }

    /// A request finished (answered, failed, timed out or cancelled).
    pub fn finished(&mut self, now: Instant) {
        self.advance(now);
        self.current = self.current.saturating_sub(1);
    }

    /// Requests currently counted.
    pub fn current(&self) -> u32 {
        self.current
    }

    /// The figures since the last call, starting a new period at `now`.
    pub fn take(&mut self, now: Instant) -> Sample {
        self.advance(now);
        let elapsed = now
            .saturating_duration_since(self.period_start)
            .as_secs_f64();
        let concurrency = if elapsed > 0.0 {
            self.area / elapsed
        } else {
            f64::from(self.current)
        };
        let sample = Sample {
            concurrency,
            requests: self.requests,
        };
        self.area = 0.0;
        self.requests = 0;
        self.period_start = now;
        sample
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn concurrency_is_averaged_over_time() {
        let t0 = Instant::now();
        let mut m = Meter::new(t0);
        let ms = |n| t0 + Duration::from_millis(n);
        // One request for the whole second, a second one for the last half.
        m.arrived(t0);
        m.arrived(ms(500));
        let s = m.take(ms(1000));
        assert_eq!(s.requests, 2);
        assert!((s.concurrency - 1.5).abs() < 1e-9, "{}", s.concurrency);
        // Both finish a quarter into the next second.
        m.finished(ms(1250));
        m.finished(ms(1250));
        let s = m.take(ms(2000));
        assert_eq!(s.requests, 0);
        assert!((s.concurrency - 0.5).abs() < 1e-9, "{}", s.concurrency);
        assert_eq!(m.current(), 0);
        assert_eq!(m.take(ms(3000)).concurrency, 0.0);
    }
}
