"""The per-step table a reader looks at first (the CLI summary, the top of report.html): each step's duration, its
usual duration, the excess, its severity and its top cause, all from findings.json ``steps``.

:func:`add_step_rows` writes the two fields the table needs into each step's account, from the final findings (so
the table, findings.json and the causes' table never disagree):

* ``severity``: the worst severity of a cause finding (:data:`~otel_verl.analysis.findings.common.kinds.CAUSES`) whose
  ``steps`` hold this step, or ``"ok"`` when no cause names it;
* ``top_cause``: ``{"kind", "severity", "seconds", "message"}`` of the first such finding (findings come ranked),
  ``seconds`` being what it cost this step (``details.per_step`` of a cause that recurs), or null.

Information findings (the long tail, aborted work) are not causes of a step and never set either field.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from otel_verl.analysis import presenting
from otel_verl.analysis.findings.common.kinds import CAUSES, SEVERITIES

OK = "ok"
"""The severity of a step no cause names."""


def add_step_rows(accounts: list[dict[str, Any]], findings: Iterable[Any]) -> list[dict[str, Any]]:
    """``accounts`` (findings.json ``steps``) with ``severity`` and ``top_cause`` set on each; returns them."""
    causes = [f for f in presenting.as_dicts(findings) if f.get("kind") in CAUSES]
    for account in accounts:
        step = account.get("step")
        mine = [f for f in causes if step in f["steps"]]
        ranks = [SEVERITIES.index(f["severity"]) for f in mine if f.get("severity") in SEVERITIES]
        account["severity"] = SEVERITIES[min(ranks)] if ranks else OK
        account["top_cause"] = _cause(mine[0], step) if mine else None
    return accounts


def _cause(f: dict[str, Any], step: Any) -> dict[str, Any]:
    per_step = (f.get("details") or {}).get("per_step") or {}
    seconds = per_step.get(str(step), f.get("seconds"))
    return {
        "kind": f["kind"],
        "severity": f.get("severity"),
        "seconds": None if seconds is None else round(float(seconds), 6),
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
    """``stall (16.6 s)``: the top cause's kind in words and what it cost the step; empty for none."""
    if not cause:
        return ""
    seconds = cause.get("seconds")
    cost = f" ({presenting.seconds_words(seconds)})" if seconds else ""
    return f"{str(cause['kind']).replace('_', ' ')}{cost}"
