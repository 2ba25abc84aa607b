//! Adaptive polling (issue 26): for sources that cannot notify but are cheap to read
//! (`rabbitmq`, `prometheus`, `metrics-api`, `mysql`: [`keda_scalers::Scaler::adaptive_polling`]),
//! a loop polls sooner while something is happening, within bounds, and goes back to
//! `pollingInterval` once nothing changes.
//!
//! "Something is happening" is seen by a poll:
//! - the object just turned active again (inactive at the previous poll, active now), or
//! - it is near activation: inactive, and a metric value rose since the previous poll (work is
//!   arriving, below `activationThreshold` so far).
//!
//! Then the following polls come after the fast interval, `pollingInterval / 10` within
//! [`AdaptivePolicy::min_interval`] and `pollingInterval`, until [`AdaptivePolicy::idle_polls`]
//! polls in a row saw nothing happen; each sign of activity starts the count again. The
//! `pollingInterval` ticks go on meanwhile: a sooner poll is one more read, never one less.
//! The cost is bounded: at most `idle_polls` extra reads per sign of activity, never more than
//! one read per `min_interval`.

use std::time::Duration;

/// The bounds of adaptive polling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdaptivePolicy {
    /// The shortest wait between two polls.
    pub min_interval: Duration,
    /// How many polls in a row without activity end the fast polling.
    pub idle_polls: u32,
}

impl AdaptivePolicy {
    /// keda-rs's bounds: at most a poll a second, back to `pollingInterval` after 10 idle polls.
    pub const DEFAULT: Self = Self {
        min_interval: Duration::from_secs(1),
        idle_polls: 10,
    };

    /// The fast interval of a loop polling every `interval`: a tenth of it, within
    /// `min_interval` and `interval`.
    pub fn fast_interval(&self, interval: Duration) -> Duration {
        (interval / 10).max(self.min_interval).min(interval)
    }
}

/// What one poll saw, as adaptive polling needs it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observation {
    /// The object is active.
    pub active: bool,
    /// The metric values, in a stable order (`None`: the read failed).
    pub values: Vec<Option<f64>>,
}

/// One loop's adaptive state.
#[derive(Debug, Default)]
pub struct Adaptive {
    last: Option<Observation>,
    /// Fast polls left before going back to `pollingInterval`.
    fast_left: u32,
}

impl Adaptive {
    /// Takes what a poll saw; returns the wait before the next poll when it comes sooner than
    /// the loop's `interval`, `None` for the usual tick.
    pub fn after_poll(
        &mut self,
        policy: &AdaptivePolicy,
        interval: Duration,
        seen: Observation,
    ) -> Option<Duration> {
        let happening = self.last.as_ref().is_some_and(|last| {
            let turned_active = seen.active && !last.active;
            let rising = !seen.active
                && last.values.len() == seen.values.len()
                && last
                    .values
                    .iter()
                    .zip(&seen.values)
                    .any(|(before, now)| matches!((before, now), (Some(b), Some(n)) if n > b));
            turned_active || rising
        });
        self.last = Some(seen);
        if happening {
            self.fast_left = policy.idle_polls;
        } else {
            self.fast_left = self.fast_left.saturating_sub(1);
        }
        let fast = policy.fast_interval(interval);
        (self.fast_left > 0 && fast < interval).then_some(fast)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(active: bool, value: f64) -> Observation {
        Observation {
            active,
            values: vec![Some(value)],
        }
    }

    const THIRTY: Duration = Duration::from_secs(30);

    #[test]
    fn the_fast_interval_is_a_tenth_within_the_bounds() {
        let p = AdaptivePolicy::DEFAULT;
        // (pollingInterval, fast interval)
        let rows = [
            (30, 3_000),   // a tenth
            (300, 30_000), // a tenth
            (5, 1_000),    // not below min_interval
            (1, 1_000),    // never above pollingInterval
        ];
        for (interval, fast) in rows {
            assert_eq!(
                p.fast_interval(Duration::from_secs(interval)),
                Duration::from_millis(fast),
                "{interval}"
            );
        }
        assert_eq!(
            p.fast_interval(Duration::from_millis(500)),
            Duration::from_millis(500)
        );
    }

    #[test]
    fn a_rising_value_below_activation_polls_sooner_then_back_after_idle_polls() {
        let p = AdaptivePolicy::DEFAULT;
        let mut a = Adaptive::default();
        // The first poll has nothing to compare with.
        assert_eq!(a.after_poll(&p, THIRTY, seen(false, 0.0)), None);
        assert_eq!(a.after_poll(&p, THIRTY, seen(false, 0.0)), None);
        // Work arriving, still inactive: near activation.
        let fast = Some(Duration::from_secs(3));
        assert_eq!(a.after_poll(&p, THIRTY, seen(false, 2.0)), fast);
        // idle_polls - 1 more fast polls without change, then pollingInterval.
        for i in 1..p.idle_polls {
            assert_eq!(
                a.after_poll(&p, THIRTY, seen(false, 2.0)),
                fast,
                "idle poll {i}"
            );
        }
        assert_eq!(a.after_poll(&p, THIRTY, seen(false, 2.0)), None);
        // A falling value is no sign of activity.
        assert_eq!(a.after_poll(&p, THIRTY, seen(false, 1.0)), None);
    }

    #[test]
    fn turning_active_again_polls_sooner_and_each_sign_restarts_the_count() {
        let p = AdaptivePolicy {
            min_interval: Duration::from_secs(2),
            idle_polls: 3,
        };
        let mut a = Adaptive::default();
        let fast = Some(Duration::from_secs(3));
        assert_eq!(a.after_poll(&p, THIRTY, seen(false, 0.0)), None);
        assert_eq!(a.after_poll(&p, THIRTY, seen(true, 5.0)), fast);
        // Staying active is not "turning" active; rising while active is not "near".
        assert_eq!(a.after_poll(&p, THIRTY, seen(true, 9.0)), fast);
        // Inactive again: the last fast poll; then rising: the count starts again.
        assert_eq!(a.after_poll(&p, THIRTY, seen(false, 0.0)), fast);
        assert_eq!(a.after_poll(&p, THIRTY, seen(false, 1.0)), fast);
        assert_eq!(a.after_poll(&p, THIRTY, seen(false, 1.0)), fast);
        assert_eq!(a.after_poll(&p, THIRTY, seen(false, 1.0)), fast);
        assert_eq!(a.after_poll(&p, THIRTY, seen(false, 1.0)), None);
        // A failed read compares with nothing; a changed shape neither.
        assert_eq!(
            a.after_poll(
                &p,
                THIRTY,
                Observation {
                    active: false,
                    values: vec![None]
                }
            ),
            None
        );
        assert_eq!(
            a.after_poll(
                &p,
                THIRTY,
                Observation {
                    active: false,
                    values: vec![Some(5.0), Some(1.0)]
                }
            ),
            None
        );
    }

    #[test]
    fn a_loop_polling_at_the_minimum_already_never_polls_sooner() {
        let p = AdaptivePolicy::DEFAULT;
        let mut a = Adaptive::default();
        let second = Duration::from_secs(1);
        assert_eq!(a.after_poll(&p, second, seen(false, 0.0)), None);
        assert_eq!(a.after_poll(&p, second, seen(true, 1.0)), None);
    }
}
