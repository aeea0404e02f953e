"""The live account's one-line verdict of a step (``LiveAccount._verdict``), for steps with and without a baseline."""

from __future__ import annotations

from otel_verl.live.account import LiveAccount

CAUSE = {"kind": "stall", "severity": "warning", "steps": [1], "seconds": 3.0, "details": {"per_step": {}}}


def _account(seen: int) -> LiveAccount:
    live = LiveAccount()
    live._summaries.extend([object()] * seen)  # only their count matters to the verdict
    return live


def test_a_cause_found_in_the_first_step_still_says_there_is_no_baseline() -> None:
    """Step 1 of verl's colocate-async trainer had a stall of its own: the headline, and that nothing compared it."""
    line = _account(1)._verdict({"step": 1, "duration_s": 4.0}, CAUSE, "step 1: 4.00 s, a stall on worker 0")
    assert line == "step 1: 4.00 s, a stall on worker 0 [warning]; no baseline yet (1 of 3 steps seen)"


def test_a_measured_step_with_a_cause_is_its_headline_alone() -> None:
    account = {"step": 5, "duration_s": 4.0, "baseline_s": 1.0, "excess_s": 3.0}
    assert _account(5)._verdict(account, CAUSE, "step 5: 4.00 s, a stall") == "step 5: 4.00 s, a stall [warning]"


def test_a_quiet_first_step_says_only_that_it_has_no_baseline() -> None:
    line = _account(1)._verdict({"step": 1, "duration_s": 1.5}, None, None)
    assert line.endswith("; no baseline yet (1 of 3 steps seen)") and line.startswith("step 1: took")
