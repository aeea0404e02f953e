"""The benchmark's rates, by kind, size, format and scope, as Markdown; and its section of benchmarks/RESULTS.md.

Rates are shares of plant records (one per planted step); each cell also says over how many. The goal rows
are the issue's: for plants costing at least twice the run's spread, ≥ 95 % within the first three findings
and ≥ 90 % of the slow step's excess explained; at most one warning per 20 clean runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.diagnosis.scoring import BUCKETS, COSTLY_SHARE, SLOW

Record = dict[str, Any]
BEGIN = "<!-- BEGIN diagnosis accuracy (benchmarks/bench_diagnosis.py) -->"
END = "<!-- END diagnosis accuracy -->"
WITHIN_THREE_GOAL = 0.95
EXPLAINED_GOAL = 0.90
WARNINGS_PER_CLEAN_RUN_GOAL = 0.05
TOLD_GOAL = 0.90


@dataclass(frozen=True)
class Goal:
    name: str
    goal: str
    value: float | None
    n: int
    ok: bool

    @property
    def over(self) -> str:
        return f"{self.n} clean runs" if "clean" in self.name else f"{self.n} slow planted steps"

    @property
    def measured(self) -> str:
        """In the target's unit: a share where the target is a percentage (≥ 90%), else a count (≤ 0.05 a run)."""
        if self.value is None:
            return "—"
        return f"{self.value:.1%}" if "%" in self.goal else f"{self.value:.3f}"


def _mean(values: Iterable[float | bool | None]) -> float | None:
    got = [float(v) for v in values if v is not None]
    return sum(got) / len(got) if got else None


def goals(runs: list[Record], plants: list[Record]) -> list[Goal]:
    slow = [p for p in plants if p["slow"]]
    clean = [r for r in runs if r["clean"]]
    within = _mean(p["within_three"] for p in slow)
    explained = _mean(p["explained"] for p in slow)
    per_clean = sum(r["false_alarms"] for r in clean) / len(clean) if clean else None
    costly = [p for p in plants if p.get("costly")]
    told = _mean(p["told"] for p in costly)
    return [
        Goal(
            f"within the first three findings (cost ≥ {SLOW:g}× spread)",
            f"≥ {WITHIN_THREE_GOAL:.0%}",
            within,
            len(slow),
            within is not None and within >= WITHIN_THREE_GOAL,
        ),
        Goal(
            f"explained share of the slow step's excess (cost ≥ {SLOW:g}× spread)",
            f"≥ {EXPLAINED_GOAL:.0%}",
            explained,
            len(slow),
            explained is not None and explained >= EXPLAINED_GOAL,
        ),
        Goal(
            "warnings per clean run (steps the run's own tails did not slow)",
            f"≤ {WARNINGS_PER_CLEAN_RUN_GOAL}",
            per_clean,
            len(clean),
            per_clean is not None and per_clean <= WARNINGS_PER_CLEAN_RUN_GOAL,
        ),
        Goal(
            f"warning or worse and within three (cost ≥ {SLOW:g}× spread and ≥ {COSTLY_SHARE:.0%} of its step)",
            f"≥ {TOLD_GOAL:.0%}",
            told,
            len(costly),
            told is not None and told >= TOLD_GOAL,
        ),
    ]


def _pct(values: list[Any]) -> str:
    got = [v for v in values if v is not None]
    return f"{sum(map(float, got)) / len(got):.0%} ({len(got)})" if got else "—"


COLUMNS: tuple[tuple[str, Callable[[list[Record]], str]], ...] = (
    ("plants", lambda g: str(len(g))),
    ("named first", lambda g: _pct([p["named_first"] for p in g])),
    ("within three", lambda g: _pct([p["within_three"] for p in g])),
    ("plain rank ≤ 3", lambda g: _pct([p["plain_within_three"] for p in g])),
    ("right place, any kind", lambda g: _pct([p["located"] for p in g])),
    (f"within three, ≥ {SLOW:g}×", lambda g: _pct([p["within_three"] for p in g if p["slow"]])),
    (f"explained, ≥ {SLOW:g}×", lambda g: _pct([p["explained"] for p in g if p["slow"]])),
    (f"right part, ≥ {SLOW:g}×", lambda g: _pct([p["right_part"] for p in g if p["slow"]])),
    (f"warning+ and ≤ 3, ≥ {SLOW:g}× and ≥ {COSTLY_SHARE:.0%}", lambda g: _pct([p["told"] for p in g if p["costly"]])),
)


def _table(title: str, groups: list[tuple[str, list[Record]]]) -> list[str]:
    lines = [f"| {title} | " + " | ".join(c for c, _ in COLUMNS) + " |", "|" + " --- |" * (len(COLUMNS) + 1)]
    for name, group in groups:
        lines.append(f"| {name} | " + " | ".join(fn(group) for _, fn in COLUMNS) + " |")
    return lines


def _by(plants: list[Record], key: str, order: Iterable[str] | None = None) -> list[tuple[str, list[Record]]]:
    names = list(order) if order is not None else sorted({str(p[key]) for p in plants})
    groups = [(n, [p for p in plants if str(p[key]) == n]) for n in names]
    return [(n, g) for n, g in groups if g] + [("all", plants)]


def _per(runs: list[Record], key: str) -> str:
    return f"{sum(r[key] for r in runs) / len(runs):.2f}"


def _run_table(runs: list[Record]) -> list[str]:
    lines = [
        "| format | runs | clean | warnings per clean run: false / all | natural slow steps per run | "
        "false alarms per planted run | accounts' invariant broken | account's duration ≠ the step's |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for fmt in [*sorted({r["format"] for r in runs}), "all"]:
        group = [r for r in runs if fmt in ("all", r["format"])]
        clean = [r for r in group if r["clean"]]
        planted = [r for r in group if not r["clean"]]
        accounts = sum(r["accounts"] for r in group)
        broken = sum(r["invariant_failures"] for r in group)
        off = sum(r["duration_mismatches"] for r in group)
        cells = [
            fmt,
            str(len(group)),
            str(len(clean)),
            _per(clean, "false_alarms") + " / " + _per(clean, "alarms") if clean else "—",
            f"{sum(r['natural_slow_steps'] for r in group) / len(group):.2f}",
            f"{sum(r['false_alarms'] for r in planted) / len(planted):.2f}" if planted else "—",
            f"{broken}/{accounts} steps" if accounts else "no accounts",
            f"{off}/{accounts} steps" if accounts else "—",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def markdown(runs: list[Record], plants: list[Record], header: str) -> str:
    """The whole section (between :data:`BEGIN` and :data:`END`)."""
    out = [BEGIN, "## Diagnosis accuracy (issue 29): planted causes in simulated runs", "", header, ""]
    out += ["| goal | target | measured | ok | over |", "| --- | --- | --- | --- | --- |"]
    for g in goals(runs, plants):
        out.append(f"| {g.name} | {g.goal} | {g.measured} | {'✅' if g.ok else '❌'} | {g.over} |")
    out += ["", *_table("kind", _by(plants, "kind")), ""]
    out += [*_table("size (cost / spread)", _by(plants, "bucket", [b for b, _, _ in BUCKETS])), ""]
    out += [*_table("format", _by(plants, "format")), ""]
    out += [*_table("scope", _by(plants, "scope")), ""]
    out += [*_run_table(runs), ""]
    kinds: dict[str, int] = {}
    for r in runs:
        for kind, count in r["false_alarm_kinds"].items():
            kinds[kind] = kinds.get(kind, 0) + count
    errors = [r for r in runs if r.get("error")]
    if errors:
        out += [f"The analyzer failed on {len(errors)} runs (scored as naming nothing): {errors[0]['error']}", ""]
    if kinds:
        top = ", ".join(f"{kind} {count}" for kind, count in sorted(kinds.items(), key=lambda kv: -kv[1]))
        out += [f"False alarms by finding kind (clean and planted runs): {top}.", ""]
    out.append(END)
    return "\n".join(out) + "\n"


def update_results(path: Path, section: str, begin: str = BEGIN, end: str = END) -> None:
    """Replace the section between ``begin`` and ``end`` in ``path`` (or append it): the rest stays as it is."""
    text = path.read_text() if path.exists() else ""
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end) + r"\n?", re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: section, text)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)
