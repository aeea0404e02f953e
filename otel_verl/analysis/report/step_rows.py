"""The per-step table a reader looks at first (the CLI summary, the top of report.html): each step's duration, its
usual duration, the excess, its severity and its top cause, all from findings.json ``steps``.

:func:`add_step_rows` writes the two fields the table needs into each step's account, from the final findings (so
the table, findings.json and the causes' table never disagree):

* ``severity``: the step's own: the worst severity of a serious cause finding (a warning or worse, of a kind in
  :data:`~otel_verl.analysis.findings.common.kinds.CAUSES`) that marks this step, or ``"ok"`` when none does. A
  cause of one step marks it at its severity. A cause of several steps (a persistent straggler, a recurring cause,
  a trend) marks a step only by what it cost that step (issue 50: a run-wide trend marked every row ``critical``,
  steps faster than usual included): its ``details.per_step`` figure, or a trend's line above the median step
  (:func:`own_seconds`: nothing up to the run's middle); at most the cause's severity, and only as far as that
  figure earns it against the step's usual (``warning_fraction`` of it for a warning, ``critical_fraction`` for a
  critical; the pattern's own floor in seconds was weighed over the run);
* ``top_cause``: ``{"kind", "name", "severity", "seconds", "message"}`` of the first cause that marks the step
  (findings come ranked), ``name`` and ``seconds`` being :mod:`~otel_verl.analysis.findings.common.step_cause`'s
  (what the message calls it, what it cost this step; a trend's, its line's height there), or null.

The verdict picks a step's top cause by the same rule, so a run that reads "No problems found" has no step marked.
Notes (an info-level cause: a part that moved a little, as in a step faster than usual; the long tail) are in the
causes list and findings.json, not in a step's row.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from otel_verl.analysis.findings.common.kinds import CAUSES, SEVERITIES, TREND
from otel_verl.analysis.findings.common.step_cause import cause_name, cause_seconds
from otel_verl.analysis.findings.common.thresholds import Thresholds
from otel_verl.analysis.report import presenting

OK = "ok"
"""The severity of a step no cause names."""


def add_step_rows(
    accounts: list[dict[str, Any]], findings: Iterable[Any], th: Thresholds | None = None
) -> list[dict[str, Any]]:
    """``accounts`` (findings.json ``steps``) with ``severity`` and ``top_cause`` set on each; returns them."""
    th = th or Thresholds()
    serious = SEVERITIES[:2]
    causes = [f for f in presenting.as_dicts(findings) if f.get("kind") in CAUSES and f.get("severity") in serious]
    for account in accounts:
        step = account.get("step")
        marks = [(f, sev) for f in causes if step in f["steps"] for sev in [_own_severity(f, account, th)] if sev]
        ranks = [SEVERITIES.index(sev) for _, sev in marks]
        account["severity"] = SEVERITIES[min(ranks)] if ranks else OK
        account["top_cause"] = _cause(*marks[0], step) if marks else None
    return accounts


def own_seconds(f: dict[str, Any], step: int) -> float:
    """What a cause cost ``step``: :func:`cause_seconds`, but a trend's is its line's height above the median step
    there (its ``seconds`` grow from nothing at the run's middle to half of them at its last step)."""
    if f.get("kind") != TREND:
        return cause_seconds(f, step)
    steps = [int(s) for s in f.get("steps") or []]
    seconds = f.get("seconds") or 0.0
    if len(steps) < 2 or not math.isfinite(seconds):
        return 0.0
    first, last = min(steps), max(steps)
    return max(seconds * (step - (first + last) / 2) / (last - first), 0.0)


def _own_severity(f: dict[str, Any], account: dict[str, Any], th: Thresholds) -> str | None:
    """The severity ``f`` gives this step's row (module docstring), or None: it does not mark it."""
    step = account.get("step")
    if len(f["steps"]) <= 1:
        return f["severity"]
    cost = own_seconds(f, step)
    usual = account.get("baseline_s")
    if not isinstance(usual, (int, float)) or not math.isfinite(usual) or usual <= 0:
        usual = max((account.get("duration_s") or 0.0) - cost, 0.0)
    if cost <= 0 or cost < th.warning_fraction * usual:
        return None
    return f["severity"] if cost >= th.critical_fraction * usual else "warning"


def _cause(f: dict[str, Any], severity: str, step: Any) -> dict[str, Any]:
    return {
        "kind": f["kind"],
        "name": cause_name(f),
        "severity": severity,
        "seconds": round(own_seconds(f, step), 6),
        "message": f.get("message", ""),
    }


def table_rows(accounts: Sequence[dict[str, Any]], limit: int | None = None) -> tuple[list[dict[str, Any]], int]:
    """The rows to show: every step, or, past ``limit`` steps, the steps a cause names (worst first, then the
    largest excess) up to ``limit``, in step order; and how many steps were left out."""
    rows = list(accounts)
    if limit is None or len(rows) <= limit:
        return rows, 0
    rank = {s: i for i, s in enumerate((*SEVERITIES, OK))}
    named = sorted(rows, key=lambda a: (rank.get(a.get("severity", OK), len(rank)), -(a.get("excess_s") or 0.0)))
    shown = sorted(named[:limit], key=lambda a: a["step"])
    return shown, len(rows) - len(shown)


def cause_words(cause: dict[str, Any] | None) -> str:
    """``stall (cost 16.6 s)``: the top cause's name and what it cost the step, named so beside the excess column
    (issue 51: "+19.3 s" and "stall (19.5 s)" read as two figures for one loss); empty for none."""
    if not cause:
        return ""
    seconds = cause.get("seconds")
    cost = f" (cost {presenting.seconds_words(seconds)})" if seconds else ""
    return f"{cause.get('name') or cause_name(cause)}{cost}"
