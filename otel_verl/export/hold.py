"""Request spans of an open rollout chunk wait in memory and go to the exporters when it ends.

Why: encoding and writing spans is CPU work in the AgentLoopWorker's process, on an export thread
that needs the GIL the rollout's event loop is using. While a chunk runs that costs rollout time;
once the chunk is done the worker waits for the other workers and for the trainer's update phases,
and the same work is free. So finished requests are held while a chunk of this process is open
and handed to the span processors, from a background thread, when a chunk ends.

What is held are *parts*: a list of finished spans, or a function that completes a request's spans
(:meth:`otel_verl.recording.recorder.RequestRecorder.build_spans`), so that work too happens at release time,
off the event loop.

The release waits ``settle_s`` (a second) after a chunk ends: the worker is then still
returning the chunk's output (asyncio's teardown, Ray serializing the batch) and an export thread
taking the GIL would slow exactly that. The chunk-end flush rides on that release (an empty one
too). The release happens even if another chunk is open or opened meanwhile (rollouts back to back,
an asynchronous trainer's overlapping dispatches): parts never wait for a later chunk's end. What this
saved on the CPU demo: docs/performance.md.

Bounded both ways: when the oldest held span has waited ``max_seconds`` or ``max_spans`` are held,
they are released at once (long rollouts still stream to the collector; a killed worker loses at
most that much, all of it from the step in flight). ``max_seconds=0`` turns holding off.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

Part = Sequence[Any] | Callable[[], Sequence[Any]]
"""Finished spans, or a function returning them (called once, when released)."""


class SpanHold:
    """Counts open chunks; collects parts while any is open; releases them through ``release``."""

    def __init__(
        self,
        max_seconds: float,
        max_spans: int,
        release: Callable[[list[Part]], None],
        settle_s: float = 0.0,
    ) -> None:
        self.max_seconds = max_seconds
        self.max_spans = max_spans
        self.settle_s = settle_s
        self._release = release
        self._lock = threading.Lock()
        self._settling: threading.Timer | None = None
        self._open = 0
        self._held: list[Part] = []
        self._spans = 0
        self._oldest = 0.0

    @property
    def enabled(self) -> bool:
        return self.max_seconds > 0

    def begin(self) -> None:
        """A rollout chunk started in this process."""
        if self.enabled:
            with self._lock:
                self._open += 1

    def end(self) -> bool:
        """A chunk ended: what is held is released ``settle_s`` later, other chunks open or not, and the
        release (an empty one too) is the caller's cue to flush: True = a release is on its way.

        Not "when the last chunk ends": an asynchronous trainer's chunks overlap without a gap (the next step's
        dispatch opens before the last one closes), so its spans waited the whole ``max_seconds`` and reached the
        live account after their step was computed (CI: 84 of step 1's spans late, colocate-async)."""
        if not self.enabled:
            return False
        with self._lock:
            self._open = max(0, self._open - 1)
            if self.settle_s <= 0:
                batch = self._take()
            else:
                batch = None
                if self._settling is None:
                    self._settling = threading.Timer(self.settle_s, self._settled)
                    self._settling.daemon = True
                    self._settling.start()
        if batch is not None:
            self._release(batch)
        return True

    def _settled(self) -> None:
        """``settle_s`` after a chunk ended: release what is held (other chunks may be open)."""
        with self._lock:
            self._settling = None
            batch = self._take()
        self._release(batch)

    def add(self, part: Part, spans: int | None = None) -> bool:
        """Hold ``part`` (``spans`` spans; a sequence counts itself) if a chunk is open (True);
        False: the caller hands it on itself."""
        if not self._open:
            return False
        batch = None
        with self._lock:
            if not self._open:
                return False
            if not self._held:
                self._oldest = time.monotonic()
            self._held.append(part)
            self._spans += len(part) if spans is None else spans  # type: ignore[arg-type]
            if self._spans >= self.max_spans or time.monotonic() - self._oldest >= self.max_seconds:
                batch = self._take()
        if batch:
            self._release(batch)
        return True

    def drain(self) -> list[Part]:
        """Everything held, now (for a blocking flush or shutdown); holding goes on for open chunks."""
        with self._lock:
            if self._settling is not None:
                self._settling.cancel()
                self._settling = None
            return self._take()

    def _take(self) -> list[Part]:
        batch, self._held, self._spans = self._held, [], 0
        return batch

    @property
    def held(self) -> int:
        """Spans held now."""
        return self._spans
