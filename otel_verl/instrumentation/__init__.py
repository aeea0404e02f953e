"""One module per verl seam; each exposes ``SEAMS`` = ((module, "Class.method", wrapper_factory), ...)."""

from __future__ import annotations

from otel_verl.instrumentation import agent_loop, llm_server, reward, threads, tools, trainer
from otel_verl.instrumentation._wrap import RAY_SEAMS

ALL_SEAMS = (
    *trainer.SEAMS,
    *agent_loop.SEAMS,
    *llm_server.SEAMS,
    *llm_server.ENGINE_SEAMS,
    *tools.SEAMS,
    *reward.SEAMS,
    *threads.SEAMS,
    *RAY_SEAMS,
)
