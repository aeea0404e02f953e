"""Which run of a spool to read (``--run``): a spool folder holds one folder per run (``<spool>/<run>/step_<n>/``),
and two runs read as one would be silently merged (their steps 1, 2, 3 added up, their workers mixed).

The decision: a command that reads a spool reads **one run**. Given the run's own folder, that run; given a spool
folder with several runs, the run named by ``--run NAME``, else the newest (the run whose trace files were written
last), with one line saying which run was chosen and which others are there. ``--run`` on a source that is not a
spool folder (a collector file, Jaeger, Tempo, seed logs) is an error: those are narrowed by ``--service`` and
``--since``/``--until``. ``replay`` sends every run unless given ``--run`` (each span carries its run's
``verl.run.id``, so a backend keeps them apart).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from otel_verl.analysis.errors import AnalysisInputError

RUN_PARTS = re.compile(r"step_-?\d+|no_step")
"""The folders a run folder holds (:class:`otel_verl.export.spool.SpoolSpanExporter`'s layout)."""


def is_run_dir(path: Path) -> bool:
    """``path`` holds ``step_<n>/`` or ``no_step/`` folders: one run (or a seed log folder, laid out alike)."""
    return path.is_dir() and any(p.is_dir() and RUN_PARTS.fullmatch(p.name) for p in path.iterdir())


def spool_runs(root: Path) -> list[Path]:
    """The run folders directly under a spool folder, by name."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if not p.name.startswith(".") and is_run_dir(p))


def last_written_ns(run: Path) -> int:
    """When the run's newest trace file was last written (its folder's time when it holds none)."""
    times = [p.stat().st_mtime_ns for p in run.rglob("*.json*") if p.is_file() and ".delivery" not in p.parts]
    return max(times, default=run.stat().st_mtime_ns)


@dataclass(frozen=True)
class RunChoice:
    """The source to read after ``--run``: ``source`` (a run folder, or the source as given), the run's name
    (None: not a spool), and the other runs the folder holds."""

    source: str
    run: str | None = None
    others: list[str] = field(default_factory=list)
    newest: bool = False
    """Chosen as the newest (no ``--run``) among several."""

    def note(self) -> str | None:
        """One line for the user when the run was chosen for them (several runs, no ``--run``); None otherwise."""
        if not self.newest:
            return None
        where = Path(self.source).parent
        return (
            f"run {self.run} (the newest of {len(self.others) + 1} runs in {where}; the others: "
            f"{', '.join(self.others)}; pick one with --run NAME)"
        )


def choose_run(source: str, run: str | None, kind: str) -> RunChoice:
    """The run of ``source`` to read (see the module's docstring); ``kind``: the source's detected kind
    (``spool``, ``file``, ``jaeger``, ``tempo``). Raises :class:`AnalysisInputError` for a ``--run`` that does
    not fit the source."""
    path = Path(source)
    if kind != "spool" or not path.is_dir():
        if run is not None:
            raise AnalysisInputError(
                f"--run {run}: {source} is not a spool folder; narrow it with --service or --since/--until instead"
            )
        return RunChoice(source)
    if is_run_dir(path):  # the run's own folder
        if run is not None and run != path.name:
            raise AnalysisInputError(f"--run {run}: {source} is the folder of run {path.name}")
        return RunChoice(source, path.name)
    runs = spool_runs(path)
    if not runs:
        if run is not None:
            raise AnalysisInputError(f"--run {run}: {source} holds no run folders (<run>/step_<n>/)")
        return RunChoice(source)
    names = [r.name for r in runs]
    if run is not None:
        if run not in names:
            raise AnalysisInputError(f"--run {run}: no such run in {source}; its runs: {', '.join(names)}")
        chosen, newest = path / run, False
    else:
        chosen, newest = max(runs, key=lambda r: (last_written_ns(r), r.name)), True
    others = [n for n in names if n != chosen.name]
    return RunChoice(str(chosen), chosen.name, others, newest=newest and bool(others))
