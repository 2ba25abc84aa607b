//! When a scale loop polls: every `pollingInterval` of real time, or whenever a test says so.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
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

    /// Waits `offset` before the loop's first poll, and schedules the following polls from
    /// then on (loops that start together are spread over their interval). Manual ticks do
    /// not wait.
    async fn delay_first(&mut self, offset: Duration) {
        let _ = offset;
    }
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

    async fn delay_first(&mut self, offset: Duration) {
        tokio::time::sleep(offset).await;
        // The next poll one interval after this first one.
        self.interval.reset();
        self.started = true;
    }
}

/// Where in its polling interval the `k`-th loop (0, 1, ...) of many starting together (after
/// a restart or a leader change) polls first: the fractional parts of `k` times the golden
/// ratio, a sequence that fills the interval evenly whatever the count (any stretch of
/// `1/interval` of it holds about `1/interval` of the loops, give or take one or two), so
/// about `1/interval` of them poll in any second.
pub fn start_offset(k: u64, interval: Duration) -> Duration {
    const GOLDEN: f64 = 0.618_033_988_749_894_8;
    #[allow(clippy::cast_precision_loss)]
    let fraction = (k as f64 * GOLDEN).fract();
    // `fraction` is in [0, 1): the product is within `interval`.
    Duration::try_from_secs_f64(interval.as_secs_f64() * fraction).unwrap_or(Duration::ZERO)
}

/// Hands out the places ([`start_offset`]) of first loops starting together, one sequence per
/// group of loops: those with the same `pollingInterval` and the same trigger types, which
/// mostly read the same kind of event source.
///
/// One sequence for every loop spreads all of them evenly, but the loops of one source take an
/// arbitrary subset of its places (which loop starts when depends on the order of the
/// reconciles), and such a subset is only as even as chance: at 10,000 objects, a third of them
/// on one source, up to a fifth above that source's share in some seconds (the 10,000-object
/// bench, docs/benchmarks.md). With a sequence per group, each group is within its share of
/// about two loops in any second; a source that several groups read (objects with different
/// intervals, or other triggers beside it) gets the sum of evenly spread groups.
///
/// A place is a time within the interval counted from the start of the group's first loop (its
/// epoch), not from each loop's own start: loops start over seconds (the reconciles of
/// thousands of objects take a while), and places counted from their own starts would be as
/// uneven as the starts. From the epoch, every first poll is on its place whenever its loop
/// started (a loop that starts after its place in the current interval waits for it in the
/// next), so the first polls are as even as the places; and the group's first loop, whose place
/// is 0, polls at once, as it did when places were counted from each loop's start.
#[derive(Debug, Default)]
pub struct Spread {
    /// The next index and the epoch of each group, by (interval, sorted trigger types joined
    /// with `,`).
    next: Mutex<HashMap<(Duration, String), (u64, tokio::time::Instant)>>,
}

impl Spread {
    /// The wait before the first poll of the next loop polling every `interval` with triggers
    /// of `trigger_types` (order and repetition do not matter), starting now.
    pub fn offset<'a>(
        &self,
        interval: Duration,
        trigger_types: impl IntoIterator<Item = &'a str>,
    ) -> Duration {
        self.offset_at(interval, trigger_types, tokio::time::Instant::now())
    }

    /// [`offset`](Self::offset) for a loop starting at `now`: the time from `now` until its
    /// place comes next.
    fn offset_at<'a>(
        &self,
        interval: Duration,
        trigger_types: impl IntoIterator<Item = &'a str>,
        now: tokio::time::Instant,
    ) -> Duration {
        let mut types: Vec<&str> = trigger_types.into_iter().collect();
        types.sort_unstable();
        types.dedup();
        let (k, epoch) = {
            let mut next = self.next.lock().unwrap_or_else(PoisonError::into_inner);
            let (n, epoch) = next.entry((interval, types.join(","))).or_insert((0, now));
            *n += 1;
            (*n - 1, *epoch)
        };
        let place = start_offset(k, interval).as_nanos();
        let period = interval.as_nanos();
        if period == 0 {
            return Duration::ZERO;
        }
        // Where in the interval `now` is, counted from the group's epoch.
        let into = now.saturating_duration_since(epoch).as_nanos() % period;
        let wait = (place + period - into) % period;
        // Below `interval`, which is a Duration: it fits.
        Duration::from_nanos(u64::try_from(wait).unwrap_or(u64::MAX))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_offsets_fill_the_interval_evenly() {
        let interval = Duration::from_secs(30);
        for n in [1u64, 7, 30, 100, 1000, 100_000] {
            let mut per_second = [0u64; 30];
            for k in 0..n {
                let offset = start_offset(k, interval);
                assert!(offset < interval);
                let second = usize::try_from(offset.as_secs()).unwrap();
                per_second[second] += 1;
            }
            let most = *per_second.iter().max().unwrap();
            // 1/interval of them per second, give or take the rounding of a few.
            assert!(
                most <= n.div_ceil(30) + 2,
                "{n} loops: {most} in one second"
            );
        }
    }

    /// Objects of three sources start interleaved in an arbitrary order: each source is
    /// spread evenly on its own, not only the three together.
    #[test]
    fn each_group_is_spread_evenly_whatever_the_others_in_between() {
        let epoch = tokio::time::Instant::now();
        let spread = Spread::default();
        let interval = Duration::from_secs(30);
        let sources = ["redis", "metrics-api", "cron"];
        let mut per_second = [[0u64; 30]; 3];
        let mut count = [0u64; 3];
        // xorshift: a fixed arbitrary order.
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let s = usize::try_from(x % 3).expect("small");
            let offset = spread.offset_at(interval, [sources[s]], epoch);
            per_second[s][usize::try_from(offset.as_secs()).expect("small")] += 1;
            count[s] += 1;
        }
        for s in 0..3 {
            let most = *per_second[s].iter().max().expect("seconds");
            assert!(
                most <= count[s].div_ceil(30) + 2,
                "{}: {most} of {} in one second",
                sources[s],
                count[s]
            );
        }
    }

    #[test]
    fn a_group_is_an_interval_and_a_set_of_trigger_types() {
        let epoch = tokio::time::Instant::now();
        let spread = Spread::default();
        let offset =
            |interval, types: &[&str]| spread.offset_at(interval, types.iter().copied(), epoch);
        let (thirty, sixty) = (Duration::from_secs(30), Duration::from_secs(60));
        assert_eq!(offset(thirty, &["kafka", "cron"]), start_offset(0, thirty));
        // Order and repetition do not matter...
        assert_eq!(
            offset(thirty, &["cron", "kafka", "cron"]),
            start_offset(1, thirty)
        );
        // ... the interval and the set do.
        assert_eq!(offset(sixty, &["cron", "kafka"]), start_offset(0, sixty));
        assert_eq!(offset(thirty, &["kafka"]), start_offset(0, thirty));
        assert_eq!(offset(thirty, &["cron", "kafka"]), start_offset(2, thirty));
    }

    /// Loops that start over 45 s (longer than their interval) poll first on their places
    /// counted from the group's first loop's start, not from their own starts: the first polls
    /// are as even as the places, however uneven the starts; and the first loop polls at once.
    #[test]
    fn first_polls_are_on_places_counted_from_the_epoch_whatever_the_starts() {
        let epoch = tokio::time::Instant::now();
        let spread = Spread::default();
        let interval = Duration::from_secs(30);
        let n = 3_333u64;
        let mut per_second = [0u64; 30];
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for k in 0..n {
            // Uneven starts: the first at the epoch, most in the first 2 s, the rest over 45 s.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let started = if k == 0 {
                Duration::ZERO
            } else if x.is_multiple_of(4) {
                Duration::from_millis(x % 45_000)
            } else {
                Duration::from_millis(x % 2_000)
            };
            let wait = spread.offset_at(interval, ["metrics-api"], epoch + started);
            assert!(wait < interval, "{wait:?}");
            if k == 0 {
                assert_eq!(wait, Duration::ZERO, "the first loop polls at once");
            }
            // The first poll, counted from the epoch, is on the loop's place.
            let first = started + wait;
            let into = Duration::from_nanos(
                u64::try_from(first.as_nanos() % interval.as_nanos()).expect("small"),
            );
            let place = start_offset(k, interval);
            let off = into.abs_diff(place);
            assert!(
                off < Duration::from_micros(1),
                "loop {k}: {into:?} vs {place:?}"
            );
            per_second[usize::try_from(into.as_secs()).expect("small")] += 1;
        }
        let most = *per_second.iter().max().expect("seconds");
        assert!(most <= n.div_ceil(30) + 2, "{most} of {n} in one second");
        // Another group's epoch is its own first loop's start: it polls at once too.
        let later = epoch + Duration::from_millis(1_234);
        assert_eq!(spread.offset_at(interval, ["redis"], later), Duration::ZERO);
    }
}
