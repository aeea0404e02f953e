"""Issue 50, clean asynchronous runs: the time outside the trainer's phases is the step minus the *union* of its
phases (never a sum that overlaps go negative in), and the first step's wait for the first samples is the pipeline
filling, a note. Unit tests on hand-built intervals; then both asynchronous CPU demos with nothing planted."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from otel_verl.analysis.findings.account.step_account import PIPELINE_FILLING, outside_s
from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.common.record import SEVERITIES
from otel_verl.analysis.findings.steps.async_account import AsyncStep

S = 1_000_000_000


def test_outside_is_the_step_minus_the_union_of_its_phases() -> None:
    # a sync step: phases one after another inside it, 1 s outside them
    assert outside_s(0, 10 * S, [0, 4 * S], [4 * S, 9 * S]) == pytest.approx(1.0)
    # an async step: two updates' phases overlap each other (a sum gave 12 s of a 10 s step: -2 s outside)
    assert outside_s(0, 10 * S, [0, 2 * S, 5 * S], [6 * S, 8 * S, 9 * S]) == pytest.approx(1.0)
    # a rollout window crossing both of the step's edges covers it all: 0, never negative
    assert outside_s(2 * S, 6 * S, [0, 3 * S], [8 * S, 5 * S]) == 0.0
    # a phase beyond the step's end counts only inside it
    assert outside_s(0, 10 * S, [8 * S], [14 * S]) == pytest.approx(8.0)
    assert outside_s(0, 10 * S, [], []) == pytest.approx(10.0)
    assert outside_s(5 * S, 5 * S, [0], [S]) == 0.0  # an empty step


def test_a_random_overlap_never_goes_negative() -> None:
    rng = np.random.default_rng(50)
    for _ in range(200):
        lo, hi = sorted(int(x) for x in rng.integers(0, 20 * S, 2))
        starts = rng.integers(-5 * S, 25 * S, 6)
        ends = starts + rng.integers(0, 10 * S, 6)
        got = outside_s(lo, hi, [int(x) for x in starts], [int(x) for x in ends])
        grid = np.arange(lo, hi, S // 100) if hi > lo else np.zeros(0, dtype=np.int64)
        inside = ((grid[:, None] >= starts) & (grid[:, None] < ends)).any(axis=1) if len(grid) else grid
        assert 0.0 <= got <= (hi - lo) / S
        assert got == pytest.approx(float((~inside).sum()) / 100, abs=0.02)


def test_a_part_that_waited_out_a_pause_is_told_by_its_share_in_it() -> None:
    """colocate_async sleeps the replicas while the trainer trains: a request's way to the engine that waited for
    them to wake lies in the pause (no anomaly, :data:`.anomalies.PAUSED_SHARE`); one beside it does not."""
    pauses = (np.array([2, 10]) * S, np.array([5, 12]) * S)
    acc = AsyncStep(1, "colocate_async", 20.0, 0.0, 0.0, 1, 5.0, 5.0, 0.0, pauses=pauses)
    share = acc.paused_share(np.array([2, 4, 6, 9, 3]) * S, np.array([5, 8, 7, 13, 3]) * S)
    assert share == pytest.approx([1.0, 0.25, 0.0, 0.5, 0.0])
    assert AsyncStep(1, "separate_async", 1.0, 0, 0, 1, 0, 0, 0).paused_share(np.array([0]), np.array([S])) == [0.0]


# ------------------------------------------------------- both asynchronous trainers, nothing planted (serial)
CLEAN_ASYNC = {"steps": 3, "val_before_train": False, "ray_cpus": None}
NEGATIVE = re.compile(r"-\s?\d+(\.\d+)?\s?s\b")


@pytest.mark.ray
@pytest.mark.parametrize("trainer", ["v1-separate-async", "v1-colocate-async"])
def test_clean_async_demo_raises_no_warning(tmp_path_factory: pytest.TempPathFactory, trainer: str) -> None:
    """Three steps (the first fills the pipeline, two more to judge): no finding at warning or worse, the first
    step told as the pipeline filling, and no negative time outside the trainer's phases anywhere."""
    from conftest import _demo_run

    _, _, _, out = _demo_run(tmp_path_factory, f"clean-{trainer}", trainer=trainer, **CLEAN_ASYNC)
    data = json.loads((out / "findings.json").read_text())
    print(data["summary"]["verdict"])
    loud = [f for f in data["findings"] if SEVERITIES.index(f["severity"]) < SEVERITIES.index("info")]
    assert loud == [], [f["message"] for f in loud]
    assert data["steps"][0]["notes"] == [PIPELINE_FILLING]
    assert data["steps"][0]["baseline_s"] is None  # a first step has no history
    for f in data["findings"]:
        if f["kind"] == k.SLOW_OUTSIDE_PHASES:
            assert not NEGATIVE.search(f["message"]), f["message"]
            assert f["details"].get("value", 0) >= 0 and f["details"].get("usual", 0) >= 0
    for s in data["steps"][1:]:
        phases = [p for p in s["parts"] if p["kind"] == k.PART_PHASE]
        assert s["duration_s"] - sum(p["value_s"] for p in phases) >= -1e-3, s  # the phases fit in the step
        # the step's excess splits into the trainer's parts: its phases and the time outside them
        outside = s["unexplained"].get(k.PART_OUTSIDE_PHASES, 0.0)
        assert sum(p["seconds"] for p in phases) + outside == pytest.approx(s["excess_s"], abs=1e-3)
        assert {p["phase"] for p in phases} >= {"gen", "update_actor"}
        assert len(phases) == len({p["phase"] for p in phases})  # a phase run by every update: one part
