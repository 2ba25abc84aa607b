#!/usr/bin/env bash
# The fuzz targets of fuzz/ (docs/reliability.md, "Fuzzing").
#
#   scripts/fuzz.sh ci                 build every target (unoptimized, the quicker build), run
#                                      each for $FUZZ_CI_RUNS inputs (default 10000) from its
#                                      seeds; a crash fails (exit != 0). scripts/test.sh runs it.
#   scripts/fuzz.sh run <target> [N]   fuzz <target> for N inputs (default 10,000,000), built
#                                      optimized, at the lowest CPU priority ($FUZZ_NICE,
#                                      default 19), keeping what it finds in fuzz/corpus/<target>;
#                                      prints libFuzzer's figures
#
# Installs what is missing: the nightly toolchain (cargo-fuzz builds with it) and cargo-fuzz
# from crates.io. Targets are built without a sanitizer (the project forbids unsafe code; the
# checks are panics, the targets' assertions, overflow checks and debug assertions, all on).
# A crash leaves its input in fuzz/artifacts/<target>/; replay it with
# `cargo +nightly fuzz run --fuzz-dir fuzz -s none <target> <file>`.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGETS=(scaler_metadata validation formula cron request_head front scaler_connect
  response_parsers metrics_selector metrics_auth admission_review)
# Inputs per target in `ci` where the default ($FUZZ_CI_RUNS, 10000) would take long: each
# scaler_connect input builds a scaler against the fake network (a millisecond to seconds);
# admission_review and metrics_auth take 2-3 ms an input unoptimized.
declare -A CI_RUNS=([scaler_connect]=300 [admission_review]=5000 [metrics_auth]=5000)
# One input may take this long (seconds) before it counts as a hang. The targets' own waits are
# at most 2 s each (front's timeouts), so 10 s is ample on a machine to itself; a long `run` at
# the lowest priority on a machine busy with builds can starve a healthy input for longer (a
# front input that replays in 1 ms was once stopped at 10 s), so `run` allows 30 s by default.
TIMEOUT=${FUZZ_TIMEOUT:-10}
RUN_TIMEOUT=${FUZZ_TIMEOUT:-30}

setup() {
  if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal
  fi
  if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
  fi
}

# Seeds stay as committed; what libFuzzer finds goes to fuzz/corpus/<target>.
corpus() {
  mkdir -p "fuzz/corpus/$1"
  echo "fuzz/corpus/$1 fuzz/seeds/$1"
}

# $PROFILE: empty (optimized, with debug assertions and overflow checks) or --dev.
build() {
  cargo +nightly fuzz build --fuzz-dir fuzz --sanitizer none $PROFILE "$@"
}

run() {
  local target=$1 runs=$2
  shift 2
  # shellcheck disable=SC2046
  cargo +nightly fuzz run --fuzz-dir fuzz --sanitizer none $PROFILE "$target" $(corpus "$target") -- \
    -runs="$runs" -timeout="$TIMEOUT" -max_len=8192 -print_final_stats=1 "$@"
}

case "${1:-}" in
  ci)
    setup
    PROFILE=--dev
    build
    for target in "${TARGETS[@]}"; do
      runs=${FUZZ_CI_RUNS:-${CI_RUNS[$target]:-10000}}
      echo "fuzz: $target, $runs inputs"
      run "$target" "$runs" -seed=1
    done
    ;;
  run)
    target=${2:?usage: scripts/fuzz.sh run <target> [inputs]}
    setup
    nice -n "${FUZZ_NICE:-19}" bash -c "$(declare -f corpus build run); TIMEOUT=$RUN_TIMEOUT; PROFILE=; build '$target' && run '$target' '${3:-10000000}'"
    ;;
  *)
    sed -n '2,18p' "$0"
    exit 2
    ;;
esac
