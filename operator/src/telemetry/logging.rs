//! Structured logs through `tracing`: human-readable text or one JSON object per line.

use std::str::FromStr;

use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// `2026-08-01T10:00:00Z  INFO keda_operator::leader: lease acquired lease=keda/operator.keda.sh`
    #[default]
    Text,
    /// One JSON object per line with `timestamp`, `level`, `target`, `fields`.
    Json,
}

impl FromStr for LogFormat {
    type Err = LoggingError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "text" | "console" => Ok(Self::Text),
            "json" => Ok(Self::Json),
            other => Err(LoggingError::Format(other.to_string())),
        }
    }
}

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    #[error("log format {0:?} is not known: use `text` or `json`")]
    Format(String),
    #[error(
        "log level {directive:?} is not a valid filter (examples: `info`, `keda_operator=debug,kube=warn`): {source}"
    )]
    Level {
        directive: String,
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },
    #[error("a global logger is already installed")]
    AlreadyInstalled,
}

/// Installs the global `tracing` subscriber writing to standard output.
///
/// `directive` is a `tracing` filter (`info`, `keda_operator=debug,kube=warn`).
///
/// # Errors
/// An invalid directive, or a subscriber installed already.
pub fn init_logging(format: LogFormat, directive: &str) -> Result<(), LoggingError> {
    let filter = EnvFilter::builder()
        .parse(directive)
        .map_err(|source| LoggingError::Level {
            directive: directive.to_string(),
            source,
        })?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stdout);
    let installed = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    installed.map_err(|_| LoggingError::AlreadyInstalled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_parse_case_insensitively_and_zap_s_console_means_text() {
        assert_eq!("JSON".parse::<LogFormat>().ok(), Some(LogFormat::Json));
        assert_eq!("text".parse::<LogFormat>().ok(), Some(LogFormat::Text));
        assert_eq!("console".parse::<LogFormat>().ok(), Some(LogFormat::Text));
        let error = "yaml".parse::<LogFormat>().err().map(|e| e.to_string());
        assert_eq!(
            error.as_deref(),
            Some(r#"log format "yaml" is not known: use `text` or `json`"#)
        );
    }
}
