#!/usr/bin/env bash
# Build Grafana Tempo (`tempo`, single binary) from its Go module, for the docker-free Tempo the
# tests run against (tests/backends/test_tempo.py) and for clusters without Docker.
#
# Version: Tempo's Go module path is github.com/grafana/tempo (no /v2 suffix), so its v2.x/v3.x
# tags are not valid versions of that module, and the Go module proxy reachable here answers 403 for
# them and for commit pseudo-versions alike; v1.5.0 (Aug 2022) is the newest version it serves.
# So the binary is Tempo 1.5.0 — no TraceQL (Tempo >= 2.0), legacy tag search instead — while the
# docker compose stack keeps grafana/tempo:3.0.3 (its Grafana panels use TraceQL). The analyzer's
# Tempo reader (otel_verl/analysis/remote.py) speaks both: TraceQL first, tag search when the Tempo
# is older. Set TEMPO_VERSION to build another version where your proxy serves one; the config for
# this binary is tempo/tempo-local.yaml (Tempo 1.5 schema).
#
# `go install ...@v1.5.0` is refused (replace directives), and the module zip carries no vendor/ tree,
# so the script downloads the module source (`go mod download`), copies it to a scratch dir and
# builds ./cmd/tempo there as the main module (its replace directives apply). Two adjustments for
# today's Go (Tempo 1.5 was released with Go 1.18), both in the scratch copy only:
#   - `-ldflags=-checklinkname=0`: Go >= 1.23 refuses the old golang.org/x/net's linkname to
#     syscall.recvmsg;
#   - one added file, pkg/gogocodec/zz_init_order.go, importing google.golang.org/grpc/encoding/proto:
#     Go >= 1.21 initialises packages in import-path order, so gRPC's default "proto" codec would
#     register after Tempo's gogo codec and replace it (the ingester then panics on the first push:
#     "invalid Go type tempopb.PreallocBytes"); the import restores Go 1.18's order.
#
# Cache: ${OTEL_VERL_CACHE:-$HOME/.cache/otel_verl}/bin/tempo -> tempo-<version>-<os>-<arch>
# Usage: scripts/build_tempo.sh [--force]
set -euo pipefail

TEMPO_VERSION="${TEMPO_VERSION:-v1.5.0}"
CACHE="${OTEL_VERL_CACHE:-$HOME/.cache/otel_verl}"
BIN="$CACHE/bin"
mkdir -p "$BIN"
command -v go >/dev/null || { echo "build_tempo: Go is required" >&2; exit 1; }

TARGET="$BIN/tempo-$TEMPO_VERSION-$(go env GOOS)-$(go env GOARCH)"
if [[ "${1:-}" != "--force" && -x "$TARGET" ]]; then
    ln -sfn "$(basename "$TARGET")" "$BIN/tempo"
    echo "tempo: cached $TARGET"
    exit 0
fi

# 2-core machines: two compile jobs.
export GOFLAGS="${GOFLAGS:--p=2}"
export CGO_ENABLED=0
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "build_tempo: building github.com/grafana/tempo/cmd/tempo@$TEMPO_VERSION (cold: several minutes)"
start=$SECONDS
src="$(cd "$tmp" && GOFLAGS=-mod=mod go mod download -json "github.com/grafana/tempo@$TEMPO_VERSION" \
    | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[[ -d "$src" ]] || { echo "build_tempo: go mod download github.com/grafana/tempo@$TEMPO_VERSION failed" >&2; exit 1; }
cp -r "$src" "$tmp/tempo-src"
chmod -R u+w "$tmp/tempo-src"
# The module zip keeps only vendor/modules.txt: resolve dependencies through the proxy instead.
rm -rf "$tmp/tempo-src/vendor"
if [[ -d "$tmp/tempo-src/pkg/gogocodec" ]]; then
    printf '%s\n' "package gogocodec" "" \
        "// Added by otel_verl's build_tempo.sh: register gRPC's proto codec before this package's gogo codec." \
        "import _ \"google.golang.org/grpc/encoding/proto\"" >"$tmp/tempo-src/pkg/gogocodec/zz_init_order.go"
fi
(cd "$tmp/tempo-src" && GOFLAGS="$GOFLAGS -mod=mod" go build -trimpath \
    -ldflags="-s -w -checklinkname=0 -X main.Version=${TEMPO_VERSION#v}" -o "$tmp/tempo" ./cmd/tempo) 2>&1 \
    | { grep -v '^go: downloading' || true; }
[[ -x "$tmp/tempo" ]] || { echo "build_tempo: go build failed" >&2; exit 1; }
mv "$tmp/tempo" "$TARGET"
ln -sfn "$(basename "$TARGET")" "$BIN/tempo"
echo "tempo: built $TARGET in $((SECONDS - start)) s"
