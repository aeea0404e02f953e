#!/usr/bin/env bash
# The newest vLLM CPU build's environment beside the pinned one: `scripts/install_vllm.sh next` (see its header).
# Usage: scripts/install_vllm_next.sh       prints the venv's python path as its last line
#   OTEL_VERL_VLLM_NEXT_VENV=/path          where the venv goes (default: <repo>/.venv-vllm-next)
exec bash "$(dirname "${BASH_SOURCE[0]}")/install_vllm.sh" next "$@"
