//! Request statistics over time windows, as Knative's KPA computes them: values summed into
//! 1-second buckets, averaged over a stable window (default 60 s) and a panic window (default
//! 10 % of it), and a panic mode that scales up on bursts and never scales down while it lasts.
//!
//! Everything here is pure: time is passed in as whole seconds (of any epoch), so tests use
//! hand-computed tables instead of clocks.

use std::time::Duration;

/// Sums of values per 1-second bucket over a sliding window (Knative's `TimedFloat64Buckets`).
///
/// Averages follow Knative:
/// - while the first write is less than a window ago, the average is over the seconds since the
///   first write (a fresh target is not diluted by seconds it did not exist);
/// - seconds between the last write and now are left out of the average while they are less
///   than a window (data may be late);
/// - gaps inside the data count as zero;
/// - nothing written for a whole window: the average is 0, and the next write starts afresh.
#[derive(Clone, Debug, PartialEq)]
pub struct BucketWindow {
    buckets: Vec<f64>,
    total: f64,
    first_write: u64,
    last_write: u64,
    written: bool,
}

impl BucketWindow {
    /// A window of `window` rounded up to whole seconds (at least one bucket).
    pub fn new(window: Duration) -> Self {
        let secs = window.as_secs() + u64::from(window.subsec_nanos() > 0);
        let len = usize::try_from(secs.max(1)).unwrap_or(usize::MAX);
        Self {
            buckets: vec![0.0; len],
            total: 0.0,
            first_write: 0,
            last_write: 0,
            written: false,
        }
    }

    fn len(&self) -> u64 {
        self.buckets.len() as u64
    }

    fn index(&self, second: u64) -> usize {
        // The remainder is below the bucket count, a usize.
        usize::try_from(second % self.len()).unwrap_or(0)
    }

    /// Adds `value` to the bucket of `second`. Values for seconds more than a window before the
    /// last write are ignored.
    pub fn record(&mut self, second: u64, value: f64) {
        if !self.written {
            self.written = true;
            self.first_write = second;
            self.last_write = second;
        } else if second + self.len() < self.last_write {
            return;
        }
        if second > self.last_write {
            if second - self.last_write >= self.len() {
                self.buckets.iter_mut().for_each(|b| *b = 0.0);
                self.total = 0.0;
                self.first_write = second;
            } else {
                for s in self.last_write + 1..=second {
                    let i = self.index(s);
                    self.total -= self.buckets[i];
                    self.buckets[i] = 0.0;
                }
            }
            self.last_write = second;
        }
        if second < self.first_write {
            self.first_write = second;
        }
        let i = self.index(second);
        self.buckets[i] += value;
        self.total += value;
    }

    /// Whether nothing was written during the window that ends at `now`.
    pub fn is_empty(&self, now: u64) -> bool {
        !self.written || now.saturating_sub(self.last_write) >= self.len()
    }

    /// The average bucket value over the window that ends at `now` (see the type's docs).
    pub fn average(&self, now: u64) -> f64 {
        if self.is_empty(now) {
            return 0.0;
        }
        let span = self.last_write - self.first_write + 1;
        if now <= self.last_write {
            return self.total / span.min(self.len()) as f64;
        }
        let gap = now - self.last_write;
        let mut total = self.total;
        for s in self.last_write + 1..=now {
            total -= self.buckets[self.index(s)];
        }
        total / span.min(self.len() - gap) as f64
    }
}

/// The window settings of one target.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WindowSettings {
    /// The stable window (Knative `window`, default 60 s).
    pub stable_window: Duration,
    /// The panic window as a percentage of the stable window (default 10).
    pub panic_window_percentage: f64,
    /// Panic when the panic window asks for this percentage of the ready pods (default 200).
    pub panic_threshold_percentage: f64,
}

impl Default for WindowSettings {
    fn default() -> Self {
        Self {
            stable_window: Duration::from_secs(60),
            panic_window_percentage: 10.0,
            panic_threshold_percentage: 200.0,
        }
    }
}

impl WindowSettings {
    /// The panic window: the stable window times the percentage, at least one second. A
    /// percentage outside 1-100 (the trigger refuses it) gives the stable window.
    pub fn panic_window(&self) -> Duration {
        let secs = self.stable_window.as_secs_f64() * self.panic_window_percentage / 100.0;
        match Duration::try_from_secs_f64(secs.max(1.0)) {
            Ok(window) if window <= self.stable_window.max(Duration::from_secs(1)) => window,
            _ => self.stable_window.max(Duration::from_secs(1)),
        }
    }
}

/// What [`Autoscaler::observe`] concluded at one instant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Observation {
    /// The stable-window average.
    pub stable: f64,
    /// The panic-window average.
    pub panic: f64,
    /// Whether panic mode is on.
    pub panicking: bool,
    /// The value for the HPA: the stable value, or while panicking the highest value asked for
    /// since the panic began (so the HPA never scales down during a panic).
    pub value: f64,
}

/// The stable and panic windows of one metric plus Knative's panic-mode state machine.
#[derive(Clone, Debug)]
pub struct Autoscaler {
    settings: WindowSettings,
    target: f64,
    stable: BucketWindow,
    panic: BucketWindow,
    panic_since: Option<u64>,
    max_panic_value: f64,
}

impl Autoscaler {
    /// Windows for `settings`, scaling against `target` per pod (must be > 0).
    pub fn new(settings: WindowSettings, target: f64) -> Self {
        Self {
            stable: BucketWindow::new(settings.stable_window),
            panic: BucketWindow::new(settings.panic_window()),
            settings,
            target,
            panic_since: None,
            max_panic_value: 0.0,
        }
    }

    /// Adds a per-second value (summed over activator replicas by the caller, or added here
    /// one replica at a time: buckets sum).
    pub fn record(&mut self, second: u64, value: f64) {
        self.stable.record(second, value);
        self.panic.record(second, value);
    }

    /// Whether nothing was recorded during the stable window ending at `now`.
    pub fn is_idle(&self, now: u64) -> bool {
        self.stable.is_empty(now)
    }

    /// Evaluates the windows at `now` with `ready_pods` ready pods (0 counts as 1), updating
    /// panic mode as Knative's KPA does:
    /// - over threshold when `ceil(panic / target) / max(1, ready) >= threshold`;
    /// - panic starts when over the threshold, and each evaluation over it extends it;
    /// - panic ends at the first evaluation not over the threshold more than a stable window
    ///   after the last one that was;
    /// - while panicking the value served never decreases.
    pub fn observe(&mut self, now: u64, ready_pods: u32) -> Observation {
        let stable = self.stable.average(now);
        let panic = self.panic.average(now);
        let ready = f64::from(ready_pods.max(1));
        let desired_panic_pods = (panic / self.target).ceil();
        let over = desired_panic_pods / ready >= self.settings.panic_threshold_percentage / 100.0;
        let window = self.settings.stable_window.as_secs();
        match self.panic_since {
            _ if over => self.panic_since = Some(now),
            Some(since) if now > since + window => {
                self.panic_since = None;
                self.max_panic_value = 0.0;
            }
            _ => {}
        }
        let value = if self.panic_since.is_some() {
            self.max_panic_value = self.max_panic_value.max(stable.max(panic));
            self.max_panic_value
        } else {
            stable
        };
        Observation {
            stable,
            panic,
            panicking: self.panic_since.is_some(),
            value,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(secs: u64, writes: &[(u64, f64)]) -> BucketWindow {
        let mut w = BucketWindow::new(Duration::from_secs(secs));
        for &(s, v) in writes {
            w.record(s, v);
        }
        w
    }

    /// (window secs, writes (second, value), now, expected average)
    type Case = (u64, &'static [(u64, f64)], u64, f64);

    #[test]
    fn window_averages_match_knatives_table() {
        let cases: &[Case] = &[
            // Nothing written: 0.
            (5, &[], 10, 0.0),
            // One write, read the same second: that value.
            (5, &[(100, 4.0)], 100, 4.0),
            // Partial window: averaged over the seconds since the first write.
            (60, &[(100, 6.0), (101, 0.0), (102, 3.0)], 102, 3.0),
            // Gap inside the data counts as zero: (6 + 0 + 3) / 3.
            (60, &[(100, 6.0), (102, 3.0)], 102, 3.0),
            // Trailing seconds without data are left out: still over 3 seconds.
            (60, &[(100, 6.0), (102, 3.0)], 110, 3.0),
            // Full window: the oldest buckets fall out; 5 buckets of 1..=5 after 0..=9.
            (
                5,
                &[
                    (0, 1.0),
                    (1, 1.0),
                    (2, 1.0),
                    (3, 1.0),
                    (4, 1.0),
                    (5, 2.0),
                    (6, 2.0),
                    (7, 2.0),
                    (8, 2.0),
                    (9, 2.0),
                ],
                9,
                2.0,
            ),
            // Read two seconds after the last write of a full window: the 3 remaining buckets.
            (
                5,
                &[(5, 1.0), (6, 2.0), (7, 3.0), (8, 4.0), (9, 5.0)],
                11,
                4.0,
            ),
            // A whole window without writes: 0.
            (5, &[(5, 1.0), (6, 2.0)], 11, 0.0),
            // Several writes to one second add up (replicas sum).
            (10, &[(50, 2.0), (50, 3.0), (51, 1.0)], 51, 3.0),
            // A write after a whole-window gap starts afresh.
            (5, &[(0, 9.0), (20, 1.0)], 20, 1.0),
            // A late write for an older second inside the window still counts.
            (10, &[(50, 2.0), (52, 2.0), (51, 2.0)], 52, 2.0),
            // A write older than the window is ignored.
            (5, &[(50, 2.0), (40, 100.0)], 50, 2.0),
        ];
        for (i, &(secs, writes, now, expected)) in cases.iter().enumerate() {
            let got = window(secs, writes).average(now);
            assert!(
                (got - expected).abs() < 1e-9,
                "case {i}: window {secs}s, writes {writes:?}, now {now}: got {got}, expected {expected}"
            );
        }
    }

    #[test]
    fn panic_window_is_a_percentage_of_the_stable_window() {
        assert_eq!(
            WindowSettings::default().panic_window(),
            Duration::from_secs(6)
        );
        let tiny = WindowSettings {
            stable_window: Duration::from_secs(6),
            ..WindowSettings::default()
        };
        assert_eq!(tiny.panic_window(), Duration::from_secs(1));
    }

    /// Stable window 10 s, panic window 1 s (10 %), threshold 200 %, target 10 per pod.
    fn small() -> Autoscaler {
        Autoscaler::new(
            WindowSettings {
                stable_window: Duration::from_secs(10),
                ..WindowSettings::default()
            },
            10.0,
        )
    }

    #[test]
    fn steady_load_serves_the_stable_average_without_panic() {
        let mut a = small();
        for s in 0..10 {
            a.record(s, 15.0);
            let o = a.observe(s, 2);
            // ceil(15 / 10) / 2 = 1 < 2: never panics.
            assert!(!o.panicking, "second {s}");
            assert_eq!(o.value, 15.0);
        }
    }

    #[test]
    fn a_burst_starts_panic_and_the_value_never_drops_until_a_stable_window_passes() {
        let mut a = small();
        // (second, recorded concurrency, ready pods, expected stable, panicking, served value)
        let table: &[(u64, f64, u32, f64, bool, f64)] = &[
            // Quiet: 10 per second on one pod, stable avg 10, panic ceil(10/10)/1 = 1 < 2.
            (0, 10.0, 1, 10.0, false, 10.0),
            (1, 10.0, 1, 10.0, false, 10.0),
            // Burst: panic value 40 -> ceil(4)/1 >= 2: panic; served max(stable 20, panic 40).
            (2, 40.0, 1, 20.0, true, 40.0),
            // Burst over: panic value 10 < threshold, but panic holds the highest value 40.
            (3, 10.0, 1, 17.5, true, 40.0),
            (4, 10.0, 4, 16.0, true, 40.0),
            // Still over the threshold at second 5 (30 on 1 pod): panic extended to 5.
            (5, 30.0, 1, 18.333333333333332, true, 40.0),
            (6, 10.0, 1, 17.142857142857142, true, 40.0),
            // Seconds 7..=14 without data count as zero: (10 at 6 + 10 at 15) / 10 buckets.
            // 15 = 5 + stable window: not yet more than a window after second 5.
            (15, 10.0, 1, 2.0, true, 40.0),
            // 16 > 5 + 10: panic ends; the stable value is served again.
            (16, 10.0, 1, 2.0, false, 2.0),
        ];
        for &(s, value, ready, stable, panicking, served) in table {
            a.record(s, value);
            let o = a.observe(s, ready);
            assert!(
                (o.stable - stable).abs() < 1e-9,
                "second {s}: stable {} != {stable}",
                o.stable
            );
            assert_eq!(o.panicking, panicking, "second {s}");
            assert_eq!(o.value, served, "second {s}");
        }
    }

    #[test]
    fn many_ready_pods_absorb_a_burst_without_panic() {
        let mut a = small();
        a.record(0, 10.0);
        a.observe(0, 5);
        a.record(1, 90.0);
        // ceil(90 / 10) / 5 = 1.8 < 2.
        let o = a.observe(1, 5);
        assert!(!o.panicking);
        assert_eq!(o.value, 50.0);
    }
}
