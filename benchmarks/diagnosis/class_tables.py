"""The judgement classes' rates (issue 40, must-have 5) as Markdown, and their section of benchmarks/RESULTS.md."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks.diagnosis.classes import CLASSES
from benchmarks.diagnosis.tables import Goal, update_results

Record = dict[str, Any]
BEGIN = "<!-- BEGIN judgement classes (benchmarks/bench_diagnosis.py --classes) -->"
END = "<!-- END judgement classes -->"
GOALS: dict[str, tuple[str, float]] = {
    "short": ("runs of 2-5 steps, one slowed ≥ 1.5×: named at warning or worse", 0.95),
    "straggler": ("persistent stragglers named with the right place", 0.90),
    "trend": ("trends (≥ 20 % over the run) named with the right side and factor", 0.90),
    "shift": ("behaviour shifts named as behaviour at the right step", 0.90),
}
PATTERN_GOALS: dict[str, tuple[str, float]] = {
    "straggler": ("stragglers costing ≥ 5 % of a step: warning or worse within three (issue 50)", 0.05),
    "shift": ("shifts costing ≥ 25 % of their step: warning or worse within three (issue 50)", 0.25),
}
"""Issue 50, must-have 4's thresholds: the pattern runs whose ``cost_share`` reaches them must be told at warning or
worse among the first three cause findings (``told``), goal 90 %."""
CLEAN_GOAL = 0.05
"""Warnings per clean run (short and long, with and without answers growing), at most."""


def _rate(runs: list[Record], key: str) -> float | None:
    return sum(bool(r[key]) for r in runs) / len(runs) if runs else None


def class_goals(runs: list[Record]) -> list[Goal]:
    out = []
    for cls, (name, goal) in GOALS.items():
        mine = [r for r in runs if r["class"] == cls and r["expects"]]
        value = _rate(mine, "alarm" if cls == "short" else "named")
        out.append(Goal(name, f"≥ {goal:.0%}", value, len(mine), value is not None and value >= goal))
    clean = [r for r in runs if r["class"] == "clean"]
    per = sum(r["false_alarms"] for r in clean) / len(clean) if clean else None
    out.append(
        Goal("warnings per clean run", f"≤ {CLEAN_GOAL}", per, len(clean), per is not None and per <= CLEAN_GOAL)
    )
    for cls, (name, floor) in PATTERN_GOALS.items():
        mine = [r for r in runs if r["class"] == cls and r["expects"] and r.get("cost_share", 0) >= floor]
        value = _rate(mine, "told")
        if mine:
            out.append(Goal(name, "≥ 90%", value, len(mine), value is not None and value >= 0.90))
    return out


def _per(runs: list[Record], key: str) -> str:
    return f"{sum(r[key] for r in runs) / len(runs):.2f}"


def _pct(x: float | None, n: int) -> str:
    return "—" if x is None else f"{x:.0%} ({n})"


def markdown(runs: list[Record], header: str) -> str:
    out = [BEGIN, "## Judgement classes (issue 40): short runs, stragglers, trends, shifts, clean runs", "", header, ""]
    out += ["| goal | target | measured | ok | over |", "| --- | --- | --- | --- | --- |"]
    for g in class_goals(runs):
        out.append(f"| {g.name} | {g.goal} | {g.measured} | {'✅' if g.ok else '❌'} | {g.n} runs |")
    out += ["", "| class | variant | runs | named | warning or worse | median rank | warnings per run (false) |"]
    out.append("| --- | --- | --- | --- | --- | --- | --- |")
    out += class_rows(runs, CLASSES, "alarm")
    out += false_alarm_lines(runs) + error_lines(runs)
    out += ["", END]
    return "\n".join(out) + "\n"


def update(path: Any, section: str) -> None:
    update_results(path, section, BEGIN, END)


def class_rows(runs: list[Record], classes: Sequence[str], warned: str) -> list[str]:
    """One table row per class and variant (and the class's "all"): runs, named, ``warned`` (the record's key for
    told at warning or worse), median rank, warnings per run (false ones in brackets). The async classes' table too."""
    out = []
    for cls in classes:
        mine = [r for r in runs if r["class"] == cls]
        for variant in [*sorted({r["variant"] for r in mine}), "all"]:
            group = [r for r in mine if variant in ("all", r["variant"])]
            if not group:
                continue
            expects = [r for r in group if r["expects"]]
            ranks = sorted(r["rank"] for r in expects if r["rank"] is not None)
            cells = [
                cls,
                variant,
                str(len(group)),
                _pct(_rate(expects, "named"), len(expects)),
                _pct(_rate(expects, warned), len(expects)),
                str(ranks[len(ranks) // 2]) if ranks else "—",
                f"{_per(group, 'alarms')} ({_per(group, 'false_alarms')})",
            ]
            out.append("| " + " | ".join(cells) + " |")
    return out


def false_alarm_lines(runs: list[Record]) -> list[str]:
    """The false alarms counted by finding kind, most first."""
    kinds: dict[str, int] = {}
    for r in runs:
        for kind, count in r["false_alarm_kinds"].items():
            kinds[kind] = kinds.get(kind, 0) + count
    if not kinds:
        return []
    top = ", ".join(f"{kind} {count}" for kind, count in sorted(kinds.items(), key=lambda kv: -kv[1]))
    return ["", f"False alarms by finding kind: {top}."]


def error_lines(runs: list[Record]) -> list[str]:
    errors = [r for r in runs if r.get("error")]
    return (
        ["", f"The analyzer failed on {len(errors)} runs (scored as naming nothing): {errors[0]['error']}"]
        if errors
        else []
    )
