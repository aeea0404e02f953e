"""The asynchronous classes' rates (issue 50, must-have 5) as Markdown, and their own section of
benchmarks/RESULTS.md (beside the judgement classes' section, which they leave as it is)."""

from __future__ import annotations

from typing import Any

from benchmarks.diagnosis.async_classes import ASYNC_CLASSES
from benchmarks.diagnosis.class_tables import class_rows, error_lines, false_alarm_lines
from benchmarks.diagnosis.tables import Goal, update_results

Record = dict[str, Any]
BEGIN = "<!-- BEGIN async classes (benchmarks/bench_diagnosis.py --classes async) -->"
END = "<!-- END async classes -->"
TOLD: dict[str, str] = {
    "async_phase": "a slow trainer phase",
    "async_sync": "a growing weight sync",
    "async_replica": "a slow replica the trainer waited for",
    "async_reward": "a hung reward, at the step that waited",
}
SILENT: dict[str, str] = {"async_clean": "clean runs", "async_stale": "runs training on samples 2-3 versions old"}
TOLD_GOAL = 0.90
"""Told at warning or worse within the first three cause findings."""
SILENT_GOAL = 0.05
"""Warnings per run, at most (one in 20 runs)."""


def async_goals(runs: list[Record]) -> list[Goal]:
    out = []
    for cls, what in TOLD.items():
        mine = [r for r in runs if r["class"] == cls and r["expects"]]
        value = sum(r["told"] for r in mine) / len(mine) if mine else None
        out.append(Goal(f"{what}: warning or worse within three", f"≥ {TOLD_GOAL:.0%}", value, len(mine),
                        value is not None and value >= TOLD_GOAL))  # fmt: skip
    for cls, what in SILENT.items():
        mine = [r for r in runs if r["class"] == cls]
        per = sum(r["false_alarms"] for r in mine) / len(mine) if mine else None
        out.append(Goal(f"warnings per run, {what}", f"≤ {SILENT_GOAL}", per, len(mine),
                        per is not None and per <= SILENT_GOAL))  # fmt: skip
    return [g for g in out if g.n]


def markdown(runs: list[Record], header: str) -> str:
    out = [BEGIN, "## Asynchronous classes (issue 50): separate-async and colocate-async runs", "", header, ""]
    out += ["| goal | target | measured | ok | over |", "| --- | --- | --- | --- | --- |"]
    for g in async_goals(runs):
        out.append(f"| {g.name} | {g.goal} | {g.measured} | {'✅' if g.ok else '❌'} | {g.n} runs |")
    out += ["", "| class | variant | runs | named | warning+ within three | median rank | warnings per run (false) |"]
    out.append("| --- | --- | --- | --- | --- | --- | --- |")
    out += class_rows(runs, ASYNC_CLASSES, "told") + false_alarm_lines(runs)
    misses = [r for r in runs if r["expects"] and not r["told"]]
    if misses:
        out += ["", "What the runs not told right got instead (their first three cause findings):", ""]
        for r in misses:
            got = "; ".join(r["top3"]) or "no cause finding"
            out.append(f"- {r['class']} ({r['variant']}, run {r['index']}): {got}")
    out += error_lines(runs)
    out += ["", END]
    return "\n".join(out) + "\n"


def update(path: Any, section: str) -> None:
    update_results(path, section, BEGIN, END)
