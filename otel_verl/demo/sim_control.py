"""The control surface of verl's rollout servers, on the simulated engine: weight version, submission gate,
sleep, and the rollout side of a weight sync.

What verl's V1 trainers call on a replica's servers (``RolloutReplica.sleep/wake_up/abort_all_requests/
resume_generation/release_kv_cache/resume_kv_cache``) and on its checkpoint-engine workers
(``CheckpointEngineWorker.update_weights/execute_checkpoint_engine``), behaving as ``vLLMHttpServer`` does:

- every answer carries the weight version in ``extra_fields["global_steps"]``, which verl's clients turn
  into each trajectory's ``min/max_global_steps`` (what the replay buffer's staleness control reads);
- ``abort_all_requests`` aborts the running requests (their partial output comes back with
  ``stop_reason="aborted"``, which ``FullyAsyncLLMServerClient`` resumes) and closes the submission gate:
  later requests park until ``resume_generation``, or are refused at once with ``reject_request=True``;
- ``update_weights(global_steps)`` is the receiving end of a weight sync: it takes the transfer's time
  and then serves the new version.

The simulated server actor is its own replica's checkpoint-engine worker (verl has one per GPU of the
replica), so verl's ``CheckpointEngineManager`` runs unchanged against it.
"""

from __future__ import annotations

import asyncio
from typing import Any


class EngineControl:
    """Mixed into :class:`~otel_verl.demo.sim_server.SimLLMServer`: version, gate and weight-sync state."""

    global_steps: int | None = None
    """The version of the weights served (verl's ``global_steps`` of the last sync; None before the first)."""
    sync_seconds: float = 0.0
    """Seconds a weight sync takes on this replica's side (the transfer; set by the demo)."""
    abort_event: asyncio.Event

    def _init_control(self, sync_seconds: float = 0.0) -> None:
        self.sync_seconds = sync_seconds
        self._paused = False
        self._rejecting = False
        self._resume = asyncio.Event()
        self._resume.set()
        self.asleep = False
        self.syncs = 0

    async def _admit(self) -> bool:
        """Wait out a closed gate (False: the gate refuses late arrivals; the request ends aborted)."""
        while self._paused:
            if self._rejecting:
                return False
            await self._resume.wait()
        return True

    # -- RolloutReplica's calls
    async def abort_all_requests(self, reset_prefix_cache: bool = True, reject_request: bool = False) -> dict:
        """Abort what runs (partial outputs, ``stop_reason="aborted"``) and close the gate."""
        self._paused, self._rejecting = True, reject_request
        self._resume.clear()
        self.abort_event.set()
        return {"aborted_count": getattr(self, "active", 0), "request_ids": []}

    async def resume_generation(self) -> None:
        self.abort_event = asyncio.Event()
        await self.open_submission_gate()

    async def open_submission_gate(self) -> None:
        self._paused = self._rejecting = False
        self._resume.set()

    async def sleep(self) -> None:
        self.asleep = True

    async def wake_up(self) -> None:
        self.asleep = False

    async def release_kv_cache(self) -> None:
        return None

    async def resume_kv_cache(self) -> None:
        return None

    async def clear_kv_cache(self) -> None:
        return None

    async def start_profile(self, **kwargs: Any) -> None:
        return None

    async def stop_profile(self) -> None:
        return None

    def set_global_steps(self, global_steps: int | None) -> None:
        self.global_steps = global_steps

    # -- CheckpointEngineWorker's calls (the replica's side of a weight sync)
    async def update_weights(self, global_steps: int | None = None) -> None:
        """Receive the weights (the transfer's seconds), then serve ``global_steps``; a colocated replica
        is woken up by it, as verl's naive (in-process) sync does."""
        if self.sync_seconds > 0:
            await asyncio.sleep(self.sync_seconds)
        self.global_steps = global_steps
        self.asleep = False
        self.syncs += 1

    def execute_checkpoint_engine(self, method: str, *args: Any, **kwargs: Any) -> dict:
        """``prepare`` / ``init_process_group`` / ``finalize`` of the transport: nothing to set up here."""
        return {}
