"""The diagnosis's accuracy goals (issue 29, must-have 5) on a small FIXED sample of benchmarks/bench_diagnosis.py.

15 simulated runs (5 per format: the seed's logs, our spool, our spool with the engine's spans; 3 of them
clean), at most 15k spans each, analyzed by ``otel_verl.analysis.analyze`` exactly as the benchmark does and
scored the same way. The goals are the issue's, for plants costing at least twice the run's spread: ≥ 95 %
named within the first three findings, ≥ 90 % of the slow step's excess explained by its account; at most
one warning per 20 clean runs (on steps the run's own tails did not slow: benchmarks/diagnosis/scoring.py).
The sample is small, so each goal allows what one unlucky case costs: one missed plant, 5 points of
explained share, one warning over the three clean runs. The benchmark's 200 runs (benchmarks/RESULTS.md)
judge the diagnosis; this keeps it from sliding back in CI.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from benchmarks.bench_diagnosis import bench, plan
from benchmarks.diagnosis.shape import FORMATS
from benchmarks.diagnosis.tables import EXPLAINED_GOAL, WITHIN_THREE_GOAL

SAMPLE = [replace(s, max_spans=15_000) for s in plan(15, 29, FORMATS)]


@pytest.fixture(scope="module")
def scored() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return bench(SAMPLE, jobs=2, progress=False)


def test_the_sample_is_what_it_says(scored: tuple[list[dict[str, Any]], list[dict[str, Any]]]) -> None:
    runs, plants = scored
    assert len(runs) == 15 and {r["format"] for r in runs} == set(FORMATS)
    assert sum(r["clean"] for r in runs) == 3
    assert all(r["spans"] for r in runs), "every run was analyzed and its findings.json read back"
    assert sum(p["slow"] for p in plants) >= 10


def test_planted_causes_are_named_within_the_first_three(scored: tuple[list, list]) -> None:
    slow = [p for p in scored[1] if p["slow"]]
    share = sum(p["within_three"] for p in slow) / len(slow)
    missed = [(p["kind"], p["scope"], p["format"], p["first_kind"]) for p in slow if not p["within_three"]]
    assert share >= WITHIN_THREE_GOAL - 1 / len(slow), missed


def test_slow_steps_are_explained(scored: tuple[list, list]) -> None:
    slow = [p for p in scored[1] if p["slow"]]
    share = sum(p["explained"] for p in slow) / len(slow)
    assert share >= EXPLAINED_GOAL - 0.05, [(p["kind"], p["explained"]) for p in slow]


def test_clean_runs_raise_no_warning(scored: tuple[list, list]) -> None:
    clean = [r for r in scored[0] if r["clean"]]
    assert sum(r["false_alarms"] for r in clean) <= 1, [r["false_alarm_kinds"] for r in clean]


def test_every_step_account_adds_up(scored: tuple[list, list]) -> None:
    """parts + unexplained = excess = duration − baseline, and the account's duration is the step's, on every step
    of every run."""
    runs = scored[0]
    assert all(r["has_accounts"] for r in runs)
    assert sum(r["invariant_failures"] for r in runs) == 0
    assert sum(r["duration_mismatches"] for r in runs) == 0
