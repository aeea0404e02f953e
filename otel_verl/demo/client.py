"""verl's real ``LLMServerClient`` pointed at the simulated server (no load balancer needed)."""

from __future__ import annotations

from typing import Any

from verl.workers.rollout.llm_server import LLMServerClient


class DemoLLMServerClient(LLMServerClient):
    """Only server selection differs: ``generate`` is verl's own (and is what gets traced)."""

    def __init__(self, config: Any, server: Any) -> None:
        super().__init__(config, load_balancer_handle=None)
        self._server = server

    async def _acquire_server(self, request_id: str, **extra: Any) -> tuple[str, Any]:
        return "sim-0", self._server

    def _release_server(self, server_id: str, request_id: str | None = None) -> None:
        return None
