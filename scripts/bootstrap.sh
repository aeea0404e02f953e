#!/usr/bin/env bash
# Python environment for otel_verl + verl 0.9.1 in ./.venv, from uv.lock (uv's cache makes a warm run
# take seconds; the first run downloads torch's CUDA wheels, ~3 GB, once per machine).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if ! command -v uv >/dev/null 2>&1; then
    echo "bootstrap: installing uv with pip"
    python3 -m pip install --quiet --disable-pip-version-check uv
    export PATH="$HOME/.local/bin:$PATH"
fi
# Bytecode for every installed module, once per uv.lock (a stamp in the venv). Without it, where
# PYTHONDONTWRITEBYTECODE is set (this project's machines set it) every process compiles torch and verl from
# source again: `import verl` took 14 s of CPU instead of 6, and a 2-step demo 66 s instead of 29 (docs/testing.md).
stamp=".venv/.otel-verl-bytecode-$(sha256sum uv.lock | cut -c1-16)"
if [[ -e "$stamp" ]]; then
    uv sync --frozen --extra verl --quiet
else
    echo "bootstrap: installing and compiling the environment's bytecode (once per uv.lock)"
    uv sync --frozen --extra verl --quiet --compile-bytecode
    rm -f .venv/.otel-verl-bytecode-*
    touch "$stamp"
fi
