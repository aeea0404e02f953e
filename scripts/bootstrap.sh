#!/usr/bin/env bash
# Python environment for otel_verl + verl 0.9.1 in ./.venv, from uv.lock (uv's cache makes a warm run
# take seconds; the first run downloads torch's CUDA wheels, ~3 GB, once per machine).
# Progress: a first run says what it does on stderr; on a terminal uv draws its own progress bars, elsewhere (CI,
# a captured log) a line every BOOTSTRAP_HEARTBEAT_S (15) seconds says it still works. A warm run prints nothing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
say() { echo "bootstrap: $*" >&2; }
if ! command -v uv >/dev/null 2>&1; then
    say "installing uv with pip"
    python3 -m pip install --quiet --disable-pip-version-check uv
    export PATH="$HOME/.local/bin:$PATH"
fi
# Bytecode for every installed module, once per uv.lock (a stamp in the venv). Without it, where
# PYTHONDONTWRITEBYTECODE is set (this project's machines set it) every process compiles torch and verl from
# source again: `import verl` took 14 s of CPU instead of 6, and a 2-step demo 66 s instead of 29 (docs/testing.md).
stamp=".venv/.otel-verl-bytecode-$(sha256sum uv.lock | cut -c1-16)"
if [[ -e "$stamp" ]]; then
    uv sync --frozen --extra verl --quiet
    exit 0
fi
start=$SECONDS
say "setting up $ROOT/.venv from uv.lock: otel_verl, verl 0.9.1, torch and their dependencies"
say "a first run on this machine downloads ~3 GB and takes several minutes (later runs: seconds); then it"
say "compiles their bytecode, once per uv.lock"
progress=(--quiet)
beat=""
if [[ -t 2 ]]; then
    progress=()  # uv draws its progress bars on the terminal
else
    every="${BOOTSTRAP_HEARTBEAT_S:-15}"
    (
        waited=0
        while sleep "$every" >/dev/null 2>&1; do  # sleep holds no pipe of a caller that captures this
            waited=$((waited + every))
            say "still installing (${waited} s)"
        done
    ) &
    beat=$!
    trap 'kill "$beat" 2>/dev/null || true' EXIT
fi
uv sync --frozen --extra verl --compile-bytecode "${progress[@]}"
if [[ -n "$beat" ]]; then
    kill "$beat" 2>/dev/null || true
fi
rm -f .venv/.otel-verl-bytecode-*
touch "$stamp"
say ".venv ready in $((SECONDS - start)) s"
