#!/usr/bin/env bash
# Build the otel_verl OpenTelemetry Collector (`otelcol-verl`) from collector/manifest.yaml with the
# OpenTelemetry Collector Builder (ocb). Docker-free: needs only Go and the Go module proxy.
#
# Cache: ${OTEL_VERL_CACHE:-$HOME/.cache/otel_verl}/bin/otelcol-verl is a symlink to
#        .../bin/otelcol-verl-<sha256(manifest + this script's OCB_VERSION)[:16]>; when that file exists
#        the build is skipped. Go's own caches (GOMODCACHE ~/go/pkg/mod, GOCACHE ~/.cache/go-build) keep
#        a rebuild after a manifest change fast.
# Usage: scripts/build_collector.sh [--force]
set -euo pipefail

OCB_VERSION="${OCB_VERSION:-v0.159.0}"   # keep equal to the component versions in collector/manifest.yaml
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MANIFEST="$ROOT/collector/manifest.yaml"
CACHE="${OTEL_VERL_CACHE:-$HOME/.cache/otel_verl}"
BIN="$CACHE/bin"
mkdir -p "$BIN"

command -v go >/dev/null || { echo "build_collector: Go is required (go >= 1.24)" >&2; exit 1; }

KEY="$( { cat "$MANIFEST"; echo "$OCB_VERSION"; go env GOOS GOARCH; } | sha256sum | cut -c1-16)"
TARGET="$BIN/otelcol-verl-$KEY"
if [[ "${1:-}" != "--force" && -x "$TARGET" ]]; then
    ln -sfn "$(basename "$TARGET")" "$BIN/otelcol-verl"
    echo "otelcol-verl: cached $TARGET"
    exit 0
fi

# 2-core machines: one Go build at a time, two compile jobs.
export GOFLAGS="${GOFLAGS:--p=2}"
export CGO_ENABLED=0

OCB="$BIN/ocb-$OCB_VERSION"
if [[ ! -x "$OCB" ]]; then
    echo "build_collector: installing ocb $OCB_VERSION"
    tmp="$(mktemp -d)"
    GOBIN="$tmp" go install "go.opentelemetry.io/collector/cmd/builder@$OCB_VERSION" 2>&1 \
        | { grep -v '^go: downloading' || true; }
    mv "$tmp/builder" "$OCB"
    rmdir "$tmp"
fi

WORK="$CACHE/build/otelcol-verl"
rm -rf "$WORK"
mkdir -p "$WORK"
cp "$MANIFEST" "$WORK/manifest.yaml"
echo "build_collector: building otelcol-verl (cold: several minutes; Go caches make rebuilds fast)"
start=$SECONDS
(cd "$WORK" && "$OCB" --config manifest.yaml \
    --ldflags="-s -w" >"$WORK/ocb.log" 2>&1) || { tail -50 "$WORK/ocb.log" >&2; exit 1; }
mv "$WORK/otelcol-verl/otelcol-verl" "$TARGET.tmp"
mv "$TARGET.tmp" "$TARGET"
ln -sfn "$(basename "$TARGET")" "$BIN/otelcol-verl"
rm -rf "$WORK"
echo "otelcol-verl: built $TARGET in $((SECONDS - start)) s"
