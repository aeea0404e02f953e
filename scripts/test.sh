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
# --durations: the slowest setups and calls in every CI log (its time limit is what the suite must fit)
export PYTHONFAULTHANDLER=1
if [[ $# -gt 0 ]]; then
    uv run --frozen pytest -q -p no:cacheprovider --durations=30 "$@"
else
    # Two parts (tests/conftest.py marks them): the tests that start nothing run on both cores; those that start Ray,
    # a demo or the backends (`serial`) run after, one at a time, with the machine to themselves. Both always run.
    status=0
    uv run --frozen pytest -q -p no:cacheprovider -n 2 -m "not serial" --durations=15 || status=$?
    echo "test: tests that start nothing done at $((SECONDS - start)) s"
    uv run --frozen pytest -q -p no:cacheprovider -m serial --durations=30 || status=$?
    if [[ $status -ne 0 ]]; then
        echo "test: FAILED (see above)"
        exit "$status"
    fi
fi
echo "test: main suite done at $((SECONDS - start)) s"
# The real engine (issue 24): vLLM's CPU build in its own venv (scripts/install_vllm.sh, cached), then
# tests/engine there — one shared `otel-verl demo --engine vllm` run. Only on a full run (no arguments);
# OTEL_VERL_SKIP_ENGINE=1 leaves it out.
if [[ $# -eq 0 && "${OTEL_VERL_SKIP_ENGINE:-0}" != "1" ]]; then
    engine_start=$SECONDS
    VLLM_PY="$(bash scripts/install_vllm.sh | tail -n 1)"
    echo "test: vLLM env ready in $((SECONDS - engine_start)) s"
    RAY_ENABLE_UV_RUN_RUNTIME_ENV=0 PYTHONFAULTHANDLER=1 "$VLLM_PY" -m pytest -q -p no:cacheprovider -s tests/engine
    echo "test: real-engine tests done in $((SECONDS - engine_start)) s"
fi
echo "test: all done in $((SECONDS - start)) s"
