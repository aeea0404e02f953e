"""One module per verl seam; each exposes ``SEAMS`` = ((module, "Class.method", wrapper_factory), ...)."""

from __future__ import annotations

from otel_verl.instrumentation import agent_loop, llm_server, reward, threads, tools, trainer, vllm_tracing
from otel_verl.instrumentation._wrap import RAY_SEAMS

ALL_SEAMS = (
    *trainer.SEAMS,
    *agent_loop.SEAMS,
    *llm_server.SEAMS,
    *llm_server.ENGINE_SEAMS,
    *vllm_tracing.SEAMS,
    *tools.SEAMS,
    *reward.SEAMS,
    *threads.SEAMS,
    *RAY_SEAMS,
)


FULL_DETAIL_SEAMS = agent_loop.FULL_DETAIL_SEAMS | tools.FULL_DETAIL_SEAMS
"""Seams that record turns and events only: ``full`` detail wraps them, lower levels do not pay for them."""

PER_REQUEST_SEAMS = (
    agent_loop.PER_REQUEST_SEAMS | llm_server.PER_REQUEST_SEAMS | reward.PER_REQUEST_SEAMS | FULL_DETAIL_SEAMS
)
"""Seams the rollout calls once or more per trajectory: ``step`` detail records nothing per request and
wraps none of them (its rollout runs verl's own code only; benchmarks/RESULTS.md, row 2e)."""


def seams_for(detail: str) -> tuple:
    """The seams wrapped at ``detail``: all of them at ``full``; at ``worker`` and ``request`` not the turn
    and event seams; at ``step`` none that the rollout calls per trajectory."""
    if detail == "full":
        return ALL_SEAMS
    skipped = PER_REQUEST_SEAMS if detail == "step" else FULL_DETAIL_SEAMS
    return tuple(seam for seam in ALL_SEAMS if (seam[0], seam[1]) not in skipped)
