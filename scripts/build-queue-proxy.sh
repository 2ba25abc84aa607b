#!/usr/bin/env bash
# Builds Knative Serving's queue-proxy (cmd/queue) from its source, with the modules vendored in
# that source (no module download), for the activator bench's `queue-proxy` target
# (activator/benches/proxy, docs/benchmarks.md). Idempotent: a binary already built from the same
# commit is kept.
#
#   scripts/build-queue-proxy.sh            # -> ${CARGO_TARGET_DIR:-target}/queue-proxy/queue
#
# Environment:
#   KNATIVE_SERVING_GIT   a git repository (bare or not) holding Knative Serving's tags;
#                         default /work/.mirror/knative+serving/repo
#   KNATIVE_TAG           default knative-v1.17.2: the last release whose go.mod asks for Go 1.23
#                         (later ones need Go 1.24+, which Debian 12 does not package); its
#                         vendor/ directory is committed
#   QUEUE_PROXY_DIR       output directory; default ${CARGO_TARGET_DIR:-<repo>/target}/queue-proxy
#
# Go: /usr/lib/go-1.23/bin/go from Debian's bookworm-backports (package golang-1.23-go); the
# script adds that suite to apt's sources when it is missing and installs the package. The build
# runs with GOTOOLCHAIN=local (never downloads a toolchain), GOFLAGS=-mod=vendor, GOPROXY=off and
# CGO_ENABLED=0, as Knative's own images are built (static binary).
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "$0")" && pwd)
REPO_DIR=$(cd "$SCRIPT_DIR/.." && pwd)
KNATIVE_SERVING_GIT=${KNATIVE_SERVING_GIT:-/work/.mirror/knative+serving/repo}
KNATIVE_TAG=${KNATIVE_TAG:-knative-v1.17.2}
QUEUE_PROXY_DIR=${QUEUE_PROXY_DIR:-${CARGO_TARGET_DIR:-$REPO_DIR/target}/queue-proxy}
GO=/usr/lib/go-1.23/bin/go

log() { printf 'build-queue-proxy: %s\n' "$*" >&2; }

install_go() {
  [ -x "$GO" ] && return 0
  log "installing golang-1.23-go from bookworm-backports"
  if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    cat >/etc/apt/sources.list.d/backports.sources <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  fi
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    -t bookworm-backports golang-1.23-go
  [ -x "$GO" ] || { log "$GO is still missing after installing golang-1.23-go"; exit 1; }
}

if ! git -C "$KNATIVE_SERVING_GIT" rev-parse --git-dir >/dev/null 2>&1; then
  log "no git repository at $KNATIVE_SERVING_GIT (KNATIVE_SERVING_GIT)."
  log "Get Knative Serving's source with its tags, then run this script again, e.g.:"
  log "  git clone --bare https://github.com/knative/serving.git /some/dir/serving.git"
  log "  KNATIVE_SERVING_GIT=/some/dir/serving.git $0"
  exit 1
fi
commit=$(git -C "$KNATIVE_SERVING_GIT" rev-parse --verify -q "$KNATIVE_TAG^{commit}") || {
  log "$KNATIVE_SERVING_GIT has no tag $KNATIVE_TAG; fetch the tags (git fetch --tags) or set KNATIVE_TAG"
  exit 1
}

out="$QUEUE_PROXY_DIR/queue"
stamp="$QUEUE_PROXY_DIR/queue.commit"
if [ -x "$out" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$KNATIVE_TAG $commit" ]; then
  log "$out is already built from $KNATIVE_TAG ($commit)"
  exit 0
fi

install_go
mkdir -p "$QUEUE_PROXY_DIR"
src="$QUEUE_PROXY_DIR/src"
rm -rf "$src"
mkdir -p "$src"
git -C "$KNATIVE_SERVING_GIT" archive "$commit" | tar -x -C "$src"
[ -d "$src/vendor" ] || { log "$KNATIVE_TAG has no vendor/ directory; pick a tag that has one"; exit 1; }
log "building cmd/queue of $KNATIVE_TAG ($commit) with $("$GO" version)"
(
  cd "$src"
  GOTOOLCHAIN=local GOFLAGS=-mod=vendor GOPROXY=off CGO_ENABLED=0 \
    GOCACHE="$QUEUE_PROXY_DIR/go-cache" GOPATH="$QUEUE_PROXY_DIR/gopath" \
    "$GO" build -trimpath -o "$out.tmp" ./cmd/queue
)
mv "$out.tmp" "$out"
printf '%s %s\n' "$KNATIVE_TAG" "$commit" >"$stamp"
rm -rf "$src"
log "built $out"
