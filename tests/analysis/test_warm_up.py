"""An engine warming up on the run's first calls is information, whatever the load (issue 50, must-have 1).

The real vLLM demo (legacy trainer, nothing planted) at load average ~26 told a critical "slow engine" in step 1:
its first engine calls took 5.4 s against a usual 0.05 s, and the step's later calls, slowed by the load too, left
their norm, which the old rule (:mod:`.warm_up`) read as the engine staying slow. The runs here are that shape:
three multi-turn steps, every worker's turn-0 calls of step 1 20x slower, its later calls 1.6x (the load).
"""

from __future__ import annotations

from pathlib import Path

from builder import Plan, build_run

from otel_verl.analysis.findings.causes.severity import WARM_UP
from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.diagnose import diagnose_run
from otel_verl.analysis.read import load_spans
from otel_verl.analysis.tables import Tables

SERIOUS = ("warning", "critical")
UNDER_LOAD = (1, 20.0, 1.6)
"""Step 1's turn-0 engine calls 20x slower, its later calls 1.6x (the machine's load)."""


def _first_calls(tmp_path: Path, plan: Plan, again: int | None = None) -> list:
    """The run's findings on the first engine calls (turn index 0) of a step; ``again``: that step's first calls
    slow as step 1's were."""
    b = build_run(plan)
    if again is not None:
        other = build_run(Plan(steps=plan.steps, first_calls=(again, *UNDER_LOAD[1:])))
        b.spans = [s for s in b.spans if s.step != again] + [s for s in other.spans if s.step == again]
    d = diagnose_run(Tables.build(load_spans(b.write(tmp_path / "spool"))))
    return [f for f in d.findings if f.kind in k.CAUSES and f.details.get("turn_index") == 0]


def test_the_first_calls_of_a_loaded_run_are_the_engine_warming_up(tmp_path: Path) -> None:
    (f,) = _first_calls(tmp_path, Plan(steps=3, first_calls=UNDER_LOAD))
    assert (f.kind, f.steps, f.details["scope"]) == (k.SLOW_DECODE, [1], k.SCOPE_STEP), f.message
    assert f.details.get("warm_up") is True and f.severity == "info", f.message
    assert f.details["judged"]["why"] == WARM_UP and f.details["judged"]["basis"], f.details["judged"]


def test_first_calls_slow_again_in_a_later_step_are_no_warm_up(tmp_path: Path) -> None:
    found = _first_calls(tmp_path, Plan(steps=5, first_calls=UNDER_LOAD), again=3)
    assert found and all(not f.details.get("warm_up") for f in found), [f.message for f in found]
    assert any(f.severity in SERIOUS for f in found), [f.message for f in found]


def test_a_step_slowed_alike_on_every_call_is_no_warm_up(tmp_path: Path) -> None:
    """The load alone (every call of step 1 3x slower): the first calls do not stand out from the later ones."""
    b = build_run(Plan(steps=3, first_calls=(1, 3.0, 3.0)))
    d = diagnose_run(Tables.build(load_spans(b.write(tmp_path / "spool"))))
    slow = [f for f in d.findings if f.kind == k.SLOW_DECODE and 1 in f.steps]
    assert slow and not any(f.details.get("warm_up") for f in slow), [f.message for f in slow]
    assert slow[0].severity in SERIOUS, slow[0].message
