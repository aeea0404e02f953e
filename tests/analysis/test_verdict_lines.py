"""The verdict's headline lines (``findings/verdict.py headlines``): a slow step is told with what it took and
why; a part far out on every worker at little cost (``degraded``) is a warning told as what it is, never as the
reason a step took what it took."""

from __future__ import annotations

from types import SimpleNamespace

from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.common.record import Finding
from otel_verl.analysis.findings.verdict import headlines


def _account(step: int, took: float, usual: float) -> SimpleNamespace:
    return SimpleNamespace(step=step, duration_s=took, excess_s=took - usual, rollout_s=took - 1.0)


def _diagnosis(findings: list[Finding]) -> SimpleNamespace:
    accounts = [_account(1, 10.3, 10.0), _account(2, 26.8, 7.8), _account(3, 4.3, 7.8)]
    return SimpleNamespace(findings=findings, accounts=accounts)


def test_a_slow_step_is_told_with_what_it_took_and_why() -> None:
    stall = Finding(k.SLOW_DECODE, "critical", "worker 0 stalled in step 2: ... +12.4 s", step=2, seconds=12.4)
    (line,) = headlines(_diagnosis([stall]))
    assert line.startswith("step 2: rollout took 25.8 s") and line.endswith("because " + stall.message), line


def test_a_degraded_part_at_little_cost_is_not_the_reason_its_step_took_long() -> None:
    """A demo run on a busy machine, 2026-11-29: "step 1: rollout took 8.5 s, 1.0× the 8.5 s median rollout; the
    step took 10.3 s (...), because tool-call parsing took 0.35 s per request ...; it cost the step only 0.00 s"."""
    message = (
        "tool-call parsing took 0.35 s per request on both workers, usually 0.07 s, in step 1; it cost the step only "
        "0.00 s because requests overlapped: a warning now, before it costs more"
    )
    parsing = Finding(k.SLOW_TOOL_PARSE, "warning", message, step=1, seconds=0.0, details={"degraded": True})
    stall = Finding(k.SLOW_DECODE, "critical", "worker 0 stalled in step 2: ... +12.4 s", step=2, seconds=12.4)
    lines = headlines(_diagnosis([stall, parsing]))
    assert lines[0].startswith("step 2: rollout took") and "because" in lines[0]
    assert lines[1] == f"step 1: {message}"
