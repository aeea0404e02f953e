"""The accuracy benchmark's scorer (benchmarks/diagnosis/matching.py, scoring.py) on hand-made findings.json
documents against a real simulated run's ground truth: what counts as naming a plant, how ranks skip other
plants' findings, what a slow step's explained share is, which alarms are false."""

from __future__ import annotations

import statistics
from typing import Any

import pytest

from benchmarks.diagnosis.effects import Plant
from benchmarks.diagnosis.matching import matches
from benchmarks.diagnosis.run_model import SimRun, build_run
from benchmarks.diagnosis.scoring import invariant_holds, natural_slow_steps, score_run
from benchmarks.diagnosis.shape import OTLP
from benchmarks.diagnosis.tables import goals, markdown
from otel_verl.analysis.findings.common import kinds as k

W = 8


def _finding(plant: Plant, n_workers: int = W, **over: Any) -> dict[str, Any]:
    """A finding that names ``plant`` exactly as the contract says."""
    details: dict[str, Any] = {"scope": plant.scope}
    workers = list(plant.workers)
    if plant.scope == k.SCOPE_STEP:
        workers = list(range(n_workers))
    if plant.phase:
        details["phase"] = plant.phase
    if plant.replica is not None:
        details["replica"] = plant.replica
    if plant.sample_index is not None:
        details["sample_index"] = plant.sample_index
    if plant.request_ids:
        details["request_ids"] = list(plant.request_ids)
    f = {
        "kind": plant.kind,
        "severity": "critical",
        "step": plant.step,
        "steps": [plant.step],
        "worker": workers[0] if len(workers) == 1 else None,
        "workers": workers,
        "seconds": plant.cost,
        "details": details,
    }
    f.update(over)
    return f


def _account(step: int, excess: float, unexplained: float, parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "step": step,
        "duration_s": 100.0 + excess,
        "baseline_s": 100.0,
        "excess_s": excess,
        "parts": parts,
        "unexplained_s": unexplained,
    }


@pytest.fixture(scope="module")
def run() -> SimRun:
    """A planted run with several plants of different scopes, one of them slow (found deterministically)."""
    for seed in range(200):
        r = build_run(seed, OTLP, plants=4, max_spans=4_000)
        if len(r.plants) >= 3 and len({p.scope for p in r.plants}) >= 2 and any(p.size >= 2 for p in r.plants):
            return r
    raise AssertionError("no run with three plants of two scopes")


def test_the_exact_finding_matches_and_each_field_can_break_it(run: SimRun) -> None:
    n = run.shape.workers
    for p in run.plants:
        f = _finding(p, n)
        assert matches(p, f, n)
        assert not matches(p, {**f, "kind": "slow_gap" if p.kind != "slow_gap" else "stall"}, n)
        assert not matches(p, {**f, "step": p.step + 1, "steps": [p.step + 1]}, n)
        if p.scope == k.SCOPE_WORKER:
            other = (p.workers[0] + 1) % n
            assert not matches(p, {**f, "worker": other, "workers": [other]}, n)
            assert not matches(p, {**f, "workers": list(range(n)), "details": {"scope": k.SCOPE_STEP}}, n)
        if p.scope == k.SCOPE_STEP:
            assert not matches(p, {**f, "details": {"scope": k.SCOPE_WORKER}, "workers": [0]}, n)
        if p.scope == k.SCOPE_PHASE:
            assert not matches(p, {**f, "details": {"scope": k.SCOPE_PHASE, "phase": "not-" + str(p.phase)}}, n)


def test_a_perfect_document_scores_full_marks(run: SimRun) -> None:
    findings = [_finding(p, run.shape.workers) for p in run.plants]
    accounts = [
        _account(p.step, p.cost, 0.0, [{"kind": "phase", "seconds": p.cost, "cause": p.kind, "phase": p.phase}])
        for p in run.plants
    ]
    record, plants = score_run(run, {"findings": findings, "steps": accounts})
    assert all(p["named_first"] and p["rank"] == 1 and p["within_three"] for p in plants)
    assert [p["explained"] for p in plants if p["slow"]] == [1.0] * sum(p["slow"] for p in plants)
    assert all(p["right_part"] == pytest.approx(1.0) for p in plants if p["slow"])
    assert record["false_alarms"] == 0 and record["invariant_failures"] == 0
    assert record["alarms"] == len(findings)


def test_other_plants_findings_do_not_push_a_plant_out_of_the_first_three(run: SimRun) -> None:
    n = run.shape.workers
    noise = {"kind": k.SLOW_GAP, "severity": "warning", "step": 999, "steps": [999], "details": {"scope": "worker"}}
    last = run.plants[-1]
    # every other plant's finding, then noise, then the last plant's: plain rank counts them all, rank not
    findings = [_finding(p, n) for p in run.plants[:-1]] + [noise, _finding(last, n)]
    _, plants = score_run(run, {"findings": findings})
    mine = plants[-1]
    assert mine["plain_rank"] == len(run.plants) + 1 and mine["rank"] == 2 and mine["within_three"]
    # information findings are skipped, three unrelated causes push it out
    info = {"kind": k.LONG_TAIL, "severity": "info", "step": last.step, "steps": [last.step], "details": {}}
    _, plants = score_run(run, {"findings": [info, noise, noise, noise, _finding(last, n)]})
    assert plants[-1]["rank"] == 4 and not plants[-1]["within_three"]


def test_named_first_skips_information_and_wants_the_first_cause_of_its_step(run: SimRun) -> None:
    p = run.plants[0]
    n = run.shape.workers
    info = {"kind": k.LONG_TAIL, "severity": "info", "step": p.step, "steps": [p.step], "details": {}}
    wrong = {**_finding(p, n), "kind": k.SLOW_GAP}
    first = score_run(run, {"findings": [info, _finding(p, n)]})[1][0]
    assert first["named_first"]
    first = score_run(run, {"findings": [wrong, _finding(p, n)]})[1][0]
    assert not first["named_first"] and first["first_kind"] == k.SLOW_GAP and first["rank"] == 2


def test_explained_share_is_clipped_and_a_missing_account_explains_nothing(run: SimRun) -> None:
    p = next(p for p in run.plants if p.size >= 2)
    for excess, unexplained, want in ((10.0, 2.5, 0.75), (10.0, -3.0, 1.0), (10.0, 30.0, 0.0), (-1.0, 0.0, 0.0)):
        acc = _account(p.step, excess, unexplained, [{"kind": "gap", "seconds": excess - unexplained}])
        _, plants = score_run(run, {"findings": [], "steps": [acc]})
        assert next(x for x in plants if x["step"] == p.step)["explained"] == pytest.approx(want)
    _, plants = score_run(run, {"findings": []})
    assert next(x for x in plants if x["step"] == p.step)["explained"] == 0.0


def test_the_accounts_invariant_is_checked() -> None:
    good = _account(3, 10.0, 1.0, [{"kind": "tool", "seconds": 9.0}])
    assert invariant_holds(good)
    assert not invariant_holds({**good, "unexplained_s": 2.0})
    assert not invariant_holds({**good, "baseline_s": 95.0})
    assert not invariant_holds({"step": 3})


def test_alarms_on_clean_runs_and_outside_planted_steps_are_false(run: SimRun) -> None:
    clean = build_run(run.seed, OTLP, plants=0, max_spans=4_000)
    ordinary = min(set(range(1, clean.shape.steps + 1)) - natural_slow_steps(clean))
    alarm = {"kind": k.SLOW_TOOL, "severity": "warning", "step": ordinary, "steps": [ordinary], "details": {}}
    info = {**alarm, "severity": "info"}
    record, _ = score_run(clean, {"findings": [alarm, info]})
    assert record["clean"] and record["alarms"] == 1 and record["false_alarms"] == 1
    planted = {p.step for p in run.plants}
    outside = min(set(range(1, run.shape.steps + 1)) - planted - natural_slow_steps(run))
    far = {**alarm, "step": outside, "steps": [outside]}
    near = {**alarm, "step": run.plants[0].step, "steps": [run.plants[0].step]}
    record, _ = score_run(run, {"findings": [far, near]})
    assert record["alarms"] == 2 and record["false_alarms"] == 1


def test_a_step_the_runs_own_tails_slowed_excuses_its_warning() -> None:
    """Found deterministically: a clean run with a step ≥ 3 spreads above the median of its peers."""
    clean = next(r for s in range(100) if natural_slow_steps(r := build_run(s, OTLP, plants=0, max_spans=4_000)))
    step = min(natural_slow_steps(clean))
    durations = clean.durations()
    testing = clean.shape.test_every and step % clean.shape.test_every == 0
    assert testing or durations[step - 1] - statistics.median(durations) >= 2 * clean.spread
    alarm = {"kind": k.LONG_RESPONSE, "severity": "critical", "step": step, "steps": [step], "details": {}}
    record, _ = score_run(clean, {"findings": [alarm]})
    assert (record["alarms"], record["false_alarms"], record["alarms_on_natural_slow_steps"]) == (1, 0, 1)


def test_goal_rows_and_tables_render(run: SimRun) -> None:
    clean = build_run(run.seed, OTLP, plants=0, max_spans=4_000)
    findings = [_finding(p, run.shape.workers) for p in run.plants]
    accounts = [_account(p.step, p.cost, 0.0, [{"kind": "reward", "seconds": p.cost}]) for p in run.plants]
    r1, p1 = score_run(run, {"findings": findings, "steps": accounts})
    r2, p2 = score_run(clean, {"findings": []})
    rows = goals([r1, r2], p1 + p2)
    assert any(p["slow"] for p in p1)
    assert [g.ok for g in rows] == [True, True, True, True]  # the last: costly plants told as warning or worse
    assert rows[3].n == sum(1 for p in p1 if p["costly"]) > 0
    rows = goals([r1, {**r2, "alarms": 1, "false_alarms": 1}], p1 + p2)
    assert [g.ok for g in rows] == [True, True, False, True] and rows[2].value == 1.0
    text = markdown([r1, r2], p1 + p2, "header")
    assert "| kind |" in text and "warnings per clean run" in text and text.startswith("<!-- BEGIN")


def test_a_goal_is_measured_in_its_targets_unit() -> None:
    """A share where the target is a percentage, a count where it is one: the class table showed "persistent
    stragglers" (a "per" in its name) as 0.900 beside ≥ 90%."""
    from benchmarks.diagnosis.class_tables import markdown as class_markdown
    from benchmarks.diagnosis.tables import Goal

    assert Goal("persistent stragglers named with the right place", "≥ 90%", 0.9, 40, True).measured == "90.0%"
    assert Goal("warnings per clean run", "≤ 0.05", 0.025, 40, True).measured == "0.025"
    straggler = {"class": "straggler", "variant": "v", "expects": True, "named": True, "alarm": True, "told": True,
                 "rank": 1, "alarms": 1, "false_alarms": 0, "false_alarm_kinds": {}, "cost_share": 0.2}  # fmt: skip
    clean = {**straggler, "class": "clean", "expects": False, "named": False, "alarm": False, "rank": None}
    text = class_markdown([straggler, clean], "header")
    assert "| persistent stragglers named with the right place | ≥ 90% | 100.0% |" in text, text
    assert "| warnings per clean run | ≤ 0.05 | 0.000 |" in text
