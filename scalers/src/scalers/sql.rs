//! What the SQL scalers (`postgresql`, `mysql`) share: their timeouts, the rule for what a
//! query must return, and how errors are worded and scrubbed of credentials.

use std::time::Duration;

use crate::error::{MetadataError, MetadataErrorKind, ScalerError, TriggerId, error_chain};
use crate::metadata::{MetadataParser, Param};
use crate::scalers::rabbitmq::url::anonymize;

/// Bound of opening a connection (and of waiting for a free pooled one).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Bound of one query. On expiry the server is asked to cancel the statement. Below the
/// operator's 30 s bound of a scaler read, so this error, which names the query, is the one
/// reported.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(20);

/// How many connections a pool opens at most per connection string (pgxpool's default is
/// `max(4, CPUs)`); PostgreSQL's `pool_max_conns` changes it.
pub const DEFAULT_POOL_SIZE: usize = 4;

/// The first row's single column, as the query answered it.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// No row at all.
    NoRow,
    /// The first row has this many columns (not 1).
    Columns(usize),
    /// The value is SQL NULL.
    Null,
    /// The value is of a type that is not a number, or text that is not one.
    NotANumber {
        /// The column's name.
        column: String,
        /// What it is instead, e.g. `of type text` or `"abc"`.
        what: String,
    },
    /// A number.
    Number(f64),
}

impl Answer {
    /// The number, or what the user must change in `query`.
    ///
    /// # Errors
    /// Anything but [`Answer::Number`], worded for the user.
    pub fn number(self) -> Result<f64, String> {
        match self {
            Self::Number(n) => Ok(n),
            Self::NoRow => Err("the query (parameter \"query\") returned no row; it must return one row with one number".to_string()),
            Self::Columns(n) => Err(format!(
                "the query (parameter \"query\") returned {n} columns; it must return exactly one, a number"
            )),
            Self::Null => Err("the query (parameter \"query\") returned NULL; wrap the expression in COALESCE(..., 0)".to_string()),
            Self::NotANumber { column, what } => Err(format!(
                "the query (parameter \"query\") returned column \"{column}\" {what}, not a number; cast it to a numeric type"
            )),
        }
    }
}

/// A failed query of `trigger` against `server`, its cause scrubbed of credentials (URL user
/// info and every one of `secrets`).
pub fn query_error(
    trigger: &TriggerId,
    server: &str,
    error: &dyn std::error::Error,
    secrets: &[&str],
) -> ScalerError {
    ScalerError::Query {
        trigger: trigger.clone(),
        operation: format!("running the query (parameter \"query\") on {server}"),
        source: anonymize(&error_chain(error), secrets).into(),
    }
}

/// A query that ran out of `time`.
pub fn timeout_error(trigger: &TriggerId, server: &str, time: Duration) -> ScalerError {
    ScalerError::Query {
        trigger: trigger.clone(),
        operation: format!("running the query (parameter \"query\") on {server}"),
        source: format!("it did not finish within {time:?} and was cancelled").into(),
    }
}

/// An answer that is not one number.
pub fn answer_error(trigger: &TriggerId, server: &str, message: String) -> ScalerError {
    ScalerError::Unexpected {
        trigger: trigger.clone(),
        message: format!("{message} (on {server})"),
    }
}

/// KEDA's rule for `targetQueryValue` (and MySQL's `queryValue`): required and not 0, unless
/// the trigger only feeds `scalingModifiers`; also more than 0 here, since the HPA rejects
/// other targets.
pub fn target_value(
    p: &MetadataParser<'_>,
    param: &Param,
    as_metric_source: bool,
) -> Result<f64, MetadataError> {
    let Some(found) = p.find(param)? else {
        if as_metric_source {
            return Ok(0.0);
        }
        return Err(p.error(MetadataErrorKind::Missing {
            param: param.name.to_string(),
        }));
    };
    let value: f64 = p.parse(param, found)?;
    if value <= 0.0 && !(as_metric_source && value == 0.0) {
        return Err(p.invalid(param, found, "greater than 0"));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_that_are_not_one_number_say_what_to_change() {
        let rows = [
            (Answer::Number(2.5), Ok(2.5)),
            (
                Answer::NoRow,
                Err(
                    "the query (parameter \"query\") returned no row; it must return one row with one number",
                ),
            ),
            (
                Answer::Columns(2),
                Err(
                    "the query (parameter \"query\") returned 2 columns; it must return exactly one, a number",
                ),
            ),
            (
                Answer::Null,
                Err(
                    "the query (parameter \"query\") returned NULL; wrap the expression in COALESCE(..., 0)",
                ),
            ),
            (
                Answer::NotANumber {
                    column: "state".into(),
                    what: "of type text".into(),
                },
                Err(
                    "the query (parameter \"query\") returned column \"state\" of type text, not a number; cast it to a numeric type",
                ),
            ),
        ];
        for (answer, expected) in rows {
            assert_eq!(
                answer.clone().number(),
                expected.map_err(str::to_string),
                "{answer:?}"
            );
        }
    }

    #[test]
    fn causes_are_scrubbed_of_secrets() {
        let err = std::io::Error::other("connect postgres://app:hunter22@db failed; hunter22");
        let trigger = TriggerId {
            index: 1,
            trigger_type: "postgresql".into(),
        };
        let message =
            query_error(&trigger, "PostgreSQL at db:5432", &err, &["hunter22"]).to_string();
        assert!(!message.contains("hunter22"), "{message}");
        assert!(message.starts_with(
            "trigger 1 (postgresql): running the query (parameter \"query\") on PostgreSQL at db:5432 failed:"
        ));
    }
}
