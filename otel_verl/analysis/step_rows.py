"""The per-step table a reader looks at first (the CLI summary, the top of report.html): each step's duration, its
usual duration, the excess, its severity and its top cause, all from findings.json ``steps``.

:func:`add_step_rows` writes the two fields the table needs into each step's account, from the final findings (so
the table, findings.json and the causes' table never disagree):

* ``severity``: the worst severity of a serious cause finding (a warning or worse, of a kind in
  :data:`~otel_verl.analysis.findings.common.kinds.CAUSES`) whose ``steps`` hold this step, or ``"ok"`` when none
  names it;
* ``top_cause``: ``{"kind", "name", "severity", "seconds", "message"}`` of the first such finding (findings come
  ranked), ``name`` and ``seconds`` being :mod:`~otel_verl.analysis.findings.common.step_cause`'s (what the
  message calls it, what it cost this step), or null.

The verdict picks a step's top cause by the same rule, so a run that reads "No problems found" has no step marked.
Notes (an info-level cause: a part that moved a little, as in a step faster than usual; the long tail) are in the
causes list and findings.json, not in a step's row.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from otel_verl.analysis import presenting
from otel_verl.analysis.findings.common.kinds import CAUSES, SEVERITIES
from otel_verl.analysis.findings.common.step_cause import cause_name, cause_seconds

OK = "ok"
"""The severity of a step no cause names."""


def add_step_rows(accounts: list[dict[str, Any]], findings: Iterable[Any]) -> list[dict[str, Any]]:
    """``accounts`` (findings.json ``steps``) with ``severity`` and ``top_cause`` set on each; returns them."""
    serious = SEVERITIES[:2]
    causes = [f for f in presenting.as_dicts(findings) if f.get("kind") in CAUSES and f.get("severity") in serious]
    for account in accounts:
        step = account.get("step")
        mine = [f for f in causes if step in f["steps"]]
        ranks = [SEVERITIES.index(f["severity"]) for f in mine if f.get("severity") in SEVERITIES]
        account["severity"] = SEVERITIES[min(ranks)] if ranks else OK
        account["top_cause"] = _cause(mine[0], step) if mine else None
    return accounts


def _cause(f: dict[str, Any], step: Any) -> dict[str, Any]:
    return {
        "kind": f["kind"],
        "name": cause_name(f),
        "severity": f.get("severity"),
        "seconds": round(cause_seconds(f, step), 6),
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
    """``stall (16.6 s)``: the top cause's name and what it cost the step; empty for none."""
    if not cause:
        return ""
    seconds = cause.get("seconds")
    cost = f" ({presenting.seconds_words(seconds)})" if seconds else ""
    return f"{cause.get('name') or cause_name(cause)}{cost}"
