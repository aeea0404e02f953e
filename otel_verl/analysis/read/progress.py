"""Progress bars for long loads (spool bytes, Jaeger services, Tempo traces, seed logs).

On only when both stdout and stderr are terminals: a bar in a log file or a pipe is noise. Drawn on
stderr and transient, so stdout keeps only the summary.
"""

from __future__ import annotations

import sys
from typing import Any


def interactive() -> bool:
    """Whether bars may be drawn (stdout and stderr are both TTYs)."""
    return sys.stdout.isatty() and sys.stderr.isatty()


class Bar:
    """A transient rich progress bar, or a no-op; ``advance(n)`` batches tiny updates."""

    def __init__(self, enabled: bool, label: str, total: float | None = None, unit: str = "items") -> None:
        self.enabled, self.label, self.total, self.unit = enabled, label, total, unit
        self._bar: Any = None
        self._task: Any = None
        self._acc = 0.0
        self._step = max(1.0, (total or 0) / 200)

    def __enter__(self) -> Bar:
        if not self.enabled:
            return self
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

        count = DownloadColumn() if self.unit == "bytes" else MofNCompleteColumn()
        self._bar = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            count,
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self._bar.start()
        self._task = self._bar.add_task(self.label, total=self.total)
        return self

    def set_total(self, total: float) -> None:
        self.total = total
        self._step = max(1.0, total / 200)
        if self._bar is not None:
            self._bar.update(self._task, total=total)

    def advance(self, n: float = 1) -> None:
        if self._bar is None:
            return
        self._acc += n
        if self._acc >= self._step:
            self._bar.update(self._task, advance=self._acc)
            self._acc = 0

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
