#!/usr/bin/env bash
# Python environment for otel_verl + verl 0.9.1 in ./.venv, from uv.lock, in two steps, each said on stderr:
# 1. install: the first run on a machine downloads torch's CUDA wheels and the rest (~3 GB, several minutes); any
#    later checkout on the machine installs from uv's cache in seconds (a second clone: 3 s here, 2026-12-07).
# 2. bytecode, only where PYTHONDONTWRITEBYTECODE is set (this project's machines set it; then Python would compile
#    verl and torch again in every process): every installed module compiled once per checkout and uv.lock, ~22,000
#    files, CPU-bound, 1-4 minutes on 2 cores (200 s on a loaded 2-core machine); elsewhere Python writes each
#    module's bytecode the first time it is imported, and this step is skipped.
# This checkout's later runs take seconds (a stamp in the venv). On a terminal uv draws its own progress bars;
# elsewhere (CI, a captured log), and while compiling, a line every BOOTSTRAP_HEARTBEAT_S (15) seconds says it still
# works. A warm run prints nothing.
# Every uv sync tries uv's cache alone first (--offline): a machine whose cache holds everything (another checkout, an
# air-gapped node with a prepared cache) needs no network, where uv otherwise resolved the build backend (hatchling)
# on pypi.org and failed without it (issue 51: "invalid peer certificate"; offline it took 4 s). When the cache lacks
# something, one line says so and the same sync runs with the network.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
say() { echo "bootstrap: $*" >&2; }
online=""  # set once the cache alone did not do: later syncs go straight to the network
sync() {  # sync UV_SYNC_ARGS...: from uv's cache alone, else (said once) with the network
    if [[ -z "$online" ]] && uv sync "$@" --offline --quiet >/dev/null 2>&1; then
        return 0
    fi
    if [[ -z "$online" ]]; then
        say "uv's cache lacks part of uv.lock: installing from the network (pypi.org and the lock's indexes)"
        online=1
    fi
    uv sync "$@"
}
if ! command -v uv >/dev/null 2>&1; then
    say "installing uv with pip"
    python3 -m pip install --quiet --disable-pip-version-check uv
    export PATH="$HOME/.local/bin:$PATH"
fi
# Bytecode for every installed module, once per uv.lock (a stamp in the venv). Without it, where
# PYTHONDONTWRITEBYTECODE is set (this project's machines set it) every process compiles torch and verl from
# source again: `import verl` took 14 s of CPU instead of 6, and a 2-step demo 66 s instead of 29 (docs/testing.md).
compile=""
mode=lazy
if [[ -n "${PYTHONDONTWRITEBYTECODE:-}" ]]; then
    compile=1
    mode=bytecode
fi
stamp=".venv/.otel-verl-$mode-$(sha256sum uv.lock | cut -c1-16)"
if [[ -e "$stamp" ]]; then
    sync --frozen --extra verl --quiet
    exit 0
fi
start=$SECONDS
say "setting up $ROOT/.venv from uv.lock: otel_verl, verl 0.9.1, torch and their dependencies"
say "1/2 install: a first run on this machine downloads ~3 GB and takes several minutes; from uv's cache (another"
say "checkout on this machine) it takes seconds"
beat=""
beat_start() {  # a line every BOOTSTRAP_HEARTBEAT_S seconds while a step works: "still <doing> (N s)"
    local every="${BOOTSTRAP_HEARTBEAT_S:-15}" doing="$1"
    (
        waited=0
        while sleep "$every" >/dev/null 2>&1; do  # sleep holds no pipe of a caller that captures this
            waited=$((waited + every))
            say "still $doing (${waited} s)"
        done
    ) &
    beat=$!
}
beat_stop() {
    if [[ -n "$beat" ]]; then
        kill "$beat" 2>/dev/null || true
        beat=""
    fi
}
trap beat_stop EXIT
progress=(--quiet)
if [[ -t 2 ]]; then
    progress=()  # uv draws its progress bars on the terminal
else
    beat_start installing
fi
sync --frozen --extra verl "${progress[@]}"
beat_stop
say "installed in $((SECONDS - start)) s"
if [[ -n "$compile" ]]; then
    step=$SECONDS
    say "2/2 bytecode: compiling every installed module (~22,000 files, 1-4 min on 2 cores), once per checkout and"
    say "uv.lock: PYTHONDONTWRITEBYTECODE is set, so Python would otherwise compile verl and torch in every process"
    beat_start compiling
    sync --frozen --extra verl --compile-bytecode --quiet
    beat_stop
    say "compiled in $((SECONDS - step)) s"
else
    say "2/2 bytecode: skipped (Python writes each module's bytecode the first time it is imported)"
fi
rm -f .venv/.otel-verl-bytecode-* .venv/.otel-verl-lazy-*
touch "$stamp"
say ".venv ready in $((SECONDS - start)) s"
