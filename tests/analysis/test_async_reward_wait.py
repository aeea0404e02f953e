"""Issue 50 (items 1 and 2): a hung reward in colocate-async is a warning at the step whose trainer waited for it.

Its cost there is held to the trainer's measured wait; the run's step-to-step spread, in colocate-async the rollout's
batch-to-batch rhythm (a third of a step), barred its evidence: a reward hung 18.5 s (usually 0.01 s) that kept the
trainer waiting 9.4 s more (28 % of a step) was a note with an empty basis. An occurrence that alone outlasts two
spreads is no longer barred (:func:`otel_verl.analysis.findings.causes.severity.judge_cause`). Real simulated runs
(the benchmark's builder and spool writer, ``--classes async_reward --seed 4242`` runs 11 and 6), the real
``analyze``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from benchmarks.diagnosis.async_classes import BUILDERS
from benchmarks.diagnosis.async_model import SEPARATE
from benchmarks.diagnosis.shape import OTLP, OTLP_ENGINE
from benchmarks.diagnosis.write_async import write_async
from otel_verl.analysis import analyze
from otel_verl.analysis.findings.common import kinds as k

CAUSES_FIRST = 3


@pytest.mark.parametrize(("seed", "fmt"), [(4242717737, OTLP_ENGINE), (4242717732, OTLP)])
def test_a_hung_reward_in_colocate_async_is_a_warning_where_the_trainer_waited(
    seed: int, fmt: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(os.environ, "OTEL_VERL_ANALYZE_JOBS", "1")
    run, expect = BUILDERS["async_reward"](seed, fmt)
    assert run.ashape.mode != SEPARATE
    (plant,) = run.plants
    analyze(write_async(run, tmp_path / "data"), tmp_path / "out", html_report=False, figures=False)
    findings = json.loads((tmp_path / "out" / "findings.json").read_text())["findings"]
    (told,) = [f for f in findings if f["kind"] == k.SLOW_REWARD]
    assert told["steps"] == list(expect.steps) and told["details"]["dispatch_step"] == plant.step
    assert told["details"]["request_ids"] == list(plant.request_ids)
    assert told["severity"] in ("warning", "critical"), told["details"]["judged"]
    assert "norm" in told["details"]["judged"]["basis"]
    assert findings.index(told) < CAUSES_FIRST
