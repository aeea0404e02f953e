#!/usr/bin/env bash
# The CPU demo: a traced multi-turn verl rollout (3 steps, 2 workers; in step 2 worker 0 stalls 20 s
# mid-rollout, planted: --plant stall) → ./traces (spool) and
# ./otel-verl-report/<run> (findings.json, report.html, figures). Extra arguments go to `otel-verl demo`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/bootstrap.sh"
cd "$ROOT"
exec uv run --frozen otel-verl demo --steps 3 --spool ./traces --plant stall "$@"
