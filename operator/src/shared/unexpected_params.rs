//! KEDA's `KEDA_CHECK_UNEXPECTED_SCALERS_PARAMS`: when it is `enabled`, every build of a
//! ScaledObject's or ScaledJob's scalers reports each trigger `metadata` key the trigger's type
//! does not read as a Warning `KEDAScalerInfo` Event "Unmatched input property `<key>` in
//! scaler `<type>`" (with ` (<trigger name>)` when the trigger has a name), as KEDA's
//! `checkUnexpectedParameterExist` does (`pkg/scalers/scalersconfig/typed_config.go`).
//!
//! As in KEDA the check runs where the trigger's metadata parsed: for a scaler that was built,
//! and for one whose build failed only after its metadata parsed (a server that cannot be
//! reached); not for a trigger whose metadata or authentication does not resolve. It runs once
//! per build (a new generation, a rebuild after a Secret changed), never per poll.
//!
//! The keys come from the object, never from a server. Beyond KEDA, at most
//! [`MAX_EVENTS_PER_TRIGGER`] keys of one trigger are reported per build (the rest in one
//! Event saying how many), and a key is shown up to [`MAX_KEY_CHARS`] characters: a
//! ScaledObject's author must not be able to make the operator write Events without bound.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};

use keda_api::ScaleTrigger;
use keda_scalers::Registry;

use crate::shared::resolve::ScalableRef;

/// The variable, KEDA's name.
pub const ENV: &str = "KEDA_CHECK_UNEXPECTED_SCALERS_PARAMS";
/// The one value that turns the check on (KEDA compares the value with `enabled` exactly).
pub const ENABLED: &str = "enabled";
/// KEDA's reason (`eventreason.KEDAScalersInfo`).
pub const KEDA_SCALER_INFO: &str = "KEDAScalerInfo";
/// How many unmatched keys of one trigger get an Event of their own per build.
pub const MAX_EVENTS_PER_TRIGGER: usize = 16;
/// How many characters of a key an Event shows (an Event's note is at most 1 KiB).
pub const MAX_KEY_CHARS: usize = 200;
/// The longest Event action a real API server accepts.
const MAX_ACTION_BYTES: usize = 128;

/// One Event to publish: its action and note.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unmatched {
    /// Distinct per trigger and key: kube's recorder (as client-go's, KEDA's) folds Events
    /// with the same type, reason and action into a series of the first one's note.
    pub action: String,
    /// KEDA's text.
    pub note: String,
}

/// Whether the check is on, and what the last build of each object found, until
/// [`take`](Self::take)n. Clones share what was found. The default is off.
#[derive(Clone, Debug, Default)]
pub struct UnexpectedParams {
    found: Option<Arc<Mutex<Found>>>,
}

/// What the last build of each object found.
type Found = HashMap<ScalableRef, Vec<Unmatched>>;

impl UnexpectedParams {
    /// The check on.
    pub fn checking() -> Self {
        UnexpectedParams {
            found: Some(Arc::default()),
        }
    }

    /// On when `value` (the variable's value) is exactly `enabled`, as in KEDA.
    pub fn from_env_value(value: Option<&str>) -> Self {
        if value == Some(ENABLED) {
            Self::checking()
        } else {
            Self::default()
        }
    }

    /// Whether the check is on.
    pub fn is_checking(&self) -> bool {
        self.found.is_some()
    }

    /// What `trigger` (number `index`) sets that its type does not read, as Events.
    pub fn check(registry: &Registry, trigger: &ScaleTrigger, index: usize) -> Vec<Unmatched> {
        let keys =
            registry.unmatched_params(&trigger.type_, trigger.metadata.keys().map(String::as_str));
        let scaler = if trigger.name.is_empty() {
            trigger.type_.clone()
        } else {
            format!("{} ({})", trigger.type_, trigger.name)
        };
        let mut events: Vec<Unmatched> = keys
            .iter()
            .take(MAX_EVENTS_PER_TRIGGER)
            .map(|key| Unmatched {
                action: action(index, key),
                note: format!("Unmatched input property {} in scaler {scaler}", shown(key)),
            })
            .collect();
        if keys.len() > MAX_EVENTS_PER_TRIGGER {
            events.push(Unmatched {
                action: format!("UnmatchedInputProperties:{index}"),
                note: format!(
                    "{} more unmatched input properties in scaler {scaler}",
                    keys.len() - MAX_EVENTS_PER_TRIGGER
                ),
            });
        }
        events
    }

    /// Records what one build of `scalable` found (replacing what an earlier build found and
    /// nobody took). Nothing when the check is off.
    pub(crate) fn record(&self, scalable: &ScalableRef, found: Vec<Unmatched>) {
        let Some(map) = &self.found else {
            return;
        };
        let mut map = map.lock().unwrap_or_else(PoisonError::into_inner);
        if found.is_empty() {
            map.remove(scalable);
        } else {
            map.insert(scalable.clone(), found);
        }
    }

    /// What the last build of `scalable` found, once: the caller publishes it.
    pub fn take(&self, scalable: &ScalableRef) -> Vec<Unmatched> {
        let Some(map) = &self.found else {
            return Vec::new();
        };
        map.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(scalable)
            .unwrap_or_default()
    }
}

/// `key`, cut at [`MAX_KEY_CHARS`] characters.
fn shown(key: &str) -> String {
    if key.chars().count() <= MAX_KEY_CHARS {
        key.to_string()
    } else {
        key.chars().take(MAX_KEY_CHARS).collect::<String>() + "..."
    }
}

/// `UnmatchedInputProperty:<index>:<key>`, or with a hash of the key where that is longer than
/// an API server accepts.
fn action(index: usize, key: &str) -> String {
    let readable = format!("UnmatchedInputProperty:{index}:{key}");
    if readable.len() <= MAX_ACTION_BYTES {
        return readable;
    }
    let mut hasher = DefaultHasher::new();
    key.hash(&mut hasher);
    format!("UnmatchedInputProperty:{index}:{:016x}", hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trigger(yaml: &str) -> ScaleTrigger {
        serde_yaml::from_str(yaml).expect("a trigger")
    }

    #[test]
    fn only_the_exact_value_enabled_turns_the_check_on() {
        assert!(UnexpectedParams::from_env_value(Some("enabled")).is_checking());
        for off in [
            None,
            Some(""),
            Some("true"),
            Some("Enabled"),
            Some(" enabled"),
        ] {
            assert!(
                !UnexpectedParams::from_env_value(off).is_checking(),
                "{off:?}"
            );
        }
    }

    #[test]
    fn each_unread_key_is_one_note_in_keda_s_words() {
        let registry = Registry::builtin();
        let unnamed = trigger(
            "{ type: redis, metadata: { address: a, listName: l, listLenght: '5', hostFromEnv: H, typoFromEnv: T } }",
        );
        let notes: Vec<String> = UnexpectedParams::check(&registry, &unnamed, 0)
            .into_iter()
            .map(|u| u.note)
            .collect();
        assert_eq!(
            notes,
            [
                "Unmatched input property listLenght in scaler redis",
                "Unmatched input property typoFromEnv in scaler redis",
            ]
        );
        let named = trigger(
            "{ type: cron, name: office, metadata: { start: '0 8 * * *', end: '0 18 * * *', timezone: UTC, desiredReplicas: '2', desired: '3' } }",
        );
        let found = UnexpectedParams::check(&registry, &named, 2);
        assert_eq!(
            found,
            [Unmatched {
                action: "UnmatchedInputProperty:2:desired".into(),
                note: "Unmatched input property desired in scaler cron (office)".into(),
            }]
        );
    }

    #[test]
    fn many_or_long_keys_stay_within_an_event_s_limits() {
        let registry = Registry::builtin();
        let mut t = trigger("{ type: cron, metadata: { start: '0 8 * * *' } }");
        for i in 0..40 {
            t.metadata.insert(format!("extra{i:02}"), "x".into());
        }
        let long = "k".repeat(5000);
        t.metadata.insert(long.clone(), "x".into());
        let found = UnexpectedParams::check(&registry, &t, 0);
        assert_eq!(found.len(), MAX_EVENTS_PER_TRIGGER + 1);
        assert_eq!(
            found.last().map(|u| u.note.as_str()),
            Some("25 more unmatched input properties in scaler cron")
        );
        let mut actions: Vec<&str> = found.iter().map(|u| u.action.as_str()).collect();
        actions.sort_unstable();
        actions.dedup();
        assert_eq!(actions.len(), found.len(), "every action distinct");
        for u in &found {
            assert!(u.action.len() <= MAX_ACTION_BYTES, "{}", u.action);
            assert!(u.note.len() <= 1024, "{}", u.note.len());
        }
        let mut only_long = trigger("{ type: cron, metadata: { start: '0 8 * * *' } }");
        only_long.metadata.insert(long, "x".into());
        let found = UnexpectedParams::check(&registry, &only_long, 0);
        assert_eq!(found.len(), 1);
        assert!(found[0].action.len() <= MAX_ACTION_BYTES);
        assert!(
            found[0].note.ends_with("... in scaler cron"),
            "{}",
            found[0].note
        );
    }

    #[test]
    fn a_build_s_findings_are_taken_once_and_nothing_is_kept_when_off() {
        let so = ScalableRef::new(keda_scalers::ScalableKind::ScaledObject, "ns", "a");
        let found = vec![Unmatched {
            action: "a".into(),
            note: "n".into(),
        }];
        let on = UnexpectedParams::checking();
        on.clone().record(&so, found.clone());
        assert_eq!(on.take(&so), found);
        assert!(on.take(&so).is_empty());
        on.record(&so, found.clone());
        on.record(&so, Vec::new());
        assert!(on.take(&so).is_empty(), "a later build found nothing");
        let off = UnexpectedParams::default();
        off.record(&so, found);
        assert!(off.take(&so).is_empty());
    }
}
