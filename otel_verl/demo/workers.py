"""The demo's rollout managers and workers: verl's own classes, plus a planted slow start (``slow_start``).

A worker's start is the time between its chunk arriving (``generate_sequences`` entered: its
``verl.rollout.worker`` span starts) and its first request. In verl that is the worker's own preparation of
the chunk (sampling parameters, trajectory info, agent-loop setup, and whatever blocks its event loop then);
the demo plants extra seconds exactly there: the subclass's ``generate_sequences`` waits before handing
the chunk to verl's. Unplanted, it hands the chunk on at once. The managers are verl's, creating these
workers through verl's own hook (``agent_loop_workers_class``).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import ray
import ray.cloudpickle
from verl.experimental.agent_loop import AgentLoopManager, AgentLoopWorker
from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopManagerTQ, AgentLoopWorkerTQ


class _PlantedStart:
    """A worker that can be told to start its next chunk late."""

    _planted_start = 0.0

    def plant_start(self, seconds: float) -> None:
        """The next chunk this worker receives waits ``seconds`` before its first request (0: none)."""
        self._planted_start = float(seconds)

    async def _prepare_chunk(self) -> None:
        delay, self._planted_start = self._planted_start, 0.0
        if delay > 0:
            await asyncio.sleep(delay)


class DemoAgentLoopWorker(_PlantedStart, AgentLoopWorker):
    async def generate_sequences(self, batch: Any) -> Any:
        await self._prepare_chunk()
        return await super().generate_sequences(batch)


class DemoAgentLoopWorkerTQ(_PlantedStart, AgentLoopWorkerTQ.__ray_actor_class__):  # type: ignore[name-defined,misc]
    async def generate_sequences(self, batch: Any) -> None:
        await self._prepare_chunk()
        return await super().generate_sequences(batch)


class DemoAgentLoopManager(AgentLoopManager):
    """verl's ``AgentLoopManager`` (legacy trainer) with :class:`DemoAgentLoopWorker` actors."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.agent_loop_workers_class = ray.remote(DemoAgentLoopWorker)
        super().__init__(*args, **kwargs)


class DemoAgentLoopManagerTQ(AgentLoopManagerTQ):
    """verl's ``AgentLoopManagerTQ`` (V1 trainer) with :class:`DemoAgentLoopWorkerTQ` actors."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.agent_loop_workers_class = ray.remote(DemoAgentLoopWorkerTQ)


# Ray hands an actor class to its worker process with cloudpickle, copying each method of it. verl's
# ``AgentLoopWorkerTQ`` is only reachable through its ``@ray.remote`` wrapper, so it travels by value; so must
# a subclass of it, or the copied ``__init__``'s ``super()`` names a copy the instance is not an instance of.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


def plant_starts(manager: Any, starts: dict[int, float]) -> None:
    """Each worker's planted start for its next chunk (rank = its index, as in its actor name)."""
    ray.get([w.plant_start.remote(float(starts.get(rank, 0.0))) for rank, w in enumerate(manager.agent_loop_workers)])
