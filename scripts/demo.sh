#!/usr/bin/env bash
# The CPU demo: verl's V1 trainer with a traced multi-turn rollout (3 steps, 2 workers; in step 2 worker 0 stalls 20 s
# mid-rollout, planted: --plant stall) → ./traces (spool) and
# ./otel-verl-report/<run> (findings.json, report.html, figures). Extra arguments go to `otel-verl demo`.
# `--engine vllm` serves the rollout with verl's real vLLMHttpServer on vLLM's CPU build: its separate
# environment is installed first (scripts/install_vllm.sh: cached; ~6 GB and ~2 min the first time).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
engine=sim
prev=""
for arg in "$@"; do
    case "$arg" in
        --engine=*) engine="${arg#--engine=}" ;;
        *) if [[ "$prev" == "--engine" ]]; then engine="$arg"; fi ;;
    esac
    prev="$arg"
done
if [[ "$engine" == "vllm" ]]; then
    PY="$(bash "$ROOT/scripts/install_vllm.sh" | tail -n 1)"
    export RAY_ENABLE_UV_RUN_RUNTIME_ENV=0
    # the vLLM demo runs the legacy trainer loop (verl's V1 trainers sync weights into the simulated engine)
    exec "$(dirname "$PY")/otel-verl" demo --steps 3 --spool ./traces --trainer legacy "$@"
fi
bash "$ROOT/scripts/bootstrap.sh"
# the command the README says this runs, word for word (tests/test_demo_script.py); bootstrap.sh synced the venv
exec .venv/bin/otel-verl demo --steps 3 --spool ./traces --plant stall "$@"
