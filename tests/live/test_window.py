"""The live account's window (docs/live.md, "Live and offline"): a step's usual is made of the rows the tracker
already shows for the steps of its window, each as it was when it was the newest step.

Runs: simulated runs of the diagnosis benchmark (random shapes, planted causes; no Ray), fed to
:class:`LiveAccount` one step at a time.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmarks.bench_diagnosis import plan
from benchmarks.diagnosis.run_model import build_run
from benchmarks.diagnosis.shape import OTLP, OTLP_ENGINE
from benchmarks.diagnosis.write_otlp import write_spool
from otel_verl.analysis.findings.common.thresholds import Thresholds
from otel_verl.analysis.read import load_spans
from otel_verl.analysis.read.step_split import split_by_step
from otel_verl.analysis.tables import Tables
from otel_verl.live import names as n
from otel_verl.live.account import WINDOW_STEPS, LiveAccount
from otel_verl.live.metrics import own_numbers

from .checks import ROUNDED, offline_numbers

RUNS = plan(2, 43, (OTLP, OTLP_ENGINE))
"""Two runs drawn by the benchmark's own plan (a seed of this test's): causes of random kinds and places."""


@pytest.fixture(scope="module", params=RUNS, ids=lambda spec: f"run{spec.index}-{spec.fmt}")
def live_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A simulated run's spool and each step's live row, the account fed one finished step at a time (each step's
    spans split by ``analyze``'s step rule, as the collector hands them over)."""
    spec = request.param
    spool = tmp_path_factory.mktemp("window") / "spool"
    write_spool(build_run(spec.seed, spec.fmt, spec.plants, None, 15_000), spool)
    account, rows = LiveAccount(), {}
    for part in split_by_step(load_spans(spool)):
        if not part.steps:  # the spans of no step come last
            continue
        (step,) = part.steps
        row = account.add_tables(Tables.build(part.spans), step)
        assert row is not None, step
        rows[step] = row.metrics
        assert account.steps == list(range(max(1, step - WINDOW_STEPS + 1), step + 1)), "the window, no more"
    return spool, rows


def _is_rollout_part(key: str) -> bool:
    return key.startswith(n.PART) and not key.startswith(n.PART + "phase/") and key != n.PART + "outside_phases_s"


def test_each_part_is_judged_by_the_rows_shown(live_run: tuple[Path, dict]) -> None:
    """Each part's excess in step N is its seconds less its median over the window's rows as they were logged (a
    rollout part a step's row lacks took 0 s there): no earlier step is valued again."""
    _, rows = live_run
    least = Thresholds().min_steps
    judged = 0
    for step, row in rows.items():
        window = [rows[s] for s in range(max(1, step - WINDOW_STEPS + 1), step + 1)]
        if len(window) < least:
            continue
        for key in (k for k in row if k.startswith(n.PART)):
            if _is_rollout_part(key):
                values = [w.get(key, 0.0) for w in window]
            else:
                values = [w[key] for w in window if key in w]
            excess = row[n.EXCESS + key.removeprefix(n.PART)]
            assert excess == pytest.approx(row[key] - float(np.median(values)), abs=ROUNDED), (step, key)
            judged += 1
        assert row[n.STEP_S] == pytest.approx(row[n.USUAL_S] + row[n.EXCESS_S], abs=ROUNDED)
    assert judged > 0


def test_own_numbers_are_analyzes(live_run: tuple[Path, dict], tmp_path: Path) -> None:
    """A step's own numbers (its time, its rollout's, every part's seconds) are ``analyze``'s over its window."""
    spool, rows = live_run
    for step in (1, WINDOW_STEPS, len(rows)):
        offline, _ = offline_numbers(spool, step, tmp_path / f"s{step}")
        assert own_numbers(rows[step]) == pytest.approx(own_numbers(offline), abs=ROUNDED), step
