"""Rows 2k/2l: instructions one rollout chunk executes, traced vs untraced (callgrind), engine answering at once.

A stricter check than the wall-time rows (bench_demo_overhead's information rows, bench_realistic_overhead's
gates): its rows are marked "(stricter)" and do not decide the suite's exit code. With the engine answering
at once the chunk is verl's own CPU work only, so the ratio is the per-request hot path's cost at its
most visible.

Wall time on a shared 2-core VM moves by several percent between identical chunks (CPU steal, the
neighbours' caches), more than the 1 % the target allows; the wall-time rows (bench_demo_overhead) run
traced and untraced chunks side by side to cancel most of it, but at busy times even their control pair
spreads by 2-3 %. Instruction counts do not move: callgrind counts every instruction the process
executes, and two untraced runs agree to ~0.05 %. One process per mode (in parallel, one per core)
runs the same worker, engine and tools as bench_demo_overhead and counts its third chunk; valgrind is
~50× slower, so the chunk is 16 prompts × n=4 = 64 requests of ≤3 turns rather than 512 (the cost
per request is what matters, and it does not depend on the chunk's size). Needs valgrind
(``apt-get install valgrind``); without it the rows say so.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks._table import Result

PROMPTS = 16
MODES = ("untraced", "request", "full")
_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def count(mode: str, prompts: int, workdir: Path) -> int:
    """Instructions of one chunk in ``mode`` (a fresh interpreter under callgrind)."""
    command = [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        f"--callgrind-out-file={workdir / mode}.callgrind",
        sys.executable,
        "-m",
        "benchmarks._callgrind_chunk",
        mode,
        str(prompts),
    ]
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONHASHSEED": "0"}  # same set orders in every mode
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=3600, check=False)
    found = _REFS.findall(done.stderr)
    if done.returncode != 0 or not found:
        raise RuntimeError(f"callgrind run of {mode!r} failed (exit {done.returncode}): {done.stderr[-300:]}")
    return int(found[-1].replace(",", ""))


def run(quick: bool) -> list[Result]:
    from otel_verl.config import DEFAULT_DETAIL

    if quick:
        return []  # ~10 min of valgrind: full suite only
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        missing = "valgrind not installed (apt-get install valgrind)"
        return [
            Result(
                "2k. instant engine: rollout instructions (callgrind)",
                "≤ 1.01× / ≤ 1.03×",
                "not run",
                False,
                missing,
                False,
            )
        ]
    with tempfile.TemporaryDirectory(prefix="otel-verl-bench-cg-") as tmp, ThreadPoolExecutor(os.cpu_count()) as pool:
        counts = dict(zip(MODES, pool.map(lambda m: count(m, PROMPTS, Path(tmp)), MODES), strict=True))
    base = counts["untraced"]
    ratio = {m: counts[m] / base for m in MODES}
    requests = PROMPTS * 4
    detail = f"one chunk of {requests} requests × ≤3 turns: untraced {base / 1e6:,.1f}M instructions; " + ", ".join(
        f"{m} {(counts[m] - base) / requests / 1e3:+,.0f}k per request" for m in MODES[1:]
    )
    default = ratio.get(DEFAULT_DETAIL, float("nan"))
    return [
        Result(
            f"2k. instant engine: rollout instructions, default level ({DEFAULT_DETAIL})",
            "≤ 1.01×",
            f"{default:.4f}×",
            default <= 1.01,
            detail,
            gate=False,
        ),
        Result(
            "2l. instant engine: rollout instructions, full detail",
            "≤ 1.03×",
            f"{ratio['full']:.4f}×",
            ratio["full"] <= 1.03,
            detail,
            gate=False,
        ),
    ]


if __name__ == "__main__":
    for row in run(quick=False):
        print(row)
