"""Issue 25 target 5: seed logs at ≥ 25 MB/s — ``import-legacy`` and ``analyze LOGDIR`` on 273 MB of seed logs,
beside the seed's own ``cdf_per_step.py`` on the same logs.

Logs come from :func:`benchmarks.gen_seed_logs.write_seed_logs` (the seed logger's events and fields, 8
workers, ≥ 32 steps so ``cdf_per_step.py``'s hard-coded step 31 exists). Each command runs as its own
child process, as a user runs it (interpreter start and imports included); MB/s is log bytes over wall
seconds, and over CPU seconds of the whole process tree (children included) as the load-independent
figure; "cores busy" is CPU over wall (2.0 = both cores of a 2-core machine all the time), the parallel
efficiency. Children run with bytecode caches (``PYTHONPYCACHEPREFIX`` under the temp dir, one warm-up run
of each command on a small log dir first), as a user's second run does: with ``PYTHONDONTWRITEBYTECODE``
set (as in CI shells) every run recompiles pandas and matplotlib, ~2 s of CPU that is no part of the
reader. The seed's script is not part of this repository: its column runs only when
``SEED_SCRIPTS_DIR`` (default ``/work/wt/notes/seed-scripts``) holds ``cdf_per_step.py`` and
``SEED_SCRIPTS_PYTHON`` (default this interpreter) can import matplotlib and seaborn; otherwise the
row says why it was skipped. Before this target the importer ran at ~4 MB/s wall on a busy 2-core
machine and 5.7 MB/s of CPU (31.5 MB: 5.6 s CPU).

``--quick``: 30 MB instead of 273 MB; ``--mb N``: N MB.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._table import Result
from benchmarks.gen_seed_logs import BYTES_PER_REQUEST, write_seed_logs

GOAL_MB_S = 25.0
FULL_MB, QUICK_MB = 273.0, 30.0
WORKERS, STEPS = 8, 34
SEED_SCRIPTS = Path(os.environ.get("SEED_SCRIPTS_DIR", "/work/wt/notes/seed-scripts"))


_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _timed(cmd: list[str], cwd: Path | None = None, cache: Path | None = None) -> tuple[float, float, str]:
    """(wall s, CPU s of the child and its children, output tail) of one command run to completion."""
    env = dict(_ENV, MPLBACKEND="Agg", **({"PYTHONPYCACHEPREFIX": str(cache)} if cache else {}))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])}… exited {proc.returncode}: {(proc.stdout + proc.stderr)[-400:]}")
    return wall, cpu, (proc.stdout + proc.stderr)[-300:]


def _seed_script(logs: Path, cache: Path) -> tuple[float, float] | str:
    """cdf_per_step.py's (wall, CPU) on the logs, or why it did not run."""
    script = SEED_SCRIPTS / "cdf_per_step.py"
    python = os.environ.get("SEED_SCRIPTS_PYTHON", sys.executable)
    if not script.exists():
        return f"skipped: {script} absent (the seed's scripts are not in this repository)"
    probe = subprocess.run([python, "-c", "import matplotlib, seaborn"], capture_output=True)
    if probe.returncode != 0:
        return f"skipped: {python} lacks matplotlib/seaborn (set SEED_SCRIPTS_PYTHON)"
    _timed([python, "-c", "import matplotlib.pyplot, pandas, seaborn"], cache=cache)  # its bytecode cache too
    wall, cpu, _ = _timed([python, str(script)], cwd=logs, cache=cache)  # it reads "." and writes zpics/
    return wall, cpu


def run(quick: bool, mb: float | None = None) -> list[Result]:
    mb = mb or (QUICK_MB if quick else FULL_MB)
    requests = max(1, round(mb * 1e6 / (BYTES_PER_REQUEST * WORKERS * STEPS)))
    cli = [str(Path(sys.executable).parent / "otel-verl")]  # the console script a user runs
    with tempfile.TemporaryDirectory(prefix="bench_seed_") as tmp:
        cache = Path(tmp) / "pycache"
        warm = write_seed_logs(Path(tmp) / "warm", steps=2, workers=2, requests=2, seed=1)
        _timed([*cli, "import-legacy", str(warm), "--spool", str(Path(tmp) / "warm_spool")], cache=cache)
        _timed([*cli, "analyze", str(warm), "--out", str(Path(tmp) / "warm_report")], cache=cache)
        logs = write_seed_logs(Path(tmp) / "logs", steps=STEPS, workers=WORKERS, requests=requests, seed=25)
        size = sum(p.stat().st_size for p in logs.rglob("*.jsonl")) / 1e6
        imp = _timed([*cli, "import-legacy", str(logs), "--spool", str(Path(tmp) / "spool")], cache=cache)
        ana = _timed([*cli, "analyze", str(logs), "--out", str(Path(tmp) / "report")], cache=cache)
        seed = _seed_script(logs, cache)
    shape = f"{size:.0f} MB, {STEPS} steps × {WORKERS} workers × {requests} requests, {os.cpu_count()} CPUs"
    seed_note = (
        f"beside the seed's cdf_per_step.py on the same logs (it reads step_31 only): "
        f"{seed[0]:.1f} s wall, {seed[1]:.1f} s CPU"
        if isinstance(seed, tuple)
        else f"seed cdf_per_step.py {seed}"
    )
    return [
        _row("25.5 seed logs: import-legacy", size, imp, shape, seed_note),
        _row("25.5 seed logs: analyze LOGDIR (figures + findings + HTML)", size, ana, shape, seed_note),
    ]


def _row(target: str, size: float, timed: tuple[float, float, str], shape: str, seed_note: str) -> Result:
    wall, cpu, _ = timed
    return Result(
        target,
        f"≥ {GOAL_MB_S:.0f} MB/s",
        f"{size / wall:.1f} MB/s",
        size / wall >= GOAL_MB_S,
        f"{shape}; {wall:.1f} s wall, {cpu:.1f} s CPU: {size / cpu:.1f} MB/s of CPU, "
        f"{cpu / wall:.2f} cores busy; {seed_note}",
    )


if __name__ == "__main__":
    size = float(sys.argv[sys.argv.index("--mb") + 1]) if "--mb" in sys.argv else None
    for row in run("--quick" in sys.argv, size):
        print(row)
