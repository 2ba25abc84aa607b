#!/usr/bin/env bash
# The keda-rs test command (README, .ci/run): brings up the local services the tests talk to
# (scripts/services.sh), then checks formatting and lints and runs every test in the workspace.
# End-to-end tests against a real cluster are #[ignore]d here; see docs/testing.md.
set -euo pipefail
cd "$(dirname "$0")/.."

# Build dependencies of the C parts (librdkafka with TLS/SCRAM links OpenSSL). Present on the
# machines we develop on; installed when missing.
if ! dpkg -s libssl-dev pkg-config >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libssl-dev pkg-config make g++
fi

# One build from scratch: incremental state would only take disk space.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

bash scripts/services.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked

# The README's `keda-rs dev` walkthrough, run as written (about a minute; docs/dev.md).
bash scripts/readme-walkthrough.sh

# Every fuzz target (fuzz/) for a short fixed number of inputs from its seeds, so the harness
# cannot rot; a crash fails the run (docs/reliability.md, "Fuzzing").
bash scripts/fuzz.sh ci
