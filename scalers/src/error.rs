//! Errors of building and querying scalers. Every message names the trigger (index and type)
//! and, for configuration problems, the parameter, because it lands in the object's `Ready`
//! condition where the user must be able to act on it. Secret values never appear in them.

use std::fmt;

pub use crate::remote::Failure;

/// A boxed cause, kept as the error's source.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Identifies a trigger in messages: `trigger 0 (redis)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TriggerId {
    /// Position in `spec.triggers`.
    pub index: usize,
    /// The trigger's `type`.
    pub trigger_type: String,
}

impl fmt::Display for TriggerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "trigger {} ({})", self.index, self.trigger_type)
    }
}

/// Where a parameter value was found; shown in errors instead of the value when the value may
/// be secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// The trigger's `metadata` map (KEDA `triggerMetadata`).
    Metadata,
    /// The target container's environment, named by `metadata["<name>FromEnv"]` (KEDA
    /// `resolvedEnv`).
    Env,
    /// The parameters resolved from the trigger's (Cluster)TriggerAuthentication (KEDA
    /// `authParams`).
    Auth,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Metadata => "metadata",
            Self::Env => "the container environment",
            Self::Auth => "TriggerAuthentication",
        })
    }
}

/// A trigger's metadata is wrong: what the user must fix.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{trigger}: {kind}")]
pub struct MetadataError {
    /// The trigger the parameter belongs to.
    pub trigger: TriggerId,
    /// What is wrong.
    pub kind: MetadataErrorKind,
}

/// What is wrong with a trigger's metadata.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum MetadataErrorKind {
    /// A required parameter is absent (or empty) in every place it may come from.
    #[error("missing required parameter \"{param}\"")]
    Missing {
        /// The parameter's primary name.
        param: String,
    },
    /// None of a set of alternatives is present.
    #[error("missing required parameter: one of {}", quoted(params))]
    MissingOneOf {
        /// The alternatives.
        params: Vec<String>,
    },
    /// A value does not parse as the parameter's type. `value` is `None` when the value may be
    /// secret (it came from the environment or a TriggerAuthentication, or the parameter is
    /// marked secret); the message then names the source instead.
    #[error("parameter \"{param}\": {}", shown(value, *origin, expected))]
    Invalid {
        /// The parameter's primary name.
        param: String,
        /// The offending value, when it may be shown.
        value: Option<String>,
        /// Where it came from.
        origin: Source,
        /// What was expected, e.g. `a valid integer`.
        expected: String,
    },
    /// Two or more parameters of a mutually exclusive set are present.
    #[error("parameters {} cannot be used together", quoted(params))]
    Exclusive {
        /// The parameters that are present.
        params: Vec<String>,
    },
    /// A deprecated (removed) parameter is present.
    #[error("parameter \"{param}\" is no longer supported: {hint}")]
    Deprecated {
        /// The parameter.
        param: String,
        /// What to use instead.
        hint: String,
    },
    /// A rule between parameters, checked by the scaler itself.
    #[error("{0}")]
    Rule(String),
}

fn quoted(params: &[String]) -> String {
    let quoted: Vec<String> = params.iter().map(|p| format!("\"{p}\"")).collect();
    match quoted.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

fn shown(value: &Option<String>, source: Source, expected: &str) -> String {
    match value {
        Some(v) => format!("\"{v}\" is not {expected}"),
        None => format!("the value from {source} is not {expected}"),
    }
}

/// Why a scaler could not be built or could not read its source.
#[derive(Debug, thiserror::Error)]
pub enum ScalerError {
    /// The trigger's metadata is invalid.
    #[error(transparent)]
    Metadata(#[from] MetadataError),

    /// No factory is registered for the trigger type.
    #[error("unknown trigger type \"{trigger_type}\"; known types: {}", known.join(", "))]
    UnknownType {
        /// The type asked for.
        trigger_type: String,
        /// The registered types, sorted.
        known: Vec<String>,
    },

    /// Connecting to the event source failed. `target` never contains credentials; the
    /// cause shows only the kind of failure, never what the source said
    /// ([`crate::remote`]).
    #[error("{trigger}: connecting to {target} failed: {source}")]
    Connect {
        /// The trigger.
        trigger: TriggerId,
        /// What we tried to reach, e.g. `redis at 10.0.0.1:6379`.
        target: String,
        /// The cause.
        #[source]
        source: Failure,
    },

    /// Reading the metric from the source failed.
    #[error("{trigger}: {operation} failed: {source}")]
    Query {
        /// The trigger.
        trigger: TriggerId,
        /// What we asked, e.g. `reading the length of list "jobs"`.
        operation: String,
        /// The cause: the kind of failure, never what the source said ([`crate::remote`]).
        #[source]
        source: Failure,
    },

    /// The source answered something the scaler cannot use (e.g. a key of an unsupported
    /// type). `message` is keda-rs' own text from the trigger's metadata and fixed words:
    /// never anything the answer contains (that goes to [`Failure::answer`], debug level).
    #[error("{trigger}: {message}")]
    Unexpected {
        /// The trigger.
        trigger: TriggerId,
        /// What was wrong.
        message: String,
    },

    /// `metrics_and_activity` was asked for a metric this scaler does not serve.
    #[error("{trigger}: no metric named \"{metric_name}\"")]
    UnknownMetric {
        /// The trigger.
        trigger: TriggerId,
        /// The name asked for.
        metric_name: String,
    },

    /// The scaler was used after `close`.
    #[error("{trigger}: the scaler is closed")]
    Closed {
        /// The trigger.
        trigger: TriggerId,
    },
}

impl ScalerError {
    /// The failure of a [`ScalerError::Connect`] or [`ScalerError::Query`].
    pub fn failure(&self) -> Option<&Failure> {
        match self {
            Self::Connect { source, .. } | Self::Query { source, .. } => Some(source),
            _ => None,
        }
    }

    /// Logs what the event source said (the raw text of [`ScalerError::failure`]) at debug
    /// level, for operators of keda-rs; the error's `Display` never contains it.
    pub fn log_raw(&self) {
        if let Some(failure) = self.failure() {
            failure.log_raw(self);
        }
    }
}

/// `error: cause: cause`: the message of `error` followed by those of its sources, skipping a
/// source whose message the text already contains (many errors repeat their cause). Scrub the
/// result of credentials before showing it.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trig() -> TriggerId {
        TriggerId {
            index: 0,
            trigger_type: "redis".into(),
        }
    }

    #[test]
    fn messages_name_trigger_and_parameter() {
        let cases = [
            (
                MetadataErrorKind::Missing {
                    param: "listName".into(),
                },
                r#"trigger 0 (redis): missing required parameter "listName""#,
            ),
            (
                MetadataErrorKind::Invalid {
                    param: "listLength".into(),
                    value: Some("abc".into()),
                    origin: Source::Metadata,
                    expected: "a valid integer".into(),
                },
                r#"trigger 0 (redis): parameter "listLength": "abc" is not a valid integer"#,
            ),
            (
                MetadataErrorKind::Invalid {
                    param: "password".into(),
                    value: None,
                    origin: Source::Auth,
                    expected: "a valid integer".into(),
                },
                r#"trigger 0 (redis): parameter "password": the value from TriggerAuthentication is not a valid integer"#,
            ),
            (
                MetadataErrorKind::Exclusive {
                    params: vec!["enableTLS".into(), "tls".into()],
                },
                r#"trigger 0 (redis): parameters "enableTLS" and "tls" cannot be used together"#,
            ),
            (
                MetadataErrorKind::MissingOneOf {
                    params: vec!["address".into(), "addresses".into(), "host".into()],
                },
                r#"trigger 0 (redis): missing required parameter: one of "address", "addresses" and "host""#,
            ),
        ];
        for (kind, expected) in cases {
            let err = MetadataError {
                trigger: trig(),
                kind,
            };
            assert_eq!(err.to_string(), expected);
        }
    }

    #[test]
    fn unknown_type_lists_the_known_ones() {
        let err = ScalerError::UnknownType {
            trigger_type: "foo".into(),
            known: vec!["cpu".into(), "cron".into()],
        };
        assert_eq!(
            err.to_string(),
            r#"unknown trigger type "foo"; known types: cpu, cron"#
        );
    }
}
