//! What keda-rs' binaries share at start-up: finding the cluster and building its client with
//! bounded retries ([`cluster`]), and answering
//! every start-up failure (no cluster, a bad flag, an unreadable file) in one line on standard
//! error that names what to fix, never a multi-line error chain.

pub mod cluster;
pub mod keda_flags;
pub mod logging;

use std::process::ExitCode;

pub use cluster::{
    ClusterError, Lookup, ProcessLookup, build_client, check_reachable, infer_client, infer_config,
    retrying_client_builder,
};

/// The error's text and its causes on one line: causes already in the text are not repeated,
/// and line breaks inside any of them become spaces.
pub fn one_line(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Prints `binary: <error on one line>` on standard error; exit code 1.
pub fn fail(binary: &str, error: &dyn std::error::Error) -> ExitCode {
    eprintln!("{binary}: {}", one_line(error));
    ExitCode::FAILURE
}

/// A command-line error of clap as one line naming the fix (`see <binary> --help`), or `None`
/// for `--help` and `--version`, which clap prints as they are.
pub fn flag_error_line(binary: &str, error: &clap::Error) -> Option<String> {
    use clap::error::ErrorKind;
    if matches!(
        error.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        return None;
    }
    let rendered = error.render().to_string();
    let mut lines = rendered.lines().map(str::trim).filter(|l| !l.is_empty());
    let mut text = lines
        .next()
        .map(|first| {
            first
                .strip_prefix("error:")
                .unwrap_or(first)
                .trim()
                .to_string()
        })
        .unwrap_or_else(|| "invalid command line".to_string());
    for tip in lines.filter_map(|l| l.strip_prefix("tip:")) {
        text.push_str(&format!(" ({})", tip.trim()));
    }
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    Some(format!("{binary}: {text}; see {binary} --help"))
}

/// Parses this process's arguments into `T`. `--help` and `--version` are printed and exit 0;
/// a bad flag is one line on standard error ([`flag_error_line`]) and exits 2, as clap does.
pub fn parse_flags<T: clap::Parser>(binary: &str) -> T {
    parse_flags_from(binary, std::env::args_os())
}

/// [`parse_flags`] from `args` (the program name first).
pub fn parse_flags_from<T, I, A>(binary: &str, args: I) -> T
where
    T: clap::Parser,
    I: IntoIterator<Item = A>,
    A: Into<std::ffi::OsString> + Clone,
{
    match T::try_parse_from(args) {
        Ok(flags) => flags,
        Err(error) => exit_on_flag_error(binary, &error),
    }
}

/// Prints `error` as [`flag_error_line`] says and exits (0 for `--help`/`--version`, else 2).
pub fn exit_on_flag_error(binary: &str, error: &clap::Error) -> ! {
    match flag_error_line(binary, error) {
        Some(line) => {
            eprintln!("{line}");
            std::process::exit(2)
        }
        None => error.exit(),
    }
}

/// Resolves on SIGTERM (how Kubernetes stops a pod) or Ctrl-C, whichever comes first; on
/// platforms without SIGTERM, or if its handler cannot be installed, on Ctrl-C alone.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    #[command(name = "tool")]
    struct Flags {
        /// A number.
        #[arg(long, default_value_t = 1)]
        count: u32,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("outer\nline")]
    struct Outer(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("inner cause")]
    struct Inner;

    #[test]
    fn an_error_chain_becomes_one_line() {
        assert_eq!(one_line(&Outer(Inner)), "outer line: inner cause");
    }

    #[test]
    fn an_unknown_flag_is_one_line_naming_help() {
        let error = Flags::try_parse_from(["tool", "--cuont", "2"]).expect_err("unknown");
        let line = flag_error_line("tool", &error).expect("an error, not help");
        assert!(!line.contains('\n'), "{line}");
        assert!(
            line.starts_with("tool: unexpected argument '--cuont' found"),
            "{line}"
        );
        assert!(
            line.contains("--count"),
            "the tip names the right flag: {line}"
        );
        assert!(line.ends_with("; see tool --help"), "{line}");
    }

    #[test]
    fn a_bad_value_names_the_flag() {
        let error = Flags::try_parse_from(["tool", "--count", "many"]).expect_err("bad value");
        let line = flag_error_line("tool", &error).expect("an error");
        assert!(
            line.starts_with("tool: invalid value 'many' for '--count <COUNT>'"),
            "{line}"
        );
        assert!(!line.contains('\n'), "{line}");
    }

    #[test]
    fn help_and_version_are_not_errors() {
        let error = Flags::try_parse_from(["tool", "--help"]).expect_err("help");
        assert_eq!(flag_error_line("tool", &error), None);
    }
}
