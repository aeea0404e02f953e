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
uv sync --frozen --extra verl --quiet
