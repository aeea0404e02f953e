"""The live account's one-line verdict of a step (``account._verdict``), for steps with and without a baseline,
and what it says of a short window: one step has none, two are each other's (as ``analyze`` values them)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from otel_verl.analysis import StepDiagnosis
from otel_verl.analysis.findings.verdict import ratio_words
from otel_verl.analysis.read import load_spans
from otel_verl.analysis.read.step_split import split_by_step
from otel_verl.analysis.tables import Tables
from otel_verl.live import names as n
from otel_verl.live.account import LiveAccount, _live_step, _verdict
from tests.analysis.builder import Plan, build_run

CAUSE = {"kind": "stall", "severity": "warning", "steps": [1], "seconds": 3.0, "details": {"per_step": {}}}
NO_BASELINE = "; no baseline yet (no earlier step to compare with)"


def _line(seen: int, account: dict, cause: dict | None, headline: str | None) -> str:
    """The verdict of ``account`` judged with ``seen`` steps in the window (only their count matters to it)."""
    d = StepDiagnosis(account["step"], account, [], cause, "stall" if cause else None, headline, None, {}, 0, seen, 3)
    return _verdict(d)


def test_a_cause_found_in_the_first_step_still_says_there_is_no_baseline() -> None:
    """Step 1 of verl's colocate-async trainer had a stall of its own: the headline, and that nothing compared it."""
    line = _line(1, {"step": 1, "duration_s": 4.0}, CAUSE, "step 1: 4.00 s, a stall on worker 0")
    assert line == "step 1: 4.00 s, a stall on worker 0 [warning]" + NO_BASELINE


def test_a_measured_step_with_a_cause_is_its_headline_alone() -> None:
    account = {"step": 5, "duration_s": 4.0, "baseline_s": 1.0, "excess_s": 3.0}
    assert _line(5, account, CAUSE, "step 5: 4.00 s, a stall") == "step 5: 4.00 s, a stall [warning]"


def test_a_measured_step_without_a_cause_names_its_usual_as_the_steps_table_does() -> None:
    """Issue 51: the demo's step 3 read "usually 2.7 s" live and "parts' usual 2.9 s" in the steps table below it;
    one name, and "so far" says the live one is the steps' seen so far."""
    account = {"step": 3, "duration_s": 2.4, "baseline_s": 2.713, "excess_s": -0.32}
    line = _line(3, account, None, None)
    told = "step 3: took 2.4 s (parts' usual so far 2.7 s, \u22120.32 s), within the run's usual variation"
    assert line == told, line  # the steps table's minus sign (the second cold trial: -0.11 s beside its \u22120.13 s)


def test_a_quiet_first_step_says_only_that_it_has_no_baseline() -> None:
    line = _line(1, {"step": 1, "duration_s": 1.5}, None, None)
    assert line.endswith(NO_BASELINE) and line.startswith("step 1: took")


def test_the_second_step_is_compared_with_the_first_and_says_so(tmp_path: Path) -> None:
    """Issue 51: step 2's line read "1.9× the 11.0 s median rollout" (a median of step 2 itself and step 1) beside
    "no baseline yet (2 of 3 steps seen)", while ``otel_verl/excess/*`` of step 2 were logged against step 1 (and
    names.py said they were 0). Now: against step 1, said so, with step 1's rollout as the usual one."""
    build_run(Plan(steps=2, pause=(2, 1, 1.0, 20.0))).write(tmp_path)
    live, lines, rows, tables = LiveAccount(), {}, {}, {}
    for part in split_by_step(load_spans(tmp_path)):
        if part.steps:
            (step,) = part.steps
            tables[step] = Tables.build(part.spans)
            got = live.add_tables(tables[step], step)
            assert got is not None
            lines[step], rows[step] = got.verdict, got.metrics
    assert lines[1].endswith(NO_BASELINE) and "3" not in lines[1].split(";")[-1], lines[1]
    assert n.EXCESS_S not in rows[1] and rows[2][n.BASELINE_STEPS] == 2
    second = lines[2]
    assert "no baseline yet" not in second and "median" not in second, second
    assert "[critical]" in second and second.endswith("; compared with the step before alone (how much steps vary "
                                                      "is measured from 3 steps on)"), second  # fmt: skip
    usual = ratio_words(rows[2][n.ROLLOUT_S], rows[1][n.ROLLOUT_S])[1]  # as many digits as the ratio needs
    assert f"the step before's {usual};" in second, second  # the steps so far: a third may change the usual
    ratio = float(re.search(r"([\d.]+)×", second).group(1))
    assert ratio == pytest.approx(rows[2][n.ROLLOUT_S] / rows[1][n.ROLLOUT_S], abs=0.05)
    # the excess names.py documents: each part against the step before
    key = n.part_key(n.EXCESS, "phase", "update_actor")
    before, now = (rows[s][n.part_key(n.PART, "phase", "update_actor")] for s in (1, 2))
    assert rows[2][key] == pytest.approx(now - before, abs=1e-5)
    assert rows[2][n.EXCESS_S] == pytest.approx(rows[2][n.STEP_S] - rows[1][n.STEP_S], abs=0.5)


def test_a_request_is_named_by_its_whole_id_as_the_finding_names_it(tmp_path: Path) -> None:
    """Issue 51: the live cause named a request by its first 12 characters where the finding's message, the
    verdict and the report write the whole id (and Jaeger's search finds only the whole one)."""
    build_run(Plan(steps=4, slow_turn=(3, 1, 2, 15.0))).write(tmp_path)
    for f in tmp_path.rglob("*.jsonl"):  # ids as long as verl's (a uuid4's 32 hex digits)
        f.write_text(re.sub(r'"(s\d+w\d+r\d+)"', lambda m: f'"{m.group(1)}-{"0123456789abcdef" * 2}"', f.read_text()))
    live, said = LiveAccount(), {}
    for part in split_by_step(load_spans(tmp_path)):
        if part.steps:
            (step,) = part.steps
            said[step] = live.diagnosis.add_tables(Tables.build(part.spans), step)
    d = said[3]
    assert d is not None and d.cause is not None and d.cause["request_id"], d
    rid = d.cause["request_id"]
    assert len(rid) > 12 and f"request {rid}" in d.cause["message"], d.cause["message"]
    cause = _live_step(d).texts[n.CAUSE]
    assert cause.endswith(f"at request {rid} on worker 1"), cause


def _quiet(cause: dict, name: str, parts: list[dict]) -> str:
    """A step 4 of 4.2 s against a usual of 3.1 s so far (+1.18 s), its largest move ``cause``."""
    account = {"step": 4, "duration_s": 4.2, "baseline_s": 3.02, "excess_s": 1.18, "parts": parts}
    d = StepDiagnosis(4, account, [], cause, name, None, None, {}, 0, 4, 3)
    return _verdict(d)


def test_a_slow_phase_is_named_once_and_the_rest_of_the_excess_is_placed() -> None:
    """Issue 51: "largest move: slow phase at phase old_log_prob" said phase twice, and "took 4.2 s (parts' usual so
    far 3.1 s, +1.18 s) … largest move: slow decode at every worker, 0.08 s" left 1.10 s unplaced."""
    parts = [
        {"kind": "phase", "phase": "old_log_prob", "seconds": 0.08},
        {"kind": "phase", "phase": "update_actor", "seconds": 0.71},
        {"kind": "decode", "seconds": 0.30},
    ]
    where = {"scope": "phase", "phase": "old_log_prob"}
    phase = {"kind": "slow_phase", "severity": "info", "seconds": 0.08, "details": where}
    line = _quiet(phase, "slow phase", parts)
    assert "largest move: slow phase old_log_prob, 0.08 s" in line and "phase at phase" not in line, line
    assert line.endswith("; most of the excess: phase update_actor, 0.71 s over its usual, the rest spread over its "
                         "parts"), line  # fmt: skip
    decode = {"kind": "slow_decode", "severity": "info", "seconds": 0.9, "details": {"scope": "step"}}
    told = _quiet(decode, "slow decode", parts)  # a move that explains most of the excess needs nothing more
    assert told.endswith("largest move: slow decode at every worker, 0.90 s"), told


def test_the_rest_of_the_excess_names_a_part_in_the_reports_words() -> None:
    """The second cold trial read "no cause; most of the excess: engine before, 0.07 s over its usual": a part's
    key, where the report's legend says "before the engine (Ray hops, load balancer)"."""
    parts = [{"kind": "engine_before", "seconds": 0.70}, {"kind": "decode", "seconds": 0.10}]
    line = _quiet(None, None, parts)
    assert "; no cause; most of the excess: before the engine (Ray hops, load balancer), 0.70 s over its usual" in line
    assert "engine before" not in line, line
