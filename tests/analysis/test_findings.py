"""Diagnosis on planted anomalies with known numbers; a clean run stays quiet."""

from __future__ import annotations

import pytest

from otel_verl.analysis.detectors import diagnose
from otel_verl.analysis.findings import SEVERITIES
from otel_verl.analysis.thresholds import Thresholds


@pytest.fixture(scope="module")
def findings(planted_spans):
    return diagnose(planted_spans)


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
    assert [f.worker for f in s6] == [0] and "turn 2" in s6[0].message


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


def test_sorted_by_severity_then_impact(findings) -> None:
    ranks = [SEVERITIES.index(f.severity) for f in findings]
    assert ranks == sorted(ranks)
    for sev in SEVERITIES:
        impacts = [f.impact_s for f in findings if f.severity == sev]
        assert impacts == sorted(impacts, reverse=True)


def test_clean_run_has_no_warnings(clean_spans) -> None:
    found = diagnose(clean_spans)
    assert [f for f in found if f.severity != "info"] == []
    assert {f.kind for f in found} <= {"tail_request"}


def test_thresholds_override_changes_outcome(planted_spans) -> None:
    strict = Thresholds().with_overrides(["event_min_s=100"])
    assert not [f for f in diagnose(planted_spans, strict) if f.kind == "slow_event"]


def test_bad_override_is_one_clear_error() -> None:
    from otel_verl.analysis.errors import AnalysisInputError

    with pytest.raises(AnalysisInputError, match="unknown threshold 'nope'"):
        Thresholds().with_overrides(["nope=1"])
