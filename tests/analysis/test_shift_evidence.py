"""A behaviour shift's evidence is judged against how far the run's own steps stray, where enough of them say it
(issue 50, must-have 4/5: shifts costing >= 25 % of their step, at warning or worse within three).

The sampling model of a step's tokens per call (a median's standard error, clustered by prompt) overstates the
noise of a step of few prompts: ``bench_diagnosis --classes shift --seed 2718``, run 0, a single-turn run of 4
prompts a step, modelled ±0.2 in log tokens per call while its 12 other steps strayed ±0.09, and told a step 1 of
answers 1.8× longer (46 % of a step by the truth) as "step 1's prompts asked for more", information at chance 0.11.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from benchmarks.diagnosis import classes
from benchmarks.diagnosis.class_scoring import score_class_run
from benchmarks.diagnosis.shape import MAX_SPANS_PER_RUN
from benchmarks.diagnosis.write_seed import write_seed
from otel_verl import analysis
from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.patterns.behaviour_shift import MIN_RESIDUALS, _measured


def _analysed(tmp_path: Path, cls: str, index: int) -> tuple[dict, dict]:
    """``bench_diagnosis --classes CLS --runs 16 --seed 2718``'s run ``index`` (a seed-log run): (its findings.json,
    its score)."""
    run, expect = classes.build_class_run(2718 * 1_000_003 + 500_000 + index, "seed", cls, MAX_SPANS_PER_RUN)
    write_seed(run, tmp_path / "data")
    analysis.analyze(tmp_path / "data", tmp_path / "out", html_report=False, figures=False)
    doc = json.loads((tmp_path / "out" / "findings.json").read_text())
    return doc, score_class_run(run, expect, doc)


def test_a_longer_answered_step_of_few_prompts_is_told_as_the_policy_changing(tmp_path: Path) -> None:
    doc, record = _analysed(tmp_path, "shift", 0)
    top = [(f["kind"], f["severity"], f["steps"], f["message"]) for f in doc["findings"][:3]]
    assert record["told"] and record["rank"] <= 3, top
    (f,) = [f for f in doc["findings"] if f["kind"] == k.BEHAVIOUR_SHIFT and f["steps"] == [1]]
    assert f["severity"] in ("warning", "critical") and f["message"].startswith("the policy behaved differently"), f
    assert f["details"]["chance"] <= 0.01, f["details"]


def test_a_clean_runs_natural_step_stays_its_draw_of_prompts(tmp_path: Path) -> None:
    """``--classes clean`` run 15: 13 steps of answers growing, step 1 naturally 1.38x its neighbours' tokens per
    call; its other steps' residuals have heavy tails (a MAD of ±0.06, a deviation of ±0.13): a note, not a shift."""
    doc, record = _analysed(tmp_path, "clean", 15)
    assert record["alarms"] == 0, [f["message"] for f in doc["findings"][:3]]
    (f,) = [f for f in doc["findings"] if f["kind"] == k.BEHAVIOUR_SHIFT and f["steps"] == [1]]
    assert f["severity"] == "info" and f["message"].startswith("step 1's prompts asked for more"), f


def test_the_measured_spread_needs_enough_steps_and_is_raised_for_its_uncertainty() -> None:
    rng = np.random.default_rng(5)
    values = np.exp(rng.normal(5.0, 0.1, 40))
    assert _measured(values[:MIN_RESIDUALS], 0) is None  # 9 other steps: the sampling model alone
    spread = _measured(values, 0)
    assert spread is not None and 0.1 < spread < 0.3  # residuals carry their neighbours' median's noise too
