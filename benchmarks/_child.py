"""A benchmark's child process timed to its exit, with its process tree's peak memory (:func:`run_child`).

Why one helper: the analyzer's benchmarks (``bench_analyzer_scale``, ``bench_stream``, ``bench_analyze_stream``)
each ran a child the same way; how memory and CPU are measured is decided here, once.
Memory: the PSS summed over the child's process tree (a page shared with a forked reader counts once), sampled
every 0.1 s, or the largest single process's ``ru_maxrss`` when that is more. CPU: user + system of the child and
every process it forked and waited for (``wait4``).
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any


@dataclass
class Child:
    wall_s: float
    cpu_s: float
    maxrss_bytes: int
    """The largest single process's resident peak (``ru_maxrss`` from ``wait4``)."""
    tree_bytes: int
    """The tree's summed PSS, sampled."""
    exit_code: int

    @property
    def peak_bytes(self) -> int:
        """The larger of the tree's summed PSS and the largest process's ``ru_maxrss``."""
        return max(self.tree_bytes, self.maxrss_bytes)


class PerSpan:
    """``us_per_span``/``cpu_us_per_span`` of a run with ``spans``, ``wall_s`` and ``cpu_s``."""

    spans: int
    wall_s: float
    cpu_s: float

    @property
    def us_per_span(self) -> float:
        return self.wall_s / self.spans * 1e6

    @property
    def cpu_us_per_span(self) -> float:
        return self.cpu_s / self.spans * 1e6


def run_child(
    cmd: list[str], *, stdout: IO[Any] | int | None, cwd: Path | None = None, env: dict[str, str] | None = None
) -> Child:
    """Run ``cmd`` to its exit (stdin closed, stderr with stdout) and measure it."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd, env=env)
    stop, peak = threading.Event(), [0]
    sampler = threading.Thread(target=_tree_pss, args=(proc.pid, stop, peak), daemon=True)
    sampler.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    stop.set()
    sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Child(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, peak[0], proc.returncode)


def _pss(proc: Any) -> int:
    """Proportional set size (bytes): pages shared with the parent count once over the tree, not per process.
    Falls back to RSS where /proc/<pid>/smaps_rollup is missing."""
    try:
        for line in Path(f"/proc/{proc.pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(proc.memory_info().rss)


def _tree_pss(pid: int, stop: threading.Event, peak: list[int]) -> None:
    import psutil

    try:
        root = psutil.Process(pid)
    except psutil.Error:
        return
    while not stop.is_set():
        total = 0
        try:
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            break
        for p in procs:
            try:
                total += _pss(p)
            except psutil.Error:
                continue
        peak[0] = max(peak[0], total)
        stop.wait(0.1)
