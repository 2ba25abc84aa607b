//! The cooldown arithmetic: from when, and for how long, an inactive object waits before the
//! scale-in.

use jiff::{SignedDuration, Timestamp};

use super::{Observed, ScalingSettings};

/// KEDA's default `cooldownPeriod`: 300 seconds.
pub const DEFAULT_COOLDOWN_PERIOD: SignedDuration = SignedDuration::from_secs(300);
/// KEDA's default `initialCooldownPeriod`: 0 seconds.
pub const DEFAULT_INITIAL_COOLDOWN_PERIOD: SignedDuration = SignedDuration::ZERO;

/// Where the cooldown counts from and how long it is: `(creation, initialCooldownPeriod)` for
/// an object never active, else `(max(lastActiveTime, operator start), cooldownPeriod)`.
/// [`super::decide`] scales in once more than `period` has passed since `reference`.
pub fn cooldown_reference(
    settings: &ScalingSettings,
    observed: &Observed,
) -> (Timestamp, SignedDuration) {
    match observed.last_active_time {
        None => (observed.created_at, settings.initial_cooldown_period),
        Some(last) => (
            last.max(observed.operator_started_at),
            settings.cooldown_period,
        ),
    }
}

/// KEDA's cooldown test, with keda-rs's restart rule: never active -> `created +
/// initialCooldownPeriod < now`; else `max(lastActiveTime, operator start) + cooldownPeriod <
/// now`. Written as elapsed time, which cannot overflow: `now - reference > period`.
pub(super) fn cooldown_over(settings: &ScalingSettings, observed: &Observed) -> bool {
    let (reference, period) = cooldown_reference(settings, observed);
    observed.now.duration_since(reference) > period
}
