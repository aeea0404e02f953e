"""A line every so often while the demo waits, where no spinner can be drawn (a pipe, a log file, CI).

Why: ``bash scripts/demo.sh | tee log`` printed nothing for ~5 minutes between "running 3 traced steps …" and
"step 1/3 done": Ray and verl started, then verl validated the model before training (``verl.validate`` took
1 min 17 s on a loaded 2-core machine), and the terminal's spinner does not reach a pipe (issue 51). The line says
what is awaited and for how long: ``  still waiting for step 1: … (30 s)``. Every ``OTEL_VERL_DEMO_HEARTBEAT_S``
seconds (30); a terminal keeps its spinner and gets no line.
"""

from __future__ import annotations

import os
import threading
import time
from types import TracebackType
from typing import Any

DEFAULT_EVERY_S = 30.0


def every_s() -> float:
    """The interval: ``OTEL_VERL_DEMO_HEARTBEAT_S`` when a positive number, else 30 s."""
    try:
        value = float(os.environ.get("OTEL_VERL_DEMO_HEARTBEAT_S") or DEFAULT_EVERY_S)
    except ValueError:
        return DEFAULT_EVERY_S
    return value if value > 0 else DEFAULT_EVERY_S


class Heartbeat:
    """``with Heartbeat(out, "waiting for step 1") as beat: … beat.doing("running step 2")``: a line on ``out``
    (a rich Console) every ``every`` seconds while the current wait lasts, counted from its start; nothing when
    ``out`` is a terminal (its spinner says it) or the wait ends sooner."""

    def __init__(self, out: Any, doing: str, every: float | None = None) -> None:
        self._out = out
        self._every = every or every_s()
        self._doing, self._since = doing, time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="otel-verl-demo-heartbeat", daemon=True)

    def doing(self, what: str) -> None:
        """A new wait: its own line, its own count."""
        with self._lock:
            self._doing, self._since = what, time.monotonic()

    def _beat(self) -> None:
        while not self._stop.wait(self._every):
            with self._lock:
                line = f"  still {self._doing} ({time.monotonic() - self._since:.0f} s)"
            self._out.print(line, markup=False, highlight=False, soft_wrap=True)

    def __enter__(self) -> Heartbeat:
        if not self._out.is_terminal:
            self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
