"""Diagnosis on planted anomalies with known numbers; a clean run stays quiet."""

from __future__ import annotations

import pytest
from builder import Plan, all_findings, build_run

from otel_verl.analysis import Thresholds, diagnose
from otel_verl.analysis.findings.record import fmt_s
from otel_verl.analysis.read import load_spans


@pytest.fixture(scope="module")
def findings(planted_spans):
    return all_findings(planted_spans)


def by(findings, kind, **kw):
    return [f for f in findings if f.kind == kind and all(getattr(f, k) == v for k, v in kw.items())]


def test_idle_gap_found_with_its_length(findings) -> None:
    gaps = by(findings, "idle_gap")
    assert [(g.step, g.worker) for g in gaps] == [(3, 1)]
    g = gaps[0]
    assert g.value == pytest.approx(60.0, abs=1.0)  # planted 60 s stall
    assert g.details["gap_start_s"] == pytest.approx(2.0, abs=0.2)
    assert g.details["in_flight"] >= 2
    assert g.evidence and len(g.evidence[0]["span_id"]) == 16


def test_stragglers_name_their_cause(findings) -> None:
    s3 = by(findings, "straggler_worker", step=3)
    assert [f.worker for f in s3] == [1]
    assert "idle gap" in s3[0].message and "worker 1" in s3[0].message
    assert s3[0].details["others_barrier_wait_s"] > 3 * 50
    s5 = by(findings, "straggler_worker", step=5)
    assert [f.worker for f in s5] == [2] and "reward" in s5[0].message
    s6 = by(findings, "straggler_worker", step=6)
    assert [f.worker for f in s6] == [0] and "engine call of turn index 1" in s6[0].message


def test_slow_steps_are_exactly_the_planted_ones(findings) -> None:
    assert sorted(f.step for f in by(findings, "slow_step")) == [3, 5, 6]


def test_slow_reward(findings) -> None:
    ev = by(findings, "slow_event")
    assert [(f.step, f.worker, f.request_id, f.event) for f in ev] == [(5, 2, "s5w2r4", "reward")]
    assert ev[0].value == pytest.approx(25.0, abs=1e-3)
    assert ev[0].baseline == pytest.approx(0.05, abs=1e-3)


def test_turn_anomaly_is_turn_two_and_gap_stretch_is_folded(findings) -> None:
    turns = by(findings, "turn_anomaly")
    assert [(f.step, f.worker, f.request_id, f.details["turn_index"]) for f in turns] == [(6, 0, "s6w0r7", 1)]
    assert turns[0].value == pytest.approx(30.0, abs=1e-3)
    gap = by(findings, "idle_gap")[0]
    assert gap.details.get("stretched_turn_anomaly", 0) >= 1


def test_aborted_waste(findings, planted_spans) -> None:
    ab = by(findings, "aborted_waste")
    assert [f.step for f in ab] == [4]
    req = planted_spans[(planted_spans["kind"] == "request") & (planted_spans["request_status"] == "aborted")]
    assert ab[0].details["aborted"] == len(req) == 4 * 3
    assert ab[0].value == pytest.approx(req["duration"].sum())
    assert ab[0].details["tokens_wasted"] == int(req["response_tokens"].sum())


def test_tail_requests_point_at_the_dominant_event(findings) -> None:
    tail = {f.request_id: f for f in by(findings, "tail_request")}
    assert tail["s5w2r4"].event == "reward"
    assert tail["s6w0r7"].event == "engine" and tail["s6w0r7"].details["turn_index"] == 1


def test_causes_ranked_by_step_seconds_lost(planted_spans) -> None:
    """Warnings and worse first, each band by the seconds of step time lost; every detector finding of the
    planted step-3 stall is one cause (the gap) with the straggler and slow step as its symptoms."""
    causes = diagnose(planted_spans)
    serious = [f.severity != "info" for f in causes]
    assert serious == sorted(serious, reverse=True)
    for band in (True, False):
        lost = [f.seconds for f in causes if (f.severity != "info") == band]
        assert lost == sorted(lost, reverse=True)
    top = causes[0]
    assert (top.kind, top.step, top.worker) == ("idle_gap", 3, 1)
    assert {"straggler_worker", "slow_step"} <= {s.kind for s in top.symptoms}
    assert top.seconds > 10 and f"cost step 3 {fmt_s(top.seconds)}" in top.message
    assert not [f for f in causes if f.kind in ("straggler_worker", "slow_step") and f.step == 3]


def test_clean_run_has_no_warnings(clean_spans) -> None:
    found = all_findings(clean_spans)
    assert [f for f in found if f.severity != "info"] == []
    assert {f.kind for f in found} <= {"tail_request"}


def test_thresholds_override_changes_outcome(planted_spans) -> None:
    strict = Thresholds().with_overrides(["event_min_s=100"])
    assert not [f for f in all_findings(planted_spans, strict) if f.kind == "slow_event"]


def test_bad_override_is_one_clear_error() -> None:
    from otel_verl.analysis.errors import AnalysisInputError

    with pytest.raises(AnalysisInputError, match="unknown threshold 'nope'"):
        Thresholds().with_overrides(["nope=1"])


def _diagnose(tmp_path, plan: Plan):
    build_run(plan).write(tmp_path)
    spans = load_spans(tmp_path)
    return spans, all_findings(spans)


def test_slow_spans_outside_a_gap_are_not_folded_into_it(tmp_path) -> None:
    """A stall on worker 1 of step 3 from 1 s to 61 s; on the same worker a 25 s reward that runs after it and
    a 30 s engine call of turn index 1 that the stall stretched to 90 s. The stall explains the turn 0 calls it
    stretched (folded into the gap); the reward is outside it, and the turn is 30 s too slow without it."""
    spans, found = _diagnose(
        tmp_path, Plan(straggler=(3, 1, 1.0, 60.0), slow_reward=(3, 1, 4, 25.0), slow_turn=(3, 1, 7, 30.0))
    )
    (gap,) = by(found, "idle_gap", step=3, worker=1)
    assert gap.value == pytest.approx(60.0, abs=0.5)
    stretched = gap.details["stretched"]
    assert gap.details["stretched_turn_anomaly"] >= 10  # the turn 0 engine calls in flight at 1 s
    assert len(stretched) == min(20, gap.details["stretched_turn_anomaly"])  # listed up to 20
    assert {s["kind"] for s in stretched} == {"turn_anomaly"}
    assert all(s["overlap_s"] == pytest.approx(60.0, abs=0.5) for s in stretched)
    assert ("s3w1r4", "reward") not in {(s["request_id"], s["event"]) for s in stretched}
    (reward,) = by(found, "slow_event", step=3, worker=1, event="reward")
    assert reward.request_id == "s3w1r4" and reward.value == pytest.approx(25.0, abs=1e-3)
    turn = [f for f in by(found, "turn_anomaly", step=3, worker=1) if f.details["turn_index"] == 1]
    assert [f.request_id for f in turn] == ["s3w1r7"]
    assert turn[0].value == pytest.approx(30.0 + gap.value, abs=0.1)
    assert turn[0].details["gap_overlap_s"] == pytest.approx(gap.value, abs=0.1)
    assert "inside an idle gap" in turn[0].message
    # the reward starts after the gap: the stall did not stretch it
    r = spans[(spans["request_id"] == "s3w1r4") & (spans["kind"] == "reward")].iloc[0]
    w0 = spans[(spans["kind"] == "worker") & (spans["step"] == 3) & (spans["worker"] == 1)]["start_ns"].iloc[0]
    assert (r["start_ns"] - w0) / 1e9 >= gap.details["gap_end_s"]


def test_process_stall_is_one_finding_not_n_slow_events(tmp_path) -> None:
    """Worker 1's process pauses 3 s in step 2 while three requests are in their first preprocess (0.03 s):
    their ends are recorded together when it resumes. One idle_gap (process_stall) finding, info (3 s is far
    below idle_gap_min_s), and no slow_event: the culprit is the pause, not preprocessing."""
    spans, found = _diagnose(tmp_path, Plan(seed=7, pause=(2, 1, 0.095, 3.0)))
    pre = spans[(spans["kind"] == "preprocess") & (spans["step"] == 2) & (spans["worker"] == 1)]
    stalled = pre[pre["duration"] > 2.5]
    assert len(stalled) == stalled["request_id"].nunique() == 3  # the scenario: three held preprocess spans
    assert stalled["end_ns"].max() - stalled["end_ns"].min() < 10_000_000  # released within 10 ms
    (stall,) = [f for f in found if f.kind == "idle_gap"]
    assert (stall.step, stall.worker, stall.severity) == (2, 1, "info")
    assert stall.details["pattern"] == "process_stall" and stall.details["events"] == {"preprocess": 3}
    assert stall.value == pytest.approx(3.0, abs=0.05)
    assert set(stall.details["request_ids"]) == set(stalled["request_id"])
    assert "process stalled" in stall.message and "not slow preprocess" in stall.message
    assert not [f for f in found if f.kind == "slow_event"]
    assert [f for f in found if f.severity != "info"] == []


def test_a_long_process_pause_is_a_real_gap(tmp_path) -> None:
    """The same pause for 20 s is an idle gap (no span starts or ends for 20 s): reported once, critical."""
    _, found = _diagnose(tmp_path, Plan(seed=7, pause=(2, 1, 0.095, 20.0)))
    gaps = by(found, "idle_gap", step=2, worker=1)
    assert len(gaps) == 1 and gaps[0].details["pattern"] == "idle_gap" and gaps[0].severity == "critical"
    assert gaps[0].value == pytest.approx(20.0, abs=0.1)
    assert not [f for f in found if f.kind == "slow_event"]


def test_slow_events_grouped_per_step_worker_event(tmp_path) -> None:
    """Four requests of worker 2 in step 5 with a 25 s reward: one finding with a count, not four."""
    rids = [f"s5w2r{i}" for i in (4, 5, 6, 7)]
    _, found = _diagnose(tmp_path, Plan(slow_reward=(5, 2, (4, 5, 6, 7), 25.0)))
    (f,) = by(found, "slow_event")
    assert (f.step, f.worker, f.event, f.details["count"]) == (5, 2, "reward", 4)
    assert sorted(f.details["request_ids"]) == rids and f.request_id in rids
    assert f.value == pytest.approx(25.0, abs=1e-3) and "in 4 requests" in f.message
    assert len(f.evidence) == 4


def test_severity_follows_what_it_cost(tmp_path) -> None:
    """A 25 s reward that kept its worker busy 20+ s past its other requests is critical (it cost a typical
    ~5 s step several times over); the same detector with a 100 s critical floor says warning."""
    spans, found = _diagnose(tmp_path, Plan(slow_reward=(5, 2, 4, 25.0)))
    (f,) = by(found, "slow_event")
    assert f.severity == "critical" and f.details["worker_delay_s"] > 20
    assert f.impact_s == f.details["worker_delay_s"]
    (g,) = by(all_findings(spans, Thresholds(critical_min_s=100)), "slow_event")
    assert g.severity == "warning"
    (h,) = by(all_findings(spans, Thresholds(warning_fraction=100)), "slow_event")
    assert h.severity == "info"
