"""The one door between the live account and the analyzer: a finished step's spans in, its :class:`LiveStep` out.

The analyzer's part is one public call, :meth:`otel_verl.analysis.IncrementalDiagnosis.add` (its docstring says
what it computes and how it differs from ``otel-verl analyze``; docs/live.md, "Live and offline"); this module
turns what it returns, in findings.json's shapes, into the tracker's numbers (:mod:`.metrics`) and the verdict line.
Nothing here reaches inside the analyzer (tests/test_layout.py): a change to its folders or findings does not
reach the live account.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from otel_verl.live import names as n
from otel_verl.live.metrics import LiveStep, cause_place, cause_seconds, step_metrics, tail_metrics

WINDOW_STEPS = 8
"""Steps whose summaries make the baselines (this one included). Why 8: the diagnosis needs 3 for a baseline
(``Thresholds.min_steps``), its step-to-step spread is calibrated for short runs (``account.warn_level``), and
the baselines are measured again every step from every summary of the window (benchmarks/bench_live.py)."""

if TYPE_CHECKING:
    from otel_verl.analysis import StepDiagnosis


class LiveAccount:
    """The account of each finished step against the steps before it (:meth:`add`, one step at a time)."""

    def __init__(self, window: int = WINDOW_STEPS) -> None:
        from otel_verl.analysis import IncrementalDiagnosis  # the analyzer (pandas …) only once a step is judged

        self.diagnosis = IncrementalDiagnosis(window)

    @property
    def steps(self) -> list[int]:
        """The steps whose summaries are held (the next baselines)."""
        return self.diagnosis.steps

    def add(self, source: Path, step: int) -> LiveStep | None:
        """Step ``step``'s account from the OTLP/JSON files under ``source`` (:meth:`IncrementalDiagnosis.add`).
        None when the files hold no training step ``step`` (a validation before training, spans of no step)."""
        return _live_step(self.diagnosis.add(source, step))

    def add_tables(self, tables: Any, step: int) -> LiveStep | None:
        """Step ``step``'s account from the span tables of its spans (what :meth:`add` reads); None when they hold
        no training step ``step``."""
        return _live_step(self.diagnosis.add_tables(tables, step))


def _live_step(d: StepDiagnosis | None) -> LiveStep | None:
    if d is None:
        return None
    metrics = step_metrics(d.account, d.cause) | tail_metrics(d.long_tail)
    if "max" in d.staleness:
        metrics[n.STALENESS_MAX] = d.staleness["max"]
    if "mean" in d.staleness:
        metrics[n.STALENESS_MEAN] = d.staleness["mean"]
    metrics[n.BASELINE_STEPS] = float(d.window_steps)
    metrics[n.SPANS] = float(d.spans)
    texts = {n.VERDICT: _verdict(d)}
    if d.cause is not None:
        texts[n.CAUSE] = cause_at(d.cause_name, d.cause)  # the live line's words
    return LiveStep(d.step, metrics, texts)


def _verdict(d: StepDiagnosis) -> str:
    """The step in one line: the analyzer's headline for a step with a warning or worse, else its time against
    its usual and the largest move; and what it was compared with while the window is short. As ``analyze``
    values a short run (``step_account._judge``): one step has no baseline (no usual, no excess), two are each
    other's, and how much steps vary is measured from ``min_steps``."""
    from otel_verl.analysis import fmt_s

    account, cause, headline = d.account, d.cause, d.headline
    step = int(account["step"])
    seen, needed = d.window_steps, d.min_steps
    baseline = account.get("baseline_s")
    if baseline is None:
        caveat = "no baseline yet (no earlier step to compare with)"
    elif seen < needed:
        earlier = "the step before" if seen == 2 else f"the {seen - 1} steps before"
        caveat = f"compared with {earlier} alone (how much steps vary is measured from {needed} steps on)"
    else:
        caveat = ""
    if headline is not None and cause is not None:
        # a cause found inside the step alone (a straggler, a stall) still says what the step was compared with
        return f"{headline} [{cause['severity']}]" + (f"; {caveat}" if caveat else "")
    took = f"step {step}: took {fmt_s(account.get('duration_s'))}"
    if baseline is None:
        return f"{took}; {caveat}"
    excess = account.get("excess_s") or 0.0
    # "so far": the usual of the steps seen, each valued when it was the newest; ``analyze`` values every step
    # against the whole run's, and its steps table's "parts' usual" may differ (the demo's step 3: 2.7 s here,
    # 2.9 s there, issue 51): named alike, the words say which is which
    signed = f"{excess:+.2f}".replace("-", "\u2212")  # the steps table's minus sign
    line = f"{took} (parts' usual so far {fmt_s(baseline)}, {signed} s)"
    line += f"; {caveat}" if caveat else ", within the run's usual variation"
    moved = 0.0
    if cause is not None:
        moved = cause_seconds(cause, step) or 0.0
        line += f"; largest move: {cause_at(d.cause_name, cause)}, {fmt_s(moved)}"
    return line + _rest(account, excess, moved)


def cause_at(name: str | None, cause: dict[str, Any]) -> str:
    """A cause and where it moved: ``slow decode at every worker``, ``slow phase old_log_prob`` (not "slow phase
    at phase old_log_prob", issue 51)."""
    where = cause_place(cause)
    if name and where.startswith("phase ") and name.endswith(" phase"):
        return f"{name} {where.removeprefix('phase ')}"
    return f"{name} at {where}"


def _rest(account: dict[str, Any], excess: float, moved: float) -> str:
    """Where the step's excess went when its largest move explains less than half of it: the part that ran most
    over its usual, and what the rest was (issue 51: "+1.18 s … largest move: slow decode at every worker, 0.08 s"
    said nothing of the other 1.10 s). The same parts and seconds as the steps' account in findings.json."""
    from otel_verl.analysis import fmt_s, readable

    if excess <= 0 or moved >= excess / 2:
        return ""
    parts = [p for p in account.get("parts") or [] if (p.get("seconds") or 0.0) > 0]
    if not parts:
        return f"; the other {fmt_s(excess - moved)} is no one part's (each ran within its usual)"
    top = max(parts, key=lambda p: p["seconds"])
    kind = str(top.get("kind", "?"))
    name = f"phase {top.get('phase')}" if kind == "phase" else readable(kind)  # the report's words for a part
    other = "" if moved else "; no cause"
    most = f"most of the excess: {name}, {fmt_s(top['seconds'])} over its usual"
    return f"{other}; {most}, the rest spread over its parts"
