#!/usr/bin/env bash
# Build Jaeger v2 (`jaeger`, the OTel-Collector-based all-in-one) from its Go module, API only (the UI
# assets are not embedded: a plain Go build has no `ui` build tag; /api/v3 and /api/* work, the web
# UI page is a placeholder — set JAEGER_UI_ASSETS_PATH to a built jaeger-ui, docs/backends.md).
# `go install github.com/jaegertracing/jaeger/cmd/jaeger@<version>` is refused ("go.mod ... contains
# one or more replace directives"), so the script downloads the module source through the Go module
# proxy (`go mod download`), copies it to a scratch dir and builds ./cmd/jaeger there as the main
# module, which honours its replace directive.
#
# Version: the Go module path of Jaeger is github.com/jaegertracing/jaeger (no /v2 suffix), so the
# v2.x.y tags cannot be named in `go install`; Jaeger cut each release with a dual tag v1.N.0/v2.M.0
# until v1 reached end of life (v1.76.0 == v2.13.0, Dec 2025). The Go module proxy reachable here serves
# v1.76.0 as the newest version of that module (commits and v2 tags answer 403), so that is the default.
# Set JAEGER_VERSION to a pseudo-version/commit of the v2.20.0 tag where your proxy serves one.
# The docker compose stack uses the jaegertracing/jaeger:2.20.0 image with the same jaeger/config.yaml.
#
# Cache: ${OTEL_VERL_CACHE:-$HOME/.cache/otel_verl}/bin/jaeger -> jaeger-<version>
set -euo pipefail

JAEGER_VERSION="${JAEGER_VERSION:-v1.76.0}"
CACHE="${OTEL_VERL_CACHE:-$HOME/.cache/otel_verl}"
BIN="$CACHE/bin"
mkdir -p "$BIN"
command -v go >/dev/null || { echo "build_jaeger: Go is required" >&2; exit 1; }

TARGET="$BIN/jaeger-$JAEGER_VERSION-$(go env GOOS)-$(go env GOARCH)"
if [[ "${1:-}" != "--force" && -x "$TARGET" ]]; then
    ln -sfn "$(basename "$TARGET")" "$BIN/jaeger"
    echo "jaeger: cached $TARGET"
    exit 0
fi

export GOFLAGS="${GOFLAGS:--p=2}"
export CGO_ENABLED=0
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "build_jaeger: building github.com/jaegertracing/jaeger/cmd/jaeger@$JAEGER_VERSION (cold: several minutes)"
start=$SECONDS
src="$(cd "$tmp" && GOFLAGS=-mod=mod go mod download -json "github.com/jaegertracing/jaeger@$JAEGER_VERSION" \
    | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[[ -d "$src" ]] || { echo "build_jaeger: go mod download failed" >&2; exit 1; }
cp -r "$src" "$tmp/jaeger-src"
chmod -R u+w "$tmp/jaeger-src"
(cd "$tmp/jaeger-src" && go build -trimpath -ldflags="-s -w" -o "$tmp/jaeger" ./cmd/jaeger) 2>&1 \
    | { grep -v '^go: downloading' || true; }
mv "$tmp/jaeger" "$TARGET"
ln -sfn "$(basename "$TARGET")" "$BIN/jaeger"
echo "jaeger: built $TARGET in $((SECONDS - start)) s"
