//! `keda-rs`: the keda-rs command line. It only wires the library together (`src/cli.rs`).

use std::process::ExitCode;

fn main() -> ExitCode {
    let flags: keda_rs::cli::Cli = keda_cli::parse_flags(keda_rs::cli::BINARY);
    keda_rs::cli::run(flags)
}
