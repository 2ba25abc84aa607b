//! Structured logs through `tracing`, the same for every keda-rs binary: human-readable text or
//! one JSON object per line, on standard output, with the timestamp encodings of KEDA's
//! `--zap-time-encoding`.

use std::fmt::Write as _;
use std::str::FromStr;
use std::time::{SystemTime, UNIX_EPOCH};

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// `2026-08-01T10:00:00Z  INFO keda_operator::process::leader: lease acquired lease=keda/operator.keda.sh`
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

/// How a log line's timestamp is written: KEDA's `--zap-time-encoding` values, all in UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimeEncoding {
    /// keda-rs' default: RFC 3339 with microseconds (`2026-08-01T10:00:00.123456Z`).
    #[default]
    Default,
    /// `rfc3339`: `2026-08-01T10:00:00Z`.
    Rfc3339,
    /// `rfc3339nano`: `2026-08-01T10:00:00.123456789Z` (trailing zeros dropped, as Go does).
    Rfc3339Nano,
    /// `iso8601`: `2026-08-01T10:00:00.123Z`.
    Iso8601,
    /// `epoch`: seconds since 1970 as a decimal (`1785578400.123456`).
    Epoch,
    /// `millis`: milliseconds since 1970 as a decimal (`1785578400123.456`).
    Millis,
    /// `nano`: nanoseconds since 1970, a whole number.
    Nano,
}

impl FromStr for TimeEncoding {
    type Err = LoggingError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "" | "default" => Ok(Self::Default),
            "rfc3339" => Ok(Self::Rfc3339),
            "rfc3339nano" => Ok(Self::Rfc3339Nano),
            "iso8601" => Ok(Self::Iso8601),
            "epoch" => Ok(Self::Epoch),
            "millis" => Ok(Self::Millis),
            "nano" | "nanos" => Ok(Self::Nano),
            other => Err(LoggingError::TimeEncoding(other.to_string())),
        }
    }
}

impl TimeEncoding {
    /// `since_epoch` written in this encoding.
    pub fn format(self, since_epoch: std::time::Duration) -> String {
        let secs = since_epoch.as_secs();
        let nanos = since_epoch.subsec_nanos();
        // The date and time of day in UTC; jiff's range (year 9999) is far past any clock.
        let civil = || {
            i64::try_from(secs)
                .ok()
                .and_then(|s| jiff::Timestamp::from_second(s).ok())
                .unwrap_or(jiff::Timestamp::MAX)
                .strftime("%Y-%m-%dT%H:%M:%S")
                .to_string()
        };
        match self {
            Self::Default => format!("{}.{:06}Z", civil(), nanos / 1000),
            Self::Rfc3339 => format!("{}Z", civil()),
            Self::Rfc3339Nano => {
                let mut text = civil();
                if nanos > 0 {
                    let fraction = format!("{nanos:09}");
                    let _ = write!(text, ".{}", fraction.trim_end_matches('0'));
                }
                text.push('Z');
                text
            }
            Self::Iso8601 => format!("{}.{:03}Z", civil(), nanos / 1_000_000),
            Self::Epoch => format!("{secs}.{:06}", nanos / 1000),
            Self::Millis => format!(
                "{}.{:06}",
                since_epoch.as_millis(),
                since_epoch.as_nanos() % 1_000_000
            ),
            Self::Nano => since_epoch.as_nanos().to_string(),
        }
    }
}

impl FormatTime for TimeEncoding {
    fn format_time(&self, w: &mut Writer<'_>) -> std::fmt::Result {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        w.write_str(&self.format(now))
    }
}

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    #[error("log format {0:?} is not known: use `text` or `json`")]
    Format(String),
    #[error(
        "log time encoding {0:?} is not known: use rfc3339, rfc3339nano, iso8601, epoch, millis or nano"
    )]
    TimeEncoding(String),
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
pub fn init_logging(
    format: LogFormat,
    time: TimeEncoding,
    directive: &str,
) -> Result<(), LoggingError> {
    let filter = EnvFilter::builder()
        .parse(directive)
        .map_err(|source| LoggingError::Level {
            directive: directive.to_string(),
            source,
        })?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stdout)
        // Colours only for a person at a terminal: a pod's log collector gets plain lines.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .with_timer(time);
    let installed = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    installed.map_err(|_| LoggingError::AlreadyInstalled)
}

/// The filter a binary logs with: `RUST_LOG` when set and not empty, else `level`.
pub fn effective_filter(rust_log: Option<String>, level: &str) -> String {
    rust_log
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| level.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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

    #[test]
    fn every_zap_time_encoding_writes_as_zap_does() {
        // 2026-08-01T10:00:00.120000500Z
        let t = Duration::new(1_785_578_400, 120_000_500);
        for (name, expected) in [
            ("rfc3339", "2026-08-01T10:00:00Z"),
            ("rfc3339nano", "2026-08-01T10:00:00.1200005Z"),
            ("iso8601", "2026-08-01T10:00:00.120Z"),
            ("epoch", "1785578400.120000"),
            ("millis", "1785578400120.000500"),
            ("nano", "1785578400120000500"),
        ] {
            let encoding: TimeEncoding = name.parse().unwrap_or_default();
            assert_eq!(encoding.format(t), expected, "{name}");
        }
        assert_eq!(
            TimeEncoding::Rfc3339.format(Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00Z"
        );
        assert!("unix".parse::<TimeEncoding>().is_err());
    }
}
