"""Issue 25 target 5: seed logs at ≥ 25 MB/s — ``import-legacy`` and ``analyze LOGDIR`` on 273 MB of seed logs,
beside the seed's own ``cdf_per_step.py`` on the same logs.

Logs come from :func:`benchmarks.gen_seed_logs.write_seed_logs` (the seed logger's events and fields, 8
workers, ≥ 32 steps so ``cdf_per_step.py``'s hard-coded step 31 exists). Each command runs as its own
child process, as a user runs it (interpreter start and imports included); MB/s is log bytes over wall
seconds, and over CPU seconds of the whole process tree (children included) as the load-independent
figure. The seed's script is not part of this repository: its column runs only when
``SEED_SCRIPTS_DIR`` (default ``/work/wt/notes/seed-scripts``) holds ``cdf_per_step.py`` and
``SEED_SCRIPTS_PYTHON`` (default this interpreter) can import matplotlib and seaborn; otherwise the
row says why it was skipped. Before this target the importer ran at ~4 MB/s wall on a busy 2-core
machine and 5.7 MB/s of CPU (31.5 MB: 5.6 s CPU).

``--quick``: 30 MB instead of 273 MB.
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


def _timed(cmd: list[str], cwd: Path | None = None) -> tuple[float, float, str]:
    """(wall s, CPU s of the child and its children, output tail) of one command run to completion."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=dict(os.environ, MPLBACKEND="Agg"))
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])}… exited {proc.returncode}: {(proc.stdout + proc.stderr)[-400:]}")
    return wall, cpu, (proc.stdout + proc.stderr)[-300:]


def _seed_script(logs: Path) -> tuple[float, float] | str:
    """cdf_per_step.py's (wall, CPU) on the logs, or why it did not run."""
    script = SEED_SCRIPTS / "cdf_per_step.py"
    python = os.environ.get("SEED_SCRIPTS_PYTHON", sys.executable)
    if not script.exists():
        return f"skipped: {script} absent (the seed's scripts are not in this repository)"
    probe = subprocess.run([python, "-c", "import matplotlib, seaborn"], capture_output=True)
    if probe.returncode != 0:
        return f"skipped: {python} lacks matplotlib/seaborn (set SEED_SCRIPTS_PYTHON)"
    wall, cpu, _ = _timed([python, str(script)], cwd=logs)  # it reads "." and writes zpics/
    return wall, cpu


def run(quick: bool) -> list[Result]:
    mb = QUICK_MB if quick else FULL_MB
    requests = max(1, round(mb * 1e6 / (BYTES_PER_REQUEST * WORKERS * STEPS)))
    cli = [str(Path(sys.executable).parent / "otel-verl")]  # the console script a user runs
    with tempfile.TemporaryDirectory(prefix="bench_seed_") as tmp:
        logs = write_seed_logs(Path(tmp) / "logs", steps=STEPS, workers=WORKERS, requests=requests, seed=25)
        size = sum(p.stat().st_size for p in logs.rglob("*.jsonl")) / 1e6
        imp_wall, imp_cpu, _ = _timed([*cli, "import-legacy", str(logs), "--spool", str(Path(tmp) / "spool")])
        ana_wall, ana_cpu, _ = _timed([*cli, "analyze", str(logs), "--out", str(Path(tmp) / "report")])
        seed = _seed_script(logs)
    shape = f"{size:.0f} MB, {STEPS} steps × {WORKERS} workers × {requests} requests, {os.cpu_count()} CPUs"
    seed_note = (
        f"seed cdf_per_step.py (reads step_31 only): {seed[0]:.1f} s wall, {seed[1]:.1f} s CPU"
        if isinstance(seed, tuple)
        else seed
    )
    return [
        Result(
            "25.5 seed logs: import-legacy",
            f"≥ {GOAL_MB_S:.0f} MB/s",
            f"{size / imp_wall:.1f} MB/s",
            size / imp_wall >= GOAL_MB_S,
            f"{shape}; {imp_wall:.1f} s wall, {imp_cpu:.1f} s CPU ({size / imp_cpu:.1f} MB/s of CPU); {seed_note}",
        ),
        Result(
            "25.5 seed logs: analyze LOGDIR (figures + findings + HTML)",
            f"≥ {GOAL_MB_S:.0f} MB/s",
            f"{size / ana_wall:.1f} MB/s",
            size / ana_wall >= GOAL_MB_S,
            f"{shape}; {ana_wall:.1f} s wall, {ana_cpu:.1f} s CPU ({size / ana_cpu:.1f} MB/s of CPU); {seed_note}",
        ),
    ]


if __name__ == "__main__":
    for row in run("--quick" in sys.argv):
        print(row)
