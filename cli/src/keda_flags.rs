//! KEDA's command-line arguments, accepted by keda-rs' binaries so that KEDA's install (its
//! manifests, its Helm chart, the flags of its `cmd/*/main.go`) starts them unchanged.
//!
//! Each binary keeps one table of [`KedaFlag`]s: every flag KEDA's matching process defines
//! (its own, controller-runtime's `--zap-*` and `--kubeconfig`, klog's, and for the
//! metrics-apiserver those of custom-metrics-apiserver's `AdapterBase`). [`translate`] rewrites
//! the command line before clap sees it: a flag with a meaning here becomes our flag, a flag
//! without one is dropped and gives one warning line saying why (unless its value is the one
//! that matches keda-rs' behaviour anyway). Flags not in the table reach clap unchanged, so a
//! typo is still refused.
//!
//! Forms accepted, as Go's `flag` and `pflag` packages accept them: `--name=value`,
//! `--name value`, `-name=value`, `-name value`, and for booleans `--name` (true) and
//! `--name=false` (a boolean never takes the next argument as its value).

use std::ffi::OsString;

/// Whether a flag takes a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Takes {
    /// A Go `bool`: `--name`, `--name=true|false` (also `1`, `t`, `T`, `TRUE`, `True`, `0`,
    /// `f`, `F`, `FALSE`, `False`, as `strconv.ParseBool`).
    Bool,
    /// Any other type: `--name=value` or `--name value`.
    Value,
}

/// What a value of a KEDA flag turns into: `Ok(Some(value))` for our flag, `Ok(None)` to drop
/// it quietly (the value changes nothing), or a message saying why the value is refused.
pub type MapValue = fn(&str) -> Result<Option<String>, String>;

/// What a KEDA flag does in keda-rs.
#[derive(Clone, Copy, Debug)]
pub enum Meaning {
    /// Passed on as our flag `--<to>`, with the value mapped by `map` (unchanged without one).
    /// With `overrides`, it is placed after every other argument, so it wins whatever the
    /// order (KEDA's adapter applies `--v` after the `--zap-*` options).
    Ours {
        to: &'static str,
        map: Option<MapValue>,
        overrides: bool,
    },
    /// Accepted; nothing changes here. Given with a value other than those in `quiet`, one
    /// warning line says so and why.
    NoEffect {
        why: &'static str,
        quiet: &'static [&'static str],
    },
}

/// One flag of KEDA's process.
#[derive(Clone, Copy, Debug)]
pub struct KedaFlag {
    /// The name without dashes, as KEDA spells it (klog's use underscores).
    pub name: &'static str,
    pub takes: Takes,
    pub meaning: Meaning,
}

impl KedaFlag {
    /// A flag keda-rs has under the same name: listed so the single-dash form works too.
    pub const fn same(name: &'static str, takes: Takes) -> Self {
        Self::ours(name, takes, name)
    }

    /// A flag passed on as ours under another name.
    pub const fn ours(name: &'static str, takes: Takes, to: &'static str) -> Self {
        Self {
            name,
            takes,
            meaning: Meaning::Ours {
                to,
                map: None,
                overrides: false,
            },
        }
    }

    /// A flag passed on as ours with its value mapped.
    pub const fn mapped(name: &'static str, takes: Takes, to: &'static str, map: MapValue) -> Self {
        Self {
            name,
            takes,
            meaning: Meaning::Ours {
                to,
                map: Some(map),
                overrides: false,
            },
        }
    }

    /// A flag accepted without effect; `quiet` values need no warning.
    pub const fn no_effect(
        name: &'static str,
        takes: Takes,
        why: &'static str,
        quiet: &'static [&'static str],
    ) -> Self {
        Self {
            name,
            takes,
            meaning: Meaning::NoEffect { why, quiet },
        }
    }
}

/// The command line for clap, and the warnings to log once logging is set up.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Translated {
    pub args: Vec<OsString>,
    pub warnings: Vec<String>,
}

/// Rewrites `args` (the program name first) by `table`.
///
/// # Errors
/// A table flag without its value, a boolean that is not a boolean, or a value its map
/// refuses: one line naming the flag.
pub fn translate<I, A>(args: I, table: &[KedaFlag]) -> Result<Translated, String>
where
    I: IntoIterator<Item = A>,
    A: Into<OsString>,
{
    let mut args = args.into_iter().map(Into::into);
    let mut out = Translated::default();
    let mut last = Vec::new();
    if let Some(program) = args.next() {
        out.args.push(program);
    }
    while let Some(arg) = args.next() {
        let Some(text) = arg.to_str() else {
            out.args.push(arg);
            continue;
        };
        if text == "--" {
            out.args.push(arg);
            out.args.extend(args.by_ref());
            break;
        }
        let Some(body) = text
            .strip_prefix("--")
            .or_else(|| text.strip_prefix('-'))
            .filter(|b| !b.is_empty() && !b.starts_with('-'))
        else {
            out.args.push(arg);
            continue;
        };
        let (name, inline) = match body.split_once('=') {
            Some((name, value)) => (name, Some(value.to_string())),
            None => (body, None),
        };
        let Some(flag) = table.iter().find(|f| f.name == name) else {
            out.args.push(arg);
            continue;
        };
        let value = match (flag.takes, inline) {
            (Takes::Bool, None) => "true".to_string(),
            (Takes::Bool, Some(value)) => go_bool(&value)
                .ok_or_else(|| {
                    format!(
                        "invalid argument {value:?} for --{name}: not a boolean (true or false)"
                    )
                })?
                .to_string(),
            (Takes::Value, Some(value)) => value,
            (Takes::Value, None) => args
                .next()
                .and_then(|v| v.into_string().ok())
                .ok_or_else(|| format!("flag needs an argument: --{name}"))?,
        };
        match flag.meaning {
            Meaning::Ours { to, map, overrides } => {
                let mapped = match map {
                    Some(map) => map(&value).map_err(|why| format!("--{name}={value:?}: {why}"))?,
                    None => Some(value),
                };
                if let Some(mapped) = mapped {
                    let target = if overrides { &mut last } else { &mut out.args };
                    target.push(OsString::from(format!("--{to}={mapped}")));
                }
            }
            Meaning::NoEffect { why, quiet } => {
                if !quiet.contains(&value.as_str()) {
                    out.warnings
                        .push(format!("--{name}={value} has no effect in keda-rs: {why}"));
                }
            }
        }
    }
    out.args.extend(last);
    Ok(out)
}

/// Go's `strconv.ParseBool`, answered as `true` or `false`.
pub fn go_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// `--zap-log-level` onto a `tracing` level: `debug`, `info`, `warn`, `error` as they are;
/// zap's `dpanic`, `panic`, `fatal` as `error` (nothing is logged above it here); an integer
/// above 0 (a logr verbosity) as `debug` (1) or `trace` (2 and more); zap's negative levels
/// (`-1` debug, `-2` and below more verbose) likewise.
///
/// # Errors
/// Any other value.
pub fn zap_level(value: &str) -> Result<Option<String>, String> {
    let level = match value.trim().to_ascii_lowercase().as_str() {
        "debug" => "debug",
        "info" => "info",
        "warn" | "warning" => "warn",
        "error" | "dpanic" | "panic" | "fatal" => "error",
        other => match other.parse::<i64>() {
            Ok(0) => "info",
            Ok(1 | -1) => "debug",
            Ok(_) => "trace",
            Err(_) => {
                return Err(
                    "not a log level: use debug, info, warn, error, panic or a verbosity number"
                        .to_string(),
                );
            }
        },
    };
    Ok(Some(level.to_string()))
}

/// `--zap-encoder`: `console` is our `text`, `json` is `json`.
///
/// # Errors
/// Any other value.
pub fn zap_encoder(value: &str) -> Result<Option<String>, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "console" | "text" => Ok(Some("text".to_string())),
        "json" => Ok(Some("json".to_string())),
        _ => Err("not a log encoder: use console or json".to_string()),
    }
}

/// klog's `--v` as KEDA's adapter applies it: above 0 it sets the level (1 `debug`, 2 and more
/// `trace`), overriding `--zap-log-level`; 0 and below change nothing.
///
/// # Errors
/// Not an integer.
pub fn klog_verbosity(value: &str) -> Result<Option<String>, String> {
    match value.trim().parse::<i64>() {
        Ok(v) if v <= 0 => Ok(None),
        Ok(1) => Ok(Some("debug".to_string())),
        Ok(_) => Ok(Some("trace".to_string())),
        Err(_) => Err("not an integer".to_string()),
    }
}

/// klog's `--logtostderr` as KEDA's adapter applies it: `true` selects the console encoder
/// (our `text`), overriding `--zap-encoder`; `false` changes nothing. keda-rs always logs to
/// one standard stream, never to files.
///
/// # Errors
/// Never: the value is a boolean already.
pub fn logtostderr(value: &str) -> Result<Option<String>, String> {
    Ok((value == "true").then(|| "text".to_string()))
}

/// A Go listen address flag that KEDA turns off with an empty value (`--profiling-bind-address`)
/// or `0`.
pub const OFF_ADDRESS: &[&str] = &["", "0"];

const KLOG: &str = "keda-rs logs through tracing to standard output (format --zap-encoder, \
                    level --zap-log-level or RUST_LOG); klog's files, headers and thresholds do not exist here";

/// klog's flags (`klog.InitFlags`), which every KEDA process registers; without effect here
/// except where a binary's table says otherwise (the adapter's `--v`, `--logtostderr`).
pub const KLOG_FLAGS: &[KedaFlag] = &[
    KedaFlag::no_effect("v", Takes::Value, KLOG, &["0", "-1"]),
    KedaFlag::no_effect("vmodule", Takes::Value, KLOG, &[""]),
    KedaFlag::no_effect("logtostderr", Takes::Bool, KLOG, &["true"]),
    KedaFlag::no_effect("alsologtostderr", Takes::Bool, KLOG, &["false"]),
    KedaFlag::no_effect("log_dir", Takes::Value, KLOG, &[""]),
    KedaFlag::no_effect("log_file", Takes::Value, KLOG, &[""]),
    KedaFlag::no_effect("log_file_max_size", Takes::Value, KLOG, &[]),
    KedaFlag::no_effect("skip_headers", Takes::Bool, KLOG, &["false"]),
    KedaFlag::no_effect("skip_log_headers", Takes::Bool, KLOG, &["false"]),
    KedaFlag::no_effect("add_dir_header", Takes::Bool, KLOG, &["false"]),
    KedaFlag::no_effect("stderrthreshold", Takes::Value, KLOG, &[]),
    KedaFlag::no_effect("one_output", Takes::Bool, KLOG, &["false"]),
    KedaFlag::no_effect("log_backtrace_at", Takes::Value, KLOG, &[""]),
    KedaFlag::no_effect("legacy_stderr_threshold_behavior", Takes::Bool, KLOG, &[]),
];

/// controller-runtime's zap options (`zap.Options.BindFlags`), with their meaning here.
pub const ZAP_FLAGS: &[KedaFlag] = &[
    KedaFlag::mapped("zap-log-level", Takes::Value, "log-level", zap_level),
    KedaFlag::mapped("zap-encoder", Takes::Value, "log-format", zap_encoder),
    KedaFlag::ours("zap-time-encoding", Takes::Value, "log-time-encoding"),
    KedaFlag::no_effect(
        "zap-devel",
        Takes::Bool,
        "zap's development mode (debug level, console output, stack traces on warnings) \
         does not exist here: use --zap-log-level=debug and --zap-encoder=console",
        &["false"],
    ),
    KedaFlag::no_effect(
        "zap-stacktrace-level",
        Takes::Value,
        "keda-rs log lines carry no stack traces; an error's line names its causes",
        &[],
    ),
];

/// The flags every KEDA process has: klog's and controller-runtime's zap options.
pub fn common_flags() -> impl Iterator<Item = KedaFlag> {
    KLOG_FLAGS.iter().chain(ZAP_FLAGS).copied()
}

/// Parses this process's arguments as KEDA's process would take them: [`translate`] by
/// `table`, then clap. A bad KEDA flag is one line on standard error and exit code 2, as clap's
/// own errors ([`crate::exit_on_flag_error`]).
pub fn parse_keda_flags<T: clap::Parser>(binary: &str, table: &[KedaFlag]) -> (T, Vec<String>) {
    parse_keda_flags_from(binary, table, std::env::args_os())
}

/// [`parse_keda_flags`] from `args` (the program name first).
pub fn parse_keda_flags_from<T, I, A>(binary: &str, table: &[KedaFlag], args: I) -> (T, Vec<String>)
where
    T: clap::Parser,
    I: IntoIterator<Item = A>,
    A: Into<OsString>,
{
    match translate(args, table) {
        Ok(translated) => (
            crate::parse_flags_from(binary, translated.args),
            translated.warnings,
        ),
        Err(line) => {
            eprintln!("{binary}: {line}; see {binary} --help");
            std::process::exit(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &[KedaFlag] = &[
        KedaFlag::mapped("zap-log-level", Takes::Value, "log-level", zap_level),
        KedaFlag::same("leader-elect", Takes::Bool),
        KedaFlag::ours("port", Takes::Value, "metrics-port"),
        KedaFlag::no_effect(
            "profiling-bind-address",
            Takes::Value,
            "no pprof",
            OFF_ADDRESS,
        ),
        KedaFlag::no_effect("zap-devel", Takes::Bool, "no devel", &["false"]),
        KedaFlag {
            name: "v",
            takes: Takes::Value,
            meaning: Meaning::Ours {
                to: "log-level",
                map: Some(klog_verbosity),
                overrides: true,
            },
        },
    ];

    fn run(args: &[&str]) -> Result<(Vec<String>, Vec<String>), String> {
        let t = translate(std::iter::once("bin").chain(args.iter().copied()), TABLE)?;
        let args = t
            .args
            .into_iter()
            .skip(1)
            .map(|a| a.into_string().unwrap_or_default())
            .collect();
        Ok((args, t.warnings))
    }

    #[test]
    fn every_go_form_of_a_flag_becomes_our_flag() {
        for form in [
            &["--zap-log-level=error"][..],
            &["--zap-log-level", "error"],
            &["-zap-log-level=error"],
            &["-zap-log-level", "error"],
        ] {
            assert_eq!(
                run(form),
                Ok((vec!["--log-level=error".to_string()], vec![])),
                "{form:?}"
            );
        }
        assert_eq!(
            run(&["--port", "9022"]),
            Ok((vec!["--metrics-port=9022".to_string()], vec![]))
        );
    }

    #[test]
    fn booleans_never_take_the_next_argument() {
        assert_eq!(
            run(&["--leader-elect", "--port=1"]),
            Ok((
                vec![
                    "--leader-elect=true".to_string(),
                    "--metrics-port=1".to_string()
                ],
                vec![]
            ))
        );
        assert_eq!(
            run(&["-leader-elect=F"]),
            Ok((vec!["--leader-elect=false".to_string()], vec![]))
        );
        assert!(
            run(&["--leader-elect=yes"])
                .unwrap_err()
                .contains("--leader-elect")
        );
    }

    #[test]
    fn flags_without_effect_warn_once_unless_their_value_is_ours() {
        assert_eq!(
            run(&["--profiling-bind-address=:8082", "--zap-devel=false"]),
            Ok((
                vec![],
                vec![
                    "--profiling-bind-address=:8082 has no effect in keda-rs: no pprof".to_string()
                ]
            ))
        );
        assert_eq!(run(&["--profiling-bind-address="]), Ok((vec![], vec![])));
    }

    #[test]
    fn unknown_flags_and_values_reach_clap_unchanged() {
        assert_eq!(
            run(&["--nonsense=1", "-h", "x", "--", "--port=1"]),
            Ok((
                ["--nonsense=1", "-h", "x", "--", "--port=1"]
                    .map(String::from)
                    .to_vec(),
                vec![]
            ))
        );
    }

    #[test]
    fn a_missing_or_refused_value_names_the_flag() {
        assert_eq!(
            run(&["--port"]),
            Err("flag needs an argument: --port".to_string())
        );
        assert!(
            run(&["--zap-log-level=loud"])
                .unwrap_err()
                .starts_with("--zap-log-level=\"loud\"")
        );
    }

    #[test]
    fn verbosity_overrides_the_zap_level_whatever_the_order() {
        assert_eq!(
            run(&["--v=2", "--zap-log-level=info"]),
            Ok((
                vec![
                    "--log-level=info".to_string(),
                    "--log-level=trace".to_string()
                ],
                vec![]
            ))
        );
        assert_eq!(
            run(&["--v=0", "--zap-log-level=error"]),
            Ok((vec!["--log-level=error".to_string()], vec![]))
        );
    }

    #[test]
    fn zap_levels_map_onto_tracing_levels() {
        for (zap, ours) in [
            ("debug", "debug"),
            ("info", "info"),
            ("error", "error"),
            ("panic", "error"),
            ("1", "debug"),
            ("-1", "debug"),
            ("3", "trace"),
            ("0", "info"),
        ] {
            assert_eq!(zap_level(zap), Ok(Some(ours.to_string())), "{zap}");
        }
    }
}
