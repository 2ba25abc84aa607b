//! When a scale loop polls: every `pollingInterval` of real time, or whenever a test says so.

use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;

/// Makes the ticker of one scale loop.
pub trait Ticks: Send + Sync + 'static {
    /// A ticker for a loop polling every `interval`.
    fn ticker(&self, interval: Duration) -> Box<dyn Ticker>;
}

/// Waits for a loop's next poll.
#[async_trait]
pub trait Ticker: Send {
    /// Returns when the next poll is due, with how late it is against its schedule.
    async fn tick(&mut self) -> Duration;
}

/// Real time: a poll every interval after the previous one started.
#[derive(Clone, Copy, Debug, Default)]
pub struct IntervalTicks;

impl Ticks for IntervalTicks {
    fn ticker(&self, interval: Duration) -> Box<dyn Ticker> {
        let mut i = tokio::time::interval(interval);
        i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Box::new(IntervalTicker {
            interval: i,
            started: false,
        })
    }
}

struct IntervalTicker {
    interval: tokio::time::Interval,
    started: bool,
}

#[async_trait]
impl Ticker for IntervalTicker {
    async fn tick(&mut self) -> Duration {
        if !self.started {
            // The first tick of an interval is immediate; the loop already polled at once.
            self.started = true;
            self.interval.tick().await;
        }
        let due = self.interval.tick().await;
        tokio::time::Instant::now().saturating_duration_since(due)
    }
}

/// Ticks driven by the caller: every loop polls once more after each [`ManualTicks::tick`].
/// Ticks that arrive while a loop is busy are coalesced into one poll.
#[derive(Clone, Debug)]
pub struct ManualTicks {
    tx: watch::Sender<u64>,
}

impl Default for ManualTicks {
    fn default() -> Self {
        ManualTicks {
            tx: watch::channel(0).0,
        }
    }
}

impl ManualTicks {
    /// New ticks, none given yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Lets every loop poll once more.
    pub fn tick(&self) {
        self.tx.send_modify(|n| *n += 1);
    }
}

impl Ticks for ManualTicks {
    fn ticker(&self, _interval: Duration) -> Box<dyn Ticker> {
        let mut rx = self.tx.subscribe();
        rx.mark_unchanged();
        Box::new(ManualTicker { rx })
    }
}

struct ManualTicker {
    rx: watch::Receiver<u64>,
}

#[async_trait]
impl Ticker for ManualTicker {
    async fn tick(&mut self) -> Duration {
        if self.rx.changed().await.is_err() {
            // The ticks are gone: never tick again.
            std::future::pending::<()>().await;
        }
        Duration::ZERO
    }
}
