#!/usr/bin/env bash
# Everything CI runs: Python env, real backends (collector, Jaeger, Prometheus), lint, the test suite.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
start=$SECONDS
bash scripts/bootstrap.sh
echo "test: python env ready in $((SECONDS - start)) s"
bash scripts/install_backends.sh
uv run --frozen ruff check otel_verl tests dashboards benchmarks
uv run --frozen ruff format --check otel_verl tests dashboards benchmarks
uv run --frozen python dashboards/generate.py --check
# a crash in native code (even at interpreter exit, after the summary) prints every thread's Python stack
PYTHONFAULTHANDLER=1 uv run --frozen pytest -q -p no:cacheprovider "$@"
echo "test: all done in $((SECONDS - start)) s"
