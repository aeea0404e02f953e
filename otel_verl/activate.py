"""Activation in every Ray process of a verl run.

Add to the verl command line (one hydra override)::

    +ray_kwargs.ray_init.runtime_env.worker_process_setup_hook=otel_verl.activate.setup

Ray runs the hook in each worker process (TaskRunner, AgentLoopWorkers, reward and rollout-server
actors) before any task. The tracer provider itself is built lazily, by the first wrapper that
fires, so the process knows its role (trainer, agent_loop_worker, reward, server) by then.
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)


def setup() -> None:
    """Ray ``worker_process_setup_hook``: never raises."""
    try:
        from otel_verl import instrument

        instrument()
    except Exception as exc:  # activation must never stop a worker from starting
        logger.warning("otel_verl: activation failed (%s); this process is not traced", exc)
