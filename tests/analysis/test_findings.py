"""The step's account and the causes it names, on hand-built runs with known numbers (``builder.py``): each
planted cause is its step's first finding, named by what moved and where, with about the planted seconds; a clean
run raises no warning; every step's account adds up."""

from __future__ import annotations

import pytest
from builder import Plan, build_run

from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.diagnose import diagnose_run
from otel_verl.analysis.read import load_spans
from otel_verl.analysis.tables import Tables

SERIOUS = ("warning", "critical")


def _diagnosis(tmp_path, plan: Plan):
    return diagnose_run(Tables.build(load_spans(build_run(plan).write(tmp_path / "spool"))))


def first_of_step(d, step: int):
    return next(f for f in d.findings if step in f.steps and f.kind in k.CAUSES)


def assert_adds_up(d) -> None:
    """parts + unexplained = excess = duration − baseline on every step; the rollout's parts add up to it."""
    for a in d.accounts:
        assert sum(p.seconds for p in a.parts) == pytest.approx(a.excess_s, abs=1e-6)
        assert a.excess_s == pytest.approx(a.duration_s - a.baseline_s, abs=1e-9)
        assert sum(p.value_s for p in a.parts) == pytest.approx(a.duration_s, abs=1e-6)
        if a.path is not None:
            rollout = sum(p.value_s for p in a.parts if p.kind in k.ROLLOUT_PARTS)
            assert rollout == pytest.approx(a.path.rollout_s, abs=1e-6)


@pytest.fixture(scope="module")
def planted(planted_spans):
    return diagnose_run(Tables.build(planted_spans))


def test_planted_causes_first_for_their_steps(planted) -> None:
    assert_adds_up(planted)
    stall = first_of_step(planted, 3)
    assert (stall.kind, stall.worker, stall.details["scope"]) == (k.STALL, 1, k.SCOPE_WORKER)
    assert stall.value == pytest.approx(60.0, abs=1.0) and stall.seconds > 50
    reward = first_of_step(planted, 5)
    assert (reward.kind, reward.worker, reward.request_id) == (k.SLOW_REWARD, 2, "s5w2r4")
    assert reward.value == pytest.approx(25.0, abs=1e-3) and reward.baseline == pytest.approx(
        0.05, rel=0.05
    )  # a histogram bin: ±3 %
    # the builder's slow turn decodes 100 tokens a second like every other call: a long answer, not a slow engine
    turn = first_of_step(planted, 6)
    assert (turn.kind, turn.worker, turn.request_id) == (k.LONG_RESPONSE, 0, "s6w0r7")
    assert turn.details["turn_index"] == 1 and "3,000 tokens" in turn.message
    for f in (stall, reward, turn):
        assert f.severity in SERIOUS and f.evidence and f.message.split()[0] in ("worker", "reward", "request")
    # each cause once: nothing else serious, the aborted requests are information
    assert [f.steps for f in planted.findings if f.severity in SERIOUS] == [[3], [6], [5]]
    assert [f.kind for f in planted.findings if 4 in f.steps and f.kind != k.LONG_TAIL] == [k.ABORTED_WASTE]


def test_clean_run_raises_no_warning(clean_spans) -> None:
    d = diagnose_run(Tables.build(clean_spans))
    assert_adds_up(d)
    assert not [f for f in d.findings if f.severity in SERIOUS]
    (tail,) = [f for f in d.findings if f.kind == k.LONG_TAIL]
    assert 0 < tail.details["barrier_share"] < 1
    over = tail.details["what_if"]["oversample"]
    assert [x["abort_last"] for x in over] == [0.05, 0.1, 0.2]
    assert all(x["saved_s_per_step"] >= 0 for x in over)


@pytest.mark.parametrize(
    ("plan", "kind", "scope", "where"),
    [
        (Plan(slow_phase=(4, "update_actor", 9.0)), k.SLOW_PHASE, k.SCOPE_PHASE, {"phase": "update_actor"}),
        (Plan(late_start=(4, 2, 8.0)), k.SLOW_START, k.SCOPE_WORKER, {"worker": 2}),
        (Plan(step_reward=(4, 3.0)), k.SLOW_REWARD, k.SCOPE_STEP, {}),
        (Plan(step_decode=(4, 3.0)), k.SLOW_DECODE, k.SCOPE_STEP, {}),
        (Plan(pause=(4, 2, 1.0, 20.0)), k.STALL, k.SCOPE_WORKER, {"worker": 2}),
    ],
    ids=["slow-phase", "late-start", "step-wide-reward", "step-wide-decode", "process-pause"],
)
def test_each_kind_is_named_first_for_its_step(tmp_path, plan, kind, scope, where) -> None:
    d = _diagnosis(tmp_path, plan)
    assert_adds_up(d)
    top = first_of_step(d, 4)
    assert (top.kind, top.details["scope"]) == (kind, scope), top.message
    for key, value in where.items():
        assert (top.details[key] if key == "phase" else getattr(top, key)) == value, top.message
    assert top.severity in SERIOUS and top.seconds > 2
    # told once: no other serious finding in the run
    assert [f for f in d.findings if f.severity in SERIOUS] == [top], [f.message for f in d.findings]
    a = next(a for a in d.accounts if a.step == 4)
    assert 1 - a.unexplained_s / a.excess_s >= 0.9


def test_a_recurring_cause_is_one_finding(tmp_path) -> None:
    """The same worker starting late in steps 4, 6 and 8: one finding listing its steps, its seconds their sum."""
    b = build_run(Plan(steps=10, late_start=(4, 2, 8.0)))
    for step in (6, 8):
        other = build_run(Plan(steps=10, late_start=(step, 2, 8.0)))
        b.spans = [s for s in b.spans if s.step != step] + [s for s in other.spans if s.step == step]
    d = diagnose_run(Tables.build(load_spans(b.write(tmp_path / "spool"))))
    assert_adds_up(d)
    starts = [f for f in d.findings if f.kind == k.SLOW_START]
    assert len(starts) == 1, [f.message for f in starts]
    (f,) = starts
    assert (f.steps, f.worker, f.details["scope"]) == ([4, 6, 8], 2, k.SCOPE_WORKER), f.message
    assert f.seconds == pytest.approx(sum(f.details["per_step"].values()), abs=1e-3) and f.seconds > 20
    assert f.message.startswith("worker 2 started its first request")


def test_the_long_tail_what_if_is_the_median_steps_not_a_fault_counted_again(tmp_path) -> None:
    """A 60 s reward in one of 8 steps is a cause of its own: the over-sampling and partial-rollout what-ifs are the
    median step's, the same as the clean twin's (the mean of steps once said "would have saved 6.5 s per step" of a
    demo whose steps took 2 s: its 20 s stall counted again)."""

    def what_if(d):
        (tail,) = [f for f in d.findings if f.kind == k.LONG_TAIL]
        return tail.details["what_if"]["oversample"]

    clean = what_if(_diagnosis(tmp_path / "clean", Plan()))
    slow = what_if(_diagnosis(tmp_path / "slow", Plan(slow_reward=(4, 2, 3, 60.0))))
    for a, b in zip(clean, slow, strict=True):
        assert b["saved_s_per_step"] == pytest.approx(a["saved_s_per_step"], abs=0.2), (a, b)
        assert b["saved_s_per_step"] < 5.0 and b["samples_dropped_per_step"] == a["samples_dropped_per_step"]
