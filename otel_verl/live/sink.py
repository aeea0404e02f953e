"""How a process reaches the live account's collector: a named Ray actor beside the trainer, or one in the process.

In a verl job the trainer (verl's ``TaskRunner``) opens it when verl builds its ``Tracking`` logger
(:func:`open_sink`): a Ray actor named after the run (:func:`actor_name`), on the trainer's node, with no CPU
reserved (``num_cpus=0``: it takes nothing from verl's placement), at a lower priority (``nice``), owned by the
trainer's process (it goes when the trainer does). Every other process finds it by name (:func:`find_sink`;
looked up again at most every :data:`LOOKUP_EVERY_S` while absent). Without Ray (a trainer run in one process,
the tests of the backends), the collector runs in the process, on a thread.

Nothing here blocks the caller beyond a Ray call's submission: :meth:`RaySink.send` and :meth:`RaySink.step_done`
are fire-and-forget (at most :data:`MAX_IN_FLIGHT` sends unanswered, further batches dropped and counted), and
:meth:`RaySink.poll` asks whether the results the trainer asked for one step ago have come (``ray.wait`` with
no timeout). Every failure is swallowed: a dead actor turns the live account off in that process.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections import deque
from typing import Any, Protocol

from otel_verl.live.collector import Batch, LiveCollector
from otel_verl.live.metrics import LiveStep

logger = logging.getLogger(__name__)

LOOKUP_EVERY_S = 2.0
MAX_IN_FLIGHT = 32
"""Sends a process may have unanswered (a batch is a few hundred spans to a few MB): beyond, batches are dropped."""
SINK_NICE = 10


def actor_name(run_id: str) -> str:
    return f"otel_verl_live:{run_id}"


class Sink(Protocol):
    def send(self, batch: Batch) -> None: ...
    def step_done(self, step: int, lag: int, rollout_age_s: float | None = None) -> None: ...
    def poll(self) -> list[LiveStep]: ...
    def drain(self, timeout_s: float) -> list[LiveStep]: ...


class LocalSink:
    """The collector in this process (no Ray)."""

    def __init__(self, collector: LiveCollector) -> None:
        self.collector = collector
        self._after = 0

    def send(self, batch: Batch) -> None:
        self.collector.add(batch)

    def step_done(self, step: int, lag: int, rollout_age_s: float | None = None) -> None:
        self.collector.step_done(step, lag, rollout_age_s)

    def _take(self, timeout_s: float) -> list[LiveStep]:
        got = self.collector.results(self._after, timeout_s)
        if got:
            self._after = got[-1][0]
        return [r for _, r in got]

    def poll(self) -> list[LiveStep]:
        return self._take(0.0)

    def drain(self, timeout_s: float) -> list[LiveStep]:
        self.collector.finish()
        self.collector.drain(timeout_s)
        return self.poll()


class CollectorActor:
    """The Ray actor around a :class:`LiveCollector` (threaded: a waiting ``results`` blocks one thread only)."""

    def __init__(self) -> None:
        try:
            os.nice(SINK_NICE)
        except OSError:
            pass
        self.collector = LiveCollector()

    def add(self, batch: Batch) -> None:
        self.collector.add(batch)

    def step_done(self, step: int, lag: int, rollout_age_s: float | None = None) -> None:
        self.collector.step_done(step, lag, rollout_age_s)

    def results(self, after: int, timeout_s: float | None) -> list[tuple[int, LiveStep]]:
        return self.collector.results(after, timeout_s)

    def drain(self, timeout_s: float) -> None:
        self.collector.finish()
        self.collector.drain(timeout_s)


class RaySink:
    """A process's handle on the collector actor."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor
        self.dead = False
        self._in_flight: deque[Any] = deque()
        self._poll_ref: Any = None
        self._after = 0
        self.dropped = 0

    def send(self, batch: Batch) -> None:
        if self.dead:
            return
        self._reap()
        if len(self._in_flight) >= MAX_IN_FLIGHT:
            self.dropped += sum(spans for _, spans, _ in batch)
            return
        self._in_flight.append(self.actor.add.remote(list(batch)))

    def _reap(self) -> None:
        """Answered sends are read (an error is then handled here, not logged by Ray as unhandled)."""
        import ray

        if not self._in_flight:
            return
        done, _ = ray.wait(list(self._in_flight), num_returns=len(self._in_flight), timeout=0)
        for ref in done:
            self._in_flight.remove(ref)
            self._check(ref)

    def _check(self, ref: Any, timeout_s: float = 0.0) -> Any:
        import ray

        try:
            return ray.get(ref, timeout=timeout_s)
        except ray.exceptions.RayActorError:
            self.dead = True
        except Exception:
            logger.debug("otel_verl: live account call failed", exc_info=True)
        return None

    def step_done(self, step: int, lag: int, rollout_age_s: float | None = None) -> None:
        if not self.dead:
            self._in_flight.append(self.actor.step_done.remote(step, lag, rollout_age_s))

    def poll(self) -> list[LiveStep]:
        """The results that came since the last poll, without waiting (the question stays asked until answered)."""
        import ray

        if self.dead:
            return []
        if self._poll_ref is None:
            self._poll_ref = self.actor.results.remote(self._after, None)
            return []
        done, _ = ray.wait([self._poll_ref], timeout=0)
        if not done:
            return []
        got = self._check(self._poll_ref) or []
        self._poll_ref = None
        if got:
            self._after = got[-1][0]
        if not self.dead:
            self._poll_ref = self.actor.results.remote(self._after, None)
        return [r for _, r in got]

    def drain(self, timeout_s: float) -> list[LiveStep]:
        if self.dead:
            return []
        self._check(self.actor.drain.remote(timeout_s), timeout_s + 5)
        got = [] if self.dead else self._check(self.actor.results.remote(self._after, 0.0), 5.0) or []
        self._after = got[-1][0] if got else self._after
        return [r for _, r in got]


_lock = threading.Lock()
_sinks: dict[str, Sink] = {}
_looked_up: dict[str, float] = {}


def open_sink(run_id: str) -> Sink | None:
    """The run's collector, started if it is not (in the trainer's process: a Ray actor beside it, or in the process
    without Ray); None when Ray is up but the actor cannot be made (a collector here would miss the workers' spans)."""
    with _lock:
        existing = _sinks.get(run_id)
        if existing is not None and not getattr(existing, "dead", False):
            return existing
        sink: Sink | None = _ray_sink(run_id, create=True) if _ray_ready() else LocalSink(LiveCollector())
        if sink is not None:
            _sinks[run_id] = sink
        return sink


def find_sink(run_id: str) -> Sink | None:
    """The run's collector if it is open (this process's, or the run's actor, looked up by name)."""
    sink = _sinks.get(run_id)
    if sink is not None and not getattr(sink, "dead", False):
        return sink
    if not _ray_ready():
        return None
    now = time.monotonic()
    with _lock:
        if now - _looked_up.get(run_id, float("-inf")) < LOOKUP_EVERY_S:
            return None
        _looked_up[run_id] = now
        found = _ray_sink(run_id, create=False)
        if found is not None:
            _sinks[run_id] = found
        return found


def forget(run_id: str) -> None:
    """Drop this process's handle (a local collector is closed)."""
    with _lock:
        sink = _sinks.pop(run_id, None)
        _looked_up.pop(run_id, None)
    if isinstance(sink, LocalSink):
        sink.collector.close()


def _ray_ready() -> bool:
    """Ray is up in this process (never imported here for the asking: a process without Ray pays nothing)."""
    ray = sys.modules.get("ray")
    try:
        return ray is not None and bool(ray.is_initialized())
    except Exception:
        return False


def _ray_sink(run_id: str, create: bool) -> RaySink | None:
    import ray

    try:
        if not create:
            return RaySink(ray.get_actor(actor_name(run_id)))
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=True)
        actor = (
            ray.remote(CollectorActor)
            .options(
                name=actor_name(run_id),
                get_if_exists=True,
                num_cpus=0,
                max_concurrency=4,
                max_restarts=0,
                scheduling_strategy=here,
            )
            .remote()
        )
        return RaySink(actor)
    except ValueError:  # no such actor (yet)
        return None
    except Exception:
        logger.debug("otel_verl: the live account's actor is not reachable", exc_info=True)
        return None
