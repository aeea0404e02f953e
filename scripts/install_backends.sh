#!/usr/bin/env bash
# Install everything tests/backends needs, idempotently (a warm run takes seconds):
#   - Debian's prometheus + promtool (scrape only) and docker-compose (offline `config -q` validation
#     of docker-compose.yml) and chromium (report.html and the Jaeger UI in a headless browser), via apt-get, only when missing (needs root or sudo);
#   - otelcol-verl (scripts/build_collector.sh) and jaeger (scripts/build_jaeger.sh), built with Go and
#     cached in ${OTEL_VERL_CACHE:-$HOME/.cache/otel_verl}/bin;
#   - OpenSearch and Elasticsearch nodes for Jaeger's search stores (scripts/build_search_nodes.sh: Java 17 + Maven).
#   - an mlflow server (scripts/install_mlflow.sh: a uv venv in the cache, mlflow at the project's mlflow-skinny version).
# Tempo is not built (AGPL, and we build or vendor no AGPL program): the Tempo reader is tested against
# Tempo's documented query API (tests/backends/tempo_standin.py); docker compose runs grafana/tempo for users.
# Usage: scripts/install_backends.sh        (CI: run before `pytest tests/backends`)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${OTEL_VERL_CACHE:-$HOME/.cache/otel_verl}"
start=$SECONDS

SUDO=""
if [[ "$(id -u)" != "0" ]]; then
    if command -v sudo >/dev/null; then SUDO="sudo"; fi
fi

missing=()
command -v prometheus >/dev/null || missing+=(prometheus)
command -v promtool >/dev/null || missing+=(prometheus)
command -v docker-compose >/dev/null || missing+=(docker-compose)
# report.html and the Jaeger UI are opened in a real headless browser (tests/analysis/test_report_browser.py,
# tests/backends/test_jaeger_ui.py)
command -v chromium >/dev/null || missing+=(chromium)
if ((${#missing[@]})); then
    pkgs="$(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')"
    echo "install_backends: apt-get install $pkgs"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    # shellcheck disable=SC2086
    $SUDO apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
    # Debian's package starts a prometheus service where an init system runs; we only want the binary.
    if command -v systemctl >/dev/null && systemctl is-active --quiet prometheus 2>/dev/null; then
        $SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true
    fi
fi

bash "$ROOT/scripts/build_collector.sh"
bash "$ROOT/scripts/build_jaeger.sh"
bash "$ROOT/scripts/build_search_nodes.sh"
bash "$ROOT/scripts/install_mlflow.sh"  # a real mlflow server for test_mlflow_traces.py, its own venv

echo "install_backends: done in $((SECONDS - start)) s"
echo "  otelcol-verl   $(readlink -f "$CACHE/bin/otelcol-verl")"
echo "  jaeger         $(readlink -f "$CACHE/bin/jaeger")"
for node in opensearch elasticsearch; do
    printf '  %-14s %s (%s)\n' "$node" "$CACHE/bin/$node-node" "$(sed -n 's/^# \([^,]*\), one node.*/\1/p' "$CACHE/bin/$node-node")"
done
echo "  prometheus     $(command -v prometheus) ($(prometheus --version 2>&1 | head -1))"
echo "  promtool       $(command -v promtool)"
echo "  docker-compose $(command -v docker-compose) ($(docker-compose version --short 2>/dev/null || docker-compose --version 2>&1 | head -1))"
# The Jaeger UI is not installed here (a Node build, docs/backends.md); the tests look for it as conftest does.
JAEGER_UI="${OTEL_VERL_JAEGER_UI:-$(dirname "$ROOT")/shared/jaeger-ui/v1.74.0}"
if [[ -f "$JAEGER_UI/index.html" ]]; then
    echo "  jaeger-ui      $JAEGER_UI"
else
    echo "  jaeger-ui      absent at $JAEGER_UI: tests/backends/test_jaeger_ui.py skips (docs/without-docker.md: build it)"
fi
