"""The analyzer on real traces: the CPU demo with every planted knob (see conftest.DEMO_PLANTED), each
problem found, named and placed; the same demo without them gives no warning."""

from __future__ import annotations

import json

import pytest

from otel_verl.analysis.findings.causes import flatten

pytestmark = pytest.mark.ray

SERIOUS = ("warning", "critical")


def _requests_of(spans, step: int, sample: int) -> set[str]:
    req = spans[(spans["kind"] == "request") & (spans["step"] == step) & (spans["sample_index"] == sample)]
    return set(req["request_id"])


def _all(analysis):
    """Every detector finding, causes and the symptoms grouped under them (these tests check detectors)."""
    return flatten(analysis.findings)


def _serious(analysis, kind: str):
    return [f for f in _all(analysis) if f.kind == kind and f.severity in SERIOUS]


def test_straggler_worker_with_its_idle_gap(demo_planted):
    _, _, analysis, _ = demo_planted
    (straggler,) = _serious(analysis, "straggler_worker")
    assert (straggler.step, straggler.worker) == (3, 0)
    assert straggler.value >= 5.0 and straggler.evidence
    assert "worker 0" in straggler.message and "step 3" in straggler.message
    assert "idle gap from" in straggler.message  # the gap that caused it, with its bounds
    (gap,) = _serious(analysis, "idle_gap")
    # the 24 s stall, from when worker 0's other requests (the slowest planted +8 s) were done
    assert (gap.step, gap.worker) == (3, 0) and 10.0 <= gap.value <= 24.5
    assert 23.0 <= gap.details["gap_end_s"] <= 28.0


def test_slow_step(demo_planted):
    _, _, analysis, _ = demo_planted
    slow = [f for f in _all(analysis) if f.kind == "slow_step"]
    assert [f.step for f in slow] == [3]
    assert slow[0].severity in SERIOUS and "worker 0" in slow[0].message


def test_slow_reward_is_a_slow_event(demo_planted):
    _, spans, analysis, _ = demo_planted
    rewards = [f for f in _serious(analysis, "slow_event") if f.event == "reward" and f.worker == 1]
    (f,) = rewards  # one finding per (step, worker, event), both rollouts of sample 6 in it
    assert f.step == 3 and set(f.details["request_ids"]) == _requests_of(spans, 3, 6)
    assert f.details["count"] == 2 and 2.5 <= f.value <= 6.0 and "reward" in f.message


def test_slow_turn_is_a_turn_anomaly(demo_planted):
    _, spans, analysis, _ = demo_planted
    (f,) = [t for t in _serious(analysis, "turn_anomaly") if t.worker == 1]
    assert f.step == 3 and f.details["turn_index"] == 1
    assert set(f.details["request_ids"]) == _requests_of(spans, 3, 5)
    assert 5.5 <= f.value <= 10.0 and "turn index 1" in f.message and "in the engine" in f.message


def test_slow_turn_and_reward_on_the_stalled_worker_are_not_folded_into_its_gap(demo_planted):
    """Worker 0 stalls; its slow turn (sample 0) and slow reward (sample 2) ran before the gap: they are
    their own findings, and the gap does not count them as spans it stretched."""
    _, spans, analysis, _ = demo_planted
    (gap,) = _serious(analysis, "idle_gap")
    stretched = {s["request_id"] for s in gap.details.get("stretched", [])}
    turn0 = _requests_of(spans, 3, 0)
    turns = [f for f in _all(analysis) if f.kind == "turn_anomaly" and (f.step, f.worker) == (3, 0)]
    (turn,) = [f for f in turns if turn0 & set(f.details["request_ids"])]
    assert set(turn.details["request_ids"]) == turn0 and turn.details["turn_index"] == 0
    reward2 = _requests_of(spans, 3, 2)
    rewards = [f for f in _all(analysis) if f.kind == "slow_event" and (f.step, f.worker) == (3, 0)]
    (reward,) = [f for f in rewards if f.event == "reward"]
    assert set(reward.details["request_ids"]) == reward2 and 4.5 <= reward.value <= 8.0
    assert 7.5 <= turn.value <= 12.0
    assert not (turn0 | reward2) & stretched
    for f in (turn, reward):
        assert f.details["last_end_s"] <= gap.details["gap_start_s"] + 1e-6  # before the gap, as planted
        assert "gap_overlap_s" not in f.details


def test_tail_requests_name_what_dominated_them(demo_planted):
    _, spans, analysis, _ = demo_planted
    tails = [f for f in _all(analysis) if f.kind == "tail_request" and f.step == 3]
    assert tails and tails[0].request_id in _requests_of(spans, 3, 3)  # the stalled sample is slowest
    assert "engine" in tails[0].message


def test_aborted_waste_per_step(demo_planted):
    _, spans, analysis, _ = demo_planted
    waste = {f.step: f for f in _all(analysis) if f.kind == "aborted_waste"}
    req = spans[(spans["kind"] == "request") & (spans["validate"] == False)]  # noqa: E712 - nullable boolean
    aborted = req[req["request_status"] == "aborted"].groupby("step").size()
    # 1/8 over-sampling aborts the 2 requests still running when 14 of 16 are done; in a fast step
    # they may already be finishing, but the planted step's stalled pair is 20 s behind
    assert 3 in aborted.index and aborted[3] == 2
    assert set(waste) == {int(s) for s in aborted.index}
    for step, n in aborted.items():
        assert f"{n} of 16 requests were aborted" in waste[int(step)].message


def test_no_false_culprits(demo_planted):
    """Everything serious is in the planted step, on the planted workers."""
    _, _, analysis, out = demo_planted
    serious = [f for f in _all(analysis) if f.severity in SERIOUS and f.kind != "aborted_waste"]
    assert {f.step for f in serious} == {3}
    data = json.loads((out / "findings.json").read_text())
    order = {"critical": 0, "warning": 1, "info": 2}
    serious = [order[f["severity"]] < 2 for f in data["findings"]]
    assert serious == sorted(serious, reverse=True)  # warnings and worse first, then by step seconds lost


def test_report_files_written(demo_planted):
    _, _, _, out = demo_planted
    assert (out / "report.html").stat().st_size > 10_000
    assert len(list(out.glob("*.png"))) >= 9


def test_clean_run_is_quiet(demo_clean):
    _, spans, analysis, _ = demo_clean
    assert len(spans[spans["kind"] == "request"]) > 0
    loud = [(f.kind, f.step, f.worker, f.message) for f in _all(analysis) if f.severity in SERIOUS]
    assert loud == []
